"""The Redis clients' waiting ``acquire`` on the caller's ``clock=``: it waits
until its slot has come on that clock, as the in-process ``acquire`` waits on
the limiter's (tests/test_waiting.py), sleeping again what is left there
after each sleep, with no other round trip.

No real time: ``time.monotonic`` and ``time.sleep`` (``ThreadTime``), or the
loop's clock and ``asyncio.sleep`` (``LoopTime``), are moved by the test, and
the caller's clock is made of them.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from typing import Any, Awaitable, Callable

import pytest
import redis
import redis.asyncio
from limiters import LoopTime, Stopped, ThreadTime
from redis_fixtures import client, given_back, url

from ratekeeper import Gcra
from ratekeeper.redis import AsyncRedisLimiter, AsyncRedisPolicy, RedisLimiter, RedisPolicy

__all__ = ["client", "url"]  # fixtures

KINDS = pytest.mark.parametrize("how", ["limiter", "policy"])
# One unit per `interval` on a clock counting tenths of a second: each sleep
# is what was left there, 0.05 s once it read 50.2; 0.04 s again while it
# read 50.0, up to 50.12 (50.1 there).
COARSE = pytest.mark.parametrize(("interval", "slept"), [(0.25, [0.25, 0.05]), (0.04, [0.04, 0.04, 0.04])])


def _made(client: Any, how: str, interval: float, clock: Callable[[], float]) -> tuple[Any, tuple[Any, ...]]:
    """A ``RedisLimiter`` or ``RedisPolicy`` (the async class for an asyncio
    ``client``) of one unit per ``interval`` on ``clock``, keys of its own;
    and the arguments of its calls before ``cost`` (a key, or a request)."""
    asynchronous = isinstance(client, redis.asyncio.Redis)
    prefix = f"rk-py-waiting:{uuid.uuid4().hex}:"
    if how == "limiter":
        limiter = AsyncRedisLimiter if asynchronous else RedisLimiter
        return limiter(client, Gcra(1, interval), prefix=prefix, clock=clock), ("k",)
    policy = AsyncRedisPolicy if asynchronous else RedisPolicy
    return policy(client, [("one", Gcra(1, interval), [])], prefix=prefix, clock=clock), (None,)


def _tenths(now: ThreadTime | LoopTime) -> Callable[[], float]:
    """A clock of ``now``'s time counting tenths of a second."""
    return lambda: math.floor(round(now.now * 10, 9)) / 10


def _half_speed(now: ThreadTime | LoopTime) -> Callable[[], float]:
    """A clock of ``now``'s time from 50 s on, at half its speed."""
    return lambda: 50.0 + (now.now - 50.0) / 2


def _acquired(store: Any, args: tuple[Any, ...], clock: Callable[[], float], slot: float) -> None:
    """``store``'s unit taken at once, then ``acquire``'s, booked at ``slot``
    on ``clock``: once it returns, that slot has come there."""
    assert store.try_acquire(*args)
    store.acquire(*args)
    assert clock() >= slot - 0.5e-6, f"let go at {clock()} on its clock, before its slot"
    assert store.peek(*args, cost=0).allowed, "its slot has not come on its clock"


async def _acquired_async(store: Any, args: tuple[Any, ...], clock: Callable[[], float], slot: float) -> None:
    """``_acquired`` on an async store."""
    assert await store.try_acquire(*args)
    await store.acquire(*args)
    assert clock() >= slot - 0.5e-6, f"let go at {clock()} on its clock, before its slot"
    assert (await store.peek(*args, cost=0)).allowed, "its slot has not come on its clock"


def _on_loop(url: str, loop: LoopTime, test: Callable[[redis.asyncio.Redis], Awaitable[None]]) -> None:
    """``test(client)``, an asyncio client of the server's, on a loop whose clock is ``loop``'s."""

    async def main() -> None:
        loop.install()
        aclient = redis.asyncio.Redis.from_url(url)
        try:
            await test(aclient)
        finally:
            await aclient.aclose()

    asyncio.run(main())


@COARSE
@KINDS
def test_acquire_on_a_clock_coarser_than_time_monotonic_waits_for_its_slot_on_that_clock(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch, interval: float, slept: list[float], how: str
) -> None:
    # A sleep until the slot on time.monotonic ends short of it on a clock
    # counting tenths, 0.05 s short or not moved at all: one time.sleep(wait)
    # was trusted, and the call returned before its slot there, where a
    # peek at that instant still refused.
    now = ThreadTime(monkeypatch)
    coarse = _tenths(now)
    _acquired(*_made(client, how, interval, coarse), coarse, 50.0 + interval)
    assert now.sleeps == pytest.approx(slept)


