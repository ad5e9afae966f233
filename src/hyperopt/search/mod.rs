//! The search loop: batches of K trials trained together (one DQN or PPO learner over all of them, the same
//! launches), sampled by TPE after the start-up trials, pruned by the median rule, recorded in the study as
//! they go; workers in any number of processes share a study through its database. `params` maps a
//! trial's parameters to the env and learners, `claims` claims batches, `slots` runs a batch's slots.

use crate::Error;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::config::SearchConfig;
use super::plan::{LearnerParams, SlotSizes, TrialPlanner};
use super::sampler::Params;
use super::storage::StorageUrl;
use super::study::{Study, Worker, WorkerProcess};
use crate::train::{SplitData, run_slots};
use crate::{Backend, DqnAgent, EnvBatch, PpoAgent};

mod claims;
mod params;
mod scale;
mod slots;
pub mod universe;

use claims::{Batch, next_batch, next_or_wait};
pub use params::{OBJECTIVE_Z, objective, pruning_reference, should_prune};
pub use scale::{ClaimTime, claim_loop};
use slots::{SearchSlots, Shared, locked, progress_trained};

/// Where a search writes.
#[derive(Clone, Debug)]
pub struct SearchPaths {
    /// The study's storage (a SQLite file today).
    pub storage: StorageUrl,
    /// The study's name in the storage.
    pub study_name: String,
    /// Checkpoints folder.
    pub checkpoints: PathBuf,
    /// The artifact store each finished trial's checkpoint and test ledger are also uploaded to.
    pub artifacts: Option<super::artifacts::ArtifactStore>,
}

/// Events for progress displays; an error returned by the listener stops the search there (a Ctrl-C) and
/// is returned by [`run_search`] (the interrupted trials resume as a killed search's do).
#[derive(Clone, Debug)]
pub enum Progress {
    /// A batch of trials starts.
    Batch {
        /// Their numbers.
        numbers: Vec<u64>,
        /// Trials finished before it.
        finished: usize,
    },
    /// An epoch of the batch ended.
    Epoch {
        /// Epoch.
        epoch: usize,
        /// Env steps per second of the batch in this epoch.
        env_steps_per_s: f64,
        /// Best validation Sharpe in the batch.
        best: f64,
        /// Seconds of collection and training in this epoch.
        train_seconds: f64,
        /// Seconds of the validation walk and backtest in this epoch.
        eval_seconds: f64,
        /// Slots that trained a live trial this epoch (the others idled: their trial ended and no trial was
        /// left to claim).
        live: usize,
        /// Slots of the batch.
        slots: usize,
    },
    /// A batch's training ended (its test walks done; its checkpoints and study rows follow).
    Trained {
        /// Seconds of setup: the batch's envs and networks (the features are the job's split, timed there).
        setup_seconds: f64,
        /// Seconds of the test walks and backtests.
        test_seconds: f64,
    },
    /// Nothing to claim: other workers run these trials; waiting for them to finish (or go silent).
    Waiting {
        /// Their numbers.
        numbers: Vec<u64>,
    },
    /// A freed slot of the running batch took a new trial.
    Refill {
        /// The slot.
        slot: usize,
        /// The trial's number.
        number: u64,
    },
    /// A trial ended (its test walk and checkpoint recorded).
    TrialDone {
        /// Its number.
        number: u64,
        /// Trials finished so far.
        finished: usize,
    },
    /// A batch finished.
    BatchDone {
        /// Trials finished so far.
        finished: usize,
    },
    /// Placebo search `index` of `of` starts (its batches' events follow; with side searches at once
    /// (`--side-searches`) several searches' events interleave).
    Placebo {
        /// From 1.
        index: usize,
        /// Placebo searches in all.
        of: usize,
    },
    /// A fold of the walk-forward of the best configuration starts (each fold says so).
    WalkForward {
        /// Folds.
        folds: usize,
    },
    /// Walk-forward optimisation's search on fold `fold` (from 1) of `of` starts.
    WalkForwardSearch {
        /// The fold.
        fold: usize,
        /// Folds.
        of: usize,
    },
}

/// A claimed trial: number, parameters, and the trials finished when its number was issued.
type Claim = (u64, Params, Vec<u64>);

