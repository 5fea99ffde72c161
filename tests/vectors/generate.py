#!/usr/bin/env python3
"""Writes the conformance vectors from deliberately naive reference models.

The models below share no code with the Rust core: a token bucket kept as an
exact `Fraction`, and a sliding log kept as a plain list of every admitted
event. Run `python3 tests/vectors/generate.py` to rewrite the files, or with
`--check` to fail when a committed file differs from what the models say.
"""
from __future__ import annotations

import json
import math
import sys
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
S = 1_000_000_000  # nanoseconds per second
MS = 1_000_000
MAX_LOG_LIMIT = 1 << 20


class VectorError(Exception):
    def __init__(self, code: str, argument: str):
        super().__init__(code, argument)
        self.code, self.argument = code, argument


def count(value, name):
    """What every binding does with a count taken from the host language."""
    if isinstance(value, str):
        raise VectorError("invalid_type", name)
    if value < 0:
        raise VectorError("invalid_value", name)
    return value


def duration(value, name):
    if isinstance(value, str):
        raise VectorError("invalid_type", name)
    if value < 0:
        raise VectorError("invalid_value", name)
    return value


class NaiveTokenBucket:
    def __init__(self, capacity, refill_tokens, refill_period_ns, initial_tokens=None):
        capacity = count(capacity, "capacity")
        refill_tokens = count(refill_tokens, "refill_tokens")
        refill_period_ns = duration(refill_period_ns, "refill_period")
        for name, value in [("capacity", capacity), ("refill_tokens", refill_tokens),
                            ("refill_period", refill_period_ns)]:
            if value == 0:
                raise VectorError("zero_value", name)
        if initial_tokens is None:
            initial_tokens = capacity
        initial_tokens = count(initial_tokens, "initial_tokens")
        if initial_tokens > capacity:
            raise VectorError("too_large", "initial_tokens")
        if math.ceil(Fraction(capacity * refill_period_ns, refill_tokens)) >= 2**64:
            raise VectorError("overflow", "refill_period")
        self.capacity = capacity
        self.rate = Fraction(refill_tokens, refill_period_ns)  # tokens per ns
        self.level = Fraction(initial_tokens)
        self.time = None

    def acquire(self, now, cost):
        cost = count(cost, "cost")
        now = duration(now, "now")
        if cost > self.capacity:
            raise VectorError("cost_exceeds_limit", "cost")
        if self.time is None:
            self.time = now
        effective = max(now, self.time)
        self.level = min(Fraction(self.capacity), self.level + self.rate * (effective - self.time))
        self.time = effective
        allowed = self.level >= cost
        if allowed:
            self.level -= cost
        lag = effective - now

        def wait_until(target):
            if self.level >= target:
                return 0
            return lag + math.ceil((target - self.level) / self.rate)

        return {
            "allowed": allowed,
            "remaining": math.floor(self.level),
            "limit": self.capacity,
            "retry_after_ns": 0 if allowed else wait_until(cost),
            "reset_after_ns": wait_until(self.capacity),
        }


class NaiveSlidingWindowLog:
    def __init__(self, limit, window_ns):
        limit = count(limit, "limit")
        window_ns = duration(window_ns, "window")
        if limit == 0:
            raise VectorError("zero_value", "limit")
        if window_ns == 0:
            raise VectorError("zero_value", "window")
        if limit > MAX_LOG_LIMIT:
            raise VectorError("too_large", "limit")
        self.limit, self.window = limit, window_ns
        self.events = []  # (time, cost) of every admitted event, forever
        self.latest = 0

    def used_at(self, t):
        return sum(c for (at, c) in self.events if at + self.window > t)

    def acquire(self, now, cost):
        cost = count(cost, "cost")
        now = duration(now, "now")
        if cost > self.limit:
            raise VectorError("cost_exceeds_limit", "cost")
        self.latest = max(self.latest, now)
        allowed = self.used_at(self.latest) + cost <= self.limit
        if allowed and cost > 0:
            self.events.append((self.latest, cost))
        leave_times = sorted(at + self.window for (at, _) in self.events if at + self.window > self.latest)
        retry = 0
        if not allowed:
            retry = min(t for t in leave_times if self.used_at(t) + cost <= self.limit) - now
        return {
            "allowed": allowed,
            "remaining": self.limit - self.used_at(self.latest),
            "limit": self.limit,
            "retry_after_ns": retry,
            "reset_after_ns": max(leave_times) - now if leave_times else 0,
        }


