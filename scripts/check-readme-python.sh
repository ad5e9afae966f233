#!/usr/bin/env bash
# The README's Python example, as a new user runs it: the built wheel (target/wheels) pip-installed in a
# fresh virtualenv (its dependencies from PyPI), then the README's ```python block run in a scratch folder
# holding the repository's data/. Fails if the example fails.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/py-fresh
rm -rf "$venv"
python3 -m venv "$venv" >/dev/null
"$venv/bin/pip" install -q --disable-pip-version-check target/wheels/tradesim-*.whl >&2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r data "$scratch/data"
python3 - "$scratch/example.py" <<'PY'
import re, sys
text = open("README.md", encoding="utf-8").read()
section = text[text.index("## Python"):]
blocks = re.findall(r"```python\n(.*?)```", section, re.S)
assert blocks, "no ```python block in the README's Python section"
open(sys.argv[1], "w", encoding="utf-8").write(blocks[0])
PY
(cd "$scratch" && "$OLDPWD/$venv/bin/python" example.py >/dev/null)
echo "README Python example: ok"
