#!/usr/bin/env bash
# Stages the Python package for a GPU host beside the binaries of scripts/gpu-suite.sh: the release wheel
# (abi3), the pure-Python wheels the tests need that such a host may lack (gymnasium and its dependencies,
# for CPython 3.12), the tests, example and benchmark, and .gpu-stage/py/run.sh, which installs them
# offline into a scratch folder beside the host's own packages (numpy, pandas, pytest, torch) and runs
# pytest with REQUIRE_GPU=1 (GPU cases must run) and the env benchmark. Run gpu-suite.sh first.
# The parity test (python/tests/test_parity.py) runs the PyTorch reference with the host's own python3 where
# it has torch (its settings read from the Rust sources staged beside it), and skips saying so where not.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=.gpu-stage/py
rm -rf "$stage" .gpu-stage/python
mkdir -p "$stage/wheels"
# The wheel carries the sm_90 cubin as the staged binaries do (scripts/gpu-suite.sh, docs/BUILD.md).
TRADESIM_PTXAS=${TRADESIM_PTXAS:-$(bash scripts/setup-ptxas.sh --optional)}
export TRADESIM_PTXAS
bash scripts/setup-python.sh --release >/dev/null
cp target/wheels/tradesim-*.whl "$stage/wheels/"
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
  --platform manylinux2014_x86_64 --platform any -d "$stage/wheels" gymnasium==1.4.0 >&2
# numpy comes from the host (its torch is built against it).
rm -f "$stage"/wheels/numpy-*
cp -r python/tests python/examples python/bench "$stage/"
# The parity test runs python/parity/cleanrl/dqn.py from the stage's root (its ROOT: two folders above the
# tests); the references read tradesim's settings from the Rust files tradesim_defaults.py names
# (TRADESIM_SOURCES, set by run.sh).
mkdir -p .gpu-stage/python
cp -r python/parity .gpu-stage/python/
grep -o 'read("[^"]*")' python/parity/tradesim_defaults.py | sed 's/read("\(.*\)")/\1/' | while read -r f; do
  mkdir -p "$stage/sources/$(dirname "$f")"
  cp "$f" "$stage/sources/$f"
done
# The Python tests read the embedded CSV at ../data from their package folder.
mkdir -p .gpu-stage/data
cp data/eurusd-1h-ask-2017.csv .gpu-stage/data/
cat >"$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
# On the GPU host, from .gpu-stage/py: the staged wheels beside the host's packages,
# then pytest (REQUIRE_GPU=1) and the env benchmark. Output to $OUT (or ./results).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/results}
mkdir -p "$out"
# The CLI the tests run (TRADESIM_BIN), unpacked here where ../run.sh has not unpacked the binaries yet.
if [ -f "$here/../binaries.tar.xz" ] && [ ! -x "$here/../bin/tradesim" ]; then
  tar -C "$here/.." -xJf "$here/../binaries.tar.xz" bin
fi
# The staged wheels go to a scratch folder on PYTHONPATH, beside the host's packages (numpy, pandas,
# pytest, torch); no virtualenv: the host's python3 may itself be one, whose packages a venv would not see.
site=$(mktemp -d)/site
python3 -m pip install -q --no-index --no-deps --target "$site" "$here"/wheels/*.whl >"$out/pip.log" 2>&1 || {
  cat "$out/pip.log"; exit 1; }
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
export REQUIRE_GPU=1 TRADESIM_BIN="$here/../bin/tradesim" TRADESIM_SOURCES="$here/sources"
# The parity test's PyTorch reference: the host's python3 (torch beside the staged wheels on PYTHONPATH).
if python3 -c 'import torch' >/dev/null 2>&1; then
  TRADESIM_TORCH_PYTHON=$(command -v python3)
  export TRADESIM_TORCH_PYTHON
else
  echo "the parity test's PyTorch reference is skipped: the host's python3 has no torch" | tee "$out/parity-skipped.txt"
  export TRADESIM_SKIP_PARITY=1
fi
cd "$here"
python3 -m pytest -q -rs -p no:cacheprovider tests 2>&1 | tee "$out/pytest.log" | tail -n 30
rc=${PIPESTATUS[0]}
python3 bench/bench.py env --device cuda --json "$out/bench-env.json" 2>&1 | tail -n 5
exit "$rc"
RUN
chmod +x "$stage/run.sh"
du -sh "$stage"
