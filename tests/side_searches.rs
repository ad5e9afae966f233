//! Side searches several at once (`--side-searches`, issue 58 item 2): a job's placebo searches, its
//! walk-forward folds and its walk-forward optimisation's fold searches run on threads of their own, side by
//! side on one device, and give the same bits as one at a time: every side study's trials (status, value,
//! test return and Sharpe, parameters) and the whole evidence (the folds' returns), verdict included. On the CPU and, where one is usable, the GPU
//! (separate streams per search there).

mod common;

use std::path::Path;

use tradesim::Backend;
use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::hyperopt::Study;
use tradesim::hyperopt::storage::StorageUrl;
use tradesim::job::{Job, JobArgs, JobDone};

const PLACEBO: usize = 3;
const FOLDS: usize = 2;

/// A small DQN search with [`PLACEBO`] placebo searches and [`FOLDS`] fold searches, `side` of them at once,
/// its study in `dir`.
fn job(backend: &Backend, dir: &Path, side: usize) -> JobDone {
    let config = format!(
        "[study]\ntrials = 3\nparallel = 3\nepochs = 2\nstartup_trials = 3\nenvs = 8\nsegment_len = 64\n\
         placebo = {PLACEBO}\nwalk_forward = {FOLDS}\nwalk_forward_search = {FOLDS}\n[space]\nhidden = {{ choices = [16, 32] }}\n"
    );
    let args = JobArgs {
        config_text: Some(("test".to_owned(), config)),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        seed: Some(5),
        gpu: backend.is_cuda(),
        side_searches: Some(side),
        ..JobArgs::default()
    };
    let job = Job::prepare(&args).unwrap();
    assert_eq!(job.side_searches, side);
    let data = generate(&GeneratorConfig { bars: 12_000, seed: 3, ..GeneratorConfig::default() });
    job.run(std::slice::from_ref(backend), &data, None, &|_| Ok(())).unwrap()
}

/// A side study's trials as bits: number, status, value, test return and Sharpe, parameters.
fn trials(dir: &Path, name: &str) -> Vec<(u64, String, u64, u64, u64, String)> {
    let study = Study::reopen(&StorageUrl::Sqlite(dir.join("study.sqlite")), name).unwrap();
    study
        .trials()
        .unwrap()
        .into_iter()
        .map(|t| {
            let params = format!("{:?}", t.params);
            (t.number, t.status, t.value.to_bits(), t.test_return.to_bits(), t.test_sharpe.to_bits(), params)
        })
        .collect()
}

fn side_searches_at_once_give_the_bits_of_one_at_a_time(backend: &Backend) {
    let name = format!("side-{}", backend.info().backend);
    let (one, three) = (common::temp_dir(&format!("{name}-1")), common::temp_dir(&format!("{name}-3")));
    let a = job(backend, &one, 1);
    let b = job(backend, &three, 3);
    // Three ran at once (the device's memory did not lower it), else this compares one at a time twice.
    assert_eq!((a.side_at_once, b.side_at_once), (1, 3));
    let studies =
        (1..=PLACEBO).map(|i| format!("tradesim.placebo-{i}")).chain((1..=FOLDS).map(|j| format!("tradesim.wfo-{j}")));
    for study in studies {
        let (x, y) = (trials(&one, &study), trials(&three, &study));
        assert_eq!(x.len(), 3, "{study}: every trial ran");
        assert!(x.iter().all(|t| t.1 == "complete" || t.1 == "pruned"), "{study}: {x:?}");
        assert_eq!(x, y, "{study}: one at a time and three at once");
    }
    let placebo = a.evidence.placebo.as_ref().expect("placebo evidence");
    assert_eq!(placebo.searches.len(), PLACEBO);
    // Each placebo search in its place, whichever finished first.
    assert!(placebo.searches.iter().enumerate().all(|(i, s)| s.index == i as u64 + 1), "{:?}", placebo.searches);
    assert_eq!(a.evidence.walk_forward_search.len(), FOLDS);
    assert_eq!(a.evidence.walk_forward.len(), FOLDS);
    // Where the time after the search went, part by part, and beside them.
    let names = |parts: &[(&'static str, f64)]| parts.iter().map(|p| p.0).collect::<Vec<_>>();
    assert_eq!(
        names(&a.after.parts),
        ["evidence", "side work", "the wait for the parts beside", "the evidence recorded", "report"]
    );
    assert_eq!(names(&a.after.beside), ["the best trial's test and charts", "the study's charts"]);
    let all = || a.after.parts.iter().chain(&a.after.beside);
    assert!(all().all(|p| p.1.is_finite() && p.1 >= 0.0), "{:?}", a.after);
    let json = |d: &JobDone| serde_json::to_string(&d.evidence).unwrap();
    assert_eq!(json(&a), json(&b), "the evidence, verdict included");
    let _ = std::fs::remove_dir_all(&one);
    let _ = std::fs::remove_dir_all(&three);
}
test_device!(side_searches_at_once_give_the_bits_of_one_at_a_time);

#[test]
fn no_side_searches_at_all_is_refused() {
    let dir = common::temp_dir("side-zero");
    let args = JobArgs { study: Some(dir.join("study.sqlite")), side_searches: Some(0), ..JobArgs::default() };
    let Err(err) = Job::prepare(&args) else { panic!("--side-searches 0 accepted") };
    let err = err.to_string();
    assert!(err.contains("--side-searches"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_default_is_one_on_the_cpu_and_more_on_a_gpu() {
    let dir = common::temp_dir("side-default");
    let at = |gpu: bool, study: &str| {
        let args = JobArgs { study: Some(dir.join(study)), gpu, ..JobArgs::default() };
        Job::prepare(&args).unwrap().side_searches
    };
    assert_eq!(at(false, "cpu.sqlite"), 1);
    assert_eq!(at(true, "gpu.sqlite"), tradesim::job::side::GPU_SIDE_SEARCHES);
    const { assert!(tradesim::job::side::GPU_SIDE_SEARCHES > 1) };
    let _ = std::fs::remove_dir_all(&dir);
}
