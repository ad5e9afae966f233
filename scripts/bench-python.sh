#!/usr/bin/env bash
# The Python package's benchmarks (python/bench/bench.py): the release wheel, and vectorbt 1.2.0 in a
# throwaway virtualenv (target/vbt-venv, never a dependency). Arguments go to bench.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh --release >/dev/null
python=$(bash scripts/setup-vectorbt.sh gymnasium==1.4.0)
venv=$(dirname "$(dirname "$python")")
"$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps target/wheels/tradesim-*.whl >&2
"$venv/bin/python" python/bench/bench.py "$@"
