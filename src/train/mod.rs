//! The trainer of both learners (DQN and PPO): K trials x E envs collect experience on the train split
//! (epsilon-greedy or sampled actions chosen on the device), every trial's networks train in the same
//! launches, and each epoch ends with a greedy evaluation on the validation split through the backtest
//! engine; [`run_slots`] lets a search refill a freed slot with a new trial. Weights save as safetensors that
//! candle's `VarBuilder` loads.

use crate::Error;
use std::collections::HashMap;

mod slots;

pub use slots::{DEFER_BYTES, DEFER_SECONDS, EndedTrial, SlotControl, SlotRun, SlotTrial, TrialNetwork, run_slots};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use gpu_kernels::dqn::DqnParams;
use gpu_kernels::mlp::Layout;

use crate::data::Series;
use crate::data::device::Prepared;
use crate::data::features::WARMUP;
use crate::data::splits::{Split, time_split};
use crate::{
    Backend, BacktestSpec, DqnAgent, EnvBatch, EnvConfig, HostError, MarketData, Metrics, PpoAgent, PreparedWalk,
    SampleBatch, Signals, SimLayout, TrialParams, WalkHandle, backtest,
};

/// The learning algorithm of a training run or a search (`--algo`, `study.algo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Algo {
    /// Double-capable DQN with a replay ring.
    #[default]
    Dqn,
    /// PPO (CleanRL's defaults).
    Ppo,
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Dqn => "dqn",
            Self::Ppo => "ppo",
        })
    }
}

/// What to train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    /// Envs per trial.
    pub envs: usize,
    /// Steps per env and epoch (capped at the training bars).
    pub segment_len: usize,
    /// Epochs.
    pub epochs: usize,
    /// Row stride of the networks (>= every trial's hidden width).
    pub hidden: usize,
    /// Minibatch buffer per trial (>= every trial's batch).
    pub batch: usize,
    /// Env steps before the first gradient step.
    pub warmup_steps: u64,
    /// Env steps between gradient rounds.
    pub train_every: u64,
    /// Gradient steps per round.
    pub grad_steps: usize,
    /// Replay ring per trial, in transitions.
    pub ring_capacity: usize,
    /// Seed of everything random.
    pub seed: u64,
    /// Train and validation fractions of the bars after the warm-up (the test part takes the rest).
    pub split: (f64, f64),
    /// Bars per year for the evaluation metrics.
    pub bars_per_year: f64,
    /// Environment parameters per trial.
    pub env_params: Vec<TrialParams>,
    /// PPO: steps per env and rollout (CleanRL's `num_steps`); an epoch's segment is collected in
    /// `ceil(segment_len / rollout_steps)` rollouts, each followed by its updates. 0: one rollout per epoch.
    pub rollout_steps: usize,
}

impl TrainConfig {
    /// A small, sensible default for `trials` trials: 256 envs, 128-step segments, 2 x 64 hidden units,
    /// batches of 128 (the learners' parameters: [`default_dqn`], `PpoParams::default()`).
    pub fn default_for(trials: usize, epochs: usize, seed: u64) -> Self {
        let (envs, segment_len) = (256, 128);
        use num_traits::ToPrimitive;
        let cost = |text: &str| text.parse::<rust_decimal::Decimal>().ok().and_then(|d| d.to_f64()).unwrap_or(0.0);
        let (spread, commission) = (cost(crate::DEFAULT_SPREAD), cost(crate::DEFAULT_COMMISSION));
        let env = TrialParams { spread, commission, w_cost: 1.0, ..TrialParams::frictionless(100_000.0) };
        Self {
            envs,
            segment_len,
            epochs,
            hidden: 64,
            batch: 128,
            warmup_steps: 16,
            train_every: 1,
            grad_steps: 1,
            rollout_steps: 0,
            ring_capacity: envs * 64,
            seed,
            split: DEFAULT_SPLIT,
            bars_per_year: 252.0,
            // Trial k's random streams are keyed by k.
            env_params: (0..trials as u64).map(|key| TrialParams { key, ..env }).collect(),
        }
    }
}

