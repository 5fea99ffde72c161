"""``RedisPolicy`` and ``AsyncRedisPolicy``: several limits, all or nothing."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Optional, Union

from ratekeeper import Decision, KeyedLimiter, Limiter, Policy, PolicyDecision, PolicyLimit, RateLimitTypeError
from ratekeeper.redis._values import _cost, _refunded, _costs, _error, _key_part, _Request, _RequestFallback, _Seconds, _type_error, _utf8
from ratekeeper.redis._decisions import AsyncRedisReservation, RedisPolicyDecision, RedisReservation
from ratekeeper.redis._limits import _listed_limits, _policy_limits
from ratekeeper.redis._core import _Core, _PolicyCore, _reaches
from ratekeeper.redis._sync import _Sync
from ratekeeper.redis._async import _Async


class _PolicyMixin:
    """What the sync and async policies share: construction, keys, properties."""

    _core: _Core
    _connect: Callable[[Any, _Core], None]  # from _Sync or _Async

    def __init__(
        self,
        client: Any,
        config: Union[None, str, Mapping[str, Any], Sequence[tuple[str, Union[Limiter, KeyedLimiter], Iterable[str]]]],
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
        return self._core.keys(_fields(request))

    def _asked(self, request: _Request) -> tuple[_Request, list[bytes]]:
        """What ``on_error`` decides for, and the request's keys. A fallback
        ``Policy`` reads the fields once Redis has failed, a round trip later,
        when another thread or task may have changed a request it reuses: it
        gets them as they were at the call, as an in-process policy reads them."""
        keys = self._keys(request)
        if request is not None and isinstance(self._core.on_error, Policy):
            return dict(request), keys
        return request, keys

    def _reset_fallback(self, request: _Request) -> list[bytes]:
        """The Redis keys ``reset(request)`` unlinks, once a ``Policy``
        fallback has reset the request's keys where its limits reach them (a
        ``Limiter`` fallback is every request's: it is left as it is)."""
        fields = _fields(request)
        keys = self._core.reset_keys(fields)
        fallback = self._core.on_error
        if isinstance(fallback, Policy) and any(_reaches(limit, fields) for limit in fallback.limits):
            fallback.reset(fields)
        return keys

    def headers(self, decision: Decision) -> dict[str, str]:
        """The HTTP RateLimit header values of ``decision``, every limit listed.

        A limiter's decision (a ``RedisDecision`` of a ``RedisLimiter``)
        raises ``RateLimitTypeError`` (``invalid_type``), as an in-process
        ``Policy``'s ``headers`` does: the limiter's ``headers`` takes it."""
        if not isinstance(decision, (PolicyDecision, RedisPolicyDecision)):
            raise _type_error("decision", "a RedisPolicyDecision or PolicyDecision", decision)
        return decision.headers()

    @property
    def names(self) -> tuple[str, ...]:
        """The limits' names, in order."""
        return tuple(limit.name for limit in self._core.limits)

    @property
    def limits(self) -> tuple[PolicyLimit, ...]:
        """The limits, in order: each a ``PolicyLimit`` ``(name, by)``, as ``Policy.limits``."""
        return tuple(PolicyLimit(limit.name, limit.by) for limit in self._core.limits)

    def keyed_by(self, name: str) -> tuple[str, ...]:
        """The fields limit ``name`` is keyed by (empty for a global limit); ``RateLimitError``
        (``invalid_value``) for a name no limit has."""
        if not isinstance(name, str):
            # In Policy.keyed_by's words.
            raise RateLimitTypeError("`name` must be a str", "invalid_type")
        # A lone surrogate is no name (no limit could take it), refused as
        # Policy.keyed_by refuses it, before any is looked for.
        _utf8(name, "name")
        for limit in self._core.limits:
            if limit.name == name:
                return limit.by
        # As Policy.keyed_by raises it, in its words.
        raise _error(f"`name` is not the name of a limit in this policy: {name!r}")

    def __len__(self) -> int:
        """The number of limits (JS: ``policy.size``)."""
        return len(self._core.limits)

    def __repr__(self) -> str:
        # As Policy's repr, never the client.
        limits = "; ".join(
            f"{json.dumps(limit.name, ensure_ascii=False)} by {json.dumps(list(limit.by), ensure_ascii=False)}"
            for limit in self._core.limits
        )
        return f"<{type(self).__name__}: {limits}>"


