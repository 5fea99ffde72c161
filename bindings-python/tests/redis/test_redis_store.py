"""The Redis-backed limiters against a real server: time, memory, faults,
hot-key batching, concurrency across processes and threads, Redis Cluster."""

from __future__ import annotations

import asyncio
import enum
import gc
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any, Awaitable, Callable, Optional, Union

import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry
from redis_fixtures import Server, client, cluster_url, given_back, own_server, url

import ratekeeper
import ratekeeper.redis
from ratekeeper._ratekeeper import REDIS_SCRIPT
from ratekeeper.redis import AsyncRedisLimiter, AsyncRedisPolicy, RedisDecision, RedisLimiter, RedisPolicy, ScriptError

# How long a decision takes while the server is down is the client's business
# (its timeouts and retries): here, no retries.
NO_RETRY = Retry(NoBackoff(), 0)
ASYNC_NO_RETRY = AsyncRetry(NoBackoff(), 0)

POLICY = {
    "limits": [
        {"name": "per-user", "algorithm": "gcra", "rate": "10/second", "burst": 3, "by": ["user"]},
        {"name": "per-endpoint", "algorithm": "sliding_window_counter", "rate": "5/minute", "by": ["user", "endpoint"]},
        {"name": "per-user-hour", "algorithm": "fixed_window", "rate": "100/hour", "by": ["user"]},
    ]
}


def test_server_time_is_the_default(client: redis.Redis) -> None:
    limiter = RedisLimiter(client, ratekeeper.Gcra(2, 5))
    assert [bool(limiter.try_acquire("k")) for _ in range(3)] == [True, True, False]
    denied = limiter.try_acquire("k")
    # Decided on the server's clock: the wait is what is left of the interval
    # (of 5 s: the four calls take less than 1 s).
    assert 4 < denied.retry_after <= 5
    assert denied.headers()["Retry-After"] == "5"
    seconds, micros = client.time()
    assert abs(seconds + micros / 1e6 - time.time()) < 1


def test_decode_responses_clients_decide_the_same(url: str) -> None:
    # acquire and peek replies are one string of integers ('text'): str on a
    # client with decode_responses, bytes on one without.
    T0 = 2_000_000_000.0
    text = redis.Redis.from_url(url, decode_responses=True)
    raw = redis.Redis.from_url(url)
    try:
        prefix = f"rk-py-decode:{uuid.uuid4().hex}:"
        decoding = RedisPolicy(text, POLICY, prefix=prefix + "a:")
        plain = RedisPolicy(raw, POLICY, prefix=prefix + "b:")
        request = {"user": "u", "endpoint": "/e"}
        for cost in [1, 2, 0, 3, 1]:
            assert decoding.peek(request, cost, now=T0) == plain.peek(request, cost, now=T0)
            assert decoding.try_acquire(request, cost, now=T0) == plain.try_acquire(request, cost, now=T0)
        batch = decoding.try_acquire_batch(request, [1, 1, 1], now=T0 + 1)
        assert batch == plain.try_acquire_batch(request, [1, 1, 1], now=T0 + 1)
        assert [d.from_store for d in batch] == [True] * 3
    finally:
        text.close()
        raw.close()


def test_text_replies_carry_the_array_replies_integers(client: redis.Redis) -> None:
    # The script's two reply forms (PROTOCOL.md), one limit and several, batched.
    script = client.register_script(REDIS_SCRIPT)
    config: list[str | int] = ["gcra", 3, 1_000_000, "fixed_window", 2, 60_000_000]
    for n, keys in [(1, ["rk-py-form:{k}:a"]), (2, ["rk-py-form:{k}:a", "rk-py-form:{k}:b"])]:
        for mode in ["peek", "acquire"]:
            client.delete(*keys)
            args: list[str | int] = ["1", mode, "2000000000000000", n, *config[: 3 * n], 4, 1, 2, 1, 1]
            array = script(keys=keys, args=args)
            client.delete(*keys)
            text = script(keys=keys, args=[*args, "text"])
            assert isinstance(array, list) and isinstance(text, bytes)
            # An acquire's marks follow: the GCRA's count 1 and its TAT, the
            # window's 0; then each key's birth, which differs (the keys
            # deleted in between, each call wrote them first).
            births = 0 if mode == "peek" else n
            numbers = [int(x) for x in text.split()]
            assert numbers[: len(numbers) - births] == array[: len(array) - births]
            assert all(b > 0 and b not in array for b in numbers[len(numbers) - births :])
            marks = 0 if mode == "peek" else [2, 3][n - 1]
            assert len(array) == 1 + 4 * (6 if n == 1 else 6 + 5 * n) + marks + births


def test_the_exported_script_and_sha_are_what_a_decision_runs(client: redis.Redis) -> None:
    # As the Node client's REDIS_SCRIPT and REDIS_SCRIPT_SHA: after a decision
    # on a server without scripts, the script cached under that SHA is this one.
    client.script_flush()
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(2, 3600), prefix="rk-py-sha:")
    assert limiter.try_acquire("k").from_store
    assert client.script_exists(ratekeeper.redis.REDIS_SCRIPT_SHA) == [True]
    assert ratekeeper.redis.REDIS_SCRIPT == REDIS_SCRIPT
    assert client.script_load(ratekeeper.redis.REDIS_SCRIPT) == ratekeeper.redis.REDIS_SCRIPT_SHA


def test_the_script_refuses_a_cost_above_a_limit(client: redis.Redis) -> None:
    # The clients never send one; another client might. A log decided it
    # (admitted it, on an empty key), where the core refuses it.
    script = client.register_script(REDIS_SCRIPT)
    for mode in ["acquire", "peek", "reserve"]:
        with pytest.raises(redis.ResponseError, match="^ratekeeper: cost 3 exceeds the limit 2 of limit 2$"):
            script(keys=["rk-py-cost:{k}:a", "rk-py-cost:{k}:b"], args=["1", mode, "100", 2, "gcra", 5, 1, "sliding_window_log", 2, 10, 1, 3, 0])
    assert client.exists("rk-py-cost:{k}:b") == 0
    # Giving back more than a limit is capped there, not refused.
    script(keys=["rk-py-cost:{k}:b"], args=["1", "refund", "100", 1, "sliding_window_log", 2, 10, 1, 3, ""])


def test_the_script_refuses_a_key_count_other_than_its_limits(client: redis.Redis) -> None:
    # A client and script that disagree: a key left over was never written,
    # a key missing failed inside the script.
    script = client.register_script(REDIS_SCRIPT)
    gcra: list[Union[str, int]] = ["gcra", 5, 1]
    for keys, n in [(["rk-py-keys:{k}:a", "rk-py-keys:{k}:b"], 1), (["rk-py-keys:{k}:a"], 2)]:
        with pytest.raises(redis.ResponseError, match=f"^ratekeeper: {len(keys)} keys for {n} limits$"):
            script(keys=keys, args=["1", "acquire", "100", n, *gcra * n, 1, 1])
    assert client.exists("rk-py-keys:{k}:a", "rk-py-keys:{k}:b") == 0


@pytest.mark.parametrize("n", [1, 2])
def test_a_peek_decides_every_cost_against_the_same_state(client: redis.Redis, n: int) -> None:
    # PROTOCOL.md: nothing is consumed between a peek's costs (one limit's
    # reply, and several's, are built apart). The clients send one cost.
    script = client.register_script(REDIS_SCRIPT)
    keys = ["rk-py-peek:{k}:a", "rk-py-peek:{k}:b"][:n]
    config: list[Union[str, int]] = ["gcra", 2, 1_000_000, "fixed_window", 2, 60_000_000]
    reply = script(keys=keys, args=["1", "peek", "100", n, *config[: 3 * n], 2, 2, 2])
    stride = 6 if n == 1 else 6 + 5 * n
    assert len(reply) == 1 + 2 * stride
    first, second = reply[1 : 1 + stride], reply[1 + stride :]
    assert first[:3] == [1, 0, 0] and second == first
    assert client.exists(*keys) == 0


def test_an_acquire_that_took_nothing_replies_no_marks(client: redis.Redis) -> None:
    # PROTOCOL.md: a mark is the key as the call left it, sent only when the
    # call wrote it; the limit's count is 0 when every cost was denied, and
    # the key's birth (the server's TIME when it was written first) 0.
    script = client.register_script(REDIS_SCRIPT)
    args: list[Union[str, int]] = ["1", "acquire", "100", 1, "gcra", 1, 1_000_000, 1, 1]
    took = script(keys=["rk-py-marks:{k}:a"], args=args)
    assert took[-3:-1] == [1, 100 + 1_000_000] and abs(took[-1] - server_ms(client) * 1000) < 60 * 10**6
    denied = script(keys=["rk-py-marks:{k}:a"], args=args)
    assert denied[1] == 0 and len(denied) == 1 + 6 + 1 + 1 and denied[-2:] == [0, 0]


def test_a_refund_gives_back_each_of_its_costs(client: redis.Redis) -> None:
    # ARGV's costs, `m` of them, one after the other: the clients send one.
    script = client.register_script(REDIS_SCRIPT)
    key = "rk-py-costs:{k}:a"
    config: list[Union[str, int]] = ["fixed_window", 5, 60_000_000]
    assert script(keys=[key], args=["1", "acquire", "100", 1, *config, 1, 3])[1] == 1
    script(keys=[key], args=["1", "refund", "100", 1, *config, 2, 1, 2, "100"])
    assert script(keys=[key], args=["1", "peek", "100", 1, *config, 1, 0])[3] == 5


def test_a_guarded_refund_gives_back_only_for_a_mark_equal_to_the_keys_its_length_too(client: redis.Redis) -> None:
    # A mark of another length (another configuration's: a bucket's bands
    # changed in between) is not the key's, however it starts.
    script = client.register_script(REDIS_SCRIPT)
    key = "rk-py-guard:{k}:a"
    config: list[Union[str, int]] = ["gcra", 2, 1_000_000]
    took = script(keys=[key], args=["1", "acquire", "100", 1, *config, 1, 1])
    assert took[1] == 1 and took[-3:-1] == [1, 100 + 1_000_000]
    marks: list[list[Union[str, int]]] = [[2, 100 + 1_000_000, 0], [0]]
    for mark in marks:
        script(keys=[key], args=["1", "refund", "100", 1, *config, 1, 1, "", *mark])
        assert script(keys=[key], args=["1", "peek", "100", 1, *config, 1, 0])[3] == 1, mark
    script(keys=[key], args=["1", "refund", "100", 1, *config, 1, 1, "", 1, 100 + 1_000_000])
    assert script(keys=[key], args=["1", "peek", "100", 1, *config, 1, 0])[3] == 2


def test_a_bucket_refuses_a_booking_whose_debt_passes_2_52(client: redis.Redis) -> None:
    # PROTOCOL.md: the debt's arithmetic, (owed + capacity) * period / gcd,
    # stays below 2^52, where a double is exact. Booked at the slot a window
    # 2^50 µs long sets, 7 tokens per 3 µs owe about 2.6 * 10^15 tokens: the
    # booking is refused and nothing is written (the core, in 128 bits,
    # books it).
    us = Fraction(1, 10**6)
    limits: list[tuple[str, ratekeeper.Limiter, list[str]]] = [
        ("bucket", ratekeeper.TokenBucket(10, 7, 3 * us), []),
        ("window", ratekeeper.FixedWindow(1, 2**50 * us), []),
    ]
    policy = RedisPolicy(client, limits, prefix="rk-py-debt:")
    assert policy.try_acquire({}, 1, now=2**50 * us).allowed
    written = {key: client.get(key) for key in client.keys("rk-py-debt:*")}
    booked = policy.reserve({}, 1, max_wait=2**50 * us, now=2**50 * us)
    assert not booked.ok and round(booked.wait * 10**6) == 2**50
    assert {key: client.get(key) for key in client.keys("rk-py-debt:*")} == written
    # A slot a thousandth as far is booked.
    assert policy.reserve({}, 1, max_wait=2**50 * us, now=(2**51 - 2**40) * us).ok


def test_repr_shows_what_is_limited_not_the_client(client: redis.Redis) -> None:
    gcra = ratekeeper.Gcra(10, 0.1)
    assert repr(RedisLimiter(client, gcra)) == "RedisLimiter(Gcra(burst=10, emission_interval=0.1))"
    shown = repr(RedisLimiter(client, gcra, name="api", prefix="app:"))
    assert shown == "RedisLimiter(Gcra(burst=10, emission_interval=0.1), name='api', prefix='app:')"
    # Building one sends nothing: this client never connects.
    unused = redis.asyncio.Redis(port=1)
    assert repr(AsyncRedisLimiter(unused, gcra)) == "AsyncRedisLimiter(Gcra(burst=10, emission_interval=0.1))"
    policy = RedisPolicy(client, "10/second;100/day", by=["user"])
    assert repr(policy) == repr(ratekeeper.Policy.from_rates("10/second;100/day", by=["user"])).replace("<Policy", "<RedisPolicy")


def test_caller_time_by_clock_and_by_now(client: redis.Redis) -> None:
    # Unix time, as the keys' expiry needs: the start of a 10 s window to come.
    fake = [float(int(time.time()) // 10 * 10 + 10)]
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(2, 10), clock=lambda: fake[0])
    assert limiter.try_acquire("k", 2)
    denied = limiter.try_acquire("k")
    assert (denied.allowed, denied.retry_after) == (False, 10.0)
    fake[0] += 10
    assert limiter.try_acquire("k")
    assert not limiter.peek("k", 2, now=fake[0] + 0.5)


@pytest.mark.parametrize(
    "answer, error, words",
    [
        (None, ratekeeper.RateLimitTypeError, "`clock` must be a number of seconds"),
        (-1, ratekeeper.RateLimitError, "`clock` must not be negative"),
        (math.nan, ratekeeper.RateLimitError, "`clock` must be a finite number"),
        (2**60, ratekeeper.RateLimitError, "`clock`: more than 2^52 µs"),
    ],
)
def test_a_clocks_bad_answer_is_refused_naming_clock(
    client: redis.Redis, url: str, answer: object, error: type[Exception], words: str
) -> None:
    # As the in-process classes (and the Node client's clock()) name it: the
    # caller gave no `now`, which these errors named. A clock answering None
    # was read as "the server's clock" and decided on it, unnoticed.
    prefix = f"bad-clock:{uuid.uuid4().hex}:"
    clock: Any = lambda: answer
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=prefix, clock=clock)
    policy = RedisPolicy(client, "1/second", by=["user"], prefix=prefix, clock=clock)
    calls: list[Callable[[], object]] = [
        lambda: limiter.try_acquire("k"),
        lambda: limiter.peek("k"),
        lambda: limiter.reserve("k"),
        lambda: limiter.acquire("k"),
        lambda: policy.try_acquire({"user": "k"}),
        lambda: policy.reserve({"user": "k"}),
    ]
    for call in calls:
        with pytest.raises(error) as raised:
            call()
        assert str(raised.value).startswith(words), raised.value

    async def asynchronous() -> None:
        async_client = redis.asyncio.Redis.from_url(url)
        store = AsyncRedisLimiter(async_client, ratekeeper.Gcra(1, 1.0), prefix=prefix, clock=clock)
        try:
            with pytest.raises(error, match=re.escape(words)):
                await store.try_acquire("k")
        finally:
            await async_client.aclose()

    asyncio.run(asynchronous())
    assert client.keys(prefix + "*") == []  # nothing was decided


def test_a_float_instant_is_its_own_value_to_the_nearest_microsecond(client: redis.Redis) -> None:
    # As a Fraction of the same float (and as the core reads a float): the
    # nearest µs, halves up. round(x * 1e6) rounded the product first (to a
    # quarter of a µs at epoch seconds) and took a half to the even µs:
    # 1795420534.6261506 went as ...150 where its Fraction, and the Node
    # client's 1795420534626.1506 ms, go as ...151; 2.5e-06 as 2, not 3.
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix="float-now:")
    for now in (2.5e-06, 1795420534.6261506, 1790000990.3389206, 1700000000.25):
        micros = math.floor(Fraction(now) * 10**6 + Fraction(1, 2))
        for given in (now, Fraction(now)):
            assert limiter.reserve("k", 0, now=given).at == micros / 10**6, (now, given)
            assert limiter.reserve("k", 0, max_wait=given, now=0).wait == 0  # accepted alike
    assert micros == 1700000000250000
    # An exact half (a Decimal's, a Fraction's) goes up too, not to the even µs.
    for exact, up in ((Decimal("1700000000.0000025"), 1700000000000003), (Fraction(5, 2 * 10**6), 3)):
        assert limiter.reserve("k", 0, now=exact).at == up / 10**6, exact


def _birth_member(client: redis.Redis, key: Any) -> bytes:
    """A log key's birth, its member ``birth:<b>`` scored -1 (PROTOCOL.md)."""
    (member,) = client.zrangebyscore(key, -1, -1)
    assert isinstance(member, bytes) and member.startswith(b"birth:")
    return member


def test_log_counts_every_event_of_one_instant(client: redis.Redis) -> None:
    start = time.time() + 10  # Unix time, ahead of the server's
    limiter = RedisLimiter(client, ratekeeper.SlidingWindowLog(3, 1), name="log", clock=lambda: start)
    assert [limiter.try_acquire("k").allowed for _ in range(4)] == [True, True, True, False]
    (key,) = client.keys("*")
    # The float's own value to the nearest µs, as the client sends it (not
    # round(start * 1e6), which rounds the product first: one run in eight
    # a µs off).
    micros = math.floor(Fraction(start) * 10**6 + Fraction(1, 2))
    assert client.zrange(key, 0, -1) == [b"latest:%d" % micros, _birth_member(client, key), b"%d:3" % micros]
    assert client.pttl(key) > 8000  # kept until the caller's time, not the server's, plus 1 s
    limiter.refund("k", 1, taken_at=start)
    assert limiter.try_acquire("k", now=start + 0.5)
    assert not limiter.try_acquire("k", now=start + 0.999)
    assert limiter.try_acquire("k", now=start + 1)


# Each algorithm, over a period of `p` seconds.
FRESH_AGAIN: dict[str, Callable[[float], ratekeeper.Limiter]] = {
    "gcra": lambda p: ratekeeper.Gcra(5, p),
    "token_bucket": lambda p: ratekeeper.TokenBucket(5, 5, p),
    "fixed_window": lambda p: ratekeeper.FixedWindow(5, p),
    "sliding_window_counter": lambda p: ratekeeper.SlidingWindowCounter(5, p),
    "sliding_window_log": lambda p: ratekeeper.SlidingWindowLog(5, p),
}


@pytest.mark.parametrize("algorithm", FRESH_AGAIN)
def test_a_call_that_finds_its_key_fresh_again_lets_it_go(client: redis.Redis, algorithm: str) -> None:
    # A call that leaves a key's state fresh writes no state to keep: on the
    # server's clock the key goes at once; on the callers' it stays a second
    # at most, with its latest time (a caller's clock may step back). Kept
    # with the expiry the earlier call set, it outlived its state.
    fast = RedisLimiter(client, FRESH_AGAIN[algorithm](0.005), prefix="fresh-again:")
    assert fast.try_acquire("server", 1).allowed
    # By its name: on a loaded machine the key may expire (its state fresh
    # again, 5 ms on) before a KEYS could list it.
    (fast_key,) = fast._keys("server")
    deadline = time.monotonic() + 10
    while fast.peek("server", 5).retry_after > 0 and time.monotonic() < deadline:
        time.sleep(0.005)  # until the server's clock has it fresh again
    assert fast.try_acquire("server", 0).allowed
    assert client.exists(fast_key) == 0, "a key fresh on the server's clock goes"
    slow = RedisLimiter(client, FRESH_AGAIN[algorithm](60.0), prefix="fresh-again:")
    assert slow.try_acquire("callers", 1, now=1000).allowed
    (key,) = client.keys("fresh-again:*")
    assert [key] == slow._keys("callers")  # (the name the fast key was read by)
    assert client.pttl(key) > 2000  # a second past the state's reset
    assert slow.try_acquire("callers", 0, now=4600).allowed
    assert 0 < client.pttl(key) <= 1000, "kept a second at most, with its latest time"
    # Its latest time kept: a caller whose clock stepped back is decided at 4600.
    assert slow.try_acquire("callers", 5, now=1000).allowed
    assert not slow.try_acquire("callers", 1, now=1000).allowed


def server_ms(client: redis.Redis) -> float:
    """The server's clock, in ms since the Unix epoch."""
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


def test_a_log_keeps_its_sum_and_reads_one_written_without_it(client: redis.Redis) -> None:
    start = round(time.time() + 10)  # Unix time, ahead of the server's
    us = start * 10**6
    limiter = RedisLimiter(client, ratekeeper.SlidingWindowLog(3, 60), name="log", prefix="sum:")
    assert limiter.try_acquire("k", 2, now=start)
    (key,) = client.keys("sum:*")
    # The latest time seen is scored -2 - (the sum of the entries' costs),
    # the key's birth -1 (PROTOCOL.md).
    born = _birth_member(client, key)
    assert client.zrange(key, 0, -1, withscores=True) == [(b"latest:%d" % us, -4.0), (born, -1.0), (b"%d:2" % us, float(us))]
    # As scripts before kept it: score -1, no sum (nor birth). It is counted on reading.
    client.delete(key)
    client.zadd(key, {b"latest:%d" % us: -1, b"%d:2" % us: us})
    assert limiter.try_acquire("k", 1, now=start + 1).remaining == 0
    assert not limiter.try_acquire("k", 1, now=start + 2)
    assert client.zrange(key, 0, 0, withscores=True) == [(b"latest:%d" % (us + 10**6), -5.0)]
    # The entries leave the window 60 s after they came, and their units with them.
    assert limiter.try_acquire("k", 2, now=start + 60).remaining == 0
    # Born when it was written in the new form, and kept since.
    born_again = _birth_member(client, key)
    assert born_again != born
    assert client.zrange(key, 0, -1, withscores=True) == [
        (b"latest:%d" % (us + 60 * 10**6), -5.0),
        (born_again, -1.0),
        (b"%d:1" % (us + 10**6), float(us + 10**6)),
        (b"%d:2" % (us + 60 * 10**6), float(us + 60 * 10**6)),
    ]


