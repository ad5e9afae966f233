//! A batch's slots as the search fills them: each trial's epochs recorded and pruned, a freed slot refilled
//! with the next claim, an ended trial's checkpoint (and artifacts) saved and the trial finished.

use std::collections::HashSet;
use std::sync::Mutex;

use super::Claim;
use super::claims::{Batch, SAMPLE_TRIES, Sampled, sample_new, start_new, start_sampled};
use super::{Progress, SearchPaths, check_beating, objective, should_prune};
use crate::Error;
use crate::TrialParams;
use crate::hyperopt::config::{PruneRule, SearchConfig};
use crate::hyperopt::hyperparameters::Hyperparameters;
use crate::hyperopt::plan::TrialPlanner;
use crate::hyperopt::study::{EpochRecord, Place, Study, TrialRecord, Worker};
use crate::train::{EndedTrial, EpochReport, SlotControl, SlotTrial};

/// Reports a batch's setup and test-walk seconds.
pub(super) fn progress_trained(shared: &Shared<'_>, (setup_seconds, test_seconds): (f64, f64)) -> Result<(), Error> {
    (shared.progress)(&Progress::Trained { setup_seconds, test_seconds })
}

/// What the workers of one search share: the claims of this process, the trials it runs (the heartbeat's
/// list), this worker's name, where it writes, and the progress listener.
pub(super) struct Shared<'a> {
    pub(super) claimed: &'a Mutex<HashSet<u64>>,
    pub(super) running: &'a Mutex<HashSet<u64>>,
    pub(super) me: &'a Worker,
    /// Why this worker stopped its trials, once its heartbeats were lost ([`keep_beating`]).
    pub(super) lost: &'a Mutex<Option<String>>,
    pub(super) paths: &'a SearchPaths,
    pub(super) progress: &'a (dyn Fn(&Progress) -> Result<(), Error> + Sync),
    /// The test split and its annualization (a trial's test ledger for the artifact store).
    pub(super) test: &'a crate::MarketData,
    pub(super) bars_per_year: f64,
}

pub(super) fn locked<'m, T>(m: &'m Mutex<T>) -> Result<std::sync::MutexGuard<'m, T>, Error> {
    m.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))
}

/// A trial running in a slot: its number, parameters, history's pruning reference, values so far, and
/// whether it was pruned.
pub(super) struct Running {
    pub(super) number: u64,
    /// Its environment (costs, stops) as the kernels take it.
    pub(super) env: TrialParams,
    pub(super) reference: (Vec<EpochRecord>, usize),
    pub(super) own: Vec<f64>,
    pub(super) pruned: bool,
    /// The greedy validation actions of its last reported epoch.
    pub(super) valid_actions: Vec<u8>,
}

/// The search's [`SlotControl`]: records each epoch of each trial in the study and applies the median rule;
/// places the batch's claimed trials at their epochs and, when a slot frees up, claims the next trial (TPE
/// over the trials finished by then); saves a trial's checkpoint and finishes it in the study when it ends.
pub(super) struct SearchSlots<'a, F> {
    pub(super) cfg: &'a SearchConfig,
    pub(super) planner: &'a TrialPlanner,
    pub(super) batch: Batch,
    pub(super) shared: &'a Shared<'a>,
    pub(super) study: &'a Study,
    /// Per slot: the number of the trial it holds.
    pub(super) slots: Vec<Option<u64>>,
    /// Trials of this run by number (those ended leave).
    pub(super) trials: std::collections::HashMap<u64, Running>,
    pub(super) learner: F,
}

impl<'a> SearchSlots<'a, ()> {
    pub(super) fn new(
        cfg: &'a SearchConfig,
        planner: &'a TrialPlanner,
        batch: Batch,
        shared: &'a Shared<'a>,
        study: &'a Study,
    ) -> Self {
        let slots = vec![None; batch.slots];
        Self { cfg, planner, batch, shared, study, slots, trials: std::collections::HashMap::new(), learner: () }
    }

    pub(super) fn with<F>(self, learner: F) -> SearchSlots<'a, F> {
        let Self { cfg, planner, batch, shared, study, slots, trials, .. } = self;
        SearchSlots { cfg, planner, batch, shared, study, slots, trials, learner }
    }
}

