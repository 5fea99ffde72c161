"""Bookings given back (``acquire_async`` cancelled, ``acquire`` interrupted,
``reservation.cancel()``), model-checked: seeded random interleavings of
bookings, give-backs, resets, reconfigures, restores and added limits, and
a clock that raises as waiters are cancelled or wake, on a
limiter, a ``KeyedLimiter`` and a ``Policy`` of every algorithm, over keys
that share a mark (``alice`` and ``user82`` in a keyed limiter; ``alice`` and
the twin the test finds in a policy's limit). Every unit granted is counted
at its slot, per key of each limit, and no window may hold more than that
limit's ``guarantee().max_in_window`` (counted anew after a reset of the
key); a bucket's bookings of one request go in booking order.
"""

from __future__ import annotations

import asyncio
import functools
import random
import sys
import time
from typing import Any, Callable, Optional

import pytest

import ratekeeper
from ratekeeper import _wait

BUCKETS = ("token_bucket", "gcra", "leaky_bucket")
WINDOWS = ("sliding_window_log", "sliding_window_counter", "fixed_window")

# A limit: its algorithm and numbers (times in ms).
Config = tuple[Any, ...]
# A limit's key: its place and the key's values (none: the one state).
Key = tuple[int, tuple[str, ...]]


def config(rng: random.Random, algorithm: str) -> Config:
    """A limit of `algorithm`, small enough that waits and refusals are common."""
    if algorithm == "token_bucket":
        refill = rng.choice(["greedy", "interval"])
        return (algorithm, rng.choice([1, 2, 3]), rng.choice([1, 2]), rng.choice([500, 1000]), refill)
    if algorithm == "gcra":
        return (algorithm, rng.choice([1, 2]), rng.choice([500, 1000]))
    if algorithm == "leaky_bucket":
        return (algorithm, rng.choice([2, 3]), rng.choice([500, 1000]))
    return (algorithm, rng.choice([1, 2]), rng.choice([1000, 2000]))


def make(limit: Config, clock: Optional[Callable[[], float]] = None) -> Any:
    """The limiter of `limit`, on `clock` (a policy's limits: on the policy's)."""
    algorithm, a, b, *rest = limit
    kw: dict[str, Any] = {} if clock is None else {"clock": clock}
    if algorithm == "token_bucket":
        return ratekeeper.TokenBucket(a, b, rest[0] / 1000, refill=rest[1], **kw)
    if algorithm == "gcra":
        return ratekeeper.Gcra(a, b / 1000, **kw)
    if algorithm == "leaky_bucket":
        return ratekeeper.LeakyBucket(a, b / 1000, **kw)
    kinds = {
        "sliding_window_log": ratekeeper.SlidingWindowLog,
        "sliding_window_counter": ratekeeper.SlidingWindowCounter,
        "fixed_window": ratekeeper.FixedWindow,
    }
    return kinds[algorithm](a, b / 1000, **kw)


@functools.lru_cache(maxsize=None)
def most(limit: Config, span: int) -> int:
    """The most units `limit` admits at the instants of a span of `span` ns, both ends in."""
    # span + 1 instants; half a nanosecond more counts as exactly that.
    return ratekeeper.guarantee(make(limit)).max_in_window((span + 0.5) / 1e9)


def mark(place: int, key: bytes) -> int:
    """The mark of a key of the limit at `place`, as the bindings compute it
    (``shared::mark``): to find keys that share one."""
    h = 0x811C9DC5
    for byte in place.to_bytes(4, "little") + key:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return (h ^ (h >> 16)) >> 24


def twin(place: int, of: str) -> str:
    """A user whose key shares `of`'s mark in a limit by user at `place`."""

    def key(user: str) -> bytes:
        # The core's key of a limit by one field: its value's length, then it.
        return len(user).to_bytes(8, "little") + user.encode()

    return next(f"user{i}" for i in range(10_000) if mark(place, key(f"user{i}")) == mark(place, key(of)))


class ClockBroke(Exception):
    """What the clock raises while it is broken."""


