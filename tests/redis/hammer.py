"""One Python process of the cross-language test (tests/redis/cross_language.test.cjs).

``callers`` threads, each trying ``calls`` times to take 1 unit of ``key``
through ratekeeper.redis.RedisLimiter (GCRA: a burst of ``limit``, then one
per hour, server time, keys shared with the Node client), from the wall-clock instant
``start_at`` (ms). Prints {"admitted": n, "fromStore": all?} on stdout.

    python hammer.py <url> <prefix> <key> <limit> <callers> <calls> <start_at>
"""

import json
import sys
import threading
import time

import redis

import ratekeeper
from ratekeeper.redis import RedisLimiter


def main() -> None:
    url, prefix, key, limit, callers, calls, start_at = sys.argv[1:8]
    client = redis.Redis.from_url(url)
    limiter = RedisLimiter(client, ratekeeper.Gcra(int(limit), 3600), prefix=prefix)
    lock = threading.Lock()
    totals = {"admitted": 0, "fromStore": True}

    def caller() -> None:
        admitted, from_store = 0, True
        for _ in range(int(calls)):
            d = limiter.try_acquire(key, 1)
            admitted += d.allowed
            from_store = from_store and d.from_store
            time.sleep(0.005)  # paced, so that every process is still calling when the bound is reached
        with lock:
            totals["admitted"] += admitted
            totals["fromStore"] = totals["fromStore"] and from_store

    threads = [threading.Thread(target=caller) for _ in range(int(callers))]
    time.sleep(max(0.0, int(start_at) / 1000 - time.time()))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(totals))
    client.close()


if __name__ == "__main__":
    main()
