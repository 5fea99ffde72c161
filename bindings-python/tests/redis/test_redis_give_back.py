"""What a waiting ``acquire`` that does not go ahead (interrupted, cancelled),
and a ``try_acquire`` whose caller left before its answer, give back on
Redis: on a bucket, the units only while the call is the key's latest
(another process may have booked behind it meanwhile, whose slot a give-back
from the middle would hand out a second time); on a window, where they were
counted."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import time
import uuid
from types import FrameType
from typing import Any, Callable, Optional

import pytest
import redis
import redis.asyncio
from redis_fixtures import client, given_back, url

import ratekeeper
from ratekeeper.redis import AsyncRedisLimiter, AsyncRedisPolicy, RedisLimiter, RedisPolicy, RedisReservation

# A burst of one unit a second: a key emptied books its next unit a second
# on, the one after two seconds on.
BUCKETS: dict[str, Callable[[], Any]] = {
    "gcra": lambda: ratekeeper.Gcra(1, 1.0),
    "token_bucket": lambda: ratekeeper.TokenBucket(1, 1, 1.0),
}

# The same on the server's clock, a unit a minute: its tests tell a
# booking's slot by the time between calls (``_booked`` waits until the
# key's line ends past one and a half units from now), which a stall of the
# machine of half a second broke at a unit a second.
UNIT = 60.0
SERVER_BUCKETS: dict[str, Callable[[], Any]] = {
    "gcra": lambda: ratekeeper.Gcra(1, UNIT),
    "token_bucket": lambda: ratekeeper.TokenBucket(1, 1, UNIT),
}


def _prefix(name: str) -> str:
    return f"rk-py-give-back:{name}:{uuid.uuid4().hex}:"


def _until(ready: Callable[[], bool]) -> None:
    """Waits until ``ready()`` (threads of a test reaching their places), 10 s at most."""
    deadline = time.monotonic() + 10
    while not ready():
        assert time.monotonic() < deadline, "never ready"
        time.sleep(0.001)


def _interrupt_sleep(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], None]) -> None:
    """The waiting acquire's sleep until its slot: runs ``meanwhile`` (others
    book), then is interrupted, as Ctrl-C interrupts it."""

    def sleep(seconds: float) -> None:
        monkeypatch.undo()
        meanwhile()
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)


@pytest.mark.parametrize("algorithm", BUCKETS)
def test_an_interrupted_acquire_gives_nothing_back_once_another_process_booked_behind_it(
    url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    prefix = _prefix(algorithm)
    mine = RedisLimiter(client, SERVER_BUCKETS[algorithm](), prefix=prefix)
    # Another process: a client and a limiter of its own on the same key.
    other_client = redis.Redis.from_url(url)
    other = RedisLimiter(other_client, SERVER_BUCKETS[algorithm](), prefix=prefix)
    assert mine.try_acquire("k")
    booked: list[RedisReservation] = []
    _interrupt_sleep(monkeypatch, lambda: booked.append(other.reserve("k", max_wait=10 * UNIT)))
    with pytest.raises(KeyboardInterrupt):
        mine.acquire("k")  # books the next unit, a minute on, then is interrupted
    (behind,) = booked
    assert behind.ok and UNIT < behind.wait <= 2 * UNIT
    after = other.reserve("k", max_wait=10 * UNIT)
    # Given back from the middle, the interrupted booking moved the key's end
    # back by one unit: `after` got `behind`'s slot, two units at once from a
    # burst of one. Its slot goes unused instead.
    assert after.ok
    assert after.at - behind.at == pytest.approx(UNIT, abs=1e-6)
    other_client.close()


@pytest.mark.parametrize("algorithm", BUCKETS)
def test_an_interrupted_acquire_that_is_the_latest_booking_gives_it_back(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    limiter = RedisLimiter(client, SERVER_BUCKETS[algorithm](), prefix=_prefix(algorithm))
    assert limiter.try_acquire("k")
    _interrupt_sleep(monkeypatch, lambda: None)
    with pytest.raises(KeyboardInterrupt):
        limiter.acquire("k")
    # Nobody booked behind it: the next booking takes its slot, less than a minute on.
    after = limiter.reserve("k", max_wait=10 * UNIT)
    assert after.ok and 0 < after.wait <= UNIT


@pytest.mark.parametrize("algorithm", BUCKETS)
def test_acquires_cancelled_newest_first_each_give_their_booking_back(
    url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    # The newest interrupted first, the one before it is the latest again
    # (the key as it left it, on the callers' clock of the same instant).
    prefix = _prefix(algorithm)
    now = 2_000_000_000.0
    mine = RedisLimiter(client, BUCKETS[algorithm](), prefix=prefix, clock=lambda: now)
    other_client = redis.Redis.from_url(url)
    other = RedisLimiter(other_client, BUCKETS[algorithm](), prefix=prefix, clock=lambda: now)
    assert mine.try_acquire("k")

    def inner() -> None:
        _interrupt_sleep(monkeypatch, lambda: None)
        with pytest.raises(KeyboardInterrupt):
            other.acquire("k")

    _interrupt_sleep(monkeypatch, inner)
    with pytest.raises(KeyboardInterrupt):
        mine.acquire("k")
    after = other.reserve("k", max_wait=100)
    assert after.ok and after.wait == pytest.approx(1.0)
    other_client.close()


@pytest.mark.parametrize("algorithm", BUCKETS)
def test_acquires_cancelled_newest_first_give_their_bookings_back_whenever_each_booked(
    url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    # The newer booking made half a second later, then given back: the older
    # is the latest again, and gives its booking back, on a token bucket as
    # on a GCRA (its mark was the state as stored, which the later call's
    # time had changed: its slot went unused).
    prefix = _prefix(algorithm)
    now = [2_000_000_000.0]
    mine = RedisLimiter(client, BUCKETS[algorithm](), prefix=prefix, clock=lambda: now[0])
    other_client = redis.Redis.from_url(url)
    other = RedisLimiter(other_client, BUCKETS[algorithm](), prefix=prefix, clock=lambda: now[0])
    assert mine.try_acquire("k")

    def inner() -> None:
        now[0] += 0.5
        _interrupt_sleep(monkeypatch, lambda: None)
        with pytest.raises(KeyboardInterrupt):
            other.acquire("k")  # books two seconds on, then gives it back

    _interrupt_sleep(monkeypatch, inner)
    with pytest.raises(KeyboardInterrupt):
        mine.acquire("k")  # books a second on, then gives it back
    after = other.reserve("k", max_wait=100)
    # (Half a second on: a second after the first unit, the older booking's slot.)
    assert after.ok and after.wait == pytest.approx(0.5)
    other_client.close()


def test_an_interrupted_acquire_on_a_window_gives_its_booking_back_where_it_was_counted(
    url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A window counts bookings per window, not in a line: one given back
    # from the middle frees a unit of its window, and takes nobody's slot.
    prefix = _prefix("window")
    limiter = RedisLimiter(client, ratekeeper.FixedWindow(2, 3600), prefix=prefix)
    other_client = redis.Redis.from_url(url)
    other = RedisLimiter(other_client, ratekeeper.FixedWindow(2, 3600), prefix=prefix)
    assert limiter.try_acquire("k", 2)  # full: bookings go to the next window
    booked: list[RedisReservation] = []
    _interrupt_sleep(monkeypatch, lambda: booked.append(other.reserve("k", max_wait=7200)))
    with pytest.raises(KeyboardInterrupt):
        limiter.acquire("k")
    (behind,) = booked
    after = other.reserve("k", max_wait=7200)
    # The next window holds `behind` and, the interrupted one given back, `after`.
    assert after.ok and after.at == behind.at
    assert not other.reserve("k", max_wait=3600 + (behind.at - time.time()) - 1).ok
    other_client.close()


def test_a_policy_gives_back_per_limit_key(url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # A booking holds every limit of a policy: the bucket gets nothing back
    # (another booked behind it), the window gets its unit back.
    config = [("rate", ratekeeper.Gcra(1, 1.0), ["user"]), ("hourly", ratekeeper.FixedWindow(100, 3600), ["user"])]
    # On the callers' clock, standing still: every booking in one window.
    now = 2_000_000_000.0
    prefix = _prefix("policy")
    policy = RedisPolicy(client, config, prefix=prefix, clock=lambda: now)
    other_client = redis.Redis.from_url(url)
    other = RedisPolicy(other_client, config, prefix=prefix, clock=lambda: now)
    request = {"user": "u"}
    assert policy.try_acquire(request)
    booked: list[RedisReservation] = []
    _interrupt_sleep(monkeypatch, lambda: booked.append(other.reserve(request, max_wait=100)))
    with pytest.raises(KeyboardInterrupt):
        policy.acquire(request)
    (behind,) = booked
    after = other.reserve(request, max_wait=100)
    assert after.ok and after.at - behind.at == pytest.approx(1.0)
    # The window counts the first unit, `behind` and `after`: not the interrupted one.
    hourly = dict(other.peek(request, 0, now=after.at).limits)["hourly"]
    assert hourly.remaining == 97
    other_client.close()


def test_a_policy_whose_interrupted_booking_is_the_latest_gives_it_back_everywhere(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = [("rate", SERVER_BUCKETS["gcra"](), ["user"]), ("burst", SERVER_BUCKETS["token_bucket"](), ["user"])]
    policy = RedisPolicy(client, config, prefix=_prefix("policy-latest"))
    request = {"user": "u"}
    assert policy.try_acquire(request)
    _interrupt_sleep(monkeypatch, lambda: None)
    with pytest.raises(KeyboardInterrupt):
        policy.acquire(request)
    after = policy.reserve(request, max_wait=10 * UNIT)
    assert after.ok and 0 < after.wait <= UNIT


def test_an_explicit_cancel_gives_back_as_it_is(client: redis.Redis) -> None:
    # reservation.cancel() of one's own is documented to give back as it is
    # ("cancel the latest first"), on Redis as in-process: unchanged.
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=_prefix("explicit"))
    limiter.try_acquire("k", now=1000.0)
    a = limiter.reserve("k", now=1000.0, max_wait=100)
    b = limiter.reserve("k", now=1000.0, max_wait=100)
    assert (a.wait, b.wait) == (1.0, 2.0)
    a.cancel()
    assert limiter.reserve("k", now=1000.0, max_wait=100).wait == 2.0


def test_a_cancel_gives_back_once_and_a_refusal_has_nothing_to_give_back(url: str, client: redis.Redis) -> None:
    # cancel() gives the booking back once: a second call refunding it again
    # would free the slot of the booking before it (two units at once from a
    # burst of one). A reservation refused booked nothing, and its cancel()
    # gives nothing back: a unit refunded at the slot it would have had
    # would be one the limit never granted.
    now = 2_000_000_000.0
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=_prefix("once"), clock=lambda: now)
    assert limiter.try_acquire("k")
    refused = limiter.reserve("k", max_wait=0)
    assert not refused.ok
    refused.cancel()
    assert not limiter.try_acquire("k").allowed
    first, second = limiter.reserve("k", max_wait=100), limiter.reserve("k", max_wait=100)
    assert (first.wait, second.wait) == (1.0, 2.0)
    second.cancel()
    second.cancel()
    assert limiter.reserve("k", max_wait=100).wait == 2.0

    async def main() -> tuple[bool, float]:
        aclient = redis.asyncio.Redis.from_url(url)
        alimiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 1.0), prefix=_prefix("async-once"), clock=lambda: now)
        assert (await alimiter.try_acquire("k")).allowed
        refused = await alimiter.reserve("k", max_wait=0)
        await refused.cancel()
        allowed = (await alimiter.try_acquire("k")).allowed
        await alimiter.reserve("k", max_wait=100)
        second = await alimiter.reserve("k", max_wait=100)
        await second.cancel()
        await second.cancel()
        after = await alimiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return allowed, after.wait

    assert asyncio.run(main()) == (False, 2.0)


WINDOWS: dict[str, Callable[[], Any]] = {
    "fixed_window": lambda: ratekeeper.FixedWindow(1, 60.0),
    "sliding_window_log": lambda: ratekeeper.SlidingWindowLog(1, 60.0),
}


@pytest.mark.parametrize("algorithm", WINDOWS)
def test_a_cancel_gives_a_window_booking_back_at_its_slot(url: str, client: redis.Redis, algorithm: str) -> None:
    # Booked into the next window and cancelled, it goes back to that
    # window: given back at the time of the cancel, it would free a unit of
    # the window it was made in, where it took nothing (two units at once
    # from a limit of one), and the window it was booked in would keep it.
    now = 2_000_000_070.0  # 30 s into a fixed window of 60 s
    limiter = RedisLimiter(client, WINDOWS[algorithm](), prefix=_prefix(f"cancel-{algorithm}"), clock=lambda: now)
    assert limiter.try_acquire("k")
    booked = limiter.reserve("k", max_wait=100)
    assert booked.ok and booked.wait > 0
    booked.cancel()
    assert not limiter.try_acquire("k").allowed
    assert limiter.reserve("k", max_wait=100).wait == booked.wait

    async def main() -> tuple[bool, float, float]:
        aclient = redis.asyncio.Redis.from_url(url)
        alimiter = AsyncRedisLimiter(aclient, WINDOWS[algorithm](), prefix=_prefix(f"acancel-{algorithm}"), clock=lambda: now)
        assert (await alimiter.try_acquire("k")).allowed
        abooked = await alimiter.reserve("k", max_wait=100)
        await abooked.cancel()
        denied = (await alimiter.try_acquire("k")).allowed
        after = await alimiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return denied, abooked.wait, after.wait

    denied, wait, after = asyncio.run(main())
    assert not denied and after == wait


async def _booked(limiter: Any, target: Any, before: float) -> None:
    """Returns once ``target``'s key holds a booking past ``before`` seconds from now."""
    for _ in range(500):
        if (await limiter.peek(target, 0)).reset_after > before:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never booked")


