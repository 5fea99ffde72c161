"""Answers pickle and copy as data: a Decision or PolicyDecision round-trips exactly, headers
included, with no limiter or policy behind it; what holds a live limiter refuses."""

from __future__ import annotations

import copy
import pickle
import pickletools
from fractions import Fraction
from typing import Any, Callable

import pytest

import ratekeeper
from ratekeeper import Decision, Policy, PolicyDecision, TokenBucket

# Every way to copy one: pickled (oldest and newest protocol), copy.copy, copy.deepcopy.
COPIES: list[Callable[[Any], Any]] = [
    lambda x: pickle.loads(pickle.dumps(x, protocol=0)),
    lambda x: pickle.loads(pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)),
    copy.copy,
    copy.deepcopy,
]
COPY_IDS = ["pickle-0", "pickle", "copy", "deepcopy"]


def numbers(decision: Decision) -> tuple[bool, int, int, float, float]:
    return (decision.allowed, decision.remaining, decision.limit, decision.retry_after, decision.reset_after)


def check_copy(decision: Decision, copied: Decision) -> None:
    assert type(copied) is type(decision)
    assert copied == decision and hash(copied) == hash(decision)
    assert numbers(copied) == numbers(decision)
    assert copied.headers() == decision.headers()
    assert repr(copied) == repr(decision)


def limiter_decisions() -> list[Decision]:
    bucket = TokenBucket(10, 1, 1.0, name="api")
    allowed = bucket.try_acquire(4, now=0)
    # On an epoch clock, retry_after is the float that reaches the instant from this `now`.
    bucket.try_acquire(6, now=1.7e9)
    denied = bucket.try_acquire(now=1.7e9 + 0.3)
    # Decided under a window of 10 s; its headers keep saying so after a reconfigure.
    bucket.reconfigure(TokenBucket(5, 1, 2.0))
    return [allowed, denied]


# Beyond 2^53 ns (104 days) a float of seconds is not exact: these differ by 1 ns.
HUGE = Fraction(2**63 + 1, 10**9)


@pytest.mark.parametrize("copier", COPIES, ids=COPY_IDS)
def test_a_limiters_decision_copies_exactly_with_its_headers(copier: Callable[[Decision], Decision]) -> None:
    for decision in limiter_decisions():
        check_copy(decision, copier(decision))


@pytest.mark.parametrize("copier", COPIES, ids=COPY_IDS)
def test_a_given_decision_copies_to_the_nanosecond(copier: Callable[[Decision], Decision]) -> None:
    huge = Decision(False, 2**64 - 1, 2**64 - 1, HUGE, Fraction(2**64 - 1, 10**9), name="big", window=HUGE)
    assert huge != Decision(False, 2**64 - 1, 2**64 - 1, HUGE - Fraction(1, 10**9), Fraction(2**64 - 1, 10**9))
    own = Decision(True, 3, 5, 0, 60, name="b", window=60)
    listed = Decision(True, 1, 2, 0, 0.5, limits=[("a", 1.0, huge), ("b", 60, own)])
    for decision in (huge, listed):
        check_copy(decision, copier(decision))


def test_a_decision_pickles_as_data_not_as_its_issuer() -> None:
    policy = Policy.from_rates("2/second;5/minute", by=["user"])
    decision = policy.try_acquire({"user": "a"}, now=0)
    data = pickle.dumps(decision)
    strings = {arg for _, arg, _ in pickletools.genops(data) if isinstance(arg, str)}
    assert {"PolicyDecision", "_unpickle", "2/second", "5/minute"} <= strings
    assert "Policy" not in strings
    # The policy changes; the copy's headers are those the decision had.
    policy.add("extra", TokenBucket(1, 1, 1))
    assert pickle.loads(data).headers() == decision.headers()


def policy_decisions() -> list[PolicyDecision]:
    policy = Policy.from_rates("2/second;5/minute", by=["user"])
    allowed = policy.try_acquire({"user": "a"}, now=0)
    policy.try_acquire({"user": "a"}, now=0)
    denied = policy.try_acquire({"user": "a"}, now=0.25)
    empty = Policy().try_acquire(now=0)
    return [allowed, denied, empty]


