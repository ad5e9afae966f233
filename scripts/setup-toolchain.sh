#!/usr/bin/env bash
# Makes sure the toolchains tradesim needs are there: stable (with rustfmt and clippy) for the host code, and
# the pinned nightly (build/NIGHTLY, the one place it is named) with rust-src for the PTX build
# (-Zbuild-std=core for nvptx64-nvidia-cuda). TRADESIM_NIGHTLY names another toolchain instead.
set -euo pipefail
cd "$(dirname "$0")/.."
nightly=${TRADESIM_NIGHTLY:-$(tr -d '[:space:]' < build/NIGHTLY)}
rustup component add rustfmt clippy >/dev/null
if ! rustup run "$nightly" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$nightly" --profile minimal --component rust-src
fi
if ! rustup component list --toolchain "$nightly" --installed | grep -q '^rust-src'; then
  rustup component add rust-src --toolchain "$nightly"
fi
