//! A trial's objective and the median pruning rule.

use crate::hyperopt::study::{EpochRecord, TrialRecord};

/// The z of [`objective`]'s one-sided 95% confidence bound.
pub const OBJECTIVE_Z: f64 = 1.645;

/// A trial's objective from its greedy validation metrics over `returns` per-bar returns (annualized with
/// `bars_per_year`): the lower end of the one-sided 95% confidence interval of its Sharpe ratio,
/// `(SR - z sqrt((1 + SR^2 / 2) / T)) x sqrt(bars per year)` with the per-bar Sharpe SR, T returns and
/// z = [`OBJECTIVE_Z`] (the standard error of Lo 2002 for independent normal returns). A policy that made no
/// trade scores exactly 0: it keeps its cash, which is certain (its Sharpe ratio is undefined, NaN in the
/// metrics, and would otherwise turn the trial into a FAIL that TPE learns nothing from). So a trading
/// policy ranks above staying flat only when its validation returns show, at 95%, that it beats flat: the
/// luckiest of many skill-less policies is not the search's answer on bars without anything to learn, while
/// a real edge of a validation Sharpe well above the bound's width still is (docs/EVIDENCE.md).
pub fn objective(m: &crate::Metrics, returns: usize, bars_per_year: f64) -> f64 {
    if m.trades == 0.0 && m.sharpe.is_nan() {
        return 0.0;
    }
    if !m.sharpe.is_finite() || returns == 0 || bars_per_year <= 0.0 {
        return m.sharpe;
    }
    let annual = bars_per_year.sqrt();
    let sr = m.sharpe / annual;
    (sr - OBJECTIVE_Z * ((1.0 + 0.5 * sr * sr) / returns as f64).sqrt()) * annual
}

/// The median rule of Optuna's `MedianPruner` (maximizing): prune at `epoch` when the trial's best value so
/// far (`own`: its values at epochs 0..=epoch; NaN ignored) is below the median of the complete trials'
/// values at `epoch` (`complete`: their epoch records; NaN ignored; the mean of the two middle values for
/// an even count). Never before `warmup` epochs, nor before `startup` trials (at least one) are complete,
/// nor when no complete trial has a value at `epoch`. A trial whose values so far are all NaN is pruned.
pub fn should_prune(
    own: &[f64],
    epoch: u64,
    complete: &[EpochRecord],
    n_complete: usize,
    startup: usize,
    warmup: u64,
) -> bool {
    if n_complete == 0 || n_complete < startup || epoch < warmup {
        return false;
    }
    let best = own.iter().copied().filter(|x| !x.is_nan()).fold(f64::NAN, f64::max);
    if best.is_nan() {
        return true;
    }
    let mut at: Vec<f64> =
        complete.iter().filter(|e| e.epoch == epoch && !e.valid_sharpe.is_nan()).map(|e| e.valid_sharpe).collect();
    if at.is_empty() {
        return false;
    }
    at.sort_by(f64::total_cmp);
    let n = at.len();
    let median = if n % 2 == 1 { at[n / 2] } else { 0.5 * (at[n / 2 - 1] + at[n / 2]) };
    best < median
}

/// The median rule's reference for a trial with `history`: the epochs of the complete trials among the
/// trials it saw (not of trials finished since), and how many they are. So a trial re-run on resume is
/// pruned where it was the first time.
pub fn pruning_reference(trials: &[TrialRecord], epochs: &[EpochRecord], history: &[u64]) -> (Vec<EpochRecord>, usize) {
    let seen: Vec<u64> = trials
        .iter()
        .filter(|t| t.finished() && t.status == "complete" && history.binary_search(&t.number).is_ok())
        .map(|t| t.number)
        .collect();
    let at = epochs.iter().filter(|e| seen.binary_search(&e.trial).is_ok()).cloned().collect();
    (at, seen.len())
}
