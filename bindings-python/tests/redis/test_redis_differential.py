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
from ratekeeper.redis import RedisPolicy

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
            context = f"seed {seed}, t {t}, costs {costs}"
            assert numbers(g, 10**6) == numbers(e, 10**9), context
            assert g.denied_by == e.denied_by, context
            assert [(n, numbers(d, 10**6)) for n, d in g.limits] == [
                (n, numbers(d, 10**9)) for n, d in e.limits
            ], context
            assert g.from_store
            compared += 1
    return compared


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
