//! Claims: the next batch of a worker (interrupted trials first, then the batch a stopped worker left at a
//! boundary, then new trials sampled by TPE), each in one write transaction of the study.

use std::collections::HashSet;
use std::path::Path;

use super::Claim;
use super::Progress;
use crate::Error;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::sampler::{Observed, Params, TpeOptions, sample};
use crate::hyperopt::study::{Place, Study, TrialRecord, TrialSet, UNDEFINED_OBJECTIVE, Worker, WorkerProcess};

/// Whether the worker process `of` a trial is known to be gone: it ran on this machine since its last boot
/// and in this PID namespace (so its PID means here what it meant there), it is not this process, and that
/// PID is no process now (no `/proc/PID`). A name says nothing (two containers, or two workers named by
/// `TRADESIM_WORKER_ID`, share a host name); without that proof, on either side, only the heartbeat decides.
pub(super) fn gone(of: Option<&WorkerProcess>, me: &Worker) -> bool {
    let (Some(p), Some(mine)) = (of, me.process.as_ref()) else { return false };
    p.shares_pids_with(mine) && p.pid != mine.pid && !Path::new("/proc").join(p.pid.to_string()).exists()
}

/// What a claim found.
pub(super) struct Claimed {
    pub(super) batch: Batch,
    pub(super) finished: usize,
    /// Unfinished trials that live workers elsewhere are running.
    pub(super) elsewhere: Vec<u64>,
}

/// A batch to run: its number, its epoch to start from, its slots, and its trials in their places.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// The batch's first trial number.
    pub(super) id: u64,
    /// The batch's epoch at which this run starts (0; later when a killed batch resumes).
    pub(super) tick0: usize,
    /// Slots (K).
    pub(super) slots: usize,
    /// Claimed trials and where they start.
    pub(super) runs: Vec<(Claim, Place)>,
    /// Finished trials of a resumed batch: (slot, first epoch, end epoch) that they held.
    pub(super) held: Vec<(usize, usize, usize)>,
    /// The trials placed in the batch when this run of it began (a resumed batch's earlier trials).
    pub(super) known: HashSet<u64>,
}

/// The batch's epoch at which a finished trial of it freed its slot: all its epochs, or (pruned at its epoch
/// p) two more than p, as [`crate::train::run_slots`] ends a trial stopped after epoch p's report.
pub(super) fn end_tick(t: &TrialRecord, start: usize, epochs: usize) -> usize {
    start + t.pruned_at.map_or(epochs, |p| (p as usize + 2).min(epochs))
}

/// New trials sampled for a claim before it takes the study's lock: the number they were sampled for
/// (TPE's draws are keyed by it), their parameters, and the finished trials they were sampled from (their
/// recorded history).
pub(super) struct Sampled {
    first: u64,
    draws: Vec<Params>,
    seen: Vec<u64>,
    /// The study's `trials`: no start may take tradesim's trials beyond it.
    total: usize,
}

/// The number the next new trial takes: after every trial and every claim of this process.
fn next_number(trials: &TrialSet, claimed: &HashSet<u64>) -> u64 {
    trials.last().map(|t| t.number + 1).into_iter().chain(claimed.iter().map(|n| n + 1)).max().unwrap_or(0)
}

