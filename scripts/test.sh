#!/usr/bin/env bash
# The project's test command (README): formatting, lints, docs without warnings and tests of both builds,
# the CUDA one (PTX built with nightly) and the CPU-only one (stable alone). GPU tests skip without a GPU
# unless REQUIRE_GPU=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-toolchain.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --no-default-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo test --workspace
cargo test --workspace --no-default-features
