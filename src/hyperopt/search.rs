//! The search loop: batches of K trials trained together (one DQN agent, the same launches), sampled by TPE
//! after the start-up trials, pruned by the median rule, recorded in the study as they go.

use crate::Error;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rust_decimal::Decimal;

use super::config::{Algo, EnvSettings, PruneRule, SearchConfig};
use super::sampler::{Observed, Params, TpeOptions, sample, tpe_loss};
use super::storage::StorageUrl;
use super::study::Place;
use super::study::{EpochRecord, Study, TrialRecord, Worker, WorkerProcess};
use crate::train::{EndedTrial, EpochReport, SlotControl, SlotTrial, SplitData, TrainConfig, run_slots};
use crate::{Backend, DqnParams, PpoParams, TrialParams};

/// Rewards are in percent: the log return, costs and drawdown terms are scaled by this.
pub const REWARD_SCALE: f64 = 100.0;

/// The environment settings as Decimal values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnvDecimals {
    /// Starting cash.
    pub capital: Decimal,
    /// Spread.
    pub spread: Decimal,
    /// Commission.
    pub commission: Decimal,
    /// Shorts allowed.
    pub allow_short: bool,
    /// Whole units.
    pub whole_units: bool,
    /// `[env] stop_slippage`.
    pub stop_slippage: f64,
    /// The narrowest barrier multiple of sigma (`[env] barrier_floor` typical bar ranges of the training
    /// split, [`barrier_floor_mult`]); 0 without a floor.
    pub barrier_floor_mult: f64,
}

impl EnvDecimals {
    /// Parses the `[env]` table (validated before).
    pub fn parse(e: &EnvSettings) -> Result<Self, Error> {
        let d = |k: &str, t: &str| {
            t.parse::<Decimal>().map_err(|_| Error::Study(format!("env.{k}: `{t}` is not a decimal number")))
        };
        Ok(Self {
            capital: d("capital", &e.capital)?,
            spread: d("spread", &e.spread)?,
            commission: d("commission", &e.commission)?,
            allow_short: e.allow_short,
            whole_units: e.whole_units,
            stop_slippage: e.stop_slippage,
            barrier_floor_mult: 0.0,
        })
    }

    /// These settings with the barrier floor measured on `train` ([`barrier_floor_mult`]).
    pub fn with_floor(self, e: &EnvSettings, train: &crate::MarketData) -> Self {
        Self { barrier_floor_mult: barrier_floor_mult(e.barrier_floor, train.bars()), ..self }
    }

    /// The Decimal parameters of the audit.
    pub fn audit_params(&self) -> crate::audit::DecimalParams {
        crate::audit::DecimalParams::account(
            self.capital,
            self.spread,
            self.commission,
            self.whole_units,
            self.allow_short,
        )
    }
}

fn get(p: &Params, k: &str) -> Result<f64, Error> {
    p.get(k).copied().ok_or_else(|| Error::Study(format!("trial parameters lack `{k}`")))
}

/// `floor` typical bar ranges in units of sigma on `bars`: the median of `(high - low) / open` over the
/// median of the positive sigmas, times `floor` (0 when either median is not positive). A barrier of this
/// multiple is as wide as `floor` typical bars' ranges.
pub fn barrier_floor_mult(floor: f64, bars: &[crate::Bar]) -> f64 {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() { 0.0 } else { v[v.len() / 2] }
    };
    let range = median(bars.iter().filter(|b| b.open > 0.0).map(|b| (b.high - b.low) / b.open).collect());
    let sigma = median(bars.iter().map(|b| b.sigma).filter(|s| *s > 0.0).collect());
    if floor > 0.0 && range > 0.0 && sigma > 0.0 { floor * range / sigma } else { 0.0 }
}

