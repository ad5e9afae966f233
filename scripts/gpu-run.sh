#!/usr/bin/env bash
# Runs the staged binaries on a GPU host (copied to .gpu-stage/run.sh by scripts/gpu-suite.sh).
# Every test runs with REQUIRE_GPU=1; `--bench` also runs the criterion benches. Output: $OUT (or
# ./results beside this script)/gpu-suite.log and summary.txt. Exits non-zero when any binary fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# gpu-suite.sh ships the binaries xz-compressed: unpack them once.
if [ -f "$here/binaries.tar.xz" ] && [ ! -d "$here/tests" ]; then
  tar -C "$here" -xJf "$here/binaries.tar.xz"
fi
out=${OUT:-$here/results}
mkdir -p "$out"
log="$out/gpu-suite.log"
summary="$out/summary.txt"
: >"$log"
: >"$summary"
export REQUIRE_GPU=1 TRADESIM_BIN="$here/bin/tradesim"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
failed=0
section() { echo "=== $*" | tee -a "$log" >>"$summary"; }
section "tradesim info"
"$TRADESIM_BIN" info >>"$log" 2>&1 || failed=1
# REQUIRE_GPU=1 makes a GPU test that cannot run fail; a test that skips for another reason (no source tree
# beside the binaries, no Optuna or PostgreSQL on the GPU host) passes, and its reason goes to the summary.
one="$out/one-binary.log"
for t in "$here"/tests/*; do
  section "test $(basename "$t")"
  if ! "$t" --test-threads=1 --nocapture >"$one" 2>&1; then
    failed=1
    echo "FAILED" >>"$summary"
  fi
  cat "$one" >>"$log"
  grep -a -o -E "(skipped( [A-Za-z]+)*: |no [^,]*, skipping).*" "$one" | sort | uniq -c | sed 's/^ */  skip x/' >>"$summary"
  grep -a "test result" "$one" | tail -n 1 >>"$summary"
done
rm -f "$one"
if [ "${1:-}" = "--bench" ]; then
  for b in "$here"/benches/*; do
    section "bench $(basename "$b")"
    "$b" --bench >>"$log" 2>&1 || failed=1
  done
  grep -aE "^env_step/|^inner/|^cpu_|time:|thrpt:" "$log" >>"$summary" || true
fi
echo "exit: $failed" >>"$summary"
cat "$summary"
exit "$failed"
