//! Evidence that a search's result is skill, not luck or a simulator artifact: the deflated Sharpe ratio of
//! the best trial on validation and test, the probability of backtest overfitting over every trial's
//! per-bar validation returns, placebo searches on surrogate bars without any predictable direction, an
//! anchored walk-forward of the best configuration, and one plain verdict built from them
//! (docs/EVIDENCE.md).

pub mod html;
pub mod stats;
pub mod walk;

use serde::Serialize;

use crate::hyperopt::ranking::leaderboard;
use crate::hyperopt::search::{EnvDecimals, env_params};
use crate::hyperopt::study::TrialRecord;
use crate::hyperopt::{SearchConfig, Study};
use crate::train::SplitData;
use crate::{Backend, BacktestSpec, Error, MarketData, Signals, TrialParams, backtest};

/// The deflated Sharpe ratio an answer needs (on validation and on test) to count as evidence.
pub const DSR_THRESHOLD: f64 = 0.95;
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
/// line (`verdict`), the headline numbers (`deflated_sharpe_valid`, `deflated_sharpe_test`, `pbo`,
/// `placebo_p_value`, `walk_forward_mean_sharpe`; null when not computed) and the whole of it as JSON
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
    study.set_study_attr(EVIDENCE_ATTR, crate::json::text(&to_json(e)))
}

/// The evidence as JSON (NaN and infinities as `crate::json` writes them; the PBO logits summarized as a
/// histogram).
pub fn to_json(e: &Evidence) -> serde_json::Value {
    let mut v = serde_json::to_value(e).unwrap_or(serde_json::Value::Null);
    if let (Some(obj), Err(why)) = (v.as_object_mut(), &e.pbo) {
        obj.insert("pbo".to_owned(), serde_json::json!({ "error": why }));
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
    /// Its best trial (by validation Sharpe).
    pub best_trial: Option<u64>,
    /// That trial's validation Sharpe.
    pub best_valid_sharpe: f64,
    /// That trial's test Sharpe.
    pub best_test_sharpe: f64,
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
    /// Training bars (series indices, anchored at the first bar after the feature warm-up).
    pub train: (usize, usize),
    /// Tested bars.
    pub test: (usize, usize),
    /// Whether the search's validation split covers some of the tested bars (the configuration was chosen
    /// on them).
    pub seen_by_search: bool,
    /// Annualized Sharpe of the greedy policy on the fold.
    pub sharpe: f64,
    /// Total return on the fold.
    pub total_return: f64,
    /// Maximum drawdown on the fold.
    pub max_drawdown: f64,
    /// Trades on the fold.
    pub trades: u32,
}

/// The verdict: whether the search's answer is evidence of skill, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// `true`: every criterion of docs/EVIDENCE.md holds.
    pub evidence: bool,
    /// One line starting with `evidence` or `no evidence`.
    pub line: String,
}

