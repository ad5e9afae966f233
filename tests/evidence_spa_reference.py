"""Hansen's SPA and Romano and Wolf's StepM by Kevin Sheppard's `arch` (arch.bootstrap.SPA, StepM), for
tests/evidence_spa.rs: the same data as tradesim's `evidence::spa`, arch's own stationary bootstrap (its
random numbers differ from tradesim's, so p-values agree within Monte-Carlo error, not bit for bit).

Input JSON: a list of cases {"benchmark": [T returns], "models": [[T returns], ...], "block": B, "reps": R,
"seed": S, "size": A}. Per case, output: the raw statistic's p-values (arch's compute), the studentized
statistic's (every differential divided by the standard error of its mean from arch's own variance before
arch runs: Hansen's statistic), StepM's superior models (indices) for both, and arch's variances of the
differentials.

Usage: python evidence_spa_reference.py IN.json OUT.json
"""

import json
import sys

import numpy as np
from arch.bootstrap import SPA, StepM


def run(benchmark_losses, model_losses, c):
    spa = SPA(benchmark_losses, model_losses, block_size=c["block"], reps=c["reps"], seed=c["seed"])
    spa.compute()
    p = spa.pvalues
    stepm = StepM(benchmark_losses, model_losses, size=c["size"], block_size=c["block"], reps=c["reps"], seed=c["seed"])
    stepm.compute()
    return {
        "lower": float(p["lower"]),
        "consistent": float(p["consistent"]),
        "upper": float(p["upper"]),
        "superior": sorted(int(i) for i in stepm.superior_models),
        "variance": [float(v) for v in spa._loss_diff_var],
    }


def main():
    cases = json.load(open(sys.argv[1]))
    out = []
    for c in cases:
        b = np.asarray(c["benchmark"], dtype=float)
        m = np.asarray(c["models"], dtype=float).T  # T x k
        # Losses are negative returns: arch's differential benchmark_loss - model_loss = r_model - r_benchmark.
        raw = run(-b, -m, c)
        t = b.shape[0]
        se = np.sqrt(np.asarray(raw["variance"]) / t)
        diff = (m - b[:, None]) / se[None, :]
        student = run(np.zeros(t), -diff, c)
        out.append({"raw": raw, "studentized": student})
    json.dump(out, open(sys.argv[2], "w"))


main()