/// `tradesim train`'s DQN for `steps` env steps a trial: lr 5e-4, gamma 0.9, 2 x 64 hidden units, batches
/// of 128, epsilon 1 -> 0.05 over the first half of the steps, the target copied every 100 gradient steps.
pub fn default_dqn(steps: usize) -> DqnParams {
    DqnParams {
        lr: 5e-4,
        gamma: 0.9,
        eps_decay_steps: 0.5 * steps as f32,
        hidden: 64,
        batch: 128,
        target_every: 100,
        ..DqnParams::default()
    }
}

/// One epoch's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochReport {
    /// Epoch number of the batch (from 0).
    pub epoch: usize,
    /// Per slot: the key of the trial it trained this epoch and that trial's own epoch (from 0; a trial
    /// started in a freed slot counts from its start), or `None` for an idle slot.
    pub trials: Vec<Option<(u64, usize)>>,
    /// Env steps so far (per env).
    pub env_steps: u64,
    /// Gradient steps so far (each for every trial).
    pub grad_steps: u64,
    /// Mean loss of each trial's last gradient step.
    pub losses: Vec<f32>,
    /// Greedy policy on the validation split, per trial.
    pub valid: Vec<Metrics>,
    /// The greedy validation actions backtested for [`Self::valid`] (`slots x (validation bars - 1)`,
    /// slot-major): with the trial's parameters they reproduce its per-bar validation returns.
    pub valid_actions: Vec<u8>,
    /// Seconds of collection and training this epoch (evaluation excluded).
    pub train_seconds: f64,
    /// Seconds of the evaluation.
    pub eval_seconds: f64,
}

/// An agent that acts on envs: the evaluation needs no more.
pub trait Policy: Sized {
    /// A CPU copy acting on `env`.
    fn cpu_copy(&self, env: &EnvBatch) -> Result<Self, HostError>;
    /// Actions for every env, then one env step.
    fn act_and_step(&mut self, env: &mut EnvBatch, step: u64, greedy: bool) -> Result<(), HostError>;
    /// Prepares the greedy actions of `env`'s single env per trial over `steps` bars from the network as it
    /// is now, walked in one piece per trial (one launch on a GPU, whenever the caller launches it, which
    /// runs while the caller goes on; a thread per trial on the CPU, done here); unavailable where the agent
    /// has no such walk (the caller then steps a CPU copy bar by bar).
    fn prepare_greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<PreparedWalk, HostError>;
}

/// Networks that can be saved: their layout, each trial's active width, and their parameters.
pub trait Networks {
    /// The parameter layout.
    fn net_layout(&self) -> Layout;
    /// Each trial's hidden width.
    fn hiddens(&self) -> Vec<usize>;
    /// The online parameters of every trial.
    fn online(&self) -> Result<Vec<f32>, Error>;
}

/// [`Policy`] and [`Networks`] of a host agent, whose inherent methods of those names do the work (DQN and
/// PPO differ there only in what they compute, not in how the search reaches it).
macro_rules! agent_traits {
    ($agent:ident) => {
        impl Policy for $agent {
            fn cpu_copy(&self, env: &EnvBatch) -> Result<Self, HostError> {
                $agent::cpu_copy(self, env)
            }
            fn act_and_step(&mut self, env: &mut EnvBatch, step: u64, greedy: bool) -> Result<(), HostError> {
                $agent::act_and_step(self, env, step, greedy)
            }
            fn prepare_greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<PreparedWalk, HostError> {
                $agent::prepare_greedy_walk(self, env, steps)
            }
        }

        impl Networks for $agent {
            fn net_layout(&self) -> Layout {
                self.layout()
            }
            fn hiddens(&self) -> Vec<usize> {
                self.params().iter().map(|p| p.hidden as usize).collect()
            }
            fn online(&self) -> Result<Vec<f32>, Error> {
                Ok(self.state()?.online)
            }
        }
    };
}

agent_traits!(DqnAgent);
agent_traits!(PpoAgent);

/// The trained agent and where it stands.
#[derive(Debug)]
pub struct Trained<A = DqnAgent> {
    /// The agent.
    pub agent: A,
    /// Every epoch's report.
    pub epochs: Vec<EpochReport>,
    /// Greedy policy on the test split, per trial.
    pub test: Vec<Metrics>,
    /// The greedy test actions, `trials x (test bars - 1)`.
    pub test_actions: Vec<u8>,
    /// The split used.
    pub split: Split,
    /// Seconds of setup: the envs and networks (the features are the caller's [`SplitData`]).
    pub setup_seconds: f64,
    /// Seconds of the test walks and backtests.
    pub test_seconds: f64,
}