/// Samples up to `n` new trials from `trials` (TPE over the finished ones, [`TrialSet::fitted`] bounding what
/// it fits, and with the constant liar every unfinished one and each trial sampled before it here),
/// numbered after every trial and claim, with the study's seed XORed with `salt` ([`Study::sample_salt`]).
/// No database access: a claim samples from its snapshot outside the lock. Its cost does not grow with the
/// study beyond copying the finished trials' numbers (the history).
pub(super) fn sample_new(
    cfg: &SearchConfig,
    trials: &TrialSet,
    claimed: &HashSet<u64>,
    n: usize,
    salt: u64,
) -> Result<Sampled, Error> {
    let s = &cfg.study;
    let epochs = s.epochs as u64;
    // A set whose losses count other epochs (a study opened with another configuration) is rebuilt.
    let rebuilt;
    let trials = if trials.epochs() == epochs {
        trials
    } else {
        rebuilt = TrialSet::of(trials.iter().cloned(), epochs);
        &rebuilt
    };
    let opts = TpeOptions::from(s);
    // Finished trials TPE fits with what it minimizes; with the constant liar also every unfinished trial
    // (running here or elsewhere, claimed) and, below, each trial sampled by this call; by number.
    let mut numbers = trials.fitted(&opts);
    if opts.constant_liar {
        numbers.extend(trials.unfinished().map(|t| t.number));
    }
    numbers.sort_unstable();
    // An unfinished trial has no loss ([`TrialSet::loss`] is a finished trial's).
    let mut observed: Vec<Observed> = numbers
        .iter()
        .filter_map(|&number| {
            Some(Observed { number, params: trials.get(number)?.params.clone(), loss: trials.loss(number) })
        })
        .collect();
    let seen = trials.finished().to_vec();
    let first = next_number(trials, claimed);
    let mut draws = Vec::new();
    while draws.len() < n && trials.ours() + draws.len() < s.trials {
        let number = first + draws.len() as u64;
        let params = sample(&cfg.space, &observed, &opts, s.seed ^ salt, number)?;
        if opts.constant_liar {
            observed.push(Observed { number, params: params.clone(), loss: None });
        }
        draws.push(params);
    }
    Ok(Sampled { first, draws, seen, total: s.trials })
}

/// Starts the first `n` trials of `sampled` inside the caller's transaction, which holds the study's lock,
/// each placed by `place(first, i)`. When another claim took the sampled's numbers since it was sampled, the
/// sampled is `renumber`ed after it, unless a trial claimed since has parameters equal to one of its draws
/// (another worker that sampled the same numbers from the same snapshot drew the same points): then, or
/// without `renumber`, `None`. Returns the claims.
pub(super) fn start_sampled(
    study: &Study,
    sampled: &Sampled,
    trials: &TrialSet,
    claimed: &HashSet<u64>,
    n: usize,
    renumber: bool,
    place: impl Fn(u64, usize) -> Place,
) -> Result<Option<Vec<(Claim, Place)>>, Error> {
    let first = next_number(trials, claimed);
    if first != sampled.first {
        study.overtaken();
        let since = trials.from_number(sampled.first);
        let drawn_twice = || since.iter().any(|t| sampled.draws.iter().take(n).any(|d| *d == t.params));
        if !renumber || drawn_twice() {
            return Ok(None);
        }
    }
    // The sampled was sampled before the lock: trials other workers started since count against the study's
    // total, so a sampled near the end of the study starts only what is left.
    let left = sampled.total.saturating_sub(trials.ours());
    let mut out = Vec::new();
    for (i, params) in sampled.draws.iter().take(n.min(left)).enumerate() {
        let number = first + i as u64;
        let at = place(first, i);
        study.start_at(number, params, &sampled.seen, Some(at))?;
        out.push(((number, params.clone(), sampled.seen.clone()), at));
    }
    Ok(Some(out))
}

/// Samples and starts up to `n` new trials inside the caller's transaction ([`sample_new`] over `trials`,
/// then [`start_sampled`]): the fallback of a claim whose sampled went stale.
pub(super) fn start_new(
    study: &Study,
    cfg: &SearchConfig,
    trials: &TrialSet,
    claimed: &HashSet<u64>,
    n: usize,
    place: impl Fn(u64, usize) -> Place,
) -> Result<Vec<(Claim, Place)>, Error> {
    let sampled = sample_new(cfg, trials, claimed, n, study.sample_salt())?;
    Ok(start_sampled(study, &sampled, trials, claimed, n, false, place)?.unwrap_or_default())
}

