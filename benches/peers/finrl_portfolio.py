"""The FinRL peer of `tradesim bench portfolio` (W11): FinRL's own `PortfolioOptimizationEnv`, unmodified,
stepping the bench's synthetic universe on one CPU core, one env at a time (as FinRL runs it).

The env's module is loaded from the installed FinRL package's source file
(finrl/meta/env_portfolio_optimization/env_portfolio_optimization.py) without running `finrl/__init__.py`,
which imports FinRL's training stack (agents, data processors) that the env does not use. The module
imports `stable_baselines3.common.vec_env.DummyVecEnv` at the top for its `get_sb_env` helper only; when
stable-baselines3 (and with it PyTorch) is not installed, a placeholder module stands in for that import
(calling `get_sb_env` would fail; nothing here calls it). Every other line of the env is FinRL's.

Actions: the bench's codes of envs 0, 1, ... (`--actions`, u8, episode-major, then step, then symbol)
mapped to FinRL's weights (cash first): a long symbol gets an equal share, flat and short none (the env is
long-only), all cash when none is long. FinRL's "trf" commission model at `--commission`. Each episode is
a reset and `--steps` steps; the time counts the steps only (reset included in the setup figure).

Prints one JSON line: env_steps, seconds (wall), cpu_s (the process's CPU time of the steps), setup_s, symbols, finrl (version).
"""

import argparse
import importlib.util
import json
import os
import sys
import time
import types


def load_env_class():
    spec = importlib.util.find_spec("finrl")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("FinRL is not installed in this Python (pip install finrl)")
    root = list(spec.submodule_search_locations)[0]
    path = os.path.join(root, "meta", "env_portfolio_optimization", "env_portfolio_optimization.py")
    try:
        import stable_baselines3.common.vec_env  # noqa: F401
    except ImportError:
        stub = types.ModuleType("stable_baselines3.common.vec_env")

        class DummyVecEnv:  # noqa: D401 - a placeholder; get_sb_env is never called here
            def __init__(self, *args, **kwargs):
                raise RuntimeError("stable-baselines3 is not installed (placeholder for FinRL's import)")

        stub.DummyVecEnv = DummyVecEnv
        for name in ["stable_baselines3", "stable_baselines3.common"]:
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["stable_baselines3.common.vec_env"] = stub
    module_spec = importlib.util.spec_from_file_location("finrl_env_portfolio_optimization", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    try:
        from importlib.metadata import version

        finrl_version = version("finrl")
    except Exception:  # noqa: BLE001
        finrl_version = "?"
    return module.PortfolioOptimizationEnv, finrl_version


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--actions", required=True)
    ap.add_argument("--symbols", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--episodes", type=int, default=1)
    ap.add_argument("--commission", type=float, default=0.0)
    ap.add_argument("--workdir", default=".")
    args = ap.parse_args()

    import numpy as np
    import pandas as pd

    env_class, finrl_version = load_env_class()
    n, steps = args.symbols, args.steps
    codes = np.fromfile(args.actions, dtype=np.uint8)
    if codes.size != args.episodes * steps * n:
        raise SystemExit(f"{codes.size} action codes, expected {args.episodes} x {steps} x {n}")
    codes = codes.reshape(args.episodes, steps, n)
    longs = (codes == 1).astype(np.float32)
    count = longs.sum(axis=2, keepdims=True)
    weights = np.concatenate([(count == 0).astype(np.float32), longs / np.maximum(count, 1)], axis=2)

    started = time.perf_counter()
    df = pd.read_csv(args.csv)
    env = env_class(
        df,
        initial_amount=100_000.0,
        comission_fee_model="trf",
        comission_fee_pct=args.commission,
        features=["close", "high", "low"],
        time_format="%Y-%m-%d %H:%M:%S",
        cwd=args.workdir,
    )
    if env.episode_length - 1 <= steps:
        raise SystemExit(f"{env.episode_length} times: an episode of {steps} steps would reach FinRL's terminal step")
    setup = time.perf_counter() - started
    seconds, cpu, made = 0.0, 0.0, 0
    for k in range(args.episodes):
        t0 = time.perf_counter()
        env.reset()
        setup += time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(steps):
            _, _, terminal, _ = env.step(weights[k, i])
            assert not terminal
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
        made += steps
    print(
        json.dumps(
            {
                "env_steps": made,
                "seconds": seconds,
                "cpu_s": cpu,
                "setup_s": setup,
                "symbols": n,
                "finrl": finrl_version,
                "final_value": float(env._portfolio_value),
            }
        )
    )


if __name__ == "__main__":
    main()
