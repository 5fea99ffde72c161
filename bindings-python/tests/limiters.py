"""Limiters shared by the tests: one of each algorithm, each admitting 5 at once;
and the clocks and sleeps the tests move by hand."""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Optional, Protocol

import pytest

from ratekeeper import (
    Bandwidth,
    FixedWindow,
    Gcra,
    LeakyBucket,
    Limiter,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)

Clock = Callable[[], float]


class Make(Protocol):
    """Builds a fresh limiter, on ``clock`` when given."""

    def __call__(self, clock: Optional[Clock] = None) -> Limiter: ...


# Each admits 5 units at once, and 5 more within a second or so. LeakyBucket
# is a queue (try_acquire admits only into an empty queue), so it is kept
# apart from the ones with a burst.
BURSTY: dict[str, Make] = {
    "token_bucket": lambda clock=None: TokenBucket(5, 5, 1, clock=clock),
    "token_bucket_2": lambda clock=None: TokenBucket.from_bandwidths(
        [Bandwidth(5, 5, 1), Bandwidth(50, 50, 60)], clock=clock
    ),
    "gcra": lambda clock=None: Gcra(5, 0.2, clock=clock),
    "gcra_per_period": lambda clock=None: Gcra.per_period(5, 5, 1, clock=clock),
    "sliding_window_log": lambda clock=None: SlidingWindowLog(5, 1, clock=clock),
    "sliding_window_counter": lambda clock=None: SlidingWindowCounter(5, 1, clock=clock),
    "fixed_window": lambda clock=None: FixedWindow(5, 1, clock=clock),
}
ALL: dict[str, Make] = {
    **BURSTY,
    "leaky_bucket": lambda clock=None: LeakyBucket(5, 0.2, clock=clock),
}


class FakeClock:
    """A clock for ``clock=``: reads ``now``; ``sleep`` advances it and records the call."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


class ThreadTime:
    """``time.monotonic`` made of ``now`` (seconds), and a ``time.sleep`` that
    moves it as a real one would, at once: a thread's sleeps on time, with no
    wait in real time. ``stop_after`` sleeps, the next raises ``Stopped``
    (for a call that would otherwise sleep for ever)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stop_after: int = 1000) -> None:
        self.now = 50.0
        self.sleeps: list[float] = []
        self.stop_after = stop_after
        monkeypatch.setattr(time, "monotonic", lambda: self.now)
        monkeypatch.setattr(time, "sleep", self.sleep)

    def sleep(self, seconds: float) -> None:
        if len(self.sleeps) == self.stop_after:
            raise Stopped(f"still waiting after {self.stop_after} sleeps")
        self.sleeps.append(seconds)
        self.now += seconds


class Stopped(Exception):
    """A sleep refused to a call that waits too many times."""


class LoopTime:
    """The running loop's clock, made of ``now`` (seconds), and an
    ``asyncio.sleep`` that moves it as a real one would, at once: a loop
    whose timers ran on time, with no wait in real time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 50.0
        self.sleeps: list[float] = []
        self.monkeypatch = monkeypatch
        self.turn = asyncio.sleep  # the loop's own
        monkeypatch.setattr(asyncio, "sleep", self.sleep)

    def install(self) -> None:
        """Makes the running loop's clock this one (from a coroutine on it)."""
        self.monkeypatch.setattr(asyncio.get_running_loop(), "time", lambda: self.now)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await self.turn(0)