/// Fractions of the bars (after the feature warm-up) in the train and validation splits; the rest is test.
pub const DEFAULT_SPLIT: (f64, f64) = (0.7, 0.15);

/// Train, validation and test market data of a series (features normalized on the train split): computed
/// once, then shared by every batch of a search and by its report.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitData {
    /// The split used.
    pub split: Split,
    /// Training bars.
    pub train: MarketData,
    /// Validation bars.
    pub valid: MarketData,
    /// Test bars.
    pub test: MarketData,
}

impl SplitData {
    /// Splits `series` by time (`split`: train and validation fractions) and prepares the three parts, sigma
    /// with an EWMA span of `sigma_span` bars.
    pub fn new(series: &Series, split: (f64, f64), sigma_span: usize) -> Result<Self, Error> {
        let n = series.bars.len();
        let s = time_split(WARMUP.min(n), n, split.0, split.1)?;
        let prepared = Prepared::with_sigma_span(series, s.train.clone(), sigma_span)?;
        let part = |r: std::ops::Range<usize>| prepared.market_data(r);
        Ok(Self { train: part(s.train.clone())?, valid: part(s.valid.clone())?, test: part(s.test.clone())?, split: s })
    }
}

/// The greedy policy of every trial over all of `market`, as a backtest (one env per trial).
pub fn evaluate<P: Policy>(
    backend: &Backend,
    agent: &mut P,
    market: &MarketData,
    env_params: &[TrialParams],
    bars_per_year: f64,
    seed: u64,
) -> Result<Vec<Metrics>, Error> {
    Ok(greedy_actions(backend, agent, market, env_params, bars_per_year, seed)?.0)
}

/// [`evaluate`], also returning the greedy actions (`trials x (bars - 1)`, trial-major) it backtested.
///
/// The greedy walk is one env per trial, bar after bar. An agent with a walk of its own runs it in one
/// piece per trial on its backend (a GPU launch with a block per trial, or a CPU thread per trial);
/// otherwise a CPU copy of the agent steps the envs bar by bar. All give the same bits (tests/dqn.rs).
pub fn greedy_actions<P: Policy>(
    backend: &Backend,
    agent: &mut P,
    market: &MarketData,
    env_params: &[TrialParams],
    bars_per_year: f64,
    seed: u64,
) -> Result<(Vec<Metrics>, Vec<u8>), HostError> {
    prepare_greedy(backend, agent, market, env_params, bars_per_year, seed)?.launch()?.finish()
}

/// The metrics of greedy walks over all of `market`: the backtest engine (CPU) on `targets`, each
/// column's action per step (`env_params.len()` columns, column-major as the walks write them).
pub fn backtest_walk(
    market: &MarketData,
    env_params: &[TrialParams],
    targets: &[u8],
    bars_per_year: f64,
) -> Result<Vec<Metrics>, HostError> {
    let spec = BacktestSpec {
        start: 0,
        end: market.n_bars() - 1,
        bars_per_year,
        risk_free: 0.0,
        ledger: false,
        equity: false,
    };
    let columns = env_params.len();
    Ok(backtest(&Backend::Cpu, market, env_params, Signals::Targets { targets, columns }, &spec)?.metrics)
}

/// A greedy evaluation under way ([`PreparedGreedy::launch`]); [`PendingGreedy::finish`] waits for the walk and
/// backtests its actions on the market and parameters it started with. It holds the walk's envs until then.
#[derive(Debug)]
pub struct PendingGreedy<'a> {
    _env: EnvBatch,
    walk: WalkHandle,
    market: &'a MarketData,
    env_params: Vec<TrialParams>,
    bars_per_year: f64,
}

/// A greedy evaluation prepared from the agent's network as it was ([`prepare_greedy`]), not yet launched.
#[derive(Debug)]
pub struct PreparedGreedy<'a> {
    env: EnvBatch,
    walk: PreparedWalk,
    market: &'a MarketData,
    env_params: Vec<TrialParams>,
    bars_per_year: f64,
}

