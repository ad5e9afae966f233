//! A search on the GPU records the CPU's study, bit for bit, with the median pruner at work: its first batch
//! (no trial can be pruned: no complete trial to compare with) holds its validation walks back and launches
//! them together, the later trials (which can be pruned) launch theirs every epoch (docs/CLI.md,
//! "Evaluation"). A report held where it could prune would prune later than the CPU does: the trial would
//! train longer (a trial pruned after epoch 1 ends after 3 of its 4 epochs) and change the study.

mod common;

use std::path::Path;

use tradesim::Backend;
use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::hyperopt::Study;
use tradesim::hyperopt::search::DEFAULT_STUDY_NAME;
use tradesim::hyperopt::storage::StorageUrl;
use tradesim::job::{Job, JobArgs};

/// A trial as bits: number, status, pruned epoch, value, test return and Sharpe, parameters.
type Trial = (u64, String, Option<u64>, u64, u64, u64, String);

/// An epoch record as bits: trial, epoch, loss, validation Sharpe and return.
type Epoch = (u64, u64, u64, u64, u64);

/// 12 DQN trials through 4 slots, 4 epochs, the median pruner from the second complete trial on, with the
/// same budget on either backend; the study's trials and epochs.
fn search(backend: &Backend, dir: &Path) -> (Vec<Trial>, Vec<Epoch>) {
    let config = "[study]\ntrials = 12\nparallel = 4\nepochs = 4\nstartup_trials = 4\nprune_startup_trials = 2\n\
                  prune_warmup_epochs = 1\n\
                  envs = 8\nsegment_len = 48\ngrad_steps = 1\nplacebo = 0\nwalk_forward = 0\n\
                  [space]\nhidden = { choices = [8, 16, 32] }\nlr = { low = 0.0001, high = 0.01, log = true }\n";
    let args = JobArgs {
        config_text: Some(("test".to_owned(), config.to_owned())),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        seed: Some(7),
        gpu: backend.is_cuda(),
        ..JobArgs::default()
    };
    let job = Job::prepare(&args).unwrap();
    let data = generate(&GeneratorConfig { bars: 6_000, seed: 4, ..GeneratorConfig::default() });
    job.run(std::slice::from_ref(backend), &data, None, &|_| Ok(())).unwrap();
    let study = Study::reopen(&StorageUrl::Sqlite(dir.join("study.sqlite")), DEFAULT_STUDY_NAME).unwrap();
    let trials = study.trials().unwrap().into_iter().map(|t| {
        let params = format!("{:?}", t.params);
        (t.number, t.status, t.pruned_at, t.value.to_bits(), t.test_return.to_bits(), t.test_sharpe.to_bits(), params)
    });
    let epochs = study
        .epochs()
        .unwrap()
        .into_iter()
        .map(|e| (e.trial, e.epoch, e.loss.to_bits(), e.valid_sharpe.to_bits(), e.valid_return.to_bits()));
    (trials.collect(), epochs.collect())
}

#[test]
fn a_gpu_search_records_the_cpu_study_with_pruning() {
    let dir = common::temp_dir("search-devices-cpu");
    let (trials, epochs) = search(&Backend::Cpu, &dir);
    assert_eq!(trials.len(), 12, "every trial ran: {trials:?}");
    let pruned = trials.iter().filter(|t| t.1 == "pruned").count();
    assert!(pruned > 0, "the median rule pruned no trial: {trials:?}");
    assert!(trials.iter().all(|t| t.1 == "complete" || t.1 == "pruned"), "{trials:?}");
    // The first batch's trials cannot be pruned (no complete trial to compare with): all 4 epochs.
    assert!(trials[..4].iter().all(|t| t.1 == "complete"), "{trials:?}");
    assert!(trials.iter().all(|t| t.2.is_none_or(|e| e >= 1)), "pruned before the warm-up's end: {trials:?}");
    // A pruned trial's epochs are recorded up to its prune; the others' all four.
    let recorded = |n: u64| epochs.iter().filter(|e| e.0 == n).count() as u64;
    assert!(trials.iter().all(|t| recorded(t.0) == t.2.map_or(4, |e| e + 1)), "{epochs:?}");
    // A prune that shortens a trial: pruned after its epoch 1, it trains epoch 2 and ends before epoch 3.
    assert!(trials.iter().any(|t| t.2.is_some_and(|e| e + 2 < 4)), "no trial pruned early enough: {trials:?}");
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(gpu) = common::gpu_backend() {
        let dir = common::temp_dir("search-devices-gpu");
        let (gpu_trials, gpu_epochs) = search(&gpu, &dir);
        assert_eq!(gpu_trials, trials, "the GPU search's trials against the CPU's");
        assert_eq!(gpu_epochs, epochs, "the GPU search's epochs against the CPU's");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
