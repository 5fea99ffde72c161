"""peek, reserve / Reservation / cancel, refund, reconfigure, headers, Bandwidth."""

from __future__ import annotations

import time
from decimal import Decimal
from fractions import Fraction

import pytest
from limiters import ALL, BURSTY, Make

from ratekeeper import (
    Bandwidth,
    Decision,
    FixedWindow,
    Gcra,
    KeyedLimiter,
    LeakyBucket,
    Limiter,
    Policy,
    PolicyDecision,
    RateLimitError,
    Reservation,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
)

# --- peek -----------------------------------------------------------------


@pytest.mark.parametrize("make", BURSTY.values(), ids=BURSTY.keys())
def test_peek_answers_like_try_acquire_and_consumes_nothing(make: Make) -> None:
    limiter = make()
    for now in (0.0, 0.0, 0.05, 0.3):
        for cost in (0, 1, 3, 5):
            assert limiter.peek(cost, now=now) == limiter.peek(cost, now=now)
        peeked = limiter.peek(2, now=now)
        assert limiter.try_acquire(2, now=now) == peeked


# --- reserve --------------------------------------------------------------


@pytest.mark.parametrize("base", [1.7e9, 12_345.678, 1_700_000_000])
def test_retry_after_added_to_the_now_given_reaches_the_instant(base: float) -> None:
    """On an epoch clock (1.7e9 s) float sums are a quarter of a microsecond
    apart: now + retry_after must not fall short of the instant named."""
    def bucket_policy() -> Policy:
        return Policy({"limits": [{"name": "g", "rate": "3/second", "burst": 1}]})

    late = []
    for i in range(200):
        for make in (lambda: Gcra(1, 1 / 4), lambda: TokenBucket(1, 3, 1), bucket_policy):
            limiter = make()
            now = base + i * 0.001
            limiter.try_acquire(now=now)
            denied = limiter.try_acquire(now=now + 0.001)
            assert not denied
            retry = denied.retry_after
            if not limiter.peek(now=now + 0.001 + retry):
                late.append((now, retry))
            # The wait itself is the plain one to within the float step of the sum.
            assert 0 < retry < 1 / 3
    assert late == []
    store = KeyedLimiter(TokenBucket(1, 3, 1))
    store.try_acquire("k", now=base)
    [denied] = store.try_acquire_batch("k", [1], now=base + 0.001)
    assert store.peek("k", now=base + 0.001 + denied.retry_after)
    # A refused reservation's wait is its decision's.
    gcra = Gcra(1, 0.1)
    gcra.try_acquire(now=base)
    refused = gcra.reserve(now=base, max_wait=0)
    assert refused.decision is not None and refused.wait == refused.decision.retry_after
    assert gcra.peek(now=base + refused.wait)
    # An exact now (a Fraction) gets the exact wait.
    exact = TokenBucket(1, 3, 1)
    exact.try_acquire(now=Fraction(1_700_000_000))
    assert exact.try_acquire(now=Fraction(1_700_000_000)).retry_after == 333_333_334 / 1e9


def test_reservations_are_booked_in_order_at_exactly_the_rate() -> None:
    bucket = TokenBucket(2, 1, 1)
    slots = [bucket.reserve(now=0) for _ in range(5)]
    assert [r.wait for r in slots] == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert [r.at for r in slots] == [0.0, 0.0, 1.0, 2.0, 3.0]
    assert all(r.ok and bool(r) and r.cost == 1 and r.decision is None for r in slots)
    # A plain try_acquire never jumps ahead of a booking.
    assert not bucket.try_acquire(now=2.5).allowed
    assert bucket.try_acquire(now=4).allowed


