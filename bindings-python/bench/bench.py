"""ns per decision: ratekeeper beside the limiters a Python user would pick.

A benchmark, not a test: run it by hand (``bash scripts/python.sh bench``
installs the peers into .venv and runs it). In one run it times, single key
and at 100,000 keys:

- ratekeeper (every algorithm; the default clock, as a service would call it),
  and a ``Policy`` of two limits per key (per minute and per hour) beside
  ``limits`` hitting the same two in turn,
- the floor: ``_noop()``, a method of the same pyo3 class taking the same
  arguments and doing nothing (what any native method costs to call),
- a token bucket given ``now`` (no clock read) beside ``_noop(1, now)``: the
  floor a default-clock decision is compared with reads no clock, and a
  clock read alone costs most of that floor,
- ``limits`` (MemoryStorage: FixedWindow, MovingWindow, SlidingWindowCounter),
- ``pyrate-limiter`` (InMemoryBucket; a per-key bucket factory for keys),
- ``token-bucket`` (MemoryStorage),

and prints ns per call, the ratios, and memory per key at 100,000 keys.

Every limiter allows 100 per minute per key. Single key, each timed call hits
the same key, so most are denied once the first 100 are in: the path a
saturated key takes. Keyed, calls go round-robin over 100,000 keys, so each
key sees a request now and then and is allowed: the common path of a
per-user limit. ratekeeper's keyed rows use one ``KeyedLimiter`` (the core's
keyed store: one state per key, a GCRA key in one 64-bit word),
``store.try_acquire(key)`` in the timed loop; the floor is ``store._noop(key)``,
a no-op method of the same class taking the same arguments.

Timings on a shared machine are noisy: peers are timed in turns, and the best
of several rounds is kept. Read the ratios, not the absolute numbers. Memory
per key is measured in a fresh process per limiter, once every key has been
seen: the Python heap grown (tracemalloc) and the resident set grown (which
also counts Rust's heap, such as a SlidingWindowLog's ring).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import subprocess
import sys
import timeit
import tracemalloc
from typing import Any, Callable, Optional, Union

import ratekeeper

RATE, PERIOD = 100, 60  # 100 per minute, every limiter
KEYS = 100_000
ROUND_SECONDS = 0.2  # how long one single-key round of one peer lasts, about

# A keyed setup: given the keys, builds the peer's state for every key (each
# key seen once) and returns the statement to time, run once per key with
# ``key`` bound, and its namespace.
Keyed = Callable[[list[str]], tuple[str, dict[str, Any]]]


class Peer:
    """One limiter under test: a single-key call (a callable, or a statement
    and its namespace), and a keyed setup."""

    def __init__(
        self,
        name: str,
        single: Union[Callable[[], Any], tuple[str, dict[str, Any]]],
        keyed: Optional[Keyed] = None,
        memory: bool = True,
    ) -> None:
        self.name = name
        self.single = single
        self.keyed = keyed
        self.measures_memory = memory and keyed is not None
        self.single_ns = float("inf")
        self.keyed_ns = float("inf")
        self.memory: Optional[tuple[float, float]] = None  # bytes per key: Python heap, resident


def calling(stmt: str, call: Callable[[str], Any], keys: list[str], **names: Any) -> tuple[str, dict[str, Any]]:
    """Sees every key once through ``call``; returns ``stmt`` and its namespace."""
    for key in keys:
        call(key)
    return stmt, names


def ratekeeper_peers() -> list[Peer]:
    def per_key(make: Callable[[], ratekeeper.Limiter], method: str, args: str = "") -> Keyed:
        def keyed(keys: list[str]) -> tuple[str, dict[str, Any]]:
            store = ratekeeper.KeyedLimiter(make())
            call = getattr(store, method)
            stmt = f"call(key{args})"
            code, names = compile(stmt, "<bench>", "eval"), {"call": call, "NOW": NOW}
            for key in keys:
                eval(code, {**names, "key": key})
            return stmt, {**names, "store": store}

        return keyed

    def bucket() -> ratekeeper.Limiter:
        return ratekeeper.TokenBucket(RATE, RATE, PERIOD)

    peers = [
        Peer("floor: pyo3 no-op method", bucket()._noop, per_key(bucket, "_noop")),
        Peer("ratekeeper TokenBucket", bucket().try_acquire, per_key(bucket, "try_acquire")),
    ]
    others: dict[str, Callable[[], ratekeeper.Limiter]] = {
        "Gcra": lambda: ratekeeper.Gcra.per_period(RATE, RATE, PERIOD),
        "SlidingWindowCounter": lambda: ratekeeper.SlidingWindowCounter(RATE, PERIOD),
        "FixedWindow": lambda: ratekeeper.FixedWindow(RATE, PERIOD),
        "SlidingWindowLog": lambda: ratekeeper.SlidingWindowLog(RATE, PERIOD),
        "LeakyBucket": lambda: ratekeeper.LeakyBucket(RATE, PERIOD / RATE),
    }
    for name, make in others.items():
        peers.append(Peer(f"ratekeeper {name}", make().try_acquire, per_key(make, "try_acquire")))
    # `now` given: no clock read. Timed as statements, beside a floor taking
    # the same arguments (a partial or a lambda would add a call of its own).
    peers.append(
        Peer(FLOOR_NOW, ("call(1, NOW)", {"call": bucket()._noop, "NOW": NOW}), per_key(bucket, "_noop", ", 1, NOW"))
    )
    peers.append(
        Peer(
            OURS_NOW,
            ("call(1, NOW)", {"call": bucket().try_acquire, "NOW": NOW}),
            per_key(bucket, "try_acquire", ", 1, NOW"),
            memory=False,
        )
    )
    peers.append(Peer(POLICY, functools.partial(two_limits().try_acquire, {"user": "key"}), policy_keyed))
    return peers


# The explicit `now` of the rows that give one: a time no later than the
# limiter's latest (a fresh one), or the call would be decided as time gone
# backwards.
NOW = 0.5
FLOOR_NOW = "floor: pyo3 no-op method (1, now)"
OURS_NOW = "ratekeeper TokenBucket (1, now)"

# Two limits of one key, per minute and per hour: a ratekeeper Policy decides
# them all or nothing; `limits` users hit each in turn.
POLICY = "ratekeeper Policy, 2 limits by user"
LIMITS_TWO = "limits FixedWindow, 2 limits in turn"


def two_limits() -> ratekeeper.Policy:
    return ratekeeper.Policy(f"{RATE}/minute;{10 * RATE}/hour", by=["user"])


def policy_keyed(keys: list[str]) -> tuple[str, dict[str, Any]]:
    decide = two_limits().try_acquire
    # The request is built in the timed statement, as a service builds one per request.
    return calling("decide({'user': key})", lambda key: decide({"user": key}), keys, decide=decide)


def limits_peers() -> list[Peer]:
    try:
        from limits import RateLimitItemPerHour, RateLimitItemPerMinute, storage, strategies
    except ImportError:
        return []
    item = RateLimitItemPerMinute(RATE)
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

        def hit_one_key(single: Any = single) -> Any:
            return single.hit(item, "key")

        peers.append(Peer(f"limits {name}", hit_one_key, keyed))
    # Hit in turn, as `limits` checks several: not all or nothing (a hit
    # the second limit denies stays counted in the first).
    hour = RateLimitItemPerHour(10 * RATE)
    two = strategies.FixedWindowRateLimiter(storage.MemoryStorage())

    def keyed_two(keys: list[str]) -> tuple[str, dict[str, Any]]:
        hit = strategies.FixedWindowRateLimiter(storage.MemoryStorage()).hit
        stmt = "hit(item, key) and hit(hour, key)"
        return calling(stmt, lambda key: hit(item, key) and hit(hour, key), keys, hit=hit, item=item, hour=hour)

    peers.append(Peer(LIMITS_TWO, lambda: two.hit(item, "key") and two.hit(hour, "key"), keyed_two))
    return peers


def pyrate_peers() -> list[Peer]:
    try:
        import pyrate_limiter as pyrate
    except ImportError:
        return []
    rates = [pyrate.Rate(RATE, pyrate.Duration.MINUTE)]

    class PerKeyFactory(pyrate.BucketFactory):
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
        stmt = "acquire(key, blocking=False)"
        return calling(stmt, lambda key: acquire(key, blocking=False), keys, acquire=acquire)

    return [Peer("pyrate-limiter InMemoryBucket", lambda: single.try_acquire("key", blocking=False), keyed)]


def token_bucket_peers() -> list[Peer]:
    try:
        import token_bucket
    except ImportError:
        return []
    single = token_bucket.Limiter(RATE / PERIOD, RATE, token_bucket.MemoryStorage())

    def keyed(keys: list[str]) -> tuple[str, dict[str, Any]]:
        consume = token_bucket.Limiter(RATE / PERIOD, RATE, token_bucket.MemoryStorage()).consume
        return calling("consume(key)", consume, keys, consume=consume)

    return [Peer("token-bucket MemoryStorage", lambda: single.consume("key"), keyed)]


def all_peers() -> list[Peer]:
    return ratekeeper_peers() + limits_peers() + pyrate_peers() + token_bucket_peers()


def time_single(peer: Peer, most_calls: int) -> float:
    """ns per call of ``peer.single()`` (or run of its statement), in a loop of about ROUND_SECONDS."""
    calls = most_calls
    if peer.single_ns < float("inf"):
        calls = max(1_000, min(most_calls, int(ROUND_SECONDS * 1e9 / peer.single_ns)))
    if isinstance(peer.single, tuple):
        stmt, names = peer.single
        return timeit.Timer(stmt, globals=names).timeit(number=calls) / calls * 1e9
    return timeit.timeit(peer.single, number=calls) / calls * 1e9


def time_keyed(peer: Peer, stmt: str, names: dict[str, Any], keys: list[str]) -> float:
    """ns per run of ``stmt``, round-robin over the keys for about ROUND_SECONDS (at least once)."""
    passes = 1
    if peer.keyed_ns < float("inf"):
        passes = max(1, int(ROUND_SECONDS * 1e9 / (peer.keyed_ns * len(keys))))
    timer = timeit.Timer(f"for key in keys: {stmt}", globals={**names, "keys": keys})
    return timer.timeit(number=passes) / (passes * len(keys)) * 1e9


def resident_bytes() -> int:
    """This process's resident set (Linux), or 0 where /proc is missing."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def memory_of(peer: Peer, keys: list[str]) -> tuple[float, float]:
    """Bytes per key once every key has been seen: Python heap (tracemalloc), resident set."""
    assert peer.keyed is not None
    gc.collect()
    resident = resident_bytes()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    state = peer.keyed(keys)
    gc.collect()
    after = tracemalloc.take_snapshot()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    del before, after
    tracemalloc.stop()  # frees tracemalloc's own records before the second reading
    gc.collect()
    resident = resident_bytes() - resident
    del state
    return grown / len(keys), resident / len(keys)


