"""The Python API: defaults, clocks, Decision, errors, and that bad calls change nothing."""

from __future__ import annotations

import importlib.metadata
import json
import math
import pickle
import sys
import time
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable

import pytest
from limiters import ALL, BURSTY, FakeClock, Make

import ratekeeper
from ratekeeper import (
    Bandwidth,
    Decision,
    FixedWindow,
    Gcra,
    LeakyBucket,
    Limiter,
    RateLimited,
    RateLimitError,
    RateLimitMemoryError,
    RateLimitTypeError,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)

LIMITERS = BURSTY


# --- the package ----------------------------------------------------------


def test_package_exports() -> None:
    assert set(ratekeeper.__all__) == {
        "Acquiring",
        "Bandwidth",
        "Decision",
        "FixedWindow",
        "Gcra",
        "Guarantee",
        "KeyedAcquiring",
        "KeyedLimiter",
        "LeakyBucket",
        "Limiter",
        "Policy",
        "PolicyDecision",
        "PolicyLimit",
        "RateLimitError",
        "RateLimitMemoryError",
        "RateLimitTypeError",
        "RateLimited",
        "Reservation",
        "SlidingWindowCounter",
        "SlidingWindowLog",
        "TokenBucket",
        "__version__",
        "guarantee",
        "limit",
    }
    for name in ratekeeper.__all__:
        assert getattr(ratekeeper, name) is not None
    assert ratekeeper.__version__ == importlib.metadata.version("ratekeeper")


def test_exception_hierarchy() -> None:
    assert issubclass(RateLimitError, ValueError)
    assert not issubclass(RateLimitError, TypeError)
    assert issubclass(RateLimitTypeError, RateLimitError)
    assert issubclass(RateLimitTypeError, TypeError)
    assert issubclass(RateLimited, RateLimitError)
    assert not issubclass(RateLimited, TypeError)
    # Out of memory: Python's own exception for it, and ratekeeper's (.code).
    assert issubclass(RateLimitMemoryError, RateLimitError)
    assert issubclass(RateLimitMemoryError, MemoryError)
    for exported in (RateLimitError, RateLimitMemoryError, RateLimited, Decision, TokenBucket, Limiter, Bandwidth):
        assert exported.__module__ == "ratekeeper"


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_every_algorithm_is_a_limiter_and_final(make: Make) -> None:
    limiter = make()
    assert isinstance(limiter, Limiter)
    with pytest.raises(TypeError):

        class Sub(type(limiter)):  # type: ignore[misc]
            pass


def test_the_base_class_is_not_constructible() -> None:
    with pytest.raises(TypeError):
        Limiter()


# --- defaults ------------------------------------------------------------


@pytest.mark.parametrize("make", LIMITERS.values(), ids=LIMITERS.keys())
def test_fresh_limiter_allows_with_default_cost_and_clock(make: Make) -> None:
    limiter = make()
    first = limiter.try_acquire()
    assert first.allowed
    assert (first.remaining, first.limit) == (4, 5)
    assert limiter.try_acquire().remaining == 3


@pytest.mark.parametrize("make", BURSTY.values(), ids=BURSTY.keys())
def test_clock_is_read_on_every_call_without_now(make: Make) -> None:
    clock = FakeClock(100.0)
    limiter = make(clock)
    assert limiter.try_acquire(5).allowed
    denied = limiter.try_acquire()
    assert not denied.allowed
    assert denied.retry_after > 0
    assert limiter.peek() == denied
    clock.now = 102.0  # long enough to refill the bucket / empty the window
    assert limiter.peek(5).allowed
    assert limiter.try_acquire(5).allowed
    assert not limiter.try_acquire(now=102.0).allowed  # an explicit now wins, on the same timeline


def test_leaky_bucket_reads_its_clock() -> None:
    clock = FakeClock(10.0)
    queue = LeakyBucket(3, 0.5, clock=clock)
    assert queue.try_acquire().allowed
    assert queue.try_acquire().retry_after == 0.5
    clock.now = 10.5
    assert queue.try_acquire().allowed


@pytest.mark.parametrize(
    ("reading", "code"),
    [("soon", "invalid_type"), (-1.0, "invalid_value"), (math.nan, "invalid_value")],
)
def test_a_bad_clock_reading_names_the_clock(reading: object, code: str) -> None:
    bucket = TokenBucket(5, 1, 1, clock=lambda: reading)  # type: ignore[arg-type,return-value]
    with pytest.raises(RateLimitError) as raised:
        bucket.try_acquire()
    check_error(raised.value, code, "clock")
    assert bucket.try_acquire(now=0).allowed


