"""Keyed stores and all-or-nothing policies, as plainly as possible: a dict of
independent naive limiters per (limit, key), never reclaimed; every limit is
peeked on a copy, and all are consumed only when all allow."""
from __future__ import annotations

import copy

from .common import MS, S, VectorError, count, duration, run_step
from .fixed_window import NaiveFixedWindow
from .gcra import NaiveGcra
from .leaky_bucket import NaiveLeakyBucket
from .sliding_window_counter import NaiveSlidingWindowCounter
from .sliding_window_log import NaiveSlidingWindowLog
from .token_bucket import NaiveTokenBucket

MODELS = {
    "token_bucket": NaiveTokenBucket,
    "gcra": NaiveGcra,
    "leaky_bucket": NaiveLeakyBucket,
    "sliding_window_log": NaiveSlidingWindowLog,
    "sliding_window_counter": NaiveSlidingWindowCounter,
    "fixed_window": NaiveFixedWindow,
}


class NaivePolicy:
    def __init__(self, config: dict):
        self.limits = config["limits"]
        names = [limit["name"] for limit in self.limits]
        # A name is a structured-field string in the headers: printable ASCII, not empty.
        printable = all(name and all(" " <= c <= "~" for c in name) for name in names)
        if len(set(names)) != len(names) or not printable:
            raise VectorError("invalid_value", "name")
        if any(len(set(limit.get("by", []))) != len(limit.get("by", [])) for limit in self.limits):
            raise VectorError("invalid_value", "by")
        for limit in self.limits:
            MODELS[limit["algorithm"]](limit["config"])  # configuration errors surface here
        self.models: dict = {}

    def model(self, i: int, request: dict):
        limit = self.limits[i]
        if any(field not in request for field in limit.get("by", [])):
            raise VectorError("invalid_value", "request")
        key = (i,) + tuple(request[field] for field in limit.get("by", []))
        if key not in self.models:
            self.models[key] = MODELS[limit["algorithm"]](limit["config"])
        return self.models[key]

    def step(self, op: str, now: int, cost: int, request: dict) -> dict:
        models = [self.model(i, request) for i in range(len(self.limits))]
        alone = [copy.deepcopy(m).acquire(now, cost) for m in models]
        allowed = all(d["allowed"] for d in alone)
        if allowed and op == "acquire":
            each = [m.acquire(now, cost) for m in models]
        elif allowed:
            each = alone
        else:
            # Nothing is consumed: a limit that would allow reports itself as is.
            each = [d if not d["allowed"] else copy.deepcopy(m).acquire(now, 0) for d, m in zip(alone, models)]
        # With no limits at all, everything is allowed and nothing bounds it.
        unbounded = {"remaining": 2**64 - 1, "limit": 2**64 - 1, "retry_after_ns": 0, "reset_after_ns": 0}
        tightest = min(each, key=lambda d: d["remaining"], default=unbounded)
        denied = [i for i, d in enumerate(each) if not d["allowed"]]
        denier = max(denied, key=lambda i: (each[i]["retry_after_ns"], -i)) if denied else None
        return {
            "allowed": allowed,
            "remaining": tightest["remaining"],
            "limit": tightest["limit"],
            "retry_after_ns": max((d["retry_after_ns"] for d in each), default=0),
            "reset_after_ns": max((d["reset_after_ns"] for d in each), default=0),
            "denied_by": None if denier is None else self.limits[denier]["name"],
            "limits": each,
        }


def run(config: dict, requests) -> dict:
    """A scenario's recorded steps, each {"op", "now_ns", "cost", "request"}."""
    out: dict = {"config": config}
    try:
        policy = NaivePolicy(config)
    except VectorError as e:
        out["expect_error"] = {"code": e.code, "argument": e.argument}
        return out
    steps = []
    for op, now, cost, request in requests:
        step = {"op": op, "now_ns": now, "cost": cost, "request": request}
        try:
            step["expect"] = policy.step(op, duration(now, "now"), count(cost, "cost"), request)
        except VectorError as e:
            step["expect_error"] = {"code": e.code, "argument": e.argument}
        steps.append(step)
    out["steps"] = steps
    return out


def policy(name: str, limits: list, requests) -> dict:
    return {"name": name, "algorithm": "policy", **run({"limits": limits}, requests)}


def keyed(name: str, algorithm: str, config: dict, requests) -> dict:
    """One independent model per key; reservations may wait up to 10 s."""
    models: dict = {}
    steps = []
    for op, now, cost, key in requests:
        model = models.setdefault(key, MODELS[algorithm](config))
        request = {"op": op, "now_ns": now, "cost": cost, "key": key}
        if op == "reserve":
            request["max_wait_ns"] = 10 * S
        steps.append(run_step(model, request))
    return {"name": name, "algorithm": "keyed", "config": {"algorithm": algorithm, "config": config},
            "steps": steps}


