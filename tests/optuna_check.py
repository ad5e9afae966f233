"""Loads a study tradesim wrote with the real optuna and compares it with what tradesim expects.

Usage: python optuna_check.py STORAGE_URL STUDY_NAME EXPECTED.json
EXPECTED.json: {"best": number or null, "trials": [{"number", "state", "value", "params", "steps",
"user_attrs"}]}. Exits non-zero with a message on the first difference; prints a summary on success.
"""
import json
import math
import sys

import optuna


def fail(msg):
    print(f"optuna check: {msg}", file=sys.stderr)
    sys.exit(1)


storage, name, expected_path = sys.argv[1:4]
with open(expected_path) as f:
    expected = json.load(f)
study = optuna.load_study(study_name=name, storage=storage)
if study.direction != optuna.study.StudyDirection.MAXIMIZE:
    fail(f"direction {study.direction}")
trials = study.get_trials(deepcopy=False)
if [t.number for t in trials] != [e["number"] for e in expected["trials"]]:
    fail(f"trial numbers {[t.number for t in trials]}")
kinds = {"FloatDistribution", "IntDistribution", "CategoricalDistribution"}
for t, e in zip(trials, expected["trials"]):
    if t.state.name != e["state"]:
        fail(f"trial {t.number}: state {t.state.name}, expected {e['state']}")
    if e["value"] is None:
        if t.value is not None and not math.isnan(t.value):
            fail(f"trial {t.number}: value {t.value}, expected none")
    elif t.value != e["value"]:
        fail(f"trial {t.number}: value {t.value!r}, expected {e['value']!r}")
    if set(t.params) != set(e["params"]):
        fail(f"trial {t.number}: parameters {sorted(t.params)}")
    for k, v in e["params"].items():
        if float(t.params[k]) != v:
            fail(f"trial {t.number}: {k} = {t.params[k]!r}, expected {v!r}")
        d = t.distributions[k]
        if type(d).__name__ not in kinds:
            fail(f"trial {t.number}: {k}: distribution {d}")
        if not d._contains(d.to_internal_repr(t.params[k])):
            fail(f"trial {t.number}: {k} = {t.params[k]!r} outside {d}")
    if sorted(t.intermediate_values) != e["steps"]:
        fail(f"trial {t.number}: intermediate steps {sorted(t.intermediate_values)}, expected {e['steps']}")
    for k, v in e["user_attrs"].items():
        if t.user_attrs.get(k) != v:
            fail(f"trial {t.number}: user attribute {k} = {t.user_attrs.get(k)!r}, expected {v!r}")
best = None
try:
    best = study.best_trial.number
except ValueError:
    pass
if best != expected["best"]:
    fail(f"best trial {best}, expected {expected['best']}")
states = {}
for t in trials:
    states[t.state.name] = states.get(t.state.name, 0) + 1
print(json.dumps({"optuna": optuna.__version__, "trials": len(trials), "states": states, "best": best}))
