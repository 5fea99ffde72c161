"""``ratekeeper.guarantee``: the core's exact worst cases, seconds at the boundary."""

from __future__ import annotations

from fractions import Fraction

import pytest

import ratekeeper
from ratekeeper import FixedWindow, Policy, RateLimitTypeError, SlidingWindowCounter, TokenBucket, guarantee


def test_token_bucket() -> None:
    g = guarantee(TokenBucket(10, 10, 1.0, name="api"))
    assert (g.name, g.algorithm, g.exact) == ("api", "token_bucket", True)
    assert g.max_in_window(1) == 19 and g.max_in_window(Fraction(1, 10**9)) == 10
    assert g.max_in_window(0) == 0
    assert (g.burst, g.sustained, g.per_second) == (10, (1, 100_000_000), 10.0)
    assert (g.retry_after, g.reset_after) == (0.1, 1.0)
    assert (g.strict, g.excess, g.limits) == ((10, 1.0), 9, ())
    assert repr(g) == "Guarantee(name='api', algorithm='token_bucket', burst=10, exact=True)"
    # The name as Python writes it, as every repr here: Rust's quoting differed.
    name = 'say "hi"'
    assert repr(guarantee(TokenBucket(1, 1, 1, name=name))).startswith(f"Guarantee(name={name!r}, ")


def test_windows_and_calendars() -> None:
    fixed = guarantee(FixedWindow(100, 60))
    assert (fixed.max_in_window(60), fixed.excess) == (200, 100)
    month = guarantee(FixedWindow.with_calendar(100, "month"))
    assert month.exact is True
    # From January's last instant, 31 days meet all of February and March's start.
    assert month.max_in_window(31 * 86_400) == 300
    assert month.max_in_window(28 * 86_400) == 200
    assert guarantee(SlidingWindowCounter.with_calendar(100, "month")).exact is False  # a bound
    counter = guarantee(SlidingWindowCounter(10, 1))
    assert (counter.max_in_window(1), counter.sustained) == (19, (9, 1_000_000_000))


def test_policy_combines_its_limits() -> None:
    g = guarantee(Policy.from_rates("10/second;100/minute", by=["user"]))
    assert (g.name, g.algorithm, g.exact) == ("policy", "policy", True)
    assert [limit.name for limit in g.limits] == ["10/second", "100/minute"]
    assert g.max_in_window(60) == min(limit.max_in_window(60) for limit in g.limits) == 199
    assert (g.strict, g.excess) == (None, None)
    assert (g.retry_after, g.reset_after) == (0.6, 60.0)
    empty = guarantee(Policy())
    assert (empty.sustained, empty.per_second, empty.limits) == (None, None, ())


def test_keyed_limiter_answers_for_each_key() -> None:
    g = guarantee(ratekeeper.KeyedLimiter(ratekeeper.Gcra(5, 0.1, name="per-user")))
    assert (g.name, g.algorithm, g.burst, g.max_in_window(1)) == ("per-user", "gcra", 5, 5 + 9)


def test_state_is_ignored() -> None:
    bucket = TokenBucket(5, 1, 1.0)
    bucket.try_acquire(5, now=0)
    assert guarantee(bucket).burst == 5


def test_wrong_subject_and_window() -> None:
    with pytest.raises(RateLimitTypeError, match="subject") as err:
        guarantee("10/second")  # type: ignore[arg-type]
    assert err.value.code == "invalid_type"
    with pytest.raises(ratekeeper.RateLimitError, match="window"):
        guarantee(TokenBucket(1, 1, 1)).max_in_window(-1)
