//! The verdict of docs/EVIDENCE.md built from the evidence, the verdict of the previous rule (issue 41's gates; kept
//! to measure both on the same runs), and the evidence as the command line prints it.

use super::{DSR_THRESHOLD, Evidence, MIN_PLACEBO, PBO_CAVEAT, PLACEBO_ALPHA, SPA_ALPHA, SharpeEvidence, Verdict};

/// `inf` or the number of bars, rounded.
fn bars(x: f64) -> String {
    if x.is_finite() { format!("{x:.0}") } else { "inf".to_owned() }
}

/// The placebo gate: held (with its p-value) or why not.
fn placebo_gate(e: &Evidence, held: &mut Vec<String>, failed: &mut Vec<String>) {
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
}

/// The line: `evidence: ...` or `no evidence: ...` with the PBO caveat.
fn line(e: &Evidence, held: &[String], failed: &[String]) -> Verdict {
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

/// The verdict of docs/EVIDENCE.md: `evidence` when the best trial's deflated Sharpe on validation is at
/// least [`DSR_THRESHOLD`]; on the test split (a hold-out) its PSR against 0 and the PSR of its per-bar
/// excess over buy-and-hold are at least [`DSR_THRESHOLD`]; SPA over every trial against buy-and-hold on
/// validation gives a consistent p-value <= [`SPA_ALPHA`]; at least [`MIN_PLACEBO`] placebo searches put
/// it at p <= [`PLACEBO_ALPHA`]; and a walk-forward (when run) has a PSR of its concatenated returns on
/// unseen bars of at least [`DSR_THRESHOLD`]. Otherwise `no evidence` with every reason. PBO above
/// [`PBO_CAVEAT`] is named as a caveat either way.
pub fn verdict(e: &Evidence) -> Verdict {
    let (mut held, mut failed) = (Vec::new(), Vec::new());
    let found = e.best_trial.is_some();
    if !found {
        failed.push("no complete trial with a validation Sharpe".to_owned());
    }
    match &e.valid {
        Some(s) if s.dsr >= DSR_THRESHOLD => held.push(format!("validation DSR {:.2}", s.dsr)),
        Some(s) => failed.push(format!(
            "validation DSR {:.2} < {DSR_THRESHOLD} (Sharpe {:.2} a year against {:.2} expected from the best of {} \
             skill-less trials)",
            s.dsr, s.sharpe_annual, s.sr0_annual, s.trials
        )),
        None if found => failed.push("no validation returns for the best trial".to_owned()),
        None => {}
    }
    match &e.test {
        Some(s) if s.psr >= DSR_THRESHOLD => held.push(format!("test PSR {:.2}", s.psr)),
        Some(s) => failed.push(format!(
            "test PSR {:.2} < {DSR_THRESHOLD} (Sharpe {:.2} a year over {} bars; {} bars needed at this Sharpe)",
            s.psr,
            s.sharpe_annual,
            s.n_obs,
            bars(s.min_track_record)
        )),
        None if found => failed.push("no test returns for the best trial".to_owned()),
        None => {}
    }
    if let Some(b) = &e.baselines {
        if b.excess.psr >= DSR_THRESHOLD {
            held.push(format!("excess over buy-and-hold PSR {:.2}", b.excess.psr));
        } else {
            failed.push(format!(
                "excess over buy-and-hold PSR {:.2} < {DSR_THRESHOLD} (test Sharpe {:.2} against buy-and-hold's {:.2})",
                b.excess.psr, b.best_test_sharpe, b.buy_and_hold_test_sharpe
            ));
        }
    } else if found {
        failed.push("no buy-and-hold comparison on the test split".to_owned());
    }
    match &e.spa_valid {
        Some(s) if s.result.consistent <= SPA_ALPHA => held.push(format!("SPA p {:.3}", s.result.consistent)),
        Some(s) => failed.push(format!(
            "SPA p {:.2} > {SPA_ALPHA}: no trial beats buy-and-hold on validation beyond what {} trials find by chance",
            s.result.consistent, s.result.models
        )),
        None if found => failed.push("SPA not computed (no trial with validation returns)".to_owned()),
        None => {}
    }
    placebo_gate(e, &mut held, &mut failed);
    if !e.walk_forward.is_empty() {
        let gate = psr_gate("walk-forward", "unseen", e.walk_forward_unseen.as_ref());
        gate.unwrap_or_else(|| Err("walk-forward has no fold after the validation split".to_owned()))
            .map_or_else(|why| failed.push(why), |ok| held.push(ok));
    }
    if !e.walk_forward_search.is_empty() {
        let gate = psr_gate("walk-forward optimisation", "out-of-sample", e.walk_forward_search_oos.as_ref());
        gate.unwrap_or_else(|| Err("walk-forward optimisation has too few out-of-sample bars".to_owned()))
            .map_or_else(|why| failed.push(why), |ok| held.push(ok));
    }
    line(e, &held, &failed)
}

/// A PSR gate over the concatenated returns of `what` (its bars called `bars`): `Ok` with the held part,
/// `Err` with the failed one, `None` when there was no such PSR.
fn psr_gate(what: &str, bars: &str, s: Option<&SharpeEvidence>) -> Option<Result<String, String>> {
    let s = s?;
    Some(if s.psr >= DSR_THRESHOLD {
        Ok(format!("{what} PSR {:.2}", s.psr))
    } else {
        Err(format!(
            "{what} PSR {:.2} < {DSR_THRESHOLD} (Sharpe {:.2} a year over {} {bars} bars)",
            s.psr, s.sharpe_annual, s.n_obs
        ))
    })
}

/// The verdict of the previous rule (issue 41's gates): DSR >= [`DSR_THRESHOLD`] on validation and on test (the test
/// deflated by the search's trials), the placebo gate, and a walk-forward mean fold Sharpe > 0. Kept only to
/// measure both verdicts on the same runs.
pub fn verdict_before(e: &Evidence) -> Verdict {
    let (mut held, mut failed) = (Vec::new(), Vec::new());
    if e.best_trial.is_none() {
        failed.push("no complete trial with a validation Sharpe".to_owned());
    }
    let valid = e.valid.as_ref().map(|s| s.dsr);
    for (split, dsr) in [("validation", valid), ("test", e.test_dsr_as_searched)] {
        match dsr {
            Some(d) if d >= DSR_THRESHOLD => held.push(format!("{split} DSR {d:.2}")),
            Some(d) => failed.push(format!("{split} DSR {d:.2} < {DSR_THRESHOLD}")),
            None => failed.push(format!("no {split} DSR")),
        }
    }
    placebo_gate(e, &mut held, &mut failed);
    if !e.walk_forward.is_empty() {
        let mean = e.walk_forward.iter().map(|f| f.sharpe).sum::<f64>() / e.walk_forward.len() as f64;
        if mean > 0.0 {
            held.push(format!("walk-forward mean Sharpe {mean:.2}"));
        } else {
            failed.push(format!("walk-forward mean Sharpe {mean:.2} <= 0"));
        }
    }
    line(e, &held, &failed)
}

/// The evidence as the command line prints it after the leaderboard: one line per part, then the verdict.
pub fn summary_text(e: &Evidence) -> String {
    use std::fmt::Write;
    let mut out = String::from("can this be trusted? (docs/EVIDENCE.md)\n");
    if let Some(s) = &e.valid {
        let _ = writeln!(
            out,
            "  validation Sharpe {:.2} a year over {} bars; deflated for {} trials (SR0 {:.2}): DSR {:.3}, PSR {:.3}, \
             minimum track record {} bars",
            s.sharpe_annual,
            s.n_obs,
            s.trials,
            s.sr0_annual,
            s.dsr,
            s.psr,
            bars(s.min_track_record)
        );
    }
    if let Some(s) = &e.test {
        let _ = writeln!(
            out,
            "  test       Sharpe {:.2} a year over {} bars (a hold-out: one trial): PSR {:.3}, minimum track record \
             {} bars",
            s.sharpe_annual,
            s.n_obs,
            s.psr,
            bars(s.min_track_record)
        );
    }
    if let Some(b) = &e.baselines {
        let _ = writeln!(
            out,
            "  baselines  test Sharpe: best trial {:.2}, buy-and-hold {:.2}, flat {:.2}; excess over buy-and-hold \
             {:.2} a year, PSR {:.3}",
            b.best_test_sharpe, b.buy_and_hold_test_sharpe, b.flat_test_sharpe, b.excess.sharpe_annual, b.excess.psr
        );
    }
    for s in [&e.spa_valid, &e.spa_test].into_iter().flatten() {
        let r = &s.result;
        let _ = writeln!(
            out,
            "  SPA        {}: p {:.3} (consistent; lower {:.3}, Reality Check {:.3}) over {} trials against \
             buy-and-hold, block {} bars, {} draws; StepM: {}",
            s.split,
            r.consistent,
            r.lower,
            r.upper,
            r.models,
            r.block,
            r.reps,
            if s.superior_trials.is_empty() {
                "no trial beats it".to_owned()
            } else {
                format!("trials {:?} beat it", s.superior_trials)
            }
        );
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
    if let Some(s) = &e.walk_forward_unseen {
        let _ = writeln!(
            out,
            "  walk-forward Sharpe {:.2} a year over {} unseen bars: PSR {:.3}",
            s.sharpe_annual, s.n_obs, s.psr
        );
    }
    for f in &e.walk_forward_search {
        let _ = writeln!(
            out,
            "  search fold {} bars {}..{} (searched on {}..{}, {}): trial {}, Sharpe {:.2}, return {:.2}%; {}",
            f.fold,
            f.test.0,
            f.test.1,
            f.train.0,
            f.valid.1,
            f.study,
            f.trial.map_or("none".to_owned(), |t| t.to_string()),
            f.sharpe,
            100.0 * f.total_return,
            super::params_line(&f.params)
        );
    }
    if let Some(s) = &e.walk_forward_search_oos {
        let _ = writeln!(
            out,
            "  walk-forward optimisation Sharpe {:.2} a year over {} out-of-sample bars: PSR {:.3}",
            s.sharpe_annual, s.n_obs, s.psr
        );
    }
    let _ = writeln!(out, "verdict:  {}", e.verdict.line);
    out
}

#[cfg(test)]
mod tests {
    use super::super::spa::SpaResult;
    use super::super::{Baselines, Fold, PboEvidence, PlaceboEvidence, PlaceboSearch, SharpeEvidence, SpaEvidence};
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
            psr: dsr,
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

    fn spa(p: f64) -> SpaEvidence {
        let result = SpaResult {
            lower: p,
            consistent: p,
            upper: p,
            superior: vec![],
            models: 20,
            bars: 6_000,
            block: 77,
            reps: 1_000,
            studentized: true,
        };
        SpaEvidence { split: "validation".to_owned(), result, trials: (0..20).collect(), superior_trials: vec![] }
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
        let none = Verdict { evidence: false, line: String::new() };
        Evidence {
            best_trial: Some(3),
            valid: Some(sharpe(valid)),
            test: Some(sharpe(test)),
            test_dsr_as_searched: Some(test),
            baselines: Some(Baselines {
                buy_and_hold_test_sharpe: 1.0,
                flat_test_sharpe: 0.0,
                best_test_sharpe: 4.7,
                excess: sharpe(0.99),
            }),
            spa_valid: Some(spa(0.01)),
            spa_test: None,
            walk_forward_unseen: None,
            pbo: Ok(pbo),
            placebo,
            walk_forward: Vec::new(),
            walk_forward_search: Vec::new(),
            walk_forward_search_oos: None,
            barrier_floor_mult: 1.2,
            verdict: none.clone(),
            verdict_before: none,
        }
    }

    #[test]
    fn evidence_needs_every_gate() {
        let yes = verdict(&evidence(0.99, 0.97, Some(placebo(19, 0.05))));
        assert!(yes.evidence && yes.line.starts_with("evidence: "), "{}", yes.line);
        assert!(yes.line.contains("SPA p 0.010") && yes.line.contains("excess over buy-and-hold PSR 0.99"));
        let mut drift = evidence(0.99, 0.99, Some(placebo(19, 0.05)));
        if let Some(b) = &mut drift.baselines {
            b.excess = sharpe(0.6);
        }
        let mut snooped = evidence(0.99, 0.99, Some(placebo(19, 0.05)));
        snooped.spa_valid = Some(spa(0.2));
        for (e, why) in [
            (evidence(0.94, 0.97, Some(placebo(19, 0.05))), "validation DSR 0.94 < 0.95"),
            (evidence(0.99, 0.5, Some(placebo(19, 0.05))), "test PSR 0.50 < 0.95"),
            (evidence(0.99, 0.99, Some(placebo(19, 0.1))), "placebo p 0.10 > 0.05"),
            (evidence(0.99, 0.99, Some(placebo(9, 0.1))), "9 placebo searches cannot show p <= 0.05"),
            (evidence(0.99, 0.99, None), "no placebo searches"),
            (drift, "excess over buy-and-hold PSR 0.60 < 0.95 (test Sharpe 4.70 against buy-and-hold's 1.00)"),
            (snooped, "SPA p 0.20 > 0.05"),
        ] {
            let v = verdict(&e);
            assert!(!v.evidence && v.line.starts_with("no evidence: "), "{}", v.line);
            assert!(v.line.contains(why), "{} lacks {why}", v.line);
        }
    }

    #[test]
    fn the_test_split_is_not_deflated_by_the_search_but_the_old_gate_was() {
        // A hold-out PSR of 0.97 passes; deflated as searched the same returns gave 0.5 and failed before.
        let mut e = evidence(0.99, 0.97, Some(placebo(19, 0.05)));
        e.test_dsr_as_searched = Some(0.5);
        assert!(verdict(&e).evidence);
        let before = verdict_before(&e);
        assert!(!before.evidence && before.line.contains("test DSR 0.50 < 0.95"), "{}", before.line);
    }

    fn fold(sharpe: f64, seen_by_search: bool) -> Fold {
        Fold {
            fold: 1,
            train: (0, 10),
            test: (10, 20),
            seen_by_search,
            sharpe,
            total_return: 0.0,
            max_drawdown: 0.0,
            trades: 1,
            returns: Vec::new(),
        }
    }

    #[test]
    fn the_walk_forward_gate_is_the_psr_of_unseen_folds_and_a_high_pbo_is_named() {
        let mut e = evidence(0.99, 0.99, Some(placebo(19, 0.05)));
        e.walk_forward = vec![fold(1.0, false), fold(0.5, false)];
        e.walk_forward_unseen = Some(sharpe(0.7));
        let v = verdict(&e);
        assert!(!v.evidence && v.line.contains("walk-forward PSR 0.70 < 0.95"), "{}", v.line);
        // The old gate passed the same folds on a positive mean.
        assert!(verdict_before(&e).evidence, "{}", verdict_before(&e).line);
        e.walk_forward_unseen = None;
        assert!(verdict(&e).line.contains("walk-forward has no fold after the validation split"));
        e.walk_forward_unseen = Some(sharpe(0.96));
        if let Ok(p) = &mut e.pbo {
            p.pbo = 0.7;
        }
        let v = verdict(&e);
        assert!(v.evidence && v.line.contains("caveat: PBO 0.70"), "{}", v.line);
        e.walk_forward = vec![fold(1.0, false), fold(-3.0, false)];
        let before = verdict_before(&e);
        assert!(!before.evidence && before.line.contains("walk-forward mean Sharpe -1.00 <= 0"), "{}", before.line);
    }

    /// Walk-forward optimisation's out-of-sample PSR is a gate of its own when it ran.
    #[test]
    fn walk_forward_optimisation_gates_on_its_out_of_sample_psr() {
        let mut e = evidence(0.99, 0.99, Some(placebo(19, 0.05)));
        assert!(verdict(&e).evidence);
        let fold = |returns: Vec<f64>| super::super::SearchFold {
            fold: 1,
            train: (0, 8),
            valid: (8, 10),
            test: (10, 10 + returns.len()),
            study: "s.wfo-1".to_owned(),
            trial: Some(3),
            params: Default::default(),
            valid_score: 1.0,
            sharpe: 0.0,
            total_return: 0.0,
            returns,
        };
        let noise: Vec<f64> = (0..300).map(|i| if i % 2 == 0 { 0.01 } else { -0.0101 }).collect();
        super::super::set_walk_forward_search(&mut e, vec![fold(noise.clone()), fold(noise)], 252.0);
        assert_eq!(e.walk_forward_search_oos.as_ref().unwrap().n_obs, 600);
        let v = verdict(&e);
        assert!(!v.evidence && v.line.contains("walk-forward optimisation PSR"), "{}", v.line);
        let skill: Vec<f64> = (0..300).map(|i| if i % 3 == 0 { -0.002 } else { 0.004 }).collect();
        super::super::set_walk_forward_search(&mut e, vec![fold(skill)], 252.0);
        let v = verdict(&e);
        assert!(v.evidence && v.line.contains("walk-forward optimisation PSR 1.00"), "{}", v.line);
    }

    #[test]
    fn folds_feed_the_psr_only_from_unseen_bars() {
        let mut e = evidence(0.99, 0.99, Some(placebo(19, 0.05)));
        let mut seen = fold(9.0, true);
        seen.returns = vec![0.01; 50];
        let mut unseen = fold(0.1, false);
        unseen.returns = (0..200).map(|i| if i % 2 == 0 { 0.01 } else { -0.009 }).collect();
        super::super::set_walk_forward(&mut e, vec![seen, unseen], 252.0);
        let s = e.walk_forward_unseen.as_ref().unwrap();
        assert_eq!(s.n_obs, 200);
        assert_eq!(e.walk_forward.len(), 2);
    }

    #[test]
    fn the_placebo_p_value_counts_ties_against_the_real_search() {
        let mut searches = placebo(4, 0.0).searches;
        for (s, x) in searches.iter_mut().zip([0.5, 1.0, 2.0, f64::NAN]) {
            s.best_test_sharpe = x;
        }
        // 1 + #{>= 1.0} = 1 + 2 over 5.
        assert_eq!(super::super::placebo_p_value(1.0, &searches), 3.0 / 5.0);
        assert_eq!(super::super::placebo_p_value(3.0, &searches), 1.0 / 5.0);
        assert_eq!(super::super::placebo_p_value(f64::NAN, &searches), 1.0);
    }
}