/// This process as a worker: named `host:pid`, or `TRADESIM_WORKER_ID` when set (a name that says which host
/// or container, for machines whose host names are not unique), with its process ([`WorkerProcess`]: boot
/// id, PID namespace and PID) whatever its name: the proof another worker needs before a process check may
/// tell it that this one is gone.
pub fn worker_id() -> Worker {
    let name = std::env::var("TRADESIM_WORKER_ID").unwrap_or_else(|_| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown-host".to_owned());
        format!("{}:{}", host.trim(), std::process::id())
    });
    Worker { name, process: WorkerProcess::this() }
}

/// Runs (or resumes) the search until the study holds `cfg.study.trials` finished trials of tradesim: one
/// worker per backend (every GPU of the host), each claiming the next batch of K trials as it frees up, and
/// any number of other processes on the same study. A heartbeat thread marks this process's running
/// trials every `heartbeat_seconds`; when nothing is left to claim but other workers still run trials, a
/// worker waits and takes over those whose worker went silent. With one worker the order of trials and
/// their parameters depend only on the seed; with several, TPE sees the trials finished so far, so the
/// sampled parameters also depend on which batch ends first.
pub fn run_search(
    backends: &[Backend],
    data: &SplitData,
    cfg: &SearchConfig,
    bars_per_year: f64,
    paths: &SearchPaths,
    progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
) -> Result<(), Error> {
    let s = &cfg.study;
    let planner = TrialPlanner::for_search(cfg, bars_per_year, &data.train)?;
    let me = worker_id();
    let claimed = Mutex::new(HashSet::new());
    // Trials this process is running (the heartbeat thread's list).
    let running: Mutex<HashSet<u64>> = Mutex::new(HashSet::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    // Why this worker stopped its trials (its heartbeats kept failing), once it did.
    let lost: Mutex<Option<String>> = Mutex::new(None);
    let lock = |m: &'_ Mutex<HashSet<u64>>| -> Result<Vec<u64>, Error> {
        Ok(m.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))?.iter().copied().collect())
    };
    let worker = |backend: &Backend| -> Result<(), Error> {
        let study = Study::reopen(&paths.storage, &paths.study_name)?;
        let mut claim = || {
            check_beating(&lost)?;
            let mut claimed = claimed.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))?;
            next_batch(&study, cfg, &mut claimed, &me)
        };
        while let Some(c) = next_or_wait(s.heartbeat_seconds, progress, &mut claim)? {
            let numbers: Vec<u64> = c.batch.runs.iter().map(|r| r.0.0).collect();
            locked(&running)?.extend(&numbers);
            progress(&Progress::Batch { numbers: numbers.clone(), finished: c.finished })?;
            let shared = Shared {
                claimed: &claimed,
                running: &running,
                me: &me,
                lost: &lost,
                paths,
                progress,
                test: &data.test,
                bars_per_year,
            };
            let result = run_batch(backend, data, cfg, &planner, c.batch, &shared, &study);
            locked(&running)?.retain(|n| !numbers.contains(n));
            result?;
            study.refresh(false)?;
            let finished = study.snapshot().finished().len();
            progress(&Progress::BatchDone { finished })?;
        }
        Ok(())
    };
    let heartbeat = || -> Result<(), Error> {
        let mut study: Option<Study> = None;
        let beat = || -> Result<(), Error> {
            let numbers = lock(&running)?;
            let result = match &study {
                Some(open) => open.beat(&numbers, &me),
                None => Study::reopen(&paths.storage, &paths.study_name).and_then(|open| {
                    let beat = open.beat(&numbers, &me);
                    study = Some(open);
                    beat
                }),
            };
            // A connection that failed is opened again for the next try.
            if result.is_err() {
                study = None;
            }
            result
        };
        let every = std::time::Duration::from_secs_f64(s.heartbeat_seconds);
        keep_beating(beat, every, std::time::Duration::from_secs_f64(s.stale_seconds), &done, &lost)
    };
    let results: Vec<Result<(), Error>> = std::thread::scope(|scope| {
        let beats = scope.spawn(heartbeat);
        let handles: Vec<_> = backends.iter().map(|b| scope.spawn(|| worker(b))).collect();
        let mut out: Vec<Result<(), Error>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::Study("a search worker panicked".to_owned()))))
            .collect();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the heartbeat thread from its wait, so the search ends without waiting out the slice.
        beats.thread().unpark();
        out.push(beats.join().unwrap_or_else(|_| Err(Error::Study("the heartbeat thread panicked".to_owned()))));
        out
    });
    results.into_iter().collect()
}

