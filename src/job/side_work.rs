//! A job's side work (`Job::side_work`): its placebo searches, the walk-forward folds of its best
//! configuration and its walk-forward optimisation's fold searches, listed as tasks and run in one queue
//! several at once ([`super::side`]), their results set into the evidence.

use super::Job;
use super::side::{Side, SideWork, Task, run_tasks};
use crate::Error;
use crate::evidence::Evidence;
use crate::hyperopt::{Progress, Study};

impl Job {
    /// The side work of a search with best trial `best`, into `evidence`: the placebo searches, the
    /// walk-forward folds of the best configuration (none without one) and walk-forward optimisation's
    /// folds, as `work` cuts and runs each, in one queue `at_once` at a time ([`run_tasks`]). The folds are
    /// cut before any task runs, so folds too short are refused first.
    pub(super) fn side_work(
        &self,
        evidence: &mut Evidence,
        best: &Option<crate::hyperopt::study::TrialRecord>,
        at_once: usize,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
        work: &SideWork<'_>,
        bars_per_year: f64,
    ) -> Result<(), Error> {
        let c = &self.cfg.study;
        let wf = match best {
            Some(_) if c.walk_forward > 0 => (work.folds)(c.walk_forward)?,
            _ => Vec::new(),
        };
        let wfo = if c.walk_forward_search > 0 { (work.folds)(c.walk_forward_search)? } else { Vec::new() };
        let (wf, wfo) = (&wf, &wfo);
        let mut tasks: Vec<Task<'_>> = Vec::new();
        for index in 1..=c.placebo as u64 {
            tasks.push(Box::new(move || {
                self.placebo(index, progress, |suffix, attrs| (work.placebo)(index, suffix, attrs)).map(Side::Placebo)
            }));
        }
        if let Some(best) = best {
            for (j, bars) in wf.iter().enumerate() {
                tasks.push(Box::new(move || {
                    progress(&Progress::WalkForward { folds: wf.len() })?;
                    (work.fold)(best, j + 1, bars).map(Side::Fold)
                }));
            }
        }
        for (j, bars) in wfo.iter().enumerate() {
            tasks.push(Box::new(move || {
                progress(&Progress::WalkForwardSearch { fold: j + 1, of: wfo.len() })?;
                (work.search_fold)(j + 1, bars).map(Side::SearchFold)
            }));
        }
        let side = run_tasks(&tasks, at_once)?;
        if c.placebo > 0 {
            let real = best.as_ref().map_or(f64::NAN, |t| t.test_sharpe);
            let p_value = crate::evidence::placebo_p_value(real, &side.placebo);
            evidence.placebo = Some(crate::evidence::PlaceboEvidence { p_value, searches: side.placebo });
        }
        if !side.folds.is_empty() {
            crate::evidence::set_walk_forward(evidence, side.folds, bars_per_year);
        }
        if c.walk_forward_search > 0 {
            crate::evidence::set_walk_forward_search(evidence, side.search_folds, bars_per_year);
        }
        Ok(())
    }

    /// Placebo search `index` (1..=N): `search("placebo-INDEX", attrs)` runs study `NAME.placebo-INDEX`
    /// beside the study (the same configuration on a surrogate of the data keyed by the study's seed and
    /// `index`, [`crate::data::surrogate::placebo`]; created or continued, so a resumed search resumes its
    /// placebo searches too) with the attributes that mark it as this study's placebo `index`, returning its
    /// name and study; its summary.
    fn placebo(
        &self,
        index: u64,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
        search: impl Fn(&str, &[(&str, String)]) -> Result<(String, Study), Error>,
    ) -> Result<crate::evidence::PlaceboSearch, Error> {
        progress(&Progress::Placebo { index: index as usize, of: self.cfg.study.placebo })?;
        let attrs = [
            (crate::evidence::PLACEBO_OF_ATTR, serde_json::json!(self.name).to_string()),
            (crate::evidence::PLACEBO_INDEX_ATTR, index.to_string()),
        ];
        let (name, study) = search(&format!("placebo-{index}"), &attrs)?;
        crate::evidence::PlaceboSearch::of_study(index, name, &study)
    }
}
