"""One worker of `scripts/scale-postgres.sh --optuna`: the real optuna's `study.optimize` on a shared study
with a trivial objective (the peer of tradesim's claim loop, `examples/claims.rs`). Prints each trial as
`END SECONDS NUMBER`: when the objective was entered (Unix seconds), the seconds since the previous
objective returned in this process (Optuna's `tell` of that trial and `ask` of this one), and the trial's
number. The storage URL comes from the environment variable TRADESIM_STORAGE (its password stays off the
command line). Usage: scale_optuna.py STUDY_NAME TRIALS SEED
"""
import os
import sys
import time

import optuna
from optuna.study import MaxTrialsCallback

optuna.logging.set_verbosity(optuna.logging.WARNING)
name, trials, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
storage = os.environ["TRADESIM_STORAGE"]
if storage.startswith("postgresql://"):
    storage = "postgresql+psycopg2://" + storage[len("postgresql://"):]
# Workers started at once race to create Optuna's schema on a fresh database (one wins, the others fail
# with a duplicate type or table); a worker that lost tries again, as a user's launcher would.
for attempt in range(20):
    try:
        study = optuna.create_study(
            storage=storage,
            study_name=name,
            direction="maximize",
            load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=seed),
        )
        break
    except Exception:  # noqa: BLE001 - sqlalchemy's IntegrityError or ProgrammingError, by server and version
        if attempt == 19:
            raise
        time.sleep(0.25 * (attempt + 1))
last = [time.perf_counter()]
out = sys.stdout


def objective(trial):
    now = time.perf_counter()
    lr = trial.suggest_float("lr", 1e-5, 1e-1, log=True)
    gamma = trial.suggest_float("gamma", 0.9, 0.999)
    hidden = trial.suggest_categorical("hidden", [16, 32, 64, 128])
    out.write(f"{time.time():.6f} {now - last[0]:.6f} {trial.number}\n")
    value = -((lr - 1e-3) ** 2) - (gamma - 0.97) ** 2 - (hidden != 64)
    last[0] = time.perf_counter()
    return value


study.optimize(objective, callbacks=[MaxTrialsCallback(trials, states=None)])
out.flush()
