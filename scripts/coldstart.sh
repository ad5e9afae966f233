#!/usr/bin/env bash
# The CUDA backend's cold start on a GPU host (issue 58 item 1), from the staged binaries: scripts/gpu-suite.sh
# copies this script to .gpu-stage/coldstart.sh. Times `tradesim info --device cuda` with the driver's
# compilation cache emptied (CUDA_CACHE_PATH: a new empty folder for every cold run) for the cubin built at
# build time (the default) and for the PTX the driver compiles (TRADESIM_MODULE=ptx), alternately, RUNS times
# each (default 3); then each once more with the cache its last cold run filled (warm). Prints, per run, the
# process's wall seconds and tradesim's `module:` line (how the module was obtained and the seconds its load
# took); to $OUT/coldstart.txt too where OUT is set.
#     bash .gpu-stage/coldstart.sh [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/binaries.tar.xz" ] && [ ! -x "$here/bin/tradesim" ]; then
  tar -C "$here" -xJf "$here/binaries.tar.xz" bin
fi
bin=${TRADESIM_BIN:-$here/bin/tradesim}
runs=${1:-3}
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CUDA_CACHE_DISABLE TRADESIM_MODULE TRADESIM_DEV_PTX
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
report=${OUT:+$OUT/coldstart.txt}
say() { if [ -n "$report" ]; then echo "$*" | tee -a "$report"; else echo "$*"; fi; }
if [ -n "$report" ]; then mkdir -p "$OUT" && : >"$report"; fi

# One `tradesim info --device cuda` with the driver's cache in $2, TRADESIM_MODULE=$1: "wall_s | module line".
run() {
  local module=$1 cache=$2 start end out
  start=$(date +%s.%N)
  out=$(CUDA_CACHE_PATH="$cache" TRADESIM_MODULE="$module" "$bin" info --device cuda 2>&1) || {
    echo "tradesim info failed:" >&2
    echo "$out" >&2
    exit 1
  }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" -v m="$(echo "$out" | grep '^module:' | sed 's/^module: *//')" \
    'BEGIN { printf "%6.2f | %s\n", b - a, m }'
}

"$bin" info --device cuda | { grep -E '^(device|cubin|PTX in use):' || true; } | while read -r line; do say "$line"; done
say "run             wall s | module"
for i in $(seq 1 "$runs"); do
  for module in auto ptx; do
    mkdir -p "$scratch/$module-$i"
    say "$(printf '%-5s cold %-5s' "$module" "$i") $(run "$module" "$scratch/$module-$i")"
  done
done
for module in auto ptx; do
  say "$(printf '%-5s warm      ' "$module") $(run "$module" "$scratch/$module-$runs")"
done
say "auto: the cubin where one runs on the device; ptx: TRADESIM_MODULE=ptx. cold: an empty CUDA_CACHE_PATH."
