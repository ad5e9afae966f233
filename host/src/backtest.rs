//! Backtests of many columns over one range of bars, on the CPU or the GPU, with the same bits on both:
//! per-column metrics, the trade ledger (sized by a count pass, then filled: nothing is dropped) and
//! optional equity curves.

use gpu_kernels::backtest::{
    BacktestArgs, SIGNAL_SMA_CROSS, SIGNAL_TARGETS, WRITE_EQUITY, WRITE_LEDGER, products_fit_i64,
};
use gpu_kernels::{Action, TrialParams};

pub use crate::types::{BacktestResult, BacktestSpec, Signals};
use crate::{Backend, HostError, MarketData};

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
                return Err(HostError::InvalidAction { step: i % steps, env: i / steps, code: targets[i].into() });
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
        narrow: 0,
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
    let narrow = matches!(signals, Signals::SmaCross(columns) if products_fit_i64(&prefix, columns));
    let args = BacktestArgs { narrow: u32::from(narrow), ..args };
    match backend {
        Backend::Cpu => Ok(crate::cpu::backtest::backtest(market, params, &signals, &prefix, &args)),
        #[cfg(feature = "cuda")]
        Backend::Cuda(rt) => crate::cuda::backtest(rt, market, params, &signals, &prefix, &args),
    }
}
