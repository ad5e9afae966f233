#!/usr/bin/env bash
# Makes sure python3 can create virtualenvs (Debian: python3-venv), installing the package with apt when it is
# missing and allowed (root, or sudo without a password). Used by the setup-*.sh scripts of throwaway venvs.
set -euo pipefail
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
  $sudo apt-get install -y -q python3-venv >/dev/null
fi
