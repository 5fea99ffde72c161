"""A booking made before its key was reset by another process (or another
limiter object, which the client cannot see), or before the key expired and
was made again, gives nothing back: the key, used again since, holds units
taken anew, which a give-back freed (the key admitted more than its limit).
The script tells the key's states apart by their birth (PROTOCOL.md,
"Guarded refund")."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any, Callable

import pytest
import redis
import redis.asyncio
from redis_fixtures import client, url

import ratekeeper
from ratekeeper import Bandwidth
from ratekeeper.redis import AsyncRedisLimiter, RedisLimiter, RedisPolicy

# Two units at once, every algorithm the script runs, each over periods
# that the callers' clock, standing still, never leaves.
LIMITS: dict[str, Callable[[], Any]] = {
    "gcra": lambda: ratekeeper.Gcra(2, 1.0),
    "token_bucket": lambda: ratekeeper.TokenBucket(2, 1, 1.0),
    "token_bucket_bands": lambda: ratekeeper.TokenBucket.from_bandwidths(
        [Bandwidth(2, 1, 1.0), Bandwidth(10, 10, 60.0)]
    ),
    "fixed_window": lambda: ratekeeper.FixedWindow(2, 3600),
    "sliding_window_counter": lambda: ratekeeper.SlidingWindowCounter(2, 3600),
    "sliding_window_log": lambda: ratekeeper.SlidingWindowLog(2, 3600),
}

# The same over periods of 10 ms: a key of theirs expires about a second
# after its last call (the relative expiry of the callers' clock, from 1970).
SHORT: dict[str, Callable[[], Any]] = {
    "gcra": lambda: ratekeeper.Gcra(2, 0.01),
    "token_bucket": lambda: ratekeeper.TokenBucket(2, 1, 0.01),
    "fixed_window": lambda: ratekeeper.FixedWindow(2, 0.01),
    "sliding_window_counter": lambda: ratekeeper.SlidingWindowCounter(2, 0.01),
    "sliding_window_log": lambda: ratekeeper.SlidingWindowLog(2, 0.01),
}

# The callers' clock, standing still: every call at the same instant, so
# that a key used again after a reset holds what it held before it.
NOW = 2_000_000_000.0


def _prefix(name: str) -> str:
    return f"rk-py-reset-elsewhere:{name}:{uuid.uuid4().hex}:"


@pytest.fixture
def other_client(url: str) -> Iterator[redis.Redis]:
    """Another process's client (on the database ``client`` flushed)."""
    r = redis.Redis.from_url(url)
    yield r
    r.close()


def _limiters(
    client: redis.Redis, other_client: redis.Redis, algorithm: str, prefix: str, clock: Callable[[], float] = lambda: NOW
) -> tuple[RedisLimiter, RedisLimiter]:
    """This process's limiter and another process's: a client and a limiter of its own, on the keys of ``prefix``."""
    mine = RedisLimiter(client, LIMITS[algorithm](), prefix=prefix, clock=clock)
    return mine, RedisLimiter(other_client, LIMITS[algorithm](), prefix=prefix, clock=clock)


def _two_processes(
    client: redis.Redis, other_client: redis.Redis, algorithm: str, name: str
) -> tuple[RedisLimiter, RedisLimiter]:
    """``_limiters`` on keys of their own, on a clock standing still."""
    return _limiters(client, other_client, algorithm, _prefix(name))


def _cancel_after_a_reset_elsewhere_gives_nothing_back(mine: RedisLimiter, other: RedisLimiter) -> None:
    """``mine`` books, ``other`` resets the key and takes its 2 units anew: the cancel must free none."""
    booking = mine.reserve("k", max_wait=0)
    assert booking.ok
    assert other.reset("k")
    assert _admitted(lambda: other.try_acquire("k")) == 2
    # Given back, the booking freed one of the units taken since the reset.
    booking.cancel()
    assert not other.try_acquire("k")


def _admitted(take: Callable[[], Any]) -> int:
    """How many units ``take()`` is allowed one after another (at most 10)."""
    count = 0
    while count < 10 and take():
        count += 1
    return count


@pytest.mark.parametrize("algorithm", LIMITS)
def test_a_cancel_after_another_process_reset_the_key_gives_nothing_back(
    client: redis.Redis, other_client: redis.Redis, algorithm: str
) -> None:
    _cancel_after_a_reset_elsewhere_gives_nothing_back(*_two_processes(client, other_client, algorithm, algorithm))


@pytest.mark.parametrize("algorithm", LIMITS)
def test_a_guarded_give_back_after_another_process_reset_the_key_gives_nothing_back(
    client: redis.Redis, other_client: redis.Redis, algorithm: str
) -> None:
    # What an interrupted acquire gives back (the booking's marks, guarded):
    # the key, used again by one unit at the same instant, ends its line
    # where the booking left it, and the marks alone matched.
    mine, other = _two_processes(client, other_client, algorithm, algorithm)
    booking = mine.reserve("k", max_wait=0)
    assert booking.ok
    assert other.reset("k")
    assert other.try_acquire("k")
    booking._give_back()
    assert _admitted(lambda: other.try_acquire("k")) == 1


