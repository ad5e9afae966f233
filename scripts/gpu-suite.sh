#!/usr/bin/env bash
# Builds every test and bench binary in release on this (CPU-only) machine and stages them, with the
# tradesim binary and a runner, in .gpu-stage/ (git-ignored, checked to stay under 64 MiB).
# `--no-bench` leaves the criterion benches out (room for carrying data beside the binaries).
# On a GPU host: `bash .gpu-stage/run.sh [--bench]` runs them all with REQUIRE_GPU=1 (a skipped GPU test
# fails) and writes gpu-suite.log and summary.txt to $OUT (or .gpu-stage/results), and
# `bash .gpu-stage/coldstart.sh` times the module's load with the driver's cache emptied (cubin against PTX).
# The binaries carry the sm_90 cubin beside the PTX where a ptxas can be set up (TRADESIM_PTXAS, else
# scripts/setup-ptxas.sh's; TRADESIM_PTXAS=off: the PTX alone).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=.gpu-stage
limit_mib=64
bash scripts/setup-toolchain.sh
# The commit the bench JSON records (`-dirty` when the tree has uncommitted changes).
TRADESIM_COMMIT=$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
export TRADESIM_COMMIT
TRADESIM_PTXAS=${TRADESIM_PTXAS:-$(bash scripts/setup-ptxas.sh --optional)}
export TRADESIM_PTXAS
rm -rf "$stage"
mkdir -p "$stage/tests" "$stage/benches" "$stage/bin"
# The test (or bench) executables among cargo's JSON messages.
executables() {
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])'
}
cargo build --release --bin tradesim
cp target/release/tradesim "$stage/bin/"
cargo test --workspace --release --no-run --message-format=json 2>/dev/null | executables | while read -r exe; do
  cp "$exe" "$stage/tests/"
done
if [ "${1:-}" != "--no-bench" ]; then
  cargo bench --no-run --message-format=json 2>/dev/null | executables | while read -r exe; do
    case "$(basename "$exe")" in env_step-* | kernels-*) cp "$exe" "$stage/benches/" ;; esac
  done
fi
strip "$stage"/bin/* "$stage"/tests/* "$stage"/benches/* 2>/dev/null || true
# The binaries travel as one xz stream with xz's largest preset (-9e: a 64 MiB dictionary), which finds the
# code and the embedded kernel modules every binary repeats (the default preset's 8 MiB dictionary sees about
# one binary at a time; sizes in docs/PERFORMANCE.md). run.sh unpacks them on the GPU host.
tar -C "$stage" -cf - bin tests benches | xz -9e -T2 >"$stage/binaries.tar.xz"
rm -rf "$stage/bin" "$stage/tests" "$stage/benches"
cp scripts/gpu-run.sh "$stage/run.sh"
cp scripts/coldstart.sh "$stage/coldstart.sh"
# The seed search configurations docs/PERFORMANCE.md's figures run (`--config configs/seed-dqn.toml`).
cp -r benches/configs "$stage/configs"
size_kib=$(du -sk "$stage" | cut -f1)
target/release/tradesim info --device cpu | grep '^cubin:'
echo "staged $(tar -tJf "$stage/binaries.tar.xz" | grep -c '^tests/.') test binaries, $(tar -tJf "$stage/binaries.tar.xz" | grep -c '^benches/.') bench binaries: $((size_kib / 1024)) MiB in $stage"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "error: $stage is over ${limit_mib} MiB" >&2
  exit 1
fi