impl<P, F: Fn(&Hyperparameters) -> Result<P, Error>> SlotControl<P> for SearchSlots<'_, F> {
    fn preloaded(&self) -> bool {
        false
    }

    fn report(&mut self, r: &EpochReport) -> Result<(), Error> {
        check_beating(self.shared.lost)?;
        let s = &self.cfg.study;
        let numbers: Vec<u64> = r.trials.iter().flatten().map(|t| t.0).collect();
        let valid = |k: usize| r.valid[k].sharpe;
        let best = r.trials.iter().enumerate().filter(|(_, t)| t.is_some()).map(|(k, _)| valid(k));
        let best = best.filter(|x| x.is_finite()).fold(f64::NAN, f64::max);
        let transitions = (s.envs * s.segment_len * numbers.len()) as f64;
        (self.shared.progress)(&Progress::Epoch {
            epoch: r.epoch,
            env_steps_per_s: transitions / r.train_seconds.max(1e-9),
            best,
            train_seconds: r.train_seconds,
            eval_seconds: r.eval_seconds,
            live: numbers.len(),
            slots: r.trials.len(),
        })?;
        for (k, t) in r.trials.iter().enumerate() {
            let Some((number, epoch)) = *t else { continue };
            let Some(run) = self.trials.get_mut(&number) else { continue };
            if run.pruned {
                continue;
            }
            let m = &r.valid[k];
            let steps = r.valid_actions.len() / r.trials.len().max(1);
            let value = objective(m, steps, self.shared.bars_per_year);
            let record = EpochRecord {
                trial: number,
                epoch: epoch as u64,
                loss: f64::from(r.losses[k]),
                valid_sharpe: value,
                valid_return: m.total_return,
            };
            run.own.push(value);
            run.valid_actions = r.valid_actions[k * steps..(k + 1) * steps].to_vec();
            self.study.record_epoch(&record)?;
            let (reference, n_complete) = (&run.reference.0, run.reference.1);
            if s.prune == PruneRule::Median
                && should_prune(
                    &run.own,
                    epoch as u64,
                    reference,
                    n_complete,
                    s.prune_startup_trials,
                    s.prune_warmup_epochs,
                )
            {
                run.pruned = true;
                self.study.prune(number, epoch as u64, value)?;
                crate::failpoint::hit("prune");
            }
        }
        Ok(())
    }

    fn stops(&self, slot: usize) -> bool {
        self.slots[slot].and_then(|n| self.trials.get(&n)).is_some_and(|t| t.pruned)
    }

    /// The median rule prunes only a trial whose reference holds enough complete trials ([`should_prune`]);
    /// the reference is fixed when the trial is claimed.
    fn may_stop(&self, slot: usize) -> bool {
        let s = &self.cfg.study;
        let n_complete = |t: &Running| t.reference.1;
        s.prune == PruneRule::Median
            && self.slots[slot]
                .and_then(|n| self.trials.get(&n))
                .is_some_and(|t| !t.pruned && n_complete(t) > 0 && n_complete(t) >= s.prune_startup_trials)
    }

    fn next(&mut self, slot: usize, tick: usize) -> Result<Option<SlotTrial<P>>, Error> {
        let at = self.batch.tick0 + tick;
        self.slots[slot] = None;
        // A claimed trial starts at its place's epoch (never later in a run that repeats the original; were
        // its slot still busy then, it starts as soon as the slot frees rather than never).
        let placed = self.batch.runs.iter().position(|(_, q)| q.slot == slot && q.tick <= at);
        let claim = match placed {
            Some(i) => Some(self.batch.runs.remove(i).0),
            None if self.batch.held.iter().any(|&(s, from, to)| s == slot && from <= at && at < to) => None,
            // A slot that still has a trial of its own to come idles until then.
            None if self.batch.runs.iter().any(|(_, q)| q.slot == slot) => None,
            None => {
                let (study, cfg) = (self.study, self.cfg);
                let mut claimed = locked(self.shared.claimed)?;
                // Sampled from the snapshot before the lock; under it only numbered and inserted (the
                // claim's own doc, `next_batch`, says when it samples again).
                let mut new = None;
                for attempt in 1..=SAMPLE_TRIES {
                    study.refresh(false)?;
                    let sampled = sample_new(cfg, &study.snapshot(), &claimed, 1, study.sample_salt())?;
                    new = self.refill(&sampled, &claimed, slot, at, attempt == SAMPLE_TRIES)?;
                    if new.is_some() {
                        break;
                    }
                }
                let new = new.unwrap_or_default();
                claimed.extend(new.iter().map(|r| r.0.0));
                if tick > 0 && !new.is_empty() {
                    crate::failpoint::hit("refill");
                }
                new.into_iter().next().map(|r| r.0)
            }
        };
        let Some((number, params, history)) = claim else { return Ok(None) };
        locked(self.shared.running)?.insert(number);
        // The history's trials were finished when the claim refreshed the snapshot.
        let reference = self.study.snapshot_reference(&history);
        let h = self.planner.read(&params)?;
        let env = self.planner.trial_env(&h, number)?;
        let learner = (self.learner)(&h)?;
        let run = Running { number, env, reference, own: Vec::new(), pruned: false, valid_actions: Vec::new() };
        self.trials.insert(number, run);
        self.slots[slot] = Some(number);
        if tick > 0 {
            (self.shared.progress)(&Progress::Refill { slot, number })?;
        }
        Ok(Some(SlotTrial { env, learner }))
    }

    fn ended(&mut self, t: EndedTrial) -> Result<(), Error> {
        let Some(run) = self.trials.remove(&t.key) else { return Ok(()) };
        let path = self.shared.paths.checkpoints.join(format!("trial-{}.safetensors", run.number));
        t.network.save(&path)?;
        let value = run.own.last().copied().unwrap_or(f64::NAN);
        self.study.set_valid_actions(run.number, &run.valid_actions)?;
        // The checkpoint and the test ledger into the artifact store, linked before the trial finishes
        // (Optuna's cached storage never re-reads a finished trial).
        if let Some(store) = &self.shared.paths.artifacts {
            let n = run.number;
            let bytes = std::fs::read(&path).map_err(|e| Error::Output(format!("{}: {e}", path.display())))?;
            let meta = store.put(&format!("trial-{n}.safetensors"), &bytes, "application/octet-stream")?;
            self.study.link_artifact(n, &meta)?;
            let (test, per_year) = (self.shared.test, self.shared.bars_per_year);
            let csv = crate::hyperopt::ledger::test_ledger_csv(
                n,
                test,
                run.env,
                &t.test_actions,
                per_year,
                &store.test_times,
            )?;
            let meta = store.put(&format!("trial-{n}-trades.csv"), csv.as_bytes(), "text/csv")?;
            self.study.link_artifact(n, &meta)?;
        }
        let test = &t.test;
        self.study.finish(
            run.number,
            value,
            test.total_return,
            test.sharpe,
            &t.test_actions,
            &path.display().to_string(),
        )?;
        crate::failpoint::hit("finish");
        locked(self.shared.running)?.remove(&run.number);
        self.study.refresh(false)?;
        let finished = self.study.snapshot().finished().len();
        (self.shared.progress)(&Progress::TrialDone { number: run.number, finished })
    }
}

