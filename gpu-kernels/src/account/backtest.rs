//! Backtests of portfolios: each column (one portfolio: target weights of N symbols, decided at closes)
//! walks one range of times with one cash account ([`super`]'s rule), folding its equity curve
//! ([`EquityStats`]) and handing every fill to a ledger. What is left open after the last step closes at the
//! last close where the symbol has a bar (reason `EndOfData`), as a single series' position does.

use super::{AccountFill, AccountState, FillLog, Orders, account_step, account_value, close_at};
use crate::backtest::Metrics;
use crate::equity::EquityStats;
use crate::portfolio::ExitReason;
use crate::types::{Bar, EnvStatus, TrialParams};

/// Scalar arguments of a portfolio backtest.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PortfolioArgs {
    /// First time (decisions start at its close).
    pub start: u32,
    /// Last time (the last fills are at its open; what is open closes at its close).
    pub end: u32,
    /// Times in the price block.
    pub n_times: u32,
    /// Symbols.
    pub n_symbols: u32,
    /// Columns (portfolios).
    pub n_columns: u32,
    /// Parameter sets: column c uses set `c % n_params`.
    pub n_params: u32,
    /// Bit 0: write the fills; bit 1: write equity curves ([`crate::backtest::WRITE_LEDGER`],
    /// [`crate::backtest::WRITE_EQUITY`]).
    pub write: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
    /// Bars per year (annualization).
    pub bars_per_year: f64,
    /// Risk-free return per bar.
    pub risk_free: f64,
}

const _: () = assert!(core::mem::size_of::<PortfolioArgs>() == 48);

/// The fills of one column: counted and costed, each handed to `sink`.
struct FillLedger<F: FnMut(AccountFill)> {
    count: u32,
    costs: f64,
    sink: F,
}

impl<F: FnMut(AccountFill)> FillLog for FillLedger<F> {
    fn filled(&mut self, fill: &AccountFill) {
        self.count += 1;
        self.costs += fill.costs;
        (self.sink)(*fill);
    }
}

/// Column `col` of a launch over times `[args.start, args.end]`. `bars` and `tradable` are time-major
/// (`n_times x n_symbols`): a symbol's cell at a time where it has no bar holds its last close (0 before its
/// first bar) and a 0 flag, and only its close is read. `weights` holds `n_columns x (end - start) x
/// n_symbols` targets, NaN for no order: the column's targets decided at the close of time t are its row
/// `t - start`. `units` (`n_symbols`) and `orders` are the column's scratch. Equity after each time goes to
/// `equity(i, value)` (i = 0 is the start), each fill to `sink`. Returns the metrics (`trades` counts the
/// fills; the round-trip statistics are NaN) and the number of fills.
#[allow(clippy::too_many_arguments, reason = "the inputs of one column, as a kernel passes them")]
#[inline]
pub fn portfolio_column(
    col: usize,
    args: &PortfolioArgs,
    params: &[TrialParams],
    bars: &[Bar],
    tradable: &[u8],
    weights: &[f64],
    units: &mut [f64],
    orders: &mut Orders<'_>,
    mut equity: impl FnMut(usize, f64),
    sink: impl FnMut(AccountFill),
) -> (Metrics, u32) {
    let p = &params[col % args.n_params.max(1) as usize];
    let (start, end, n) = (args.start as usize, args.end as usize, args.n_symbols as usize);
    let steps = end - start;
    let column = &weights[col * steps * n..(col + 1) * steps * n];
    units.iter_mut().for_each(|u| *u = 0.0);
    let mut state = AccountState::new(p, args.start, args.end);
    let mut ledger = FillLedger { count: 0, costs: 0.0, sink };
    equity(0, state.equity);
    let mut stats = EquityStats::new(state.equity, start, args.risk_free);
    for t in start..end {
        let prev = state.equity;
        let row = (t + 1) * n;
        let (next, flags) = (&bars[row..row + n], &tradable[row..row + n]);
        let targets = &column[(t - start) * n..(t - start + 1) * n];
        let (close, trades) = (|s: usize| next[s].close, |s: usize| flags[s] != 0);
        account_step(p, &mut state, units, |s| targets[s], |s| next[s].open, close, trades, orders, &mut ledger);
        let in_position = units.iter().any(|&u| u != 0.0);
        if t + 1 == end && state.status() != EnvStatus::Bankrupt {
            let reason = (end as u32, ExitReason::EndOfData);
            state.step_costs += close_at(p, &mut state, units, close, trades, reason, orders, &mut ledger);
            state.equity = account_value(state.cash, units, close);
        }
        stats.push(t + 1, prev, state.equity, in_position);
        equity(t + 1 - start, state.equity);
    }
    let metrics = Metrics {
        trades: f64::from(ledger.count),
        total_costs: ledger.costs,
        ..stats.finish(end, state.equity, args.bars_per_year)
    };
    (metrics, ledger.count)
}
