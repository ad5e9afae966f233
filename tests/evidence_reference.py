"""An independent numpy implementation of tradesim's evidence statistics (src/evidence/stats.rs), for
tests/evidence_stats.rs: the probabilistic and deflated Sharpe ratios and the minimum track record length
(Bailey and Lopez de Prado 2012, 2014) and PBO by CSCV (Bailey, Borwein, Lopez de Prado and Zhu 2015).

It shares no code with the Rust: moments with numpy, the normal CDF with math.erfc, its inverse with
statistics.NormalDist (Wichura's AS241), and every CSCV split's Sharpe ratios from the concatenated bars
themselves (not from block sums).

Usage: python evidence_reference.py IN.json OUT.json. Non-finite results are written as the strings
"inf", "-inf" and "nan".
"""

import itertools
import json
import math
import sys
from statistics import NormalDist

import numpy as np

EULER_GAMMA = 0.5772156649015329
NORMAL = NormalDist()


def number(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def sharpe(r):
    return float(np.mean(r) / np.std(r, ddof=1))


def moments(r):
    d = r - np.mean(r)
    m2 = np.mean(d**2)
    return float(np.mean(d**3) / m2**1.5), float(np.mean(d**4) / m2**2)


def expected_max(n_trials, var_sharpe):
    if n_trials == 1 or var_sharpe == 0.0:
        return 0.0
    a = NORMAL.inv_cdf(1.0 - 1.0 / n_trials)
    b = NORMAL.inv_cdf(1.0 - 1.0 / (n_trials * math.e))
    return math.sqrt(var_sharpe) * ((1.0 - EULER_GAMMA) * a + EULER_GAMMA * b)


def psr(sr, sr_star, n_obs, skew, kurt):
    z = (sr - sr_star) * math.sqrt(n_obs - 1) / math.sqrt(1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr**2)
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def min_trl(sr, sr_star, skew, kurt, confidence):
    if sr <= sr_star:
        return math.inf
    factor = 1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr**2
    return 1.0 + factor * (NORMAL.inv_cdf(confidence) / (sr - sr_star)) ** 2


def sharpe_case(case):
    r = np.asarray(case["returns"], dtype=np.float64)
    sr = sharpe(r)
    skew, kurt = moments(r)
    sr0 = expected_max(case["n_trials"], case["var_sharpe"])
    return {
        "sharpe": number(sr),
        "skew": number(skew),
        "kurt": number(kurt),
        "sr0": number(sr0),
        "psr0": number(psr(sr, 0.0, len(r), skew, kurt)),
        "dsr": number(psr(sr, sr0, len(r), skew, kurt)),
        "min_trl": number(min_trl(sr, sr0, skew, kurt, case["confidence"])),
    }


def split_sharpes(m):
    """Each row's Sharpe ratio (ddof = 1); 0 where a row has no variance."""
    sd = np.std(m, axis=1, ddof=1)
    mean = np.mean(m, axis=1)
    return np.where(sd > 0.0, mean / np.where(sd > 0.0, sd, 1.0), 0.0)


def cscv_case(case):
    n_trials, n_obs, s = case["n_trials"], case["n_obs"], case["blocks"]
    m = np.asarray(case["matrix"], dtype=np.float64).reshape(n_trials, n_obs)
    size = n_obs // s
    blocks = [np.arange(b * size, n_obs if b == s - 1 else (b + 1) * size) for b in range(s)]
    logits, is_sr, oos_sr = [], [], []
    for chosen in itertools.combinations(range(s), s // 2):
        rest = [b for b in range(s) if b not in chosen]
        ins = split_sharpes(m[:, np.concatenate([blocks[b] for b in chosen])])
        outs = split_sharpes(m[:, np.concatenate([blocks[b] for b in rest])])
        best = int(np.argmax(ins))  # the first maximum: ties go to the lowest trial
        sel = outs[best]
        rank = 1.0 + np.sum(outs < sel) + (np.sum(outs == sel) - 1) / 2.0
        w = rank / (n_trials + 1.0)
        logits.append(math.log(w / (1.0 - w)))
        is_sr.append(float(ins[best]))
        oos_sr.append(float(sel))
    logits, is_sr, oos_sr = np.array(logits), np.array(is_sr), np.array(oos_sr)
    slope = np.polyfit(is_sr, oos_sr, 1)[0]
    return {
        "pbo": number(np.mean(logits <= 0.0)),
        "logits": [number(x) for x in logits],
        "is_sharpe": [number(x) for x in is_sr],
        "oos_sharpe": [number(x) for x in oos_sr],
        "degradation_slope": number(slope),
        "prob_loss": number(np.mean(oos_sr < 0.0)),
    }


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    out = {
        "sharpe_cases": [sharpe_case(c) for c in cases["sharpe_cases"]],
        "cscv_cases": [cscv_case(c) for c in cases["cscv_cases"]],
    }
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
