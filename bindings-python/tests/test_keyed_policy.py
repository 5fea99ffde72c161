"""KeyedLimiter and Policy: keys, batches, reclaim, bounds, waiting, all-or-nothing
policies (across threads too), and the ratekeeper.limit decorator."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Mapping

import pytest
from limiters import ALL, FakeClock, Make

import ratekeeper
from ratekeeper import _wait
from ratekeeper import (
    Bandwidth,
    Decision,
    FixedWindow,
    Gcra,
    KeyedLimiter,
    LeakyBucket,
    Policy,
    PolicyDecision,
    PolicyLimit,
    RateLimited,
    RateLimitError,
    RateLimitTypeError,
    SlidingWindowLog,
    TokenBucket,
)


# --- KeyedLimiter ---------------------------------------------------------


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_each_key_is_its_own_limiter(make: Make) -> None:
    store = KeyedLimiter(make())
    alone = make()
    assert (store.limit, store.window, store.algorithm, store.name) == (
        alone.limit,
        alone.window,
        alone.algorithm,
        alone.name,
    )
    for now in (0.0, 0.0, 0.1, 0.3, 0.3, 0.3, 1.5):
        assert store.try_acquire("a", 1, now=now) == alone.try_acquire(1, now=now)
        assert store.peek("b", 1, now=now) == make().peek(1, now=now)
    assert len(store) == 1  # peek inserts nothing


def test_a_keyed_decision_kept_never_changes() -> None:
    store = KeyedLimiter(TokenBucket(3, 1, 1, name="per-user"))
    first = store.try_acquire("a", now=0)
    batch = store.try_acquire_batch("b", [1, 1, 1, 1], now=0)
    for key in ("a", "b", "c", "a"):
        store.try_acquire(key, 2, now=0)
    assert (first.allowed, first.remaining) == (True, 2)
    assert [(d.allowed, d.remaining) for d in batch] == [(True, 2), (True, 1), (True, 0), (False, 0)]
    assert first.headers()["RateLimit"] == '"per-user";r=2;t=1'


def test_keys_are_str_bytes_or_int_and_ints_are_their_digits() -> None:
    store = KeyedLimiter(FixedWindow(3, 60))
    store.try_acquire(42, now=0)
    store.try_acquire("42", now=0)
    store.try_acquire(b"42", now=0)
    assert not store.peek(42, now=0)
    assert len(store) == 1
    store.try_acquire("é", now=0)
    assert store.peek("é".encode(), now=0).remaining == 1  # after the peek's cost of 1
    big = 2**100
    store.try_acquire(big, now=0)
    assert store.peek(str(big), now=0).remaining == 1
    for small in (-7, -(2**63), 2**63 - 1, 0):
        store.try_acquire(small, now=0)
        assert store.peek(str(small), now=0).remaining == 1
    long_key = "k" * 1000
    store.try_acquire(long_key, 3, now=0)
    assert not store.peek(long_key, now=0)
    for text in ("😀" * 20, "€" * 100, "\x00k"):
        store.try_acquire(text, 3, now=0)
        assert store.peek(text.encode(), 0, now=0).remaining == 0
    # A str that is not text (a lone surrogate) has no UTF-8: a bad value, naming the key.
    with pytest.raises(RateLimitError, match="`key` must be valid Unicode text") as refused:
        store.try_acquire("\ud800", now=0)
    assert refused.value.code == "invalid_value"
    assert store.peek("k", now=0).remaining == 2, "the failure left the store working"
    if sys.version_info >= (3, 11):
        # An int of more digits than Python writes as text has no key
        # either: a bad value naming the argument, not Python's bare ValueError.
        digits = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(640)  # the least Python takes
        try:
            with pytest.raises(RateLimitError, match="^`key` has more digits than Python writes") as refused:
                store.try_acquire(10**700, now=0)
            assert refused.value.code == "invalid_value"
            with pytest.raises(RateLimitError, match=r"^`request\['user'\]` has more digits") as refused:
                Policy("1/second", by=["user"]).try_acquire({"user": 10**700}, now=0)
            assert refused.value.code == "invalid_value"
        finally:
            sys.set_int_max_str_digits(digits)
    for bad in (True, 1.5, None, ["a"]):
        with pytest.raises(RateLimitTypeError, match="`key` must be a str, bytes or int") as raised:
            store.try_acquire(bad, now=0)  # type: ignore[arg-type]
        assert raised.value.code == "invalid_type"
    # A policy's request names the field whose value is wrong, as the Redis policy does.
    policy = Policy("1/second", by=["user"])
    for bad, kind in ((1.5, "float"), (None, "NoneType"), (True, "bool")):
        with pytest.raises(RateLimitTypeError) as raised:
            policy.try_acquire({"user": bad}, now=0)  # type: ignore[dict-item]
        assert str(raised.value) == f"`request['user']` must be a str, bytes or int, not {kind}"
        assert raised.value.code == "invalid_type"
    with pytest.raises(RateLimitError, match=r"^`request\['user'\]` must be valid Unicode text") as refused:
        policy.try_acquire({"user": "\ud800"}, now=0)
    assert refused.value.code == "invalid_value"


def test_the_limiter_gives_its_configuration_name_and_clock_not_its_state() -> None:
    clock = FakeClock(7.0)
    used = TokenBucket(2, 1, 1, name="per-user", clock=clock)
    used.try_acquire(2)
    store = KeyedLimiter(used)
    assert store.try_acquire("a").remaining == 1  # fresh, at the limiter's clock
    assert store.name == "per-user"
    assert repr(store) == "KeyedLimiter(TokenBucket(capacity=2, refill_tokens=1, refill_period=1.0, name='per-user'))"
    limiter = store.limiter
    assert isinstance(limiter, TokenBucket) and limiter.peek(0, now=0).remaining == 2
    assert (limiter.name, limiter.try_acquire(2).allowed) == ("per-user", True)
    assert limiter.peek().retry_after == 1.0  # on the store's clock, which stands still
    assert store.headers(store.peek("a", 0)) == {
        "RateLimit-Policy": '"per-user";q=2;w=2',
        "RateLimit": '"per-user";r=1;t=1',
    }
    with pytest.raises(RateLimitTypeError, match="`limiter` must be a ratekeeper limiter"):
        KeyedLimiter("10/second")  # type: ignore[arg-type]


# What each step below adds to the peak resident set of a fresh interpreter
# holding two logs of the largest limit, whose rings (32 MiB each) are
# allocated but never written, so not yet resident.
TAKES_A_LOG = """
import resource, sys
import ratekeeper
log = ratekeeper.SlidingWindowLog(limit=2**20, window=60)
other = ratekeeper.SlidingWindowLog(limit=2**20, window=30)
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
before = peak()
STEP
print((peak() - before) * (1 if sys.platform == "darwin" else 1024) // 2**20)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="resource is POSIX")
@pytest.mark.parametrize(
    "step, ring",
    [
        ("ratekeeper.KeyedLimiter(log)", 0),
        ("ratekeeper.Policy().add('a', log)", 0),
        ("ratekeeper.guarantee(log)", 0),
        ("repr(log)", 0),
        ("log.reconfigure(other)", 32),  # the log's new ring
        ("log.restore(log.to_bytes())", 0),
        ("ratekeeper.SlidingWindowLog.from_bytes(log.to_bytes(), limit=2**20, window=60)", 32),  # its log's ring
    ],
)
def test_what_takes_a_limiters_configuration_copies_no_log(step: str, ring: int) -> None:
    # Each took a clone of the limiter to read its configuration (a
    # restore, to read the state into, so that a failed one changed
    # nothing): a log's ring copied (32 MiB written at its largest limit),
    # then dropped.
    source = TAKES_A_LOG.replace("STEP", step)
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120, check=True)
    grown = int(done.stdout)
    assert grown < ring + 8, f"{step} grew the peak resident set by {grown} MiB"


def test_batches_decide_as_one_by_one() -> None:
    costs = [1, 2, 0, 3, 1, 1]
    batch = KeyedLimiter(TokenBucket(5, 1, 1))
    single = KeyedLimiter(TokenBucket(5, 1, 1))
    decisions = batch.try_acquire_batch("hot", costs, now=1)
    assert all(isinstance(d, Decision) for d in decisions)
    assert decisions == [single.try_acquire("hot", cost, now=1) for cost in costs]
    assert [d.allowed for d in decisions] == [True, True, True, False, True, True]
    assert batch.try_acquire_batch("hot", [], now=1) == []
    before = batch.peek("hot", now=1)
    with pytest.raises(RateLimitError) as raised:
        batch.try_acquire_batch("hot", [1, 6], now=1)
    assert raised.value.code == "cost_exceeds_limit"
    assert batch.peek("hot", now=1) == before  # nothing decided
    with pytest.raises(RateLimitTypeError, match=r"^`costs` must be an iterable of int$"):
        batch.try_acquire_batch("hot", 3, now=1)  # type: ignore[arg-type]
    # An item of the wrong type is said of `costs`, as JS says it; a wrong
    # value of `cost`, as every binding says each one's.
    with pytest.raises(RateLimitTypeError, match=r"^`costs` must be an iterable of int \(an item is a str\)$"):
        batch.try_acquire_batch("hot", [1, "2"], now=1)  # type: ignore[list-item]
    with pytest.raises(RateLimitTypeError, match=r"\(an item is a bool\)$"):
        batch.try_acquire_batch("hot", [True], now=1)
    with pytest.raises(RateLimitError, match=r"^`cost` must not be negative$"):
        batch.try_acquire_batch("hot", [1, -1], now=1)
    assert batch.peek("hot", now=1) == before  # nothing decided


