"""How sure tradesim's trained PPO policies are: for each ``tradesim train --algo ppo`` run of the parity study
(runs/parity/tradesim/*-ppo-*/trial-0.safetensors), the mean entropy of the policy over the validation walk
and the mean gap between the two largest action probabilities (a uniform policy: entropy ln 3 = 1.099 nats,
gap 0). The CleanRL reference's entropies are in its curves (runs/parity/cleanrl/*.json, ``entropy``).

    python python/parity/ppo_entropy.py [runs/parity]

Assumes tradesim's PPO network (a shared trunk of two ReLU or Tanh layers, ``l3`` = 3 logits and the value) and
takes the activation whose greedy walk reproduces the validation Sharpe tradesim reported.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np

import tradesim

ROOT = Path(__file__).resolve().parents[2]


def safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]], dtype=np.float32)
            .reshape(t["shape"]) for k, t in header.items() if k != "__metadata__"}


def tradesim_ppo_entropy(run: Path) -> dict | None:
    """The mean policy entropy and top-2 probability gap of a ``tradesim train --algo ppo --trials 1 --out RUN``
    network over its validation walk, with the activation that reproduces its reported Sharpe (None: neither)."""
    w = safetensors(run / "trial-0.safetensors")
    report = json.loads((run / "report.json").read_text())
    reported = report["epochs"][-1]["valid_sharpe"][0]
    for name, act in (("relu", lambda x: np.maximum(x, 0)), ("tanh", np.tanh)):
        stats: list[tuple[float, float]] = []

        def policy(obs: np.ndarray) -> int:
            h = act(w["l1.weight"] @ obs + w["l1.bias"])
            h = act(w["l2.weight"] @ h + w["l2.bias"])
            logits = (w["l3.weight"] @ h + w["l3.bias"])[:3].astype(np.float64)
            p = np.exp(logits - logits.max())
            p /= p.sum()
            top = np.sort(p)
            stats.append((float(-(p * np.log(p)).sum()), float(top[-1] - top[-2])))
            return int(np.argmax(logits))

        metrics, _ = tradesim.greedy_walk(policy, report["data"], split="valid")
        if reported is not None and abs(metrics["sharpe"] - reported) <= 1e-9 * max(1.0, abs(reported)):
            return {"activation": name, "entropy": float(np.mean([x[0] for x in stats])),
                    "gap": float(np.mean([x[1] for x in stats])), "sharpe": metrics["sharpe"]}
    return None


def main() -> None:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "runs/parity"
    for run in sorted((work / "tradesim").glob("*-ppo-*")):
        r = tradesim_ppo_entropy(run)
        if r is None:
            print(f"{run.name}: no network assumed here reproduces tradesim's validation Sharpe")
        else:
            print(f"{run.name}: {r['activation']} trunk; mean entropy {r['entropy']:.4f} nats (uniform 1.0986), "
                  f"mean top-2 probability gap {r['gap']:.4f}; valid Sharpe {r['sharpe']:.3f}")

if __name__ == "__main__":
    main()
