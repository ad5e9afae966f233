#!/usr/bin/env bash
# The main job (README): set up the toolchains, build in release (PTX included), show the backend and run a
# short simulation on it. Extra arguments go to `tradesim simulate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-toolchain.sh
cargo build --release
target/release/tradesim info
target/release/tradesim simulate "$@"
