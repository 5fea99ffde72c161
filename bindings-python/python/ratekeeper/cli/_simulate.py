"""``ratekeeper simulate``: replay a traffic trace through a policy, with explicit ``now``."""

from __future__ import annotations

import csv
import heapq
import importlib
import io
import json
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, TextIO

from ratekeeper import Policy, RateLimitError
from ratekeeper.cli._policy import CliError


@dataclass
class Trace:
    """Events in time order: when (seconds), whose key, what cost; and, where a float
    does not hold the times to the nanosecond, each as written (``nows``)."""

    times: list[float] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    # The `now` each event is decided at, where `times` would not do: an int for a
    # whole second, else a Decimal of the time as the trace wrote it.
    nows: Optional[list[Any]] = None

    def __len__(self) -> int:
        return len(self.times)


def _number(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise CliError(f"argument --trace: {where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise CliError(f"argument --trace: {where}: {what} {text!r} is not finite")
    return value


def _cost(value: float, where: str) -> int:
    if value < 0 or value != int(value):
        raise CliError(f"argument --trace: {where}: cost {value!r} is not a whole number >= 0")
    return int(value)


def _json_value(row: Any, name: str, default: Optional[float], where: Callable[[], str]) -> float:
    value = row.get(name, default) if isinstance(row, dict) else None
    if value is None:
        raise CliError(f'argument --trace: {where()}: expected an object with "{name}"')
    if isinstance(value, bool):  # JSON's true and false, not 1 and 0
        raise CliError(f"argument --trace: {where()}: {name} {json.dumps(value)} is not a number")
    if not isinstance(value, (int, float)):
        return _number(str(value), name, where())
    try:
        number = float(value)
    except OverflowError:  # an int of more than 308 digits
        raise CliError(f"argument --trace: {where()}: {name} is not finite as a float ({len(str(value))} digits)") from None
    if not math.isfinite(number):  # NaN, Infinity, and 1e400, which json.loads reads as infinity
        raise CliError(f"argument --trace: {where()}: {name} {value!r} is not finite")
    return number


def _key(value: Any) -> str:
    """A JSON row's key: null or none is the empty key, as a missing one."""
    return "" if value is None else value if type(value) is str else str(value)


# Below 2^23 s (97 days) a float is within half a nanosecond (2^-31 s) of any time
# written to the nanosecond, and the binding rounds it to the nearest nanosecond: it
# reads the time written. Beyond, a float's step is wider: 238 ns at today's Unix
# timestamps (1.7e9 s), where a request written 100 ms after another was read up to
# 238 ns short of that and denied by a limit it meets. There each event is decided
# at the time as written, which the binding takes exactly as a Decimal.
FLOAT_EXACT_BELOW = 2.0**23


def _needs_exact(times: list[float]) -> bool:
    """Whether a float may not hold some of ``times`` to the nanosecond."""
    return bool(times) and max(map(abs, times)) >= FLOAT_EXACT_BELOW


def _with_exact_times(trace: Trace, stamps: Callable[[], Iterable[Any]]) -> Trace:
    """``trace`` with its times as written (``nows``, see ``_exact_time``) where a float
    may not hold them: ``stamps()`` gives each event's stamp as written, read only then."""
    if _needs_exact(trace.times):
        trace.nows = [_exact_time(stamp, t) for stamp, t in zip(stamps(), trace.times)]
    return trace


def _exact_time(stamp: Any, time: float) -> Any:
    """An event's ``now`` as written: ``stamp`` (the CSV's text, or the JSON value, an
    int, a Decimal or a string) as an int for a whole second (the binding's quicker
    path), else a Decimal; ``time``, the float read from it, if it is no decimal."""
    if type(stamp) is int:
        return stamp
    if not math.isfinite(time):  # refused as such by read_trace (not made an int of 10^6 digits)
        return time
    try:
        exact = stamp if isinstance(stamp, Decimal) else Decimal(str(stamp).strip())
    except (InvalidOperation, ValueError):  # a form float() reads and Decimal does not
        return time
    return int(exact) if exact == exact.to_integral_value() else exact


def _read_json_lines(text: str, path: str) -> Trace:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    try:
        # One parse of the whole file in C; line by line only to name a bad line.
        rows = json.loads("[" + ",".join(line for _, line in lines) + "]")
    except ValueError:  # not JSON, or an int of more digits than Python converts
        rows = None
    # As many values as lines, else a line holds two (`{...}, {...}`), which the
    # joined parse read as two events, shifting every later line.
    if rows is None or len(rows) != len(lines):
        for number, line in lines:
            try:
                json.loads(line)
            except ValueError as err:
                raise CliError(f"argument --trace: {path} line {number}: not JSON: {err}") from None
        raise CliError(f"argument --trace: {path}: not JSON lines") from None
    try:
        # The common case in comprehensions; anything odd goes the slow way, which
        # names the line at fault.
        stamps = [row["timestamp"] for row in rows]
        keys = [_key(row.get("key")) for row in rows]
        costs = [row.get("cost", 1) for row in rows]
        # Numbers only (a bool is an int to Python, not to JSON).
        if all(type(t) is float or type(t) is int for t in stamps) and all(type(c) is int and c >= 0 for c in costs):
            return _exact_json(Trace([float(t) for t in stamps], keys, costs), lines)
    except (TypeError, KeyError, ValueError, AttributeError, OverflowError):
        pass
    trace = Trace()
    for (number, _), row in zip(lines, rows):
        where = partial("{} line {}".format, path, number)  # formatted only for a message
        trace.times.append(_json_value(row, "timestamp", None, where))
        trace.keys.append(_key(row.get("key")))
        cost = row.get("cost", 1)
        trace.costs.append(cost if type(cost) is int and cost >= 0 else _cost(_json_value(row, "cost", 1, where), where()))
    return _exact_json(trace, lines)


def _exact_json(trace: Trace, lines: list[tuple[int, str]]) -> Trace:
    """``trace`` with its times as written, where a float may not hold them: the lines
    parsed again, their fractions as Decimals (every line parsed once already)."""

    def stamps() -> Iterable[Any]:
        rows = json.loads("[" + ",".join(line for _, line in lines) + "]", parse_float=Decimal)
        return (row["timestamp"] for row in rows)

    return _with_exact_times(trace, stamps)


def _read_csv(text: str, path: str) -> Trace:
    rows = [row for row in csv.reader(io.StringIO(text)) if row and "".join(row).strip()]
    if rows and rows[0][0].strip().lower() in ("timestamp", "time", "t", "ts"):
        rows = rows[1:]
    try:
        # The common case in comprehensions; anything odd goes the slow way, which
        # names the line at fault.
        times = [float(row[0]) for row in rows]
        keys = [row[1].strip() if len(row) > 1 else "" for row in rows]
        costs = [int(row[2]) if len(row) > 2 and row[2].strip() else 1 for row in rows]
        if all(c >= 0 for c in costs):
            return _with_exact_times(Trace(times, keys, costs), lambda: (row[0] for row in rows))
    except ValueError:
        pass
    trace = Trace()
    times, keys, costs = trace.times, trace.keys, trace.costs
    stamps: list[str] = []
    first = True
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        # The header, as above: on the first line that is not blank.
        header, first = first, False
        if header and row[0].strip().lower() in ("timestamp", "time", "t", "ts"):
            continue
        try:
            times.append(float(row[0]))
        except ValueError:
            times.append(_number(row[0], "timestamp", f"{path} line {number}"))
        stamps.append(row[0])
        keys.append(row[1].strip() if len(row) > 1 else "")
        cost = row[2].strip() if len(row) > 2 else ""
        if cost == "1" or not cost:
            costs.append(1)
        else:
            where = f"{path} line {number}"
            costs.append(_cost(_number(cost, "cost", where), where))
    return _with_exact_times(trace, lambda: stamps)


def read_trace(path: str) -> Trace:
    """A CSV (``timestamp,key,cost``; a header line and the cost are optional) or
    JSON-lines (``{"timestamp": ..., "key": ..., "cost": ...}``) trace, in time order;
    ``-`` reads standard input."""
    try:
        # utf-8-sig: without the byte order mark that spreadsheets and PowerShell write
        # first, which would otherwise be part of the first timestamp (or hide the `{`).
        text = sys.stdin.buffer.read().decode("utf-8-sig") if path == "-" else Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise CliError(f"argument --trace: cannot read {path}: {err}") from None
    json_lines = text.lstrip().startswith("{")
    trace = _read_json_lines(text, path) if json_lines else _read_csv(text, path)
    if not all(map(math.isfinite, trace.times)):
        bad = next(i for i, t in enumerate(trace.times) if not math.isfinite(t))
        raise CliError(f"argument --trace: {path}: event {bad + 1}: timestamp {trace.times[bad]} is not finite")
    # In the order of the times as written: two a float cannot tell apart keep theirs.
    when: list[Any] = trace.nows if trace.nows is not None else trace.times
    if any(b < a for a, b in zip(when, when[1:])):
        order = sorted(range(len(trace)), key=when.__getitem__)
        nows = [when[i] for i in order] if trace.nows is not None else None
        trace = Trace([trace.times[i] for i in order], [trace.keys[i] for i in order], [trace.costs[i] for i in order], nows)
    return trace


# The most events (and keys) a generated trace may hold. Every event is held in memory,
# with the replay's own record of it: about 200 bytes, and 1.5 s per million generated
# and replayed (measured), so the bound costs about 2 GB and 20 s. A longer trace is
# refused before anything is generated, rather than exhausting memory or running for days.
MAX_EVENTS = 10_000_000


def _events(kind: str, rate: float, duration: float) -> float:
    """How many events ``generate`` would make (about, for ``poisson``; for ``bursty``,
    those of whole seconds, before those past the end are dropped)."""
    if kind == "bursty":
        events = rate * float(math.ceil(duration))  # a float: inf rather than a huge int
        return float(math.floor(events)) if math.isfinite(events) else events
    return rate * duration


def generate(kind: str, rate: float, duration: float, keys: int, seed: int) -> Trace:
    """A seeded synthetic trace of about ``rate`` requests per second over ``duration`` seconds:
    ``steady`` (evenly spaced), ``bursty`` (each second's requests within its first 100 ms) or
    ``poisson`` (exponential gaps); keys ``k0``, ``k1``, ... (round robin, or at random).
    At most ``MAX_EVENTS`` events and keys."""
    if not rate > 0 or not math.isfinite(rate):
        raise CliError("argument --rate: must be a positive number of requests per second")
    if not duration > 0 or not math.isfinite(duration):
        raise CliError("argument --duration: must be a positive number of seconds")
    if keys < 1:
        raise CliError("argument --keys: must be at least 1")
    if keys > MAX_EVENTS:
        raise CliError(f"argument --keys: must be at most {MAX_EVENTS:,}")
    events = _events(kind, rate, duration)
    if events > MAX_EVENTS:
        raise CliError(
            f"argument --duration: {duration:g} s at --rate {rate:g} would generate {events:.3g} events,"
            f" more than the {MAX_EVENTS:,} a generated trace may hold (shorten --duration or lower --rate)"
        )
    rng = random.Random(seed)
    names = [f"k{i}" for i in range(keys)]
    times: list[float]
    if kind == "steady":
        # rate * duration of them, rounded down, on the numbers as written:
        # in floats 0.29 * 100 is 28.999999999999996, and made 28, not 29.
        count = math.floor(Fraction(repr(rate)) * Fraction(repr(duration)))
        times = [i / rate for i in range(count)]
        key_list = [names[i % keys] for i in range(count)]
    else:
        if kind == "bursty":
            times = []
            # Second s holds floor(rate * (s + 1)) - floor(rate * s) requests: the
            # rate's fraction spread over the seconds (15.9 per second: 159 in 10 s).
            if rate >= 1:
                for second in range(math.ceil(duration)):
                    count = math.floor(rate * (second + 1)) - math.floor(rate * second)
                    times.extend(sorted(second + rng.random() * 0.1 for _ in range(count)))
            else:
                # At most one a second: the j-th in second ceil(j / rate) - 1,
                # found without walking through the empty seconds between.
                for j in range(1, int(events) + 1):
                    times.append(math.ceil(j / rate) - 1 + rng.random() * 0.1)
            times = [t for t in times if t < duration]
        elif kind == "poisson":
            times = []
            t = rng.expovariate(rate)
            while t < duration:
                times.append(t)
                t += rng.expovariate(rate)
        else:
            raise CliError(f"argument --generate: unknown kind {kind!r}")
        key_list = [names[i] for i in (rng.randrange(keys) for _ in times)] if keys > 1 else [names[0]] * len(times)
    if not times:
        raise CliError(f"argument --duration: {duration:g} s at --rate {rate:g} generates no events (lengthen --duration or raise --rate)")
    return Trace(times, key_list, [1] * len(times))


class Progress:
    """A progress bar on stderr: tqdm's when installed, else a plain one; silent when
    stderr is not a terminal or ``quiet``."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.total, self.done = total, 0
        self.enabled = not quiet and sys.stderr.isatty()
        self.bar: Any = None
        if self.enabled:
            try:
                tqdm: Any = importlib.import_module("tqdm")
                self.bar = tqdm.tqdm(total=total, unit="ev", unit_scale=True, file=sys.stderr)
            except ImportError:
                self.bar = None

    def update(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(count)
            return
        width = 40
        filled = width * self.done // max(self.total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done:,}/{self.total:,}")
        sys.stderr.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")


@dataclass
class Replay:
    """What a replay found, and a per-event record for the plot."""

    per_key: dict[str, list[float]]  # key -> [offered, admitted, denied, longest wait, units offered, units admitted]
    denied_by: dict[str, int]
    longest: list[tuple[float, float, str]]  # (retry_after, time, key), longest first
    allowed: list[bool]
    remaining: list[int]  # empty unless recorded (for the plot)
    seconds: float


CHUNK = 1 << 16


def replay(policy: Policy, trace: Trace, quiet: bool = True, top: int = 5, record: bool = False) -> Replay:
    """Decides every event of ``trace`` with ``policy.try_acquire(request, cost, now=t)``.

    The loop only decides and notes denials; the per-key sums are counted afterwards,
    in bulk. ``record`` also keeps each decision's ``remaining``, for the plot."""
    fields = sorted({f for name in policy.names for f in policy.keyed_by(name)})
    times, keys, costs = trace.times, trace.keys, trace.costs
    nows: list[Any] = trace.nows if trace.nows is not None else times
    n = len(trace)
    requests = {key: ({f: key for f in fields} if fields else None) for key in set(keys)}
    allowed = [True] * n
    remaining = [0] * n if record else []
    denied: list[int] = []
    waits: list[float] = []
    names: list[Optional[str]] = []
    progress = Progress(n, quiet)
    try_acquire = policy.try_acquire
    started = time.perf_counter()
    i = 0
    try:
        for start in range(0, n, CHUNK):
            stop = min(start + CHUNK, n)
            for i in range(start, stop):
                d = try_acquire(requests[keys[i]], costs[i], nows[i])
                if record:
                    remaining[i] = d.remaining
                if not d.allowed:
                    allowed[i] = False
                    denied.append(i)
                    waits.append(d.retry_after)
                    names.append(d.denied_by)
            progress.update(stop - start)
    except RateLimitError as err:
        # Named by its time, not a number: the trace was put in time order.
        raise CliError(f"argument --trace: the event at {times[i]!r} (key {keys[i]!r}, cost {costs[i]}): {err}") from None
    finally:
        progress.close()
    elapsed = time.perf_counter() - started

    offered = Counter(keys)
    refused = Counter(keys[i] for i in denied)
    if all(c == 1 for c in costs):
        units, units_refused = offered, refused
    else:
        units, units_refused = Counter(), Counter()
        for key, cost in zip(keys, costs):
            units[key] += cost
        for i in denied:
            units_refused[keys[i]] += costs[i]
    per_key: dict[str, list[float]] = {}
    for key, count in offered.items():
        no, no_units = refused[key], units_refused[key]
        per_key[key] = [count, count - no, no, 0.0, units[key], units[key] - no_units]
    for i, wait in zip(denied, waits):
        stats = per_key[keys[i]]
        if wait > stats[3]:
            stats[3] = wait
    denied_by = dict(Counter(name or "?" for name in names))
    longest = heapq.nlargest(top, ((w, times[i], keys[i]) for i, w in zip(denied, waits)), key=lambda row: (row[0], -row[1]))
    return Replay(per_key, denied_by, longest, allowed, remaining, elapsed)


def _row(stats: list[float]) -> dict[str, Any]:
    return {
        "offered": int(stats[0]),
        "admitted": int(stats[1]),
        "denied": int(stats[2]),
        "units_offered": int(stats[4]),
        "units_admitted": int(stats[5]),
        "longest_wait": stats[3],
    }


def report(trace: Trace, result: Replay) -> dict[str, Any]:
    """The ``--json`` document of a replay."""
    overall = [0.0] * 6
    for stats in result.per_key.values():
        for i in (0, 1, 2, 4, 5):
            overall[i] += stats[i]
        overall[3] = max(overall[3], stats[3])
    total_denied = sum(result.denied_by.values())
    return {
        "events": len(trace),
        "duration": (trace.times[-1] - trace.times[0]) if len(trace) else 0.0,
        "replay_seconds": result.seconds,
        "events_per_second": len(trace) / result.seconds if result.seconds > 0 else None,
        "overall": _row(overall),
        "keys": {key: _row(stats) for key, stats in result.per_key.items()},
        "denied_by": dict(sorted(result.denied_by.items(), key=lambda kv: -kv[1])),
        "denied_most_by": max(result.denied_by, key=lambda k: result.denied_by[k]) if total_denied else None,
        "longest_waits": [{"retry_after": w, "time": t, "key": k} for w, t, k in result.longest],
    }


# The widest key column of the text report, in characters.
_KEY_WIDTH = 48


def print_report(data: dict[str, Any], out: TextIO, show_keys: int = 10) -> None:
    """``simulate``'s text form."""
    from ratekeeper.cli._explain import fmt_seconds

    rate = data["events_per_second"]
    speed = f" ({rate:,.0f} events/s)" if rate else ""
    print(
        f"replayed {data['events']:,} events over {fmt_seconds(data['duration'])} of trace"
        f" in {data['replay_seconds']:.2f} s{speed}",
        file=out,
    )
    print(file=out)
    keys = sorted(data["keys"].items(), key=lambda kv: (-kv[1]["denied"], kv[0]))
    # As wide as the keys shown, up to a bound: a longer key ends in an ellipsis.
    width = min(max([16] + [len(name) + 1 for name, _ in keys[:show_keys]]), _KEY_WIDTH)
    header = f"{'key':<{width}}{'offered':>12}{'admitted':>12}{'denied':>12}{'denied %':>10}  longest wait"
    print(header, file=out)

    def line(name: str, row: dict[str, Any]) -> None:
        share = 100.0 * row["denied"] / row["offered"] if row["offered"] else 0.0
        wait = fmt_seconds(row["longest_wait"], up=True) if row["denied"] else "-"
        if len(name) >= width:
            name = name[: width - 2] + "\u2026"
        print(
            f"{name:<{width}}{row['offered']:>12,}{row['admitted']:>12,}{row['denied']:>12,}{share:>9.1f}%  {wait}",
            file=out,
        )

    for name, row in keys[:show_keys]:
        line(name, row)
    if len(keys) > show_keys:
        print(f"... {len(keys) - show_keys:,} more keys (--json lists them all)", file=out)
    line("overall", data["overall"])
    print(file=out)
    denied = data["denied_by"]
    if denied:
        total = sum(denied.values())
        parts = ", ".join(f'"{name}" {count:,} ({100.0 * count / total:.1f}%)' for name, count in denied.items())
        print(f"denied by: {parts}", file=out)
        waits = ", ".join(f"{fmt_seconds(w['retry_after'], up=True)} ({w['key']} at {w['time']:.3f} s)" for w in data["longest_waits"])
        if waits:  # none listed with --top 0
            print(f"longest waits: {waits}", file=out)
    else:
        print("nothing denied", file=out)


def run_simulate(
    policy: Policy,
    trace: Trace,
    *,
    as_json: bool,
    quiet: bool,
    plot: Optional[str],
    out: TextIO,
    top: int = 5,
    plot_fn: Optional[Callable[[Policy, Trace, Replay, str], None]] = None,
) -> int:
    if plot is not None:
        from ratekeeper.cli._plot import check_plot_target

        check_plot_target(plot)
    if not len(trace):
        raise CliError("argument --trace: the trace holds no events")
    result = replay(policy, trace, quiet=quiet, top=top, record=plot is not None)
    data = report(trace, result)
    if plot is not None:
        from ratekeeper.cli._plot import plot_replay

        (plot_fn or plot_replay)(policy, trace, result, plot)
        data["plot"] = plot
    if as_json:
        json.dump(data, out, indent=2)
        print(file=out)
    else:
        print_report(data, out)
        if plot is not None:
            print(f"plot written to {plot}", file=out)
    return 0