@pytest.mark.parametrize("algorithm", LIMITS)
def test_units_taken_for_a_caller_that_left_give_nothing_back_after_another_process_reset_the_key(
    client: redis.Redis, other_client: redis.Redis, algorithm: str
) -> None:
    # A batched caller that left before its answer: its units go back with
    # the acquire reply's marks (as ``_send`` gives them back), after a reset
    # elsewhere and the key used again by one unit at the same instant.
    mine, other = _two_processes(client, other_client, algorithm, f"left-{algorithm}")
    keys = mine._keys("k")
    (answer,), took = mine._decide_taken("k", keys, "acquire", [1], None)
    assert answer.allowed and took is not None
    assert other.reset("k")
    assert other.try_acquire("k")
    mine._give_back(keys, [("k", 1, answer)], took)
    assert _admitted(lambda: other.try_acquire("k")) == 1


def test_a_policy_cancel_after_another_process_reset_gives_nothing_back_to_any_limit(
    client: redis.Redis, other_client: redis.Redis
) -> None:
    config = [
        ("rate", ratekeeper.Gcra(2, 1.0), ["user"]),
        ("bucket", ratekeeper.TokenBucket(2, 1, 1.0), ["user"]),
        ("hourly", ratekeeper.FixedWindow(2, 3600), ["user"]),
        ("counter", ratekeeper.SlidingWindowCounter(2, 3600), ["user"]),
        ("log", ratekeeper.SlidingWindowLog(2, 3600), ["user"]),
    ]
    prefix = _prefix("policy")
    mine = RedisPolicy(client, config, prefix=prefix, clock=lambda: NOW)
    other = RedisPolicy(other_client, config, prefix=prefix, clock=lambda: NOW)
    request = {"user": "u"}
    booking = mine.reserve(request, max_wait=0)
    assert booking.ok
    assert other.reset(request) == 5
    assert _admitted(lambda: other.try_acquire(request)) == 2
    booking.cancel()
    assert [(name, d.remaining) for name, d in other.peek(request, 0).limits] == [
        (name, 0) for name, _, _ in config
    ]


def _one_key_of_two() -> list[tuple[str, Any, list[str]]]:
    """A limit per user and one for all: a reset of one user's keys leaves the global key."""
    return [("user", ratekeeper.Gcra(2, 1.0), ["user"]), ("all", ratekeeper.FixedWindow(10, 3600), [])]


def _cancel_after_a_reset_of_one_key_gives_back_to_the_others(mine: RedisPolicy, other: RedisPolicy) -> None:
    """``mine`` books for a user (the global key born before, by another
    user's call), ``other`` (``mine`` itself, for its own reset) resets the
    user's key and takes its 2 units anew: each key's birth goes back with
    its own limit's, so the cancel gives back to the global key alone."""
    assert mine.try_acquire({"user": "first"})
    booking = mine.reserve({"user": "u"}, max_wait=0)
    assert booking.ok
    assert other.reset({"user": "u"}) == 1
    assert _admitted(lambda: other.try_acquire({"user": "u"})) == 2
    booking.cancel()
    assert [(name, d.remaining) for name, d in other.peek({"user": "u"}, 0).limits] == [("user", 0), ("all", 7)]


def test_a_policy_cancel_after_another_process_reset_one_of_its_keys_gives_back_to_the_others(
    client: redis.Redis, other_client: redis.Redis
) -> None:
    prefix = _prefix("policy-one-key")
    mine = RedisPolicy(client, _one_key_of_two(), prefix=prefix, clock=lambda: NOW)
    other = RedisPolicy(other_client, _one_key_of_two(), prefix=prefix, clock=lambda: NOW)
    _cancel_after_a_reset_of_one_key_gives_back_to_the_others(mine, other)


def test_a_policy_cancel_after_its_own_reset_of_one_of_its_keys_gives_back_to_the_others(client: redis.Redis) -> None:
    # Its own reset is told as another's is, per key, by the births. (The
    # client once counted its own resets, and gave nothing back to any
    # limit: less than it could, though never more.)
    policy = RedisPolicy(client, _one_key_of_two(), prefix=_prefix("policy-own-reset"), clock=lambda: NOW)
    _cancel_after_a_reset_of_one_key_gives_back_to_the_others(policy, policy)


def test_an_asyncio_cancel_after_another_limiter_reset_the_key_gives_nothing_back(url: str, client: redis.Redis) -> None:
    async def main() -> bool:
        prefix = _prefix("asyncio")
        first, second = redis.asyncio.Redis.from_url(url), redis.asyncio.Redis.from_url(url)
        try:
            mine = AsyncRedisLimiter(first, ratekeeper.Gcra(2, 1.0), prefix=prefix, clock=lambda: NOW)
            other = AsyncRedisLimiter(second, ratekeeper.Gcra(2, 1.0), prefix=prefix, clock=lambda: NOW)
            booking = await mine.reserve("k", max_wait=0)
            assert booking.ok
            assert await other.reset("k")
            assert (await other.try_acquire("k")) and (await other.try_acquire("k"))
            await booking.cancel()
            return bool(await other.try_acquire("k"))
        finally:
            await first.aclose()
            await second.aclose()

    assert not asyncio.run(main())


