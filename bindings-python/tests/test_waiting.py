"""acquire, acquire_async and acquiring: exact waits, FIFO, timeouts, refunds.

Exactness is measured on a fake clock (``clock=`` plus a ``time.sleep`` /
``asyncio.sleep`` that advances it); order, interrupts and cancellation with
real threads, signals and tasks, on a clock the test moves (or one standing
still) wherever a busy machine's delays would change the answer.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import os
import signal
import sys
import threading
import time
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator, Optional

import pytest
from limiters import ALL, FakeClock, LoopTime, Make, Stopped, ThreadTime

import ratekeeper
from ratekeeper import _wait
from ratekeeper import (
    Acquiring,
    Bandwidth,
    FixedWindow,
    Gcra,
    KeyedLimiter,
    LeakyBucket,
    Policy,
    RateLimited,
    RateLimitError,
    RateLimitTypeError,
    SlidingWindowLog,
    TokenBucket,
)


# --- acquire on a fake clock ----------------------------------------------


def test_acquire_sleeps_exactly_until_each_slot(clock: FakeClock) -> None:
    bucket = TokenBucket(2, 1, 0.25, clock=clock)
    for _ in range(5):
        bucket.acquire()
    assert clock.sleeps == [0.25, 0.25, 0.25]  # the burst of 2 never sleeps
    assert clock.now == 50.75
    bucket.acquire(cost=2)
    assert clock.sleeps[-1] == 0.5


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_every_algorithm_waits_its_retry_after(make: Make, clock: FakeClock) -> None:
    limiter = make(clock)
    full = limiter.limit - 1 if isinstance(limiter, LeakyBucket) else limiter.limit
    limiter.acquire(full)
    assert clock.sleeps == []
    expected = limiter.peek().retry_after
    assert expected > 0
    limiter.acquire()
    assert clock.sleeps == [expected]


def test_a_wait_beyond_timeout_raises_at_once_booking_nothing(clock: FakeClock) -> None:
    bucket = TokenBucket(1, 1, 1, clock=clock)
    bucket.acquire()
    before = bucket.peek()
    with pytest.raises(RateLimited) as raised:
        bucket.acquire(timeout=0.999)
    assert (raised.value.code, raised.value.retry_after) == ("rate_limited", 1.0)
    assert str(raised.value) == 'rate limit "default" exceeded: retry after 1 s'
    assert isinstance(raised.value, ValueError)
    assert clock.sleeps == [] and bucket.peek() == before
    bucket.acquire(timeout=1)  # a wait of exactly the timeout is fine
    assert clock.sleeps == [1.0]


def test_timeout_zero_never_sleeps(clock: FakeClock) -> None:
    log = SlidingWindowLog(2, 10, clock=clock)
    log.acquire(timeout=0)
    log.acquire(timeout=0)
    with pytest.raises(RateLimited) as raised:
        log.acquire(timeout=0)
    assert raised.value.retry_after == 10.0
    assert clock.sleeps == []


def test_a_full_queue_raises_even_without_timeout(clock: FakeClock) -> None:
    queue = LeakyBucket(2, 1, clock=clock)
    queue.acquire(2)
    with pytest.raises(RateLimited):
        queue.acquire()


def test_an_interrupted_sleep_gives_the_booking_back(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = TokenBucket(1, 1, 1, clock=clock)
    bucket.acquire()

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bucket.acquire()
    assert bucket.reserve().wait == 1.0  # the slot went back: the next booking gets it


@pytest.mark.parametrize(
    "make",
    [
        lambda c: TokenBucket(1, 1, 1, clock=c),
        lambda c: Gcra(1, 1.0, clock=c),
        lambda c: LeakyBucket(10, 1.0, clock=c),
        lambda c: ratekeeper.KeyedLimiter(TokenBucket(1, 1, 1, clock=c)),
        lambda c: ratekeeper.Policy.from_rates("1/second;1000/hour", clock=c),
    ],
    ids=["token_bucket", "gcra", "leaky_bucket", "keyed", "policy"],
)
def test_an_interrupted_sleep_with_a_waiter_behind_gives_nothing_back_from_the_middle(
    make: Callable[[FakeClock], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bucket keeps no record of single bookings: given back from the
    # middle of the queue, the interrupted booking freed the slot at its end,
    # and the next caller was booked into the slot of the thread still asleep
    # behind it (two units at once from a burst of one).
    clock = FakeClock(50.0)
    limiter = make(clock)
    args: tuple[Any, ...] = ("k",) if isinstance(limiter, ratekeeper.KeyedLimiter) else ()
    if isinstance(limiter, ratekeeper.Policy):
        args = (None,)
    limiter.try_acquire(*args)
    behind: list[ratekeeper.Reservation] = []

    def interrupted(seconds: float) -> None:
        behind.append(limiter.reserve(*args))  # another thread books behind, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        limiter.acquire(*args)
    assert behind[0].at == 52.0
    assert limiter.reserve(*args).at > behind[0].at  # never the slot of the one behind


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_a_signal_during_a_real_sleep_refunds() -> None:
    class Alarm(Exception):
        pass

    # The sleep is real; the limiter's clock stands still (float() is 0.0,
    # and runs no Python code, where a signal's handler could run), so that
    # the wait left once the booking is given back is exactly one refill,
    # however long the machine took (on the real clock a busy one let it drop
    # below the 29 s this asserted).
    bucket = TokenBucket(1, 1, 30, clock=float)
    bucket.acquire()

    def ring(signum: int, frame: object) -> None:
        # Only once the acquire below has booked (the next free slot is then
        # 60 s away): an alarm that came sooner, or one that arrived between
        # the booking and the sleep (handled only once the sleep ends, as
        # Python does), leaves it to the next, 50 ms later, to interrupt the
        # sleep. A single alarm 50 ms after the start did either whenever the
        # machine paused the test that long, and the sleep took 30 s.
        if bucket.peek().retry_after > 30:
            raise Alarm

    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
        with pytest.raises(Alarm):
            bucket.acquire()  # would sleep 30 s
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # Given back: the next booking waits for the first refill, not a second
    # one (a sleep no signal interrupted would have ended in the slot, and
    # the alarm been raised only then, the unit taken).
    assert not bucket.reserve(max_wait=0).ok
    assert bucket.peek().retry_after == 30


# --- acquire on a clock of its own -----------------------------------------


@pytest.mark.parametrize(("interval", "slept"), [(0.25, [0.25, 0.05]), (0.04, [0.04, 0.04, 0.04])])
@pytest.mark.parametrize("how", ["limiter", "keyed", "policy", "acquiring", "decorated"])
def test_acquire_on_a_clock_behind_time_monotonic_waits_for_its_slot_on_that_clock(
    monkeypatch: pytest.MonkeyPatch, interval: float, slept: list[float], how: str
) -> None:
    # The limiter's clock (clock=) counts in tenths of a second, the thread's
    # sleeps in exact time: a sleep until the slot on time.monotonic ends
    # short of it on the limiter's, 0.05 s short or not moved at all (as a
    # clock standing still). One time.sleep(wait) was trusted, and the call
    # returned before its slot there, where its try_acquire still refused.
    now = ThreadTime(monkeypatch)

    def coarse() -> float:
        return math.floor(round(now.now * 10, 9)) / 10

    subject: Any
    if how == "keyed":
        subject = KeyedLimiter(Gcra(1, interval, clock=coarse))
    elif how == "policy":
        subject = Policy(clock=coarse)
        subject.add("one", Gcra(1, interval))
    else:
        subject = Gcra(1, interval, clock=coarse)
    args: tuple[Any, ...] = ("k",) if how == "keyed" else (None,) if how == "policy" else ()
    subject.try_acquire(*args)
    if how == "acquiring":
        with subject.acquiring(1):
            pass
    elif how == "decorated":
        subject.acquiring(1)(lambda: None)()
    else:
        subject.acquire(*args)
    assert coarse() >= 50.0 + interval, f"let go at {coarse()} on its clock, before its slot"
    # Its own slot has come there: its try_acquire sees it too.
    assert subject.peek(*args, cost=0).allowed
    # Each sleep what was left on the limiter's clock: 0.05 s once it read
    # 50.2; 0.04 s again while it read 50.0, up to 50.12 (50.1 there).
    assert now.sleeps == pytest.approx(slept)


def test_acquire_on_a_clock_at_half_speed_sleeps_what_is_left_until_its_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that runs behind time.monotonic, at half its speed: each sleep
    # covers half of what was left there, and the call sleeps again for the
    # rest, until the slot has come on the limiter's clock.
    now = ThreadTime(monkeypatch)

    def slow() -> float:
        return 50.0 + (now.now - 50.0) / 2

    bucket = TokenBucket(1, 1, 0.25, clock=slow)
    bucket.try_acquire()
    left: list[float] = []
    sleep = now.sleep

    def sleep_what_is_left(seconds: float) -> None:
        left.append(50.25 - slow())
        sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep_what_is_left)
    bucket.acquire()
    # Its slot has come on its clock (counted in whole nanoseconds): the
    # next unit is a whole refill away.
    assert bucket.peek().retry_after == 0.25, "let go before its slot on its clock"
    assert now.sleeps[:3] == [0.25, 0.125, 0.0625]
    assert now.sleeps == pytest.approx(left, abs=1e-9)


def test_acquire_on_a_clock_standing_still_waits_and_gives_back_when_interrupted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A clock that never moves never reaches the slot: the thread sleeps
    # again and again (nothing cancels a thread, and `timeout` bounds the
    # booked wait, not this), until an exception ends the wait, which gives
    # its booking back. It returned after its first sleep, before its slot.
    now = ThreadTime(monkeypatch, stop_after=5)
    bucket = Gcra(1, 0.001, clock=lambda: 100.0)
    bucket.try_acquire()
    with pytest.raises(Stopped):
        bucket.acquire(timeout=1)
    assert now.sleeps == [0.001] * 5
    assert bucket.peek().retry_after == 0.001, "the booking was given back"


def test_acquire_ends_with_the_error_of_a_clock_that_raises_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    # Read again after the sleep, for what is left: its error ends the call,
    # and the booking is given back, as an interrupted one's is (it was
    # never read, and the call returned).
    now = ThreadTime(monkeypatch)
    failing = [False]

    def clock() -> float:
        if failing[0]:
            failing[0] = False
            raise OSError("the clock failed")
        return now.now

    sleep = now.sleep

    def sleep_then_fail(seconds: float) -> None:
        sleep(seconds)
        failing[0] = True

    monkeypatch.setattr(time, "sleep", sleep_then_fail)
    bucket = Gcra(1, 0.25, clock=clock)
    bucket.try_acquire()
    with pytest.raises(OSError, match="^the clock failed$"):
        bucket.acquire()
    assert now.sleeps == [0.25]
    assert bucket.peek().allowed, "the booking was given back"


def test_acquire_waits_on_the_limiters_clock_when_a_sleep_ends_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # A sleep that ends a millisecond short of the slot on the limiter's
    # clock (a replaced time.sleep, here): one trusted returned before it.
    clock = FakeClock(50.0)
    monkeypatch.setattr(time, "sleep", lambda seconds: clock.sleep(seconds - 0.001 if seconds > 0.001 else seconds))
    bucket = Gcra(1, 0.25, clock=clock)
    for _ in range(4):
        bucket.acquire()
        assert bucket.try_acquire(cost=0).allowed
        # Its own slot has come: one more now would be the next slot's.
        assert bucket.peek().retry_after > 0.24
    assert clock.now >= 50.75


def test_acquire_trusts_a_replaced_sleep_that_took_no_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test's time.sleep that skips the wait moves neither time.monotonic
    # nor the limiter's clock (the machine's): the call returns after it, as
    # it always did, rather than wait for the limiter's clock in earnest.
    sleeps: list[float] = []

    def skip(seconds: float) -> None:
        assert not sleeps, "slept again"
        sleeps.append(seconds)

    bucket = Gcra(1, 3600.0)
    bucket.try_acquire()
    monkeypatch.setattr(time, "sleep", skip)
    bucket.acquire()
    assert len(sleeps) == 1 and 3599 < sleeps[0] <= 3600


# --- acquire with real threads --------------------------------------------


class SteppedClock:
    """A clock for real threads: reads ``now``; ``sleep`` (for ``time.sleep``)
    records when it ends and blocks its thread until the test moves ``now``
    there, so that which thread wakes when is the test's doing, not the
    scheduler's."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.ends: list[float] = []
        self.asleep = 0
        self.changed = threading.Condition()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.changed:
            end = self.now + seconds
            self.ends.append(end)
            self.asleep += 1
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.now >= end)
            self.asleep -= 1

    def wait_asleep(self, count: int) -> None:
        """Returns once ``count`` threads sleep."""
        with self.changed:
            # A bound for a thread that never sleeps (a failure), not a time measured.
            assert self.changed.wait_for(lambda: self.asleep == count, timeout=60), f"{count} asleep: {self.asleep}"

    def advance_to(self, now: float) -> None:
        with self.changed:
            self.now = now
            self.changed.notify_all()


