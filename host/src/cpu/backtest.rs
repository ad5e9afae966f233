//! The CPU backtest: a thread per column (rayon) walking its range with [`run_column`], the ledger kept in
//! column order.

use gpu_kernels::TrialParams;
use gpu_kernels::backtest::{BacktestArgs, Metrics, SmaCross, Trade, WRITE_EQUITY, WRITE_LEDGER, run_column};
use rayon::prelude::*;

use crate::MarketData;
use crate::types::{BacktestResult, Signals, offsets_of};

/// Backtests every column of `signals` ([`crate::backtest::backtest`] checked the arguments).
pub(crate) fn backtest(
    market: &MarketData,
    params: &[TrialParams],
    signals: &Signals<'_>,
    prefix: &[i64],
    args: &BacktestArgs,
) -> BacktestResult {
    let (targets, sma): (&[u8], &[SmaCross]) = match signals {
        Signals::Targets { targets, .. } => (targets, &[]),
        Signals::SmaCross(s) => (&[], s),
    };
    let width = (args.end - args.start) as usize + 1;
    let (want_ledger, want_equity) = (args.write & WRITE_LEDGER != 0, args.write & WRITE_EQUITY != 0);
    let per_column: Vec<(Metrics, u32, Vec<Trade>, Vec<f64>)> = (0..args.n_columns as usize)
        .into_par_iter()
        .map(|col| {
            let mut trades = Vec::new();
            let mut equity = if want_equity { vec![0.0; width] } else { Vec::new() };
            let (m, count) = run_column(
                col,
                args,
                params,
                targets,
                sma,
                prefix,
                market.bars(),
                |i, v| {
                    if want_equity {
                        equity[i] = v;
                    }
                },
                |t| {
                    if want_ledger {
                        trades.push(t);
                    }
                },
            );
            (m, count, trades, equity)
        })
        .collect();
    let counts: Vec<u32> = per_column.iter().map(|c| c.1).collect();
    let mut result = BacktestResult { offsets: offsets_of(&counts), ..BacktestResult::default() };
    for (m, _, trades, equity) in per_column {
        result.metrics.push(m);
        result.trades.extend(trades);
        result.equity.extend(equity);
    }
    result
}