def test_a_batch_names_its_first_cost_above_the_limit_before_a_full_store() -> None:
    # As the JS bindings do (found by tests/differential): the first cost
    # above the limit, not the largest, and before the refusal of a new key.
    store = KeyedLimiter(TokenBucket(5, 1, 1), max_keys=1, eviction="refuse")
    with pytest.raises(RateLimitError, match="`cost` 6 exceeds the limit 5"):
        store.try_acquire_batch("a", [4, 6, 2**53 - 1], now=0)
    store.try_acquire("a", 1, now=0)
    with pytest.raises(RateLimitError) as raised:
        store.try_acquire_batch("new", [0, 1, 7], now=0)
    assert raised.value.code == "cost_exceeds_limit"
    with pytest.raises(RateLimitError) as raised:
        store.try_acquire_batch("new", [0, 1], now=0)
    assert raised.value.code == "store_full"
    assert store.try_acquire_batch("new", [0, 0], now=0) == [store.peek("new", 0, now=0)] * 2


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_reclaim_drops_fresh_keys_and_keeps_every_answer(make: Make) -> None:
    store = KeyedLimiter(make())
    for index in range(300):
        store.try_acquire(f"user:{index}", 1 + index % 3, now=index * 0.01)
    held = len(store)  # the store drops fresh keys on its own as it grows
    assert 0 < held <= 300
    later = 3.2
    before = [store.peek(f"user:{index}", now=later) for index in range(300)]
    store.reclaim(now=later)
    assert len(store) <= held
    assert [store.peek(f"user:{index}", now=later) for index in range(300)] == before
    store.reclaim(now=10_000)
    assert len(store) == 0


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_reset_puts_a_key_back_to_fresh_and_leaves_the_others(make: Make) -> None:
    store = KeyedLimiter(make())
    assert store.reset("alice") is False  # never seen: fresh already
    while store.try_acquire("alice", now=1).allowed:
        pass
    store.try_acquire(b"bob", now=1)
    assert store.reset(b"alice") is True  # bytes, str or int: the same key
    fresh = make()
    assert store.peek("alice", now=1) == fresh.peek(now=1)
    assert store.try_acquire("alice", now=1) == fresh.try_acquire(now=1)
    assert store.peek("bob", 0, now=1).reset_after > 0
    with pytest.raises(RateLimitTypeError, match="`key`"):
        store.reset(1.5)  # type: ignore[arg-type]


def test_a_reset_forgets_the_keys_bookings() -> None:
    clock = FakeClock()
    store = KeyedLimiter(ratekeeper.Gcra(1, 1.0, clock=clock))
    store.try_acquire("k")
    first = store.reserve("k", max_wait=10)
    second = store.reserve("k", max_wait=10)
    assert (first.wait, second.wait) == (1.0, 2.0)
    store.reset("k")
    assert store.peek("k").allowed  # the bookings are forgotten
    first.cancel()  # gives nothing back: the key is fresh
    assert store.try_acquire("k").allowed and not store.try_acquire("k").allowed


def test_max_keys_refuse_and_nearest_fresh() -> None:
    refuse = KeyedLimiter(FixedWindow(1, 60), max_keys=2, eviction="refuse")
    assert (refuse.max_keys, refuse.eviction) == (2, "refuse")
    refuse.try_acquire("a", now=0)
    refuse.try_acquire("b", now=0)
    with pytest.raises(RateLimitError) as raised:
        refuse.try_acquire("c", now=0)
    assert raised.value.code == "store_full"
    assert str(raised.value) == (
        "the store holds its maximum of 2 keys, and its eviction is 'refuse': a new key waits until a key held is back to fresh"
    )
    assert refuse.try_acquire("c", now=60)  # a and b are fresh again: reclaimed
    evict = KeyedLimiter(Gcra(1, 10), max_keys=16)
    assert (evict.max_keys, evict.eviction) == (16, "nearest_fresh")
    for index in range(100):
        evict.try_acquire(index, now=index * 0.1)
    assert len(evict) <= 16
    for bad, code in ((0, "zero_value"), (-1, "invalid_value"), ("5", "invalid_type")):
        with pytest.raises(RateLimitError) as raised:
            KeyedLimiter(Gcra(1, 1), max_keys=bad)  # type: ignore[arg-type]
        assert raised.value.code == code
    with pytest.raises(RateLimitError, match="`eviction` must be 'nearest_fresh' or 'refuse'"):
        KeyedLimiter(Gcra(1, 1), eviction="oldest")  # type: ignore[arg-type]
    # Without a bound no key is ever refused: that choice is refused. The
    # default may be named, so a store's getters copy it.
    with pytest.raises(RateLimitError, match="`eviction` is \"refuse\", which needs a bound") as raised:
        KeyedLimiter(Gcra(1, 1), eviction="refuse")
    assert raised.value.code == "invalid_value"
    for eviction in ("nearest_fresh", "refuse"):
        assert KeyedLimiter(Gcra(1, 1), max_keys=3, eviction=eviction).eviction == eviction
    unbounded = KeyedLimiter(Gcra(1, 1))
    copy = KeyedLimiter(unbounded.limiter, max_keys=unbounded.max_keys, eviction=unbounded.eviction)
    assert (copy.max_keys, copy.eviction) == (None, "nearest_fresh")
    with pytest.raises(RateLimitError, match="eviction") as raised:
        ratekeeper.Policy({"limits": [{"name": "a", "rate": "1/second", "by": ["ip"], "eviction": "refuse"}]})
    assert raised.value.code == "invalid_value"


def test_keyed_reservations_and_refunds_are_per_key(clock: FakeClock) -> None:
    store = KeyedLimiter(TokenBucket(1, 1, 2, clock=clock))
    store.try_acquire("a")
    reservation = store.reserve("a")
    assert (reservation.ok, reservation.wait) == (True, 2.0)
    assert store.peek("b")  # another key is untouched
    reservation.cancel()
    assert store.reserve("a", max_wait=0).ok is False
    store.refund("a", 1)
    assert store.try_acquire("a")


def test_keyed_waiting_acquire_is_per_key(clock: FakeClock) -> None:
    store = KeyedLimiter(Gcra(1, 0.5, clock=clock))
    store.acquire("a")
    store.acquire("b")
    assert clock.sleeps == []
    store.acquire("a")
    assert clock.sleeps == [0.5]
    with pytest.raises(RateLimited) as raised:
        store.acquire("a", timeout=0)
    assert raised.value.retry_after == 0.5

    async def main() -> None:
        await store.acquire_async("b")
        async with store.acquiring("c"):
            pass

    asyncio.run(main())
    assert clock.sleeps == [0.5]  # "b" was free again by then

    @store.acquiring("d", timeout=0)
    def once() -> str:
        return "ran"

    assert once() == "ran"
    with pytest.raises(RateLimited):
        once()


# --- Policy ---------------------------------------------------------------


def per_user_and_global(user_limit: int, global_limit: int, clock: Any = None) -> Policy:
    policy = Policy(clock=clock)
    policy.add("per-user", FixedWindow(user_limit, 1e6), by=["user"])
    policy.add("global", FixedWindow(global_limit, 1e6))
    return policy


def test_policy_decisions_combine_every_limit() -> None:
    policy = per_user_and_global(2, 3)
    assert (len(policy), policy.names, policy.keyed_by("per-user"), policy.keyed_by("global")) == (
        2,
        ("per-user", "global"),
        ("user",),
        (),
    )
    first = policy.try_acquire({"user": "alice"}, 2, now=0)
    assert isinstance(first, PolicyDecision) and isinstance(first, Decision)
    assert (first.allowed, first.remaining, first.limit, first.denied_by) == (True, 0, 2, None)
    assert [(name, d.remaining) for name, d in first.limits] == [("per-user", 0), ("global", 1)]
    denied = policy.try_acquire({"user": "alice"}, 1, now=0)
    assert (bool(denied), denied.denied_by) == (False, "per-user")
    assert repr(denied).startswith("PolicyDecision(allowed=False, remaining=0, limit=2, retry_after=")
    assert repr(denied).endswith(", denied_by='per-user')")
    # The denial took nothing from the global limit: bob gets its last unit.
    assert policy.try_acquire({"user": "bob"}, 1, now=0)
    assert policy.try_acquire({"user": "carol"}, now=0).denied_by == "global"
    headers = policy.headers(denied)
    assert headers == denied.headers()
    assert headers["RateLimit-Policy"] == '"per-user";q=2;w=1000000, "global";q=3;w=1000000'
    assert headers["RateLimit"] == '"per-user";r=0;t=1000000, "global";r=1;t=1000000'
    assert headers["Retry-After"] == "1000000"
    own = dict(denied.limits)["global"]
    assert own.headers() == {"RateLimit-Policy": '"global";q=3;w=1000000', "RateLimit": '"global";r=1;t=1000000'}
    # A name no limit has is a bad argument, as in JS (a RangeError
    # `invalid_value` there): it raised a bare KeyError, outside
    # RateLimitError and without a code.
    with pytest.raises(RateLimitError, match="^`name` is not the name of a limit in this policy: 'nope'$") as raised:
        policy.keyed_by("nope")
    assert type(raised.value) is RateLimitError
    assert raised.value.code == "invalid_value"


def test_policy_limits_list_each_limit_as_js_does() -> None:
    # JS lists `{ name, by }`; Python had only names and keyed_by(name).
    policy = per_user_and_global(2, 3)
    assert policy.limits == (PolicyLimit("per-user", ("user",)), PolicyLimit("global", ()))
    assert [(limit.name, limit.by) for limit in policy.limits] == [("per-user", ("user",)), ("global", ())]
    name, by = policy.limits[0]
    assert (name, by) == ("per-user", ("user",))
    assert repr(policy.limits[1]) == "PolicyLimit(name='global', by=())"
    assert pickle.loads(pickle.dumps(policy.limits)) == policy.limits
    assert tuple(limit.name for limit in policy.limits) == policy.names
    assert all(policy.keyed_by(limit.name) == limit.by for limit in policy.limits)
    assert Policy().limits == ()
    rates = Policy.from_rates("2/second;3/minute", by=["user", "route"])
    assert rates.limits == (("2/second", ("user", "route")), ("3/minute", ("user", "route")))
    policy.add("per-route", FixedWindow(1, 60), by=("route",))
    assert policy.limits[-1] == ("per-route", ("route",)) and len(policy.limits) == len(policy) == 3


