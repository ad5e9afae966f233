#!/usr/bin/env bash
# Issue 45 item 5: WORKERS workers x TRIALS short trials on one PostgreSQL study (a throwaway server of
# scripts/postgres.sh), with a release binary. Prints:
#   - claims per second: trials over the span from the first trial's start to the last one's (Optuna's
#     datetime_start, written when a worker claims the trial);
#   - the longest wait for a claim: the longest gap between consecutive claims in the study (while every
#     worker waits on the database, nothing is claimed; a worker's own epochs also fall in these gaps, so it
#     is an upper bound of the time a claim waited);
#   - the database's size per trial (pg_database_size after the search minus before, over the trials);
#   - the deadlocks and serialization failures that reached a worker (its stderr) and the workers' exit codes.
# Usage: scripts/scale-postgres.sh [WORKERS] [TRIALS]   (default 8 x 1000; TRADESIM_BIN names the binary,
# default target/release/tradesim, built when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${1:-8}
trials=${2:-1000}
bin=${TRADESIM_BIN:-target/release/tradesim}
[ -x "$bin" ] || cargo build --release --bin tradesim >&2
bin=$(realpath "$bin")
work=$(mktemp -d /tmp/tradesim-scale.XXXXXX)
pg="$work/pg"
mkdir -p "$pg"
chmod 755 "$work" "$pg"
trap 'bash scripts/postgres.sh stop "$pg"; rm -rf "$work"' EXIT
url=$(bash scripts/postgres.sh start "$pg")
port=$(cat "$pg/port")
password=${url#*://tradesim:}
password=${password%%@*}
sql() { PGPASSWORD=$password psql -h 127.0.0.1 -p "$port" -U tradesim -d tradesim -Atq -c "$1"; }
cat >"$work/search.toml" <<EOF
[study]
trials = $trials
parallel = 4
epochs = 1
startup_trials = 10
envs = 4
segment_len = 16
seed = 5
[space]
hidden = 8
batch = 16
EOF
before=$(sql "SELECT pg_database_size('tradesim')")
started=$(date +%s.%N)
pids=()
for i in $(seq 1 "$workers"); do
  (cd "$work" && RAYON_NUM_THREADS=1 "$bin" hyperopt --device cpu --config search.toml --storage "$url" \
    --study-name scale --load-if-exists >/dev/null 2>"$work/worker-$i.err") &
  pids+=($!)
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
after=$(sql "SELECT pg_database_size('tradesim')")
sql "SELECT extract(epoch FROM datetime_start) FROM trials ORDER BY datetime_start" >"$work/starts"
states=$(sql "SELECT state || ' ' || count(*) FROM trials GROUP BY state ORDER BY state" | tr '\n' ',')
numbers=$(sql "SELECT count(DISTINCT number) || ' distinct of ' || count(*) FROM trials")
errors=$(cat "$work"/worker-*.err | grep -ciE "deadlock|could not serialize|serialization" || true)
python3 - "$work/starts" "$trials" "$workers" "$seconds" "$before" "$after" "$states" "$numbers" "$errors" "$failed" <<'EOF'
import sys
starts = [float(x) for x in open(sys.argv[1]) if x.strip()]
trials, workers, seconds = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
before, after = int(sys.argv[5]), int(sys.argv[6])
span = starts[-1] - starts[0]
gaps = [b - a for a, b in zip(starts, starts[1:])]
print(f"workers {workers}, trials {trials}, wall {seconds:.1f} s")
print(f"claims per second: {len(starts) / span:.1f} ({len(starts)} claims over {span:.1f} s)")
print(f"longest wait between consecutive claims: {max(gaps) * 1e3:.0f} ms (median {sorted(gaps)[len(gaps) // 2] * 1e3:.1f} ms)")
print(f"database size per trial: {(after - before) / trials / 1024:.1f} KiB ({before} -> {after} bytes)")
print(f"trial states: {sys.argv[7].rstrip(',')}; trial numbers: {sys.argv[8]}")
print(f"deadlock or serialization errors in the workers' stderr: {sys.argv[9]}; workers that failed: {sys.argv[10]}")
EOF