def test_a_clock_that_raises_propagates() -> None:
    def broken() -> float:
        raise OSError("no time")

    with pytest.raises(OSError, match="no time"):
        TokenBucket(5, 1, 1, clock=broken).try_acquire()


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
    assert (bucket.initial_tokens, bucket.refill, bucket.bandwidths) == (5, "greedy", (Bandwidth(5, 2, 0.25),))
    assert (bucket.limit, bucket.window, bucket.algorithm, bucket.name) == (5, 0.625, "token_bucket", "default")
    assert repr(bucket) == "TokenBucket(capacity=5, refill_tokens=2, refill_period=0.25)"
    log = SlidingWindowLog(4, 60)
    assert (log.limit, log.window, log.algorithm) == (4, 60.0, "sliding_window_log")
    assert isinstance(log.window, float)
    assert repr(log) == "SlidingWindowLog(limit=4, window=60.0)"
    assert repr(SlidingWindowLog(1, 1e-9)) == "SlidingWindowLog(limit=1, window=1e-09)"


# (limiter, repr, limit, window, algorithm, own properties)
DESCRIBED: list[tuple[Limiter, str, int, float, str, dict[str, object]]] = [
    (
        TokenBucket(12, 4, 0.1, initial_tokens=0, refill="interval", name="api"),
        "TokenBucket(capacity=12, refill_tokens=4, refill_period=0.1, initial_tokens=0, "
        "refill='interval', name='api')",
        12,
        0.3,
        "token_bucket",
        {"capacity": 12, "refill_tokens": 4, "refill_period": 0.1, "initial_tokens": 0, "refill": "interval"},
    ),
    (
        TokenBucket.from_bandwidths([Bandwidth(10, 10, 1), Bandwidth(100, 100, 60, refill="interval")]),
        "TokenBucket.from_bandwidths([Bandwidth(capacity=10, refill_tokens=10, refill_period=1.0), "
        "Bandwidth(capacity=100, refill_tokens=100, refill_period=60.0, refill='interval')])",
        10,
        1.0,
        "token_bucket",
        {
            "capacity": 10,
            "bandwidths": (Bandwidth(10, 10, 1), Bandwidth(100, 100, 60, refill="interval")),
        },
    ),
    (
        Gcra(3, 0.1),
        "Gcra(burst=3, emission_interval=0.1)",
        3,
        0.3,
        "gcra",
        {"burst": 3, "emission_interval": 0.1},
    ),
    (
        Gcra.per_period(5, 10, 1, name="per second"),
        "Gcra(burst=5, emission_interval=0.1, name='per second')",
        5,
        0.5,
        "gcra",
        {"burst": 5, "emission_interval": 0.1},
    ),
    (
        LeakyBucket(4, 0.25),
        "LeakyBucket(capacity=4, interval=0.25)",
        4,
        1.0,
        "leaky_bucket",
        {"capacity": 4, "interval": 0.25},
    ),
    (
        SlidingWindowCounter(7, 2),
        "SlidingWindowCounter(limit=7, window=2.0)",
        7,
        2.0,
        "sliding_window_counter",
        {},
    ),
    (FixedWindow(7, 0.5), "FixedWindow(limit=7, window=0.5)", 7, 0.5, "fixed_window", {}),
]


@pytest.mark.parametrize(("limiter", "text", "limit", "window", "algorithm", "own"), DESCRIBED)
def test_every_class_describes_itself(
    limiter: Limiter, text: str, limit: int, window: float, algorithm: str, own: dict[str, object]
) -> None:
    assert repr(limiter) == text
    assert (limiter.limit, limiter.window, limiter.algorithm) == (limit, window, algorithm)
    for name, value in own.items():
        assert getattr(limiter, name) == value, name
    with pytest.raises(AttributeError):
        limiter.limit = 1  # type: ignore[misc]


def test_names_are_any_str_and_appear_in_repr() -> None:
    assert FixedWindow(1, 1).name == "default"
    named = FixedWindow(1, 1, name='q"uote')
    assert named.name == 'q"uote'
    assert repr(named) == "FixedWindow(limit=1, window=1.0, name='q\"uote')"


