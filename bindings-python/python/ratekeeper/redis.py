"""Limits shared by every process and host, kept in Redis.

``RedisLimiter`` (one limiter per key) and ``RedisPolicy`` (several limits,
all or nothing) decide on Redis with the user's own client: ``redis.Redis``
(or ``redis.cluster.RedisCluster``) for the sync classes, ``redis.asyncio.Redis``
for ``AsyncRedisLimiter`` and ``AsyncRedisPolicy``, whose methods are
coroutines. Each decision is one ``EVALSHA`` of the script the core ships
(``ratekeeper._ratekeeper.REDIS_SCRIPT``; protocol in ``core/redis/PROTOCOL.md``),
which decides exactly as the in-process classes do, in integer microseconds.

- Time: the Redis server's clock by default; pass ``clock=time.time`` (or
  ``now=`` per call, seconds since the Unix epoch) for the caller's clock.
- Hot keys: while a round trip for a key is in flight, later
  ``try_acquire`` calls for that key wait and go together as one batch
  (``batching=False`` turns it off).
- Faults: ``on_error="closed"`` (default: deny), ``"open"`` (allow), or an
  in-process limiter, ``KeyedLimiter`` or ``Policy`` to decide instead; such
  decisions have ``from_store == False``.

This module imports the ``redis`` library; ``import ratekeeper`` does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import operator
import re
import threading
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Literal, Optional, TypeVar, Union

try:
    from redis.exceptions import NoPermissionError, RedisClusterException, RedisError, ResponseError
except ImportError as _missing:  # redis-py is an optional dependency
    raise ModuleNotFoundError("ratekeeper.redis needs redis-py: pip install 'ratekeeper[redis]'", name="redis") from _missing

# What "Redis cannot be reached" raises: redis-py's errors and the socket's,
# and RedisCluster's own when no node answers, which derives from neither.
# The script's own errors are raised as ScriptError, which is none of these.
_FAULTS = (RedisError, RedisClusterException, OSError)
# An error reply that no retry mends, and that on_error must not hide: the
# script's own (PROTOCOL.md, "Errors"), which Redis may prefix with ERR; a
# key of the limiter's that holds another type (WRONGTYPE); the script
# failing on a key's value that it did not write (user_script:<line>:); the
# ACL user may not run a command the script calls (Redis 7.0 words it "can't
# run this command", later versions NOPERM). NoPermissionError (NOPERM: the
# ACL user may not run the script) is one too.
_NOT_A_FAULT = re.compile(r"^(ERR .*)?ratekeeper:|WRONGTYPE|user_script:\d+:|can't run this command|NOPERM")

from ratekeeper import (
    Decision,
    FixedWindow,
    Gcra,
    KeyedLimiter,
    Limiter,
    Policy,
    RateLimited,
    RateLimitError,
    RateLimitTypeError,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)
from ratekeeper._ratekeeper import REDIS_SCRIPT

__all__ = [
    "AsyncRedisLimiter",
    "AsyncRedisPolicy",
    "AsyncRedisReservation",
    "RedisDecision",
    "ScriptError",
    "RedisReservation",
    "RedisLimiter",
    "RedisPolicy",
    "RedisPolicyDecision",
    "MAX_EXACT",
    "MAX_NOW",
    "MAX_SPAN",
]

#: The largest value a configuration may let the script's arithmetic reach
#: (2^51 µs or units), so that every sum of such values stays exact in Lua.
MAX_EXACT = 1 << 51
#: The latest ``now`` the caller's clock may give: 2^52 µs after the epoch (2112).
MAX_NOW = 1 << 52
#: The longest window and the longest ``max_wait``: 2^50 µs (35 years), so that
#: a booked slot plus two windows stays exact until ``MAX_NOW`` and beyond.
MAX_SPAN = 1 << 50
#: The most costs sent in one batch.
MAX_BATCH = 1024
# acquire and peek ask for their reply as one string of integers ('text'),
# which redis-py reads far faster than an array of them (PROTOCOL.md).
_TEXT = ("text",)
# A reply: an array of integers, or a 'text' reply (str with decode_responses).
_Reply = Union[Sequence[int], bytes, str]

_Seconds = Union[int, float, Decimal, Fraction]
_Key = Union[str, bytes, int]
_Request = Optional[Mapping[str, _Key]]
# What decides when Redis cannot answer: for a RedisLimiter, a KeyedLimiter
# (a key's target); for a RedisPolicy, a Policy (a request's).
_KeyFallback = Union[Literal["open", "closed"], Limiter, KeyedLimiter]
_RequestFallback = Union[Literal["open", "closed"], Limiter, Policy]
_Fallback = Union[_KeyFallback, _RequestFallback]
_T = TypeVar("_T")
# A batched async caller's answer: the decision, and the instant Redis took
# its units at (None when the fallback decided); and the caller as queued:
# its cost, target and future.
_Answer = tuple["RedisDecision", Optional[Fraction]]
_Waiting = tuple[int, Any, "asyncio.Future[_Answer]"]
# A key's queue of async callers: the loop they call on, and the callers.
_Queue = tuple["asyncio.AbstractEventLoop", list[_Waiting]]


class ScriptError(RuntimeError):
    """An error reply that no retry mends, raised as it is rather than
    answered by ``on_error``: the ratekeeper script's own (a client and script
    that disagree: a bug), a NOPERM (the client's ACL user may not run the
    script), a WRONGTYPE (a key of the limiter's holds another type), or the
    script failing on a key's value it did not write. Never a fault of the
    store's reach, which ``on_error`` answers. The redis-py error is its
    ``__cause__``."""


def _script_errors(error: ResponseError) -> None:
    """Raises ``error`` as a ``ScriptError`` when it is not a fault of the store's reach."""
    if isinstance(error, NoPermissionError) or _NOT_A_FAULT.search(str(error)):
        raise ScriptError(str(error)) from error


class RedisDecision(Decision):
    """A ``Decision`` made by a Redis-backed limiter.

    ``from_store`` is ``False`` when Redis could not be reached and the
    limiter's ``on_error`` policy decided instead.
    """

    from_store: bool

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, from_store={self.from_store})"


class RedisPolicyDecision(RedisDecision):
    """A ``RedisPolicy``'s answer: the combined decision, like ``PolicyDecision``.

    ``denied_by`` names the limit that denied (the one with the longest
    wait), ``limits`` lists ``(name, Decision)`` for every limit.
    """

    denied_by: Optional[str]
    limits: list[tuple[str, Decision]]


class _Reservation:
    """What both kinds of reservation hold; ``cancel`` is each one's own."""

    __slots__ = ("_cancel", "at", "cost", "decision", "ok", "wait")

    def __init__(
        self, ok: bool, wait: float, at: float, cost: int, decision: RedisDecision, cancel: Callable[[], Any]
    ) -> None:
        # Annotated here, for the type checkers that read a library's
        # attributes only from annotations (pyright --verifytypes).
        self.ok: bool = ok
        self.wait: float = wait
        self.at: float = at
        self.cost: int = cost
        self.decision: RedisDecision = decision
        self._cancel: Optional[Callable[[], Any]] = cancel if ok and cost else None

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ok={self.ok}, wait={self.wait!r}, at={self.at!r}, cost={self.cost})"


