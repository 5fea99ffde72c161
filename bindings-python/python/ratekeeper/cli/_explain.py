"""``ratekeeper explain``: what a policy guarantees, computed exactly by the core."""

from __future__ import annotations

import json
from typing import Any, Optional, TextIO

from ratekeeper import Guarantee, Policy, guarantee

# Each unit's length in ns, largest first.
_UNITS = (
    (86_400 * 10**9, "day"),
    (3_600 * 10**9, "h"),
    (60 * 10**9, "min"),
    (10**9, "s"),
    (10**6, "ms"),
    (10**3, "µs"),
    (1, "ns"),
)


def fmt_seconds(seconds: float, *, up: bool = False) -> str:
    """A duration in the largest unit it fills: ``"1 min"``, ``"100 ms"``, ``"1.5 s"``.

    Exact in a unit when one spells it in a short number (6,000 s is ``"100
    min"``); else three decimals of the largest unit it fills, rounded down,
    so that a window shown is never longer than the one its figure is for,
    or with ``up`` rounded up, so that a wait shown is never shorter.
    """
    if seconds == 0:
        return "0 s"
    if seconds == float("inf") or seconds > 1e11:
        return "never (beyond 2^64 ns)"
    ns = round(seconds * 1e9)  # every duration here is whole nanoseconds
    filled = [(size, name) for size, name in _UNITS if ns >= size] or [_UNITS[-1]]
    for size, name in filled:
        if ns * 1000 % size == 0 and ns < 10_000 * size:
            return _in_unit(ns * 1000 // size, name)
    size, name = filled[0]
    return _in_unit(-(-ns * 1000 // size) if up else ns * 1000 // size, name)


def _in_unit(thousandths: int, name: str) -> str:
    whole, frac = divmod(thousandths, 1000)
    text = f"{whole}.{frac:03d}".rstrip("0").rstrip(".")
    return f"{text} {name}" + ("s" if name == "day" and text != "1" else "")


def windows_of(policy: Policy, g: Guarantee, extra: Optional[list[float]] = None) -> list[float]:
    """The windows worth a figure: 1 s, 1 min, each limit's own window, and any asked for."""
    windows = {1.0, 60.0}
    for limit in g.limits:
        strict = limit.strict
        if strict is not None:
            windows.add(strict[1])
    windows.update(extra or [])
    return sorted(w for w in windows if w > 0)


def _rate(g: Guarantee) -> Optional[dict[str, Any]]:
    sustained = g.sustained
    if sustained is None:
        return None
    units, per_ns = sustained
    return {"units": units, "per_ns": per_ns, "per_seconds": per_ns / 1e9, "per_second": g.per_second}


def difference(g: Guarantee, window: float, most: int) -> str:
    """How ``g``'s limiter differs from a strict sliding window of the same N per W, in words."""
    strict = g.strict
    assert strict is not None
    n, w = strict
    excess = most - n
    head = f"in any {fmt_seconds(w)} it admits up to {most:,} where a strict sliding window of {n:,} per {fmt_seconds(w)} admits {n:,}"
    more = f" ({excess:+,})" if excess else " (the same)"
    why = {
        "token_bucket": "a full bucket's burst, then the refill rate on top of it",
        "gcra": "a GCRA is a token bucket: its burst, then one unit per emission interval on top",
        "leaky_bucket": (
            "a queue admits its whole length at once and more as it drains; "
            "the admitted units leave one interval apart, never faster than the rate"
        ),
        "sliding_window_log": "the log is the strict sliding window itself",
        "sliding_window_counter": (
            "the counter weighs the previous window as if its units were spread evenly, so units bunched "
            "at a window's end count less than they are (it may also deny a little early)"
        ),
        "fixed_window": "windows are aligned: the limit at the end of one window and again at the start of the next",
    }[g.algorithm]
    return f"{head}{more}: {why}"


# The Gregorian calendar's 400 years (146,097 days), over which calendar months are sustained.
_GREGORIAN_NS = 146_097 * 86_400 * 10**9


def _round_period(units: int, per_ns: int) -> tuple[int, int]:
    """The same rate over the first of 1 s, 1 min, 1 h, 1 day that is a whole number of
    periods (10 per 1 s rather than 1 per 100 ms); else as it is."""
    for nice in (10**9, 60 * 10**9, 3_600 * 10**9, 86_400 * 10**9):
        if per_ns <= nice and nice % per_ns == 0:
            return units * (nice // per_ns), nice
    return units, per_ns


def _figures(g: Guarantee, windows: list[float]) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "exact": g.exact,
        "burst": g.burst,
        "sustained": _rate(g),
        "max_in_window": [{"window": w, "max": g.max_in_window(w)} for w in windows],
        "lockout": {"retry_after": g.retry_after, "reset_after": g.reset_after},
    }
    strict = g.strict
    if strict is not None:
        n, w = strict
        most = g.max_in_window(w)
        figures.update(
            name=g.name,
            algorithm=g.algorithm,
            strict={"units": n, "window": w, "max_in_window": most, "excess": g.excess},
            difference=difference(g, w, most),
        )
    return figures


def explain_data(policy: Policy, extra_windows: Optional[list[float]] = None) -> dict[str, Any]:
    """Everything ``explain`` prints, as the ``--json`` document."""
    g = guarantee(policy)
    windows = windows_of(policy, g, extra_windows)
    return {
        "windows": windows,
        "limits": [{**_figures(limit, windows), "by": list(policy.keyed_by(limit.name))} for limit in g.limits],
        "combined": _figures(g, windows),
    }


def _print_figures(fig: dict[str, Any], out: TextIO, indent: str = "  ") -> None:
    rate = fig["sustained"]
    bound = "" if fig["exact"] else " (upper bound)"
    print(f"{indent}largest burst      {fig['burst']:,} at one instant{bound}", file=out)
    if rate is not None:
        units, per = _round_period(rate["units"], rate["per_ns"])
        if per == _GREGORIAN_NS and units % 2_400 == 0:
            # Calendar months: 4,800 months in 400 Gregorian years. A window
            # counter's cycle is two windows: an odd count per two months.
            months = 1 if units % 4_800 == 0 else 2
            units = units * months // 4_800
            period = "calendar month on average (30.436875 days)" if months == 1 else "2 calendar months on average (60.87375 days)"
        else:
            period = fmt_seconds(per / 1e9)
        print(f"{indent}sustained rate     {units:,} per {period} ({rate['per_second']:,.6g}/s)", file=out)
    for row in fig["max_in_window"]:
        print(f"{indent}most in any {fmt_seconds(row['window']):<6} {row['max']:,}{bound}", file=out)
    lock = fig["lockout"]
    print(
        f"{indent}locked out         next unit after {fmt_seconds(lock['retry_after'], up=True)},"
        f" full again after {fmt_seconds(lock['reset_after'], up=True)}",
        file=out,
    )


def print_explain(data: dict[str, Any], out: TextIO) -> None:
    """``explain``'s text form."""
    limits = data["limits"]
    for fig in limits:
        scope = f"per {', '.join(fig['by'])}" if fig["by"] else "global"
        print(f'limit "{fig["name"]}" ({fig["algorithm"]}, {scope})', file=out)
        _print_figures(fig, out)
        print(f"  vs strict window   {fig['difference']}", file=out)
        print(file=out)
    if len(limits) > 1:
        combined = data["combined"]
        how = "exact" if combined["exact"] else "upper bounds: the tightest limit's"
        print(f"all {len(limits)} limits together, for a client every limit counts, all or nothing ({how})", file=out)
        _print_figures(combined, out)


def run_explain(policy: Policy, windows: Optional[list[float]], as_json: bool, out: TextIO) -> int:
    data = explain_data(policy, windows)
    if as_json:
        json.dump(data, out, indent=2)
        print(file=out)
    else:
        print_explain(data, out)
    return 0