/// A trial's environment parameters (rewards in percent, see [`REWARD_SCALE`]); a take-profit or stop-loss
/// multiple below the floor ([`EnvDecimals::barrier_floor_mult`]) is raised to it (0 stays 0: disabled).
pub fn env_params(p: &Params, env: &EnvDecimals) -> Result<TrialParams, Error> {
    let base = env.audit_params().to_params()?;
    let floored = |m: f64| if m > 0.0 { m.max(env.barrier_floor_mult) } else { m };
    Ok(TrialParams {
        w_pnl: REWARD_SCALE,
        w_cost: REWARD_SCALE * get(p, "w_cost")?,
        w_drawdown: REWARD_SCALE * get(p, "w_drawdown")?,
        w_barrier: get(p, "w_barrier")?,
        take_profit_mult: floored(get(p, "take_profit_mult")?),
        stop_loss_mult: floored(get(p, "stop_loss_mult")?),
        stop_slippage: env.stop_slippage,
        max_hold_bars: get(p, "max_hold_bars")? as u32,
        ..base
    })
}

/// A trial's DQN parameters; epsilon decays over `eps_decay` of its `steps_per_trial` env steps.
pub fn dqn_params(p: &Params, steps_per_trial: f64) -> Result<DqnParams, Error> {
    Ok(DqnParams {
        lr: get(p, "lr")? as f32,
        gamma: get(p, "gamma")? as f32,
        hidden: get(p, "hidden")? as u32,
        batch: get(p, "batch")? as u32,
        eps_decay_steps: (get(p, "eps_decay")? * steps_per_trial) as f32,
        target_every: get(p, "target_every")? as u32,
        ..DqnParams::default()
    })
}

/// A trial's PPO parameters; with `anneal_lr`, the learning rate falls to 0 over the run's `rollouts`.
pub fn ppo_params(p: &Params, rollouts: usize) -> Result<PpoParams, Error> {
    Ok(PpoParams {
        lr: get(p, "lr")? as f32,
        gamma: get(p, "gamma")? as f32,
        lambda: get(p, "lambda")? as f32,
        clip: get(p, "clip")? as f32,
        ent_coef: get(p, "ent_coef")? as f32,
        hidden: get(p, "hidden")? as u32,
        batch: p.get("batch").copied().unwrap_or(1.0) as u32,
        epochs: get(p, "ppo_epochs")? as u32,
        minibatches: get(p, "minibatches")? as u32,
        max_grad_norm: get(p, "max_grad_norm")? as f32,
        clip_vloss: get(p, "clip_vloss")? as u32,
        anneal_rollouts: if get(p, "anneal_lr")? != 0.0 { rollouts as u32 } else { 0 },
        adam_eps: get(p, "adam_eps")? as f32,
        orthogonal_init: get(p, "orthogonal_init")? as u32,
        ..PpoParams::default()
    })
}

