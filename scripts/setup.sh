#!/usr/bin/env bash
# Installs everything the demo and the tests need on a fresh machine. Idempotent:
# each step checks what is already there and installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages: Chromium for the browser test and, when no real wasm32 target
# is installed, Debian's Rust with its std source to build std for wasm32
# (see scripts/wasm.sh).
packages=(chromium)
if [ "$(bash scripts/wasm.sh toolchain)" != rustup ]; then
  packages+=(rustc-web cargo-web rust-web-src lld-22)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy

bash scripts/python.sh setup
bash scripts/node.sh setup
bash scripts/wasm.sh setup
bash scripts/package.sh setup
echo "setup: done"