@pytest.mark.parametrize("algorithm", SHORT)
def test_a_cancel_after_the_key_expired_and_was_made_again_gives_nothing_back(
    client: redis.Redis, algorithm: str
) -> None:
    # From 1970 on the callers' clock (a monotonic one): a key expires a
    # second after its last call, its state forgotten, whatever that clock
    # says meanwhile (here: nothing, it stands still).
    now = 1000.0
    limiter = RedisLimiter(client, SHORT[algorithm](), prefix=_prefix(f"expired-{algorithm}"), clock=lambda: now)
    booking = limiter.reserve("k", max_wait=0)
    assert booking.ok
    (key,) = limiter._keys("k")
    deadline = time.monotonic() + 10
    while client.exists(key):
        assert time.monotonic() < deadline, "the key never expired"
        time.sleep(0.05)
    assert _admitted(lambda: limiter.try_acquire("k")) == 2
    booking.cancel()
    assert not limiter.try_acquire("k")


# PROTOCOL.md's commands for the clients' ACL user, but TIME: a deployment
# that forbids it in scripts decides on the callers' clock (README, "Time").
WITHOUT_TIME = (
    "+evalsha +script|load +eval +get +set +pexpire +pexpireat +unlink +zadd +zcount"
    " +zrangebyscore +zrevrangebyscore +zremrangebyscore"
).split()


@contextlib.contextmanager
def _without_time(url: str, client: redis.Redis, prefix: str) -> Iterator[tuple[redis.Redis, redis.Redis]]:
    """Two clients (two processes') of an ACL user of ``WITHOUT_TIME`` on the keys of ``prefix``."""
    user = f"rk-py-no-time-{uuid.uuid4().hex}"
    client.acl_setuser(user, enabled=True, passwords=["+pw"], commands=WITHOUT_TIME, keys=[f"{prefix}*"])
    mine_client = redis.Redis.from_url(url, username=user, password="pw")
    other_client = redis.Redis.from_url(url, username=user, password="pw")
    try:
        yield mine_client, other_client
    finally:
        mine_client.close()
        other_client.close()
        client.acl_deluser(user)


@pytest.mark.parametrize("algorithm", LIMITS)
def test_on_the_callers_clock_a_user_without_time_books_gives_back_and_tells_a_reset_elsewhere(
    url: str, client: redis.Redis, algorithm: str
) -> None:
    # The key's birth is the server's TIME where the script may call it,
    # else the nonce of the call that wrote the key first: a key used again
    # at another instant since a reset still gives nothing back.
    prefix = _prefix(f"no-time-{algorithm}")
    with _without_time(url, client, prefix) as (mine_client, other_client):
        now = [NOW]
        mine, other = _limiters(mine_client, other_client, algorithm, prefix, lambda: now[0])
        booking = mine.reserve("a", max_wait=0)
        assert booking.ok
        booking.cancel()
        assert _admitted(lambda: mine.try_acquire("a")) == 2
        booking = mine.reserve("b", max_wait=0)
        assert booking.ok
        assert other.reset("b")
        now[0] = NOW + 0.001
        assert _admitted(lambda: other.try_acquire("b")) == 2
        booking.cancel()
        assert not other.try_acquire("b")


@pytest.mark.parametrize("algorithm", LIMITS)
def test_on_the_callers_clock_held_still_a_user_without_time_tells_a_reset_elsewhere(
    url: str, client: redis.Redis, algorithm: str
) -> None:
    # Without TIME a key's birth is its first call's nonce (PROTOCOL.md,
    # "ACL"): the key reset by another limiter object and used again at the
    # very same instant has another birth, and the cancel gives nothing back
    # (with the callers' instant as the birth, it freed a unit taken since).
    prefix = _prefix(f"no-time-still-{algorithm}")
    with _without_time(url, client, prefix) as (mine_client, other_client):
        _cancel_after_a_reset_elsewhere_gives_nothing_back(*_limiters(mine_client, other_client, algorithm, prefix))


def test_the_nonce_leaves_the_users_random_sequence_alone(client: redis.Redis) -> None:
    # Every acquire and reserve sends a nonce (a key's birth where TIME is
    # refused): drawn from `random`'s generator, it moved the sequence a
    # user seeded, and two processes seeded alike sent the same nonces.
    limiter = RedisLimiter(client, ratekeeper.Gcra(2, 1.0), prefix=_prefix("nonce"), clock=lambda: NOW)
    random.seed(7)
    expected = [random.random() for _ in range(3)]
    random.seed(7)
    seen = [random.random()]
    limiter.reserve("k", max_wait=0).cancel()
    assert limiter.try_acquire("k")
    seen += [random.random() for _ in range(2)]
    assert seen == expected
