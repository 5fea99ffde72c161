#!/usr/bin/env bash
# The one npm package `ratekeeper` (bindings-node/package.json): the native addon
# under the `node` export condition, the WebAssembly build under `workerd`,
# `deno`, `browser` and `default`.
#
#   bash scripts/package.sh setup   npm ci in tests/edge (miniflare, which brings workerd) and
#                                   tests/package (esbuild); each skipped when installed
#   bash scripts/package.sh pack    stage the package (bindings-node + the wasm build) and `npm pack` it;
#                                   prints the tarball's path. Builds the addon / the wasm when missing.
#   bash scripts/package.sh test    (the default) pack, then: pacedFetch on both builds (fake clock),
#                                   the tarball installed offline into an empty folder and resolved from
#                                   Node (native) and with the `browser` condition (wasm), the pacedFetch
#                                   demo page on the tarball in real Chromium (tests/browser/pace; needs
#                                   `bash scripts/wasm.sh setup` for playwright-core) and a page bundled
#                                   by esbuild calling init(wasmUrl) there, and the tarball's
#                                   wasm build in a real workerd (miniflare) limiting per client
#
# Staging: $CARGO_TARGET_DIR/npm (default target/npm): bindings-node's `files`,
# plus wasm/web.mjs, wasm/pkg/ (from bindings-wasm and its build),
# lib/paced-fetch.mjs (lib/paced-fetch.cjs bundled as an ES module by scripts/js-bundle.cjs)
# and lib/ratekeeper.lua (core/redis's script, for ratekeeper/redis where no addon loads).
set -euo pipefail
# A failure inside $(...) (cmd_pack's builds and copies) fails the script too.
shopt -s inherit_errexit

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
STAGE="$TARGET_DIR/npm/ratekeeper"
PKG=bindings-node
WASM=bindings-wasm

die() {
    echo "package.sh: $*" >&2
    exit 1
}

cmd_setup() {
    # Each skipped when installed (npm ci wipes node_modules): miniflare (its lockfile pins
    # workerd) in tests/edge, esbuild in tests/package.
    local dir
    for dir in tests/edge/node_modules/miniflare tests/package/node_modules/esbuild; do
        [[ -f "$dir/package.json" ]] || npm ci --prefix "${dir%/node_modules/*}" --no-audit --no-fund --loglevel=error >/dev/null
    done
}

cmd_pack() {
    compgen -G "$PKG/*.node" >/dev/null || bash scripts/node.sh build >&2
    [[ -f "$WASM/pkg/web/ratekeeper_wasm_bg.wasm" ]] || bash scripts/wasm.sh build >&2
    rm -rf "$STAGE"
    mkdir -p "$STAGE/lib" "$STAGE/wasm/pkg"
    # The README npm shows: NPM.md, for users (README.md is this repository's).
    cp "$PKG"/NPM.md "$STAGE/README.md"
    cp LICENSE-MIT LICENSE-APACHE "$STAGE/"
    cp "$PKG"/package.json "$PKG"/main.cjs "$PKG"/main.mjs "$PKG"/main.d.mts "$PKG"/index.js "$PKG"/index.mjs \
        "$PKG"/index.d.ts "$PKG"/native.js "$PKG"/ratekeeper.d.ts "$PKG"/paced-fetch.d.ts \
        "$PKG"/redis.d.ts "$PKG"/*.node "$STAGE/"
    cp -r "$PKG"/lib/api.cjs "$PKG"/lib/api "$PKG"/lib/paced-fetch.cjs "$PKG"/lib/paced-fetch "$PKG"/lib/redis.cjs "$PKG"/lib/redis "$STAGE/lib/"
    # The Redis script, for lib/redis.cjs where no native addon loads (the addon holds it otherwise).
    cp core/redis/ratekeeper.lua "$STAGE/lib/ratekeeper.lua"
    # The ES module twin for browsers and workers (scripts/js-bundle.cjs).
    node scripts/js-bundle.cjs "$PKG/lib/paced-fetch.cjs" "$STAGE/lib/paced-fetch.mjs" esm pacedFetchFor
    cp "$PKG"/wasm/browser.mjs "$PKG"/wasm/browser.cjs "$PKG"/wasm/browser-node.mjs "$PKG"/wasm/browser.d.mts "$PKG"/wasm/url.d.mts "$PKG"/wasm/workerd.mjs "$WASM"/web.mjs "$WASM"/web.d.mts "$STAGE/wasm/"
    cp "$WASM"/pkg/api.mjs "$WASM"/pkg/ratekeeper.d.ts "$STAGE/wasm/pkg/"
    mkdir -p "$STAGE/wasm/pkg/web"
    cp "$WASM"/pkg/web/ratekeeper_wasm.js "$WASM"/pkg/web/ratekeeper_wasm_bg.wasm "$STAGE/wasm/pkg/web/"
    # The wasm-bindgen glue is an ES module in a .js file.
    echo '{ "type": "module" }' >"$STAGE/wasm/pkg/web/package.json"
    # Node's fallback where no native addon loads (index.js): the CommonJS glue.
    mkdir -p "$STAGE/wasm/pkg/nodejs"
    cp "$WASM"/pkg/nodejs/ratekeeper_wasm.js "$WASM"/pkg/nodejs/ratekeeper_wasm_bg.wasm "$STAGE/wasm/pkg/nodejs/"
    # What a consumer's npm reads: no development fields, nothing that keeps it from publishing.
    node -e '
      const file = process.argv[1];
      const pkg = JSON.parse(require("fs").readFileSync(file, "utf8"));
      for (const field of ["private", "scripts", "devDependencies", "overrides", "napi"]) delete pkg[field];
      require("fs").writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
    ' "$STAGE/package.json"
    local tarball
    tarball=$(cd "$STAGE" && npm pack --silent --pack-destination "$TARGET_DIR/npm")
    local wasm_file="$STAGE/wasm/pkg/web/ratekeeper_wasm_bg.wasm"
    printf 'package.sh: %s (%s bytes); wasm %s bytes raw, %s bytes gzipped (-9)\n' "$TARGET_DIR/npm/$tarball" \
        "$(wc -c <"$TARGET_DIR/npm/$tarball")" "$(wc -c <"$wasm_file")" "$(gzip -9c "$wasm_file" | wc -c)" >&2
    echo "$TARGET_DIR/npm/$tarball"
}

cmd_test() {
    local tarball
    tarball=$(cmd_pack)
    cmd_setup
    bash scripts/node-test.sh tests/package/paced-fetch.test.mjs
    RATEKEEPER_IMPL=wasm bash scripts/node-test.sh tests/package/paced-fetch.test.mjs
    RATEKEEPER_TARBALL="$tarball" bash scripts/node-test.sh tests/package/install.test.mjs tests/package/browser.test.mjs
    RATEKEEPER_TARBALL="$tarball" bash scripts/node-test.sh tests/edge/*.test.mjs
}

case "${1:-test}" in
setup) cmd_setup ;;
pack) cmd_pack ;;
test) cmd_test ;;
*) die "usage: bash scripts/package.sh [setup|pack|test]" ;;
esac
