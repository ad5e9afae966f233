//! Claims: the next batch of a worker (interrupted trials first, then the batch a stopped worker left at a
//! boundary, then new trials sampled by TPE), each in one write transaction of the study.

use std::collections::HashSet;
use std::path::Path;

use super::Claim;
use crate::Error;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::sampler::{Observed, TpeOptions, sample, tpe_loss};
use crate::hyperopt::study::{Place, Study, TrialRecord, UNDEFINED_OBJECTIVE, Worker, WorkerProcess};

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

/// Samples and starts up to `n` new trials of this worker inside the caller's transaction (TPE over every
/// finished trial, which becomes their history, and with the constant liar every unfinished one), numbered
/// after every trial and claim; each placed by `place(i)`. Returns the claims and their claim counts (0).
pub(super) fn start_new(
    study: &Study,
    cfg: &SearchConfig,
    trials: &[TrialRecord],
    claimed: &HashSet<u64>,
    n: usize,
    place: impl Fn(u64, usize) -> Place,
) -> Result<Vec<(Claim, Place)>, Error> {
    let s = &cfg.study;
    let finished: Vec<&TrialRecord> = trials.iter().filter(|t| t.finished()).collect();
    let epochs = s.epochs as u64;
    let opts = TpeOptions::from(s);
    // Finished trials with what TPE minimizes; with the constant liar also every unfinished trial (running
    // here or elsewhere, claimed) and, below, each trial sampled by this call.
    let mut observed: Vec<Observed> = trials
        .iter()
        .filter_map(|t| match tpe_loss(&t.status, t.value, t.pruned_at, epochs) {
            Some(loss) if t.finished() => {
                Some(Observed { number: t.number, params: t.params.clone(), loss: Some(loss) })
            }
            None if !t.finished() && opts.constant_liar => {
                Some(Observed { number: t.number, params: t.params.clone(), loss: None })
            }
            _ => None,
        })
        .collect();
    let seen: Vec<u64> = finished.iter().map(|t| t.number).collect();
    let ours_total = trials.iter().filter(|t| t.ours).count();
    let mut next = trials.iter().map(|t| t.number + 1).chain(claimed.iter().map(|n| n + 1)).max().unwrap_or(0);
    let first = next;
    let mut out = Vec::new();
    while out.len() < n && ours_total + out.len() < s.trials {
        let params = sample(&cfg.space, &observed, &opts, s.seed, next)?;
        study.start(next, &params, &seen)?;
        if opts.constant_liar {
            observed.push(Observed { number: next, params: params.clone(), loss: None });
        }
        let at = place(first, out.len());
        study.place(next, at)?;
        out.push(((next, params, seen.clone()), at));
        next += 1;
    }
    Ok(out)
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
    let batch = trials.iter().filter(|t| t.ours).filter_map(|t| t.place.map(|q| (t.number, q.batch))).max()?;
    let members: Vec<(&TrialRecord, Place)> =
        trials.iter().filter_map(|t| t.place.filter(|q| t.ours && q.batch == batch.1).map(|q| (t, q))).collect();
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

/// Claims the next batch, in one write transaction (so two workers, in this process or any other, never
/// claim the same trial). Interrupted trials come first: tradesim's unfinished trials that no worker of this
/// process runs and whose worker is gone (a process of this host that no longer exists) or silent (no
/// heartbeat for `stale_seconds`). Those of the first one's batch are restarted under their numbers,
/// parameters, histories and places, and the batch resumes at the first epoch one of them started at, its
/// finished trials holding their slots as long as they did; so with one worker a resumed search starts,
/// refills and samples where and what the uninterrupted one did. (Trials recorded without a place, by an
/// older version, restart together at epoch 0 of a new batch.) Otherwise new trials, up to `parallel`,
/// sampled from every finished trial, which becomes their recorded history. Trials of other Optuna workers
/// are left alone (their numbers are skipped).
pub(super) fn next_batch(
    study: &Study,
    cfg: &SearchConfig,
    claimed: &mut HashSet<u64>,
    me: &Worker,
) -> Result<Claimed, Error> {
    let s = &cfg.study;
    let claimed_now = study.in_tx(|| {
        study.lock()?;
        // Heartbeats are written and judged on the database's clock (a worker's clock may be off).
        let cutoff = study.db_time_ago(s.stale_seconds)?;
        let processes = study.worker_processes()?;
        let trials = study.trials()?;
        let abandoned = |t: &TrialRecord| {
            t.worker.is_none()
                || gone(processes.get(&t.number), me)
                || t.heartbeat.as_deref().is_none_or(|h| h < cutoff.as_str())
        };
        let (interrupted, elsewhere): (Vec<&TrialRecord>, Vec<&TrialRecord>) = trials
            .iter()
            .filter(|t| t.ours && !t.finished() && !claimed.contains(&t.number))
            .partition(|t| abandoned(t));
        // A trial whose worker stopped in each of its `max_runs` runs fails rather than stop another.
        let (spent, interrupted): (Vec<&TrialRecord>, Vec<&TrialRecord>) =
            interrupted.into_iter().partition(|t| t.runs >= s.max_runs);
        for t in &spent {
            study.fail_interrupted(t.number, t.runs)?;
        }
        let finished = trials.iter().filter(|t| t.finished()).count() + spent.len();
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
            let members = trials.iter().filter(|t| t.place.is_some_and(|q| q.batch == batch.id));
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
        } else if let Some((id, slots, tick)) = continued(&trials, claimed, s, abandoned) {
            // A batch whose worker stopped at a boundary, after its last trials finished and before their
            // slots took new ones: its slots refill there, as they would have.
            (batch.id, batch.tick0, batch.slots) = (id, tick, slots);
            batch.known = trials.iter().filter(|t| t.place.is_some_and(|q| q.batch == id)).map(|t| t.number).collect();
            batch.runs = start_new(study, cfg, &trials, claimed, slots, |_, slot| Place { batch: id, slot, tick })?;
        } else {
            batch.runs = start_new(study, cfg, &trials, claimed, s.parallel, |first, slot| Place {
                batch: first,
                slot,
                tick: 0,
            })?;
            batch.id = batch.runs.first().map_or(0, |r| r.1.batch);
            batch.slots = batch.runs.len();
        }
        let runs: Vec<(u64, u64)> = batch
            .runs
            .iter()
            .map(|((n, ..), _)| (*n, trials.iter().find(|t| t.number == *n).map_or(0, |t| t.runs)))
            .collect();
        study.claim_for(&runs, me)?;
        Ok(Claimed { batch, finished, elsewhere: elsewhere.iter().map(|t| t.number).collect() })
    })?;
    claimed.extend(claimed_now.batch.runs.iter().map(|r| r.0.0));
    Ok(claimed_now)
}
