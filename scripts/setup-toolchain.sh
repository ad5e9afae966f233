#!/usr/bin/env bash
# Makes sure the toolchains tradesim needs are there: stable (with rustfmt and clippy) for the host code,
# nightly with rust-src for the PTX build (-Zbuild-std=core for nvptx64-nvidia-cuda).
set -euo pipefail
nightly=${TRADESIM_NIGHTLY:-nightly}
rustup component add rustfmt clippy >/dev/null
if ! rustup run "$nightly" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$nightly" --profile minimal
fi
if ! rustup component list --toolchain "$nightly" --installed | grep -q '^rust-src'; then
  rustup component add rust-src --toolchain "$nightly"
fi