def measure_memory(peers: list[Peer], keys: int) -> None:
    """``memory_of`` every keyed peer, each in a fresh process of this script."""
    for peer in peers:
        if peer.measures_memory and "no-op" not in peer.name:
            command = [sys.executable, __file__, "--keys", str(keys), "--memory-of", peer.name]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            heap, resident = done.stdout.split()
            peer.memory = (float(heap), float(resident))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500_000, help="most single-key calls per round")
    parser.add_argument("--keys", type=int, default=KEYS, help="distinct keys")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; the best is kept")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # one peer, in a fresh process
    args = parser.parse_args()

    peers = all_peers()
    keys = [f"user:{index}" for index in range(args.keys)]
    if args.memory_of:
        heap, resident = memory_of(next(p for p in peers if p.name == args.memory_of), keys)
        print(heap, resident)
        return
    print(
        f"python {sys.version.split()[0]}, ratekeeper {ratekeeper.__version__}: {RATE} per {PERIOD} s; "
        f"{args.rounds} rounds, best kept; {args.keys:,} keys",
        flush=True,
    )
    if not args.no_memory:
        measure_memory(peers, args.keys)
    keyed = {peer.name: peer.keyed(keys) for peer in peers if peer.keyed}
    for _ in range(args.rounds):
        for peer in peers:  # in turns, so that noise falls on every peer alike
            peer.single_ns = min(peer.single_ns, time_single(peer, args.calls))
            if peer.name in keyed:
                peer.keyed_ns = min(peer.keyed_ns, time_keyed(peer, *keyed[peer.name], keys))
    report(peers)


