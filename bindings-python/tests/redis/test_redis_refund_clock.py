"""A refund, which carries no time of the caller's, never loses a key's state
written on the callers' clock (a clock behind the server's, or of another origin)."""

from __future__ import annotations

from typing import Callable

import pytest
import redis
from redis_fixtures import client, url

import ratekeeper
from ratekeeper.redis import RedisLimiter

LIMITERS: dict[str, Callable[[], ratekeeper.Limiter]] = {
    "gcra": lambda: ratekeeper.Gcra(5, 1.0),
    "token_bucket": lambda: ratekeeper.TokenBucket(5, 1, 1.0),
    "fixed_window": lambda: ratekeeper.FixedWindow(5, 60),
    "sliding_window_counter": lambda: ratekeeper.SlidingWindowCounter(5, 60),
    "sliding_window_log": lambda: ratekeeper.SlidingWindowLog(5, 60),
}


@pytest.mark.parametrize("algorithm", LIMITERS)
@pytest.mark.parametrize("start", [1000, 1_600_000_000])  # monotonic-like; a Unix clock years behind
def test_a_refund_keeps_the_state_taken_at_a_callers_time(client: redis.Redis, algorithm: str, start: int) -> None:
    core = LIMITERS[algorithm]()
    remote = RedisLimiter(client, LIMITERS[algorithm](), prefix="refund-clock:")
    for _ in range(5):
        assert core.try_acquire(1, now=start).allowed
        assert remote.try_acquire("k", 1, now=start).allowed
    (key,) = client.keys("refund-clock:*")
    assert isinstance(key, bytes)
    expiry = client.pexpiretime(key.decode())
    core.refund(1, taken_at=start)
    remote.refund("k", 1, taken_at=start)
    assert client.keys("refund-clock:*") == [key]
    # Kept as it was: the state, judged at its own latest time, holds 4
    # units; judged at the refund's (the server's) time, it looked fresh,
    # and the key was cut to a second.
    assert client.pexpiretime(key.decode()) == expiry
    for _ in range(3):
        expected = core.try_acquire(1, now=start)
        got = remote.try_acquire("k", 1, now=start)
        assert (got.allowed, got.remaining) == (expected.allowed, expected.remaining)


@pytest.mark.parametrize("algorithm", LIMITERS)
@pytest.mark.parametrize("start", [1000, 1_600_000_000])
def test_a_refund_leaving_a_key_fresh_keeps_its_latest_time(client: redis.Redis, algorithm: str, start: int) -> None:
    # Deleted, the key forgot `start`: a caller whose clock stepped back
    # 100 s then took the whole limit back then, and more again at `start`.
    core = LIMITERS[algorithm]()
    remote = RedisLimiter(client, LIMITERS[algorithm](), prefix="refund-fresh:")
    assert core.try_acquire(1, now=start).allowed
    assert remote.try_acquire("k", 1, now=start).allowed
    core.refund(1, taken_at=start)
    remote.refund("k", 1, taken_at=start)
    keys = client.keys("refund-fresh:*")
    assert len(keys) == 1
    assert 0 < client.pttl(keys[0]) <= 1000, "kept a second at most, as a fresh key written on the callers' clock is"
    for now in [start - 100] * 6 + [start + 0.1] * 2:
        expected = core.try_acquire(1, now=now)
        got = remote.try_acquire("k", 1, now=now)
        assert (got.allowed, got.remaining) == (expected.allowed, expected.remaining), now


@pytest.mark.parametrize("algorithm", LIMITERS)
def test_a_refund_above_the_limit_gives_back_what_was_taken_as_in_process(client: redis.Redis, algorithm: str) -> None:
    core = LIMITERS[algorithm]()
    remote = RedisLimiter(client, LIMITERS[algorithm](), prefix="refund-over:")
    for _ in range(3):
        assert core.try_acquire(1, now=1000).allowed
        assert remote.try_acquire("k", 1, now=1000).allowed
    core.refund(100, taken_at=1000)
    remote.refund("k", 100, taken_at=1000)
    # Beyond 64 bits: refused as in-process, with the same code.
    with pytest.raises(ratekeeper.RateLimitError) as refused:
        core.refund(2**64, taken_at=1000)
    assert refused.value.code == "invalid_value"
    with pytest.raises(ratekeeper.RateLimitError) as refused:
        remote.refund("k", 2**64, taken_at=1000)
    assert refused.value.code == "invalid_value"
    for _ in range(6):
        expected = core.try_acquire(1, now=1000)
        got = remote.try_acquire("k", 1, now=1000)
        assert (got.allowed, got.remaining) == (expected.allowed, expected.remaining)