@KINDS
def test_acquire_on_a_clock_at_half_speed_sleeps_what_is_left_until_its_slot(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # Each sleep covers half of what was left on a clock running at half
    # time.monotonic's speed: the call sleeps again for the rest, until the
    # slot has come there (to the wire's µs).
    now = ThreadTime(monkeypatch)
    slow = _half_speed(now)
    _acquired(*_made(client, how, 0.25, slow), slow, 50.25)
    assert now.sleeps[:3] == [0.25, 0.125, 0.0625]


@COARSE
@KINDS
def test_async_acquire_on_a_clock_coarser_than_its_loops_waits_for_its_slot_on_that_clock(
    url: str, monkeypatch: pytest.MonkeyPatch, interval: float, slept: list[float], how: str
) -> None:
    # As the sync acquire, on a loop whose timers run on time.
    loop = LoopTime(monkeypatch)
    coarse = _tenths(loop)
    _on_loop(url, loop, lambda aclient: _acquired_async(*_made(aclient, how, interval, coarse), coarse, 50.0 + interval))
    # (A batch's sender yields with asyncio.sleep(0): no wait of the call's.)
    assert [s for s in loop.sleeps if s] == pytest.approx(slept)


@KINDS
def test_async_acquire_on_a_clock_at_half_speed_sleeps_what_is_left_until_its_slot(
    url: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    loop = LoopTime(monkeypatch)
    slow = _half_speed(loop)
    _on_loop(url, loop, lambda aclient: _acquired_async(*_made(aclient, how, 0.25, slow), slow, 50.25))
    assert [s for s in loop.sleeps if s][:3] == [0.25, 0.125, 0.0625]


def test_acquire_on_a_clock_standing_still_waits_until_interrupted_and_gives_its_booking_back(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock that never moves never reaches the slot: the thread sleeps
    # again and again (`timeout` bounds the wait booked, not this), until an
    # exception ends the wait, which gives its booking back, as in-process.
    # It returned after its first sleep, before its slot on that clock.
    now = ThreadTime(monkeypatch, stop_after=5)
    limiter, _ = _made(client, "limiter", 0.001, lambda: 100.0)
    assert limiter.try_acquire("k")
    with pytest.raises(Stopped):
        limiter.acquire("k", timeout=1)
    assert now.sleeps == [0.001] * 5
    # Kept, the booking would put the next unit 2 ms away.
    assert limiter.peek("k").retry_after == 0.001, "the booking was not given back"


class _Failing:
    """A clock of ``now``'s time that raises once, the next time it is read
    once ``failing`` is set (the give-back reads it again, for its refund)."""

    def __init__(self, now: ThreadTime | LoopTime) -> None:
        self.now = now
        self.failing = False

    def __call__(self) -> float:
        if self.failing:
            self.failing = False
            raise OSError("the clock failed")
        return self.now.now


def test_acquire_ends_with_the_error_of_a_clock_that_raises_while_it_waits_and_gives_its_booking_back(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read again after the sleep, for what is left: its error ends the call,
    # and the booking is given back, as an interrupted one's is (the clock
    # was never read again, and the call returned).
    now = ThreadTime(monkeypatch)
    clock = _Failing(now)
    sleep = now.sleep

    def sleep_then_fail(seconds: float) -> None:
        sleep(seconds)
        clock.failing = True

    monkeypatch.setattr(time, "sleep", sleep_then_fail)
    limiter, _ = _made(client, "limiter", 0.25, clock)
    assert limiter.try_acquire("k")
    with pytest.raises(OSError, match="^the clock failed$"):
        limiter.acquire("k")
    assert now.sleeps == [0.25]
    # Kept, the booking would hold the key until 50.5.
    assert limiter.peek("k").allowed, "the booking was not given back"


def test_async_acquire_ends_with_the_error_of_a_clock_that_raises_while_it_waits_and_gives_its_booking_back(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = LoopTime(monkeypatch)
    clock = _Failing(loop)
    sleep = loop.sleep

    async def sleep_then_fail(seconds: float) -> None:
        await sleep(seconds)
        if seconds:  # not a batch's sender's turn
            clock.failing = True

    monkeypatch.setattr(asyncio, "sleep", sleep_then_fail)

    async def test(aclient: redis.asyncio.Redis) -> None:
        limiter, _ = _made(aclient, "limiter", 0.25, clock)
        assert await limiter.try_acquire("k")
        with pytest.raises(OSError, match="^the clock failed$"):
            await limiter.acquire("k")
        await given_back()  # raised at once, its booking given back in a task of its own
        assert (await limiter.peek("k")).allowed, "the booking was not given back"

    _on_loop(url, loop, test)
    assert [s for s in loop.sleeps if s] == [0.25]


def test_acquire_on_the_servers_clock_sleeps_once(client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # The slot is on the server's clock (TIME, read by the script), which
    # only another round trip would read again: one sleep, of the wait
    # booked (see _Core.sleeps). Passes before the caller's clock was read
    # again too: it pins the choice.
    now = ThreadTime(monkeypatch)
    limiter = RedisLimiter(client, Gcra(1, 60.0), prefix=f"rk-py-waiting:{uuid.uuid4().hex}:")
    assert limiter.try_acquire("k")
    limiter.acquire("k")
    assert len(now.sleeps) == 1 and 59 < now.sleeps[0] <= 60


def test_acquire_on_the_callers_clock_trusts_a_replaced_sleep_that_took_no_time(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A test's time.sleep that skips the wait moves neither time.monotonic
    # nor the caller's clock (the machine's): the call returns after it, as
    # the in-process acquire does (and as it always did), rather than wait
    # for that clock in earnest.
    sleeps: list[float] = []

    def skip(seconds: float) -> None:
        assert not sleeps, "slept again"
        sleeps.append(seconds)

    limiter = RedisLimiter(client, Gcra(1, 3600.0), prefix=f"rk-py-waiting:{uuid.uuid4().hex}:", clock=time.time)
    assert limiter.try_acquire("k")
    monkeypatch.setattr(time, "sleep", skip)
    limiter.acquire("k")
    assert len(sleeps) == 1 and 3599 < sleeps[0] <= 3600
