#!/usr/bin/env bash
# A throwaway virtualenv with Kevin Sheppard's `arch` from PyPI (arch.bootstrap.SPA and StepM), for the test
# that compares tradesim's SPA and StepM with it (tests/evidence_spa.rs); never a project dependency:
# target/arch-venv, pinned. Prints the venv's python. Needs python3 with venv (Debian: python3-venv);
# installs it with apt when missing and allowed (root or sudo without a password).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/arch-venv
version=${TRADESIM_ARCH_VERSION:-7.2.0}
# arch 7.2 imports pandas' deprecate_kwarg with the signature of pandas 2 (pandas 3 changed it).
pandas=2.2.3
bash scripts/need-venv.sh
if ! "$venv/bin/python" -c "import arch, pandas, sys; sys.exit(arch.__version__ != '$version' or pandas.__version__ != '$pandas')" >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check "arch==$version" "pandas==$pandas" >&2
fi
echo "$PWD/$venv/bin/python"
