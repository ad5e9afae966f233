//! Backtests of portfolios over a universe, as `tradesim backtest --weights` runs them: the universe's
//! price block and the target weights handed to the device (`data/device.rs`), the run on the host
//! ([`crate::backtest_portfolios`]: the account rule of `gpu_kernels::account`), the ranking by Sharpe, the
//! Decimal audit of each portfolio ([`audit`]) and the exports (the fills ledger with a symbol column, the
//! per-bar equity).

pub mod audit;
pub mod env;

use std::time::Instant;

use chrono::DateTime;
use rust_decimal::Decimal;

use crate::audit::DecimalParams;
use crate::data::universe::Universe;
use crate::data::weights::TargetWeights;
use crate::table::Column;
use crate::{AccountFill, Backend, BacktestSpec, Error, ExitReason, Metrics, PortfolioResult, backtest_portfolios};

/// The account every portfolio trades.
#[derive(Clone, Debug, PartialEq)]
pub struct PortfolioRequest {
    /// Starting cash.
    pub capital: Decimal,
    /// Spread as a fraction.
    pub spread: Decimal,
    /// Commission as a fraction of notional.
    pub commission: Decimal,
    /// Whole units only (each order's size floored toward zero).
    pub whole_units: bool,
    /// Negative weights allowed (shorts).
    pub allow_short: bool,
    /// Annualization; `None`: inferred from the calendar.
    pub bars_per_year: Option<f64>,
}

impl PortfolioRequest {
    /// The account in exact decimals.
    pub fn decimals(&self) -> DecimalParams {
        DecimalParams::account(self.capital, self.spread, self.commission, self.whole_units, self.allow_short)
    }
}

/// A run of some portfolios.
#[derive(Debug)]
pub struct PortfolioRun {
    /// The portfolios' names.
    pub names: Vec<String>,
    /// Their metrics, fills and equity curves (every time of the calendar, the capital first).
    pub result: PortfolioResult,
    /// Portfolio indices best first (by Sharpe).
    pub order: Vec<usize>,
    /// The annualization used.
    pub bars_per_year: f64,
    /// Wall seconds of the backtest.
    pub seconds: f64,
    /// The account in Decimal.
    pub decimals: DecimalParams,
}

/// Runs every portfolio of `weights` over `universe` on `backend`, from the first time of the calendar to
/// the last, with the fills ledger and the equity curves kept.
pub fn run_portfolios(
    backend: &Backend,
    universe: &Universe,
    weights: &TargetWeights,
    req: &PortfolioRequest,
) -> Result<PortfolioRun, Error> {
    let decimals = req.decimals();
    let params = decimals.to_params()?;
    let market = crate::data::device::universe_market(universe)?;
    let device_weights = crate::data::device::target_weights(weights, universe.n_times(), universe.n_symbols())?;
    let bars_per_year = req.bars_per_year.unwrap_or_else(|| crate::data::time::infer_bars_per_year(&universe.times));
    let spec = BacktestSpec {
        start: 0,
        end: universe.n_times() - 1,
        bars_per_year,
        risk_free: 0.0,
        ledger: true,
        equity: true,
    };
    let started = Instant::now();
    let result = backtest_portfolios(backend, &market, &[params], &device_weights, &spec)?;
    let seconds = started.elapsed().as_secs_f64();
    let order = result.ranking(|m| m.sharpe);
    Ok(PortfolioRun { names: weights.portfolios.clone(), result, order, bars_per_year, seconds, decimals })
}

/// The name of [`equal_weight_hold`]'s portfolio.
pub const EQUAL_WEIGHT_HOLD: &str = "equal-weight buy-and-hold";

/// The universe's equal-weight buy-and-hold, as target weights: each symbol bought once to `1/N` of the
/// account's equity at its first fill (the close of the last time before the symbol's first bar after
/// calendar time 0, filled at that bar's open; a symbol listed from the start is bought at time 1's open)
/// and never traded again (closed with the account at the end of the data). The benchmark a portfolio of
/// the universe is judged against, beside flat (cash).
pub fn equal_weight_hold(universe: &Universe) -> Result<TargetWeights, Error> {
    let n = universe.n_symbols();
    let weight = Decimal::ONE / Decimal::from(n as u64);
    let mut rows = Vec::with_capacity(n);
    for (s, series) in universe.series.iter().enumerate() {
        // The first time whose next time has a bar of this symbol: its order can fill there.
        let Some(t) = (0..universe.n_times().saturating_sub(1)).find(|&t| universe.bar(t + 1, s).is_some()) else {
            continue;
        };
        rows.push(crate::data::weights::WeightRow {
            row: rows.len() + 2,
            time: universe.times[t],
            symbol: series.symbol.clone(),
            weights: vec![Some(weight)],
        });
    }
    let table = crate::data::weights::WeightTable {
        file: EQUAL_WEIGHT_HOLD.to_owned(),
        portfolios: vec![EQUAL_WEIGHT_HOLD.to_owned()],
        time_column: "time".to_owned(),
        symbol_column: "symbol".to_owned(),
        rows,
    };
    TargetWeights::new(table, universe, false)
        .map_err(|report| Error::Data(format!("{EQUAL_WEIGHT_HOLD} of {}: {report}", universe.label())))
}

impl PortfolioRun {
    /// Portfolio `c`'s profit or loss by symbol (`n_symbols` of them): the cash each symbol's fills paid and
    /// received, commissions included (`-sum(units x price + commission)`). Every position is closed at the
    /// end of the data (or at bankruptcy), so the contributions add up to the final equity minus the capital.
    /// Empty when the run kept no ledger.
    pub fn contributions(&self, c: usize, n_symbols: usize) -> Vec<f64> {
        if self.result.fills.is_empty() {
            return Vec::new();
        }
        let mut out = vec![0.0; n_symbols];
        for f in self.result.column_fills(c) {
            out[f.symbol as usize] -= f.units * f.price + f.commission;
        }
        out
    }

