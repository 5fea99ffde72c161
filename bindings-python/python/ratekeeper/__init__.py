"""Exact rate limiting backed by a Rust core.

>>> from ratekeeper import TokenBucket
>>> bucket = TokenBucket(capacity=5, refill_tokens=1, refill_period=1.0)
>>> decision = bucket.try_acquire(now=0.0)
>>> decision
Decision(allowed=True, remaining=4, limit=5, retry_after=0.0, reset_after=1.0)
>>> bool(decision)
True

Durations and ``now`` are seconds (int or float); ``now`` defaults to
``time.monotonic()``. Limiters are safe to share between threads.
"""

from ratekeeper._errors import RateLimitError, RateLimitTypeError
from ratekeeper._ratekeeper import Decision, SlidingWindowLog, TokenBucket, __version__

__all__ = [
    "Decision",
    "RateLimitError",
    "RateLimitTypeError",
    "SlidingWindowLog",
    "TokenBucket",
    "__version__",
]
