"""Replays demo/trace.json through the Rust core, the Python package, the Node
addon and the wasm build, prints their decisions side by side, and fails if any
two differ. Run it with `bash scripts/demo.sh`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ratekeeper

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "demo" / "trace.json"


def python_decisions(trace: dict) -> list[dict]:
    out = []
    for i, spec in enumerate(trace["limiters"]):
        c = spec["config"]
        if spec["algorithm"] == "token_bucket":
            limiter = ratekeeper.TokenBucket(c["capacity"], c["refill_tokens"], c["refill_period_ns"] / 1e9)
        else:
            limiter = ratekeeper.SlidingWindowLog(c["limit"], c["window_ns"] / 1e9)
        for j, r in enumerate(trace["requests"]):
            d = limiter.try_acquire(r["cost"], now=r["now_ns"] / 1e9)
            out.append({"limiter": i, "request": j, "allowed": d.allowed, "remaining": d.remaining,
                        "retry_after_ns": round(d.retry_after * 1e9),
                        "reset_after_ns": round(d.reset_after * 1e9)})
    return out


def lines(cmd: list[str]) -> list[dict]:
    result = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


def cell(d: dict) -> str:
    if d["allowed"]:
        return f"allow, {d['remaining']} left"
    return f"deny, retry {d['retry_after_ns'] / 1e9:.3f} s"


def main() -> int:
    trace = json.loads(TRACE.read_text())
    runs = {
        "rust core": lines(["cargo", "run", "-q", "--release", "-p", "ratekeeper", "--features", "alloc",
                            "--example", "demo", "--", str(TRACE)]),
        "python": python_decisions(trace),
        "node (napi)": lines(["node", "demo/run.cjs", "napi", str(TRACE)]),
        "wasm": lines(["node", "demo/run.cjs", "wasm", str(TRACE)]),
    }
    names = list(runs)
    width = 22
    print(trace["description"])
    disagreements = 0
    for i, spec in enumerate(trace["limiters"]):
        print(f"\n{spec['name']}")
        print(f"{'t (s)':>8} {'cost':>4}  " + "".join(f"{n:<{width}}" for n in names))
        for j, r in enumerate(trace["requests"]):
            row = [next(d for d in runs[n] if d["limiter"] == i and d["request"] == j) for n in names]
            same = all(d == row[0] for d in row)
            disagreements += not same
            print(f"{r['now_ns'] / 1e9:>8.3f} {r['cost']:>4}  " + "".join(f"{cell(d):<{width}}" for d in row)
                  + ("" if same else "  <-- DIFFERENT"))
    total = len(runs["rust core"])
    if disagreements or any(len(v) != total for v in runs.values()):
        print(f"\n{disagreements} of {total} decisions differ between builds", file=sys.stderr)
        return 1
    print(f"\nAll {len(names)} builds made the same {total} decisions "
          "(allowed, remaining, retry_after and reset_after to the nanosecond).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
