#!/usr/bin/env bash
# The Python package's toolchain in a throwaway virtualenv (target/py-venv): maturin to build the wheel,
# and what the wheel's tests need (pytest, pandas, numpy, gymnasium, and mypy for the `mypy --strict` test of
# the stubs). Builds the wheel of this checkout
# (`--release` when asked: the benchmarks) into target/wheels and installs it in that virtualenv.
# Prints the venv's python.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/py-venv
profile=${1:-}
bash scripts/need-venv.sh
pins=(maturin==1.16.0 pytest==9.2.0 pandas==3.1.1 numpy==2.4.6 gymnasium==1.4.0 mypy==2.4.1)
if ! "$venv/bin/python" -c 'import maturin, pytest, pandas, numpy, gymnasium, mypy' >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}" >&2
fi
rm -rf target/wheels
"$venv/bin/maturin" build -q $profile -m python/Cargo.toml --out target/wheels >&2
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/tradesim-*.whl >&2
echo "$PWD/$venv/bin/python"
