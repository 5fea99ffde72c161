"""A typed use of the public API, checked with `mypy --strict` (and run) by scripts/python.sh."""

from __future__ import annotations

import asyncio
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Coroutine, Literal, Optional

import ratekeeper
from ratekeeper import (
    Acquiring,
    Bandwidth,
    Decision,
    FixedWindow,
    Gcra,
    KeyedAcquiring,
    KeyedLimiter,
    LeakyBucket,
    Limiter,
    Policy,
    PolicyDecision,
    PolicyLimit,
    RateLimited,
    RateLimitError,
    RateLimitTypeError,
    Reservation,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)
from ratekeeper.asgi import RateLimitMiddleware, Scope, client_host, ip_key, request_fields

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # mypy depends on typing_extensions, so it is installed wherever this is checked
    from typing_extensions import assert_type


def admit(limiter: Limiter, cost: int = 1, now: float | None = None) -> bool:
    decision = limiter.try_acquire(cost, now=now)
    assert_type(decision, Decision)
    assert_type(decision.allowed, bool)
    assert_type(decision.remaining, int)
    assert_type(decision.limit, int)
    assert_type(decision.retry_after, float)
    assert_type(decision.reset_after, float)
    assert_type(decision.headers(), dict[str, str])
    assert_type(limiter.headers(decision), dict[str, str])
    return bool(decision)


def every_limiter(clock: Callable[[], float]) -> list[Limiter]:
    bucket = TokenBucket(5, 1, 1.0, initial_tokens=5, refill="interval", name="api", clock=clock)
    assert_type(bucket.capacity, int)
    assert_type(bucket.refill_tokens, int)
    assert_type(bucket.refill_period, float)
    assert_type(bucket.initial_tokens, int)
    assert_type(bucket.refill, Literal["greedy", "interval"])
    assert_type(bucket.bandwidths, tuple[Bandwidth, ...])
    both = TokenBucket.from_bandwidths([Bandwidth(10, 10, 1), Bandwidth(100, 100, 60, refill="greedy")])
    gcra = Gcra(3, Decimal("0.1"))
    assert_type(gcra.burst, int)
    assert_type(gcra.emission_interval, float)
    per_period = Gcra.per_period(3, 10, Fraction(1))
    queue = LeakyBucket(capacity=4, interval=0.25)
    assert_type(queue.capacity, int)
    assert_type(queue.interval, float)
    windows = [SlidingWindowLog(limit=4, window=5), SlidingWindowCounter(4, 5), FixedWindow(4, 5)]
    limiters: list[Limiter] = [bucket, both, gcra, per_period, queue, *windows]
    for limiter in limiters:
        assert_type(limiter.limit, int)
        assert_type(limiter.window, float)
        assert_type(limiter.algorithm, str)
        assert_type(limiter.name, str)
    return limiters


def operations(limiter: Limiter) -> None:
    assert_type(limiter.peek(now=0), Decision)
    reservation = limiter.reserve(1, max_wait=0.5, now=0)
    assert_type(reservation, Reservation)
    assert_type(reservation.ok, bool)
    assert_type(reservation.wait, float)
    assert_type(reservation.at, float)
    assert_type(reservation.cost, int)
    assert_type(reservation.decision, Optional[Decision])
    reservation.cancel()
    limiter.refund(1, taken_at=0)
    limiter.reconfigure(limiter, now=0)
    limiter.acquire(0, timeout=0)
    guard = limiter.acquiring(0, timeout=None)
    assert_type(guard, Acquiring)
    with guard:
        pass


def decorated(limiter: Limiter) -> None:
    @limiter.acquiring(cost=0)
    def add(x: int, *, y: int = 1) -> int:
        return x + y

    @limiter.acquiring(timeout=0)
    async def double(x: int) -> int:
        return 2 * x

    assert_type(add(1, y=2), int)
    unstarted: Coroutine[Any, Any, int] = double(2)  # the decorator keeps the signature
    unstarted.close()

    async def main() -> int:
        await limiter.acquire_async(0)
        async with limiter.acquiring(0):
            return await double(2)

    assert asyncio.run(main()) == 4
    assert add(1) == 2


