#!/usr/bin/env bash
# Sets up the machine, then runs every test: Rust, Python (and on a real Redis), Node (napi), wasm
# (the same JS suite, plus real Chromium), the packed npm package (Node, esbuild,
# Chromium, workerd), then the demo. Every suite runs even if an earlier
# one failed; the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1

# Each suite's output is kept in target/ci-logs; a failed suite's failures
# are printed again at the end, where a CI page that shows only the last part
# of the output still shows them.
LOGS=target/ci-logs
mkdir -p "$LOGS"

# The lines naming failures in a suite's log (cargo, pytest, node's TAP, the
# scripts' own messages), then its last lines.
failures_of() {
  local log="$LOGS/$1.log"
  echo "--- $1: what failed (from $log) ---"
  grep -nE '^test .* FAILED$|panicked at|^(FAILED|ERROR) |^E +|^ *not ok |^# fail [1-9]|error(\[E[0-9]+\])?:|[a-z-]+\.sh: ' "$log" | head -60
  echo "--- $1: its last lines ---"
  tail -n 25 "$log"
}

passed=0 failed=0 failures=()
# demo: the README's other command, so that it cannot break unnoticed (its
# four builds must agree on one trace, and the Redis demo must run).
for suite in rust python redis node wasm package demo; do
  echo "=== $suite ==="
  start=$SECONDS
  # Into its log, shown as it grows: not through a pipe, which would wait
  # for any process a suite left running with its output.
  bash "scripts/$suite.sh" test >"$LOGS/$suite.log" 2>&1 </dev/null &
  pid=$!
  tail -n +1 -f --pid="$pid" "$LOGS/$suite.log"
  wait "$pid"
  status=$?
  if [ "$status" -eq 0 ]; then
    passed=$((passed + 1)); echo "=== $suite: ok ($((SECONDS - start)) s) ==="
  else
    failed=$((failed + 1)); failures+=("$suite"); echo "=== $suite: FAILED ($((SECONDS - start)) s) ==="
  fi
done
for suite in "${failures[@]}"; do failures_of "$suite"; done
[ $failed -eq 0 ] || echo "failed suites: ${failures[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