def _fields(request: _Request) -> Mapping[str, Any]:
    """``request``'s fields (``None``: none), refused when it is no mapping,
    or when a field's name is no str or its value no key: every field, not
    only those a limit is keyed by, as an in-process ``Policy`` reads them
    (else a request with ``user=None`` was decided while Redis answered, and
    refused by an ``on_error`` Policy once it could not)."""
    if request is not None and not isinstance(request, Mapping):
        raise _type_error("request", "a mapping of field to str, bytes or int, or None", request)
    for field, value in (request or {}).items():
        if not isinstance(field, str):
            raise _type_error("request", "a mapping of str field names to str, bytes or int values, or None", request)
        _key_part(value, f"request[{field!r}]")
    return request or {}


def _policy_core(
    config: Union[None, str, Mapping[str, Any], Sequence[tuple[str, Union[Limiter, KeyedLimiter], Iterable[str]]]],
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
        limits = _listed_limits(config)
    else:
        limits = _policy_limits(config, algorithm, by)  # type: ignore[arg-type]
    if not limits:
        raise _error("`config`: a policy on Redis needs at least one limit", "zero_value")
    return _PolicyCore(limits, prefix, clock, on_error, batching)


class RedisPolicy(_PolicyMixin, _Sync):
    """Several limits decided together, all or nothing, in Redis, for a sync client.

    ``config`` is what ``ratekeeper.Policy`` takes (a dict ``{"limits":
    [...]}``, its JSON, or rate strings with ``algorithm`` and ``by``), or a
    list of ``(name, limiter, by)``, of at least one limit: ``None``, which
    ``Policy`` reads as the empty policy that ``add`` fills, ``[]`` or
    ``{"limits": []}`` raises ``RateLimitError`` (``zero_value``). Every
    request's keys share the hash tag of the fields all limits are keyed by
    (the whole policy shares one slot when some limit is global).

    ``names``, ``limits``, ``keyed_by(name)`` and ``len(policy)`` describe
    the limits as ``Policy``'s do; there is no ``add``: the limits are fixed
    at construction. A fallback ``Policy`` (``on_error``) asks every request
    for the fields its limits are keyed by, Redis up or down, as they are at
    the call (one added later too).
    """

    def try_acquire(self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None) -> RedisPolicyDecision:
        """Take ``cost`` units from every limit if each has them, and say what happened."""
        d = self._acquire(*self._asked(request), _cost(cost, self._core.limit), now)
        return d  # type: ignore[return-value]

    def try_acquire_batch(
        self, request: _Request, costs: Iterable[int], now: Optional[_Seconds] = None
    ) -> list[RedisPolicyDecision]:
        """Decide each of ``costs`` for ``request``, in order, in one round trip."""
        # The request first, then the costs, as in-process (an empty batch too).
        asked = self._asked(request)
        checked = _costs(costs, self._core.limit)
        return self._decide(*asked, "acquire", checked, now) if checked else []  # type: ignore[return-value]

    def peek(self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None) -> RedisPolicyDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        return self._decide(*self._asked(request), "peek", [_cost(cost, self._core.limit)], now)[0]  # type: ignore[return-value]

    def refund(self, request: _Request, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used, in every limit."""
        self._refund(self._keys(request), _refunded(cost), taken_at)

    def reserve(
        self,
        request: _Request = None,
        cost: int = 1,
        *,
        max_wait: Optional[_Seconds] = None,
        now: Optional[_Seconds] = None,
    ) -> RedisReservation:
        """Book ``cost`` units of every limit for the earliest slot they all fit, within ``max_wait``."""
        return self._reserve(*self._asked(request), _cost(cost, self._core.limit), max_wait, now)

    def acquire(self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of every limit are ours; raise ``RateLimited`` past ``timeout``
        (the wait booked). On the caller's ``clock=``, it waits until the slot has come on that
        clock (sleeping again what is left there); on the server's, it sleeps once. Interrupted
        (or the clock raising there), it gives the booking back: per limit key, a bucket's only
        while it is the key's latest (else its slot goes unused), a window's where it was counted."""
        target, keys = self._asked(request)
        cost = _cost(cost, self._core.limit)
        self._wait(lambda left: self._reserve(target, keys, cost, left, None), timeout)

    def reset(self, request: _Request) -> int:
        """Put ``request``'s key back to fresh, as a key never seen, in every
        limit keyed by fields it all gives, as ``Policy.reset``: one ``UNLINK``
        (and the keys of a ``Policy`` given as ``on_error``, reset first);
        how many of those limits Redis held the key in. A global limit is
        never reset, nor one keyed by a field ``request`` lacks; a request
        that would reset no limit raises ``RateLimitError``
        (``invalid_value``). An error of Redis raises: ``on_error`` answers
        decisions only."""
        keys = self._reset_fallback(request)
        held = self._unlink(keys)
        return held


class AsyncRedisPolicy(_PolicyMixin, _Async):
    """``RedisPolicy`` for a ``redis.asyncio.Redis`` client: the methods are coroutines."""

    async def try_acquire(
        self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None
    ) -> RedisPolicyDecision:
        """Take ``cost`` units from every limit if each has them, and say what happened."""
        d = await self._acquire(*self._asked(request), _cost(cost, self._core.limit), now)
        return d  # type: ignore[return-value]

    async def try_acquire_batch(
        self, request: _Request, costs: Iterable[int], now: Optional[_Seconds] = None
    ) -> list[RedisPolicyDecision]:
        """Decide each of ``costs`` for ``request``, in order, in one round trip."""
        # The request first, then the costs, as in-process (an empty batch too).
        asked = self._asked(request)
        checked = _costs(costs, self._core.limit)
        if not checked:
            return []
        return await self._take(*asked, checked, now)  # type: ignore[return-value]

    async def peek(
        self, request: _Request = None, cost: int = 1, now: Optional[_Seconds] = None
    ) -> RedisPolicyDecision:
        """The decision ``try_acquire`` would give, consuming nothing."""
        d = await self._decide(*self._asked(request), "peek", [_cost(cost, self._core.limit)], now)
        return d[0]  # type: ignore[return-value]

    async def refund(self, request: _Request, cost: int, *, taken_at: Optional[_Seconds] = None) -> None:
        """Give back ``cost`` units taken at ``taken_at`` and not used, in every limit."""
        await self._refund(self._keys(request), _refunded(cost), taken_at)

    async def reserve(
        self,
        request: _Request = None,
        cost: int = 1,
        *,
        max_wait: Optional[_Seconds] = None,
        now: Optional[_Seconds] = None,
    ) -> AsyncRedisReservation:
        """Book ``cost`` units of every limit for the earliest slot they all fit, within ``max_wait``;
        cancelled during the round trip, what Redis booked is given back (to a bucket only while
        it is the key's latest)."""
        return await self._reserve(*self._asked(request), _cost(cost, self._core.limit), max_wait, now)

    async def acquire(self, request: _Request = None, cost: int = 1, timeout: Optional[_Seconds] = None) -> None:
        """Wait until ``cost`` units of every limit are ours; raise ``RateLimited`` past ``timeout``
        (the wait booked). On the caller's ``clock=``, it waits until the slot has come on that
        clock (sleeping again what is left there); on the server's, it sleeps once. Cancelled (or
        the clock raising there), it raises at once and gives the booking back in a task of its
        own, once Redis answers for a booking in flight: per limit key, a bucket's only while it
        is the key's latest (else its slot goes unused), a window's where it was counted."""
        target, keys = self._asked(request)
        cost = _cost(cost, self._core.limit)
        await self._wait(lambda left, gone: self._reserve(target, keys, cost, left, None, gone), timeout)

    async def reset(self, request: _Request) -> int:
        """``RedisPolicy.reset``: the request's key back to fresh in every limit
        keyed by fields it all gives; how many of those limits Redis held it in."""
        keys = self._reset_fallback(request)
        held = await self._unlink(keys)
        return held

    acquire_async = acquire
