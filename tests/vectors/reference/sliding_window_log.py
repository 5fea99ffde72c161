"""A sliding log kept as a plain list of every admitted or booked event, forever."""
from __future__ import annotations

from .common import MS, S, VectorError, check_cost, count, decision, duration, positive, scenario

MAX_LOG_LIMIT = 1 << 20


class NaiveSlidingWindowLog:
    def __init__(self, config: dict):
        self.limit = positive(count(config["limit"], "limit"), "limit")
        self.window = positive(duration(config["window_ns"], "window"), "window")
        if self.limit > MAX_LOG_LIMIT:
            raise VectorError("too_large", "limit")
        self.events: list[tuple[int, int]] = []  # (time, cost); times never decrease
        self.latest = 0

    def used_at(self, t: int) -> int:
        return sum(c for (at, c) in self.events if at + self.window > t)

    def fits_at(self, cost: int) -> int:
        """The earliest time, not before latest nor the newest event, where `cost` fits."""
        floor = max([self.latest] + [at for at, _ in self.events])
        candidates = [floor] + sorted(at + self.window for at, _ in self.events if at + self.window > floor)
        return min(t for t in candidates if self.used_at(t) + cost <= self.limit)

    def _decide(self, now: int, cost: int):
        check_cost(cost, self.limit)
        self.latest = max(self.latest, now)
        fits = self.fits_at(cost)
        allowed = cost == 0 or fits == self.latest
        return allowed, fits

    def _decision(self, now: int, allowed: bool, fits: int) -> dict:
        live = [at + self.window for at, _ in self.events if at + self.window > self.latest]
        return decision(allowed, max(0, self.limit - self.used_at(self.latest)), self.limit,
                        0 if allowed else fits - now, max(live) - now if live else 0)

    def acquire(self, now: int, cost: int) -> dict:
        allowed, fits = self._decide(now, cost)
        if allowed and cost > 0:
            self.events.append((self.latest, cost))
        return self._decision(now, allowed, fits)

    def reserve(self, now: int, cost: int, max_wait: int):
        allowed, fits = self._decide(now, cost)
        if allowed:
            if cost > 0:
                self.events.append((self.latest, cost))
            return ("wait", 0)
        # The ring holds 2 * limit instants: the current window and one of bookings.
        instants = {at for at, _ in self.events if at + self.window > self.latest}
        if fits - now > max_wait or (fits not in instants and len(instants) >= 2 * self.limit):
            return ("denied", self._decision(now, False, fits))
        self.events.append((fits, cost))
        return ("wait", fits - now)

    def refund(self, taken_at: int, cost: int) -> None:
        for i in reversed(range(len(self.events))):
            at, c = self.events[i]
            if at == taken_at and cost > 0:
                given = min(c, cost)
                self.events[i] = (at, c - given)
                cost -= given


def log(limit, window_ns) -> dict:
    return {"limit": limit, "window_ns": window_ns}


def sliding(name, config, requests=()):
    return scenario(name, "sliding_window_log", NaiveSlidingWindowLog, config, requests)


def op(name, now, cost, **extra):
    return {"op": name, "now_ns": now, "cost": cost, **extra}


