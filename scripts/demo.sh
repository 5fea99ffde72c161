#!/usr/bin/env bash
# Sets up the machine, builds every binding, replays demo/trace.json through
# all of them side by side, then runs the Redis demo: a Python ASGI service and
# a Node HTTP service sharing per-client limits through one real Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/python.sh build
bash scripts/node.sh build
bash scripts/wasm.sh build
.venv/bin/python demo/run.py
bash scripts/node.sh npm-ci tests/redis
bash scripts/redis.sh demo
