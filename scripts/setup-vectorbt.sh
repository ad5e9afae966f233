#!/usr/bin/env bash
# A throwaway virtualenv with vectorbt 1.2.0 from PyPI (target/vbt-venv, never a project dependency), the tool
# the backtest benchmarks compare against and the portfolio backtest's conformance test runs
# (tests/vectorbt_conformance.rs; scripts/test.sh sets TRADESIM_VECTORBT_PYTHON from it; vectorbt 1.2.0 with
# numba's wheels installs on CPython 3.11); extra arguments are more packages to install in it. Prints the
# venv's python. Needs python3 with venv (Debian: python3-venv); installs it with apt when missing and allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/vbt-venv
bash scripts/need-venv.sh
if ! "$venv/bin/python" -c "import vectorbt, sys; sys.exit(vectorbt.__version__ != '1.2.0')" >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check vectorbt==1.2.0 >&2
fi
if [ $# -gt 0 ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2
fi
echo "$PWD/$venv/bin/python"
