//! The ranking of a study's trials: which trial is the best, for the report, the evidence and the placebo
//! searches alike.

use super::study::{Study, TrialRecord};
use crate::Error;

/// Orders trials: complete before pruned before failed (an undefined objective) before running, then by
/// value (NaN last), then by number. The best trial is the first, when it is complete.
pub fn leaderboard(mut trials: Vec<TrialRecord>) -> Vec<TrialRecord> {
    let rank = |s: &str| match s {
        "complete" => 0,
        "pruned" => 1,
        "fail" => 2,
        _ => 3,
    };
    trials.sort_by(|a, b| {
        rank(&a.status)
            .cmp(&rank(&b.status))
            .then_with(|| match (a.value.is_nan(), b.value.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                (false, false) => b.value.total_cmp(&a.value),
            })
            .then(a.number.cmp(&b.number))
    });
    trials
}

/// The leaderboard of tradesim's own trials in `study` (another Optuna worker's trials have no test
/// evaluation or checkpoint; the Optuna tools show them).
pub fn study_leaderboard(study: &Study) -> Result<Vec<TrialRecord>, Error> {
    Ok(leaderboard(study.trials_brief()?.into_iter().filter(|t| t.ours).collect()))
}
