//! What follows a job's search: the evidence of its trials and the side work (placebo searches and folds),
//! with the best trial's test and the report's study charts beside them on threads of their own, then the
//! report, each part timed into an [`AfterSearch`].

use super::report::{BestPart, ReportInput, ReportSummary, StudyPart, write_report};
use super::side;
use super::{AfterSearch, Job, timed};
use crate::data::{Dataset, Series};
use crate::evidence::Evidence;
use crate::hyperopt::best::best_on_test;
use crate::hyperopt::{Progress, Study};
use crate::train::SplitData;
use crate::{Backend, Error};

/// What the thread of `timed` work `part` returned (a panic as an error naming the part).
fn joined<T>(part: &str, h: std::thread::ScopedJoinHandle<'_, (Result<T, Error>, f64)>) -> (Result<T, Error>, f64) {
    h.join().unwrap_or_else(|_| (Err(Error::Output(format!("{part} panicked after the search"))), 0.0))
}

impl Job {
    /// What follows the search of `data` (the splits of `series`, from `dataset`): the evidence, the side
    /// work `at_once` at a time, the verdict; beside them the best trial's test and the report's charts; then
    /// the report. Returns the report's summary, the evidence and where the time went.
    pub(super) fn after_search(
        &self,
        backends: &[Backend],
        (dataset, series, data, bars_per_year): (&Dataset, &Series, &SplitData, f64),
        at_once: usize,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    ) -> Result<(ReportSummary, Evidence, AfterSearch), Error> {
        let backend = backends.first().ok_or_else(|| Error::config("--device", "no backend is available"))?;
        let mut after = AfterSearch::default();
        let study = Study::reopen(&self.storage, &self.name)?;
        let cfg = &self.cfg;
        // Beside the evidence and the side work, on threads with study handles of their own: the best trial's
        // test and the report's study charts. They read the same trials as the evidence: `run_search` returns
        // once the study holds all its trials finished (other workers' included: a worker waits for the
        // others and takes over a silent one's trials), and the side work writes other studies.
        let reopened = || Study::reopen(&self.storage, &self.name);
        let reopened = &reopened;
        let (main, best_test, study_part) = std::thread::scope(|scope| {
            let best = scope.spawn(|| {
                timed(|| {
                    BestPart::render(best_on_test(backend, &reopened()?, series, data, cfg, bars_per_year)?, series)
                })
            });
            let part = scope.spawn(|| timed(|| StudyPart::render(&reopened()?, cfg)));
            let main = self.evidence_and_side_work(
                backends,
                &study,
                (series, data, bars_per_year),
                at_once,
                progress,
                &mut after,
            );
            let joined = || (joined("the best trial's test", best), joined("the study's charts", part));
            let (best, part) = after.time("the wait for the parts beside", joined);
            (main, best, part)
        });
        let evidence = main?;
        // Recorded before the parts beside are checked: a failed best-trial test keeps the placebo searches'
        // and folds' evidence in the study.
        after.time("the evidence recorded", || crate::evidence::record(&study, &evidence))?;
        after.beside = vec![("the best trial's test and charts", best_test.1), ("the study's charts", study_part.1)];
        let (best_test, study_part) = (best_test.0?, study_part.0?);
        let dashboard = format!("optuna-dashboard {}  (study `{}`)", self.storage, self.name);
        let input = ReportInput {
            series,
            data_label: &dataset.label(),
            cfg: &self.cfg,
            evidence: &evidence,
            dashboard: &dashboard,
        };
        let summary = after.time("report", || write_report(&input, study_part, best_test, &self.report_dir))?;
        Ok((summary, evidence, after))
    }

    /// The evidence of the study's trials (read from `study`, the search's data `data` of `series`), then the
    /// side work (placebo searches and folds, `at_once` at a time) and the verdict, each timed into `after`.
    fn evidence_and_side_work(
        &self,
        backends: &[Backend],
        study: &Study,
        (series, data, bars_per_year): (&Series, &SplitData, f64),
        at_once: usize,
        progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
        after: &mut AfterSearch,
    ) -> Result<Evidence, Error> {
        let backend = backends.first().ok_or_else(|| Error::config("--device", "no backend is available"))?;
        let mut evidence =
            after.time("evidence", || crate::evidence::assess(backend, study, data, &self.cfg, bars_per_year))?;
        let best = match evidence.best_trial {
            Some(n) => study.trials()?.into_iter().find(|t| t.number == n),
            None => None,
        };
        let work = side::SideWork {
            placebo: &|index, suffix, attrs| {
                let surrogate = crate::data::surrogate::placebo(series, self.cfg.study.seed, index)?;
                let data =
                    crate::train::SplitData::new(&surrogate, crate::train::DEFAULT_SPLIT, self.cfg.env.sigma_span)?;
                self.side_search(backends, &data, suffix, attrs, bars_per_year, progress)
            },
            fold: &|best, fold, bars| {
                let (split, cfg) = (&data.split, &self.cfg);
                crate::evidence::walk_forward::walk_forward_fold(
                    backend,
                    series,
                    split,
                    cfg,
                    &best.params,
                    best.number,
                    fold,
                    bars,
                    bars_per_year,
                )
            },
            folds: &|k| crate::evidence::walk_forward::folds(&data.split, series.bars.len(), k),
            search_fold: &|fold, bars| self.search_fold(backends, series, bars, fold, bars_per_year, progress),
        };
        let evidence_of = &mut evidence;
        after.time("side work", || self.side_work(evidence_of, &best, at_once, progress, &work, bars_per_year))?;
        evidence.verdict = crate::evidence::verdict(&evidence);
        evidence.verdict_before = crate::evidence::verdict_before(&evidence);
        Ok(evidence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread that panicked is an error, not a panic of the job.
    #[test]
    fn a_panicked_thread_is_an_error() {
        let (out, seconds) = std::thread::scope(|s| {
            joined::<u8>("the part", s.spawn(|| -> (Result<u8, Error>, f64) { panic!("deliberately") }))
        });
        assert!(out.is_err_and(|e| e.to_string().contains("the part panicked")));
        assert_eq!(seconds, 0.0);
    }
}
