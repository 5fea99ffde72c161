"""Portable state, written from the naive models by the format's definition:

    "rk"  version (1)  algorithm tag  fingerprint (u32 LE)  fields (unsigned LEB128)

The fingerprint is 32-bit FNV-1a over the tag byte and each configuration value
as 8 little-endian bytes. Every runner must produce these bytes after the steps,
restore them, and refuse the broken variants with the codes given."""
from __future__ import annotations

from .common import MS, S, duration, run_step
from .gcra import NaiveGcra
from .sliding_window_log import NaiveSlidingWindowLog

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
        state_scenario("sliding log near the end of time", "sliding_window_log", NaiveSlidingWindowLog,
                       log_state, log, [(duration(2**64 - 5, "now"), 2)]),
    ]


FILES = [("core-only", "state.json", "Portable state: exact bytes after each scenario, and broken variants.", scenarios)]