def test_keys_expire_exactly_when_fresh(client: redis.Redis) -> None:
    limiter = RedisLimiter(client, ratekeeper.TokenBucket(4, 1, 0.05), name="ttl")
    before = server_ms(client)
    d = limiter.try_acquire("k", 3)
    after = server_ms(client)
    (key,) = client.keys("*")
    assert key == b"ratekeeper:{1:k}:3:ttl:1:k"
    assert d.reset_after == pytest.approx(0.15, abs=0.002)
    # The key expires reset_after after the instant decided at (between
    # before and after), in whole ms rounded up: at most 1 ms later.
    decided_at = int(client.pexpiretime(key.decode())) - d.reset_after * 1000
    assert before - 1 <= decided_at <= after + 1, (before, decided_at, after)
    time.sleep(d.reset_after + 0.01)
    assert client.keys("*") == []
    fresh = limiter.peek("k", 0)
    assert (fresh.remaining, fresh.reset_after) == (4, 0.0)
    # A cost of 0 leaves nothing stored; a refund back to full keeps the key
    # a second at most, with its latest time (a refund cannot tell the
    # server's clock from the callers', on which that time is kept).
    assert limiter.try_acquire("k", 0) and client.keys("*") == []
    limiter.try_acquire("k", 1)
    limiter.refund("k", 1)
    assert 0 < client.pttl(key.decode()) <= 1000


def test_policy_keys_share_a_hash_tag(client: redis.Redis) -> None:
    start = time.time() + 5  # keys expire after it: the GCRA's in 0.1 s
    policy = RedisPolicy(client, POLICY, prefix="p:", clock=lambda: start)
    assert policy.try_acquire({"user": "alice", "endpoint": "/a"})
    keys: list[bytes] = sorted(client.keys("*"))  # type: ignore[arg-type]
    assert [k.split(b"}")[0] for k in keys] == [b"p:{5:alice"] * 3
    assert all(0 < client.pttl(k) for k in keys)


def test_policy_is_all_or_nothing(client: redis.Redis) -> None:
    start = time.time() + 5  # Unix time (ahead of the server's: keys expire after it)
    policy = RedisPolicy(client, POLICY, clock=lambda: start)
    request = {"user": "bob", "endpoint": "/x"}
    assert [policy.try_acquire(request).allowed for _ in range(4)] == [True, True, True, False]
    denied = policy.try_acquire(request)
    assert denied.denied_by == "per-user"
    assert dict(denied.limits)["per-user-hour"].remaining == 97
    assert "per-endpoint" in denied.headers()["RateLimit-Policy"]
    assert policy.names == ("per-user", "per-endpoint", "per-user-hour")
    assert policy.keyed_by("per-endpoint") == ("user", "endpoint")


def test_a_redis_policy_decision_says_what_it_is_and_holds(client: redis.Redis) -> None:
    # A RedisDecision with a PolicyDecision's denied_by and limits, not a
    # PolicyDecision (that native class cannot be subclassed); its repr said
    # `Decision(...)`, with neither its class nor which limit denied.
    start = time.time() + 5
    policy = RedisPolicy(client, POLICY, clock=lambda: start)
    request = {"user": "carol", "endpoint": "/x"}
    allowed = policy.try_acquire(request)
    for _ in range(3):
        denied = policy.try_acquire(request)
    assert isinstance(denied, RedisDecision) and isinstance(denied, ratekeeper.Decision)
    assert not isinstance(denied, ratekeeper.PolicyDecision)
    assert (allowed.denied_by, denied.denied_by) == (None, "per-user")
    for decision, denied_by in ((allowed, "None"), (denied, "'per-user'")):
        numbers = ratekeeper.Decision.__repr__(decision)[len("Decision(") : -1]
        assert repr(decision) == f"RedisPolicyDecision({numbers}, denied_by={denied_by}, from_store=True)"
    # As an in-process PolicyDecision shows them, the same numbers.
    local = ratekeeper.Policy(POLICY, clock=lambda: start)
    for _ in range(4):
        local_denied = local.try_acquire(request)
    assert repr(local_denied).startswith("PolicyDecision(allowed=False, ")
    assert repr(local_denied).endswith(", denied_by='per-user')")
    one = RedisLimiter(client, ratekeeper.Gcra(2, 0.5), clock=lambda: start).try_acquire("k")
    numbers = ratekeeper.Decision.__repr__(one)[len("Decision(") : -1]
    assert repr(one) == f"RedisDecision({numbers}, from_store=True)"


def test_headers_refuse_a_decision_of_the_other_kind_as_in_process(client: redis.Redis) -> None:
    # A RedisLimiter's headers took a policy's decision, and a RedisPolicy's
    # a limiter's, where the in-process classes and the Node client's refuse
    # them; anything else failed with an AttributeError naming no argument.
    prefix = f"rk-py-headers:{uuid.uuid4().hex}:"
    limiter = RedisLimiter(client, ratekeeper.Gcra(10, 0.1, name="api"), prefix=prefix)
    policy = RedisPolicy(client, "10/second;100/minute", by=["user"], prefix=prefix)
    local_limiter = ratekeeper.KeyedLimiter(ratekeeper.Gcra(10, 0.1, name="api"))
    local_policy = ratekeeper.Policy.from_rates("10/second;100/minute", by=["user"])
    d, pd = limiter.try_acquire("k"), policy.try_acquire({"user": "k"})
    assert limiter.headers(d) == local_limiter.headers(local_limiter.try_acquire("k"))
    assert policy.headers(pd) == local_policy.headers(local_policy.try_acquire({"user": "k"}))
    assert policy.headers(local_policy.try_acquire({"user": "k"})) == local_policy.headers(local_policy.peek({"user": "k"}, 0))
    for policys in (pd, local_policy.try_acquire({"user": "k"})):
        with pytest.raises(ratekeeper.RateLimitTypeError, match="^`decision` must be a limiter's Decision, not a policy's") as error:
            limiter.headers(policys)
        assert error.value.code == "invalid_type"
    for limiters in (d, local_limiter.try_acquire("k")):
        with pytest.raises(ratekeeper.RateLimitTypeError, match="^`decision` must be a RedisPolicyDecision or PolicyDecision") as error:
            policy.headers(limiters)
        assert error.value.code == "invalid_type"
    for made in (limiter, policy):
        with pytest.raises(ratekeeper.RateLimitTypeError, match="^`decision` must be a") as error:
            made.headers({"allowed": True})  # type: ignore[arg-type]
        assert error.value.code == "invalid_type"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_redis_policy_describes_its_limits_as_policy_does(asynchronous: bool) -> None:
    # It had `names`, `keyed_by` and `len` but no `limits`, and matched a
    # non-str name to none. An unknown name raises RateLimitError
    # (`invalid_value`) in both, as JS's keyedBy throws a RangeError (both
    # raised KeyError, outside RateLimitError and without a code).
    make: Callable[[Any], Union[RedisPolicy, AsyncRedisPolicy]]
    if asynchronous:
        make = lambda config: AsyncRedisPolicy(redis.asyncio.Redis(port=1), config)  # never asked
    else:
        make = lambda config: RedisPolicy(redis.Redis(port=1), config)
    local = ratekeeper.Policy(POLICY)
    listed = [(name, ratekeeper.Gcra(5, 0.1), list(by)) for name, by in local.limits]
    for policy in (make(POLICY), make(listed)):
        limits: tuple[ratekeeper.PolicyLimit, ...] = policy.limits
        assert limits == local.limits
        assert all(type(limit) is ratekeeper.PolicyLimit for limit in limits)
        name, by = limits[1]
        assert (name, by) == ("per-endpoint", ("user", "endpoint"))
        assert policy.names == local.names
        assert len(policy) == len(local) == 3
        assert policy.keyed_by("per-endpoint") == local.keyed_by("per-endpoint") == ("user", "endpoint")
        for unknown in ("nope", "PER-USER"):
            with pytest.raises(ratekeeper.RateLimitError) as expected:
                local.keyed_by(unknown)
            with pytest.raises(ratekeeper.RateLimitError) as error:
                policy.keyed_by(unknown)
            assert type(error.value) is type(expected.value) is ratekeeper.RateLimitError
            assert error.value.code == expected.value.code == "invalid_value"
            assert str(error.value) == str(expected.value) == f"`name` is not the name of a limit in this policy: {unknown!r}"
        # A lone surrogate is no name at all, as Policy.keyed_by says: not one
        # it merely lacks (RedisPolicy called it that, in other words).
        with pytest.raises(ratekeeper.RateLimitError) as expected:
            local.keyed_by("\ud800")
        with pytest.raises(ratekeeper.RateLimitError) as error:
            policy.keyed_by("\ud800")
        assert type(error.value) is type(expected.value) is ratekeeper.RateLimitError
        assert error.value.code == expected.value.code == "invalid_value"
        assert str(error.value) == str(expected.value) == "`name` must be valid Unicode text (no lone surrogates)"
        with pytest.raises(ratekeeper.RateLimitTypeError, match="^`name` must be a str$") as type_error:
            policy.keyed_by(1)  # type: ignore[arg-type]
        with pytest.raises(ratekeeper.RateLimitTypeError, match="^`name` must be a str$"):
            local.keyed_by(1)  # type: ignore[arg-type]
        assert type_error.value.code == "invalid_type"
        # Its limits are fixed at construction.
        assert not hasattr(policy, "add")
    # None is the empty Policy, which `add` fills: refused, as no limits in
    # any form are, since a policy on Redis has no `add`.
    assert len(ratekeeper.Policy(None)) == len(ratekeeper.Policy({"limits": []})) == 0
    empty: Any
    for empty in (None, {"limits": []}, []):
        with pytest.raises(ratekeeper.RateLimitError, match="^`config`: a policy on Redis needs at least one limit$") as zero:
            make(empty)
        assert zero.value.code == "zero_value"
    # What Policy refuses, refused as it refuses it.
    bad: Any
    for bad in ({}, ""):
        with pytest.raises(ratekeeper.RateLimitError) as local_error:
            ratekeeper.Policy(bad)
        with pytest.raises(type(local_error.value), match=f"^{re.escape(str(local_error.value))}$") as redis_error:
            make(bad)
        assert redis_error.value.code == local_error.value.code


def test_rate_strings_as_policy_takes_them(client: redis.Redis) -> None:
    start = time.time() + 5  # caller time: three calls within 0.5 s on any machine
    policy = RedisPolicy(client, "2/second;3/minute", by=["user"], clock=lambda: start)
    assert policy.names == ratekeeper.Policy.from_rates("2/second;3/minute", by=["user"]).names
    assert [policy.try_acquire({"user": 1}).allowed for _ in range(3)] == [True, True, False]


def test_bad_input_names_the_argument(client: redis.Redis) -> None:
    # In backticks, as the in-process classes write it (`key` must be ...).
    limiter = RedisLimiter(client, ratekeeper.Gcra(2, 0.5))
    with pytest.raises(ratekeeper.RateLimitError, match="^`cost`: 3 is more than the limit 2$") as error:
        limiter.try_acquire("k", 3)
    assert error.value.code == "cost_exceeds_limit"
    with pytest.raises(TypeError, match="^`cost` must be an int, not float$"):
        limiter.try_acquire("k", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^`key` must be a str, bytes or int, not NoneType$"):
        limiter.try_acquire(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^`calendar`: calendar windows are not supported on Redis$"):
        RedisLimiter(client, ratekeeper.FixedWindow.with_calendar(5, "day"))
    # Named as a calendar even where the limit times the nominal 30 days is
    # past 2^51, as the Node client names it.
    with pytest.raises(ValueError, match="^`calendar`: calendar windows are not supported on Redis$"):
        RedisLimiter(client, ratekeeper.SlidingWindowCounter.with_calendar(10**6, "month"))
    with pytest.raises(ValueError, match="^`initial_tokens`: token buckets on Redis start full$"):
        RedisLimiter(client, ratekeeper.TokenBucket(5, 1, 1, initial_tokens=0))
    with pytest.raises(ValueError, match="algorithm"):
        RedisLimiter(client, ratekeeper.LeakyBucket(5, 1))
    with pytest.raises(ValueError, match="^`emission_interval` must be a whole number of microseconds on Redis"):
        RedisLimiter(client, ratekeeper.Gcra(5, 0.0000005))
    with pytest.raises(ratekeeper.RateLimitError, match="^`limit`: .* above 2\\^51 ") as error:
        RedisLimiter(client, ratekeeper.SlidingWindowCounter(10**6, 86400))
    assert error.value.code == "overflow"
    with pytest.raises(ValueError, match="^`request` lacks the field 'endpoint' that limit 'per-endpoint' is keyed by$"):
        RedisPolicy(client, POLICY).try_acquire({"user": "x"})
    # Every field's value is read, as an in-process Policy reads it, not only
    # those a limit is keyed by: a user of None was decided while Redis
    # answered, and refused by an on_error Policy once it could not.
    by_user = RedisPolicy(client, "10/second", by=["user"], prefix=f"fields-{uuid.uuid4()}:")
    cases: list[tuple[Any, str]] = [
        ({"user": "u", "plan": None}, "`request['plan']` must be a str, bytes or int, not NoneType"),
        ({"user": "u", "plan": 1.5}, "`request['plan']` must be a str, bytes or int, not float"),
    ]
    for request, message in cases:
        for call in (by_user.try_acquire, by_user.peek, by_user.reset):
            with pytest.raises(ratekeeper.RateLimitTypeError) as raised:
                call(request)
            assert str(raised.value) == message and raised.value.code == "invalid_type"
        with pytest.raises(ratekeeper.RateLimitTypeError, match=re.escape(message)):
            ratekeeper.Policy.from_rates("10/second", by=["user"]).try_acquire(request)
    with pytest.raises(ratekeeper.RateLimitTypeError, match="^`request` must be a mapping of str field names"):
        by_user.try_acquire({"user": "u", 5: "x"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="^`on_error` must be 'open', 'closed' or "):
        RedisLimiter(client, ratekeeper.Gcra(2, 0.5), on_error="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^`prefix` must not contain"):
        RedisPolicy(client, "1/second", prefix="app{x}:")
    with pytest.raises(ValueError):
        RedisPolicy(client, "10 per fortnight")
    with pytest.raises(ratekeeper.RateLimitError, match="^`config`: a policy on Redis needs at least one limit$") as error:
        RedisPolicy(client, None)
    assert error.value.code == "zero_value"
    # A list gives each limit its own `by` and algorithm: either beside it is refused, as Policy refuses them.
    for extra in ({"by": ["user"]}, {"algorithm": "fixed_window"}):
        with pytest.raises(ratekeeper.RateLimitError, match="applies only to rate strings"):
            RedisPolicy(client, [("a", ratekeeper.Gcra(5, 0.1), [])], **extra)
    # A str is an iterable of str: refused as Policy refuses it, not keyed by its letters.
    with pytest.raises(ratekeeper.RateLimitTypeError, match=r"by=\[name\]") as type_error:
        RedisPolicy(client, "10/second", by="user")
    assert type_error.value.code == "invalid_type"
    # A Decimal may be NaN or infinite too: the same error as a float's.
    for bad in (Decimal("NaN"), Decimal("Infinity"), float("nan")):
        with pytest.raises(ratekeeper.RateLimitError, match="^`now` must be a finite number$"):
            limiter.try_acquire("k", now=bad)
    # The list form, checked as Policy.add checks its arguments.
    gcra = ratekeeper.Gcra(1, 1.0)
    with pytest.raises(TypeError, match="^`by` must be a list of str, not str$"):
        RedisPolicy(client, [("a", gcra, "user")])  # a str would be keyed by its letters
    with pytest.raises(TypeError, match="^`name` must be a str, not int$"):
        RedisPolicy(client, [(1, gcra, ["user"])])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^`config` must be a list of "):
        RedisPolicy(client, [("a", gcra)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="^`batching` must be a bool, not str$"):
        RedisLimiter(client, gcra, batching="no")  # type: ignore[arg-type]
    try:
        import numpy
    except ImportError:
        pass
    else:  # NumPy's bool is a bool, as to every flag of the library
        assert RedisLimiter(client, gcra, batching=numpy.bool_(True))._core.batching is True  # type: ignore[arg-type]
    # A count past 2^51 is as inexact in the script as a time: refused (it
    # admitted a second unit past a limit of 2^53 + 2).
    with pytest.raises(ratekeeper.RateLimitError, match="^`limit`: limit is ") as error:
        RedisLimiter(client, ratekeeper.FixedWindow(2**53 + 2, 1))
    assert error.value.code == "overflow"
    # Errors with codes, as in-process: lone surrogates, batches that are
    # not iterable, an instant past 2^52 µs to give back at.
    for name, make in (
        ("key", lambda: limiter.try_acquire("\ud800")),
        ("name", lambda: RedisLimiter(client, gcra, name="\ud800")),
        ("prefix", lambda: RedisPolicy(client, "1/second", prefix="\ud800")),
        ("request['user']", lambda: RedisPolicy(client, POLICY).try_acquire({"user": "\ud800"})),
    ):
        with pytest.raises(ratekeeper.RateLimitError, match=f"^{re.escape(f'`{name}`')} must be valid Unicode text") as error:
            make()
        assert error.value.code == "invalid_value"
    with pytest.raises(ratekeeper.RateLimitTypeError, match="^`costs` must be an iterable of int, not NoneType$") as type_error:
        limiter.try_acquire_batch("k", None)  # type: ignore[arg-type]
    assert type_error.value.code == "invalid_type"
    with pytest.raises(ratekeeper.RateLimitError, match="^`taken_at`: more than 2\\^52 µs after the Unix epoch$") as error:
        limiter.refund("k", 1, taken_at=2**60)
    assert error.value.code == "overflow"
    # 2^52 µs itself is the latest instant taken, not one past it.
    latest = Fraction(ratekeeper.redis.MAX_NOW, 10**6)
    assert limiter.reserve("k", 0, now=latest).at == float(latest)
    with pytest.raises(ratekeeper.RateLimitError, match="^`now`: more than 2\\^52 µs") as error:
        limiter.reserve("k", 0, now=latest + Fraction(1, 10**6))
    assert error.value.code == "overflow"


def test_a_cost_past_64_bits_is_invalid_value_in_every_method_as_in_process(url: str) -> None:
    # acquire, peek, reserve and batches compared such a cost with the limit
    # (cost_exceeds_limit), where the in-process classes, and the client's
    # own refund, refuse it as no count first (invalid_value).
    client = redis.Redis.from_url(url)

    def gcra() -> ratekeeper.Gcra:
        return ratekeeper.Gcra(5, 1.0)

    local, local_policy = ratekeeper.KeyedLimiter(gcra()), ratekeeper.Policy.from_rates("5/second")
    prefix = f"rk-py-big-cost:{uuid.uuid4().hex}:"
    limiter, policy = RedisLimiter(client, gcra(), prefix=prefix), RedisPolicy(client, "5/second", prefix=prefix)
    for big, code in [(2**64, "invalid_value"), (2**64 - 1, "cost_exceeds_limit")]:
        calls: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
            "try_acquire": (lambda: local.try_acquire("k", big), lambda: limiter.try_acquire("k", big)),
            "peek": (lambda: local.peek("k", big), lambda: limiter.peek("k", big)),
            "reserve": (lambda: local.reserve("k", big), lambda: limiter.reserve("k", big)),
            "acquire": (lambda: local.acquire("k", big), lambda: limiter.acquire("k", big)),
            "try_acquire_batch": (lambda: local.try_acquire_batch("k", [big]), lambda: limiter.try_acquire_batch("k", [big])),
            "policy": (lambda: local_policy.try_acquire({}, big), lambda: policy.try_acquire({}, big)),
        }
        for name, (in_process, remote) in calls.items():
            codes = []
            for call in (in_process, remote):
                with pytest.raises(ratekeeper.RateLimitError, match="cost") as refused:
                    call()
                codes.append(refused.value.code)
            assert codes == [code, code], (name, big)

    async def main() -> list[str]:
        aclient = redis.asyncio.Redis.from_url(url)
        alimiter = AsyncRedisLimiter(aclient, gcra(), prefix=prefix)
        codes = []
        for call in (alimiter.try_acquire("k", 2**64), alimiter.reserve("k", 2**64), alimiter.acquire("k", 2**64)):
            with pytest.raises(ratekeeper.RateLimitError, match="cost") as refused:
                await call
            codes.append(refused.value.code)
        await aclient.aclose()
        return codes

    assert asyncio.run(main()) == ["invalid_value"] * 3
    # A refund takes any cost up to 2^64 - 1, as in-process: what the script
    # reads inexactly past 2^53 gives back all it holds all the same.
    for _ in range(5):
        assert local.try_acquire("k").allowed and limiter.try_acquire("k").allowed
    local.refund("k", 2**64 - 1)
    limiter.refund("k", 2**64 - 1)
    assert limiter.peek("k", 0).remaining == local.peek("k", 0).remaining == 5
    client.close()

def test_a_listed_keyed_limiter_is_its_limiters_configuration(client: redis.Redis) -> None:
    # Policy.add takes a KeyedLimiter (its limiter's configuration, keyed by
    # the limit's fields), and so does the Node client's list of limits; the
    # list form, "the limits an in-process Policy takes one by one", refused it.
    keyed = ratekeeper.KeyedLimiter(ratekeeper.TokenBucket(2, 1, 60, name="inner"), max_keys=10)
    policy = RedisPolicy(client, [("per-user", keyed, ["user"])], prefix="listed-keyed:")
    plain = RedisPolicy(client, [("per-user", ratekeeper.TokenBucket(2, 1, 60), ["user"])], prefix="listed-keyed:")
    assert policy.names == ("per-user",)
    assert [policy.try_acquire({"user": 1}, now=1000).allowed for _ in range(3)] == [True, True, False]
    # The same limit, under the same keys.
    assert plain.peek({"user": 1}, 1, now=1000).remaining == 0


def test_a_list_of_limits_is_checked_as_policy_checks_it_before_what_redis_runs(client: redis.Redis) -> None:
    # As a dict configuration and the Node client: a name taken twice is the
    # error, even where an earlier limit is one Redis does not run (its
    # refill was named first, the list being read limit by limit for Redis).
    interval = ratekeeper.TokenBucket(5, 1, 1, refill="interval")
    gcra = ratekeeper.Gcra(1, 1.0)
    with pytest.raises(ratekeeper.RateLimitError, match="^`name`: two limits have the same name$") as error:
        RedisPolicy(client, [("a", interval, []), ("a", gcra, [])])
    assert error.value.code == "invalid_value"
    with pytest.raises(ratekeeper.RateLimitError, match="^`refill`: only greedy token buckets are supported on Redis$"):
        RedisPolicy(client, [("a", interval, []), ("b", gcra, [])])
    with pytest.raises(ratekeeper.RateLimitTypeError, match="^`limiter` must be a Gcra"):
        RedisPolicy(client, [("a", interval, []), ("b", "gcra", [])])  # type: ignore[list-item]
    # An empty name, a field named twice: refused as Policy.add refuses them.
    with pytest.raises(ratekeeper.RateLimitError, match="`name` must not be empty"):
        RedisPolicy(client, [("", gcra, [])])
    with pytest.raises(ratekeeper.RateLimitError, match="`by` names a field twice"):
        RedisPolicy(client, [("a", gcra, ["user", "user"])])


def test_a_name_is_checked_as_in_process_where_it_is_given(client: redis.Redis) -> None:
    # A name the headers cannot carry was taken (a limiter's name given to
    # RedisLimiter, a listed limit's), then went out as "caf?" or '""'.
    gcra = ratekeeper.Gcra(1, 1.0)
    unused = redis.asyncio.Redis(port=1)  # building one sends nothing
    for bad in ("", "caf\u00e9", "a\r\nb"):
        for make in (
            lambda: RedisLimiter(client, gcra, name=bad),
            lambda: AsyncRedisLimiter(unused, gcra, name=bad),
            lambda: RedisPolicy(client, [(bad, gcra, [])]),
        ):
            with pytest.raises(ratekeeper.RateLimitError) as error:
                make()
            with pytest.raises(ratekeeper.RateLimitError) as in_process:
                ratekeeper.Policy().add(bad, gcra)
            assert (error.value.code, str(error.value)) == ("invalid_value", str(in_process.value))


def test_a_batch_checks_its_key_or_request_before_its_costs(client: redis.Redis, url: str) -> None:
    # As in-process batches, and the Node client: a bad key or request is
    # the error even beside a cost above the limit, or with no cost at all
    # (the costs were checked first, and an empty batch answered [] for any key).
    limiter = RedisLimiter(client, ratekeeper.Gcra(2, 0.5))
    policy = RedisPolicy(client, POLICY)
    local = ratekeeper.KeyedLimiter(ratekeeper.Gcra(2, 0.5))
    for costs in ([3], []):
        for batch in (local.try_acquire_batch, limiter.try_acquire_batch):
            with pytest.raises(ratekeeper.RateLimitTypeError, match="key"):
                batch(1.5, costs)  # type: ignore[arg-type]
        with pytest.raises(ratekeeper.RateLimitError, match="lacks the field") as error:
            policy.try_acquire_batch({"user": "u"}, [*costs, 50])
        assert error.value.code == "invalid_value"

    async def main() -> None:
        r = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(r, ratekeeper.Gcra(2, 0.5))
        policy = AsyncRedisPolicy(r, POLICY)
        for costs in ([3], []):
            with pytest.raises(ratekeeper.RateLimitTypeError, match="key"):
                await limiter.try_acquire_batch(1.5, costs)  # type: ignore[arg-type]
            with pytest.raises(ratekeeper.RateLimitError, match="lacks the field"):
                await policy.try_acquire_batch({"user": "u"}, [*costs, 50])
        await r.aclose()

    asyncio.run(main())


def test_waiting_acquire(client: redis.Redis) -> None:
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 0.05))
    start = time.monotonic()
    for _ in range(3):
        limiter.acquire("k")
    assert 0.09 <= time.monotonic() - start < 1
    hourly = RedisLimiter(client, ratekeeper.Gcra(1, 3600))
    hourly.acquire("k")
    with pytest.raises(ratekeeper.RateLimited):
        hourly.acquire("k", timeout=0)


def test_a_wait_beyond_max_span_is_never_booked(url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # max_wait goes to the script clamped to MAX_SPAN (2^50 µs, 35 years),
    # which keeps a booked slot within the script's exact arithmetic: a wait
    # longer than that is refused whatever max_wait allows, and acquire
    # without a timeout raises RateLimited at once, rather than sleep the 53
    # years and ask again.
    now = 2_000_000_000.0
    interval = Fraction(3 * ratekeeper.redis.MAX_SPAN // 2, 10**6)  # 53 years, in whole µs
    prefix = f"rk-py-span:{uuid.uuid4().hex}:"
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, interval), prefix=prefix, clock=lambda: now)
    assert limiter.try_acquire("k")
    for max_wait in (None, math.inf, 2 * interval):
        refused = limiter.reserve("k", max_wait=max_wait)
        assert (refused.ok, refused.from_store, refused.wait) == (False, True, float(interval)), max_wait

    def sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s")

    async def async_sleep(seconds: float) -> None:
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(asyncio, "sleep", async_sleep)
    with pytest.raises(ratekeeper.RateLimited) as raised:
        limiter.acquire("k")
    assert raised.value.retry_after == float(interval)

    async def main() -> float:
        aclient = redis.asyncio.Redis.from_url(url)
        alimiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, interval), prefix=prefix, clock=lambda: now)
        try:
            with pytest.raises(ratekeeper.RateLimited) as raised:
                await alimiter.acquire("k")
            return raised.value.retry_after
        finally:
            await aclient.aclose()

    assert asyncio.run(main()) == float(interval)