def test_a_refused_reservation_books_nothing() -> None:
    bucket = TokenBucket(1, 1, 1)
    assert bucket.reserve(now=10).ok
    refused = bucket.reserve(max_wait=0.999999999, now=10)
    assert not refused.ok and not refused
    assert refused.decision is not None
    assert (refused.decision.allowed, refused.decision.retry_after) == (False, 1.0)
    assert (refused.wait, refused.at) == (1.0, 11.0)  # when it would have been served
    refused.cancel()  # nothing to give back
    exact = bucket.reserve(max_wait=1, now=10)  # max_wait is exact to the nanosecond
    assert (exact.ok, exact.wait, exact.at) == (True, 1.0, 11.0)
    # None, as for acquire's timeout (and JS's null): no bound, like the default.
    unbounded = bucket.reserve(max_wait=None, now=10)
    assert (unbounded.ok, unbounded.wait) == (True, 2.0)
    # Any infinity is no bound, a Decimal's as math.inf (it was refused as too large).
    waits = [bucket.reserve(max_wait=infinite, now=10).wait for infinite in (float("inf"), Decimal("Infinity"))]
    assert waits == [3.0, 4.0]
    with pytest.raises(RateLimitError):
        bucket.reserve(max_wait=Decimal("-Infinity"), now=10)


def test_reservation_repr_and_read_only() -> None:
    bucket = TokenBucket(1, 1, 0.5)
    booked = bucket.reserve(now=1)
    assert repr(booked) == "Reservation(ok=True, wait=0.0, at=1.0, cost=1)"
    refused = bucket.reserve(max_wait=0, now=1)
    assert repr(refused) == (
        "Reservation(ok=False, cost=1, decision=Decision(allowed=False, remaining=0, "
        "limit=1, retry_after=0.5, reset_after=0.5))"
    )
    with pytest.raises(AttributeError):
        booked.wait = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        Reservation()


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_cancel_gives_the_slot_to_the_next_request(make: Make) -> None:
    limiter = make()
    # Fill it: a queue keeps room for one more unit, to be booked behind.
    room = limiter.limit - 1 if isinstance(limiter, LeakyBucket) else limiter.limit
    first = limiter.reserve(room, now=0)
    second = limiter.reserve(now=0)
    assert first.ok and second.ok and second.wait > 0
    second.cancel()
    second.cancel()  # once is enough
    again = limiter.reserve(now=0)
    assert (again.ok, again.wait) == (True, second.wait)


def test_leaky_bucket_reserve_shapes_a_queue() -> None:
    queue = LeakyBucket(3, 0.1)
    assert [queue.reserve(now=0).wait for _ in range(3)] == [0.0, 0.1, 0.2]
    full = queue.reserve(now=0)
    assert not full.ok
    assert full.decision is not None and full.decision.remaining == 0


# --- refund ---------------------------------------------------------------


def test_refund_returns_unused_units_never_above_a_fresh_limiter() -> None:
    bucket = TokenBucket(10, 1, 1)
    assert bucket.try_acquire(10, now=0).allowed
    bucket.refund(6, taken_at=0)
    assert bucket.peek(0, now=0).remaining == 6
    bucket.refund(100, taken_at=0)
    assert bucket.peek(0, now=0).remaining == 10


def test_refund_taken_at_defaults_to_now_on_the_clock() -> None:
    now = [5.0]
    log = SlidingWindowLog(2, 1, clock=lambda: now[0])
    assert log.try_acquire(2).allowed
    log.refund(1)  # taken at 5.0, the clock's reading
    assert log.try_acquire().allowed
    log.refund(1, taken_at=4.5)  # nothing was taken then: nothing comes back
    assert not log.try_acquire().allowed


# --- reconfigure ----------------------------------------------------------


def test_reconfigure_keeps_state_and_takes_the_new_limits() -> None:
    bucket = TokenBucket(10, 1, 1, name="api")
    assert bucket.try_acquire(7, now=0).allowed
    bucket.reconfigure(TokenBucket(5, 5, 1), now=0)
    assert (bucket.capacity, bucket.refill_tokens, bucket.name) == (5, 5, "api")
    assert bucket.peek(0, now=0).remaining == 3
    assert bucket.try_acquire(5, now=0.4).allowed


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_reconfigure_with_itself_changes_no_limit(make: Make) -> None:
    limiter = make()
    before = repr(limiter)
    limiter.reconfigure(limiter, now=0)
    assert repr(limiter) == before


