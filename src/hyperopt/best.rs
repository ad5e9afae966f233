//! The best trial on the test split, as the job computes it before the report is written: its stored test
//! actions replayed by the backtest engine (metrics, ledger, equity curve), then audited in Decimal.

use std::ops::Range;

use super::config::SearchConfig;
use super::plan::{TrialPlanner, env_params};
use super::ranking::study_leaderboard;
use super::study::Study;
use crate::audit::{AuditReport, audit_column};
use crate::data::Series;
use crate::train::SplitData;
use crate::{Backend, Error, Metrics, Trade};

/// The best trial's test backtest and its Decimal audit.
#[derive(Debug)]
pub struct BestOnTest {
    /// The trial's number.
    pub trial: u64,
    /// Its metrics on the test split.
    pub metrics: Metrics,
    /// Its equity at every bar of the test split, the first at its first close.
    pub equity: Vec<f64>,
    /// Its closed trades (bars counted from the test split's first).
    pub trades: Vec<Trade>,
    /// The test split's bars in the series.
    pub test_bars: Range<usize>,
    /// The Decimal audit of the trades and metrics (an error when it could not be made).
    pub audit: Result<AuditReport, Error>,
}

/// The leaderboard's best trial ([`super::ranking::leaderboard`] of tradesim's own trials: the first, when
/// complete) replayed on the test split of `data` (from `series`) with its stored test actions and the
/// environment of `cfg`, then audited in Decimal; `None` when no trial completed. An error when the best
/// trial has no stored test actions or the backtest fails; an audit that fails is kept in
/// [`BestOnTest::audit`].
pub fn best_on_test(
    backend: &Backend,
    study: &Study,
    series: &Series,
    data: &SplitData,
    cfg: &SearchConfig,
    bars_per_year: f64,
) -> Result<Option<BestOnTest>, Error> {
    let board = study_leaderboard(study)?;
    let Some(best) = board.first().filter(|t| t.status == "complete") else {
        return Ok(None);
    };
    let (split, test) = (&data.split, &data.test);
    let targets = study
        .test_actions(best.number)?
        .ok_or_else(|| Error::Output(format!("trial {} has no test actions", best.number)))?;
    let planner = TrialPlanner::for_search(cfg, bars_per_year, &data.train)?;
    let env = planner.env();
    let params = env_params(&planner.read(&best.params)?, env)?;
    let r = super::ledger::replay(backend, test, params, &targets, bars_per_year, true)?;
    let metrics = r.metrics[0];
    let trades = r.column_trades(0).to_vec();
    let audit = audit_column(&series.bars[split.test.start..], &env.audit_params(), &trades, &metrics);
    Ok(Some(BestOnTest { trial: best.number, metrics, equity: r.equity, trades, test_bars: split.test.clone(), audit }))
}
