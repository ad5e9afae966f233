//! The public data types the dispatch layer and both backends share: batch layout and options, sampled
//! minibatches, network state, backtest signals, specs and results. A leaf module: it imports neither the
//! dispatch files nor a backend, so the backends can use these types without importing the files that
//! import them.

use gpu_kernels::account::AccountFill;
use gpu_kernels::account::env::PortfolioStep;
use gpu_kernels::backtest::{Metrics, SmaCross, Trade};

use crate::HostError;

/// How many trials and envs per trial a batch holds. Envs are numbered trial-major: env `i` belongs to
/// trial `i / envs_per_trial`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimLayout {
    trials: usize,
    envs_per_trial: usize,
}

impl SimLayout {
    /// A layout of `trials` x `envs_per_trial` (both at least 1, fewer than 2^32 envs in all).
    pub fn new(trials: usize, envs_per_trial: usize) -> Result<Self, HostError> {
        let n = trials.saturating_mul(envs_per_trial);
        if trials == 0 || envs_per_trial == 0 || n > u32::MAX as usize {
            return Err(HostError::InvalidLayout { trials, envs_per_trial });
        }
        Ok(Self { trials, envs_per_trial })
    }

    /// Number of trials.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Envs per trial.
    pub fn envs_per_trial(&self) -> usize {
        self.envs_per_trial
    }

    /// Envs in all.
    pub fn n_envs(&self) -> usize {
        self.trials * self.envs_per_trial
    }
}

/// Options of an [`EnvBatch`](crate::EnvBatch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvConfig {
    /// Steps per env segment (L) for [`EnvBatch::reset_epoch`](crate::EnvBatch::reset_epoch).
    pub segment_len: u32,
    /// Replay ring capacity per trial, in transitions (0: no transitions are kept). At least E when set.
    pub ring_capacity: usize,
    /// Seed of segment draws and of the sampler.
    pub seed: u64,
    /// CUDA only: trials are split into this many groups, each on its own stream (1: one launch for all).
    pub trial_groups: usize,
}

impl Default for EnvConfig {
    fn default() -> Self {
        Self { segment_len: 2_048, ring_capacity: 0, seed: 0, trial_groups: 1 }
    }
}

/// A sampled minibatch, rebuilt into full observations: `K x B` samples, trial-major.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SampleBatch {
    /// Observations, `K x B x (F + 3)`.
    pub obs: Vec<f32>,
    /// Next observations, same shape.
    pub next_obs: Vec<f32>,
    /// Action codes.
    pub actions: Vec<u32>,
    /// Rewards (normalized where the trial asks for it).
    pub rewards: Vec<f32>,
    /// 1.0 where the next state is terminal.
    pub dones: Vec<f32>,
    /// 1.0 for a real sample, 0.0 where the trial's ring held no valid transition (outputs zeroed).
    pub weights: Vec<f32>,
}

/// Online, target and Adam state of every trial (`K x params` each, trial-major).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NetState {
    /// Online network parameters.
    pub online: Vec<f32>,
    /// Target network parameters (empty for a learner without a target network).
    pub target: Vec<f32>,
    /// Adam first moments.
    pub m: Vec<f32>,
    /// Adam second moments.
    pub v: Vec<f32>,
}

impl NetState {
    /// Trial `k` starts over: its online (and target, where there is one) parameters become `weights`, its
    /// Adam moments zero.
    pub(crate) fn restart_trial(&mut self, k: usize, weights: &[f32]) {
        let range = k * weights.len()..(k + 1) * weights.len();
        self.online[range.clone()].copy_from_slice(weights);
        if !self.target.is_empty() {
            self.target[range.clone()].copy_from_slice(weights);
        }
        self.m[range.clone()].fill(0.0);
        self.v[range].fill(0.0);
    }
}

/// Where the columns' decisions come from.
#[derive(Clone, Copy, Debug)]
pub enum Signals<'a> {
    /// Target action codes, `columns x (end - start)`, column-major: column c's decision at the close of
    /// bar `start + i` is `targets[c x (end - start) + i]`.
    Targets {
        /// The codes.
        targets: &'a [u8],
        /// Number of columns.
        columns: usize,
    },
    /// One SMA crossover per column, computed on the device.
    SmaCross(&'a [SmaCross]),
}

impl Signals<'_> {
    /// Number of columns.
    pub fn columns(&self) -> usize {
        match self {
            Self::Targets { columns, .. } => *columns,
            Self::SmaCross(s) => s.len(),
        }
    }
}

/// What to run and record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BacktestSpec {
    /// First bar (decisions from its close).
    pub start: usize,
    /// Last bar (open positions are closed at its close).
    pub end: usize,
    /// Bars per year for annualized figures (252 for daily bars, 252 x 6.5 for US hourly, 365 x 24 for FX
    /// hours, ...).
    pub bars_per_year: f64,
    /// Risk-free return per bar.
    pub risk_free: f64,
    /// Keep the trade ledger.
    pub ledger: bool,
    /// Keep the equity curves (`columns x (end - start + 1)` f64).
    pub equity: bool,
}

/// Results of all columns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BacktestResult {
    /// Per-column metrics.
    pub metrics: Vec<Metrics>,
    /// Every column's trades, column after column (empty unless the ledger was asked for).
    pub trades: Vec<Trade>,
    /// Column c's trades are `trades[offsets[c]..offsets[c + 1]]`.
    pub offsets: Vec<usize>,
    /// Equity curves, `columns x (end - start + 1)` (empty unless asked for).
    pub equity: Vec<f64>,
}