@pytest.mark.parametrize("called", [False, True])
@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_reconfigure_takes_only_the_configuration_not_the_state(make: Make, called: bool) -> None:
    used = make()
    while used.try_acquire(1, now=0).allowed:
        pass

    def reconfigured(other: Limiter | None) -> bytes:
        limiter = make()
        if called:
            limiter.try_acquire(1, now=0)
        limiter.reconfigure(limiter if other is None else other, now=0)
        return limiter.to_bytes()

    expected = reconfigured(make())
    assert reconfigured(used) == expected
    assert reconfigured(None) == expected  # itself


def test_reconfigure_into_a_calendar_needs_the_epoch_clock() -> None:
    # On time.monotonic, its "UTC days" followed the machine's uptime.
    plain = FixedWindow(1, 1.0)
    with pytest.raises(RateLimitError, match="`other` follows a calendar") as caught:
        plain.reconfigure(FixedWindow.with_calendar(1, "day"))
    assert caught.value.code == "invalid_value"
    on_epoch = FixedWindow(1, 1.0, clock=time.time)
    on_epoch.reconfigure(FixedWindow.with_calendar(1, "day"))
    until_midnight = 86_400 - time.time() % 86_400
    assert abs(on_epoch.try_acquire().reset_after - until_midnight) < 5


def test_reconfigure_needs_the_same_class_and_bandwidth_count() -> None:
    # Another algorithm is a bad value (as in JS); anything but a limiter, a bad type.
    with pytest.raises(RateLimitError, match="`other` must be the same algorithm") as raised:
        FixedWindow(1, 1).reconfigure(SlidingWindowCounter(1, 1))  # type: ignore[arg-type]
    assert raised.value.code == "invalid_value" and not isinstance(raised.value, TypeError)
    with pytest.raises(TypeError, match="`other`") as not_one:
        FixedWindow(1, 1).reconfigure("FixedWindow(1, 1)")  # type: ignore[arg-type]
    assert isinstance(not_one.value, RateLimitError) and not_one.value.code == "invalid_type"
    two = TokenBucket.from_bandwidths([Bandwidth(1, 1, 1), Bandwidth(2, 2, 2)])
    with pytest.raises(RateLimitError, match="`other`") as mismatch:
        two.reconfigure(TokenBucket(1, 1, 1))
    assert mismatch.value.code == "invalid_value"
    assert len(two.bandwidths) == 2


# --- headers --------------------------------------------------------------


def test_headers_of_an_allowed_and_a_denied_decision() -> None:
    bucket = TokenBucket(10, 10, 60, name="per-minute")
    allowed = bucket.try_acquire(10, now=0)
    assert bucket.headers(allowed) == {
        "RateLimit-Policy": '"per-minute";q=10;w=60',
        "RateLimit": '"per-minute";r=0;t=60',
    }
    denied = bucket.try_acquire(now=0.5)
    assert bucket.headers(denied) == {
        "RateLimit-Policy": '"per-minute";q=10;w=60',
        "RateLimit": '"per-minute";r=0;t=60',
        "Retry-After": "6",  # 5.5 s, rounded up
    }
    assert denied.headers() == bucket.headers(denied)


