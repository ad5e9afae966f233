//! The search on a universe (docs/CLI.md, "A universe"): the same study, claims, sampler, objective and
//! median rule as the single series' search, with universe learners ([`tradesim_host::universe`]: one shared
//! per-symbol head acting for every symbol of one account) trained and walked on the universe's calendar
//! split 70/15/15. A trial's value is [`objective`] of its greedy walk on the validation times (the
//! account's returns); its stored validation and test actions are the walk's codes (`steps x N`, the target
//! side of every symbol at every step), from which [`replay`] makes the walk again.

use std::collections::HashSet;
use std::ops::Range;

use tradesim_host::universe::{UniverseConfig, UniverseData, UniverseDqn, UniversePpo, UniverseWalk, walk};

use super::claims::{next_batch, next_or_wait};
use super::{Progress, SearchPaths, objective, should_prune, worker_id};
use crate::data::universe::Universe;
use crate::hyperopt::config::{PruneRule, SearchConfig};
use crate::hyperopt::hyperparameters::Hyperparameters;
use crate::hyperopt::plan::{EnvDecimals, RING_PER_ENV, SlotSizes, TrialPlanner};
use crate::hyperopt::study::{EpochRecord, Study};
use crate::train::Algo;
use crate::{Backend, Error, TrialParams};

/// A universe as the search uses it: the learners' data (features normalized on the training times), the
/// calendar's split into training, validation and test times, and the annualization.
#[derive(Clone, Debug)]
pub struct UniverseSplit {
    /// Prices and features of every symbol and time.
    pub data: UniverseData,
    /// Training times.
    pub train: Range<usize>,
    /// Validation times (a walk over them takes `len - 1` steps).
    pub valid: Range<usize>,
    /// Test times.
    pub test: Range<usize>,
    /// Steps a year.
    pub bars_per_year: f64,
}

impl UniverseSplit {
    /// `u`'s calendar split `split` (the training and validation fractions, the test takes the rest) with
    /// its learner data ([`crate::data::cross_section::learner_data`]).
    pub fn new(u: &Universe, split: (f64, f64)) -> Result<Self, Error> {
        let s = walkable(crate::data::splits::time_split(0, u.n_times(), split.0, split.1)?)?;
        let data = crate::data::cross_section::learner_data(u, s.train.clone())?;
        let bars_per_year = crate::data::time::infer_bars_per_year(&u.times);
        Ok(Self { data, train: s.train, valid: s.valid, test: s.test, bars_per_year })
    }

    /// The split of ready learner data (a generated universe), annualized with `bars_per_year`.
    pub fn of_data(data: UniverseData, split: (f64, f64), bars_per_year: f64) -> Result<Self, Error> {
        let s = walkable(crate::data::splits::time_split(0, data.market().n_times(), split.0, split.1)?)?;
        Ok(Self { data, train: s.train, valid: s.valid, test: s.test, bars_per_year })
    }

    /// Symbols.
    pub fn n_symbols(&self) -> usize {
        self.data.market().n_symbols()
    }
}

/// `s` when its validation and test parts can be walked (two times at least: a walk takes one step less
/// than its times), else an error naming the part and the calendar's length.
fn walkable(s: crate::data::splits::Split) -> Result<crate::data::splits::Split, Error> {
    for (name, part) in [("validation", &s.valid), ("test", &s.test)] {
        if part.len() < 2 {
            return Err(Error::Data(format!(
                "the universe's {name} times {part:?} are fewer than 2 (of {} times split 70/15/15): a walk \
                 over them takes no step; a universe needs more times",
                s.test.end
            )));
        }
    }
    Ok(s)
}

/// A trial's account on a universe: the single series' environment of `h` (costs, capital, reward
/// weights) without what the portfolio env has no place for (per-position barriers and holding limits;
/// rewards raw, normalized by the learner where asked).
pub fn universe_env(planner: &TrialPlanner, h: &Hyperparameters, key: u64) -> Result<TrialParams, Error> {
    let p = planner.trial_env(h, key)?;
    Ok(TrialParams { take_profit_mult: 0.0, stop_loss_mult: 0.0, max_hold_bars: 0, w_barrier: 0.0, ..p })
}