class RedisReservation(_Reservation):
    """A booking made by ``reserve()`` on Redis: proceed after ``wait`` seconds.

    ``ok``: ``cost`` units are booked for the slot ``at`` (seconds since the
    Unix epoch, on the clock that decided); later requests, from any process,
    are served after it. Not ``ok``: nothing was booked; ``decision`` says
    why and ``wait`` is the wait that was needed. ``cancel()`` gives an unused
    booking back.
    """

    __slots__ = ()

    def cancel(self) -> None:
        """Gives the booking back at its slot, once (later calls do nothing). When
        Redis cannot be reached, the booking stays (it expires with its key)."""
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            try:
                cancel()
            except _FAULTS:
                pass


class AsyncRedisReservation(_Reservation):
    """``RedisReservation`` of the async classes, the same but for
    ``await reservation.cancel()`` (a separate class: its ``cancel`` is a coroutine)."""

    __slots__ = ()

    async def cancel(self) -> None:
        """Gives the booking back at its slot, once (later calls do nothing). When
        Redis cannot be reached, the booking stays (it expires with its key)."""
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            try:
                await cancel()
            except _FAULTS:
                pass


def _taken_at(reply: _Reply) -> Fraction:
    """The instant an ``acquire`` reply was decided at, in s: its first integer, in µs."""
    first = reply.split(None, 1)[0] if isinstance(reply, (bytes, str)) else reply[0]
    return Fraction(int(first), 1_000_000)


def _give_back_fallback(core: _Core, taken: Iterable[tuple[Any, int, RedisDecision]], taken_at: Optional[Fraction]) -> int:
    """Of what was taken for callers that left, ``(target, cost, answer)``
    each, gives the fallback's back (``taken_at`` is ``None`` when it
    decided); returns the units to give back to Redis."""
    given = 0
    for target, cost, answer in taken:
        if answer.allowed and taken_at is None:
            core.unfallback(target, cost)
        elif answer.allowed:
            given += cost
    return given


def _error(message: str, code: str = "invalid_value") -> RateLimitError:
    return RateLimitError(message, code)


def _type_error(name: str, expected: str, value: object) -> RateLimitTypeError:
    return RateLimitTypeError(f"{name} must be {expected}, not {type(value).__name__}", "invalid_type")


def _is_asyncio_client(client: object) -> Optional[bool]:
    """Whether ``client`` is redis-py's asyncio client (or a subclass), or its
    sync one; ``None`` for anything else (another library, a test's fake)."""
    for cls in type(client).__mro__:
        module = cls.__module__
        if module == "redis" or module.startswith("redis."):
            return module.startswith("redis.asyncio")
    return None


def _micros(seconds: object, name: str) -> int:
    """Seconds as whole microseconds: exact for int, Fraction and Decimal, rounded for float."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, Decimal, Fraction)):
        raise _type_error(name, "a number of seconds (int, float, Decimal or Fraction)", seconds)
    # A float or a Decimal may be NaN or infinite; an int or a Fraction not.
    if isinstance(seconds, Decimal):
        finite = seconds.is_finite()
    else:
        finite = not isinstance(seconds, float) or math.isfinite(seconds)
    if not finite:
        raise _error(f"{name} must be a finite number")
    if isinstance(seconds, float):
        micros = round(seconds * 1_000_000)
    else:
        exact = Fraction(seconds) * 1_000_000
        micros = math.floor(exact + Fraction(1, 2))
    if micros < 0:
        raise _error(f"{name} must not be negative")
    return micros


def _timeout(timeout: object) -> Optional[float]:
    """An ``acquire``'s ``timeout`` in seconds, checked as the in-process
    acquire checks it: ``None`` (or infinity) for no bound, else a number of
    seconds of at least 0, the errors naming ``timeout``."""
    if timeout is None or _infinite(timeout):
        return None
    return _micros(timeout, "timeout") / 1_000_000


def _infinite(seconds: object) -> bool:
    """Whether ``seconds`` is +infinity, a float's or a ``Decimal``'s, as the
    in-process limiters read "no bound"."""
    if isinstance(seconds, Decimal):  # is_infinite first: a signaling NaN refuses comparisons
        return seconds.is_infinite() and seconds > 0
    return isinstance(seconds, float) and seconds == math.inf


def _duration(seconds: float, name: str) -> int:
    """A limiter's duration (a float of whole nanoseconds) as whole microseconds, at least 1."""
    micros = round(seconds * 1_000_000)
    if micros < 1 or abs(seconds * 1_000_000 - micros) > 1e-4 * max(1, seconds * 1e-3):
        raise _error(f"{name} must be a whole number of microseconds on Redis, not {seconds!r} s")
    return micros


def _exact(value: int, name: str, what: str, bound: int = MAX_EXACT) -> None:
    if value > bound:
        power = bound.bit_length() - 1
        raise _error(f"{name}: {what} is {value}, above 2^{power} (the limit of exact arithmetic on Redis)", "overflow")


def _ceil_micros(seconds: float) -> int:
    """A wait in seconds as whole µs, rounded up."""
    return math.ceil(seconds * 1e6)


def _instant(value: _Seconds, name: str) -> str:
    """ARGV's form of the instant ``value`` (seconds): whole µs, at most ``MAX_NOW``."""
    micros = _micros(value, name)
    if micros > MAX_NOW:
        raise _error(f"{name}: more than 2^52 µs after the Unix epoch", "overflow")
    return str(micros)


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
                    raise _error("refill: only greedy token buckets are supported on Redis")
                if band.initial_tokens != band.capacity:
                    raise _error("initial_tokens: token buckets on Redis start full")
                period = _duration(band.refill_period, "refill_period")
                step = period // math.gcd(band.refill_tokens, period)
                _exact(band.capacity * step, "capacity", "the time to refill the capacity (1/refill_tokens µs)")
                _exact(band.refill_tokens, "refill_tokens", "refill_tokens")
                self.args += [band.capacity, band.refill_tokens, period]
        elif isinstance(limiter, (FixedWindow, SlidingWindowCounter)):
            if limiter.calendar is not None:
                raise _error("calendar: calendar windows are not supported on Redis")
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
            raise _error(f"algorithm: {limiter.algorithm} is not supported on Redis")
        else:
            raise _type_error(
                "limiter", "a Gcra, TokenBucket, FixedWindow, SlidingWindowCounter or SlidingWindowLog", limiter
            )
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
            raise _error(f"rate: cannot read {item!r}", "invalid_syntax")
        word = match.group(3).lower()
        unit = _UNITS.get(word) or _UNITS.get(word[:-1] if word.endswith("s") else word)
        if unit is None:
            raise _error(f"rate: unknown unit in {item!r}", "invalid_syntax")
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
    raise _error(f"algorithm: {algorithm} is not supported on Redis")


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
            raise _error("calendar: calendar windows are not supported on Redis")
        limiter = _limiter(item.get("algorithm", "token_bucket"), item["rate"], item.get("burst"))
        limits.append(_Limit(item["name"], local.keyed_by(item["name"]), limiter))
    return limits


def _utf8(text: str, name: str) -> bytes:
    """``text`` as UTF-8, refused (``invalid_value``) when it holds a lone surrogate, as in-process."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise _error(f"{name} must be valid Unicode text (no lone surrogates)") from None


def _counted(part: bytes) -> bytes:
    """``part`` as a key writes it: ``<length>:<bytes>``, so that parts side by side read back one way."""
    return b"%d:%s" % (len(part), part)


def _key_part(value: object, name: str) -> bytes:
    """A key's value as the in-process store reads it: a str's UTF-8, bytes as
    they are, an integer (an ``int``, or any ``__index__`` one: NumPy's, an
    ``IntEnum``) as its decimal digits."""
    if isinstance(value, str):
        return _utf8(value, name)
    if isinstance(value, bytes):
        return value
    return b"%d" % _integer(value, name, "str, bytes or int")


def _integer(value: object, name: str, expected: str) -> int:
    """``value`` as an ``int`` (through ``__index__``), never a bool."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise _type_error(name, expected, value)


