#!/usr/bin/env bash
# The Python binding (bindings-python): setup | build | test | bench.
#   setup  create .venv at the repo root (if missing) and install the pinned dev tools
#   build  build the abi3 wheel (release) into target/wheels/python and install it into .venv
#   test   build, then pytest, mypy.stubtest, and mypy --strict over the package, the tests
#          and a typed usage file
#   sdist  build the source distribution into target/sdist, then, as pip does where no wheel
#          fits, a wheel from it alone, installed into a fresh venv and used
#   bench  build, install the peer libraries into .venv, and run bindings-python/bench/bench.py
#          (extra arguments go to bench.py; not part of test or CI)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
WHEELS="$ROOT/target/wheels/python"
PKG="$ROOT/bindings-python"

setup() {
    if [ ! -x "$PY" ]; then
        python3 -m venv "$VENV"
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check -r "$PKG/requirements-dev.txt"
}

build() {
    [ -x "$PY" ] || setup
    rm -rf "$WHEELS"
    # maturin runs cargo inside the workspace, so the shared target/ and Cargo.lock are used.
    # On Linux x86-64, a manylinux2014 wheel (glibc 2.17, linked by zig from
    # .venv), which pip installs on any Linux of the last decade; a wheel
    # linked here would need this host's glibc.
    local portable=()
    if [[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]]; then portable=(--zig --compatibility manylinux2014); fi
    # ${a[@]+...}: an empty array under set -u, which bash 3.2 (macOS) calls unbound.
    PATH="$VENV/bin:$PATH" "$PY" -m maturin build --release --quiet ${portable[@]+"${portable[@]}"} \
        --manifest-path "$PKG/Cargo.toml" --interpreter "$PY" --out "$WHEELS"
    local wheels=("$WHEELS"/ratekeeper-*.whl)
    if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
        echo "python.sh: expected exactly one wheel in $WHEELS" >&2
        exit 1
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "${wheels[0]}"
}

sdist() {
    [ -x "$PY" ] || setup
    local out="$ROOT/target/sdist"
    rm -rf "$out/dist" "$out/venv"
    # (maturin sdist has no --quiet; what it says goes to the log, failures included.)
    PATH="$VENV/bin:$PATH" "$PY" -m maturin sdist --manifest-path "$PKG/Cargo.toml" --out "$out/dist" >/dev/null
    local sdists=("$out/dist"/ratekeeper-*.tar.gz)
    # The core's sources travel with it (a path dependency), and so do the licenses and the readme.
    local listing
    listing=$(tar tzf "${sdists[0]}")
    for file in core/src/lib.rs core/redis/ratekeeper.lua Cargo.lock LICENSE-MIT LICENSE-APACHE PYPI.md; do
        grep -q "^ratekeeper-[^/]*/$file\$" <<<"$listing" || { echo "python.sh: $file is not in the sdist" >&2; exit 1; }
    done
    # pip's own route (maturin's PEP 517 backend, from .venv: offline, no build isolation);
    # the build's target directory kept across runs for the dependencies, not
    # for our crates: the sdist dates every file 2006 (reproducible), older
    # than any build, so cargo would call a stale core fresh and build the
    # binding of this sdist against the core of an older one.
    rm -rf "$out/target"/*/.fingerprint/ratekeeper-*
    PATH="$VENV/bin:$PATH" CARGO_TARGET_DIR="$out/target" "$PY" -m pip wheel --quiet --disable-pip-version-check \
        --no-build-isolation --no-deps --wheel-dir "$out/dist" "${sdists[0]}"
    "$PY" -m venv "$out/venv"
    "$out/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index "$out/dist"/ratekeeper-*.whl
    "$out/venv/bin/python" - <<'PY'
import ratekeeper

bucket = ratekeeper.TokenBucket(2, 1, 1.0)
assert [bucket.try_acquire(now=0.0).allowed for _ in range(3)] == [True, True, False]
policy = ratekeeper.Policy.from_rates("2/second", by=["user"])
assert policy.try_acquire({"user": "a"}, now=0.0).allowed
print(f"python.sh: a wheel built from the sdist works ({ratekeeper.__version__})")
PY
}

test_() {
    # Requirements change with the code; pip skips what is already installed.
    setup
    build
    # Run from the package directory so its pyproject.toml configures pytest; the
    # tests import the installed wheel (bindings-python/python is not on sys.path).
    (cd "$PKG" && "$PY" -m pytest tests -q)
    # stubtest checks the package and its submodules (the native module's .pyi included).
    "$PY" -m mypy.stubtest ratekeeper
    # The pure-Python modules (waiting helpers, ASGI middleware) are strictly typed too,
    # against this Python and the oldest the wheel claims (only this one runs the tests:
    # typeshed knows which standard library names 3.10 lacks).
    "$PY" -m mypy --strict "$PKG/python/ratekeeper"
    "$PY" -m mypy --strict --python-version 3.10 "$PKG/python/ratekeeper"
    # The tests and tests/typing_usage.py are typed against the installed stubs; the
    # deliberately wrong calls in the tests carry `type: ignore[...]`, which --strict
    # (warn_unused_ignores) requires mypy to flag, so the stubs must reject them.
    (cd "$PKG" && "$PY" -m mypy --strict tests && "$PY" -m mypy --strict --python-version 3.10 tests)
    "$PY" "$PKG/tests/typing_usage.py"
    sdist
}

bench() {
    build
    # The peers the benchmark compares with, pinned; installed for it only.
    "$PY" -m pip install --quiet --disable-pip-version-check \
        limits==5.8.0 pyrate-limiter==4.5.1 token-bucket==0.4.0
    "$PY" "$PKG/bench/bench.py" "$@"
}

case "${1:-}" in
    setup) setup ;;
    build) build ;;
    test) test_ ;;
    sdist) sdist ;;
    bench)
        shift
        bench "$@"
        ;;
    *)
        echo "usage: $0 setup|build|test|sdist|bench [bench.py arguments]" >&2
        exit 2
        ;;
esac
