"""GCRA as usually written: an absolute theoretical arrival time (TAT) in
Python's unbounded integers, plus the latest time seen."""
from __future__ import annotations

from .common import MS, S, VectorError, check_cost, count, decision, duration, positive, scenario

U64 = 2**64 - 1


class NaiveGcra:
    def __init__(self, c: dict):
        burst = count(c["burst"], "burst")
        if "emission_interval_ns" in c:
            name, t = "emission_interval", duration(c["emission_interval_ns"], "emission_interval")
            positive(burst, "burst")
        else:
            tokens, name = count(c["tokens"], "tokens"), "period"
            period = duration(c["period_ns"], "period")
            positive(burst, "burst")
            positive(tokens, "tokens")
            if period % tokens:
                raise VectorError("invalid_value", "period")
            t = period // tokens
        positive(t, name)
        if burst * t > U64:
            raise VectorError("overflow", name)
        self.burst, self.t, self.tau = burst, t, burst * t
        self.tat = 0
        self.latest = 0

    def acquire(self, now: int, cost: int) -> dict:
        check_cost(cost, self.burst)
        at = self.latest = max(self.latest, now)
        tat = max(self.tat, at)
        allowed = cost == 0 or tat + cost * self.t - self.tau <= at
        if allowed:
            tat += cost * self.t
        self.tat = tat
        retry = 0 if allowed else tat + cost * self.t - self.tau - now
        reset = tat - now if tat > at else 0
        remaining = max(0, self.tau - (tat - at)) // self.t
        return decision(allowed, remaining, self.burst, min(retry, U64), min(reset, U64))

    def reserve(self, now: int, cost: int, max_wait: int):
        d = self.acquire(now, cost)
        if d["allowed"]:
            return ("wait", 0)
        wait = d["retry_after_ns"]
        # The state keeps TAT - latest in 64 bits.
        if wait > max_wait or wait == U64 or self.tat - self.latest + cost * self.t > U64:
            return ("denied", d)
        self.tat += cost * self.t
        return ("wait", wait)

    def refund(self, taken_at: int, cost: int) -> None:
        # No history: the TAT moves back, never behind the latest time (full).
        self.tat = max(self.tat - cost * self.t, self.latest)


def every(burst, t) -> dict:
    return {"burst": burst, "emission_interval_ns": t}


def per(burst, tokens, period) -> dict:
    return {"burst": burst, "tokens": tokens, "period_ns": period}


def op(name, now, cost, **extra) -> dict:
    return {"op": name, "now_ns": now, "cost": cost, **extra}


def gcra(name, config, requests=()):
    return scenario(name, "gcra", NaiveGcra, config, requests)


def scenarios():
    t7 = 142_857_143  # about 7 per second, a whole number of ns apart
    return [
        gcra("burst 3, then one every 100 ms: exact boundary instants", every(3, 100 * MS),
             [(0, 1)] * 4 + [(100 * MS - 1, 1), (100 * MS, 1), (100 * MS, 1), (400 * MS, 3), (400 * MS, 0)]),
        gcra("10 per second with a burst of 5 (per_period), weighted, every 37 ms", per(5, 10, S),
             [(i * 37 * MS, 1 + i % 3) for i in range(400)]),
        gcra("about 7 per second (142,857,143 ns apart) drained every 0.33 s for 1,000 s", every(7, t7),
             [(i * 333_333_337, 3) for i in range(3_000)] + [(1_000 * S, 0)]),
        gcra("a fresh limiter is full whatever the first time is", every(2, S),
             [(10**18, 2), (10**18, 1), (10**18 + S, 1)]),
        gcra("time going backwards counts as zero elapsed and waits count the step", every(2, S),
             [(10 * S, 1), (5 * S, 1), (5 * S, 1), (10 * S + 500 * MS, 1), (9 * S, 0), (11 * S, 1)]),
        gcra("peek answers like acquire and consumes nothing", every(2, S),
             [op("peek", 0, 2), op("peek", 0, 2), (0, 2), op("peek", 500 * MS, 1), (S, 1)]),
        gcra("reservations are booked in order at exactly the rate, within max_wait", every(2, S),
             [op("reserve", 0, 1, max_wait_ns=3 * S)] * 5
             + [op("reserve", 0, 1, max_wait_ns=3 * S), (2 * S + 500 * MS, 1), (3 * S, 1)]),
        gcra("a cancelled reservation's slot goes to the next request", every(1, S),
             [(0, 1), op("reserve", 0, 1, max_wait_ns=5 * S), op("refund", S, 1), (999 * MS, 1), (S, 1), (S, 1)]),
        gcra("reserve 10, use 4, return 6: never above the burst", every(10, S),
             [op("reserve", 0, 10, max_wait_ns=0), op("refund", 0, 6), op("peek", 0, 0),
              op("refund", 0, 100), op("peek", 0, 0), (0, 10), (0, 1)]),
        gcra("a refused reservation books nothing; max_wait is exact to the nanosecond", every(1, S),
             [(0, 1), op("reserve", 0, 1, max_wait_ns=S - 1), op("reserve", 0, 1, max_wait_ns=S), (S, 1),
              op("reserve", S, 1, max_wait_ns=S), op("reserve", 5 * S, 1, max_wait_ns=0), (4 * S, 1)]),
        gcra("near the end of time nothing overflows", every(3, S),
             [(U64 - S, 3), (U64, 2), (U64, 1), op("reserve", U64, 1, max_wait_ns=U64), (0, 1),
              op("reserve", 0, 3, max_wait_ns=U64)]),
        gcra("the largest burst at 1 ns apart", every(U64, 1), [(5, U64), (5, 1), (U64, U64), (U64, 1)]),
        gcra("cost above the burst is an error and the limiter keeps working", every(3, S),
             [(0, 4), (0, 3), (0, 1), (S, 1)]),
        gcra("bad arguments to a call name the argument", every(3, S),
             [(0, -1), (0, "2"), (-5, 1), op("reserve", 0, 1, max_wait_ns=-1), (0, 1)]),
        gcra("zero burst", every(0, S)),
        gcra("zero emission interval", every(3, 0)),
        gcra("burst * emission interval beyond 2^64 - 1 ns", every(2**63, 2)),
        gcra("per_period: zero burst", per(0, 1, S)),
        gcra("per_period: zero tokens", per(3, 0, S)),
        gcra("per_period: zero period", per(3, 1, 0)),
        gcra("per_period: 7 per second is not a whole number of ns apart", per(7, 7, S)),
        gcra("per_period: burst * period / tokens beyond 2^64 - 1 ns", per(2**62, 3, 12)),
        gcra("negative burst", every(-1, S)),
        gcra("emission interval given as a string", every(3, "1000")),
        gcra("negative period", per(3, 1, -S)),
    ]


FILES = [("core-only", "gcra.json", "GCRA: burst then one unit per emission interval, exact; errors.", scenarios)]
