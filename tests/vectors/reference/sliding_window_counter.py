"""A sliding-window counter kept as a plain list of every admitted or booked event,
forever; the estimate is an exact Fraction from the two window sums, recounted."""
from __future__ import annotations

from fractions import Fraction
from math import ceil

from .common import MS, S, check_cost, count, decision, duration, positive, scenario

U64 = 2**64 - 1


class NaiveSlidingWindowCounter:
    def __init__(self, config: dict):
        limit, window = count(config["limit"], "limit"), duration(config["window_ns"], "window")
        self.limit, self.window = positive(limit, "limit"), positive(window, "window")
        self.events: list[list[int]] = []  # [time, cost]: admitted at the latest time, booked at the slot
        self.latest = 0
        self.floor = 0  # the latest booked slot: nothing is served before it

    def sum(self, k: int) -> int:
        total = 0
        for t, c in reversed(self.events):  # times never decrease: stop before window k
            if t < k * self.window:
                break
            total += c if t // self.window == k else 0
        return total

    def at(self) -> int:
        return max(self.latest, self.floor)

    def estimate(self, t: int) -> Fraction:
        """prev * (window - e) / window + current, at e ns into t's window."""
        k, e = divmod(t, self.window)
        return Fraction(self.sum(k - 1) * (self.window - e), self.window) + self.sum(k)

    def first(self, cost: int) -> int:
        """The first instant from at() on where the estimate admits `cost`; the
        estimate only falls with time, so a binary search finds it."""
        lo, hi = self.at(), (self.at() // self.window + 2) * self.window
        while lo < hi:
            mid = (lo + hi) // 2
            if self.estimate(mid) + cost <= self.limit:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _decide(self, now: int, cost: int):
        check_cost(cost, self.limit)
        self.latest = max(self.latest, now)
        fits = self.first(cost)
        allowed = cost == 0 or (self.latest >= self.floor and fits == self.at())
        return allowed, fits

    def _decision(self, now: int, allowed: bool, fits: int) -> dict:
        fresh = self.first(self.limit)  # the estimate is zero
        if fresh == self.at():
            fresh = 0
        if self.latest < self.floor:
            fresh = max(fresh, self.floor)
        remaining = max(0, self.limit - ceil(self.estimate(self.at()))) if self.latest >= self.floor else 0
        return decision(allowed, remaining, self.limit, 0 if allowed else min(fits - now, U64),
                        min(max(fresh - now, 0), U64))

    def acquire(self, now: int, cost: int) -> dict:
        allowed, fits = self._decide(now, cost)
        if allowed and cost > 0:
            self.events.append([self.latest, cost])
        return self._decision(now, allowed, fits)

    def reserve(self, now: int, cost: int, max_wait: int):
        allowed, fits = self._decide(now, cost)
        if allowed:
            if cost > 0:
                self.events.append([self.latest, cost])
            return ("wait", 0)
        if fits - now > max_wait or fits > U64:
            return ("denied", self._decision(now, False, fits))
        self.events.append([fits, cost])
        self.floor = fits
        return ("wait", fits - now)

    def refund(self, taken_at: int, cost: int) -> None:
        """Only the window holding at() and the one before give units back."""
        k = taken_at // self.window
        if k not in (self.at() // self.window, self.at() // self.window - 1):
            return
        for event in reversed(self.events):
            if event[0] // self.window == k:
                given = min(event[1], cost)
                event[1] -= given
                cost -= given


def counter(name, config, requests=()):
    return scenario(name, "sliding_window_counter", NaiveSlidingWindowCounter, config, requests)


def per(limit, window_ns) -> dict:
    return {"limit": limit, "window_ns": window_ns}


def op(name, now, cost, **extra) -> dict:
    return {"op": name, "now_ns": now, "cost": cost, **extra}


def scenarios():
    return [
        counter("10 per second: the previous second fades continuously", per(10, S),
                [(0, 10), (S, 1), (1_250 * MS, 3), (1_300 * MS - 1, 3), (1_300 * MS, 3), (1_300 * MS, 1),
                 (1_999_999_999, 0), (2 * S, 0), (3 * S, 0)]),
        counter("an event exactly at a window edge: the estimate is continuous there", per(2, S),
                [(S - 1, 2), (S - 1, 1), (S, 1), (1_500 * MS - 1, 1), (1_500 * MS, 1), (2 * S, 1), (3 * S, 0)]),
        counter("the span bound: 19 units within one window for 10 per 1,000 ns", per(10, 1_000),
                [(999, 10), (1_998, 9), (1_998, 1), (1_999, 1)]),
        counter("units early in a window count until the next window ends (the log would admit)", per(4, S),
                [(0, 4), (S, 1), (S + 250 * MS - 1, 1), (S + 250 * MS, 1), (2 * S, 4)]),
        counter("about 7 per second drained every 0.333 s for 1,000 s", per(7, S),
                [(i * 333_333_337, 3) for i in range(3_000)] + [(1_000 * S, 0)]),
        counter("3 per microsecond, a request every 337 ns over 1,000 windows", per(3, 1_000),
                [(i * 337, 1 + i % 2) for i in range(3_000)]),
        counter("weighted costs every 37 ms at 10 per second", per(10, S),
                [(i * 37 * MS, 1 + i % 4) for i in range(400)]),
        counter("time going backwards is judged at the latest time seen", per(2, S),
                [(10 * S, 2), (5 * S, 1), (10 * S + 500 * MS, 1), (9 * S, 1), (11 * S, 1), (11 * S + 500 * MS, 1)]),
        counter("peek answers like acquire and records nothing", per(3, S),
                [op("peek", 0, 3), (0, 2), op("peek", 0, 2), op("peek", S, 3), (1_500 * MS, 2)]),
        counter("reservations book the instant the estimate admits them, in order", per(2, 100),
                [op("reserve", 0, c, max_wait_ns=1_000) for c in (2, 1, 1, 2)]
                + [op("reserve", 0, 1, max_wait_ns=549), op("reserve", 0, 1, max_wait_ns=550), (560, 1)]),
        counter("a plain acquire cannot jump ahead of a booking, even where the estimate admits it", per(4, S),
                [(0, 4), op("reserve", 0, 3, max_wait_ns=2 * S), (S, 0), (1_500 * MS, 1), op("peek", 1_750 * MS, 0),
                 (1_750 * MS, 1), (2 * S, 1)]),
        counter("a refused reservation books nothing; max_wait is exact to the nanosecond", per(1, S),
                [(0, 1), op("reserve", 0, 1, max_wait_ns=2 * S - 1), op("reserve", 0, 1, max_wait_ns=2 * S),
                 (2 * S, 1), op("reserve", 2_500 * MS, 1, max_wait_ns=0)]),
        counter("refunds reach the current and the previous window only", per(4, 100),
                [(10, 2), (120, 2), op("refund", 250, 4), op("refund", 50, 1), op("peek", 150, 0),
                 op("refund", 110, 9), op("peek", 150, 0), (300, 0), op("refund", 150, 1), (300, 4)]),
        counter("a cancelled reservation keeps its slot; its units return to that window", per(1, S),
                [(0, 1), op("reserve", 0, 1, max_wait_ns=3 * S), op("refund", 2 * S, 1),
                 (1_500 * MS, 1), (2 * S, 1), (2 * S, 1)]),
        counter("near the end of time nothing overflows", per(3, S),
                [(U64 - S, 3), (U64, 3), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64),
                 op("reserve", U64, 1, max_wait_ns=U64), (0, 1), op("refund", U64, 1), (U64, 1)]),
        counter("the largest limit and window", per(U64, U64),
                [(U64 - 1, U64), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64), (U64, 0)]),
        counter("1 ns windows at the last instant", per(1, 1),
                [(U64, 1), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64), (U64 - 1, 1)]),
        counter("cost above the limit is an error and the limiter keeps working", per(3, S),
                [(0, 4), (0, 3), (0, 1), op("reserve", 0, 4, max_wait_ns=S), (S, 1)]),
        counter("bad arguments to a call name the argument", per(3, S),
                [(0, -2), (0, "1"), (-1, 1), op("reserve", 0, 1, max_wait_ns=-1), (0, 2)]),
        counter("zero limit", per(0, S)),
        counter("zero window", per(3, 0)),
        counter("negative limit", per(-1, S)),
        counter("window given as a string", per(3, "1000")),
    ]


FILES = [
    ("core-only", "sliding_window_counter.json",
     "Sliding-window counter: the fading previous window, the span bound, bookings, refunds.", scenarios),
]