/// A trial's objective from its greedy validation metrics: the Sharpe ratio, or 0 for a policy that made no
/// trade (it keeps its cash: as good as not investing, better than losing; its Sharpe ratio is undefined,
/// NaN in the metrics, and would otherwise turn the trial into a FAIL that TPE learns nothing from).
pub fn objective(m: &crate::Metrics) -> f64 {
    if m.trades == 0.0 && m.sharpe.is_nan() { 0.0 } else { m.sharpe }
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
        /// Seconds of setup: features, splits, envs and networks.
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
    /// Placebo search `index` of `of` starts (its batches' events follow).
    Placebo {
        /// From 1.
        index: usize,
        /// Placebo searches in all.
        of: usize,
    },
    /// The walk-forward of the best configuration starts.
    WalkForward {
        /// Folds.
        folds: usize,
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

/// Whether the worker process `of` a trial is known to be gone: it ran on this machine since its last boot
/// and in this PID namespace (so its PID means here what it meant there), it is not this process, and that
/// PID is no process now (no `/proc/PID`). A name says nothing (two containers, or two workers named by
/// `TRADESIM_WORKER_ID`, share a host name); without that proof, on either side, only the heartbeat decides.
fn gone(of: Option<&WorkerProcess>, me: &Worker) -> bool {
    let (Some(p), Some(mine)) = (of, me.process.as_ref()) else { return false };
    p.shares_pids_with(mine) && p.pid != mine.pid && !Path::new("/proc").join(p.pid.to_string()).exists()
}

/// What a claim found.
struct Claimed {
    batch: BatchPlan,
    finished: usize,
    /// Unfinished trials that live workers elsewhere are running.
    elsewhere: Vec<u64>,
}

/// A batch to run: its number, its epoch to start from, its slots, and its trials in their places.
#[derive(Debug, Default)]
struct BatchPlan {
    /// The batch's first trial number.
    id: u64,
    /// The batch's epoch at which this run starts (0; later when a killed batch resumes).
    tick0: usize,
    /// Slots (K).
    slots: usize,
    /// Claimed trials and where they start.
    runs: Vec<(Claim, Place)>,
    /// Finished trials of a resumed batch: (slot, first epoch, end epoch) that they held.
    held: Vec<(usize, usize, usize)>,
}

/// The batch's epoch at which a finished trial of it freed its slot: all its epochs, or (pruned at its epoch
/// p) two more than p, as [`crate::train::run_slots`] ends a trial stopped after epoch p's report.
fn end_tick(t: &TrialRecord, start: usize, epochs: usize) -> usize {
    start + t.pruned_at.map_or(epochs, |p| (p as usize + 2).min(epochs))
}

/// Samples and starts up to `n` new trials of this worker inside the caller's transaction (TPE over every
/// finished trial, which becomes their history, and with the constant liar every unfinished one), numbered
/// after every trial and claim; each placed by `place(i)`. Returns the claims and their claim counts (0).
fn start_new(
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
fn continued(
    trials: &[TrialRecord],
    claimed: &HashSet<u64>,
    s: &super::config::StudyConfig,
    abandoned: impl Fn(&TrialRecord) -> bool,
) -> Option<(u64, usize, usize)> {
    let batch = trials.iter().filter(|t| t.ours).filter_map(|t| t.place.map(|q| (t.number, q.batch))).max()?;
    let members: Vec<(&TrialRecord, Place)> =
        trials.iter().filter_map(|t| t.place.filter(|q| t.ours && q.batch == batch.1).map(|q| (t, q))).collect();
    if members.iter().any(|(t, _)| claimed.contains(&t.number) || !t.finished() || !abandoned(t)) {
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
fn next_batch(study: &Study, cfg: &SearchConfig, claimed: &mut HashSet<u64>, me: &Worker) -> Result<Claimed, Error> {
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
        let mut plan = BatchPlan::default();
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
            plan.id = again[0].1.batch;
            plan.tick0 = again.iter().map(|(_, q)| q.tick).min().unwrap_or(0);
            let members = trials.iter().filter(|t| t.place.is_some_and(|q| q.batch == plan.id));
            plan.slots = members.clone().map(|t| t.place.map_or(0, |q| q.slot + 1)).max().unwrap_or(0);
            plan.slots = plan.slots.max(again.iter().map(|(_, q)| q.slot + 1).max().unwrap_or(0));
            plan.held = members
                .filter(|t| t.finished())
                .filter_map(|t| t.place.map(|q| (q.slot, q.tick, end_tick(t, q.tick, s.epochs))))
                .collect();
            for (t, at) in again {
                study.restart(t.number)?;
                if first.place.is_none() {
                    study.place(t.number, at)?;
                }
                plan.runs.push(((t.number, t.params.clone(), t.history.clone()), at));
            }
        } else if let Some((id, slots, tick)) = continued(&trials, claimed, s, abandoned) {
            // A batch whose worker stopped at a boundary, after its last trials finished and before their
            // slots took new ones: its slots refill there, as they would have.
            (plan.id, plan.tick0, plan.slots) = (id, tick, slots);
            plan.runs = start_new(study, cfg, &trials, claimed, slots, |_, slot| Place { batch: id, slot, tick })?;
        } else {
            plan.runs = start_new(study, cfg, &trials, claimed, s.parallel, |first, slot| Place {
                batch: first,
                slot,
                tick: 0,
            })?;
            plan.id = plan.runs.first().map_or(0, |r| r.1.batch);
            plan.slots = plan.runs.len();
        }
        let runs: Vec<(u64, u64)> = plan
            .runs
            .iter()
            .map(|((n, ..), _)| (*n, trials.iter().find(|t| t.number == *n).map_or(0, |t| t.runs)))
            .collect();
        study.claim_for(&runs, me)?;
        Ok(Claimed { batch: plan, finished, elsewhere: elsewhere.iter().map(|t| t.number).collect() })
    })?;
    claimed.extend(claimed_now.batch.runs.iter().map(|r| r.0.0));
    Ok(claimed_now)
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
    let env = EnvDecimals::parse(&cfg.env)?.with_floor(&cfg.env, &data.train);
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
        loop {
            check_beating(&lost)?;
            let c = {
                let mut claimed = claimed.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))?;
                next_batch(&study, cfg, &mut claimed, &me)?
            };
            if c.batch.runs.is_empty() {
                if c.elsewhere.is_empty() {
                    return Ok(());
                }
                progress(&Progress::Waiting { numbers: c.elsewhere })?;
                std::thread::sleep(std::time::Duration::from_secs_f64(s.heartbeat_seconds));
                continue;
            }
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
            let result = run_batch(backend, data, cfg, bars_per_year, &env, c.batch, &shared, &study);
            locked(&running)?.retain(|n| !numbers.contains(n));
            result?;
            let finished = study.trials()?.iter().filter(|t| t.finished()).count();
            progress(&Progress::BatchDone { finished })?;
        }
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
        out.push(beats.join().unwrap_or_else(|_| Err(Error::Study("the heartbeat thread panicked".to_owned()))));
        out
    });
    results.into_iter().collect()
}

