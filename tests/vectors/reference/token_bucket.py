"""A token bucket kept as exact Fractions, one level per bandwidth."""
from __future__ import annotations

import copy
import math
from fractions import Fraction

from .common import MS, S, VectorError, check_cost, count, decision, duration, positive, scenario


class NaiveBand:
    def __init__(self, c: dict):
        self.capacity = positive(count(c["capacity"], "capacity"), "capacity")
        self.refill = positive(count(c["refill_tokens"], "refill_tokens"), "refill_tokens")
        self.period = positive(duration(c["refill_period_ns"], "refill_period"), "refill_period")
        self.interval = c.get("refill", "greedy") == "interval"
        initial = c.get("initial_tokens")
        initial = self.capacity if initial is None else count(initial, "initial_tokens")
        if initial > self.capacity:
            raise VectorError("too_large", "initial_tokens")
        self.initial = initial  # a configuration value: the state's fingerprint holds it
        fill = (math.ceil(Fraction(self.capacity, self.refill)) * self.period if self.interval
                else math.ceil(Fraction(self.capacity * self.period, self.refill)))
        if fill >= 2**64:
            raise VectorError("overflow", "refill_period")
        self.level = Fraction(initial)  # may go negative: tokens owed to reservations
        self.anchor = None  # interval boundaries lie at anchor + k * period

    def gained(self, start: int, end: int) -> Fraction:
        if self.interval:
            boundaries = (end - self.anchor) // self.period - (start - self.anchor) // self.period
            return Fraction(boundaries * self.refill)
        return Fraction(self.refill * (end - start), self.period)

    def advance(self, start: int, end: int) -> None:
        self.level = min(Fraction(self.capacity), self.level + self.gained(start, end))

    def book(self, at: int, wait: int, cost: int) -> None:
        """Takes `cost` at the slot at + wait, as of time `at`: the level at the
        slot (capped) less the cost, less the refill between now and then."""
        at_slot = copy.deepcopy(self)
        at_slot.advance(at, at + wait)
        self.level = at_slot.level - cost - self.gained(at, at + wait)

    def wait(self, at: int, target: int) -> int:
        """ns after `at` until level >= target (0 if already)."""
        if self.level >= target:
            return 0
        if not self.interval:
            return math.ceil((target - self.level) * self.period / self.refill)
        boundaries = math.ceil((target - self.level) / self.refill)
        next_boundary = self.anchor + ((at - self.anchor) // self.period + 1) * self.period
        return next_boundary + (boundaries - 1) * self.period - at


class NaiveTokenBucket:
    def __init__(self, config: dict):
        bands = config.get("bandwidths", [config])
        if not bands:
            raise VectorError("zero_value", "bandwidths")
        self.bands = [NaiveBand(b) for b in bands]
        self.limit = min(b.capacity for b in self.bands)
        self.time = None

    def _at(self, now: int) -> int:
        if self.time is None:
            self.time = now
            for b in self.bands:
                b.anchor = now
        effective = max(now, self.time)
        for b in self.bands:
            b.advance(self.time, effective)
        self.time = effective
        return effective

    def _wait(self, now: int, at: int, target=None) -> int:
        longest = max(b.wait(at, b.capacity if target is None else target) for b in self.bands)
        return 0 if longest == 0 else longest + (at - now)

    def _decision(self, now: int, at: int, allowed: bool, cost: int) -> dict:
        remaining = min(max(math.floor(b.level), 0) for b in self.bands)
        retry = 0 if allowed else self._wait(now, at, cost)
        return decision(allowed, remaining, self.limit, retry, self._wait(now, at))

    def acquire(self, now: int, cost: int) -> dict:
        check_cost(cost, self.limit)
        at = self._at(now)
        allowed = cost == 0 or all(b.level >= cost for b in self.bands)
        if allowed:
            for b in self.bands:
                b.level -= cost
        return self._decision(now, at, allowed, cost)

    def reserve(self, now: int, cost: int, max_wait: int):
        d = self.acquire(now, cost)
        if d["allowed"]:
            return ("wait", 0)
        if d["retry_after_ns"] > max_wait:
            return ("denied", d)
        slot = now + d["retry_after_ns"]
        for b in self.bands:
            b.book(self.time, slot - self.time, cost)
        return ("wait", d["retry_after_ns"])

    def refund(self, taken_at: int, cost: int) -> None:
        # A bucket has no history: tokens come back to its current state, whatever the time.
        for b in self.bands:
            b.level = min(Fraction(b.capacity), b.level + cost)


def tb(capacity, refill_tokens, refill_period_ns, **extra) -> dict:
    return {"capacity": capacity, "refill_tokens": refill_tokens,
            "refill_period_ns": refill_period_ns, **extra}


def bucket(name, config, requests=()):
    return scenario(name, "token_bucket", NaiveTokenBucket, config, requests)


def basics():
    return [
        bucket("a full bucket of 5 refilling 1/s hit by 12 requests at once, then one per second", tb(5, 1, S),
               [(0, 1)] * 12 + [(S, 1), (S, 1), (2 * S - 1, 1), (2 * S, 1), (60 * S, 0)]),
        bucket("4 per 5 s as a bucket, a request every 0.8 s for 15 requests",
               tb(4, 4, 5 * S), [(i * 800 * MS, 1) for i in range(15)]),
        bucket("3 tokens per microsecond: exactly 3,000 one millisecond after starting empty",
               tb(3000, 3, 1000, initial_tokens=0),
               [(0, 0), (0, 1), (999_999, 3000), (1_000_000, 3000), (1_000_000, 1), (1_000_334, 1)]),
        bucket("a non-divisible rate (7 per 3 s, burst 2) over a long run of awkward spacings", tb(2, 7, 3 * S),
               [(i * 299_999_989 + (i % 7) * 13, 1 + (i % 3 == 0)) for i in range(600)]),
        bucket("weighted costs and an initial level below capacity", tb(10, 2, S, initial_tokens=3),
               [(5 * S, 3), (5 * S, 1), (5 * S + 250 * MS, 4), (7 * S, 4), (7 * S, 0), (20 * S, 10)]),
        bucket("an initially empty bucket starts refilling at its first call", tb(2, 1, S, initial_tokens=0),
               [(100 * S, 1), (101 * S - 1, 1), (101 * S, 1)]),
        bucket("time going backwards grants nothing and retry_after counts the lag", tb(2, 1, S),
               [(10 * S, 2), (5 * S, 1), (10 * S + 500 * MS, 1), (9 * S, 1), (11 * S, 1), (11 * S, 1)]),
        bucket("cost above capacity is an error and the bucket keeps working", tb(3, 1, S),
               [(0, 4), (0, 3), (0, 1), (S, 1)]),
        bucket("bad arguments to a call name the argument", tb(3, 1, S), [(0, -1), (0, "2"), (-5, 1), (0, 1)]),
        bucket("zero capacity", tb(0, 1, S)),
        bucket("zero refill tokens", tb(5, 0, S)),
        bucket("zero refill period", tb(5, 1, 0)),
        bucket("initial tokens above capacity", tb(5, 1, S, initial_tokens=6)),
        bucket("refilling the capacity would take more than 2^64 ns", tb(2**53 - 1, 1, 10**6)),
        bucket("negative capacity", tb(-1, 1, S)),
        bucket("negative refill period", tb(5, 1, -1000)),
        bucket("capacity given as a string", tb("5", 1, S)),
    ]


def op(name, now, cost, **extra):
    return {"op": name, "now_ns": now, "cost": cost, **extra}


def bandwidths_and_operations():
    per_second, per_minute = tb(2, 2, S), tb(3, 3, 60 * S)
    return [
        bucket("2 per second AND 3 per minute: the minute denies, and a denial takes from neither",
               {"bandwidths": [per_second, per_minute]},
               [(0, 2), (S, 1), (2 * S, 1), (2 * S, 2), (20 * S, 1), (20 * S, 1), (40 * S, 1), (40 * S, 1)]),
        bucket("10 per second AND 100 per minute, every 10 ms for 12 s",
               {"bandwidths": [tb(10, 10, S), tb(100, 100, 60 * S)]}, [(i * 10 * MS, 1) for i in range(1200)]),
        bucket("interval refill: the whole refill at each period end, counted from the first call",
               tb(10, 4, 100 * MS, refill="interval", initial_tokens=0),
               [(7 * MS, 1), (106 * MS, 1), (107 * MS, 4), (107 * MS, 1), (530 * MS, 10), (530 * MS, 0)]),
        bucket("interval and greedy bandwidths together",
               {"bandwidths": [tb(5, 5, S, refill="interval"), tb(3, 1, 300 * MS)]},
               [(i * 250 * MS, 1 + i % 2) for i in range(40)]),
        bucket("peek answers like acquire and consumes nothing", tb(2, 1, S),
               [op("peek", 0, 2), op("peek", 0, 2), (0, 2), op("peek", 500 * MS, 1), (S, 1)]),
        bucket("reservations are served in order at exactly the rate, within max_wait", tb(2, 1, S),
               [op("reserve", 0, 1, max_wait_ns=3 * S)] * 5 + [op("reserve", 0, 1, max_wait_ns=3 * S),
                                                                (2 * S + 500 * MS, 1), (3 * S, 1)]),
        bucket("a cancelled reservation is refunded and its slot goes to the next request", tb(1, 1, S),
               [(0, 1), op("reserve", 0, 1, max_wait_ns=5 * S), op("refund", 100 * MS, 1),
                (999 * MS, 1), (S, 1), (S, 1)]),
        bucket("reserve 10, use 4, return 6: never above capacity", tb(10, 1, S),
               [op("reserve", 0, 10, max_wait_ns=0), op("refund", 0, 6), op("peek", 0, 0),
                op("refund", 0, 100), op("peek", 0, 0), (0, 10), (0, 1)]),
        bucket("multi-bandwidth reservations wait for the slowest bandwidth",
               {"bandwidths": [per_second, per_minute]},
               [op("reserve", 0, 2, max_wait_ns=0), op("reserve", 0, 2, max_wait_ns=60 * S),
                op("reserve", 0, 1, max_wait_ns=10 * S), (30 * S, 1), (40 * S, 1)]),
        bucket("bookings respect the cap at their slot: a slot rounded up to the next ns funds one booking",
               tb(3, 4, 1),
               [(52868, 1), op("reserve", 52868, 3, max_wait_ns=1300), op("reserve", 52868, 3, max_wait_ns=1300),
                (52869, 1), (52870, 1)]),
        bucket("a denied reservation still moves the clock forward", tb(1, 1, S),
               [(0, 1), op("reserve", 5 * S, 1, max_wait_ns=0), op("reserve", 5 * S, 1, max_wait_ns=0),
                (4 * S, 1), op("reserve", 4 * S, 1, max_wait_ns=2 * S)]),
        bucket("zero bandwidths", {"bandwidths": []}),
    ]


FILES = [
    ("", "token_bucket.json", "Token bucket: burst, exact refill, errors.", basics),
    ("core-only", "token_bucket.json", "Token bucket: several bandwidths, interval refill, peek, reserve, refund.",
     bandwidths_and_operations),
]
