"""An Optuna worker beside tradesim's on one study: runs N trials of its own (suggesting two of the study's
parameters with tradesim's distributions), then exits. Usage: python optuna_worker.py STORAGE STUDY N."""
import sys
import time

import optuna

storage, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if storage.startswith("postgresql://"):
    storage = "postgresql+psycopg2://" + storage[len("postgresql://"):]
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler(seed=1))


def objective(trial):
    lr = trial.suggest_float("lr", 1e-4, 3e-3, log=True)
    gamma = trial.suggest_float("gamma", 0.8, 0.99)
    time.sleep(0.3)
    return -abs(lr * 1000 - 1) + gamma


study.optimize(objective, n_trials=n)
print(len(study.trials))