#[allow(clippy::too_many_arguments, reason = "the search's context, passed down once")]
fn run_batch(
    backend: &Backend,
    data: &SplitData,
    cfg: &SearchConfig,
    bars_per_year: f64,
    env: &EnvDecimals,
    plan: BatchPlan,
    shared: &Shared<'_>,
    study: &Study,
) -> Result<(), Error> {
    let s = &cfg.study;
    let steps_per_trial = (s.epochs * s.segment_len) as f64;
    // The study's seed for every batch and each trial's number as its key: a trial's result does not depend
    // on its batch-mates, its slot, when it started or K (the same trial gives the same bits in any batch,
    // and on resume: tests/refill.rs).
    let mut tc = TrainConfig::default_for(plan.slots, s.epochs, s.seed);
    tc.envs = s.envs;
    tc.segment_len = s.segment_len;
    tc.ring_capacity = s.envs * 64;
    tc.bars_per_year = bars_per_year;
    let first = plan.runs.first().map(|r| r.0.1.clone()).ok_or_else(|| Error::Study("an empty batch".into()))?;
    // The slots' networks and buffers fit every trial they may hold: any of the space while trials are left
    // to claim (a freed slot may take any of them), else the batch's own (padding never changes a trial's
    // bits; it only costs time). The first trial's parameters stand in until each slot's trial is placed.
    let claims_left = study.trials()?.iter().filter(|t| t.ours).count() < s.trials;
    let planned: Vec<Params> = plan.runs.iter().map(|r| r.0.1.clone()).collect();
    let largest = |name: &str, default: f64| {
        if claims_left {
            cfg.space_max(name, default)
        } else {
            planned.iter().map(|p| p.get(name).copied().unwrap_or(default)).fold(default.min(1.0), f64::max)
        }
    };
    let fewest_splits = if claims_left {
        cfg.space_min_positive("minibatches")
    } else {
        planned.iter().filter_map(|p| p.get("minibatches").copied().filter(|m| *m > 0.0)).reduce(f64::min)
    };
    tc.hidden = largest("hidden", 64.0) as usize;
    tc.env_params = (0..plan.slots as u64)
        .map(|k| env_params(&first, env).map(|e| TrialParams { key: k, ..e }))
        .collect::<Result<_, _>>()?;
    let slots = SearchSlots::new(cfg, env, plan, shared, study);
    if s.algo == Algo::Ppo {
        tc.rollout_steps = s.rollout_steps;
        let segment = tc.segment_len.min(data.train.n_bars().saturating_sub(1)).max(1);
        let rollouts = s.epochs * crate::train::rollouts_per_epoch(&tc, segment);
        tc.batch = largest("batch", 1.0) as usize;
        let stand_in = ppo_params(&first, rollouts)?;
        let ppo = vec![PpoParams { hidden: tc.hidden as u32, ..stand_in }; tc.env_params.len()];
        let n = crate::train::rollout_len(&tc, segment) * tc.envs;
        // The minibatch buffer also holds the largest split's share (the fewest minibatches).
        if let Some(fewest) = fewest_splits {
            tc.batch = tc.batch.max(n.div_ceil(fewest as usize));
        }
        let mut ctl = slots.with(move |p: &Params| ppo_params(p, rollouts));
        let make = |e: &crate::EnvBatch| crate::PpoAgent::new(backend, e, &ppo, tc.hidden, tc.batch, tc.seed);
        let ring = |segment_len| crate::train::rollout_len(&tc, segment_len) * tc.envs;
        let run = run_slots(backend, data, &tc, ring, make, &mut ctl)?;
        progress_trained(shared, &run)
    } else {
        tc.batch = largest("batch", 64.0) as usize;
        let stand_in = dqn_params(&first, steps_per_trial)?;
        tc.dqn = vec![DqnParams { hidden: tc.hidden as u32, batch: tc.batch as u32, ..stand_in }; tc.env_params.len()];
        let mut ctl = slots.with(move |p: &Params| dqn_params(p, steps_per_trial));
        let make = |e: &crate::EnvBatch| crate::DqnAgent::new(backend, e, &tc.dqn, tc.hidden, tc.batch, tc.seed);
        let run = run_slots(backend, data, &tc, |_| tc.ring_capacity, make, &mut ctl)?;
        progress_trained(shared, &run)
    }
}

