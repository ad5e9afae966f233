//! Backtests of portfolios (columns of per-symbol target weights, one cash account each) over a universe's
//! price block: the arguments checked here, the run on the CPU backend (`cpu/portfolio.rs`) with the rule
//! of [`gpu_kernels::account`], which a CUDA kernel will share.

use gpu_kernels::TrialParams;
use gpu_kernels::account::backtest::PortfolioArgs;
use gpu_kernels::backtest::{WRITE_EQUITY, WRITE_LEDGER};

pub use crate::types::{BacktestSpec, PortfolioResult};
use crate::{Backend, HostError, UniverseMarket};

/// The checked launch arguments of a portfolio backtest of `weights` (`columns x (end - start) x
/// n_symbols`, NaN: no order) and the number of columns.
fn portfolio_args(
    market: &UniverseMarket,
    params: &[TrialParams],
    weights: &[f64],
    spec: &BacktestSpec,
) -> Result<PortfolioArgs, HostError> {
    let (n_times, n) = (market.n_times(), market.n_symbols());
    if spec.start >= spec.end || spec.end >= n_times {
        return Err(HostError::Config(format!(
            "portfolio backtest range [{}, {}] must have start < end < times ({n_times})",
            spec.start, spec.end
        )));
    }
    if params.is_empty() {
        return Err(HostError::Config("a portfolio backtest needs at least one parameter set".to_owned()));
    }
    if !(spec.bars_per_year > 0.0 && spec.bars_per_year.is_finite() && spec.risk_free.is_finite()) {
        return Err(HostError::Config(format!(
            "bars per year ({}) must be positive and the risk-free rate ({}) finite",
            spec.bars_per_year, spec.risk_free
        )));
    }
    let per_column = (spec.end - spec.start) * n;
    if weights.is_empty() || !weights.len().is_multiple_of(per_column) {
        return Err(HostError::Shape {
            what: format!("target weights (columns x {} steps x {n} symbols)", spec.end - spec.start),
            expected: per_column * (weights.len() / per_column).max(1),
            got: weights.len(),
        });
    }
    if let Some(i) = weights.iter().position(|w| w.is_infinite()) {
        let (column, rest) = (i / per_column, i % per_column);
        return Err(HostError::Config(format!(
            "column {column}: the target weight of symbol {} decided at time {} is {} (finite, or NaN for no \
             order)",
            rest % n,
            spec.start + rest / n,
            weights[i]
        )));
    }
    for (trial, p) in params.iter().enumerate() {
        crate::env_batch::validate_params(trial, p)?;
        let unused = [
            ("cash_reserve_pct", p.cash_reserve_pct),
            ("take_profit_mult", p.take_profit_mult),
            ("stop_loss_mult", p.stop_loss_mult),
            ("max_hold_bars", f64::from(p.max_hold_bars)),
        ];
        if let Some((field, value)) = unused.into_iter().find(|&(_, v)| v != 0.0) {
            let rule = "0 in a portfolio backtest (the weights say what stays in cash; no barriers)";
            return Err(HostError::InvalidParam { trial, field, value, rule });
        }
    }
    let as_u32 = |what: &str, v: usize| {
        u32::try_from(v).map_err(|_| HostError::Config(format!("{what} = {v} does not fit in u32")))
    };
    Ok(PortfolioArgs {
        start: as_u32("start", spec.start)?,
        end: as_u32("end", spec.end)?,
        n_times: as_u32("times", n_times)?,
        n_symbols: as_u32("symbols", n)?,
        n_columns: as_u32("columns", weights.len() / per_column)?,
        n_params: as_u32("parameter sets", params.len())?,
        write: if spec.ledger { WRITE_LEDGER } else { 0 } | if spec.equity { WRITE_EQUITY } else { 0 },
        _pad: 0,
        bars_per_year: spec.bars_per_year,
        risk_free: spec.risk_free,
    })
}

/// Backtests every portfolio column of `weights` (`columns x (end - start) x n_symbols`: column c's target
/// weight of symbol s decided at the close of time `start + i` is `weights[(c x (end - start) + i) x
/// n_symbols + s]`, NaN for no order); column c uses `params[c % params.len()]`. CPU only for now: the
/// CUDA backend refuses, naming the reason.
pub fn backtest_portfolios(
    backend: &Backend,
    market: &UniverseMarket,
    params: &[TrialParams],
    weights: &[f64],
    spec: &BacktestSpec,
) -> Result<PortfolioResult, HostError> {
    let args = portfolio_args(market, params, weights, spec)?;
    match backend {
        Backend::Cpu => Ok(crate::cpu::portfolio::backtest_portfolios(market, params, weights, &args)),
        #[cfg(feature = "cuda")]
        Backend::Cuda(_) => Err(HostError::Config(
            "portfolio backtests have no CUDA kernel yet: run them on the CPU backend (--device cpu)".to_owned(),
        )),
    }
}
