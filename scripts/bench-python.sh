#!/usr/bin/env bash
# The Python package's benchmarks (python/bench/bench.py): the release wheel, and vectorbt 1.2.0 in a
# throwaway virtualenv (target/vbt-venv, never a dependency). Arguments go to bench.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh --release >/dev/null
venv=target/vbt-venv
if ! "$venv/bin/python" -c 'import vectorbt, gymnasium' >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check vectorbt==1.2.0 gymnasium==1.4.0 >&2
fi
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/tradesim-*.whl >&2
"$venv/bin/python" python/bench/bench.py "$@"
