#!/usr/bin/env bash
# The project's test command (README): formatting, lints, docs without warnings and tests of both builds,
# the CUDA one (PTX built with nightly) and the CPU-only one (stable alone). GPU tests skip without a GPU
# unless REQUIRE_GPU=1. The Optuna interop test runs the real optuna from a throwaway virtualenv
# (scripts/setup-optuna.sh), the SPA/StepM test the real arch from another (scripts/setup-arch.sh), the
# portfolio conformance test vectorbt from a third (scripts/setup-vectorbt.sh); the PostgreSQL tests a throwaway server (scripts/postgres.sh, Debian's package);
# the report test headless Chromium (scripts/setup-chromium.sh). The Python package's pytest suite runs from a
# throwaway virtualenv too (scripts/setup-python.sh), its parity test with PyTorch from another
# (scripts/setup-parity.sh; TRADESIM_SKIP_PARITY=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
# The throwaway virtualenvs take ~8 GB (PyTorch's PyPI wheel brings CUDA's libraries); pip's download cache
# would keep a second copy of every wheel, so it is off for the setup scripts this runs.
export PIP_NO_CACHE_DIR=1
avail_kb=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${avail_kb:-0}" -lt $((25 * 1024 * 1024)) ]; then
  echo "scripts/test.sh: $((avail_kb / 1024 / 1024)) GiB free under $PWD; a first run needs about 25 GiB (target/: builds and virtualenvs)" >&2
fi
bash scripts/setup-toolchain.sh
# The real optuna (a throwaway virtualenv under target/) for the study interop tests.
TRADESIM_OPTUNA_PYTHON=$(bash scripts/setup-optuna.sh)
export TRADESIM_OPTUNA_PYTHON
# Kevin Sheppard's arch (a throwaway virtualenv under target/): SPA and StepM compared with it.
TRADESIM_ARCH_PYTHON=$(bash scripts/setup-arch.sh)
export TRADESIM_ARCH_PYTHON
# vectorbt (a throwaway virtualenv under target/): the portfolio backtest compared with Portfolio.from_orders.
TRADESIM_VECTORBT_PYTHON=$(bash scripts/setup-vectorbt.sh)
export TRADESIM_VECTORBT_PYTHON
# Headless Chromium (Debian) renders the search report in a test.
TRADESIM_CHROMIUM=$(bash scripts/setup-chromium.sh)
export TRADESIM_CHROMIUM
# A throwaway PostgreSQL server for the multi-worker tests, stopped (and its data removed) at exit.
pg_dir=$(mktemp -d /tmp/tradesim-pg.XXXXXX)
chmod 755 "$pg_dir"
trap 'bash scripts/postgres.sh stop "$pg_dir"' EXIT
TRADESIM_POSTGRES_URL=$(bash scripts/postgres.sh start "$pg_dir")
# Its TLS certificates (tests/postgres_tls.rs): the CA, and a CA that signed nothing.
TRADESIM_POSTGRES_TLS="$pg_dir/tls"
export TRADESIM_POSTGRES_URL TRADESIM_POSTGRES_TLS
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy --workspace --all-targets --no-default-features -- -D warnings
n=${TRADESIM_NIGHTLY:-$(tr -d '[:space:]' < build/NIGHTLY)}; rustup component add clippy --toolchain "$n" >/dev/null && RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort" cargo "+$n" clippy -p gpu-kernels --target nvptx64-nvidia-cuda -Zbuild-std=core --profile ptx --target-dir target/clippy-ptx -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo test --workspace
# The evidence tests run 100 small searches (placebo searches included): release only.
cargo test --release --test evidence
# The universe searches' evidence tests (20 searches each, placebo searches included): release only too.
cargo test --release --test universe_search
# W10's smoke test: the verdict's size and power on a random walk and an AR(1) path (docs/EVIDENCE.md).
cargo run --release -q -- bench power --quick --device cpu
# The Python package: its wheel built by maturin (this checkout, default features), installed in a throwaway
# virtualenv, tested with pytest against the CLI binary of the same build.
TRADESIM_PYTHON=$(bash scripts/setup-python.sh)
# The parity test (python/tests/test_parity.py) runs the PyTorch reference from the throwaway torch venv with
# this build's wheel (scripts/setup-parity.sh); a failed setup fails here, unless TRADESIM_SKIP_PARITY=1.
if [ "${TRADESIM_SKIP_PARITY:-0}" != 1 ]; then
  TRADESIM_TORCH_PYTHON=$(bash scripts/setup-parity.sh)
  export TRADESIM_TORCH_PYTHON
fi
TRADESIM_BIN=$PWD/target/debug/tradesim "$TRADESIM_PYTHON" -m pytest -q python/tests
bash scripts/check-readme-python.sh
cargo test --workspace --no-default-features
