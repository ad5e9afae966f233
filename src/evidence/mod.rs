//! Evidence that a search's result is skill, not luck, the market's drift or a simulator artifact: the
//! deflated Sharpe ratio of the best trial on validation, its probabilistic Sharpe ratio on the test split
//! (a hold-out, never searched) against 0 and in excess of buy-and-hold, Hansen's SPA and Romano and Wolf's
//! StepM over every trial against buy-and-hold, the probability of backtest overfitting over every trial's
//! per-bar validation returns, placebo searches on surrogate bars without any predictable direction, an
//! anchored walk-forward of the best configuration on bars after the validation split, and one plain
//! verdict built from them (docs/EVIDENCE.md).

pub mod html;
pub mod spa;
pub mod stats;
mod verdict;
pub mod walk_forward;
pub mod walk_forward_universe;

pub use verdict::{summary_text, verdict, verdict_before};

use serde::Serialize;

use crate::hyperopt::plan::{EnvDecimals, TrialPlanner};
use crate::hyperopt::ranking::leaderboard;
use crate::hyperopt::study::TrialRecord;
use crate::hyperopt::{SearchConfig, Study};
use crate::train::SplitData;
use crate::{Backend, BacktestSpec, Error, MarketData, Signals, TrialParams, backtest};

/// The deflated Sharpe ratio an answer needs on validation, and the probabilistic Sharpe ratio it needs on
/// the test split, in excess of buy-and-hold on the test split and over the walk-forward's folds, to count as
/// evidence.
pub const DSR_THRESHOLD: f64 = 0.95;
/// The SPA p-value (consistent, validation, against buy-and-hold) an answer needs to count as evidence.
pub const SPA_ALPHA: f64 = 0.05;
/// Bootstrap replications of SPA and StepM (Monte-Carlo standard error of a p-value near 0.05: 0.007).
pub const SPA_REPS: usize = 1_000;
/// The placebo p-value an answer needs to count as evidence.
pub const PLACEBO_ALPHA: f64 = 0.05;
/// The smallest number of placebo searches whose p-value can reach [`PLACEBO_ALPHA`]: `1 / (N + 1) <= 0.05`.
pub const MIN_PLACEBO: usize = 19;
/// Blocks of the combinatorially symmetric cross-validation (Bailey et al. 2015 use 16).
pub const PBO_BLOCKS: usize = 16;
/// Above this probability of backtest overfitting the verdict names it as a caveat.
pub const PBO_CAVEAT: f64 = 0.5;

/// The study user attribute of a placebo study naming the study it is the placebo of.
pub const PLACEBO_OF_ATTR: &str = "tradesim_placebo_of";
/// The study user attribute of a placebo study holding its index (the surrogate's key).
pub const PLACEBO_INDEX_ATTR: &str = "tradesim_placebo_index";
/// The study user attribute holding the whole [`Evidence`] as JSON.
pub const EVIDENCE_ATTR: &str = "tradesim_evidence";

/// The placebo p-value: `(1 + #{placebo best test Sharpe >= real}) / (N + 1)`, a placebo search without a
/// best trial counting as below; 1 when the real best has no test Sharpe. With N searches the smallest
/// value is `1 / (N + 1)`.
pub fn placebo_p_value(real_test_sharpe: f64, searches: &[PlaceboSearch]) -> f64 {
    if !real_test_sharpe.is_finite() {
        return 1.0;
    }
    let at_least = searches.iter().filter(|p| p.best_test_sharpe >= real_test_sharpe).count();
    (1 + at_least) as f64 / (searches.len() + 1) as f64
}

