"""A typed use of the public API, checked with `mypy --strict` (and run) by scripts/python.sh."""

from __future__ import annotations

import sys

import ratekeeper
from ratekeeper import Decision, RateLimitError, RateLimitTypeError, SlidingWindowLog, TokenBucket

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # mypy depends on typing_extensions, so it is installed wherever this is checked
    from typing_extensions import assert_type


def admit(limiter: TokenBucket | SlidingWindowLog, cost: int = 1, now: float | None = None) -> bool:
    decision = limiter.try_acquire(cost, now=now)
    assert_type(decision, Decision)
    assert_type(decision.allowed, bool)
    assert_type(decision.remaining, int)
    assert_type(decision.limit, int)
    assert_type(decision.retry_after, float)
    assert_type(decision.reset_after, float)
    return bool(decision)


def main() -> None:
    bucket = TokenBucket(5, 1, 1.0, initial_tokens=5)
    assert_type(bucket.capacity, int)
    assert_type(bucket.refill_tokens, int)
    assert_type(bucket.refill_period, float)
    log = SlidingWindowLog(limit=4, window=5)
    assert_type(log.limit, int)
    assert_type(log.window, float)
    assert admit(bucket, now=0)
    assert admit(log, 2, now=0.5)
    assert admit(bucket)
    decisions: set[Decision] = {bucket.try_acquire(now=0), log.try_acquire(0)}
    assert decisions
    try:
        bucket.try_acquire(100, now=0)
    except RateLimitTypeError as error:
        assert_type(error.code, str)
        raise
    except RateLimitError as error:
        assert_type(error.code, str)
        assert error.code == "cost_exceeds_limit"
    assert_type(ratekeeper.__version__, str)


if __name__ == "__main__":
    main()
