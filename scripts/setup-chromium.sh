#!/usr/bin/env bash
# Headless Chromium from Debian's package for the report test (installed with apt when missing and allowed:
# root or sudo without a password). Prints its path.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
  $sudo apt-get install -y -q chromium >/dev/null 2>&1 || { echo "cannot install chromium" >&2; exit 1; }
fi
command -v chromium
