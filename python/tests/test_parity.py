"""The short version of the parity study (issue 43 item 1, docs/PARITY.md): tradesim's DQN (``tradesim
train``) and the CleanRL-faithful PyTorch DQN (``python/parity/cleanrl/dqn.py``) on the same envs, the same
12,288 env steps (16 envs x 128 steps x 6 epochs, 5 seeds) and the same network sizes, both scored by the trainer's
greedy validation walk; and the check that the walk the references are scored with gives tradesim's own
networks the Sharpe ``tradesim train`` reports.

Environment: TRADESIM_BIN (the CLI of this checkout; default target/debug/tradesim); TRADESIM_TORCH_PYTHON (a
python with torch, gymnasium and this checkout's wheel: scripts/test.sh sets it from scripts/setup-parity.sh;
unset, the test runs scripts/setup-parity.sh itself). Where PyTorch cannot be set up the PyTorch test fails,
unless TRADESIM_SKIP_PARITY=1 (then it skips).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tradesim

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("TRADESIM_BIN", str(ROOT / "target" / "debug" / "tradesim"))
SKIP = os.environ.get("TRADESIM_SKIP_PARITY") == "1"

# A planted pattern strong enough for a few thousand env steps: AR(1) returns with phi 0.8.
SEEDS = (1, 2, 3, 4, 5)
EPOCHS, ENVS = 6, 16


@pytest.fixture(scope="module")
def ar_data(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("parity") / "ar08.csv"
    subprocess.run([BIN, "data", "synth", "--kind", "autocorrelated", "--phi", "0.8", "--bars", "10000", "--seed",
                    "1", "--out", str(path)], check=True, capture_output=True)
    return str(path)


@pytest.fixture(scope="module")
def torch_python() -> str:
    if SKIP:
        pytest.skip("TRADESIM_SKIP_PARITY=1: the PyTorch reference is not run")
    python = os.environ.get("TRADESIM_TORCH_PYTHON")
    if python:
        return python
    done = subprocess.run(["bash", "scripts/setup-parity.sh"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        pytest.fail("PyTorch for the parity test could not be set up (bash scripts/setup-parity.sh; set "
                    f"TRADESIM_SKIP_PARITY=1 to skip the test):\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def train(data: str, algo: str, seed: int, out: Path) -> list[float]:
    """``tradesim train``'s greedy validation Sharpe per epoch (a policy that never traded: 0)."""
    subprocess.run([BIN, "train", "--data", data, "--algo", algo, "--trials", "1", "--epochs", str(EPOCHS), "--envs",
                    str(ENVS), "--seed", str(seed), "--out", str(out), "--device", "cpu"], check=True,
                   capture_output=True)
    epochs = json.loads((out / "report.json").read_text())["epochs"]
    return [e["valid_sharpe"][0] or 0.0 for e in epochs]


def safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name != "__metadata__":
            start, end = t["data_offsets"]
            out[name] = np.frombuffer(raw[8 + n + start:8 + n + end], dtype=np.float32).reshape(t["shape"])
    return out


def test_the_walk_scores_tradesims_own_network_as_tradesim_train_does(ar_data, tmp_path):
    # The references are scored by tradesim.greedy_walk; tradesim's saved DQN, walked by it, gets exactly the
    # validation Sharpe that tradesim train reported for its last epoch.
    train(ar_data, "dqn", 3, tmp_path)
    w = safetensors(tmp_path / "trial-0.safetensors")

    def q(obs: np.ndarray) -> np.ndarray:
        h = np.maximum(w["l1.weight"] @ obs + w["l1.bias"], 0)
        h = np.maximum(w["l2.weight"] @ h + w["l2.bias"], 0)
        return w["l3.weight"] @ h + w["l3.bias"]

    metrics, actions = tradesim.greedy_walk(lambda o: int(np.argmax(q(o))), ar_data, split="valid")
    reported = json.loads((tmp_path / "report.json").read_text())["epochs"][-1]["valid_sharpe"][0]
    assert metrics["sharpe"] == pytest.approx(reported, rel=1e-12)
    assert actions.dtype == np.uint8 and metrics["trades"] >= 1


def test_both_libraries_improve_over_their_first_evaluation(ar_data, torch_python, tmp_path):
    tradesim_runs, reference_runs = [], []
    for seed in SEEDS:
        tradesim_runs.append(train(ar_data, "dqn", seed, tmp_path / f"tradesim-{seed}"))
        out = tmp_path / f"cleanrl-{seed}.json"
        subprocess.run([torch_python, str(ROOT / "python/parity/cleanrl/dqn.py"), "--data", ar_data, "--seed",
                        str(seed), "--epochs", str(EPOCHS), "--num-envs", str(ENVS), "--out", str(out)], check=True,
                       capture_output=True)
        curve = json.loads(out.read_text())["curve"]
        assert [c["env_steps"] for c in curve] == [ENVS * 128 * (k + 1) for k in range(EPOCHS)]
        reference_runs.append([0.0 if np.isnan(c["sharpe"]) else c["sharpe"] for c in curve])
    for name, runs in (("tradesim", tradesim_runs), ("CleanRL reference", reference_runs)):
        first = float(np.mean([r[0] for r in runs]))
        last = float(np.mean([r[-1] for r in runs]))
        assert last > first + 1.0, f"{name}: mean greedy validation Sharpe {first:.2f} after the first epoch, " \
                                   f"{last:.2f} after the last ({runs})"