/// The planner of `cfg`'s trials on a universe of `train_times` training times (no barrier floor: the
/// portfolio env has no barriers).
pub fn universe_planner(cfg: &SearchConfig, bars_per_year: f64, train_times: usize) -> Result<TrialPlanner, Error> {
    Ok(TrialPlanner::new(&cfg.study, EnvDecimals::parse(&cfg.env)?, bars_per_year, train_times))
}

/// Accounts per trial: the study's `envs` counts rows (accounts x symbols), as a single series' envs count
/// its rows, so a trial of a universe trains on as many transitions per step as one of a single series
/// (at least one account).
pub fn accounts_per_trial(envs: usize, n_symbols: usize) -> usize {
    (envs / n_symbols.max(1)).max(1)
}

/// A training segment's steps: the study's `segment_len`, at most the training times' steps.
fn segment_len(cfg: &SearchConfig, split: &UniverseSplit) -> usize {
    segment_of(cfg, split.train.len())
}

/// [`segment_len`] for `train_times` training times.
fn segment_of(cfg: &SearchConfig, train_times: usize) -> usize {
    cfg.study.segment_len.min(train_times.saturating_sub(1)).max(1)
}

/// The env steps of every account in one epoch on `train_times` training times: a segment (DQN), or the
/// rollouts that cover one (PPO: `ceil(segment / rollout) x rollout`, which is more than a segment when
/// the rollout does not divide it; the accounts start over every segment, across a rollout).
pub fn epoch_steps(cfg: &SearchConfig, train_times: usize) -> usize {
    let segment = segment_of(cfg, train_times);
    match cfg.study.algo {
        Algo::Dqn => segment,
        Algo::Ppo => {
            let (per, rollouts) = rollout_shape(cfg, segment);
            per * rollouts
        }
    }
}

/// PPO's steps per rollout and rollouts per epoch for segments of `segment_len` steps.
fn rollout_shape(cfg: &SearchConfig, segment_len: usize) -> (usize, usize) {
    let per = match cfg.study.rollout_steps {
        0 => segment_len,
        r => r.min(segment_len),
    }
    .max(1);
    (per, segment_len.div_ceil(per))
}

/// The universe learners of a batch of trials, trained together ([`UniverseLearner::new`]).
#[derive(Debug)]
pub enum UniverseLearner {
    /// DQN trials.
    Dqn(Box<UniverseDqn>),
    /// PPO trials.
    Ppo(Box<UniversePpo>),
}

impl UniverseLearner {
    /// The learners of trials `hs` with accounts `envs` on `split`'s training times, shaped by `cfg`'s
    /// study (accounts per trial from its `envs`, segments, rollouts, the replay ring) as the search shapes
    /// them.
    pub fn new(
        backend: &Backend,
        split: &UniverseSplit,
        cfg: &SearchConfig,
        planner: &TrialPlanner,
        hs: &[Hyperparameters],
        envs: &[TrialParams],
    ) -> Result<Self, Error> {
        let s = &cfg.study;
        let n = split.n_symbols();
        let ept = accounts_per_trial(s.envs, n);
        let rows = ept * n;
        let sizes = SlotSizes::of_trials(hs);
        let segment_len = segment_len(cfg, split);
        let (per_rollout, _) = rollout_shape(cfg, segment_len);
        let ring_capacity = match s.algo {
            Algo::Dqn => (s.envs * RING_PER_ENV).max(rows),
            Algo::Ppo => rows * per_rollout,
        };
        let ucfg = UniverseConfig {
            envs_per_trial: ept,
            segment_len,
            train_start: split.train.start,
            train_end: split.train.end,
            ring_capacity,
            warmup_steps: planner.train_base().warmup_steps,
            train_every: planner.train_base().train_every,
            grad_steps: s.grad_steps.max(1) as u64,
            seed: s.seed,
        };
        let shape = (sizes.hidden, sizes.batch);
        Ok(match s.algo {
            Algo::Dqn => {
                let dqn: Vec<_> = hs.iter().map(|h| planner.dqn(h)).collect();
                Self::Dqn(Box::new(UniverseDqn::new(backend, &split.data, envs, &dqn, shape, ucfg)?))
            }
            Algo::Ppo => {
                let ppo: Vec<_> = hs.iter().map(|h| planner.ppo(h)).collect();
                Self::Ppo(Box::new(UniversePpo::new(backend, &split.data, envs, &ppo, shape, ucfg)?))
            }
        })
    }