class Timeline:
    """The clock (ms) and an ``asyncio.sleep`` that wakes when ``advance`` reaches its time."""

    def __init__(self) -> None:
        self.ms = 0
        self.sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self.real_sleep = asyncio.sleep
        # While set, every reading raises (a caller's clock that fails).
        self.broken = False

    def __call__(self) -> float:
        if self.broken:
            raise ClockBroke("the clock broke")
        return self.ms / 1000

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await self.real_sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sleepers.append((self.ms / 1000 + seconds, len(self.sleepers), woken))
        await woken

    async def settle(self) -> None:
        for _ in range(12):
            await self.real_sleep(0)

    async def advance(self, ms: int) -> None:
        self.ms = ms
        for at, _, woken in sorted(self.sleepers):
            if at <= ms / 1000 and not woken.done():
                woken.set_result(None)
        await self.settle()

    def next_due(self) -> int:
        """The next sleeper's time, in whole ms (or a quarter second on)."""
        due = [at for at, _, woken in self.sleepers if not woken.done()]
        return max(self.ms, -int(-min(due) * 1000 // 1)) if due else self.ms + 250


def ns(seconds: float) -> int:
    """`seconds` (a slot, a clock's reading) in whole nanoseconds."""
    return round(seconds * 1e9)


class Run:
    """One scenario: `kind` ("limiter", "keyed", "policy"), from `seed`."""

    def __init__(self, kind: str, seed: int, dense: bool) -> None:
        """Its limits and targets (`dense`: more buckets, calls and aborts)."""
        self.rng = rng = random.Random(seed)
        self.kind = kind
        self.dense = dense
        algorithms = BUCKETS * 2 + WINDOWS if dense else BUCKETS + WINDOWS
        if kind == "policy":
            self.limits: list[tuple[Config, list[str]]] = []
            for i in range(rng.choice([1, 2, 2, 3])):
                by = rng.choice([[], ["user"], ["ip"], ["user", "ip"]] if i else [["user"], ["ip"], ["user", "ip"]])
                self.limits.append((config(rng, rng.choice(algorithms)), by))
            place = next((i for i, (_, by) in enumerate(self.limits) if by == ["user"]), 0)
            users = ["alice", twin(place, "alice"), "bob"][: rng.choice([2, 3])]
            self.targets: list[Any] = [{"user": u, "ip": ip} for u in users for ip in ["x", "y"][: rng.choice([1, 2])]]
        else:
            self.limits = [(config(rng, rng.choice(algorithms)), [] if kind == "limiter" else ["key"])]
            self.targets = [None] if kind == "limiter" else ["alice", "user82", "bob"][: rng.choice([2, 2, 3])]
        self.clock = Timeline()
        # Units granted: (slot in ns, cost, booking order, keys with their epoch).
        self.grants: list[tuple[int, int, int, list[tuple[Key, int]]]] = []
        self.epochs: dict[Key, int] = {}
        # Each booking call: (order, its bucket keys), for the rule of cancel().
        self.booked: list[tuple[int, set[Key]]] = []

    def keys(self, target: Any) -> list[Key]:
        """The keys a booking of `target` holds now, in each limit."""
        out: list[Key] = []
        for place, (_, by) in enumerate(self.limits):
            if self.kind == "keyed":
                out.append((place, (target,)))
            else:
                out.append((place, tuple(target[field] for field in by) if by else ()))
        return out

    def held(self, target: Any) -> list[tuple[Key, int]]:
        """Those keys, each with its epoch (its resets so far)."""
        return [(key, self.epochs.get(key, 0)) for key in self.keys(target)]

    def bucket_keys(self, target: Any) -> set[Key]:
        """Those of them in a bucket's limit."""
        return {key for key in self.keys(target) if self.limits[key[0]][0][0] in BUCKETS}

    async def main(self) -> None:
        """The scenario's calls, then every waiter run out, its units counted."""
        rng, clock = self.rng, self.clock
        subject: Any
        if self.kind == "limiter":
            subject = make(self.limits[0][0], clock)
        elif self.kind == "keyed":
            subject = ratekeeper.KeyedLimiter(make(self.limits[0][0], clock))
        else:
            subject = ratekeeper.Policy(clock=clock)
            for i, (limit, by) in enumerate(self.limits):
                subject.add(f"l{i}", make(limit), by=by)

        def args(target: Any) -> tuple[Any, ...]:
            return () if self.kind == "limiter" else (target,)

        # The largest cost every limit takes (a capacity, a burst, a limit).
        largest = min(limit[1] for limit, _ in self.limits)
        reservations: dict[int, tuple[Any, list[tuple[Key, int]], set[Key], int]] = {}
        tasks: list[tuple[asyncio.Future[None], int, list[tuple[Key, int]], int, int]] = []
        weights: dict[str, float] = {"advance": 5, "try": 3, "reserve": 3, "cancel": 3, "acquire": 10, "abort": 7}
        weights.update(sync=1.5, reset=1.5, broken_abort=2, broken_advance=1)
        if self.kind == "limiter":
            weights.update(reset=0, reconfigure=0.7, restore=0.7)
        if self.kind == "policy":
            weights.update(add=0.4)
        names = list(weights)
        for order in range(self.rng.randint(30, 110) if self.dense else self.rng.randint(15, 70)):
            op = rng.choices(names, [weights[n] for n in names])[0]
            target = rng.choice(self.targets)
            cost = 2 if largest > 1 and rng.random() < 0.15 else 1
            now = clock.ms * 1_000_000
            if op == "advance":
                await clock.advance(clock.ms + rng.choice([0, 250, 250, 500, 1000]))
            elif op == "try":
                if subject.try_acquire(*args(target), cost).allowed:
                    self.grants.append((now, cost, order, self.held(target)))
            elif op == "reserve":
                self.booked.append((order, set(self.keys(target))))
                reservation = subject.reserve(*args(target), cost)
                if reservation.ok:
                    reservations[order] = (reservation, self.held(target), self.bucket_keys(target), order)
            elif op == "cancel" and reservations:
                # A window's anywhere; a bucket's only while no later booking
                # call reached its keys (cancel the latest first), and before
                # its slot (after it, the units were taken: a refund then is
                # bounded as refunds are).
                free = [k for k, (r, _, mine, at) in reservations.items()
                        if ns(r.at) > now and not any(o > at and keys & mine for o, keys in self.booked)]
                if free:
                    reservations.pop(rng.choice(free))[0].cancel()
            elif op == "acquire":
                self.booked.append((order, set(self.keys(target))))
                task = asyncio.ensure_future(subject.acquire_async(*args(target), cost))
                tasks.append((task, order, self.held(target), now, cost))
                await clock.settle()
            elif op == "abort" and tasks:
                pending = [t for t in tasks[-5:] if not t[0].done()] if rng.random() < 0.7 else tasks
                if pending:
                    rng.choice(pending)[0].cancel()
                    await clock.settle()
            elif op == "broken_abort" and tasks:
                # Cancelled while the clock raises: its withdrawal may give
                # back what books nobody again, never more.
                pending = [t for t in tasks[-5:] if not t[0].done()]
                if pending:
                    clock.broken = True
                    rng.choice(pending)[0].cancel()
                    await clock.settle()
                    clock.broken = False
            elif op == "broken_advance":
                # Waiters whose slots come while the clock raises fail with
                # its error, their bookings given back as they withdraw.
                clock.broken = True
                await clock.advance(clock.ms + rng.choice([250, 500, 1000]))
                clock.broken = False
            elif op == "sync":
                self.booked.append((order, set(self.keys(target))))
                interrupt = rng.random() < 0.6
                slept: list[float] = []

                def sleep(seconds: float) -> None:
                    if interrupt:
                        raise KeyboardInterrupt
                    slept.append(seconds)

                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(time, "sleep", sleep)
                    try:
                        subject.acquire(*args(target), cost)
                        self.grants.append((now + ns(sum(slept)), cost, order, self.held(target)))
                    except (KeyboardInterrupt, ratekeeper.RateLimited):
                        pass
            elif op == "reset":
                if self.kind == "policy":
                    fields = rng.choice([["user"], ["ip"], ["user", "ip"]])
                    request = {field: target[field] for field in fields}
                    if not any(by and set(by) <= set(fields) for _, by in self.limits):
                        continue
                    if subject.reset(request):
                        for place, (_, by) in enumerate(self.limits):
                            if by and set(by) <= set(fields):
                                key = (place, tuple(request[field] for field in by))
                                self.epochs[key] = self.epochs.get(key, 0) + 1
                elif subject.reset(target):
                    self.epochs[(0, (target,))] = self.epochs.get((0, (target,)), 0) + 1
            elif op == "reconfigure":
                subject.reconfigure(make(self.limits[0][0], clock))
            elif op == "restore":
                subject.restore(subject.to_bytes())
            elif op == "add":
                limit = config(rng, rng.choice(BUCKETS + WINDOWS))
                if limit[1] >= largest:
                    self.limits.append((limit, rng.choice([[], ["user"], ["ip"]])))
                    subject.add(f"l{len(self.limits) - 1}", make(limit), by=self.limits[-1][1])
        for _ in range(4000):
            if all(task.done() for task, *_ in tasks):
                break
            await clock.advance(clock.next_due())
        for task, order, keys, now, cost in tasks:
            assert task.done(), "a waiter never went"
            if not task.cancelled() and task.exception() is None:
                # At its slot: its latest reservation's (see `left` in `run`).
                reservation = self.slots.get(task)
                self.grants.append((now if reservation is None else ns(reservation.at), cost, order, keys))
            elif not task.cancelled():
                assert isinstance(task.exception(), (ratekeeper.RateLimited, ClockBroke))
        for reservation, keys, _, order in reservations.values():
            self.grants.append((ns(reservation.at), reservation.cost, order, keys))

    def run(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Runs the scenario on the fake clock."""
        # A waiter's latest reservation, as it leaves (moved up, it booked again).
        self.slots: dict[Any, Any] = {}
        leave = _wait._leave

        def left(subject: Any, queue: list[Any], gone: set[int]) -> None:
            for waiter in queue:
                task = None if waiter.task is None else waiter.task()
                if id(waiter) in gone and task is not None:
                    self.slots[task] = waiter.reservation
            leave(subject, queue, gone)

        monkeypatch.setattr(_wait, "_leave", left)
        # A withdrawal whose clock raised reports it as a finalizer's error.
        self.reported: list[BaseException] = []
        monkeypatch.setattr(sys, "unraisablehook", lambda args: self.reported.append(args.exc_value))
        monkeypatch.setattr(asyncio, "sleep", self.clock.sleep)
        asyncio.run(self.main())

    def violations(self) -> list[str]:
        """Each window holding more than its limit's guarantee, per key and epoch,
        and each bucket booking served before one of the same request made earlier."""
        found = []
        per_key: dict[tuple[Key, int], list[tuple[int, int]]] = {}
        per_request: dict[tuple[tuple[Key, int], ...], list[tuple[int, int]]] = {}
        for slot, cost, order, held in self.grants:
            for one in held:
                per_key.setdefault(one, []).append((slot, cost))
            if any(self.limits[place][0][0] in BUCKETS for (place, _), _ in held):
                per_request.setdefault(tuple(held), []).append((order, slot))
        for ((place, key), epoch), grants in per_key.items():
            grants.sort()
            for i, (start, _) in enumerate(grants):
                total = 0
                for j in range(i, len(grants)):
                    total += grants[j][1]
                    end = grants[j][0]
                    if total > most(self.limits[place][0], end - start):
                        found.append(f"limit {place} key {key} (epoch {epoch}): {total} units in [{start}, {end}] ns")
                        break
        for request, bookings in per_request.items():
            bookings.sort()
            for (first, at), (then, before) in zip(bookings, bookings[1:]):
                if before < at:
                    found.append(f"{request}: booking {then} served at {before} ns, before booking {first} at {at} ns")
        return found


@pytest.mark.parametrize("dense", [False, True], ids=["mixed", "dense"])
@pytest.mark.parametrize("kind", ["limiter", "keyed", "policy"])
def test_given_back_bookings_keep_every_limit(kind: str, dense: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Seeded: the same interleavings every run. A violation names its seed.
    for seed in range(40 if kind == "limiter" else 80):
        run = Run(kind, seed * 7919 + dense, dense)
        with monkeypatch.context() as patch:
            run.run(patch)
        assert run.violations() == [], f"seed {seed}"
