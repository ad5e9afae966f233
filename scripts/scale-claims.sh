#!/usr/bin/env bash
# The study's side of a shared search at scale, without training: called by scripts/scale-postgres.sh
# (--claims, --optuna, --sqlite; its header says what is printed). Usage: scale-claims.sh MODE WORKERS TRIALS
set -euo pipefail
cd "$(dirname "$0")/.."
mode=$1
workers=${2:-8}
trials=${3:-10000}
case "$mode" in
  claims | sqlite)
    # TRADESIM_CLAIMS_BIN names a built examples/claims binary (else cargo builds it).
    if [ -z "${TRADESIM_CLAIMS_BIN:-}" ]; then
      cargo build --release --example claims >&2
    fi
    run=("$(realpath "${TRADESIM_CLAIMS_BIN:-target/release/examples/claims}")" - scale "$trials" 5)
    # TRADESIM_REPORT_BIN names a built examples/report_scale binary (else cargo builds it): the study's
    # report is written and timed once the claims are done.
    if [ -z "${TRADESIM_REPORT_BIN:-}" ]; then
      cargo build --release --example report_scale >&2
    fi
    report_bin=$(realpath "${TRADESIM_REPORT_BIN:-target/release/examples/report_scale}")
    ;;
  optuna)
    python=$(bash scripts/setup-optuna.sh)
    run=("$python" benches/peers/scale_optuna.py scale "$trials")
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
work=$(mktemp -d /tmp/tradesim-scale.XXXXXX)
pg="$work/pg"
mkdir -p "$pg"
chmod 755 "$work" "$pg"
trap 'bash scripts/postgres.sh stop "$pg" 2>/dev/null; rm -rf "$work"' EXIT
cpu() { :; }
if [ "$mode" = sqlite ]; then
  url="sqlite:///$work/study.sqlite"
  size() { stat -c %s "$work/study.sqlite" 2>/dev/null || echo 0; }
  sql() { python3 -c "import sqlite3,sys; print('\n'.join('|'.join(map(str,r)) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])))" "$work/study.sqlite" "$1"; }
else
  url=$(bash scripts/postgres.sh start "$pg")
  port=$(cat "$pg/port")
  password=${url#*://tradesim:}
  password=${password%%@*}
  sql() { PGPASSWORD=$password psql -h 127.0.0.1 -p "$port" -U tradesim -d tradesim -Atq -c "$1"; }
  size() { sql "SELECT pg_database_size('tradesim')"; }
  psql -h "$pg" -p "$port" -U postgres -d tradesim -Atq -v ON_ERROR_STOP=1 \
    -c "ALTER SYSTEM SET log_lock_waits = on" -c "ALTER SYSTEM SET deadlock_timeout = '5ms'" \
    -c "ALTER SYSTEM SET log_line_prefix = '%m [%p] %v '" -c "SELECT pg_reload_conf()" >/dev/null
  # The server's CPU seconds: the postmaster's own and its exited backends' (reaped, so in its cutime).
  cpu() {
    python3 -c "import os,sys; f=open('/proc/%s/stat' % sys.argv[1]).read().rsplit(')',1)[1].split(); \
print(sum(int(x) for x in f[11:15]) / os.sysconf('SC_CLK_TCK'))" "$(head -1 "$pg/data/postmaster.pid")"
  }
fi
before=$(size)
cpu_before=$(cpu)
started=$(date +%s.%N)
pids=()
for i in $(seq 1 "$workers"); do
  TRADESIM_STORAGE=$url "${run[@]}" "$i" >"$work/worker-$i.out" 2>"$work/worker-$i.err" &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed=$((failed + 1))
    echo "worker $((i + 1)) failed; its stderr ends:" >&2
    tail -n 5 "$work/worker-$((i + 1)).err" >&2
  fi
done
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
after=$(size)
cpu_after=$(cpu)
states=$(sql "SELECT state || ' ' || count(*) FROM trials GROUP BY state ORDER BY state" | tr '\n' ',')
numbers=$(sql "SELECT count(DISTINCT number) || ' distinct of ' || count(*) FROM trials")
errors=$(cat "$work"/worker-*.err | grep -ciE "deadlock|could not serialize|serialization|locked" || true)
logged=0
waits=0
if [ "$mode" != sqlite ]; then
  logged=$(grep -ciE "deadlock detected|could not serialize" "$pg/data/log" || true)
  waits=$(grep -cE "acquired .* after" "$pg/data/log" || true)
  longest=$(grep -oE "acquired .* after [0-9.]+ ms" "$pg/data/log" | grep -oE "[0-9.]+ ms" | sort -n | tail -1 || true)
  waits="$waits (longest ${longest:-none})"
fi
report_line=""
if [ -n "${report_bin:-}" ]; then
  seconds_report=$(TRADESIM_STORAGE=$url "$report_bin" - scale "$work/report")
  report_line="report of the study (examples/report_scale: write_report, the study read included): ${seconds_report} s; \
leaderboard.json $(stat -c %s "$work/report/leaderboard.json") bytes, index.html $(stat -c %s "$work/report/index.html") bytes"
fi
# TRADESIM_SCALE_KEEP=FILE keeps a SQLite study (the report's work on a large study can be timed again).
if [ "$mode" = sqlite ] && [ -n "${TRADESIM_SCALE_KEEP:-}" ]; then
  cp "$work/study.sqlite" "$TRADESIM_SCALE_KEEP"
fi
cat "$work"/worker-*.out >"$work/claims"
python3 - "$work/claims" "$mode" "$workers" "$trials" "$seconds" "$before" "$after" "${cpu_before:-}" "${cpu_after:-}" \
  "$states" "$numbers" "$errors" "$logged" "$waits" "$failed" <<'PY'
import sys
rows = sorted(tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip())
mode, workers, trials, seconds = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
before, after = int(sys.argv[6]), int(sys.argv[7])
cpu = float(sys.argv[9]) - float(sys.argv[8]) if sys.argv[8] else None
states, numbers, errors, logged, waits, failed = sys.argv[10:16]
span = rows[-1][0] - rows[0][0]
print(f"{mode}: workers {workers}, trials {trials}, wall {seconds:.1f} s")
print(f"claims per second: {len(rows) / span:.1f} ({len(rows)} claims over {span:.1f} s)")
def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3
tenth = len(rows) / 10
print("claim latency per tenth of the study, ms (median / p99):")
cells = []
for k in range(10):
    part = [r[1] for r in rows[int(k * tenth):int((k + 1) * tenth)]]
    cells.append(f"{q(part, 0.5):.1f} / {q(part, 0.99):.1f}")
print("  " + " | ".join(cells))
first = [r[1] for r in rows[:int(tenth)]]
last = [r[1] for r in rows[int(9 * tenth):]]
print(f"last tenth / first tenth, median: {q(last, 0.5) / q(first, 0.5):.2f}x; p99: {q(last, 0.99) / q(first, 0.99):.2f}x")
print(f"lock waits over 5 ms: {waits}")
if cpu is not None:
    print(f"database CPU: {cpu:.1f} s ({cpu / span:.2f} cores over the span)")
print(f"bytes per trial: {(after - before) / trials:.0f} ({before} -> {after})")
print(f"trial states: {states.rstrip(',')}; trial numbers: {numbers}")
print(f"deadlock, serialization or lock errors in the workers' stderr: {errors}, in the server's log: {logged}; "
      f"workers that failed: {failed}")
PY
if [ -n "$report_line" ]; then
  echo "$report_line"
fi