def middleware() -> RateLimitMiddleware:
    async def app(scope: Scope, receive: Any, send: Any) -> None:
        pass

    def by_user(scope: Scope) -> Optional[str]:
        user = scope.get("user")
        return None if user is None else str(user)

    def fields(scope: Scope) -> Optional[dict[str, str | bytes | int]]:
        default = request_fields(scope)  # None: the client's address is unknown
        return None if default is None else {**default, "tenant": 7}

    assert_type(client_host({"type": "http"}), Optional[str])
    # An IPv6 client by its /64, or each address whole; ip_key in a key of one's own.
    assert_type(ip_key("2001:db8::1"), str)
    assert_type(ip_key("::1", None), str)
    assert_type(client_host({"type": "http"}, ipv6_subnet=64), Optional[str])
    RateLimitMiddleware(app, KeyedLimiter(TokenBucket(10, 1, 1)), ipv6_subnet=64)
    RateLimitMiddleware(app, Policy("10/second", by=["client"]), ipv6_subnet=None)
    RateLimitMiddleware(app, KeyedLimiter(TokenBucket(10, 1, 1)), key=lambda scope: ip_key(dict(scope["headers"])[b"x-real-ip"].decode(), 48))
    RateLimitMiddleware(app, FixedWindow(100, 60))
    RateLimitMiddleware(app, KeyedLimiter(TokenBucket(10, 1, 1)))
    policy = Policy()
    policy.add("per-client", TokenBucket(10, 1, 1), by=["client"])
    RateLimitMiddleware(app, policy)
    RateLimitMiddleware(app, policy, fields=fields)
    RateLimitMiddleware(app, policy, fields=fields, cost=lambda scope: 2 if scope.get("method") == "POST" else 1)

    # Each function may be async (a key looked up in a session store).
    async def by_session(scope: Scope) -> Optional[str]:
        return by_user(scope)

    async def is_health_check(scope: Scope) -> bool:
        return scope.get("path") == "/health"

    async def by_plan(scope: Scope) -> int:
        return 2

    RateLimitMiddleware(app, KeyedLimiter(TokenBucket(10, 1, 1)), key=by_session, skip=is_health_check, cost=by_plan)
    return RateLimitMiddleware(app, KeyedLimiter(TokenBucket(10, 1, 1)), key=by_user, cost=2)


def keyed(clock: Callable[[], float]) -> None:
    store = KeyedLimiter(Gcra(2, 0.5, clock=clock), max_keys=1000, eviction="refuse")
    assert_type(store.try_acquire("user:1"), Decision)
    assert_type(store.peek(b"user:1", 2, now=0), Decision)
    assert_type(store.try_acquire_batch(42, [1, 1], now=0), list[Decision])
    reservation = store.reserve("user:1", max_wait=1.0, now=0)
    assert_type(reservation, Reservation)
    reservation.cancel()
    store.refund("user:1", 1, taken_at=0)
    store.acquire("user:2", 0, timeout=0)
    with store.acquiring("user:3", 0):
        pass
    assert_type(store.headers(store.peek("user:1", 0)), dict[str, str])
    store.reclaim(now=10)
    assert_type(len(store), int)
    assert_type(store.max_keys, Optional[int])
    assert_type(store.eviction, Literal["nearest_fresh", "refuse"])
    assert_type(store.limiter, Limiter)
    assert_type(store.limit, int)
    assert_type(store.window, float)


def policies(clock: Callable[[], float]) -> None:
    policy = Policy(clock=clock)
    policy.add("per-user", Gcra(2, 0.5), by=["user"])
    policy.add("per-route", KeyedLimiter(FixedWindow(10, 60), max_keys=100), by=("user", "route"))
    policy.add("global", SlidingWindowLog(100, 60))
    decision = policy.try_acquire({"user": 42, "route": "/a"}, now=0)
    assert_type(decision, PolicyDecision)
    assert_type(decision.denied_by, Optional[str])
    assert_type(decision.limits, list[tuple[str, Decision]])
    assert_type(decision.allowed, bool)
    assert_type(policy.headers(decision), dict[str, str])
    assert_type(policy.peek({"user": b"1", "route": "/a"}), PolicyDecision)
    reservation = policy.reserve({"user": "1", "route": "/a"}, max_wait=0.5)
    reservation.cancel()
    policy.refund({"user": "1", "route": "/a"}, 1)
    policy.acquire({"user": "2", "route": "/a"}, 0, timeout=0)
    assert_type(policy.names, tuple[str, ...])
    assert_type(policy.keyed_by("per-user"), tuple[str, ...])
    assert_type(len(policy), int)
    assert_type(policy.limits, tuple[PolicyLimit, ...])
    name, by = policy.limits[0]
    assert_type(name, str)
    assert_type(by, tuple[str, ...])
    assert_type(policy.limits[0].by, tuple[str, ...])
    policy.reclaim()
    empty = Policy()
    assert empty.try_acquire()


