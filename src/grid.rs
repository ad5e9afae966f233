//! The SMA-crossover backtest grid over one symbol's bars, as `tradesim backtest` and the Python package run
//! it: the grid's columns, the backtest, the ranking by Sharpe, the metric table, the Decimal audit of the
//! best column, and the trade and equity exports of selected columns.

use std::time::Instant;

use chrono::{DateTime, FixedOffset};
use rust_decimal::Decimal;

use crate::audit::{AuditReport, DecimalParams, audit_column};
use crate::data::Series;
use crate::table::Column;
use crate::{
    Backend, BacktestResult, BacktestSpec, Error, MarketData, Metrics, Signals, SmaCross, TrialParams, backtest,
};

/// When an SMA crossover changes a column's target (`--signal`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalRule {
    /// Only on a crossover event: long when fast crosses above slow, short (or flat) when it crosses below;
    /// flat before the first event, a tie is no event.
    #[default]
    Cross,
    /// The side of the averages: long while fast > slow, short (or flat) while below, flat on a tie.
    State,
}

impl SignalRule {
    /// The kernel's rule code.
    pub fn code(self) -> u32 {
        match self {
            Self::Cross => gpu_kernels::backtest::RULE_CROSS,
            Self::State => gpu_kernels::backtest::RULE_STATE,
        }
    }
}

/// A grid: every `fast` x `slow` pair with `slow > fast`, and the account it trades.
#[derive(Clone, Debug, PartialEq)]
pub struct GridRequest {
    /// Fast windows.
    pub fast: Vec<u32>,
    /// Slow windows.
    pub slow: Vec<u32>,
    /// When the signal changes the target.
    pub signal: SignalRule,
    /// Short below (else flat).
    pub allow_short: bool,
    /// Starting cash.
    pub capital: Decimal,
    /// Spread as a fraction.
    pub spread: Decimal,
    /// Commission as a fraction of notional.
    pub commission: Decimal,
    /// Whole units only.
    pub whole_units: bool,
    /// Annualization; `None`: inferred from the bar times.
    pub bars_per_year: Option<f64>,
}

impl GridRequest {
    /// The account in exact decimals.
    pub fn decimals(&self) -> DecimalParams {
        DecimalParams::account(self.capital, self.spread, self.commission, self.whole_units, self.allow_short)
    }

    /// The grid's columns, fast-major.
    pub fn columns(&self) -> Vec<SmaCross> {
        let (allow_short, rule) = (u32::from(self.allow_short), self.signal.code());
        self.fast
            .iter()
            .flat_map(|&fast| {
                self.slow.iter().filter(move |&&s| s > fast).map(move |&slow| SmaCross {
                    fast,
                    slow,
                    allow_short,
                    rule,
                })
            })
            .collect()
    }
}

/// A grid's backtest.
#[derive(Debug)]
pub struct GridRun {
    /// The columns, fast-major.
    pub grid: Vec<SmaCross>,
    /// Their metrics and trades.
    pub result: BacktestResult,
    /// Column indices best first (by Sharpe).
    pub order: Vec<usize>,
    /// The annualization used.
    pub bars_per_year: f64,
    /// Wall seconds of the backtest.
    pub seconds: f64,
    market: MarketData,
    params: TrialParams,
    decimals: DecimalParams,
    spec: BacktestSpec,
    times: Vec<DateTime<FixedOffset>>,
}

/// Runs the grid of `req` over `series` on `backend` (the ledger kept for the audit and the exports).
pub fn run_grid(backend: &Backend, series: &Series, req: &GridRequest) -> Result<GridRun, Error> {
    let decimals = req.decimals();
    let params = decimals.to_params()?;
    let grid = req.columns();
    if grid.is_empty() {
        return Err(Error::config("--slow", "the grid is empty: every slow window must exceed a fast one"));
    }
    if req.fast.contains(&0) {
        return Err(Error::config("--fast", "windows must be at least 1"));
    }
    let n = series.bars.len();
    let market = crate::data::device::price_market(series)?;
    let times: Vec<_> = series.bars.iter().map(|b| b.time).collect();
    let bars_per_year = req.bars_per_year.unwrap_or_else(|| crate::data::time::infer_bars_per_year(&times));
    let spec = BacktestSpec { start: 0, end: n - 1, bars_per_year, risk_free: 0.0, ledger: true, equity: false };
    let started = Instant::now();
    let result = backtest(backend, &market, &[params], Signals::SmaCross(&grid), &spec)?;
    let seconds = started.elapsed().as_secs_f64();
    let order = result.ranking(|m| m.sharpe);
    Ok(GridRun { grid, result, order, bars_per_year, seconds, market, params, decimals, spec, times })
}

/// The trade ledger and per-bar equity of selected columns ([`GridRun::exports`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Exports {
    /// One row per trade ([`crate::table::trade_columns`]), the column named `sma_FAST_SLOW`.
    pub trades: Vec<(String, Column)>,
    /// `time`, `bar`, then one equity column per selected column; `None` unless asked for.
    pub equity: Option<Vec<(String, Column)>>,
    /// Bars per equity column.
    pub bars: usize,
}

