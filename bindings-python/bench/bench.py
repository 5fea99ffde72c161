"""ns per decision: ratekeeper beside the limiters a Python user would pick.

A benchmark, not a test: run it by hand (``bash scripts/python.sh bench``
installs the peers into .venv and runs it). In one run it times, single key
and at 100,000 keys:

- ratekeeper (every algorithm; the default clock, as a service would call it),
- the floor: ``_noop()``, a method of the same pyo3 class taking the same
  arguments and doing nothing (what any native method costs to call),
- ``limits`` (MemoryStorage: FixedWindow, MovingWindow, SlidingWindowCounter),
- ``pyrate-limiter`` (InMemoryBucket; a per-key bucket factory for keys),
- ``token-bucket`` (MemoryStorage),

and prints ns per call, the ratios, and memory per key at 100,000 keys.

Every limiter allows 100 per second per key. Single key, each timed call hits
the same key, so most are denied once the first 100 of each second are in:
the path a saturated key takes. Keyed, calls go round-robin over 100,000 keys,
so each key sees a request now and then and is allowed: the common path of a
per-user limit. ratekeeper has no keyed store yet (the core's arrives later),
so keys are a plain ``dict`` of limiters, looked up in the timed loop; the
floor does the same lookup.

Timings on a shared machine are noisy: peers are timed in turns, and the best
of several rounds is kept. Read the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import gc
import sys
import timeit
import tracemalloc
from typing import Any, Callable, Optional

import ratekeeper

RATE = 100  # per second, every limiter
KEYS = 100_000


# A keyed setup: given the keys, builds the peer's state for every key (each
# key seen once) and returns the statement to time, run once per key, and its
# namespace (with ``key`` bound by the loop).
Keyed = Callable[[list[str]], tuple[str, dict[str, Any]]]


class Peer:
    """One limiter under test: a single-key call, and a keyed setup."""

    def __init__(self, name: str, single: Callable[[], Any], keyed: Optional[Keyed] = None) -> None:
        self.name = name
        self.single = single
        self.keyed = keyed
        self.single_ns = float("inf")
        self.keyed_ns = float("inf")
        self.bytes_per_key: Optional[float] = None


def calling(stmt: str, call: Callable[[str], Any], keys: list[str], **names: Any) -> tuple[str, dict[str, Any]]:
    """Sees every key once through ``call``; returns ``stmt`` and its namespace."""
    for key in keys:
        call(key)
    return stmt, names


def ratekeeper_peers() -> list[Peer]:
    def per_key(make: Callable[[], ratekeeper.Limiter], method: str) -> Keyed:
        def keyed(keys: list[str]) -> tuple[str, dict[str, Any]]:
            limiters = {key: make() for key in keys}
            return f"limiters[key].{method}()", {"limiters": limiters}

        return keyed

    bucket = lambda: ratekeeper.TokenBucket(RATE, RATE, 1)  # noqa: E731
    peers = [
        Peer("floor: pyo3 no-op method", bucket()._noop, per_key(bucket, "_noop")),
        Peer("ratekeeper TokenBucket", bucket().try_acquire, per_key(bucket, "try_acquire")),
    ]
    others: dict[str, Callable[[], ratekeeper.Limiter]] = {
        "Gcra": lambda: ratekeeper.Gcra.per_period(RATE, RATE, 1),
        "SlidingWindowCounter": lambda: ratekeeper.SlidingWindowCounter(RATE, 1),
        "FixedWindow": lambda: ratekeeper.FixedWindow(RATE, 1),
        "SlidingWindowLog": lambda: ratekeeper.SlidingWindowLog(RATE, 1),
        "LeakyBucket": lambda: ratekeeper.LeakyBucket(RATE, 0.01),
    }
    for name, make in others.items():
        peers.append(Peer(f"ratekeeper {name}", make().try_acquire, per_key(make, "try_acquire")))
    explicit = bucket()
    peers.append(Peer("ratekeeper TokenBucket, now=0.5", lambda: explicit.try_acquire(1, 0.5)))
    return peers


def limits_peers() -> list[Peer]:
    try:
        from limits import RateLimitItemPerSecond, storage, strategies
    except ImportError:
        return []
    item = RateLimitItemPerSecond(RATE)
    peers = []
    strategy_classes: dict[str, Any] = {
        "FixedWindow": strategies.FixedWindowRateLimiter,
        "MovingWindow": strategies.MovingWindowRateLimiter,
        "SlidingWindowCounter": strategies.SlidingWindowCounterRateLimiter,
    }
    for name, strategy in strategy_classes.items():
        single = strategy(storage.MemoryStorage())

        def keyed(keys: list[str], strategy: Any = strategy) -> tuple[str, dict[str, Any]]:
            hit = strategy(storage.MemoryStorage()).hit
            return calling("hit(item, key)", lambda key: hit(item, key), keys, hit=hit, item=item)

        peers.append(Peer(f"limits {name}", lambda single=single: single.hit(item, "key"), keyed))
    return peers


def pyrate_peers() -> list[Peer]:
    try:
        import pyrate_limiter as pyrate
    except ImportError:
        return []
    rates = [pyrate.Rate(RATE, pyrate.Duration.SECOND)]

    class PerKeyFactory(pyrate.BucketFactory):  # type: ignore[misc]
        """One in-memory bucket per key, made on first use (no leak thread)."""

        def __init__(self) -> None:
            self.clock = pyrate.MonotonicClock()
            self.buckets: dict[str, Any] = {}

        def wrap_item(self, name: str, weight: int = 1) -> Any:
            return pyrate.RateItem(name, self.clock.now(), weight=weight)

        def get(self, item: Any) -> Any:
            bucket = self.buckets.get(item.name)
            if bucket is None:
                bucket = self.buckets[item.name] = pyrate.InMemoryBucket(rates)
            return bucket

    single = pyrate.Limiter(rates)

    def keyed(keys: list[str]) -> tuple[str, dict[str, Any]]:
        acquire = pyrate.Limiter(PerKeyFactory()).try_acquire
        return calling(
            "acquire(key, blocking=False)", lambda key: acquire(key, blocking=False), keys, acquire=acquire
        )

    return [Peer("pyrate-limiter InMemoryBucket", lambda: single.try_acquire("key", blocking=False), keyed)]


def token_bucket_peers() -> list[Peer]:
    try:
        import token_bucket
    except ImportError:
        return []
    single = token_bucket.Limiter(RATE, RATE, token_bucket.MemoryStorage())

    def keyed(keys: list[str]) -> tuple[str, dict[str, Any]]:
        consume = token_bucket.Limiter(RATE, RATE, token_bucket.MemoryStorage()).consume
        return calling("consume(key)", consume, keys, consume=consume)

    return [Peer("token-bucket MemoryStorage", lambda: single.consume("key"), keyed)]


def time_single(peer: Peer, calls: int) -> float:
    """ns per call of ``peer.single()``, one timeit loop of ``calls``."""
    return timeit.timeit(peer.single, number=calls) / calls * 1e9


def time_keyed(stmt: str, names: dict[str, Any], keys: list[str]) -> float:
    """ns per run of ``stmt``, once for every key."""
    timer = timeit.Timer(f"for key in keys: {stmt}", globals={**names, "keys": keys})
    return timer.timeit(number=1) / len(keys) * 1e9


def bytes_per_key(keyed: Keyed, keys: list[str]) -> float:
    """Python heap held per key once every key has been seen (the keys themselves not counted)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    state = keyed(keys)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    del state
    return grown / len(keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="single-key calls per round")
    parser.add_argument("--keys", type=int, default=KEYS, help="distinct keys")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is kept")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    args = parser.parse_args()

    peers = ratekeeper_peers() + limits_peers() + pyrate_peers() + token_bucket_peers()
    keys = [f"user:{index}" for index in range(args.keys)]
    keyed = {peer.name: peer.keyed(keys) for peer in peers if peer.keyed}
    print(f"python {sys.version.split()[0]}, ratekeeper {ratekeeper.__version__}; "
          f"{args.rounds} rounds, best kept; {args.calls:,} single-key calls, {args.keys:,} keys", flush=True)
    for _ in range(args.rounds):
        for peer in peers:  # in turns, so that noise falls on every peer alike
            peer.single_ns = min(peer.single_ns, time_single(peer, args.calls))
            if peer.name in keyed:
                peer.keyed_ns = min(peer.keyed_ns, time_keyed(*keyed[peer.name], keys))
    if not args.no_memory:
        del keyed
        for peer in peers:
            if peer.keyed and "no-op" not in peer.name:
                peer.bytes_per_key = bytes_per_key(peer.keyed, keys)
    report(peers)