def test_an_acquire_whose_timeout_passed_in_an_outage_asks_once_more_with_no_wait_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Redis unreachable, the fallback denied, and the wait for its
    # retry_after ran past the timeout: what is left is no wait (max_wait 0,
    # which the fallback, free again, admits), not a negative max_wait,
    # refused as a bad argument (RateLimitError, invalid_value).
    now = [0.0]

    def sleep(seconds: float) -> None:
        if seconds:
            now[0] += seconds + 0.5  # woken late

    async def async_sleep(seconds: float) -> None:
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(asyncio, "sleep", async_sleep)
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    fallback = ratekeeper.KeyedLimiter(ratekeeper.FixedWindow(1, 1.0, clock=lambda: now[0]))
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    limiter = RedisLimiter(down, ratekeeper.FixedWindow(1, 1.0), on_error=fallback)
    assert fallback.try_acquire("k")
    limiter.acquire("k", timeout=1.0)  # denied until 1 s, then admitted at 1.5 s
    assert (now[0], fallback.peek("k", 0).remaining) == (1.5, 0)

    async def main() -> None:
        adown = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        alimiter = AsyncRedisLimiter(adown, ratekeeper.FixedWindow(1, 1.0), on_error=fallback)
        await alimiter.acquire("k", timeout=0.5)  # denied until 2 s, then admitted at 2.5 s
        await adown.aclose()

    asyncio.run(main())
    assert (now[0], fallback.peek("k", 0).remaining) == (2.5, 0)


def test_reserve_books_first_come_first_served(client: redis.Redis) -> None:
    start = time.time() + 5  # Unix time, ahead of the server's
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1), clock=lambda: start)
    assert limiter.reserve("k").wait == 0.0
    first = limiter.reserve("k", max_wait=10)
    second = limiter.reserve("k", max_wait=10)
    assert (first.ok, first.wait, second.wait) == (True, 1.0, 2.0)
    assert second.at == pytest.approx(start + 2, abs=1e-6)
    refused = limiter.reserve("k", max_wait=2.5)
    assert not refused and refused.wait == 3.0 and refused.decision is not None and not refused.decision.allowed
    # A plain try_acquire never jumps ahead of a booking.
    assert not limiter.try_acquire("k", now=start + 1.5)
    second.cancel()
    assert limiter.reserve("k", max_wait=10).wait == 2.0


def test_a_booked_reservation_has_no_decision_as_in_process(url: str) -> None:
    # decision was the decision at `now` whether booked or not, where the
    # in-process Reservation's (and the Node client's) is None once booked:
    # code reading `r.decision is None` as "booked" read every Redis booking
    # as a refusal. Whether Redis decided is the reservation's from_store.
    client = redis.Redis.from_url(url)
    prefix = f"rk-py-booked:{uuid.uuid4().hex}:"
    local = ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 1.0))
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=prefix)
    for max_wait in [0, 10, 0]:  # booked now, booked a second on, refused
        expected = local.reserve("k", max_wait=max_wait, now=1000)
        got = limiter.reserve("k", max_wait=max_wait, now=1000)
        assert (got.ok, got.decision is None) == (expected.ok, expected.decision is None), max_wait
        assert got.from_store
    assert got.decision is not None and not got.decision.allowed and got.decision.from_store
    # The fallback's booking: no decision either, and not from the store.
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    fallback = RedisLimiter(down, ratekeeper.Gcra(1, 1.0), on_error=ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 1.0)))
    booked = fallback.reserve("k")
    assert (booked.ok, booked.decision, booked.from_store) == (True, None, False)

    async def main() -> tuple[bool, Optional[RedisDecision], bool]:
        aclient = redis.asyncio.Redis.from_url(url)
        alimiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 1.0), prefix=prefix + "async:")
        r = await alimiter.reserve("k", now=1000)
        await aclient.aclose()
        return r.ok, r.decision, r.from_store

    assert asyncio.run(main()) == (True, None, True)
    client.close()


def test_async_classes(url: str) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(url)
        await client.flushdb()
        limiter = AsyncRedisLimiter(client, ratekeeper.SlidingWindowCounter(3, 1))
        assert [bool(await limiter.try_acquire("k")) for _ in range(4)] == [True, True, True, False]
        assert len(await limiter.try_acquire_batch("j", [1, 2, 1])) == 3
        assert not (await limiter.peek("j"))
        policy = AsyncRedisPolicy(client, POLICY)
        d = await policy.try_acquire({"user": "u", "endpoint": "/"})
        assert d.allowed and d.from_store and d.denied_by is None
        await policy.acquire_async({"user": "u", "endpoint": "/"}, timeout=1)
        booked = await limiter.reserve("k", max_wait=5)
        assert booked.ok and 0 < booked.wait <= 2  # within the next two windows
        await booked.cancel()
        # Cancelled while waiting, an acquire gives its booking back.
        waiting = asyncio.ensure_future(limiter.acquire("k"))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await given_back()  # raised at once, its booking given back in a task of its own
        # Cancelled at any point of its booking's round trip, it books nothing.
        minute = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 60), name="minute")
        await minute.try_acquire("k")
        first = await minute.reserve("k", max_wait=120)
        await first.cancel()
        for ticks in range(8):
            waiting = asyncio.ensure_future(minute.acquire("k"))
            for _ in range(ticks):
                await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await given_back()  # raised at once, its booking given back when Redis answers
            again = await minute.reserve("k", max_wait=120)
            assert again.at == pytest.approx(first.at, abs=1e-6), ticks
            await again.cancel()
        await client.aclose()

    asyncio.run(main())


def count_round_trips(limiter: AsyncRedisLimiter) -> list[int]:
    """Counts ``limiter``'s script calls from now on, in the list's one item."""
    calls = [0]
    send = limiter._call

    async def counting(keys: list[bytes], args: list[str | int], *rest: Any) -> Any:
        calls[0] += 1
        return await send(keys, args, *rest)

    limiter._call = counting  # type: ignore[method-assign]
    return calls


def test_async_hot_key_batching_admits_exactly_the_bound(url: str) -> None:
    async def main() -> tuple[int, int]:
        client = redis.asyncio.Redis.from_url(url)
        await client.flushdb()
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(100, 3600))
        calls = count_round_trips(limiter)
        decisions = await asyncio.gather(*(limiter.try_acquire("hot") for _ in range(256)))
        await client.aclose()
        assert all(d.from_store for d in decisions)
        # One decision each, in order: the first 100 callers admitted, then none.
        remaining = [d.remaining for d in decisions if d.allowed]
        assert remaining == sorted(remaining, reverse=True)
        return sum(d.allowed for d in decisions), calls[0]

    admitted, calls = asyncio.run(main())
    assert admitted == 100
    assert calls < 256 / 4


def test_async_callers_calling_again_share_the_next_batch(url: str) -> None:
    # 64 callers, 4 calls each: 1 + 4 round trips (the first alone, then 63,
    # then all 64 three times), not one lone call every other round trip.
    async def main() -> int:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(1000, 3600), prefix=f"rk-py-loop:{uuid.uuid4().hex}:")
        calls = count_round_trips(limiter)

        async def caller() -> None:
            for _ in range(4):
                assert (await limiter.try_acquire("hot")).allowed

        await asyncio.gather(*(caller() for _ in range(64)))
        await client.aclose()
        return calls[0]

    assert asyncio.run(main()) == 5


def test_a_batch_holds_at_most_max_batch_callers(url: str) -> None:
    # MAX_BATCH (internal) is the most costs one round trip carries: the
    # callers queued behind a round trip go in batches of at most that many.
    from ratekeeper.redis._values import MAX_BATCH

    async def main() -> tuple[list[int], int]:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(4096, 3600), prefix=f"rk-py-batch:{uuid.uuid4().hex}:")
        sizes: list[int] = []
        send = limiter._call

        async def sized(keys: list[bytes], args: list[str | int], *rest: Any) -> Any:
            sizes.append(int(args[3 + len(limiter._core.config)]))  # the count of costs (PROTOCOL.md)
            return await send(keys, args, *rest)

        limiter._call = sized  # type: ignore[method-assign]
        decisions = await asyncio.gather(*(limiter.try_acquire("hot") for _ in range(2 * MAX_BATCH + 2)))
        await client.aclose()
        return sizes, sum(d.allowed for d in decisions)

    assert asyncio.run(main()) == ([1, MAX_BATCH, MAX_BATCH, 1], 2 * MAX_BATCH + 2)
    # A thread's callers gather as the tasks' do (threads enough to fill a
    # batch are too many for a test): a batch full, the next caller starts one.
    limiter = RedisLimiter(redis.Redis(port=1), ratekeeper.FixedWindow(4096, 3600))
    with limiter._lock:
        for _ in range(MAX_BATCH + 1):
            limiter._join((b"hot",), ratekeeper.redis._sync._Slot(1, "hot"))
    assert [len(batch.slots) for batch in limiter._queues[(b"hot",)].waiting] == [MAX_BATCH, 1]


def test_callers_of_a_batch_whose_sending_task_was_cancelled_are_cancelled(url: str) -> None:
    # The task sending a batch cancelled (its loop ending), its callers and
    # those gathered meanwhile are cancelled too: else nobody would answer
    # them, they would wait for ever, and so would every later caller of the
    # key, queued behind them.
    async def main() -> tuple[list[object], bool]:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-sender:{uuid.uuid4().hex}:")
        assert (await limiter.peek("hot", 0)).from_store  # the script is loaded
        send = limiter._call
        sending = asyncio.Event()

        async def held(keys: list[bytes], args: list[str | int], *rest: Any) -> Any:
            sending.set()
            await asyncio.sleep(3600)  # until cancelled

        limiter._call = held  # type: ignore[method-assign]
        callers = [asyncio.ensure_future(limiter.try_acquire("hot")) for _ in range(3)]
        await sending.wait()  # the first sent alone; the others queued behind it
        loop = asyncio.get_running_loop()
        (sender,) = [task for task in ratekeeper.redis._async._TASKS if task.get_loop() is loop and not task.done()]
        sender.cancel()
        outcomes = await asyncio.wait_for(asyncio.gather(*callers, return_exceptions=True), 5)
        limiter._call = send  # type: ignore[method-assign]
        later = await asyncio.wait_for(limiter.try_acquire("hot"), 5)
        await client.aclose()
        return [type(outcome) for outcome in outcomes], later.allowed

    assert asyncio.run(main()) == ([asyncio.CancelledError] * 3, True)


def test_a_batch_ending_on_a_loop_that_stopped_leaves_the_key_to_the_loop_that_took_it_over() -> None:
    # Loop A stops with a round trip under way (its caller timed out); loop
    # B's callers then queue on the key in a queue of B's own. A's round
    # trip, ending once A runs again, leaves B's queue in place: taken out as
    # if it were A's, B's next callers, rather than queue behind the round
    # trip under way, would go as a batch of their own, one more round trip
    # (to time out in turn, in an outage).
    limiter = AsyncRedisLimiter(redis.asyncio.Redis(port=1), ratekeeper.Gcra(100, 1.0), on_error="open")
    released: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}
    sent: list[asyncio.AbstractEventLoop] = []

    async def down(keys: list[bytes], args: list[str | int], *rest: Any) -> Any:
        loop = asyncio.get_running_loop()
        sent.append(loop)
        await released.setdefault(loop, asyncio.Event()).wait()
        raise redis.ConnectionError("down")  # on_error answers

    limiter._call = down  # type: ignore[method-assign]
    a, b = asyncio.new_event_loop(), asyncio.new_event_loop()

    async def run_a_again() -> None:
        released.setdefault(a, asyncio.Event()).set()
        for _ in range(5):
            await asyncio.sleep(0)  # its batch answered, and ended

    async def on_b() -> list[bool]:
        first = asyncio.ensure_future(limiter.try_acquire("hot"))  # a queue of B's
        await asyncio.sleep(0)
        await asyncio.get_running_loop().run_in_executor(None, a.run_until_complete, run_a_again())
        others = [asyncio.ensure_future(limiter.try_acquire("hot")) for _ in range(9)]
        await asyncio.sleep(0)
        released.setdefault(b, asyncio.Event()).set()
        return [d.allowed for d in await asyncio.gather(first, *others)]

    try:
        with pytest.raises(asyncio.TimeoutError):
            a.run_until_complete(asyncio.wait_for(limiter.try_acquire("hot"), 0.05))
        assert b.run_until_complete(on_b()) == [True] * 10
    finally:
        a.close()
        b.close()
    # One round trip on B: its first caller's, whose outage answered the nine queued behind it.
    assert (sent.count(a), sent.count(b)) == (1, 1)


def test_cancelling_one_batched_caller_spares_the_others(url: str) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(url)
        await client.flushdb()
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(100, 3600))
        tasks = [asyncio.ensure_future(limiter.try_acquire("hot")) for _ in range(50)]
        await asyncio.sleep(0)  # every task has sent or queued its request
        tasks[0].cancel()  # the one whose round trip is in flight
        tasks[10].cancel()  # one waiting in the next batch
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await client.aclose()
        assert isinstance(results[0], asyncio.CancelledError)
        assert isinstance(results[10], asyncio.CancelledError)
        others = [r for i, r in enumerate(results) if i not in (0, 10)]
        assert all(isinstance(r, RedisDecision) and r.allowed and r.from_store for r in others)

    asyncio.run(main())


def test_async_callers_cancelled_before_their_batch_left_take_nothing_from_the_others(url: str) -> None:
    # Callers cancelled while they waited for their batch (an
    # asyncio.wait_for's timeout) were sent all the same: Redis took their
    # units first, and the callers still there behind them were denied,
    # units the key then got back once the cancelled ones' give-backs ran.
    # The same calls in process admit every caller still there.
    async def main() -> tuple[list[bool], int]:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(
            client, ratekeeper.Gcra(2, 3600), prefix=f"rk-py-gone:{uuid.uuid4().hex}:", clock=lambda: 1_000_000
        )
        calls = count_round_trips(limiter)
        first = asyncio.ensure_future(limiter.try_acquire("hot"))
        await asyncio.sleep(0)  # its batch is under way
        queued = [asyncio.ensure_future(limiter.try_acquire("hot")) for _ in range(3)]
        await asyncio.sleep(0)  # all three queued behind it
        queued[0].cancel()
        queued[1].cancel()
        decided = [(await first).allowed, (await queued[2]).allowed]
        await client.aclose()
        return decided, calls[0]

    local = ratekeeper.Gcra(2, 3600)
    assert [local.try_acquire(now=1_000_000).allowed for _ in range(2)] == [True, True]
    decided, calls = asyncio.run(main())
    assert decided == [True, True]
    assert calls == 2  # one round trip each: the cancelled callers send nothing


@pytest.mark.parametrize("steps", [1, 2], ids=["before its task started", "before its booking's task started"])
def test_async_lone_calls_cancelled_before_their_round_trip_started_send_nothing(url: str, steps: int) -> None:
    # A call that goes alone (an explicit `now`, batching=False,
    # try_acquire_batch, reserve, acquire) runs its round trip in a task of
    # its own. Cancelled before that task started (the task that made it, or
    # for acquire the booking's task, awaiting it), the round trip was sent
    # all the same: Redis took the units ahead of the callers still there,
    # until its give-back came (on a bucket with a booking behind it, never).
    # Sent nothing now, as a batched caller cancelled before its batch left.
    now = 1_000_000.0

    async def main() -> list[tuple[str, int, int]]:
        client = redis.asyncio.Redis.from_url(url)
        prefix = f"rk-py-lone-gone:{uuid.uuid4().hex}:"
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 3600), prefix=prefix)
        alone = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 3600), prefix=prefix, batching=False)
        calls = count_round_trips(limiter)
        alone._call = limiter._call  # type: ignore[method-assign]
        # Each on a key of its own, and the time it decides at (None: the server's).
        starts: dict[str, tuple[Callable[[], Awaitable[Any]], Optional[float]]] = {
            "now": (lambda: limiter.try_acquire("now", now=now), now),
            "batching=False": (lambda: alone.try_acquire("batching=False"), None),
            "try_acquire_batch": (lambda: limiter.try_acquire_batch("try_acquire_batch", [1], now=now), now),
            "reserve": (lambda: limiter.reserve("reserve", now=now), now),
            "acquire": (lambda: limiter.acquire("acquire"), None),
        }
        seen = []
        for name, (start, at) in starts.items():
            if steps == 2 and name != "acquire":
                continue  # one task of its own only: the first case has it
            task = asyncio.ensure_future(start())
            for _ in range(steps):
                await asyncio.sleep(0)  # the task runs a step, and makes the next one's task
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            sent = calls[0]
            # The key as it is: nothing taken (nor given back meanwhile).
            remaining = (await limiter.peek(name, 0, now=at)).remaining
            seen.append((name, sent, remaining))
            calls[0] = 0
        await client.aclose()
        return seen

    seen = asyncio.run(main())
    assert seen == [(name, 0, 1) for name, _, _ in seen]


