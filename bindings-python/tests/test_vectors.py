"""The shared conformance vectors (tests/vectors at the repo root), run through Python.

Units: the vectors speak nanoseconds; Python speaks seconds. A whole number of
seconds is passed as an ``int`` (the binding's exact path), anything else as
``ns / 1e9`` (a ``float``, rounded back to the nanosecond by the core). Outputs
are compared by rounding seconds * 1e9 to an integer number of nanoseconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

import pytest

import ratekeeper

VECTORS_DIR = Path(__file__).resolve().parent / ".." / ".." / "tests" / "vectors"

# The core's argument names (used by the vectors) -> Python's spelling.
PYTHON_ARGUMENT = {
    "capacity": "capacity",
    "refill_tokens": "refill_tokens",
    "refill_period": "refill_period",
    "initial_tokens": "initial_tokens",
    "limit": "limit",
    "window": "window",
    "cost": "cost",
    "now": "now",
}

NS_PER_SEC = 1_000_000_000

Limiter = Union[ratekeeper.TokenBucket, ratekeeper.SlidingWindowLog]


def seconds(ns: Any) -> Any:
    """Nanoseconds from a vector -> seconds; non-numbers pass through (type-error cases)."""
    if isinstance(ns, bool) or not isinstance(ns, (int, float)):
        return ns
    if isinstance(ns, int) and ns % NS_PER_SEC == 0:
        return ns // NS_PER_SEC
    return ns / 1e9


def to_ns(secs: float) -> int:
    return round(secs * 1e9)


def load_index(directory: Path) -> dict[str, int]:
    index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    files: dict[str, int] = index["files"]
    return files


def load_scenarios(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    scenarios: list[tuple[str, dict[str, Any]]] = []
    for name in sorted(load_index(directory)):
        document = json.loads((directory / name).read_text(encoding="utf-8"))
        scenarios.extend((f"{name}: {s['name']}", s) for s in document["scenarios"])
    return scenarios


def build(scenario: dict[str, Any]) -> Limiter:
    config = scenario["config"]
    algorithm = scenario["algorithm"]
    if algorithm == "token_bucket":
        kwargs = {}
        if "initial_tokens" in config:
            kwargs["initial_tokens"] = config["initial_tokens"]
        return ratekeeper.TokenBucket(
            config["capacity"],
            config["refill_tokens"],
            seconds(config["refill_period_ns"]),
            **kwargs,
        )
    if algorithm == "sliding_window_log":
        return ratekeeper.SlidingWindowLog(config["limit"], seconds(config["window_ns"]))
    raise AssertionError(f"unknown algorithm {algorithm!r}")


def check_error(error: ratekeeper.RateLimitError, expected: dict[str, str], where: str) -> None:
    argument = PYTHON_ARGUMENT[expected["argument"]]
    assert error.code == expected["code"], f"{where}: code {error.code!r} ({error})"
    assert argument in str(error), f"{where}: message {str(error)!r} does not name {argument!r}"
    is_type_error = expected["code"] == "invalid_type"
    assert isinstance(error, TypeError) == is_type_error, f"{where}: {type(error).__name__}"
    assert isinstance(error, ratekeeper.RateLimitTypeError) == is_type_error, where
    assert isinstance(error, ValueError), f"{where}: every RateLimitError is a ValueError"


def run_scenario(scenario: dict[str, Any]) -> None:
    if "expect_error" in scenario:
        with pytest.raises(ratekeeper.RateLimitError) as raised:
            build(scenario)
        check_error(raised.value, scenario["expect_error"], "construction")
        return
    limiter = build(scenario)
    assert scenario["steps"], "a scenario without an error has steps"
    for number, step in enumerate(scenario["steps"]):
        where = f"step {number} {step}"
        cost, now = step["cost"], seconds(step["now_ns"])
        if "expect_error" in step:
            with pytest.raises(ratekeeper.RateLimitError) as raised:
                limiter.try_acquire(cost, now=now)
            check_error(raised.value, step["expect_error"], where)
            continue
        decision = limiter.try_acquire(cost, now=now)
        actual = {
            "allowed": decision.allowed,
            "remaining": decision.remaining,
            "limit": decision.limit,
            "retry_after_ns": to_ns(decision.retry_after),
            "reset_after_ns": to_ns(decision.reset_after),
        }
        assert actual == step["expect"], f"{where}: got {actual}"
        assert bool(decision) is decision.allowed, where


def test_index_lists_exactly_the_vector_files() -> None:
    index = load_index(VECTORS_DIR)
    on_disk = {p.name for p in VECTORS_DIR.glob("*.json") if p.name != "index.json"}
    assert on_disk == set(index)
    for name, count in index.items():
        document = json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))
        assert len(document["scenarios"]) == count, name


def test_every_scenario_passes_and_all_ran() -> None:
    expected_total = sum(load_index(VECTORS_DIR).values())
    assert expected_total > 0
    failures = []
    ran = 0
    for name, scenario in load_scenarios(VECTORS_DIR):
        try:
            run_scenario(scenario)
        except (Exception, pytest.fail.Exception) as failure:  # report every failing scenario
            failures.append(f"{name}: {type(failure).__name__}: {failure}")
        ran += 1
    assert not failures, "\n".join(failures)
    assert ran == expected_total


@pytest.mark.parametrize(
    ("ns", "expected"),
    [(0, 0), (3 * NS_PER_SEC, 3), (1, 1e-9), (800_000_000, 0.8), (-NS_PER_SEC, -1), ("5", "5")],
)
def test_unit_conversion_of_the_runner(ns: Any, expected: Any) -> None:
    converted = seconds(ns)
    assert converted == expected
    assert type(converted) is type(expected)