/// Writes the evidence into the study as user attributes, where optuna-dashboard shows them: the verdict
/// line (`verdict`), the headline numbers (`deflated_sharpe_valid`, `deflated_sharpe_test` (the test's PSR:
/// its DSR with one trial), `pbo`, `placebo_p_value`, `walk_forward_mean_sharpe`, `walk_forward_psr`,
/// `walk_forward_search_psr` (walk-forward optimisation's out-of-sample PSR),
/// `buy_and_hold_test_sharpe`, `flat_test_sharpe`, `excess_psr_test`, `spa_p_value`; null when not
/// computed) and the whole of it as JSON
/// ([`EVIDENCE_ATTR`]).
pub fn record(study: &Study, e: &Evidence) -> Result<(), Error> {
    let num = |x: Option<f64>| crate::json::number(x.unwrap_or(f64::NAN)).to_string();
    let folds = &e.walk_forward;
    let wf_mean = (!folds.is_empty()).then(|| folds.iter().map(|f| f.sharpe).sum::<f64>() / folds.len() as f64);
    study.set_study_attr("verdict", serde_json::json!(e.verdict.line).to_string())?;
    study.set_study_attr("deflated_sharpe_valid", num(e.valid.as_ref().map(|s| s.dsr)))?;
    study.set_study_attr("deflated_sharpe_test", num(e.test.as_ref().map(|s| s.dsr)))?;
    study.set_study_attr("pbo", num(e.pbo.as_ref().ok().map(|p| p.pbo)))?;
    study.set_study_attr("placebo_p_value", num(e.placebo.as_ref().map(|p| p.p_value)))?;
    study.set_study_attr("walk_forward_mean_sharpe", num(wf_mean))?;
    study.set_study_attr("walk_forward_psr", num(e.walk_forward_unseen.as_ref().map(|s| s.psr)))?;
    study.set_study_attr("walk_forward_search_psr", num(e.walk_forward_search_oos.as_ref().map(|s| s.psr)))?;
    study.set_study_attr("buy_and_hold_test_sharpe", num(e.baselines.as_ref().map(|b| b.buy_and_hold_test_sharpe)))?;
    study.set_study_attr("flat_test_sharpe", num(e.baselines.as_ref().map(|b| b.flat_test_sharpe)))?;
    study.set_study_attr("excess_psr_test", num(e.baselines.as_ref().map(|b| b.excess.psr)))?;
    study.set_study_attr("spa_p_value", num(e.spa_valid.as_ref().map(|s| s.result.consistent)))?;
    study.set_study_attr(EVIDENCE_ATTR, crate::json::text(&to_json(e)))
}

/// The evidence as JSON (NaN and infinities as `crate::json` writes them; the PBO logits summarized as a
/// histogram).
pub fn to_json(e: &Evidence) -> serde_json::Value {
    let mut v = serde_json::to_value(e).unwrap_or(serde_json::Value::Null);
    if let (Some(obj), Err(why)) = (v.as_object_mut(), &e.pbo) {
        obj.insert("pbo".to_owned(), serde_json::json!({ "error": why.to_string() }));
    }
    if let (Some(obj), Ok(p)) = (v.as_object_mut(), &e.pbo) {
        let hist: Vec<serde_json::Value> = stats::logit_histogram(&p.logits, 20)
            .into_iter()
            .map(|(lo, hi, n)| serde_json::json!({"from": lo, "to": hi, "splits": n}))
            .collect();
        obj.insert(
            "pbo".to_owned(),
            serde_json::json!({
                "pbo": crate::json::number(p.pbo),
                "trials": p.trials,
                "bars": p.bars,
                "blocks": p.blocks,
                "splits": p.logits.len(),
                "degradation_slope": crate::json::number(p.degradation_slope),
                "prob_loss": crate::json::number(p.prob_loss),
                "logit_histogram": hist,
            }),
        );
    }
    v
}

/// A Sharpe ratio with what deflates it (Bailey and López de Prado 2014).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SharpeEvidence {
    /// Per-bar Sharpe ratio of the returns.
    pub sharpe_per_bar: f64,
    /// Annualized (`x sqrt(bars per year)`).
    pub sharpe_annual: f64,
    /// Returns (bars - 1).
    pub n_obs: usize,
    /// Skewness of the returns.
    pub skew: f64,
    /// Kurtosis of the returns (not excess: 3 for a normal).
    pub kurtosis: f64,
    /// Trials the search tried (the N of the deflation).
    pub trials: usize,
    /// Variance of the trials' per-bar validation Sharpe ratios.
    pub var_sharpe: f64,
    /// The expected maximum per-bar Sharpe of `trials` skill-less trials (the benchmark SR0).
    pub sr0_per_bar: f64,
    /// SR0 annualized.
    pub sr0_annual: f64,
    /// The deflated Sharpe ratio: the probability that the true Sharpe exceeds SR0.
    pub dsr: f64,
    /// The probabilistic Sharpe ratio against 0 (no deflation).
    pub psr: f64,
    /// Minimum track record length (bars) for the Sharpe to exceed SR0 at 95% confidence.
    pub min_track_record: f64,
}

