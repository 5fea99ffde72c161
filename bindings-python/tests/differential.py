"""The Python side of the cross-binding differential test (tests/differential/).

Runs the scenarios tests/differential/generate.cjs makes through the Python
package, as tests/differential/run-js.cjs runs them through the napi addon
and the wasm build, and prints one list of records per scenario (JSON), which
tests/differential/compare.cjs diffs against the JS ones. Not a pytest module:
tests/differential/differential.test.cjs runs it as

    .venv/bin/python bindings-python/tests/differential.py SCENARIOS.json

Units: scenarios speak nanoseconds. Each instant and duration is given as
seconds that are exactly those nanoseconds: an ``int`` of whole seconds, a
``float`` that holds them to the nanosecond, else a ``Fraction``; every fourth
operation a ``Fraction`` regardless, so that both of ``retry_after``'s forms
are compared (counted from a float ``now``, or exact). Decisions are recorded
exactly, in nanoseconds (from ``__reduce__``, which pickles them so), beside
their floats.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from typing import Any, Callable, Optional, Union

import ratekeeper
from ratekeeper import Decision, KeyedLimiter, Limiter, Policy, Reservation

NS_PER_SEC = 1_000_000_000
Seconds = Union[int, float, Fraction]
Subject = Union[Limiter, KeyedLimiter, Policy]
Record = dict[str, Any]


def seconds(ns_text: str, exact: bool = False) -> Seconds:
    """Nanoseconds (a decimal string) as seconds Python reads back exactly."""
    ns = int(ns_text)
    if not exact:
        if ns % NS_PER_SEC == 0:
            return ns // NS_PER_SEC
        as_float = ns / NS_PER_SEC
        # The core rounds a float's own value to the nearest ns, halves up.
        scaled = Fraction(as_float) * NS_PER_SEC
        if int(scaled + Fraction(1, 2)) == ns:
            return as_float
    return Fraction(ns, NS_PER_SEC)


def bandwidth_args(b: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    kwargs: dict[str, Any] = {name: b[name] for name in ("initial_tokens", "refill") if name in b}
    return [b["capacity"], b["refill_tokens"], seconds(b["refill_period"])], kwargs


def constructed(s: dict[str, Any]) -> Optional[tuple[Any, list[Any], dict[str, Any]]]:
    """The class and arguments of a spec's constructor; None for a factory."""
    algorithm = s["algorithm"]
    if algorithm == "token_bucket":
        if s["form"] != "new":
            return None
        args, kwargs = bandwidth_args(s["bandwidths"][0])
        return ratekeeper.TokenBucket, args, kwargs
    if algorithm == "gcra":
        if s["form"] != "new":
            return None
        return ratekeeper.Gcra, [s["burst"], seconds(s["emission_interval"])], {}
    if algorithm == "leaky_bucket":
        return ratekeeper.LeakyBucket, [s["capacity"], seconds(s["interval"])], {}
    if algorithm == "sliding_window_log":
        return ratekeeper.SlidingWindowLog, [s["limit"], seconds(s["window"])], {}
    cls: Any = ratekeeper.FixedWindow if algorithm == "fixed_window" else ratekeeper.SlidingWindowCounter
    if "calendar" in s:
        return None
    return cls, [s["limit"], seconds(s["window"])], {}


def limiter(s: dict[str, Any]) -> Limiter:
    c = constructed(s)
    if c is not None:
        cls, args, kwargs = c
        built: Limiter = cls(*args, **kwargs)
        return built
    algorithm = s["algorithm"]
    if algorithm == "token_bucket":
        bands = [ratekeeper.Bandwidth(*a, **k) for a, k in map(bandwidth_args, s["bandwidths"])]
        return ratekeeper.TokenBucket.from_bandwidths(bands)
    if algorithm == "gcra":
        return ratekeeper.Gcra.per_period(s["burst"], s["tokens"], seconds(s["period"]))
    cls = ratekeeper.FixedWindow if algorithm == "fixed_window" else ratekeeper.SlidingWindowCounter
    return cls.with_calendar(s["limit"], s["calendar"])


