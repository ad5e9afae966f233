#!/usr/bin/env bash
# Scale of a shared study (issues 45 and 54). Two kinds of run:
#
# scripts/scale-postgres.sh [WORKERS] [TRIALS]   (default 8 x 1000): WORKERS `tradesim hyperopt` workers x
# TRIALS short trials (1 epoch, tiny networks) on one PostgreSQL study (a throwaway server of
# scripts/postgres.sh), with a release binary (TRADESIM_BIN, default target/release/tradesim, built by cargo
# first). Prints trials claimed per second, the longest lock wait of a claim, the longest gap between
# claims, the database's size per trial, deadlocks and failed workers (below, at the analysis).
#
# scripts/scale-postgres.sh --claims|--optuna|--sqlite WORKERS TRIALS: the study's side alone, no training.
#   --claims: WORKERS processes of examples/claims.rs (tradesim's claim loop: claim one trial, finish it at
#             once, claim the next) on one PostgreSQL study;
#   --optuna: the peer, WORKERS processes of the real optuna 5.0 (benches/peers/scale_optuna.py:
#             `study.optimize` with a trivial objective, TPESampler's defaults) on the same kind of server;
#   --sqlite: as --claims on a SQLite study file.
# Prints claims per second (trials over the span from the first claim to the last), the median and p99
# claim latency per tenth of the study (the seconds a worker spends between two trials: finishing the
# previous one and claiming the next, Optuna's tell and ask), lock waits over 5 ms (PostgreSQL's
# log_lock_waits), the server's CPU seconds (the postmaster's and its reaped backends'), bytes per trial,
# and lost, duplicated and deadlocked trials.
#
# scripts/scale-postgres.sh --chaos TRIALS: the chaos test's PostgreSQL run at TRIALS trials with kills
# throughout (tests/chaos.rs, TRADESIM_CHAOS_TRIALS; not in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=train
case "${1:-}" in
  --claims | --optuna | --sqlite | --chaos)
    mode=${1#--}
    shift
    ;;
esac
if [ "$mode" = chaos ]; then
  chaos=$(mktemp -d /tmp/tradesim-chaos.XXXXXX)
  chmod 755 "$chaos"
  trap 'bash scripts/postgres.sh stop "$chaos"; rm -rf "$chaos"' EXIT
  TRADESIM_POSTGRES_URL=$(bash scripts/postgres.sh start "$chaos")
  export TRADESIM_POSTGRES_URL
  TRADESIM_CHAOS_TRIALS=${1:-10000} cargo test --release --test chaos -- --ignored --nocapture long_chaos
  exit
fi
if [ "$mode" != train ]; then
  exec bash scripts/scale-claims.sh "$mode" "$@"
fi
workers=${1:-8}
trials=${2:-1000}
if [ -z "${TRADESIM_BIN:-}" ]; then
  cargo build --release --bin tradesim >&2
fi
bin=$(realpath "${TRADESIM_BIN:-target/release/tradesim}")
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
# Every lock wait over 5 ms is logged with its statement, its process and its transaction (%v).
psql -h "$pg" -p "$port" -U postgres -d tradesim -Atq -v ON_ERROR_STOP=1 \
  -c "ALTER SYSTEM SET log_lock_waits = on" -c "ALTER SYSTEM SET deadlock_timeout = '5ms'" \
  -c "ALTER SYSTEM SET log_line_prefix = '%m [%p] %v '" -c "SELECT pg_reload_conf()" >/dev/null
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
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed=$((failed + 1))
    echo "worker $((i + 1)) failed; its stderr ends:" >&2
    tail -n 5 "$work/worker-$((i + 1)).err" >&2
  fi
done
seconds=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')")
after=$(sql "SELECT pg_database_size('tradesim')")
sql "SELECT extract(epoch FROM datetime_start) FROM trials ORDER BY datetime_start" >"$work/starts"
states=$(sql "SELECT state || ' ' || count(*) FROM trials GROUP BY state ORDER BY state" | tr '\n' ',')
numbers=$(sql "SELECT count(DISTINCT number) || ' distinct of ' || count(*) FROM trials")
errors=$(cat "$work"/worker-*.err | grep -ciE "deadlock|could not serialize|serialization" || true)
logged=$(grep -ciE "deadlock detected|could not serialize" "$pg/data/log" || true)
python3 - "$work/starts" "$pg/data/log" "$trials" "$workers" "$seconds" "$before" "$after" "$states" "$numbers" \
  "$errors" "$logged" "$failed" <<'EOF'
import re, sys
starts = [float(x) for x in open(sys.argv[1]) if x.strip()]
log = open(sys.argv[2], errors="replace").read().splitlines()
trials, workers, seconds = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
before, after = int(sys.argv[6]), int(sys.argv[7])
states, numbers, errors, logged, failed = sys.argv[8:13]
span = starts[-1] - starts[0]
gaps = [b - a for a, b in zip(starts, starts[1:])]
# The lock waits: "process P acquired LOCK after X ms" records, each with the statement that waited (the
# STATEMENT record of P that follows it). A claim's transaction is one that locks the study (its row, then the
# trials table against inserts); its waits are summed.
record = re.compile(r"^\d{4}-\d\d-\d\d \S+ \S+ \[(\d+)\] (\S*) ([A-Z]+):  (.*)")
acquired = re.compile(r"process \d+ acquired .* after ([\d.]+) ms")
waits, pending, failed_locks = [], {}, 0
for line in log:
    if not (m := record.match(line)):
        continue
    pid, vxid, kind, text = m.groups()
    if kind == "LOG":
        if pid in pending:
            waits.append(pending.pop(pid))
        failed_locks += "failed to acquire" in text
        if a := acquired.search(text):
            pending[pid] = [pid, vxid, float(a[1]), ""]
    elif kind == "STATEMENT" and pid in pending:
        pending[pid][3] = text
        waits.append(pending.pop(pid))
waits += pending.values()
claim_locks = ("FROM studies WHERE study_id", "LOCK TABLE trials IN SHARE ROW EXCLUSIVE MODE")
claim_tx = {(p, v) for p, v, _, s in waits if any(c in s for c in claim_locks)}
per_claim = {}
for p, v, ms, _ in waits:
    if (p, v) in claim_tx:
        per_claim[(p, v)] = per_claim.get((p, v), 0.0) + ms
others = [(ms, s) for p, v, ms, s in waits if (p, v) not in claim_tx]
print(f"workers {workers}, trials {trials}, wall {seconds:.1f} s")
print(f"trials claimed per second: {len(starts) / span:.1f} ({len(starts)} claims over {span:.1f} s)")
if per_claim:
    print(f"longest wait of a claim for its locks: {max(per_claim.values()):.0f} ms "
          f"({len(per_claim)} claims waited over 5 ms)")
else:
    print("longest wait of a claim for its locks: none waited over 5 ms")
if others:
    ms, s = max(others)
    print(f"longest lock wait of another statement: {ms:.0f} ms ({len(others)} waits over 5 ms; longest: {s[:60]})")
print(f"lock waits over 5 ms: {len(waits)} ended with the lock, {failed_locks} without it")
median = lambda xs: sorted(xs)[len(xs) // 2] * 1e3
tenth = max(1, len(gaps) // 10)
print(f"longest gap between consecutive claims: {max(gaps) * 1e3:.0f} ms (median {median(gaps):.1f} ms; "
      f"{median(gaps[:tenth]):.1f} ms over the first tenth of the claims, {median(gaps[-tenth:]):.1f} ms over the last)")
print(f"database size per trial: {(after - before) / trials / 1024:.1f} KiB ({before} -> {after} bytes)")
print(f"trial states: {states.rstrip(',')}; trial numbers: {numbers}")
print(f"deadlock or serialization errors in the workers' stderr: {errors}, in the server's log: {logged}; "
      f"workers that failed: {failed}")
EOF