/// Probability of backtest overfitting by CSCV.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PboEvidence {
    /// PBO: the share of splits whose in-sample best ranks at or below the median out of sample.
    pub pbo: f64,
    /// Trials in the matrix.
    pub trials: usize,
    /// Bars per trial.
    pub bars: usize,
    /// Blocks S.
    pub blocks: usize,
    /// Every split's logit of the selected trial's out-of-sample relative rank.
    pub logits: Vec<f64>,
    /// Slope of the out-of-sample against the in-sample Sharpe of the selected trial.
    pub degradation_slope: f64,
    /// Share of splits whose selected trial loses out of sample.
    pub prob_loss: f64,
}

/// One placebo search: the same search on surrogate bars.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlaceboSearch {
    /// Its index (1..=N): the surrogate's key.
    pub index: u64,
    /// Its study's name (beside the real one in the same storage).
    pub study: String,
    /// Its best trial (by validation score).
    pub best_trial: Option<u64>,
    /// That trial's validation score (its value: the validation Sharpe's one-sided 95% lower bound).
    pub best_valid_sharpe: f64,
    /// That trial's test Sharpe.
    pub best_test_sharpe: f64,
}

impl PlaceboSearch {
    /// Placebo search `index` after it ran in `study` (named `name`): its best complete trial by
    /// validation score.
    pub fn of_study(index: u64, name: String, study: &crate::hyperopt::Study) -> Result<Self, crate::Error> {
        let board = crate::hyperopt::ranking::study_leaderboard(study)?;
        let best = board.first().filter(|t| t.status == "complete" && t.value.is_finite());
        Ok(Self {
            index,
            study: name,
            best_trial: best.map(|t| t.number),
            best_valid_sharpe: best.map_or(f64::NAN, |t| t.value),
            best_test_sharpe: best.map_or(f64::NAN, |t| t.test_sharpe),
        })
    }
}

/// The placebo searches and the real best's rank among them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlaceboEvidence {
    /// The searches.
    pub searches: Vec<PlaceboSearch>,
    /// `(1 + placebo bests with a test Sharpe >= the real best's) / (N + 1)`; 1 when the real best has none.
    pub p_value: f64,
}

/// One walk-forward fold of the best configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fold {
    /// Fold number (from 1).
    pub fold: usize,
    /// Training bars (series indices, anchored at the split's first training bar: the first after the
    /// feature warm-up on a single series, the calendar's first time on a universe).
    pub train: (usize, usize),
    /// Tested bars.
    pub test: (usize, usize),
    /// Whether the search's validation split covers some of the tested bars (the configuration was chosen
    /// on them).
    pub seen_by_search: bool,
    /// Annualized Sharpe of the greedy policy on the fold (0 when it never traded).
    pub sharpe: f64,
    /// Total return on the fold.
    pub total_return: f64,
    /// Maximum drawdown on the fold.
    pub max_drawdown: f64,
    /// Trades on the fold.
    pub trades: u32,
    /// The greedy policy's per-bar returns on the fold (for the concatenated PSR; not serialized).
    #[serde(skip)]
    pub returns: Vec<f64>,
}

/// Why PBO was not computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PboUnavailable {
    /// Fewer than two trials have validation returns.
    #[error("{0} trial(s) with validation returns: CSCV needs at least 2")]
    TooFewTrials(usize),
    /// CSCV refused the matrix (its message).
    #[error("{0}")]
    Cscv(String),
}

/// One fold of walk-forward optimisation: the whole search run again on the fold's past, its winner
/// (chosen on the past's validation part) tested on the fold's bars.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchFold {
    /// Fold number (from 1).
    pub fold: usize,
    /// The fold search's training bars (series indices).
    pub train: (usize, usize),
    /// The fold search's validation bars (the end of the fold's past).
    pub valid: (usize, usize),
    /// The tested bars (the fold's future).
    pub test: (usize, usize),
    /// The fold's study.
    pub study: String,
    /// Its winning trial (none when no trial completed).
    pub trial: Option<u64>,
    /// The winner's parameters.
    pub params: crate::hyperopt::sampler::Params,
    /// The winner's validation score (the search's objective).
    pub valid_score: f64,
    /// Annualized Sharpe of the winner's greedy policy on the fold (0 when it never traded or nothing won).
    pub sharpe: f64,
    /// Total return on the fold.
    pub total_return: f64,
    /// The winner's per-bar returns on the fold (for the concatenated PSR; not serialized).
    #[serde(skip)]
    pub returns: Vec<f64>,
}

