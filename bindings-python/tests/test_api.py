"""The Python API: defaults, Decision, errors, and that bad calls change nothing."""

from __future__ import annotations

import importlib.metadata
import math
import pickle
import time
from typing import Any, Callable, Union

import pytest

import ratekeeper
from ratekeeper import (
    Decision,
    RateLimitError,
    RateLimitTypeError,
    SlidingWindowLog,
    TokenBucket,
)

Limiter = Union[TokenBucket, SlidingWindowLog]
LIMITERS: dict[str, Callable[[], Limiter]] = {
    "token_bucket": lambda: TokenBucket(5, 1, 1.0),
    "sliding_window_log": lambda: SlidingWindowLog(5, 1.0),
}


# --- the package ----------------------------------------------------------


def test_package_exports() -> None:
    assert set(ratekeeper.__all__) == {
        "Decision",
        "RateLimitError",
        "RateLimitTypeError",
        "SlidingWindowLog",
        "TokenBucket",
        "__version__",
    }
    for name in ratekeeper.__all__:
        assert getattr(ratekeeper, name) is not None
    assert ratekeeper.__version__ == importlib.metadata.version("ratekeeper")


def test_exception_hierarchy() -> None:
    assert issubclass(RateLimitError, ValueError)
    assert not issubclass(RateLimitError, TypeError)
    assert issubclass(RateLimitTypeError, RateLimitError)
    assert issubclass(RateLimitTypeError, TypeError)
    assert RateLimitError.__module__ == "ratekeeper"
    assert Decision.__module__ == "ratekeeper"
    assert TokenBucket.__module__ == "ratekeeper"


# --- defaults ------------------------------------------------------------


@pytest.mark.parametrize("make", LIMITERS.values(), ids=LIMITERS.keys())
def test_fresh_limiter_allows_with_default_cost_and_clock(make: Callable[[], Limiter]) -> None:
    limiter = make()
    first = limiter.try_acquire()
    assert first.allowed
    assert (first.remaining, first.limit) == (4, 5)
    assert limiter.try_acquire().remaining == 3