fn run_batch(
    backend: &Backend,
    data: &SplitData,
    cfg: &SearchConfig,
    planner: &TrialPlanner,
    batch: Batch,
    shared: &Shared<'_>,
    study: &Study,
) -> Result<(), Error> {
    let first = batch.runs.first().map(|r| r.0.1.clone()).ok_or_else(|| Error::Study("an empty batch".into()))?;
    // The slots' networks and buffers fit every trial they may hold: any of the space while trials are left
    // to claim (a freed slot may take any of them), else the batch's own (padding never changes a trial's
    // bits; it only costs time). The first trial's parameters stand in until each slot's trial is placed.
    study.refresh(false)?;
    let claims_left = study.snapshot().ours() < cfg.study.trials;
    let sizes = if claims_left {
        SlotSizes::of_space(cfg)
    } else {
        let own: Vec<_> = batch.runs.iter().map(|r| planner.read(&r.0.1)).collect::<Result<_, _>>()?;
        SlotSizes::of_trials(&own)
    };
    // The study's seed for every batch and each trial's number as its key: a trial's result does not depend
    // on its batch-mates, its slot, when it started or K (the same trial gives the same bits in any batch,
    // and on resume: tests/refill.rs).
    let plan = planner.plan_batch(batch.slots, &planner.read(&first)?, sizes)?;
    let slots = SearchSlots::new(cfg, planner, batch, shared, study);
    let tc = &plan.train;
    let ring = |segment_len| plan.ring_capacity(segment_len);
    let run = match &plan.learner {
        LearnerParams::Ppo(ppo) => {
            let mut ctl = slots.with(|h: &_| Ok(planner.ppo(h)));
            let make = |e: &EnvBatch| PpoAgent::new(backend, e, ppo, tc.hidden, tc.batch, tc.seed);
            let run = run_slots(backend, data, tc, ring, make, &mut ctl)?;
            (run.setup_seconds, run.test_seconds)
        }
        LearnerParams::Dqn(dqn) => {
            let mut ctl = slots.with(|h: &_| Ok(planner.dqn(h)));
            let make = |e: &EnvBatch| DqnAgent::new(backend, e, dqn, tc.hidden, tc.batch, tc.seed);
            let run = run_slots(backend, data, tc, ring, make, &mut ctl)?;
            (run.setup_seconds, run.test_seconds)
        }
    };
    progress_trained(shared, run)
}

/// The first retry of a failed heartbeat; each further retry waits twice as long, up to the heartbeat's
/// period.
const BEAT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Calls `beat` every `every` until `done`. A failed beat is retried after [`BEAT_RETRY`], then twice as
/// long each time (up to `every`); once beats have failed for `stale` (after which other workers may take
/// this worker's trials over, taking them for dead), it records why in `lost`, which stops this worker's
/// trials ([`check_beating`]), and returns that error. It waits parked: whoever sets `done` unparks it, so
/// it returns at once instead of at the end of its wait.
fn keep_beating(
    mut beat: impl FnMut() -> Result<(), Error>,
    every: std::time::Duration,
    stale: std::time::Duration,
    done: &std::sync::atomic::AtomicBool,
    lost: &Mutex<Option<String>>,
) -> Result<(), Error> {
    use std::time::Instant;
    let mut last_ok = Instant::now();
    let mut next = last_ok + every;
    let mut retry = BEAT_RETRY.min(every);
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let now = Instant::now();
        if now < next {
            // Parked, not asleep: the search's end unparks this thread (a spurious wake-up only loops).
            std::thread::park_timeout((next - now).min(std::time::Duration::from_millis(50)));
            continue;
        }
        match beat() {
            Ok(()) => {
                last_ok = Instant::now();
                next = last_ok + every;
                retry = BEAT_RETRY.min(every);
            }
            Err(e) if last_ok.elapsed() >= stale => {
                let why = format!(
                    "this worker's heartbeats failed for {:.1} s, longer than study.stale_seconds ({:.1} s), so \
                     other workers may take its trials over: its trials are stopped (last error: {e})",
                    last_ok.elapsed().as_secs_f64(),
                    stale.as_secs_f64()
                );
                *locked(lost)? = Some(why.clone());
                return Err(Error::Study(why));
            }
            Err(_) => {
                next = Instant::now() + retry;
                retry = (retry * 2).min(every);
            }
        }
    }
    Ok(())
}