/// The verdict: whether the search's answer is evidence of skill, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// `true`: every criterion of docs/EVIDENCE.md holds.
    pub evidence: bool,
    /// One line starting with `evidence` or `no evidence`.
    pub line: String,
}

/// What the market offered on the test split without any skill, beside the best trial.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Baselines {
    /// Annualized test Sharpe of buy-and-hold: long from the first bar to the last, the search's costs, no
    /// barriers.
    pub buy_and_hold_test_sharpe: f64,
    /// Annualized test Sharpe of staying flat: 0 (no returns; a policy that never trades scores 0).
    pub flat_test_sharpe: f64,
    /// The best trial's annualized test Sharpe (NaN when it never traded).
    pub best_test_sharpe: f64,
    /// The best trial's per-bar test returns minus buy-and-hold's: their PSR against 0 (one trial).
    pub excess: SharpeEvidence,
}

/// SPA and StepM over every finished trial against buy-and-hold on one split.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpaEvidence {
    /// The split (`validation` or `test`).
    pub split: String,
    /// The p-values and StepM's superior models (indices into `trials`).
    pub result: spa::SpaResult,
    /// The trials compared, in the order of the models.
    pub trials: Vec<u64>,
    /// The trials StepM shows to beat buy-and-hold (family-wise error rate 0.05).
    pub superior_trials: Vec<u64>,
}

/// Everything a search's answer comes with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// The best trial (by validation Sharpe, complete trials first).
    pub best_trial: Option<u64>,
    /// Its validation returns, deflated for the search's trials.
    pub valid: Option<SharpeEvidence>,
    /// Its test returns as a hold-out: one trial, so SR0 = 0 and the DSR is the PSR against 0.
    pub test: Option<SharpeEvidence>,
    /// Its test DSR deflated as if the test split had been searched (the search's trials and variance): the
    /// previous rule's gate (issue 41), kept so that [`verdict_before`] can be computed.
    pub test_dsr_as_searched: Option<f64>,
    /// Buy-and-hold, flat and the best trial on the test split, and the best trial's excess over buy-and-hold.
    pub baselines: Option<Baselines>,
    /// SPA and StepM over the trials' validation returns against buy-and-hold's.
    pub spa_valid: Option<SpaEvidence>,
    /// SPA and StepM over the trials' test returns against buy-and-hold's (reported, not a gate).
    pub spa_test: Option<SpaEvidence>,
    /// The PSR of the walk-forward folds' concatenated per-bar returns on bars the search never saw.
    pub walk_forward_unseen: Option<SharpeEvidence>,
    /// PBO over the trials' validation returns, or why it could not be computed.
    #[serde(skip)]
    pub pbo: Result<PboEvidence, PboUnavailable>,
    /// The placebo searches (none when `placebo = 0`).
    pub placebo: Option<PlaceboEvidence>,
    /// The walk-forward folds (none when `walk_forward = 0`).
    pub walk_forward: Vec<Fold>,
    /// Walk-forward optimisation's folds (none when `walk_forward_search = 0`).
    pub walk_forward_search: Vec<SearchFold>,
    /// PSR against 0 of the folds' winners' concatenated out-of-sample returns (each winner chosen on bars
    /// before its fold: no selection on these bars), when there are at least 3.
    pub walk_forward_search_oos: Option<SharpeEvidence>,
    /// The barrier floor applied to the trials, in multiples of sigma.
    pub barrier_floor_mult: f64,
    /// The verdict.
    pub verdict: Verdict,
    /// The verdict of the previous rule (issue 41's gates: test deflated as searched, no benchmark, no SPA,
    /// walk-forward mean Sharpe > 0), for measuring both on the same runs (`tradesim bench power`).
    pub verdict_before: Verdict,
}

