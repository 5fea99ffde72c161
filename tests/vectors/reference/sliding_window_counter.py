"""A sliding-window counter kept as a plain list of every admitted or booked event,
forever; the estimate is an exact Fraction from the two window sums, recounted.
Calendar windows are fixed_window's, from Python's datetime."""
from __future__ import annotations

from fractions import Fraction
from math import ceil

from .common import MS, S, check_cost, decision, scenario
from .fixed_window import DAY, utc, windows

U64 = 2**64 - 1


class NaiveSlidingWindowCounter:
    def __init__(self, config: dict):
        self.limit, self.w = windows(config)
        self.events: list[list[int]] = []  # [time, cost]: admitted at the latest time, booked at the slot
        self.latest = 0
        self.floor = 0  # the latest booked slot: nothing is served before it

    def sum(self, k: int) -> int:
        total = 0
        for t, c in reversed(self.events):  # times never decrease: stop before window k
            if t < self.w.start(k):
                break
            total += c if self.w.index(t) == k else 0
        return total

    def at(self) -> int:
        return max(self.latest, self.floor)

    def estimate(self, t: int) -> Fraction:
        """prev * (end - t) / len + current, in t's window [end - len, end): the
        part of the current window not yet elapsed weighs the previous count."""
        k = self.w.index(t)
        return Fraction(self.sum(k - 1) * (self.w.end(k) - t), self.w.len(k)) + self.sum(k)

    def first(self, cost: int) -> int:
        """The first instant from at() on where the estimate admits `cost`; the
        estimate only falls with time, so a binary search finds it."""
        lo, hi = self.at(), self.w.end(self.w.index(self.at()) + 1)
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
        k = self.w.index(taken_at)
        if k not in (self.w.index(self.at()), self.w.index(self.at()) - 1):
            return
        for event in reversed(self.events):
            if self.w.index(event[0]) == k:
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


def cal(limit, calendar) -> dict:
    return {"limit": limit, "calendar": calendar}