def test_a_policy_decision_kept_never_changes() -> None:
    # A policy answers its last PolicyDecision again once nobody holds it
    # (src/recycle.rs), rewriting its numbers and each limit's decision.
    policy = per_user_and_global(2, 3)
    first = policy.try_acquire({"user": "alice"}, 2, now=0)
    limits = [(name, d.remaining) for name, d in first.limits]
    for user in ("alice", "bob", "carol", "bob"):
        policy.try_acquire({"user": user}, now=0)  # each dropped at once
    denied = policy.try_acquire({"user": "bob"}, now=0)
    assert (first.allowed, first.remaining, first.denied_by) == (True, 0, None)
    assert [(name, d.remaining) for name, d in first.limits] == limits == [("per-user", 0), ("global", 1)]
    assert first.headers()["RateLimit"] == '"per-user";r=0;t=1000000, "global";r=1;t=1000000'
    assert (denied.allowed, denied.denied_by) == (False, "global")
    # A limit added since: the next answer lists it.
    policy.add("per-route", FixedWindow(5, 1), by=["route"])
    del denied
    third = policy.peek({"user": "dave", "route": "/a"}, now=0)
    assert [name for name, _ in third.limits] == ["per-user", "global", "per-route"]


def test_a_policy_is_freed_once_unreferenced() -> None:
    # A policy keeps its last PolicyDecision, which refers back to the policy:
    # a cycle that the garbage collector must see, and break.
    import gc
    import weakref

    class Clock:
        def __call__(self) -> float:
            return 0.0

    clock = Clock()
    freed = weakref.ref(clock)
    policy = Policy("10/second", by=["user"], clock=clock)
    decision = policy.try_acquire({"user": "a"})
    limits = decision.limits
    del policy, clock, decision, limits
    gc.collect()
    assert freed() is None


@pytest.mark.parametrize("kind", ["limiter", "keyed", "policy"])
def test_an_object_whose_clock_refers_back_is_freed(kind: str) -> None:
    # A service that passes its own bound method as the clock: service ->
    # limiter -> clock -> service, a cycle the garbage collector must see.
    import gc
    import weakref

    class Service:
        def __init__(self) -> None:
            bucket = TokenBucket(10, 1, 1, clock=self.now)
            self.limiter: Any = {
                "limiter": bucket,
                "keyed": KeyedLimiter(bucket),
                "policy": Policy("10/second", clock=self.now),
            }[kind]

        def now(self) -> float:
            return 0.0

    service = Service()
    target: tuple[Any, ...] = {"limiter": (), "keyed": ("k",), "policy": ({},)}[kind]
    assert service.limiter.try_acquire(*target)
    # Reservations kept beside it refer to it too: one booked, one refused.
    service.booked = service.limiter.reserve(*target, 9)  # type: ignore[attr-defined]
    service.refused = service.limiter.reserve(*target, 1, max_wait=0)  # type: ignore[attr-defined]
    assert service.booked and not service.refused  # type: ignore[attr-defined]
    freed = weakref.ref(service)
    del service
    gc.collect()
    assert freed() is None


def test_requests_of_any_mapping_many_and_long_fields() -> None:
    import collections
    import types

    policy = Policy()
    policy.add("by-all", FixedWindow(1, 60), by=["a", "b", "c", "d", "e", "f"])
    long = "x" * 300
    request: dict[str, str | bytes | int] = {"a": long, "b": b"\xff" * 100, "c": 2**80, "d": "é", "e": -7, "f": ""}
    assert policy.try_acquire(request, now=0)
    same: list[Mapping[str, str | bytes | int]] = [
        collections.OrderedDict(request),
        types.MappingProxyType(request),
        {**request, "g": "ignored"},
        {"f": "", **request},  # another order
    ]
    for alike in same:
        assert not policy.peek(alike, now=0)
    assert policy.peek({**request, "a": long + "y"}, now=0)
    assert policy.peek({**request, "c": 2**80 + 1}, now=0)

    class Index:
        """An int-like value whose __index__ changes the request it is in."""

        def __init__(self, into: dict[str, Any]) -> None:
            self.into = into

        def __index__(self) -> int:
            self.into["added"] = 1
            return 7

    changing: dict[str, Any] = {**request}
    changing["e"] = Index(changing)
    assert policy.try_acquire(changing, now=0)  # e=7, another key
    assert "added" in changing
    assert not policy.peek({**request, "e": 7}, now=0)


def test_requests_fields_and_their_errors() -> None:
    policy = Policy()
    policy.add("per-user-route", FixedWindow(1, 60), by=["user", "route"])
    assert policy.try_acquire({"user": 42, "route": b"/a", "extra": "ignored"}, now=0)
    assert not policy.peek({"user": "42", "route": "/a"}, now=0)
    assert policy.peek({"user": "4", "route": "2/a"}, now=0)  # no accidental concatenation
    # The field and the limit are named, as the Redis policy names them, by every operation.
    lacks_route = "`request` lacks the field 'route' that limit 'per-user-route' is keyed by"
    with pytest.raises(RateLimitError) as raised:
        policy.try_acquire({"user": "42"}, now=0)
    assert (str(raised.value), raised.value.code) == (lacks_route, "invalid_value")
    for operation in (policy.peek, policy.reserve, policy.acquire):
        with pytest.raises(RateLimitError) as raised:
            operation({"user": "42"})
        assert str(raised.value) == lacks_route
    with pytest.raises(RateLimitError) as raised:
        policy.refund({"user": "42"}, 1, taken_at=0)
    assert str(raised.value) == lacks_route
    with pytest.raises(RateLimitError, match="`request` lacks the field 'user'"):
        policy.try_acquire(now=0)
    for bad in ("user=1", [("user", "1")], {"user": 1.5}, {1: "x"}):
        with pytest.raises(RateLimitTypeError, match=r"`request(\['user'\])?` must be"):
            policy.try_acquire(bad, now=0)  # type: ignore[arg-type]
    assert Policy().try_acquire(now=0).remaining == 2**64 - 1  # no limit: everything passes


def test_policy_construction_errors() -> None:
    policy = Policy()
    policy.add("a", Gcra(1, 1))
    with pytest.raises(RateLimitError, match="`name` is already the name of a limit") as raised:
        policy.add("a", Gcra(1, 1))
    assert raised.value.code == "invalid_value"
    # A str passes the type checker (an iterable of its characters): the
    # message says what to write.
    with pytest.raises(RateLimitTypeError, match=r"`by` must be an iterable of str field names, not a str \(one field: by=\[name\]\)"):
        policy.add("b", Gcra(1, 1), by="user")
    with pytest.raises(RateLimitTypeError, match="`by` must be an iterable of str field names$"):
        policy.add("b", Gcra(1, 1), by=["user", 5])  # type: ignore[list-item]
    with pytest.raises(RateLimitTypeError, match=r"^`limiter` must be a ratekeeper limiter \(TokenBucket, Gcra, LeakyBucket, \.\.\.\) or a KeyedLimiter$"):
        policy.add("b", 5)  # type: ignore[arg-type]
    with pytest.raises(RateLimitError, match="`algorithm` applies only to a rate string; a configuration"):
        Policy({"limits": []}, algorithm="gcra")
    # The argument given is the one named; without rates, the message says so.
    with pytest.raises(RateLimitError, match="`by` applies only to a rate string; a configuration"):
        Policy({"limits": []}, by=["user"])
    with pytest.raises(RateLimitError, match="`by` applies only to a rate string, and none was given"):
        Policy(by=["user"])
    with pytest.raises(RateLimitTypeError, match="`config` must be a mapping or a JSON string"):
        Policy(5)  # type: ignore[arg-type]
    assert len(policy) == 1


def test_a_keyed_limiter_in_a_policy_brings_its_bound() -> None:
    policy = Policy()
    policy.add("per-user", KeyedLimiter(FixedWindow(1, 60), max_keys=1, eviction="refuse"), by=["user"])
    assert policy.try_acquire({"user": "a"}, now=0)
    with pytest.raises(RateLimitError) as raised:
        policy.try_acquire({"user": "b"}, now=0)
    assert raised.value.code == "store_full"


def test_policy_reserve_books_every_limit_and_cancel_gives_all_back() -> None:
    policy = Policy()
    policy.add("fast", TokenBucket(1, 1, 1), by=["user"])
    policy.add("slow", TokenBucket(1, 1, 4))
    assert policy.try_acquire({"user": "a"}, now=0)
    reservation = policy.reserve({"user": "a"}, now=0)
    assert (reservation.ok, reservation.wait, reservation.at) == (True, 4.0, 4.0)
    refused = policy.reserve({"user": "b"}, max_wait=1, now=0)
    assert not refused.ok
    assert isinstance(refused.decision, PolicyDecision) and refused.decision.denied_by == "slow"
    reservation.cancel()
    assert policy.reserve({"user": "b"}, max_wait=4, now=0).ok
    policy.refund({"user": "b"}, 1, taken_at=4)
    assert policy.peek({"user": "b"}, now=4)


def test_policy_reserve_counts_every_limit_where_the_request_proceeds() -> None:
    policy = Policy()
    policy.add("fast", SlidingWindowLog(2, 0.1))
    policy.add("slow", SlidingWindowLog(1, 1))
    assert policy.try_acquire(None, now=0)
    reservation = policy.reserve(None, now=0)
    assert (reservation.ok, reservation.wait) == (True, 1.0)

    def fast(at: float) -> int:
        return policy.peek(None, 0, now=at).limits[0][1].remaining

    # "fast" could have taken it at once, but holds it at 1 s, where it proceeds.
    assert (fast(1), fast(1.099), fast(1.1)) == (1, 1, 2)
    reservation.cancel()
    assert fast(1) == 2


def give_back_after(subject: Any, target: Any, how: str, between: Callable[[], None]) -> None:
    """Books ``target`` (a policy's request, a keyed limiter's key) of
    ``subject`` for a slot to come, then calls ``between`` while it waits,
    then gives the booking back: ``cancel()`` of a reservation, a
    ``KeyboardInterrupt`` in ``acquire``'s sleep, or the cancelled task of
    ``acquire_async``."""
    if how == "cancel":
        reservation = subject.reserve(target)
        assert reservation.wait > 0
        between()
        reservation.cancel()
    elif how == "acquire":

        def interrupted(seconds: float) -> None:
            between()
            raise KeyboardInterrupt

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(time, "sleep", interrupted)
            with pytest.raises(KeyboardInterrupt):
                subject.acquire(target)
    else:

        async def main() -> None:
            slept = asyncio.Event()

            async def sleep(seconds: float) -> None:
                slept.set()
                await asyncio.Event().wait()  # until cancelled

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(asyncio, "sleep", sleep)
                task = asyncio.ensure_future(subject.acquire_async(target))
                await slept.wait()
                between()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task

        asyncio.run(main())


