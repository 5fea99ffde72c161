#!/usr/bin/env bash
# Sets up the machine, builds every binding, and replays demo/trace.json
# through all of them side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/python.sh build
bash scripts/node.sh build
bash scripts/wasm.sh build
.venv/bin/python demo/run.py
