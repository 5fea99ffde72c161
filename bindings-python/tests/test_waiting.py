"""acquire, acquire_async and acquiring: exact waits, FIFO, timeouts, refunds.

Exactness is measured on a fake clock (``clock=`` plus a ``time.sleep`` /
``asyncio.sleep`` that advances it); order, interrupts and cancellation on
the real clock, with real threads, signals and tasks.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import pytest
from limiters import ALL, FakeClock, Make

from ratekeeper import Acquiring, Gcra, LeakyBucket, RateLimited, SlidingWindowLog, TokenBucket


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


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_a_signal_during_a_real_sleep_refunds() -> None:
    class Alarm(Exception):
        pass

    def ring(signum: int, frame: object) -> None:
        raise Alarm

    bucket = TokenBucket(1, 1, 30)
    bucket.acquire()
    previous = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        started = time.monotonic()
        with pytest.raises(Alarm):
            bucket.acquire()  # would sleep 30 s
        assert time.monotonic() - started < 10
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # Given back: the next booking waits for the first refill, not a second one.
    assert not bucket.reserve(max_wait=0).ok
    assert 29 < bucket.peek().retry_after <= 30


# --- acquire with real threads --------------------------------------------


def test_threads_are_served_in_booking_order_at_the_rate() -> None:
    interval = 0.1
    bucket = TokenBucket(1, 1, interval)
    started = time.monotonic()
    bucket.acquire()  # the burst of 1; each thread below books one interval later
    finished: list[tuple[int, float]] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        bucket.acquire()
        with lock:
            finished.append((index, time.monotonic()))

    threads = []
    for index in range(4):
        waiting = bucket.peek().retry_after
        thread = threading.Thread(target=worker, args=(index,))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 5
        while bucket.peek().retry_after < waiting + interval / 2:  # until it has booked
            assert time.monotonic() < deadline, "a worker never booked"
            time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=10)
    assert [index for index, _ in finished] == [0, 1, 2, 3]
    for index, at in finished:
        assert at - started >= (index + 1) * interval  # never before its slot


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


def test_cancelling_a_waiting_task_refunds() -> None:
    async def main() -> None:
        bucket = TokenBucket(1, 1, 30)
        await bucket.acquire_async()
        task = asyncio.ensure_future(bucket.acquire_async())
        await asyncio.sleep(0.01)  # let it book and start sleeping
        assert bucket.peek().retry_after > 30
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert bucket.peek().retry_after <= 30

    asyncio.run(main())


def test_a_coroutine_never_awaited_books_nothing() -> None:
    bucket = TokenBucket(1, 1, 30, initial_tokens=0)
    before = bucket.peek(now=0)
    coroutine = bucket.acquire_async()
    coroutine.close()
    assert bucket.peek(now=0) == before


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