impl GridRun {
    /// The rank (1 = best) of column `c`.
    pub fn rank_of(&self, c: usize) -> usize {
        self.order.iter().position(|&x| x == c).map_or(0, |r| r + 1)
    }

    /// One row per column in grid order: `fast`, `slow`, `rank`, then every metric ([`Metrics::NAMES`]).
    pub fn metric_columns(&self) -> Vec<(String, Column)> {
        let mut out = vec![
            ("fast".to_owned(), Column::Int(self.grid.iter().map(|g| i64::from(g.fast)).collect())),
            ("slow".to_owned(), Column::Int(self.grid.iter().map(|g| i64::from(g.slow)).collect())),
            ("rank".to_owned(), Column::Int((0..self.grid.len()).map(|c| self.rank_of(c) as i64).collect())),
        ];
        for (k, name) in Metrics::NAMES.iter().enumerate() {
            out.push(((*name).to_owned(), Column::Float(self.result.metrics.iter().map(|m| m.values()[k]).collect())));
        }
        out
    }

    /// The Decimal audit of the best column (its ledger replayed in exact arithmetic on `series`).
    pub fn audit_best(&self, series: &Series) -> Result<AuditReport, Error> {
        let best = self.order[0];
        audit_column(&series.bars, &self.decimals, self.result.column_trades(best), &self.result.metrics[best])
    }

    /// The columns `spec` selects (`best`, `top:N`, `all`, or `FAST/SLOW` pairs or `sma_FAST_SLOW` names,
    /// separated by commas), in rank order for `best`/`top`, as written otherwise.
    pub fn select_columns(&self, spec: &str) -> Result<Vec<usize>, Error> {
        select_columns(spec, &self.grid, &self.order)
    }

    /// The trades and (with `equity`) the per-bar equity of columns `chosen`, re-run with equity kept.
    pub fn exports(&self, backend: &Backend, chosen: &[usize], equity: bool) -> Result<Exports, Error> {
        let sub: Vec<SmaCross> = chosen.iter().map(|&c| self.grid[c]).collect();
        let spec = BacktestSpec { equity, ..self.spec };
        let r = backtest(backend, &self.market, &[self.params], Signals::SmaCross(&sub), &spec)?;
        let name = |g: &SmaCross| format!("sma_{}_{}", g.fast, g.slow);
        let time = |bar: usize| self.times.get(bar).map_or_else(String::new, DateTime::to_rfc3339);
        let per = if equity { r.equity.len() / sub.len().max(1) } else { 0 };
        let equity = equity.then(|| {
            let mut columns = vec![
                ("time".to_owned(), Column::Text((0..per).map(time).collect())),
                ("bar".to_owned(), Column::Int((0..per as i64).collect())),
            ];
            for (c, g) in sub.iter().enumerate() {
                columns.push((name(g), Column::Float(r.equity[c * per..(c + 1) * per].to_vec())));
            }
            columns
        });
        let all: Vec<(String, crate::Trade)> = (0..sub.len())
            .flat_map(|c| {
                let label = name(&sub[c]);
                r.column_trades(c).iter().map(move |t| (label.clone(), *t))
            })
            .collect();
        let trades = crate::table::trade_columns(&all, &|bar| time(bar as usize));
        Ok(Exports { trades, equity, bars: per })
    }
}

/// The grid columns `spec` selects (`best`, `top:N`, `all`, or `FAST/SLOW` pairs, or `sma_FAST_SLOW` names as
/// the exports write them, separated by commas), in rank order for `best`/`top`, grid order otherwise;
/// `order` is the ranking.
pub fn select_columns(spec: &str, grid: &[SmaCross], order: &[usize]) -> Result<Vec<usize>, Error> {
    let spec = spec.trim();
    let bad = |why: &str| {
        Error::config("--columns", format!("`{spec}`: {why} (best, top:N, all or FAST/SLOW[,FAST/SLOW...])"))
    };
    match spec {
        "best" => Ok(order.iter().take(1).copied().collect()),
        "all" => Ok((0..grid.len()).collect()),
        _ if spec.starts_with("top:") => {
            let n: usize = spec[4..].trim().parse().map_err(|_| bad("N is not a whole number"))?;
            if n == 0 {
                return Err(bad("N must be at least 1"));
            }
            Ok(order.iter().take(n).copied().collect())
        }
        _ => spec
            .split(',')
            .map(|pair| {
                // `FAST/SLOW`, or an exported column's name `sma_FAST_SLOW`.
                let named = pair.trim().strip_prefix("sma_").and_then(|p| p.split_once('_'));
                let (f, s) =
                    named.or_else(|| pair.split_once('/')).ok_or_else(|| bad(&format!("`{pair}` is not FAST/SLOW")))?;
                let (f, s): (u32, u32) = (
                    f.trim().parse().map_err(|_| bad(&format!("`{f}` is not a window")))?,
                    s.trim().parse().map_err(|_| bad(&format!("`{s}` is not a window")))?,
                );
                grid.iter()
                    .position(|g| g.fast == f && g.slow == s)
                    .ok_or_else(|| bad(&format!("{f}/{s} is not in the grid")))
            })
            .collect(),
    }
}
