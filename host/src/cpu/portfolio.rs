//! The CPU portfolio backtest: a thread per column (rayon) walking its range with
//! [`portfolio_column`], the fills kept in column order.

use gpu_kernels::TrialParams;
use gpu_kernels::account::backtest::{PortfolioArgs, portfolio_column};
use gpu_kernels::account::{AccountFill, Orders};
use gpu_kernels::backtest::{Metrics, WRITE_EQUITY, WRITE_LEDGER};
use rayon::prelude::*;

use crate::UniverseMarket;
use crate::types::{PortfolioResult, offsets_of};

/// Backtests every column ([`crate::portfolio::backtest_portfolios`] checked the arguments).
pub(crate) fn backtest_portfolios(
    market: &UniverseMarket,
    params: &[TrialParams],
    weights: &[f64],
    args: &PortfolioArgs,
) -> PortfolioResult {
    let (n, width) = (args.n_symbols as usize, (args.end - args.start) as usize + 1);
    let (want_ledger, want_equity) = (args.write & WRITE_LEDGER != 0, args.write & WRITE_EQUITY != 0);
    let per_column: Vec<(Metrics, u32, Vec<AccountFill>, Vec<f64>)> = (0..args.n_columns as usize)
        .into_par_iter()
        .map(|col| {
            let (mut units, mut value, mut order_units, mut symbol) =
                (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0; n]);
            let mut orders = Orders { value: &mut value, units: &mut order_units, symbol: &mut symbol };
            let mut fills = Vec::new();
            let mut equity = if want_equity { vec![0.0; width] } else { Vec::new() };
            let (m, count) = portfolio_column(
                col,
                args,
                params,
                market.bars(),
                market.tradable(),
                weights,
                &mut units,
                &mut orders,
                |i, v| {
                    if want_equity {
                        equity[i] = v;
                    }
                },
                |f| {
                    if want_ledger {
                        fills.push(f);
                    }
                },
            );
            (m, count, fills, equity)
        })
        .collect();
    let counts: Vec<u32> = per_column.iter().map(|c| c.1).collect();
    let mut result = PortfolioResult { offsets: offsets_of(&counts), ..PortfolioResult::default() };
    for (m, _, fills, equity) in per_column {
        result.metrics.push(m);
        result.fills.extend(fills);
        result.equity.extend(equity);
    }
    result
}
