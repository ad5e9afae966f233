"""vectorbt's side of `tradesim bench backtest --vectorbt PYTHON`: one SMA crossover grid, end to end.

Usage: python vbt_grid.py FILE.csv --fast 2,3,... --slow 12,13,... [--runs 3] [--chunk 100]

Each run reads the CSV with pandas, computes the moving averages of every (fast, slow) pair of the grid,
the crossover signals (long on a cross above, flat on a cross below), simulates the portfolio
(`Portfolio.from_signals`, fees 0.0001, slippage 0.0001 = half of a 0.0002 spread, 100,000 cash) and its
metrics (total return, Sharpe ratio, max drawdown, win rate). The columns go through vectorbt `--chunk` at a
time after one `read_csv` (100 columns x 300K bars hold ~9 GB in vectorbt's arrays; all 1,000 at once were
killed for memory on a 24 GB machine), each chunk freed before the next.
A first call on 2,000 rows compiles numba's kernels (reported apart); the figure is the best of `--runs`
runs. Prints one JSON object.
"""

import argparse
import gc
import json
import time

import numpy as np
import pandas as pd
import vectorbt as vbt


def run(path: str, pairs: list, chunk: int, nrows=None):
    frame = pd.read_csv(path, index_col=0, parse_dates=True, nrows=nrows)
    close = frame["close"]
    out = ([], [], [], [])
    for at in range(0, len(pairs), chunk):
        part = pairs[at:at + chunk]
        fast_ma = vbt.MA.run(close, window=[f for f, _ in part], short_name="fast")
        slow_ma = vbt.MA.run(close, window=[s for _, s in part], short_name="slow")
        entries = fast_ma.ma_crossed_above(slow_ma)
        exits = fast_ma.ma_crossed_below(slow_ma)
        pf = vbt.Portfolio.from_signals(close, entries, exits, fees=0.0001, slippage=0.0001, init_cash=100_000.0,
                                        freq="1h")
        for acc, values in zip(out, (pf.total_return(), pf.sharpe_ratio(), pf.max_drawdown(), pf.trades.win_rate())):
            acc.extend(np.atleast_1d(np.asarray(values)).tolist())
        # Free the chunk before the next one (vectorbt's arrays of a chunk hold ~9 GB at 100 x 300K).
        del fast_ma, slow_ma, entries, exits, pf
        if len(pairs) > chunk:
            gc.collect()
    return out, len(frame)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--fast", required=True)
    ap.add_argument("--slow", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=100)
    args = ap.parse_args()
    fast = [int(x) for x in args.fast.split(",")]
    slow = [int(x) for x in args.slow.split(",")]
    pairs = [(f, s) for f in fast for s in slow]
    # The first call compiles numba's kernels: on the first 2,000 rows and the first chunk, timed apart.
    t = time.perf_counter()
    run(args.file, pairs[:args.chunk], max(args.chunk, 1), nrows=2_000)
    times = [time.perf_counter() - t]
    for _ in range(max(args.runs, 1)):
        t = time.perf_counter()
        (_, sharpe, _, _), rows = run(args.file, pairs, max(args.chunk, 1))
        times.append(time.perf_counter() - t)
    print(json.dumps({
        "seconds": min(times[1:]),
        "first_call_seconds": times[0],
        "runs": times[1:],
        "columns": len(sharpe),
        "chunk": args.chunk,
        "rows": rows,
        "best_sharpe": float(np.nanmax(np.asarray(sharpe, dtype=float))),
        "version": vbt.__version__,
    }))


if __name__ == "__main__":
    main()