def test_thread_hot_key_batching_admits_exactly_the_bound(client: redis.Redis) -> None:
    limiter = RedisLimiter(client, ratekeeper.Gcra(500, 3600))
    admitted = []
    lock = threading.Lock()

    def work() -> None:
        n = sum(limiter.try_acquire("hot").allowed for _ in range(100))
        with lock:
            admitted.append(n)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(admitted) == 500


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_batch_decides_its_own_calls(url: str) -> None:
    # The child copied the batch another thread was sending: its sender
    # looked there for ever, and the child's call on that key waited behind
    # it for ever (a store shared with threads, then a fork: a server
    # preloading its app, say).
    code = textwrap.dedent(
        """
        import os, signal, sys, threading, time
        import redis
        import ratekeeper
        from ratekeeper.redis import RedisLimiter

        stalled = threading.Event()

        def clock():
            if threading.current_thread() is not threading.main_thread() and not stalled.is_set():
                stalled.set()
                time.sleep(1.0)  # this thread is sending its batch
            return time.time()

        client = redis.Redis.from_url(sys.argv[1])
        limiter = RedisLimiter(client, ratekeeper.Gcra(100, 0.01), prefix=sys.argv[2], clock=clock)
        thread = threading.Thread(target=lambda: limiter.try_acquire("hot"))
        thread.start()
        stalled.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a child that hangs is ended, and says so by its status
            os._exit(0 if limiter.try_acquire("hot").from_store else 1)
        _, status = os.waitpid(pid, 0)
        thread.join()
        print(os.waitstatus_to_exitcode(status))
        """
    )
    prefix = f"rk-py-fork:{uuid.uuid4().hex}:"
    done = subprocess.run([sys.executable, "-c", code, url, prefix], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr[-2000:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_queues_an_async_call_decides_its_own(url: str) -> None:
    # An async limiter's queues are shared by the loops of several threads,
    # under a threading lock. A fork while another thread held it (asking,
    # here slowly, whether the loop whose batch is under way on its key
    # still runs) copied it held into the child, where nobody would let it
    # go: the child's first batched call on that limiter, on any key,
    # blocked its event loop for ever.
    code = textwrap.dedent(
        """
        import asyncio, os, signal, sys, threading, time
        import redis.asyncio
        import ratekeeper
        from ratekeeper.redis import AsyncRedisLimiter

        sending, held, forked, asked = (threading.Event() for _ in range(4))

        def clock():
            if threading.current_thread() is sender and not sending.is_set():
                sending.set()
                asked.wait()  # its batch is under way: its loop runs, its queue stays
            return time.time()

        class Loop(asyncio.SelectorEventLoop):
            def is_running(self):
                if threading.current_thread() is asker and not held.is_set():
                    held.set()
                    forked.wait()  # asked with the limiter's lock held
                return super().is_running()

        async def ask():
            await limiter.try_acquire("hot")  # goes alone: the sender's loop runs
            # Its connection is this loop's, which ends here: the sender makes its own.
            await client.connection_pool.disconnect()
            asked.set()

        client = redis.asyncio.Redis.from_url(sys.argv[1])
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(100, 0.01), prefix=sys.argv[2], clock=clock)
        sender = threading.Thread(target=lambda: Loop().run_until_complete(limiter.try_acquire("hot")))
        asker = threading.Thread(target=lambda: asyncio.run(ask()))
        sender.start()
        sending.wait()
        asker.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a child that hangs is ended, and says so by its status
            os._exit(0 if asyncio.run(limiter.try_acquire("hot")).from_store else 1)
        forked.set()
        _, status = os.waitpid(pid, 0)
        sender.join()
        asker.join()
        print(os.waitstatus_to_exitcode(status))
        """
    )
    prefix = f"rk-py-fork:{uuid.uuid4().hex}:"
    done = subprocess.run([sys.executable, "-c", code, url, prefix], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr[-2000:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("under_way", ["give-back", "reset"])
def test_a_child_forked_during_another_threads_give_back_or_reset_waits_for_neither(url: str, under_way: str) -> None:
    # A reset waits for the give-backs on their way to its keys, and a
    # give-back for the resets under way on them, while their threads are in
    # them: the child copied another thread's as running, where no thread
    # would ever end it. It forgets them; a reset among them counts as one
    # that found its keys (its UNLINK, sent from the parent, may reach Redis
    # at any time), so a booking made before it gives nothing back.
    code = textwrap.dedent(
        """
        import os, signal, sys, threading
        import redis
        import ratekeeper
        from ratekeeper.redis import RedisLimiter

        under_way, done = threading.Event(), threading.Event()
        client = redis.Redis.from_url(sys.argv[1])
        limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=sys.argv[2], clock=lambda: 2_000_000_005.0)
        before = limiter.reserve("k")  # the key's first instant
        mine = limiter.reserve("k", max_wait=100)
        call, unlink = limiter._call, client.unlink

        def held(keys, args):
            if threading.current_thread() is not threading.main_thread():
                under_way.set()
                done.wait()
            return call(keys, args)

        def reply_held(*keys):
            reply = unlink(*keys)
            if threading.current_thread() is not threading.main_thread():
                under_way.set()
                done.wait()
            return reply

        if sys.argv[3] == "give-back":
            limiter._call = held
            thread = threading.Thread(target=mine.cancel)
        else:
            client.unlink = reply_held
            thread = threading.Thread(target=limiter.reset, args=("k",))
        thread.start()
        under_way.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a child that hangs is ended, and says so by its status
            if sys.argv[3] == "give-back":
                os._exit(0 if limiter.reset("k") else 1)
            taken = limiter.try_acquire("k").allowed  # the key, unlinked, taken anew
            before.cancel()
            os._exit(0 if taken and not limiter.peek("k").allowed else 2)
        _, status = os.waitpid(pid, 0)
        done.set()
        thread.join()
        print(os.waitstatus_to_exitcode(status))
        """
    )
    prefix = f"rk-py-fork:{uuid.uuid4().hex}:"
    done = subprocess.run([sys.executable, "-c", code, url, prefix, under_way], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr[-2000:]


def test_an_interrupted_batched_caller_leaves_no_batch_without_a_sender(client: redis.Redis, url: str) -> None:
    limiter = RedisLimiter(client, ratekeeper.Gcra(100, 0.01))
    assert limiter.try_acquire("w").from_store  # the script is loaded
    admin = redis.Redis.from_url(url)

    class Stop(Exception):
        pass

    def stop(signum: int, frame: Any) -> None:
        raise Stop

    previous = signal.signal(signal.SIGALRM, stop)
    results: list[RedisDecision] = []
    try:
        # The leader's round trip is held by the pause; this thread waits
        # behind it, then another caller behind this one; then this one is
        # interrupted (as by Ctrl-C) while it waits.
        # (Paused until this thread was interrupted: a stall of the machine
        # outlasting a pause of 0.8 s let the leader be answered first, and
        # this thread's call returned before its interruption.)
        admin.client_pause(60_000, all=False)
        leader = threading.Thread(target=lambda: results.append(limiter.try_acquire("k")), daemon=True)
        follower = threading.Thread(target=lambda: results.append(limiter.try_acquire("k")), daemon=True)
        leader.start()
        time.sleep(0.1)
        threading.Timer(0.1, follower.start).start()
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Stop):
            limiter.try_acquire("k")
        admin.client_unpause()
        leader.join(10)
        follower.join(10)
        assert not leader.is_alive() and not follower.is_alive(), "a caller waits for a sender that left"
        assert len(results) == 2 and limiter.try_acquire("k").from_store
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        admin.client_unpause()
        admin.close()


class Alarm(Exception):
    """What a signal handler may raise (a SIGALRM timeout's, say): not only a BaseException."""


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, Alarm])
def test_a_leader_interrupted_during_its_round_trip_raises_alone(client: redis.Redis, interruption: type[BaseException]) -> None:
    # Its KeyboardInterrupt was copied to every caller of its batch: each
    # other thread raised the main thread's interruption. So was any
    # exception of a signal handler landing there, as if the script had
    # refused them all.
    limiter = RedisLimiter(client, ratekeeper.Gcra(100, 0.01), prefix=f"rk-py-lead:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded
    call = limiter._call

    def slow(keys: list[bytes], args: list[Any]) -> Any:
        time.sleep(0.3)  # the other callers queue behind this round trip
        if threading.current_thread() is threading.main_thread():
            raise interruption
        return call(keys, args)

    limiter._call = slow  # type: ignore[method-assign]
    out: dict[str, object] = {}

    def worker(name: str) -> None:
        try:
            out[name] = limiter.try_acquire("k").allowed
        except BaseException as error:
            out[name] = type(error).__name__

    first = threading.Thread(target=worker, args=("first",))
    first.start()
    time.sleep(0.1)
    # 'first' sends; this thread queues, then 'second' behind it: this
    # thread leads the batch of both once 'first''s round trip is over.
    second = threading.Timer(0.1, worker, args=("second",))
    second.start()
    with pytest.raises(interruption):
        limiter.try_acquire("k")
    first.join(10)
    second.join(10)
    assert out == {"first": True, "second": True}


def test_an_interruption_while_redis_is_down_stays_in_its_own_thread(client: redis.Redis) -> None:
    # Redis down: the thread whose round trip failed decided the fallback for
    # every caller queued behind it, and an interruption of that thread
    # meanwhile (Ctrl-C) was caught as that caller's error: raised in the
    # other thread, and never in the interrupted one, which went on.
    fallback = ratekeeper.KeyedLimiter(ratekeeper.Gcra(100, 0.01))
    limiter = RedisLimiter(client, ratekeeper.Gcra(100, 0.01), on_error=fallback, prefix=f"rk-py-down:{uuid.uuid4().hex}:")

    def down(keys: list[bytes], args: list[Any]) -> Any:
        time.sleep(0.3)  # the other caller queues behind this round trip
        raise redis.ConnectionError("down")

    decide = limiter._core.fallback
    main_calls = [0]

    def interrupted(target: Any, cost: int, now: Any, peek: bool) -> RedisDecision:
        if threading.current_thread() is threading.main_thread():
            main_calls[0] += 1
            if main_calls[0] > 1:  # this thread's own decision is the first
                raise KeyboardInterrupt  # as Ctrl-C landing in another caller's decision
        return decide(target, cost, now, peek)

    limiter._call = down  # type: ignore[method-assign]
    limiter._core.fallback = interrupted  # type: ignore[method-assign]
    out: dict[str, object] = {}

    def worker() -> None:
        try:
            out["other"] = limiter.try_acquire("k")
        except BaseException as error:
            out["other"] = error

    other = threading.Timer(0.1, worker)
    other.start()
    try:
        out["main"] = limiter.try_acquire("k")
    except KeyboardInterrupt as error:
        out["main"] = error
    other.join(10)
    answer = out["other"]
    assert isinstance(answer, RedisDecision) and answer.allowed and not answer.from_store, answer
    # This thread was answered, or raised its own interruption: never
    # another's, and never an interruption swallowed.
    assert isinstance(out["main"], KeyboardInterrupt) == (main_calls[0] > 1)


@pytest.mark.parametrize("how", ["under way", "answered", "answered, then reset", "reset, then under way", "under way, leaving slowly"])
def test_a_caller_interrupted_in_a_batch_another_sends_gives_its_units_back(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # Its answer was dropped, and the unit Redis took for it kept: whether
    # the interruption came while the batch was under way, or once its
    # answer had come but before it returned. Unless the limiter reset the
    # key meanwhile: the window counts units taken anew since, one of which
    # a give-back would free (two at once from what was left). A reset
    # before the batch was sent keeps nothing from being given back; nor
    # does a caller still in its call, having said it left, when the answer
    # comes (interrupted again, say, as it leaves): it is gone all the same.
    answered = how.startswith("answered")
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-gone:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded
    if how == "reset, then under way":
        assert limiter.try_acquire("k", now=time.time()).allowed
        assert limiter.reset("k")
    call = limiter._call
    if how == "under way, leaving slowly":
        leave, give_back = limiter._leave, limiter._give_back
        given = threading.Event()

        def giving_back(*args: Any) -> None:
            give_back(*args)
            if threading.current_thread().name == "second":
                given.set()  # (the batch of 'second' and this thread answered)

        def leaving_slowly(*args: Any) -> None:
            leave(*args)  # gone, said under the lock
            assert given.wait(5)  # still in its call as the sender answers

        limiter._give_back = giving_back  # type: ignore[method-assign, assignment]
        limiter._leave = leaving_slowly  # type: ignore[method-assign, assignment]

    def slow(keys: list[bytes], args: list[Any]) -> Any:
        reply = call(keys, args)
        time.sleep(0.3)  # taken; the others queue (then wait) meanwhile
        return reply

    class Interrupted:
        """A caller's wake-up, as the client made it, that interrupts the main thread."""

        def __init__(self, wake: Any) -> None:
            self.wake = wake

        def wait(self, timeout: Optional[float] = None) -> bool:
            if threading.current_thread() is not threading.main_thread():
                return self.wake.wait(timeout)  # type: ignore[no-any-return]
            if answered:
                self.wake.wait()
            else:
                time.sleep(0.2)  # in the batch 'second' sends, under way
            if how == "answered, then reset":
                assert limiter.reset("k")
                assert limiter.try_acquire("k", now=time.time()).allowed  # (a `now`: not batched)
            raise KeyboardInterrupt

        def set(self) -> None:
            self.wake.set()

    class Slot(ratekeeper.redis._sync._Slot):
        def __init__(self, cost: int, target: Any) -> None:
            super().__init__(cost, target)
            self.event = Interrupted(self.event)  # type: ignore[assignment]

    monkeypatch.setattr(ratekeeper.redis._sync, "_Slot", Slot)
    limiter._call = slow  # type: ignore[method-assign]
    out: list[bool] = []
    # 'first' sends alone; 'second', then this thread, queue behind it, and
    # 'second' sends the batch of both.
    first = threading.Thread(target=lambda: out.append(limiter.try_acquire("k").allowed))
    second = threading.Timer(0.1, lambda: out.append(limiter.try_acquire("k").allowed))
    second.name = "second"
    first.start()
    second.start()
    time.sleep(0.2)
    with pytest.raises(KeyboardInterrupt):
        limiter.try_acquire("k")
    first.join(10)
    second.join(10)
    assert out == [True, True]
    used = 100 - limiter.peek("k", 0).remaining
    assert used == (1 if how == "answered, then reset" else 2), "the interrupted caller's unit was given back"


class MainSends:
    """Callers of the key "k" of ``limiter``: 'first', in a thread, sends
    alone, its round trip held until the main thread, then 'second', wait
    behind it; the main thread then sends the batch of both. What a test
    makes of each caller's wake-up (as the client made it), and of the main
    thread's round trips, it overrides: ``wait``, ``set``, ``sends``."""

    def __init__(self, limiter: RedisLimiter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.limiter = limiter
        self.out: dict[str, object] = {}
        self.threads: list[threading.Thread] = []
        self.queued = threading.Semaphore(0)  # a caller waits, for the first time
        self.main_calls: list[list[Any]] = []  # the main thread's round trips
        test = self

        class Wake:
            def __init__(self, wake: Any) -> None:
                self.wake = wake
                self.seen = False

            def wait(self, timeout: Optional[float] = None) -> bool:
                if not self.seen:
                    self.seen = True
                    test.queued.release()
                return test.wait(self.wake, timeout)

            def set(self) -> None:
                test.set(self.wake)

        class Slot(ratekeeper.redis._sync._Slot):
            def __init__(self, cost: int, target: Any) -> None:
                super().__init__(cost, target)
                self.event = Wake(self.event)  # type: ignore[assignment]

        monkeypatch.setattr(ratekeeper.redis._sync, "_Slot", Slot)

    def wait(self, wake: Any, timeout: Optional[float]) -> bool:
        return wake.wait(timeout)  # type: ignore[no-any-return]

    def set(self, wake: Any) -> None:
        wake.set()

    def sends(self, args: list[Any]) -> None:
        """Before each round trip of the main thread's."""

    def worker(self, name: str) -> threading.Thread:
        def run() -> None:
            try:
                self.out[name] = self.limiter.try_acquire("k").allowed
            except BaseException as error:
                self.out[name] = type(error).__name__

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return thread

    def run(self) -> None:
        """Calls from the main thread, as above (raising what it raises),
        then waits for the other callers."""
        sending, release = threading.Event(), threading.Event()
        call = self.limiter._call

        def held(keys: list[bytes], args: list[Any]) -> Any:
            if threading.current_thread().name == "first":
                sending.set()
                release.wait(5)
            elif threading.current_thread() is threading.main_thread():
                self.main_calls.append(args)
                self.sends(args)
            return call(keys, args)

        def queue_second() -> None:
            self.queued.acquire(timeout=5)  # the main thread waits behind 'first'
            self.worker("second")
            self.queued.acquire(timeout=5)
            release.set()

        self.limiter._call = held  # type: ignore[method-assign]
        self.worker("first")
        assert sending.wait(5)
        threading.Thread(target=queue_second, daemon=True).start()
        try:
            self.limiter.try_acquire("k")
        finally:
            for t in list(self.threads):
                t.join(5)
            assert not any(t.is_alive() for t in self.threads), f"a caller waits for ever: {self.out}"


@pytest.mark.parametrize("where", ["waking", "handed", "leaving"])
def test_an_interrupted_hand_on_leaves_no_caller_waiting(client: redis.Redis, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    # The main thread interrupted (Ctrl-C, a signal handler's exception)
    # where it hands on: as it wakes the others once its batch is answered
    # ("waking": its callers, and the first of the batch gathered meanwhile,
    # were never woken, and every later caller of the key queued for ever);
    # handed a batch to send, interrupted as it waits, then again as it wakes
    # the next of that batch to send it instead ("handed"); interrupted
    # during its round trip, then again as it leaves ("leaving").
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-hand-on:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded
    interrupt: set[str] = set()  # where the main thread is interrupted next

    def interrupted(at: str) -> None:
        if threading.current_thread() is threading.main_thread() and at in interrupt:
            interrupt.remove(at)
            raise KeyboardInterrupt

    class Callers(MainSends):
        def wait(self, wake: Any, timeout: Optional[float]) -> bool:
            woken = super().wait(wake, timeout)
            if woken and where == "handed" and threading.current_thread() is threading.main_thread():
                interrupt.add("set")
                raise KeyboardInterrupt  # woken to send its batch
            return woken

        def set(self, wake: Any) -> None:
            interrupted("set")
            super().set(wake)

        def sends(self, args: list[Any]) -> None:
            if len(self.main_calls) == 1 and where == "waking":
                self.worker("third")  # queues behind this round trip
                self.queued.acquire(timeout=5)
                interrupt.add("set")
            elif len(self.main_calls) == 1 and where == "leaving":
                interrupt.add("lock")
                raise KeyboardInterrupt

    class Lock:
        def __init__(self, lock: Any) -> None:
            self.lock = lock

        def __enter__(self) -> Any:
            interrupted("lock")
            return self.lock.__enter__()

        def __exit__(self, *exc: Any) -> Any:
            return self.lock.__exit__(*exc)

    limiter._lock = Lock(limiter._lock)  # type: ignore[assignment]
    callers = Callers(limiter, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        callers.run()
    assert callers.out == {"first": True, "second": True, **({"third": True} if where == "waking" else {})}
    # What Redis took for this thread, answered but interrupted, went back.
    assert 100 - limiter.peek("k", 0).remaining == len(callers.out)
    callers.worker("later").join(5)
    assert callers.out["later"] is True, "the key's queue is stuck"


def test_a_batch_whose_sender_left_goes_ahead_of_the_batch_gathered_behind_it(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The main thread, sending the batch of itself and 'second', interrupted
    # before its round trip (nothing taken): 'second' sends it instead, ahead
    # of 'third', who queued behind it meanwhile, first come first served.
    # Put behind, 'second' would lose the last unit to 'third'.
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(2, 3600), prefix=f"rk-py-ahead:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded

    class Callers(MainSends):
        def sends(self, args: list[Any]) -> None:
            if len(self.main_calls) == 1:
                self.worker("third")  # queues behind this batch
                self.queued.acquire(timeout=5)
                raise KeyboardInterrupt

    callers = Callers(limiter, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        callers.run()
    assert callers.out == {"first": True, "second": True, "third": False}


def test_a_caller_that_left_before_its_batch_was_sent_is_not_sent(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # The main thread, queued ahead of 'second', interrupted as it waits:
    # 'second' sends their batch without it. Sent all the same, ahead of
    # 'second', it would take the last unit, and 'second' be denied what the
    # give-back returns only afterwards.
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(2, 3600), prefix=f"rk-py-left:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded
    second_waits = threading.Event()

    class Callers(MainSends):
        def wait(self, wake: Any, timeout: Optional[float]) -> bool:
            if threading.current_thread().name == "second":
                second_waits.set()
            elif threading.current_thread() is threading.main_thread():
                assert second_waits.wait(5)
                raise KeyboardInterrupt
            return super().wait(wake, timeout)

    callers = Callers(limiter, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        callers.run()
    assert callers.out == {"first": True, "second": True}
    assert limiter.peek("k", 0).remaining == 0


def test_a_sender_interrupted_as_it_gives_back_raises_its_interruption(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # The give-back for a caller that left (its refund's round trip)
    # suppressed any Exception: a signal handler's (a SIGALRM timeout's)
    # landing there was swallowed, and the sender went on as if never
    # interrupted.
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-give:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded
    leave = threading.Event()

    class Callers(MainSends):
        def wait(self, wake: Any, timeout: Optional[float]) -> bool:
            if threading.current_thread().name == "second":
                leave.wait(5)
                raise KeyboardInterrupt  # as if its own
            return super().wait(wake, timeout)

        def sends(self, args: list[Any]) -> None:
            if len(self.main_calls) == 1:  # this thread sends 'second' and itself
                leave.set()
                self.threads[1].join(5)  # 'second' left
            elif len(self.main_calls) == 2:  # it gives back what Redis took for 'second'
                raise Alarm

    callers = Callers(limiter, monkeypatch)
    with pytest.raises(Alarm):
        callers.run()
    assert callers.out == {"first": True, "second": "KeyboardInterrupt"}
    assert [args[1] for args in callers.main_calls] == ["acquire", "refund", "refund"]


@pytest.mark.parametrize("kind", ["server", "cluster"])
@pytest.mark.parametrize("command", ["script", "unlink"])
def test_an_interruption_between_sending_a_command_and_reading_its_reply_leaves_no_reply_for_the_next_call(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str, command: str
) -> None:
    # There (a signal handler's exception as parse_response is called),
    # redis-py (8.1) puts the connection back in its pool with the reply
    # unread, and hands it out as it is (its check for unread data is off
    # with maintenance notifications, on by default): the next command read
    # that reply as its own (after reset's UNLINK, the integer 1, which
    # raised a TypeError to that call's caller), and each later one the
    # reply before its own.
    client: Any = request.getfixturevalue("client") if kind == "server" else RedisCluster.from_url(request.getfixturevalue("cluster_url"))
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-unread-{command}:{uuid.uuid4().hex}:")
    assert limiter.try_acquire("k", 5).remaining == 95  # the script is loaded

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.undo()
        raise KeyboardInterrupt

    for node in [client] if kind == "server" else [n.redis_connection for n in client.get_nodes()]:
        monkeypatch.setattr(node, "parse_response", interrupted)
    with pytest.raises(KeyboardInterrupt):
        if command == "script":
            limiter.try_acquire("k")
        else:
            limiter.reset("k")
    # What the script took stays taken; the UNLINK ran: the key was fresh.
    left = 89 if command == "script" else 95
    assert limiter.try_acquire("k", 5).remaining == left
    assert limiter.peek("k", 0).remaining == left
    client.close()


def test_an_async_cancel_cancelled_before_its_refund_went_still_gives_the_booking_back(url: str) -> None:
    # cancel() forgot the booking, then awaited the refund in the caller's
    # task: cancelled before the refund was sent (a timeout's, while it
    # waited for a connection), the booking stayed, and a second cancel()
    # did nothing.
    async def main() -> float:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=f"rk-py-uncancel:{uuid.uuid4().hex}:")
        assert (await limiter.try_acquire("k")).allowed
        reservation = await limiter.reserve("k")  # the next slot, a minute on
        assert reservation.ok
        real = limiter._call
        waiting, gate = asyncio.Event(), asyncio.Event()

        async def held(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            waiting.set()
            await gate.wait()
            return await real(keys, args, *rest)

        limiter._call = held  # type: ignore[method-assign]
        task = asyncio.ensure_future(reservation.cancel())
        await waiting.wait()  # the refund waits at the gate
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()
        for _ in range(100):
            await asyncio.sleep(0.01)
            retry = (await limiter.peek("k")).retry_after
            if retry <= 60:
                break
        await client.aclose()
        return retry

    assert asyncio.run(main()) <= 60


# Its gc.collect() may collect a socket an earlier cluster test's client left
# to the collector (redis-py's cluster discovery): not this test's concern.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_an_async_cancel_cancelled_whose_refund_fails_leaves_no_exception_unretrieved(url: str) -> None:
    # The refund runs in a task of its own, shielded: once the awaiting
    # cancel() was cancelled, nobody retrieved the task's error (a
    # ScriptError: the key holds another type by then), and asyncio logged
    # "Task exception was never retrieved" when the task was collected. The
    # same held for the waiting acquire's give-backs, shielded likewise.
    async def main() -> tuple[list[dict[str, Any]], Optional[BaseException]]:
        loop = asyncio.get_running_loop()
        unretrieved: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _, context: unretrieved.append(context))
        client = redis.asyncio.Redis.from_url(url)
        prefix = f"rk-py-unretrieved:{uuid.uuid4().hex}:"
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=prefix)
        real = limiter._call
        gate, answered = asyncio.Event(), asyncio.Event()

        async def held(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            if args[1] != "refund":
                return await real(keys, args, *rest)
            await gate.wait()
            try:
                return await real(keys, args, *rest)
            finally:
                answered.set()

        async def spoil() -> None:
            # The key of another type: the refund meets WRONGTYPE (a ScriptError).
            (key,) = await client.keys(prefix + "*")
            await client.delete(key)
            await client.rpush(key, "another type")

        limiter._call = held  # type: ignore[method-assign]

        async def settle() -> None:
            await answered.wait()
            answered.clear()
            for _ in range(10):  # the tasks' done callbacks
                await asyncio.sleep(0)
            gc.collect()

        # cancel(), cancelled while its refund waits.
        assert (await limiter.try_acquire("k")).allowed
        reservation = await limiter.reserve("k")
        task = asyncio.ensure_future(reservation.cancel())
        for _ in range(10):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await spoil()
        gate.set()
        await settle()
        # acquire, cancelled while it sleeps, then again while it gives back.
        await client.delete(*(await client.keys(prefix + "*")))
        gate.clear()
        assert (await limiter.try_acquire("k")).allowed
        waiting = asyncio.ensure_future(limiter.acquire("k"))
        for _ in range(1000):  # until it has booked the slot a minute on, and sleeps until then
            if (await limiter.peek("k")).retry_after > 60:
                break
        else:
            raise AssertionError("the acquire booked nothing")
        waiting.cancel()
        for _ in range(10):
            await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await spoil()
        gate.set()
        await settle()
        # A caller still awaiting cancel() gets the error.
        await client.delete(*(await client.keys(prefix + "*")))
        assert (await limiter.try_acquire("k")).allowed
        reservation = await limiter.reserve("k")
        await spoil()
        raised: Optional[BaseException] = None
        try:
            await reservation.cancel()
        except ScriptError as error:
            raised = error
        await settle()
        await client.aclose()
        return unretrieved, raised

    unretrieved, raised = asyncio.run(main())
    assert [context.get("message") for context in unretrieved] == []
    assert isinstance(raised, ScriptError) and "WRONGTYPE" in str(raised)


def test_an_interrupted_round_trip_raises_its_interruption_on_a_pool_of_redis_py_before_7(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The package takes redis-py 4.6 on, whose BlockingConnectionPool (to
    # 6.4) has disconnect(self), no inuse_connections: closing the idle
    # connections after an interruption raised a TypeError in its place (a
    # Ctrl-C, a SIGALRM timeout's exception, turned into "unexpected keyword
    # argument"). This pool has that signature, as those versions' has.
    class Pool(redis.BlockingConnectionPool):
        def disconnect(self) -> None:  # type: ignore[override]
            super().disconnect()

    client = redis.Redis(connection_pool=Pool.from_url(url))
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-old-pool:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.undo()
        raise KeyboardInterrupt

    monkeypatch.setattr(client, "parse_response", interrupted)
    with pytest.raises(KeyboardInterrupt):
        limiter.try_acquire("k")
    client.close()


def test_an_async_limiter_outlives_a_loop_that_ended_mid_batch(url: str) -> None:
    # The loop's end cancelled the batch's task, which went on to spawn the
    # next one on the dying loop: the key's queue stayed, and every later
    # call on that key waited behind it for ever.
    limiter = AsyncRedisLimiter(redis.asyncio.Redis.from_url(url), ratekeeper.Gcra(100, 0.01), prefix=f"rk-py-ends:{uuid.uuid4().hex}:")

    async def leave_a_batch_under_way() -> None:
        for _ in range(2):
            asyncio.ensure_future(limiter.try_acquire("k"))
        await asyncio.sleep(0)  # one call in flight, one queued; the loop ends

    async def call_again() -> bool:
        limiter._client = redis.asyncio.Redis.from_url(url)  # a client of this loop
        limiter._script = limiter._client.register_script(REDIS_SCRIPT)
        d = await asyncio.wait_for(limiter.try_acquire("k"), 5)
        await limiter._client.aclose()
        return d.from_store

    asyncio.run(leave_a_batch_under_way())
    assert asyncio.run(call_again())


def test_a_loop_stopped_mid_batch_leaves_no_queue_that_sends_every_later_call_alone(url: str) -> None:
    # A loop that stopped (run_until_complete returned) without closing left
    # its queue for the key: every caller on another loop then went alone,
    # one round trip each, for as long as that loop was not closed.
    limiter = AsyncRedisLimiter(redis.asyncio.Redis.from_url(url), ratekeeper.Gcra(1000, 0.01), prefix=f"rk-py-stop:{uuid.uuid4().hex}:")

    async def leave_a_batch_under_way() -> None:
        for _ in range(2):
            asyncio.ensure_future(limiter.try_acquire("k"))
        await asyncio.sleep(0)  # one call in flight, one queued; the loop stops

    async def callers() -> int:
        limiter._client = redis.asyncio.Redis.from_url(url)  # a client of this loop
        limiter._script = limiter._client.register_script(REDIS_SCRIPT)
        calls = count_round_trips(limiter)
        done = await asyncio.wait_for(asyncio.gather(*(limiter.try_acquire("k") for _ in range(64))), 5)
        assert all(d.from_store and d.allowed for d in done)
        await limiter._client.aclose()
        return calls[0]

    stopped = asyncio.new_event_loop()
    try:
        stopped.run_until_complete(leave_a_batch_under_way())
        assert asyncio.run(callers()) <= 3
    finally:
        stopped.close()


def test_two_loops_in_two_threads_may_share_an_async_limiter() -> None:
    # Both saw no queue for the key and both made one, the second replacing
    # the first: a batch task then sent another loop's callers, or found no
    # queue (KeyError), and callers waited for ever. Here both first looks
    # are made to meet (a barrier), as a thread switch there would.
    class Allowing:
        """A client whose script allows every cost, as a text reply (PROTOCOL.md)."""

        async def evalsha(self, sha: str, count: int, *keys_and_args: Any) -> Any:
            await asyncio.sleep(0)
            costs = int(keys_and_args[count + 3 + len(limiter._core.config)])
            return "1000 " + "1 0 99 100 0 0 " * costs

        def register_script(self, script: str) -> Any:
            return redis.commands.core.AsyncScript(redis.asyncio.Redis(port=1), script)  # for its SHA-1

    limiter = AsyncRedisLimiter(Allowing(), ratekeeper.Gcra(100, 0.01))
    meet = threading.Barrier(2)
    looks = [0]

    class Meeting(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            looks[0] += 1
            if looks[0] <= 2:
                try:
                    meet.wait(0.5)
                except threading.BrokenBarrierError:
                    pass  # the other thread waits for the lock instead
            return super().get(key, default)

    limiter._queues = Meeting()
    answered: list[int] = []

    def run() -> None:
        async def main() -> list[Any]:
            return await asyncio.wait_for(asyncio.gather(*(limiter.try_acquire("k") for _ in range(60))), 5)

        answered.append(sum(d.allowed for d in asyncio.run(main())))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert answered == [60, 60]
    assert not limiter._queues, "every queue ended"


def test_an_async_caller_cancelled_after_its_answer_came_gives_its_units_back(url: str) -> None:
    # Cancelled once the batch had answered it, before it ran: it never saw
    # the answer, and Redis kept the unit it took.
    async def main() -> int:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-late:{uuid.uuid4().hex}:")
        await limiter.peek("k", 0)  # the script is loaded
        caller = asyncio.ensure_future(limiter.try_acquire("k"))
        decisions = limiter._core.decisions

        def answered(reply: Any, count: int) -> Any:
            out = decisions(reply, count)
            asyncio.get_running_loop().call_soon(caller.cancel)  # after its answer is set, before it runs
            return out

        limiter._core.decisions = answered  # type: ignore[method-assign]
        with pytest.raises(asyncio.CancelledError):
            await caller
        limiter._core.decisions = decisions  # type: ignore[method-assign]
        for _ in range(100):
            await asyncio.sleep(0.01)
            used = 100 - (await limiter.peek("k", 0)).remaining
            if used == 0:
                break
        await client.aclose()
        return used

    assert asyncio.run(main()) == 0


def test_an_async_caller_cancelled_meanwhile_gives_back_what_the_fallback_took() -> None:
    # Redis down: the in-process fallback decided the whole batch, the
    # cancelled caller's unit included, and kept it.
    async def main() -> int:
        down = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        fallback = ratekeeper.KeyedLimiter(ratekeeper.Gcra(5, 3600))
        limiter = AsyncRedisLimiter(down, ratekeeper.Gcra(10, 1.0), on_error=fallback)
        tasks = [asyncio.ensure_future(limiter.try_acquire("k")) for _ in range(3)]
        await asyncio.sleep(0)  # the first in flight, two queued behind it
        tasks[0].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(done[0], asyncio.CancelledError)
        assert all(not isinstance(d, BaseException) and d.allowed and not d.from_store for d in done[1:])
        await down.aclose()
        return fallback.peek("k", 0).remaining

    assert asyncio.run(main()) == 3


@pytest.mark.parametrize("call", ["acquire", "reserve", "try_acquire", "try_acquire batched"])
def test_an_async_caller_cancelled_while_its_booking_is_in_flight_which_then_fails_asks_nothing_of_the_fallback(
    call: str,
) -> None:
    # The caller left: the fallback asked once the round trip failed booked
    # for nobody (a key made in a KeyedLimiter, its unit given back at once),
    # as the Node client does not ("an acquire aborted while its booking is in
    # flight, which then fails, asks nothing of the onError limiter").
    sent: list[asyncio.Future[Any]] = []

    class Failing(redis.asyncio.Redis):
        async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            fail: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            sent.append(fail)
            return await fail

    async def main() -> tuple[int, int, list[dict[str, Any]]]:
        reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        fallback = ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 1.0))
        limiter = AsyncRedisLimiter(Failing(port=1), ratekeeper.Gcra(1, 1.0), on_error=fallback, batching=call.endswith("batched"))
        calls: dict[str, Callable[[str], Awaitable[Any]]] = {"acquire": limiter.acquire, "reserve": limiter.reserve}
        task = asyncio.ensure_future(calls.get(call, limiter.try_acquire)("k"))
        while not sent:
            await asyncio.sleep(0)
        task.cancel()  # (an acquire's cancellation waits for the round trip to end)
        sent[0].set_exception(redis.ConnectionError("connection refused"))
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):  # the booking's task ends, and whoever waits for it
            await asyncio.sleep(0)
        return len(sent), len(fallback), reported

    assert asyncio.run(main()) == (1, 0, [])


PER_USER = {"limits": [{"name": "per-user", "rate": "100/second", "by": ["user"]}]}
# A fallback keyed by a field Redis's limits do not read: a value of the
# wrong type there was refused by the fallback alone; it is refused at the
# call now (every field is read, as in-process), the others decided as ever.
PER_IP = {"limits": [{"name": "per-ip", "rate": "5/second", "by": ["user", "ip"]}]}


def test_one_batched_async_caller_whose_fallback_raises_fails_alone(url: str) -> None:
    # Redis answers the first call, then is down for the batch gathered
    # meanwhile: the fallback's error for one caller was raised to all.
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(url)
        fallback = ratekeeper.Policy(PER_IP)
        policy = AsyncRedisPolicy(client, PER_USER, prefix=f"rk-py-fb:{uuid.uuid4().hex}:", on_error=fallback)
        await policy.peek({"user": "u", "ip": "x"}, 0)  # the script is loaded
        real = policy._call

        async def down_after_one(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            policy._call = failing  # type: ignore[method-assign]
            return await real(keys, args, *rest)

        async def failing(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            raise redis.ConnectionError("down")

        policy._call = down_after_one  # type: ignore[method-assign]
        first = asyncio.ensure_future(policy.try_acquire({"user": "u", "ip": "10.0.0.1"}))
        good = asyncio.ensure_future(policy.try_acquire({"user": "u", "ip": "10.0.0.2"}))
        bad = asyncio.ensure_future(policy.try_acquire({"user": "u", "ip": ["not", "an", "ip"]}))  # type: ignore[dict-item]
        assert (await first).from_store
        answer = await good
        assert answer.allowed and not answer.from_store
        with pytest.raises(TypeError):
            await bad
        assert fallback.peek({"user": "u", "ip": "10.0.0.2"}, 0).remaining == 4
        await client.aclose()

    asyncio.run(main())


def test_one_batched_thread_whose_fallback_raises_fails_alone(client: redis.Redis) -> None:
    fallback = ratekeeper.Policy(PER_IP)
    policy = RedisPolicy(client, PER_USER, prefix=f"rk-py-fb:{uuid.uuid4().hex}:", on_error=fallback)
    assert policy.peek({"user": "u", "ip": "x"}, 0).from_store  # the script is loaded
    real = policy._call
    calls = [0]

    def down_after_one(keys: list[bytes], args: list[Any]) -> Any:
        calls[0] += 1
        if calls[0] > 1:
            raise redis.ConnectionError("down")
        time.sleep(0.3)  # the others queue behind this round trip
        return real(keys, args)

    policy._call = down_after_one  # type: ignore[method-assign]
    out: dict[str, object] = {}

    def call(name: str, ip: object) -> None:
        try:
            out[name] = policy.try_acquire({"user": "u", "ip": ip})  # type: ignore[dict-item]
        except Exception as error:
            out[name] = error

    first = threading.Thread(target=call, args=("first", "10.0.0.1"))
    first.start()
    time.sleep(0.1)
    others = [threading.Thread(target=call, args=(name, ip)) for name, ip in (("good", "10.0.0.2"), ("bad", ["x"]))]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(10)
    assert isinstance(out["first"], RedisDecision) and out["first"].from_store
    assert isinstance(out["good"], RedisDecision) and out["good"].allowed and not out["good"].from_store
    assert isinstance(out["bad"], TypeError)
    assert fallback.peek({"user": "u", "ip": "10.0.0.2"}, 0).remaining == 4


def test_an_integer_of_any_kind_is_its_digits_as_a_key_and_counts_as_a_cost(client: redis.Redis) -> None:
    # An __index__ integer (NumPy's) was refused; an IntEnum key was written
    # as str() gives it, 'Tier.GOLD' on Python 3.10, apart from 7's state.
    class Tier(enum.IntEnum):
        GOLD = 7

    class Index:
        def __init__(self, value: int) -> None:
            self.value = value

        def __index__(self) -> int:
            return self.value

    limiter = RedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=f"rk-py-int:{uuid.uuid4().hex}:")
    assert limiter.try_acquire(Tier.GOLD, Index(2)).remaining == 8  # type: ignore[arg-type]
    assert limiter.try_acquire(Index(7), 1).remaining == 7  # type: ignore[arg-type]
    assert limiter.peek("7", 0).remaining == 7
    with pytest.raises(ratekeeper.RateLimitTypeError, match="key"):
        limiter.try_acquire(True)
    with pytest.raises(ratekeeper.RateLimitTypeError, match="cost"):
        limiter.try_acquire("7", True)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="sys.set_int_max_str_digits is 3.11's")
def test_an_int_key_of_more_digits_than_python_writes_is_refused_as_in_process() -> None:
    # An int key is its decimal digits, and past sys.get_int_max_str_digits()
    # Python refuses to write them: the clients raised its bare ValueError (no
    # RateLimitError, no code, no argument named), where the in-process
    # KeyedLimiter and Policy say invalid_value naming the key. Refused
    # before anything is sent (the clients are never connected).
    limiter = RedisLimiter(redis.Redis(port=1), ratekeeper.FixedWindow(10, 3600))
    policy = RedisPolicy(redis.Redis(port=1), "1/second", by=["user"])
    async_limiter = AsyncRedisLimiter(redis.asyncio.Redis(port=1), ratekeeper.FixedWindow(10, 3600))
    digits = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the least Python takes
    try:
        calls: list[tuple[str, Callable[[], object]]] = [
            ("key", lambda: limiter.try_acquire(10**700)),
            ("key", lambda: limiter.peek(10**700)),
            ("request['user']", lambda: policy.try_acquire({"user": 10**700})),
            ("key", lambda: asyncio.run(async_limiter.try_acquire(10**700))),
        ]
        for name, call in calls:
            with pytest.raises(ratekeeper.RateLimitError, match=f"^{re.escape(f'`{name}`')} has more digits than Python writes") as refused:
                call()
            assert refused.value.code == "invalid_value"
        assert limiter._keys(10**600)[0].endswith(b":601:1" + b"0" * 600)  # fewer digits: the key as before
    finally:
        sys.set_int_max_str_digits(digits)


def test_an_in_process_fallback_never_raises_in_an_outage_for_a_call_redis_takes(client: redis.Redis) -> None:
    # During an outage it raised where the store decides: a cost above its
    # smaller limit, a field a request need not have. A cost it cannot take
    # is denied as "closed" denies; a request lacking its fields fails on
    # every call, Redis up or down.
    down = redis.Redis(port=1, retry=NO_RETRY)
    stricter = RedisLimiter(down, ratekeeper.Gcra(10, 0.1), on_error=ratekeeper.Gcra(2, 1.0))
    d = stricter.try_acquire("k", 5)
    assert (d.allowed, d.from_store, d.retry_after) == (False, False, 1.0)
    assert stricter.try_acquire("k", 2).allowed
    policy = RedisPolicy(down, "10/second", by=["user"], on_error=ratekeeper.Policy("2/second", by=["user"]))
    d = policy.try_acquire({"user": "u"}, 5)
    assert (d.allowed, d.from_store, d.retry_after) == (False, False, 1.0)
    assert policy.try_acquire({"user": "u"}, 2).allowed
    for up_or_down in (client, down):
        by_ip = RedisPolicy(up_or_down, "10/second", by=["user"], on_error=ratekeeper.Policy("10/second", by=["ip"]))
        with pytest.raises(ratekeeper.RateLimitError, match="^`request` lacks the field 'ip' that on_error's limit '10/second' is keyed by$"):
            by_ip.try_acquire({"user": "u"})
        assert by_ip.try_acquire({"user": "u", "ip": "1.2.3.4"}).allowed


def test_a_fallback_policy_asks_for_the_fields_of_a_limit_added_after_construction(url: str) -> None:
    # Its fields were read once, at construction: a limit added to the
    # fallback later was never asked for, so a request lacking its field was
    # admitted while Redis was up and refused by the fallback itself, as its
    # own request, while Redis was down.
    lacking = "^`request` lacks the field 'ip' that on_error's limit 'per-ip' is keyed by$"
    prefix = f"rk-py-added:{uuid.uuid4().hex}:"

    def fallback() -> ratekeeper.Policy:
        return ratekeeper.Policy("10/second", by=["user"], clock=lambda: 5.0)

    def add_per_ip(local: ratekeeper.Policy) -> None:
        local.add("per-ip", ratekeeper.Gcra(5, 0.1), by=["ip"])
        with pytest.raises(ratekeeper.RateLimitError, match="lacks the field 'ip'") as refused:
            local.try_acquire({"user": "u"})
        assert refused.value.code == "invalid_value"

    for client in (redis.Redis(port=1, retry=NO_RETRY), redis.Redis.from_url(url)):
        local = fallback()
        policy = RedisPolicy(client, "10/second", by=["user"], on_error=local, prefix=prefix)
        assert policy.try_acquire({"user": "u"}).allowed
        add_per_ip(local)
        for call in (policy.try_acquire, policy.peek, policy.reserve, lambda r: policy.try_acquire_batch(r, [1])):
            with pytest.raises(ratekeeper.RateLimitError, match=lacking) as error:
                call({"user": "u"})
            assert error.value.code == "invalid_value"
        assert policy.try_acquire({"user": "u", "ip": "1.2.3.4"}).allowed
        client.close()

    async def main() -> None:
        for client in (redis.asyncio.Redis(port=1, retry=ASYNC_NO_RETRY), redis.asyncio.Redis.from_url(url)):
            local = fallback()
            policy = AsyncRedisPolicy(client, "10/second", by=["user"], on_error=local, prefix=prefix)
            assert (await policy.try_acquire({"user": "u"})).allowed
            add_per_ip(local)
            with pytest.raises(ratekeeper.RateLimitError, match=lacking):
                await policy.try_acquire({"user": "u"})
            with pytest.raises(ratekeeper.RateLimitError, match=lacking):
                await policy.acquire({"user": "u"})
            assert (await policy.try_acquire({"user": "u", "ip": "1.2.3.4"})).allowed
            await client.aclose()

    asyncio.run(main())


def _load_script(url: str) -> None:
    """Loads the script into Redis's cache through a client with no socket
    timeout to meet: a limiter of 0.2 s that loaded it, before a call of its
    that had to time out, failed on a stall of the machine."""
    plain = redis.Redis.from_url(url)
    try:
        plain.script_load(REDIS_SCRIPT)
    finally:
        plain.close()


def _queued(limiter: Any) -> int:
    """How many callers have joined ``limiter``'s batches (sent or gathered)."""
    with limiter._lock:
        return sum(
            len(batch.slots)
            for queue in limiter._queues.values()
            for batch in [*([queue.sending] if queue.sending else []), *queue.waiting]
        )


def _sent_while_paused(url: str, limiter: Any, caller: Callable[[], None]) -> list[object]:
    """Runs ``caller`` in 16 threads at once while Redis answers no client
    (writes paused), and lists the operations ``limiter`` sent meanwhile.
    The first round trip leaves only once all 16 callers have queued (a
    thread held by a stall of the machine until the round trip had timed
    out was sent as a second round); the pause, long, ends when they are done."""
    admin = redis.Redis.from_url(url)
    sent: list[object] = []
    call = limiter._call

    def counted(keys: list[bytes], args: list[Any]) -> Any:
        if not sent:
            deadline = time.monotonic() + 10
            while _queued(limiter) < 16 and time.monotonic() < deadline:
                time.sleep(0.01)
        sent.append(args[1])
        return call(keys, args)

    limiter._call = counted
    start = threading.Barrier(16)

    def together() -> None:
        start.wait()
        caller()

    try:
        admin.client_pause(60_000, all=False)
        threads = [threading.Thread(target=together) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    finally:
        admin.client_unpause()
        admin.close()
    return sent


def test_callers_queued_behind_a_round_trip_that_timed_out_are_decided_at_once(url: str) -> None:
    # A server that does not answer (writes paused): the first round trip
    # times out; the callers that queued behind it are decided by on_error
    # at once, not sent as a second round to time out in turn.
    client = redis.Redis.from_url(url, socket_timeout=0.2, retry=Retry(NoBackoff(), 0))
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), on_error="open")
    _load_script(url)
    results: list[RedisDecision] = []
    try:
        sent = _sent_while_paused(url, limiter, lambda: results.append(limiter.try_acquire("hot")))
    finally:
        client.close()
    assert len(results) == 16 and all(d.allowed and not d.from_store for d in results)
    assert sent == ["acquire"]


def test_callers_queued_behind_a_round_trip_whose_fallback_refused_are_decided_at_once(url: str) -> None:
    # As above, with on_error refusing the first caller's request (a fallback
    # Policy whose store of addresses is full): Redis did not answer all the
    # same, and the callers that queued behind it are decided by on_error at
    # once (refused in turn), not sent round after round to time out.
    client = redis.Redis.from_url(url, socket_timeout=0.2, retry=Retry(NoBackoff(), 0))
    fallback = ratekeeper.Policy()
    fallback.add("per-ip", ratekeeper.KeyedLimiter(ratekeeper.FixedWindow(100, 3600), max_keys=1, eviction="refuse"), by=["ip"])
    assert fallback.try_acquire({"ip": "203.0.113.1"}).allowed  # the store is full
    limiter = RedisPolicy(client, "100/hour", by=["user"], on_error=fallback, prefix=f"rk-py-refused:{uuid.uuid4().hex}:")
    request = {"user": "hot", "ip": "203.0.113.2"}
    _load_script(url)
    codes: list[str] = []

    def caller() -> None:
        try:
            limiter.try_acquire(request)
        except ratekeeper.RateLimitError as error:
            codes.append(error.code)

    try:
        sent = _sent_while_paused(url, limiter, caller)
    finally:
        client.close()
    assert codes == ["store_full"] * 16
    assert sent == ["acquire"]


def test_async_callers_queued_behind_a_round_trip_that_timed_out_are_decided_at_once(url: str) -> None:
    async def main() -> tuple[list[RedisDecision], list[object]]:
        client = redis.asyncio.Redis.from_url(url, socket_timeout=0.2, retry=AsyncRetry(NoBackoff(), 0))
        admin = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(100, 3600), on_error="open")
        _load_script(url)
        sent: list[object] = []
        call = limiter._call

        async def counted(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            sent.append(args[1])
            return await call(keys, args, *rest)

        limiter._call = counted  # type: ignore[method-assign]
        try:
            # Long: ended once every caller is answered (a stall of the
            # machine outlasting a short one let the call be answered).
            await admin.client_pause(60_000, all=False)
            return list(await asyncio.gather(*(limiter.try_acquire("hot") for _ in range(16)))), sent
        finally:
            await admin.client_unpause()
            await admin.aclose()
            await client.aclose()

    results, sent = asyncio.run(main())
    assert all(d.allowed and not d.from_store for d in results)
    assert sent == ["acquire"]


def test_an_interrupted_waiting_acquire_gives_its_booking_back(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0))
    assert limiter.try_acquire("k")  # the next unit is a second away

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        limiter.acquire("k")
    monkeypatch.undo()
    # Kept, the booking would put the next free unit two seconds away.
    assert 0 < limiter.peek("k").retry_after <= 1.0


def test_a_bad_timeout_is_refused_naming_it() -> None:
    client = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), on_error="open")
    bad: list[tuple[Any, type[Exception]]] = [
        (-1, ratekeeper.RateLimitError),
        (math.nan, ratekeeper.RateLimitError),
        (Decimal("-Infinity"), ratekeeper.RateLimitError),
        ("1", ratekeeper.RateLimitTypeError),
    ]
    for timeout, error in bad:
        with pytest.raises(error, match="timeout"):
            limiter.acquire("k", timeout=timeout)
    limiter.acquire("k", timeout=math.inf)  # no bound; the fallback admits
    # A Decimal's infinity too, as the in-process limiters take it (it was refused).
    limiter.acquire("k", timeout=Decimal("Infinity"))
    assert limiter.reserve("k", max_wait=Decimal("Infinity")).ok
    closed = RedisLimiter(client, ratekeeper.Gcra(1, 1.0)).try_acquire("k")
    assert (closed.allowed, closed.retry_after, closed.reset_after) == (False, 1.0, 1.0)
    assert closed.headers()["RateLimit"].endswith("t=1") and closed.headers()["Retry-After"] == "1"
    with pytest.raises(TypeError, match="^`key` must be a str, bytes or int, not float$"):
        limiter.try_acquire(1.5)  # type: ignore[arg-type]


def test_a_batch_falls_back_for_each_callers_own_request() -> None:
    # A batch gathers callers whose requests share their Redis keys, not the
    # fields the in-process fallback keys on: each is decided for its own.
    async def main() -> None:
        aclient = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        fallback = ratekeeper.Policy("1/minute", by=["user"])
        policy = AsyncRedisPolicy(aclient, "5/minute", by=["client"], on_error=fallback)
        users = ["u1", "u2", "u3", "u4"]
        decisions = await asyncio.gather(*(policy.try_acquire({"client": "a", "user": u}) for u in users))
        assert [(d.allowed, d.from_store) for d in decisions] == [(True, False)] * 4
        await aclient.aclose()

    asyncio.run(main())
    client = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    fallback = ratekeeper.Policy("1/minute", by=["user"])
    policy = RedisPolicy(client, "5/minute", by=["client"], on_error=fallback)
    decisions: list[Any] = []
    threads = [threading.Thread(target=lambda u=u: decisions.append(policy.try_acquire({"client": "a", "user": u}))) for u in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [d.allowed for d in decisions] == [True] * 8


def test_a_fallback_policy_decides_for_the_fields_the_request_had_at_the_call() -> None:
    # The fallback read the request once Redis had failed, a round trip
    # later: a request reused meanwhile (another thread's, another task's)
    # had user a's call decided and counted as b's.
    request = {"user": "a"}

    class Client(redis.Redis):
        def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            request["user"] = "b"
            raise redis.ConnectionError("down")

    class AsyncClient(redis.asyncio.Redis):
        async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            request["user"] = "b"
            raise redis.ConnectionError("down")

    def counted(fallback: ratekeeper.Policy) -> list[bool]:
        return [fallback.peek({"user": u}).allowed for u in ("a", "b")]

    for batching in (True, False):
        request["user"] = "a"
        fallback = ratekeeper.Policy("1/minute", by=["user"])
        policy = RedisPolicy(Client(port=1), "5/minute", by=["user"], on_error=fallback, batching=batching)
        assert policy.try_acquire(request).allowed
        assert counted(fallback) == [False, True], f"batching={batching}"

    async def main() -> list[bool]:
        request["user"] = "a"
        fallback = ratekeeper.Policy("1/minute", by=["user"])
        policy = AsyncRedisPolicy(AsyncClient(port=1), "5/minute", by=["user"], on_error=fallback)
        assert (await policy.try_acquire(request)).allowed
        return counted(fallback)

    assert asyncio.run(main()) == [False, True]


class FlushedAfterLoading(redis.Redis):
    """A client each of whose ``SCRIPT LOAD`` another process's ``SCRIPT FLUSH``
    follows at once (flushes in a row, a restart or failover meanwhile)."""

    def script_load(self, script: Any) -> Any:
        sha = super().script_load(script)
        self.script_flush()
        return sha


class AsyncFlushedAfterLoading(redis.asyncio.Redis):
    async def script_load(self, script: Any) -> Any:
        sha = await super().script_load(script)
        await self.script_flush()
        return sha


def test_a_script_flushed_again_after_its_reload_is_sent_itself_not_answered_by_on_error(url: str) -> None:
    # redis-py loads the script on a NOSCRIPT and sends one more EVALSHA: a
    # flush between the two made it a fault, and on_error denied the whole
    # batch (and the callers queued behind it) while Redis answered.
    prefix = f"rk-py-flushed:{uuid.uuid4().hex}:"
    client = FlushedAfterLoading.from_url(url)
    client.script_flush()
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=prefix)
    assert [limiter.try_acquire("k").from_store for _ in range(2)] == [True, True]
    client.close()

    async def main() -> tuple[bool, int]:
        client = AsyncFlushedAfterLoading.from_url(url)
        await client.script_flush()
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=prefix)
        decided = (await limiter.try_acquire("k")).from_store, (await limiter.peek("k", 0)).remaining
        await client.aclose()
        return decided

    assert asyncio.run(main()) == (True, 7)


class FlushedAndNoEval(FlushedAfterLoading):
    """``FlushedAfterLoading`` for an ACL user allowed EVALSHA and SCRIPT
    LOAD but not EVAL (its ``eval`` answers Redis's NOPERM)."""

    def eval(self, *args: Any, **kwargs: Any) -> Any:
        raise redis.exceptions.NoPermissionError("this user has no permissions to run the 'eval' command")


class AsyncFlushedAndNoEval(AsyncFlushedAfterLoading):
    async def eval(self, *args: Any, **kwargs: Any) -> Any:
        raise redis.exceptions.NoPermissionError("this user has no permissions to run the 'eval' command")


def test_a_script_flushed_again_for_a_user_who_may_not_eval_is_answered_by_on_error(url: str) -> None:
    # Such a user cannot send the script itself: the NOSCRIPT stands, a fault
    # on_error answers as before, not the NOPERM of the EVAL it may not send
    # (raised, a ScriptError, as for a user who may not run the script).
    prefix = f"rk-py-no-eval:{uuid.uuid4().hex}:"
    client = FlushedAndNoEval.from_url(url)
    client.script_flush()
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=prefix, on_error="open")
    decision = limiter.try_acquire("k")
    assert (decision.allowed, decision.from_store) == (True, False)
    client.close()

    async def main() -> tuple[bool, bool]:
        client = AsyncFlushedAndNoEval.from_url(url)
        await client.script_flush()
        limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=prefix, on_error="open")
        decision = await limiter.try_acquire("k")
        await client.aclose()
        return decision.allowed, decision.from_store

    assert asyncio.run(main()) == (True, False)


# The commands PROTOCOL.md lists for the clients' ACL user (and SCRIPT FLUSH, for the tests' clients).
ACL_COMMANDS = (
    "+evalsha +script|load +eval +time +get +set +pexpire +pexpireat +unlink +zadd +zcount"
    " +zrangebyscore +zrevrangebyscore +zremrangebyscore +script|flush"
).split()


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_evals_noperm_other_than_for_eval_itself_is_raised_not_answered_by_on_error(url: str, asynchronous: bool) -> None:
    # Only a NOPERM for EVAL itself leaves the NOSCRIPT standing (the test
    # above), as the Node client reads it. Any NOPERM of the EVAL was
    # answered by on_error, as an outage: here a key of the call's, refused
    # to the user since its EVALSHA (Redis checks the keys before the
    # script's cache, so only the EVAL can meet that), which Node raises.
    admin = redis.Redis.from_url(url)
    user, prefix = f"rk-py-acl-{uuid.uuid4().hex}", f"rk-py-acl:{uuid.uuid4().hex}:"
    admin.acl_setuser(user, enabled=True, passwords=["+pw"], commands=ACL_COMMANDS, keys=[f"{prefix}*"])
    admin.script_flush()  # the EVALSHA meets NOSCRIPT, and so does the one after the reload

    def refuse_the_keys() -> None:
        admin.acl_setuser(user, enabled=True, reset_keys=True, keys=["elsewhere:*"])

    class Refused(FlushedAfterLoading):
        def eval(self, *args: Any, **kwargs: Any) -> Any:
            refuse_the_keys()
            return super().eval(*args, **kwargs)

    class AsyncRefused(AsyncFlushedAfterLoading):
        async def eval(self, *args: Any, **kwargs: Any) -> Any:
            refuse_the_keys()
            return await super().eval(*args, **kwargs)

    async def on_asyncio() -> None:
        client = AsyncRefused.from_url(url, username=user, password="pw")
        try:
            await AsyncRedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=prefix, on_error="open").try_acquire("k")
        finally:
            await client.aclose()

    try:
        with pytest.raises(ScriptError, match="no permissions to access") as caught:
            if asynchronous:
                asyncio.run(on_asyncio())
            else:
                client = Refused.from_url(url, username=user, password="pw")
                try:
                    RedisLimiter(client, ratekeeper.FixedWindow(10, 3600), prefix=prefix, on_error="open").try_acquire("k")
                finally:
                    client.close()
        assert isinstance(caught.value.__cause__, redis.exceptions.NoPermissionError)
    finally:
        admin.acl_deluser(user)
        admin.close()


class AsyncHolding(redis.asyncio.Redis):
    """An asyncio client that lists the script commands it sends, and holds
    back the ``hold``-th of them (counted from 1) until ``release`` is set
    (``holding`` set meanwhile): the round trip its caller leaves during. With
    ``flush``, another process's ``SCRIPT FLUSH`` follows its ``SCRIPT LOAD``."""

    sent: list[str]
    hold: int
    flush: bool
    holding: asyncio.Event
    release: asyncio.Event

    async def _held(self, command: str) -> None:
        self.sent.append(command)
        if len(self.sent) == self.hold:
            self.holding.set()
            await self.release.wait()

    async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        await self._held("EVALSHA")
        return await super().evalsha(*args, **kwargs)

    async def script_load(self, script: Any) -> Any:
        await self._held("SCRIPT LOAD")
        sha = await super().script_load(script)
        if self.flush:
            await self.script_flush()
        return sha

    async def eval(self, *args: Any, **kwargs: Any) -> Any:
        await self._held("EVAL")
        return await super().eval(*args, **kwargs)


# Each way an async caller has its round trip made for it: batched, alone
# (an explicit now, a batch of costs), a booking, a waiting acquire's.
ASYNC_CALLERS: dict[str, Callable[[AsyncRedisLimiter], Awaitable[object]]] = {
    "batched try_acquire": lambda limiter: limiter.try_acquire("k"),
    "try_acquire with now": lambda limiter: limiter.try_acquire("k", now=2_000_000_000.0),
    "try_acquire_batch": lambda limiter: limiter.try_acquire_batch("k", [1, 1]),
    "reserve": lambda limiter: limiter.reserve("k"),
    "acquire": lambda limiter: limiter.acquire("k"),
}


@pytest.mark.parametrize("caller", list(ASYNC_CALLERS))
@pytest.mark.parametrize(
    "sent",
    [["EVALSHA"], ["EVALSHA", "SCRIPT LOAD"], ["EVALSHA", "SCRIPT LOAD", "EVALSHA"]],
    ids=["during the EVALSHA meeting NOSCRIPT", "during the SCRIPT LOAD", "during the EVALSHA after it, meeting NOSCRIPT again"],
)
def test_a_caller_cancelled_while_the_script_is_reloaded_has_nothing_more_sent(url: str, caller: str, sent: list[str]) -> None:
    # redis-py's script object went on from a NOSCRIPT to SCRIPT LOAD and
    # EVALSHA (then EVAL) whoever was left to wait for it: the decision was
    # sent for nobody, its units taken ahead of the callers still there until
    # its give-back came. As the Node client's evaluate() stops once
    # abandoned(), nothing more goes once the caller has gone.
    async def main() -> tuple[list[str], int]:
        client = AsyncHolding.from_url(url)
        assert isinstance(client, AsyncHolding)
        client.sent, client.hold, client.flush = [], len(sent), len(sent) == 3
        client.holding, client.release = asyncio.Event(), asyncio.Event()
        prefix = f"rk-py-reload-gone:{uuid.uuid4().hex}:"
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(5, 60.0), prefix=prefix, on_error="open")
        await client.script_flush()
        task = asyncio.ensure_future(ASYNC_CALLERS[caller](limiter))
        await client.holding.wait()
        # Gone at once (what it awaits is cancelled with it); an acquire then
        # awaits its give-back, which waits for the round trip held here.
        task.cancel()
        client.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The round trip (and any give-back) runs in tasks of their own: every one ends.
        while others := [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
            await asyncio.wait(others)
        left = list(client.sent)
        keys = len(await client.keys(prefix + "*"))
        await client.aclose()
        return left, keys

    assert asyncio.run(main()) == (sent, 0)


class RefusingClient(redis.Redis):
    """A client whose script answers as a script that disagrees with it would."""

    def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        raise redis.ResponseError("ratekeeper: protocol version 2 is not 1")


class AsyncRefusingClient(redis.asyncio.Redis):
    async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
        raise redis.ResponseError("ERR ratekeeper: unknown mode x")


@pytest.mark.parametrize(
    "reply",
    [
        redis.exceptions.NoPermissionError("User app has no permissions to run the 'evalsha' command"),
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value script: f00, on @user_script:48."),
        redis.ResponseError("user_script:38: attempt to compare nil with number script: f00, on @user_script:38."),
        redis.ResponseError(
            "The user executing the script can't run this command or subcommand script: f00, on @user_script:1."
        ),
        # Redis 7.2 on (and Valkey) words that one so, after an ERR that redis-py takes off.
        redis.ResponseError(
            "ACL failure in script: User app has no permissions to run the 'zadd' command script: f00, on @user_script:1."
        ),
    ],
    ids=[
        "NOPERM",
        "WRONGTYPE",
        "a key's value the script cannot read",
        "a command the script calls, denied",
        "a command the script calls, denied (Redis 7.2 on)",
    ],
)
def test_errors_no_retry_mends_are_raised_not_answered_by_on_error(reply: redis.ResponseError) -> None:
    # A misconfiguration looked like an outage: on_error="open" allowed every
    # request, for ever, with nothing but from_store to tell.
    class Client(redis.Redis):
        def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            raise reply

    limiter = RedisLimiter(Client(port=1), ratekeeper.Gcra(1, 1.0), on_error="open")
    with pytest.raises(ScriptError) as caught:
        limiter.try_acquire("k")
    assert caught.value.__cause__ is reply
    # A server still loading its data is a fault of reach: on_error answers.
    busy = redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory")

    class Loading(redis.Redis):
        def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            raise busy

    answered = RedisLimiter(Loading(port=1), ratekeeper.Gcra(1, 1.0), on_error="open").try_acquire("k")
    assert answered.allowed and not answered.from_store


def test_a_script_error_reaches_every_caller_of_its_batch_in_one_round_trip() -> None:
    # The script refusing a batch refuses each of its callers alike, in one
    # round trip: raised in the sender's thread alone, it would leave the
    # others to send the batch again, one round trip (and one refusal) each.
    calls: list[int] = []

    class Refusing(redis.Redis):
        def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(len(calls))
            if len(calls) == 1:
                # The others queue behind this round trip meanwhile (waited
                # for, not timed: a slow start must not make a third call).
                deadline = time.monotonic() + 10
                while queued() < 15 and time.monotonic() < deadline:
                    time.sleep(0.001)
            raise redis.ResponseError("ratekeeper: protocol version 2 is not 1")

    limiter = RedisLimiter(Refusing(port=1), ratekeeper.Gcra(100, 1.0), on_error="open")

    def queued() -> int:
        return sum(len(batch.slots) for queue in list(limiter._queues.values()) for batch in queue.waiting)

    start = threading.Barrier(16)
    refused: list[BaseException] = []

    def caller() -> None:
        start.wait()
        try:
            limiter.try_acquire("hot")
        except ScriptError as error:
            refused.append(error)

    threads = [threading.Thread(target=caller) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(refused) == 16
    assert len(calls) == 2  # the first caller's, then the batch queued behind it


def test_a_sockets_own_error_is_a_fault_that_on_error_answers() -> None:
    # redis-py wraps its sockets' errors (ConnectionError); a client or a
    # proxy's may let one through as it is (an OSError), still a fault of
    # reach: answered by on_error, sync and async, not raised.
    class Reset(redis.Redis):
        def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionResetError(104, "Connection reset by peer")

    class AsyncReset(redis.asyncio.Redis):
        async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionResetError(104, "Connection reset by peer")

    answered = RedisLimiter(Reset(port=1), ratekeeper.Gcra(1, 1.0), on_error="open").try_acquire("k")
    assert answered.allowed and not answered.from_store

    async def main() -> RedisDecision:
        client = AsyncReset(port=1)
        decision = await AsyncRedisLimiter(client, ratekeeper.Gcra(1, 1.0), on_error="open").try_acquire("k")
        await client.aclose()
        return decision

    answered = asyncio.run(main())
    assert answered.allowed and not answered.from_store


def test_a_client_of_the_other_kind_is_refused_when_built() -> None:
    # It failed at the first call: "object bytes can't be used in 'await'
    # expression", or "'coroutine' object is not subscriptable".
    for sync_class, async_class, config in ((RedisLimiter, AsyncRedisLimiter, ratekeeper.Gcra(1, 1.0)), (RedisPolicy, AsyncRedisPolicy, POLICY)):
        with pytest.raises(ratekeeper.RateLimitTypeError, match="for a redis.asyncio one, use the Async class"):
            sync_class(redis.asyncio.Redis(port=1), config)  # type: ignore[arg-type]
        with pytest.raises(ratekeeper.RateLimitTypeError, match="for a sync one, use the class without Async"):
            async_class(redis.Redis(port=1), config)  # type: ignore[arg-type]


def test_without_redis_py_the_import_says_what_to_install() -> None:
    import subprocess
    import sys

    hide = "import sys; sys.modules['redis'] = sys.modules['redis.exceptions'] = None; import ratekeeper.redis"
    run = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True)
    assert run.returncode == 1
    assert "ModuleNotFoundError: ratekeeper.redis needs redis-py: pip install 'ratekeeper[redis]'" in run.stderr


def test_the_scripts_own_errors_are_raised_not_answered_by_on_error() -> None:
    # A bug (a client and script that disagree), not a fault of the store:
    # on_error must not hide it, as the Node client does not.
    limiter = RedisLimiter(RefusingClient(port=1), ratekeeper.Gcra(1, 1.0), on_error="open")
    for call in (lambda: limiter.try_acquire("k"), lambda: limiter.peek("k"), lambda: limiter.reserve("k"), lambda: limiter.refund("k", 1)):
        with pytest.raises(ScriptError, match="^ratekeeper: protocol version") as caught:
            call()
        assert isinstance(caught.value.__cause__, redis.ResponseError)
        assert not isinstance(caught.value, redis.RedisError)

    async def main() -> None:
        policy = AsyncRedisPolicy(AsyncRefusingClient(port=1), "5/minute", on_error="open")
        with pytest.raises(ScriptError, match="unknown mode"):
            await policy.try_acquire({})
        # Batched callers get the leader's error, each.
        results = await asyncio.gather(*(policy.try_acquire({}) for _ in range(3)), return_exceptions=True)
        assert [type(r) for r in results] == [ScriptError] * 3

    asyncio.run(main())


def hammer(url: str, results: Any) -> None:
    """One process: 4 threads, each trying 100 times on one key."""
    client = redis.Redis.from_url(url)
    policy = RedisPolicy(client, [("hot", ratekeeper.TokenBucket(300, 1, 3600), ["key"])])
    counts = []

    def work() -> None:
        counts.append(sum(policy.try_acquire({"key": "one"}).allowed for _ in range(100)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put(sum(counts))


def test_processes_and_threads_admit_exactly_the_bound(client: redis.Redis, url: str) -> None:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=hammer, args=(url, results)) for _ in range(4)]
    for p in processes:
        p.start()
    total = sum(results.get(timeout=60) for _ in processes)
    for p in processes:
        p.join(10)
    assert total == 300


# The fault tests' socket timeouts: a stopped server refuses or closes the
# connection at once, which on_error answers, so no timeout has to fire; the
# calls made while it is up must be answered, and a stall of the machine past
# 0.5 s (their timeout before) had on_error answer them (from_store False).
UP_TIMEOUT = 10.0


@pytest.mark.parametrize("on_error", ["open", "closed", "fallback"])
def test_faults_apply_the_policy_then_resume(own_server: Server, on_error: str) -> None:
    client = redis.Redis(port=own_server.port, socket_timeout=UP_TIMEOUT, socket_connect_timeout=UP_TIMEOUT, retry=NO_RETRY)
    fallback = ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 3600))
    policy: Any = fallback if on_error == "fallback" else on_error
    limiter = RedisLimiter(client, ratekeeper.Gcra(5, 3600), on_error=policy)
    assert limiter.try_acquire("k", 2).from_store
    own_server.stop()
    during = [limiter.try_acquire("k") for _ in range(3)]
    assert not any(d.from_store for d in during)
    expected = {"open": [True] * 3, "closed": [False] * 3, "fallback": [True, False, False]}[on_error]
    assert [d.allowed for d in during] == expected
    own_server.start()
    # Decisions resume (the restarted server is empty: a fresh limiter).
    after = limiter.try_acquire("k")
    assert after.from_store and after.allowed and after.remaining == 4


def test_policy_falls_back_to_an_in_process_policy(own_server: Server) -> None:
    client = redis.Redis(port=own_server.port, socket_timeout=UP_TIMEOUT, socket_connect_timeout=UP_TIMEOUT, retry=NO_RETRY)
    # The fallback on a fixed clock: its GCRA's burst is 3 per 0.1 s.
    policy = RedisPolicy(client, POLICY, on_error=ratekeeper.Policy(POLICY, clock=lambda: 5.0))
    request = {"user": "carol", "endpoint": "/"}
    assert policy.try_acquire(request).from_store
    own_server.stop()
    during = [policy.try_acquire(request) for _ in range(4)]
    assert [(d.allowed, d.from_store) for d in during] == [(True, False)] * 3 + [(False, False)]
    assert during[-1].denied_by == "per-user"
    own_server.start()
    assert policy.try_acquire(request).from_store


def test_async_faults(own_server: Server) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(
            port=own_server.port, socket_timeout=UP_TIMEOUT, socket_connect_timeout=UP_TIMEOUT, retry=ASYNC_NO_RETRY
        )
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(5, 3600), on_error="open")
        assert (await limiter.try_acquire("k")).from_store
        own_server.stop()
        d = await limiter.try_acquire("k")
        assert d.allowed and not d.from_store
        own_server.start()
        assert (await limiter.try_acquire("k")).from_store
        await client.aclose()

    asyncio.run(main())


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_cluster_keys_share_a_slot(cluster_url: str) -> None:
    client: Any = RedisCluster.from_url(cluster_url)
    run = uuid.uuid4().hex  # the cluster is not flushed between runs
    policy = RedisPolicy(client, POLICY, prefix=f"cluster:{run}:")
    requests = [{"user": f"user{i}", "endpoint": "/e"} for i in range(20)]
    for request in requests:
        assert policy.try_acquire(request).allowed
    for request in requests:
        slots = {client.keyslot(k) for k in policy._keys(request)}
        assert len(slots) == 1
    # Different users land on different slots: the load spreads over the nodes.
    assert len({client.keyslot(policy._keys(r)[0]) for r in requests}) > 1
    # Caller time: four calls on the server's clock could straddle a minute.
    global_policy = RedisPolicy(client, "3/minute", algorithm="fixed_window", prefix=f"cluster-global:{run}:")
    assert [global_policy.try_acquire(now=2_000_000_000).allowed for _ in range(4)] == [True, True, True, False]
    client.close()
    # redis-py's cluster client leaves a socket of its discovery to the collector.
    del client, policy, global_policy
    gc.collect()