    /// One epoch of training of every trial: a segment of env steps of every env (DQN), or the rollouts
    /// that cover a segment (PPO), as `cfg`'s study sets them on `split`.
    pub fn epoch(&mut self, cfg: &SearchConfig, split: &UniverseSplit) -> Result<(), Error> {
        let segment_len = segment_len(cfg, split);
        match self {
            Self::Dqn(l) => l.train(segment_len as u64)?,
            Self::Ppo(l) => l.train(rollout_shape(cfg, segment_len).1 as u64)?,
        }
        Ok(())
    }

    /// Saves each `(k, path)`'s trial network (the shared per-symbol head: DQN's online Q-network, PPO's
    /// actor-critic) at `path` as safetensors, as a single series' checkpoint; the parameters are read from
    /// the backend once for all of them.
    pub fn save(&self, trials: &[(usize, std::path::PathBuf)]) -> Result<(), Error> {
        match self {
            Self::Dqn(l) => crate::train::save_trials_weights(l.agent(), trials),
            Self::Ppo(l) => crate::train::save_trials_weights(l.agent(), trials),
        }
    }

    /// Every trial's greedy walk over `times` (`len - 1` steps).
    pub fn walk(&mut self, times: &Range<usize>) -> Result<Vec<UniverseWalk>, Error> {
        let (start, end) = (times.start, times.end - 1);
        Ok(match self {
            Self::Dqn(l) => l.greedy_walk(start, end)?,
            Self::Ppo(l) => l.greedy_walk(start, end)?,
        })
    }
}

/// The fills a walk implies: symbol-steps whose held side differs from the step before (the first from
/// flat). The walk keeps no fills of its own; this counts the side changes, which is what the objective
/// needs to tell a policy that never trades (value 0) from one that does.
pub fn side_changes(w: &UniverseWalk, n_symbols: usize) -> usize {
    let mut before = vec![0u8; n_symbols];
    let mut changes = 0;
    for now in w.sides.chunks_exact(n_symbols.max(1)) {
        changes += now.iter().zip(&before).filter(|(a, b)| a != b).count();
        before.copy_from_slice(now);
    }
    changes
}

/// A walk's metrics with its side changes as its trades, and its objective over `steps` returns.
pub fn walk_score(w: &UniverseWalk, n_symbols: usize, bars_per_year: f64) -> (crate::Metrics, f64) {
    let m = crate::Metrics { trades: side_changes(w, n_symbols) as f64, ..w.metrics(bars_per_year, 0.0) };
    let steps = w.equity.len().saturating_sub(1);
    let value = objective(&m, steps, bars_per_year);
    (m, value)
}

/// Walks `actions` (one `steps x N` block per trial, the codes a search stored) over `times` with each
/// trial's account `params`: the walks the search made, again.
pub fn replay(
    data: &UniverseData,
    params: &[TrialParams],
    actions: &[Vec<u8>],
    times: &Range<usize>,
) -> Result<Vec<UniverseWalk>, Error> {
    let (n, steps) = (data.market().n_symbols(), times.len() - 1);
    if let Some(k) = actions.iter().position(|a| a.len() != steps * n) {
        return Err(Error::Study(format!(
            "stored actions of trial index {k}: {} codes, {steps} steps x {n} symbols expected",
            actions[k].len()
        )));
    }
    let mut step = 0;
    let walks = walk(data, params, times.start, times.end - 1, |_| {
        let codes = actions.iter().flat_map(|a| a[step * n..(step + 1) * n].iter().copied()).collect();
        step += 1;
        Ok(codes)
    })?;
    Ok(walks)
}