impl<F> SearchSlots<'_, F> {
    /// A refill's transaction: starts `sampled`'s trial in `slot` at the batch's epoch `at` (`None` when the
    /// sampled went stale and `last` is not set; empty when another process took over this batch from here).
    pub(super) fn refill(
        &self,
        sampled: &Sampled,
        claimed: &HashSet<u64>,
        slot: usize,
        at: usize,
        last: bool,
    ) -> Result<Option<Vec<(Claim, Place)>>, Error> {
        let (study, id) = (self.study, self.batch.id);
        study.in_locked_tx(|| {
            study.refresh(true)?;
            let trials = study.snapshot();
            // Another process went on with this batch from here (it judged this worker gone or silent at a
            // boundary): its places are its own, so this slot stops.
            let taken = |t: &TrialRecord| t.place.is_some_and(|q| q.batch == id && q.tick >= at);
            let known = &self.batch.known;
            // (A batch's trials are numbered from the batch's number on.)
            if trials
                .from_number(id)
                .iter()
                .any(|t| taken(t) && !claimed.contains(&t.number) && !known.contains(&t.number))
            {
                return Ok(Some(Vec::new()));
            }
            let place = |_, _| Place { batch: id, slot, tick: at };
            let new = match start_sampled(study, sampled, &trials, claimed, 1, true, place)? {
                Some(new) => new,
                None if last => start_new(study, self.cfg, &trials, claimed, 1, place)?,
                None => return Ok(None),
            };
            study.claim_for(&new.iter().map(|((n, ..), _)| (*n, 0)).collect::<Vec<_>>(), self.shared.me)?;
            Ok(Some(new))
        })
    }
}