def test_threads_are_served_in_booking_order_at_the_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    # Real threads on a clock the test moves: on the real one, a machine too
    # busy to run the sleepers before several of their slots had come woke
    # them together, in whatever order the scheduler chose.
    interval = 0.25  # exact in binary: the slots are 50.25, 50.5, ...
    clock = SteppedClock(50.0)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    bucket = TokenBucket(1, 1, interval, clock=clock)
    bucket.acquire()  # the burst of 1; each thread below books one interval later
    finished: list[tuple[int, float]] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        bucket.acquire()
        with lock:
            finished.append((index, clock()))

    threads = []
    try:
        for index in range(4):
            thread = threading.Thread(target=worker, args=(index,), daemon=True)
            thread.start()
            threads.append(thread)
            clock.wait_asleep(index + 1)  # booked, in this order
        slots = [50.0 + (index + 1) * interval for index in range(4)]
        assert clock.ends == slots  # each sleeps until its slot, never less
        for index, thread in enumerate(threads):
            clock.advance_to(slots[index])
            thread.join(timeout=60)
            # Its slot wakes it alone: those booked after it sleep on.
            assert finished == list(zip(range(index + 1), slots))
            assert [t.is_alive() for t in threads] == [i > index for i in range(4)]
    finally:
        clock.advance_to(math.inf)  # a failure leaves no thread asleep


def test_daemon_threads_asleep_in_acquire_when_the_interpreter_exits_end_quietly() -> None:
    # CPython before 3.14 ends a daemon thread that takes the GIL back while
    # the interpreter finalizes with pthread_exit, which unwinds its stack.
    # acquire slept inside its native call: unwound through the binding's
    # frames, the process died (SIGSEGV) instead of exiting. Each thread's
    # sleep (replaced) ends during the collection that finalization makes.
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import gc, sys, threading, time
        import ratekeeper

        def limiter():
            gcra = ratekeeper.Gcra(1, 3600.0)
            gcra.try_acquire()
            gcra.acquire()

        def keyed():
            store = ratekeeper.KeyedLimiter(ratekeeper.Gcra(1, 3600.0))
            store.try_acquire("k")
            store.acquire("k")

        def policy():
            rates = ratekeeper.Policy.from_rates("1/hour")
            rates.try_acquire()
            rates.acquire()

        def decorated():
            call = ratekeeper.limit("1/hour")(lambda: None)
            call()
            call()

        waiters = [limiter, keyed, policy, decorated]
        asleep = threading.Semaphore(0)
        finalizing = threading.Event()
        real_sleep = time.sleep

        def sleep(seconds):
            asleep.release()
            finalizing.wait()

        time.sleep = sleep
        for waiter in waiters:
            threading.Thread(target=waiter, daemon=True).start()
        for _ in waiters:
            asleep.acquire()

        def collecting(phase, info):
            if sys.is_finalizing() and not finalizing.is_set():
                finalizing.set()  # the threads take the GIL back, and CPython ends them
                real_sleep(0.5)

        gc.callbacks.append(collecting)
        print("exiting", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "exiting\n"), done.stderr[-2000:]


# --- acquire_async --------------------------------------------------------


def test_acquire_async_sleeps_exactly_until_each_slot(clock: FakeClock) -> None:
    async def main() -> None:
        gcra = Gcra(1, 0.5, clock=clock)
        for _ in range(3):
            await gcra.acquire_async()
        with pytest.raises(RateLimited):
            await gcra.acquire_async(timeout=0.25)

    asyncio.run(main())
    assert clock.sleeps == [0.5, 0.5]


def test_tasks_are_served_in_order() -> None:
    async def main() -> list[int]:
        bucket = TokenBucket(1, 1, 0.05)
        done: list[int] = []

        async def worker(index: int) -> None:
            await bucket.acquire_async()
            done.append(index)

        started = time.monotonic()
        await asyncio.gather(*(worker(index) for index in range(4)))
        assert time.monotonic() - started >= 3 * 0.05
        return done

    assert asyncio.run(main()) == [0, 1, 2, 3]


async def cancel_while_waiting(bucket: TokenBucket, waiting: Awaitable[Any]) -> None:
    """Cancels `waiting` (a wait for one of `bucket`'s 30-second slots) while it sleeps."""
    task = asyncio.ensure_future(waiting)
    await asyncio.sleep(0.01)  # let it book and start sleeping
    assert bucket.peek().retry_after > 30
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bucket.peek().retry_after <= 30, "the booking was given back"


def test_cancelling_a_waiting_task_refunds() -> None:
    async def main() -> None:
        bucket = TokenBucket(1, 1, 30)
        await bucket.acquire_async()
        await cancel_while_waiting(bucket, bucket.acquire_async())

    asyncio.run(main())


def test_acquire_async_waits_on_the_limiters_clock_when_timers_fire_early(monkeypatch: pytest.MonkeyPatch) -> None:
    # uvloop's timers count in milliseconds and fire up to one early: an
    # acquire_async that trusted its sleep returned before its slot.
    clock = FakeClock(50.0)

    async def early_sleep(seconds: float) -> None:
        clock.sleep(seconds - 0.001 if seconds > 0.001 else seconds)

    monkeypatch.setattr(asyncio, "sleep", early_sleep)

    async def main() -> None:
        bucket = Gcra(1, 0.25, clock=clock)
        for _ in range(4):
            await bucket.acquire_async()
            assert bucket.try_acquire(cost=0).allowed
            # Its own slot has come: one more now would be the next slot's.
            assert bucket.peek().retry_after > 0.24

        assert clock.now >= 50.75

    asyncio.run(main())


def test_acquire_async_raises_what_a_replaced_sleep_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test's asyncio.sleep that fails (an assertion in it, say) fails the
    # call: its error went unheard, and the call returned as if it had slept.
    async def failing_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds}")

    monkeypatch.setattr(asyncio, "sleep", failing_sleep)
    bucket = Gcra(1, 0.25, clock=lambda: 50.0)
    bucket.try_acquire()
    with pytest.raises(AssertionError, match="^slept 0.25$"):
        asyncio.run(bucket.acquire_async())
    # Its booking was given back, as for any error during the wait.
    assert bucket.peek().retry_after == 0.25


@pytest.mark.parametrize(("interval", "slept"), [(0.25, [0.25, 0.05]), (0.04, [0.04, 0.04, 0.04])])
def test_acquire_async_on_a_clock_behind_its_loops_waits_for_its_slot_on_that_clock(
    monkeypatch: pytest.MonkeyPatch, interval: float, slept: list[float]
) -> None:
    # The limiter's clock (clock=) counts in tenths of a second, its loop's
    # in exact time: a sleep until the slot on the loop's clock ends short
    # of it on the limiter's, 0.05 s short (more than a timer's 2 ms early:
    # the sleep was trusted, and the call returned before its slot) or not
    # moved at all (as a clock standing still: trusted too). The JS acquire
    # waits on the limiter's clock, as the docs promise of both.
    loop = LoopTime(monkeypatch)

    def coarse() -> float:
        return math.floor(round(loop.now * 10, 9)) / 10

    async def main() -> None:
        loop.install()
        bucket = Gcra(1, interval, clock=coarse)
        bucket.try_acquire()
        await bucket.acquire_async()
        assert coarse() >= 50.0 + interval, f"let go at {coarse()} on its clock, before its slot"
        # Its own slot has come there: its try_acquire sees it too.
        assert bucket.try_acquire(cost=0).allowed

    asyncio.run(main())
    # Each sleep what was left on the limiter's clock: 0.05 s once it read
    # 50.2; 0.04 s again while it read 50.0, up to 50.12 (50.1 there).
    assert loop.sleeps == pytest.approx(slept)


