#!/usr/bin/env bash
# The main job (README): set up the toolchains, build in release (PTX included), show the backend, then run
# the hyperparameter search on the embedded data with its evidence (19 placebo searches, 3 walk-forward folds:
# docs/EVIDENCE.md). Extra arguments go to `tradesim hyperopt` instead of those two.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-toolchain.sh
cargo build --release
target/release/tradesim info
if [ $# -eq 0 ]; then
  set -- --placebo 19 --walk-forward 3
fi
target/release/tradesim hyperopt "$@"
