#!/usr/bin/env bash
# Usage: scripts/seeded-outputs.sh BIN OUTDIR [DEVICE]: the seeded outputs whose bits must not change across a
# refactor (two hyperopt studies, DQN and PPO training, backtest exports). Compare two runs with
# scripts/compare-outputs.py OUTDIR_BEFORE OUTDIR_AFTER.
set -euo pipefail
BIN=$1; OUT=$2; DEV=${3:-cpu}
rm -rf "$OUT"; mkdir -p "$OUT"
for algo in dqn ppo; do
  cat > "$OUT/$algo.toml" <<TOML
[study]
algo = "$algo"
trials = 6
parallel = 3
epochs = 3
envs = 64
segment_len = 128
rollout_steps = 64
TOML
  "$BIN" hyperopt --config "$OUT/$algo.toml" --synthetic 20000 --seed 3 --device "$DEV" \
     --study "$OUT/$algo-study.sqlite" --report "$OUT/$algo-report" > "$OUT/$algo-hyperopt.txt" 2>&1
  "$BIN" train --algo "$algo" --device "$DEV" --epochs 2 --trials 2 --envs 16 --seed 5 --out "$OUT/$algo-train" > "$OUT/$algo-train.txt" 2>&1
done
"$BIN" backtest --device "$DEV" --fast 5:15:5 --slow 20:40:10 --json "$OUT/bt.json" --csv "$OUT/bt.csv" > "$OUT/bt.txt" 2>&1
"$BIN" backtest --device "$DEV" --fast 10 --slow 30 --trades "$OUT/trades.csv" --equity "$OUT/equity.csv" > "$OUT/bt1.txt" 2>&1

