"""The shared conformance vectors, run through Python: every scenario of
tests/vectors/*.json and tests/vectors/core-only/*.json, every algorithm and
every op (acquire, peek, reserve, refund), portable state (a scenario's
``state``: the bytes ``to_bytes()`` must give after its steps, which restore
into a fresh limiter, and its ``restore`` cases: broken bytes refused with
their codes), keyed stores (``"keyed"``: a
KeyedLimiter, steps with a ``key``) and policies (``"policy"``: a Policy built
with ``add``, steps with a ``request``), counted against each index.json: a
file the index lists must run, and an algorithm this runner does not know
fails its scenarios rather than being skipped.

Units: the vectors speak nanoseconds; Python speaks seconds. A whole number of
seconds is passed as an ``int`` (exact), a value a float holds to the
nanosecond as ``ns / 1e9`` (a ``float``, rounded back by the core), and any
other (up to 2^64 - 1 ns) as a ``Fraction`` (exact). Durations come back as
floats, compared with ``ns / 1e9``: the binding's own conversion.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any, Union

import pytest

import ratekeeper
from ratekeeper import Limiter

VECTORS = Path(__file__).resolve().parent / ".." / ".." / "tests" / "vectors"
DIRECTORIES = [VECTORS, VECTORS / "core-only"]

# The core's argument names (used by the vectors) -> Python's spelling.
PYTHON_ARGUMENT = {
    name: name
    for name in (
        "capacity refill_tokens refill_period initial_tokens bandwidths burst emission_interval "
        "tokens period interval limit window cost now max_wait name request key costs max_keys calendar by"
    ).split()
}
PYTHON_ARGUMENT["state"] = "data"  # encoded state is `restore(data)` in Python

NS_PER_SEC = 1_000_000_000
FLOAT_EXACT_NS = 2**52  # below this, ns / 1e9 rounds back to ns exactly


def seconds(ns: Any) -> Any:
    """Nanoseconds from a vector -> seconds; non-numbers pass through (type-error cases)."""
    if isinstance(ns, bool) or not isinstance(ns, int):
        return ns
    if ns % NS_PER_SEC == 0:
        return ns // NS_PER_SEC
    if abs(ns) < FLOAT_EXACT_NS:
        return ns / 1e9
    return Fraction(ns, NS_PER_SEC)


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


def bandwidth_args(config: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    args = [config["capacity"], config["refill_tokens"], seconds(config["refill_period_ns"])]
    kwargs: dict[str, Any] = {name: config[name] for name in ("initial_tokens", "refill") if name in config}
    return args, kwargs


# What a scenario builds: a limiter, a keyed store or a policy.
Subject = Union[Limiter, ratekeeper.KeyedLimiter, ratekeeper.Policy]


def build(scenario: dict[str, Any]) -> Subject:
    config, algorithm = scenario["config"], scenario["algorithm"]
    if algorithm == "keyed":
        return ratekeeper.KeyedLimiter(build_limiter(config["algorithm"], config["config"]))
    if algorithm == "policy":
        policy = ratekeeper.Policy()
        for limit in config["limits"]:
            policy.add(limit["name"], build_limiter(limit["algorithm"], limit["config"]), by=limit["by"])
        return policy
    return build_limiter(algorithm, config)


def build_limiter(algorithm: str, config: dict[str, Any]) -> Limiter:
    if algorithm == "token_bucket":
        if "bandwidths" in config:
            bands = [ratekeeper.Bandwidth(*a, **k) for a, k in map(bandwidth_args, config["bandwidths"])]
            return ratekeeper.TokenBucket.from_bandwidths(bands)
        args, kwargs = bandwidth_args(config)
        return ratekeeper.TokenBucket(*args, **kwargs)
    if algorithm == "gcra":
        if "emission_interval_ns" in config:
            return ratekeeper.Gcra(config["burst"], seconds(config["emission_interval_ns"]))
        return ratekeeper.Gcra.per_period(config["burst"], config["tokens"], seconds(config["period_ns"]))
    if algorithm == "leaky_bucket":
        return ratekeeper.LeakyBucket(config["capacity"], seconds(config["interval_ns"]))
    windows: dict[str, type[Limiter]] = {
        "sliding_window_log": ratekeeper.SlidingWindowLog,
        "sliding_window_counter": ratekeeper.SlidingWindowCounter,
        "fixed_window": ratekeeper.FixedWindow,
    }
    if "calendar" in config:  # UTC calendar windows; `now` is then Unix-epoch time
        calendar_class: Any = windows[algorithm]
        calendar_limiter: Limiter = calendar_class.with_calendar(config["limit"], config["calendar"])
        return calendar_limiter
    if algorithm in windows:
        window_class: Any = windows[algorithm]
        limiter: Limiter = window_class(config["limit"], seconds(config["window_ns"]))
        return limiter
    raise AssertionError(f"unknown algorithm {algorithm!r}")


def check_error(error: ratekeeper.RateLimitError, expected: dict[str, str], where: str) -> None:
    argument = PYTHON_ARGUMENT[expected["argument"]]
    assert error.code == expected["code"], f"{where}: code {error.code!r} ({error})"
    assert f"`{argument}`" in str(error), f"{where}: message {str(error)!r} does not name {argument!r}"
    is_type_error = expected["code"] == "invalid_type"
    assert isinstance(error, TypeError) == is_type_error, f"{where}: {type(error).__name__}"
    assert isinstance(error, ratekeeper.RateLimitTypeError) == is_type_error, where
    assert isinstance(error, ValueError), f"{where}: every RateLimitError is a ValueError"


def decision_json(decision: ratekeeper.Decision, expected: dict[str, Any]) -> dict[str, Any]:
    """The decision in the vectors' terms; durations as floats match ``ns / 1e9`` exactly.

    A policy's decision also has ``denied_by`` and ``limits`` (each limit's decision)."""
    assert bool(decision) is decision.allowed
    got: dict[str, Any] = {
        "allowed": decision.allowed,
        "remaining": decision.remaining,
        "limit": decision.limit,
    }
    for name in ("retry_after", "reset_after"):
        value = getattr(decision, name)
        want = expected.get(f"{name}_ns")
        got[f"{name}_ns"] = want if isinstance(want, int) and value == want / 1e9 else value
    if isinstance(decision, ratekeeper.PolicyDecision):
        got["denied_by"] = decision.denied_by
        wanted = expected.get("limits", [])
        got["limits"] = [
            decision_json(own, wanted[i] if i < len(wanted) else {})
            for i, (_, own) in enumerate(decision.limits)
        ]
    return got


def apply(subject: Subject, step: dict[str, Any]) -> dict[str, Any]:
    """Runs one step; returns what to compare with ``step["expect"]``.

    A keyed store's step names its ``key``, a policy's its ``request``: the
    argument each takes before the limiter's."""
    op, cost, now = step.get("op", "acquire"), step["cost"], seconds(step["now_ns"])
    expect = step.get("expect", {})
    limiter: Any = subject
    target = [step[name] for name in ("key", "request") if name in step]
    if op == "acquire":
        return decision_json(limiter.try_acquire(*target, cost, now=now), expect)
    if op == "peek":
        return decision_json(limiter.peek(*target, cost, now=now), expect)
    if op == "reserve":
        reservation = limiter.reserve(*target, cost, max_wait=seconds(step["max_wait_ns"]), now=now)
        assert reservation.cost == cost
        if reservation.ok:
            assert reservation.decision is None
            want = expect.get("wait_ns")
            wait = want if isinstance(want, int) and reservation.wait == want / 1e9 else reservation.wait
            return {"wait_ns": wait}
        assert reservation.decision is not None
        return {"denied": decision_json(reservation.decision, expect.get("denied", {}))}
    if op == "refund":
        limiter.refund(*target, cost, taken_at=now)
        return {}
    raise AssertionError(f"unknown op {op!r}")