def test_exact_seconds_from_decimal_and_fraction() -> None:
    assert SlidingWindowLog(1, Decimal("0.5")).window == 0.5
    # Exponents near the bound of the shortcut still convert exactly.
    assert SlidingWindowLog(1, Decimal("1e-9")).window == 1e-9
    assert SlidingWindowLog(1, Decimal("1000000000000000000000000000000e-30")).window == 1.0
    assert Gcra(1, 1).try_acquire(now=Decimal("-0E+40")).allowed  # a zero of any exponent is 0
    assert SlidingWindowLog(1, Fraction(1, 3)).window == 0.333333333
    log = SlidingWindowLog(1, 1)
    # Near 2^64 ns a float is thousands of ns apart; a Decimal or Fraction is exact.
    assert log.try_acquire(now=Decimal("18446744071.999999999")).allowed
    assert not log.try_acquire(now=Fraction(18446744072999999998, 10**9)).allowed
    assert log.try_acquire(now=Decimal("18446744072.999999999")).allowed
    # Halves round up, as for floats.
    assert SlidingWindowLog(1, Fraction(1, 2 * 10**9)).window == 1e-9


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
        Decision()  # type: ignore[call-arg]  # the five numbers are required


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
    (lambda: SlidingWindowLog(3, Decimal("NaN")), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, Decimal("Infinity")), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, Decimal("-1")), "invalid_value", "window"),
    # Answered from the exponent: the ratio's billion-digit integer took minutes.
    (lambda: SlidingWindowLog(3, Decimal("1e-999999999")), "zero_value", "window"),
    (lambda: SlidingWindowLog(3, Decimal("-1e-999999999")), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, Decimal("1e+999999999")), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, Decimal("1e31")), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, Decimal("0E+40")), "zero_value", "window"),  # zero, not too large
    (lambda: SlidingWindowLog(3, Fraction(2**65)), "invalid_value", "window"),
    (lambda: SlidingWindowLog(3, Fraction(1, 10**10)), "zero_value", "window"),
    (lambda: SlidingWindowCounter(0, 1), "zero_value", "limit"),
    (lambda: SlidingWindowCounter(3, 0), "zero_value", "window"),
    (lambda: FixedWindow(0, 1), "zero_value", "limit"),
    (lambda: FixedWindow(3, "1"), "invalid_type", "window"),  # type: ignore[arg-type]
    # A calendar that is not a str is of the wrong type, as `refill=5` is.
    (lambda: FixedWindow.with_calendar(5, 5), "invalid_type", "calendar"),  # type: ignore[arg-type]
    (lambda: FixedWindow.with_calendar(5, None), "invalid_type", "calendar"),  # type: ignore[arg-type]
    (lambda: SlidingWindowCounter.with_calendar(5, b"day"), "invalid_type", "calendar"),  # type: ignore[arg-type]
    (lambda: SlidingWindowCounter.with_calendar(5, "fortnight"), "invalid_value", "calendar"),  # type: ignore[arg-type]
    (lambda: Gcra(0, 1), "zero_value", "burst"),
    (lambda: Gcra(3, 0), "zero_value", "emission_interval"),
    (lambda: Gcra(2**63, 2e-9), "overflow", "emission_interval"),
    (lambda: Gcra(3.0, 1), "invalid_type", "burst"),  # type: ignore[arg-type]
    (lambda: Gcra.per_period(3, 0, 1), "zero_value", "tokens"),
    (lambda: Gcra.per_period(7, 7, 1), "invalid_value", "period"),
    (lambda: Gcra.per_period(3, 1, "1"), "invalid_type", "period"),  # type: ignore[arg-type]
    (lambda: LeakyBucket(0, 1), "zero_value", "capacity"),
    (lambda: LeakyBucket(3, -1), "invalid_value", "interval"),
    (lambda: Bandwidth(0, 1, 1), "zero_value", "capacity"),
    (lambda: Bandwidth(2, 1, 1, initial_tokens=3), "too_large", "initial_tokens"),
    (lambda: Bandwidth(2, 1, 1, refill="leaky"), "invalid_value", "refill"),  # type: ignore[arg-type]
    (lambda: TokenBucket(2, 1, 1, refill="Greedy"), "invalid_value", "refill"),  # type: ignore[arg-type]
    (lambda: TokenBucket(2, 1, 1, refill=1), "invalid_type", "refill"),  # type: ignore[arg-type]
    (lambda: TokenBucket.from_bandwidths([]), "zero_value", "bandwidths"),
    (lambda: TokenBucket.from_bandwidths([Bandwidth(1, 1, 1)] * 5), "too_large", "bandwidths"),
    (lambda: TokenBucket.from_bandwidths([(1, 1, 1)]), "invalid_type", "bandwidths"),  # type: ignore[list-item]
    (lambda: TokenBucket.from_bandwidths(Bandwidth(1, 1, 1)), "invalid_type", "bandwidths"),  # type: ignore[arg-type]
    (lambda: TokenBucket(2, 1, 1, name=b"api"), "invalid_type", "name"),  # type: ignore[arg-type]
    (lambda: Gcra(2, 1, name=None), "invalid_type", "name"),  # type: ignore[arg-type]
    (lambda: FixedWindow(2, 1, clock=5), "invalid_type", "clock"),  # type: ignore[arg-type]
    # A Decision given by a store reads its numbers as the limiters read theirs.
    (lambda: Decision("x", 1, 5, 0, 0), "invalid_type", "allowed"),  # type: ignore[arg-type]
    (lambda: Decision(1, 1, 5, 0, 0), "invalid_type", "allowed"),  # type: ignore[arg-type]
    (lambda: Decision(None, 1, 5, 0, 0), "invalid_type", "allowed"),  # type: ignore[arg-type]
    (lambda: Decision(True, -1, 5, 0, 0), "invalid_value", "remaining"),
    (lambda: Decision(True, 2**70, 5, 0, 0), "invalid_value", "remaining"),
    (lambda: Decision(True, 1.5, 5, 0, 0), "invalid_type", "remaining"),  # type: ignore[arg-type]
    (lambda: Decision(True, True, 5, 0, 0), "invalid_type", "remaining"),
    (lambda: Decision(True, 1, -5, 0, 0), "invalid_value", "limit"),
    (lambda: Decision(True, 1, 2**64, 0, 0), "invalid_value", "limit"),
    (lambda: Decision(True, 1, "5", 0, 0), "invalid_type", "limit"),  # type: ignore[arg-type]
    (lambda: Decision(True, 1, 5, NAN, 0), "invalid_value", "retry_after"),
    (lambda: Decision(True, 1, 5, -1, 0), "invalid_value", "retry_after"),
    (lambda: Decision(True, 1, 5, 2**70, 0), "invalid_value", "retry_after"),
    (lambda: Decision(True, 1, 5, "1", 0), "invalid_type", "retry_after"),  # type: ignore[arg-type]
    (lambda: Decision(True, 1, 5, True, 0), "invalid_type", "retry_after"),
    (lambda: Decision(True, 1, 5, 0, INF), "invalid_value", "reset_after"),
    (lambda: Decision(True, 1, 5, 0, None), "invalid_type", "reset_after"),  # type: ignore[arg-type]
    (lambda: Decision(True, 1, 5, 0, 0, window=-1), "invalid_value", "window"),
    (lambda: Decision(True, 1, 5, 0, 0, window="1"), "invalid_type", "window"),  # type: ignore[arg-type]
    (lambda: Decision(True, 1, 5, 0, 0, limits=5), "invalid_type", "limits"),  # type: ignore[arg-type]
    (lambda: Decision(True, 1, 5, 0, 0, limits=[("a", 1.0)]), "invalid_type", "limits"),  # type: ignore[list-item]
    (lambda: Decision(True, 1, 5, 0, 0, limits=[(1, 1.0, Decision(True, 1, 5, 0, 0))]), "invalid_type", "limits"),  # type: ignore[list-item]
    (lambda: Decision(True, 1, 5, 0, 0, limits=[("a", 1.0, (True, 1, 5, 0, 0))]), "invalid_type", "limits"),  # type: ignore[list-item]
    (lambda: Decision(True, 1, 5, 0, 0, limits=[("a", -1, Decision(True, 1, 5, 0, 0))]), "invalid_value", "window"),
]

