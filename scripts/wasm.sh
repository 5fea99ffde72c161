#!/usr/bin/env bash
# WebAssembly binding (bindings-wasm): setup | build | test | check-core
#
#   setup       install what the other subcommands need (idempotent): the
#               wasm-bindgen CLI of the version in Cargo.lock, the npm packages of
#               bindings-wasm/tools (binaryen), tests/browser and tests/js
#   build       build the .wasm, run wasm-bindgen for Node (pkg/nodejs) and the web (pkg/web),
#               put bindings-wasm/traps.js into both glues (the stack put back after a trap),
#               shrink its output with binaryen's wasm-opt, and copy in the JS layer and
#               typings shared with bindings-node
#   test        build, run the shared JS suite on the wasm build, the real-browser test, then the
#               cross-binding differential test (tests/differential: this build, the napi addon
#               and the Python package, each built first where missing)
#   sizes       build, then print where the bytes of the .wasm go: the module kept
#               with its names, as `build` makes it otherwise, read by
#               bindings-wasm/tools/sizes.cjs (functions by size, the decisions'
#               code against the rest, what each group of exports alone holds)
#   check-core  build the core crate for wasm32 without std (no features, then `alloc`), and for
#               a microcontroller without 64-bit atomics (thumbv7em-none-eabihf: no features,
#               then `serde`, so `alloc`)
#   toolchain   print how wasm32 is built here: rustup, debian, or nothing
#
# wasm32 toolchain: a real `wasm32-unknown-unknown` target when one is installed
# (rustup), otherwise Debian's rustc-web + rust-web-src building std from source
# (-Zbuild-std); see /work/shared/TOOLCHAIN.md. Chromium: $RATEKEEPER_CHROMIUM or /usr/bin/chromium.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly TARGET=wasm32-unknown-unknown
readonly CRATE=ratekeeper-wasm
readonly OUT=bindings-wasm/pkg
# binaryen's wasm-opt from npm (bindings-wasm/tools): a build of it that runs in Node, the
# same version on every machine.
readonly WASM_OPT=bindings-wasm/tools/node_modules/.bin/wasm-opt
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

die() {
    echo "wasm.sh: $*" >&2
    exit 1
}

# "rustup" when a real wasm32 std is installed, "debian" when Debian's rustc can
# build one from source, else nothing.
toolchain() {
    local libdir
    if libdir=$(rustc --print target-libdir --target "$TARGET" 2>/dev/null) &&
        [ -d "$libdir" ] && [ -n "$(ls -A "$libdir")" ]; then
        echo rustup
    elif debian_std_source; then
        echo debian
    fi
}

# Whether Debian's rustc, with the std source to build any target's core from, is here.
debian_std_source() {
    [ -x /usr/bin/rustc ] && [ -x /usr/bin/cargo ] &&
        [ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/src/rust/library" ]
}

require_toolchain() {
    [ -n "$(toolchain)" ] || die "no way to build for $TARGET: either
  rustup target add $TARGET
or (Debian; scripts/setup.sh does this)
  apt-get install -y rustc-web cargo-web rust-web-src lld-22"
}

# cargo build for wasm32. $1: the std crates to build from source on the Debian
# route (e.g. std,panic_abort); the rest are cargo arguments.
wasm_cargo() {
    local std_crates=$1
    shift
    case "$(toolchain)" in
    rustup) cargo build --target "$TARGET" "$@" ;;
    debian)
        # Full paths: rustup's shims come first on PATH and have no std source.
        RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo build --target "$TARGET" \
            -Zbuild-std="$std_crates" "$@"
        ;;
    *) require_toolchain ;;
    esac
}

# The wasm-bindgen version the crate links (Cargo.lock), which the CLI must match.
bindgen_version() {
    local version
    version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock 2>/dev/null || true)
    if [ -z "$version" ]; then # not locked yet: the exact pin in Cargo.toml
        version=$(sed -n 's/^wasm-bindgen = "=\([0-9.]*\)"$/\1/p' bindings-wasm/Cargo.toml)
    fi
    [ -n "$version" ] || die "cannot tell the wasm-bindgen version from Cargo.lock or bindings-wasm/Cargo.toml"
    echo "$version"
}