/// Prepares [`greedy_actions`]: the walk's envs and the agent's network as it is now (on a GPU a copy of the
/// weights; on the CPU the walk is done here, and a walk the agent cannot do on its backend is stepped on a
/// CPU copy here), launched by [`PreparedGreedy::launch`] whenever the caller chooses: on a GPU the walk
/// then runs on its envs' own stream while the caller goes on (the agent may train on meanwhile).
pub fn prepare_greedy<'a, P: Policy>(
    backend: &Backend,
    agent: &mut P,
    market: &'a MarketData,
    env_params: &[TrialParams],
    bars_per_year: f64,
    seed: u64,
) -> Result<PreparedGreedy<'a>, HostError> {
    let trials = env_params.len();
    let steps = market.n_bars() - 1;
    let layout = SimLayout::new(trials, 1)?;
    // A walk's envs are fresh: no trial's clocks carry over from the batch it trained in.
    let env_params: Vec<TrialParams> =
        env_params.iter().map(|p| TrialParams { ring_origin: 0, draw_origin: 0, ..*p }).collect();
    let env_params = env_params.as_slice();
    let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: 0, seed, trial_groups: 1 };
    let mut env = EnvBatch::new(backend, market, env_params, layout, cfg)?;
    env.reset_segments(&vec![(0, steps as u32); trials])?;
    let mut walk = agent.prepare_greedy_walk(&mut env, steps)?;
    if walk.is_unavailable() {
        let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: steps, seed, trial_groups: 1 };
        let mut env = EnvBatch::new(&Backend::Cpu, market, env_params, layout, cfg)?;
        env.reset_segments(&vec![(0, steps as u32); trials])?;
        let mut cpu_agent = agent.cpu_copy(&env)?;
        for step in 0..steps as u64 {
            cpu_agent.act_and_step(&mut env, step, true)?;
        }
        walk = PreparedWalk::from_actions(env.transitions()?.iter().map(|t| t.action).collect());
    }
    Ok(PreparedGreedy { env, walk, market, env_params: env_params.to_vec(), bars_per_year })
}

impl<'a> PreparedGreedy<'a> {
    /// Whether [`Self::launch`] starts the walk on a device (else it was done when prepared).
    pub fn is_deferred(&self) -> bool {
        self.walk.is_deferred()
    }

    /// Launches the walk (on a GPU on its envs' stream, while the caller goes on).
    pub fn launch(self) -> Result<PendingGreedy<'a>, HostError> {
        let Self { mut env, walk, market, env_params, bars_per_year } = self;
        let walk = walk.launch(&mut env)?;
        Ok(PendingGreedy { _env: env, walk, market, env_params, bars_per_year })
    }
}

impl PendingGreedy<'_> {
    /// Waits for the walk and backtests its actions: each trial's metrics and the actions.
    pub fn finish(self) -> Result<(Vec<Metrics>, Vec<u8>), HostError> {
        let targets = self.walk.finish()?.ok_or_else(|| HostError::Config("the greedy walk gave no actions".into()))?;
        let metrics = backtest_walk(self.market, &self.env_params, &targets, self.bars_per_year)?;
        Ok((metrics, targets))
    }
}

/// An agent that learns from its envs an epoch at a time.
pub trait Learner: Policy + Networks {
    /// A trial's learner parameters.
    type Params: Clone;
    /// Slot `k` takes a new trial at an epoch boundary, after `step` env steps of the batch: its env
    /// parameters `env_params` and learner parameters `params`, fresh networks, optimizer state, replay ring
    /// and clocks ([`EnvBatch::restart_trial`] and the agent's own), so that it computes what it would in a
    /// batch of its own.
    fn restart_slot(
        &mut self,
        k: usize,
        params: Self::Params,
        env: &mut EnvBatch,
        env_params: TrialParams,
        cfg: &TrainConfig,
        step: u64,
    ) -> Result<(), Error>;
    /// One epoch of `segment_len` env steps from `env`'s fresh segments; `step` counts env steps so far.
    fn learn_epoch(
        &mut self,
        env: &mut EnvBatch,
        cfg: &TrainConfig,
        segment_len: usize,
        step: &mut u64,
    ) -> Result<(), HostError>;
    /// Mean loss of each trial in the last update.
    fn losses(&self) -> Result<Vec<f32>, HostError>;
    /// Gradient steps (updates) so far.
    fn gradient_steps(&self) -> u64;
}