    /// The rank (1 = best) of portfolio `c`.
    pub fn rank_of(&self, c: usize) -> usize {
        self.order.iter().position(|&x| x == c).map_or(0, |r| r + 1)
    }

    /// One row per portfolio in file order: `portfolio`, `rank`, then every metric ([`Metrics::NAMES`]).
    pub fn metric_columns(&self) -> Vec<(String, Column)> {
        let mut out = vec![
            ("portfolio".to_owned(), Column::Text(self.names.clone())),
            ("rank".to_owned(), Column::Int((0..self.names.len()).map(|c| self.rank_of(c) as i64).collect())),
        ];
        for (k, name) in Metrics::NAMES.iter().enumerate() {
            out.push(((*name).to_owned(), Column::Float(self.result.metrics.iter().map(|m| m.values()[k]).collect())));
        }
        out
    }

    /// The portfolios `spec` selects: `best`, `top:N`, `all`, or names separated by commas (any case), in
    /// rank order for `best`/`top`, as written otherwise.
    pub fn select(&self, spec: &str) -> Result<Vec<usize>, Error> {
        let spec = spec.trim();
        let bad =
            |why: String| Error::config("--columns", format!("`{spec}`: {why} (best, top:N, all or NAME[,NAME...])"));
        match spec {
            "best" => Ok(self.order.iter().take(1).copied().collect()),
            "all" => Ok((0..self.names.len()).collect()),
            _ if spec.starts_with("top:") => match spec[4..].trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(self.order.iter().take(n).copied().collect()),
                _ => Err(bad("N is not a whole number >= 1".to_owned())),
            },
            _ => {
                spec.split(',')
                    .map(|name| {
                        let name = name.trim();
                        self.names.iter().position(|n| n.eq_ignore_ascii_case(name)).ok_or_else(|| {
                            bad(format!("no portfolio `{name}` (portfolios: {})", self.names.join(", ")))
                        })
                    })
                    .collect()
            }
        }
    }

    /// The per-bar equity of portfolios `chosen`: `time`, `bar`, one column per portfolio (bar 0 is the
    /// capital before the first decision; the last value is after the end-of-data closes).
    pub fn equity_columns(&self, universe: &Universe, chosen: &[usize]) -> Vec<(String, Column)> {
        let per = universe.n_times();
        let mut columns = vec![
            ("time".to_owned(), Column::Text(universe.times.iter().map(DateTime::to_rfc3339).collect())),
            ("bar".to_owned(), Column::Int((0..per as i64).collect())),
        ];
        for &c in chosen {
            columns.push((self.names[c].clone(), Column::Float(self.result.equity[c * per..(c + 1) * per].to_vec())));
        }
        columns
    }

    /// The fills of portfolios `chosen` in execution order: `portfolio`, `time`, `bar`, `symbol`, `side`
    /// (buy or sell), `units` (signed), `price` (spread included), `commission`, `costs` (half spread and
    /// commission), `reason` (Signal for an order to a target weight; Breaker, EndOfData, Bankruptcy) and
    /// `limited` (1 when the cash paid for less than the order).
    pub fn fill_columns(&self, universe: &Universe, chosen: &[usize]) -> Vec<(String, Column)> {
        let fills: Vec<(&str, &AccountFill)> = chosen
            .iter()
            .flat_map(|&c| self.result.column_fills(c).iter().map(move |f| (self.names[c].as_str(), f)))
            .collect();
        let time = |bar: u32| universe.times.get(bar as usize).map_or_else(String::new, DateTime::to_rfc3339);
        let text = |f: &dyn Fn(&(&str, &AccountFill)) -> String| Column::Text(fills.iter().map(f).collect());
        let int = |f: &dyn Fn(&AccountFill) -> i64| Column::Int(fills.iter().map(|(_, x)| f(x)).collect());
        let float = |f: &dyn Fn(&AccountFill) -> f64| Column::Float(fills.iter().map(|(_, x)| f(x)).collect());
        vec![
            ("portfolio".to_owned(), text(&|(name, _)| (*name).to_owned())),
            ("time".to_owned(), text(&|(_, f)| time(f.bar))),
            ("bar".to_owned(), int(&|f| i64::from(f.bar))),
            ("symbol".to_owned(), text(&|(_, f)| universe.series[f.symbol as usize].symbol.clone())),
            ("side".to_owned(), text(&|(_, f)| if f.units > 0.0 { "buy" } else { "sell" }.to_owned())),
            ("units".to_owned(), float(&|f| f.units)),
            ("price".to_owned(), float(&|f| f.price)),
            ("commission".to_owned(), float(&|f| f.commission)),
            ("costs".to_owned(), float(&|f| f.costs)),
            ("reason".to_owned(), text(&|(_, f)| format!("{:?}", ExitReason::from_code(f.reason)))),
            ("limited".to_owned(), int(&|f| i64::from(f.limited))),
        ]
    }

    /// The Decimal audit of portfolio `c` ([`audit::audit_portfolio`]).
    pub fn audit(
        &self,
        universe: &Universe,
        weights: &TargetWeights,
        c: usize,
    ) -> Result<audit::PortfolioAudit, Error> {
        audit::audit_portfolio(
            universe,
            weights,
            c,
            &self.decimals,
            self.result.column_fills(c),
            &self.result.metrics[c],
        )
    }
}