/// The batch a resumed search continues when no trial of it is left to restart: the batch of tradesim's
/// latest placed trial, if none of its trials is this process's, all are finished, their worker is gone or
/// silent (`abandoned`), and all its slots freed at one epoch (the boundary at which its worker stopped,
/// between its last trials' ends and their slots' refills; a worker that runs on refills every slot it
/// frees while trials are left). Returns its number, slots and that epoch.
pub(super) fn continued(
    trials: &[TrialRecord],
    claimed: &HashSet<u64>,
    s: &crate::hyperopt::config::StudyConfig,
    abandoned: impl Fn(&TrialRecord) -> bool,
) -> Option<(u64, usize, usize)> {
    // `trials` are by number and a batch's trials are numbered from the batch's number on: the latest placed
    // trial is found from the end, and the batch's trials from its number.
    let batch = trials.iter().rev().filter(|t| t.ours).find_map(|t| t.place.map(|q| (t.number, q.batch)))?;
    let members: Vec<(&TrialRecord, Place)> = trials[trials.partition_point(|t| t.number < batch.1)..]
        .iter()
        .filter_map(|t| t.place.filter(|q| t.ours && q.batch == batch.1).map(|q| (t, q)))
        .collect();
    // A trial failed for its worker's repeated deaths did not end at a boundary.
    let failed_interrupted =
        |t: &TrialRecord| t.status == "fail" && t.fail_reason.as_deref() != Some(UNDEFINED_OBJECTIVE);
    if members
        .iter()
        .any(|(t, _)| claimed.contains(&t.number) || !t.finished() || !abandoned(t) || failed_interrupted(t))
    {
        return None;
    }
    let slots = members.iter().map(|(_, q)| q.slot + 1).max().unwrap_or(0);
    let ends: Vec<usize> = (0..slots)
        .map(|k| {
            members.iter().filter(|(_, q)| q.slot == k).map(|(t, q)| end_tick(t, q.tick, s.epochs)).max().unwrap_or(0)
        })
        .collect();
    let tick = ends.first().copied().unwrap_or(0);
    (slots > 0 && slots <= s.parallel && ends.iter().all(|&e| e == tick)).then_some((batch.1, slots, tick))
}

/// The next batch this worker runs, by `claim` (a [`next_batch`]): while the study's only unfinished
/// trials are other live workers' it says so and claims again after a heartbeat; `None` once the study
/// has nothing left to run.
pub(super) fn next_or_wait(
    heartbeat_seconds: f64,
    progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
    mut claim: impl FnMut() -> Result<Claimed, Error>,
) -> Result<Option<Claimed>, Error> {
    loop {
        let c = claim()?;
        if !c.batch.runs.is_empty() {
            return Ok(Some(c));
        }
        if c.elsewhere.is_empty() {
            return Ok(None);
        }
        progress(&Progress::Waiting { numbers: c.elsewhere })?;
        std::thread::sleep(std::time::Duration::from_secs_f64(heartbeat_seconds));
    }
}

/// Claims the next batch, in one write transaction (so two workers, in this process or any other, never
/// claim the same trial). Interrupted trials come first: tradesim's unfinished trials that no worker of this
/// process runs and whose worker is gone (a process of this host that no longer exists) or silent (no
/// heartbeat for `stale_seconds`). Those of the first one's batch are restarted under their numbers,
/// parameters, histories and places, and the batch resumes at the first epoch one of them started at, its
/// finished trials holding their slots as long as they did; so with one worker a resumed search starts,
/// refills and samples where and what the uninterrupted one did. (Trials recorded without a place, by an
/// older version, restart together at epoch 0 of a new batch.) Otherwise new trials, up to `parallel`,
/// sampled from the finished trials of this handle's snapshot, which become their recorded history. The
/// sampling happens before the transaction, from the snapshot refreshed then ([`sample_new`]); under the lock
/// the claim refreshes the snapshot again (the rows added since) and only numbers and inserts the sampled
/// trials; when another claim took their numbers meanwhile they are numbered after it, unless that would
/// repeat another claim's draws ([`start_sampled`]): then it samples again outside the lock, and after
/// [`SAMPLE_TRIES`] such samples inside it. Trials of other Optuna workers are left alone (their numbers
/// are skipped).
pub(super) fn next_batch(
    study: &Study,
    cfg: &SearchConfig,
    claimed: &mut HashSet<u64>,
    me: &Worker,
) -> Result<Claimed, Error> {
    for attempt in 1.. {
        study.refresh(false)?;
        let sampled = sample_new(cfg, &study.snapshot(), claimed, cfg.study.parallel, study.sample_salt())?;
        if let Some(c) = claim_batch(study, cfg, claimed, me, &sampled, attempt >= SAMPLE_TRIES)? {
            claimed.extend(c.batch.runs.iter().map(|r| r.0.0));
            return Ok(c);
        }
    }
    unreachable!("the last try samples under the lock")
}