@pytest.mark.parametrize("algorithm", BUCKETS)
@pytest.mark.parametrize("kind", ["limiter", "policy"])
def test_a_cancelled_async_acquire_gives_nothing_back_once_another_booked_behind_it(url: str, algorithm: str, kind: str) -> None:
    async def main() -> tuple[float, float]:
        prefix = _prefix(f"async-{kind}-{algorithm}")
        first, second = redis.asyncio.Redis.from_url(url), redis.asyncio.Redis.from_url(url)
        mine: Any
        other: Any
        if kind == "limiter":
            mine = AsyncRedisLimiter(first, SERVER_BUCKETS[algorithm](), prefix=prefix)
            other = AsyncRedisLimiter(second, SERVER_BUCKETS[algorithm](), prefix=prefix)
            target: Any = "k"
        else:
            config = [("rate", SERVER_BUCKETS[algorithm](), ["user"]), ("hourly", ratekeeper.FixedWindow(100, 3600), ["user"])]
            mine = AsyncRedisPolicy(first, config, prefix=prefix)
            other = AsyncRedisPolicy(second, config, prefix=prefix)
            target = {"user": "u"}
        assert (await mine.try_acquire(target)).allowed
        task = asyncio.ensure_future(mine.acquire(target))
        await _booked(other, target, 1.5 * UNIT)  # sleeping until its slot, a minute on
        behind = await other.reserve(target, max_wait=10 * UNIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await given_back()  # raised at once, its booking given back in a task of its own
        after = await other.reserve(target, max_wait=10 * UNIT)
        await first.aclose()
        await second.aclose()
        return behind.at, after.at

    behind, after = asyncio.run(main())
    assert after - behind == pytest.approx(UNIT, abs=1e-6)


@pytest.mark.parametrize("algorithm", BUCKETS)
def test_an_async_acquire_cancelled_during_its_round_trip_gives_nothing_back_once_another_booked_behind_it(
    url: str, algorithm: str
) -> None:
    # The cancellation comes while the booking's round trip is under way:
    # the booking is given back when it comes, by then not the latest.
    async def main() -> tuple[float, float]:
        prefix = _prefix(f"async-in-flight-{algorithm}")
        first, second = redis.asyncio.Redis.from_url(url), redis.asyncio.Redis.from_url(url)
        mine = AsyncRedisLimiter(first, SERVER_BUCKETS[algorithm](), prefix=prefix)
        other = AsyncRedisLimiter(second, SERVER_BUCKETS[algorithm](), prefix=prefix)
        assert (await mine.try_acquire("k")).allowed
        booked: list[Any] = []
        task: Optional[asyncio.Future[None]] = None
        call = mine._call

        async def booking_then_another(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            reply = await call(keys, args, *rest)
            if args[1] == "reserve" and not booked:
                assert task is not None
                task.cancel()  # the caller leaves while the reply is on its way
                booked.append(await other.reserve("k", max_wait=10 * UNIT))
            return reply

        mine._call = booking_then_another  # type: ignore[method-assign]
        task = asyncio.ensure_future(mine.acquire("k"))
        with pytest.raises(asyncio.CancelledError):
            await task
        await given_back()  # the booking, once its reply came
        mine._call = call  # type: ignore[method-assign]
        (behind,) = booked
        after = await other.reserve("k", max_wait=10 * UNIT)
        await first.aclose()
        await second.aclose()
        return behind.at, after.at

    behind, after = asyncio.run(main())
    assert after - behind == pytest.approx(UNIT, abs=1e-6)


def test_a_cancelled_async_acquire_that_is_the_latest_booking_gives_it_back(url: str) -> None:
    async def main() -> float:
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, SERVER_BUCKETS["gcra"](), prefix=_prefix("async-latest"))
        assert (await limiter.try_acquire("k")).allowed
        task = asyncio.ensure_future(limiter.acquire("k"))
        await _booked(limiter, "k", 1.5 * UNIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await given_back()  # raised at once, its booking given back in a task of its own
        after = await limiter.reserve("k", max_wait=10 * UNIT)
        await aclient.aclose()
        return after.wait

    assert 0 < asyncio.run(main()) <= UNIT


# A burst of two units a second: one taken, a batch of a denied 2 and an
# admitted 1 empties the key; a booking of 2 behind it waits two seconds.
BURST_TWO: dict[str, Callable[[], Any]] = {
    "gcra": lambda: ratekeeper.Gcra(2, 1.0),
    "token_bucket": lambda: ratekeeper.TokenBucket(2, 1, 1.0),
}


class _Interrupted:
    """A batched caller's wake-up, as the client made it, that interrupts the
    main thread once its answer has come (before it returns it)."""

    def __init__(self, wake: Any) -> None:
        self.wake = wake

    def wait(self, timeout: Optional[float] = None) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return self.wake.wait(timeout)  # type: ignore[no-any-return]
        self.wake.wait()
        raise KeyboardInterrupt

    def set(self) -> None:
        self.wake.set()


@pytest.mark.parametrize("algorithm", BURST_TWO)
@pytest.mark.parametrize("behind", [False, True])
def test_a_batched_caller_interrupted_gives_its_units_back_only_while_its_batch_is_the_latest(
    url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch, algorithm: str, behind: bool
) -> None:
    # The interrupted caller's units were given back with a plain refund:
    # from the middle of a bucket's line once another process had booked
    # behind the batch, they went to the next caller at that booking's slot.
    prefix = _prefix(f"batch-{algorithm}")
    now = 2_000_000_000.0
    mine = RedisLimiter(client, BURST_TWO[algorithm](), prefix=prefix, clock=lambda: now)
    other_client = redis.Redis.from_url(url)
    other = RedisLimiter(other_client, BURST_TWO[algorithm](), prefix=prefix, clock=lambda: now)
    assert mine.peek("k", 0).from_store  # the script is loaded
    call = mine._call
    booked: list[RedisReservation] = []
    inside = threading.Event()

    def queued() -> int:
        """The callers gathered behind the round trip under way on "k"."""
        queue = mine._queues.get(tuple(mine._keys("k")))
        return 0 if queue is None else sum(len(batch.slots) for batch in queue.waiting)

    def slow(keys: list[bytes], args: list[Any]) -> Any:
        reply = call(keys, args)
        if threading.current_thread().name == "second" and args[1] == "acquire":
            if behind:
                booked.append(other.reserve("k", 2, max_wait=100))
        elif threading.current_thread().name == "first":
            inside.set()
            _until(lambda: queued() == 2)  # taken; 'second', then the main thread, queue meanwhile
        return reply

    class Slot(ratekeeper.redis._sync._Slot):
        def __init__(self, cost: int, target: Any) -> None:
            super().__init__(cost, target)
            self.event = _Interrupted(self.event)  # type: ignore[assignment]

    monkeypatch.setattr(ratekeeper.redis._sync, "_Slot", Slot)
    mine._call = slow  # type: ignore[method-assign]
    out: list[bool] = []
    # 'first' takes a unit alone; 'second' (2 units: denied) and this thread
    # (1 unit: admitted) queue behind it, and 'second' sends the batch of both.
    first = threading.Thread(target=lambda: out.append(mine.try_acquire("k").allowed), name="first")
    second = threading.Thread(target=lambda: out.append(mine.try_acquire("k", 2).allowed), name="second")
    first.start()
    assert inside.wait(10)
    second.start()
    _until(lambda: queued() == 1)
    with pytest.raises(KeyboardInterrupt):
        mine.try_acquire("k")
    first.join(10)
    second.join(10)
    mine._call = call  # type: ignore[method-assign]
    assert out == [True, False]
    after = other.reserve("k", max_wait=100)
    if behind:
        # Two seconds on, the booking behind the batch holds the whole burst:
        # the next unit comes a second after it, not beside it.
        (held,) = booked
        assert held.ok and held.wait == pytest.approx(2.0)
        assert after.ok and after.at - held.at == pytest.approx(1.0)
    else:
        # Nobody took anything since the batch: the unit is given back.
        assert after.ok and after.wait == pytest.approx(0.0)
    other_client.close()


@pytest.mark.parametrize("algorithm", BUCKETS)
@pytest.mark.parametrize("batching", [True, False])
def test_an_async_try_acquire_cancelled_in_flight_gives_nothing_back_once_another_booked_behind_it(
    url: str, algorithm: str, batching: bool
) -> None:
    # Cancelled while its round trip was under way (batched or alone), its
    # unit was given back with a plain refund once the reply came: another
    # process had booked behind it meanwhile, and the next caller got that
    # booking's slot, two units at once from a burst of one.
    async def main() -> tuple[float, float, float]:
        prefix = _prefix(f"async-taken-{algorithm}-{batching}")
        now = 2_000_000_000.0
        first, second = redis.asyncio.Redis.from_url(url), redis.asyncio.Redis.from_url(url)
        mine = AsyncRedisLimiter(first, BUCKETS[algorithm](), prefix=prefix, clock=lambda: now, batching=batching)
        other = AsyncRedisLimiter(second, BUCKETS[algorithm](), prefix=prefix, clock=lambda: now)
        booked: list[Any] = []
        task: Optional[asyncio.Future[Any]] = None
        call = mine._call
        refunded = asyncio.Event()

        async def taken_then_another(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            reply = await call(keys, args, *rest)
            if args[1] == "acquire" and not booked:
                assert task is not None
                task.cancel()  # the caller leaves while the reply is on its way
                booked.append(await other.reserve("k", max_wait=100))
            elif args[1] == "refund":
                refunded.set()  # the give-back, done
            return reply

        mine._call = taken_then_another  # type: ignore[method-assign]
        task = asyncio.ensure_future(mine.try_acquire("k"))
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(refunded.wait(), 5)
        mine._call = call  # type: ignore[method-assign]
        (held,) = booked
        after = await other.reserve("k", max_wait=100)
        await first.aclose()
        await second.aclose()
        return held.wait, held.at, after.at

    wait, held, after = asyncio.run(main())
    assert wait == pytest.approx(1.0)
    assert after - held == pytest.approx(1.0)


@pytest.mark.parametrize("redis_down", [False, True], ids=["redis", "on_error"])
@pytest.mark.parametrize("batching", [True, False])
def test_an_async_try_acquire_denied_and_cancelled_in_flight_gives_nothing_back(
    url: str, redis_down: bool, batching: bool
) -> None:
    # Denied, the call took nothing: a give-back for its caller, gone
    # before the answer came, would hand the next caller a unit the limit
    # never granted (in Redis, or in the in-process on_error limiter while
    # Redis is down), two units at once from a limit of one.
    async def main() -> tuple[bool, bool]:
        now = 2_000_000_005.0
        aclient = redis.asyncio.Redis.from_url(url)
        # On a clock of its own, mid-window: the window of its default clock
        # could end between the two calls that spend it and peek.
        fallback = ratekeeper.KeyedLimiter(ratekeeper.FixedWindow(1, 60.0, clock=lambda: 30.0))
        limiter = AsyncRedisLimiter(
            aclient,
            ratekeeper.FixedWindow(1, 60.0),
            prefix=_prefix(f"async-denied-{redis_down}-{batching}"),
            clock=lambda: now,
            on_error=fallback,
            batching=batching,
        )
        assert (await limiter.try_acquire("k")).allowed
        assert fallback.try_acquire("k").allowed  # both limits spent
        task: Optional[asyncio.Future[Any]] = None
        call = limiter._call
        answered = asyncio.Event()

        async def denied_then_gone(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            reply = await call(keys, args, *rest)
            if args[1] == "acquire" and task is not None:
                task.cancel()  # the caller leaves while the reply is on its way
                answered.set()
                if redis_down:
                    raise redis.ConnectionError("Redis went away")
            return reply

        limiter._call = denied_then_gone  # type: ignore[method-assign]
        task = asyncio.ensure_future(limiter.try_acquire("k"))
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(answered.wait(), 5)
        for _ in range(5):  # a give-back, were there one, runs in a task of its own
            await asyncio.sleep(0.01)
        limiter._call = call  # type: ignore[method-assign]
        in_redis = (await limiter.peek("k")).allowed
        await aclient.aclose()
        return in_redis, fallback.peek("k").allowed

    assert asyncio.run(main()) == (False, False)


# Reset and used again, a key books the same slots anew: a bucket on the
# callers' clock, whose line ends where it ended before, and a window, which
# counts per window whoever booked there.
AFTER_RESET: dict[str, Callable[[], Any]] = {
    **BUCKETS,
    "fixed_window": lambda: ratekeeper.FixedWindow(1, 10.0),
    "sliding_window_log": lambda: ratekeeper.SlidingWindowLog(1, 10.0),
}


@pytest.mark.parametrize("algorithm", AFTER_RESET)
@pytest.mark.parametrize("how", ["interrupted", "cancelled"])
def test_a_booking_made_before_a_reset_through_the_limiter_gives_nothing_back(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch, algorithm: str, how: str
) -> None:
    # Given back after the reset, an interrupted acquire's booking (or one
    # cancelled) freed a unit the key had booked anew: the next caller got
    # that booking's slot, two units at once from a limit of one. As
    # in-process, a booking made before a reset that found a key gives
    # nothing back.
    now = 2_000_000_005.0
    limiter = RedisLimiter(client, AFTER_RESET[algorithm](), prefix=_prefix(f"reset-{algorithm}"), clock=lambda: now)
    assert limiter.try_acquire("k")
    booked: list[RedisReservation] = []

    def meanwhile() -> None:
        assert limiter.reset("k")
        assert limiter.try_acquire("k")
        booked.append(limiter.reserve("k", max_wait=100))  # the slot booked before the reset

    if how == "interrupted":
        _interrupt_sleep(monkeypatch, meanwhile)
        with pytest.raises(KeyboardInterrupt):
            limiter.acquire("k")
    else:
        before = limiter.reserve("k", max_wait=100)
        meanwhile()
        before.cancel()
    (behind,) = booked
    after = limiter.reserve("k", max_wait=100)
    # Never beside `behind` (a log of one unit books no third instant at all).
    assert behind.ok and (after.ok or algorithm == "sliding_window_log")
    assert not after.ok or after.at > behind.at


@pytest.mark.parametrize("algorithm", AFTER_RESET)
@pytest.mark.parametrize("batching", [True, False])
def test_an_async_try_acquire_cancelled_in_flight_gives_nothing_back_once_the_limiter_reset_the_key(
    url: str, algorithm: str, batching: bool
) -> None:
    # The key reset meanwhile and its unit taken anew: given back, the
    # cancelled caller's unit let the next caller share it (a bucket's line
    # ended where the cancelled call's had, on the callers' clock; a window
    # counts whoever took there).
    async def main() -> float:
        now = 2_000_000_005.0
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(
            aclient, AFTER_RESET[algorithm](), prefix=_prefix(f"async-reset-{algorithm}-{batching}"), clock=lambda: now, batching=batching
        )
        task: Optional[asyncio.Future[Any]] = None
        call = limiter._call
        answered, sending, refunded = asyncio.Event(), asyncio.Event(), asyncio.Event()
        taken: list[bool] = []

        async def taken_then_reset(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            nonlocal task
            if args[1] == "refund":
                sending.set()
            reply = await call(keys, args, *rest)
            if args[1] == "acquire" and task is not None:
                task.cancel()  # the caller leaves while the reply is on its way
                task = None
                assert await limiter.reset("k")
                taken.append((await limiter.try_acquire("k", now=now)).allowed)
                answered.set()  # the reply goes on to the cancelled call (no await from here)
            elif args[1] == "refund":
                refunded.set()
            return reply

        limiter._call = taken_then_reset  # type: ignore[method-assign]
        task = asyncio.ensure_future(limiter.try_acquire("k"))
        with pytest.raises(asyncio.CancelledError):
            await task
        await answered.wait()
        # A give-back, were there one, reaches _call in a task of its own,
        # with no round trip before: then waited for. (Waited for a while
        # instead, the key was open meanwhile to another test run on the
        # same server, whose FLUSHDB failed this one: `0.0 > 0`.)
        for _ in range(5):
            await asyncio.sleep(0)
        if sending.is_set():
            await refunded.wait()
        limiter._call = call  # type: ignore[method-assign]
        assert taken == [True]
        after = await limiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return after.wait

    assert asyncio.run(main()) > 0


@pytest.mark.parametrize("algorithm", AFTER_RESET)
@pytest.mark.parametrize("batching", [True, False])
def test_an_async_give_back_decided_before_a_reset_that_lands_after_it_gives_nothing_back(url: str, algorithm: str, batching: bool) -> None:
    # The give-back of a try_acquire cancelled in flight was decided (no
    # reset yet) and sent in a task of its own, on any connection of the
    # pool: nothing orders it before a reset made meanwhile, and landing
    # after the reset's UNLINK and the key's next unit, it freed that unit
    # (two units at once from a limit of one) but for the key's birth,
    # which it carries. Here it is held on its way until the reset and the
    # next try_acquire are done.
    async def main() -> tuple[list[bool], float]:
        now = 2_000_000_005.0
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(
            aclient, AFTER_RESET[algorithm](), prefix=_prefix(f"async-reset-order-{algorithm}-{batching}"), clock=lambda: now, batching=batching
        )
        task: Optional[asyncio.Future[Any]] = None
        call = limiter._call
        sending, held, refunded = asyncio.Event(), asyncio.Event(), asyncio.Event()
        taken: list[bool] = []

        async def hold_the_give_back(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            nonlocal task
            if args[1] == "refund":
                sending.set()
                await held.wait()  # on its way (a connection of the pool, say)
                reply = await call(keys, args, *rest)
                refunded.set()
                return reply
            reply = await call(keys, args, *rest)
            if args[1] == "acquire" and task is not None:
                task.cancel()  # the caller leaves while the reply is on its way
                task = None
            return reply

        limiter._call = hold_the_give_back  # type: ignore[method-assign]
        task = asyncio.ensure_future(limiter.try_acquire("k"))
        with pytest.raises(asyncio.CancelledError):
            await task
        await sending.wait()
        assert await limiter.reset("k")
        taken.append((await limiter.try_acquire("k", now=now)).allowed)
        held.set()
        await refunded.wait()
        limiter._call = call  # type: ignore[method-assign]
        after = await limiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return taken, after.wait

    taken, wait = asyncio.run(main())
    assert taken == [True]
    assert wait > 0


@pytest.mark.parametrize("algorithm", AFTER_RESET)
def test_an_async_cancel_made_while_a_reset_is_under_way_gives_nothing_back(url: str, algorithm: str) -> None:
    # cancel() found no reset counted yet (the reset's UNLINK in flight) and
    # sent its refund, which landed after the key was booked anew and freed
    # that booking's slot: the next caller got it too.
    async def main() -> tuple[float, bool, float]:
        now = 2_000_000_005.0
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, AFTER_RESET[algorithm](), prefix=_prefix(f"async-cancel-reset-{algorithm}"), clock=lambda: now)
        assert (await limiter.try_acquire("k")).allowed
        before = await limiter.reserve("k", max_wait=100)
        call, unlink = limiter._call, aclient.unlink
        booked = asyncio.Event()
        behind: list[Any] = []
        cancelling: list[asyncio.Future[None]] = []

        async def held_until_booked(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            if args[1] == "refund":
                await booked.wait()  # on its way until the key was booked anew
            return await call(keys, args, *rest)

        async def cancel_meanwhile(*keys: Any) -> Any:
            # Cancelled while the UNLINK is in flight: its task runs before the reply is read.
            cancelling.append(asyncio.ensure_future(before.cancel()))
            return await unlink(*keys)

        limiter._call = held_until_booked  # type: ignore[method-assign]
        aclient.unlink = cancel_meanwhile  # type: ignore[method-assign]
        assert await limiter.reset("k")
        aclient.unlink = unlink  # type: ignore[method-assign]
        assert (await limiter.try_acquire("k")).allowed
        behind.append(await limiter.reserve("k", max_wait=100))  # the slot `before` had
        booked.set()
        await cancelling[0]
        limiter._call = call  # type: ignore[method-assign]
        after = await limiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return behind[0].at, after.ok, after.at

    held, ok, after = asyncio.run(main())
    # Never beside `behind` (a log of one unit books no third instant at all).
    assert ok or algorithm == "sliding_window_log"
    assert not ok or after > held


def _give_back_of(limiter: RedisLimiter, how: str) -> Callable[[], None]:
    """The give-back of a call made on the fresh key "k" (at its first
    instant), for another thread to run: a reservation's ``cancel()``, what
    an ``acquire`` interrupted before its slot gives back (guarded), or what
    a batch's sender gives back for a caller that left during its round trip."""
    if how == "cancel":
        return limiter.reserve("k").cancel
    if how == "acquire interrupted":
        return limiter.reserve("k")._give_back
    keys = limiter._keys("k")
    answers, took = limiter._decide_taken("k", keys, "acquire", [1], None)
    return lambda: limiter._give_back(keys, [("k", 1, answers[0])], took)


GIVE_BACKS = ["cancel", "acquire interrupted", "batched caller"]


@pytest.mark.parametrize("algorithm", AFTER_RESET)
@pytest.mark.parametrize("how", GIVE_BACKS)
def test_a_give_back_begun_in_another_thread_before_a_reset_that_lands_after_it_gives_nothing_back(
    client: redis.Redis, algorithm: str, how: str
) -> None:
    # A give-back decided in one thread (no reset yet) goes on to Redis
    # whatever another thread's reset does meanwhile: landing after the
    # reset's UNLINK and the key's next unit, it freed that unit (two at
    # once from a limit of one) but for the key's birth, which it carries.
    # Here it is held on its way until the reset and the next try_acquire
    # are done.
    now = 2_000_000_005.0
    limiter = RedisLimiter(client, AFTER_RESET[algorithm](), prefix=_prefix(f"thread-reset-order-{algorithm}-{how}"), clock=lambda: now)
    give_back = _give_back_of(limiter, how)
    call = limiter._call
    sending, held = threading.Event(), threading.Event()

    def hold_the_give_back(keys: list[bytes], args: list[Any]) -> Any:
        if args[1] == "refund":
            sending.set()
            assert held.wait(10)  # on its way (a connection of the pool, say)
        return call(keys, args)

    limiter._call = hold_the_give_back  # type: ignore[method-assign]
    giver = threading.Thread(target=give_back)
    giver.start()
    assert sending.wait(10)
    assert limiter.reset("k")
    taken = [limiter.try_acquire("k").allowed]
    held.set()
    giver.join(10)
    limiter._call = call  # type: ignore[method-assign]
    assert taken == [True]
    after = limiter.reserve("k", max_wait=100)
    # The unit taken anew stays taken: the next one comes later.
    assert after.ok and after.wait > 0


@pytest.mark.parametrize("algorithm", AFTER_RESET)
@pytest.mark.parametrize("how", GIVE_BACKS)
def test_a_give_back_decided_while_another_threads_reset_is_under_way_gives_nothing_back(
    client: redis.Redis, algorithm: str, how: str
) -> None:
    # The reset's UNLINK had run, its reply not read yet (not counted): a
    # give-back decided then in another thread found no reset and sent its
    # refund, which landed after the key was taken anew and freed that unit.
    now = 2_000_000_005.0
    limiter = RedisLimiter(client, AFTER_RESET[algorithm](), prefix=_prefix(f"thread-reset-under-way-{algorithm}-{how}"), clock=lambda: now)
    give_back = _give_back_of(limiter, how)
    call, unlink = limiter._call, client.unlink
    unlinked, answer, sending, taken_anew = (threading.Event() for _ in range(4))

    def reply_on_its_way(*keys: Any) -> Any:
        held = unlink(*keys)
        unlinked.set()
        assert answer.wait(10)  # the reply on its way back
        return held

    def held_until_taken_anew(keys: list[bytes], args: list[Any]) -> Any:
        if args[1] == "refund":
            sending.set()
            assert taken_anew.wait(10)
        return call(keys, args)

    client.unlink = reply_on_its_way  # type: ignore[method-assign]
    limiter._call = held_until_taken_anew  # type: ignore[method-assign]
    found: list[bool] = []
    resetter = threading.Thread(target=lambda: found.append(limiter.reset("k")))
    resetter.start()
    assert unlinked.wait(10)
    giver = threading.Thread(target=give_back)
    giver.start()
    _until(lambda: sending.is_set() or not giver.is_alive())
    assert limiter.try_acquire("k", now=now)  # the key taken anew (the reset's reply still on its way)
    taken_anew.set()
    answer.set()
    resetter.join(10)
    giver.join(10)
    del client.unlink
    limiter._call = call  # type: ignore[method-assign]
    assert found == [True]
    after = limiter.reserve("k", max_wait=100)
    assert after.ok and after.wait > 0


def _after_it(limiter: RedisLimiter, key: bytes, before: RedisReservation, resetting: bool) -> None:
    """What a reset or give-back of ``limiter``'s key "k" that was
    interrupted leaves: if it was a reset whose UNLINK ran, ``before``, a
    booking at the key's first instant made before it, gives nothing back,
    and one made since, the first call since, does; then a later reset
    ends (in a thread of its own: were it to wait for ever, that would show
    here), and a booking made after it gives back."""
    if resetting and not limiter._client.exists(key):  # its UNLINK ran
        since = limiter.reserve("k")  # the key's first instant anew
        before.cancel()
        assert not limiter.peek("k").allowed, "a booking made before the reset gave back"
        since.cancel()
        assert limiter.peek("k").allowed, "a booking made since the reset gave nothing back"
    later = threading.Thread(target=limiter.reset, args=("k",), daemon=True)
    later.start()
    later.join(10)
    assert not later.is_alive(), "a later reset waits for the interrupted thread"
    booked = limiter.reserve("k")
    booked.cancel()
    assert booked.wait == 0 and limiter.reserve("k").wait == 0, "a booking made since gave nothing back"


@pytest.mark.parametrize("inside", ["reset", "give-back"])
def test_a_signal_handlers_reset_or_give_back_inside_one_of_the_same_keys_waits_for_nothing(
    client: redis.Redis, inside: str
) -> None:
    # A signal handler runs in the thread it interrupted, on top of what that
    # thread was doing: a give-back there during a reset of its keys (or a
    # reset during a give-back) waits for nothing, and the keys' births tell
    # what to give back.
    now = 2_000_000_005.0
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=_prefix(f"handler-{inside}"), clock=lambda: now)
    before = limiter.reserve("k")  # the key's first instant
    mine = limiter.reserve("k", max_wait=100)
    call, unlink = limiter._call, client.unlink
    handled: list[object] = []

    def handler() -> None:
        if inside == "give-back":
            handled.append(limiter.reset("k"))
        else:
            before.cancel()
            handled.append("cancelled")

    def unlink_with_a_signal(*keys: Any) -> Any:
        handler()  # as the UNLINK's reply is awaited
        return unlink(*keys)

    def refund_with_a_signal(keys: list[bytes], args: list[Any]) -> Any:
        if args[1] == "refund" and not handled:
            handler()
        return call(keys, args)

    if inside == "reset":
        client.unlink = unlink_with_a_signal  # type: ignore[method-assign]
        work: Callable[[], object] = lambda: limiter.reset("k")
    else:
        limiter._call = refund_with_a_signal  # type: ignore[method-assign]
        work = mine.cancel
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "it waits for what it interrupted"
    assert handled == (["cancelled"] if inside == "reset" else [True])
    vars(limiter).pop("_call", None)
    vars(client).pop("unlink", None)
    if inside == "reset":
        # The reset went on: `mine`, booked before it, gives nothing back.
        assert limiter.try_acquire("k")
        mine.cancel()
        assert limiter.reserve("k", max_wait=100).wait == pytest.approx(1.0)
    _after_it(limiter, limiter._keys("k")[0], before, resetting=False)


# The package's own code, where _interrupted_at interrupts.
_PACKAGE = os.path.dirname(ratekeeper.__file__)


def _interrupted_at(n: int, run: Callable[[], object]) -> bool:
    """Runs ``run()`` in this thread, with a KeyboardInterrupt raised at
    the ``n``-th place in the package's code where CPython raises an
    asynchronous exception (a signal handler's): as a function begins, and
    as a call it made returns (bpo-29988: never between a ``with``'s
    ``__enter__`` and its block, nor between the block and ``__exit__``),
    a call of redis-py's included. Whether it was raised (``n`` past the
    last place: not); raised, it is what ``run()`` raises (never swallowed)."""
    seen = 0

    def ours(frame: Optional[FrameType]) -> bool:
        return frame is not None and frame.f_code.co_filename.startswith(_PACKAGE)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal seen
        # A C call's events come in its caller's frame; a Python one's return, in its own.
        if (event in ("call", "c_return") and ours(frame)) or (event == "return" and ours(frame.f_back)):
            seen += 1
            if seen == n:
                raise KeyboardInterrupt

    raised = False
    # No garbage collected meanwhile: a finalizer it runs (redis-py's
    # parser's __del__, of a client an earlier test dropped) returns into
    # the package's frame it interrupted, which counts as a place, and the
    # KeyboardInterrupt raised there is ignored ("Exception ignored in").
    gc.collect()
    gc.disable()
    sys.setprofile(profile)
    try:
        run()
    except KeyboardInterrupt:
        raised = True
    finally:
        sys.setprofile(None)
        gc.enable()
    assert raised == (seen >= n)
    return raised


@pytest.mark.parametrize("what", ["reset", "give-back"])
def test_a_reset_or_give_back_interrupted_anywhere_leaves_later_ones_working(client: redis.Redis, what: str) -> None:
    # A thread interrupted (Ctrl-C, a signal handler's exception) in a reset
    # or a give-back, at each place in turn where CPython can raise one in
    # the package's code it runs through, leaves no later reset waiting for
    # it, and no give-back of a call made since dropped.
    now = 2_000_000_005.0
    resetting = what.startswith("reset")
    for n in range(1, 10_000):
        limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix=_prefix(f"anywhere-{n}"), clock=lambda: now)
        key = limiter._keys("k")[0]
        before = limiter.reserve("k")  # the key's first instant
        injected = _interrupted_at(n, (lambda: limiter.reset("k")) if resetting else before.cancel)
        _after_it(limiter, key, before, resetting)
        if not injected:
            break
    else:
        raise AssertionError("no end to the places")


def test_a_reset_of_another_key_leaves_a_booking_to_give_back(client: redis.Redis) -> None:
    # Per key, as in-process: a reset forgets the bookings of the keys it
    # found, not those of the others.
    now = 2_000_000_005.0
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix="rk-py-reset-other:", clock=lambda: now)
    assert limiter.try_acquire("k") and limiter.try_acquire("other")
    booked = limiter.reserve("k", max_wait=100)
    assert limiter.reset("other")
    booked.cancel()
    assert limiter.reserve("k", max_wait=100).wait == pytest.approx(1.0)


def test_a_reset_that_found_nothing_leaves_a_booking_to_give_back(client: redis.Redis) -> None:
    # A reset that found no key forgot nothing: the booking of another key
    # gives back.
    now = 2_000_000_005.0
    limiter = RedisLimiter(client, ratekeeper.Gcra(1, 1.0), prefix="rk-py-reset-none:", clock=lambda: now)
    unused = "unused"
    limiter.reset("k")
    assert limiter.try_acquire("k")
    booked = limiter.reserve("k", max_wait=100)
    assert not limiter.reset(unused)
    booked.cancel()
    assert limiter.reserve("k", max_wait=100).wait == pytest.approx(1.0)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_booking_made_before_a_reset_whose_reply_was_lost_gives_nothing_back(url: str, asynchronous: bool) -> None:
    # The UNLINK ran and its reply was lost (the connection dropped): the key
    # was forgotten all the same, and books its slots anew. Given back, the
    # booking made before the reset freed the one made since (two units at
    # once from a burst of one); the key's birth tells the new life apart.
    now = 2_000_000_005.0
    name = _prefix(f"reset-lost-{asynchronous}")

    def lost(unlink: Callable[..., Any]) -> Callable[..., Any]:
        if asynchronous:

            async def unlink_async(*keys: Any) -> Any:
                await unlink(*keys)
                raise redis.ConnectionError("the reply was lost")

            return unlink_async

        def unlink_sync(*keys: Any) -> Any:
            unlink(*keys)
            raise redis.ConnectionError("the reply was lost")

        return unlink_sync

    async def main() -> tuple[float, float]:
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 1.0), prefix=name, clock=lambda: now)
        assert (await limiter.try_acquire("k")).allowed
        before = await limiter.reserve("k", max_wait=100)
        aclient.unlink = lost(aclient.unlink)  # type: ignore[method-assign]
        with pytest.raises(redis.ConnectionError):
            await limiter.reset("k")
        del aclient.unlink
        assert (await limiter.try_acquire("k")).allowed
        behind = await limiter.reserve("k", max_wait=100)
        await before.cancel()
        after = await limiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return behind.wait, after.wait

    if asynchronous:
        behind, after = asyncio.run(main())
    else:
        sclient = redis.Redis.from_url(url)
        limiter = RedisLimiter(sclient, ratekeeper.Gcra(1, 1.0), prefix=name, clock=lambda: now)
        assert limiter.try_acquire("k")
        before = limiter.reserve("k", max_wait=100)
        sclient.unlink = lost(sclient.unlink)  # type: ignore[method-assign]
        with pytest.raises(redis.ConnectionError):
            limiter.reset("k")
        del sclient.unlink
        assert limiter.try_acquire("k")
        behind = limiter.reserve("k", max_wait=100).wait
        before.cancel()
        after = limiter.reserve("k", max_wait=100).wait
        sclient.close()
    # Behind the slot booked since, not in it.
    assert behind == pytest.approx(1.0) and after == pytest.approx(2.0)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_call_made_after_a_reset_gives_back(url: str, asynchronous: bool) -> None:
    # A reset counts against the calls sent before it, not those sent since:
    # counted against a booking made after it (or a call that took after
    # it, whose caller left), the units stayed taken, and the key admitted
    # less than its limit.
    now = 2_000_000_005.0
    name = _prefix(f"after-reset-{asynchronous}")

    async def main() -> tuple[float, bool]:
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 1.0), prefix=name, clock=lambda: now)
        assert (await limiter.try_acquire("k")).allowed
        assert await limiter.reset("k")
        assert (await limiter.try_acquire("k")).allowed
        booked = await limiter.reserve("k", max_wait=100)
        await booked.cancel()
        wait = (await limiter.reserve("k", max_wait=100)).wait
        # A try_acquire whose caller left while its reply was on its way.
        window = AsyncRedisLimiter(aclient, ratekeeper.FixedWindow(1, 10.0), prefix=name, clock=lambda: now)
        assert (await window.try_acquire("w")).allowed
        assert await window.reset("w")
        task: Optional[asyncio.Future[Any]] = None
        call = window._call
        refunded = asyncio.Event()

        async def taken_then_gone(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            reply = await call(keys, args, *rest)
            if args[1] == "acquire" and task is not None:
                task.cancel()  # the caller leaves while the reply is on its way
            elif args[1] == "refund":
                refunded.set()
            return reply

        window._call = taken_then_gone  # type: ignore[method-assign]
        task = asyncio.ensure_future(window.try_acquire("w"))
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(refunded.wait(), 5)
        window._call = call  # type: ignore[method-assign]
        free = (await window.peek("w")).allowed
        await aclient.aclose()
        return wait, free

    if asynchronous:
        wait, free = asyncio.run(main())
    else:
        sclient = redis.Redis.from_url(url)
        limiter = RedisLimiter(sclient, ratekeeper.Gcra(1, 1.0), prefix=name, clock=lambda: now)
        assert limiter.try_acquire("k")
        assert limiter.reset("k")
        assert limiter.try_acquire("k")
        limiter.reserve("k", max_wait=100).cancel()
        wait = limiter.reserve("k", max_wait=100).wait
        # What a batch's sender, in a thread of its own, gives back for a
        # caller that left, the call made after the reset.
        window = RedisLimiter(sclient, ratekeeper.FixedWindow(1, 10.0), prefix=name, clock=lambda: now)
        assert window.try_acquire("w")
        assert window.reset("w")
        keys = window._keys("w")
        answers, took = window._decide_taken("w", keys, "acquire", [1], None)
        assert answers[0].allowed
        sender = threading.Thread(target=window._give_back, args=(keys, [("w", 1, answers[0])], took))
        sender.start()
        sender.join(10)
        free = window.peek("w").allowed
        sclient.close()
    # The cancelled booking's slot, given back, is the next one's.
    assert wait == pytest.approx(1.0)
    assert free


@pytest.mark.parametrize("algorithm", AFTER_RESET)
def test_an_async_acquire_cancelled_while_it_sleeps_gives_nothing_back_once_the_limiter_reset_the_key(
    url: str, algorithm: str
) -> None:
    # As test_a_booking_made_before_a_reset_through_the_limiter_gives_nothing_back,
    # for the give-back of an async acquire cancelled while it sleeps until its slot.
    async def main() -> tuple[Any, Any]:
        now = 2_000_000_005.0
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, AFTER_RESET[algorithm](), prefix=_prefix(f"async-sleep-reset-{algorithm}"), clock=lambda: now)
        assert (await limiter.try_acquire("k")).allowed
        task = asyncio.ensure_future(limiter.acquire("k"))
        call = limiter._call
        booked = asyncio.Event()

        async def seen(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            reply = await call(keys, args, *rest)
            if args[1] == "reserve":
                booked.set()
            return reply

        limiter._call = seen  # type: ignore[method-assign]
        await asyncio.wait_for(booked.wait(), 5)
        limiter._call = call  # type: ignore[method-assign]
        for _ in range(5):  # the booking back in acquire, which sleeps until its slot
            await asyncio.sleep(0)
        assert await limiter.reset("k")
        assert (await limiter.try_acquire("k")).allowed
        behind = await limiter.reserve("k", max_wait=100)  # the slot booked before the reset
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await given_back()  # raised at once, its booking given back in a task of its own
        after = await limiter.reserve("k", max_wait=100)
        await aclient.aclose()
        return behind, after

    behind, after = asyncio.run(main())
    # Never beside `behind` (a log of one unit books no third instant at all).
    assert behind.ok and (after.ok or algorithm == "sliding_window_log")
    assert not after.ok or after.at > behind.at


async def _done_at_once(task: asyncio.Future[Any]) -> bool:
    """Whether ``task``, just cancelled, ends within a few turns of the loop
    (each a turn of every task ready to run), nothing else being answered."""
    for _ in range(20):
        if task.done():
            return True
        await asyncio.sleep(0)
    return task.done()


def _limiter_or_policy(kind: str, aclient: Any, prefix: str) -> tuple[Any, Any]:
    """An async limiter (``Gcra(1, 1.0)``) or a policy of that bucket and an
    hourly window, and the target of its key "k"; on a caller's clock that
    stands still (slots exact: a waiting acquire sleeps until cancelled)."""
    now = 2_000_000_005.0
    if kind == "limiter":
        return AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 1.0), prefix=prefix, clock=lambda: now), "k"
    config = [("rate", ratekeeper.Gcra(1, 1.0), ["user"]), ("hourly", ratekeeper.FixedWindow(100, 3600), ["user"])]
    return AsyncRedisPolicy(aclient, config, prefix=prefix, clock=lambda: now), {"user": "k"}