/// The batch's gradient rounds that a trial started after `start` env steps sits out: those its
/// batch-mates take before the trial's own warm-up ends (its first round is at its own step `s0`, the first
/// `s >= warmup_steps` that `train_every` divides). A trial's rounds fall on its batch-mates' only when
/// `train_every` divides `start`: otherwise an error (slot refills need `segment_len` a multiple of
/// `train_every`).
pub fn warmup_rounds(cfg: &TrainConfig, start: u64) -> Result<u64, Error> {
    let every = cfg.train_every.max(1);
    if !start.is_multiple_of(every) {
        return Err(Error::Data(format!(
            "a trial can start in a freed slot only where train_every ({every}) divides the env steps so far \
             ({start}): make segment_len a multiple of train_every"
        )));
    }
    let round = |s: u64| s >= cfg.warmup_steps && s.is_multiple_of(every);
    Ok((1..).take_while(|&s| !round(s)).filter(|&s| round(start + s)).count() as u64)
}

impl Learner for DqnAgent {
    type Params = DqnParams;

    fn restart_slot(
        &mut self,
        k: usize,
        params: DqnParams,
        env: &mut EnvBatch,
        env_params: TrialParams,
        cfg: &TrainConfig,
        step: u64,
    ) -> Result<(), Error> {
        // Its batch-mates' gradient steps (and minibatch draws, one each) during its warm-up are not its own.
        let skipped = warmup_rounds(cfg, step)? * cfg.grad_steps as u64;
        env.restart_trial(k, env_params, env.draws() + skipped)?;
        Ok(self.restart_trial(k, params, env, step, self.gradient_steps() + skipped)?)
    }

    /// Acts every step; after the warm-up, `grad_steps` gradient steps every `train_every` env steps.
    fn learn_epoch(
        &mut self,
        env: &mut EnvBatch,
        cfg: &TrainConfig,
        segment_len: usize,
        step: &mut u64,
    ) -> Result<(), HostError> {
        for _ in 0..segment_len {
            self.act_and_step(env, *step, false)?;
            *step += 1;
            if *step >= cfg.warmup_steps && step.is_multiple_of(cfg.train_every.max(1)) {
                for _ in 0..cfg.grad_steps {
                    self.train_step(env)?;
                }
            }
        }
        Ok(())
    }
    fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.last_losses()
    }
    fn gradient_steps(&self) -> u64 {
        DqnAgent::gradient_steps(self)
    }
}

impl Learner for PpoAgent {
    type Params = gpu_kernels::ppo::PpoParams;

    fn restart_slot(
        &mut self,
        k: usize,
        params: Self::Params,
        env: &mut EnvBatch,
        env_params: TrialParams,
        _cfg: &TrainConfig,
        _step: u64,
    ) -> Result<(), Error> {
        env.restart_trial(k, env_params, env.draws())?;
        Ok(self.restart_trial(k, params, env)?)
    }

    /// The segment's rollouts ([`rollouts_per_epoch`]), each followed by GAE and the minibatch updates.
    fn learn_epoch(
        &mut self,
        env: &mut EnvBatch,
        cfg: &TrainConfig,
        segment_len: usize,
        step: &mut u64,
    ) -> Result<(), HostError> {
        for _ in 0..rollouts_per_epoch(cfg, segment_len) {
            self.collect(env)?;
            self.update(env)?;
        }
        *step += segment_len as u64;
        Ok(())
    }
    fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.last_losses()
    }
    fn gradient_steps(&self) -> u64 {
        self.updates()
    }
}

/// PPO's steps per rollout for segments of `segment_len` (at most the segment; the whole segment without
/// `rollout_steps`).
pub fn rollout_len(cfg: &TrainConfig, segment_len: usize) -> usize {
    if cfg.rollout_steps == 0 { segment_len } else { cfg.rollout_steps.min(segment_len) }
}

/// PPO's rollouts per epoch: `ceil(segment_len / rollout_len)` (the last one's steps past the segment's end
/// are empty slots, zero-weight samples).
pub fn rollouts_per_epoch(cfg: &TrainConfig, segment_len: usize) -> usize {
    segment_len.div_ceil(rollout_len(cfg, segment_len).max(1))
}