/// How many samples a claim samples outside the lock before it samples under it.
pub(super) const SAMPLE_TRIES: usize = 3;

/// [`next_batch`]'s transaction: `None` when `sampled` went stale and `last` is not set (nothing claimed).
fn claim_batch(
    study: &Study,
    cfg: &SearchConfig,
    claimed: &HashSet<u64>,
    me: &Worker,
    sampled: &Sampled,
    last: bool,
) -> Result<Option<Claimed>, Error> {
    let s = &cfg.study;
    // Heartbeats are written and judged on the database's clock (a worker's clock may be off). The cutoff is
    // read before the lock, so that the lock is not held for it: a heartbeat is judged against a time at
    // most the lock's wait earlier, which can only judge a trial stale later, never sooner.
    let cutoff = study.db_time_ago(s.stale_seconds)?;
    study.in_locked_tx(|| {
        study.refresh(true)?;
        let processes = study.snapshot_processes();
        let trials = study.snapshot();
        let trials: &TrialSet = &trials;
        let abandoned = |t: &TrialRecord| {
            t.worker.is_none()
                || gone(processes.get(&t.number), me)
                || t.heartbeat.as_deref().is_none_or(|h| h < cutoff.as_str())
        };
        let (interrupted, elsewhere): (Vec<&TrialRecord>, Vec<&TrialRecord>) =
            trials.unfinished().filter(|t| t.ours && !claimed.contains(&t.number)).partition(|t| abandoned(t));
        // A trial whose worker stopped in each of its `max_runs` runs fails rather than stop another.
        let (spent, interrupted): (Vec<&TrialRecord>, Vec<&TrialRecord>) =
            interrupted.into_iter().partition(|t| t.runs >= s.max_runs);
        for t in &spent {
            study.fail_interrupted(t.number, t.runs)?;
        }
        let finished = trials.finished().len() + spent.len();
        let mut batch = Batch::default();
        if let Some(first) = interrupted.first() {
            let again: Vec<(&TrialRecord, Place)> = match first.place {
                Some(p) => {
                    interrupted.iter().filter_map(|t| t.place.filter(|q| q.batch == p.batch).map(|q| (*t, q))).collect()
                }
                None => interrupted
                    .iter()
                    .filter(|t| t.place.is_none() && t.history == first.history)
                    .take(s.parallel)
                    .enumerate()
                    .map(|(slot, t)| (*t, Place { batch: first.number, slot, tick: 0 }))
                    .collect(),
            };
            batch.id = again[0].1.batch;
            batch.tick0 = again.iter().map(|(_, q)| q.tick).min().unwrap_or(0);
            let members = trials.from_number(batch.id).iter().filter(|t| t.place.is_some_and(|q| q.batch == batch.id));
            batch.known = members.clone().map(|t| t.number).collect();
            batch.slots = members.clone().map(|t| t.place.map_or(0, |q| q.slot + 1)).max().unwrap_or(0);
            batch.slots = batch.slots.max(again.iter().map(|(_, q)| q.slot + 1).max().unwrap_or(0));
            batch.held = members
                .filter(|t| t.finished())
                .filter_map(|t| t.place.map(|q| (q.slot, q.tick, end_tick(t, q.tick, s.epochs))))
                .collect();
            for (t, at) in again {
                study.restart(t.number)?;
                if first.place.is_none() {
                    study.place(t.number, at)?;
                }
                batch.runs.push(((t.number, t.params.clone(), t.history.clone()), at));
            }
        } else {
            let continues = continued(&trials[..], claimed, s, abandoned);
            let n = continues.map_or(s.parallel, |c| c.1);
            let place = |first: u64, slot: usize| match continues {
                // A batch whose worker stopped at a boundary, after its last trials finished and before their
                // slots took new ones: its slots refill there, as they would have.
                Some((id, _, tick)) => Place { batch: id, slot, tick },
                None => Place { batch: first, slot, tick: 0 },
            };
            batch.runs = match start_sampled(study, sampled, trials, claimed, n, true, place)? {
                Some(runs) => runs,
                None if last => start_new(study, cfg, trials, claimed, n, place)?,
                None => return Ok(None),
            };
            match continues {
                Some((id, slots, tick)) => {
                    (batch.id, batch.tick0, batch.slots) = (id, tick, slots);
                    batch.known = trials
                        .from_number(id)
                        .iter()
                        .filter(|t| t.place.is_some_and(|q| q.batch == id))
                        .map(|t| t.number)
                        .collect();
                }
                None => {
                    batch.id = batch.runs.first().map_or(0, |r| r.1.batch);
                    batch.slots = batch.runs.len();
                }
            }
        }
        let runs: Vec<(u64, u64)> =
            batch.runs.iter().map(|((n, ..), _)| (*n, trials.get(*n).map_or(0, |t| t.runs))).collect();
        study.claim_for(&runs, me)?;
        Ok(Some(Claimed { batch, finished, elsewhere: elsewhere.iter().map(|t| t.number).collect() }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyperopt::storage::StorageUrl;

    fn config() -> SearchConfig {
        let mut cfg = SearchConfig::default();
        (cfg.study.trials, cfg.study.parallel, cfg.study.seed, cfg.study.startup_trials) = (48, 4, 7, 6);
        cfg
    }

    fn study(dir: &Path, name: &str, cfg: &SearchConfig) -> Study {
        let path = dir.join(format!("{name}.sqlite"));
        let _ = std::fs::remove_file(&path);
        Study::open(&StorageUrl::Sqlite(path), "s", false, &serde_json::to_string(cfg).unwrap()).unwrap()
    }

    /// A trial's value: a smooth function of its parameters, so TPE has something to fit.
    fn value(p: &Params) -> f64 {
        -p.values().map(|v| (v.abs() + 1e-9).ln().abs()).sum::<f64>() / 10.0
    }

    /// What a claim did before sampling moved out of the lock: under the lock, read every trial and sample
    /// from them (the new-trial path of a claim).
    fn claim_under_lock(study: &Study, cfg: &SearchConfig, claimed: &mut HashSet<u64>, me: &Worker) -> Vec<Claim> {
        let runs = study
            .in_locked_tx(|| {
                let trials = TrialSet::of(study.trials()?, cfg.study.epochs as u64);
                let runs = start_new(study, cfg, &trials, claimed, cfg.study.parallel, |first, slot| Place {
                    batch: first,
                    slot,
                    tick: 0,
                })?;
                study.claim_for(&runs.iter().map(|((n, ..), _)| (*n, 0)).collect::<Vec<_>>(), me)?;
                Ok(runs)
            })
            .unwrap();
        claimed.extend(runs.iter().map(|r| r.0.0));
        runs.into_iter().map(|r| r.0).collect()
    }

    /// One worker with a fixed seed: the claims sampled outside the lock from the worker's snapshot give
    /// the trials (numbers, parameters, histories) that sampling under the lock from a fresh read of every
    /// trial gave, through start-up, TPE, pruned trials and trials left running across claims.
    #[test]
    fn one_worker_samples_outside_the_lock_what_it_sampled_under_it() {
        let dir = std::env::temp_dir().join(format!("tradesim-claims-same-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = config();
        let me = Worker { name: "w".to_owned(), process: None };
        let (now, before) = (study(&dir, "now", &cfg), study(&dir, "before", &cfg));
        let (mut claimed_now, mut claimed_before) = (HashSet::new(), HashSet::new());
        let mut left: Vec<u64> = Vec::new();
        for round in 0..12 {
            let a: Vec<Claim> =
                next_batch(&now, &cfg, &mut claimed_now, &me).unwrap().batch.runs.into_iter().map(|r| r.0).collect();
            let b = claim_under_lock(&before, &cfg, &mut claimed_before, &me);
            assert_eq!(a, b, "round {round}");
            // The trial left running last round finishes now; this round's last one is left running.
            let finishing: Vec<&Claim> = a.iter().take(a.len().saturating_sub(1)).collect();
            for study in [&now, &before] {
                for n in &left {
                    study.finish(*n, 0.5, 0.0, 0.0, &[], "c").unwrap();
                }
                for (i, (n, p, _)) in finishing.iter().enumerate() {
                    if i == 1 {
                        study.prune(*n, 0, value(p)).unwrap();
                    }
                    study.finish(*n, value(p), 0.0, 0.0, &[], "c").unwrap();
                }
            }
            left = a.last().map(|c| c.0).into_iter().collect();
        }
        assert_eq!(now.trials().unwrap().len(), 48, "every trial claimed");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A sampled sampled before another worker claimed is stale under the lock (its numbers are taken): it is
    /// not inserted, and the next claim numbers its trials after the other worker's.
    #[test]
    fn a_stale_plan_is_sampled_again() {
        let dir = std::env::temp_dir().join(format!("tradesim-claims-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = config();
        let me = Worker { name: "w".to_owned(), process: None };
        let one = study(&dir, "stale", &cfg);
        let path = StorageUrl::Sqlite(dir.join("stale.sqlite"));
        let two = Study::reopen(&path, "s").unwrap();
        one.refresh(false).unwrap();
        let sampled = sample_new(&cfg, &one.snapshot(), &HashSet::new(), 4, 0).unwrap();
        assert_eq!((sampled.first, sampled.draws.len()), (0, 4));
        let other = next_batch(&two, &cfg, &mut HashSet::new(), &me).unwrap();
        assert_eq!(other.batch.runs.iter().map(|r| r.0.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
        let started = one
            .in_locked_tx(|| {
                one.refresh(true)?;
                let place = |f, slot| Place { batch: f, slot, tick: 0 };
                let trials = one.snapshot();
                // Renumbered, the sampled would repeat the other worker's draws (same numbers, same snapshot).
                assert!(start_sampled(&one, &sampled, &trials, &HashSet::new(), 4, true, place)?.is_none());
                start_sampled(&one, &sampled, &trials, &HashSet::new(), 4, false, place)
            })
            .unwrap();
        assert!(started.is_none(), "the sampled's numbers were taken");
        let mine = next_batch(&one, &cfg, &mut HashSet::new(), &me).unwrap();
        assert_eq!(mine.batch.runs.iter().map(|r| r.0.0).collect::<Vec<_>>(), [4, 5, 6, 7]);
        let numbers: Vec<u64> = one.trials().unwrap().iter().map(|t| t.number).collect();
        assert_eq!(numbers, (0..8).collect::<Vec<_>>(), "no number lost or given twice");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Near the end of a study a sampled sampled before the lock, renumbered after another worker's claim,
    /// starts only the trials left: two workers planning the last 2 of 6 trials each never make 8.
    #[test]
    fn a_renumbered_plan_stops_at_the_studys_trials() {
        let dir = std::env::temp_dir().join(format!("tradesim-claims-total-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cfg = config();
        (cfg.study.trials, cfg.study.startup_trials) = (6, 4);
        let me = Worker { name: "w".to_owned(), process: None };
        let one = study(&dir, "total", &cfg);
        let two = Study::reopen(&StorageUrl::Sqlite(dir.join("total.sqlite")), "s").unwrap();
        let first = next_batch(&two, &cfg, &mut HashSet::new(), &me).unwrap();
        assert_eq!(first.batch.runs.len(), 4);
        // This worker samples while trials 0-3 run (random draws); the other claims after they finished (TPE's
        // draws): the samples differ, so this one is renumbered rather than refused as a repeat.
        one.refresh(false).unwrap();
        let sampled = sample_new(&cfg, &one.snapshot(), &HashSet::new(), 2, 0).unwrap();
        assert_eq!((sampled.first, sampled.draws.len()), (4, 2));
        for (n, p, _) in first.batch.runs.iter().map(|r| &r.0) {
            two.finish(*n, value(p), 0.0, 0.0, &[], "c").unwrap();
        }
        let other = next_batch(&two, &cfg, &mut HashSet::new(), &me).unwrap();
        assert_eq!(other.batch.runs.iter().map(|r| r.0.0).collect::<Vec<_>>(), [4, 5]);
        let started = one
            .in_locked_tx(|| {
                one.refresh(true)?;
                let place = |f, slot| Place { batch: f, slot, tick: 0 };
                start_sampled(&one, &sampled, &one.snapshot(), &HashSet::new(), 2, true, place)
            })
            .unwrap();
        assert_eq!(started.map(|s| s.len()), Some(0), "nothing is left to start");
        assert_eq!(one.trials().unwrap().len(), 6, "the study holds its 6 trials, not 8");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
