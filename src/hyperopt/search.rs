//! The search loop: batches of K trials trained together (one DQN agent, the same launches), sampled by TPE
//! after the start-up trials, pruned by the median rule, recorded in the study as they go.

use crate::Error;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rust_decimal::Decimal;

use super::config::{Algo, EnvSettings, PruneRule, SearchConfig};
use super::sampler::{Params, sample, tpe_loss};
use super::storage::StorageUrl;
use super::study::{EpochRecord, Study, TrialRecord};
use crate::train::{EpochReport, Networks, SplitData, TrainConfig, Trained, save_named_weights, train_dqn, train_ppo};
use crate::{Backend, DqnParams, PpoParams, TrialParams};

/// Rewards are in percent: the log return, costs and drawdown terms are scaled by this.
pub const REWARD_SCALE: f64 = 100.0;

/// The environment settings as Decimal values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        })
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

/// A trial's environment parameters (rewards in percent, see [`REWARD_SCALE`]).
pub fn env_params(p: &Params, env: &EnvDecimals) -> Result<TrialParams, Error> {
    let base = env.audit_params().to_params()?;
    Ok(TrialParams {
        w_pnl: REWARD_SCALE,
        w_cost: REWARD_SCALE * get(p, "w_cost")?,
        w_drawdown: REWARD_SCALE * get(p, "w_drawdown")?,
        w_barrier: get(p, "w_barrier")?,
        take_profit_mult: get(p, "take_profit_mult")?,
        stop_loss_mult: get(p, "stop_loss_mult")?,
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
    /// A batch finished.
    BatchDone {
        /// Trials finished so far.
        finished: usize,
    },
}

/// A claimed trial: number, parameters, and the trials finished when its number was issued.
type Claim = (u64, Params, Vec<u64>);

/// This process as a worker: `host:pid`, or `TRADESIM_WORKER_ID` when set (a name that says which host, for
/// machines whose host names are not unique; the tests use it to act as another host).
pub fn worker_id() -> String {
    if let Ok(id) = std::env::var("TRADESIM_WORKER_ID") {
        return id;
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{}:{}", host.trim(), std::process::id())
}

/// Whether `worker` (`host:pid`) is a process of this host that is gone (Linux: no `/proc/PID`). A worker of
/// another host, or on a system without `/proc`, is never known to be gone: its heartbeat decides.
fn gone(worker: &str, me: &str) -> bool {
    let (Some((host, pid)), Some((my_host, _))) = (worker.rsplit_once(':'), me.rsplit_once(':')) else {
        return false;
    };
    host == my_host && Path::new("/proc/self").exists() && !Path::new("/proc").join(pid).exists()
}

/// What a claim found.
struct Claimed {
    batch: Vec<Claim>,
    finished: usize,
    /// Unfinished trials that live workers elsewhere are running.
    elsewhere: Vec<u64>,
}

/// Claims the next batch, in one write transaction (so two workers, in this process or any other, never
/// claim the same trial). Interrupted trials come first: tradesim's unfinished trials that no worker of this
/// process runs and whose worker is gone (a process of this host that no longer exists) or silent (no
/// heartbeat for `stale_seconds`), those sharing the first one's history (its original batch, with one
/// worker), restarted under their numbers, parameters and histories. Otherwise new trials, up to
/// `parallel`, sampled from every finished trial, which becomes their recorded history. So with one worker
/// a batch's membership and what its trials saw are functions of the seed and the trial numbers alone
/// (batch b is trials bK..bK+K-1 and saw every earlier batch), and a resumed search runs what the
/// uninterrupted one would. Trials of other Optuna workers are left alone (their numbers are skipped).
fn next_batch(study: &Study, cfg: &SearchConfig, claimed: &mut HashSet<u64>, me: &str) -> Result<Claimed, Error> {
    let s = &cfg.study;
    let cutoff = crate::hyperopt::db::timestamp(
        (chrono::Utc::now() - chrono::Duration::milliseconds((s.stale_seconds * 1e3) as i64)).naive_utc(),
    );
    let claimed_now = study.in_tx(|| {
        study.lock()?;
        let trials = study.trials()?;
        let finished: Vec<&TrialRecord> = trials.iter().filter(|t| t.finished()).collect();
        let (interrupted, elsewhere): (Vec<&TrialRecord>, Vec<&TrialRecord>) =
            trials.iter().filter(|t| t.ours && !t.finished() && !claimed.contains(&t.number)).partition(|t| {
                t.worker.as_deref().is_none_or(|w| w != me && gone(w, me))
                    || t.heartbeat.as_deref().is_none_or(|h| h < cutoff.as_str())
            });
        // Each claimed trial's claims so far (0 for a new one), counted up by `claim_for`.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let batch: Vec<Claim> = if let Some(first) = interrupted.first() {
            let again: Vec<&&TrialRecord> =
                interrupted.iter().filter(|t| t.history == first.history).take(s.parallel).collect();
            for t in &again {
                study.restart(t.number)?;
                runs.push((t.number, t.runs));
            }
            again.iter().map(|t| (t.number, t.params.clone(), t.history.clone())).collect()
        } else {
            let epochs = s.epochs as u64;
            let history: Vec<(Params, f64)> = finished
                .iter()
                .filter_map(|t| tpe_loss(&t.status, t.value, t.pruned_at, epochs).map(|loss| (t.params.clone(), loss)))
                .collect();
            let seen: Vec<u64> = finished.iter().map(|t| t.number).collect();
            let ours_total = trials.iter().filter(|t| t.ours).count();
            let mut next = trials.iter().map(|t| t.number + 1).chain(claimed.iter().map(|n| n + 1)).max().unwrap_or(0);
            let mut batch = Vec::new();
            while batch.len() < s.parallel && ours_total + batch.len() < s.trials {
                let params = sample(&cfg.space, &history, s.startup_trials, s.seed, next)?;
                study.start(next, &params, &seen)?;
                batch.push((next, params, seen.clone()));
                runs.push((next, 0));
                next += 1;
            }
            batch
        };
        study.claim_for(&runs, me)?;
        Ok(Claimed { batch, finished: finished.len(), elsewhere: elsewhere.iter().map(|t| t.number).collect() })
    })?;
    claimed.extend(claimed_now.batch.iter().map(|b| b.0));
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
    let env = EnvDecimals::parse(&cfg.env)?;
    let steps_per_trial = (s.epochs * s.segment_len) as f64;
    let me = worker_id();
    let claimed = Mutex::new(HashSet::new());
    // Trials this process is running (the heartbeat thread's list).
    let running: Mutex<HashSet<u64>> = Mutex::new(HashSet::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    let lock = |m: &'_ Mutex<HashSet<u64>>| -> Result<Vec<u64>, Error> {
        Ok(m.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))?.iter().copied().collect())
    };
    let worker = |backend: &Backend| -> Result<(), Error> {
        let study = Study::reopen(&paths.storage, &paths.study_name)?;
        loop {
            let c = {
                let mut claimed = claimed.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))?;
                next_batch(&study, cfg, &mut claimed, &me)?
            };
            if c.batch.is_empty() {
                if c.elsewhere.is_empty() {
                    return Ok(());
                }
                progress(&Progress::Waiting { numbers: c.elsewhere })?;
                std::thread::sleep(std::time::Duration::from_secs_f64(s.heartbeat_seconds));
                continue;
            }
            let numbers: Vec<u64> = c.batch.iter().map(|b| b.0).collect();
            running.lock().map_err(|_| Error::Study("a search worker failed".to_owned()))?.extend(&numbers);
            progress(&Progress::Batch { numbers: numbers.clone(), finished: c.finished })?;
            let result =
                run_batch(backend, data, cfg, bars_per_year, &env, steps_per_trial, &c.batch, paths, &study, progress);
            running
                .lock()
                .map_err(|_| Error::Study("a search worker failed".to_owned()))?
                .retain(|n| !numbers.contains(n));
            result?;
            let finished = study.trials()?.iter().filter(|t| t.finished()).count();
            progress(&Progress::BatchDone { finished })?;
        }
    };
    let heartbeat = || -> Result<(), Error> {
        let study = Study::reopen(&paths.storage, &paths.study_name)?;
        let mut last = std::time::Instant::now();
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(50));
            if last.elapsed().as_secs_f64() >= s.heartbeat_seconds {
                study.beat(&lock(&running)?)?;
                last = std::time::Instant::now();
            }
        }
        Ok(())
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
    steps_per_trial: f64,
    batch: &[Claim],
    paths: &SearchPaths,
    study: &Study,
    progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
) -> Result<(), Error> {
    let s = &cfg.study;
    // The study's seed for every batch and each trial's number as its key: a trial's result does not depend
    // on its batch-mates, its slot or K (the same trial gives the same bits in any batch, and on resume).
    let mut tc = TrainConfig::default_for(batch.len(), s.epochs, s.seed);
    tc.envs = s.envs;
    tc.segment_len = s.segment_len;
    tc.ring_capacity = s.envs * 64;
    tc.bars_per_year = bars_per_year;
    tc.env_params = batch
        .iter()
        .map(|(number, p, _)| env_params(p, env).map(|e| TrialParams { key: *number, ..e }))
        .collect::<Result<_, _>>()?;
    // Each trial's median rule compares it with the complete trials of its history (not with whatever
    // finished since), so a trial re-run on resume is pruned where it was the first time.
    let references: Vec<(Vec<EpochRecord>, usize)> = {
        let (trials, epochs) = (study.trials()?, study.epochs()?);
        batch.iter().map(|(_, _, history)| pruning_reference(&trials, &epochs, history)).collect()
    };
    let mut pruned = vec![false; batch.len()];
    let mut own: Vec<Vec<f64>> = vec![Vec::new(); batch.len()];
    let mut failure: Option<Error> = None;
    let transitions = (tc.envs * tc.segment_len) as f64 * batch.len() as f64;
    let mut record = |r: &EpochReport| {
        let best = r.valid.iter().map(|m| m.sharpe).filter(|x| x.is_finite()).fold(f64::NAN, f64::max);
        progress(&Progress::Epoch {
            epoch: r.epoch,
            env_steps_per_s: transitions / r.train_seconds.max(1e-9),
            best,
            train_seconds: r.train_seconds,
            eval_seconds: r.eval_seconds,
        })?;
        for (k, (number, ..)) in batch.iter().enumerate() {
            if pruned[k] {
                continue;
            }
            let m = &r.valid[k];
            let epoch = EpochRecord {
                trial: *number,
                epoch: r.epoch as u64,
                loss: f64::from(r.losses[k]),
                valid_sharpe: m.sharpe,
                valid_return: m.total_return,
            };
            own[k].push(m.sharpe);
            let result = study.record_epoch(&epoch).and_then(|()| {
                if s.prune == PruneRule::Median
                    && should_prune(
                        &own[k],
                        r.epoch as u64,
                        &references[k].0,
                        references[k].1,
                        s.prune_startup_trials,
                        s.prune_warmup_epochs,
                    )
                {
                    pruned[k] = true;
                    study.prune(*number, r.epoch as u64, m.sharpe).map(|()| crate::failpoint::hit("prune"))
                } else {
                    Ok(())
                }
            });
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
        }
        Ok(())
    };
    if s.algo == Algo::Ppo {
        tc.rollout_steps = s.rollout_steps;
        let segment = tc.segment_len.min(data.train.n_bars().saturating_sub(1)).max(1);
        let rollouts = s.epochs * crate::train::rollouts_per_epoch(&tc, segment);
        let ppo: Vec<PpoParams> = batch.iter().map(|(_, p, _)| ppo_params(p, rollouts)).collect::<Result<_, _>>()?;
        tc.hidden = ppo.iter().map(|p| p.hidden as usize).max().unwrap_or(64);
        // The unsplit trials' batches (the agent grows the buffer to the splits' shares).
        tc.batch = ppo.iter().filter(|p| p.minibatches == 0).map(|p| p.batch as usize).max().unwrap_or(1);
        let trained = train_ppo(backend, data, &tc, &ppo, &mut record)?;
        progress(&Progress::Trained { setup_seconds: trained.setup_seconds, test_seconds: trained.test_seconds })?;
        failure.map_or(Ok(()), Err)?;
        finish_batch(&trained, batch, paths, study)
    } else {
        tc.dqn = batch.iter().map(|(_, p, _)| dqn_params(p, steps_per_trial)).collect::<Result<_, _>>()?;
        tc.hidden = tc.dqn.iter().map(|p| p.hidden as usize).max().unwrap_or(64);
        tc.batch = tc.dqn.iter().map(|p| p.batch as usize).max().unwrap_or(64);
        let trained = train_dqn(backend, data, &tc, &mut record)?;
        progress(&Progress::Trained { setup_seconds: trained.setup_seconds, test_seconds: trained.test_seconds })?;
        failure.map_or(Ok(()), Err)?;
        finish_batch(&trained, batch, paths, study)
    }
}