impl BacktestResult {
    /// Column `c`'s trades.
    pub fn column_trades(&self, c: usize) -> &[Trade] {
        if self.trades.is_empty() { &[] } else { &self.trades[self.offsets[c]..self.offsets[c + 1]] }
    }

    /// Columns ordered by `key` descending (NaN last), ties by column index: a fixed order.
    pub fn ranking(&self, key: impl Fn(&Metrics) -> f64) -> Vec<usize> {
        rank_columns(&self.metrics, key)
    }
}

/// Columns ordered by `key` of their metrics descending (NaN last), ties by column index.
fn rank_columns(metrics: &[Metrics], key: impl Fn(&Metrics) -> f64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..metrics.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (key(&metrics[a]), key(&metrics[b]));
        match (x.is_nan(), y.is_nan()) {
            (true, true) => a.cmp(&b),
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            (false, false) => y.total_cmp(&x).then(a.cmp(&b)),
        }
    });
    order
}

/// Results of a portfolio backtest, per column (portfolio).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortfolioResult {
    /// Per-column metrics (`trades` counts fills; the round-trip statistics are NaN).
    pub metrics: Vec<Metrics>,
    /// Every column's fills in execution order, column after column (empty unless the ledger was asked for).
    pub fills: Vec<AccountFill>,
    /// Column c's fills are `fills[offsets[c]..offsets[c + 1]]`.
    pub offsets: Vec<usize>,
    /// Equity curves, `columns x (end - start + 1)` (empty unless asked for).
    pub equity: Vec<f64>,
}

impl PortfolioResult {
    /// Column `c`'s fills.
    pub fn column_fills(&self, c: usize) -> &[AccountFill] {
        if self.fills.is_empty() { &[] } else { &self.fills[self.offsets[c]..self.offsets[c + 1]] }
    }

    /// Columns ordered by `key` descending (NaN last), ties by column index.
    pub fn ranking(&self, key: impl Fn(&Metrics) -> f64) -> Vec<usize> {
        rank_columns(&self.metrics, key)
    }
}

/// What a scan of portfolio envs produced ([`crate::PortfolioEnvBatch::scan`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortfolioScan {
    /// Each step's outcome per env, `steps x n_envs` (step-major).
    pub steps: Vec<PortfolioStep>,
    /// The action code each symbol held after each step (FLAT for a step that did not happen), `steps x
    /// n_envs x n_symbols`.
    pub sides: Vec<u8>,
}

/// Exclusive prefix sums of per-column trade counts (`columns + 1` entries).
pub(crate) fn offsets_of(counts: &[u32]) -> Vec<usize> {
    let mut offsets = Vec::with_capacity(counts.len() + 1);
    let mut total = 0;
    offsets.push(0);
    for &c in counts {
        total += c as usize;
        offsets.push(total);
    }
    offsets
}

/// What one minibatch step computed ([`crate::dqn::train_on_batch`], [`crate::ppo::train_on_batch`]).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchStep {
    /// Weighted loss of every sample (`K x B`).
    pub losses: Vec<f32>,
    /// The gradient of every parameter (`K x P`) that the Adam step used.
    pub gradients: Vec<f32>,
}

/// Each trial's mean loss: the sum of its `b` per-sample losses (`K x b`, trial-major; samples past its own
/// batch are 0) over its own batch size.
pub(crate) fn mean_losses(losses: &[f32], b: usize, batches: impl Iterator<Item = u32>) -> Vec<f32> {
    losses.chunks(b).zip(batches).map(|(l, batch)| l.iter().sum::<f32>() / batch as f32).collect()
}

/// The outputs of a vector env's step on the host: every env's observation (`n_envs x obs_dim`,
/// env-major), the ended episodes' last observations, rewards, flags and equity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorOutputs {
    /// Observations.
    pub obs: Vec<f32>,
    /// Last observations of the episodes that ended in the last step (rows where `final_mask`).
    pub final_obs: Vec<f32>,
    /// Rewards of the last step.
    pub rewards: Vec<f32>,
    /// Episodes that the circuit breaker or ruin ended in the last step.
    pub terminated: Vec<bool>,
    /// Episodes that reached their last bar in the last step.
    pub truncated: Vec<bool>,
    /// Episodes that ended in the last step (either way).
    pub final_mask: Vec<bool>,
    /// Each env's equity (after an autoreset: the new episode's capital).
    pub equity: Vec<f64>,
}

impl VectorOutputs {
    /// Zeroed outputs of `n` envs with observations of `d` floats.
    pub fn new(n: usize, d: usize) -> Self {
        Self {
            obs: vec![0.0; n * d],
            final_obs: vec![0.0; n * d],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            final_mask: vec![false; n],
            equity: vec![0.0; n],
        }
    }
}

/// Device addresses of a CUDA vector env's outputs (the layouts of [`VectorOutputs`]; flags are one byte
/// each), for zero-copy export such as DLPack. Valid while the env lives; overwritten by each step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceOutputs {
    /// The CUDA device's ordinal.
    pub ordinal: usize,
    /// The env's stream (`CUstream`): its steps run there and are complete when `step` returns.
    pub stream: u64,
    /// Observations (`f32`, `n_envs x obs_dim`).
    pub obs: u64,
    /// Final observations (`f32`, `n_envs x obs_dim`).
    pub final_obs: u64,
    /// Rewards (`f32`).
    pub rewards: u64,
    /// Terminated flags (`bool`).
    pub terminated: u64,
    /// Truncated flags (`bool`).
    pub truncated: u64,
    /// Final-observation mask (`bool`).
    pub final_mask: u64,
    /// Equity (`f64`).
    pub equity: u64,
}