def model(algorithm, config):
    if algorithm == "token_bucket":
        return NaiveTokenBucket(config["capacity"], config["refill_tokens"],
                                config["refill_period_ns"], config.get("initial_tokens"))
    return NaiveSlidingWindowLog(config["limit"], config["window_ns"])


def scenario(name, algorithm, config, requests=()):
    """Runs `requests` ((now_ns, cost) pairs) through the model, recording each answer."""
    out = {"name": name, "algorithm": algorithm, "config": config}
    try:
        limiter = model(algorithm, config)
    except VectorError as e:
        out["expect_error"] = {"code": e.code, "argument": e.argument}
        return out
    steps = []
    for now, cost in requests:
        step = {"now_ns": now, "cost": cost}
        try:
            step["expect"] = limiter.acquire(now, cost)
        except VectorError as e:
            step["expect_error"] = {"code": e.code, "argument": e.argument}
        steps.append(step)
    out["steps"] = steps
    return out


def tb(capacity, refill_tokens, refill_period_ns, **extra):
    return {"capacity": capacity, "refill_tokens": refill_tokens,
            "refill_period_ns": refill_period_ns, **extra}


def log(limit, window_ns):
    return {"limit": limit, "window_ns": window_ns}


def token_bucket_file():
    return [
        scenario("a full bucket of 5 refilling 1/s hit by 12 requests at once, then one per second",
                 "token_bucket", tb(5, 1, S),
                 [(0, 1)] * 12 + [(S, 1), (S, 1), (2 * S - 1, 1), (2 * S, 1), (60 * S, 0)]),
        scenario("4 per 5 s as a bucket, a request every 0.8 s for 15 requests",
                 "token_bucket", tb(4, 4, 5 * S), [(i * 800 * MS, 1) for i in range(15)]),
        scenario("3 tokens per microsecond: exactly 3,000 one millisecond after starting empty",
                 "token_bucket", tb(3000, 3, 1000, initial_tokens=0),
                 [(0, 0), (0, 1), (999_999, 3000), (1_000_000, 3000), (1_000_000, 1), (1_000_334, 1)]),
        scenario("a non-divisible rate (7 per 3 s, burst 2) over a long run of awkward spacings",
                 "token_bucket", tb(2, 7, 3 * S),
                 [(i * 299_999_989 + (i % 7) * 13, 1 + (i % 3 == 0)) for i in range(600)]),
        scenario("weighted costs and an initial level below capacity",
                 "token_bucket", tb(10, 2, S, initial_tokens=3),
                 [(5 * S, 3), (5 * S, 1), (5 * S + 250 * MS, 4), (7 * S, 4), (7 * S, 0), (20 * S, 10)]),
        scenario("an initially empty bucket starts refilling at its first call",
                 "token_bucket", tb(2, 1, S, initial_tokens=0),
                 [(100 * S, 1), (101 * S - 1, 1), (101 * S, 1)]),
        scenario("time going backwards grants nothing and retry_after counts the lag",
                 "token_bucket", tb(2, 1, S),
                 [(10 * S, 2), (5 * S, 1), (10 * S + 500 * MS, 1), (9 * S, 1), (11 * S, 1), (11 * S, 1)]),
        scenario("cost above capacity is an error and the bucket keeps working",
                 "token_bucket", tb(3, 1, S), [(0, 4), (0, 3), (0, 1), (S, 1)]),
        scenario("bad arguments to a call name the argument",
                 "token_bucket", tb(3, 1, S), [(0, -1), (0, "2"), (-5, 1), (0, 1)]),
        scenario("zero capacity", "token_bucket", tb(0, 1, S)),
        scenario("zero refill tokens", "token_bucket", tb(5, 0, S)),
        scenario("zero refill period", "token_bucket", tb(5, 1, 0)),
        scenario("initial tokens above capacity", "token_bucket", tb(5, 1, S, initial_tokens=6)),
        scenario("refilling the capacity would take more than 2^64 ns", "token_bucket",
                 tb(2**53 - 1, 1, 10**6)),
        scenario("negative capacity", "token_bucket", tb(-1, 1, S)),
        scenario("negative refill period", "token_bucket", tb(5, 1, -1000)),
        scenario("capacity given as a string", "token_bucket", tb("5", 1, S)),
    ]


