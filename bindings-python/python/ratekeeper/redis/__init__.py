"""Limits shared by every process and host, kept in Redis.

``RedisLimiter`` (one limiter per key) and ``RedisPolicy`` (several limits,
all or nothing) decide on Redis with the user's own client: ``redis.Redis``
(or ``redis.cluster.RedisCluster``) for the sync classes, ``redis.asyncio.Redis``
for ``AsyncRedisLimiter`` and ``AsyncRedisPolicy``, whose methods are
coroutines. Each decision is one ``EVALSHA`` of the script the core ships
(``REDIS_SCRIPT``, whose SHA-1 is ``REDIS_SCRIPT_SHA``; protocol in ``core/redis/PROTOCOL.md``),
which decides exactly as the in-process classes do, in integer microseconds.

- Time: the Redis server's clock by default; pass ``clock=time.time`` (or
  ``now=`` per call, seconds since the Unix epoch) for the caller's clock.
- Hot keys: while a round trip for a key is in flight, later
  ``try_acquire`` calls for that key wait and go together as one batch
  (``batching=False`` turns it off).
- Faults: ``on_error="closed"`` (default: deny), ``"open"`` (allow), or an
  in-process limiter, ``KeyedLimiter`` or ``Policy`` to decide instead; such
  decisions have ``from_store == False``.

This module imports the ``redis`` library; ``import ratekeeper`` does not.
"""

from __future__ import annotations

# _faults first: it tells a missing redis-py apart from any other error.
from ratekeeper.redis._faults import ScriptError
from ratekeeper.redis._values import MAX_BATCH, MAX_EXACT, MAX_NOW, MAX_SPAN, REDIS_SCRIPT, REDIS_SCRIPT_SHA
from ratekeeper.redis._decisions import AsyncRedisReservation, RedisDecision, RedisPolicyDecision, RedisReservation
from ratekeeper.redis._limiter import AsyncRedisLimiter, RedisLimiter
from ratekeeper.redis._policy import AsyncRedisPolicy, RedisPolicy

__all__ = [
    "AsyncRedisLimiter",
    "AsyncRedisPolicy",
    "AsyncRedisReservation",
    "RedisDecision",
    "ScriptError",
    "RedisReservation",
    "RedisLimiter",
    "RedisPolicy",
    "RedisPolicyDecision",
    "MAX_EXACT",
    "MAX_NOW",
    "MAX_SPAN",
    "REDIS_SCRIPT",
    "REDIS_SCRIPT_SHA",
]

# Shown, and pickled, under the module users import them from.
for _public in (
    AsyncRedisLimiter,
    AsyncRedisPolicy,
    AsyncRedisReservation,
    RedisDecision,
    RedisLimiter,
    RedisPolicy,
    RedisPolicyDecision,
    RedisReservation,
    ScriptError,
):
    _public.__module__ = __name__
del _public
