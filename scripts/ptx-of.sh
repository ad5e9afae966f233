#!/usr/bin/env bash
# Usage: scripts/ptx-of.sh REV OUT.ptx [ARCH]: the kernels of commit REV compiled to PTX for ARCH (default
# sm_90) as build.rs's nested build compiles them (without the launch bounds build.rs then adds), in a
# temporary worktree, with the nightly this checkout pins (build/NIGHTLY, or TRADESIM_NIGHTLY) so that two
# commits are compiled alike; compare two with scripts/compare-ptx.py.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 REV OUT.ptx [ARCH]" >&2; exit 2; }
out=$(realpath -m "$2")
cd "$(dirname "$0")/.."
rev=$1; arch=${3:-sm_90}; root=$PWD
bash scripts/setup-toolchain.sh >/dev/null
n=${TRADESIM_NIGHTLY:-$(tr -d '[:space:]' < build/NIGHTLY)}
tree=$(mktemp -d /tmp/tradesim-ptx.XXXXXX)
trap 'git worktree remove --force "$tree" 2>/dev/null || true; rm -rf "$tree"; git worktree prune || true' EXIT
git worktree add --quiet --detach --force "$tree" "$rev"
rm -f "$out"
(cd "$tree" && RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort" cargo "+$n" rustc -q -p gpu-kernels \
  --profile ptx --crate-type staticlib --target nvptx64-nvidia-cuda -Zbuild-std=core \
  --target-dir "$root/target/ptx-of" -- --emit=asm="$out" -C target-cpu="$arch")
[ -s "$out" ] || { echo "error: no PTX was written to $out" >&2; exit 1; }
echo "$out: $(grep -c '^.visible .entry' "$out") kernels of $(git rev-parse --short "$rev")"
