//! Backtests of many columns over one range of bars, on the CPU or the GPU, with the same bits on both:
//! per-column metrics, the trade ledger (sized by a count pass, then filled: nothing is dropped) and
//! optional equity curves.

use gpu_kernels::backtest::{
    BacktestArgs, Metrics, SIGNAL_SMA_CROSS, SIGNAL_TARGETS, SmaCross, Trade, WRITE_EQUITY, WRITE_LEDGER, run_column,
};
use gpu_kernels::{Action, TrialParams};
use rayon::prelude::*;

use crate::{Backend, HostError, MarketData};

/// Where the columns' decisions come from.
#[derive(Clone, Copy, Debug)]
pub enum Signals<'a> {
    /// Target action codes, `columns x (end - start)`, column-major: column c's decision at the close of
    /// bar `start + i` is `targets[c x (end - start) + i]`.
    Targets {
        /// The codes.
        targets: &'a [u8],
        /// Number of columns.
        columns: usize,
    },
    /// One SMA crossover per column, computed on the device.
    SmaCross(&'a [SmaCross]),
}

impl Signals<'_> {
    /// Number of columns.
    pub fn columns(&self) -> usize {
        match self {
            Self::Targets { columns, .. } => *columns,
            Self::SmaCross(s) => s.len(),
        }
    }
}

/// What to run and record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BacktestSpec {
    /// First bar (decisions from its close).
    pub start: usize,
    /// Last bar (open positions are closed at its close).
    pub end: usize,
    /// Bars per year for annualized figures (252 for daily bars, 252 x 6.5 for US hourly, 365 x 24 for FX
    /// hours, ...).
    pub bars_per_year: f64,
    /// Risk-free return per bar.
    pub risk_free: f64,
    /// Keep the trade ledger.
    pub ledger: bool,
    /// Keep the equity curves (`columns x (end - start + 1)` f64).
    pub equity: bool,
}

/// Results of all columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BacktestResult {
    /// Per-column metrics.
    pub metrics: Vec<Metrics>,
    /// Every column's trades, column after column (empty unless the ledger was asked for).
    pub trades: Vec<Trade>,
    /// Column c's trades are `trades[offsets[c]..offsets[c + 1]]`.
    pub offsets: Vec<usize>,
    /// Equity curves, `columns x (end - start + 1)` (empty unless asked for).
    pub equity: Vec<f64>,
}

impl BacktestResult {
    /// Column `c`'s trades.
    pub fn column_trades(&self, c: usize) -> &[Trade] {
        if self.trades.is_empty() { &[] } else { &self.trades[self.offsets[c]..self.offsets[c + 1]] }
    }

    /// Columns ordered by `key` descending (NaN last), ties by column index: a fixed order.
    pub fn ranking(&self, key: impl Fn(&Metrics) -> f64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.metrics.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (key(&self.metrics[a]), key(&self.metrics[b]));
            match (x.is_nan(), y.is_nan()) {
                (true, true) => a.cmp(&b),
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                (false, false) => y.total_cmp(&x).then(a.cmp(&b)),
            }
        });
        order
    }
}

/// The closes in integer ticks and their prefix sums (`prefix[i]` = ticks of bars `0..i`), with the tick's
/// decimal scale: the finest scale of 0..=9 places on which every close lies (each close's f64 within 1e-9,
/// relative, of a tick: the f64 of a Decimal price with that many places), so SMA comparisons are exact on
/// the data's own prices. Closes on no such grid (or too large for it) are rounded to the finest scale
/// whose sums stay within 64 bits (refused when not even whole units do). The same integers go to both
/// backends.
pub fn tick_prefix(market: &MarketData) -> Result<(Vec<i64>, u32), HostError> {
    let closes: Vec<f64> = market.bars().iter().map(|b| b.close).collect();
    let max = closes.iter().fold(0.0f64, |m, &c| m.max(c.abs()));
    let n = closes.len().max(1) as f64;
    let pow = |s: u32| 10f64.powi(s as i32);
    let fits = |s: u32| max * pow(s) * n < 4.0e18;
    let on_grid = |s: u32| {
        closes.iter().all(|&c| {
            let x = c * pow(s);
            (x - x.round()).abs() <= 1e-9 * x.abs().max(1.0)
        })
    };
    if !fits(0) {
        return Err(HostError::Config(format!(
            "closes up to {max} over {} bars are too large for exact 64-bit SMA sums",
            closes.len()
        )));
    }
    let scale = (0..=9u32)
        .filter(|&s| fits(s))
        .find(|&s| on_grid(s))
        .unwrap_or_else(|| (0..=9u32).rev().find(|&s| fits(s)).unwrap_or(0));
    let mut out = Vec::with_capacity(closes.len() + 1);
    let mut sum = 0i64;
    out.push(sum);
    for c in closes {
        sum += (c * pow(scale)).round() as i64;
        out.push(sum);
    }
    Ok((out, scale))
}