def test_a_limit_whose_name_ends_like_a_key_never_shares_a_key() -> None:
    # Names unwritten as `<length>:<name>`, limit "a" of key "x:" and limit
    # "a:2:x" were one Redis key.
    client = redis.Redis(port=1)  # never connected
    hourly = ratekeeper.FixedWindow(1, 3600)
    policy = RedisPolicy(client, [("a", hourly, ["k"]), ("a:2:x", hourly, [])], prefix="p:")
    assert policy._keys({"k": "x:"}) == [b"p:{p:}:1:a:2:x:", b"p:{p:}:5:a:2:x:"]


def test_a_named_limiter_keys_as_the_node_client_does() -> None:
    # The name is part of every key: by default the limiter's own, as the
    # Node client takes it, so that both share one limit.
    client = redis.Redis(port=1)  # never connected
    named = ratekeeper.Gcra(10, 0.1, name="api")
    assert RedisLimiter(client, named)._keys("k") == [b"ratekeeper:{1:k}:3:api:1:k"]
    assert RedisLimiter(client, named, name="other")._keys("k") == [b"ratekeeper:{1:k}:5:other:1:k"]
    assert RedisLimiter(client, ratekeeper.Gcra(10, 0.1))._keys("k") == [b"ratekeeper:{1:k}:14:gcra/10/100000:1:k"]
    # Lengths in bytes, as the Node client counts them (UTF-8), not characters.
    assert RedisLimiter(client, named)._keys("naïve") == [b"ratekeeper:{6:na\xc3\xafve}:3:api:6:na\xc3\xafve"]