/// Saves a batch's weights and records every trial's final metric, test evaluation and checkpoint.
fn finish_batch<A: Networks>(
    trained: &Trained<A>,
    batch: &[Claim],
    paths: &SearchPaths,
    study: &Study,
) -> Result<(), Error> {
    let names: Vec<String> = batch.iter().map(|(n, ..)| format!("trial-{n}.safetensors")).collect();
    let saved = save_named_weights(&trained.agent, &paths.checkpoints, &names)?;
    let last = trained.epochs.last().ok_or_else(|| Error::Data("no epoch ran".to_owned()))?;
    let steps = trained.test_actions.len() / batch.len();
    for (k, (number, ..)) in batch.iter().enumerate() {
        let t = &trained.test[k];
        let actions = &trained.test_actions[k * steps..(k + 1) * steps];
        study.finish(
            *number,
            last.valid[k].sharpe,
            t.total_return,
            t.sharpe,
            actions,
            &saved[k].display().to_string(),
        )?;
        crate::failpoint::hit("finish");
    }
    Ok(())
}

/// The study name when none is given.
pub const DEFAULT_STUDY_NAME: &str = "tradesim";

/// The default study (`dir/study.sqlite`, named [`DEFAULT_STUDY_NAME`]) and checkpoint locations under `dir`.
pub fn default_paths(dir: &Path) -> SearchPaths {
    SearchPaths {
        storage: StorageUrl::Sqlite(dir.join("study.sqlite")),
        study_name: DEFAULT_STUDY_NAME.to_owned(),
        checkpoints: dir.join(folder_for("checkpoints", DEFAULT_STUDY_NAME)),
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
            history: Vec::new(),
            ours: true,
            worker: None,
            runs: 1,
            heartbeat: None,
        };
        // 0 complete, 1 pruned, 2 complete but finished after the trial's number was issued, 3 complete in
        // the history but unfinished (cannot happen in a study; left out all the same).
        let trials = [
            trial(0, "complete", true),
            trial(1, "pruned", true),
            trial(2, "complete", true),
            trial(3, "complete", false),
        ];
        let epochs: Vec<EpochRecord> = (0..4)
            .map(|t| EpochRecord { trial: t, epoch: 0, loss: 0.0, valid_sharpe: t as f64, valid_return: 0.0 })
            .collect();
        let (at, n) = pruning_reference(&trials, &epochs, &[0, 1, 3]);
        assert_eq!((at.iter().map(|e| e.trial).collect::<Vec<_>>(), n), (vec![0], 1));
        let (at, n) = pruning_reference(&trials, &epochs, &[0, 1, 2, 3]);
        assert_eq!((at.iter().map(|e| e.trial).collect::<Vec<_>>(), n), (vec![0, 2], 2));
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