@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Decision(True, -1, 5, 0.0, 0.0), "`remaining` must not be negative"),
        (lambda: Decision(True, 2**70, 5, 0, 0), "`remaining` must be at most 2^64 - 1"),
        (lambda: Decision("x", 1, 5, 0, 0), "`allowed` must be a bool"),  # type: ignore[arg-type]
        (lambda: Decision(True, 1, 5, NAN, 0), "`retry_after` must be a number, not NaN"),
        (lambda: Decision(True, 1, 5, 0, 0, window=-1), "`window` must not be negative"),
        # As TokenBucket says them of its own arguments.
        (lambda: TokenBucket(-1, 1, 1), "`capacity` must not be negative"),
        (lambda: TokenBucket(2**70, 1, 1), "`capacity` must be at most 2^64 - 1"),
    ],
)
def test_a_given_decision_names_its_bad_argument_as_constructors_do(call: Callable[[], object], message: str) -> None:
    with pytest.raises(RateLimitError) as raised:
        call()
    assert str(raised.value) == message


def test_a_given_decisions_seconds_are_exact_as_a_limiters_are() -> None:
    # Fractions, Decimals and ints are exact: 1 ns apart past 2^53 ns, where floats are not.
    big = Fraction(2**63 + 1, 10**9)
    assert Decision(False, 0, 1, big, 0) != Decision(False, 0, 1, big - Fraction(1, 10**9), 0)
    assert Decision(False, 0, 1, Decimal("0.25"), 2) == Decision(False, 0, 1, 0.25, 2.0)
    assert Decision(True, _Index(3), 5, 0, 0).remaining == 3  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: TokenBucket(10, 1, 1e-10), "`refill_period` must be at least 1 ns; 1e-10 s rounds to 0"),
        (lambda: Bandwidth(10, 1, 4e-10), "`refill_period` must be at least 1 ns; 4e-10 s rounds to 0"),
        (lambda: SlidingWindowLog(3, Fraction(1, 10**10)), "`window` must be at least 1 ns; 1/10000000000 s rounds to 0"),
        (lambda: FixedWindow(3, Decimal("1E-10")), "`window` must be at least 1 ns; 1E-10 s rounds to 0"),
        (lambda: SlidingWindowCounter(3, 1e-10), "`window` must be at least 1 ns; 1e-10 s rounds to 0"),
        (lambda: LeakyBucket(3, 1e-10), "`interval` must be at least 1 ns; 1e-10 s rounds to 0"),
        (lambda: Gcra(3, 1e-10), "`emission_interval` must be at least 1 ns; 1e-10 s rounds to 0"),
        (lambda: Gcra.per_period(3, 1, 1e-10), "`period` must be at least 1 ns; 1e-10 s rounds to 0"),
        # Zero itself is still the core's word for it.
        (lambda: TokenBucket(10, 1, 0.0), "`refill_period` must be greater than zero"),
        (lambda: SlidingWindowLog(3, 0), "`window` must be greater than zero"),
        (lambda: TokenBucket.from_bandwidths([]), "`bandwidths` must hold at least one bandwidth"),
    ],
)
def test_a_positive_duration_that_rounds_to_zero_says_so(call: Callable[[], object], message: str) -> None:
    with pytest.raises(RateLimitError) as raised:
        call()
    assert (str(raised.value), raised.value.code) == (message, "zero_value")