bindgen_installed() {
    [ "$(wasm-bindgen --version 2>/dev/null || true)" = "wasm-bindgen $1" ]
}

chromium_path() {
    echo "${RATEKEEPER_CHROMIUM:-/usr/bin/chromium}"
}

cmd_setup() {
    require_toolchain
    echo "wasm.sh: wasm32 toolchain: $(toolchain)"
    local version
    version=$(bindgen_version)
    if bindgen_installed "$version"; then
        echo "wasm.sh: wasm-bindgen $version already installed"
    else
        # No --locked: one of the CLI's locked transitive versions is missing from the registry here.
        cargo install wasm-bindgen-cli --version "$version"
        bindgen_installed "$version" || die "wasm-bindgen $version is installed but not first on PATH"
    fi
    bash scripts/node.sh npm-ci bindings-wasm/tools
    bash scripts/node.sh npm-ci tests/browser
    bash scripts/node.sh setup-suite
    [ -x "$(chromium_path)" ] || die "no Chromium at $(chromium_path): apt-get install -y chromium (scripts/setup.sh does this) or set RATEKEEPER_CHROMIUM"
}

# The JS layer and the typings are written once, in bindings-node (lib/api.cjs
# and the parts it requires from lib/api/, index.d.ts), and brought here:
# bundled into one file (scripts/js-bundle.cjs), api.cjs for Node and api.mjs
# (an ES module) for browsers and workers, and ratekeeper.d.ts for both entries.
shared_js() {
    node scripts/js-bundle.cjs bindings-node/lib/api.cjs "$OUT/api.cjs" cjs
    node scripts/js-bundle.cjs bindings-node/lib/api.cjs "$OUT/api.mjs" esm createApi
    cp bindings-node/index.d.ts "$OUT/ratekeeper.d.ts"
}

cmd_build() {
    require_toolchain
    local version start
    version=$(bindgen_version)
    bindgen_installed "$version" || die "wasm-bindgen $version is not installed: run \`bash scripts/wasm.sh setup\`"
    [ -x "$WASM_OPT" ] || die "binaryen's wasm-opt is not installed: run \`bash scripts/wasm.sh setup\`"
    start=$SECONDS
    if [ "$(toolchain)" = debian ]; then
        # Size flags only a nightly-enabled rustc takes (the Debian route is
        # one, RUSTC_BOOTSTRAP=1): panics carry no file and line (they abort),
        # `{:?}` prints nothing (no message here uses it), and std's sorting
        # and formatting take their small forms: 104.5 to 98.1 KB gzipped,
        # 1.4 KB of it std's optimize_for_size. `ratekeeper_size` compiles
        # the core's and the binding's cold functions (configuration, state
        # codec, reconfigure, reserve, refund, errors) for size, through
        # `#[optimize(size)]` (a nightly attribute): 6.9 KB gzipped less.
        RUSTFLAGS="${RUSTFLAGS:-} -Zlocation-detail=none -Zfmt-debug=none --cfg ratekeeper_size" \
            wasm_cargo std,panic_abort -Zbuild-std-features=optimize_for_size --profile wasm -p "$CRATE"
    else
        wasm_cargo std,panic_abort --profile wasm -p "$CRATE"
    fi
    local wasm="${CARGO_TARGET_DIR:-target}/$TARGET/wasm/${CRATE//-/_}.wasm"
    rm -rf "$OUT/nodejs" "$OUT/web"
    local strip=(--remove-name-section --remove-producers-section)
    wasm-bindgen "$wasm" "${strip[@]}" --target nodejs --out-dir "$OUT/nodejs"
    wasm-bindgen "$wasm" "${strip[@]}" --target web --out-dir "$OUT/web"
    one_instance "$OUT/web/${CRATE//-/_}.js"
    guard_traps "$OUT/web/${CRATE//-/_}.js" "$OUT/nodejs/${CRATE//-/_}.js"
    local out="$OUT/web/${CRATE//-/_}_bg.wasm"
    wasm_opt "$out" "$OUT/nodejs/${CRATE//-/_}_bg.wasm"
    shared_js
    printf 'wasm.sh: built in %ss (%s route); %s: %s bytes raw, %s bytes gzipped (-9)\n' \
        "$((SECONDS - start))" "$(toolchain)" "$out" "$(wc -c <"$out")" "$(gzip -9c "$out" | wc -c)"
}

