#!/usr/bin/env bash
# The parity study of issue 43 (docs/PARITY.md): tradesim's DQN and PPO (`tradesim train`) against
# CleanRL-faithful PyTorch references (python/parity/cleanrl) on the same envs, env steps and network sizes,
# 5 seeds x 3 datasets, on the CPU. Writes docs/parity/{table.md,parity.png,curves.csv,study.json}; runs' raw
# outputs go to runs/parity. Arguments go to python/parity/run.py (--epochs N, --seeds N, --jobs N, --reuse ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh --release >/dev/null
cargo build --release --bin tradesim -q
py=$(bash scripts/setup-parity.sh)
exec "$py" python/parity/run.py "$@"
