"""Differential tests: random traces through the core and through real Redis.

The core is unit-agnostic integer arithmetic, so it runs here with its
"nanoseconds" being the wire's microseconds: the in-process limiter is built
with durations of ``us / 10**9`` seconds and called with ``now = t / 10**9``,
the Redis one with ``us / 10**6`` and ``t / 10**6``. Every decision of every
step (allowed, remaining, limit, retry_after, reset_after, and a policy's
denied_by and each limit's own) must then be equal, in those units.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Callable, Union

import pytest
import redis
from redis_fixtures import client, url

import ratekeeper
from ratekeeper.redis import RedisPolicy, RedisPolicyDecision

Limiter = Union[
    ratekeeper.Gcra,
    ratekeeper.TokenBucket,
    ratekeeper.FixedWindow,
    ratekeeper.SlidingWindowCounter,
    ratekeeper.SlidingWindowLog,
]
# A configuration: builds the limiter with durations in the given unit (seconds per µs).
Maker = Callable[[Fraction], Limiter]


def scale(rng: random.Random) -> int:
    """Durations of a few µs (every remainder shows) or of up to seconds."""
    return rng.choice([1, 1, 997, 100_003])


def gcra(rng: random.Random) -> Maker:
    burst, interval = rng.randint(1, 5), rng.randint(1, 50) * scale(rng)
    return lambda unit: ratekeeper.Gcra(burst, interval * unit)


def token_bucket(rng: random.Random) -> Maker:
    bands = [(rng.randint(1, 6), rng.randint(1, 4), rng.randint(1, 40) * scale(rng)) for _ in range(rng.randint(1, 4))]
    return lambda unit: ratekeeper.TokenBucket.from_bandwidths(
        [ratekeeper.Bandwidth(c, t, p * unit) for c, t, p in bands]
    )


def fixed_window(rng: random.Random) -> Maker:
    limit, window = rng.randint(1, 6), rng.randint(1, 40) * scale(rng)
    return lambda unit: ratekeeper.FixedWindow(limit, window * unit)


def sliding_window_counter(rng: random.Random) -> Maker:
    limit, window = rng.randint(1, 6), rng.randint(1, 40) * scale(rng)
    return lambda unit: ratekeeper.SlidingWindowCounter(limit, window * unit)


def sliding_window_log(rng: random.Random) -> Maker:
    limit, window = rng.randint(1, 6), rng.randint(1, 40) * scale(rng)
    return lambda unit: ratekeeper.SlidingWindowLog(limit, window * unit)


ALGORITHMS = [gcra, token_bucket, fixed_window, sliding_window_counter, sliding_window_log]
CORE_UNIT = Fraction(1, 10**9)
WIRE_UNIT = Fraction(1, 10**6)


def numbers(d: ratekeeper.Decision, unit: int) -> tuple[bool, int, int, int, int]:
    return (d.allowed, d.remaining, d.limit, round(d.retry_after * unit), round(d.reset_after * unit))


def run_trace(client: redis.Redis, seed: int, limits: list[tuple[str, Maker, list[str]]]) -> int:
    """Drives one random trace through both; returns the number of decisions compared."""
    rng = random.Random(seed)
    core = ratekeeper.Policy()
    for name, make, by in limits:
        core.add(name, make(CORE_UNIT), by=by)
    remote = RedisPolicy(
        client, [(name, make(WIRE_UNIT), by) for name, make, by in limits], prefix=f"diff{seed}:"
    )
    limit = min(make(CORE_UNIT).limit for _, make, _ in limits)
    # From 2^51 µs (2041): keys expire no earlier than the trace's time (PEXPIREAT ... GT), so none expires during the test.
    t = 2**51 + rng.randint(0, 10**6)
    compared = 0
    seen = [t]  # instants of earlier calls, for refunds
    for _ in range(80):
        t += rng.choice([0, 0, 1, rng.randint(1, 5), rng.randint(1, 60), rng.randint(1, 6_000_000)])
        seen.append(t)
        request = {"key": rng.choice(["a", "b"])}
        op = rng.random()
        costs = [rng.randint(0, limit) for _ in range(rng.randint(2, 5) if op < 0.15 else 1)]
        if op >= 0.9:
            # Units given back, taken now or at an earlier call: compared by
            # the decisions that follow.
            taken_at = rng.choice(seen[-4:])
            core.refund(request, costs[0], taken_at=taken_at * CORE_UNIT)
            remote.refund(request, costs[0], taken_at=taken_at * WIRE_UNIT)
            continue
        if 0.15 <= op < 0.3:
            expected = [core.peek(request, costs[0], now=t * CORE_UNIT)]
            got = [remote.peek(request, costs[0], now=t * WIRE_UNIT)]
        elif 0.3 <= op < 0.45:
            # A booking: the same slot (or the same refusal) in both.
            max_wait = rng.choice([0, rng.randint(0, 100), rng.randint(0, 10**7)])
            booked = core.reserve(request, costs[0], max_wait=max_wait * CORE_UNIT, now=t * CORE_UNIT)
            remote_booked = remote.reserve(request, costs[0], max_wait=max_wait * WIRE_UNIT, now=t * WIRE_UNIT)
            context = f"seed {seed}, t {t}, reserve {costs[0]} within {max_wait}"
            assert (remote_booked.ok, round(remote_booked.wait * 10**6)) == (
                booked.ok,
                round(booked.wait * 10**9),
            ), context
            assert (remote_booked.decision is None) == (booked.decision is None), context
            if booked.decision is not None and remote_booked.decision is not None:
                assert numbers(remote_booked.decision, 10**6) == numbers(booked.decision, 10**9), context
            compared += 1
            if not booked.ok and round(booked.wait * 10**9) <= max_wait:
                # A limit refused to book within the wait (a log's ring is
                # full): the core then refunds the limits already booked at
                # the slot, which misses units a window took at `now`, where
                # Redis wrote nothing at all. The states part here.
                break
            continue
        else:
            expected = [core.try_acquire(request, c, now=t * CORE_UNIT) for c in costs]
            got = remote.try_acquire_batch(request, costs, now=t * WIRE_UNIT)
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            same_decision(g, e, f"seed {seed}, t {t}, costs {costs}")
            compared += 1
    return compared


def same_decision(got: RedisPolicyDecision, expected: ratekeeper.PolicyDecision, context: str) -> None:
    """Every number of a policy's decision equal, in the two sides' units."""
    assert numbers(got, 10**6) == numbers(expected, 10**9), context
    assert got.denied_by == expected.denied_by, context
    assert [(n, numbers(d, 10**6)) for n, d in got.limits] == [
        (n, numbers(d, 10**9)) for n, d in expected.limits
    ], context
    assert got.from_store, context


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda f: f.__name__)
def test_each_algorithm_decides_as_the_core(client: redis.Redis, algorithm: Callable[[random.Random], Maker]) -> None:
    compared = 0
    for seed in range(40):
        rng = random.Random(seed)
        compared += run_trace(client, seed, [("limit", algorithm(rng), ["key"])])
    assert compared > 40 * 40


def test_multi_limit_policies_decide_as_the_core(client: redis.Redis) -> None:
    compared = 0
    for seed in range(60):
        rng = random.Random(1000 + seed)
        limits = [
            (f"l{i}", rng.choice(ALGORITHMS)(rng), rng.choice([["key"], [], ["key"]]))
            for i in range(rng.randint(2, 4))
        ]
        compared += run_trace(client, 1000 + seed, limits)
    assert compared > 60 * 40


# Scenarios at the boundaries a random trace seldom hits, each step run
# through both and compared as in run_trace. A step is ("acquire", request,
# costs, t), ("peek", request, cost, t), ("reserve", request, cost,
# max_wait, t) or ("refund", request, cost, taken_at), times in µs.
Step = tuple[Union[str, dict[str, str], int, list[int]], ...]
T = 2_000_000_000_000_000  # µs (2033): a multiple of every window below; no key expires during a test


def run_steps(client: redis.Redis, name: str, limits: list[tuple[str, Maker, list[str]]], steps: list[Step]) -> None:
    core = ratekeeper.Policy()
    for limit, make, by in limits:
        core.add(limit, make(CORE_UNIT), by=by)
    remote = RedisPolicy(client, [(limit, make(WIRE_UNIT), by) for limit, make, by in limits], prefix=f"{name}:")
    for i, step in enumerate(steps):
        context = f"{name}, step {i}: {step}"
        op, request, *rest = step
        assert isinstance(op, str) and isinstance(request, dict)
        if op == "refund":
            cost, taken_at = rest
            assert isinstance(cost, int) and isinstance(taken_at, int)
            core.refund(request, cost, taken_at=taken_at * CORE_UNIT)
            remote.refund(request, cost, taken_at=taken_at * WIRE_UNIT)
        elif op == "reserve":
            cost, max_wait, t = rest
            assert isinstance(cost, int) and isinstance(max_wait, int) and isinstance(t, int)
            booked = core.reserve(request, cost, max_wait=max_wait * CORE_UNIT, now=t * CORE_UNIT)
            remote_booked = remote.reserve(request, cost, max_wait=max_wait * WIRE_UNIT, now=t * WIRE_UNIT)
            assert (remote_booked.ok, round(remote_booked.wait * 10**6)) == (booked.ok, round(booked.wait * 10**9)), context
            assert (remote_booked.decision is None) == (booked.decision is None), context
            if booked.decision is not None and remote_booked.decision is not None:
                assert numbers(remote_booked.decision, 10**6) == numbers(booked.decision, 10**9), context
        elif op == "peek":
            cost, t = rest
            assert isinstance(cost, int) and isinstance(t, int)
            same_decision(remote.peek(request, cost, now=t * WIRE_UNIT), core.peek(request, cost, now=t * CORE_UNIT), context)
        else:
            costs, t = rest
            assert op == "acquire" and isinstance(costs, list) and isinstance(t, int)
            expected = [core.try_acquire(request, c, now=t * CORE_UNIT) for c in costs]
            got = remote.try_acquire_batch(request, costs, now=t * WIRE_UNIT)
            assert len(got) == len(expected), context
            for g, e in zip(got, expected):
                same_decision(g, e, context)


def test_a_log_counts_its_ring_without_an_entry_that_left_the_window_at_the_edge(client: redis.Redis) -> None:
    # The entry at T, still stored, left the window at T + 10 exactly: the
    # ring of 2 * limit instants holds the booking at T + 10 alone, and the
    # one at T + 20 is booked, as in the core.
    log: Maker = lambda unit: ratekeeper.SlidingWindowLog(1, 10 * unit)
    u = {"key": "u"}
    steps: list[Step] = [
        ("acquire", u, [1], T),
        ("reserve", u, 1, 100, T),  # booked at T + 10
        ("reserve", u, 1, 100, T + 10),  # at T + 20
        ("peek", u, 1, T + 20),
    ]
    run_steps(client, "log-ring-edge", [("log", log, ["key"])], steps)


def test_a_log_whose_ring_is_full_books_more_at_its_newest_instant(client: redis.Redis) -> None:
    # The ring bounds instants, not units: a cost that fits at the newest
    # booking's instant adds to it, however many instants are held.
    log: Maker = lambda unit: ratekeeper.SlidingWindowLog(2, 10 * unit)
    u = {"key": "u"}
    steps: list[Step] = [
        ("acquire", u, [1], T),
        ("acquire", u, [1], T + 1),
        ("reserve", u, 2, 100, T + 1),  # booked at T + 11
        ("reserve", u, 1, 100, T + 1),  # at T + 21: 4 instants, the ring is full
        ("reserve", u, 1, 100, T + 1),  # at T + 21 again
        ("peek", u, 1, T + 21),
        ("acquire", u, [1], T + 31),
    ]
    run_steps(client, "log-ring-full", [("log", log, ["key"])], steps)


def test_a_window_refund_of_more_than_it_counts_keeps_its_booking(client: redis.Redis) -> None:
    # Given back down to zero, never below: the booking's slot still holds
    # the window until then (a count below zero read as a foreign key's,
    # fresh, and admitted at once).
    window: Maker = lambda unit: ratekeeper.FixedWindow(1, 1000 * unit)
    u = {"key": "u"}
    steps: list[Step] = [
        ("acquire", u, [1], T + 100),
        ("reserve", u, 1, 10_000, T + 200),  # booked at T + 1000, the next window
        ("refund", u, 2, T + 1000),
        ("acquire", u, [1], T + 300),
        ("acquire", u, [1], T + 1000),
    ]
    run_steps(client, "window-over-refund", [("window", window, ["key"])], steps)


@pytest.mark.parametrize(
    "shared",
    [
        # A bucket refilled by T + 100; windows 100 µs long.
        lambda unit: ratekeeper.TokenBucket(5, 1, 10 * unit),
        lambda unit: ratekeeper.FixedWindow(5, 100 * unit),
        lambda unit: ratekeeper.SlidingWindowCounter(5, 100 * unit),
        lambda unit: ratekeeper.SlidingWindowLog(5, 100 * unit),
    ],
    ids=["token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"],
)
def test_a_booking_at_a_slot_before_a_limits_latest_time_books_at_that_time(client: redis.Redis, shared: Maker) -> None:
    # A caller's clock behind the time a shared limit's key has seen: the
    # slot another limit sets (a key of its own, which has not seen that
    # time) comes before it, and the shared limit books at its latest time
    # instead (PROTOCOL.md, `reserve`): time never goes back within a key.
    # Booked at the slot, a window counted the unit in the window before
    # (forgetting the one it is in), a log's entry left 40 µs early and a
    # bucket refilled backwards, above its capacity. The core's policy
    # keeps one latest time for all its
    # keys, so the shared limit is compared with a lone core limiter that
    # takes the booking at that latest time.
    per_user = ratekeeper.Gcra(1, 10 * WIRE_UNIT)
    remote = RedisPolicy(client, [("shared", shared(WIRE_UNIT), []), ("user", per_user, ["user"])], prefix="behind:")
    core = shared(CORE_UNIT)
    assert remote.try_acquire({"user": "b"}, 1, now=(T + 50) * WIRE_UNIT).allowed
    assert remote.try_acquire({"user": "a"}, 0, now=(T + 100) * WIRE_UNIT).allowed
    booked = remote.reserve({"user": "b"}, 1, max_wait=1000 * WIRE_UNIT, now=(T + 50) * WIRE_UNIT)
    assert booked.ok and round(booked.wait * 10**6) == 10, "b's own key books at T + 60"
    for cost, t in [(1, T + 50), (0, T + 100), (1, T + 100)]:
        assert core.try_acquire(cost, now=t * CORE_UNIT).allowed
    for user, t in [("c", T + 100), ("d", T + 165), ("e", T + 205)]:
        got = dict(remote.peek({"user": user}, 1, now=t * WIRE_UNIT).limits)["shared"]
        assert numbers(got, 10**6) == numbers(core.peek(1, now=t * CORE_UNIT), 10**9), t
