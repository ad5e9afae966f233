#!/usr/bin/env bash
# Usage: scripts/ptx-of.sh REV OUT.ptx [ARCH]: the kernels of commit REV compiled to PTX for ARCH (default
# sm_90) by the nested nightly build that build.rs runs (without the launch bounds build.rs adds), in a
# temporary worktree; compare two with scripts/compare-ptx.py.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$1; out=$(realpath -m "$2"); arch=${3:-sm_90}; root=$PWD
bash scripts/setup-toolchain.sh >/dev/null 2>&1
tree=$(mktemp -d /tmp/tradesim-ptx.XXXXXX)
trap 'git worktree remove --force "$tree"' EXIT
git worktree add --quiet --detach --force "$tree" "$rev" >/dev/null
n=${TRADESIM_NIGHTLY:-$(tr -d '[:space:]' < build/NIGHTLY)}
(cd "$tree" && RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort" cargo "+$n" rustc -q -p gpu-kernels \
  --profile ptx --crate-type staticlib --target nvptx64-nvidia-cuda -Zbuild-std=core \
  --target-dir "$root/target/ptx-of" -- --emit=asm="$out" -C target-cpu="$arch")
echo "$out: $(grep -c '^.visible .entry' "$out") kernels of $(git rev-parse --short "$rev")"