# The web glue instantiates once, whichever of init() and initSync() comes
# first: initSync() called while an init() was fetching (two parts of an app
# each initialising) made an instance that the fetch's end replaced, and the
# limiters built in between then read the new instance's memory ("memory
# access out of bounds", or another limiter's state). Each path already
# returns early once initialised; the fetch's end now does too, keeping the
# first instance. Checked by tests/js/entry.test.cjs. $1: the web glue.
one_instance() {
    node -e '
        const fs = require("node:fs");
        const [file] = process.argv.slice(1);
        const head = "function __wbg_finalize_init(instance, module) {\n";
        const glue = fs.readFileSync(file, "utf8");
        if (glue.split(head).length !== 2) throw new Error(`${file}: no single __wbg_finalize_init to guard (wasm-bindgen changed its glue?)`);
        fs.writeFileSync(file, glue.replace(head, `${head}    if (wasm !== undefined) return wasm;\n`));
    ' "$1"
}

# Each glue passes the module's exports through bindings-wasm/traps.js, which
# puts the stack pointer back after a trap (the file says why). $@: the glues.
guard_traps() {
    node -e '
        const fs = require("node:fs");
        const [guard, ...files] = process.argv.slice(1);
        const code = fs.readFileSync(guard, "utf8");
        for (const file of files) {
            const glue = fs.readFileSync(file, "utf8");
            const taken = /\bwasm = (\w+)\.exports;/g;
            if ((glue.match(taken) || []).length !== 1) throw new Error(`${file}: no single "wasm = ....exports;" to guard (wasm-bindgen changed its glue?)`);
            // A glue that moves the stack pointer from JS (return areas) would
            // find it put back under its feet after a trap: refused, not guarded.
            if (glue.includes("add_to_stack_pointer")) throw new Error(`${file}: the glue moves the stack pointer itself (add_to_stack_pointer): traps.js cannot put it back soundly`);
            fs.writeFileSync(file, `${glue.replace(taken, "wasm = __rk_guard_traps($1.exports);")}\n${code}`);
        }
    ' bindings-wasm/traps.js "$@"
}

# binaryen's -Os over wasm-bindgen's output (after it: run before, it saved 0.4 KB
# gzipped, wasm-bindgen's own sections being gone by then): 88.9 to 86.0 KB
# gzipped, decisions as fast (bindings-wasm/README.md). The target_features
# section goes too: wasm-bindgen, which reads it, has run. --low-memory-unused
# lets binaryen fold constant offsets into loads and stores (81,954 to 81,096
# bytes gzipped): the module's lowest KB is never read or written, its memory
# below 1 MiB being the stack (rust-lld places it first), which grows down
# from there and would reach its last KB only a KB short of overflowing; the
# data and the heap lie above. $1: the web output's .wasm; $2: the Node
# output's, the same module, optimised once for both.
wasm_opt() {
    local web=$1 node=$2 flags=(-Os --low-memory-unused --strip-target-features)
    "$WASM_OPT" "${flags[@]}" "$web" -o "$web.opt"
    if cmp -s "$web" "$node"; then
        cp "$web.opt" "$node"
    else
        "$WASM_OPT" "${flags[@]}" "$node" -o "$node"
    fi
    mv "$web.opt" "$web"
}