/// A finished trial's per-bar returns on a split, from its stored greedy actions.
#[derive(Clone, Debug)]
pub struct TrialReturns {
    /// The trial.
    pub number: u64,
    /// Simple per-bar returns of its equity.
    pub returns: Vec<f64>,
}

/// Backtests `actions` (`columns x (bars - 1)`) on `market` with `params`: each column's equity curve as
/// simple per-bar returns.
pub fn returns_of(
    backend: &Backend,
    market: &MarketData,
    params: &[TrialParams],
    actions: &[u8],
) -> Result<Vec<Vec<f64>>, Error> {
    let steps = market.n_bars() - 1;
    let spec = BacktestSpec { start: 0, end: steps, bars_per_year: 1.0, risk_free: 0.0, ledger: false, equity: true };
    let backend = backend.for_replay(params.len(), steps);
    let r = backtest(backend, market, params, Signals::Targets { targets: actions, columns: params.len() }, &spec)?;
    let per = steps + 1;
    Ok((0..params.len()).map(|c| stats::returns_from_equity(&r.equity[c * per..(c + 1) * per])).collect())
}

/// Every finished trial of `study` (tradesim's, complete or pruned, with stored actions of the split's
/// length) and its per-bar returns on the validation split (`test = false`) or the test split.
pub fn trial_returns(
    backend: &Backend,
    study: &Study,
    trials: &[TrialRecord],
    data: &SplitData,
    planner: &TrialPlanner,
    test: bool,
) -> Result<Vec<TrialReturns>, Error> {
    let market = if test { &data.test } else { &data.valid };
    let steps = market.n_bars() - 1;
    let (mut numbers, mut params, mut actions) = (Vec::new(), Vec::new(), Vec::new());
    for t in trials.iter().filter(|t| t.ours && t.finished() && matches!(t.status.as_str(), "complete" | "pruned")) {
        let stored = if test { study.test_actions(t.number)? } else { study.valid_actions(t.number)? };
        let Some(a) = stored.filter(|a| a.len() == steps) else { continue };
        numbers.push(t.number);
        params.push(planner.trial_env(&planner.read(&t.params)?, t.number)?);
        actions.extend_from_slice(&a);
    }
    if numbers.is_empty() {
        return Ok(Vec::new());
    }
    let returns = returns_of(backend, market, &params, &actions)?;
    // An account at zero equity (bankrupt) earns nothing from then on.
    let finite = |r: Vec<f64>| r.into_iter().map(|x| if x.is_finite() { x } else { 0.0 }).collect();
    Ok(numbers.into_iter().zip(returns).map(|(number, r)| TrialReturns { number, returns: finite(r) }).collect())
}

/// The deflated Sharpe of `returns` for a search of `trials` trials whose per-bar validation Sharpes have
/// variance `var_sharpe`.
pub fn sharpe_evidence(returns: &[f64], trials: usize, var_sharpe: f64, bars_per_year: f64) -> SharpeEvidence {
    let sr = stats::sharpe(returns);
    let (skew, kurtosis) = (stats::skewness(returns), stats::kurtosis(returns));
    let n = returns.len();
    let sr0 = stats::expected_max_sharpe(trials, var_sharpe);
    SharpeEvidence {
        sharpe_per_bar: sr,
        sharpe_annual: sr * bars_per_year.sqrt(),
        n_obs: n,
        skew,
        kurtosis,
        trials,
        var_sharpe,
        sr0_per_bar: sr0,
        sr0_annual: sr0 * bars_per_year.sqrt(),
        dsr: stats::probabilistic_sharpe(sr, sr0, n, skew, kurtosis),
        psr: stats::probabilistic_sharpe(sr, 0.0, n, skew, kurtosis),
        min_track_record: stats::min_track_record_length(sr, sr0, skew, kurtosis, DSR_THRESHOLD),
    }
}

/// The sample variance of the finite values.
fn variance(xs: &[f64]) -> f64 {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64
}

/// Buy-and-hold's per-bar returns on `market`: long at every decision, the search's costs and account, no
/// barriers.
pub fn hold_returns(backend: &Backend, market: &MarketData, env: &EnvDecimals) -> Result<Vec<f64>, Error> {
    let steps = market.n_bars() - 1;
    let params = env.audit_params().to_params()?;
    let mut r = returns_of(backend, market, &[params], &vec![crate::Action::Long as u8; steps])?;
    Ok(r.pop().unwrap_or_default())
}

