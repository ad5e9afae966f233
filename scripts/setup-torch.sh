#!/usr/bin/env bash
# A throwaway virtualenv with PyTorch from PyPI for the learners' peers (`tradesim bench dqn|ppo|learners
# --torch "$(bash scripts/setup-torch.sh)"`, benches/peers/torch_learners.py): target/torch-venv, never a
# project dependency. Prints the venv's python. Pinned to the release the figures of docs/PERFORMANCE.md used
# (override with TRADESIM_TORCH_VERSION). PyPI's wheel is CUDA-enabled and runs on a CPU-only machine too;
# it and CUDA's libraries take ~5.6 GB installed, so pip keeps no cached copy.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/torch-venv
version=${TRADESIM_TORCH_VERSION:-2.15.0}
bash scripts/need-venv.sh
if ! "$venv/bin/python" -c "import torch, sys; sys.exit(not torch.__version__.startswith('$version'))" >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir "torch==$version" numpy >&2
fi
echo "$PWD/$venv/bin/python"