def test_acquire_async_on_a_clock_standing_still_waits_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that never moves never reaches the slot: the call waits (sleep
    # after sleep on its loop, each of what is left) until cancelled, as the
    # JS acquire does, and gives its booking back then. It returned after
    # its first sleep, before its slot on that clock.
    loop = LoopTime(monkeypatch)

    async def main() -> None:
        loop.install()
        bucket = Gcra(1, 0.001, clock=lambda: 100.0)
        bucket.try_acquire()
        task = asyncio.ensure_future(bucket.acquire_async())
        while len(loop.sleeps) < 5 and not task.done():
            await loop.turn(0)
        assert not task.done(), f"returned after {len(loop.sleeps)} sleep(s), before its slot on its clock"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert bucket.peek().retry_after == 0.001, "the booking was given back"

    asyncio.run(main())
    assert set(loop.sleeps) == {0.001}


def test_acquire_async_trusts_a_replaced_sleep_that_took_no_time() -> None:
    # A test's asyncio.sleep that skips the wait moves neither the loop's
    # clock nor the limiter's (the machine's): the call returns after it, as
    # it always did, rather than wait for the limiter's clock in earnest.
    sleeps: list[float] = []

    async def skip(seconds: float) -> None:
        sleeps.append(seconds)

    async def main() -> None:
        bucket = Gcra(1, 3600.0)
        bucket.try_acquire()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(asyncio, "sleep", skip)
            await asyncio.wait_for(bucket.acquire_async(), 10.0)

    asyncio.run(main())
    assert len(sleeps) == 1 and 3599 < sleeps[0] <= 3600


def test_acquire_async_outside_asyncio_books_nothing() -> None:
    # Driven by another runner (no asyncio loop running), it raises before
    # booking: nothing is left booked.
    bucket = Gcra(1, 10.0, clock=lambda: 5.0)
    bucket.try_acquire()
    before = bucket.peek().retry_after
    coroutine = bucket.acquire_async()
    with pytest.raises(RuntimeError):
        coroutine.send(None)
    assert bucket.peek().retry_after == before


# The algorithms whose waiters move up (the core's moves_up), one unit a
# second, on a Timeline.
MOVERS = pytest.mark.parametrize(
    "make",
    [lambda c: Gcra(1, 1.0, clock=c), lambda c: LeakyBucket(10, 1.0, clock=c)],
    ids=["gcra", "leaky_bucket"],
)


class Timeline:
    """A clock for ``clock=`` and an ``asyncio.sleep`` that waits for it:
    sleepers wake, in order, when ``advance`` reaches their time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self.real_sleep = asyncio.sleep
        # Run once, at the next reading (then cleared): what another thread
        # might do at that moment.
        self.on_read: Optional[Callable[[], object]] = None

    def __call__(self) -> float:
        on_read, self.on_read = self.on_read, None
        if on_read is not None:
            on_read()
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await self.real_sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sleepers.append((self.now + seconds, len(self.sleepers), woken))
        await woken

    async def settle(self) -> None:
        for _ in range(5):
            await self.real_sleep(0)

    async def advance(self, to: float) -> None:
        self.now = to
        for at, _, woken in sorted(self.sleepers):
            if at <= to and not woken.done():
                woken.set_result(None)
        await self.settle()

    async def start(self, coroutine: Awaitable[None]) -> asyncio.Future[None]:
        """``coroutine`` as a task, run until it waits."""
        task = asyncio.ensure_future(coroutine)
        await self.settle()
        return task

    async def went_at(self, task: asyncio.Future[None]) -> float:
        """Advances to 1, 2, 3 and 4 s until ``task`` is done: when it went."""
        await self.settle()
        for t in (1.0, 2.0, 3.0, 4.0):
            await self.advance(t)
            if task.done():
                return t
        raise AssertionError("it never went")

    async def run_out(self, *tasks: asyncio.Future[None]) -> None:
        """Advances to 1, 2, 3, 4 and 5 s, then awaits ``tasks``."""
        for t in (1.0, 2.0, 3.0, 4.0, 5.0):
            await self.advance(t)
        await asyncio.gather(*tasks)


class CountingQueue(list[Any]):
    """A subject's queue of waiters that counts the waiters read by
    iterating it (``read``)."""

    read = 0

    def __iter__(self) -> Iterator[Any]:
        for waiter in super().__iter__():
            self.read += 1
            yield waiter


def test_waiters_served_at_once_each_leave_without_reading_the_whole_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that jumped ahead (a laptop asleep) serves every waiter at
    # once, in order: each that went took itself out by reading the whole
    # queue, n(n+1)/2 reads for n waiters (seconds for some thousands).
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    gcra = Gcra(1, 1.0, clock=timeline)
    gcra.try_acquire()
    count = 200

    async def main() -> CountingQueue:
        tasks = [asyncio.ensure_future(gcra.acquire_async()) for _ in range(count)]
        await timeline.settle()
        queue = CountingQueue(_wait._WAITING[id(gcra)])
        _wait._WAITING[id(gcra)] = queue
        await timeline.advance(24 * 3600.0)
        await asyncio.gather(*tasks)
        return queue

    queue = asyncio.run(main())
    assert id(gcra) not in _wait._WAITING
    assert queue == []
    assert queue.read <= 2 * count


@MOVERS
@pytest.mark.parametrize("intruding", [False, True], ids=["alone", "intruding"])
def test_cancelling_a_waiter_moves_up_those_behind(
    make: Callable[[Timeline], ratekeeper.Limiter], intruding: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bucket keeps no record of single bookings: given back from the middle
    # of the queue, a booking freed the slot at its end, and the next caller
    # shared a slot with the last waiter (two units at once from a burst of one).
    # Intruding: moving up gave every booking back, then booked each waiter
    # again, one native call each, and another thread's booking in between
    # (here made by the clock, read between them) took the freed first slot
    # ahead of the waiters. Now it is one step, and a booking made before it
    # keeps everyone where they are, the intruder behind them.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    intruder: list[ratekeeper.Reservation] = []

    async def main() -> dict[str, float]:
        limiter = make(timeline)
        limiter.try_acquire()
        done: dict[str, float] = {}

        async def waiter(label: str) -> None:
            await limiter.acquire_async()
            done[label] = timeline.now

        a, b, c = (asyncio.ensure_future(waiter(label)) for label in "abc")
        await timeline.settle()  # booked: a at 1, b at 2, c at 3
        if intruding:
            timeline.on_read = lambda: intruder.append(limiter.reserve(now=timeline.now))
        a.cancel()
        await timeline.settle()
        await timeline.run_out(b, c, await timeline.start(waiter("d")))
        assert a.cancelled()
        return done

    if intruding:
        assert asyncio.run(main()) == {"b": 2.0, "c": 3.0, "d": 5.0}
        assert [r.at for r in intruder] == [4.0]
    else:
        assert asyncio.run(main()) == {"b": 1.0, "c": 2.0, "d": 3.0}


@MOVERS
@pytest.mark.parametrize("between", ["reserve", "acquire", "reconfigure", "refused"])
def test_a_booking_no_waiter_holds_keeps_those_behind_in_their_slots(
    make: Callable[[Timeline], ratekeeper.Limiter], between: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reserve() held between two waiters (a thread's acquire alike): moving
    # the second up put it in the slot of that booking (two units at once
    # from a burst of one; a leaky queue refused it). After a reconfigure,
    # the slots were booked under another configuration. Nobody moves then.
    # A reservation refused books nothing: the waiter behind moves up.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> float:
        limiter = make(timeline)
        limiter.try_acquire()
        a = await timeline.start(limiter.acquire_async())  # at 1
        if between == "reserve":
            assert limiter.reserve().at == 2.0
        elif between == "acquire":
            # A thread's acquire, its sleep (time.sleep) ended at once: the
            # booking it made (the same `_book` as acquire_async's) holds 2.
            monkeypatch.setattr(time, "sleep", lambda seconds: None)
            limiter.acquire()
        elif between == "refused":
            assert not limiter.reserve(max_wait=0).ok
        else:
            limiter.reconfigure(make(timeline))
        b = await timeline.start(limiter.acquire_async())
        a.cancel()
        return await timeline.went_at(b)

    assert asyncio.run(main()) == {"reserve": 3.0, "acquire": 3.0, "reconfigure": 2.0, "refused": 1.0}[between]


@pytest.mark.parametrize("reset", ["held", "not_held"])
def test_a_reset_keeps_the_waiters_in_their_slots_unless_it_changed_nothing(
    reset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reset forgets the key's bookings: a waiter behind a cancelled one
    # then stays in its slot, as after a reconfigure. A reset of a key the
    # store does not hold changes nothing: the waiter moves up. (A policy's:
    # see test_a_policy_moves_its_waiters_up_only_while_nobody_else_booked_since.)
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> float:
        store = ratekeeper.KeyedLimiter(Gcra(1, 1.0, clock=timeline))
        store.try_acquire("k")
        a = await timeline.start(store.acquire_async("k"))  # at 1
        b = await timeline.start(store.acquire_async("k"))  # at 2
        assert store.reset("k" if reset == "held" else "other") is (reset == "held")
        a.cancel()
        return await timeline.went_at(b)

    assert asyncio.run(main()) == {"held": 2.0, "not_held": 1.0}[reset]


@MOVERS
@pytest.mark.parametrize("between", ["reserve", "reset", "acquire"])
@pytest.mark.parametrize("key", ["other", "k"])
def test_a_call_on_another_key_leaves_the_waiters_free_to_move_up(
    make: Callable[[Timeline], ratekeeper.Limiter], key: str, between: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A keyed limiter's waiters move up only while nobody else booked on
    # their key since (a reserve() held, a thread's acquire, a reset that
    # found it): then they stay in their slots. A call on another key
    # touches none of their key's state, and they move up; counted over the
    # whole store, it kept them in their slots too.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> float:
        store = ratekeeper.KeyedLimiter(make(timeline))
        store.try_acquire("k")
        store.try_acquire("other")
        a = await timeline.start(store.acquire_async("k"))  # at 1
        if between == "reserve":
            store.reserve(key)
        elif between == "reset":
            assert store.reset(key)
        else:

            def sleep(seconds: float) -> None:
                raise KeyboardInterrupt  # the thread gives up: its booking stays

            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(time, "sleep", sleep)
                with pytest.raises(KeyboardInterrupt):
                    store.acquire(key)
        b = await timeline.start(store.acquire_async("k"))
        a.cancel()
        return await timeline.went_at(b)

    went = asyncio.run(main())
    if key == "other":
        assert went == 1.0
    else:
        # Booked after a (at 2 s), b at 3 s. The thread's acquire, given
        # back as the latest, left b at 2 s, and b stays there. Reset, the
        # key is fresh, and b goes at once (told at the first second).
        assert went == {"reserve": 3.0, "reset": 1.0, "acquire": 2.0}[between]


@MOVERS
def test_a_waiter_of_another_key_is_in_a_queue_of_its_own(
    make: Callable[[Timeline], ratekeeper.Limiter], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each key is a queue: a waiter of another key is none of those behind a
    # cancelled one. Counted with them (one queue for the store), a booking
    # made on its key since (a reserve() held there) would keep the waiters
    # of the cancelled one's key in their slots, and its slot would go unused.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> dict[str, float]:
        store = ratekeeper.KeyedLimiter(make(timeline))
        store.try_acquire("k")
        store.try_acquire("other")
        done: dict[str, float] = {}

        async def waiter(label: str, key: str) -> None:
            await store.acquire_async(key)
            done[label] = timeline.now

        a = await timeline.start(waiter("a", "k"))  # at 1
        o = await timeline.start(waiter("o", "other"))  # at 1
        assert store.reserve("other").at == 2.0
        b = await timeline.start(waiter("b", "k"))  # at 2
        a.cancel()
        await timeline.settle()
        await timeline.run_out(o, b)
        return done

    assert asyncio.run(main()) == {"o": 1.0, "b": 1.0}


async def _cancel_then_book(limiter: ratekeeper.Limiter, timeline: Timeline, cancelled: str) -> dict[str, float]:
    """Waiters a, b, c, d booked in turn; those in ``cancelled`` cancelled in
    one pass of the loop; then e books: when each of the others went."""
    limiter.try_acquire()
    done: dict[str, float] = {}

    async def waiter(label: str) -> None:
        await limiter.acquire_async()
        done[label] = timeline.now

    tasks = {label: asyncio.ensure_future(waiter(label)) for label in "abcd"}
    await timeline.settle()
    for label in cancelled:
        tasks[label].cancel()
    await timeline.settle()
    tasks["e"] = asyncio.ensure_future(waiter("e"))
    await timeline.settle()
    for t in range(1, 12):
        await timeline.advance(float(t))
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    return done


def test_waiters_cancelled_together_move_up_to_their_latest_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each withdrawal books the later waiters again: a waiter moved twice
    # before its task ran must sleep until its latest slot, not its first.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    done = asyncio.run(_cancel_then_book(Gcra(1, 1.0, clock=timeline), timeline, "ab"))
    assert done == {"c": 1.0, "d": 2.0, "e": 3.0}


def test_waiters_cancelled_together_all_leave_at_the_first_withdrawal(monkeypatch: pytest.MonkeyPatch) -> None:
    # a and b cancelled in one pass: a's withdrawal gives b's booking back
    # with its own, takes b out, and moves c and d up at once. Were b booked
    # again with c and d (as a waiter staying), it would hold slot 1 until
    # its own withdrawal, and a booking made between the two (another
    # thread's reserve) would keep c and d behind b's slot, left unused.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> tuple[dict[str, float], list[float]]:
        limiter = Gcra(1, 1.0, clock=timeline)
        limiter.try_acquire()
        done: dict[str, float] = {}

        async def waiter(label: str) -> None:
            await limiter.acquire_async()
            done[label] = timeline.now

        tasks = {label: await timeline.start(waiter(label)) for label in "abcd"}  # at 1, 2, 3, 4
        between: list[float] = []
        tasks["a"].cancel()
        # Runs after a's withdrawal and before b's (each task runs in the
        # order it was cancelled).
        asyncio.get_running_loop().call_soon(lambda: between.append(limiter.reserve().at))
        tasks["b"].cancel()
        await timeline.settle()
        await timeline.run_out(tasks["c"], tasks["d"])
        return done, between

    assert asyncio.run(main()) == ({"c": 1.0, "d": 2.0}, [3.0])


def test_waiters_of_different_costs_move_up_in_their_order_with_their_own_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Booked again in their order, each waiter its own cost: booked in
    # another order, b (1 unit) would get the booking of c's 2 units, first,
    # and c the one unit after them, a second late.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> tuple[list[tuple[float, int]], dict[str, float]]:
        limiter = LeakyBucket(10, 1.0, clock=timeline)
        limiter.try_acquire()
        done: dict[str, float] = {}

        async def waiter(label: str, cost: int) -> None:
            await limiter.acquire_async(cost)
            done[label] = timeline.now

        a = await timeline.start(waiter("a", 1))  # at 1
        b = await timeline.start(waiter("b", 1))  # at 2
        c = await timeline.start(waiter("c", 2))  # at 3
        a.cancel()
        await timeline.settle()
        moved = [(w.reservation.at, w.reservation.cost) for w in _wait._WAITING[id(limiter)]]
        await timeline.run_out(b, c)
        return moved, done

    assert asyncio.run(main()) == ([(1.0, 1), (2.0, 2)], {"b": 1.0, "c": 2.0})


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is new in Python 3.11")
def test_a_task_that_once_caught_a_cancellation_still_moves_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its cancelling() count stays above 0 (no uncancel()): it must not be
    # taken for a waiter being cancelled with the one ahead, and left unbooked.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> dict[str, float]:
        limiter = Gcra(1, 1.0, clock=timeline)
        limiter.try_acquire()
        done: dict[str, float] = {}

        async def waiter(label: str) -> None:
            await limiter.acquire_async()
            done[label] = timeline.now

        async def caught_a_cancellation(label: str) -> None:
            try:
                await timeline.real_sleep(100)
            except asyncio.CancelledError:
                pass
            await waiter(label)

        a = await timeline.start(waiter("a"))
        b = await timeline.start(caught_a_cancellation("b"))
        b.cancel()
        await timeline.settle()
        c = await timeline.start(waiter("c"))
        a.cancel()
        await timeline.settle()
        await timeline.run_out(b, c, await timeline.start(waiter("d")))
        return done

    assert asyncio.run(main()) == {"b": 1.0, "c": 2.0, "d": 3.0}


def times_behind_a_cancelled_waiter(keys: tuple[object, object, object], monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """When waiters a, b and c (of ``keys``, each one key of the store,
    which admits one per second) and then d (of the first key) go, a
    cancelled before its slot: b, c and d each a second apart, b moved up
    into a's slot, when the three keys are one queue."""
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> dict[str, float]:
        store = ratekeeper.KeyedLimiter(Gcra(1, 1.0, clock=timeline))
        store.try_acquire(keys[0])  # type: ignore[arg-type]
        done: dict[str, float] = {}

        async def waiter(label: str, key: object) -> None:
            await store.acquire_async(key)  # type: ignore[arg-type]
            done[label] = timeline.now

        tasks = [asyncio.ensure_future(waiter(label, key)) for label, key in zip("abc", keys)]
        await timeline.settle()
        tasks[0].cancel()
        await timeline.settle()
        await timeline.run_out(*tasks[1:], await timeline.start(waiter("d", keys[0])))
        return done

    return asyncio.run(main())


def test_a_key_written_another_way_is_the_same_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    # 42, "42" and b"42" are one key of the store, so one queue of waiters.
    assert times_behind_a_cancelled_waiter((42, "42", b"42"), monkeypatch) == {"b": 1.0, "c": 2.0, "d": 3.0}


class OwnEncoding(str):
    """A str key that encodes itself otherwise: the store reads its text."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return b"not " + super().encode(encoding, errors)


class NeverEqual(bytes):
    """A bytes key unequal to everything, itself too: the store reads its bytes."""

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0


@pytest.mark.parametrize("odd", [OwnEncoding("42"), NeverEqual(b"42")], ids=["str encoding otherwise", "bytes never equal"])
def test_a_key_of_a_subclass_is_the_queue_of_its_value(odd: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # The queue was named by the key's own encode() or compared with its own
    # __eq__: the waiter behind a cancelled one, in another queue, kept its
    # slot while the one after it moved up into the same slot (two units at
    # once from a burst of one).
    assert times_behind_a_cancelled_waiter(("42", odd, "42"), monkeypatch) == {"b": 1.0, "c": 2.0, "d": 3.0}


@MOVERS
@pytest.mark.parametrize("between", ["cancelled", "of another key"])
def test_waiters_that_left_after_it_are_no_bookings_of_others(
    make: Callable[[Timeline], ratekeeper.Limiter], between: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counted as bookings of others (the events after it, less the waiters
    # still queued), they kept the waiters behind a cancelled one in their
    # slots, and its slot went unused.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> dict[str, float]:
        store = ratekeeper.KeyedLimiter(make(timeline))
        store.try_acquire("k")
        store.try_acquire("other")
        done: dict[str, float] = {}

        async def waiter(label: str, key: str = "k") -> None:
            await store.acquire_async(key)
            done[label] = timeline.now

        tasks = [await timeline.start(waiter("first"))]  # at 1
        a = await timeline.start(waiter("a"))  # at 2
        if between == "cancelled":
            gone = await timeline.start(waiter("gone"))  # at 3
        else:
            tasks.append(await timeline.start(waiter("other", "other")))  # at 1
        tasks.append(await timeline.start(waiter("b")))
        if between == "cancelled":
            gone.cancel()
        await timeline.advance(1.5)  # 'first' and 'other' go
        a.cancel()
        await timeline.settle()
        tasks.append(await timeline.start(waiter("c")))
        for t in (2.0, 3.0, 4.0, 5.0):
            await timeline.advance(t)
        await asyncio.gather(*tasks)
        return {label: at for label, at in done.items() if label in "bc"}

    assert asyncio.run(main()) == {"b": 2.0, "c": 3.0}


class Abandoning:
    """A clock for ``clock=`` on ``timeline`` that stands for a collection
    closing an abandoned ``acquire_async`` during a booking: while a
    cancellation's withdrawal runs (``cancel_closing``), reading it drops the
    last reference to the coroutines given to ``abandon``."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.abandoned: list[Any] = []
        self.armed = False

    def __call__(self) -> float:
        if self.armed:
            self.abandoned.clear()  # their last reference: closed now
        return self.timeline.now

    def abandon(self, coroutine: Any) -> None:
        """Runs ``coroutine`` (an ``acquire_async``) until it waits, and keeps its only reference."""
        coroutine.send(None)
        self.abandoned.append(coroutine)

    async def cancel_closing(self, task: asyncio.Future[Any]) -> None:
        """Cancels ``task``; its withdrawal's bookings close the abandoned coroutines."""
        self.armed = True
        task.cancel()
        await self.timeline.settle()
        self.armed = False
        assert not self.abandoned, "the abandoned acquire_async was closed during the withdrawal"


def test_a_withdrawal_during_another_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A collection during a withdrawal's booking may close an abandoned
    # acquire_async, whose own withdrawal then ran inside the first one: the
    # first went on with its list of waiters to book again, booked the
    # closed one's again and overwrote the bookings the inner one had made
    # (never given back: slots held for nobody).
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    clock = Abandoning(timeline)

    async def main() -> dict[str, float]:
        limiter = Gcra(1, 1.0, clock=clock)
        limiter.try_acquire()
        done: dict[str, float] = {}

        async def waiter(label: str) -> None:
            await limiter.acquire_async()
            done[label] = timeline.now

        a = await timeline.start(waiter("a"))  # at 1
        b = await timeline.start(waiter("b"))  # at 2
        clock.abandon(limiter.acquire_async())  # at 3
        d = await timeline.start(waiter("d"))  # at 4
        await clock.cancel_closing(a)
        await timeline.run_out(b, d)
        assert limiter.reserve().wait == 0, "nothing is booked for nobody"
        return done

    assert asyncio.run(main()) == {"b": 1.0, "d": 2.0}


def test_a_deferred_withdrawal_that_fails_is_reported_not_raised_in_another_task(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its coroutine is closed: its error went to the task whose withdrawal it
    # waited for, in place of that task's CancelledError.
    from ratekeeper import _wait

    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    clock = Abandoning(timeline)
    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: reported.append(args.exc_value))
    withdraw_now = _wait._withdraw_now
    calls = [0]

    def failing_second(subject: Any, waiter: Any) -> None:
        calls[0] += 1
        withdraw_now(subject, waiter)
        if calls[0] == 2:
            raise RuntimeError("the deferred one failed")

    monkeypatch.setattr(_wait, "_withdraw_now", failing_second)

    async def main() -> None:
        # Its waiters move up: the withdrawal reads the clock to book the
        # abandoned one again (a token bucket's reads none).
        limiter = Gcra(1, 1.0, clock=clock)
        limiter.try_acquire()
        a = await timeline.start(limiter.acquire_async())
        clock.abandon(limiter.acquire_async())
        await clock.cancel_closing(a)
        assert a.cancelled(), "cancelled, not failed with the deferred one's error"

    asyncio.run(main())
    assert calls[0] == 2
    assert [str(error) for error in reported] == ["the deferred one failed"]


def test_a_withdrawal_interrupted_while_deferred_ones_run_leaves_withdrawals_working(monkeypatch: pytest.MonkeyPatch) -> None:
    # A KeyboardInterrupt in a deferred withdrawal left the thread's record
    # of one under way: every later withdrawal on the thread was deferred to
    # it, for ever, and gave nothing back.
    from ratekeeper import _wait

    calls: list[object] = []

    def withdraw_now(subject: Any, waiter: Any) -> None:
        calls.append(waiter)
        if waiter == "outer":
            _wait._withdraw(subject, "nested")  # type: ignore[arg-type]
        elif waiter == "nested":
            raise KeyboardInterrupt

    monkeypatch.setattr(_wait, "_withdraw_now", withdraw_now)
    with pytest.raises(KeyboardInterrupt):
        _wait._withdraw(None, "outer")  # type: ignore[arg-type]
    _wait._withdraw(None, "later")  # type: ignore[arg-type]
    assert calls == ["outer", "nested", "later"]


@pytest.mark.parametrize("closing", ["before", "just then"])
def test_a_waiter_on_a_closed_loop_is_never_given_back_from_the_middle(closing: str) -> None:
    # b waits on another loop; a ahead of it is cancelled. Closed before:
    # booked again with the rest, then given back from the middle of the
    # queue, b's slot freed the one at its end, and c and the next caller
    # shared it (two units at once from a burst of one); now it is given
    # back with a's, in order, and c moves up past it. Closed just then (its
    # wake-up refused): its new booking goes unused, and closing its
    # coroutine later gave that booking back, from the middle, all the same.
    clock = [0.0]
    limiter = Gcra(1, 1.0, clock=lambda: clock[0])
    limiter.try_acquire()
    left: list[asyncio.Task[None]] = []
    loops: list[asyncio.AbstractEventLoop] = []

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Event loop is closed")

    def on_another_loop() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        left.append(loop.create_task(limiter.acquire_async()))  # b, at 2
        loop.run_until_complete(asyncio.sleep(0.01))
        if closing == "before":
            loop.close()
        else:
            setattr(loop, "call_soon_threadsafe", refuse)

    async def main() -> tuple[list[float], float]:
        a = asyncio.ensure_future(limiter.acquire_async())  # at 1
        await asyncio.sleep(0)
        worker = threading.Thread(target=on_another_loop)
        worker.start()
        worker.join()
        c = asyncio.ensure_future(limiter.acquire_async())  # at 3
        await asyncio.sleep(0)
        a.cancel()
        await asyncio.sleep(0)
        left[0].get_coro().close()  # what collecting the abandoned task does
        slots = [w.reservation.at for w in _wait._WAITING[id(limiter)]]
        booking = limiter.reserve()
        booking.cancel()
        c.cancel()
        await asyncio.gather(a, c, return_exceptions=True)
        return slots, booking.at

    try:
        expected = ([1.0], 2.0) if closing == "before" else ([2.0], 3.0)
        assert asyncio.run(main()) == expected
    finally:
        loops[0].close()


def test_a_waiter_moved_twice_before_its_loop_runs_is_woken_once() -> None:
    # a and b wait on a loop of another thread, c behind them on this one,
    # which is busy while a and then b are cancelled there: each withdrawal
    # books c again and wakes it, and the second wake-up finds the first's
    # future done, which it must not set again (InvalidStateError, reported
    # by c's loop as an exception in a callback).
    clock = [0.0]
    limiter = Gcra(1, 1.0, clock=lambda: clock[0])
    limiter.try_acquire()
    other = asyncio.new_event_loop()
    reported: list[dict[str, Any]] = []

    def on_the_other_loop(step: str) -> None:
        if step == "book":
            tasks[:] = [other.create_task(limiter.acquire_async()) for _ in "ab"]  # at 1 and 2
        else:
            for task in tasks:
                task.cancel()
                other.run_until_complete(asyncio.gather(task, return_exceptions=True))
        other.run_until_complete(asyncio.sleep(0))

    def in_a_thread(step: str) -> None:
        # Joined at once: this loop does not run meanwhile.
        worker = threading.Thread(target=on_the_other_loop, args=(step,))
        worker.start()
        worker.join()

    tasks: list[asyncio.Task[None]] = []

    async def main() -> list[float]:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context))
        in_a_thread("book")
        c = asyncio.ensure_future(limiter.acquire_async())  # at 3
        await asyncio.sleep(0)
        in_a_thread("cancel")
        await asyncio.sleep(0)
        slots = [w.reservation.at for w in _wait._WAITING[id(limiter)]]
        c.cancel()
        await asyncio.gather(c, return_exceptions=True)
        return slots

    try:
        assert asyncio.run(main()) == [1.0]
    finally:
        other.close()
    assert reported == []