@pytest.mark.parametrize("kind", ["limiter", "policy"])
@pytest.mark.parametrize("during", ["round trip", "sleep"])
def test_an_async_acquire_cancelled_raises_at_once_and_gives_its_booking_back_in_a_task_of_its_own(
    url: str, kind: str, during: str
) -> None:
    # Cancelled during its booking's round trip, the acquire waited for
    # Redis's answer, then for its give-back's round trip, before raising;
    # cancelled while it slept until its slot, for its give-back's round
    # trip: an asyncio.wait_for or asyncio.timeout ran over by that much, and
    # for ever while Redis did not answer. It raises at once now, as the Node
    # client's acquire rejects at once on an abort; the booking (once its
    # reply comes, for one in flight) is given back in a task of its own:
    # the key's latest, all of it.
    async def main() -> tuple[bool, list[bool], float, float]:
        aclient = redis.asyncio.Redis.from_url(url)
        limiter, target = _limiter_or_policy(kind, aclient, _prefix(f"async-at-once-{kind}-{during}"))
        assert (await limiter.try_acquire(target)).allowed
        call, sleeps = limiter._call, limiter._core.sleeps
        cancel_now, answer = asyncio.Event(), asyncio.Event()
        refunded: list[bool] = []

        async def held(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            if args[1] == "refund":
                refunded.append(True)
                await answer.wait()  # on its way until the test lets it go
                return await call(keys, args, *rest)
            reply = await call(keys, args, *rest)  # Redis booked
            if args[1] == "reserve" and during == "round trip":
                cancel_now.set()
                await answer.wait()  # the reply on its way until the test lets it come
            return reply

        def signalled(reservation: Any, elapsed: Callable[[], float]) -> Any:
            for wait in sleeps(reservation, elapsed):
                cancel_now.set()  # sleeping until its slot
                yield wait

        limiter._call = held
        limiter._core.sleeps = signalled
        task = asyncio.ensure_future(limiter.acquire(target))
        await cancel_now.wait()
        task.cancel()
        at_once = await _done_at_once(task)
        answer.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await given_back()
        limiter._call = call
        first = await limiter.reserve(target, max_wait=100)
        second = await limiter.reserve(target, max_wait=100)
        await aclient.aclose()
        return at_once, refunded, first.wait, second.wait

    at_once, refunded, first, second = asyncio.run(main())
    assert at_once and refunded == [True]
    # The slot the cancelled acquire booked, a second on, is the next booking's.
    assert (first, second) == (1.0, 2.0)


@pytest.mark.parametrize("call", ["acquire", "reserve", "try_acquire", "try_acquire alone"])
def test_an_async_call_cancelled_while_redis_never_answers_raises_at_once_and_leaves_nothing_behind(
    url: str, call: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Redis never answers the call (a server that hangs, and no
    # socket_timeout): cancelled, the acquire waited for that answer for
    # ever. Each call raises at once; its round trip and give-back, in tasks
    # of their own, are cancelled with the loop as asyncio.run ends it: none
    # is left pending (which asyncio reports as "Task was destroyed but it
    # is pending"), kept, or with an error nobody retrieved.
    reported: list[dict[str, Any]] = []
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> bool:
        loops.append(asyncio.get_running_loop())
        loops[0].set_exception_handler(lambda loop, context: reported.append(context))
        aclient = redis.asyncio.Redis.from_url(url)
        limiter = AsyncRedisLimiter(aclient, ratekeeper.Gcra(1, 1.0), prefix=_prefix("async-never"), batching=call != "try_acquire alone")
        assert (await limiter.try_acquire("k")).allowed
        real = limiter._call
        sent = asyncio.Event()

        async def never(keys: list[bytes], args: list[Any], *rest: Any) -> Any:
            await real(keys, args, *rest)
            sent.set()
            await asyncio.Event().wait()  # the reply never comes

        limiter._call = never  # type: ignore[method-assign]
        calls: dict[str, Callable[[], Any]] = {
            "acquire": lambda: limiter.acquire("k"),
            "reserve": lambda: limiter.reserve("k", max_wait=100),
            "try_acquire": lambda: limiter.try_acquire("k"),
            "try_acquire alone": lambda: limiter.try_acquire("k"),
        }
        task = asyncio.ensure_future(calls[call]())
        await sent.wait()
        task.cancel()
        at_once = await _done_at_once(task)
        await aclient.aclose()
        return at_once

    gc.collect()  # what earlier tests left to collect is not this test's
    caplog.clear()
    with caplog.at_level("ERROR", logger="asyncio"):
        at_once = asyncio.run(main())
        gc.collect()
    assert at_once
    assert reported == [] and caplog.records == []
    assert not [task for task in list(ratekeeper.redis._async._TASKS) if task.get_loop() is loops[0]]


class _PerLoop:
    """An asyncio client of the server at ``url`` for each event loop that
    calls it (a redis.asyncio client belongs to the loop it first ran on),
    so that one store's calls on loops of several threads all reach Redis.
    ``hold_script_load``: a SCRIPT LOAD from another thread than the main
    one sets ``loading``, then waits until ``go_on`` is set."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.clients: dict[asyncio.AbstractEventLoop, redis.asyncio.Redis] = {}
        self.loading, self.go_on = threading.Event(), threading.Event()

    def _client(self) -> redis.asyncio.Redis:
        loop = asyncio.get_running_loop()
        if loop not in self.clients:
            self.clients[loop] = redis.asyncio.Redis.from_url(self.url)
        return self.clients[loop]

    def register_script(self, script: str) -> Any:
        return type("Script", (), {"sha": ratekeeper.redis.REDIS_SCRIPT_SHA})()

    async def evalsha(self, *args: Any) -> Any:
        return await self._client().evalsha(*args)

    async def eval(self, *args: Any) -> Any:
        return await self._client().eval(*args)

    async def script_load(self, script: str) -> Any:
        if threading.current_thread() is not threading.main_thread():
            self.loading.set()
            while not self.go_on.is_set():
                await asyncio.sleep(0.001)  # its loop stops meanwhile, and runs again once told
        return await self._client().script_load(script)

    async def unlink(self, *keys: bytes) -> Any:
        return await self._client().unlink(*keys)

    async def aclose(self) -> None:
        client = self.clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


def test_a_give_back_on_a_stopped_loop_whose_retry_lands_after_a_reset_gives_nothing_back(url: str, client: redis.Redis) -> None:
    # A give-back on another thread's event loop met a NOSCRIPT (the script
    # flushed), and its loop stopped while it loaded the script again: a
    # reset passed it over (its loop not running) and sent its UNLINK, the
    # key took its unit anew, and once that loop ran again the give-back's
    # retry freed that unit: two units at once from a limit of one. Its
    # retry carries the key's birth before the reset, and gives nothing back.
    now = 2_000_000_005.0
    store = _PerLoop(url)
    limiter = AsyncRedisLimiter(store, ratekeeper.Gcra(1, 60.0), prefix=_prefix("passed-over"), clock=lambda: now)
    other = asyncio.new_event_loop()

    async def book() -> Any:
        booked = await limiter.reserve("k")  # the key's one unit, now
        await store.aclose()
        return booked

    booked = asyncio.run(book())
    assert booked.ok and booked.wait == 0
    client.script_flush()
    giving: list[asyncio.Future[Any]] = []

    def give_back_until_it_loads() -> None:
        async def main() -> None:
            giving.append(asyncio.ensure_future(booked.cancel()))
            while not store.loading.is_set():
                await asyncio.sleep(0.001)

        other.run_until_complete(main())  # returns with the give-back loading the script

    thread = threading.Thread(target=give_back_until_it_loads)
    thread.start()
    thread.join(10)
    assert store.loading.is_set()

    async def reset_then_take() -> bool:
        assert await limiter.reset("k")  # passes the stopped loop's give-back over
        assert (await limiter.try_acquire("k")).allowed  # the key's unit, taken anew
        await store.aclose()
        return True

    assert asyncio.run(reset_then_take())

    def run_again() -> None:
        store.go_on.set()
        other.run_until_complete(giving[0])
        other.run_until_complete(store.aclose())
        other.close()

    thread = threading.Thread(target=run_again)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()

    async def after() -> bool:
        allowed = (await limiter.try_acquire("k")).allowed
        await store.aclose()
        return allowed

    assert not asyncio.run(after()), "the give-back freed the unit the key took after the reset"


# A signal handler that resets the key while the main thread cancels one
# booking after another (see the test below): run in a process of its own,
# so that a hang fails the test (on its timeout) rather than CI.
_HANDLER_RESETS = """
import signal, sys
import redis, ratekeeper
from ratekeeper.redis import RedisLimiter

limiter = RedisLimiter(redis.Redis.from_url(sys.argv[1]), ratekeeper.Gcra(10, 1.0), prefix=sys.argv[2])
handled, busy = 0, False

def handler(signum, frame):
    global handled, busy
    if busy:
        return  # one reset at a time: a signal during the handler's own goes by
    busy = True
    try:
        limiter.reset("k")
        handled += 1
    finally:
        busy = False

limiter.reserve("k").cancel()  # connected, the script loaded: the handler's calls import nothing
limiter.reset("k")
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
cancels = 0
try:
    while handled < 300 or cancels < 300:
        limiter.reserve("k").cancel()
        cancels += 1
finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
print(handled, cancels)
"""


def test_a_signal_handler_resetting_while_a_cancel_is_under_way_in_its_thread_does_not_hang(url: str) -> None:
    # A signal handler runs in the thread it interrupts, on top of what that
    # thread was doing. The sync client's give-backs were ordered with its
    # resets under a lock of the store's (not reentrant): a handler's reset
    # that interrupted a cancel() holding that lock waited for it for ever.
    # Ordered by the keys' births in Redis, neither takes a lock of the
    # store's: the process ends, however the signals fall.
    done = subprocess.run(
        [sys.executable, "-c", _HANDLER_RESETS, url, _prefix("handler-resets")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    handled, cancels = map(int, done.stdout.split())
    assert handled >= 300 and cancels >= 300
