#!/usr/bin/env bash
# The backtest benchmark with vectorbt beside it (W2e): tradesim's release build end to end on the CPU, and
# vectorbt 1.2.0 from a throwaway virtualenv (scripts/setup-vectorbt.sh) on the same CSV file. Arguments go
# to `tradesim bench backtest` (e.g. --quick, --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(bash scripts/setup-vectorbt.sh)
cargo build --release --bin tradesim >&2
target/release/tradesim bench backtest --device cpu --vectorbt "$python" "$@"