@pytest.mark.parametrize("how", ["cancel", "acquire", "acquire_async"])
def test_a_booking_gives_nothing_back_to_a_limit_added_after_it(how: str) -> None:
    clock = FakeClock(0.0)
    policy = Policy(clock=clock)
    policy.add("per-user", TokenBucket(1, 1, 60), by=["user"])
    assert policy.try_acquire({"user": 1})

    def add_a_global_limit_and_spend_it() -> None:
        policy.add("global", FixedWindow(1, 1000))
        assert policy.try_acquire({"user": 2})

    give_back_after(policy, {"user": 1}, how, add_a_global_limit_and_spend_it)
    # "global" never held user 1's booking: giving it back there admitted a
    # second request in a window of one.
    denied = policy.try_acquire({"user": 3})
    assert (denied.allowed, denied.denied_by) == (False, "global")
    # "per-user" got it back: user 1 waits only for its refill, as it did before.
    assert policy.peek({"user": 1}).limits[0][1].retry_after == 60.0


@pytest.mark.parametrize("how", ["cancel", "acquire", "acquire_async"])
def test_a_booking_is_given_back_though_a_limit_added_after_it_needs_another_field(how: str) -> None:
    clock = FakeClock(0.0)
    policy = Policy(clock=clock)
    policy.add("global", FixedWindow(1, 60))
    assert policy.try_acquire(None)

    def add_a_limit_by_user() -> None:
        policy.add("per-user", FixedWindow(5, 60), by=["user"])

    # Booked for the next window, at 60 s; the request has no "user" field.
    give_back_after(policy, {}, how, add_a_limit_by_user)
    clock.now = 60.0
    # Its unit is back in "global" (it was given back nowhere, the refund
    # failing on the field the booking never needed).
    assert policy.try_acquire({"user": "a"})


@pytest.mark.parametrize("how", ["cancel", "acquire", "acquire_async"])
@pytest.mark.parametrize("algorithm", ["fixed_window", "gcra"])
@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_a_booking_made_before_a_reset_gives_nothing_back(kind: str, algorithm: str, how: str) -> None:
    # A reset forgets the key's bookings, and the key, used again, books the
    # same slot anew. Given back then, the first booking freed the unit of
    # the new one: two requests in a window of one, or at one instant from
    # a burst of one.
    clock = FakeClock(0.0)
    def make(clock: Any = None) -> ratekeeper.Limiter:
        return FixedWindow(1, 1.0, clock=clock) if algorithm == "fixed_window" else Gcra(1, 1.0, clock=clock)

    subject: Any
    target: Any
    if kind == "keyed":
        subject, target = KeyedLimiter(make(clock)), "alice"
    else:
        subject, target = Policy(clock=clock), {"user": "alice"}
        subject.add("per-user", make(), by=["user"])
    assert subject.try_acquire(target)

    def reset_and_book_again() -> None:
        assert subject.reset(target)
        assert subject.try_acquire(target)
        assert subject.reserve(target).at == 1.0  # the slot booked before the reset

    give_back_after(subject, target, how, reset_and_book_again)
    assert subject.reserve(target).at == 2.0  # never 1.0 again


@pytest.mark.parametrize("how", ["cancel", "acquire", "acquire_async"])
@pytest.mark.parametrize("algorithm", ["fixed_window", "gcra", "token_bucket"])
@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_a_reset_of_another_key_leaves_a_booking_to_give_back(kind: str, algorithm: str, how: str) -> None:
    # A reset forgets the bookings of its key, and of no other: a booking of
    # another key is given back as it would have been without it. Counted
    # over the whole store, any reset kept every booking made before it (its
    # slot went unused: alice waited a window, or an interval, longer).
    clock = FakeClock(0.0)

    def make(clock: Any = None) -> ratekeeper.Limiter:
        if algorithm == "fixed_window":
            return FixedWindow(1, 1.0, clock=clock)
        return Gcra(1, 1.0, clock=clock) if algorithm == "gcra" else TokenBucket(1, 1, 1.0, clock=clock)

    subject: Any
    alice: Any
    bob: Any
    if kind == "keyed":
        subject, alice, bob = KeyedLimiter(make(clock)), "alice", "bob"
    else:
        subject, alice, bob = Policy(clock=clock), {"user": "alice"}, {"user": "bob"}
        subject.add("per-user", make(), by=["user"])
    assert subject.try_acquire(alice) and subject.try_acquire(bob)

    def reset_bob() -> None:
        assert subject.reset(bob)

    give_back_after(subject, alice, how, reset_bob)
    assert subject.reserve(alice).at == 1.0


@pytest.mark.parametrize("how", ["cancel", "acquire", "acquire_async"])
@pytest.mark.parametrize("kind", ["keyed", "policy"])
def test_a_key_sharing_a_mark_counts_as_the_same_key(kind: str, how: str) -> None:
    # Keys are told apart by a hash into 256 marks, JS's too (the same
    # keys share one there: tests/js/policy.test.cjs): a reset of user82 (of
    # user359 in a policy's limit, whose key holds its value's length)
    # counts as one of alice's, which gives back less, never more.
    clock = FakeClock(0.0)
    subject: Any
    alice: Any
    twin: Any
    if kind == "keyed":
        subject, alice, twin = KeyedLimiter(FixedWindow(1, 1.0, clock=clock)), "alice", "user82"
    else:
        subject, alice, twin = Policy(clock=clock), {"user": "alice"}, {"user": "user359"}
        subject.add("per-user", FixedWindow(1, 1.0), by=["user"])
    assert subject.try_acquire(alice) and subject.try_acquire(twin)
    give_back_after(subject, alice, how, lambda: None if subject.reset(twin) else pytest.fail("not held"))
    assert subject.reserve(alice).at == 2.0


@pytest.mark.parametrize("how", ["cancel", "acquire", "acquire_async"])
@pytest.mark.parametrize("reset", ["user", "ip"])
def test_a_policy_reset_keeps_the_bookings_of_the_keys_it_reset_only(reset: str, how: str) -> None:
    # A booking holds the request's key in each limit: a reset of another
    # user leaves it to give back, a reset of its IP (its key in the
    # other limit) forgot it.
    clock = FakeClock(0.0)
    policy = Policy(clock=clock)
    policy.add("per-user", FixedWindow(1, 1.0), by=["user"])
    policy.add("per-ip", FixedWindow(1, 1.0), by=["ip"])
    alice, bob = {"user": "alice", "ip": "x"}, {"user": "bob", "ip": "y"}
    assert policy.try_acquire(alice) and policy.try_acquire(bob)

    def reset_bob_or_the_ip() -> None:
        assert policy.reset({"user": "bob"} if reset == "user" else {"ip": "x"}) == 1

    give_back_after(policy, alice, how, reset_bob_or_the_ip)
    # Given back, alice's unit in the window at 1 s is free again; kept (its
    # IP's bookings forgotten), alice's own limit still holds it there.
    assert policy.reserve(alice).at == (1.0 if reset == "user" else 2.0)


@pytest.mark.parametrize("how", ["acquire", "acquire_async"])
@pytest.mark.parametrize("between", ["other key", "same key"])
def test_a_keyed_token_bucket_gives_back_the_latest_booking_of_its_key(between: str, how: str) -> None:
    # A token bucket gives a cancelled booking back only while it is the
    # latest (it gives back exactly only its latest): the latest of its
    # key, since a booking of another key touches nothing of it. Counted
    # over the whole store, bob's booking kept alice's slot unused.
    clock = FakeClock(0.0)
    store = KeyedLimiter(TokenBucket(1, 1, 1.0, clock=clock))
    assert store.try_acquire("alice") and store.try_acquire("bob")
    held: list[ratekeeper.Reservation] = []
    give_back_after(store, "alice", how, lambda: held.append(store.reserve("bob" if between == "other key" else "alice")))
    assert [r.at for r in held] == [1.0 if between == "other key" else 2.0]
    # Of the same key: not the latest, its slot goes unused.
    assert store.reserve("alice").at == (1.0 if between == "other key" else 3.0)


@pytest.mark.parametrize("how", ["acquire", "acquire_async"])
@pytest.mark.parametrize("between", ["apart", "same ip", "global"])
def test_a_policy_gives_back_the_latest_booking_of_its_keys(between: str, how: str) -> None:
    # Of several limits with a bucket among them, a policy gives a cancelled
    # booking back only while it is the latest of its keys: a booking of
    # another user and IP touches none of them; one of its IP, or of any
    # request once a global limit holds them all, does.
    clock = FakeClock(0.0)
    policy = Policy(clock=clock)
    policy.add("per-user", TokenBucket(1, 1, 1.0), by=["user"])
    policy.add("per-ip", TokenBucket(5, 5, 1.0), by=["ip"])
    if between == "global":
        policy.add("global", TokenBucket(100, 100, 1.0))
    alice = {"user": "alice", "ip": "x"}
    other = {"user": "bob", "ip": "x" if between == "same ip" else "y"}
    assert policy.try_acquire(alice) and policy.try_acquire({"user": "bob", "ip": "z"})
    held: list[ratekeeper.Reservation] = []
    give_back_after(policy, alice, how, lambda: held.append(policy.reserve(other)))
    assert [r.at for r in held] == [1.0]
    assert policy.reserve(alice).at == (1.0 if between == "apart" else 2.0)


def test_policy_waiting_acquire(clock: FakeClock) -> None:
    policy = Policy(clock=clock)
    policy.add("per-user", Gcra(1, 0.5), by=["user"])
    policy.add("global", Gcra(2, 2))
    policy.acquire({"user": "a"})
    policy.acquire({"user": "b"})
    assert clock.sleeps == []
    with pytest.raises(RateLimited) as raised:
        policy.acquire({"user": "c"}, timeout=1)
    assert raised.value.retry_after == 2.0
    assert 'rate limit "global" exceeded' in str(raised.value)
    policy.acquire({"user": "a"})
    assert clock.sleeps == [2.0]

    async def main() -> None:
        await policy.acquire_async({"user": "a"})
        async with policy.acquiring({"user": "b"}):
            pass

    asyncio.run(main())
    assert clock.sleeps == [2.0, 2.0, 2.0]