/// Everything a search's answer comes with.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// The best trial (by validation Sharpe, complete trials first).
    pub best_trial: Option<u64>,
    /// Its validation returns, deflated.
    pub valid: Option<SharpeEvidence>,
    /// Its test returns, deflated by the same trials.
    pub test: Option<SharpeEvidence>,
    /// PBO over the trials' validation returns, or why it could not be computed.
    pub pbo: Result<PboEvidence, String>,
    /// The placebo searches (none when `placebo = 0`).
    pub placebo: Option<PlaceboEvidence>,
    /// The walk-forward folds (none when `walk_forward = 0`).
    pub walk_forward: Vec<Fold>,
    /// The barrier floor applied to the trials, in multiples of sigma.
    pub barrier_floor_mult: f64,
    /// The verdict.
    pub verdict: Verdict,
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
    env: &EnvDecimals,
    test: bool,
) -> Result<Vec<TrialReturns>, Error> {
    let market = if test { &data.test } else { &data.valid };
    let steps = market.n_bars() - 1;
    let (mut numbers, mut params, mut actions) = (Vec::new(), Vec::new(), Vec::new());
    for t in trials.iter().filter(|t| t.ours && t.finished() && matches!(t.status.as_str(), "complete" | "pruned")) {
        let stored = if test { study.test_actions(t.number)? } else { study.valid_actions(t.number)? };
        let Some(a) = stored.filter(|a| a.len() == steps) else { continue };
        numbers.push(t.number);
        params.push(TrialParams { key: t.number, ..env_params(&t.params, env)? });
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

/// The search's own evidence (everything but the placebo searches and the walk-forward): the best trial's
/// deflated Sharpe on validation and test, and PBO over every trial's validation returns.
pub fn assess(
    backend: &Backend,
    study: &Study,
    data: &SplitData,
    cfg: &SearchConfig,
    bars_per_year: f64,
) -> Result<Evidence, Error> {
    let env = EnvDecimals::parse(&cfg.env)?.with_floor(&cfg.env, &data.train);
    let trials: Vec<TrialRecord> = study.trials()?.into_iter().filter(|t| t.ours).collect();
    let tried = trials.iter().filter(|t| t.finished()).count();
    let board = leaderboard(trials.clone());
    let best = board.first().filter(|t| t.status == "complete" && t.value.is_finite()).map(|t| t.number);
    let valid = trial_returns(backend, study, &trials, data, &env, false)?;
    let sharpes: Vec<f64> = valid.iter().map(|t| stats::sharpe(&t.returns)).collect();
    let var_sharpe = variance(&sharpes);
    let (mut valid_evidence, mut test_evidence) = (None, None);
    if let Some(number) = best {
        if let Some(t) = valid.iter().find(|t| t.number == number) {
            valid_evidence = Some(sharpe_evidence(&t.returns, tried, var_sharpe, bars_per_year));
        }
        let best_record: Vec<TrialRecord> = trials.iter().filter(|t| t.number == number).cloned().collect();
        if let Some(t) = trial_returns(backend, study, &best_record, data, &env, true)?.first() {
            test_evidence = Some(sharpe_evidence(&t.returns, tried, var_sharpe, bars_per_year));
        }
    }
    let pbo = pbo_of(&valid);
    let mut evidence = Evidence {
        best_trial: best,
        valid: valid_evidence,
        test: test_evidence,
        pbo,
        placebo: None,
        walk_forward: Vec::new(),
        barrier_floor_mult: env.barrier_floor_mult,
        verdict: Verdict { evidence: false, line: String::new() },
    };
    evidence.verdict = verdict(&evidence);
    Ok(evidence)
}

/// PBO by CSCV over the trials' validation returns ([`PBO_BLOCKS`] blocks, fewer when the bars are few).
fn pbo_of(valid: &[TrialReturns]) -> Result<PboEvidence, String> {
    if valid.len() < 2 {
        return Err(format!("{} trial(s) with validation returns: CSCV needs at least 2", valid.len()));
    }
    let bars = valid[0].returns.len();
    let mut blocks = PBO_BLOCKS;
    while blocks > 2 && bars < blocks * 8 {
        blocks -= 2;
    }
    let matrix: Vec<f64> = valid.iter().flat_map(|t| t.returns.iter().copied()).collect();
    let r = stats::pbo_cscv(&matrix, valid.len(), bars, blocks).map_err(|e| e.to_string())?;
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

/// The verdict of docs/EVIDENCE.md: `evidence` when the best trial's deflated Sharpe is at least
/// [`DSR_THRESHOLD`] on validation and on test, at least [`MIN_PLACEBO`] placebo searches put it at
/// p <= [`PLACEBO_ALPHA`], and a walk-forward (when run) has a positive mean Sharpe; otherwise `no evidence`
/// with every reason. PBO above [`PBO_CAVEAT`] is named as a caveat either way.
pub fn verdict(e: &Evidence) -> Verdict {
    let mut failed: Vec<String> = Vec::new();
    let mut held: Vec<String> = Vec::new();
    if e.best_trial.is_none() {
        failed.push("no complete trial with a validation Sharpe".to_owned());
    }
    for (split, s) in [("validation", &e.valid), ("test", &e.test)] {
        match s {
            Some(s) if s.dsr >= DSR_THRESHOLD => held.push(format!("{split} DSR {:.2}", s.dsr)),
            Some(s) => failed.push(format!(
                "{split} DSR {:.2} < {DSR_THRESHOLD} (Sharpe {:.2} a year against {:.2} expected from the best of {} \
                 skill-less trials)",
                s.dsr, s.sharpe_annual, s.sr0_annual, s.trials
            )),
            None if e.best_trial.is_some() => failed.push(format!("no {split} returns for the best trial")),
            None => {}
        }
    }
    match &e.placebo {
        None => failed.push(format!("no placebo searches (run --placebo {MIN_PLACEBO} or more)")),
        Some(p) if p.searches.len() < MIN_PLACEBO => failed.push(format!(
            "{} placebo searches cannot show p <= {PLACEBO_ALPHA} (the smallest p is 1/(N+1); run --placebo {MIN_PLACEBO} \
             or more); p = {:.2}",
            p.searches.len(),
            p.p_value
        )),
        Some(p) if p.p_value <= PLACEBO_ALPHA => held.push(format!("placebo p {:.3}", p.p_value)),
        Some(p) => failed.push(format!(
            "placebo p {:.2} > {PLACEBO_ALPHA}: searches on bars without any predictable direction did as well",
            p.p_value
        )),
    }
    if !e.walk_forward.is_empty() {
        let mean = e.walk_forward.iter().map(|f| f.sharpe).sum::<f64>() / e.walk_forward.len() as f64;
        if mean > 0.0 {
            held.push(format!("walk-forward mean Sharpe {mean:.2}"));
        } else {
            failed.push(format!("walk-forward mean Sharpe {mean:.2} <= 0 over {} folds", e.walk_forward.len()));
        }
    }
    let caveat = match &e.pbo {
        Ok(p) if p.pbo > PBO_CAVEAT => {
            format!("; caveat: PBO {:.2} (the in-sample best usually ranks below the median out of sample)", p.pbo)
        }
        Ok(p) => format!("; PBO {:.2}", p.pbo),
        Err(why) => format!("; PBO not computed ({why})"),
    };
    if failed.is_empty() {
        Verdict { evidence: true, line: format!("evidence: {}{caveat}", held.join(", ")) }
    } else {
        Verdict { evidence: false, line: format!("no evidence: {}{caveat}", failed.join("; ")) }
    }
}

/// The evidence as the command line prints it after the leaderboard: one line per part, then the verdict.
pub fn summary_text(e: &Evidence) -> String {
    use std::fmt::Write;
    let mut out = String::from("can this be trusted? (docs/EVIDENCE.md)\n");
    for (split, s) in [("validation", &e.valid), ("test", &e.test)] {
        if let Some(s) = s {
            let _ = writeln!(
                out,
                "  {split:<10} Sharpe {:.2} a year over {} bars; deflated for {} trials (SR0 {:.2}): DSR {:.3}, PSR {:.3}, \
                 minimum track record {} bars",
                s.sharpe_annual,
                s.n_obs,
                s.trials,
                s.sr0_annual,
                s.dsr,
                s.psr,
                if s.min_track_record.is_finite() { format!("{:.0}", s.min_track_record) } else { "inf".to_owned() }
            );
        }
    }
    match &e.pbo {
        Ok(p) => {
            let _ = writeln!(
                out,
                "  PBO        {:.3} over {} trials x {} bars, {} blocks ({} splits); P(loss out of sample) {:.2}",
                p.pbo,
                p.trials,
                p.bars,
                p.blocks,
                p.logits.len(),
                p.prob_loss
            );
        }
        Err(why) => {
            let _ = writeln!(out, "  PBO        not computed: {why}");
        }
    }
    match &e.placebo {
        Some(p) => {
            let bests: Vec<String> = p.searches.iter().map(|s| format!("{:.2}", s.best_test_sharpe)).collect();
            let _ = writeln!(
                out,
                "  placebo    p = {:.3}; their best trials' test Sharpes: {}",
                p.p_value,
                bests.join(" ")
            );
        }
        None => out.push_str("  placebo    not run (--placebo N)\n"),
    }
    for f in &e.walk_forward {
        let _ = writeln!(
            out,
            "  fold {}     bars {}..{}{}: Sharpe {:.2}, return {:.2}%, max drawdown {:.2}%, {} trades",
            f.fold,
            f.test.0,
            f.test.1,
            if f.seen_by_search { " (validation)" } else { "" },
            f.sharpe,
            100.0 * f.total_return,
            100.0 * f.max_drawdown,
            f.trades
        );
    }
    if !e.walk_forward.is_empty() {
        let n = e.walk_forward.len() as f64;
        let mean = e.walk_forward.iter().map(|f| f.sharpe).sum::<f64>() / n;
        let worst = e.walk_forward.iter().map(|f| f.sharpe).fold(f64::INFINITY, f64::min);
        let _ = writeln!(out, "  walk-forward mean Sharpe {mean:.2}, worst {worst:.2}");
    }
    let _ = writeln!(out, "verdict:  {}", e.verdict.line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharpe(dsr: f64) -> SharpeEvidence {
        SharpeEvidence {
            sharpe_per_bar: 0.05,
            sharpe_annual: 4.7,
            n_obs: 6_000,
            skew: 0.0,
            kurtosis: 3.0,
            trials: 20,
            var_sharpe: 1e-4,
            sr0_per_bar: 0.02,
            sr0_annual: 1.9,
            dsr,
            psr: 0.99,
            min_track_record: 100.0,
        }
    }

    fn placebo(n: usize, p_value: f64) -> PlaceboEvidence {
        let search = |i: u64| PlaceboSearch {
            index: i,
            study: format!("tradesim.placebo-{i}"),
            best_trial: Some(0),
            best_valid_sharpe: 0.0,
            best_test_sharpe: 0.0,
        };
        PlaceboEvidence { searches: (1..=n as u64).map(search).collect(), p_value }
    }

    fn evidence(valid: f64, test: f64, placebo: Option<PlaceboEvidence>) -> Evidence {
        let pbo = PboEvidence {
            pbo: 0.2,
            trials: 20,
            bars: 6_000,
            blocks: 16,
            logits: vec![1.0],
            degradation_slope: 0.5,
            prob_loss: 0.1,
        };
        Evidence {
            best_trial: Some(3),
            valid: Some(sharpe(valid)),
            test: Some(sharpe(test)),
            pbo: Ok(pbo),
            placebo,
            walk_forward: Vec::new(),
            barrier_floor_mult: 1.2,
            verdict: Verdict { evidence: false, line: String::new() },
        }
    }

    #[test]
    fn evidence_needs_both_deflated_sharpes_and_enough_placebo_searches_below_alpha() {
        let yes = verdict(&evidence(0.99, 0.97, Some(placebo(19, 0.05))));
        assert!(yes.evidence && yes.line.starts_with("evidence: "), "{}", yes.line);
        for (e, why) in [
            (evidence(0.94, 0.97, Some(placebo(19, 0.05))), "validation DSR 0.94 < 0.95"),
            (evidence(0.99, 0.5, Some(placebo(19, 0.05))), "test DSR 0.50 < 0.95"),
            (evidence(0.99, 0.99, Some(placebo(19, 0.1))), "placebo p 0.10 > 0.05"),
            (evidence(0.99, 0.99, Some(placebo(9, 0.1))), "9 placebo searches cannot show p <= 0.05"),
            (evidence(0.99, 0.99, None), "no placebo searches"),
        ] {
            let v = verdict(&e);
            assert!(!v.evidence && v.line.starts_with("no evidence: "), "{}", v.line);
            assert!(v.line.contains(why), "{} lacks {why}", v.line);
        }
    }

    #[test]
    fn a_losing_walk_forward_and_a_high_pbo_are_named() {
        let mut e = evidence(0.99, 0.99, Some(placebo(19, 0.05)));
        let fold = |sharpe: f64| Fold {
            fold: 1,
            train: (0, 10),
            test: (10, 20),
            seen_by_search: false,
            sharpe,
            total_return: 0.0,
            max_drawdown: 0.0,
            trades: 1,
        };
        e.walk_forward = vec![fold(1.0), fold(-3.0)];
        let v = verdict(&e);
        assert!(!v.evidence && v.line.contains("walk-forward mean Sharpe -1.00 <= 0 over 2 folds"), "{}", v.line);
        e.walk_forward = vec![fold(1.0), fold(0.5)];
        if let Ok(p) = &mut e.pbo {
            p.pbo = 0.7;
        }
        let v = verdict(&e);
        assert!(v.evidence && v.line.contains("caveat: PBO 0.70"), "{}", v.line);
    }

    #[test]
    fn the_placebo_p_value_counts_ties_against_the_real_search() {
        let mut searches = placebo(4, 0.0).searches;
        for (s, x) in searches.iter_mut().zip([0.5, 1.0, 2.0, f64::NAN]) {
            s.best_test_sharpe = x;
        }
        // 1 + #{>= 1.0} = 1 + 2 over 5.
        assert_eq!(placebo_p_value(1.0, &searches), 3.0 / 5.0);
        assert_eq!(placebo_p_value(3.0, &searches), 1.0 / 5.0);
        assert_eq!(placebo_p_value(f64::NAN, &searches), 1.0);
    }
}
