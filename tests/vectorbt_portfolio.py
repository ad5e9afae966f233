"""vectorbt's Portfolio.from_orders on the inputs tests/vectorbt_conformance.rs writes, for the comparison
with tradesim's portfolio backtest (docs/CLI.md, "Portfolios against vectorbt").

Usage: python vectorbt_portfolio.py IN.json OUT.json

IN.json: symbols, open / carried close / tradable (times x symbols; null for no value), the account
(capital, spread, commission, whole_units, allow_short) and the portfolios' target weights (times x
symbols, null for no order), decided at the close of each time. The mapping of conventions:
- vectorbt's row i (1 <= i < T) is tradesim's fill at the open of time i: price = the open where the symbol
  has a bar (NaN elsewhere: no order), size = the weight decided at time i - 1, size_type targetpercent;
  row 0 places nothing; one more row T closes every position at the last close (size 0 at the last close
  where the symbol has a bar), tradesim's end-of-data close.
- val_price = the order's price where the symbol trades, its last close where it does not (NaN before its
  first bar): the account's value at the open, tradesim's valuation.
- slippage = spread / 2 (tradesim's half spread against the trader), fees = commission (on the filled
  notional), size_granularity = 1 for whole units, direction both (shorts) or longonly.
- cash_sharing with every column in one group, call_seq auto: sells before buys, by the value they move.
OUT.json per portfolio: the orders (row, column, signed size, price, fees) in execution order and the
group's value at every row.
"""

import json
import sys

import numpy as np
import pandas as pd
import vectorbt as vbt


def grid(rows):
    return np.array([[np.nan if x is None else float(x) for x in row] for row in rows], dtype=np.float64)


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    opens, carried = grid(data["open"]), grid(data["close"])
    tradable = np.array(data["tradable"], dtype=bool)
    n_times, n = opens.shape
    price = np.full((n_times + 1, n), np.nan)
    val_price = np.full((n_times + 1, n), np.nan)
    price[1:n_times] = np.where(tradable[1:], opens[1:], np.nan)
    val_price[1:n_times] = np.where(tradable[1:], opens[1:], carried[:-1])
    price[n_times] = np.where(tradable[-1], carried[-1], np.nan)
    val_price[n_times] = carried[-1]
    # Valuation closes: the carried close, and before a symbol's first bar its first close (it holds nothing
    # there, so any finite price values it at 0).
    close = pd.DataFrame(np.vstack([carried, carried[-1:]])).bfill().to_numpy()
    index = pd.date_range("2000-01-01", periods=n_times + 1, freq="D")
    frame = lambda a: pd.DataFrame(a, index=index, columns=data["symbols"])
    account = data["account"]
    out = {}
    for name, weights in data["weights"].items():
        w = grid(weights)
        size = np.full((n_times + 1, n), np.nan)
        size[1:n_times] = np.where(tradable[1:], w[:-1], np.nan)
        size[n_times] = np.where(tradable[-1], 0.0, np.nan)
        pf = vbt.Portfolio.from_orders(
            close=frame(close),
            size=frame(size),
            size_type="targetpercent",
            direction="both" if account["allow_short"] else "longonly",
            price=frame(price),
            val_price=frame(val_price),
            fees=account["commission"],
            slippage=account["spread"] / 2.0,
            size_granularity=1.0 if account["whole_units"] else np.nan,
            init_cash=account["capital"],
            cash_sharing=True,
            group_by=True,
            call_seq="auto",
            freq="1D",
        )
        records = pf.orders.values
        orders = [
            [int(r["idx"]), int(r["col"]), float(r["size"]) * (1.0 if r["side"] == 0 else -1.0), float(r["price"]), float(r["fees"])]
            for r in records
        ]
        out[name] = {"orders": orders, "value": [float(v) for v in pf.value().to_numpy()]}
    with open(dst, "w") as f:
        json.dump({"vectorbt": vbt.__version__, "portfolios": out}, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
