#!/usr/bin/env bash
# The parity study's Python (docs/PARITY.md, python/parity, python/tests/test_parity.py): the throwaway PyTorch
# venv of scripts/setup-torch.sh (target/torch-venv, never a project dependency) with gymnasium, matplotlib and
# this checkout's tradesim wheel added (the newest in target/wheels, which scripts/setup-python.sh builds).
# Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(bash scripts/setup-torch.sh)
pip=$(dirname "$py")/pip
if ! "$py" -c 'import gymnasium, matplotlib' >/dev/null 2>&1; then
  "$pip" install -q --disable-pip-version-check gymnasium==1.4.0 matplotlib==3.11.2 >&2
fi
wheel=$(ls -t target/wheels/tradesim-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  echo "setup-parity.sh: no wheel in target/wheels: run bash scripts/setup-python.sh first" >&2
  exit 1
fi
"$pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel" >&2
echo "$py"
