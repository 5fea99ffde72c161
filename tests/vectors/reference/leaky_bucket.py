"""The leaky bucket as a queue, kept as a plain list of every unit's departure slot."""
from __future__ import annotations

from .common import MS, S, VectorError, check_cost, count, decision, duration, positive, scenario

U64 = 2**64 - 1


class NaiveLeakyBucket:
    def __init__(self, c: dict):
        capacity = count(c["capacity"], "capacity")
        interval = duration(c["interval_ns"], "interval")
        self.capacity = positive(capacity, "capacity")
        self.interval = positive(interval, "interval")
        if capacity * interval > U64:
            raise VectorError("overflow", "interval")
        self.slots = []  # every unit ever queued, by the instant it leaves
        self.latest = 0

    def queued(self, t: int) -> int:
        """Units not through at t; the one being sent counts."""
        return sum(1 for s in self.slots if s + self.interval > t)

    def free(self) -> int:
        """When the next unit to join may leave."""
        return max([self.latest] + [s + self.interval for s in self.slots[-1:]])

    def acquire(self, now: int, cost: int) -> dict:
        check_cost(cost, self.capacity)
        at = self.latest = max(self.latest, now)
        free = self.free()
        allowed = cost == 0 or free == at
        if allowed:
            self.slots += [at + k * self.interval for k in range(cost)]
        empty_at = self.free()
        retry = 0 if allowed else min(free - now, U64)
        reset = min(empty_at - now, U64) if empty_at > at else 0
        # remaining: what may be taken at once, all of it while nothing is queued.
        remaining = self.capacity if self.queued(at) == 0 else 0
        return decision(allowed, remaining, self.capacity, retry, reset)

    def reserve(self, now: int, cost: int, max_wait: int):
        d = self.acquire(now, cost)
        if d["allowed"]:
            return ("wait", 0)
        free = self.free()
        if self.queued(self.latest) + cost > self.capacity or free - now > max_wait:
            return ("denied", d)
        self.slots += [free + k * self.interval for k in range(cost)]
        return ("wait", free - now)

    def refund(self, taken_at: int, cost: int) -> None:
        # Only units ending where the queue ends can leave it: later requests were promised their slots.
        if cost > 0 and taken_at + cost * self.interval == self.free():
            self.slots = [s for s in self.slots if s < taken_at]


def queue(capacity, interval) -> dict:
    return {"capacity": capacity, "interval_ns": interval}


def op(name, now, cost, **extra) -> dict:
    return {"op": name, "now_ns": now, "cost": cost, **extra}


def leaky(name, config, requests=()):
    return scenario(name, "leaky_bucket", NaiveLeakyBucket, config, requests)


def wait(now, cost, max_wait) -> dict:
    return op("reserve", now, cost, max_wait_ns=max_wait)


def scenarios():
    t7 = 142_857_143  # about 7 per second, a whole number of ns apart
    return [
        leaky("one unit every 100 ms, queue of 3: delays 0, 100, 200 ms, then full", queue(3, 100 * MS),
              [wait(0, 1, S)] * 4 + [(250 * MS, 1), (300 * MS, 1), wait(300 * MS, 1, S)]),
        leaky("try_acquire admits only when the queue is empty: boundary instants", queue(5, 100 * MS),
              [(0, 1), (0, 1), (100 * MS - 1, 1), (100 * MS, 2), (300 * MS - 1, 0), (300 * MS, 1)]),
        leaky("a request of cost n occupies the line n intervals; a unit being sent counts whole",
              queue(5, 10 * MS),
              [(100 * MS, 2), wait(105 * MS, 3, 15 * MS), wait(105 * MS, 1, U64), op("peek", 149 * MS, 1),
               (150 * MS, 5)]),
        leaky("max_wait bounds the delay, to the nanosecond", queue(10, S),
              [(0, 1), wait(0, 1, S - 1), wait(0, 1, S),
               wait(500 * MS, 2, 1500 * MS - 1), wait(500 * MS, 2, 1500 * MS)]),
        leaky("a queue of 4 fed every 60 ms drains every 100 ms: it fills, then refuses", queue(4, 100 * MS),
              [wait(i * 60 * MS, 1, U64) for i in range(40)]),
        leaky("about 7 per second (142,857,143 ns apart), offered 3 every 0.33 s for 300 s", queue(7, t7),
              [wait(i * 333_333_337, 3, S) for i in range(900)] + [(300 * S, 0)]),
        leaky("time going backwards counts as zero elapsed and delays count the step", queue(3, 10 * MS),
              [(S, 1), (995 * MS, 1), wait(995 * MS, 1, 15 * MS), (S + 15 * MS, 1), (S + 20 * MS, 1)]),
        leaky("peek answers like acquire and consumes nothing", queue(2, S),
              [op("peek", 0, 2), op("peek", 0, 2), (0, 2), op("peek", 500 * MS, 1), op("peek", 2 * S, 1)]),
        leaky("only the last booking, or its last units, can be refunded", queue(4, 10 * MS),
              [wait(0, 1, S)] * 3 + [op("refund", 10 * MS, 1), op("peek", 0, 0), op("refund", 20 * MS, 1),
                                     op("refund", 10 * MS, 1), wait(0, 2, S), op("refund", 20 * MS, 1),
                                     op("peek", 0, 0), (30 * MS, 1)]),
        leaky("a refunded unit that is being sent frees the line at once", queue(3, S),
              [(0, 2), (S + 500 * MS, 0), op("refund", 0, 2), op("peek", S + 500 * MS, 1)]),
        leaky("a queue of 1 holds only the unit being sent; a refused reservation books nothing", queue(1, S),
              [(0, 1), wait(0, 1, S), wait(5 * S, 1, 0), (4 * S, 1)]),
        leaky("near the end of time nothing overflows", queue(3, S),
              [(U64 - S, 3), (U64, 1), wait(U64, 1, U64), (0, 1), wait(0, 1, U64)]),
        leaky("cost above the capacity is an error and the queue keeps working", queue(3, S),
              [(0, 4), wait(0, 4, S), (0, 3), (0, 1)]),
        leaky("bad arguments to a call name the argument", queue(3, S),
              [(0, -1), (0, "2"), (-5, 1), wait(0, 1, -1), (0, 1)]),
        leaky("zero capacity", queue(0, S)),
        leaky("zero interval", queue(3, 0)),
        leaky("capacity * interval beyond 2^64 - 1 ns", queue(2**32, 2**32)),
        leaky("negative capacity", queue(-3, S)),
        leaky("interval given as a string", queue(3, "1000")),
    ]


FILES = [("core-only", "leaky_bucket.json",
          "Leaky bucket as a queue: FIFO departures one interval apart, bounded queue, errors.", scenarios)]
