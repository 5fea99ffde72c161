"""Portable state, written from the naive models by the format's definition:

    "rk"  version (1)  algorithm tag  fingerprint (u32 LE)  fields (unsigned LEB128)

The fingerprint is 32-bit FNV-1a over the tag byte and each configuration value
as 8 little-endian bytes. Every runner must produce these bytes after the steps,
restore them, and refuse the broken variants with the codes given."""
from __future__ import annotations

import math

from .common import MS, S, duration, run_step
from .fixed_window import CALENDARS, NaiveFixedWindow, Windows, utc
from .gcra import NaiveGcra
from .leaky_bucket import NaiveLeakyBucket
from .sliding_window_counter import NaiveSlidingWindowCounter
from .sliding_window_log import NaiveSlidingWindowLog
from .token_bucket import NaiveTokenBucket, tb

VERSION = 1
# The newest version a reader takes (2: a state with a reconfigure's refund
# bound, which these models never write): the one after it is another's.
NEWEST = 2


def fnv1a(tag: int, words) -> bytes:
    h = 0x811C9DC5
    for b in bytes([tag]) + b"".join(w.to_bytes(8, "little") for w in words):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h.to_bytes(4, "little")


def leb128(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def header(tag: int, words) -> bytes:
    return b"rk" + bytes([VERSION, tag]) + fnv1a(tag, words)


def gcra_state(m: NaiveGcra) -> bytes:
    used = max(m.tat - m.latest, 0)
    return header(2, [m.burst, m.t]) + leb128(m.latest) + leb128(used)


def log_state(m: NaiveSlidingWindowLog) -> bytes:
    live: dict[int, int] = {}
    for at, cost in m.events:  # the entries still in the window, one per instant
        if at + m.window > m.latest and cost > 0:
            live[at] = live.get(at, 0) + cost
    out = header(4, [m.limit, m.window]) + leb128(m.latest) + leb128(len(live))
    previous = 0
    for at in sorted(live):
        out += leb128(at - previous) + leb128(live[at])
        previous = at
    return out


def token_bucket_state(m: NaiveTokenBucket) -> bytes:
    """Whether the bucket was called (and when), then each band as tokens,
    tokens owed to reservations (only in an empty band) and the carry: a
    greedy band's part of the next token, in units of 1 / (period / gcd of
    the refill and the period); an interval band's ns since its last
    period boundary."""
    words = [len(m.bands)]
    for b in m.bands:
        words += [b.capacity, b.refill, b.period, b.initial, int(b.interval)]
    out = header(1, words)
    out += leb128(0) if m.time is None else leb128(1) + leb128(m.time)
    for b in m.bands:
        whole = math.floor(b.level)
        tokens, owed = max(whole, 0), max(-whole, 0)
        if b.interval:
            carry = 0 if m.time is None else (m.time - b.anchor) % b.period
        else:
            step = b.period // math.gcd(b.refill, b.period)
            carry = (b.level - whole) * step
            assert carry.denominator == 1
        out += leb128(tokens) + leb128(owed) + leb128(int(carry))
    return out


def leaky_state(m: NaiveLeakyBucket) -> bytes:
    """The latest time, then how long after it the queue is empty."""
    return header(3, [m.capacity, m.interval]) + leb128(m.latest) + leb128(m.free() - m.latest)


def windows_words(limit: int, w: Windows) -> list:
    """The limit, then 0 and the length, or 1 and the calendar (in the
    order day, week, month)."""
    if w.calendar is None:
        return [limit, 0, w.length]
    return [limit, 1, CALENDARS.index(w.calendar)]


def fixed_window_state(m: NaiveFixedWindow) -> bytes:
    """The latest time, the latest booked slot, then the window holding the
    later of the two and the units in it."""
    k = m.w.index(m.at())
    out = header(6, windows_words(m.limit, m.w))
    return out + b"".join(leb128(v) for v in [m.latest, m.floor, k, m.sum(k)])


def counter_state(m: NaiveSlidingWindowCounter) -> bytes:
    """As a fixed window's, and the units in the window before."""
    k = m.w.index(m.at())
    previous = m.sum(k - 1) if k > 0 else 0
    out = header(5, windows_words(m.limit, m.w))
    return out + b"".join(leb128(v) for v in [m.latest, m.floor, k, m.sum(k), previous])


def broken(good: bytes) -> list:
    """Variants every runner must refuse, with the code it must give."""
    return [
        {"bytes": good[:-1].hex(), "expect_error": "state_truncated"},
        {"bytes": good[:5].hex(), "expect_error": "state_truncated"},
        {"bytes": ("xk" .encode() + good[2:]).hex(), "expect_error": "state_corrupt"},
        {"bytes": (good[:2] + bytes([NEWEST + 1]) + good[3:]).hex(), "expect_error": "state_version"},
        {"bytes": (good[:3] + bytes([good[3] ^ 1]) + good[4:]).hex(), "expect_error": "state_mismatch"},
        {"bytes": (good[:4] + bytes([good[4] ^ 0xFF]) + good[5:]).hex(), "expect_error": "state_mismatch"},
        {"bytes": (good + b"\x00").hex(), "expect_error": "state_corrupt"},
        {"bytes": (good[:8] + b"\xff" * 10).hex(), "expect_error": "state_corrupt"},
    ]


def state_scenario(name, algorithm, model_class, encode, config, requests):
    model = model_class(config)
    steps = []
    for r in requests:
        request = {"now_ns": r[0], "cost": r[1]} if isinstance(r, tuple) else r
        steps.append(run_step(model, request))
    good = encode(model)
    return {"name": name, "algorithm": algorithm, "config": config, "steps": steps,
            "state": good.hex(), "restore": broken(good)}


def scenarios():
    gcra = {"burst": 3, "emission_interval_ns": 100 * MS}
    log = {"limit": 3, "window_ns": S}
    return [
        state_scenario("GCRA, fresh", "gcra", NaiveGcra, gcra_state, gcra, []),
        state_scenario("GCRA after a burst and a denial", "gcra", NaiveGcra, gcra_state, gcra,
                       [(10 * S, 2), (10 * S + 50 * MS, 2), (10 * S + 60 * MS, 1)]),
        state_scenario("GCRA with a booking ahead", "gcra", NaiveGcra, gcra_state, gcra,
                       [(0, 3), {"op": "reserve", "now_ns": 0, "cost": 2, "max_wait_ns": S}]),
        state_scenario("sliding log with same-instant events", "sliding_window_log", NaiveSlidingWindowLog,
                       log_state, log, [(0, 1), (0, 1), (400 * MS, 1), (1200 * MS, 1)]),
        state_scenario("token bucket never called, starting short", "token_bucket", NaiveTokenBucket,
                       token_bucket_state, tb(5, 1, S, initial_tokens=2), []),
        state_scenario("token bucket with part of a token (6 per 4 s: 3 per 2 s in its carry)", "token_bucket",
                       NaiveTokenBucket, token_bucket_state, tb(10, 6, 4 * S), [(0, 10), (S + 7, 2)]),
        state_scenario("greedy and interval bandwidths owing a booking", "token_bucket", NaiveTokenBucket,
                       token_bucket_state,
                       {"bandwidths": [tb(4, 1000, S), tb(3, 2, 300 * MS, refill="interval", initial_tokens=1)]},
                       [(5 * S + 1_234_567, 1), (5 * S + 2 * MS, 1),
                        {"op": "reserve", "now_ns": 5 * S + 2_500_000, "cost": 3, "max_wait_ns": S},
                        (5 * S + 3_100_000, 1)]),
        state_scenario("leaky bucket with units queued", "leaky_bucket", NaiveLeakyBucket, leaky_state,
                       {"capacity": 3, "interval_ns": 100 * MS},
                       [(S, 1), {"op": "reserve", "now_ns": S + 30 * MS, "cost": 2, "max_wait_ns": S}]),
        state_scenario("fixed window with a booking ahead", "fixed_window", NaiveFixedWindow, fixed_window_state,
                       {"limit": 3, "window_ns": 250 * MS},
                       [(S + 10, 2), {"op": "reserve", "now_ns": S + 20, "cost": 2, "max_wait_ns": S}]),
        state_scenario("fixed window of ISO weeks", "fixed_window", NaiveFixedWindow, fixed_window_state,
                       {"limit": 5, "calendar": "week"}, [(utc(2024, 2, 29, 12), 2), (utc(2024, 3, 4), 1)]),
        state_scenario("sliding window counter over two windows", "sliding_window_counter",
                       NaiveSlidingWindowCounter, counter_state, {"limit": 4, "window_ns": S},
                       [(S + 10, 3), (2 * S + 500 * MS, 1), (2 * S + 600 * MS, 1)]),
        state_scenario("sliding window counter of months", "sliding_window_counter", NaiveSlidingWindowCounter,
                       counter_state, {"limit": 10, "calendar": "month"},
                       [(utc(2024, 2, 29, 23), 7), (utc(2024, 3, 10), 3)]),
        state_scenario("sliding log near the end of time", "sliding_window_log", NaiveSlidingWindowLog,
                       log_state, log, [(duration(2**64 - 5, "now"), 2)]),
    ]


FILES = [("core-only", "state.json", "Portable state: exact bytes after each scenario, and broken variants.", scenarios)]
