"""Benchmark (not a test): one hot key on Redis, 256 concurrent asyncio callers,
with and without client-side batching. Prints throughput, p50/p99 latency and
the ratio, measured side by side in one run.

    bash scripts/redis.sh server start
    .venv/bin/python bindings-python/bench/redis_hot_key.py [--url URL] [--seconds 3] [--callers 256]
    bash scripts/redis.sh server stop
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import redis.asyncio

import ratekeeper
from ratekeeper.redis import AsyncRedisLimiter


async def run(url: str, batching: bool, callers: int, seconds: float) -> tuple[float, float, float, int]:
    """Returns (decisions per second, p50 ms, p99 ms, admitted) over `seconds`."""
    client = redis.asyncio.Redis.from_url(url, max_connections=callers + 8)
    await client.flushdb()
    # A limit that admits everything but still does all the work of a decision.
    limiter = AsyncRedisLimiter(client, ratekeeper.Gcra(10**9, 0.000001), batching=batching, prefix="bench:")
    await limiter.try_acquire("warm-up")
    latencies: list[float] = []
    admitted = 0
    stop = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal admitted
        while time.perf_counter() < stop:
            start = time.perf_counter()
            decision = await limiter.try_acquire("hot")
            latencies.append(time.perf_counter() - start)
            admitted += decision.allowed

    began = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    elapsed = time.perf_counter() - began
    await client.aclose()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    return len(latencies) / elapsed, p50, p99, admitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("RATEKEEPER_REDIS_URL", "redis://127.0.0.1:6391/0"))
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--callers", type=int, default=256)
    args = parser.parse_args()
    results = {}
    for batching in (False, True):
        rate, p50, p99, admitted = asyncio.run(run(args.url, batching, args.callers, args.seconds))
        results[batching] = (rate, p99)
        label = "batching   " if batching else "no batching"
        print(f"{label}: {rate:10.0f} decisions/s   p50 {p50:7.2f} ms   p99 {p99:7.2f} ms   ({admitted} admitted)")
    (plain, plain_p99), (batched, batched_p99) = results[False], results[True]
    print(f"throughput ratio (batching / none): {batched / plain:.1f}x; p99 ratio (none / batching): {plain_p99 / batched_p99:.1f}x")


if __name__ == "__main__":
    main()