def test_a_redis_limiter_describes_its_limit_as_a_keyed_limiter_does() -> None:
    # As the Node client's limit, windowMs, algorithm and name: `algorithm` was missing.
    client = redis.Redis(port=1)  # never connected
    for limiter in (
        ratekeeper.Gcra(10, 0.1, name="api"),
        ratekeeper.TokenBucket(5, 1, 2.0),
        ratekeeper.FixedWindow(100, 60),
        ratekeeper.SlidingWindowCounter(100, 60),
        ratekeeper.SlidingWindowLog(5, 1.0),
    ):
        keyed = ratekeeper.KeyedLimiter(limiter)
        for store in (RedisLimiter(client, limiter), AsyncRedisLimiter(redis.asyncio.Redis(port=1), limiter)):
            described = (store.algorithm, store.limit, store.window, store.name)
            assert described == (keyed.algorithm, keyed.limit, keyed.window, keyed.name)


def test_a_fallback_must_decide_the_stores_target() -> None:
    client = redis.Redis(port=1)
    gcra = ratekeeper.Gcra(2, 0.5)
    with pytest.raises(ValueError, match="on_error"):
        RedisLimiter(client, gcra, on_error=ratekeeper.Policy("1/second"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_error"):
        RedisPolicy(client, "1/second", on_error=ratekeeper.KeyedLimiter(gcra))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^`on_error` must be .* not int$"):
        RedisLimiter(client, gcra, on_error=5)  # type: ignore[arg-type]
    RedisLimiter(client, gcra, on_error=ratekeeper.KeyedLimiter(gcra))
    RedisPolicy(client, "1/second", on_error=ratekeeper.Policy("1/second"))
    RedisPolicy(client, "1/second", on_error=gcra)


def test_a_fallback_decides_each_limit_as_its_own_and_never_states_a_shorter_wait() -> None:
    client = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    # A fallback Policy of other limits: each limit it has answers for itself,
    # by name (every limit took the combined decision: q=10 for "100/minute").
    local = ratekeeper.Policy.from_rates("100/minute;10/second", by=["user"], clock=lambda: 5.0)
    policy = RedisPolicy(client, "10/second;100/minute;7/hour", by=["user"], on_error=local)
    d = policy.try_acquire({"user": "a"})
    assert not d.from_store
    assert [(name, x.limit, x.remaining) for name, x in d.limits] == [
        ("10/second", 10, 9),
        ("100/minute", 100, 99),
        ("7/hour", 10, 9),  # not in the fallback: its whole decision
    ]
    assert policy.headers(d)["RateLimit-Policy"].startswith('"10/second";q=10;w=1, "100/minute";q=100;w=60')
    # "open": each limit its own quota left, as in Node.
    opened = RedisPolicy(client, "10/second;100/minute", by=["user"], on_error="open").try_acquire({"user": "a"})
    assert [x.remaining for _, x in opened.limits] == [10, 100]
    # A fallback's wait is rounded up to the wire's µs, never down (1.0000004 s
    # became 1.0 and Retry-After 1, a second early).
    slower = ratekeeper.Gcra(1, 1.0000004, clock=lambda: 5.0)
    slow = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), on_error=slower)
    slow.try_acquire("k")
    denied = slow.try_acquire("k")
    assert not denied.allowed and denied.retry_after >= slower.peek(1).retry_after
    assert slow.headers(denied)["Retry-After"] == "2"


