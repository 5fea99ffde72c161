#!/usr/bin/env bash
# node --test ARGS..., failing also when any test was skipped or left todo:
# a skipped test must not read as passing. node.sh, wasm.sh, package.sh and
# redis.sh run their JS suites through it (environment variables pass on).
set -uo pipefail

log=$(mktemp)
trap 'rm -f "$log"' EXIT
# TAP, whatever the Node version's default reporter: it ends with the counts read below.
# A test file still running after 10 minutes fails (the longest takes under a
# minute): one that hangs, say on a client reconnecting to a Redis server that
# is not there, must fail the suite, not stall it for ever.
node --test --test-reporter=tap --test-timeout=600000 "$@" | tee "$log"
status=${PIPESTATUS[0]}
if ! grep -qE '^# skipped 0$' "$log" || ! grep -qE '^# todo 0$' "$log"; then
    echo "node-test.sh: some tests were skipped or left todo ($*); every one must run" >&2
    status=1
fi
exit "$status"
