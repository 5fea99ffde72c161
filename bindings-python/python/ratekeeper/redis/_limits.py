"""Limits as the script takes them, from in-process limiters and ``Policy`` configurations."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

from ratekeeper import Decision, FixedWindow, Gcra, KeyedLimiter, Limiter, Policy, SlidingWindowCounter, SlidingWindowLog, TokenBucket
from ratekeeper.redis._values import _duration, _error, _exact, _type_error, _utf8, MAX_SPAN


# The limiters Redis runs, as the errors name them.
_LIMITERS = "a Gcra, TokenBucket, FixedWindow, SlidingWindowCounter or SlidingWindowLog"


class _Limit:
    """One limit as the script takes it: its name, fields, ARGV and window,
    and the name its Redis keys carry (``key``: the name, or for a limiter
    left unnamed, its configuration)."""

    __slots__ = ("args", "by", "key", "limit", "name", "window")

    def __init__(self, name: str, by: tuple[str, ...], limiter: object) -> None:
        self.name = name
        self.key = _utf8(name, "name")
        self.by = by
        if isinstance(limiter, Gcra):
            interval = _duration(limiter.emission_interval, "emission_interval")
            _exact(limiter.burst * interval, "burst", "burst * emission_interval (µs)")
            self.args: list[Union[str, int]] = ["gcra", limiter.burst, interval]
        elif isinstance(limiter, TokenBucket):
            self.args = ["token_bucket", len(limiter.bandwidths)]
            for band in limiter.bandwidths:
                if band.refill != "greedy":
                    raise _error("`refill`: only greedy token buckets are supported on Redis")
                if band.initial_tokens != band.capacity:
                    raise _error("`initial_tokens`: token buckets on Redis start full")
                period = _duration(band.refill_period, "refill_period")
                step = period // math.gcd(band.refill_tokens, period)
                _exact(band.capacity * step, "capacity", "the time to refill the capacity (1/refill_tokens µs)")
                _exact(band.refill_tokens, "refill_tokens", "refill_tokens")
                self.args += [band.capacity, band.refill_tokens, period]
        elif isinstance(limiter, (FixedWindow, SlidingWindowCounter)):
            if limiter.calendar is not None:
                raise _error("`calendar`: calendar windows are not supported on Redis")
            window = _duration(limiter.window, "window")
            _exact(window, "window", "the window (µs)", MAX_SPAN)
            # Counts, like times, are numbers in the script.
            _exact(limiter.limit, "limit", "limit")
            if isinstance(limiter, SlidingWindowCounter):
                _exact(limiter.limit * window, "limit", "limit * window (µs)")
            self.args = [limiter.algorithm, limiter.limit, window]
        elif isinstance(limiter, SlidingWindowLog):
            window = _duration(limiter.window, "window")
            _exact(window, "window", "the window (µs)", MAX_SPAN)
            self.args = ["sliding_window_log", limiter.limit, window]
        elif isinstance(limiter, Limiter):
            raise _error(f"`algorithm`: {limiter.algorithm} is not supported on Redis")
        else:
            raise _type_error("limiter", _LIMITERS, limiter)
        self.limit: int = limiter.limit
        self.window: float = limiter.window


_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "month": 30 * 86400, "year": 360 * 86400}
_RATE = re.compile(r"\s*(\d+)\s*(?:/|[pP][eE][rR])\s*(\d*)\s*([A-Za-z]+)\s*")


def _rates(text: str) -> list[tuple[int, int]]:
    """``(amount, period in seconds)`` of each rate (already validated by ``Policy``)."""
    out = []
    for item in re.split(r"[;,|]", text):
        match = _RATE.fullmatch(item)
        if match is None:
            raise _error(f"`rate`: cannot read {item!r}", "invalid_syntax")
        word = match.group(3).lower()
        unit = _UNITS.get(word) or _UNITS.get(word[:-1] if word.endswith("s") else word)
        if unit is None:
            raise _error(f"`rate`: unknown unit in {item!r}", "invalid_syntax")
        out.append((int(match.group(1)), int(match.group(2) or 1) * unit))
    return out


def _limiter(algorithm: str, rate: str, burst: Optional[int]) -> object:
    """The in-process limiter a policy configuration's limit describes."""
    rates = _rates(rate)
    amount, period = rates[0]
    if algorithm == "token_bucket":
        from ratekeeper import Bandwidth

        bands = [Bandwidth(burst if i == 0 and burst is not None else a, a, p) for i, (a, p) in enumerate(rates)]
        return TokenBucket.from_bandwidths(bands)
    if algorithm == "gcra":
        return Gcra.per_period(burst if burst is not None else amount, amount, period)
    if algorithm == "fixed_window":
        return FixedWindow(amount, period)
    if algorithm == "sliding_window_counter":
        return SlidingWindowCounter(amount, period)
    if algorithm == "sliding_window_log":
        return SlidingWindowLog(amount, period)
    raise _error(f"`algorithm`: {algorithm} is not supported on Redis")