/// The first retry of a failed heartbeat; each further retry waits twice as long, up to the heartbeat's
/// period.
const BEAT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Calls `beat` every `every` until `done`. A failed beat is retried after [`BEAT_RETRY`], then twice as
/// long each time (up to `every`); once beats have failed for `stale` (after which other workers may take
/// this worker's trials over, taking them for dead), it records why in `lost`, which stops this worker's
/// trials ([`check_beating`]), and returns that error.
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
            std::thread::sleep((next - now).min(std::time::Duration::from_millis(50)));
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

fn progress_trained<A>(shared: &Shared<'_>, run: &crate::train::SlotRun<A>) -> Result<(), Error> {
    (shared.progress)(&Progress::Trained { setup_seconds: run.setup_seconds, test_seconds: run.test_seconds })
}

/// What the workers of one search share: the claims of this process, the trials it runs (the heartbeat's
/// list), this worker's name, where it writes, and the progress listener.
struct Shared<'a> {
    claimed: &'a Mutex<HashSet<u64>>,
    running: &'a Mutex<HashSet<u64>>,
    me: &'a Worker,
    /// Why this worker stopped its trials, once its heartbeats were lost ([`keep_beating`]).
    lost: &'a Mutex<Option<String>>,
    paths: &'a SearchPaths,
    progress: &'a (dyn Fn(&Progress) -> Result<(), Error> + Sync),
    /// The test split and its annualization (a trial's test ledger for the artifact store).
    test: &'a crate::MarketData,
    bars_per_year: f64,
}

fn locked<'m, T>(m: &'m Mutex<T>) -> Result<std::sync::MutexGuard<'m, T>, Error> {
    m.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))
}

/// A trial running in a slot: its number, parameters, history's pruning reference, values so far, and
/// whether it was pruned.
struct Running {
    number: u64,
    /// Its environment (costs, stops) as the kernels take it.
    env: TrialParams,
    reference: (Vec<EpochRecord>, usize),
    own: Vec<f64>,
    pruned: bool,
    /// The greedy validation actions of its last reported epoch.
    valid_actions: Vec<u8>,
}

/// The search's [`SlotControl`]: records each epoch of each trial in the study and applies the median rule;
/// places the batch's claimed trials at their epochs and, when a slot frees up, claims the next trial (TPE
/// over the trials finished by then); saves a trial's checkpoint and finishes it in the study when it ends.
struct SearchSlots<'a, F> {
    cfg: &'a SearchConfig,
    env: &'a EnvDecimals,
    plan: BatchPlan,
    shared: &'a Shared<'a>,
    study: &'a Study,
    /// Per slot: the number of the trial it holds.
    slots: Vec<Option<u64>>,
    /// Trials of this run by number (those ended leave).
    trials: std::collections::HashMap<u64, Running>,
    learner: F,
}

impl<'a> SearchSlots<'a, ()> {
    fn new(
        cfg: &'a SearchConfig,
        env: &'a EnvDecimals,
        plan: BatchPlan,
        shared: &'a Shared<'a>,
        study: &'a Study,
    ) -> Self {
        let slots = vec![None; plan.slots];
        Self { cfg, env, plan, shared, study, slots, trials: std::collections::HashMap::new(), learner: () }
    }