def _costs(costs: object, limit: int) -> list[int]:
    """A batch's costs, each checked by ``_cost``."""
    if not isinstance(costs, Iterable):
        raise _type_error("costs", "an iterable of int", costs)
    return [_cost(c, limit) for c in costs]


def _cost(cost: object, limit: int) -> int:
    cost = _integer(cost, "cost", "an int")
    if cost < 0:
        raise _error("cost must not be negative")
    if cost > limit:
        raise _error(f"cost: {cost} is more than the limit {limit}", "cost_exceeds_limit")
    return cost


class _Core:
    """What the sync and async classes share: keys, arguments, replies, faults."""

    # The in-process class that can decide for the same target as this
    # store (a key, or a request), besides a plain Limiter.
    KEYED_FALLBACK: type = KeyedLimiter

    def __init__(
        self,
        limits: list[_Limit],
        prefix: str,
        clock: Optional[Callable[[], _Seconds]],
        on_error: _Fallback,
        batching: bool,
    ) -> None:
        if not isinstance(prefix, str):
            raise _type_error("prefix", "a str", prefix)
        if "{" in prefix or "}" in prefix:
            # Keys carry a hash tag, {...}, so that a request's keys share a
            # Cluster slot: a brace in the prefix would be the tag instead.
            raise _error(f"prefix must not contain '{{' or '}}' (keys carry their own hash tag): {prefix!r}")
        if not prefix:
            # A policy with a global limit is tagged by its prefix, and Redis
            # reads an empty tag, {}, as none: its keys would span slots.
            raise _error("prefix must not be empty (it is the hash tag of a policy with a global limit)")
        if not isinstance(batching, bool):
            raise _type_error("batching", "a bool", batching)
        if clock is not None and not callable(clock):
            raise _type_error("clock", "a callable or None", clock)
        if not (on_error in ("open", "closed") or isinstance(on_error, (Limiter, self.KEYED_FALLBACK))):
            expected = f"'open', 'closed' or an in-process Limiter or {self.KEYED_FALLBACK.__name__}"
            if isinstance(on_error, str):
                raise _error(f"on_error must be {expected}, not {on_error!r}")
            raise _type_error("on_error", expected, on_error)
        self.limits = limits
        # Names are written as values are, `<length>:<name>`, so that no name
        # ending like a value (`a:2:x`) shares a key with another name's.
        self.names = [_counted(limit.key) for limit in limits]
        self.prefix = _utf8(prefix, "prefix")
        self.clock = clock
        self.on_error = on_error
        self.batching = batching
        self.limit = min(limit.limit for limit in limits)
        # The fields a fallback Policy's limits are keyed by, beside the
        # store's: every request must have them too, so that one lacking
        # them fails at once, not only while Redis is down.
        self.fallback_fields: dict[str, str] = {}
        if isinstance(on_error, Policy):
            for name in on_error.names:
                for field in on_error.keyed_by(name):
                    self.fallback_fields.setdefault(field, name)
        # Fields every limit is keyed by: the hash tag, so that a request's keys share a slot.
        self.common = [f for f in limits[0].by if all(f in limit.by for limit in limits)]
        self.config: list[Union[str, int]] = [len(limits)]
        for limit in limits:
            self.config += limit.args

    def keys(self, request: Mapping[str, _Key], argument: Optional[str] = None) -> list[bytes]:
        """Each limit's key: ``prefix{tag}:name:key``, the tag shared by all,
        the name and each value of the key written ``<length>:<bytes>``.
        A bad value's error names ``request[field]``, or ``argument`` when the
        request stands for that one argument (a limiter's ``key``)."""
        for field, name in self.fallback_fields.items():
            if field not in request:
                raise _error(f"request: lacks the field {field!r} that on_error's limit {name!r} is keyed by")
        values: dict[str, bytes] = {}
        for limit in self.limits:
            for field in limit.by:
                if field not in values:
                    if field not in request:
                        raise _error(f"request: lacks the field {field!r} that limit {limit.name!r} is keyed by")
                    part = _key_part(request[field], argument or f"request[{field!r}]")
                    values[field] = _counted(part)
        # No field in common (a global limit): the whole policy on the slot of its prefix.
        tag = b"".join(values[f] for f in self.common) if self.common else self.prefix
        return [
            self.prefix + b"{" + tag + b"}:" + name + b":" + b"".join(values[f] for f in limit.by)
            for limit, name in zip(self.limits, self.names)
        ]

    def now(self, now: Optional[_Seconds]) -> str:
        """ARGV's ``now``: the caller's, in µs, or empty for the server's clock."""
        if now is None and self.clock is not None:
            now = self.clock()
        if now is None:
            return ""
        return _instant(now, "now")

    def max_wait(self, max_wait: Optional[_Seconds]) -> str:
        """ARGV's ``max_wait`` in µs, at most ``MAX_SPAN``: ``None`` and infinity mean that much."""
        if max_wait is None or _infinite(max_wait):
            return str(MAX_SPAN)
        return str(min(_micros(max_wait, "max_wait"), MAX_SPAN))

    def booking(
        self, target: Any, cost: int, reply: Optional[Sequence[int]]
    ) -> tuple[bool, float, float, RedisDecision, Optional[Fraction]]:
        """A reserve reply (``None``: Redis failed, the fallback decides) as
        ``(ok, wait, at, decision, slot)``, the slot exact, ``None`` for the fallback's."""
        if reply is None:
            d = self.fallback(target, cost, None, False)
            return d.allowed, d.retry_after, time.time() + d.retry_after, d, None
        (d,) = self.decisions(reply[2:], 1)
        slot = Fraction(reply[0] + reply[2], 1_000_000)
        return bool(reply[1]), reply[2] / 1e6, float(slot), d, slot

    def args(self, mode: str, now: str, costs: Sequence[int], extra: Sequence[str] = ()) -> list[Union[str, int]]:
        return ["1", mode, now, *self.config, len(costs), *costs, *extra]

    def decisions(self, reply: _Reply, count: int) -> list[RedisDecision]:
        if isinstance(reply, (bytes, str)):
            # A 'text' reply: one string of the integers (PROTOCOL.md).
            reply = [int(number) for number in reply.split()]
        n = len(self.limits)
        # A lone limit's own answer is the combined one, which the script
        # does not send twice: read it from there.
        stride, fields = (6, (0, 2, 3, 4, 5)) if n == 1 else (6 + 5 * n, (0, 1, 2, 3, 4))
        out = []
        for j in range(count):
            base = 1 + j * stride
            starts = [base] if n == 1 else range(base + 6, base + 6 + 5 * n, 5)
            own = []
            for limit, at in zip(self.limits, starts):
                allowed, remaining, limit_, retry, reset = (reply[at + f] for f in fields)
                own.append(
                    Decision(
                        bool(allowed), remaining, limit_, retry / 1e6, reset / 1e6, name=limit.name, window=limit.window
                    )
                )
            denied_by = reply[base + 1]
            out.append(self.decision(reply[base : base + 6], own, denied_by, True))
        return out

    def decision(
        self, numbers: Sequence[int], own: list[Decision], denied_by: int, from_store: bool
    ) -> RedisDecision:
        raise NotImplementedError

    def fallbacks(
        self, target: Any, targets: Optional[list[Any]], costs: list[int], now: Optional[_Seconds], peek: bool
    ) -> list[RedisDecision]:
        """``fallback`` for each of ``costs``, for ``targets[i]`` (default ``target``):
        a batch gathers callers whose requests share their Redis keys, not
        the fields an in-process ``Policy`` may key on."""
        if targets is None:
            return [self.fallback(target, cost, now, peek) for cost in costs]
        outcomes: list[Union[RedisDecision, Exception]] = []
        for t, cost in zip(targets, costs):
            try:
                outcomes.append(self.fallback(t, cost, now, peek))
            except Exception as error:
                outcomes.append(error)
        decisions = [o for o in outcomes if isinstance(o, RedisDecision)]
        if len(decisions) < len(outcomes):
            raise _Fallbacks(outcomes)
        return decisions

    def _open_or_closed(self, allowed: bool) -> RedisDecision:
        """What ``on_error="open"`` (``allowed``) or ``"closed"`` answers."""
        # Denied: try again in a second, and (for the RateLimit header's
        # `t`, which should not say sooner) count a second to "reset" too.
        retry = 0.0 if allowed else 1.0
        own = [
            Decision(allowed, limit.limit if allowed else 0, limit.limit, retry, retry, name=limit.name, window=limit.window)
            for limit in self.limits
        ]
        remaining = self.limit if allowed else 0
        numbers = [int(allowed), 0, remaining, self.limit, _ceil_micros(retry), _ceil_micros(retry)]
        return self.decision(numbers, own, 0 if allowed else 1, False)

    def fallback(self, target: Any, cost: int, now: Optional[_Seconds], peek: bool) -> RedisDecision:
        """The decision ``on_error`` makes when Redis cannot answer."""
        if isinstance(self.on_error, str):
            return self._open_or_closed(self.on_error == "open")
        local: Any = self.on_error
        method = local.peek if peek else local.try_acquire
        try:
            d = method(cost) if isinstance(local, Limiter) else method(target, cost)
        except RateLimitError as error:
            # A cost above the fallback's limit (a stricter limit for an
            # outage, say), which it never admits: denied as "closed"
            # denies, rather than raised during an outage.
            if error.code != "cost_exceeds_limit":
                raise
            return self._open_or_closed(False)
        # Each limit as the fallback's limit of its name answered, when it
        # has one (a fallback Policy), else as the fallback answered as a whole.
        mine = dict(getattr(d, "limits", ()))
        own = [
            Decision(o.allowed, o.remaining, o.limit, o.retry_after, o.reset_after, name=limit.name, window=limit.window)
            for limit in self.limits
            for o in [mine.get(limit.name, d)]
        ]
        # Rounded up to the wire's µs: a wait is never stated shorter.
        numbers = [int(d.allowed), 0, d.remaining, d.limit, _ceil_micros(d.retry_after), _ceil_micros(d.reset_after)]
        names = [limit.name for limit in self.limits]
        denied_by = getattr(d, "denied_by", None)
        index = 0 if d.allowed else names.index(denied_by) + 1 if denied_by in names else 1
        return self.decision(numbers, own, index, False)

    def unfallback(self, target: Any, cost: int) -> None:
        """Gives ``cost`` back to the in-process ``on_error`` limiter that
        ``fallback`` took it from (a cancelled fallback booking)."""
        local: Any = self.on_error
        if isinstance(local, str):
            return
        if isinstance(local, Limiter):
            local.refund(cost)
        else:
            local.refund(target, cost)

    def wrap(self, numbers: Sequence[int], own: list[Decision], from_store: bool, cls: type[_T]) -> _T:
        allowed, remaining, limit, retry, reset = bool(numbers[0]), numbers[2], numbers[3], numbers[4], numbers[5]
        items = [(lim.name, lim.window, d) for lim, d in zip(self.limits, own)]
        made: Any = cls(allowed, remaining, limit, retry / 1e6, reset / 1e6, limits=items)  # type: ignore[call-arg]
        made.from_store = from_store
        return made  # type: ignore[no-any-return]