def from_bytes(s: dict[str, Any], data: bytes, how: str) -> Limiter:
    """A limiter of spec ``s`` holding ``data``: ``from_bytes`` where a constructor builds it."""
    c = constructed(s)
    if c is not None and how == "from_bytes":
        cls, args, kwargs = c
        restored: Limiter = cls.from_bytes(data, *args, **kwargs)
        return restored
    fresh = limiter(s)
    fresh.restore(data)
    return fresh


def subject(scenario: dict[str, Any]) -> Subject:
    s = scenario["subject"]
    if scenario["kind"] == "limiter":
        return limiter(s)
    if scenario["kind"] == "keyed":
        options = {name: s[name] for name in ("max_keys", "eviction") if name in s}
        return KeyedLimiter(limiter(s["keyed"]), **options)
    policy = Policy()
    # Every limiter built before the first is added, as the JS runner must.
    limiters = [limiter(limit["limiter"]) for limit in s["limits"]]
    for limit, one in zip(s["limits"], limiters):
        add(policy, limit, one)
    return policy


def add(policy: Policy, limit: dict[str, Any], built: Limiter) -> None:
    """``policy.add`` of the limit spec ``limit``, of ``built`` (in a KeyedLimiter for a bound)."""
    added: Union[Limiter, KeyedLimiter] = built
    if "max_keys" in limit or "eviction" in limit:
        options = {name: limit[name] for name in ("max_keys", "eviction") if name in limit}
        added = KeyedLimiter(built, **options)
    policy.add(limit["name"], added, by=limit["by"])


def members(policy: Policy) -> Record:
    """What a policy says of its limits, in the JS runner's words."""
    return {
        "limits": [{"name": limit.name, "by": list(limit.by)} for limit in policy.limits],
        "names": list(policy.names),
        "size": len(policy),
        "keyedBy": [list(policy.keyed_by(name)) for name in policy.names],
    }


def error(e: ratekeeper.RateLimitError) -> Record:
    message = str(e)
    start = message.find("`")
    end = message.find("`", start + 1)
    argument = message[start + 1 : end] if start >= 0 and end > start else None
    return {"error": e.code, "type": isinstance(e, TypeError), "argument": argument, "message": message}


def numbers(n: tuple[bool, int, int, int, int]) -> Record:
    allowed, remaining, limit, retry, reset = n
    return {"allowed": allowed, "remaining": remaining, "limit": limit, "retry_ns": str(retry), "reset_ns": str(reset)}


def decision(d: Decision) -> Record:
    """A decision's exact numbers (``__reduce__`` pickles them in ns), its floats and its ``now``."""
    reduced: tuple[Any, ...] = d.__reduce__()
    exact, now, items, denied_by = reduced[1]
    out = numbers(exact)
    out["retry_after"] = d.retry_after
    out["reset_after"] = d.reset_after
    out["from"] = None if now != now else now  # NaN: counted from an exact `now`
    if isinstance(d, ratekeeper.PolicyDecision):
        out["denied_by"] = d.denied_by
        out["limits"] = [{"name": name, **numbers(n)} for name, _window, n in items]
        assert denied_by is None or items[denied_by][0] == d.denied_by
    return out


def reservation(r: Reservation) -> Record:
    denied = r.decision
    return {
        "ok": r.ok,
        "wait": r.wait,
        "at": r.at,
        "cost": r.cost,
        "decision": None if denied is None else decision(denied),
    }