def test_a_duration_of_half_a_nanosecond_rounds_up_to_one() -> None:
    assert TokenBucket(10, 1, 5e-10).refill_period == 1e-9
    # A span may be shorter: max_in_window counts a part of a nanosecond as a whole one.
    assert ratekeeper.guarantee(TokenBucket(10, 1, 1)).max_in_window(1e-10) == 10


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


# Other operations' own arguments: (method, keyword arguments, code, argument).
OPERATION_ERRORS: list[tuple[str, dict[str, Any], str, str]] = [
    ("peek", {"cost": 6}, "cost_exceeds_limit", "cost"),
    ("peek", {"now": -1}, "invalid_value", "now"),
    ("reserve", {"cost": 6}, "cost_exceeds_limit", "cost"),
    ("reserve", {"cost": "1"}, "invalid_type", "cost"),
    ("reserve", {"max_wait": -1}, "invalid_value", "max_wait"),
    ("reserve", {"max_wait": -INF}, "invalid_value", "max_wait"),
    ("reserve", {"max_wait": NAN}, "invalid_value", "max_wait"),
    ("reserve", {"max_wait": "1"}, "invalid_type", "max_wait"),
    ("reserve", {"now": "0"}, "invalid_type", "now"),
    ("refund", {"cost": -1}, "invalid_value", "cost"),
    ("refund", {"cost": 1, "taken_at": -1}, "invalid_value", "taken_at"),
    ("refund", {"cost": 1, "taken_at": "0"}, "invalid_type", "taken_at"),
    ("acquire", {"cost": 6}, "cost_exceeds_limit", "cost"),
    ("acquire", {"cost": 1.5}, "invalid_type", "cost"),
    ("acquire", {"timeout": -1}, "invalid_value", "timeout"),
    ("acquire", {"timeout": "1"}, "invalid_type", "timeout"),
    ("acquire_async", {"cost": None}, "invalid_type", "cost"),
    ("acquire_async", {"timeout": NAN}, "invalid_value", "timeout"),
    ("acquiring", {"cost": -2}, "invalid_value", "cost"),
    ("acquiring", {"timeout": [1]}, "invalid_type", "timeout"),
    ("reconfigure", {"other": None}, "invalid_type", "other"),
]


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize(("kwargs", "code", "argument"), CALL_ERRORS)
def test_bad_call_raises_and_changes_nothing(
    make: Make, kwargs: dict[str, Any], code: str, argument: str
) -> None:
    limiter = make()
    before = limiter.try_acquire(now=0)
    assert before.allowed
    expected = RateLimitTypeError if code == "invalid_type" else RateLimitError
    with pytest.raises(expected) as raised:
        limiter.try_acquire(**{"now": 0, **kwargs})
    check_error(raised.value, code, argument)
    assert limiter.peek(now=0) == limiter.peek(now=0)
    assert limiter.peek(0, now=0).remaining == before.remaining


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
@pytest.mark.parametrize(("method", "kwargs", "code", "argument"), OPERATION_ERRORS)
def test_bad_arguments_to_every_operation(
    make: Make, method: str, kwargs: dict[str, Any], code: str, argument: str
) -> None:
    limiter = make()
    fresh = limiter.peek(0, now=0)
    expected = RateLimitTypeError if code == "invalid_type" else RateLimitError
    with pytest.raises(expected) as raised:
        getattr(limiter, method)(**kwargs)
    check_error(raised.value, code, argument)
    assert limiter.peek(0, now=0) == fresh


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


@pytest.mark.parametrize("error_class", [RateLimitError, RateLimitTypeError, RateLimitMemoryError])
def test_errors_pickle_with_their_code(error_class: type[RateLimitError]) -> None:
    error = error_class("`cost` must be an int", "invalid_type")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is error_class
    assert (str(copy), copy.code) == (str(error), error.code)


def test_rate_limited_pickles_with_its_wait() -> None:
    # Raised in a worker process, it reaches the parent pickled: the wait it
    # carries is what the caller retries after.
    window = FixedWindow(1, 60, clock=lambda: 0.0)
    window.try_acquire()
    with pytest.raises(RateLimited) as raised:
        window.acquire(timeout=0)
    copy = pickle.loads(pickle.dumps(raised.value))
    assert type(copy) is RateLimited
    assert (str(copy), copy.code, copy.retry_after) == (str(raised.value), "rate_limited", raised.value.retry_after)
    assert copy.retry_after == 60


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


# --- str arguments that are not text ---------------------------------------

# A str with a lone surrogate (as os.fsdecode gives for undecodable bytes) has
# no UTF-8: refused up front as a bad value naming the argument, never a bare
# UnicodeEncodeError (later, from repr, headers, pickling or acquire).
LONE_SURROGATE = "a\udc80b"
NOT_TEXT = "must be valid Unicode text (no lone surrogates)"


def check_not_text(call: Callable[[], object], argument: str) -> None:
    with pytest.raises(RateLimitError) as raised:
        call()
    assert type(raised.value) is RateLimitError, "a bad value, not a bad type"
    check_error(raised.value, "invalid_value", argument)
    assert str(raised.value) == f"`{argument}` {NOT_TEXT}"


