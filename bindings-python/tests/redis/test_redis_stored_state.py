"""What the script makes of a key's stored value that the limit's current
configuration did not write: a named limit keeps its keys when its
configuration changes (a deploy), and a key may hold what another program
wrote."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Optional, Union

import pytest
import redis
from redis_fixtures import client, url

import ratekeeper
from ratekeeper._ratekeeper import REDIS_SCRIPT
from ratekeeper.redis import RedisLimiter, RedisPolicy, ScriptError


def test_a_bucket_that_gained_a_band_keeps_its_bands_and_starts_the_new_one_full(client: redis.Redis) -> None:
    # The old state was read with its one band, the new band never
    # consulted, and written back: 600 in a minute where the new limits admit 23.
    per_minute = ratekeeper.Bandwidth(12, 12, 60.0)
    two = ratekeeper.TokenBucket.from_bandwidths([ratekeeper.Bandwidth(10, 10, 1.0), per_minute])
    old = RedisLimiter(client, ratekeeper.TokenBucket(10, 10, 1.0), name="api", prefix="stored:")
    for _ in range(10):
        assert old.try_acquire("k", 1, now=1000).allowed
    new = RedisLimiter(client, two, name="api", prefix="stored:")
    # What the new limits make of it: the per-second band as it was (empty
    # at 1000), the per-minute one full.
    emptied = ratekeeper.Bandwidth(10, 10, 1.0, initial_tokens=0)
    local = ratekeeper.TokenBucket.from_bandwidths([emptied, per_minute])
    admitted = 0
    for second in range(1000, 1061):
        for _ in range(10):
            expected = local.try_acquire(1, now=second)
            got = new.try_acquire("k", 1, now=second)
            assert (got.allowed, got.remaining) == (expected.allowed, expected.remaining), second
            admitted += got.allowed
    assert admitted == 23


# A day long, the window's index is 0; 100 µs long, 10^7, which a GCRA
# reading the first two of its four fields took for 10 s in use: denied.
@pytest.mark.parametrize("window", [86400, Fraction(1, 10_000)], ids=["day", "100us"])
def test_a_limit_whose_algorithm_changed_under_its_name_starts_fresh(
    client: redis.Redis, window: Union[int, Fraction]
) -> None:
    window_limiter = RedisLimiter(client, ratekeeper.FixedWindow(5, window), name="api", prefix="stored:")
    for _ in range(5):
        assert window_limiter.try_acquire("k", 1, now=1000).allowed
    # The window's fields read as a GCRA's denied for days.
    gcra = RedisLimiter(client, ratekeeper.Gcra(5, 1.0), name="api", prefix="stored:")
    d = gcra.try_acquire("k", 1, now=1001)
    assert d.allowed and d.from_store and d.remaining == 4


def test_a_gcra_whose_interval_changed_reads_its_used_time_at_the_new_interval(client: redis.Redis) -> None:
    # As PROTOCOL.md says (the core's reconfigure carries units instead):
    # made slower, the 10 units used at 1 ms each read as 0.01 s of a 1 s
    # interval, and 9 more go at once; made faster again, the 9 s used read
    # as 9,000 units of 1 ms, waited out as the slower rate had it.
    fast = RedisLimiter(client, ratekeeper.Gcra(10, 0.001), name="api", prefix="interval:")
    assert sum(fast.try_acquire("k", 1, now=1000).allowed for _ in range(12)) == 10
    slow = RedisLimiter(client, ratekeeper.Gcra(10, 1.0), name="api", prefix="interval:")
    assert sum(slow.try_acquire("k", 1, now=1000).allowed for _ in range(12)) == 9
    denied = fast.try_acquire("k", 1, now=1000)
    assert not denied.allowed and denied.from_store
    assert denied.retry_after == pytest.approx(9.01 - 0.009)


def test_a_window_of_another_length_counts_afresh(client: redis.Redis) -> None:
    minute = RedisLimiter(client, ratekeeper.FixedWindow(10, 60), name="w", prefix="length:")
    assert sum(minute.try_acquire("k", 1, now=1_700_000_000).allowed for _ in range(12)) == 10
    longer = RedisLimiter(client, ratekeeper.FixedWindow(10, 120), name="w", prefix="length:")
    assert sum(longer.try_acquire("k", 1, now=1_700_000_001).allowed for _ in range(12)) == 10


@pytest.mark.parametrize("value", [b"1e3 5", b"nan 5", b"inf 0", b"0x10 5", b"1000 5.5", b"{} 5"])
def test_a_value_the_script_did_not_write_is_an_error(client: redis.Redis, value: bytes) -> None:
    # Read as numbers, they were decided on (1e3, 0x10, 5.5), or failed only
    # at the write, which the client took for Redis being down.
    limiter = RedisLimiter(client, ratekeeper.Gcra(10, 0.001), name="api", prefix="stored:")
    assert limiter.try_acquire("k", 1, now=1000).allowed
    (key,) = client.keys("stored:*")
    client.set(key, value)
    with pytest.raises(ScriptError, match="did not write"):
        limiter.try_acquire("k", 1, now=1001)


@pytest.mark.parametrize("window", [ratekeeper.FixedWindow, ratekeeper.SlidingWindowCounter])
def test_a_window_whose_limit_was_lowered_never_answers_a_negative_remaining(
    client: redis.Redis, window: Callable[[int, int], ratekeeper.Limiter]
) -> None:
    # The count kept under the name is above the new limit: as the core's
    # reconfigure, which cuts it to the limit, nothing is left, never -7.
    old = RedisLimiter(client, window(10, 86400), name="api", prefix="lowered:")
    for _ in range(10):
        assert old.try_acquire("k", 1, now=1000).allowed
    new = RedisLimiter(client, window(3, 86400), name="api", prefix="lowered:")
    denied = new.try_acquire("k", 1, now=1001)
    assert not denied.allowed and denied.from_store
    assert denied.remaining == 0
    assert new.peek("k", 0, now=1001).remaining == 0


STRING_LIMITERS: dict[str, Callable[[], ratekeeper.Limiter]] = {
    "gcra": lambda: ratekeeper.Gcra(10, 0.001),
    "token_bucket": lambda: ratekeeper.TokenBucket(10, 10, 1.0),
    "fixed_window": lambda: ratekeeper.FixedWindow(10, 60),
    "sliding_window_counter": lambda: ratekeeper.SlidingWindowCounter(10, 60),
}


@pytest.mark.parametrize("algorithm", STRING_LIMITERS)
@pytest.mark.parametrize("number", [b"9007199254740992", b"99999999999999999999999", b"1" + b"0" * 400])
def test_a_number_past_2_53_the_script_did_not_write_is_its_error_not_an_outage(
    client: redis.Redis, algorithm: str, number: bytes
) -> None:
    # Read as a double, 1e23 (or inf) made a TTL Redis refused: "value is not
    # an integer", an error the clients took for Redis out of reach, and
    # on_error="open" admitted everything. Below that, a time past 2^53 was
    # decided on inexactly.
    limiter = RedisLimiter(client, STRING_LIMITERS[algorithm](), name="api", prefix="huge:", on_error="open")
    assert limiter.try_acquire("k", 1, now=1000).allowed
    (key,) = client.keys("huge:*")
    stored = client.get(key)
    assert stored is not None
    fields = stored.split()
    client.set(key, b" ".join([number, *fields[1:]]))
    with pytest.raises(ScriptError, match="did not write"):
        limiter.try_acquire("k", 1, now=1001)


@pytest.mark.parametrize(
    "members",
    [
        {b"latest:1000000000": -3, b"99999999999999999999:1": 1e20},
        {b"latest:99999999999999999999": -3, b"1000000000:1": 1e9},
        {b"latest:1000000000": -1e300, b"1000000000:1": 1e9},
        {b"latest:1000000000": -3, b"1000000000:9007199254740992": 1e9},
        {b"latest:1000000000": -3, b"1000000000:x": 1e9},
        {b"latest:x": -3},
    ],
)
def test_a_log_entry_the_script_did_not_write_is_its_error(client: redis.Redis, members: dict[bytes, float]) -> None:
    # A huge instant came back as a negative wait (past 2^63), which the
    # client refused as `retry_after must not be negative`; a word Lua failed on.
    limiter = RedisLimiter(client, ratekeeper.SlidingWindowLog(10, 60), name="log", prefix="huge-log:", on_error="open")
    assert limiter.try_acquire("k", 1, now=1000).allowed
    (key,) = client.keys("huge-log:*")
    client.delete(key)
    client.zadd(key, members)
    with pytest.raises(ScriptError, match="did not write"):
        limiter.try_acquire("k", 1, now=1001)


@pytest.mark.parametrize(
    ("algorithm", "value"),
    [
        # Its latest time ahead, a negative use left room without end.
        ("gcra", b"2000000000 -500000000"),
        ("fixed_window", b"1001000000 16 -50 0"),
        ("sliding_window_counter", b"1001000000 16 -50 0 0"),
        ("sliding_window_counter", b"1001000000 16 0 -50 0"),
    ],
)
def test_a_negative_number_where_the_script_writes_none_starts_the_key_fresh(
    client: redis.Redis, algorithm: str, value: bytes
) -> None:
    limiter = RedisLimiter(client, STRING_LIMITERS[algorithm](), name="api", prefix="negative:")
    assert limiter.try_acquire("k", 1, now=1000).allowed
    (key,) = client.keys("negative:*")
    client.set(key, value)
    decisions = [limiter.try_acquire("k", 1, now=1001) for _ in range(30)]
    # A fresh limit's 10: a negative use or count admitted all 30, a
    # negative previous count denied all.
    assert sum(d.allowed for d in decisions) == 10
    assert all(d.from_store for d in decisions)


def test_a_bucket_whose_stored_time_is_negative_starts_fresh(client: redis.Redis) -> None:
    # Only a bucket's bands are written negative (a debt), never its time:
    # decided on, the band emptied at -1000 s had refilled 2001 s of a day's
    # token by 1001 s, and nothing was admitted.
    limiter = RedisLimiter(client, ratekeeper.TokenBucket(10, 1, 86400.0), name="api", prefix="negative:")
    assert limiter.try_acquire("k", 1, now=1000).allowed
    (key,) = client.keys("negative:*")
    client.set(key, b"-1000000000 0 0")
    assert sum(limiter.try_acquire("k", 1, now=1001).allowed for _ in range(12)) == 10


def _state(client: redis.Redis, key: Any) -> bytes:
    """The state a string key holds, without the key's birth that follows it
    (a negative number: PROTOCOL.md)."""
    stored = client.get(key)
    assert isinstance(stored, bytes)
    state, birth = stored.rsplit(b" ", 1)
    assert birth.startswith(b"-")
    return state


@pytest.mark.parametrize(
    ("capacity", "refill", "tokens"),
    [
        (5, 1, 5),  # the capacity lowered to the 5 tokens held: a full band, which accrues nothing
        (10, 2, 4),  # twice the rate: half a token of 1 s is a whole one of 0.5 s, not a part of one
    ],
)
def test_a_partial_token_that_does_not_fit_the_new_band_restarts(
    client: redis.Redis, capacity: int, refill: int, tokens: int
) -> None:
    # Written with half of its next token refilled (500000 µs of a 1 s
    # period), the band is read by the new configuration as `tokens` and no
    # fraction: kept, the tokens taken next came back 0.5 s early.
    old = RedisLimiter(client, ratekeeper.TokenBucket(10, 1, 1.0), name="api", prefix="carry:")
    assert old.try_acquire("k", 10 - tokens, now=1000).allowed
    assert old.try_acquire("k", 0, now=1000.5).allowed
    (key,) = client.keys("carry:*")
    assert _state(client, key) == f"1000500000 {tokens} 500000".encode()
    new = RedisLimiter(client, ratekeeper.TokenBucket(capacity, refill, 1.0), name="api", prefix="carry:")
    local = ratekeeper.TokenBucket.from_bandwidths([ratekeeper.Bandwidth(capacity, refill, 1.0, initial_tokens=tokens)])
    for _ in range(3):
        expected, got = local.try_acquire(1, now=1000.5), new.try_acquire("k", 1, now=1000.5)
        assert (got.allowed, got.remaining, got.retry_after, got.reset_after) == (
            expected.allowed,
            expected.remaining,
            expected.retry_after,
            expected.reset_after,
        )


def test_a_refund_that_fills_a_band_stores_it_without_a_partial_token(client: redis.Redis) -> None:
    # As the core's: a full band accrues nothing, so the fraction of the next
    # token it held goes (the script's load drops it too; a reader of the
    # key, or a load that kept it, would see a token due early).
    limiter = RedisLimiter(client, ratekeeper.TokenBucket(2, 1, 0.001), prefix="refill:")
    assert limiter.try_acquire("k", 2, now=1000).allowed
    assert limiter.try_acquire("k", 0, now=1000.0015).allowed
    (key,) = client.keys("refill:*")
    assert _state(client, key) == b"1000001500 1 500"
    limiter.refund("k", 1)
    assert _state(client, key) == b"1000001500 2 0"


def test_a_refund_to_a_bucket_whose_key_holds_another_algorithms_state_gives_nothing_back(client: redis.Redis) -> None:
    # The state of another shape is none, a fresh bucket, which has no time:
    # writing it failed the script (`format` of nil), raised as ScriptError.
    gcra = RedisLimiter(client, ratekeeper.Gcra(5, 1.0), name="api", prefix="reshaped:")
    assert gcra.try_acquire("k", 1, now=1000).allowed
    (key,) = client.keys("reshaped:*")
    written = client.get(key)
    bucket = RedisLimiter(client, ratekeeper.TokenBucket(5, 1, 1.0), name="api", prefix="reshaped:")
    bucket.refund("k", 1, taken_at=1000)
    assert client.get(key) == written
    assert [bucket.try_acquire("k", 1, now=1001).allowed for _ in range(6)] == [True] * 5 + [False]


def _writes(client: redis.Redis) -> int:
    """How many writes the server has made (every command that changed anything)."""
    return int(client.info("persistence")["rdb_changes_since_last_save"])


STRICTER: dict[str, tuple[Callable[[], ratekeeper.Limiter], Callable[[], ratekeeper.Limiter]]] = {
    # Refilled a day's worth slower; a window a day long.
    "token_bucket": (lambda: ratekeeper.TokenBucket(10, 10, 1.0), lambda: ratekeeper.TokenBucket(10, 10, 86400.0)),
    "sliding_window_log": (lambda: ratekeeper.SlidingWindowLog(10, 1.0), lambda: ratekeeper.SlidingWindowLog(10, 86400.0)),
}
DENIALS: dict[str, Callable[[RedisLimiter, Optional[float]], bool]] = {
    "try_acquire": lambda limiter, now: limiter.try_acquire("k", 1, now=now).allowed,
    "try_acquire_batch": lambda limiter, now: any(d.allowed for d in limiter.try_acquire_batch("k", [1, 1], now=now)),
    "reserve": lambda limiter, now: limiter.reserve("k", 1, max_wait=0, now=now).ok,
}


@pytest.mark.parametrize("algorithm", STRICTER)
@pytest.mark.parametrize("denial", DENIALS)
@pytest.mark.parametrize("start", [None, 1000])  # the server's clock; a caller's of another origin
def test_a_denial_under_a_stricter_configuration_keeps_the_key_until_its_state_is_fresh(
    client: redis.Redis, algorithm: str, denial: str, start: Optional[int]
) -> None:
    # The key's expiry was the old configuration's, a second or two away. A
    # denial wrote nothing, so a caller denied all along found the key gone
    # then, fresh, and was admitted a whole limit again, where the state
    # it held (the core's, carried over by a reconfigure) admits nothing for a day.
    old, new = STRICTER[algorithm]
    before = RedisLimiter(client, old(), name="api", prefix="stricter:")
    for _ in range(10):
        assert before.try_acquire("k", 1, now=start).allowed
    (key,) = client.keys("stricter:*")
    assert client.pttl(key) <= 2000
    after = RedisLimiter(client, new(), name="api", prefix="stricter:")
    now = None if start is None else start + 0.5
    assert not DENIALS[denial](after, now)
    assert client.pttl(key) > 3600_000, "kept until the state is fresh (a day), not the old configuration's second"
    # Lengthened once, with the margin a write on the callers' clock has:
    # the next denial writes nothing, as a denial under an unchanged one.
    writes = _writes(client)
    assert not DENIALS[denial](after, now)
    assert _writes(client) == writes



@pytest.mark.parametrize("algorithm", STRICTER)
@pytest.mark.parametrize("start", [None, 1000])  # the server's clock; a caller's of another origin
def test_a_refund_under_a_stricter_configuration_keeps_the_key_until_its_state_is_fresh(
    client: redis.Redis, algorithm: str, start: Optional[int]
) -> None:
    # A refund kept the key's expiry, set by the call that wrote the state
    # for the configuration of then. After a deploy to a slower refill or a
    # longer window, a refund (a give-back of a caller that left, the first
    # call the key saw) gave one unit back and left the key to expire a
    # second later, fresh: the nine units still held for a day were forgotten.
    old, new = STRICTER[algorithm]
    before = RedisLimiter(client, old(), name="api", prefix="stricter-refund:")
    assert before.try_acquire("k", 10, now=start).allowed
    (key,) = client.keys("stricter-refund:*")
    assert client.pttl(key) <= 2000
    # A log gives back to the events of the instant they were taken at.
    taken_at: Optional[Fraction] = None
    if algorithm == "sliding_window_log":
        (entry,) = client.zrangebyscore(key, 0, "+inf")  # after "latest:<t>" and "birth:<b>", scored below 0
        assert isinstance(entry, bytes)
        taken_at = Fraction(int(entry.split(b":")[0]), 10**6)
    clock = None if start is None else (lambda: start + 0.5)
    after = RedisLimiter(client, new(), name="api", prefix="stricter-refund:", clock=clock)
    after.refund("k", 1, taken_at=taken_at)
    assert client.pttl(key) > 3600_000, "kept until the state is fresh (a day), not the old configuration's second"
    assert [after.try_acquire("k", 1).allowed for _ in range(2)] == [True, False]
    # Under the configuration the key's expiry was set for, a refund keeps it.
    assert isinstance(key, bytes)
    expiry = int(client.pexpiretime(key.decode()))
    after.refund("k", 1, taken_at=taken_at)
    assert int(client.pexpiretime(key.decode())) == expiry

@pytest.mark.parametrize("batch", [False, True])
def test_a_policys_denial_under_a_stricter_limit_keeps_its_keys_until_their_states_are_fresh(
    client: redis.Redis, batch: bool
) -> None:
    # As a lone limit's, each limit's key, the one that would allow too.
    def policy(period: float) -> RedisPolicy:
        limits = [("api", ratekeeper.TokenBucket(10, 10, period), ["user"]), ("day", ratekeeper.FixedWindow(1000, 86400), ["user"])]
        return RedisPolicy(client, limits, prefix="stricter-policy:")

    before = policy(1.0)
    for _ in range(10):
        assert before.try_acquire({"user": "u"}, 1).allowed
    (bucket,) = client.keys("stricter-policy:*api*")
    (window,) = client.keys("stricter-policy:*day*")
    assert client.pttl(bucket) <= 1000
    after = policy(86400.0)
    if batch:
        assert not any(d.allowed for d in after.try_acquire_batch({"user": "u"}, [1, 1]))
    else:
        assert not after.try_acquire({"user": "u"}, 1).allowed
    assert client.pttl(bucket) > 3600_000
    assert 0 < client.pttl(window) <= 86400_000
    writes = _writes(client)
    assert not after.try_acquire({"user": "u"}, 1).allowed
    assert _writes(client) == writes


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"])
@pytest.mark.parametrize("start", [None, 1000, 1_600_000_000, 2_000_000_000])
def test_a_denial_under_an_unchanged_configuration_writes_nothing(
    client: redis.Redis, algorithm: str, start: Optional[int]
) -> None:
    # The expiry it would lengthen to is the one the key has: no write (nor
    # replication) for a denial, the hot path of a limited caller.
    limiters: dict[str, Callable[[], ratekeeper.Limiter]] = {
        # A day: on the server's clock the calls do not straddle a window's end.
        "gcra": lambda: ratekeeper.Gcra(10, 8640.0),
        "token_bucket": lambda: ratekeeper.TokenBucket(10, 10, 86400.0),
        "fixed_window": lambda: ratekeeper.FixedWindow(10, 86400),
        "sliding_window_counter": lambda: ratekeeper.SlidingWindowCounter(10, 86400),
        "sliding_window_log": lambda: ratekeeper.SlidingWindowLog(10, 86400),
    }
    limiter = RedisLimiter(client, limiters[algorithm](), name="api", prefix="unchanged:")
    for _ in range(10):
        assert limiter.try_acquire("k", 1, now=start).allowed
    writes = _writes(client)
    for denial in DENIALS.values():
        assert not denial(limiter, start)
    assert _writes(client) == writes


# Each algorithm's string state as scripts before births wrote it: 1 unit
# taken at 1000 s, in a limit of 2.
WITHOUT_BIRTH: dict[str, tuple[Callable[[], ratekeeper.Limiter], bytes]] = {
    "gcra": (lambda: ratekeeper.Gcra(2, 1.0), b"1000000000 1000000"),
    "token_bucket": (lambda: ratekeeper.TokenBucket(2, 1, 1.0), b"1000000000 1 0"),
    "fixed_window": (lambda: ratekeeper.FixedWindow(2, 60), b"1000000000 16 1 0"),
    "sliding_window_counter": (lambda: ratekeeper.SlidingWindowCounter(2, 60), b"1000000000 16 1 0 0"),
}


@pytest.mark.parametrize("algorithm", WITHOUT_BIRTH)
def test_a_state_written_without_a_birth_is_read_as_it_was_and_born_when_written(
    client: redis.Redis, algorithm: str
) -> None:
    # PROTOCOL.md: a key written before births is read as before (not as
    # another shape, fresh: a unit more), and the call that writes it next
    # gives it one, which a give-back made since with another gives nothing to.
    make, old = WITHOUT_BIRTH[algorithm]
    limiter = RedisLimiter(client, make(), name="api", prefix="unborn:")
    (key,) = limiter._keys("k")
    client.set(key, old, px=60_000)
    booking = limiter.reserve("k", now=1000, max_wait=0)
    assert booking.ok
    assert not limiter.try_acquire("k", now=1000)
    # Written anew without a birth (a script before births, or a reset and
    # one of theirs), the key gives the booking nothing back.
    state = _state(client, key)
    client.set(key, state, px=60_000)
    booking.cancel()
    assert client.get(key) == state
    assert not limiter.try_acquire("k", now=1000)


def test_a_refund_with_births_gives_back_only_to_the_key_they_name(client: redis.Redis) -> None:
    # PROTOCOL.md, refund's ARGV: after the marks (an empty count: none for
    # that limit), each key's birth as the booking's reply gave it.
    script = client.register_script(REDIS_SCRIPT)
    keys = ["rk-py-births:{k}:a", "rk-py-births:{k}:b"]
    config: list[Union[str, int]] = ["gcra", 2, 1_000_000, "fixed_window", 2, 60_000_000]

    def remaining() -> list[int]:
        reply = script(keys=keys, args=["1", "peek", "100", 2, *config, 1, 0])
        return [reply[1 + 6 + 1], reply[1 + 6 + 5 + 1]]

    took = script(keys=keys, args=["1", "acquire", "100", 2, *config, 1, 1])
    births = took[-2:]
    assert took[1] == 1 and all(b > 0 for b in births) and remaining() == [1, 1]
    # The window's key born since (another birth): the bucket alone gives back.
    script(keys=keys, args=["1", "refund", "100", 2, *config, 1, 1, "100", "", "", births[0], births[1] + 1])
    assert remaining() == [2, 1]
    script(keys=keys, args=["1", "refund", "100", 2, *config, 1, 1, "100", "", "", *births])
    assert remaining() == [2, 2]
    with pytest.raises(redis.ResponseError, match="^ratekeeper: the births of a refund end before limit 2$"):
        script(keys=keys, args=["1", "refund", "100", 2, *config, 1, 1, "100", "", "", births[0]])