/// The training loop of a fixed batch ([`run_slots`] without refills): every trial trains all epochs, and
/// `progress` hears of each epoch.
fn train<A: Learner>(
    backend: &Backend,
    data: &SplitData,
    cfg: &TrainConfig,
    ring_capacity: impl FnOnce(usize) -> usize,
    make_agent: impl FnOnce(&EnvBatch) -> Result<A, HostError>,
    progress: impl FnMut(&EpochReport) -> Result<(), Error>,
) -> Result<Trained<A>, Error> {
    /// Reports every epoch; no trial stops early; no refill; keeps the ended trials' test results.
    struct Fixed<F> {
        progress: F,
        epochs: Vec<EpochReport>,
        ended: Vec<Option<EndedTrial>>,
    }
    impl<P, F: FnMut(&EpochReport) -> Result<(), Error>> SlotControl<P> for Fixed<F> {
        fn report(&mut self, report: &EpochReport) -> Result<(), Error> {
            (self.progress)(report)?;
            self.epochs.push(report.clone());
            Ok(())
        }
        fn stops(&self, _: usize) -> bool {
            false
        }
        fn may_stop(&self, _: usize) -> bool {
            false
        }
        fn next(&mut self, _: usize, _: usize) -> Result<Option<SlotTrial<P>>, Error> {
            Ok(None)
        }
        fn ended(&mut self, trial: EndedTrial) -> Result<(), Error> {
            let slot = trial.slot;
            self.ended[slot] = Some(trial);
            Ok(())
        }
    }
    let mut ctl = Fixed { progress, epochs: Vec::new(), ended: vec![None; cfg.env_params.len()] };
    let run = run_slots(backend, data, cfg, ring_capacity, make_agent, &mut ctl)?;
    let ended: Vec<EndedTrial> = ctl.ended.into_iter().flatten().collect();
    Ok(Trained {
        agent: run.agent,
        epochs: ctl.epochs,
        test: ended.iter().map(|t| t.test).collect(),
        test_actions: ended.iter().flat_map(|t| t.test_actions.iter().copied()).collect(),
        split: data.split.clone(),
        setup_seconds: run.setup_seconds,
        test_seconds: run.test_seconds,
    })
}

/// Trains DQN agents (one per trial, `dqn[k]`) on `series` with `cfg`'s environment, sizes and split;
/// `progress` hears about every epoch in order: on the CPU as it ends, on a GPU when its validation walk is
/// done, which [`run_slots`] may hold back to launch with later epochs' (up to [`DEFER_SECONDS`] of
/// training). An error from it stops the training and is returned.
pub fn train_dqn(
    backend: &Backend,
    data: &SplitData,
    cfg: &TrainConfig,
    dqn: &[DqnParams],
    progress: impl FnMut(&EpochReport) -> Result<(), Error>,
) -> Result<Trained, Error> {
    if cfg.env_params.len() != dqn.len() || dqn.is_empty() {
        return Err(Error::Data(format!(
            "{} environment parameter sets for {} DQN parameter sets",
            cfg.env_params.len(),
            dqn.len()
        )));
    }
    let make = |env: &EnvBatch| DqnAgent::new(backend, env, dqn, cfg.hidden, cfg.batch, cfg.seed);
    train(backend, data, cfg, |_| cfg.ring_capacity, make, progress)
}

/// Trains PPO actor-critics (one per trial, `ppo[k]`) on `series` with `cfg`'s environment, sizes and split:
/// each epoch is one rollout of `segment_len` steps of every env, GAE, then the
/// minibatch updates; then the greedy policy is scored on the validation split.
pub fn train_ppo(
    backend: &Backend,
    data: &SplitData,
    cfg: &TrainConfig,
    ppo: &[gpu_kernels::ppo::PpoParams],
    progress: impl FnMut(&EpochReport) -> Result<(), Error>,
) -> Result<Trained<PpoAgent>, Error> {
    if cfg.env_params.len() != ppo.len() || ppo.is_empty() {
        return Err(Error::Data(format!(
            "{} environment parameter sets for {} PPO parameter sets",
            cfg.env_params.len(),
            ppo.len()
        )));
    }
    let make = |env: &EnvBatch| PpoAgent::new(backend, env, ppo, cfg.hidden, cfg.batch, cfg.seed);
    train(backend, data, cfg, |segment_len| rollout_len(cfg, segment_len) * cfg.envs, make, progress)
}