@pytest.mark.parametrize("copier", COPIES, ids=COPY_IDS)
def test_a_policy_decision_copies_every_attribute(copier: Callable[[Any], Any]) -> None:
    policy = Policy.from_rates("2/second;5/minute", by=["user"])
    for decision in policy_decisions():
        copied = copier(decision)
        check_copy(decision, copied)
        assert copied.denied_by == decision.denied_by
        assert copied.limits == decision.limits
        for (name, own), (copied_name, copied_own) in zip(decision.limits, copied.limits):
            assert copied_name == name
            check_copy(own, copied_own)
        if decision.limits:
            assert policy.headers(copied) == policy.headers(decision)
        # A copy of a copy, and a limit's own decision, copy the same.
        check_copy(decision, copier(copied))
        for _, own in decision.limits:
            check_copy(own, copier(own))
    assert [d.denied_by for d in policy_decisions()] == [None, "2/second", None]


class Stamped(Decision):
    """A Python subclass with its own attribute, as ratekeeper.redis's decisions are."""

    stamp: str


@pytest.mark.parametrize("copier", COPIES, ids=COPY_IDS)
def test_a_python_subclass_copies_with_its_attributes(copier: Callable[[Stamped], Stamped]) -> None:
    own = Decision(False, 0, 5, HUGE, HUGE, name="b", window=60)
    decision = Stamped(False, 0, 2, HUGE, 3, limits=[("a", 1, Decision(True, 1, 2, 0, 1)), ("b", 60, own)])
    decision.stamp = "from the store"
    copied = copier(decision)
    check_copy(decision, copied)
    assert copied.stamp == "from the store"


def test_a_redis_decision_copies_with_from_store() -> None:
    redis = pytest.importorskip("ratekeeper.redis")
    decision = redis.RedisDecision(False, 0, 2, 0.5, 1, name="api", window=1)
    decision.from_store = False
    copied = pickle.loads(pickle.dumps(decision))
    check_copy(decision, copied)
    assert copied.from_store is False


def live() -> list[object]:
    bucket = TokenBucket(1, 1, 1)
    return [bucket.reserve(now=0), bucket.reserve(now=0, max_wait=0), ratekeeper.guarantee(bucket)]


@pytest.mark.parametrize("copier", COPIES, ids=COPY_IDS)
def test_reservations_and_guarantees_refuse_to_pickle(copier: Callable[[object], object]) -> None:
    for thing in live():
        with pytest.raises(TypeError, match=rf"^cannot pickle 'ratekeeper\.{type(thing).__name__}' object: "):
            copier(thing)


@pytest.mark.parametrize("copier", COPIES, ids=COPY_IDS)
def test_a_copy_counts_its_wait_from_the_now_given(copier: Callable[[Any], Any]) -> None:
    # Given a float `now` on the epoch, `retry_after` is the float whose sum
    # with `now` reaches the instant, not the plain wait: a copy keeps that.
    epoch = 1_700_000_000.1
    limiter = TokenBucket(1, 1, 0.3)
    limiter.try_acquire(now=epoch)
    denied = limiter.try_acquire(now=epoch)
    assert denied.retry_after != 0.3  # else this tells nothing
    copied = copier(denied)
    check_copy(denied, copied)
    assert copied.retry_after == denied.retry_after


def test_an_unpickled_policy_decision_denied_by_no_limit_is_refused() -> None:
    # `denied_by` indexes the limits pickled: one past the last (as any
    # beyond) is refused when read, not a panic when `denied_by` is read.
    numbers = (False, 0, 2, 500_000_000, 1_000_000_000)
    limits = [("2/second", 1_000_000_000, numbers)]
    unpickle: Any = PolicyDecision._unpickle  # type: ignore[attr-defined]
    assert unpickle(numbers, float("nan"), limits, 0).denied_by == "2/second"
    for index in (1, 2):
        with pytest.raises(ratekeeper.RateLimitError, match="denied_by") as raised:
            unpickle(numbers, float("nan"), limits, index)
        assert raised.value.code == "invalid_value"
