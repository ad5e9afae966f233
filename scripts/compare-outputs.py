"""Compares two folders written by scripts/seeded-outputs.sh: every trial value, parameter and intermediate
value of both studies, every checkpoint, CSV and JSON (JSON without its timing keys). Exits 1 on a difference."""
import hashlib, sqlite3, sys, pathlib
a, b = map(pathlib.Path, sys.argv[1:3])
def rows(p, q):
    with sqlite3.connect(p) as db: return db.execute(q).fetchall()
bad = 0
for algo in ("dqn", "ppo"):
    for q in ("select t.number, t.state, v.value from trials t left join trial_values v on v.trial_id=t.trial_id order by t.number",
              "select t.number, p.param_name, p.param_value from trial_params p join trials t on t.trial_id=p.trial_id order by 1,2",
              "select t.number, v.step, v.intermediate_value from trial_intermediate_values v join trials t on t.trial_id=v.trial_id order by 1,2"):
        ra, rb = rows(a / f"{algo}-study.sqlite", q), rows(b / f"{algo}-study.sqlite", q)
        same = ra == rb; bad += not same
        print(algo, q.split()[1:4], len(ra), "rows", "SAME" if same else f"DIFFER {ra[:3]} vs {rb[:3]}")
files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and p.suffix in (".safetensors", ".csv", ".json"))
import json
def digest(p):
    if p.suffix != ".json": return hashlib.sha256(p.read_bytes()).hexdigest()
    def strip(x):
        if isinstance(x, dict): return {k: strip(v) for k, v in x.items() if "seconds" not in k}
        if isinstance(x, list): return [strip(v) for v in x]
        return x
    return json.dumps(strip(json.loads(p.read_text())), sort_keys=True)
for f in files:
    # study-owner.json records the study's storage URL, which names the output folder: compared without it.
    ha = digest(a / f).replace(str(a), "OUT"); hb = digest(b / f).replace(str(b), "OUT") if (b / f).exists() else None
    if ha != hb: bad += 1; print("DIFFER", f)
print(len(files), "files compared;", "all same" if bad == 0 else f"{bad} differences")
sys.exit(1 if bad else 0)
