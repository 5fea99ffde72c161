"""A fixed window kept as a plain list of every admitted or booked event, forever;
each window's sum is recounted on every call."""
from __future__ import annotations

from .common import MS, S, check_cost, count, decision, duration, positive, scenario

U64 = 2**64 - 1


class NaiveFixedWindow:
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

    def fits_at(self, cost: int) -> int:
        """The first instant, from at() on, whose window has room for `cost`."""
        k = self.at() // self.window
        while self.sum(k) + cost > self.limit:
            k += 1
        return max(self.at(), k * self.window)

    def _decide(self, now: int, cost: int):
        check_cost(cost, self.limit)
        self.latest = max(self.latest, now)
        fits = self.fits_at(cost)
        allowed = cost == 0 or (self.latest >= self.floor and fits == self.at())
        return allowed, fits

    def _decision(self, now: int, allowed: bool, fits: int) -> dict:
        current = self.at() // self.window
        holding = [t // self.window for t, c in self.events if c > 0 and t // self.window >= current]
        fresh = (max(holding) + 1) * self.window if holding else 0
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
        k = taken_at // self.window
        if k != self.at() // self.window:
            return
        for event in reversed(self.events):
            if event[0] // self.window == k:
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


FILES = [
    ("core-only", "fixed_window.json",
     "Fixed window: window edges, the boundary burst, bookings spilling into later windows, refunds.",
     scenarios),
]