@pytest.mark.parametrize("make", LIMITERS.values(), ids=LIMITERS.keys())
def test_default_now_reads_time_monotonic_on_every_call(
    make: Callable[[], Limiter], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    limiter = make()
    assert limiter.try_acquire(5).allowed
    denied = limiter.try_acquire()
    assert not denied.allowed
    assert denied.retry_after == 1.0
    clock[0] = 105.0  # long enough to refill the bucket / empty the window
    assert limiter.try_acquire(5).allowed


def test_default_now_is_on_the_same_timeline_as_time_monotonic() -> None:
    bucket = TokenBucket(1, 1, 1000)
    assert bucket.try_acquire().allowed  # now = time.monotonic(), read by the binding
    denied = bucket.try_acquire(now=time.monotonic())
    assert not denied.allowed
    # Only the time between the two calls has passed: far less than a minute.
    assert 940.0 < denied.retry_after <= 1000.0


def test_initial_tokens_defaults_to_full_and_can_start_empty() -> None:
    assert TokenBucket(3, 1, 2).try_acquire(3, now=0).allowed
    empty = TokenBucket(3, 1, 2, initial_tokens=0)
    denied = empty.try_acquire(now=0)
    assert not denied.allowed
    assert denied.retry_after == 2.0
    assert empty.try_acquire(now=2).allowed


def test_cost_zero_is_allowed_and_takes_nothing() -> None:
    bucket = TokenBucket(2, 1, 1, initial_tokens=0)
    decision = bucket.try_acquire(0, now=0)
    assert decision.allowed
    assert decision.remaining == 0
    log = SlidingWindowLog(2, 1)
    assert log.try_acquire(0, now=0).remaining == 2


def test_int_and_float_seconds_agree() -> None:
    as_int, as_float = TokenBucket(2, 1, 3), TokenBucket(2, 1, 3.0)
    for now in (0, 0.5, 1, 7.25):
        assert as_int.try_acquire(now=now) == as_float.try_acquire(now=float(now))


def test_time_going_backwards_grants_nothing() -> None:
    bucket = TokenBucket(1, 1, 10)
    assert bucket.try_acquire(now=50).allowed
    assert not bucket.try_acquire(now=40).allowed
    assert not bucket.try_acquire(now=55).allowed
    assert bucket.try_acquire(now=60).allowed


def test_limiter_properties_and_repr() -> None:
    bucket = TokenBucket(5, 2, 0.25)
    assert (bucket.capacity, bucket.refill_tokens, bucket.refill_period) == (5, 2, 0.25)
    assert repr(bucket) == "TokenBucket(capacity=5, refill_tokens=2, refill_period=0.25)"
    log = SlidingWindowLog(4, 60)
    assert (log.limit, log.window) == (4, 60.0)
    assert isinstance(log.window, float)
    assert repr(log) == "SlidingWindowLog(limit=4, window=60.0)"
    assert repr(SlidingWindowLog(1, 1e-9)) == "SlidingWindowLog(limit=1, window=1e-09)"


# --- Decision ------------------------------------------------------------


def test_decision_fields_types_and_bool() -> None:
    bucket = TokenBucket(1, 1, 2)
    allowed = bucket.try_acquire(now=0)
    denied = bucket.try_acquire(now=0.5)
    assert allowed.allowed is True and bool(allowed) is True
    assert denied.allowed is False and bool(denied) is False
    for decision in (allowed, denied):
        assert type(decision.remaining) is int
        assert type(decision.limit) is int
        assert type(decision.retry_after) is float
        assert type(decision.reset_after) is float
    assert (denied.remaining, denied.limit) == (0, 1)
    assert (denied.retry_after, denied.reset_after) == (1.5, 1.5)
    assert allowed.retry_after == 0.0


def test_decision_repr() -> None:
    bucket = TokenBucket(5, 1, 1.0)
    assert (
        repr(bucket.try_acquire(now=0))
        == "Decision(allowed=True, remaining=4, limit=5, retry_after=0.0, reset_after=1.0)"
    )
    bucket.try_acquire(4, now=0)
    assert (
        repr(bucket.try_acquire(now=0.75))
        == "Decision(allowed=False, remaining=0, limit=5, retry_after=0.25, reset_after=4.25)"
    )


def test_decision_equality_and_hash() -> None:
    first = TokenBucket(2, 1, 1).try_acquire(now=0)
    same = TokenBucket(2, 1, 1).try_acquire(now=0)
    other = TokenBucket(3, 1, 1).try_acquire(now=0)
    assert first == same and hash(first) == hash(same)
    assert first != other
    assert len({first, same, other}) == 2
    assert first != (True, 1, 2, 0.0, 1.0)
    assert first.__eq__(1) is NotImplemented


def test_decision_is_read_only_and_not_constructible() -> None:
    decision = TokenBucket(1, 1, 1).try_acquire(now=0)
    with pytest.raises(AttributeError):
        decision.allowed = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        Decision()


# --- bad arguments -------------------------------------------------------

NAN, INF = math.nan, math.inf

# (call, code, Python argument name)
CONSTRUCTION_ERRORS: list[tuple[Callable[[], object], str, str]] = [
    (lambda: TokenBucket(0, 1, 1), "zero_value", "capacity"),
    (lambda: TokenBucket(-1, 1, 1), "invalid_value", "capacity"),
    (lambda: TokenBucket(2**64, 1, 1), "invalid_value", "capacity"),
    (lambda: TokenBucket("5", 1, 1), "invalid_type", "capacity"),  # type: ignore[arg-type]
    (lambda: TokenBucket(True, 1, 1), "invalid_type", "capacity"),
    (lambda: TokenBucket(5.0, 1, 1), "invalid_type", "capacity"),  # type: ignore[arg-type]
    (lambda: TokenBucket(None, 1, 1), "invalid_type", "capacity"),  # type: ignore[arg-type]
    (lambda: TokenBucket(5, 0, 1), "zero_value", "refill_tokens"),
    (lambda: TokenBucket(5, -3, 1), "invalid_value", "refill_tokens"),
    (lambda: TokenBucket(5, "1", 1), "invalid_type", "refill_tokens"),  # type: ignore[arg-type]
    (lambda: TokenBucket(5, False, 1), "invalid_type", "refill_tokens"),
    (lambda: TokenBucket(5, 1, 0), "zero_value", "refill_period"),
    (lambda: TokenBucket(5, 1, 0.0), "zero_value", "refill_period"),
    (lambda: TokenBucket(5, 1, 1e-10), "zero_value", "refill_period"),
    (lambda: TokenBucket(5, 1, -1), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, -0.5), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, NAN), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, INF), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, -INF), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, 1e300), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, 2**70), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, 10**11), "invalid_value", "refill_period"),
    (lambda: TokenBucket(5, 1, "1"), "invalid_type", "refill_period"),  # type: ignore[arg-type]
    (lambda: TokenBucket(5, 1, True), "invalid_type", "refill_period"),
    (lambda: TokenBucket(5, 1, None), "invalid_type", "refill_period"),  # type: ignore[arg-type]
    (lambda: TokenBucket(2**64 - 1, 1, 1), "overflow", "refill_period"),
    (lambda: TokenBucket(5, 1, 1, initial_tokens=6), "too_large", "initial_tokens"),
    (lambda: TokenBucket(5, 1, 1, initial_tokens=-1), "invalid_value", "initial_tokens"),
    (lambda: TokenBucket(5, 1, 1, initial_tokens="1"), "invalid_type", "initial_tokens"),  # type: ignore[arg-type]
    (lambda: TokenBucket(5, 1, 1, initial_tokens=1.0), "invalid_type", "initial_tokens"),  # type: ignore[arg-type]
    (lambda: SlidingWindowLog(0, 1), "zero_value", "limit"),
    (lambda: SlidingWindowLog(-1, 1), "invalid_value", "limit"),
    (lambda: SlidingWindowLog(2**40, 1), "too_large", "limit"),
    (lambda: SlidingWindowLog("3", 1), "invalid_type", "limit"),  # type: ignore[arg-type]
    (lambda: SlidingWindowLog(True, 1), "invalid_type", "limit"),
    (lambda: SlidingWindowLog(3, 0), "zero_value", "window"),
    (lambda: SlidingWindowLog(3, -1.0), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, NAN), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, INF), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, "1"), "invalid_type", "window"),  # type: ignore[arg-type]
    (lambda: SlidingWindowLog(3, None), "invalid_type", "window"),  # type: ignore[arg-type]
]