cmd_test() {
    cmd_build
    # The one JS suite of the napi addon, run unchanged against the wasm build.
    [ -d tests/js/node_modules/fastify ] || die "tests/js has no node_modules: run \`bash scripts/wasm.sh setup\`"
    RATEKEEPER_IMPL=wasm bash scripts/node-test.sh tests/js/*.test.cjs
    [ -d tests/browser/node_modules/playwright-core ] || die "tests/browser has no node_modules: run \`bash scripts/wasm.sh setup\`"
    (cd tests/browser && npx --no-install tsc -p tsconfig.json)
    RATEKEEPER_CHROMIUM="$(chromium_path)" bash scripts/node-test.sh tests/browser/*.test.mjs
    differential
}

# Generated scenarios through this build, the napi addon and the Python package, compared
# exactly, and policy configurations read by the three (tests/differential/README.md). scripts/test.sh builds the other two first (its
# python and node suites); run alone, this builds whichever is missing.
differential() {
    [ -x .venv/bin/python ] && .venv/bin/python -c 'import ratekeeper' 2>/dev/null || bash scripts/python.sh build
    compgen -G 'bindings-node/*.node' >/dev/null || bash scripts/node.sh build
    bash scripts/node-test.sh tests/differential/differential.test.cjs tests/differential/configs.test.cjs
}

# `build`, then the module again with its names (wasm-bindgen and wasm-opt as
# `build` runs them, the names kept), measured by bindings-wasm/tools/sizes.cjs.
cmd_sizes() {
    cmd_build
    local wasm="${CARGO_TARGET_DIR:-target}/$TARGET/wasm/${CRATE//-/_}.wasm" dir
    dir=$(mktemp -d)
    wasm-bindgen "$wasm" --remove-producers-section --target web --out-dir "$dir"
    local named="$dir/${CRATE//-/_}_bg.wasm"
    "$WASM_OPT" -Os --low-memory-unused --strip-target-features --debuginfo "$named" -o "$named"
    bindings-wasm/tools/node_modules/.bin/wasm-dis "$named" -o "$dir/module.wat"
    node bindings-wasm/tools/sizes.cjs "$named" "$dir/module.wat" "${RATEKEEPER_SIZES_ROWS:-40}"
    rm -rf "$dir"
}

cmd_check_core() {
    require_toolchain
    # Only core (+ alloc) is built from source: the crate must not need std.
    wasm_cargo core -p ratekeeper --no-default-features
    wasm_cargo core,alloc -p ratekeeper --no-default-features --features alloc
    echo "wasm.sh: the core builds for $TARGET (no default features; alloc)"
    check_embedded
}

# A Cortex-M4F: 32-bit atomics only (no `AtomicU64`), as on most microcontrollers
# an embedded user gives an allocator to. wasm32 has 64-bit atomics, so it does
# not show what such a target lacks.
readonly EMBEDDED=thumbv7em-none-eabihf

check_embedded() {
    local libdir route
    if libdir=$(rustc --print target-libdir --target "$EMBEDDED" 2>/dev/null) &&
        [ -d "$libdir" ] && [ -n "$(ls -A "$libdir")" ]; then
        route=rustup
    elif debian_std_source; then
        route=debian
    else
        echo "wasm.sh: skipped $EMBEDDED (rustup target add $EMBEDDED to check it)"
        return
    fi
    local features
    for features in "" serde; do
        if [ "$route" = rustup ]; then
            cargo build --target "$EMBEDDED" -p ratekeeper --no-default-features --features "$features"
        else
            RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo build --target "$EMBEDDED" \
                -Zbuild-std=core,alloc -p ratekeeper --no-default-features --features "$features"
        fi
    done
    echo "wasm.sh: the core builds for $EMBEDDED (no default features; serde, so alloc)"
}

case "${1:-}" in
setup) cmd_setup ;;
build) cmd_build ;;
test) cmd_test ;;
sizes) cmd_sizes ;;
check-core) cmd_check_core ;;
toolchain) toolchain ;;
*) die "usage: bash scripts/wasm.sh setup|build|test|sizes|check-core|toolchain" ;;
esac