def from_text() -> list[Policy]:
    daily = FixedWindow.with_calendar(1000, "day", name="daily")
    assert_type(daily.calendar, Optional[Literal["day", "week", "month"]])
    monthly = SlidingWindowCounter.with_calendar(10, "month")
    assert_type(monthly, SlidingWindowCounter)

    @ratekeeper.limit("5/second", algorithm="gcra", wait=False)
    def limited() -> int:
        return 1

    assert_type(limited(), int)
    return [
        Policy.from_rates("10/second;100/day", algorithm="gcra", by=["user"]),
        Policy.from_config({"limits": [{"name": "api", "rate": "10/second", "by": ["user"]}]}),
        Policy.from_config('{"limits": []}'),
        Policy("10/second", by=("user",)),
    ]


def decorators(clock: Callable[[], float]) -> None:
    @ratekeeper.limit(TokenBucket(5, 5, 1, clock=clock), wait=True, timeout=1.0)
    def fetch(url: str) -> bytes:
        return url.encode()

    @ratekeeper.limit(FixedWindow(5, 1, clock=clock), wait=False)
    async def afetch(url: str) -> bytes:
        return url.encode()

    assert_type(fetch("a"), bytes)
    assert asyncio.run(afetch("b")) == b"b"

    # Per key: the key function takes the call's arguments.
    @ratekeeper.limit("5/second", key=lambda user, *a, **k: user)
    def per_user(user: str, page: int = 0) -> list[int]:
        return [page]

    @ratekeeper.limit(KeyedLimiter(Gcra(5, 0.2, clock=clock)), key=lambda user: user, wait=False, cost=2)
    async def aper_user(user: bytes) -> bytes:
        return user

    policy = Policy(clock=clock)
    policy.add("per-user", TokenBucket(5, 5, 1), by=["user"])

    @ratekeeper.limit(policy, key=lambda user, route: {"user": user, "route": route}, timeout=1.0)
    def by_request(user: int, route: str) -> str:
        return route

    keyed = ratekeeper.limit(TokenBucket(5, 5, 1, clock=clock), key=lambda *a, **k: 1)
    assert_type(keyed, KeyedAcquiring)
    assert_type(per_user("a", 2), list[int])
    assert asyncio.run(aper_user(b"b")) == b"b"
    assert_type(by_request(1, "/"), str)


def state() -> None:
    gcra = Gcra(3, 0.1)
    gcra.try_acquire(now=0)
    data = gcra.to_bytes()
    assert_type(data, bytes)
    copy = Gcra.from_bytes(data, 3, 0.1)
    assert_type(copy, Gcra)
    copy.restore(bytearray(data))
    try:
        copy.restore(b"rk")
    except RateLimitError as error:
        assert error.code == "state_truncated"
    banded = TokenBucket.from_bandwidths([Bandwidth(5, 5, 1), Bandwidth(50, 50, 60)], name="banded")
    bucket_copy = TokenBucket.from_bytes(banded.to_bytes(), banded.bandwidths, name="banded")
    assert_type(bucket_copy, TokenBucket)
    assert_type(TokenBucket.from_bytes(TokenBucket(5, 5, 1).to_bytes(), 5, 5, 1, refill="greedy"), TokenBucket)


def main() -> None:
    now = [0.0]
    limiters = every_limiter(lambda: now[0])
    for limiter in limiters:
        operations(limiter)
        decorated(limiter)
    assert admit(limiters[0], now=0)
    assert admit(limiters[-1], 2, now=0.5)
    decisions: set[Decision] = {limiters[0].try_acquire(now=0), limiters[1].peek(0)}
    assert decisions
    assert isinstance(middleware().limiter, KeyedLimiter)
    keyed(lambda: now[0])
    policies(lambda: now[0])
    decorators(lambda: now[0])
    state()
    assert len(from_text()) == 4
    try:
        limiters[0].try_acquire(100, now=0)
    except RateLimitTypeError as error:
        assert_type(error.code, str)
        raise
    except RateLimitError as error:
        assert_type(error.code, str)
        assert error.code == "cost_exceeds_limit"
    window = FixedWindow(1, 60)
    window.acquire(timeout=0)
    try:
        window.acquire(timeout=0)
    except RateLimited as error:
        assert_type(error.retry_after, float)
        assert error.code == "rate_limited" and error.retry_after > 0
    assert_type(ratekeeper.__version__, str)


if __name__ == "__main__":
    main()