def test_a_decisions_headers_name_the_window_it_was_decided_under() -> None:
    bucket = TokenBucket(10, 10, 60, name="api")
    before = bucket.try_acquire(now=0)
    bucket.reconfigure(TokenBucket(10, 10, 1), now=0)
    after = bucket.try_acquire(now=0)
    assert before.headers()["RateLimit-Policy"] == '"api";q=10;w=60'
    assert after.headers()["RateLimit-Policy"] == '"api";q=10;w=1'
    # The limiter's own headers() names its window now.
    assert bucket.headers(before)["RateLimit-Policy"] == '"api";q=10;w=1'


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_a_decision_kept_never_changes(make: Make) -> None:
    # A limiter answers its last Decision again once nobody holds it (see
    # src/recycle.rs); any Decision still referred to must keep its numbers.
    limiter = make()
    first = limiter.try_acquire(now=0)
    numbers = (first.allowed, first.remaining, first.limit, first.retry_after, first.reset_after)
    in_list = [limiter.try_acquire(2, now=0.01)]
    listed = repr(in_list[0])
    as_key = {limiter.peek(now=0.02): "peeked"}
    (peeked,) = as_key
    peeked_numbers = repr(peeked)
    for now in (0.0, 0.03, 0.5, 100.0):
        limiter.try_acquire(now=now)
        limiter.peek(3, now=now)
        assert limiter.try_acquire(now=now) is not first
    assert (first.allowed, first.remaining, first.limit, first.retry_after, first.reset_after) == numbers
    assert repr(in_list[0]) == listed and repr(peeked) == peeked_numbers
    assert as_key[peeked] == "peeked"