def test_refund_and_cancel_while_redis_is_unreachable_raise_nothing() -> None:
    client = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    limiter = RedisLimiter(client, ratekeeper.Gcra(2, 0.5), on_error="open")
    limiter.refund("k", 1)
    limiter.refund("k", 1, taken_at=time.time())
    reservation = limiter.reserve("k")
    assert reservation.ok and reservation.decision is None and not reservation.from_store
    reservation.cancel()

    # A booking the in-process fallback made is cancelled there.
    gcra = ratekeeper.Gcra(2, 3600)
    local = ratekeeper.KeyedLimiter(gcra)
    fallback = RedisLimiter(client, gcra, on_error=local)
    booked = fallback.reserve("k")
    assert booked.ok and local.peek("k", 0).remaining == 1
    booked.cancel()
    assert local.peek("k", 0).remaining == 2

    async def main() -> None:
        aclient = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        alimiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(2, 0.5), on_error="open")
        await alimiter.refund("k", 1)
        # Cancelled at any point, an acquire the fallback admitted takes nothing.
        afallback = AsyncRedisLimiter(aclient, gcra, on_error=local)
        for ticks in range(12):
            waiting = asyncio.ensure_future(afallback.acquire("k"))
            for _ in range(ticks):
                await asyncio.sleep(0)
            waiting.cancel()
            try:
                await waiting
            except asyncio.CancelledError:
                await given_back()  # raised at once, its booking given back meanwhile
                assert local.peek("k", 0).remaining == 2, ticks
            else:  # done before the cancel: it keeps its unit
                assert local.peek("k", 0).remaining == 1, ticks
                local.refund("k", 1)
        await aclient.aclose()

    asyncio.run(main())


def test_a_cancelled_fallback_booking_goes_back_to_the_window_it_was_taken_in() -> None:
    # A booking the in-process fallback made was given back by a refund at
    # the time of the cancel: cancelled in a later window, it freed a unit of
    # that window, which then let two requests through a limit of one.
    client = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
    aclient = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
    now = [1000.0]

    def clock() -> float:
        return now[0]

    def stores() -> list[tuple[Any, Any, Any]]:
        """(sync store, async store, target), each pair on a fallback of its
        own: a fixed window of one per 100 ms, on the fake clock."""
        out: list[tuple[Any, Any, Any]] = []
        window = ratekeeper.FixedWindow(1, 0.1, clock=clock)
        keyed = ratekeeper.KeyedLimiter(ratekeeper.FixedWindow(1, 0.1, clock=clock))
        fallbacks: list[Union[ratekeeper.Limiter, ratekeeper.KeyedLimiter]] = [window, keyed]
        for local in fallbacks:
            out.append(
                (
                    RedisLimiter(client, ratekeeper.Gcra(10, 1.0), on_error=local),
                    AsyncRedisLimiter(aclient, ratekeeper.Gcra(10, 1.0), on_error=local),
                    "k",
                )
            )
        policy = ratekeeper.Policy(clock=clock)
        policy.add("w", ratekeeper.FixedWindow(1, 0.1), by=["user"])
        out.append(
            (
                RedisPolicy(client, "10/second", by=["user"], on_error=policy),
                AsyncRedisPolicy(aclient, "10/second", by=["user"], on_error=policy),
                {"user": "u"},
            )
        )
        return out

    for i, (store, _, target) in enumerate(stores()):
        now[0] += 1.0  # a window of its own
        first = store.reserve(target, max_wait=0)
        assert (first.ok, first.from_store, first.decision) == (True, False, None)
        now[0] += 0.15  # the next window
        assert store.try_acquire(target).allowed
        first.cancel()  # its unit was the window before's
        denied = store.try_acquire(target)
        assert (denied.allowed, denied.from_store) == (False, False), i
        # Refused by the fallback: its decision, as before.
        refused = store.reserve(target, max_wait=0)
        assert (refused.ok, refused.from_store) == (False, False), i
        assert refused.decision is not None and refused.wait == refused.decision.retry_after > 0, i

    async def main() -> None:
        for _, astore, target in stores():
            now[0] += 1.0
            first = await astore.reserve(target, max_wait=0)
            assert (first.ok, first.from_store) == (True, False)
            now[0] += 0.15
            assert (await astore.try_acquire(target)).allowed
            await first.cancel()
            assert not (await astore.try_acquire(target)).allowed
        await aclient.aclose()

    asyncio.run(main())


def test_unnamed_limiters_of_different_configurations_never_share_a_key(client: redis.Redis) -> None:
    # Every in-process limiter is named "default" unless told: keyed by that,
    # a per-second and a per-window limiter read each other's state.
    prefix = f"unnamed:{uuid.uuid4().hex}:"
    gcra = RedisLimiter(client, ratekeeper.Gcra(10, 0.1), prefix=prefix)
    window = RedisLimiter(client, ratekeeper.FixedWindow(100, 1.0), prefix=prefix)
    log = RedisLimiter(client, ratekeeper.SlidingWindowLog(5, 1.0), prefix=prefix)
    assert [(d.allowed, d.remaining, d.from_store) for d in (gcra.try_acquire("alice"), window.try_acquire("alice"), log.try_acquire("alice"))] == [
        (True, 9, True),
        (True, 99, True),
        (True, 4, True),
    ]
    # Keyed by the configuration: the same one shares, as across processes.
    again = RedisLimiter(client, ratekeeper.Gcra(10, 0.1), prefix=prefix)
    assert again.try_acquire("alice").remaining == 8
    keys = sorted(k.decode() for k in client.scan_iter(match=prefix + "*"))
    assert keys == [
        prefix + "{5:alice}:14:gcra/10/100000:5:alice",
        prefix + "{5:alice}:24:fixed_window/100/1000000:5:alice",
        prefix + "{5:alice}:28:sliding_window_log/5/1000000:5:alice",
    ]
    # A name, the limiter's or given, is the key's: the headers keep the limiter's.
    named = RedisLimiter(client, ratekeeper.Gcra(10, 0.1, name="api"), prefix=prefix)
    assert named.try_acquire("bob").remaining == 9
    assert client.exists(prefix + "{3:bob}:3:api:3:bob")
    assert gcra.name == "default" and named.name == "api"


def test_a_caller_clock_of_any_origin_keeps_keys_until_fresh(client: redis.Redis) -> None:
    # A monotonic clock reads as 1970 in Unix time: keys set to expire at that
    # instant (PXAT) were gone as soon as written, and every request passed.
    prefix = f"mono:{uuid.uuid4().hex}:"
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 60.0), clock=time.monotonic, prefix=prefix)
    assert [limiter.try_acquire("k").allowed for _ in range(3)] == [True, False, False]
    key = next(client.scan_iter(match=prefix + "*"))
    assert 59_000 < client.pttl(key) <= 61_000, "expires a second after it is fresh, on the server's clock"
    small = RedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=prefix + "small:")
    assert [small.try_acquire("k", now=t).allowed for t in (1, 2, 3)] == [True, False, False]


@pytest.mark.parametrize(
    "limiter",
    [lambda: ratekeeper.Gcra(1, 0.00001), lambda: ratekeeper.TokenBucket(1, 1, 0.00001), lambda: ratekeeper.SlidingWindowLog(1, 0.00001)],
)
def test_a_caller_clock_stepping_back_after_a_key_is_fresh_is_judged_at_the_latest_time(
    client: redis.Redis, limiter: Callable[[], ratekeeper.Limiter]
) -> None:
    # The key was deleted as soon as its state was fresh, and with it the
    # latest time seen: a call 9 µs back was then decided in the past, and
    # 3 units went through in 11 µs where one every 10 µs may.
    remote = RedisLimiter(client, limiter(), prefix=f"back:{uuid.uuid4().hex}:")
    local = ratekeeper.KeyedLimiter(limiter())
    start = Fraction(1000)
    for step, cost in [(100, 1), (110, 0), (101, 1), (111, 1)]:
        now = start + Fraction(step, 1_000_000)
        expected = local.try_acquire("k", cost, now=now)
        got = remote.try_acquire("k", cost, now=now)
        assert (got.allowed, got.remaining) == (expected.allowed, expected.remaining), step


def test_an_empty_prefix_is_refused(client: redis.Redis) -> None:
    # A policy with a global limit is tagged by its prefix; Redis reads {} as no tag.
    with pytest.raises(ratekeeper.RateLimitError, match="^`prefix` must not be empty "):
        RedisPolicy(client, POLICY, prefix="")
    with pytest.raises(ratekeeper.RateLimitError, match="^`prefix` must not be empty "):
        RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix="")


def test_a_cluster_that_cannot_be_reached_takes_on_error(url: str) -> None:
    # RedisCluster raises RedisClusterException when no node answers, which
    # derives from neither RedisError nor OSError.
    class Unreachable(redis.Redis):
        def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            raise redis.exceptions.RedisClusterException("Redis Cluster cannot be connected")

        def eval(self, *args: Any, **kwargs: Any) -> Any:
            raise redis.exceptions.RedisClusterException("Redis Cluster cannot be connected")

    client = Unreachable.from_url(url)
    opened = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), on_error="open")
    d = opened.try_acquire("k")
    assert d.allowed and not d.from_store
    closed = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), on_error="closed")
    d = closed.try_acquire("k")
    assert not d.allowed and not d.from_store