def sliding_window_log_file():
    return [
        scenario("4 events per 5 s with a request every 0.8 s for 15 requests",
                 "sliding_window_log", log(4, 5 * S), [(i * 800 * MS, 1) for i in range(15)]),
        scenario("three events at the same instant all count",
                 "sliding_window_log", log(3, S),
                 [(0, 1), (0, 1), (0, 1), (0, 1), (S - 1, 1), (S, 1), (S, 1), (S, 1), (S, 1)]),
        scenario("1 per second admits calls exactly 1 s apart",
                 "sliding_window_log", log(1, S),
                 [(0, 1), (S - 1, 1), (S, 1), (2 * S - 1, 1), (2 * S, 1), (5 * S, 1)]),
        scenario("weighted costs free up in the order they were admitted",
                 "sliding_window_log", log(10, 10 * S),
                 [(0, 4), (S, 3), (2 * S, 3), (3 * S, 5), (10 * S, 5), (11 * S, 6), (11 * S, 3), (12 * S, 0)]),
        scenario("a non-divisible spacing (every 0.37 s, 3 per second) over a long run",
                 "sliding_window_log", log(3, S), [(i * 370 * MS + (i % 5), 1) for i in range(400)]),
        scenario("time going backwards records at the latest time seen",
                 "sliding_window_log", log(2, S),
                 [(10 * S, 1), (5 * S, 1), (5 * S, 1), (10 * S + 999_999_999, 1), (11 * S, 1), (11 * S, 1)]),
        scenario("cost above the limit is an error and the log keeps working",
                 "sliding_window_log", log(3, S), [(0, 4), (0, 3), (0, 1), (S, 3)]),
        scenario("bad arguments to a call name the argument",
                 "sliding_window_log", log(3, S), [(0, -2), (0, "1"), (-1, 1), (0, 2)]),
        scenario("zero limit", "sliding_window_log", log(0, S)),
        scenario("zero window", "sliding_window_log", log(3, 0)),
        scenario("a limit above the log's maximum", "sliding_window_log", log(MAX_LOG_LIMIT + 1, S)),
        scenario("negative window", "sliding_window_log", log(3, -S)),
        scenario("limit given as a string", "sliding_window_log", log("3", S)),
    ]


FILES = {
    "token_bucket.json": ("Token bucket: burst, exact refill, errors.", token_bucket_file),
    "sliding_window_log.json": ("Sliding-window log: exact window edges, same-instant events, errors.",
                                sliding_window_log_file),
}


def render(description, scenarios):
    # One step per line keeps the files reviewable in a diff.
    lines = ['{', f'  "description": {json.dumps(description)},', '  "scenarios": [']
    for i, sc in enumerate(scenarios):
        head = {k: v for k, v in sc.items() if k != "steps"}
        body = json.dumps(head)[:-1]
        if "steps" in sc:
            steps = ",\n".join("      " + json.dumps(step) for step in sc["steps"])
            body += ', "steps": [\n' + steps + "\n    ]"
        lines.append("    " + body + "}" + ("," if i + 1 < len(scenarios) else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    outputs = {}
    for name, (description, build) in FILES.items():
        scenarios = build()
        outputs[name] = (render(description, scenarios), len(scenarios))
    index = json.dumps({"files": {n: c for n, (_, c) in outputs.items()}}, indent=2) + "\n"
    wanted = {name: text for name, (text, _) in outputs.items()} | {"index.json": index}
    stale = [n for n, text in wanted.items()
             if not (HERE / n).exists() or (HERE / n).read_text() != text]
    if check:
        if stale:
            sys.exit(f"vectors out of date (run tests/vectors/generate.py): {', '.join(stale)}")
        print(f"vectors up to date: {sum(c for _, c in outputs.values())} scenarios")
        return
    for name in stale:
        (HERE / name).write_text(wanted[name])
    print(f"wrote {len(stale)} file(s); {sum(c for _, c in outputs.values())} scenarios")


if __name__ == "__main__":
    main()
