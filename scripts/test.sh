#!/usr/bin/env bash
# Sets up the machine, then runs every test: Rust, Python (and on a real Redis), Node (napi), wasm
# (the same JS suite, plus real Chromium), the packed npm package (Node, esbuild,
# Chromium, workerd), then the demo. Every suite runs even if an earlier
# one failed; the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1

passed=0 failed=0 failures=()
# demo: the README's other command, so that it cannot break unnoticed (its
# four builds must agree on one trace, and the Redis demo must run).
for suite in rust python redis node wasm package demo; do
  echo "=== $suite ==="
  start=$SECONDS
  if bash "scripts/$suite.sh" test; then
    passed=$((passed + 1)); echo "=== $suite: ok ($((SECONDS - start)) s) ==="
  else
    failed=$((failed + 1)); failures+=("$suite"); echo "=== $suite: FAILED ($((SECONDS - start)) s) ==="
  fi
done
[ $failed -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
