"""Limiters shared by the tests: one of each algorithm, each admitting 5 at once."""

from __future__ import annotations

from typing import Callable, Optional, Protocol

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
