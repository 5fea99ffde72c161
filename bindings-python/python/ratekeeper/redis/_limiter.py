"""``RedisLimiter`` and ``AsyncRedisLimiter``: one limiter per key."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, Optional

from ratekeeper import Decision, KeyedLimiter, Limiter, PolicyDecision, RateLimitTypeError
from ratekeeper.redis._values import _cost, _refunded, _costs, _Key, _KeyFallback, _Seconds, _type_error
from ratekeeper.redis._decisions import AsyncRedisReservation, RedisDecision, RedisReservation
from ratekeeper.redis._limits import _one_limit
from ratekeeper.redis._core import _Core, _LimiterCore
from ratekeeper.redis._sync import _Sync
from ratekeeper.redis._async import _Async


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

    def _reset_fallback(self, key: _Key) -> list[bytes]:
        """``key``'s Redis keys, once a ``KeyedLimiter`` fallback has reset it
        (a ``Limiter`` fallback is every key's: it is left as it is)."""
        keys = self._keys(key)
        if isinstance(self._core.on_error, KeyedLimiter):
            self._core.on_error.reset(key)
        return keys

    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, as a dict.

        A policy's decision (a ``RedisPolicyDecision``, a ``PolicyDecision``)
        raises ``RateLimitTypeError`` (``invalid_type``), as an in-process
        limiter's ``headers`` does: ``policy.headers`` takes it."""
        if not isinstance(decision, Decision):
            raise _type_error("decision", "a Decision", decision)
        # As in-process (and the Node client), a policy's decision is told by what it holds.
        if isinstance(decision, PolicyDecision) or hasattr(decision, "denied_by"):
            raise RateLimitTypeError(
                "`decision` must be a limiter's Decision, not a policy's (policy.headers takes that)", "invalid_type"
            )
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
    def algorithm(self) -> str:
        """Every key's algorithm, e.g. ``"gcra"``, as ``KeyedLimiter.algorithm``."""
        return self._limiter.algorithm

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
        # The key first, then the costs, as in-process (an empty batch too).
        keys = self._keys(key)
        checked = _costs(costs, self.limit)
        return self._decide(key, keys, "acquire", checked, now) if checked else []

    def peek(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        return self._decide(key, self._keys(key), "peek", [_cost(cost, self.limit)], now)[0]

    def refund(self, key: _Key, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` (seconds since the epoch; default now)."""
        self._refund(self._keys(key), _refunded(cost), taken_at)

    def reserve(
        self, key: _Key, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> RedisReservation:
        """Book ``cost`` units of ``key`` for the earliest slot they fit, within ``max_wait`` seconds."""
        return self._reserve(key, self._keys(key), _cost(cost, self.limit), max_wait, now)

    def acquire(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of ``key`` are ours (booked, first come first served,
        across processes); raise ``RateLimited`` past ``timeout`` (the wait booked). On the
        caller's ``clock=``, it waits until the slot has come on that clock (sleeping again what
        is left there); on the server's, it sleeps once. Interrupted (or the clock raising
        there), it gives the booking back: on a bucket only while it is the key's latest (else
        its slot goes unused)."""
        keys = self._keys(key)
        cost = _cost(cost, self.limit)
        self._wait(lambda left: self._reserve(key, keys, cost, left, None), timeout)

    def reset(self, key: _Key) -> bool:
        """Put ``key`` back to fresh, as a key never seen: one ``UNLINK`` of its
        Redis key (and the key of a ``KeyedLimiter`` given as ``on_error``,
        reset first); whether Redis held it. An error of Redis raises:
        ``on_error`` answers decisions only."""
        keys = self._reset_fallback(key)
        held = self._unlink(keys)
        return held > 0


class AsyncRedisLimiter(_LimiterMixin, _Async):
    """``RedisLimiter`` for a ``redis.asyncio.Redis`` client: the methods are coroutines."""

    async def try_acquire(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """Take ``cost`` units from ``key``'s limiter if it has them, and say what happened."""
        return await self._acquire(key, self._keys(key), _cost(cost, self.limit), now)

    async def try_acquire_batch(
        self, key: _Key, costs: Iterable[int], now: Optional[_Seconds] = None
    ) -> list[RedisDecision]:
        """Decide each of ``costs`` for ``key``, in order, in one round trip."""
        # The key first, then the costs, as in-process (an empty batch too).
        keys = self._keys(key)
        checked = _costs(costs, self.limit)
        return await self._take(key, keys, checked, now) if checked else []

    async def peek(self, key: _Key, cost: int = 1, now: Optional[_Seconds] = None) -> RedisDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        return (await self._decide(key, self._keys(key), "peek", [_cost(cost, self.limit)], now))[0]

    async def refund(self, key: _Key, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` (seconds since the epoch; default now)."""
        await self._refund(self._keys(key), _refunded(cost), taken_at)

    async def reserve(
        self, key: _Key, cost: int = 1, *, max_wait: Optional[_Seconds] = None, now: Optional[_Seconds] = None
    ) -> AsyncRedisReservation:
        """Book ``cost`` units of ``key`` for the earliest slot they fit, within ``max_wait`` seconds;
        cancelled during the round trip, what Redis booked is given back (on a bucket only while
        it is the key's latest)."""
        return await self._reserve(key, self._keys(key), _cost(cost, self.limit), max_wait, now)

    async def acquire(self, key: _Key, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of ``key`` are ours (booked, first come first served,
        across processes); raise ``RateLimited`` past ``timeout`` (the wait booked). On the
        caller's ``clock=``, it waits until the slot has come on that clock (sleeping again what
        is left there); on the server's, it sleeps once. Cancelled (or the clock raising there),
        it raises at once and gives them back in a task of its own, once Redis answers for a
        booking in flight (on a bucket only while the booking is the key's latest, else its slot
        goes unused)."""
        keys = self._keys(key)
        cost = _cost(cost, self.limit)
        await self._wait(lambda left, gone: self._reserve(key, keys, cost, left, None, gone), timeout)

    async def reset(self, key: _Key) -> bool:
        """Put ``key`` back to fresh, as a key never seen: one ``UNLINK`` of its
        Redis key (and the key of a ``KeyedLimiter`` given as ``on_error``,
        reset first); whether Redis held it. An error of Redis raises:
        ``on_error`` answers decisions only."""
        keys = self._reset_fallback(key)
        held = await self._unlink(keys)
        return held > 0

    acquire_async = acquire
