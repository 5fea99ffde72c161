#!/usr/bin/env bash
# The Rust checks: formatting, lints, docs, the core's tests (its README's example among its doctests),
# its no_std and wasm32 builds, and the repository README's Rust example (docs/).
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-test}" in
  test)
    python3 tests/vectors/generate.py --check
    cargo fmt --all --check
    cargo clippy --workspace --all-targets --all-features -- -D warnings
    # no_std without alloc: the limiters alone, and the tests that need no more.
    cargo test -p ratekeeper --no-default-features
    RUSTDOCFLAGS="-D warnings" cargo doc -p ratekeeper --no-deps --all-features
    # Links resolve in a build without features too, as a user's `cargo doc` shows them.
    RUSTDOCFLAGS="-D warnings" cargo doc -p ratekeeper --no-deps
    # The crate as crates.io would get it: its files (license texts, README, changelog) and a build.
    listed=$(cargo package -p ratekeeper --offline --allow-dirty --list)
    for file in LICENSE-MIT LICENSE-APACHE README.md CHANGELOG.md; do
        grep -qx "$file" <<<"$listed" || { echo "rust.sh: $file is not in the crate's package" >&2; exit 1; }
    done
    cargo package -p ratekeeper --offline --allow-dirty
    bash scripts/wasm.sh check-core
    cargo test -p ratekeeper --all-features
    # The repository README's Rust example (a doctest of docs/, which is no
    # part of the published crate) and the core README's dependency line.
    cargo test -p ratekeeper-docs
    ;;
  *) echo "usage: $0 test" >&2; exit 2 ;;
esac
