"""Exact rate limiting backed by a Rust core.

>>> from ratekeeper import TokenBucket
>>> bucket = TokenBucket(capacity=5, refill_tokens=1, refill_period=1.0)
>>> decision = bucket.try_acquire(now=0.0)
>>> decision
Decision(allowed=True, remaining=4, limit=5, retry_after=0.0, reset_after=1.0)
>>> bool(decision)
True
>>> bucket.headers(decision)["RateLimit"]
'"default";r=4;t=1'

Algorithms: ``TokenBucket`` (with ``Bandwidth``), ``Gcra``, ``LeakyBucket``,
``SlidingWindowLog``, ``SlidingWindowCounter``, ``FixedWindow``, all
``Limiter``s with the same methods: ``try_acquire``, ``peek``, ``reserve``,
``refund``, ``reconfigure``, ``headers``, the waiting ``acquire``,
``acquire_async`` and ``acquiring`` (context manager and decorator), and
portable state (``to_bytes``, ``restore``, ``from_bytes``, pickling).

``KeyedLimiter`` keeps one limiter per key (``str``, ``bytes`` or ``int``);
``Policy`` decides several limits, each keyed by fields of the request, all
or nothing, answering ``PolicyDecision``s (its ``limits`` are
``PolicyLimit``s). Both take the key or request
first and otherwise answer the same methods. ``ratekeeper.limit`` is a
decorator for sync and async functions (per key with ``key=``).

Durations and ``now`` are seconds (int or float; Decimal or Fraction for
exact values); ``now`` defaults to the limiter's clock, ``time.monotonic()``.
Limiters are safe to share between threads. ``ratekeeper.asgi`` has an ASGI
middleware. ``guarantee(limiter_or_policy)`` says exactly what a configuration
admits in the worst case; ``python -m ratekeeper explain|simulate`` (also the
``ratekeeper`` command) prints it and replays traffic through a policy.
"""

from ratekeeper._errors import RateLimited, RateLimitError, RateLimitMemoryError, RateLimitTypeError
from ratekeeper._policy import PolicyLimit
from ratekeeper._ratekeeper import (
    Bandwidth,
    Decision,
    FixedWindow,
    Gcra,
    Guarantee,
    KeyedLimiter,
    LeakyBucket,
    Limiter,
    Policy,
    PolicyDecision,
    Reservation,
    SlidingWindowCounter,
    SlidingWindowLog,
    TokenBucket,
    __version__,
    guarantee,
)
from ratekeeper._wait import Acquiring, KeyedAcquiring, limit, set_acquire

# The waiting `acquire` sleeps in Python code (see ratekeeper/_wait.py).
set_acquire(Limiter, KeyedLimiter, Policy)
del set_acquire

__all__ = [
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
]