def limit(name, algorithm, config, by=()):
    return {"name": name, "by": list(by), "algorithm": algorithm, "config": config}


def policies():
    per_user = limit("per-user", "gcra", {"burst": 2, "emission_interval_ns": 100 * MS}, ["user"])
    per_route = limit("per-user-route", "fixed_window", {"limit": 3, "window_ns": S}, ["user", "route"])
    global_ = limit("global", "sliding_window_log", {"limit": 4, "window_ns": S})
    bucket = limit("per-user-bucket", "token_bucket",
                   {"capacity": 5, "refill_tokens": 1, "refill_period_ns": 250 * MS}, ["user"])
    alice, bob = {"user": "alice", "route": "/a"}, {"user": "bob", "route": "/a"}
    return [
        policy("per-user GCRA and a global log: the global limit denies, nothing consumed",
               [per_user, global_],
               [("acquire", 0, 2, alice), ("acquire", 0, 1, alice), ("acquire", 0, 2, bob),
                ("acquire", 0, 1, {"user": "carol"}), ("peek", 0, 1, {"user": "dave"}),
                ("acquire", 100 * MS, 1, alice), ("acquire", S, 1, bob), ("acquire", S, 2, {"user": "carol"})]),
        policy("three scopes: user, user and route, global; the longest wait names the denier",
               [per_user, per_route, global_],
               [("acquire", 0, 1, alice), ("acquire", 50 * MS, 1, alice), ("acquire", 60 * MS, 1, alice),
                ("acquire", 200 * MS, 1, {"user": "alice", "route": "/b"}),
                ("acquire", 300 * MS, 1, alice), ("acquire", 400 * MS, 1, alice),
                ("acquire", S, 1, alice), ("peek", S + MS, 2, bob)]),
        policy("token bucket and window together, with a cost of 0 and a cost too large",
               [bucket, per_route],
               [("acquire", 0, 3, alice), ("acquire", 0, 0, alice), ("acquire", 10 * MS, 1, alice),
                ("acquire", 20 * MS, 4, alice), ("acquire", 30 * MS, 6, alice), ("acquire", 1100 * MS, 2, alice)]),
        policy("a request without a field a limit is keyed by", [per_user, global_],
               [("acquire", 0, 1, {"route": "/a"}), ("acquire", 0, 1, alice)]),
        policy("two limits with one name", [per_user, {**global_, "name": "per-user"}], []),
        policy("a limit with an empty name", [{**global_, "name": ""}], []),
        policy("a limit whose name is not ASCII", [{**global_, "name": "caf\u00e9"}], []),
        policy("a limit whose name holds a line break", [{**global_, "name": "a\r\nb"}], []),
        policy("a limit whose name holds a control character", [{**global_, "name": "tab\there"}], []),
        policy("a limit named in printable ASCII, quotes and backslashes included", [{**global_, "name": ' "a\\b" ~'}],
               [("acquire", 0, 1, alice)]),
        policy("a limit keyed by one field twice", [{**per_user, "by": ["user", "user"]}], []),
        policy("no limits: everything is allowed", [], [("acquire", 0, 5, alice)]),
        policy("a bad limit configuration", [limit("bad", "gcra", {"burst": 0, "emission_interval_ns": 1})], []),
    ]


def stores():
    gcra = {"burst": 2, "emission_interval_ns": 100 * MS}
    return [
        keyed("GCRA per key: keys are independent; peek inserts nothing", "gcra", gcra,
              [("acquire", 0, 2, "a"), ("acquire", 0, 1, "a"), ("peek", 0, 1, "b"), ("acquire", 0, 2, "b"),
               ("acquire", 50 * MS, 1, "a"), ("acquire", 100 * MS, 1, "a"), ("acquire", S, 2, "a"),
               ("acquire", S, 2, "b")]),
        keyed("token bucket per key, with reservations and refunds", "token_bucket",
              {"capacity": 2, "refill_tokens": 1, "refill_period_ns": S},
              [("acquire", 0, 2, "a"), ("reserve", 0, 1, "a"), ("acquire", 0, 1, "b"),
               ("refund", 0, 1, "b"), ("acquire", 500 * MS, 2, "b"), ("acquire", S, 1, "a")]),
        keyed("fixed window per key; a key back to fresh starts again", "fixed_window",
              {"limit": 2, "window_ns": S},
              [("acquire", 0, 2, "x"), ("acquire", 900 * MS, 1, "x"), ("acquire", S, 2, "x"),
               ("acquire", 5 * S, 1, "y"), ("acquire", 5 * S, 2, "x")]),
    ]


FILES = [
    ("core-only", "policy.json", "Policies: several limits, keyed by request fields, all or nothing.", policies),
    ("core-only", "keyed.json", "Keyed stores: one independent limiter per key.", stores),
]
