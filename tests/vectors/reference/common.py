"""What every reference model shares: units, argument checks, scenario recording."""
from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

S = 1_000_000_000  # nanoseconds per second
MS = 1_000_000


class VectorError(Exception):
    """An error the limiter must raise, by code and argument name."""

    def __init__(self, code: str, argument: str):
        super().__init__(code, argument)
        self.code, self.argument = code, argument


def count(value: Any, name: str) -> int:
    """What every binding does with a count taken from the host language."""
    if isinstance(value, str):
        raise VectorError("invalid_type", name)
    if value < 0:
        raise VectorError("invalid_value", name)
    return value


def duration(value: Any, name: str) -> int:
    """A duration or time in ns, checked as the bindings check it."""
    return count(value, name)


def positive(value: int, name: str) -> int:
    if value == 0:
        raise VectorError("zero_value", name)
    return value


def check_cost(cost: int, limit: int) -> None:
    if cost > limit:
        raise VectorError("cost_exceeds_limit", "cost")


def decision(allowed: bool, remaining: int, limit: int, retry_after: int, reset_after: int) -> dict:
    return {"allowed": allowed, "remaining": remaining, "limit": limit,
            "retry_after_ns": retry_after, "reset_after_ns": reset_after}


def run_step(model: Any, request: dict) -> dict:
    """Applies one request ({"op", "now_ns", "cost", ...}) and records the answer.

    A model implements acquire(now, cost) -> decision, and optionally
    reserve(now, cost, max_wait) -> ("wait", ns) | ("denied", decision) and
    refund(now, cost). peek runs acquire on a copy.
    """
    step = dict(request)
    op = request.get("op", "acquire")
    try:
        now = duration(request["now_ns"], "now")
        cost = count(request["cost"], "cost")
        if op == "acquire":
            step["expect"] = model.acquire(now, cost)
        elif op == "peek":
            step["expect"] = copy.deepcopy(model).acquire(now, cost)
        elif op == "reserve":
            kind, value = model.reserve(now, cost, duration(request["max_wait_ns"], "max_wait"))
            step["expect"] = {"wait_ns": value} if kind == "wait" else {"denied": value}
        elif op == "refund":
            model.refund(now, cost)
            step["expect"] = {}
        else:
            raise ValueError(f"unknown op {op}")
    except VectorError as e:
        step["expect_error"] = {"code": e.code, "argument": e.argument}
    return step


def scenario(name: str, algorithm: str, build: Callable[[dict], Any], config: dict,
             requests: Iterable = ()) -> dict:
    """Builds the model from `config` and records each request's answer.

    A request is a (now_ns, cost) pair, or a dict with "op" and its fields.
    """
    out: dict = {"name": name, "algorithm": algorithm, "config": config}
    try:
        model = build(config)
    except VectorError as e:
        out["expect_error"] = {"code": e.code, "argument": e.argument}
        return out
    steps = []
    for r in requests:
        request = {"now_ns": r[0], "cost": r[1]} if isinstance(r, tuple) else r
        steps.append(run_step(model, request))
    out["steps"] = steps
    return out