class _Fallbacks(Exception):
    """A batch's fallback decisions when some of them failed (a fallback
    ``Policy`` refusing a caller's request): each answer or error is its
    caller's alone, as the callers' requests are their own."""

    def __init__(self, outcomes: list[Union[RedisDecision, Exception]]) -> None:
        super().__init__("a batch's fallback refused some of its callers")
        self.outcomes = outcomes


class _LimiterCore(_Core):
    def decision(self, numbers: Sequence[int], own: list[Decision], denied_by: int, from_store: bool) -> RedisDecision:
        return self.wrap(numbers, own, from_store, RedisDecision)


class _PolicyCore(_Core):
    KEYED_FALLBACK = Policy

    def decision(self, numbers: Sequence[int], own: list[Decision], denied_by: int, from_store: bool) -> RedisDecision:
        made = self.wrap(numbers, own, from_store, RedisPolicyDecision)
        made.denied_by = self.limits[denied_by - 1].name if denied_by else None
        made.limits = [(limit.name, d) for limit, d in zip(self.limits, own)]
        return made


class _Slot:
    """One caller's place in a thread batch."""

    __slots__ = ("cost", "error", "event", "gone", "lead", "result", "taken_at", "target")

    def __init__(self, cost: int, target: Any) -> None:
        self.cost = cost
        self.target = target
        self.event = threading.Event()
        self.result: Optional[RedisDecision] = None
        # The instant Redis took the units at (None: the fallback decided).
        self.taken_at: Optional[Fraction] = None
        self.error: Optional[BaseException] = None
        self.lead: Optional[list[_Slot]] = None
        # Interrupted while its batch was under way: whoever answers gives back.
        self.gone = False