def calendar_scenarios():
    mar, feb = utc(2024, 3, 1), utc(2024, 2, 1)
    return [
        counter("month: February's count weighs the part of March (31 days) not yet elapsed", cal(310, "month"),
                [(mar - DAY, 310), (mar, 0), (mar + 10 * DAY, 101), (mar + 10 * DAY, 100), (mar + 10 * DAY + 1, 1),
                 (utc(2024, 3, 31, 23, 59, 59, 999_999_999), 0), (utc(2024, 4, 1), 0), (utc(2024, 5, 1), 0)]),
        counter("month: January's count weighs the part of a 28-day February (2023) not yet elapsed", cal(28, "month"),
                [(utc(2023, 1, 31, 23), 28), (utc(2023, 2, 1), 1), (utc(2023, 2, 2) - 1, 1), (utc(2023, 2, 2), 1),
                 (utc(2023, 2, 15), 0), (utc(2023, 2, 15), 13), (utc(2023, 2, 15), 1), (utc(2023, 3, 1), 0)]),
        counter("month: a leap-year February of 29 days weighs January by 29ths", cal(29, "month"),
                [(feb - 1, 29), (feb + 5 * DAY, 5), (feb + 5 * DAY, 1), (feb + 6 * DAY - 1, 1), (feb + 6 * DAY, 1),
                 (utc(2024, 2, 29, 23, 59, 59, 999_999_999), 0), (mar, 0), (mar, 23)]),
        counter("month: the retry crosses into the next month, weighed by its length", cal(4, "month"),
                [(utc(2024, 4, 10), 4), (utc(2024, 4, 20), 3), (utc(2024, 5, 24, 6) - 1, 3), (utc(2024, 5, 24, 6), 3),
                 (utc(2024, 6, 30), 0)]),
        counter("month: the span bound: limit in January's last ns, then the most February admits", cal(10, "month"),
                [(utc(2023, 1, 31, 23, 59, 59, 999_999_999), 10), (utc(2023, 2, 28, 23, 59, 59, 999_999_998), 9),
                 (utc(2023, 2, 28, 23, 59, 59, 999_999_998), 1), (utc(2023, 3, 1), 0)]),
        counter("week: the previous ISO week weighs the part of this one not yet elapsed", cal(7, "week"),
                [(utc(2024, 1, 7, 23), 7), (utc(2024, 1, 8), 1), (utc(2024, 1, 9), 1), (utc(2024, 1, 10), 2),
                 (utc(2024, 1, 14, 23, 59, 59), 0), (utc(2024, 1, 15), 1), (utc(2024, 1, 29), 0)]),
        counter("week: the epoch's week began on Monday 1969-12-29", cal(2, "week"),
                [(0, 2), (0, 1), op("reserve", 0, 1, max_wait_ns=30 * DAY), (utc(1970, 1, 8, 12) - 1, 0),
                 (utc(1970, 1, 8, 12), 1), op("peek", utc(1970, 1, 12), 2)]),
        counter("day: yesterday weighs the part of today not yet elapsed", cal(24, "day"),
                [(utc(2024, 2, 28, 12), 24), (utc(2024, 2, 29), 1), (utc(2024, 2, 29, 1), 1), (utc(2024, 2, 29, 6), 6),
                 (utc(2024, 2, 29, 6), 1), (utc(2024, 3, 1), 0), (utc(2024, 3, 1), 17)]),
        counter("month: reservations book the instant the estimate admits them, across months", cal(3, "month"),
                [(utc(2024, 1, 31), 3)] + [op("reserve", utc(2024, 1, 31), c, max_wait_ns=120 * DAY) for c in (1, 2, 3, 1)]
                + [(utc(2024, 2, 10), 0), op("reserve", utc(2024, 2, 10), 1, max_wait_ns=DAY)]),
        counter("month: refunds reach the current and the previous month only", cal(10, "month"),
                [(utc(2024, 6, 20), 6), (utc(2024, 7, 2), 4), op("refund", utc(2024, 5, 31), 5), op("refund", utc(2024, 6, 1), 3),
                 op("peek", utc(2024, 7, 16), 0), op("refund", utc(2024, 7, 31), 9), op("peek", utc(2024, 7, 16), 0),
                 (utc(2024, 8, 1), 0), op("refund", utc(2024, 6, 30), 3), (utc(2024, 8, 1), 7)]),
        counter("month: time going backwards is judged at the latest time seen", cal(2, "month"),
                [(utc(2024, 3, 15), 2), (utc(2024, 2, 15), 1), (utc(2024, 4, 1), 0), (utc(2024, 3, 31), 1),
                 (utc(2024, 4, 16), 1)]),
        counter("a trickle every 9 hours 17 minutes over 14 months of 28 to 31 days", cal(60, "month"),
                [(utc(2023, 12, 1) + i * (9 * 60 + 17) * 60 * S + i * 7_919, 1 + i % 4) for i in range(1_100)]),
        counter("month: July 2554, holding the last u64 instant, ends beyond it", cal(3, "month"),
                [(utc(2554, 6, 30, 23, 59, 59, 999_999_999), 3), (utc(2554, 7, 1), 1), (U64, 3), (U64, 1),
                 op("reserve", U64, 1, max_wait_ns=U64), (U64, 0)]),
        counter("zero limit with a calendar", cal(0, "week")),
        counter("an unknown calendar", cal(3, "year")),
        counter("a calendar given as a list", cal(3, ["month"])),
    ]


FILES = [
    ("core-only", "sliding_window_counter.json",
     "Sliding-window counter: the fading previous window, the span bound, bookings, refunds.", scenarios),
    ("core-only", "sliding_window_counter_calendar.json",
     "Sliding-window counter over UTC calendar days, ISO weeks and months: the previous window weighs the part "
     "of the current one not yet elapsed.", calendar_scenarios),
]