# (keyword arguments to try_acquire on a limiter of 5, code, Python argument name)
CALL_ERRORS: list[tuple[dict[str, Any], str, str]] = [
    ({"cost": 6}, "cost_exceeds_limit", "cost"),
    ({"cost": 2**63}, "cost_exceeds_limit", "cost"),
    ({"cost": -1}, "invalid_value", "cost"),
    ({"cost": 2**64}, "invalid_value", "cost"),
    ({"cost": "1"}, "invalid_type", "cost"),
    ({"cost": True}, "invalid_type", "cost"),
    ({"cost": 1.0}, "invalid_type", "cost"),
    ({"cost": None}, "invalid_type", "cost"),
    ({"now": -1}, "invalid_value", "now"),
    ({"now": -0.001}, "invalid_value", "now"),
    ({"now": NAN}, "invalid_value", "now"),
    ({"now": INF}, "invalid_value", "now"),
    ({"now": 1e30}, "invalid_value", "now"),
    ({"now": 2**64}, "invalid_value", "now"),
    ({"now": "0"}, "invalid_type", "now"),
    ({"now": True}, "invalid_type", "now"),
    ({"now": [0]}, "invalid_type", "now"),
]


def check_error(error: RateLimitError, code: str, argument: str) -> None:
    assert error.code == code, str(error)
    assert argument in str(error)
    assert isinstance(error, ValueError)
    is_type_error = code == "invalid_type"
    assert isinstance(error, TypeError) is is_type_error
    assert isinstance(error, RateLimitTypeError) is is_type_error


@pytest.mark.parametrize(("call", "code", "argument"), CONSTRUCTION_ERRORS)
def test_bad_construction_raises(call: Callable[[], object], code: str, argument: str) -> None:
    expected = RateLimitTypeError if code == "invalid_type" else RateLimitError
    with pytest.raises(expected) as raised:
        call()
    check_error(raised.value, code, argument)


@pytest.mark.parametrize("make", LIMITERS.values(), ids=LIMITERS.keys())
@pytest.mark.parametrize(("kwargs", "code", "argument"), CALL_ERRORS)
def test_bad_call_raises_and_changes_nothing(
    make: Callable[[], Limiter], kwargs: dict[str, Any], code: str, argument: str
) -> None:
    limiter = make()
    assert limiter.try_acquire(now=0).remaining == 4
    expected = RateLimitTypeError if code == "invalid_type" else RateLimitError
    with pytest.raises(expected) as raised:
        limiter.try_acquire(**{"now": 0, **kwargs})
    check_error(raised.value, code, argument)
    after = limiter.try_acquire(now=0)
    assert after.allowed
    assert after.remaining == 3


def test_errors_are_caught_by_the_builtin_classes() -> None:
    with pytest.raises(ValueError, match="capacity"):
        TokenBucket(0, 1, 1)
    with pytest.raises(TypeError, match="cost"):
        TokenBucket(1, 1, 1).try_acquire("1")  # type: ignore[arg-type]


def test_call_signature_errors_are_plain_type_errors() -> None:
    with pytest.raises(TypeError) as positional:
        TokenBucket(5, 1, 1, 5)  # type: ignore[call-arg]
    assert not isinstance(positional.value, RateLimitError)
    with pytest.raises(TypeError):
        TokenBucket(5, 1, 1).try_acquire(1, 0, 0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        SlidingWindowLog(limit=5, windw=1)  # type: ignore[call-arg]


def test_keyword_arguments() -> None:
    bucket = TokenBucket(capacity=2, refill_tokens=1, refill_period=1, initial_tokens=1)
    assert bucket.try_acquire(cost=1, now=0).remaining == 0
    log = SlidingWindowLog(limit=2, window=1)
    assert log.try_acquire(cost=2, now=0).remaining == 0


@pytest.mark.parametrize("error_class", [RateLimitError, RateLimitTypeError])
def test_errors_pickle_with_their_code(error_class: type[RateLimitError]) -> None:
    error = error_class("`cost` must be an int", "invalid_type")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is error_class
    assert (str(copy), copy.code) == (str(error), error.code)


def test_raised_error_pickles() -> None:
    with pytest.raises(RateLimitError) as raised:
        SlidingWindowLog(2, 1).try_acquire(3, now=0)
    copy = pickle.loads(pickle.dumps(raised.value))
    assert copy.code == "cost_exceeds_limit"
    assert "cost" in str(copy)


def test_int_and_float_subclasses_are_accepted() -> None:
    class Count(int):
        pass

    class Seconds(float):
        pass

    bucket = TokenBucket(Count(2), Count(1), Seconds(0.5))
    assert bucket.try_acquire(Count(2), now=Seconds(1.0)).remaining == 0
    assert bucket.refill_period == 0.5