    fn with<F>(self, learner: F) -> SearchSlots<'a, F> {
        let Self { cfg, env, plan, shared, study, slots, trials, .. } = self;
        SearchSlots { cfg, env, plan, shared, study, slots, trials, learner }
    }
}

impl<P, F: Fn(&Params) -> Result<P, Error>> SlotControl<P> for SearchSlots<'_, F> {
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
            let value = objective(m);
            let record = EpochRecord {
                trial: number,
                epoch: epoch as u64,
                loss: f64::from(r.losses[k]),
                valid_sharpe: value,
                valid_return: m.total_return,
            };
            run.own.push(value);
            let steps = r.valid_actions.len() / r.trials.len().max(1);
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
                self.study.prune(number, epoch as u64, m.sharpe)?;
                crate::failpoint::hit("prune");
            }
        }
        Ok(())
    }

    fn stops(&self, slot: usize) -> bool {
        self.slots[slot].and_then(|n| self.trials.get(&n)).is_some_and(|t| t.pruned)
    }

    fn next(&mut self, slot: usize, tick: usize) -> Result<Option<SlotTrial<P>>, Error> {
        let at = self.plan.tick0 + tick;
        self.slots[slot] = None;
        // A claimed trial starts at its place's epoch (never later in a run that repeats the original; were
        // its slot still busy then, it starts as soon as the slot frees rather than never).
        let placed = self.plan.runs.iter().position(|(_, q)| q.slot == slot && q.tick <= at);
        let claim = match placed {
            Some(i) => Some(self.plan.runs.remove(i).0),
            None if self.plan.held.iter().any(|&(s, from, to)| s == slot && from <= at && at < to) => None,
            // A slot that still has a trial of its own to come idles until then.
            None if self.plan.runs.iter().any(|(_, q)| q.slot == slot) => None,
            None => {
                let (study, cfg, shared, id) = (self.study, self.cfg, self.shared, self.plan.id);
                let mut claimed = locked(shared.claimed)?;
                let new = study.in_tx(|| {
                    study.lock()?;
                    let trials = study.trials()?;
                    let new = start_new(study, cfg, &trials, &claimed, 1, |_, _| Place { batch: id, slot, tick: at })?;
                    study.claim_for(&new.iter().map(|((n, ..), _)| (*n, 0)).collect::<Vec<_>>(), shared.me)?;
                    Ok(new)
                })?;
                claimed.extend(new.iter().map(|r| r.0.0));
                if tick > 0 && !new.is_empty() {
                    crate::failpoint::hit("refill");
                }
                new.into_iter().next().map(|r| r.0)
            }
        };
        let Some((number, params, history)) = claim else { return Ok(None) };
        locked(self.shared.running)?.insert(number);
        let reference = {
            let (trials, epochs) = (self.study.trials()?, self.study.epochs()?);
            pruning_reference(&trials, &epochs, &history)
        };
        let env = TrialParams { key: number, ..env_params(&params, self.env)? };
        let learner = (self.learner)(&params)?;
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
            let csv = super::best::test_ledger_csv(n, test, run.env, &t.test_actions, per_year, &store.test_times)?;
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
        let finished = self.study.trials()?.iter().filter(|t| t.finished()).count();
        (self.shared.progress)(&Progress::TrialDone { number: run.number, finished })
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
    use super::*;

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
            number,
            params: Params::new(),
            status: status.to_owned(),
            value: 0.0,
            pruned_at: None,
            test_return: 0.0,
            test_sharpe: 0.0,
            checkpoint: finished.then(String::new),
            fail_reason: None,
            history: Vec::new(),
            ours: true,
            worker: None,
            runs: 1,
            heartbeat: None,
            place: None,
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
        assert_eq!(objective(&flat), 0.0);
        let traded = crate::Metrics { trades: 3.0, sharpe: -0.5, ..crate::Metrics::default() };
        assert_eq!(objective(&traded), -0.5);
        // Trades without a defined Sharpe (no variance) stay undefined: a FAIL, as before.
        let odd = crate::Metrics { trades: 1.0, sharpe: f64::NAN, ..crate::Metrics::default() };
        assert!(objective(&odd).is_nan());
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
}
