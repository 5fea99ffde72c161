"""Limiters shared between threads admit exactly their capacity, no more, no less."""

from __future__ import annotations

import threading
from typing import Callable, Optional

import pytest

from ratekeeper import (
    Decision,
    FixedWindow,
    Gcra,
    LeakyBucket,
    Limiter,
    RateLimited,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)

THREADS = 8
CALLS_PER_THREAD = 1_000  # 8,000 requests in all, for 1,000 units
CAPACITY = 1_000


def admit(limiter: Limiter, index: int, now: Optional[float]) -> bool:
    """One request, by one of three ways that must agree on what is admitted."""
    if isinstance(limiter, LeakyBucket):
        return limiter.reserve(now=now).ok  # a queue: joins it if there is room
    if index % 3 == 1:
        return limiter.reserve(max_wait=0, now=now).ok
    if index % 3 == 2 and now is None:
        try:
            limiter.acquire(timeout=0)
        except RateLimited:
            return False
        return True
    return limiter.try_acquire(1, now=now).allowed


def run_threads(work: Callable[[int], None]) -> None:
    """Runs ``work(index)`` in THREADS threads started together; raises what they raised."""
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            start.wait()
            work(index)
        except BaseException as error:  # surfaced in the main thread below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    assert not errors, errors


def hammer(limiter: Limiter, now: Optional[float]) -> list[int]:
    """Runs THREADS threads making requests; returns how many each was allowed."""
    admitted = [0] * THREADS

    def work(index: int) -> None:
        for _ in range(CALLS_PER_THREAD):
            if admit(limiter, index, now):
                admitted[index] += 1

    run_threads(work)
    return admitted


# Negligible refill: one unit per million seconds (the windows, aligned to
# the clock's zero, are a million seconds long).
FACTORIES: dict[str, Callable[[], Limiter]] = {
    "token_bucket": lambda: TokenBucket(CAPACITY, 1, 1e6),
    "gcra": lambda: Gcra(CAPACITY, 1e6),
    "leaky_bucket": lambda: LeakyBucket(CAPACITY, 1e6),
    "sliding_window_log": lambda: SlidingWindowLog(CAPACITY, 1e6),
    "sliding_window_counter": lambda: SlidingWindowCounter(CAPACITY, 1e6),
    "fixed_window": lambda: FixedWindow(CAPACITY, 1e6),
}


@pytest.mark.parametrize("now", [5.0, None], ids=["explicit_now", "monotonic_now"])
@pytest.mark.parametrize("make", FACTORIES.values(), ids=FACTORIES.keys())
def test_threads_admit_exactly_the_capacity(
    make: Callable[[], Limiter], now: Optional[float]
) -> None:
    limiter = make()
    admitted = hammer(limiter, now)
    assert sum(admitted) == CAPACITY
    final = limiter.peek(now=now)
    assert not final.allowed
    assert final.remaining == 0


@pytest.mark.parametrize("keep", ["every_decision", "every_other"])
@pytest.mark.parametrize(
    "make", [f for name, f in FACTORIES.items() if name != "leaky_bucket"],
    ids=[name for name in FACTORIES if name != "leaky_bucket"],
)
def test_decisions_held_by_threads_keep_their_numbers(
    make: Callable[[], Limiter], keep: str
) -> None:
    # A limiter answers its last Decision again once nobody holds it (see
    # src/recycle.rs): one that a thread holds must never change. Each
    # admission leaves a different `remaining`, so decisions overwritten by
    # another thread's would repeat a number or lose one.
    limiter = make()
    kept: list[list[Decision]] = [[] for _ in range(THREADS)]
    dropped = [0] * THREADS

    def work(index: int) -> None:
        for call in range(CALLS_PER_THREAD):
            decision = limiter.try_acquire(now=5.0)
            if keep == "every_decision" or call % 2 == 0:
                kept[index].append(decision)
            elif decision.allowed:
                dropped[index] += 1

    run_threads(work)
    decisions = [decision for own in kept for decision in own]
    remaining = sorted(decision.remaining for decision in decisions if decision.allowed)
    assert len(remaining) + sum(dropped) == CAPACITY
    assert len(set(remaining)) == len(remaining)
    assert set(remaining) <= set(range(CAPACITY))
    if keep == "every_decision":
        assert remaining == list(range(CAPACITY))
    assert all(d.remaining == 0 and d.retry_after > 0 for d in decisions if not d.allowed)
    assert len({id(decision) for decision in decisions}) == len(decisions)
