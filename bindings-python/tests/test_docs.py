"""Every public class and method documents itself in help()."""

from __future__ import annotations

import doctest
import inspect
import pydoc
from typing import Union

import pytest

import ratekeeper
import ratekeeper.asgi
from ratekeeper import (
    Acquiring,
    Bandwidth,
    Decision,
    FixedWindow,
    Gcra,
    KeyedAcquiring,
    KeyedLimiter,
    LeakyBucket,
    Limiter,
    Policy,
    PolicyDecision,
    RateLimited,
    RateLimitError,
    RateLimitTypeError,
    Reservation,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)
from ratekeeper.asgi import RateLimitMiddleware

CLASSES: list[type[Limiter]] = [TokenBucket, Gcra, LeakyBucket, SlidingWindowLog, SlidingWindowCounter, FixedWindow]


def rendered(thing: object) -> str:
    return pydoc.plain(pydoc.render_doc(thing))


def public_members(owner: type) -> list[object]:
    """The public methods and properties ``owner`` defines itself."""
    return [getattr(owner, name) for name in vars(owner) if not name.startswith("_")]


PUBLIC = [
    ratekeeper,
    ratekeeper.asgi,
    *CLASSES,
    *(member for cls in CLASSES for member in public_members(cls)),
    Limiter,
    *public_members(Limiter),
    Bandwidth,
    *public_members(Bandwidth),
    Decision,
    *public_members(Decision),
    Reservation,
    *public_members(Reservation),
    KeyedLimiter,
    *public_members(KeyedLimiter),
    Policy,
    *public_members(Policy),
    PolicyDecision,
    *public_members(PolicyDecision),
    Acquiring,
    KeyedAcquiring,
    KeyedAcquiring.__call__,
    ratekeeper.limit,
    RateLimitError,
    RateLimitTypeError,
    RateLimited,
    RateLimitMiddleware,
    RateLimitMiddleware.decide,
    RateLimitMiddleware.decide_async,
    ratekeeper.asgi.client_host,
    ratekeeper.asgi.request_fields,
]

# What every deciding class answers alike (written once, in the native module).
SHARED = {"try_acquire", "peek", "reserve", "refund", "acquire", "acquire_async", "acquiring", "headers"}


@pytest.mark.parametrize("thing", PUBLIC)
def test_public_items_have_docstrings(thing: object) -> None:
    doc = inspect.getdoc(thing)
    assert doc is not None and len(doc) > 20
    assert doc.splitlines()[0] in rendered(thing)


def test_every_limiter_method_is_documented() -> None:
    names = {name for name in vars(Limiter) if not name.startswith("_")}
    assert names == SHARED | {
        "reconfigure",
        "to_bytes",
        "restore",
        "from_bytes",
        "limit",
        "window",
        "algorithm",
        "name",
    }


def test_keyed_limiters_and_policies_answer_the_shared_methods() -> None:
    keyed = {name for name in vars(KeyedLimiter) if not name.startswith("_")}
    assert keyed == SHARED | {
        "try_acquire_batch",
        "reclaim",
        "reset",
        "limit",
        "window",
        "algorithm",
        "name",
        "max_keys",
        "eviction",
        "limiter",
    }
    policy = {name for name in vars(Policy) if not name.startswith("_")}
    assert policy == SHARED | {"from_rates", "from_config", "add", "reclaim", "reset", "keyed_by", "names", "limits"}
    assert set(vars(PolicyDecision)) >= {"denied_by", "limits"}
    assert issubclass(PolicyDecision, Decision)


def test_keyed_and_policy_signatures_take_their_target_first() -> None:
    assert str(inspect.signature(KeyedLimiter.try_acquire)) == "(self, /, key, cost=1, now=None)"
    assert str(inspect.signature(KeyedLimiter.reserve)) == "(self, /, key, cost=1, *, max_wait=None, now=None)"
    assert str(inspect.signature(KeyedLimiter.refund)) == "(self, /, key, cost, *, taken_at=None)"
    assert str(inspect.signature(Policy.try_acquire)) == "(self, /, request=None, cost=1, now=None)"
    assert str(inspect.signature(Policy.acquire)) == "(self, /, request=None, cost=1, timeout=None)"
    assert str(inspect.signature(Policy.refund)) == "(self, /, request, cost, *, taken_at=None)"
    assert str(inspect.signature(Limiter.acquire)) == "(self, /, cost=1, timeout=None)"


