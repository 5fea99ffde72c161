"""A fixed window kept as a plain list of every admitted or booked event, forever;
each window's sum is recounted on every call. Calendar windows (UTC days, ISO
weeks, months) come from Python's datetime, sharing nothing with the core's
civil-date arithmetic."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from .common import MS, S, VectorError, check_cost, count, decision, duration, positive, scenario

U64 = 2**64 - 1
DAY = 86_400 * S
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MONDAY_BEFORE_EPOCH = date(1969, 12, 29)  # 1970-01-01 was a Thursday
CALENDARS = ("day", "week", "month")


def ns(day: date) -> int:
    """Nanoseconds since the epoch of 00:00 UTC on `day` (negative before it)."""
    return (day - EPOCH.date()).days * DAY


def utc(y: int, m: int, d: int, hh: int = 0, mm: int = 0, ss: int = 0, nanos: int = 0) -> int:
    """Nanoseconds since the epoch of a UTC date and time."""
    return ns(date(y, m, d)) + ((hh * 60 + mm) * 60 + ss) * S + nanos


class Windows:
    """Window k is [start(k), start(k + 1)): `length` ns long from time zero, or
    a calendar period in UTC ("day", "week" or "month")."""

    def __init__(self, length: int | None, calendar: str | None):
        self.length, self.calendar = length, calendar

    def index(self, t: int) -> int:
        if self.calendar is None:
            return t // self.length
        day = (EPOCH + timedelta(microseconds=t // 1_000)).date()  # days start on whole microseconds
        if self.calendar == "day":
            return (day - EPOCH.date()).days
        if self.calendar == "week":
            return (day - MONDAY_BEFORE_EPOCH).days // 7
        return (day.year - 1970) * 12 + day.month - 1

    def start(self, k: int) -> int:
        if self.calendar is None:
            return k * self.length
        if self.calendar == "day":
            return k * DAY
        if self.calendar == "week":
            return ns(MONDAY_BEFORE_EPOCH + timedelta(weeks=k))
        return ns(date(1970 + k // 12, k % 12 + 1, 1))

    def end(self, k: int) -> int:
        return self.start(k + 1)

    def len(self, k: int) -> int:
        return self.end(k) - self.start(k)


def windows(config: dict) -> tuple[int, Windows]:
    """The limit and the windows of a config ({"limit", "window_ns"} or
    {"limit", "calendar"}), checked in the order the core checks them."""
    calendar = config.get("calendar")
    if calendar is not None:
        if not isinstance(calendar, str):  # as `refill` of another type: the bindings' type error
            raise VectorError("invalid_type", "calendar")
        if not (calendar.isascii() and calendar.lower() in CALENDARS):
            raise VectorError("invalid_value", "calendar")
        calendar = calendar.lower()
    limit = count(config["limit"], "limit")
    length = None if calendar else duration(config["window_ns"], "window")
    positive(limit, "limit")
    if length is not None:
        positive(length, "window")
    return limit, Windows(length, calendar)


class NaiveFixedWindow:
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

    def fits_at(self, cost: int) -> int:
        """The first instant, from at() on, whose window has room for `cost`."""
        k = self.w.index(self.at())
        while self.sum(k) + cost > self.limit:
            k += 1
        return max(self.at(), self.w.start(k))

    def _decide(self, now: int, cost: int):
        check_cost(cost, self.limit)
        self.latest = max(self.latest, now)
        fits = self.fits_at(cost)
        allowed = cost == 0 or (self.latest >= self.floor and fits == self.at())
        return allowed, fits

    def _decision(self, now: int, allowed: bool, fits: int) -> dict:
        current = self.w.index(self.at())
        holding = [self.w.index(t) for t, c in self.events if c > 0 and self.w.index(t) >= current]
        fresh = self.w.end(max(holding)) if holding else 0
        if self.latest < self.floor:
            fresh = max(fresh, self.floor)
        remaining = self.limit - self.sum(current) if self.latest >= self.floor else 0
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
        """Only the window holding at() gives units back."""
        k = self.w.index(taken_at)
        if k != self.w.index(self.at()):
            return
        for event in reversed(self.events):
            if self.w.index(event[0]) == k:
                given = min(event[1], cost)
                event[1] -= given
                cost -= given


def fixed(name, config, requests=()):
    return scenario(name, "fixed_window", NaiveFixedWindow, config, requests)


def per(limit, window_ns) -> dict:
    return {"limit": limit, "window_ns": window_ns}


def op(name, now, cost, **extra) -> dict:
    return {"op": name, "now_ns": now, "cost": cost, **extra}


def scenarios():
    return [
        fixed("3 per second: an event exactly at a window edge belongs to the next window", per(3, S),
              [(0, 1), (S - 1, 2), (S - 1, 1), (S, 3), (S, 1), (2 * S - 1, 1), (2 * S, 1), (2 * S, 0)]),
        fixed("the boundary burst: 5 in the last ns of a window, 5 in the first of the next", per(5, S),
              [(S - 1, 5), (S, 5), (S + 1, 1), (2 * S - 1, 1), (2 * S, 1)]),
        fixed("weighted costs fill a window; an idle window resets it whole", per(10, S),
              [(0, 4), (100 * MS, 3), (200 * MS, 4), (300 * MS, 3), (999 * MS, 1), (S, 10), (S, 1), (5 * S, 10)]),
        fixed("about 7 per second drained every 0.333 s for 1,000 s", per(7, S),
              [(i * 333_333_337, 3) for i in range(3_000)] + [(1_000 * S, 0)]),
        fixed("3 per microsecond, a request every 337 ns over 1,000 windows", per(3, 1_000),
              [(i * 337, 1 + i % 2) for i in range(3_000)]),
        fixed("time going backwards is judged at the latest time seen", per(2, S),
              [(10 * S, 1), (5 * S, 1), (5 * S, 1), (10 * S + 999_999_999, 1), (9 * S, 0), (11 * S, 2)]),
        fixed("peek answers like acquire and records nothing", per(3, S),
              [op("peek", 0, 3), (0, 2), op("peek", 0, 2), op("peek", S, 3), (S, 3), op("peek", S, 0)]),
        fixed("reservations spill into following windows, first come first served", per(3, S),
              [op("reserve", 100 * MS, c, max_wait_ns=5 * S) for c in (2, 2, 1, 1, 3, 1)]
              + [(500 * MS, 1), (S, 1), (2 * S, 1), (3 * S, 1), (3 * S, 1)]),
        fixed("a plain acquire cannot jump ahead of a booking", per(2, S),
              [(0, 2), op("reserve", 500 * MS, 1, max_wait_ns=S), (600 * MS, 0), (S - 1, 1), (S, 1), (S, 1)]),
        fixed("a refused reservation books nothing; max_wait is exact to the nanosecond", per(1, S),
              [(0, 1), op("reserve", 0, 1, max_wait_ns=S - 1), op("reserve", 10, 1, max_wait_ns=S - 10),
               (S, 1), op("reserve", 1_500 * MS, 1, max_wait_ns=0), (1_500 * MS, 1)]),
        fixed("refunds give units back only to the window holding the latest call or booking", per(3, S),
              [(0, 2), (100 * MS, 1), op("refund", 2 * S, 3), op("refund", 100 * MS, 2), (200 * MS, 2),
               (S, 3), op("refund", 0, 3), (S, 1), op("refund", S, 9), (S, 3)]),
        fixed("a cancelled reservation keeps its slot; its units return to that window", per(1, S),
              [(0, 1), op("reserve", 0, 1, max_wait_ns=2 * S), op("refund", 500 * MS, 1), op("refund", S, 1),
               (500 * MS, 1), (S, 1), (S, 1)]),
        fixed("near the end of time nothing overflows", per(3, S),
              [(U64 - S, 3), (U64, 3), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64), (0, 1),
               op("refund", U64, 1), (U64, 1)]),
        fixed("the largest limit and window", per(U64, U64),
              [(U64 - 1, U64), (U64 - 1, 1), (U64, U64), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64)]),
        fixed("1 ns windows at the last instant", per(1, 1),
              [(U64, 1), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64), (U64 - 1, 1)]),
        fixed("cost above the limit is an error and the limiter keeps working", per(3, S),
              [(0, 4), (0, 3), (0, 1), op("reserve", 0, 4, max_wait_ns=S), (S, 1)]),
        fixed("bad arguments to a call name the argument", per(3, S),
              [(0, -2), (0, "1"), (-1, 1), op("reserve", 0, 1, max_wait_ns=-1), (0, 2)]),
        fixed("zero limit", per(0, S)),
        fixed("zero window", per(3, 0)),
        fixed("negative limit", per(-1, S)),
        fixed("window given as a string", per(3, "1000")),
    ]


def cal(limit, calendar) -> dict:
    return {"limit": limit, "calendar": calendar}


def calendar_scenarios():
    last = utc(2023, 1, 31, 23, 59, 59, 999_999_999)  # the last ns of January 2023
    return [
        fixed("month: a 31-day January, then a 28-day February (2023)", cal(3, "month"),
              [(utc(2023, 1, 1), 1), (last, 2), (last, 1), (last + 1, 3), (utc(2023, 2, 15), 1),
               (utc(2023, 2, 28, 23, 59, 59, 999_999_999), 1), (utc(2023, 3, 1), 3), (utc(2023, 3, 1), 0)]),
        fixed("month: February 2024 has 29 days; Feb 29 belongs to February", cal(2, "month"),
              [(utc(2024, 2, 28, 12), 2), (utc(2024, 2, 29), 1), (utc(2024, 2, 29, 23, 59, 59, 999_999_999), 1),
               (utc(2024, 3, 1), 2), (utc(2024, 3, 31, 23, 59, 59), 1), (utc(2024, 4, 1), 1)]),
        fixed("month: a 30-day April, then a 31-day May", cal(1, "month"),
              [(utc(2024, 4, 1), 1), (utc(2024, 4, 30, 23, 59, 59, 999_999_999), 1), (utc(2024, 5, 1), 1),
               (utc(2024, 5, 30), 1), (utc(2024, 5, 31, 12), 0), (utc(2024, 6, 1), 1)]),
        fixed("month: 2000 (divisible by 400) has a Feb 29; 2100 does not", cal(1, "month"),
              [(utc(2000, 2, 29, 12), 1), (utc(2000, 2, 29, 23), 1), (utc(2000, 3, 1), 1),
               (utc(2100, 2, 28, 12), 1), (utc(2100, 2, 28, 23), 1), (utc(2100, 3, 1), 1)]),
        fixed("month: December to January crosses a year", cal(5, "month"),
              [(utc(2024, 12, 31, 23, 59, 59, 999_999_999), 5), (utc(2024, 12, 31, 23, 59, 59, 999_999_999), 1),
               (utc(2025, 1, 1), 5), (utc(2025, 1, 1), 1)]),
        fixed("week: ISO weeks start on Monday 00:00 UTC", cal(2, "week"),
              [(utc(2024, 1, 1), 1), (utc(2024, 1, 7, 23, 59, 59, 999_999_999), 1), (utc(2024, 1, 7, 23, 59, 59), 1),
               (utc(2024, 1, 8), 2), (utc(2024, 1, 14, 12), 1), (utc(2024, 1, 15), 0)]),
        fixed("week: the epoch (a Thursday) falls in the week of Monday 1969-12-29", cal(1, "week"),
              [(0, 1), (0, 1), (utc(1970, 1, 4, 23, 59, 59, 999_999_999), 1), (utc(1970, 1, 5), 1),
               (utc(1970, 1, 5), 0)]),
        fixed("day: days start at 00:00 UTC", cal(2, "day"),
              [(utc(2024, 2, 28, 23, 59, 59, 999_999_999), 2), (utc(2024, 2, 28, 23, 59, 59, 999_999_999), 1),
               (utc(2024, 2, 29), 2), (utc(2024, 2, 29, 18), 1), (utc(2024, 3, 1), 1), (utc(2024, 3, 3, 5), 0)]),
        fixed("month: reservations book the first instant of the next months, in order", cal(2, "month"),
              [(utc(2024, 1, 20), 2), op("reserve", utc(2024, 1, 20), 1, max_wait_ns=utc(2024, 2, 1) - utc(2024, 1, 20)),
               op("reserve", utc(2024, 1, 21), 2, max_wait_ns=70 * DAY), op("reserve", utc(2024, 1, 21), 1, max_wait_ns=30 * DAY),
               (utc(2024, 2, 10), 1), (utc(2024, 3, 1), 0), (utc(2024, 3, 1), 1)]),
        fixed("month: refunds return units to the month holding the latest call", cal(3, "month"),
              [(utc(2024, 5, 31, 23), 3), op("refund", utc(2024, 5, 1), 1), (utc(2024, 5, 31, 23, 30), 1),
               (utc(2024, 6, 1), 2), op("refund", utc(2024, 5, 31), 2), op("refund", utc(2024, 6, 30), 1), (utc(2024, 6, 2), 2)]),
        fixed("month: time going backwards is judged at the latest time seen", cal(1, "month"),
              [(utc(2024, 3, 1), 1), (utc(2024, 2, 29), 1), (utc(2024, 2, 1), 0), (utc(2024, 4, 1), 1)]),
        fixed("an hourly trickle over 14 months of 28 to 31 days", cal(100, "month"),
              [(utc(2023, 12, 1) + i * 7 * 3_600 * S + i * 1_337, 1 + i % 3) for i in range(1_450)]),
        fixed("month: July 2554, holding the last u64 instant, ends beyond it: nothing is booked there", cal(2, "month"),
              [(utc(2554, 6, 30, 23, 59, 59, 999_999_999), 2), (utc(2554, 7, 1), 2), (U64, 1),
               op("reserve", U64, 1, max_wait_ns=U64), (U64, 0)]),
        fixed("week: the last week of u64 time", cal(1, "week"),
              [(U64 - 1, 1), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64)]),
        fixed("zero limit with a calendar", cal(0, "month")),
        fixed("an unknown calendar", cal(3, "fortnight")),
        fixed("a calendar given as a number", cal(3, 30)),
        fixed("calendar names in any case", cal(1, "Week"), [(0, 1), (0, 1)]),
    ]


FILES = [
    ("core-only", "fixed_window.json",
     "Fixed window: window edges, the boundary burst, bookings spilling into later windows, refunds.",
     scenarios),
    ("core-only", "fixed_window_calendar.json",
     "Fixed window over UTC calendar days, ISO weeks and months: month lengths, leap years, week starts.",
     calendar_scenarios),
]