def test_a_task_abandoned_on_a_closed_loop_is_collected_and_gives_back() -> None:
    # _WAITING held the waiter, and the waiter its task (and, through the
    # future that wakes it, the task again): a task left pending on a loop
    # closed since was never collected, its coroutine never closed, its
    # booking never given back, and the limiter, loop and task never freed.
    import gc
    import weakref

    # A clock standing still (the sleep is the loop's own): the wait left is
    # one refill exactly, however long the collection took.
    bucket = TokenBucket(1, 1, 30, clock=FakeClock())
    bucket.acquire()
    loop = asyncio.new_event_loop()
    task = loop.create_task(bucket.acquire_async())
    loop.run_until_complete(asyncio.sleep(0.01))
    loop.close()
    gone = weakref.ref(task)
    del task
    gc.collect()
    assert gone() is None
    assert id(bucket) not in _wait._WAITING
    assert bucket.reserve().wait == 30  # its booking was given back (else 60)


def test_a_clock_failing_in_a_withdrawal_moves_nobody_and_the_cancel_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clock is read before anything is given back: when it raises,
    # nobody moves, the cancelled waiter leaves the queue, its task ends
    # cancelled, and the error is reported as a finalizer's would be. (It
    # ended the task with the clock's error and left the waiter queued.)
    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: reported.append(args.exc_value))
    state = {"now": 0.0, "broken": False}

    def clock() -> float:
        if state["broken"]:
            raise RuntimeError("the clock broke")
        return state["now"]

    async def main() -> tuple[bool, int, float]:
        limiter = Gcra(1, 1.0, clock=clock)
        limiter.try_acquire()
        a = asyncio.ensure_future(limiter.acquire_async())  # at 1
        b = asyncio.ensure_future(limiter.acquire_async())  # at 2
        await asyncio.sleep(0.01)
        state["broken"] = True
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        state["broken"] = False
        queued = len(_wait._WAITING[id(limiter)])
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
        return a.cancelled(), queued, limiter.reserve().at

    # b stayed at 2 and was given back from there: the next slot is 2.
    assert asyncio.run(main()) == (True, 1, 2.0)
    assert [str(e) for e in reported] == ["the clock broke"]