def basics():
    return [
        sliding("4 events per 5 s with a request every 0.8 s for 15 requests", log(4, 5 * S),
                [(i * 800 * MS, 1) for i in range(15)]),
        sliding("three events at the same instant all count", log(3, S),
                [(0, 1), (0, 1), (0, 1), (0, 1), (S - 1, 1), (S, 1), (S, 1), (S, 1), (S, 1)]),
        sliding("1 per second admits calls exactly 1 s apart", log(1, S),
                [(0, 1), (S - 1, 1), (S, 1), (2 * S - 1, 1), (2 * S, 1), (5 * S, 1)]),
        sliding("weighted costs free up in the order they were admitted", log(10, 10 * S),
                [(0, 4), (S, 3), (2 * S, 3), (3 * S, 5), (10 * S, 5), (11 * S, 6), (11 * S, 3), (12 * S, 0)]),
        sliding("a non-divisible spacing (every 0.37 s, 3 per second) over a long run", log(3, S),
                [(i * 370 * MS + (i % 5), 1) for i in range(400)]),
        sliding("time going backwards records at the latest time seen", log(2, S),
                [(10 * S, 1), (5 * S, 1), (5 * S, 1), (10 * S + 999_999_999, 1), (11 * S, 1), (11 * S, 1)]),
        sliding("cost above the limit is an error and the log keeps working", log(3, S),
                [(0, 4), (0, 3), (0, 1), (S, 3)]),
        sliding("bad arguments to a call name the argument", log(3, S), [(0, -2), (0, "1"), (-1, 1), (0, 2)]),
        sliding("zero limit", log(0, S)),
        sliding("zero window", log(3, 0)),
        sliding("a limit above the log's maximum", log(MAX_LOG_LIMIT + 1, S)),
        sliding("negative window", log(3, -S)),
        sliding("limit given as a string", log("3", S)),
    ]


def operations():
    return [
        sliding("peek answers like acquire and records nothing", log(2, S),
                [op("peek", 0, 2), (0, 1), op("peek", 0, 2), op("peek", S, 2), (S, 2)]),
        sliding("reservations book the instants where they fit, in order", log(2, S),
                [op("reserve", 0, 1, max_wait_ns=5 * S)] * 6 + [op("reserve", 0, 1, max_wait_ns=S),
                                                                 (999 * MS, 1), (S, 1), (2 * S, 1)]),
        sliding("a plain acquire cannot jump ahead of a booking", log(1, S),
                [(0, 1), op("reserve", 500 * MS, 1, max_wait_ns=S), (S, 1), (2 * S - 1, 1), (2 * S, 1)]),
        sliding("bookings are bounded by one window ahead (2 * limit instants)", log(1, S),
                [op("reserve", i * MS, 1, max_wait_ns=10 * S) for i in range(4)]),
        sliding("a refund removes units at the instant they were taken, and only there", log(3, S),
                [(0, 2), (100 * MS, 1), op("refund", 100 * MS, 5), (100 * MS, 1), op("refund", 50 * MS, 1),
                 (200 * MS, 1), op("refund", 0, 1), (300 * MS, 1), (300 * MS, 1)]),
        sliding("a cancelled reservation gives its slot back", log(1, S),
                [(0, 1), op("reserve", 0, 1, max_wait_ns=2 * S), op("refund", S, 1), (S, 1)]),
        sliding("a denied reservation still moves the clock forward", log(5, 892),
                [(50000, 1), (50000, 1), (50284, 1), op("reserve", 50284, 1, max_wait_ns=0),
                 op("reserve", 50772, 3, max_wait_ns=120), op("reserve", 50772, 3, max_wait_ns=1012),
                 op("reserve", 51266, 1, max_wait_ns=518), op("reserve", 51785, 2, max_wait_ns=0),
                 op("reserve", 51680, 1, max_wait_ns=104), op("reserve", 51536, 1, max_wait_ns=1140),
                 op("reserve", 51579, 1, max_wait_ns=1097), op("reserve", 51579, 1, max_wait_ns=1097)]),
        sliding("weighted reservations wait for enough units to leave", log(5, 10 * S),
                [(0, 3), (S, 2), op("reserve", 2 * S, 4, max_wait_ns=20 * S),
                 op("reserve", 2 * S, 1, max_wait_ns=20 * S), (10 * S, 1), (11 * S, 1), (12 * S, 0)]),
    ]


FILES = [
    ("", "sliding_window_log.json",
     "Sliding-window log: exact window edges, same-instant events, errors.", basics),
    ("core-only", "sliding_window_log.json",
     "Sliding-window log: peek, reservations in the future, refunds at the instant taken.", operations),
]