# Several threads, one policy: exact admitted counts, and the denials
# consumed nothing anywhere.
USERS, THREADS_PER_USER, CALLS = 4, 3, 400
USER_LIMIT, GLOBAL_LIMIT = 100, 250


def admit(policy: Policy, user: str, index: int) -> bool:
    request = {"user": user}
    if index % 3 == 0:
        return policy.try_acquire(request).allowed
    if index % 3 == 1:
        return policy.reserve(request, max_wait=0).ok
    try:
        policy.acquire(request, timeout=0)
    except RateLimited:
        return False
    return True


def test_policy_is_all_or_nothing_across_threads() -> None:
    policy = per_user_and_global(USER_LIMIT, GLOBAL_LIMIT, clock=lambda: 5.0)
    start = threading.Barrier(USERS * THREADS_PER_USER)
    admitted = [0] * USERS
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(user: int, index: int) -> None:
        try:
            start.wait()
            mine = sum(admit(policy, f"user:{user}", index) for _ in range(CALLS))
            with lock:
                admitted[user] += mine
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [
        threading.Thread(target=worker, args=(user, index))
        for user in range(USERS)
        for index in range(THREADS_PER_USER)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    assert not errors, errors
    assert sum(admitted) == GLOBAL_LIMIT
    assert all(count <= USER_LIMIT for count in admitted)
    for user, count in enumerate(admitted):
        final = policy.peek({"user": f"user:{user}"}, 1)
        own = dict(final.limits)
        # A denial by the global limit took nothing from the user's.
        assert own["per-user"].remaining == USER_LIMIT - count
        assert own["global"].remaining == 0
        assert final.denied_by == ("per-user" if count == USER_LIMIT else "global")


def test_policy_reset_clears_the_limits_keyed_by_fields_the_request_gives() -> None:
    policy = Policy()
    policy.add("per-user", Gcra(1, 60), by=["user"])
    policy.add("per-ip", Gcra(1, 60), by=["ip"])
    policy.add("per-user-ip", Gcra(1, 60), by=["user", "ip"])
    policy.add("global", FixedWindow(10, 60))
    attempt = {"user": "alice", "ip": "192.0.2.1", "path": "/login"}
    assert policy.try_acquire(attempt, now=0)

    assert policy.reset({"user": "alice"}) == 1  # the user's limit only: the others need the IP
    peeked = policy.peek(attempt, now=0)
    assert peeked.denied_by == "per-ip" and peeked.limits[0][1].remaining == 1
    assert policy.reset({"user": b"alice"}) == 0  # held no more (bytes, str or int: the same key)
    assert policy.reset(attempt) == 2  # every keyed limit the request was counted in
    peeked = policy.peek(attempt, now=0)
    assert peeked.allowed and peeked.limits[3][1].remaining == 8  # the global window keeps its count (1 counted, 1 asked)

    assert policy.try_acquire(attempt, now=0)
    for nothing in ({}, None, {"usr": "alice"}, {"path": "/login"}):
        with pytest.raises(RateLimitError, match="resets none") as raised:
            policy.reset(nothing)
        assert raised.value.code == "invalid_value"
    with pytest.raises(RateLimitTypeError, match=r"request\['user'\]"):
        policy.reset({"user": 1.5})  # type: ignore[dict-item]
    assert not policy.peek(attempt, now=0).allowed  # a failed reset resets nothing
    assert policy.reset({"user": "bob", "ip": "192.0.2.2"}) == 0  # another user's: alice's kept
    assert policy.peek(attempt, now=0).denied_by == "per-user"


def test_a_policy_reset_forgets_the_requests_bookings() -> None:
    clock = FakeClock()
    policy = Policy("1/second", by=["user"], clock=clock)
    policy.try_acquire({"user": "k"})
    first = policy.reserve({"user": "k"}, max_wait=10)
    second = policy.reserve({"user": "k"}, max_wait=10)
    assert (first.wait, second.wait) == (1.0, 2.0)
    assert policy.reset({"user": "k"}) == 1
    assert policy.peek({"user": "k"}).allowed  # the bookings are forgotten
    first.cancel()  # gives nothing back: the key is fresh
    assert policy.try_acquire({"user": "k"}).allowed and not policy.try_acquire({"user": "k"}).allowed


# --- ratekeeper.limit -----------------------------------------------------


def test_limit_waits_or_raises(clock: FakeClock) -> None:
    @ratekeeper.limit(TokenBucket(1, 1, 0.25, clock=clock))
    def waits(x: int) -> int:
        return x

    assert [waits(i) for i in range(3)] == [0, 1, 2]
    assert clock.sleeps == [0.25, 0.25]

    @ratekeeper.limit(FixedWindow(1, 60, clock=clock), wait=False)
    async def raises() -> str:
        return "ok"

    assert asyncio.run(raises()) == "ok"
    with pytest.raises(RateLimited):
        asyncio.run(raises())
    policy = per_user_and_global(5, 1, clock=clock)
    # Without `key` no call has a request, which a keyed limit refuses: as a
    # KeyedLimiter without `key`, refused where it is given, not on every call.
    for limited in (policy, Policy.from_rates("1/second;5/minute", by=["user"])):
        with pytest.raises(RateLimitError) as refused:
            ratekeeper.limit(limited)
        assert refused.value.code == "invalid_value"
    assert str(refused.value) == (
        "`key` must be given: limit '1/second' of `rates` is keyed by 'user', and without `key` no call has a request"
    )
    with pytest.raises(RateLimitError, match="lacks the field"):
        with policy.acquiring():
            pass
    # An unkeyed policy needs no key.
    with ratekeeper.limit(Policy.from_rates("1/second;5/minute")):
        pass
    with pytest.raises(TypeError, match="`timeout` applies only with wait=True"):
        ratekeeper.limit(FixedWindow(1, 1), wait=False, timeout=1)
    # A bool, not any value with a truth: wait="no" was truthy, and waited.
    for not_bool in ("no", "", 0, 1, None):
        with pytest.raises(RateLimitTypeError, match=f"^`wait` must be a bool, not {type(not_bool).__name__}$") as refused:
            ratekeeper.limit(FixedWindow(1, 1), wait=not_bool)  # type: ignore[call-overload]
        assert refused.value.code == "invalid_type"
    with pytest.raises(TypeError, match="`rates` must be a rate string"):
        ratekeeper.limit(5)  # type: ignore[call-overload]
    # A cost no call could pay is refused where it is given, not on every call.
    for subject in ("1/second", FixedWindow(2, 1), per_user_and_global(5, 1, clock=clock)):
        with pytest.raises(RateLimitError, match="`cost` 9 exceeds the limit") as raised:
            ratekeeper.limit(subject, cost=9)
        assert raised.value.code == "cost_exceeds_limit"
        # Past 64 bits, as a call says it: no limit is that large.
        with pytest.raises(RateLimitError, match="`cost` must be at most 2\\^64 - 1") as raised:
            ratekeeper.limit(subject, cost=2**64)
        assert raised.value.code == "invalid_value"
    with pytest.raises(RateLimitTypeError, match="`cost` must be an int, not float"):
        ratekeeper.limit("1/second", cost=1.5)  # type: ignore[call-overload]


def test_limit_takes_every_cost_a_call_takes(clock: FakeClock) -> None:
    # From 0 (always allowed, takes nothing) to the limit, as a call takes
    # them, checked once where the decorator is made; a negative cost is
    # refused there in a call's words.
    bucket = TokenBucket(2, 1, 1, clock=clock)

    @ratekeeper.limit(bucket, cost=0, wait=False)
    def free() -> str:
        return "ok"

    @bucket.acquiring(0, timeout=0)
    def also_free() -> str:
        return "ok"

    @ratekeeper.limit(bucket, cost=0, wait=False, key=lambda user: user)
    def free_per_user(user: str) -> str:
        return user

    assert [free(), also_free(), free_per_user("alice")] == ["ok", "ok", "alice"]
    assert bucket.peek(0).remaining == 2
    for cost in (-1, -(2**64)):
        for refused in (
            lambda: ratekeeper.limit(bucket, cost=cost),
            lambda: ratekeeper.limit(KeyedLimiter(bucket), cost=cost, key=lambda: "k"),
            lambda: ratekeeper.limit(Policy.from_rates("2/second"), cost=cost),
        ):
            with pytest.raises(RateLimitError, match="^`cost` must not be negative$") as raised:
                refused()
            assert raised.value.code == "invalid_value"


def test_limit_waits_on_numpys_bool() -> None:
    """NumPy's bool is a flag, as a Decision's ``allowed`` takes it (no int
    to NumPy either)."""
    numpy = pytest.importorskip("numpy")
    for flag in (numpy.bool_(True), numpy.bool_(False)):
        assert ratekeeper.limit(FixedWindow(1, 1), wait=flag)._timeout == (None if flag else 0)
        assert Decision(allowed=flag, remaining=0, limit=1, retry_after=0, reset_after=1).allowed is bool(flag)
    for not_bool in (numpy.int64(1), numpy.float64(0), numpy.array([True])):
        with pytest.raises(RateLimitTypeError, match="^`wait` must be a bool"):
            ratekeeper.limit(FixedWindow(1, 1), wait=not_bool)


def test_limit_takes_rate_strings(clock: FakeClock) -> None:
    @ratekeeper.limit("2/minute", wait=False)
    def twice() -> int:
        return 2

    assert [twice(), twice()] == [2, 2]
    with pytest.raises(RateLimited) as raised:
        twice()
    assert 0 < raised.value.retry_after <= 30
    assert 'rate limit "2/minute" exceeded' in str(raised.value)

    @ratekeeper.limit("1/hour", algorithm="fixed_window")
    async def hourly() -> str:
        return "ok"

    assert asyncio.run(hourly()) == "ok"
    assert asyncio.run(hourly()) == "ok"  # waited (on the fake sleep) for the next hour
    assert len(clock.sleeps) == 1 and 0 < clock.sleeps[0] <= 3600


def test_limit_of_one_rate_waits_on_that_limiter() -> None:
    # One rate makes that one limiter, named by the rate, which waits as a
    # policy of that one limit would.
    for rates, algorithm, kind in (
        ("5/second", "token_bucket", TokenBucket),
        ("5/second", "gcra", Gcra),
        ("10/minute", "leaky_bucket", ratekeeper.LeakyBucket),
        ("2/hour", "sliding_window_log", ratekeeper.SlidingWindowLog),
    ):
        subject = ratekeeper.limit(rates, algorithm=algorithm)._subject  # type: ignore[call-overload]
        assert type(subject) is kind and subject.name == rates
        reference = Policy.from_rates(rates, algorithm=algorithm)  # type: ignore[arg-type]
        for now in (0.0, 0.1, 0.2, 0.3, 0.35, 5.0, 7.2):
            assert subject.try_acquire(now=now).allowed == reference.try_acquire(now=now).allowed
    assert isinstance(ratekeeper.limit("5/second;100/day")._subject, Policy)


def test_limit_of_one_rate_moves_waiters_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # The decorator's limiter reads the monotonic clock: slots half an hour
    # apart. With a cancelled waiter ahead, the next moves up into its slot,
    # not staying in its own half an hour later: the one limiter's waiters
    # move up, as a GCRA's do (a token bucket's do not: see test_waiting.py).
    # Read from the bookings, not timed: the sleeps end only when the test
    # lets them. (Timed, on slots 0.5 s apart, a busy machine stretched the
    # wait past the bound it had to keep under.)
    acquiring = ratekeeper.limit("2/hour", algorithm="gcra")
    subject = acquiring._subject

    @acquiring
    async def call() -> None:
        return None

    def slots() -> list[Any]:
        """When each waiting call of the limiter is booked for, in booking order."""
        return [waiter.reservation.at for waiter in _wait._WAITING.get(id(subject), [])]

    async def main() -> None:
        turn = asyncio.sleep  # the loop's own
        slot_reached = asyncio.Event()

        async def sleep(seconds: float) -> None:
            await slot_reached.wait()

        await call()
        await call()  # the burst
        monkeypatch.setattr(asyncio, "sleep", sleep)
        first = asyncio.ensure_future(call())
        second = asyncio.ensure_future(call())
        await turn(0)  # both book, and sleep
        assert len(slots()) == 2
        ahead, behind = slots()
        assert behind - ahead == pytest.approx(1800)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert slots() == [ahead], "the second waiter moved up into the slot the first left"
        slot_reached.set()
        await second
        assert slots() == []

    asyncio.run(main())


# --- ratekeeper.limit(..., key=) ------------------------------------------


def first_argument(user: Any, *args: Any, **kwargs: Any) -> Any:
    return user


def per_key_subjects(clock: FakeClock) -> list[tuple[str, Any, Callable[..., Any]]]:
    """What ``limit`` takes with ``key``, each admitting 2 calls per key in
    the test's span, and the key function it takes."""
    as_request: Callable[..., Any] = lambda user, *a, **k: {"user": user}
    return [
        ("one rate", "2/minute", first_argument),
        ("rates", "2/minute;3/hour", first_argument),
        ("limiter", TokenBucket(2, 1, 60, clock=clock), first_argument),
        ("keyed limiter", KeyedLimiter(FixedWindow(2, 60, clock=clock)), first_argument),
        ("policy", per_user_and_global(2, 100, clock=clock), as_request),
    ]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_limit_with_key_limits_each_key_apart(clock: FakeClock, asynchronous: bool) -> None:
    for name, subject, key in per_key_subjects(clock):

        def call(user: Any) -> Any:
            return user

        async def call_async(user: Any) -> Any:
            return user

        if asynchronous:
            limited = ratekeeper.limit(subject, key=key, wait=False)(call_async)

            def run(user: Any) -> Any:
                return asyncio.run(limited(user))

        else:
            run = ratekeeper.limit(subject, key=key, wait=False)(call)
        assert [run("alice"), run("alice")] == ["alice", "alice"], name
        with pytest.raises(RateLimited):
            run("alice")
        # Alice's calls took nothing of Bob's (nor of 42's, an int key).
        assert [run("bob"), run("bob"), run(42)] == ["bob", "bob", 42], name
        with pytest.raises(RateLimited):
            run("bob")


def test_limit_with_key_takes_cost_per_key_and_shares_a_keyed_limiter(clock: FakeClock) -> None:
    store = KeyedLimiter(FixedWindow(5, 60, clock=clock))

    @ratekeeper.limit(store, key=lambda user, *a, **k: user, cost=2, wait=False)
    def call(user: str, extra: int = 0, *, label: str = "") -> tuple[str, int, str]:
        return (user, extra, label)

    assert call("alice", 1, label="x") == ("alice", 1, "x")
    assert call("alice") == ("alice", 0, "")
    # The store given is the one decided on: its other users see the units taken.
    assert store.peek("alice", 0).remaining == 1
    assert store.peek("bob", 0).remaining == 5
    with pytest.raises(RateLimited):
        call("alice")
    for refused in (9, 2**64):
        with pytest.raises(RateLimitError):
            ratekeeper.limit(store, key=first_argument, cost=refused)


def test_limit_with_key_refuses_a_bad_timeout_where_it_is_given(clock: FakeClock) -> None:
    # As without `key`: a bad timeout would otherwise fail every call.
    for name, subject, key in per_key_subjects(clock):
        for timeout, error, words in (
            (-1, RateLimitError, "^`timeout` must not be negative$"),
            (float("nan"), RateLimitError, "^`timeout` must be a number, not NaN$"),
            ("1", RateLimitTypeError, "^`timeout` must be a number of seconds"),
            (True, RateLimitTypeError, "^`timeout` must be a number of seconds, not a bool$"),
        ):
            with pytest.raises(error, match=words):
                ratekeeper.limit(subject, key=key, timeout=timeout)  # type: ignore[arg-type]
                pytest.fail(f"{name}: timeout={timeout!r} taken")
        ratekeeper.limit(subject, key=key, timeout=0.5)
        if isinstance(subject, KeyedLimiter):
            # What stood in for the keys booked nothing.
            assert len(subject) == 0


def test_limit_with_key_reads_the_arguments_as_the_function_takes_them(clock: FakeClock) -> None:
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def key(*args: Any, **kwargs: Any) -> str:
        seen.append((args, kwargs))
        return "k"

    class Client:
        @ratekeeper.limit(FixedWindow(9, 60, clock=clock), key=key)
        def fetch(self, url: str, *, retries: int = 0) -> str:
            return url

        @ratekeeper.limit(FixedWindow(9, 60, clock=clock), key=key)
        @staticmethod
        def ping(host: str) -> str:
            return host

    client = Client()
    assert client.fetch("/a", retries=2) == "/a"
    assert Client.ping("h") == "h"
    assert seen == [((client, "/a"), {"retries": 2}), (("h",), {})]


def test_limit_with_key_reads_a_generators_key_at_its_first_iteration(clock: FakeClock) -> None:
    store = KeyedLimiter(FixedWindow(1, 60, clock=clock))
    keys: list[str] = []

    def key(user: str) -> str:
        keys.append(user)
        return user

    @ratekeeper.limit(store, key=key, wait=False)
    def numbers(user: str) -> Any:
        yield user

    @ratekeeper.limit(store, key=key, wait=False)
    async def async_numbers(user: str) -> Any:
        yield user

    async def first(user: str) -> Any:
        async for item in async_numbers(user):
            return item

    never = numbers("alice")
    assert (keys, len(store)) == ([], 0)
    assert list(numbers("alice")) == ["alice"]
    assert asyncio.run(first("bob")) == "bob"
    assert keys == ["alice", "bob"]
    with pytest.raises(RateLimited):
        next(never)


class KeyFailed(Exception):
    pass


def test_limit_with_key_lets_the_key_functions_error_through_taking_nothing(clock: FakeClock) -> None:
    failure = KeyFailed("no user")

    def key(*args: Any, **kwargs: Any) -> str:
        raise failure

    for subject in ("1/second", "1/second;9/minute", FixedWindow(1, 60, clock=clock), KeyedLimiter(Gcra(1, 1, clock=clock))):

        @ratekeeper.limit(subject, key=key)
        def call() -> None:
            return None

        @ratekeeper.limit(subject, key=key)
        async def call_async() -> None:
            return None

        with pytest.raises(KeyFailed) as raised:
            call()
        assert raised.value is failure
        with pytest.raises(KeyFailed) as raised:
            asyncio.run(call_async())
        assert raised.value is failure
    store = KeyedLimiter(FixedWindow(1, 60, clock=clock))
    with pytest.raises(KeyFailed):
        ratekeeper.limit(store, key=key)(lambda: None)()
    assert len(store) == 0


def test_limit_with_key_refuses_a_key_of_a_wrong_type_as_the_limiter_does(clock: FakeClock) -> None:
    store = KeyedLimiter(FixedWindow(1, 60, clock=clock))
    with pytest.raises(RateLimitTypeError) as expected:
        store.try_acquire(1.5)  # type: ignore[arg-type]
    for subject in ("1/second", FixedWindow(1, 60, clock=clock), store):
        for wrong in (1.5, None, True, ["a"]):
            limited = ratekeeper.limit(subject, key=lambda *a, w=wrong, **k: w)

            @limited
            async def call_async() -> None:
                return None

            with pytest.raises(RateLimitTypeError) as raised:
                limited(lambda: None)()
            assert (str(raised.value), raised.value.code) == (str(expected.value), "invalid_type")
            with pytest.raises(RateLimitTypeError) as raised:
                asyncio.run(call_async())
            assert (str(raised.value), raised.value.code) == (str(expected.value), "invalid_type")
    assert len(store) == 0
    # Several rates are a policy keyed by the field "key": the same words,
    # naming `key`, not a request the caller never wrote.
    for wrong in (1.5, None, True, ["a"]):
        with pytest.raises(RateLimitTypeError) as raised:
            ratekeeper.limit("1/second;9/minute", key=lambda w=wrong: w)(lambda: None)()
        assert (str(raised.value), raised.value.code) == (str(expected.value), "invalid_type")
    # A policy's key gives a request.
    with pytest.raises(RateLimitTypeError, match="^`request` must be a mapping"):
        ratekeeper.limit(per_user_and_global(1, 1, clock=clock), key=lambda: "alice")(lambda: None)()  # type: ignore[arg-type, return-value]


def test_limit_with_key_takes_an_int_of_any_kind_as_the_limiter_does(clock: FakeClock) -> None:
    # A KeyedLimiter takes what has __index__ (NumPy's and pandas' ints) as
    # the int it is, and so does a policy's request; over several rates the
    # key was refused (`key` must be a str, bytes or int), over one taken.
    class Index:
        def __index__(self) -> int:
            return 42

    for rates in ("1/second", "1/second;9/minute"):
        keys = iter([Index(), 42, Index(), 7])

        @ratekeeper.limit(rates, key=lambda: next(keys), wait=False)  # type: ignore[arg-type, return-value]
        def call() -> None:
            return None

        call()  # Index(): the key 42
        with pytest.raises(RateLimited):
            call()  # 42: the same key
        with pytest.raises(RateLimited):
            call()
        call()  # another key


def test_limit_with_key_refuses_what_has_no_key(clock: FakeClock) -> None:
    store = KeyedLimiter(FixedWindow(1, 60, clock=clock))
    with pytest.raises(RateLimitTypeError, match="^a KeyedLimiter needs `key`") as raised:
        ratekeeper.limit(store)  # type: ignore[call-overload]
    assert raised.value.code == "invalid_type"
    with pytest.raises(RateLimitTypeError, match="^`key` must be a callable, not str$"):
        ratekeeper.limit(store, key="user")  # type: ignore[call-overload]
    # No context manager: a block has no arguments to read a key from.
    with pytest.raises(TypeError):
        with ratekeeper.limit(store, key=first_argument):  # type: ignore[attr-defined]
            pass


def test_limit_with_key_waits_per_key_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock standing still: every call books at once, and the sleeps are
    # the waits booked. One key's waiters queue behind that key's only.
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", sleep)

    @ratekeeper.limit(TokenBucket(1, 1, 1, clock=lambda: 7.0), key=first_argument)
    async def call(user: str) -> str:
        return user

    async def main() -> list[str]:
        return await asyncio.gather(*(call(user) for user in ("alice", "alice", "alice", "bob", "bob")))

    assert asyncio.run(main()) == ["alice", "alice", "alice", "bob", "bob"]
    assert sorted(sleeps) == [1.0, 1.0, 2.0]


def test_limit_with_key_waits_per_key_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr(time, "sleep", sleeps.append)

    @ratekeeper.limit(Gcra(1, 1, clock=lambda: 7.0), key=first_argument)
    def call(user: str) -> str:
        return user

    users = ["alice", "alice", "alice", "bob", "bob", 3, 3]
    answers: list[str] = []
    threads = [threading.Thread(target=lambda user=user: answers.append(call(user))) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(map(str, answers)) == sorted(map(str, users))
    assert sorted(sleeps) == [1.0, 1.0, 1.0, 2.0]


def test_policies_from_rate_strings() -> None:
    policy = Policy("2/second;3/minute", by=["user"])
    assert policy.names == ("2/second", "3/minute")
    assert policy.keyed_by("3/minute") == ("user",)
    alice = {"user": "alice"}
    assert policy.try_acquire(alice, 2, now=0)
    assert policy.try_acquire(alice, now=1)
    assert policy.try_acquire(alice, now=1).denied_by == "3/minute"
    assert policy.try_acquire({"user": "bob"}, now=1)
    same = Policy.from_rates("2 per second; 3/minute", algorithm="sliding_window_log")
    assert same.names == ("2/second", "3/minute")
    assert len(Policy.from_rates("10/day", by=("user", "route"))) == 1
    with pytest.raises(RateLimitError) as raised:
        Policy("10 per fortnight")
    assert raised.value.code == "invalid_syntax"
    assert "`rates` does not parse" in str(raised.value)
    # The place is counted in the text given, leading spaces included, as
    # from_rates and the JS builds count it.
    for make in (Policy, Policy.from_rates):
        with pytest.raises(RateLimitError, match="at byte 6$"):
            make("   10/")
    # Text is a configuration's JSON when it opens with `{` past what the
    # rate grammar skips and a byte order mark, as in the JS builds
    # (tests/js/policy.test.cjs): a file saved with a BOM is refused as the
    # JSON it is, not as a rate that does not parse.
    for lead in ("\ufeff", "\x85", "\x1c", " \ufeff\n"):
        with pytest.raises(RateLimitError, match="^`config` is not valid JSON") as raised:
            Policy(lead + '{"limits": [{"name": "a", "rate": "1/second"}]}')
        assert raised.value.code == "invalid_config"
    with pytest.raises(RateLimitError, match="at byte 0$") as raised:
        Policy("\ufeff10/second")
    assert raised.value.code == "invalid_syntax"
    with pytest.raises(RateLimitError, match="`algorithm` must be 'token_bucket'"):
        Policy.from_rates("1/second", algorithm="bucket")  # type: ignore[arg-type]
    with pytest.raises(RateLimitError):
        Policy.from_rates("7/second", algorithm="gcra")  # not a whole number of ns per unit


def test_policies_from_configurations() -> None:
    config = {
        "limits": [
            {"name": "api", "rate": "2/second", "burst": 3, "by": ["user"]},
            {"name": "daily", "algorithm": "fixed_window", "rate": "5/day", "calendar": "day"},
            {"name": "queue", "algorithm": "leaky_bucket", "rate": "10/second", "max_keys": 10, "eviction": "refuse"},
        ]
    }
    for policy in (Policy(config), Policy.from_config(config), Policy(json_text(config)), Policy.from_config(json_text(config))):
        assert policy.names == ("api", "daily", "queue")
        assert policy.keyed_by("api") == ("user",)
        decision = policy.try_acquire({"user": "a"}, 3, now=0)
        assert decision.allowed
        assert [(name, d.limit) for name, d in decision.limits] == [("api", 3), ("daily", 5), ("queue", 10)]
    cases: list[tuple[Any, str, type[BaseException]]] = [
        ({"limits": [{"name": "a", "rate": "1/second", "colour": "red"}]}, "colour", RateLimitError),
        ({"limits": [{"name": "a"}]}, "rate", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "algorithm": "bucket"}]}, "bucket", RateLimitError),
        ('{"limits": [', "EOF", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "burst": object()}]}, "not JSON", RateLimitTypeError),
        # Each wrong value named by its place, not by a line and column of
        # the JSON the mapping was dumped to.
        ({"limits": [{"name": "a", "rate": "1/second", "burst": "20"}]}, r'limits\[0\]\.burst: invalid type: string "20"', RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second"}, {"name": "b", "rate": "1/second", "by": "user"}]}, r"limits\[1\]\.by: invalid type", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "burst": True}]}, r"limits\[0\]\.burst: invalid type: boolean", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "algorithm": None}]}, r"limits\[0\]\.algorithm: invalid type: null", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "burst": 20.5}]}, r"limits\[0\]\.burst: invalid type: floating point", RateLimitError),
        ({"limits": [{"rate": "1/second"}]}, r"limits\[0\]: missing field `name`", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "brust": 2}]}, r"limits\[0\]: unknown field `brust`", RateLimitError),
        ({"limits": {"name": "a"}}, r"limits: invalid type: map, expected an array", RateLimitError),
        ({"limits": ["a"]}, r'limits\[0\]: invalid type: string "a", expected an object', RateLimitError),
        # The top level named once, not "`config` config: ...".
        ({"limit": []}, r"^`config` unknown field `limit`, expected `limits`$", RateLimitError),
        ("[1]", r"^`config` invalid type: sequence, expected an object$", RateLimitError),
        ({"limits": [{"name": "a", "rate": "1/second", "burst": float("nan")}]}, "not JSON: Out of range float", RateLimitError),
        ('{"limits": [{"name": "a",\n "rate": 5}]}', r"limits\[0\]\.rate: invalid type: integer `5`", RateLimitError),
        # A field given twice in JSON text (a mapping cannot), refused as serde refuses it.
        ('{"limits": [{"name": "a", "rate": "1/second", "burst": 1, "burst": 100}]}', "duplicate field `burst`", RateLimitError),
        # The first unknown field as written, not as sorted.
        ({"limits": [{"zzz": 1, "aaa": 2, "name": "a", "rate": "1/second"}]}, r"limits\[0\]: unknown field `zzz`", RateLimitError),
    ]
    for bad, named, error in cases:
        with pytest.raises(error, match=named) as raised:
            Policy.from_config(bad)
        assert raised.value.code == "invalid_config"  # type: ignore[attr-defined]
        assert type(raised.value) is error
        if not isinstance(bad, str):
            assert "line 1" not in str(raised.value)
    with pytest.raises(RateLimitError) as raised:
        Policy({"limits": [{"name": "a", "rate": "1/second", "burst": 0}]})
    assert raised.value.code == "zero_value"
    # Named with the limit it is in.
    placed: list[tuple[dict[str, Any], str, str]] = [
        ({"burst": 0}, "zero_value", "burst"),
        ({"max_keys": 0}, "zero_value", "max_keys"),
        ({"name": "a"}, "invalid_value", "name"),
    ]
    for fields, code, field in placed:
        with pytest.raises(RateLimitError, match=rf"^`config` limits\[1\]: `{field}` ") as raised:
            Policy({"limits": [{"name": "a", "rate": "1/second"}, {"name": "b", "rate": "1/second", **fields}]})
        assert raised.value.code == code


