#!/usr/bin/env bash
# The main job (README): set up the toolchains, build in release (PTX included), show the backend, then run
# the hyperparameter search on the embedded data. Extra arguments go to `tradesim hyperopt`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-toolchain.sh
cargo build --release
target/release/tradesim info
target/release/tradesim hyperopt "$@"