/// SPA and StepM of `trials` against `benchmark` (the study's seed, [`SPA_REPS`] replications, the default
/// block length, studentized); `None` without trials.
fn spa_of(split: &str, trials: &[TrialReturns], benchmark: &[f64], seed: u64) -> Result<Option<SpaEvidence>, Error> {
    if trials.is_empty() || benchmark.len() < 3 {
        return Ok(None);
    }
    let cfg = spa::SpaConfig {
        reps: SPA_REPS,
        block: spa::default_block(benchmark.len()),
        seed,
        studentize: true,
        size: SPA_ALPHA,
    };
    let models: Vec<Vec<f64>> = trials.iter().map(|t| t.returns.clone()).collect();
    let result = spa::spa(&models, benchmark, &cfg)?;
    let numbers: Vec<u64> = trials.iter().map(|t| t.number).collect();
    let superior_trials = result.superior.iter().map(|&i| numbers[i]).collect();
    Ok(Some(SpaEvidence { split: split.to_owned(), result, trials: numbers, superior_trials }))
}

/// The search's own evidence (everything but the placebo searches and the walk-forward): the best trial's
/// deflated Sharpe on validation (N = every finished trial, failed ones included), its PSR on the test
/// split against 0 and in excess of buy-and-hold, SPA and StepM over every trial against buy-and-hold, and
/// PBO over every trial's validation returns.
pub fn assess(
    backend: &Backend,
    study: &Study,
    data: &SplitData,
    cfg: &SearchConfig,
    bars_per_year: f64,
) -> Result<Evidence, Error> {
    let planner = TrialPlanner::for_search(cfg, bars_per_year, &data.train)?;
    let env = planner.env();
    let trials: Vec<TrialRecord> = study.trials()?.into_iter().filter(|t| t.ours).collect();
    let valid = trial_returns(backend, study, &trials, data, &planner, false)?;
    let test = trial_returns(backend, study, &trials, data, &planner, true)?;
    let (hold_valid, hold_test) = (hold_returns(backend, &data.valid, env)?, hold_returns(backend, &data.test, env)?);
    let returns = SearchReturns { valid, test, hold_valid, hold_test };
    evidence_of(&trials, &returns, cfg.study.seed, bars_per_year, env.barrier_floor_mult)
}

/// A search's trials' per-bar returns on validation and test, and the benchmark's (buy-and-hold's) on both:
/// what [`evidence_of`] judges.
#[derive(Clone, Debug)]
pub struct SearchReturns {
    /// Every finished trial's validation returns.
    pub valid: Vec<TrialReturns>,
    /// Every finished trial's test returns.
    pub test: Vec<TrialReturns>,
    /// The benchmark's validation returns.
    pub hold_valid: Vec<f64>,
    /// The benchmark's test returns.
    pub hold_test: Vec<f64>,
}