/// The checked launch arguments of a backtest.
pub(crate) fn backtest_args(
    market: &MarketData,
    params: &[TrialParams],
    signals: &Signals<'_>,
    spec: &BacktestSpec,
) -> Result<BacktestArgs, HostError> {
    let n_bars = market.n_bars();
    if spec.start >= spec.end || spec.end >= n_bars {
        return Err(HostError::Config(format!(
            "backtest range [{}, {}] must have start < end < bars ({n_bars})",
            spec.start, spec.end
        )));
    }
    if params.is_empty() {
        return Err(HostError::Config("a backtest needs at least one parameter set".to_owned()));
    }
    if !(spec.bars_per_year > 0.0 && spec.bars_per_year.is_finite() && spec.risk_free.is_finite()) {
        return Err(HostError::Config(format!(
            "bars per year ({}) must be positive and the risk-free rate ({}) finite",
            spec.bars_per_year, spec.risk_free
        )));
    }
    let columns = signals.columns();
    let steps = spec.end - spec.start;
    let signal = match signals {
        Signals::Targets { targets, columns } => {
            if targets.len() != columns * steps {
                return Err(HostError::Shape {
                    what: format!("target actions ({columns} columns x {steps} steps)"),
                    expected: columns * steps,
                    got: targets.len(),
                });
            }
            if let Some(i) = targets.iter().position(|&a| a >= Action::COUNT) {
                return Err(HostError::InvalidAction { step: i % steps, env: i / steps, code: targets[i] });
            }
            SIGNAL_TARGETS
        }
        Signals::SmaCross(s) => {
            if let Some((c, bad)) = s.iter().enumerate().find(|(_, s)| s.fast == 0 || s.slow == 0 || s.allow_short > 1)
            {
                return Err(HostError::Config(format!("column {c}: SMA windows must be >= 1 ({bad:?})")));
            }
            SIGNAL_SMA_CROSS
        }
    };
    let as_u32 = |what: &str, n: usize| {
        u32::try_from(n).map_err(|_| HostError::Config(format!("{what} = {n} does not fit in u32")))
    };
    Ok(BacktestArgs {
        start: as_u32("start", spec.start)?,
        end: as_u32("end", spec.end)?,
        n_bars: as_u32("bars", n_bars)?,
        n_columns: as_u32("columns", columns)?,
        n_params: as_u32("parameter sets", params.len())?,
        signal,
        write: if spec.ledger { WRITE_LEDGER } else { 0 } | if spec.equity { WRITE_EQUITY } else { 0 },
        _pad: 0,
        bars_per_year: spec.bars_per_year,
        risk_free: spec.risk_free,
    })
}

/// Backtests every column; column c uses `params[c % params.len()]`.
pub fn backtest(
    backend: &Backend,
    market: &MarketData,
    params: &[TrialParams],
    signals: Signals<'_>,
    spec: &BacktestSpec,
) -> Result<BacktestResult, HostError> {
    for (trial, p) in params.iter().enumerate() {
        crate::env_batch::validate_params(trial, p)?;
    }
    let args = backtest_args(market, params, &signals, spec)?;
    let (prefix, _) = tick_prefix(market)?;
    match backend {
        Backend::Cpu => Ok(backtest_cpu(market, params, &signals, &prefix, &args)),
        #[cfg(feature = "cuda")]
        Backend::Cuda(rt) => crate::cuda::backtest(rt, market, params, &signals, &prefix, &args),
    }
}

/// Exclusive prefix sums of per-column trade counts (`columns + 1` entries).
pub(crate) fn offsets_of(counts: &[u32]) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut total = 0;
    offsets.push(0);
    for &c in counts {
        total += c as usize;
        offsets.push(total);
    }
    offsets
}

fn backtest_cpu(
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