def _policy_limits(
    config: Union[None, str, Mapping[str, Any]], algorithm: Optional[str], by: Optional[Iterable[str]]
) -> list[_Limit]:
    """Every limit of a configuration ``Policy`` accepts, checked by ``Policy`` itself first."""
    # A str or bytes goes as it is, for Policy to refuse (tuple() would split
    # 'user' into four one-letter fields).
    if by is not None and not isinstance(by, (str, bytes)):
        by = tuple(by)
    local = Policy(config, algorithm=algorithm, by=by)  # type: ignore[arg-type]
    if isinstance(config, str) and not config.lstrip().startswith("{"):
        rates = _rates(config)
        return [
            _Limit(name, local.keyed_by(name), _limiter(algorithm or "token_bucket", f"{a}/{p} seconds", None))
            for name, (a, p) in zip(local.names, rates)
        ]
    if config is None:
        return []  # refused by the caller as a policy without limits
    data: Any = json.loads(config) if isinstance(config, str) else config
    limits = []
    for item in data["limits"]:
        if item.get("calendar") is not None:
            raise _error("`calendar`: calendar windows are not supported on Redis")
        limiter = _limiter(item.get("algorithm", "token_bucket"), item["rate"], item.get("burst"))
        limits.append(_Limit(item["name"], local.keyed_by(item["name"]), limiter))
    return limits


def _check_name(name: str) -> None:
    """Refuses ``name`` as an in-process limiter or policy refuses it (the
    core's one rule: printable ASCII, not empty), by the same code: the
    store's decisions carry it into their headers."""
    Decision(True, 0, 0, 0, 0, name=name)


def _one_limit(limiter: object, name: Optional[str]) -> list[_Limit]:
    """The limit of a ``RedisLimiter``: named ``name``, else by the limiter.

    A limiter left unnamed (``"default"``) is keyed by its configuration
    (``gcra/10/100000``: algorithm and ARGV), as the Node client keys it:
    two unnamed limiters of different configurations, a per-second and a
    per-day one, say, must not read each other's state under one key.
    """
    if name is not None and not isinstance(name, str):
        raise _type_error("name", "a str", name)
    if name is not None:
        _check_name(name)
    own = getattr(limiter, "name", "default") if name is None else name
    limit = _Limit(own, ("key",), limiter)
    if name is None and own == "default":
        limit.key = "/".join(str(arg) for arg in limit.args).encode()
    return [limit]


def _listed_limits(config: Iterable[object]) -> list[_Limit]:
    """The limits of a policy given as a list of ``(name, limiter, by)``,
    checked first as an in-process ``Policy`` checks them, one after the
    other (as ``Policy.add`` would, a name taken twice included), then for
    what Redis runs: a configuration with both faults names the first, as
    a dict configuration and the Node client do."""
    listed: list[tuple[str, tuple[str, ...], object]] = []
    for entry in config:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise _type_error("config", "a list of (name, limiter, by)", entry)
        name, limiter, by = entry
        if not isinstance(name, str):
            raise _type_error("name", "a str", name)
        # A str is iterable, and would be keyed by its letters.
        if isinstance(by, (str, bytes)) or not isinstance(by, Iterable):
            raise _type_error("by", "a list of str", by)
        fields = tuple(by)
        if not all(isinstance(field, str) for field in fields):
            raise _type_error("by", "a list of str", by)
        if isinstance(limiter, KeyedLimiter):
            # As Policy.add takes it (and the Node client): its limiter's
            # configuration, keyed by this limit's fields (max_keys bounds
            # nothing in Redis).
            limiter = limiter.limiter
        elif not isinstance(limiter, Limiter):
            raise _type_error("limiter", _LIMITERS, limiter)
        # As Policy.add refuses them (core Policy::add_store).
        _check_name(name)
        if any(name == other for other, _, _ in listed):
            raise _error("`name`: two limits have the same name")
        if len(set(fields)) != len(fields):
            raise _error("`by` names a field twice")
        listed.append((name, fields, limiter))
    return [_Limit(name, fields, limiter) for name, fields, limiter in listed]
