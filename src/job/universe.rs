//! The main job on a universe (docs/CLI.md, "A universe"): the search of universe learners
//! ([`run_universe_search`]), the evidence on the account's returns (the best trial deflated for the trials,
//! its test PSR, the universe's equal-weight buy-and-hold and flat as baselines, SPA, PBO over the trials'
//! validation returns, placebo searches on surrogates that keep the cross-section, [`placebo_universe`]),
//! and the outputs: the best trial's test walk as target weights through the portfolio backtest (the
//! fills ledger with a symbol column, the Decimal audit over all symbols), against the equal-weight
//! buy-and-hold of the test times, with per-symbol contributions, in an HTML report.

use std::collections::BTreeMap;
use std::ops::Range;

use num_traits::FromPrimitive;
use rust_decimal::Decimal;

use super::Job;
pub use super::report::universe::UniverseOutputs;
use crate::data::surrogate::placebo_universe;
use crate::data::universe::Universe;
use crate::data::{Dataset, MarketBar, Series};
use crate::evidence::walk_forward_universe::{
    returns_of, universe_fold_split, universe_folds, universe_search_fold, universe_walk_forward_fold,
};
use crate::evidence::{Evidence, SearchReturns, TrialReturns};
use crate::hyperopt::search::universe::{
    UniverseSplit, replay, run_universe_search, universe_env, universe_planner, walk_score,
};
use crate::hyperopt::study::TrialRecord;
use crate::hyperopt::{Progress, Study};
use crate::portfolio::{PortfolioRequest, equal_weight_hold, run_portfolios};
use crate::{Backend, Error, Metrics, TrialParams};
use gpu_kernels::types::EnvStatus;

/// What [`Job::run_universe`] produced.
#[derive(Debug)]
pub struct UniverseDone {
    /// The evidence and its verdict.
    pub evidence: Evidence,
    /// The study's trials, best first.
    pub leaderboard: Vec<TrialRecord>,
    /// The best trial's test walk's metrics (its side changes as trades).
    pub best_test: Option<Metrics>,
    /// The portfolio backtest of the best trial's test walk, when there is a best trial.
    pub outputs: Option<UniverseOutputs>,
    /// Seconds of the features and splits before the search.
    pub split_seconds: f64,
    /// The split the search ran on (times), and the annualization.
    pub split: (Range<usize>, Range<usize>, Range<usize>),
    /// Steps a year.
    pub bars_per_year: f64,
    /// Side searches and folds run at once at most ([`Job::side_searches`], fewer where
    /// device memory holds fewer).
    pub side_at_once: usize,
    /// Where the time after the search went.
    pub after: super::AfterSearch,
}