NAMED: list[Callable[[str], Limiter]] = [
    lambda name: TokenBucket(5, 5, 1, name=name),
    lambda name: TokenBucket.from_bandwidths([Bandwidth(5, 5, 1)], name=name),
    lambda name: Gcra(5, 0.2, name=name),
    lambda name: Gcra.per_period(5, 5, 1, name=name),
    lambda name: LeakyBucket(5, 0.2, name=name),
    lambda name: SlidingWindowLog(5, 1, name=name),
    lambda name: SlidingWindowCounter(5, 1, name=name),
    lambda name: SlidingWindowCounter.with_calendar(5, "day", name=name),
    lambda name: FixedWindow(5, 1, name=name),
    lambda name: FixedWindow.with_calendar(5, "month", name=name),
]


# A name is a header's structured-field string: printable ASCII, not empty.
PRINTABLE_ASCII = "must be printable ASCII (space to ~), as the RateLimit headers carry it"
BAD_NAMES = [
    ("", "must not be empty"),
    ("caf\u00e9-api", PRINTABLE_ASCII),
    ("\U0001f600", PRINTABLE_ASCII),
    ("a\r\nRetry-After: 0", PRINTABLE_ASCII),
    ("tab\there", PRINTABLE_ASCII),
    ("del\x7f", PRINTABLE_ASCII),
]


def check_bad_name(call: Callable[[], object], reason: str, argument: str = "name") -> None:
    with pytest.raises(RateLimitError) as raised:
        call()
    assert type(raised.value) is RateLimitError, "a bad value, not a bad type"
    check_error(raised.value, "invalid_value", argument)
    assert str(raised.value).endswith(f"`{argument}` {reason}")


@pytest.mark.parametrize("named", NAMED, ids=range(len(NAMED)))
def test_a_name_that_is_not_text_is_refused_at_construction(named: Callable[[str], Limiter]) -> None:
    check_not_text(lambda: named(LONE_SURROGATE), "name")
    check_not_text(lambda: named("\ud800"), "name")


@pytest.mark.parametrize("named", NAMED, ids=range(len(NAMED)))
def test_a_name_is_printable_ascii_as_the_headers_carry_it(named: Callable[[str], Limiter]) -> None:
    # It was taken, then written as '""' or with '?' for each other
    # character: "caf?-api", which names no limit.
    for bad, reason in BAD_NAMES:
        check_bad_name(lambda: named(bad), reason)
    limiter = named(' say "hi" \\ ~')
    assert limiter.name == ' say "hi" \\ ~'
    assert pickle.loads(pickle.dumps(limiter)).name == limiter.name
    assert limiter.headers(limiter.peek())["RateLimit"].startswith('" say \\"hi\\" \\\\ ~";')


def test_policy_limit_names_follow_the_rule_of_limiter_names() -> None:
    for bad, reason in BAD_NAMES:
        policy = ratekeeper.Policy()
        check_bad_name(lambda: policy.add(bad, FixedWindow(1, 60)), reason)
        check_bad_name(lambda: policy.add(bad, ratekeeper.KeyedLimiter(FixedWindow(1, 60))), reason)
        assert len(policy) == 0
        config = {"limits": [{"name": bad, "rate": "1/second"}]}
        check_bad_name(lambda: ratekeeper.Policy(config), reason)
        check_bad_name(lambda: ratekeeper.Policy.from_config(config), reason)
        # A decision given by a store names its limits as limiters do.
        check_bad_name(lambda: Decision(True, 1, 1, 0, 0, name=bad), reason)
        check_bad_name(lambda: Decision(True, 1, 1, 0, 0, limits=[(bad, 1, Decision(True, 1, 1, 0, 0))]), reason)


def test_keys_that_are_not_text_are_refused_leaving_the_store_working() -> None:
    store = ratekeeper.KeyedLimiter(FixedWindow(3, 60))
    store.try_acquire("k", now=0)
    for call in (
        lambda: store.try_acquire(LONE_SURROGATE, now=0),
        lambda: store.peek("\ud800", now=0),
        lambda: store.acquire("\udfff", timeout=0),
        lambda: store.acquiring(LONE_SURROGATE),
    ):
        check_not_text(call, "key")
    assert len(store) == 1 and store.peek("k", now=0).remaining == 1
    assert store.try_acquire("a\u00e9\U0001f600", now=0), "text outside ASCII is fine"


def test_request_fields_that_are_not_text_are_refused() -> None:
    policy = ratekeeper.Policy()
    policy.add("per-user", FixedWindow(1, 60), by=["user"])
    # A value is named by its field; a field's name, by the argument.
    check_not_text(lambda: policy.try_acquire({"user": LONE_SURROGATE}, now=0), "request['user']")
    check_not_text(lambda: policy.peek({"user": "x", LONE_SURROGATE: "y"}, now=0), "request")
    check_not_text(lambda: policy.acquire({"user": "\ud800"}, timeout=0), "request['user']")
    assert policy.try_acquire({"user": "x"}, now=0), "nothing was taken"