def json_text(config: Any) -> str:
    import json

    return json.dumps(config)


def test_a_configurations_int_out_of_range_is_named_with_its_bound() -> None:
    # JSON reading makes an int beyond 64 bits a float: it was said to be a
    # float of the wrong type, not an int out of range, as a count's.
    base = {"name": "a", "rate": "1/second", "by": ["user"]}
    out_of_range: list[tuple[int, str]] = [
        (2**64, "must be at most 2\\^64 - 1"),
        (10**30, "must be at most 2\\^64 - 1"),
        (-1, "must not be negative"),
        (-(2**63) - 1, "must not be negative"),
        (-(10**30), "must not be negative"),
    ]
    for field in ("burst", "max_keys"):
        for value, words in out_of_range:
            config = {"limits": [{**base, field: value}]}
            for given in (config, json_text(config)):
                with pytest.raises(RateLimitError, match=rf"^`config` limits\[0\]\.{field}: {words}$") as raised:
                    Policy(given)
                assert raised.value.code == "invalid_config"
    text = '{"limits": [{"name": "a", "rate": "1/second", "burst": 18446744073709551616}]}'
    with pytest.raises(RateLimitError, match=r"^`config` limits\[0\]\.burst: must be at most 2\^64 - 1$"):
        Policy.from_config(text)
    # A float is still one, however large, and so is -0 (JSON's "-0" a float to serde).
    for written in ("1e20", "-1e30", "18446744073709551616.0", "-1.5", "-0"):
        text = f'{{"limits": [{{"name": "a", "rate": "1/second", "burst": {written}}}]}}'
        with pytest.raises(RateLimitError, match=r"^`config` limits\[0\]\.burst: invalid type: floating point"):
            Policy.from_config(text)