class Allowing(Decision):
    """A subclass of Decision's layout (no slots of its own), which Python
    lets a Decision's holder assign as its ``__class__``: always truthy."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True


@pytest.mark.parametrize("make", ALL.values(), ids=ALL.keys())
def test_a_decision_whose_class_was_assigned_is_not_answered_again(make: Make) -> None:
    # Answered again once nobody held it (src/recycle.rs), it carried the
    # class its last holder gave it to the next caller: a denial that said
    # it was allowed.
    limiter = make()
    mine = limiter.try_acquire(now=0)
    mine.__class__ = Allowing
    del mine
    denied = limiter.try_acquire(limiter.limit, now=0)
    assert type(denied) is Decision and not denied.allowed and not denied
    after = [limiter.peek(now=0) for _ in range(3)]
    assert all(type(decision) is Decision for decision in after)


def test_a_keyed_or_policy_decision_whose_class_was_assigned_is_not_answered_again() -> None:
    keyed = KeyedLimiter(TokenBucket(2, 1, 1))
    mine = keyed.try_acquire("a", now=0)
    mine.__class__ = Allowing
    del mine
    denied = keyed.try_acquire("a", 2, now=0)
    assert type(denied) is Decision and not denied
    policy = Policy("2/second", by=["user"])
    theirs = policy.try_acquire({"user": "a"}, now=0)
    # Whether Python lets the two classes trade places depends on the build:
    # it compares their deallocators, one pyo3 function per class, which an
    # optimised build (LTO) folds into one and a build without LTO keeps
    # apart ("object layout differs"). Refused, the hazard cannot arise.
    try:
        setattr(theirs, "__class__", Decision)  # as plain Python may
    except TypeError as refused_layout:
        assert "layout differs" in str(refused_layout)
        return
    del theirs
    refused = policy.try_acquire({"user": "a"}, 2, now=0)
    assert type(refused) is PolicyDecision and refused.denied_by == "2/second"
    # A Decision made a PolicyDecision tells no limits, in words (a panic,
    # pyo3's PanicException, before).
    made_up = TokenBucket(2, 1, 1).try_acquire(now=0)
    setattr(made_up, "__class__", PolicyDecision)
    assert isinstance(made_up, PolicyDecision)
    with pytest.raises(TypeError, match="made by no policy"):
        made_up.denied_by
    with pytest.raises(TypeError, match="made by no policy"):
        made_up.limits
    with pytest.raises(TypeError, match="made by no policy"):
        repr(made_up)
    with pytest.raises(RateLimitError, match="PolicyDecision"):
        policy.headers(made_up)


def test_headers_use_each_algorithms_window() -> None:
    cases: list[tuple[Limiter, str]] = [
        (Gcra(3, 0.5), "q=3;w=2"),  # 1.5 s, rounded up
        (LeakyBucket(4, 0.25), "q=4;w=1"),
        (SlidingWindowLog(100, 3600), "q=100;w=3600"),
        (FixedWindow(5, 1), "q=5;w=1"),
    ]
    for limiter, policy in cases:
        assert limiter.headers(limiter.peek(now=0))["RateLimit-Policy"] == f'"default";{policy}'


def test_header_names_are_quoted_and_escaped() -> None:
    limiter = FixedWindow(1, 1, name='say "hi" \\ ~')
    policy = limiter.headers(limiter.peek(now=0))["RateLimit-Policy"]
    assert policy == '"say \\"hi\\" \\\\ ~";q=1;w=1'


def test_headers_needs_a_decision() -> None:
    with pytest.raises(TypeError):
        FixedWindow(1, 1).headers(None)  # type: ignore[arg-type]


# --- Bandwidth ------------------------------------------------------------


def test_bandwidth_value_semantics() -> None:
    band = Bandwidth(100, 100, 60, initial_tokens=10, refill="interval")
    assert (band.capacity, band.refill_tokens, band.refill_period) == (100, 100, 60.0)
    assert (band.initial_tokens, band.refill) == (10, "interval")
    assert band == Bandwidth(100, 100, 60.0, initial_tokens=10, refill="interval")
    assert band != Bandwidth(100, 100, 60, initial_tokens=10)
    assert len({band, Bandwidth(100, 100, 60, initial_tokens=10, refill="interval")}) == 1
    assert repr(band) == (
        "Bandwidth(capacity=100, refill_tokens=100, refill_period=60.0, initial_tokens=10, "
        "refill='interval')"
    )
    assert repr(Bandwidth(1, 1, 1)) == "Bandwidth(capacity=1, refill_tokens=1, refill_period=1.0)"


def test_several_bandwidths_all_or_nothing() -> None:
    both = TokenBucket.from_bandwidths(iter([Bandwidth(2, 2, 1), Bandwidth(3, 3, 60)]))
    assert both.try_acquire(2, now=0).allowed
    assert both.try_acquire(1, now=1).allowed
    denied = both.try_acquire(1, now=2)
    assert (denied.allowed, denied.retry_after) == (False, 18.0)


def test_the_default_clock_is_time_monotonic_to_the_nanosecond() -> None:
    # src/convert/clocks.rs reads CLOCK_MONOTONIC itself, not through
    # time.monotonic: its fraction of a second must count (dropped, every
    # reading was a whole second and no test saw it). A reservation with no
    # wait is booked at the clock's reading, `at`, read between two of ours.
    limiter = TokenBucket(1, 1, 1.0)
    before = time.monotonic_ns()
    reservation = limiter.reserve()
    after = time.monotonic_ns()
    assert reservation.ok and reservation.wait == 0.0
    # 1 us for the float `at` (uptimes of years are still exact to 0.1 us).
    assert before - 1_000 <= round(reservation.at * 1e9) <= after + 1_000


def test_a_decision_answered_again_forgets_the_now_of_its_last_call() -> None:
    # A limiter answers its last Decision again once nobody holds it
    # (src/recycle.rs): the `now` the last call gave must not stay with it.
    # Kept, a call on the limiter's clock (no `now`) counted its wait from
    # the old `now`, a float a quarter of a microsecond off on the epoch.
    epoch = 1_700_000_000.1
    limiter = TokenBucket(1, 1, 0.3, clock=lambda: epoch)
    limiter.try_acquire(now=epoch)
    given = limiter.try_acquire(now=epoch)
    assert not given and given.retry_after != 0.3  # counted from `now`
    del given
    on_clock = limiter.try_acquire()
    assert not on_clock and on_clock.retry_after == 0.3