def test_an_error_of_a_withdrawal_reaches_cpythons_own_unraisablehook(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # CPython's own hook (pytest replaces it while a test runs) takes only
    # its own argument type: handed another, it raised TypeError, which ended
    # the task in place of the cancellation and left the waiter queued. (The
    # clock is read to book the waiter behind it again: it raises there.)
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    state = {"broken": False}

    def clock() -> float:
        if state["broken"]:
            raise OSError("the clock broke")
        return 0.0

    async def main() -> None:
        gcra = Gcra(1, 0.05, clock=clock)  # its waiters move up
        gcra.try_acquire()
        a = asyncio.ensure_future(gcra.acquire_async())
        b = asyncio.ensure_future(gcra.acquire_async())
        await asyncio.sleep(0)
        state["broken"] = True
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        assert a.cancelled()
        state["broken"] = False
        assert len(_wait._WAITING[id(gcra)]) == 1  # b, still waiting
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
        assert id(gcra) not in _wait._WAITING

    asyncio.run(main())
    reported = capsys.readouterr().err
    assert reported.startswith("Exception ignored while an acquire_async was withdrawn:\n")
    assert "OSError: the clock broke" in reported


# Those that give a cancelled booking back without booking anyone again:
# a token bucket's, a keyed one's, a policy's with a bucket among several
# limits (each only while it is the latest of its keys), and a GCRA's or a
# leaky bucket's with nobody behind it. Each on `clock`, one unit a second,
# with its acquire_async arguments.
GIVERS = pytest.mark.parametrize(
    "make",
    [
        lambda c: (TokenBucket(1, 1, 1.0, clock=c), ()),
        lambda c: (TokenBucket(1, 1, 1.0, refill="interval", clock=c), ()),
        lambda c: (_keyed_on(c), ("k",)),
        lambda c: (Policy.from_rates("1/second;1000/hour", clock=c), (None,)),
        lambda c: (Policy.from_rates("1/second;1000/hour", by=["user"], clock=c), ({"user": "u"},)),
        lambda c: (Gcra(1, 1.0, clock=c), ()),
        lambda c: (LeakyBucket(10, 1.0, clock=c), ()),
    ],
    ids=["token_bucket", "interval", "keyed", "policy", "policy_by_user", "gcra", "leaky_bucket"],
)


def _keyed_on(clock: Callable[[], float]) -> KeyedLimiter:
    """A keyed token bucket, one unit a second, on ``clock``."""
    return KeyedLimiter(TokenBucket(1, 1, 1.0, clock=clock))


@GIVERS
def test_a_clock_failing_as_a_waiter_is_cancelled_still_gives_its_booking_back(
    make: Callable[[Callable[[], float]], tuple[Any, tuple[Any, ...]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Giving a booking back reads no clock: the JS acquire gives it back on
    # an abort whatever the clock does. Here the clock was read to book the
    # waiters behind, even with none there, and its error gave nothing back
    # (a token bucket's latest booking, and a GCRA's last, stayed taken:
    # the next slot was 2, not 1).
    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: reported.append(args.exc_value))
    state = {"broken": False}

    def clock() -> float:
        if state["broken"]:
            raise RuntimeError("the clock broke")
        return 0.0

    async def main() -> tuple[bool, float]:
        subject, args = make(clock)
        assert subject.try_acquire(*args).allowed
        task = asyncio.ensure_future(subject.acquire_async(*args))  # at 1
        await asyncio.sleep(0)
        assert len(_wait._WAITING[id(subject)]) == 1
        state["broken"] = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        state["broken"] = False
        assert id(subject) not in _wait._WAITING
        return task.cancelled(), subject.reserve(*args).at

    assert asyncio.run(main()) == (True, 1.0)  # given back: its slot is free
    assert reported == []


@GIVERS
def test_a_clock_failing_during_the_wait_gives_the_booking_back(
    make: Callable[[Callable[[], float]], tuple[Any, tuple[Any, ...]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The clock read after the sleep (what is left of the wait) raises: the
    # task ends with its error, and its booking is given back, as any
    # exception during the wait gives it back (and as the JS acquire does
    # when its timer's clock throws). It reported the clock's error a second
    # time, from the withdrawal, and kept the booking.
    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda args: reported.append(args.exc_value))
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    state = {"broken": False}

    def clock() -> float:
        if state["broken"]:
            raise RuntimeError("the clock broke")
        return timeline()

    async def main() -> float:
        subject, args = make(clock)
        assert subject.try_acquire(*args).allowed
        task = await timeline.start(subject.acquire_async(*args))  # at 1
        state["broken"] = True
        await timeline.advance(1.0)  # woken: reads the clock for what is left
        with pytest.raises(RuntimeError, match="the clock broke"):
            await task
        state["broken"] = False
        assert id(subject) not in _wait._WAITING
        at: float = subject.reserve(*args).at
        return at

    assert asyncio.run(main()) == 1.0
    assert reported == []


def test_a_window_algorithm_moves_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    # A window gives back only in the window it counts now: booking the later
    # waiters again would push each a window further.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    done = asyncio.run(_cancel_then_book(FixedWindow(1, 1.0, clock=timeline), timeline, "a"))
    assert done == {"b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}


def test_a_policy_of_one_limit_moves_its_waiters_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # As its limiter's do (a GCRA's). Of several limits, even buckets only
    # (what ratekeeper.limit("1/second;1000/hour") waits on), nobody moves:
    # each limit holds a booking until the slowest limit's slot, which
    # giving it back does not undo, so that a waiter booked again could land
    # later, or be refused (test_moving_up_never_moves_a_waiter_later_nor_fails_it).
    for rates, cancelled, went in [
        ("1/second", "a", {"b": 1.0, "c": 2.0, "d": 3.0, "e": 4.0}),
        ("1/second;1000/hour", "a", {"b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}),
        # The latest booking is given back: the next one takes its slot.
        ("1/second;1000/hour", "d", {"a": 1.0, "b": 2.0, "c": 3.0, "e": 4.0}),
    ]:
        timeline = Timeline()
        monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
        policy = ratekeeper.Policy.from_rates(rates, algorithm="gcra", clock=timeline)
        assert asyncio.run(_cancel_then_book(policy, timeline, cancelled)) == went  # type: ignore[arg-type]


# Policies of each kind, of one request a second and a thousand an hour,
# global limits both: buckets only, what rate strings make by default
# ("rates"), windows only, each booking given back where it was counted,
# and both mixed, given back only while it is the latest booking, as
# buckets of several limits are; and one of a single GCRA limit, whose
# waiters move up.
POLICIES: dict[str, Callable[[Timeline], Policy]] = {
    "one": lambda c: Policy.from_rates("1/second", algorithm="gcra", clock=c),
    "rates": lambda c: Policy.from_rates("1/second;1000/hour", clock=c),
    "gcra": lambda c: Policy.from_rates("1/second;1000/hour", algorithm="gcra", clock=c),
    "leaky": lambda c: _policy(c, LeakyBucket(10, 1.0), Gcra(1000, 3.6)),
    "windows": lambda c: Policy.from_rates("1/second;1000/hour", algorithm="fixed_window", clock=c),
    "mixed": lambda c: _policy(c, Gcra(1, 1.0), FixedWindow(1000, 3600.0)),
}


def _policy(clock: Timeline, second: ratekeeper.Limiter, hour: ratekeeper.Limiter) -> Policy:
    """A policy on ``clock`` of two global limits, ``second`` and ``hour``."""
    policy = Policy(clock=clock)
    policy.add("second", second)
    policy.add("hour", hour)
    return policy


async def _policy_waiters(policy: Policy, timeline: Timeline, cancelled: str) -> dict[str, float]:
    """Waiters a, b and c, each of a user of its own, booked in turn (at 1,
    2 and 3 s on a policy of one a second); ``cancelled`` cancelled; then d
    books: when each of the others went."""
    policy.try_acquire({"user": "first"})
    done: dict[str, float] = {}

    async def waiter(label: str) -> None:
        await policy.acquire_async({"user": label})
        done[label] = timeline.now

    tasks = {label: asyncio.ensure_future(waiter(label)) for label in "abc"}
    await timeline.settle()
    tasks[cancelled].cancel()
    await timeline.settle()
    tasks["d"] = asyncio.ensure_future(waiter("d"))
    await timeline.settle()
    for t in range(1, 8):
        await timeline.advance(float(t))
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    return done


@pytest.mark.parametrize("kind", POLICIES)
@pytest.mark.parametrize("cancelled", ["b", "c"], ids=["middle", "latest"])
def test_a_policys_waiters_move_up_as_the_js_policys_do(
    kind: str, cancelled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One limit that moves up: the waiters of every request (one queue: the
    # limit is shared) move up into the cancelled one's slot, c into b's
    # exact instant. Windows only: nobody moves, and the cancelled booking
    # is given back as its limits' refunds do (a fixed window only in the
    # window of the latest booking, c's: b's goes unused). Buckets of
    # several limits, or mixed: given back only while it is the latest
    # booking, else its slot goes unused.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    done = asyncio.run(_policy_waiters(POLICIES[kind](timeline), timeline, cancelled))
    if cancelled == "c":
        # The latest booking is given back on every policy: d takes its slot.
        assert done == {"a": 1.0, "b": 2.0, "d": 3.0}
    elif kind == "one":
        assert done == {"a": 1.0, "c": 2.0, "d": 3.0}
    else:
        assert done == {"a": 1.0, "c": 3.0, "d": 4.0}


@pytest.mark.parametrize(
    "between", ["reserve", "refused", "add_after", "add_before", "reset_held", "reset_not_held"]
)
def test_a_policy_moves_its_waiters_up_only_while_nobody_else_booked_since(
    between: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a limiter's, and the JS policy's: a reserve() held behind the
    # cancelled waiter, or a reset that found the key since (its bookings
    # forgotten, as a reconfigure), keeps everyone in their slots; so does a
    # limit added after the waiter behind booked: booked again, it would be
    # booked in that limit too, whose field ("ip") its request lacks (it
    # failed). A reservation refused, or a reset that found nothing: it
    # moves up (into a's slot, at 1 s). A limit added before the waiter
    # behind booked made a policy of two limits, which moves nobody: b
    # keeps its slot.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    request = {"user": "k"}

    async def main() -> tuple[float, float]:
        policy = Policy(clock=timeline)
        policy.add("per-user", Gcra(1, 1.0), by=["user"])
        policy.try_acquire(request)
        a = await timeline.start(policy.acquire_async(request))  # at 1
        if between == "reserve":
            assert policy.reserve(request).at == 2.0
        elif between == "refused":
            assert not policy.reserve(request, max_wait=0).ok
        elif between == "add_before":
            policy.add("burst-of-two", Gcra(2, 0.5))
        b = await timeline.start(policy.acquire_async(request))
        if between == "add_after":
            policy.add("per-ip", Gcra(5, 0.2), by=["ip"])
        elif between.startswith("reset"):
            assert policy.reset(request if between == "reset_held" else {"user": "other"}) == (between == "reset_held")
        a.cancel()
        await timeline.settle()
        (slot,) = [waiter.reservation.at for waiter in _wait._WAITING[id(policy)]]
        return slot, await timeline.went_at(b)

    slot = {
        "reserve": 3.0,
        "refused": 1.0,
        "add_after": 2.0,
        "add_before": 2.0,
        "reset_held": 2.0,
        "reset_not_held": 1.0,
    }
    assert asyncio.run(main()) == (slot[between], float(math.ceil(slot[between])))


def test_a_policy_gives_a_booking_back_as_it_gave_back_when_it_booked(monkeypatch: pytest.MonkeyPatch) -> None:
    # Booked on a policy of windows only, given back where it was counted
    # (a log at its instant), though a bucket added since makes the policy
    # a mix, whose bookings are given back only while the latest: as the JS
    # policy's waiter, told when it booked. Told when it was withdrawn, its
    # slot went unused (a reserve() held after it), and the next booking
    # went a window later.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> tuple[float, float]:
        policy = Policy(clock=timeline)
        policy.add("window", SlidingWindowLog(2, 1.0))
        policy.try_acquire(None, 2)
        a = await timeline.start(policy.acquire_async())  # at 1
        policy.add("bucket", Gcra(1000, 0.001))
        held = policy.reserve()
        a.cancel()
        await timeline.settle()
        return held.at, policy.reserve().at

    assert asyncio.run(main()) == (1.0, 1.0)


def test_a_waiter_booked_after_a_policy_came_to_mix_keeps_the_one_ahead_from_moving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a booked on a policy of buckets, b after a window limit was added (a
    # mix: b moves in no queue, and is never booked again). a's booking,
    # given back from the middle of the global bucket's queue, freed the
    # slot at its end: the next booking shared b's (two units at once from
    # a burst of one). Nobody moves, and a's slot goes unused.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> tuple[float, float]:
        policy = Policy(clock=timeline)
        policy.add("global", Gcra(1, 1.0))
        policy.try_acquire()
        a = await timeline.start(policy.acquire_async())  # at 1
        policy.add("hour", FixedWindow(1000, 3600.0))
        b = await timeline.start(policy.acquire_async())  # at 2
        a.cancel()
        await timeline.settle()
        return policy.reserve().at, await timeline.went_at(b)

    assert asyncio.run(main()) == (3.0, 2.0)


# Subjects whose booking, given back, does not leave them as they were
# before it (the core's moves_up false; core/tests/moves_up.rs): a token
# bucket takes the refill up to its slot, which its capacity clips, and
# gives back only the cost; a policy of several limits holds each limit
# until the slot of the slowest. Each admits one unit at once.
INEXACT: dict[str, tuple[Callable[[Timeline], Any], tuple[Any, ...]]] = {
    "policy_leaky": (lambda c: Policy.from_rates("10/second;100/minute", algorithm="leaky_bucket", clock=c), (None,)),
    "policy_mixed_speeds": (lambda c: _policy(c, Gcra(1, 1.0), LeakyBucket(10, 0.25)), (None,)),
    "bandwidths": (lambda c: TokenBucket.from_bandwidths([Bandwidth(1, 1, 0.25), Bandwidth(3, 1, 2.0)], clock=c), ()),
    "keyed_bandwidths": (
        lambda c: KeyedLimiter(TokenBucket.from_bandwidths([Bandwidth(1, 1, 0.25), Bandwidth(3, 1, 2.0)], clock=c)),
        ("k",),
    ),
}


@pytest.mark.parametrize("kind", INEXACT)
def test_moving_up_never_moves_a_waiter_later_nor_fails_it(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Booked again behind a cancelled waiter, the waiters behind it landed
    # later than they were (b from 0.5 s to 1.5 s on the bandwidths), or were
    # refused: a waiter without a timeout raised RateLimited (a leaky queue of
    # a policy still held the units given back). Nobody moves on these, and
    # the cancelled slot goes unused (given back only while it is the latest).
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)
    make, args = INEXACT[kind]

    async def main() -> tuple[list[float], list[float], list[object]]:
        subject = make(timeline)
        subject.try_acquire(*args)
        tasks = [await timeline.start(subject.acquire_async(*args)) for _ in range(3)]
        # The policy's leaky queue holds two (the third booking is refused).
        tasks = [task for task in tasks if not task.done()]
        before = [waiter.reservation.at for waiter in _wait._WAITING[id(subject)]]
        assert len(before) == len(tasks) >= 2
        tasks[0].cancel()
        await timeline.settle()
        after = [waiter.reservation.at for waiter in _wait._WAITING[id(subject)]]
        for t in range(1, 12):
            await timeline.advance(t / 2)
        return before, after, await asyncio.gather(*tasks[1:], return_exceptions=True)

    before, after, results = asyncio.run(main())
    assert results == [None] * len(after)
    assert after == before[1:]


@pytest.mark.parametrize("keyed", [False, True], ids=["limiter", "keyed"])
def test_a_token_buckets_waiters_keep_their_slots_and_its_latest_is_given_back(
    keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Emptied, refilled 3 every second: waiters of 1, 1, 1, 1 and 3 go at 1,
    # 1, 1, 2 and 3 s. The first cancelled, those behind moved up, and the
    # third landed at 2 s, later than it was (the refill the capacity
    # clipped is not given back: core/tests/moves_up.rs). Nobody moves now,
    # and the first's unit goes unused; the latest, cancelled, is given
    # back, and a booking made then takes its slot.
    timeline = Timeline()
    monkeypatch.setattr(asyncio, "sleep", timeline.sleep)

    async def main() -> tuple[list[float], list[float], float]:
        bucket = TokenBucket(3, 3, 1.0, refill="interval", clock=timeline)
        subject: Any = KeyedLimiter(bucket) if keyed else bucket
        args: tuple[Any, ...] = ("k",) if keyed else ()
        subject.try_acquire(*args, 3)
        tasks = [await timeline.start(subject.acquire_async(*args, cost)) for cost in (1, 1, 1, 1, 3)]
        before = [waiter.reservation.at for waiter in _wait._WAITING[id(subject)]]
        tasks[0].cancel()
        await timeline.settle()
        after = [waiter.reservation.at for waiter in _wait._WAITING[id(subject)]]
        tasks[-1].cancel()
        await timeline.settle()
        slot = subject.reserve(*args, 3).at
        for t in range(1, 6):
            await timeline.advance(float(t))
        await asyncio.gather(*tasks[1:-1])
        return before, after, slot

    before, after, slot = asyncio.run(main())
    assert before == [1.0, 1.0, 1.0, 2.0, 3.0]
    assert after == before[1:]
    assert slot == 3.0


def test_a_coroutine_never_awaited_books_nothing() -> None:
    bucket = TokenBucket(1, 1, 30, initial_tokens=0)
    before = bucket.peek(now=0)
    coroutine = bucket.acquire_async()
    coroutine.close()
    assert bucket.peek(now=0) == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_during_another_threads_booking_leaves_the_child_able_to_wait() -> None:
    # acquire_async books under one lock for every limiter. A fork while
    # another thread held it (its clock read during a booking, here slow)
    # copied it held into the child, where nobody would let it go: the
    # child's first acquire_async, of any limiter, waited forever.
    import subprocess
    import textwrap

    code = textwrap.dedent(
        """
        import asyncio, os, signal, threading, time
        import ratekeeper

        stalled = threading.Event()

        def clock():
            if not stalled.is_set():
                stalled.set()
                time.sleep(1.0)  # a booking under way: the lock held
            return 0

        limiter = ratekeeper.Gcra(1, 1.0, clock=clock)
        thread = threading.Thread(target=lambda: asyncio.run(limiter.acquire_async()))
        thread.start()
        stalled.wait()
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a child that hangs is ended, and says so by its status
            asyncio.run(ratekeeper.Gcra(1, 1.0).acquire_async())
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        thread.join()
        print(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr[-2000:]


# --- acquiring: context manager and decorator -------------------------------


def test_acquiring_as_context_managers(clock: FakeClock) -> None:
    bucket = TokenBucket(1, 1, 2, clock=clock)
    guard = bucket.acquiring(1)
    assert isinstance(guard, Acquiring)
    assert repr(guard) == "TokenBucket(capacity=1, refill_tokens=1, refill_period=2.0).acquiring(1, timeout=None)"
    with guard:
        pass
    with bucket.acquiring():
        pass

    async def main() -> None:
        async with bucket.acquiring():
            pass

    asyncio.run(main())
    assert clock.sleeps == [2.0, 2.0]
    with pytest.raises(RateLimited):
        with bucket.acquiring(timeout=0):
            raise AssertionError("not reached")


def test_leaving_the_block_by_an_exception_gives_nothing_back(clock: FakeClock) -> None:
    bucket = TokenBucket(1, 1, 2, clock=clock)
    with pytest.raises(ZeroDivisionError):
        with bucket.acquiring():
            1 / 0
    assert not bucket.peek().allowed


def test_acquiring_decorates_sync_and_async_functions(clock: FakeClock) -> None:
    bucket = TokenBucket(2, 1, 1, clock=clock)

    @bucket.acquiring(cost=2)
    def work(x: int, *, y: int = 1) -> int:
        """Adds."""
        return x + y

    @bucket.acquiring(timeout=0)
    async def work_async(x: int) -> int:
        """Doubles."""
        return 2 * x

    assert (work.__name__, work.__doc__) == ("work", "Adds.")
    assert (work_async.__name__, work_async.__doc__) == ("work_async", "Doubles.")
    assert work(1, y=2) == 3
    assert work(1) == 2
    assert clock.sleeps == [2.0]
    with pytest.raises(RateLimited):
        asyncio.run(work_async(1))
    clock.now += 1
    assert asyncio.run(work_async(4)) == 8


def test_acquiring_refuses_a_cost_above_the_limit_when_it_decorates(clock: FakeClock) -> None:
    # As ratekeeper.limit refuses it: else every call of the function raised.
    store = KeyedLimiter(TokenBucket(2, 1, 1, clock=clock))
    policy = Policy(clock=clock)
    policy.add("per-user", TokenBucket(2, 1, 1), by=["user"])
    for guard in (
        TokenBucket(2, 1, 1, clock=clock).acquiring(3),
        store.acquiring("alice", 3),
        policy.acquiring({"user": "alice"}, 3),
    ):
        with pytest.raises(RateLimitError, match="^`cost` 3 exceeds the limit 2, so it could never be allowed$") as raised:
            guard(lambda: None)
        assert raised.value.code == "cost_exceeds_limit"
    assert len(store) == 0


def test_what_is_not_callable_is_refused_when_decorated(clock: FakeClock) -> None:
    # Else each call took its units, then failed: a property decorated from
    # outside (the decorators in the wrong order) is one.
    bucket = TokenBucket(5, 1, 1, clock=clock)
    for decorator in (bucket.acquiring(), ratekeeper.limit(bucket, key=lambda: "k")):
        for not_callable in (property(lambda self: 1), None, 42):
            with pytest.raises(RateLimitTypeError, match=f"^`func` must be callable, not {type(not_callable).__name__}$") as raised:
                decorator(not_callable)  # type: ignore[arg-type]
            assert raised.value.code == "invalid_type"
    assert bucket.peek(0).remaining == 5


def test_an_object_with_an_async_call_is_decorated_as_a_coroutine_function(clock: FakeClock) -> None:
    class Doubler:
        async def __call__(self, x: int) -> int:
            return 2 * x

    double = TokenBucket(1, 1, 1, clock=clock).acquiring(timeout=0)(Doubler())
    assert inspect.iscoroutinefunction(double), "a sync wrapper would block the loop while it waits"
    assert asyncio.run(double(4)) == 8  # awaited in the wrapper, not returned unawaited
    with pytest.raises(RateLimited):
        asyncio.run(double(4))  # raised by the awaited wrapper, not at call time
    clock.now += 1
    assert asyncio.run(double(5)) == 10
    # So is a partial of one (of a partial): inspect reads neither as a coroutine function.
    triple = TokenBucket(1, 1, 1, clock=clock).acquiring(timeout=0)(functools.partial(functools.partial(Doubler()), 3))
    assert inspect.iscoroutinefunction(triple), "a sync wrapper would block the loop while it waits"
    assert asyncio.run(triple()) == 6


def test_static_and_class_methods_keep_their_kind(clock: FakeClock) -> None:
    limit = TokenBucket(2, 1, 1, clock=clock).acquiring(timeout=0)

    class Api:
        @limit
        @staticmethod
        async def fetch(x: int) -> int:
            return x

        @limit
        @classmethod
        def name(cls) -> str:
            return cls.__name__

    assert inspect.iscoroutinefunction(Api.fetch), "a sync wrapper would block the loop while it waits"
    assert asyncio.run(Api.fetch(3)) == 3
    assert Api.name() == "Api"
    with pytest.raises(RateLimited):
        Api.name()


# --- decorated generators and async generators ------------------------------


def test_decorated_generators_stay_generators(clock: FakeClock) -> None:
    bucket = TokenBucket(5, 1, 1, clock=clock)

    @bucket.acquiring()
    def counts(n: int) -> Iterator[int]:
        """Counts."""
        yield from range(n)

    @ratekeeper.limit(bucket)
    async def counts_async(n: int) -> AsyncIterator[int]:
        """Counts too."""
        for i in range(n):
            yield i

    assert inspect.isgeneratorfunction(counts) and not inspect.isasyncgenfunction(counts)
    assert inspect.isasyncgenfunction(counts_async) and not inspect.iscoroutinefunction(counts_async)
    assert (counts.__name__, counts.__doc__) == ("counts", "Counts.")
    assert (counts_async.__name__, counts_async.__doc__) == ("counts_async", "Counts too.")
    assert list(counts(3)) == [0, 1, 2]

    async def collect() -> list[int]:
        return [i async for i in counts_async(3)]

    assert asyncio.run(collect()) == [0, 1, 2]
    assert bucket.peek().remaining == 2  # one unit per call, not per value


def test_an_async_generator_waits_without_blocking_the_loop() -> None:
    interval = 0.2

    @ratekeeper.limit(Gcra(1, interval))
    async def one() -> AsyncIterator[str]:
        yield "value"

    async def main() -> tuple[int, float]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        assert [v async for v in one()] == ["value"]  # the burst of 1: no wait
        await asyncio.sleep(0)
        started, before = time.monotonic(), ticks
        assert [v async for v in one()] == ["value"]  # waits for the next slot
        waited, during = time.monotonic() - started, ticks - before
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return during, waited

    during, waited = asyncio.run(main())
    assert waited >= interval * 0.9
    # A blocked loop runs no other task during the wait; a free one runs the
    # ticker (about 20 times here, fewer on a busy machine: any is enough).
    assert during >= 1, f"the event loop ran {during} ticks in {waited:.2f} s: it was blocked"


def test_cancelling_an_async_generator_waiting_for_its_slot_refunds() -> None:
    bucket = TokenBucket(1, 1, 30)

    @bucket.acquiring()
    async def one() -> AsyncIterator[int]:
        yield 1

    async def main() -> None:
        assert [v async for v in one()] == [1]
        await cancel_while_waiting(bucket, one().__anext__())

    asyncio.run(main())


def test_an_async_generator_gets_what_is_sent_and_thrown_and_closes(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def blocking_sleep(seconds: float) -> None:
        raise AssertionError("time.sleep on the event loop")

    monkeypatch.setattr(time, "sleep", blocking_sleep)  # only asyncio.sleep may wait
    seen: list[object] = []

    @ratekeeper.limit(TokenBucket(1, 1, 1, clock=clock))
    async def echo() -> AsyncGenerator[object, object]:
        received: object = "start"
        try:
            while True:
                try:
                    received = yield received
                    seen.append(received)
                except KeyError as error:
                    seen.append(error)
                    received = "caught"
                await asyncio.sleep(0)  # awaits inside pass through to the loop
        finally:
            seen.append("closed")

    async def main() -> None:
        gen = echo()
        assert await gen.asend(None) == "start"
        assert await gen.asend("one") == "one"
        assert await gen.athrow(KeyError("k")) == "caught"
        with pytest.raises(ZeroDivisionError):
            await gen.athrow(ZeroDivisionError())  # not caught inside: ends it
        assert seen[-1] == "closed"
        seen.clear()
        other = echo()  # waits for the next slot (on the fake clock)
        assert await other.__anext__() == "start"
        await other.aclose()
        assert seen == ["closed"]

    asyncio.run(main())
    assert [seconds for seconds in clock.sleeps if seconds] == [1.0]  # the inner sleep(0)s aside


def test_an_async_generator_returning_early_and_its_value_errors(clock: FakeClock) -> None:
    @ratekeeper.limit(TokenBucket(5, 1, 1, clock=clock))
    async def short() -> AsyncIterator[int]:
        yield 1
        raise ValueError("inside")

    @ratekeeper.limit(TokenBucket(5, 1, 1, clock=clock))
    async def empty() -> AsyncIterator[int]:
        return
        yield 0  # pragma: no cover - makes it an async generator

    async def main() -> None:
        gen = short()
        assert await gen.__anext__() == 1
        with pytest.raises(ValueError, match="inside"):
            await gen.__anext__()
        assert [v async for v in empty()] == []

    asyncio.run(main())


def test_an_async_generator_takes_its_units_at_the_first_iteration(clock: FakeClock) -> None:
    window = FixedWindow(1, 60, clock=clock)

    @ratekeeper.limit(window, wait=False)
    async def once() -> AsyncGenerator[int, None]:
        yield 1

    async def main() -> None:
        first, second = once(), once()  # calling takes nothing and never raises
        assert window.peek(0).remaining == 1
        await second.aclose()  # closed before any iteration: took nothing
        assert window.peek(0).remaining == 1
        assert await first.__anext__() == 1
        assert window.peek(0).remaining == 0
        third = once()
        with pytest.raises(RateLimited):
            await third.__anext__()  # wait=False: the first iteration raises
        with pytest.raises(StopAsyncIteration):
            await third.__anext__()  # and it is over
        await first.aclose()

    asyncio.run(main())
    assert clock.sleeps == []


def test_a_generator_takes_its_units_at_the_first_iteration(clock: FakeClock) -> None:
    window = FixedWindow(1, 60, clock=clock)

    @window.acquiring(timeout=0)
    def once() -> Generator[int, None, None]:
        yield 1

    first, second = once(), once()  # calling takes nothing and never raises
    assert window.peek(0).remaining == 1
    second.close()
    assert window.peek(0).remaining == 1
    assert next(first) == 1
    assert window.peek(0).remaining == 0
    third = once()
    with pytest.raises(RateLimited):
        next(third)
    assert list(third) == []


def test_a_generator_waits_and_gets_what_is_sent_and_thrown(clock: FakeClock) -> None:
    seen: list[object] = []

    @ratekeeper.limit(TokenBucket(1, 1, 2, clock=clock))
    def echo() -> Generator[object, object, str]:
        received: object = "start"
        try:
            while received != "stop":
                try:
                    received = yield received
                except KeyError:
                    received = "caught"
        finally:
            seen.append("closed")
        return "done"

    gen = echo()
    assert next(gen) == "start"
    assert gen.send("one") == "one"
    assert gen.throw(KeyError("k")) == "caught"
    with pytest.raises(StopIteration) as stopped:
        gen.send("stop")
    assert stopped.value.value == "done" and seen == ["closed"]
    other = echo()
    assert next(other) == "start"  # after waiting for the next slot
    other.close()
    assert seen == ["closed", "closed"]
    assert clock.sleeps == [2.0]


def test_import_and_sync_waits_leave_asyncio_unimported() -> None:
    # asyncio was 54 of the 59 ms `import ratekeeper` took; a program that
    # never awaits (the CLI, a synchronous service) should not pay for it.
    import subprocess

    code = (
        "import sys, ratekeeper\n"
        "bucket = ratekeeper.TokenBucket(1, 1, 0.001)\n"
        "bucket.acquire(); bucket.acquire()\n"
        "ratekeeper.limit('1000/second')(lambda: None)()\n"
        "print(sorted(m for m in ('asyncio', 'inspect') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "['inspect']"  # the decorator looked at the function
