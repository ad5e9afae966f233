"""Side-by-side benchmarks of the Python package (a benchmark, not a test; nothing here asserts timings).

    python python/bench/bench.py backtest   # 100 SMA columns x 300K bars: tradesim.backtest vs vectorbt
    python python/bench/bench.py env        # VectorEnv steps/s, random actions, E = 4096, vs SyncVectorEnv
    python python/bench/bench.py all [--device cpu|cuda|auto] [--json out.json]

vectorbt (1.2.0) is imported only by the backtest section and lives in a throwaway virtualenv
(scripts/bench-python.sh makes it), never a dependency of the package. The env baseline is written here: a
pure-Python trading env with the same rules as tradesim's frictionless-plus-costs step (fill at the next
open with the spread and commission, mark at the close, reward = log equity change, episode of fixed
length at a seeded start bar), stepped by gymnasium's own SyncVectorEnv.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import tradesim

FAST = list(range(5, 55, 5))  # 10 fast windows
SLOW = list(range(60, 260, 20))  # 10 slow windows: every pair has slow > fast, 100 columns


def best_of(runs: int, f):
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), times, out


def bench_backtest(device: str, bars: int) -> dict:
    # tradesim reads the DataFrame in every timed run (validation included), as vectorbt does.
    frame = price_frame(bars)
    res = {}
    seconds, all_times, run = best_of(3, lambda: tradesim.backtest(
        frame, fast=FAST, slow=SLOW, spread="0.0002", commission="0.0001", device=device))
    res["tradesim"] = {"seconds": seconds, "runs": all_times, "device": run.device, "columns": len(run.metrics),
                       "best_sharpe": float(run.metrics["sharpe"].max())}
    try:
        import vectorbt as vbt
    except ImportError:
        res["vectorbt"] = None
        return res
    close = frame["close"]

    def vectorbt_grid():
        fw = [f for f in FAST for s in SLOW]
        sw = [s for f in FAST for s in SLOW]
        fast = vbt.MA.run(close, window=fw).ma.to_numpy()
        slow = vbt.MA.run(close, window=sw).ma.to_numpy()
        above = fast > slow
        prev = np.vstack([above[:1], above[:-1]])
        entries = above & ~prev
        exits = ~above & prev
        pf = vbt.Portfolio.from_signals(
            close, entries, exits, fees=0.0001, slippage=0.0001, init_cash=100_000.0, freq="1h")
        return pf.sharpe_ratio(), pf.total_return(), pf.max_drawdown()

    cold, _, _ = best_of(1, vectorbt_grid)  # numba compiles on the first call
    seconds_v, times_v, (sharpe, _, _) = best_of(3, vectorbt_grid)
    res["vectorbt"] = {"seconds": seconds_v, "runs": times_v, "first_call_seconds": cold,
                       "version": vbt.__version__, "columns": int(np.size(sharpe)),
                       "best_sharpe": float(np.nanmax(np.asarray(sharpe)))}
    res["ratio"] = seconds_v / seconds
    return res


def price_frame(n: int):
    """A seeded random-walk OHLCV DataFrame of `n` hourly bars (time index), the frame a pandas user brings."""
    import pandas as pd

    rng = np.random.default_rng(1)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.005, n)))
    open_ = np.concatenate([[100.0], close[:-1]])
    wick = np.abs(rng.normal(0, 0.002, n)) * close
    return pd.DataFrame(
        {"open": open_, "high": np.maximum(open_, close) + wick, "low": np.minimum(open_, close) - wick,
         "close": close, "volume": np.full(n, 1_000.0)},
        index=pd.date_range("2020-01-01", periods=n, freq="h", tz="UTC"),
    )


class PyTradingEnv:
    """The baseline: one trading env in pure Python, the same step rules as tradesim's (long/flat/short on
    the whole equity, fill at the next open with spread and commission, mark at the close, reward = log
    equity change, fixed-length episodes at seeded start bars). Observation: the bar's features and
    (position, open-position return, equity / initial - 1)."""

    def __init__(self, features, opens, closes, episode_len, seed, spread=0.0002, commission=0.0001):
        import gymnasium as gym

        self.features, self.opens, self.closes = features, opens, closes
        self.episode_len, self.rng = episode_len, np.random.default_rng(seed)
        self.spread, self.commission = spread, commission
        d = features.shape[1] + 3
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.metadata = {}
        self.render_mode = None
        self.spec = None
        self.np_random = self.rng

    def _obs(self):
        eq = self.cash + self.units * self.closes[self.bar]
        ret = 0.0 if self.units == 0 else self.closes[self.bar] / self.entry - 1
        return np.concatenate([self.features[self.bar], [math.copysign(1, self.units) if self.units else 0.0, ret,
                                                         eq / self.capital - 1]]).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.bar = int(self.rng.integers(0, len(self.closes) - self.episode_len - 1))
        self.end = self.bar + self.episode_len
        self.capital = self.cash = 100_000.0
        self.units, self.entry = 0.0, 0.0
        return self._obs(), {}

    def step(self, action):
        price = self.opens[self.bar + 1]
        eq0 = self.cash + self.units * self.closes[self.bar]
        target = {0: 0, 1: 1, 2: -1}[int(action)]
        side = 0 if self.units == 0 else (1 if self.units > 0 else -1)
        if target != side:
            if self.units:
                fill = price * (1 - self.spread / 2 * side)
                self.cash += self.units * fill - abs(self.units) * fill * self.commission
                self.units = 0.0
            if target:
                fill = price * (1 + self.spread / 2 * target)
                units = self.cash / (fill * (1 + self.commission))
                self.cash -= units * fill * (1 + self.commission) * target
                self.units, self.entry = units * target, fill
                if target < 0:
                    self.cash += 2 * units * fill
        self.bar += 1
        eq1 = self.cash + self.units * self.closes[self.bar]
        reward = math.log(max(eq1, 1e-9) / max(eq0, 1e-9))
        truncated = self.bar >= self.end
        return self._obs(), reward, False, truncated, {}

    def close(self):
        pass


def bench_env(device: str, envs: int, steps: int, baseline_steps: int) -> dict:
    import gymnasium as gym

    bars = tradesim.synthetic(50_000)
    env = tradesim.VectorEnv(bars, envs=envs, episode_len=256, seed=1, device=device)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    acts = [rng.integers(0, 3, envs, dtype=np.uint8) for _ in range(16)]
    for i in range(5):
        env.step(acts[i % 16])
    t = time.perf_counter()
    for i in range(steps):
        env.step(acts[i % 16])
    ours = steps * envs / (time.perf_counter() - t)
    torch_rate = None
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and env.device == "cuda":
        # Device outputs as torch tensors (DLPack) and actions as CUDA tensors: nothing crosses to the host.
        tenv = tradesim.VectorEnv(bars, envs=envs, episode_len=256, seed=1, device=device, arrays="torch")
        tenv.reset(seed=1)
        tacts = [torch.from_numpy(a).to("cuda") for a in acts]
        for i in range(5):
            tenv.step(tacts[i % 16])
        torch.cuda.synchronize()
        t = time.perf_counter()
        for i in range(steps):
            tenv.step(tacts[i % 16])
        torch.cuda.synchronize()
        torch_rate = steps * envs / (time.perf_counter() - t)
    n = 50_000
    features = rng.normal(0, 1, (n, 51)).astype(np.float32)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.005, n)))
    opens = np.concatenate([[100.0], close[:-1]])
    sync = gym.vector.SyncVectorEnv(
        [lambda s=s: PyTradingEnv(features, opens, close, 256, s) for s in range(envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    sync.reset(seed=1)
    sync.step(acts[0])
    t = time.perf_counter()
    for i in range(baseline_steps):
        sync.step(acts[i % 16])
    theirs = baseline_steps * envs / (time.perf_counter() - t)
    return {"envs": envs, "device": env.device, "tradesim_steps_per_s": ours, "sync_vector_env_steps_per_s": theirs,
            "ratio": ours / theirs, "tradesim_steps": steps, "baseline_steps": baseline_steps,
            "tradesim_torch_cuda_steps_per_s": torch_rate,
            "torch_ratio": torch_rate / theirs if torch_rate else None}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["backtest", "env", "all"], default="all", nargs="?")
    p.add_argument("--device", default="auto")
    p.add_argument("--bars", type=int, default=300_000)
    p.add_argument("--envs", type=int, default=4096)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--baseline-steps", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args()
    out = {"tradesim": tradesim.__version__, "device_info": tradesim.device_info(a.device)}
    if a.what in ("backtest", "all"):
        out["backtest"] = r = bench_backtest(a.device, a.bars)
        v = r.get("vectorbt")
        print(f"backtest, 100 columns x {a.bars} bars: tradesim {r['tradesim']['seconds']:.3f} s "
              f"({r['tradesim']['device']})" + (f", vectorbt {v['version']} {v['seconds']:.3f} s (first call "
              f"{v['first_call_seconds']:.1f} s): {r['ratio']:.1f}x" if v else ", vectorbt not installed"))
    if a.what in ("env", "all"):
        out["env"] = r = bench_env(a.device, a.envs, a.steps, a.baseline_steps)
        print(f"env, E = {r['envs']}, random actions: tradesim.VectorEnv {r['tradesim_steps_per_s']:.3e} steps/s "
              f"({r['device']}), gymnasium SyncVectorEnv of the Python env {r['sync_vector_env_steps_per_s']:.3e} "
              f"steps/s: {r['ratio']:.0f}x")
        if r["tradesim_torch_cuda_steps_per_s"]:
            print(f"env, E = {r['envs']}, arrays='torch' with CUDA action tensors (no host copies): "
                  f"{r['tradesim_torch_cuda_steps_per_s']:.3e} steps/s: {r['torch_ratio']:.0f}x SyncVectorEnv")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
