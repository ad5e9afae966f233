"""Creates a study with the real optuna (direction maximize) and runs N trials suggesting two of tradesim's
default parameters with tradesim's distributions. Usage: python optuna_create.py STORAGE STUDY N."""
import sys

import optuna

storage, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(study_name=name, storage=storage, direction="maximize",
                            sampler=optuna.samplers.RandomSampler(seed=2))
study.optimize(lambda t: t.suggest_float("lr", 1e-4, 3e-3, log=True) * 100 + t.suggest_float("gamma", 0.8, 0.99),
               n_trials=n)
print(len(study.trials))