def test_the_answers_are_named_by_their_class() -> None:
    # The docstrings shared with the limiters said a Policy returns a
    # Decision, with no word of what a PolicyDecision adds.
    answered = [Policy.try_acquire.__doc__, Policy.peek.__doc__, Policy.reserve.__doc__]
    try_acquire, peek, reserve = (doc or "" for doc in answered)
    assert try_acquire.startswith("Take ``cost`` units from every limit if each has them")
    assert "Returns a PolicyDecision: " in try_acquire
    assert "``denied_by``" in try_acquire and "``limits``" in try_acquire
    assert peek.startswith("The PolicyDecision ``try_acquire`` would give")
    assert "a denied PolicyDecision" in reserve
    for cls in (Limiter, KeyedLimiter):
        assert "Returns a Decision: " in (cls.try_acquire.__doc__ or "")
        assert (cls.peek.__doc__ or "").startswith("The Decision ``try_acquire`` would give")
        assert "a denied Decision" in (cls.reserve.__doc__ or "")


def test_help_shows_method_signatures_and_docs(capsys: pytest.CaptureFixture[str]) -> None:
    help(TokenBucket)
    text = capsys.readouterr().out
    assert "A token bucket: bursts of up to ``capacity``" in text
    assert "try_acquire(self, /, cost=1, now=None)" in text
    assert "reserve(self, /, cost=1, *, max_wait=None, now=None)" in text
    assert "acquire(self, /, cost=1, timeout=None)" in text
    assert "``time.monotonic``" in text
    help(SlidingWindowLog)
    text = capsys.readouterr().out
    assert "at most ``limit`` units" in text
    assert "try_acquire(self, /, cost=1, now=None)" in text


def test_method_signatures_are_introspectable() -> None:
    for limiter in CLASSES:
        acquire = inspect.signature(limiter.try_acquire)
        assert list(acquire.parameters) == ["self", "cost", "now"]
        assert acquire.parameters["cost"].default == 1
        assert acquire.parameters["now"].default is None
        reserve = inspect.signature(limiter.reserve)
        assert reserve.parameters["max_wait"].kind is inspect.Parameter.KEYWORD_ONLY
    # Every method's, each default a literal (`math.inf` was not one where
    # `math` had not been imported: help() then showed `reserve(...)`).
    owners: list[Union[type[Limiter], type[KeyedLimiter], type[Policy]]] = [*CLASSES, Limiter, KeyedLimiter, Policy]
    for owner in owners:
        for member in public_members(owner):
            if callable(member):
                for parameter in inspect.signature(member).parameters.values():
                    default = parameter.default
                    assert default is inspect.Parameter.empty or isinstance(default, (int, str, tuple, type(None))), (
                        member,
                        parameter,
                    )
        assert inspect.signature(owner.reserve).parameters["max_wait"].default is None


def test_constructor_signatures_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    help(TokenBucket)
    text = capsys.readouterr().out
    assert "initial_tokens=None" in text  # 3.13+ writes a long signature on several lines
    bucket = inspect.signature(TokenBucket)
    assert str(bucket) == (
        "(capacity, refill_tokens, refill_period, *, initial_tokens=None, "
        "refill='greedy', name='default', clock=None)"
    )
    assert bucket.parameters["initial_tokens"].kind is inspect.Parameter.KEYWORD_ONLY
    assert bucket.parameters["name"].default == "default"
    for window_class in (SlidingWindowLog, SlidingWindowCounter, FixedWindow):
        assert list(inspect.signature(window_class).parameters) == ["limit", "window", "name", "clock"]
    assert list(inspect.signature(Gcra).parameters) == ["burst", "emission_interval", "name", "clock"]
    assert list(inspect.signature(LeakyBucket).parameters) == ["capacity", "interval", "name", "clock"]
    assert list(inspect.signature(Bandwidth).parameters)[-1] == "refill"


def test_package_docstring_example_runs() -> None:
    results = doctest.testmod(ratekeeper)
    assert results.attempted >= 4
    assert results.failed == 0