class Runner:
    """One scenario's subject and what its operations refer back to."""

    def __init__(self, scenario: dict[str, Any], target: Subject) -> None:
        self.scenario = scenario
        self.kind: str = scenario["kind"]
        self.target = target
        self.current: dict[str, Any] = scenario["subject"]
        self.reservations: list[Optional[Reservation]] = []
        self.decisions: list[Decision] = []

    def key(self, op: dict[str, Any]) -> list[Any]:
        field = {"keyed": "key", "policy": "request"}.get(self.kind)
        return [op[field]] if field in op else []

    def perform(self, index: int, op: dict[str, Any]) -> Record:
        t: Any = self.target
        name = op["op"]
        key = self.key(op)

        def at(field: str) -> Seconds:
            return seconds(op[field], exact=index % 4 == 0)

        if name in ("try_acquire", "peek"):
            method: Callable[..., Decision] = t.peek if name == "peek" else t.try_acquire
            d = method(*key, op["cost"], now=at("now"))
            self.decisions.append(d)
            return {"decision": decision(d), "headers": t.headers(d)}
        if name == "reserve":
            max_wait = None if op["max_wait"] == "inf" else at("max_wait")
            r: Reservation = t.reserve(*key, op["cost"], max_wait=max_wait, now=at("now"))
            self.reservations.append(r if r.ok else None)
            return {"reservation": reservation(r)}
        if name == "cancel":
            booked = self.reservations[op["reservation"]]
            if booked is not None:
                booked.cancel()
            return {}
        if name == "refund":
            t.refund(*key, op["cost"], taken_at=at("taken_at"))
            return {}
        if name == "headers":
            if op["decision"] >= len(self.decisions):
                return {}
            return {"headers": t.headers(self.decisions[op["decision"]])}
        if name == "batch":
            return {"decisions": [decision(d) for d in t.try_acquire_batch(*key, op["costs"], now=at("now"))]}
        if name == "reclaim":
            t.reclaim(now=at("now"))
            return {}
        if name == "add":
            add(t, op["limit"], limiter(op["limit"]["limiter"]))
            return {}
        if name == "reconfigure":
            to = self.scenario["alternatives"][op["to"]]
            t.reconfigure(limiter(to), now=at("now"))
            self.current = to
            return {}
        if name == "roundtrip":
            self.target = from_bytes(self.current, t.to_bytes(), op["how"])
            return {}
        if name == "restore_broken":
            data: bytes = t.to_bytes()
            how, where = op["how"], op["at"]
            if how == "truncate":
                broken = data[: where % len(data)]
            elif how == "flip":
                changed = bytearray(data)
                changed[where % len(data)] ^= 1 << where % 8
                broken = bytes(changed)
            elif how == "extend":
                broken = data + bytes([where])
            else:
                alternatives = self.scenario["alternatives"]
                broken = limiter(alternatives[0] if alternatives else self.scenario["subject"]).to_bytes()
            t.restore(broken)
            return {}
        raise AssertionError(f"harness: unknown op {name}")

    def record(self, index: int, op: dict[str, Any]) -> Record:
        try:
            record = {"op": op["op"], **self.perform(index, op)}
        except ratekeeper.RateLimitError as e:
            record = {"op": op["op"], **error(e)}
            if op["op"] == "reserve":
                self.reservations.append(None)
        if op["op"] == "add":
            record["members"] = members(self.target)  # type: ignore[arg-type]
        if self.kind == "limiter":
            state: bytes = self.target.to_bytes()  # type: ignore[union-attr]
            record["state"] = state.hex()
        elif self.kind == "keyed":
            record["size"] = len(self.target)  # type: ignore[arg-type]
        return record


def run_scenario(scenario: dict[str, Any]) -> list[Record]:
    try:
        target = subject(scenario)
    except ratekeeper.RateLimitError as e:
        return [{"op": "build", **error(e)}]
    runner = Runner(scenario, target)
    built: Record = {"op": "build", "members": members(target)} if isinstance(target, Policy) else {"op": "build"}
    return [built] + [runner.record(i, op) for i, op in enumerate(scenario["ops"])]


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        scenarios = json.load(f)
    json.dump([run_scenario(s) for s in scenarios], sys.stdout)


if __name__ == "__main__":
    main()