async def _used_after_cancelling_once_answered(
    limiter: Any, call: Callable[[], Awaitable[object]], target: Any, now: float
) -> int:
    """Runs ``call`` with ``limiter``'s script calls answering 0.2 s after
    Redis has, cancels it once Redis has decided, and returns the units
    still used in ``target``'s limit once what was taken could be given back
    (0 when it was)."""
    real = limiter._call
    answered = asyncio.Event()

    async def slow(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
        reply = await real(keys, args, *rest)
        answered.set()
        await asyncio.sleep(0.2)
        return reply

    limiter._call = slow
    task = asyncio.ensure_future(call())
    await answered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    limiter._call = real
    for _ in range(100):
        await asyncio.sleep(0.01)
        left = await limiter.peek(target, 0, now=now)
        used = int(left.limit - left.remaining)
        if used == 0:
            break
    return used


@pytest.mark.parametrize("call", ["unbatched", "now", "batch"])
def test_an_async_caller_cancelled_during_its_own_round_trip_gives_back_what_redis_took(url: str, call: str) -> None:
    # A call that goes alone (no batching, an explicit now, try_acquire_batch)
    # awaited the script in the caller's own task: cancelled once Redis had
    # taken, nothing was given back.
    async def main() -> int:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(
            client, ratekeeper.FixedWindow(100, 3600), prefix=f"rk-py-alone:{uuid.uuid4().hex}:", batching=call != "unbatched"
        )
        now = time.time()
        await limiter.peek("k", 0, now=now)  # the script is loaded
        if call == "batch":
            used = await _used_after_cancelling_once_answered(limiter, lambda: limiter.try_acquire_batch("k", [2, 3], now=now), "k", now)
        else:
            at = now if call == "now" else None
            used = await _used_after_cancelling_once_answered(limiter, lambda: limiter.try_acquire("k", 5, now=at), "k", now)
        await client.aclose()
        return used

    assert asyncio.run(main()) == 0


@pytest.mark.parametrize("kind", ["limiter", "policy"])
def test_an_async_reserve_cancelled_during_its_round_trip_gives_back_what_redis_booked(url: str, kind: str) -> None:
    # reserve awaited the script in the caller's own task: cancelled once
    # Redis had booked (asyncio.wait_for's timeout, say), the booking was
    # nobody's to cancel and held its units until its slot had passed.
    async def main() -> int:
        client = redis.asyncio.Redis.from_url(url)
        prefix = f"rk-py-reserve:{uuid.uuid4().hex}:"
        limiter: Union[AsyncRedisLimiter, AsyncRedisPolicy]
        if kind == "limiter":
            limiter = AsyncRedisLimiter(client, ratekeeper.FixedWindow(100, 3600), prefix=prefix)
        else:
            limiter = AsyncRedisPolicy(client, "100/hour", algorithm="fixed_window", by=["key"], prefix=prefix)
        target: Any = "k" if kind == "limiter" else {"key": "k"}
        now = time.time()
        await limiter.peek(target, 0, now=now)  # the script is loaded
        used = await _used_after_cancelling_once_answered(limiter, lambda: limiter.reserve(target, 5, now=now), target, now)
        await client.aclose()
        return used

    assert asyncio.run(main()) == 0


def test_a_cancelled_async_try_acquire_gives_back_what_redis_took(url: str) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=f"cancel:{uuid.uuid4().hex}:")
        task = asyncio.ensure_future(limiter.try_acquire("k"))
        await asyncio.sleep(0)  # sent: the batch is in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Nobody was admitted: the next caller is.
        assert (await limiter.try_acquire("k")).allowed
        assert not (await limiter.try_acquire("k")).allowed
        await client.aclose()

    asyncio.run(main())


def test_a_cancelled_async_try_acquire_whose_call_then_failed_reports_nothing(url: str) -> None:
    # Alone (batching=False), the call runs on in a task of its own once its
    # caller is cancelled, and what it took is given back when it ends. Ended
    # by an error (the script refusing it), it took nothing, and nothing is
    # read: its result read all the same, the loop would report the error as
    # an exception in a callback, where nobody asked for it.
    async def main() -> list[dict[str, Any]]:
        reported: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=f"cancel-failed:{uuid.uuid4().hex}:", batching=False)
        task: Optional[asyncio.Future[Any]] = None

        async def refused(keys: list[bytes], args: list[str | int], *rest: Any) -> Any:
            assert task is not None
            task.cancel()  # the caller leaves while the call is under way
            await asyncio.sleep(0)
            raise ScriptError("ratekeeper: protocol version 2 is not 1")

        limiter._call = refused  # type: ignore[method-assign]
        task = asyncio.ensure_future(limiter.try_acquire("k"))
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(5):
            await asyncio.sleep(0)
        await client.aclose()
        return reported

    assert asyncio.run(main()) == []


def test_an_async_acquire_cancelled_while_it_sleeps_raises_its_cancellation_whatever_the_give_back_meets(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A give-back that fails (Redis gone meanwhile) must not replace the
    # CancelledError the caller's task expects.
    async def failing_cancel(self: Any) -> None:
        raise redis.exceptions.ConnectionError("gone")

    # (A waiting acquire's give-back, which is a cancel() guarded to the latest booking.)
    monkeypatch.setattr(ratekeeper.redis.AsyncRedisReservation, "_give_back", failing_cancel)

    async def main() -> None:
        client = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=f"cancel-sleep:{uuid.uuid4().hex}:")
        assert (await limiter.try_acquire("k")).allowed
        task = asyncio.ensure_future(limiter.acquire("k"))
        await asyncio.sleep(0.2)  # booked: sleeping until its slot, a minute on
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await given_back()  # raised at once, whatever its give-back (in a task of its own) meets
        await client.aclose()

    asyncio.run(main())


def test_the_readme_redis_examples_run(url: str) -> None:
    # The Redis examples of the Python README and the repository's, as
    # written (doc_examples.py reads them and checks what their comments
    # state), their clients pointed at the test server (they name none:
    # localhost:6379).
    from doc_examples import Block, blocks, needs_redis, run

    def examples(path: str) -> list[Block]:
        found = [block for block in blocks(path, "python") if needs_redis(block)]
        assert len(found) == 1, path
        return found

    clients = {
        "redis.Redis(socket": "redis.Redis.from_url(URL, socket",
        "redis.Redis()": "redis.Redis.from_url(URL)",
        "redis.asyncio.Redis()": "ASYNC_CLIENT",
    }

    def pointed(block: Block) -> str:
        source = block.source
        for written, test_server in clients.items():
            source = source.replace(written, test_server)
        assert "redis.Redis(" not in source and "redis.asyncio.Redis(" not in source, source
        return source

    names: dict[str, Any] = {"URL": url}
    repository: dict[str, Any] = {"URL": url}

    async def main() -> None:
        names["ASYNC_CLIENT"] = redis.asyncio.Redis.from_url(url)
        try:
            await run(examples("bindings-python/README.md"), names, pointed)
            await run(examples("README.md"), repository, pointed)
        finally:
            await names["ASYNC_CLIENT"].aclose()
            names["r"].close()

    asyncio.run(main())
    assert names["d"].from_store and names["d"].allowed
    assert repository["per_user"].peek("user:42").from_store


def test_reset_puts_a_key_back_to_fresh_in_redis_and_in_a_keyed_fallback(client: redis.Redis, url: str) -> None:
    fallback = ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 60.0))
    limiter = RedisLimiter(client, ratekeeper.Gcra(2, 60.0), name="login", prefix="reset:", on_error=fallback)
    assert limiter.reset("alice") is False  # never seen: Redis holds nothing
    for key in ("alice", "bob"):
        assert limiter.try_acquire(key, 2, now=1000).allowed
    fallback.try_acquire("alice")
    assert limiter.reset(b"alice") is True  # its bytes: the same key
    fresh = limiter.peek("alice", 2, now=1000)
    assert (fresh.allowed, fresh.remaining, fresh.from_store) == (True, 0, True)
    assert not limiter.peek("bob", 1, now=1000).allowed  # another key keeps what it used
    assert fallback.peek("alice").allowed  # the fallback forgot the key too
    with pytest.raises(ratekeeper.RateLimitTypeError):
        limiter.reset(1.5)  # type: ignore[arg-type]

    async def main() -> tuple[bool, bool]:
        aclient = redis.asyncio.Redis.from_url(url)
        try:
            alimiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(2, 60.0), name="login", prefix="reset:")
            await alimiter.try_acquire("carol", 2, now=1000)
            return await alimiter.reset("carol"), (await alimiter.peek("carol", 2, now=1000)).allowed
        finally:
            await aclient.aclose()

    assert asyncio.run(main()) == (True, True)


def test_policy_reset_clears_the_limits_keyed_by_fields_the_request_gives_in_redis_and_a_fallback(
    client: redis.Redis, url: str
) -> None:
    fallback = ratekeeper.Policy()
    fallback.add("per-user", ratekeeper.Gcra(1, 60.0), by=["user"])
    limits: list[tuple[str, Any, list[str]]] = [
        ("per-user", ratekeeper.Gcra(1, 60.0), ["user"]),
        ("per-ip", ratekeeper.Gcra(1, 60.0), ["ip"]),
        ("per-user-ip", ratekeeper.Gcra(1, 60.0), ["user", "ip"]),
        ("global", ratekeeper.FixedWindow(10, 60.0), []),
    ]
    prefix = f"policy-reset-{uuid.uuid4().hex}:"
    policy = RedisPolicy(client, limits, prefix=prefix, on_error=fallback)
    attempt = {"user": "alice", "ip": "192.0.2.1", "path": "/login"}
    assert policy.try_acquire(attempt, now=1000).allowed
    fallback.try_acquire({"user": "alice"})

    assert policy.reset({"user": "alice"}) == 1  # the user's limit only: the others need the IP
    peeked = policy.peek(attempt, now=1000)
    assert peeked.denied_by == "per-ip" and peeked.limits[0][1].remaining == 1
    assert fallback.peek({"user": "alice"}).allowed  # the fallback forgot the user too
    assert policy.reset({"user": b"alice"}) == 0  # held no more (its bytes: the same key)
    assert policy.reset(attempt) == 2  # every keyed limit the request was counted in
    peeked = policy.peek(attempt, now=1000)
    assert peeked.allowed and peeked.limits[3][1].remaining == 8  # the global window keeps its count (1 counted, 1 asked)
    for nothing in ({}, None, {"usr": "alice"}, {"path": "/login"}):
        with pytest.raises(ratekeeper.RateLimitError, match="resets none") as raised:
            policy.reset(nothing)
        assert raised.value.code == "invalid_value"
    with pytest.raises(ratekeeper.RateLimitTypeError, match="`request`"):
        policy.reset("alice")  # type: ignore[arg-type]
    assert policy.try_acquire(attempt, now=1000).allowed
    assert policy.reset({"user": "bob", "ip": "192.0.2.2"}) == 0  # another user's: alice's kept
    assert policy.peek(attempt, now=1000).denied_by == "per-user"

    async def main() -> tuple[int, bool]:
        aclient = redis.asyncio.Redis.from_url(url)
        try:
            apolicy = AsyncRedisPolicy(aclient, limits, prefix=prefix)
            return await apolicy.reset(attempt), (await apolicy.peek(attempt, now=1000)).allowed
        finally:
            await aclient.aclose()

    assert asyncio.run(main()) == (3, True)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_on_error_answers_for_redis_as_it_decided(asynchronous: bool) -> None:
    # "open": every limit untouched (its whole limit remaining); "closed":
    # none left, a second to wait; a reservation not booked is at its wait
    # from now, as one Redis refused. A policy's in-process Limiter (no
    # limit names of its own) denying: the first limit is named, as the
    # Node client names it, never None beside a denial.
    window = ratekeeper.FixedWindow(5, 60.0)

    def two_limits() -> list[tuple[str, Any, list[str]]]:
        return [("a", window, ["user"]), ("b", ratekeeper.FixedWindow(9, 60.0), [])]

    async def main() -> tuple[Any, Any, Any]:
        aclient = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        try:
            opened = await AsyncRedisLimiter(aclient, window, on_error="open").try_acquire("k")
            closed = AsyncRedisLimiter(aclient, window, on_error="closed")
            before = time.time()
            refused = await closed.reserve("k", max_wait=0)
            after = time.time()
            policy = AsyncRedisPolicy(aclient, two_limits(), on_error=ratekeeper.Gcra(1, 60.0))
            decisions = [await policy.try_acquire({"user": "u"}) for _ in range(2)]
            return opened, (before, refused, after), decisions
        finally:
            await aclient.aclose()

    if asynchronous:
        opened, (before, refused, after), decisions = asyncio.run(main())
    else:
        client = redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY)
        opened = RedisLimiter(client, window, on_error="open").try_acquire("k")
        closed = RedisLimiter(client, window, on_error="closed")
        before = time.time()
        refused = closed.reserve("k", max_wait=0)
        after = time.time()
        policy = RedisPolicy(client, two_limits(), on_error=ratekeeper.Gcra(1, 60.0))
        decisions = [policy.try_acquire({"user": "u"}) for _ in range(2)]
    assert opened.allowed and not opened.from_store and opened.remaining == opened.limit == 5
    assert not refused.ok and not refused.from_store and refused.wait == 1.0
    assert before + 1.0 <= refused.at <= after + 1.0
    assert [(d.allowed, d.denied_by) for d in decisions] == [(True, None), (False, "a")]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_peek_while_redis_is_unreachable_takes_nothing_from_the_fallback(asynchronous: bool) -> None:
    # A peek the in-process fallback answers is its peek: taken there, it
    # spent the unit it only looked at.
    fallback = ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 60.0))

    async def main() -> list[bool]:
        aclient = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 60.0), on_error=fallback)
        try:
            return [(await limiter.peek("k")).allowed for _ in range(2)]
        finally:
            await aclient.aclose()

    if asynchronous:
        peeked = asyncio.run(main())
    else:
        limiter = RedisLimiter(redis.Redis(port=1, socket_connect_timeout=0.2, retry=NO_RETRY), ratekeeper.Gcra(1, 60.0), on_error=fallback)
        peeked = [limiter.peek("k").allowed for _ in range(2)]
    assert peeked == [True, True]
    assert fallback.try_acquire("k").allowed


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_hot_keys_queue_ends_with_its_last_round_trip(url: str, asynchronous: bool) -> None:
    # As the Node client's: calls on many keys leave no queue behind (kept,
    # each key ever used held one, and the memory grew with the keys).
    prefix = f"rk-py-queues:{uuid.uuid4().hex}:"

    async def main() -> int:
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(10, 1.0), prefix=prefix)
        for i in range(0, 200, 50):
            decisions = await asyncio.gather(*(limiter.try_acquire(f"key-{j}") for j in range(i, i + 50)))
            assert all(d.allowed and d.from_store for d in decisions)
        await aclient.aclose()
        return len(limiter._queues)

    if asynchronous:
        left = asyncio.run(main())
    else:
        client = redis.Redis.from_url(url)
        limiter = RedisLimiter(client, ratekeeper.Gcra(10, 1.0), prefix=prefix)
        threads = [threading.Thread(target=lambda i=i: [limiter.try_acquire(f"key-{i}-{j}") for j in range(20)]) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        client.close()
        left = len(limiter._queues)
    assert left == 0


def test_a_caller_after_a_round_trip_redis_did_not_answer_asks_redis(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # The callers gathered behind a round trip Redis did not answer are
    # decided by on_error at once; one that comes once it has failed asks
    # Redis (back by then), even while those are still in their calls: it
    # joined their batch, answered already, and on_error decided for it too.
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(100, 3600), on_error="open", prefix=f"rk-py-after-down:{uuid.uuid4().hex}:")
    assert limiter.peek("k", 0).from_store  # the script is loaded
    call = limiter._call
    queued, woken, release = threading.Event(), threading.Event(), threading.Event()

    def down_once(keys: list[bytes], args: list[Any]) -> Any:
        if threading.current_thread().name == "first":
            assert queued.wait(5)  # 'held' waits behind this round trip
            raise redis.ConnectionError("Redis went away")
        return call(keys, args)

    class Held:
        """'held''s wake-up: once woken (its batch answered by on_error), it stays in its call until released."""

        def __init__(self, wake: Any) -> None:
            self.wake = wake

        def wait(self, timeout: Optional[float] = None) -> bool:
            if threading.current_thread().name != "held":
                return self.wake.wait(timeout)  # type: ignore[no-any-return]
            queued.set()
            if self.wake.wait(5):
                woken.set()
                release.wait(5)
                return True
            return False

        def set(self) -> None:
            self.wake.set()

    class Slot(ratekeeper.redis._sync._Slot):
        def __init__(self, cost: int, target: Any) -> None:
            super().__init__(cost, target)
            self.event = Held(self.event)  # type: ignore[assignment]

    monkeypatch.setattr(ratekeeper.redis._sync, "_Slot", Slot)
    limiter._call = down_once  # type: ignore[method-assign]
    out: dict[str, RedisDecision] = {}
    first = threading.Thread(target=lambda: out.setdefault("first", limiter.try_acquire("k")), name="first")
    first.start()
    while not limiter._queues.get((limiter._keys("k")[0],)):
        time.sleep(0.01)  # 'first' sends
    held = threading.Thread(target=lambda: out.setdefault("held", limiter.try_acquire("k")), name="held")
    held.start()
    try:
        assert woken.wait(5)
        after = limiter.try_acquire("k")
    finally:
        release.set()
        first.join(5)
        held.join(5)
    assert [(d.allowed, d.from_store) for d in (out["first"], out["held"])] == [(True, False)] * 2
    assert after.allowed and after.from_store


def test_async_callers_queued_behind_a_round_trip_redis_did_not_answer_are_decided_though_one_left() -> None:
    # One of the callers queued meanwhile cancelled: it has its answer
    # (cancelled) already; the others are decided by on_error all the same.
    async def main() -> list[RedisDecision]:
        aclient = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=ASYNC_NO_RETRY)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.FixedWindow(100, 3600), on_error="open")
        gate = asyncio.Event()

        async def down(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            await gate.wait()
            raise redis.ConnectionError("Redis went away")

        limiter._call = down  # type: ignore[method-assign]
        first = asyncio.ensure_future(limiter.try_acquire("k"))
        await asyncio.sleep(0)  # its round trip under way
        gone, third = asyncio.ensure_future(limiter.try_acquire("k")), asyncio.ensure_future(limiter.try_acquire("k"))
        await asyncio.sleep(0)  # both queued behind it
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        gate.set()
        try:
            return list(await asyncio.wait_for(asyncio.gather(first, third), 5))
        finally:
            await aclient.aclose()

    assert [(d.allowed, d.from_store) for d in asyncio.run(main())] == [(True, False)] * 2


def test_a_batched_caller_cancelled_while_the_script_is_reloaded_leaves_the_round_trip_to_the_others(url: str) -> None:
    # Only once every caller of a batch has left does a reload send nothing
    # more: with one still there, the batch goes on, and it has its answer.
    class FlushedBeforeTheSecond(AsyncHolding):
        async def evalsha(self, *args: Any, **kwargs: Any) -> Any:
            if len(self.sent) == 1:
                await self.script_flush()  # (another process's) before the batch behind the first goes
            return await super().evalsha(*args, **kwargs)

    async def main() -> tuple[RedisDecision, list[str]]:
        client = FlushedBeforeTheSecond.from_url(url)
        assert isinstance(client, FlushedBeforeTheSecond)
        client.sent, client.hold, client.flush = [], 0, False
        client.holding, client.release = asyncio.Event(), asyncio.Event()
        limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(5, 60.0), prefix=f"rk-py-reload-one-gone:{uuid.uuid4().hex}:", on_error="open")
        assert (await limiter.peek("k", 0)).from_store  # the script is loaded
        client.sent, client.hold = [], 2
        first = asyncio.ensure_future(limiter.try_acquire("k"))
        await asyncio.sleep(0)  # its round trip under way: the two below queue behind it, one batch
        gone, staying = asyncio.ensure_future(limiter.try_acquire("k")), asyncio.ensure_future(limiter.try_acquire("k"))
        await client.holding.wait()  # the batch of both, its EVALSHA about to meet NOSCRIPT
        gone.cancel()
        client.release.set()
        with pytest.raises(asyncio.CancelledError):
            await gone
        try:
            assert (await first).from_store
            return await asyncio.wait_for(staying, 5), list(client.sent)
        finally:
            await client.aclose()

    answer, sent = asyncio.run(main())
    assert answer.allowed and answer.from_store
    # The first caller's; the batch's, meeting NOSCRIPT, the reload, the
    # batch's again; the give-back of the unit taken for the one that left.
    assert sent == ["EVALSHA", "EVALSHA", "SCRIPT LOAD", "EVALSHA", "EVALSHA"]


def test_a_policy_reset_leaves_a_fallback_policy_it_reaches_no_limit_of_as_it_is(client: redis.Redis) -> None:
    # The fallback keyed by other fields than the request gives: its reset
    # would reset none of its limits, which Policy.reset refuses.
    # Mid-window on a clock of its own (its default clock's window could end during the test).
    fallback = ratekeeper.Policy(clock=lambda: 30.0)
    fallback.add("per-ip", ratekeeper.KeyedLimiter(ratekeeper.FixedWindow(1, 60.0)), by=["ip"])
    assert fallback.try_acquire({"ip": "192.0.2.1"}).allowed
    limits: list[tuple[str, Any, list[str]]] = [("per-user", ratekeeper.Gcra(1, 60.0), ["user"])]
    policy = RedisPolicy(client, limits, prefix=f"rk-py-reset-other:{uuid.uuid4().hex}:", on_error=fallback)
    assert policy.try_acquire({"user": "alice", "ip": "192.0.2.1"}, now=1000).allowed
    assert policy.reset({"user": "alice"}) == 1
    assert not fallback.peek({"ip": "192.0.2.1"}).allowed


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_reservation_of_nothing_sends_nothing_when_cancelled(url: str, asynchronous: bool) -> None:
    # Booked, zero units hold nothing to give back: as the Node client's, no refund goes.
    prefix = f"rk-py-zero:{uuid.uuid4().hex}:"

    async def main() -> list[str]:
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 60.0), prefix=prefix)
        sent: list[str] = []
        call = limiter._call

        async def counted(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            sent.append(args[1])
            return await call(keys, args, *rest)

        limiter._call = counted  # type: ignore[method-assign]
        booked = await limiter.reserve("k", 0)
        assert booked.ok
        await booked.cancel()
        await aclient.aclose()
        return sent

    if asynchronous:
        sent = asyncio.run(main())
    else:
        client = redis.Redis.from_url(url)
        limiter = RedisLimiter(client, ratekeeper.Gcra(1, 60.0), prefix=prefix)
        sent = []
        call = limiter._call

        def counted(keys: list[bytes], args: list[Any]) -> Any:
            sent.append(args[1])
            return call(keys, args)

        limiter._call = counted  # type: ignore[method-assign]
        booked = limiter.reserve("k", 0)
        assert booked.ok
        booked.cancel()
        client.close()
    assert sent == ["reserve"]