def test_policy_by_fields_that_are_not_text_are_refused() -> None:
    policy = ratekeeper.Policy()
    check_not_text(lambda: policy.add("per-user", FixedWindow(1, 60), by=["user", LONE_SURROGATE]), "by")
    check_not_text(lambda: ratekeeper.Policy.from_rates("1/second", by=[LONE_SURROGATE]), "by")
    check_not_text(lambda: ratekeeper.Policy("1/second", by=[LONE_SURROGATE]), "by")
    assert len(policy) == 0


def test_policy_limit_names_that_are_not_text_are_refused() -> None:
    policy = ratekeeper.Policy()
    check_not_text(lambda: policy.add(LONE_SURROGATE, FixedWindow(1, 60)), "name")
    assert len(policy) == 0


def test_every_str_argument_of_a_policy_is_read_as_text() -> None:
    check_not_text(lambda: ratekeeper.Policy(LONE_SURROGATE), "config")
    check_not_text(lambda: ratekeeper.Policy.from_rates(LONE_SURROGATE), "rates")
    check_not_text(lambda: ratekeeper.Policy.from_config(LONE_SURROGATE), "config")
    check_not_text(lambda: ratekeeper.Policy("1/second").keyed_by(LONE_SURROGATE), "name")
    decision: Any = ratekeeper.Decision
    check_not_text(lambda: decision(True, 1, 1, 0, 0, name=LONE_SURROGATE), "name")


def test_a_configurations_strings_that_are_not_text_are_refused_by_their_field() -> None:
    """As JS refuses them (tests/js/policy.test.cjs): a mapping's lone
    surrogate, and one JSON text escapes, named by the field of the limit it
    is in, else `config`; the first in the text, before anything else. They
    were `invalid_config`, "not valid JSON", where Policy.add said
    `invalid_value`."""
    limit = '{{"limits": [{{"name": "a", "rate": "1/second", {}}}]}}'.format
    cases = [
        (limit('"by": ["u", "\\ud800"]'), "by"),
        ('{"limits": [{"name": "a\\udc00", "rate": "1/second"}]}', "name"),
        ('{"limits": [{"name": "a", "rate": "1/second\\ud800"}]}', "rate"),
        (limit('"algorithm": "gcra\\ud800"'), "algorithm"),
        (limit('"calendar": "\\udfff"'), "calendar"),
        (limit('"eviction": "refuse\\ud800"'), "eviction"),
        (limit('"burst": "\\ud800"'), "burst"),
        (limit('"by": [["\\ud800"]]'), "by"),
        (limit('"by": {"\\ud800": 1}'), "by"),
        (limit('"colour": "\\ud800"'), "colour"),
        (limit('"x\\ud800": 1'), "config"),
        ('{"x\\ud800": 1}', "config"),
        ('{"limits": ["\\ud800"]}', "config"),
        ('{"limits": [{"name": "\\ud800", "name": "a", "rate": "1/second"}]}', "name"),
        (limit('"burst": 1, "burst": 1, "rate": "\\ud800"'), "rate"),
        (limit('"burst": 2.0, "by": ["\\ud800"]'), "by"),
        (limit('"rate": "\\ud800", "by": ["\\ud800"]'), "rate"),
        # A lead surrogate before another escape, or a trail after an escape: lone too.
        (limit('"by": ["\\ud800\\u0041", "\\n\\udc00"]'), "by"),
    ]
    for text, name in cases:
        given: list[Any] = [text, json.loads(text)]
        # A mapping repeats no key: json.loads kept the last name, which is text.
        if '"name": "\\ud800", "name"' in text:
            given.pop()
        for config in given:
            for make in (ratekeeper.Policy, ratekeeper.Policy.from_config):
                check_not_text(lambda: make(config), name)
    # Not JSON otherwise: not JSON, as JS's JSON.parse finds it first.
    with pytest.raises(RateLimitError, match="^`config` is not valid JSON: EOF while parsing") as raised:
        ratekeeper.Policy('{"limits": [{"name": "\\ud800", "rate": "1/second"}]')
    assert raised.value.code == "invalid_config"
    # A pair is one character: read as any other.
    assert ratekeeper.Policy(limit('"by": ["\\ud83d\\ude00"]')).limits[0].by == ("\U0001f600",)


def test_a_configurations_numbers_are_read_as_json_loads_and_json_parse_read_them() -> None:
    """Rounded once, to the nearest float: 1.7976931348623158e308 is the
    largest float, as json.loads and JS's JSON.parse read it. serde_json's
    default reading (without its float_roundtrip) rounds twice, and found it
    and others about the largest float "out of range", not JSON, where JS
    read them and went on to what else the text holds."""
    limit = '{{"limits": [{{"name": "a", "rate": "1/second", {}}}]}}'.format
    largest = [
        "1.7976931348623158e308",
        "-1.7976931348623158e308",
        "1797693134862315708e290",
        "0.17976931348623158e309",
        str(2**1024 - 2**971),
        "17976931348623157" + "0" * 292,
    ]
    for number in largest:
        assert abs(float(json.loads(number))) == sys.float_info.max
        check_not_text(lambda: ratekeeper.Policy(limit(f'"by": ["\\ud800"], "x": {number}')), "by")
        with pytest.raises(RateLimitError, match=r"^`config` limits\[0\]\.burst: "):
            ratekeeper.Policy(limit(f'"burst": {number}'))
    # Past it, out of range in every binding.
    for number in ("1.7976931348623159e308", "1e309", "-1e309"):
        assert abs(json.loads(number)) == float("inf")
        with pytest.raises(RateLimitError, match=r"^`config` is not valid JSON: number out of range"):
            ratekeeper.Policy(limit(f'"by": ["\\ud800"], "x": {number}'))


