//! A trial's test split replayed from its stored actions: metrics, equity and the trade ledger, and the
//! ledger as CSV (the report's `best-trades.csv`, an artifact's `trial-N-trades.csv`).

use crate::{Backend, BacktestSpec, Error, MarketData, Signals, Trade, TrialParams, backtest};

/// A trial's test actions (`targets`) replayed by the backtest engine on the test split with its
/// environment `params`: metrics and ledger, and the equity curve when `equity` (on the CPU for a split
/// below [`crate::Backend::for_replay`]'s size).
pub(crate) fn replay(
    backend: &Backend,
    test: &MarketData,
    params: TrialParams,
    targets: &[u8],
    bars_per_year: f64,
    equity: bool,
) -> Result<crate::BacktestResult, Error> {
    let steps = test.n_bars() - 1;
    let spec = BacktestSpec { start: 0, end: steps, bars_per_year, risk_free: 0.0, ledger: true, equity };
    let backend = backend.for_replay(1, steps);
    Ok(backtest(backend, test, &[params], Signals::Targets { targets, columns: 1 }, &spec)?)
}

/// A trial's ledger on the test split, replayed on the CPU from its test actions (the same bits as on a
/// GPU), as CSV: its trades in the columns of `best-trades.csv`, times from `times` (one per test bar).
pub fn test_ledger_csv(
    trial: u64,
    test: &MarketData,
    params: TrialParams,
    targets: &[u8],
    bars_per_year: f64,
    times: &[String],
) -> Result<String, Error> {
    let r = replay(&Backend::Cpu, test, params, targets, bars_per_year, false)?;
    Ok(ledger_csv(trial, r.column_trades(0), &|bar| times.get(bar as usize).cloned().unwrap_or_default()))
}

/// Trial `trial`'s trades as CSV (`column` = `trial_N`), each bar's time from `time`.
pub fn ledger_csv(trial: u64, trades: &[Trade], time: &dyn Fn(u32) -> String) -> String {
    let named: Vec<(String, Trade)> = trades.iter().map(|t| (format!("trial_{trial}"), *t)).collect();
    crate::table::csv_text(&crate::table::trade_columns(&named, time))
}
