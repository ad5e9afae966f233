#!/usr/bin/env bash
# The Python examples of the docs (every ```python block of docs/PYTHON.md, where the README's Python
# section points), as a new user runs them: the built wheel (target/wheels) pip-installed in a fresh
# virtualenv (its dependencies from PyPI), then each block run in its own scratch folder holding the
# repository's data/. Every block is compiled; a block that asks for `device="cuda"` needs a GPU and
# PyTorch, which the fresh virtualenv lacks, so it is compiled only. Fails if a block fails.
# `--list` prints the blocks found (how many, and which would run) without installing anything.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/PYTHON.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
blocks=$work/blocks
mkdir "$blocks"
python3 - "$doc" "$blocks" <<'PY'
import pathlib, re, sys
doc, out = sys.argv[1], pathlib.Path(sys.argv[2])
found = re.findall(r"^```python\n(.*?)^```", open(doc, encoding="utf-8").read(), re.S | re.M)
assert found, f"no ```python block in {doc}"
for i, code in enumerate(found, 1):
    compile(code, f"{doc} block {i}", "exec")
    kind = "gpu" if 'device="cuda"' in code else "cpu"
    (out / f"{i:02}-{kind}.py").write_text(code, encoding="utf-8")
PY
n_all=$(find "$blocks" -name '*.py' | wc -l)
n_cpu=$(find "$blocks" -name '*-cpu.py' | wc -l)
echo "$doc: $n_all python blocks, all compiled; $n_cpu run here, $((n_all - n_cpu)) need a GPU and PyTorch (compiled only)"
if [[ "${1:-}" == "--list" ]]; then
  exit 0
fi
venv=target/py-fresh
rm -rf "$venv"
python3 -m venv "$venv" >/dev/null
"$venv/bin/pip" install -q --disable-pip-version-check target/wheels/tradesim-*.whl >&2
python=$PWD/$venv/bin/python
for block in "$blocks"/*-cpu.py; do
  scratch=$work/run-${block##*/}
  mkdir "$scratch"
  cp -r data "$scratch/data"
  (cd "$scratch" && "$python" "$block" >/dev/null)
  echo "$doc block ${block##*/}: ok"
done