def report(peers: list[Peer]) -> None:
    floor, ours = peers[0], peers[1]
    print()
    header = f"{'limiter':36} {'single ns':>9} {'x ours':>6} {'keyed ns':>9} {'x ours':>6}"
    print(f"{header} {'heap B/key':>10} {'RSS B/key':>9}")
    for peer in peers:
        keyed = f"{peer.keyed_ns:9.0f} {peer.keyed_ns / ours.keyed_ns:6.1f}" if peer.keyed else f"{'':9} {'':6}"
        memory = f"{peer.memory[0]:10.0f} {peer.memory[1]:9.0f}" if peer.memory else ""
        print(f"{peer.name:36} {peer.single_ns:9.0f} {peer.single_ns / ours.single_ns:6.1f} {keyed} {memory}")
    print()
    print(
        f"ratekeeper TokenBucket / floor: {ours.single_ns / floor.single_ns:.2f}x single key, "
        f"{ours.keyed_ns / floor.keyed_ns:.2f}x keyed (target: at most 2x)"
    )
    by_name = {peer.name: peer for peer in peers}
    if FLOOR_NOW in by_name and OURS_NOW in by_name:
        # What the default clock's read costs, the one thing the floor does
        # not do: the same decision with `now` given reads no clock.
        floor_now, ours_now = by_name[FLOOR_NOW], by_name[OURS_NOW]
        print(
            f"  with now given (no clock read; the floor takes the same arguments): "
            f"{ours_now.single_ns / floor_now.single_ns:.2f}x single key, {ours_now.keyed_ns / floor_now.keyed_ns:.2f}x keyed"
        )
        clock = (ours.single_ns - floor.single_ns) - (ours_now.single_ns - floor_now.single_ns)
        print(
            f"  the default clock's read costs {clock:.0f} ns more than converting the `cost` and `now` it spares "
            f"({clock / floor.single_ns:.2f}x the floor's whole call)"
        )
    # Bytes per key: the larger of the Python heap and the resident set grown
    # (a KeyedLimiter's keys live on Rust's heap, which only the RSS sees).
    limits_memory = [max(p.memory) for p in peers if p.memory and p.name.startswith("limits")]
    for peer in peers:
        if peer.memory and peer.name.startswith("ratekeeper") and limits_memory:
            ours_bytes, theirs = max(peer.memory), min(limits_memory)
            print(f"{peer.name}: {ours_bytes:.0f} B/key vs limits {theirs:.0f} B/key ({theirs / ours_bytes:.1f}x less)")
    if POLICY in by_name and LIMITS_TWO in by_name:
        policy, two = by_name[POLICY], by_name[LIMITS_TWO]
        print(
            f"{POLICY}: {two.single_ns / policy.single_ns:.1f}x / {two.keyed_ns / policy.keyed_ns:.1f}x "
            f"faster than {LIMITS_TWO} (no target)"
        )
    targets = {"limits": 20.0, "pyrate-limiter": 20.0, "token-bucket": 3.0}
    for peer in peers:
        for prefix, target in targets.items():
            if peer.name.startswith(prefix) and peer.name != LIMITS_TWO:
                by_key = peer.single_ns / ours.single_ns, peer.keyed_ns / ours.keyed_ns
                verdict = "met" if min(by_key) >= target else "NOT met"
                print(f"{peer.name}: {by_key[0]:.1f}x / {by_key[1]:.1f}x slower (target {target:.0f}x: {verdict})")


if __name__ == "__main__":
    main()