impl Job {
    /// Runs the search on universe `u` (split 70/15/15 on its calendar), the evidence, the placebo searches
    /// when asked, and writes the report, the ledger and the equity into the report folder.
    pub fn run_universe(
        &self,
        backend: &Backend,
        u: &Universe,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<UniverseDone, Error> {
        let started = std::time::Instant::now();
        let split = UniverseSplit::new(u, crate::train::DEFAULT_SPLIT)?;
        let split_seconds = started.elapsed().as_secs_f64();
        let at_once = super::side::search_then_count(backend, self.side_searches, || {
            run_universe_search(backend, &split, &self.cfg, &self.paths, progress)
        })?;
        let mut after = super::AfterSearch::default();
        let study = Study::reopen(&self.storage, &self.name)?;
        let mut evidence = after.time("evidence", || universe_evidence(&study, &split, &self.cfg))?;
        let best = match evidence.best_trial {
            Some(n) => study.trials()?.into_iter().find(|t| t.number == n),
            None => None,
        };
        let bars_per_year = split.bars_per_year;
        let work = super::side::SideWork {
            placebo: &|index, suffix, attrs| {
                let surrogate = placebo_universe(u, self.cfg.study.seed, index)?;
                let split = UniverseSplit::new(&surrogate, crate::train::DEFAULT_SPLIT)?;
                self.universe_side_search(backend, &split, suffix, attrs, progress)
            },
            fold: &|best, fold, bars| {
                universe_walk_forward_fold(backend, u, &split, &self.cfg, &best.params, best.number, fold, bars)
            },
            folds: &|k| universe_folds(u, &split, k),
            search_fold: &|fold, (past, test)| {
                let fold_split = universe_fold_split(u, past.clone(), test.clone(), bars_per_year)?;
                let suffix = format!("wfo-{fold}");
                let (name, study) = self.universe_side_search(backend, &fold_split, &suffix, &[], progress)?;
                universe_search_fold((&study, &name), &fold_split, &self.cfg, fold)
            },
        };
        let evidence_of = &mut evidence;
        after.time("side work", || self.side_work(evidence_of, &best, at_once, progress, &work, bars_per_year))?;
        evidence.verdict = crate::evidence::verdict(&evidence);
        evidence.verdict_before = crate::evidence::verdict_before(&evidence);
        let (leaderboard, best_test, mut outputs) = after.time("the best trial's test", || {
            crate::evidence::record(&study, &evidence)?;
            let leaderboard = crate::hyperopt::ranking::study_leaderboard(&study)?;
            let (mut best_test, mut outputs) = (None, None);
            if let Some(t) = &best {
                let planner = universe_planner(&self.cfg, split.bars_per_year, split.train.len())?;
                let env = universe_env(&planner, &planner.read(&t.params)?, t.number)?;
                let actions = study.test_actions(t.number)?.unwrap_or_default();
                let w = replay(&split.data, &[env], &[actions], &split.test)?.remove(0);
                best_test = Some(walk_score(&w, split.n_symbols(), split.bars_per_year).0);
                outputs = Some(self.universe_outputs(u, &split, t.number, env, &w)?);
            }
            Ok::<_, Error>((leaderboard, best_test, outputs))
        })?;
        let summary = super::report::universe::UniverseReport {
            study: &study,
            study_name: &self.name,
            data_label: &u.label(),
            evidence: &evidence,
            leaderboard: &leaderboard,
            best_test: best_test.as_ref(),
            outputs: outputs.as_ref(),
            symbols: u.symbols().len(),
        };
        let index = after.time("report", || super::report::universe::write(&summary, &self.report_dir))?;
        if let Some(o) = &mut outputs {
            o.files.insert(0, index);
        }
        let (train, valid, test) = (split.train.clone(), split.valid.clone(), split.test.clone());
        Ok(UniverseDone {
            evidence,
            leaderboard,
            best_test,
            outputs,
            split_seconds,
            split: (train, valid, test),
            bars_per_year: split.bars_per_year,
            side_at_once: at_once,
            after,
        })
    }

    /// A search beside the study's own on `split`, as the single series' side searches: study `NAME.SUFFIX`
    /// in the same storage with the study's configuration (created or continued), `attrs` set on it before
    /// it runs, its checkpoints folder `SUFFIX/checkpoints` of the study's folder. Returns its name and study.
    fn universe_side_search(
        &self,
        backend: &Backend,
        split: &UniverseSplit,
        suffix: &str,
        attrs: &[(&str, String)],
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<(String, Study), Error> {
        let (name, study, paths) = self.open_side_study(suffix, attrs)?;
        run_universe_search(backend, split, &self.cfg, &paths, progress)?;
        Ok((name, study))
    }

    /// The best trial's test walk `w` as target weights on the test times of `u` through the portfolio
    /// backtest, beside the equal-weight buy-and-hold of the same times; the fills ledger and both equity
    /// curves written into the report folder.
    fn universe_outputs(
        &self,
        u: &Universe,
        split: &UniverseSplit,
        number: u64,
        env: TrialParams,
        w: &tradesim_host::universe::UniverseWalk,
    ) -> Result<UniverseOutputs, Error> {
        let slice = time_slice(u, &split.test)?;
        let planner = universe_planner(&self.cfg, split.bars_per_year, split.train.len())?;
        let e = planner.env();
        let req = PortfolioRequest {
            capital: e.capital,
            spread: e.spread,
            commission: e.commission,
            whole_units: e.whole_units,
            allow_short: e.allow_short,
            bars_per_year: Some(split.bars_per_year),
        };
        let name = format!("trial {number}");
        let weights =
            walk_weights(u, &slice, split.test.start, w, (env.cash_reserve_pct, env.allow_short != 0), &name)?;
        // The portfolio backtest has no CUDA kernel: its ledger, audit and benchmark run on the CPU whatever
        // backend trained the trials (one column each, a few hundred times: milliseconds).
        let best = run_portfolios(&Backend::Cpu, &slice, &weights, &req)?;
        let hold = run_portfolios(&Backend::Cpu, &slice, &equal_weight_hold(&slice)?, &req)?;
        let names = slice.symbols();
        let mut contributions: Vec<(String, f64)> =
            names.iter().zip(best.contributions(0, slice.n_symbols())).map(|(s, c)| ((*s).to_owned(), c)).collect();
        contributions.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
        let audit = best.audit(&slice, &weights, 0).map(|a| a.to_string()).map_err(|e| e.to_string());
        std::fs::create_dir_all(&self.report_dir).map_err(Error::io(&self.report_dir))?;
        let ledger = self.report_dir.join("trades.csv");
        crate::table::write_table(&ledger, &best.fill_columns(&slice, &[0]))?;
        let equity = self.report_dir.join("equity.csv");
        let mut columns = best.equity_columns(&slice, &[0]);
        columns.extend(hold.equity_columns(&slice, &[0]).into_iter().filter(|(k, _)| k != "time" && k != "bar"));
        // The walk's own equity beside the backtest's (the same times: the walk's first value is the capital
        // at the first test time).
        if w.equity.len() == slice.n_times() {
            columns.push((format!("{name} walk"), crate::table::Column::Float(w.equity.clone())));
        }
        crate::table::write_table(&equity, &columns)?;
        let walk_final_equity = w.equity.last().copied().unwrap_or(f64::NAN);
        Ok(UniverseOutputs { best, hold, contributions, audit, walk_final_equity, files: vec![ledger, equity] })
    }
}

/// The evidence of a universe study on the account's returns: every finished trial's stored validation
/// and test actions walked again ([`replay`]), the universe's equal-weight buy-and-hold as the env holds it
/// (every symbol long from the first step, never rebalanced unless a symbol becomes tradable) as the
/// benchmark on both, judged by [`crate::evidence::evidence_of`].
pub fn universe_evidence(
    study: &Study,
    split: &UniverseSplit,
    cfg: &crate::hyperopt::SearchConfig,
) -> Result<Evidence, Error> {
    let planner = universe_planner(cfg, split.bars_per_year, split.train.len())?;
    let trials: Vec<TrialRecord> = study.trials()?.into_iter().filter(|t| t.ours).collect();
    let finished: Vec<&TrialRecord> =
        trials.iter().filter(|t| t.finished() && matches!(t.status.as_str(), "complete" | "pruned")).collect();
    let n = split.n_symbols();
    let returns = |times: &Range<usize>, test: bool| -> Result<Vec<TrialReturns>, Error> {
        let steps = times.len() - 1;
        let (mut numbers, mut params, mut actions) = (Vec::new(), Vec::new(), Vec::new());
        for t in &finished {
            let stored = if test { study.test_actions(t.number)? } else { study.valid_actions(t.number)? };
            let Some(a) = stored.filter(|a| a.len() == steps * n) else { continue };
            numbers.push(t.number);
            params.push(universe_env(&planner, &planner.read(&t.params)?, t.number)?);
            actions.push(a);
        }
        if numbers.is_empty() {
            return Ok(Vec::new());
        }
        let walks = replay(&split.data, &params, &actions, times)?;
        Ok(numbers.into_iter().zip(walks).map(|(number, w)| TrialReturns { number, returns: returns_of(&w) }).collect())
    };
    let (valid, test) = (returns(&split.valid, false)?, returns(&split.test, true)?);
    let hold_env = TrialParams {
        take_profit_mult: 0.0,
        stop_loss_mult: 0.0,
        max_hold_bars: 0,
        ..planner.env().audit_params().to_params()?
    };
    let hold = |times: &Range<usize>| -> Result<Vec<f64>, Error> {
        let codes = vec![vec![crate::Action::Long as u8; (times.len() - 1) * n]];
        Ok(returns_of(&replay(&split.data, &[hold_env], &codes, times)?[0]))
    };
    let all = SearchReturns { valid, test, hold_valid: hold(&split.valid)?, hold_test: hold(&split.test)? };
    crate::evidence::evidence_of(&trials, &all, cfg.study.seed, split.bars_per_year, 0.0)
}

/// Universe `u` on its calendar times `times` only: every symbol's bars there (a symbol without any is
/// left out).
pub fn time_slice(u: &Universe, times: &Range<usize>) -> Result<Universe, Error> {
    let (first, last) = (u.times[times.start], u.times[times.end - 1]);
    let series: Vec<Series> = u
        .series
        .iter()
        .map(|s| Series {
            symbol: s.symbol.clone(),
            bars: s.bars.iter().filter(|b| b.time >= first && b.time <= last).cloned().collect::<Vec<MarketBar>>(),
        })
        .filter(|s| !s.bars.is_empty())
        .collect();
    let dataset = Dataset { source: u.source.clone(), synthetic: u.synthetic, series };
    Universe::new(dataset, None)
}

/// The target weights of walk `w` (its steps from calendar time `start` of `u`) on `slice`, by the portfolio
/// env's rule (docs/ENVIRONMENT.md, "The portfolio env"): a step rebalances when, on some symbol that trades
/// at the next open, the chosen side (SHORT as FLAT without `allow_short`) differs from the side held; then
/// every symbol that trades there gets `side x (1 - cash_reserve) / k`, k the symbols whose chosen side is
/// not flat (those that cannot trade yet count: their share waits). After the drawdown breaker, the
/// positions that trade at the next open go to 0 whatever the actions, and nothing follows the walk's end
/// (halt or bankruptcy), as the env's account does. A symbol outside `slice` (no bar in it) cannot trade
/// and is left out.
pub fn walk_weights(
    u: &Universe,
    slice: &Universe,
    start: usize,
    w: &tradesim_host::universe::UniverseWalk,
    (cash_reserve, allow_short): (f64, bool),
    name: &str,
) -> Result<crate::data::weights::TargetWeights, Error> {
    let n = u.n_symbols().max(1);
    let mut rows: BTreeMap<(usize, usize), Decimal> = BTreeMap::new();
    let mut held = vec![0u8; n];
    for (j, (chosen, after)) in w.actions.chunks_exact(n).zip(w.sides.chunks_exact(n)).enumerate() {
        let t = start + j;
        let target: Vec<u8> = chosen.iter().map(|&d| if d == 2 && !allow_short { 0 } else { d }).collect();
        let trades = |s: usize| u.bar(t + 1, s).is_some();
        let before = if j == 0 { EnvStatus::Active } else { EnvStatus::from_code(u32::from(w.status[j - 1])) };
        if before.is_done() {
            // Bankrupt or halted: the walk's later steps change nothing.
            break;
        }
        if before == EnvStatus::HaltPending {
            // The drawdown breaker's close: every position that trades at the next open goes, whatever
            // the actions.
            for s in (0..n).filter(|&s| trades(s) && held[s] != 0) {
                rows.insert((t, s), Decimal::ZERO);
            }
        } else if (0..n).any(|s| trades(s) && target[s] != held[s]) {
            let k = target.iter().filter(|&&d| d != 0).count().max(1);
            let share = Decimal::from_f64((1.0 - cash_reserve) / k as f64).unwrap_or(Decimal::ZERO).round_dp(12);
            for s in (0..n).filter(|&s| trades(s)) {
                let weight = match target[s] {
                    1 => share,
                    2 => -share,
                    _ => Decimal::ZERO,
                };
                rows.insert((t, s), weight);
            }
        }
        held.copy_from_slice(after);
    }
    let rows = rows
        .into_iter()
        .filter(|((_, s), _)| slice.symbol_index(&u.series[*s].symbol).is_some())
        .enumerate()
        .map(|(i, ((t, s), weight))| crate::data::weights::WeightRow {
            row: i + 2,
            time: u.times[t],
            symbol: u.series[s].symbol.clone(),
            weights: vec![Some(weight)],
        })
        .collect();
    let table = crate::data::weights::WeightTable {
        file: name.to_owned(),
        portfolios: vec![name.to_owned()],
        time_column: "time".to_owned(),
        symbol_column: "symbol".to_owned(),
        rows,
    };
    crate::data::weights::TargetWeights::new(table, slice, true)
        .map_err(|report| Error::Data(format!("{name} on {}: {report}", slice.label())))
}