def test_calendar_windows() -> None:
    daily = FixedWindow.with_calendar(3, "day", name="daily")
    assert (daily.calendar, daily.window, daily.limit) == ("day", 86400.0, 3)
    assert repr(daily) == "FixedWindow.with_calendar(limit=3, calendar='day', name='daily')"
    assert FixedWindow(3, 60).calendar is None
    # On time.time(): the current UTC day. Again with a new limiter if a UTC
    # midnight came between the two calls (the peek then sees a new day).
    while True:
        day = time.time() // 86400
        daily = FixedWindow.with_calendar(3, "day", name="daily")
        assert daily.try_acquire(3)
        decision = daily.peek()
        if time.time() // 86400 == day:
            break
    assert not decision and 0 < decision.retry_after <= 86400
    midnight = 1_700_006_400  # 2023-11-15 00:00 UTC
    monthly = ratekeeper.SlidingWindowCounter.with_calendar(2, "month", clock=lambda: midnight)
    assert monthly.calendar == "month" and monthly.try_acquire(2)
    store = KeyedLimiter(monthly)
    assert store.limiter.calendar == "month"  # type: ignore[attr-defined]
    assert store.try_acquire("a", 2, now=midnight) and not store.peek("a", now=midnight)
    with pytest.raises(RateLimitError) as raised:
        FixedWindow.with_calendar(3, "fortnight")  # type: ignore[arg-type]
    assert raised.value.code == "invalid_value"