/// One trial's online network as named tensors (active width only), as candle's `linear` layers name them:
/// `l1.weight` `[h, D]`, `l1.bias` `[h]`, `l2.*`, `l3.weight` `[O, h]`, `l3.bias` `[O]` (O = 3 Q-values, or 3
/// logits and a value for PPO).
pub fn trial_tensors(l: &Layout, weights: &[f32], hidden: usize) -> candle_core::Result<HashMap<String, Tensor>> {
    let (d, stride, h) = (l.input, l.hidden, hidden);
    let rows = |offset: usize, n_rows: usize, cols: usize, row_stride: usize| -> Vec<f32> {
        (0..n_rows)
            .flat_map(|i| weights[offset + i * row_stride..offset + i * row_stride + cols].iter().copied())
            .collect()
    };
    let dev = Device::Cpu;
    let mut out = HashMap::new();
    out.insert("l1.weight".to_owned(), Tensor::from_vec(rows(l.w1(), h, d, d), (h, d), &dev)?);
    out.insert("l1.bias".to_owned(), Tensor::from_vec(weights[l.b1()..l.b1() + h].to_vec(), h, &dev)?);
    out.insert("l2.weight".to_owned(), Tensor::from_vec(rows(l.w2(), h, h, stride), (h, h), &dev)?);
    out.insert("l2.bias".to_owned(), Tensor::from_vec(weights[l.b2()..l.b2() + h].to_vec(), h, &dev)?);
    let o = l.outputs;
    out.insert("l3.weight".to_owned(), Tensor::from_vec(rows(l.w3(), o, h, stride), (o, h), &dev)?);
    out.insert("l3.bias".to_owned(), Tensor::from_vec(weights[l.b3()..l.b3() + o].to_vec(), o, &dev)?);
    Ok(out)
}

/// Saves every trial's online network to `dir/trial-K.safetensors`; returns the paths.
pub fn save_weights(agent: &(impl Networks + ?Sized), dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let names: Vec<String> = (0..agent.hiddens().len()).map(|k| format!("trial-{k}.safetensors")).collect();
    save_named_weights(agent, dir, &names)
}

/// Saves trial k's online network to `dir/names[k]` ([`TrialNetwork::save`]); returns the paths.
pub fn save_named_weights(
    agent: &(impl Networks + ?Sized),
    dir: &Path,
    names: &[String],
) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let trials: Vec<(usize, PathBuf)> =
        names.iter().enumerate().take(agent.hiddens().len()).map(|(k, name)| (k, dir.join(name))).collect();
    save_trials_weights(agent, &trials)?;
    Ok(trials.into_iter().map(|(_, path)| path).collect())
}

/// Saves each `(k, path)`'s trial online network of `agent` at `path` ([`TrialNetwork::save`]: written
/// beside, then renamed into place), with the parameters read from the backend once.
pub fn save_trials_weights(agent: &(impl Networks + ?Sized), trials: &[(usize, PathBuf)]) -> Result<(), Error> {
    if trials.is_empty() {
        return Ok(());
    }
    let online = agent.online()?;
    trials.iter().try_for_each(|(k, path)| TrialNetwork::of(agent, &online, *k).save(path))
}

/// A sampled minibatch as candle tensors: `obs` and `next_obs` `[K, B, D]`, `actions` `[K, B]` (u32),
/// `rewards`, `dones`, `weights` `[K, B]` (f32), for users who train with candle.
pub fn sample_tensors(s: &SampleBatch, trials: usize) -> candle_core::Result<HashMap<&'static str, Tensor>> {
    let dev = Device::Cpu;
    let b = s.actions.len() / trials.max(1);
    let d = s.obs.len() / s.actions.len().max(1);
    let mut out = HashMap::new();
    out.insert("obs", Tensor::from_slice(&s.obs, (trials, b, d), &dev)?);
    out.insert("next_obs", Tensor::from_slice(&s.next_obs, (trials, b, d), &dev)?);
    out.insert("actions", Tensor::from_slice(&s.actions, (trials, b), &dev)?);
    out.insert("rewards", Tensor::from_slice(&s.rewards, (trials, b), &dev)?);
    out.insert("dones", Tensor::from_slice(&s.dones, (trials, b), &dev)?);
    out.insert("weights", Tensor::from_slice(&s.weights, (trials, b), &dev)?.to_dtype(DType::F32)?);
    Ok(out)
}