class _Sync:
    """The sync client's calls: EVALSHA with a NOSCRIPT fallback, faults, batching."""

    _core: _Core

    def _connect(self, client: Any, core: _Core) -> None:
        # An asyncio client's calls return coroutines, which failed far from here.
        if not hasattr(client, "evalsha") or _is_asyncio_client(client):
            expected = "a redis.Redis (or RedisCluster) client (for a redis.asyncio one, use the Async class)"
            raise _type_error("client", expected, client)
        self._client = client
        self._core = core
        self._script = client.register_script(REDIS_SCRIPT)
        self._lock = threading.Lock()
        self._queues: dict[tuple[bytes, ...], list[_Slot]] = {}

    def _call(self, keys: list[bytes], args: list[Union[str, int]]) -> Any:
        try:
            reply: _Reply = self._script(keys=keys, args=args)
        except ResponseError as error:
            _script_errors(error)
            raise
        return reply

    def _decide(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> list[RedisDecision]:
        """One round trip deciding ``costs`` in order; ``targets[i]`` (default
        ``target``) is whom the fallback decides the ``i``-th for."""
        return self._decide_taken(target, keys, mode, costs, now, targets)[0]

    def _decide_taken(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> tuple[list[RedisDecision], Optional[Fraction]]:
        """``_decide``, with the instant Redis took the units at (``None`` when the fallback decided)."""
        wire_now = self._core.now(now)
        try:
            reply = self._call(keys, self._core.args(mode, wire_now, costs, _TEXT))
        except _FAULTS:
            return self._core.fallbacks(target, targets, costs, now, mode == "peek"), None
        return self._core.decisions(reply, len(costs)), _taken_at(reply)

    def _acquire(self, target: Any, keys: list[bytes], cost: int, now: Optional[_Seconds]) -> RedisDecision:
        if not self._core.batching or now is not None:
            return self._decide(target, keys, "acquire", [cost], now)[0]
        queue_key = tuple(keys)
        slot = _Slot(cost, target)
        with self._lock:
            queue = self._queues.get(queue_key)
            if queue is None:
                self._queues[queue_key] = []
                batch: Optional[list[_Slot]] = [slot]
            else:
                queue.append(slot)
                batch = None
        if batch is None:
            try:
                slot.event.wait()
            except BaseException:
                self._abandon(queue_key, slot)
                raise
            if slot.lead is None:
                if slot.error is not None:
                    raise slot.error
                assert slot.result is not None
                return slot.result
            batch = slot.lead
        # This thread leads: it sends its batch, answers every caller in it,
        # and hands the batch gathered meanwhile to the first of its callers.
        down = False
        try:
            answers, taken_at = self._decide_taken(
                target, keys, "acquire", [s.cost for s in batch], None, [s.target for s in batch]
            )
            self._deliver(keys, batch, answers, taken_at)
            down = taken_at is None
        except _Fallbacks as mixed:
            self._deliver(keys, batch, mixed.outcomes, None)
            down = True
        except Exception as error:
            for s in batch:
                s.error = error
        except BaseException:
            # This thread was interrupted (Ctrl-C) during its round trip: it
            # leaves, and the others' requests go on, sent by the next of
            # them (what Redis may have taken meanwhile stays taken: never
            # more admitted), rather than each raising its interruption.
            slot.lead = batch
            self._abandon(queue_key, slot)
            raise
        self._hand_on(queue_key, down)
        for s in batch:
            if s is not slot:
                s.event.set()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def _hand_on(self, queue_key: tuple[bytes, ...], down: bool = False) -> None:
        """Hands the batch gathered meanwhile to the first of its callers, who
        sends it; or ends the queue when nobody waits. When Redis did not
        answer (``down``), the fallback decides for every caller gathered, at
        once, rather than each batch waiting for its own round trip to fail."""
        with self._lock:
            following = self._queues[queue_key]
            if down:
                del self._queues[queue_key]
            elif following:
                self._queues[queue_key] = following[MAX_BATCH:]
                following = following[:MAX_BATCH]
                following[0].lead = following
            else:
                del self._queues[queue_key]
        if down:
            for s in following:
                try:
                    self._deliver(list(queue_key), [s], [self._core.fallback(s.target, s.cost, None, False)], None)
                except BaseException as error:
                    s.error = error
                s.event.set()
        elif following:
            following[0].event.set()

    def _deliver(
        self, keys: list[bytes], batch: list[_Slot], answers: Sequence[Union[RedisDecision, Exception]], taken_at: Optional[Fraction]
    ) -> None:
        """Answers each caller of ``batch`` (a decision, or its own error);
        what was taken for one that left meanwhile (interrupted, see
        ``_abandon``) is given back."""
        gone = []
        with self._lock:
            for s, answer in zip(batch, answers):
                if isinstance(answer, Exception):
                    s.error = answer
                    continue
                s.result, s.taken_at = answer, taken_at
                if s.gone:
                    gone.append((s.target, s.cost, answer))
        self._give_back(keys, gone, taken_at)

    def _give_back(self, keys: list[bytes], taken: list[tuple[Any, int, RedisDecision]], taken_at: Optional[Fraction]) -> None:
        """Gives back what was taken for callers that left, ``(target, cost,
        answer)`` each: to Redis at ``taken_at``, or (``None``) to the fallback."""
        given = _give_back_fallback(self._core, taken, taken_at)
        if given:
            with contextlib.suppress(Exception):
                self._refund(keys, given, taken_at)

    def _abandon(self, queue_key: tuple[bytes, ...], slot: _Slot) -> None:
        """A waiting caller interrupted (Ctrl-C, a signal handler's exception)
        leaves its place: out of the queue, or, when it was handed a batch to
        send, the batch goes on to the next caller in it, so that nobody
        behind waits for a sender that left."""
        with self._lock:
            queue = self._queues.get(queue_key)
            if queue is not None and slot in queue:
                queue.remove(slot)
                return
            lead, slot.lead = slot.lead, None
            # In a batch another caller sends: that caller gives back what
            # Redis takes for this one, unless the answer came already.
            slot.gone = lead is None and slot.result is None
            answered = lead is None and slot.result is not None
        if answered:
            assert slot.result is not None
            self._give_back(list(queue_key), [(slot.target, slot.cost, slot.result)], slot.taken_at)
        if lead is None:
            return
        others = [s for s in lead if s is not slot]
        if others:
            others[0].lead = others
            others[0].event.set()
        else:
            self._hand_on(queue_key)

    def _refund(self, keys: list[bytes], cost: int, taken_at: Optional[_Seconds]) -> None:
        at = "" if taken_at is None else _instant(taken_at, "taken_at")
        try:
            self._call(keys, self._core.args("refund", self._core.now(None), [cost], [at]))
        except _FAULTS:
            pass  # Redis unreachable: nothing to give back to (see "Faults")

    def _reserve(
        self, target: Any, keys: list[bytes], cost: int, max_wait: Optional[_Seconds], now: Optional[_Seconds]
    ) -> RedisReservation:
        args = self._core.args("reserve", self._core.now(now), [cost], [self._core.max_wait(max_wait)])
        try:
            reply: Optional[list[int]] = self._call(keys, args)
        except _FAULTS:
            reply = None
        ok, wait, at, decision, slot = self._core.booking(target, cost, reply)

        def cancel() -> None:
            if slot is None:
                self._core.unfallback(target, cost)
            else:
                self._refund(keys, cost, slot)

        return RedisReservation(ok, wait, at, cost, decision, cancel)

    def _wait(self, book: Callable[[float], RedisReservation], timeout: Optional[_Seconds]) -> None:
        """Books (``book(max_wait)``), then sleeps once until the slot; while
        Redis is unreachable, retries after the fallback's ``retry_after``."""
        limit = _timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = math.inf if deadline is None else max(deadline - time.monotonic(), 0.0)
            reservation = book(left)
            if reservation.ok:
                try:
                    time.sleep(reservation.wait)
                except BaseException:
                    # Interrupted (Ctrl-C, a signal handler's exception): the
                    # booking goes back, as the in-process acquire's does.
                    with contextlib.suppress(Exception):
                        reservation.cancel()
                    raise
                return
            if reservation.decision.from_store or reservation.wait > left:
                raise RateLimited(f"would wait {reservation.wait:.6f} s, more than the timeout", reservation.wait)
            time.sleep(reservation.wait)


class _Async:
    """The asyncio client's calls, as ``_Sync``'s."""

    _core: _Core

    def _connect(self, client: Any, core: _Core) -> None:
        if not hasattr(client, "evalsha") or _is_asyncio_client(client) is False:
            expected = "a redis.asyncio.Redis client (for a sync one, use the class without Async)"
            raise _type_error("client", expected, client)
        self._client = client
        self._core = core
        self._script = client.register_script(REDIS_SCRIPT)
        # Per key, the loop whose callers queue there, and those callers
        # (each loop in a thread of its own may share this limiter: the
        # dict is changed under the lock; a queue, only on its loop).
        self._queues: dict[tuple[bytes, ...], _Queue] = {}
        self._queues_lock = threading.Lock()

    async def _call(self, keys: list[bytes], args: list[Union[str, int]]) -> Any:
        try:
            reply: _Reply = await self._script(keys=keys, args=args)
        except ResponseError as error:
            _script_errors(error)
            raise
        return reply

    async def _decide(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> list[RedisDecision]:
        return (await self._decide_taken(target, keys, mode, costs, now, targets))[0]

    async def _decide_taken(
        self, target: Any, keys: list[bytes], mode: str, costs: list[int], now: Optional[_Seconds], targets: Optional[list[Any]] = None
    ) -> tuple[list[RedisDecision], Optional[Fraction]]:
        """``_Sync._decide_taken`` on asyncio."""
        wire_now = self._core.now(now)
        try:
            reply = await self._call(keys, self._core.args(mode, wire_now, costs, _TEXT))
        except _FAULTS:
            return self._core.fallbacks(target, targets, costs, now, mode == "peek"), None
        return self._core.decisions(reply, len(costs)), _taken_at(reply)

    async def _acquire(self, target: Any, keys: list[bytes], cost: int, now: Optional[_Seconds]) -> RedisDecision:
        if not self._core.batching or now is not None:
            return (await self._take(target, keys, [cost], now))[0]
        queue_key = tuple(keys)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Answer] = loop.create_future()
        lead: Optional[_Queue] = None  # a new queue, which this call starts
        with self._queues_lock:
            entry = self._queues.get(queue_key)
            # A loop that is not running (stopped or closed with a batch
            # under way) sends nothing until it runs again: its queue is
            # replaced, its tasks keep the entry they were given.
            alone = entry is not None and entry[0] is not loop and entry[0].is_running()
            if entry is not None and entry[0] is loop:
                entry[1].append((cost, target, future))
            elif not alone:
                # None, or left by a loop that stopped with a batch under way.
                lead = (loop, [])
                self._queues[queue_key] = lead
        if alone:
            # Another loop's callers queue on this key (one client on
            # several loops): this call goes alone.
            return (await self._take(target, keys, [cost], now))[0]
        if lead is not None:
            # The round trips run in a task of their own, so that cancelling
            # one caller cancels no other caller's decision.
            self._spawn(keys, queue_key, lead, [(cost, target, future)])
        try:
            answer, taken_at = await future
        except asyncio.CancelledError:
            # Cancelled once its answer had come, before it ran: what Redis
            # took for it is given back, as for one cancelled before.
            if future.done() and not future.cancelled() and future.exception() is None:
                answer, taken_at = future.result()
                self._give_back(keys, [(target, cost, answer)], taken_at)
            raise
        return answer

    async def _take(self, target: Any, keys: list[bytes], costs: list[int], now: Optional[_Seconds]) -> list[RedisDecision]:
        """One round trip taking ``costs`` for one caller, in a task of its
        own: cancelled during it, the caller leaves at once, and what the
        script took (it runs all the same once sent) is given back when Redis
        answers, as a batched caller's is."""
        call = asyncio.ensure_future(self._decide_taken(target, keys, "acquire", costs, now))
        try:
            return (await asyncio.shield(call))[0]
        except asyncio.CancelledError:
            call.add_done_callback(lambda done: self._untake(done, target, keys, costs))
            raise

    def _untake(
        self, call: asyncio.Future[tuple[list[RedisDecision], Optional[Fraction]]], target: Any, keys: list[bytes], costs: list[int]
    ) -> None:
        """Gives back what ``call`` (``_take``'s) took, its caller gone."""
        if call.cancelled() or call.exception() is not None:
            return  # nothing taken, or nothing known of it
        answers, taken_at = call.result()
        self._give_back(keys, [(target, cost, answer) for cost, answer in zip(costs, answers)], taken_at)

    def _spawn(self, keys: list[bytes], queue_key: tuple[bytes, ...], entry: _Queue, batch: list[_Waiting]) -> None:
        _keep(asyncio.ensure_future(self._send(keys, queue_key, entry, batch)))

    def _give_back(self, keys: list[bytes], taken: list[tuple[Any, int, RedisDecision]], taken_at: Optional[Fraction]) -> None:
        """Gives back what was taken for callers that left (cancelled), ``(target,
        cost, answer)`` each: to Redis at ``taken_at`` in a task of its own, or
        (``None``) to the fallback."""
        given = _give_back_fallback(self._core, taken, taken_at)
        if not given:
            return

        async def give_back() -> None:
            try:
                await self._refund(keys, given, taken_at)
            except Exception:
                pass  # the script refused (a key of another type): nobody to tell, its caller is gone

        _keep(asyncio.ensure_future(give_back()))

    def _end(self, queue_key: tuple[bytes, ...], entry: _Queue) -> None:
        """Takes ``entry`` out of the queues, unless another replaced it."""
        with self._queues_lock:
            if self._queues.get(queue_key) is entry:
                del self._queues[queue_key]

    async def _send(self, keys: list[bytes], queue_key: tuple[bytes, ...], entry: _Queue, batch: list[_Waiting]) -> None:
        """Sends ``batch`` as one call, then the batch gathered meanwhile in ``entry``."""
        queue = entry[1]
        try:
            await self._answer(keys, queue, batch)
            # The next batch goes once the callers just answered have run:
            # one that calls again at once joins it, rather than going alone
            # while every other waits for its answer.
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            # This task was cancelled (its loop ending): nobody would send
            # the callers gathered meanwhile, and later ones would queue
            # behind them for ever.
            self._end(queue_key, entry)
            for _, _, f in batch + queue:
                f.cancel()
            raise
        # Only this loop's callers append to its queue: no lock needed here.
        following, queue[:] = queue[:MAX_BATCH], queue[MAX_BATCH:]
        if following:
            self._spawn(keys, queue_key, entry, following)
        else:
            self._end(queue_key, entry)

    async def _answer(self, keys: list[bytes], queue: list[_Waiting], batch: list[_Waiting]) -> None:
        """Decides ``batch`` (cost, caller's target, future) in one call and answers each caller."""
        targets = [t for _, t, _ in batch]
        try:
            costs = [c for c, _, _ in batch]
            answers: Sequence[Union[RedisDecision, Exception]]
            try:
                answers, taken_at = await self._decide_taken(targets[0], keys, "acquire", costs, None, targets)
            except _Fallbacks as mixed:
                answers, taken_at = mixed.outcomes, None
            if taken_at is None:
                # Redis did not answer: the callers that queued meanwhile
                # are decided by the fallback now, rather than each batch
                # waiting for its own round trip to fail. Later ones ask Redis.
                queued, queue[:] = queue[:], []
                for cost, target, f in queued:
                    if not f.done():
                        try:
                            f.set_result((self._core.fallback(target, cost, None, False), None))
                        except Exception as error:
                            f.set_exception(error)
            # A caller cancelled meanwhile never sees its answer: what Redis
            # took for it is given back, at the instant it was decided.
            gone = []
            for (cost, target, f), answer in zip(batch, answers):
                if isinstance(answer, Exception):
                    if not f.done():
                        f.set_exception(answer)  # the fallback refused this caller alone
                elif f.done():
                    gone.append((target, cost, answer))
                else:
                    f.set_result((answer, taken_at))
            self._give_back(keys, gone, taken_at)
        except Exception as error:
            for _, _, f in batch:
                if not f.done():
                    f.set_exception(error)

    async def _refund(self, keys: list[bytes], cost: int, taken_at: Optional[_Seconds]) -> None:
        at = "" if taken_at is None else _instant(taken_at, "taken_at")
        try:
            await self._call(keys, self._core.args("refund", self._core.now(None), [cost], [at]))
        except _FAULTS:
            pass  # Redis unreachable: nothing to give back to (see "Faults")

    async def _reserve(
        self, target: Any, keys: list[bytes], cost: int, max_wait: Optional[_Seconds], now: Optional[_Seconds]
    ) -> AsyncRedisReservation:
        args = self._core.args("reserve", self._core.now(now), [cost], [self._core.max_wait(max_wait)])
        try:
            reply: Optional[list[int]] = await self._call(keys, args)
        except _FAULTS:
            reply = None
        ok, wait, at, decision, slot = self._core.booking(target, cost, reply)

        async def cancel() -> None:
            if slot is None:
                self._core.unfallback(target, cost)
            else:
                await self._refund(keys, cost, slot)

        return AsyncRedisReservation(ok, wait, at, cost, decision, cancel)

    async def _wait(self, book: Callable[[float], Awaitable[AsyncRedisReservation]], timeout: Optional[_Seconds]) -> None:
        """``_Sync._wait`` on asyncio; cancelled while sleeping, it gives the booking back."""
        limit = _timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left = math.inf if deadline is None else max(deadline - time.monotonic(), 0.0)
            booking = asyncio.ensure_future(book(left))
            try:
                reservation = await asyncio.shield(booking)
            except asyncio.CancelledError:
                # Cancelled while the script runs: it may book all the same.
                # Whatever the give-back meets, the cancellation is what is raised.
                try:
                    await asyncio.shield(_give_back(booking))
                except Exception:
                    pass
                raise
            if reservation.ok:
                try:
                    await asyncio.sleep(reservation.wait)
                except BaseException:
                    await asyncio.shield(reservation.cancel())
                    raise
                return
            if reservation.decision.from_store or reservation.wait > left:
                raise RateLimited(f"would wait {reservation.wait:.6f} s, more than the timeout", reservation.wait)
            await asyncio.sleep(reservation.wait)


async def _give_back(booking: asyncio.Future[AsyncRedisReservation]) -> None:
    """Waits for ``booking`` and cancels what it booked, if anything."""
    try:
        reservation = await booking
    except Exception:
        return  # it booked nothing
    await reservation.cancel()


# The batch tasks in flight, kept referenced until they finish.
_TASKS: set[asyncio.Future[None]] = set()


def _keep(task: asyncio.Future[None]) -> None:
    """Holds ``task`` until it is done: the loop keeps only a weak reference."""
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def _one_limit(limiter: object, name: Optional[str]) -> list[_Limit]:
    """The limit of a ``RedisLimiter``: named ``name``, else by the limiter.

    A limiter left unnamed (``"default"``) is keyed by its configuration
    (``gcra/10/100000``: algorithm and ARGV), as the Node client keys it:
    two unnamed limiters of different configurations, a per-second and a
    per-day one, say, must not read each other's state under one key.
    """
    if name is not None and not isinstance(name, str):
        raise _type_error("name", "a str", name)
    own = getattr(limiter, "name", "default") if name is None else name
    limit = _Limit(own, ("key",), limiter)
    if name is None and own == "default":
        limit.key = "/".join(str(arg) for arg in limit.args).encode()
    return [limit]


class _LimiterMixin:
    """What the sync and async limiters share: construction, keys, properties."""

    _core: _Core
    _connect: Callable[[Any, _Core], None]  # from _Sync or _Async
    _limiter: Limiter

    def __init__(
        self,
        client: Any,
        limiter: Limiter,
        *,
        name: Optional[str] = None,
        prefix: str = "ratekeeper:",
        clock: Optional[Callable[[], _Seconds]] = None,
        on_error: _KeyFallback = "closed",
        batching: bool = True,
    ) -> None:
        # The limiter's own name by default, as the Node client takes it: the
        # name is part of the Redis key, so both must agree to share a limit.
        core = _LimiterCore(_one_limit(limiter, name), prefix, clock, on_error, batching)
        self._connect(client, core)
        self._limiter = limiter

    def __repr__(self) -> str:
        # What it limits, as the in-process classes show it; never the client.
        shown = [repr(self._limiter)]
        if self.name != self._limiter.name:
            shown.append(f"name={self.name!r}")
        if self._core.prefix != b"ratekeeper:":
            shown.append(f"prefix={self._core.prefix.decode()!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _keys(self, key: _Key) -> list[bytes]:
        return self._core.keys({"key": key}, "key")

    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, as a dict."""
        return decision.headers()

    @property
    def limit(self) -> int:
        """The most units a key admits at once."""
        return self._core.limit

    @property
    def window(self) -> float:
        """Seconds over which a key's ``limit`` units are granted."""
        return self._core.limits[0].window

    @property
    def name(self) -> str:
        """The limiter's name: its keys' and RateLimit headers' name."""
        return self._core.limits[0].name


class RedisLimiter(_LimiterMixin, _Sync):
    """One limiter per key, kept in Redis, for a sync ``redis.Redis`` client.

    ``limiter`` is an in-process ``Gcra``, ``TokenBucket`` (greedy, one to
    four bandwidths), ``FixedWindow``, ``SlidingWindowCounter`` or
    ``SlidingWindowLog`` giving the configuration (durations in whole
    microseconds). Keys are ``prefix{key}:name:key``, name and key written
    ``<length>:<bytes>``, ``name`` being the limiter's own unless given:
    the Node client's ``RedisLimiter`` of the same limiter uses the same keys.
    """

    def try_acquire(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """Take ``cost`` units from ``key``'s limiter if it has them, and say what happened."""
        return self._acquire(key, self._keys(key), _cost(cost, self.limit), now)

    def try_acquire_batch(self, key: _Key, costs: Iterable[int], now: Optional[_Seconds] = None) -> list[RedisDecision]:
        """Decide each of ``costs`` for ``key``, in order, in one round trip."""
        checked = _costs(costs, self.limit)
        return self._decide(key, self._keys(key), "acquire", checked, now) if checked else []

    def peek(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        return self._decide(key, self._keys(key), "peek", [_cost(cost, self.limit)], now)[0]

    def refund(self, key: _Key, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` (seconds since the epoch; default now)."""
        self._refund(self._keys(key), _cost(cost, self.limit), taken_at)

    def reserve(
        self, key: _Key, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> RedisReservation:
        """Book ``cost`` units of ``key`` for the earliest slot they fit, within ``max_wait`` seconds."""
        return self._reserve(key, self._keys(key), _cost(cost, self.limit), max_wait, now)

    def acquire(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of ``key`` are ours (booked, first come first served,
        across processes); raise ``RateLimited`` past ``timeout``."""
        keys = self._keys(key)
        cost = _cost(cost, self.limit)
        self._wait(lambda left: self._reserve(key, keys, cost, left, None), timeout)


class AsyncRedisLimiter(_LimiterMixin, _Async):
    """``RedisLimiter`` for a ``redis.asyncio.Redis`` client: the methods are coroutines."""

    async def try_acquire(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """Take ``cost`` units from ``key``'s limiter if it has them, and say what happened."""
        return await self._acquire(key, self._keys(key), _cost(cost, self.limit), now)

    async def try_acquire_batch(
        self, key: _Key, costs: Iterable[int], now: Optional[_Seconds] = None
    ) -> list[RedisDecision]:
        """Decide each of ``costs`` for ``key``, in order, in one round trip."""
        checked = _costs(costs, self.limit)
        return await self._take(key, self._keys(key), checked, now) if checked else []

    async def peek(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        return (await self._decide(key, self._keys(key), "peek", [_cost(cost, self.limit)], now))[0]

    async def refund(self, key: _Key, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` (seconds since the epoch; default now)."""
        await self._refund(self._keys(key), _cost(cost, self.limit), taken_at)

    async def reserve(
        self, key: _Key, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> AsyncRedisReservation:
        """Book ``cost`` units of ``key`` for the earliest slot they fit, within ``max_wait`` seconds."""
        return await self._reserve(key, self._keys(key), _cost(cost, self.limit), max_wait, now)

    async def acquire(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of ``key`` are ours (booked, first come first served,
        across processes); raise ``RateLimited`` past ``timeout``; cancelling gives them back."""
        keys = self._keys(key)
        cost = _cost(cost, self.limit)
        await self._wait(lambda left: self._reserve(key, keys, cost, left, None), timeout)

    acquire_async = acquire


class _PolicyMixin:
    """What the sync and async policies share: construction, keys, properties."""

    _core: _Core
    _connect: Callable[[Any, _Core], None]  # from _Sync or _Async

    def __init__(
        self,
        client: Any,
        config: Union[None, str, Mapping[str, Any], Sequence[tuple[str, Limiter, Iterable[str]]]],
        *,
        algorithm: Optional[str] = None,
        by: Optional[Iterable[str]] = None,
        prefix: str = "ratekeeper:",
        clock: Optional[Callable[[], _Seconds]] = None,
        on_error: _RequestFallback = "closed",
        batching: bool = True,
    ) -> None:
        self._connect(client, _policy_core(config, algorithm, by, prefix, clock, on_error, batching))

    def _keys(self, request: _Request) -> list[bytes]:
        if request is not None and not isinstance(request, Mapping):
            raise _type_error("request", "a mapping of field to str, bytes or int, or None", request)
        return self._core.keys(request or {})

    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, every limit listed."""
        return decision.headers()

    @property
    def names(self) -> tuple[str, ...]:
        """The limits' names, in order."""
        return tuple(limit.name for limit in self._core.limits)

    def keyed_by(self, name: str) -> tuple[str, ...]:
        """The fields limit ``name`` is keyed by."""
        for limit in self._core.limits:
            if limit.name == name:
                return limit.by
        raise _error(f"name: no limit is called {name!r}")

    def __len__(self) -> int:
        return len(self._core.limits)

    def __repr__(self) -> str:
        # As Policy's repr, never the client.
        limits = "; ".join(
            f"{json.dumps(limit.name, ensure_ascii=False)} by {json.dumps(list(limit.by), ensure_ascii=False)}"
            for limit in self._core.limits
        )
        return f"<{type(self).__name__}: {limits}>"


def _listed_limit(entry: object) -> _Limit:
    """One ``(name, limiter, by)`` of a policy given as a list, checked as
    ``Policy.add`` checks its arguments."""
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
    return _Limit(name, fields, limiter)


def _policy_core(
    config: Union[None, str, Mapping[str, Any], Sequence[tuple[str, Limiter, Iterable[str]]]],
    algorithm: Optional[str],
    by: Optional[Iterable[str]],
    prefix: str,
    clock: Optional[Callable[[], _Seconds]],
    on_error: _RequestFallback,
    batching: bool,
) -> _PolicyCore:
    if isinstance(config, (list, tuple)):
        # As Policy refuses them beside a configuration: each limit names its own.
        for name, value in (("by", by), ("algorithm", algorithm)):
            if value is not None:
                raise _error(f"`{name}` applies only to rate strings; a list of limits gives each its own")
        limits = [_listed_limit(entry) for entry in config]
        if len({limit.name for limit in limits}) != len(limits):
            raise _error("name: two limits have the same name")
    else:
        limits = _policy_limits(config, algorithm, by)  # type: ignore[arg-type]
    if not limits:
        raise _error("config: a policy on Redis needs at least one limit", "zero_value")
    return _PolicyCore(limits, prefix, clock, on_error, batching)


class RedisPolicy(_PolicyMixin, _Sync):
    """Several limits decided together, all or nothing, in Redis, for a sync client.

    ``config`` is what ``ratekeeper.Policy`` takes (a dict ``{"limits":
    [...]}``, its JSON, or rate strings with ``algorithm`` and ``by``), or a
    list of ``(name, limiter, by)``. Every request's keys share the hash tag
    of the fields all limits are keyed by (the whole policy shares one slot
    when some limit is global).
    """

    def try_acquire(self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None) -> RedisPolicyDecision:
        """Take ``cost`` units from every limit if each has them, and say what happened."""
        d = self._acquire(request, self._keys(request), _cost(cost, self._core.limit), now)
        return d  # type: ignore[return-value]

    def try_acquire_batch(
        self, request: _Request, costs: Iterable[int], now: Optional[_Seconds] = None
    ) -> list[RedisPolicyDecision]:
        """Decide each of ``costs`` for ``request``, in order, in one round trip."""
        checked = _costs(costs, self._core.limit)
        return self._decide(request, self._keys(request), "acquire", checked, now) if checked else []  # type: ignore[return-value]

    def peek(self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None) -> RedisPolicyDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        return self._decide(request, self._keys(request), "peek", [_cost(cost, self._core.limit)], now)[0]  # type: ignore[return-value]

    def refund(self, request: _Request, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used, in every limit."""
        self._refund(self._keys(request), _cost(cost, self._core.limit), taken_at)

    def reserve(
        self,
        request: _Request = None,
        cost: int = 1,
        *,
        max_wait: Optional[_Seconds] = None,
        now: Optional[_Seconds] = None,
    ) -> RedisReservation:
        """Book ``cost`` units of every limit for the earliest slot they all fit, within ``max_wait``."""
        return self._reserve(request, self._keys(request), _cost(cost, self._core.limit), max_wait, now)

    def acquire(self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of every limit are ours; raise ``RateLimited`` past ``timeout``."""
        keys = self._keys(request)
        cost = _cost(cost, self._core.limit)
        self._wait(lambda left: self._reserve(request, keys, cost, left, None), timeout)


class AsyncRedisPolicy(_PolicyMixin, _Async):
    """``RedisPolicy`` for a ``redis.asyncio.Redis`` client: the methods are coroutines."""

    async def try_acquire(
        self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None
    ) -> RedisPolicyDecision:
        """Take ``cost`` units from every limit if each has them, and say what happened."""
        d = await self._acquire(request, self._keys(request), _cost(cost, self._core.limit), now)
        return d  # type: ignore[return-value]

    async def try_acquire_batch(
        self, request: _Request, costs: Iterable[int], now: Optional[_Seconds] = None
    ) -> list[RedisPolicyDecision]:
        """Decide each of ``costs`` for ``request``, in order, in one round trip."""
        checked = _costs(costs, self._core.limit)
        if not checked:
            return []
        return await self._take(request, self._keys(request), checked, now)  # type: ignore[return-value]

    async def peek(
        self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None
    ) -> RedisPolicyDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        d = await self._decide(request, self._keys(request), "peek", [_cost(cost, self._core.limit)], now)
        return d[0]  # type: ignore[return-value]

    async def refund(self, request: _Request, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used, in every limit."""
        await self._refund(self._keys(request), _cost(cost, self._core.limit), taken_at)

    async def reserve(
        self,
        request: _Request = None,
        cost: int = 1,
        *,
        max_wait: Optional[_Seconds] = None,
        now: Optional[_Seconds] = None,
    ) -> AsyncRedisReservation:
        """Book ``cost`` units of every limit for the earliest slot they all fit, within ``max_wait``."""
        return await self._reserve(request, self._keys(request), _cost(cost, self._core.limit), max_wait, now)

    async def acquire(self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of every limit are ours; raise ``RateLimited`` past ``timeout``."""
        keys = self._keys(request)
        cost = _cost(cost, self._core.limit)
        await self._wait(lambda left: self._reserve(request, keys, cost, left, None), timeout)

    acquire_async = acquire
