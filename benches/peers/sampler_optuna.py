"""The peer of `tradesim bench sampler`: the real optuna's default TPESampler on the same functions.

Run with the throwaway venv of `bash scripts/setup-optuna.sh` (never a project dependency):

    $(bash scripts/setup-optuna.sh) benches/peers/sampler_optuna.py --trials 60 --batch 1 5 --seeds 40

A batch of K is Optuna's: `ask` K times (the earlier asks are RUNNING, so the constant liar sees them),
then `tell` the K values. Every function is maximized; the best value of each seed is averaged
and printed with its standard error, one JSON object per line. The functions match
`src/bench/sampler.rs` term for term.
"""

import argparse
import json
import math
import statistics
import sys

import numpy as np
import optuna

HARTMANN_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
HARTMANN_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)
HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann6(trial):
    x = np.array([trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(6)])
    return float(np.sum(HARTMANN_ALPHA * np.exp(-np.sum(HARTMANN_A * (x - HARTMANN_P) ** 2, axis=1))))


def branin(trial):
    x1 = trial.suggest_float("x1", -5.0, 10.0)
    x2 = trial.suggest_float("x2", 0.0, 15.0)
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return -((x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10)


def mixed(trial):
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    batch = trial.suggest_categorical("batch", [32, 64, 128, 256])
    gamma = trial.suggest_float("gamma", 0.8, 0.999)
    hidden = trial.suggest_categorical("hidden", [32, 64, 128, 256])
    target_every = trial.suggest_int("target_every", 10, 1000, log=True)
    ppo_epochs = trial.suggest_int("ppo_epochs", 1, 10)
    w_cost = trial.suggest_float("w_cost", 0.0, 2.0)
    tp = trial.suggest_float("take_profit_mult", 1.0, 5.0)
    sl = trial.suggest_float("stop_loss_mult", 1.0, 5.0)
    hold = trial.suggest_categorical("max_hold_bars", [0, 24, 96])
    return -(
        (math.log10(lr) - math.log10(1e-3 * batch / 64)) ** 2
        + ((gamma - 0.97) / 0.05) ** 2
        + 0.5 * abs(math.log2(hidden / 128))
        + (math.log10(target_every) - 2) ** 2
        + ((ppo_epochs - 4) / 3) ** 2
        + (w_cost - 0.5) ** 2
        + ((tp - 2 * sl) / 2) ** 2
        + ((sl - 1.5) / 2) ** 2
        + (0.0 if hold == 24 else 0.5)
    )


FUNCTIONS = {"hartmann6": hartmann6, "branin": branin, "mixed10": mixed}


def best_of(function, trials, batch, seed):
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
    done = 0
    while done < trials:
        # Optuna samples a parameter when the objective suggests it, so each asked trial is evaluated at once
        # (its suggestions then see the batch's earlier trials as RUNNING); all are told after the batch.
        asked = []
        for _ in range(min(batch, trials - done)):
            t = study.ask()
            asked.append((t, function(t)))
        for t, value in asked:
            study.tell(t, value)
        done += len(asked)
    return study.best_value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, nargs="+", default=[60, 200])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 5, 64])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--functions", nargs="+", default=list(FUNCTIONS))
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for name in args.functions:
        for trials in args.trials:
            for batch in args.batch:
                bests = [best_of(FUNCTIONS[name], trials, batch, seed) for seed in range(args.seeds)]
                se = statistics.stdev(bests) / math.sqrt(len(bests)) if len(bests) > 1 else 0.0
                row = {"function": name, "trials": trials, "batch": batch, "seeds": len(bests),
                       "sampler": f"optuna {optuna.__version__} TPE", "mean_best": statistics.fmean(bests),
                       "stderr": se}
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