/// Runs (or resumes) the search on `split` until the study holds `cfg.study.trials` finished trials: each
/// batch of up to `parallel` claimed trials trained together for `epochs` epochs (a pruned trial's
/// network keeps training with its batch-mates, unrecorded), scored on the validation times after every
/// epoch, walked on the test times at the end. One worker (this process); other processes may join the
/// study as with the single series. Each trial's network is saved as `trial-N.safetensors` in the
/// checkpoints folder (a pruned trial's at its pruning) and uploaded to the artifact store when there is
/// one; its stored actions replay its walks.
pub fn run_universe_search(
    backend: &Backend,
    split: &UniverseSplit,
    cfg: &SearchConfig,
    paths: &SearchPaths,
    progress: &(dyn Fn(&Progress) -> Result<(), Error> + Sync),
) -> Result<(), Error> {
    let s = &cfg.study;
    let planner = universe_planner(cfg, split.bars_per_year, split.train.len())?;
    let study = Study::reopen(&paths.storage, &paths.study_name)?;
    let me = worker_id();
    let mut claimed = HashSet::new();
    while let Some(c) = next_or_wait(s.heartbeat_seconds, progress, || next_batch(&study, cfg, &mut claimed, &me))? {
        let runs: Vec<_> = c.batch.runs.into_iter().map(|r| r.0).collect();
        let numbers: Vec<u64> = runs.iter().map(|r| r.0).collect();
        progress(&Progress::Batch { numbers: numbers.clone(), finished: c.finished })?;
        let batch = BatchRun { backend, split, cfg, planner: &planner, study: &study, me: &me, paths, progress };
        batch.run(&runs)?;
        study.refresh(false)?;
        progress(&Progress::BatchDone { finished: study.snapshot().finished().len() })?;
    }
    Ok(())
}

/// One batch's run.
struct BatchRun<'a> {
    backend: &'a Backend,
    split: &'a UniverseSplit,
    cfg: &'a SearchConfig,
    planner: &'a TrialPlanner,
    study: &'a Study,
    me: &'a crate::hyperopt::study::Worker,
    paths: &'a SearchPaths,
    progress: &'a (dyn Fn(&Progress) -> Result<(), Error> + Sync),
}

