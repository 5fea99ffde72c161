#!/usr/bin/env bash
# The Node.js (napi-rs) binding: bindings-node/.
#
#   bash scripts/node.sh setup   npm ci in bindings-node (skipped when node_modules matches the lockfile)
#   bash scripts/node.sh build   napi build --release --platform, then fail if index.js / index.d.ts changed
#   bash scripts/node.sh test    build, the JS suite (tests/js) on the addon, tsc over tests/js/types
#
# Works from any directory. Needs Node >= 20 with npm, and Rust (cargo) on PATH.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PKG=bindings-node
GENERATED=(index.js index.d.ts)
STAMP="$PKG/node_modules/.ratekeeper-package-lock.json"

setup() {
  # npm ci wipes node_modules; skip it when the last install came from this very lockfile.
  if [[ -f "$STAMP" ]] && cmp -s "$PKG/package-lock.json" "$STAMP"; then
    return 0
  fi
  npm ci --prefix "$PKG" --no-audit --no-fund --loglevel=error >/dev/null
  cp "$PKG/package-lock.json" "$STAMP"
}

build() {
  setup
  before="$(mktemp -d)"
  trap 'rm -rf "$before"' EXIT
  local f
  for f in "${GENERATED[@]}"; do
    if [[ -f "$PKG/$f" ]]; then cp "$PKG/$f" "$before/$f"; fi
  done

  (cd "$PKG" && node_modules/.bin/napi build --release --platform)

  # Generated files are committed: a build must reproduce them byte for byte.
  local drift=0
  for f in "${GENERATED[@]}"; do
    if [[ ! -f "$before/$f" ]]; then
      echo "node.sh: $PKG/$f did not exist and was generated: commit it." >&2
      if [[ -n "${CI:-}" ]]; then drift=1; fi
    elif ! cmp -s "$before/$f" "$PKG/$f"; then
      echo "node.sh: the build changed $PKG/$f (generated from the Rust sources): commit the new version." >&2
      diff -u "$before/$f" "$PKG/$f" >&2 || true
      drift=1
    fi
  done
  return "$drift"
}

run_tests() {
  build
  # Explicit files, not `node --test tests/js/`: directory arguments only work on Node 20.
  node --test tests/js/*.test.cjs
  "$PKG/node_modules/.bin/tsc" -p tests/js/types/tsconfig.json
  echo "node.sh: tsc --noEmit over tests/js/types/usage.ts passed"
}

case "${1:-}" in
  setup) setup ;;
  build) build ;;
  test) run_tests ;;
  *)
    echo "usage: bash scripts/node.sh setup|build|test" >&2
    exit 2
    ;;
esac