def report(peers: list[Peer]) -> None:
    floor = peers[0]
    ours = peers[1]
    print()
    print(f"{'limiter':36} {'single ns':>10} {'x ours':>7} {'keyed ns':>10} {'x ours':>7} {'B/key':>7}")
    for peer in peers:
        keyed = f"{peer.keyed_ns:10.0f} {peer.keyed_ns / ours.keyed_ns:7.1f}" if peer.keyed else f"{'':10} {'':7}"
        memory = f"{peer.bytes_per_key:7.0f}" if peer.bytes_per_key is not None else ""
        print(f"{peer.name:36} {peer.single_ns:10.0f} {peer.single_ns / ours.single_ns:7.1f} {keyed} {memory}")
    print()
    print(f"ratekeeper TokenBucket / floor: {ours.single_ns / floor.single_ns:.2f}x single key, "
          f"{ours.keyed_ns / floor.keyed_ns:.2f}x keyed (target: at most 2x)")
    targets = {"limits": 20.0, "pyrate-limiter": 20.0, "token-bucket": 3.0}
    for peer in peers:
        for prefix, target in targets.items():
            if peer.name.startswith(prefix):
                single, keyed = peer.single_ns / ours.single_ns, peer.keyed_ns / ours.keyed_ns
                verdict = "met" if min(single, keyed) >= target else "NOT met"
                print(f"{peer.name}: {single:.1f}x / {keyed:.1f}x slower (target {target:.0f}x: {verdict})")


if __name__ == "__main__":
    main()