/// The error that stops this worker's trials once its heartbeats were lost ([`keep_beating`]).
fn check_beating(lost: &Mutex<Option<String>>) -> Result<(), Error> {
    match locked(lost)?.as_ref() {
        Some(why) => Err(Error::Study(why.clone())),
        None => Ok(()),
    }
}

/// The study name when none is given.
pub const DEFAULT_STUDY_NAME: &str = "tradesim";

/// The default study (`dir/study.sqlite`, named [`DEFAULT_STUDY_NAME`]) and checkpoint locations under `dir`.
pub fn default_paths(dir: &Path) -> SearchPaths {
    SearchPaths {
        storage: StorageUrl::Sqlite(dir.join("study.sqlite")),
        study_name: DEFAULT_STUDY_NAME.to_owned(),
        checkpoints: dir.join(folder_for("checkpoints", DEFAULT_STUDY_NAME)),
        artifacts: None,
    }
}

/// A per-study folder name beside the study: `base` for the default study, `base-NAME` for another (the
/// name's characters outside `[A-Za-z0-9._-]` replaced by `_`), so that studies sharing a file do not
/// overwrite each other's checkpoints and reports.
pub fn folder_for(base: &str, study_name: &str) -> String {
    if study_name == DEFAULT_STUDY_NAME {
        return base.to_owned();
    }
    let safe: String = study_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    format!("{base}-{safe}")
}

#[cfg(test)]
mod tests {
    use super::claims::gone;
    use super::*;
    use crate::hyperopt::study::{EpochRecord, TrialRecord};

    fn at(epoch: u64, values: &[f64]) -> Vec<EpochRecord> {
        values
            .iter()
            .enumerate()
            .map(|(i, &v)| EpochRecord { trial: i as u64, epoch, loss: 0.0, valid_sharpe: v, valid_return: 0.0 })
            .collect()
    }

    #[test]
    fn median_rule_compares_the_best_value_so_far_with_the_median_of_complete_trials() {
        // Odd count: median 0.5. The trial's value now (0.4) is below, but its best so far (0.6) is not.
        let complete = at(2, &[0.1, 0.5, 0.9]);
        assert!(!should_prune(&[0.6, 0.3, 0.4], 2, &complete, 3, 1, 0));
        assert!(should_prune(&[0.2, 0.3, 0.4], 2, &complete, 3, 1, 0));
        // Even count: the mean of the two middle values (0.5 and 0.7 -> 0.6).
        let complete = at(1, &[0.1, 0.5, 0.7, 0.9]);
        assert!(should_prune(&[0.55, 0.59], 1, &complete, 4, 1, 0));
        assert!(!should_prune(&[0.55, 0.61], 1, &complete, 4, 1, 0));
        // Equal to the median is not below it.
        assert!(!should_prune(&[0.6], 1, &complete, 4, 1, 0));
    }

    #[test]
    fn the_reference_is_the_complete_trials_of_the_history() {
        let trial = |number: u64, status: &str, finished: bool| TrialRecord {
            checkpoint: finished.then(String::new),
            ..TrialRecord::ours(number, status)
        };
        // 0 complete, 1 pruned, 2 complete but finished after the trial's number was issued, 3 in the
        // history but running (cannot happen in a study; left out all the same).
        let trials = [
            trial(0, "complete", true),
            trial(1, "pruned", true),
            trial(2, "complete", true),
            trial(3, "running", false),
        ];
        let epochs: Vec<EpochRecord> = (0..4)
            .map(|t| EpochRecord { trial: t, epoch: 0, loss: 0.0, valid_sharpe: t as f64, valid_return: 0.0 })
            .collect();
        let (at, n) = pruning_reference(&trials, &epochs, &[0, 1, 3]);
        assert_eq!((at.iter().map(|e| e.trial).collect::<Vec<_>>(), n), (vec![0], 1));
        let (at, n) = pruning_reference(&trials, &epochs, &[0, 1, 2, 3]);
        assert_eq!((at.iter().map(|e| e.trial).collect::<Vec<_>>(), n), (vec![0, 2], 2));
    }

    fn worker(boot_id: &str, pid_namespace: u64, pid: u32) -> Worker {
        Worker {
            name: "lab:a".to_owned(),
            process: Some(WorkerProcess { boot_id: boot_id.to_owned(), pid_namespace, pid }),
        }
    }