def check_state(limiter: Limiter, scenario: dict[str, Any]) -> None:
    """The state after the steps is exactly the expected bytes; they restore into
    a fresh limiter, and every broken variant is refused with its code."""
    expected = bytes.fromhex(scenario["state"])
    assert limiter.to_bytes() == expected, f"state {limiter.to_bytes().hex()}"
    fresh = build_limiter(scenario["algorithm"], scenario["config"])
    fresh.restore(expected)
    assert fresh.to_bytes() == expected
    assert fresh.peek(0, now=0) == limiter.peek(0, now=0)  # as of the latest time seen
    for case in scenario["restore"]:
        with pytest.raises(ratekeeper.RateLimitError) as raised:
            fresh.restore(bytes.fromhex(case["bytes"]))
        check_error(raised.value, {"code": case["expect_error"], "argument": "state"}, f"restore {case}")
        assert fresh.to_bytes() == expected  # unchanged


def run_scenario(scenario: dict[str, Any]) -> None:
    if "expect_error" in scenario:
        with pytest.raises(ratekeeper.RateLimitError) as raised:
            build(scenario)
        check_error(raised.value, scenario["expect_error"], "construction")
        return
    limiter = build(scenario)
    assert scenario["steps"] or "state" in scenario, "a scenario without an error has steps"
    for number, step in enumerate(scenario["steps"]):
        where = f"step {number} {step}"
        if "expect_error" in step:
            with pytest.raises(ratekeeper.RateLimitError) as raised:
                apply(limiter, step)
            check_error(raised.value, step["expect_error"], where)
            continue
        got = apply(limiter, step)
        assert got == step["expect"], f"{where}: got {got}"
    if "state" in scenario:
        assert isinstance(limiter, Limiter)
        check_state(limiter, scenario)


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda d: d.name)
def test_index_lists_exactly_the_vector_files(directory: Path) -> None:
    index = load_index(directory)
    on_disk = {p.name for p in directory.glob("*.json") if p.name != "index.json"}
    assert on_disk == set(index)
    for name, count in index.items():
        document = json.loads((directory / name).read_text(encoding="utf-8"))
        assert len(document["scenarios"]) == count, name


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda d: d.name)
def test_every_scenario_passes_and_all_ran(directory: Path) -> None:
    expected_total = sum(load_index(directory).values())
    assert expected_total > 0
    failures = []
    ran = 0
    ops: set[str] = set()
    for name, scenario in load_scenarios(directory):
        ops.update(step.get("op", "acquire") for step in scenario.get("steps", []))
        try:
            run_scenario(scenario)
        except (Exception, pytest.fail.Exception) as failure:  # report every failing scenario
            failures.append(f"{name}: {type(failure).__name__}: {failure}")
        ran += 1
    assert not failures, "\n".join(failures)
    assert ran == expected_total
    if directory.name == "core-only":
        assert ops == {"acquire", "peek", "reserve", "refund"}


def test_keyed_and_policy_vectors_are_run() -> None:
    """The core-only folder holds keyed stores and policies, and this runner runs them."""
    scenarios = [scenario for _, scenario in load_scenarios(VECTORS / "core-only")]
    assert {"keyed", "policy"} <= {scenario["algorithm"] for scenario in scenarios}
    assert any("state" in scenario for scenario in scenarios)


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        (0, 0),
        (3 * NS_PER_SEC, 3),
        (1, 1e-9),
        (800_000_000, 0.8),
        (-NS_PER_SEC, -1),
        (2**64 - 1, Fraction(2**64 - 1, NS_PER_SEC)),
        ("5", "5"),
    ],
)
def test_unit_conversion_of_the_runner(ns: Any, expected: Any) -> None:
    converted = seconds(ns)
    assert converted == expected
    assert type(converted) is type(expected)
