#!/usr/bin/env bash
# A ptxas for the optional cubin step of the build (docs/BUILD.md): NVIDIA's compiler wheel from PyPI in a
# throwaway virtualenv, target/ptxas-venv, never a project dependency. Prints the ptxas path, for
#     TRADESIM_PTXAS="$(bash scripts/setup-ptxas.sh)" cargo build --release
# Pinned to CUDA 12.9 (nvidia-cuda-nvcc-cu12 12.9.86, whose nvidia/cuda_nvcc/bin/ptxas compiles for sm_90):
# its cubins load on every CUDA 12.x and 13.x driver, where a newer ptxas than the driver's CUDA would make
# cubins the driver refuses. TRADESIM_PTXAS_WHEEL names another requirement (e.g. nvidia-cuda-nvcc==13.0.88).
# `--optional`: where it cannot be set up, a warning and no output (exit 0): the build embeds the PTX alone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--optional" ]; then
  bash scripts/setup-ptxas.sh || echo "warning: no ptxas could be set up (scripts/setup-ptxas.sh): the build embeds the PTX alone" >&2
  exit 0
fi
venv=target/ptxas-venv
wheel=${TRADESIM_PTXAS_WHEEL:-nvidia-cuda-nvcc-cu12==12.9.86}
bash scripts/need-venv.sh
find_ptxas() { find "$venv/lib" -path '*/nvidia/*/bin/ptxas' -type f 2>/dev/null | head -n 1; }
if [ "$(cat "$venv/wheel" 2>/dev/null)" != "$wheel" ] || [ -z "$(find_ptxas)" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel" >&2
  echo "$wheel" >"$venv/wheel"
fi
ptxas=$(find_ptxas)
if [ -z "$ptxas" ]; then
  echo "setup-ptxas.sh: $wheel has no bin/ptxas" >&2
  exit 1
fi
chmod +x "$ptxas"
"$ptxas" --version >/dev/null
echo "$PWD/$ptxas"