impl BatchRun<'_> {
    fn run(&self, runs: &[super::Claim]) -> Result<(), Error> {
        let (s, split, study) = (&self.cfg.study, self.split, self.study);
        let n = split.n_symbols();
        let numbers: Vec<u64> = runs.iter().map(|r| r.0).collect();
        let hs: Vec<Hyperparameters> = runs.iter().map(|r| self.planner.read(&r.1)).collect::<Result<_, _>>()?;
        let envs: Vec<TrialParams> =
            hs.iter().zip(&numbers).map(|(h, &k)| universe_env(self.planner, h, k)).collect::<Result<_, _>>()?;
        let references: Vec<_> = runs.iter().map(|r| study.snapshot_reference(&r.2)).collect();
        let started = std::time::Instant::now();
        let mut learner = UniverseLearner::new(self.backend, split, self.cfg, self.planner, &hs, &envs)?;
        let setup_seconds = started.elapsed().as_secs_f64();
        // Row steps an epoch trains: every trial of the batch trains (a pruned one with its batch-mates).
        let steps = (accounts_per_trial(s.envs, n) * n * epoch_steps(self.cfg, split.train.len()) * runs.len()) as f64;
        let (mut own, mut pruned) = (vec![Vec::new(); runs.len()], vec![false; runs.len()]);
        let mut valid_actions = vec![Vec::new(); runs.len()];
        // A pruned trial's test walk, made by its network at the epoch that pruned it (as the single series'
        // search tests a pruned trial when its slot frees), not by the network its batch-mates trained on.
        let mut tests: Vec<Option<UniverseWalk>> = vec![None; runs.len()];
        let checkpoint = |k: usize| self.paths.checkpoints.join(format!("trial-{}.safetensors", numbers[k]));
        let mut test_seconds = 0.0;
        for epoch in 0..s.epochs {
            if pruned.iter().all(|&p| p) {
                break;
            }
            study.beat(&numbers, self.me)?;
            let t0 = std::time::Instant::now();
            learner.epoch(self.cfg, split)?;
            let train_seconds = t0.elapsed().as_secs_f64();
            let t1 = std::time::Instant::now();
            let walks = learner.walk(&split.valid)?;
            let eval_seconds = t1.elapsed().as_secs_f64();
            let scores: Vec<_> = walks.iter().map(|w| walk_score(w, n, split.bars_per_year)).collect();
            let best = scores.iter().map(|(m, _)| m.sharpe).filter(|x| x.is_finite()).fold(f64::NAN, f64::max);
            let live = pruned.iter().filter(|p| !**p).count();
            (self.progress)(&Progress::Epoch {
                epoch,
                env_steps_per_s: steps / train_seconds.max(1e-9),
                best,
                train_seconds,
                eval_seconds,
                live,
                slots: runs.len(),
            })?;
            let mut pruned_now = Vec::new();
            for (k, (m, value)) in scores.into_iter().enumerate() {
                if pruned[k] {
                    continue;
                }
                own[k].push(value);
                valid_actions[k] = walks[k].actions.clone();
                let record = EpochRecord {
                    trial: numbers[k],
                    epoch: epoch as u64,
                    loss: 0.0,
                    valid_sharpe: value,
                    valid_return: m.total_return,
                };
                study.record_epoch(&record)?;
                let (reference, n_complete) = (&references[k].0, references[k].1);
                if s.prune == PruneRule::Median
                    && should_prune(
                        &own[k],
                        epoch as u64,
                        reference,
                        n_complete,
                        s.prune_startup_trials,
                        s.prune_warmup_epochs,
                    )
                {
                    pruned[k] = true;
                    pruned_now.push(k);
                    study.prune(numbers[k], epoch as u64, value)?;
                }
            }
            if !pruned_now.is_empty() {
                let t2 = std::time::Instant::now();
                let walks = learner.walk(&split.test)?;
                test_seconds += t2.elapsed().as_secs_f64();
                let saved: Vec<_> = pruned_now.iter().map(|&k| (k, checkpoint(k))).collect();
                learner.save(&saved)?;
                for k in pruned_now {
                    tests[k] = Some(walks[k].clone());
                }
            }
        }
        if tests.iter().any(Option::is_none) {
            let t2 = std::time::Instant::now();
            let walks = learner.walk(&split.test)?;
            test_seconds += t2.elapsed().as_secs_f64();
            let saved: Vec<_> = (0..tests.len()).filter(|&k| tests[k].is_none()).map(|k| (k, checkpoint(k))).collect();
            learner.save(&saved)?;
            for (t, w) in tests.iter_mut().zip(walks) {
                t.get_or_insert(w);
            }
        }
        (self.progress)(&Progress::Trained { setup_seconds, test_seconds })?;
        for (k, w) in tests.iter().enumerate() {
            let w = w.as_ref().ok_or_else(|| Error::Data(format!("trial {} has no test walk", numbers[k])))?;
            let (m, _) = walk_score(w, n, split.bars_per_year);
            let value = own[k].last().copied().unwrap_or(f64::NAN);
            study.set_valid_actions(numbers[k], &valid_actions[k])?;
            let path = checkpoint(k);
            // The checkpoint into the artifact store, linked before the trial finishes (Optuna's cached
            // storage never re-reads a finished trial).
            if let Some(store) = &self.paths.artifacts {
                let bytes = std::fs::read(&path).map_err(|e| Error::Output(format!("{}: {e}", path.display())))?;
                let meta =
                    store.put(&format!("trial-{}.safetensors", numbers[k]), &bytes, "application/octet-stream")?;
                study.link_artifact(numbers[k], &meta)?;
            }
            study.finish(numbers[k], value, m.total_return, m.sharpe, &w.actions, &path.display().to_string())?;
            study.refresh(false)?;
            let finished = study.snapshot().finished().len();
            (self.progress)(&Progress::TrialDone { number: numbers[k], finished })?;
        }
        Ok(())
    }
}
