#!/usr/bin/env bash
# A throwaway virtualenv with FinRL from PyPI for the portfolio env's peer (`tradesim bench portfolio
# --finrl "$(bash scripts/setup-finrl.sh)"`, benches/peers/finrl_portfolio.py): target/finrl-venv, never a
# project dependency. Prints the venv's python. FinRL's wheel declares no dependencies; its
# PortfolioOptimizationEnv imports gym, numpy, pandas, matplotlib, quantstats (installed here) and
# stable-baselines3 (not installed: it pulls PyTorch; the peer stands in a placeholder for that one import,
# which only the env's get_sb_env helper uses). Pinned to the FinRL release the figures used (override with
# TRADESIM_FINRL_VERSION).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/finrl-venv
version=${TRADESIM_FINRL_VERSION:-0.3.7}
bash scripts/need-venv.sh
if ! "$venv/bin/python" -c "from importlib.metadata import version; import sys, gym, pandas, matplotlib, quantstats; sys.exit(version('finrl') != '$version')" >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check "finrl==$version" gym numpy pandas matplotlib quantstats >&2
fi
echo "$PWD/$venv/bin/python"