def test_arguments_of_the_wrong_type_are_the_bindings_type_error() -> None:
    policy: Any = ratekeeper.Policy("1/second")
    limiter: Any = FixedWindow(1, 1)
    for call, argument in (
        (lambda: policy.add(5, FixedWindow(1, 60)), "name"),
        (lambda: ratekeeper.Policy.from_rates(b"1/second"), "rates"),  # type: ignore[arg-type]
        (lambda: policy.keyed_by(5), "name"),
        (lambda: policy.headers(limiter.peek()), "decision"),
        (lambda: limiter.headers(5), "decision"),
    ):
        with pytest.raises(RateLimitTypeError) as raised:
            call()
        check_error(raised.value, "invalid_type", argument)
    with pytest.raises(RateLimitTypeError) as raised:
        ratekeeper.limit(5)  # type: ignore[call-overload]
    assert raised.value.code == "invalid_type"


def test_a_limiter_refuses_a_policys_decision_as_a_policy_refuses_a_limiters() -> None:
    # It made headers up: the policy's tightest limit under the limiter's
    # name and window ('"default";q=1;w=3').
    policy = ratekeeper.Policy("1/second;5/minute")
    decision = policy.try_acquire({}, now=0)
    fixed = FixedWindow(5, 3)
    from ratekeeper.redis import RedisPolicyDecision

    one = ratekeeper.Decision(False, 0, 1, 1.0, 3.0, name="1/second", window=1.0)
    redis_policy_decision = RedisPolicyDecision(False, 0, 1, 1.0, 3.0, limits=[("1/second", 1.0, one)])
    redis_policy_decision.denied_by = "1/second"
    redis_policy_decision.from_store = True
    for limiter in (fixed, ratekeeper.KeyedLimiter(fixed)):
        with pytest.raises(RateLimitTypeError) as raised:
            limiter.headers(decision)
        check_error(raised.value, "invalid_type", "decision")
        assert str(raised.value) == "`decision` must be a limiter's Decision, not a policy's (policy.headers takes that)"
        # Unpickled, it is still a policy's; so is a RedisPolicy's (a
        # Decision made in Python, holding denied_by and limits).
        with pytest.raises(RateLimitTypeError):
            limiter.headers(pickle.loads(pickle.dumps(decision)))
        with pytest.raises(RateLimitTypeError):
            limiter.headers(redis_policy_decision)
    with pytest.raises(RateLimitTypeError) as raised:
        policy.headers(fixed.peek(now=0))  # type: ignore[arg-type]
    check_error(raised.value, "invalid_type", "decision")
    # One limit's own decision within the policy's is a limiter's.
    assert fixed.headers(decision.limits[0][1])["RateLimit-Policy"] == '"default";q=1;w=3'


def test_choices_that_are_not_text_are_bad_values() -> None:
    check_not_text(lambda: TokenBucket(1, 1, 1, refill=LONE_SURROGATE), "refill")  # type: ignore[arg-type]
    check_not_text(lambda: FixedWindow.with_calendar(1, LONE_SURROGATE), "calendar")  # type: ignore[arg-type]
    algorithm: Any = LONE_SURROGATE
    check_not_text(lambda: ratekeeper.Policy.from_rates("1/second", algorithm=algorithm), "algorithm")


class _Index:
    """An integer that is not an int, as NumPy's are: only `__index__`."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_integers_with_index_count_as_ints() -> None:
    bucket = TokenBucket(5, 1, 1)
    cost: Any = _Index(2)
    now: Any = _Index(0)
    assert bucket.try_acquire(cost, now=now).remaining == 3
    assert bucket.peek(cost, now=_Index(10)).remaining == 3  # type: ignore[arg-type]
    with pytest.raises(RateLimitError, match="`cost` must not be negative"):
        bucket.try_acquire(_Index(-1))  # type: ignore[arg-type]
    store = ratekeeper.KeyedLimiter(Gcra(1, 10))
    key: Any = _Index(42)
    assert store.try_acquire(key, now=0).allowed
    assert not store.try_acquire("42", now=0).allowed, "42 as __index__ and '42' are one key"


def test_a_big_int_key_is_its_digits_whatever_its_str() -> None:
    class Shown(int):
        def __str__(self) -> str:
            return "shown"

    store = ratekeeper.KeyedLimiter(Gcra(1, 10))
    assert store.try_acquire(Shown(2**70), now=0).allowed
    assert not store.try_acquire(str(2**70), now=0).allowed
    assert store.try_acquire("shown", now=0).allowed