def test_a_policy_with_a_calendar_limit_reads_the_wall_clock() -> None:
    """Its windows are UTC days: by default such a policy reads time.time,
    as with_calendar does (on time.monotonic its days began at boot)."""
    daily = {"name": "daily", "algorithm": "fixed_window", "rate": "5/day", "calendar": "day"}

    def left_of_the_day(policy: Policy) -> float:
        # Seconds left of the UTC day, by the policy and by time.time.
        while True:
            day = time.time() // 86400
            reset = policy.try_acquire({"user": 1}).reset_after
            expected = (day + 1) * 86400 - time.time()
            if time.time() // 86400 == day:
                return reset - expected

    assert abs(left_of_the_day(Policy({"limits": [{**daily, "by": ["user"]}]}))) < 60
    added = Policy()
    added.add("daily", FixedWindow.with_calendar(5, "day"), by=["user"])
    assert abs(left_of_the_day(added)) < 60
    # A policy that has decided on time.monotonic keeps it: the jump to
    # time.time would make its limits forget what they hold.
    busy = Policy()
    busy.add("per-minute", TokenBucket(1, 1, 60.0), by=["user"])
    assert busy.try_acquire({"user": 1}) and not busy.try_acquire({"user": 1})
    with pytest.raises(RateLimitError) as raised:
        busy.add("daily", FixedWindow.with_calendar(1000, "day"), by=["user"])
    assert raised.value.code == "invalid_value" and "clock=time.time" in str(raised.value)
    assert busy.try_acquire({"user": 1}).denied_by == "per-minute"
    # A clock given stays; without a calendar, time.monotonic.
    given = Policy({"limits": [daily]}, clock=lambda: 86400 * 100 + 3600)
    assert given.try_acquire().reset_after == 86400 - 3600
    assert Policy.from_rates("5/day").try_acquire().reset_after == 86400 / 5

# --- portable state -------------------------------------------------------

def used(make: Make) -> Any:
    limiter = make()
    for now in (0.0, 0.05, 0.3):
        limiter.try_acquire(2, now=now)
        limiter.reserve(1, now=now)
    return limiter


@pytest.mark.parametrize("name", ALL.keys())
def test_pickling_and_bytes_round_trips_preserve_decisions(name: str) -> None:
    import pickle

    make = ALL[name]
    limiter = used(make)
    restored = make()
    restored.restore(limiter.to_bytes())
    copies = [
        pickle.loads(pickle.dumps(limiter)),
        from_bytes(limiter),
        restored,
    ]
    for copy in copies:
        limiter = used(make)  # each copy beside its own original
        assert type(copy) is type(limiter) and repr(copy) == repr(limiter)
        for now in (0.3, 0.31, 0.6, 1.0, 5.0):
            assert copy.try_acquire(1, now=now) == limiter.try_acquire(1, now=now)
            copy.refund(1, taken_at=now)
            limiter.refund(1, taken_at=now)


def from_bytes(limiter: Any) -> Any:
    """``<Class>.from_bytes(data, *constructor arguments)`` (a token bucket of
    several bandwidths: ``from_bytes(data, bandwidths)``)."""
    return type(limiter).from_bytes(limiter.to_bytes(), **kwargs_of(limiter))


BANDS = [
    Bandwidth(5, 5, 1),
    Bandwidth(20, 10, 60, refill="interval"),
    Bandwidth(100, 100, 3600, initial_tokens=50),
    Bandwidth(1000, 1000, 86400),
]


@pytest.mark.parametrize("count", [1, 2, 3, len(BANDS)])
def test_token_bucket_from_bytes_rebuilds_a_bucket_of_any_bandwidths(count: int) -> None:
    import pickle

    # The state holds a fingerprint of the configuration, not the
    # configuration: from_bytes takes the bandwidths, as from_bandwidths does.
    bucket = TokenBucket.from_bandwidths(BANDS[:count], name="banded", clock=time.monotonic)
    bucket.try_acquire(4, now=0)
    bucket.try_acquire(1, now=0.5)
    data = bucket.to_bytes()
    copies = [
        TokenBucket.from_bytes(data, bucket.bandwidths, name="banded", clock=time.monotonic),
        TokenBucket.from_bytes(bytearray(data), bandwidths=iter(BANDS[:count]), name="banded"),
        pickle.loads(pickle.dumps(bucket)),
    ]
    for copy in copies:
        assert (repr(copy), copy.bandwidths, copy.to_bytes()) == (repr(bucket), bucket.bandwidths, data)
        for now in (0.6, 1.0, 61.0):
            assert copy.peek(2, now=now) == bucket.peek(2, now=now)
    if count > 1:
        with pytest.raises(RateLimitError) as raised:
            TokenBucket.from_bytes(data, BANDS[: count - 1])
        assert raised.value.code == "state_mismatch"
    # The constructor's arguments are read as before, in any form.
    single = TokenBucket(5, 5, 1)
    single.try_acquire(2, now=0)
    for copy in (
        TokenBucket.from_bytes(single.to_bytes(), 5, 5, 1),
        TokenBucket.from_bytes(single.to_bytes(), 5, refill_tokens=5, refill_period=1),
        TokenBucket.from_bytes(single.to_bytes(), capacity=5, refill_tokens=5, refill_period=1),
    ):
        assert copy.to_bytes() == single.to_bytes()
    with pytest.raises(RateLimitTypeError, match="^`bandwidths` must be an iterable of Bandwidth$"):
        TokenBucket.from_bytes(data, [5])  # type: ignore[list-item]
    # Bandwidths and more positional arguments: from_bandwidths's own words
    # (the constructor's named a missing refill_period).
    with pytest.raises(TypeError, match="from_bandwidths.* positional argument"):
        TokenBucket.from_bytes(data, bucket.bandwidths, 5)  # type: ignore[call-overload]


def kwargs_of(limiter: Any) -> dict[str, Any]:
    if isinstance(limiter, TokenBucket):
        return {"bandwidths": limiter.bandwidths} if len(limiter.bandwidths) > 1 else {
            "capacity": limiter.capacity,
            "refill_tokens": limiter.refill_tokens,
            "refill_period": limiter.refill_period,
        }
    if isinstance(limiter, Gcra):
        return {"burst": limiter.burst, "emission_interval": limiter.emission_interval}
    if isinstance(limiter, LeakyBucket):
        return {"capacity": limiter.capacity, "interval": limiter.interval}
    return {"limit": limiter.limit, "window": limiter.window}


def test_pickling_keeps_name_and_clock() -> None:
    import pickle

    limiter = SlidingWindowLog(3, 10, name="per-ten", clock=time.monotonic)
    limiter.try_acquire(2)
    copy = pickle.loads(pickle.dumps(limiter))
    assert (copy.name, repr(copy)) == ("per-ten", "SlidingWindowLog(limit=3, window=10.0, name='per-ten')")
    assert copy.peek(0).remaining == 1
    with pytest.raises(TypeError):
        pickle.dumps(KeyedLimiter(Gcra(1, 1)))


def test_bad_state_raises_its_code_and_changes_nothing() -> None:
    gcra = Gcra(3, 1)
    gcra.try_acquire(2, now=10)
    data = gcra.to_bytes()
    target = Gcra(3, 1)
    target.try_acquire(1, now=10)
    before = target.peek(now=10)
    cases: list[tuple[Any, str]] = [
        (data[:5], "state_truncated"),
        (data[:-1], "state_truncated"),
        (b"xx" + data[2:], "state_corrupt"),
        (data + b"\x00", "state_corrupt"),
        (data[:2] + bytes([99]) + data[3:], "state_version"),
        (Gcra(4, 1).to_bytes(), "state_mismatch"),
        (LeakyBucket(3, 1).to_bytes(), "state_mismatch"),
        (SlidingWindowLog(3, 1).to_bytes(), "state_mismatch"),
    ]
    for bad, code in cases:
        with pytest.raises(RateLimitError) as raised:
            target.restore(bad)
        assert raised.value.code == code, bad
        assert "`data`" in str(raised.value)
        with pytest.raises(RateLimitError):
            Gcra.from_bytes(bad, 3, 1)
    assert target.peek(now=10) == before
    with pytest.raises(RateLimitTypeError, match="`data` must be bytes"):
        target.restore(data.decode("latin-1"))  # type: ignore[arg-type]
    target.restore(bytearray(data))
    assert target.peek(now=10) == gcra.peek(now=10)