/// [`assess`] from the trials' returns: `trials` (tradesim's) rank the best, `returns` are judged, `seed`
/// keys SPA's bootstrap; `barrier_floor_mult` is reported as it is.
pub fn evidence_of(
    trials: &[TrialRecord],
    returns: &SearchReturns,
    seed: u64,
    bars_per_year: f64,
    barrier_floor_mult: f64,
) -> Result<Evidence, Error> {
    let SearchReturns { valid, test, hold_valid, hold_test } = returns;
    let tried = trials.iter().filter(|t| t.finished()).count();
    let board = leaderboard(trials.to_vec());
    let best = board.first().filter(|t| t.status == "complete" && t.value.is_finite()).map(|t| t.number);
    let sharpes: Vec<f64> = valid.iter().map(|t| stats::sharpe(&t.returns)).collect();
    let var_sharpe = variance(&sharpes);
    let (mut valid_evidence, mut test_evidence, mut as_searched, mut baselines) = (None, None, None, None);
    if let Some(number) = best {
        if let Some(t) = valid.iter().find(|t| t.number == number) {
            valid_evidence = Some(sharpe_evidence(&t.returns, tried, var_sharpe, bars_per_year));
        }
        if let Some(t) = test.iter().find(|t| t.number == number) {
            test_evidence = Some(sharpe_evidence(&t.returns, 1, 0.0, bars_per_year));
            as_searched = Some(sharpe_evidence(&t.returns, tried, var_sharpe, bars_per_year).dsr);
            let excess: Vec<f64> = t.returns.iter().zip(hold_test).map(|(a, b)| a - b).collect();
            baselines = Some(Baselines {
                buy_and_hold_test_sharpe: stats::sharpe(hold_test) * bars_per_year.sqrt(),
                flat_test_sharpe: 0.0,
                best_test_sharpe: stats::sharpe(&t.returns) * bars_per_year.sqrt(),
                excess: sharpe_evidence(&excess, 1, 0.0, bars_per_year),
            });
        }
    }
    let pbo = pbo_of(valid);
    let none = Verdict { evidence: false, line: String::new() };
    let mut evidence = Evidence {
        best_trial: best,
        valid: valid_evidence,
        test: test_evidence,
        test_dsr_as_searched: as_searched,
        baselines,
        spa_valid: spa_of("validation", valid, hold_valid, seed)?,
        spa_test: spa_of("test", test, hold_test, seed)?,
        walk_forward_unseen: None,
        pbo,
        placebo: None,
        walk_forward: Vec::new(),
        walk_forward_search: Vec::new(),
        walk_forward_search_oos: None,
        barrier_floor_mult,
        verdict: none.clone(),
        verdict_before: none,
    };
    evidence.verdict = verdict(&evidence);
    evidence.verdict_before = verdict_before(&evidence);
    Ok(evidence)
}

/// The walk-forward's folds and the PSR of their concatenated per-bar returns over the folds the search
/// never saw (`None` when there is none).
pub fn set_walk_forward(e: &mut Evidence, folds: Vec<Fold>, bars_per_year: f64) {
    let unseen: Vec<f64> = folds.iter().filter(|f| !f.seen_by_search).flat_map(|f| f.returns.iter().copied()).collect();
    e.walk_forward_unseen = (unseen.len() >= 3).then(|| sharpe_evidence(&unseen, 1, 0.0, bars_per_year));
    e.walk_forward = folds;
}

/// A fold winner's parameters as a line: `name=value`, whole numbers for integer parameters, four
/// significant digits otherwise.
pub fn params_line(params: &crate::hyperopt::sampler::Params) -> String {
    let value = |k: &str, v: f64| {
        if crate::hyperopt::config::is_integer(k) {
            format!("{v:.0}")
        } else if v != 0.0 && v.abs() < 0.01 {
            format!("{v:.3e}")
        } else {
            format!("{v:.4}")
        }
    };
    params.iter().map(|(k, v)| format!("{k}={}", value(k, *v))).collect::<Vec<_>>().join(" ")
}

/// Records walk-forward optimisation's folds and the PSR of their concatenated out-of-sample returns.
pub fn set_walk_forward_search(e: &mut Evidence, folds: Vec<SearchFold>, bars_per_year: f64) {
    let oos: Vec<f64> = folds.iter().flat_map(|f| f.returns.iter().copied()).collect();
    e.walk_forward_search_oos = (oos.len() >= 3).then(|| sharpe_evidence(&oos, 1, 0.0, bars_per_year));
    e.walk_forward_search = folds;
}

/// PBO by CSCV over the trials' validation returns ([`PBO_BLOCKS`] blocks, fewer when the bars are few).
fn pbo_of(valid: &[TrialReturns]) -> Result<PboEvidence, PboUnavailable> {
    if valid.len() < 2 {
        return Err(PboUnavailable::TooFewTrials(valid.len()));
    }
    let bars = valid[0].returns.len();
    let mut blocks = PBO_BLOCKS;
    while blocks > 2 && bars < blocks * 8 {
        blocks -= 2;
    }
    let matrix: Vec<f64> = valid.iter().flat_map(|t| t.returns.iter().copied()).collect();
    let r = stats::pbo_cscv(&matrix, valid.len(), bars, blocks).map_err(|e| PboUnavailable::Cscv(e.to_string()))?;
    Ok(PboEvidence {
        pbo: r.pbo,
        trials: valid.len(),
        bars,
        blocks,
        logits: r.logits.clone(),
        degradation_slope: r.degradation_slope,
        prob_loss: r.prob_loss,
    })
}