    #[test]
    fn only_a_worker_of_this_boot_and_pid_namespace_is_judged_gone_by_its_pid() {
        let me = worker_id();
        let mine = me.process.clone().expect("Linux has /proc");
        // PID 0 is no process's; this process is alive.
        let dead = WorkerProcess { pid: 0, ..mine.clone() };
        assert!(gone(Some(&dead), &me));
        assert!(!gone(Some(&WorkerProcess { pid: std::process::id(), ..mine.clone() }), &me));
        // Another boot (machine or VM), another PID namespace (container): its PIDs mean nothing here.
        assert!(!gone(Some(&WorkerProcess { boot_id: "another-boot".to_owned(), ..dead.clone() }), &me));
        assert!(!gone(Some(&WorkerProcess { pid_namespace: mine.pid_namespace + 1, ..dead.clone() }), &me));
        // Without proof on either side, only the heartbeat decides.
        assert!(!gone(None, &me));
        assert!(!gone(Some(&dead), &Worker { process: None, ..me.clone() }));
        assert!(gone(Some(&dead), &worker(&mine.boot_id, mine.pid_namespace, 1)));
    }

    #[test]
    fn failed_heartbeats_are_retried_and_stop_the_worker_when_they_outlast_the_stale_time() {
        use std::sync::atomic::AtomicBool;
        use std::time::{Duration, Instant};
        // Three failures, then beats again: retried after 100, 200 and 300 ms (the period), never lost.
        let (done, lost) = (AtomicBool::new(false), Mutex::new(None));
        let calls = std::cell::Cell::new(0);
        let started = Instant::now();
        let beat = || {
            calls.set(calls.get() + 1);
            done.store(calls.get() == 6, std::sync::atomic::Ordering::SeqCst);
            if (2..=4).contains(&calls.get()) { Err(Error::Study("connection reset".into())) } else { Ok(()) }
        };
        keep_beating(beat, Duration::from_millis(300), Duration::from_secs(5), &done, &lost).unwrap();
        // 300 + 300 + 100 + 200 + 300 + 300 ms, against 1.8 s at the heartbeat's period.
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(1500) && elapsed < Duration::from_millis(1800), "{elapsed:?}");
        assert_eq!(calls.get(), 6);
        assert!(check_beating(&lost).is_ok());
        // Failing for good: retried until the stale time, then lost, with the reason.
        let (done, lost) = (AtomicBool::new(false), Mutex::new(None));
        let calls = std::cell::Cell::new(0);
        let started = Instant::now();
        let beat = || {
            calls.set(calls.get() + 1);
            Err(Error::Study("database unreachable".into()))
        };
        let e = keep_beating(beat, Duration::from_millis(200), Duration::from_millis(700), &done, &lost).unwrap_err();
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(700) && elapsed < Duration::from_secs(3), "{elapsed:?}");
        assert!(calls.get() >= 3, "{} tries", calls.get());
        let why = check_beating(&lost).unwrap_err().to_string();
        assert_eq!(why, e.to_string());
        assert!(why.contains("stale_seconds") && why.contains("database unreachable"), "{why}");
    }

    #[test]
    fn a_policy_that_never_trades_scores_zero() {
        let flat = crate::Metrics { trades: 0.0, sharpe: f64::NAN, ..crate::Metrics::default() };
        assert_eq!(objective(&flat, 6_000, 8_760.0), 0.0);
        // Trades without a defined Sharpe (no variance) stay undefined: a FAIL, as before.
        let odd = crate::Metrics { trades: 1.0, sharpe: f64::NAN, ..crate::Metrics::default() };
        assert!(objective(&odd, 6_000, 8_760.0).is_nan());
    }

    /// A trader's value is its Sharpe's one-sided 95% lower bound: below 0 for a lucky annual Sharpe of 1.5
    /// over 6,000 hourly bars (so staying flat ranks above it), above 0 for a Sharpe of 4; the bound widens
    /// as the returns get fewer.
    #[test]
    fn a_trader_must_beat_flat_at_95_percent() {
        let m = |sharpe: f64| crate::Metrics { trades: 40.0, sharpe, ..crate::Metrics::default() };
        let (t, year) = (6_000, 8_760.0);
        let width = params::OBJECTIVE_Z * (year / t as f64).sqrt();
        let lucky = objective(&m(1.5), t, year);
        assert!(lucky < 0.0 && (lucky - (1.5 - width)).abs() < 0.01, "{lucky} vs {}", 1.5 - width);
        assert!(objective(&m(4.0), t, year) > 1.5, "{}", objective(&m(4.0), t, year));
        assert!(objective(&m(4.0), 600, year) < objective(&m(4.0), t, year));
        assert!(objective(&m(-0.5), t, year) < -0.5);
    }

    #[test]
    fn median_rule_handles_nan_startup_and_warmup() {
        let complete = at(1, &[0.1, f64::NAN, 0.9]);
        // NaN values of complete trials are ignored: median of [0.1, 0.9] = 0.5.
        assert!(should_prune(&[0.4, 0.45], 1, &complete, 3, 1, 0));
        // NaN in the trial's own history: only an all-NaN history prunes.
        assert!(!should_prune(&[0.8, f64::NAN], 1, &complete, 3, 1, 0));
        assert!(should_prune(&[f64::NAN, f64::NAN], 1, &complete, 3, 1, 0));
        // Start-up: fewer complete trials than asked (or none at all): no pruning.
        assert!(!should_prune(&[0.0, 0.0], 1, &complete, 3, 4, 0));
        assert!(!should_prune(&[f64::NAN, f64::NAN], 1, &[], 0, 0, 0));
        // Warm-up: before epoch 2, no pruning.
        assert!(!should_prune(&[0.0, 0.0], 1, &complete, 3, 1, 2));
        // No complete trial reached this epoch: no pruning.
        assert!(!should_prune(&[0.0, 0.0, 0.0], 2, &complete, 3, 1, 0));
    }

    /// A batch is continued only where its worker stopped at a boundary: every trial of it finished, none
    /// this process's, its worker gone or silent, every slot freed at one epoch, no more slots than
    /// `parallel`, and no trial failed for its worker's deaths.
    #[test]
    fn only_a_batch_left_at_a_boundary_is_continued() {
        use super::claims::continued;
        use crate::hyperopt::study::Place;
        let cfg = crate::hyperopt::config::StudyConfig { epochs: 3, parallel: 2, ..Default::default() };
        let member = |number: u64, slot: usize, tick: usize| TrialRecord {
            value: 1.0,
            checkpoint: Some(String::new()),
            worker: Some("w".to_owned()),
            place: Some(Place { batch: 0, slot, tick }),
            ..TrialRecord::ours(number, "complete")
        };
        let none = HashSet::new();
        let gone = |_: &TrialRecord| true;
        // Slots 0 and 1 both freed at epoch 6 (3 + 3; 0 + 3 then 3 + 3).
        let at_boundary = vec![member(0, 0, 0), member(1, 1, 0), member(2, 0, 3), member(3, 1, 3)];
        assert_eq!(continued(&at_boundary, &none, &cfg, gone), Some((0, 2, 6)));
        // Its worker alive and beating.
        assert_eq!(continued(&at_boundary, &none, &cfg, |_: &TrialRecord| false), None);
        // A trial of it this process claimed.
        assert_eq!(continued(&at_boundary, &HashSet::from([3]), &cfg, gone), None);
        // A trial still running.
        let mut running = at_boundary.clone();
        running[3].status = "running".to_owned();
        assert_eq!(continued(&running, &none, &cfg, gone), None);
        // Slots freed at different epochs (slot 1's last trial pruned at its epoch 0: it ended at 3 + 2).
        let mut uneven = at_boundary.clone();
        (uneven[3].status, uneven[3].pruned_at) = ("pruned".to_owned(), Some(0));
        assert_eq!(continued(&uneven, &none, &cfg, gone), None);
        // More slots than the study's parallel.
        assert_eq!(
            continued(&at_boundary, &none, &crate::hyperopt::config::StudyConfig { parallel: 1, ..cfg.clone() }, gone),
            None
        );
        // A trial failed after its worker died in each of its runs.
        let mut failed = at_boundary.clone();
        (failed[3].status, failed[3].fail_reason) = ("fail".to_owned(), Some("its worker stopped".to_owned()));
        assert_eq!(continued(&failed, &none, &cfg, gone), None);
        // A trial failed for an undefined objective ran its epochs: the batch continues.
        failed[3].fail_reason = Some(crate::hyperopt::study::UNDEFINED_OBJECTIVE.to_owned());
        assert_eq!(continued(&failed, &none, &cfg, gone), Some((0, 2, 6)));
    }
}
