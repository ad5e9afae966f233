"""Finds a tradesim study's artifacts with the real optuna and optuna-dashboard's API.

Usage: python optuna_artifacts.py STORAGE_URL STUDY_NAME STORE_DIR EXPECTED.json
EXPECTED.json: {"trial number": {"filename": path of a file with the expected bytes}} for every finished
trial.
Checks, for every trial: optuna.artifacts.get_all_artifact_meta lists exactly the expected files,
download_artifact returns their bytes; optuna-dashboard's study API lists them per trial and its artifact
route serves the same bytes. Exits non-zero with a message on the first difference; prints a summary.
"""
import hashlib
import json
import os
import sys
import tempfile
from wsgiref.util import setup_testing_defaults

import optuna
from optuna.artifacts import FileSystemArtifactStore, download_artifact, get_all_artifact_meta
import optuna_dashboard


def fail(msg):
    print(f"artifact check: {msg}", file=sys.stderr)
    sys.exit(1)


def sha(data):
    return hashlib.sha256(data).hexdigest()


storage, name, store_dir, expected_path = sys.argv[1:5]
with open(expected_path) as f:
    expected = {}
    for k, files in json.load(f).items():
        expected[int(k)] = {}
        for filename, path in files.items():
            with open(path, "rb") as g:
                expected[int(k)][filename] = sha(g.read())
store = FileSystemArtifactStore(store_dir)
study = optuna.load_study(study_name=name, storage=storage)
trials = {t.number: t for t in study.get_trials(deepcopy=False)}
ids = {}
with tempfile.TemporaryDirectory() as tmp:
    for number, files in expected.items():
        metas = get_all_artifact_meta(trials[number], storage=study._storage)
        got = sorted(m.filename for m in metas)
        if got != sorted(files):
            fail(f"trial {number}: artifacts {got}, expected {sorted(files)}")
        for m in metas:
            path = os.path.join(tmp, m.artifact_id)
            download_artifact(artifact_store=store, artifact_id=m.artifact_id, file_path=path)
            with open(path, "rb") as f:
                if sha(f.read()) != files[m.filename]:
                    fail(f"trial {number}: {m.filename} downloaded differs")
            ids[(number, m.filename)] = m.artifact_id

# optuna-dashboard, called as its WSGI app (no server): the study's trials list their artifacts, and the
# artifact route serves each file.
app = optuna_dashboard.wsgi(storage, artifact_store=store)


def get(path):
    env = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "QUERY_STRING": ""}
    if "?" in path:
        env["PATH_INFO"], env["QUERY_STRING"] = path.split("?", 1)
    setup_testing_defaults(env)
    status = []
    body = b"".join(app(env, lambda s, h, *a: status.append(s)))
    if not status or not status[0].startswith("200"):
        fail(f"GET {path}: {status} {body[:200]!r}")
    return body


study_id = study._study_id
detail = json.loads(get(f"/api/studies/{study_id}?after=0"))
served = 0
for t in detail["trials"]:
    number = t["number"]
    if number not in expected:
        continue
    listed = sorted(a["filename"] for a in t["artifacts"])
    if listed != sorted(expected[number]):
        fail(f"dashboard: trial {number} lists {listed}")
    for a in t["artifacts"]:
        body = get(f"/artifacts/{study_id}/{t['trial_id']}/{a['artifact_id']}")
        if sha(body) != expected[number][a["filename"]]:
            fail(f"dashboard: trial {number}: {a['filename']} served differs")
        served += 1
if served != sum(len(v) for v in expected.values()):
    fail(f"dashboard served {served} artifacts")
print(f"artifacts ok: {len(expected)} trials, {served} files via optuna and optuna-dashboard")
