#!/usr/bin/env bash
# A throwaway virtualenv with the real `optuna` from PyPI, for the interop tests (never a project
# dependency; psycopg2 for PostgreSQL studies, optuna-dashboard for its artifact API): target/optuna-venv, pinned to the release whose schema tradesim writes (docs/OPTUNA-SCHEMA.md).
# Prints the venv's python. Needs python3 with venv (Debian: python3-venv); installs it with apt when missing
# and allowed (root or sudo without a password).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/optuna-venv
version=${TRADESIM_OPTUNA_VERSION:-5.0.0}
dashboard=0.21.0
bash scripts/need-venv.sh
if ! "$venv/bin/python" -c "import optuna, optuna_dashboard, psycopg2, sys; sys.exit(optuna.__version__ != '$version' or optuna_dashboard.__version__ != '$dashboard')" >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check "optuna==$version" "optuna-dashboard==$dashboard" psycopg2-binary >&2
fi
echo "$PWD/$venv/bin/python"
