//! Learners on a universe of N symbols (ENVIRONMENT.md, "Learners on a universe"): a shared per-symbol
//! network (one 3-way head applied to every (env, symbol) row) acting in a portfolio env, one account per
//! env. The rows are the single series' batch grown N-fold: the learners' acting, replay, sampling and
//! training run unchanged on `envs x N` rows, and this file only makes the rows' observations and
//! transitions ([`gpu_kernels::account::rows`]) from the portfolio env's steps. On the CPU the rows'
//! bodies run per row and per env (rayon); on CUDA their kernels run on the rows' stream between the
//! learner's acting launches, so a step moves nothing between host and device (a segment's reset uploads
//! the accounts).

use gpu_kernels::dqn::DqnParams;
use gpu_kernels::equity::{EquityStats, Metrics};
use gpu_kernels::ppo::PpoParams;
use gpu_kernels::rng::{draw_below, keyed};
use gpu_kernels::{Bar, TrialParams};

use crate::PpoAgent;
use crate::{
    Backend, DqnAgent, EnvBatch, EnvConfig, HostError, MarketData, PortfolioEnvBatch, SimLayout, UniverseMarket,
};

/// A universe's prices and per-symbol features: `features` is time-major, `n_times x n_symbols x
/// n_features` (a symbol's features at a time: its own and the cross-sectional ones, made from data up to
/// that time's close).
#[derive(Debug, Clone)]
pub struct UniverseData {
    market: UniverseMarket,
    /// The features symbol-major, `n_symbols x n_times x n_features` (the rows' replay market's, which the
    /// rows' observations read too).
    row_features: Vec<f32>,
    n_features: usize,
}

impl UniverseData {
    /// The universe `market` with its features (finite, `n_times x n_symbols x n_features`).
    pub fn new(market: UniverseMarket, features: Vec<f32>, n_features: usize) -> Result<Self, HostError> {
        let cells = market.n_times() * market.n_symbols();
        if n_features == 0 || features.len() != cells * n_features {
            return Err(HostError::Shape {
                what: format!("universe features ({cells} cells x {n_features} features, at least 1)"),
                expected: cells * n_features.max(1),
                got: features.len(),
            });
        }
        if let Some(i) = features.iter().position(|x| !x.is_finite()) {
            return Err(HostError::InvalidFeature { bar: i / n_features, feature: i % n_features });
        }
        let (n, times, f) = (market.n_symbols(), market.n_times(), n_features);
        let mut row_features = Vec::with_capacity(features.len());
        for s in 0..n {
            for t in 0..times {
                row_features.extend_from_slice(&features[(t * n + s) * f..(t * n + s + 1) * f]);
            }
        }
        Ok(Self { market, row_features, n_features })
    }

    /// The prices.
    pub fn market(&self) -> &UniverseMarket {
        &self.market
    }

    /// Features per symbol and time.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// The rows' market for the replay: the features symbol-major (`symbol x n_times + t` is a row's bar),
    /// so that bars t and t + 1 of one symbol are neighbours; the bars are placeholders (the rows' batch
    /// never steps its own envs).
    fn row_market(&self) -> Result<MarketData, HostError> {
        let bar = Bar { open: 1.0, high: 1.0, low: 1.0, close: 1.0, sigma: 0.0 };
        let cells = self.market.n_symbols() * self.market.n_times();
        MarketData::from_bars(vec![bar; cells], self.row_features.clone(), self.n_features)
    }
}

/// Every row's observation of a CPU portfolio env (`envs x N` rows of F + 3 floats): its symbol's features
/// at its account's bar, then the account floats.
fn observe_cpu(data: &UniverseData, env: &mut PortfolioEnvBatch) -> Result<Vec<f32>, HostError> {
    let args = env.args();
    let cpu = env.cpu_mut().ok_or(HostError::BackendMismatch)?;
    Ok(cpu.observe_rows(&args, &data.row_features, data.n_features))
}

/// How a universe learner trains: `envs_per_trial` accounts per trial on segments of `segment_len` steps
/// drawn inside the times `[train_start, train_end)` (every env starts over each `segment_len` steps),
/// a replay ring of `ring_capacity` rows per trial (at least `envs_per_trial x N`), `grad_steps` gradient
/// steps (DQN) every `train_every` env steps after `warmup_steps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniverseConfig {
    /// Accounts per trial (E).
    pub envs_per_trial: usize,
    /// Steps per segment (L).
    pub segment_len: usize,
    /// First time of the training part.
    pub train_start: usize,
    /// End (exclusive) of the training part.
    pub train_end: usize,
    /// Replay rows per trial.
    pub ring_capacity: usize,
    /// Env steps before the first gradient step.
    pub warmup_steps: u64,
    /// Env steps per gradient round.
    pub train_every: u64,
    /// DQN: gradient steps per round (as a single series' `grad_steps`).
    pub grad_steps: u64,
    /// Seed of the segments, the sampler and the networks.
    pub seed: u64,
}

/// RNG stream of the segment starts.
const SEGMENT_STREAM: u64 = 0x5e6_0000;

/// The portfolio envs of a trial batch and their rows: what both universe learners step.
#[derive(Debug)]
struct UniverseEnvs {
    data: UniverseData,
    cfg: UniverseConfig,
    params: Vec<TrialParams>,
    env: PortfolioEnvBatch,
    rows: EnvBatch,
    /// Env steps taken.
    steps: u64,
}

impl UniverseEnvs {
    fn new(
        backend: &Backend,
        data: &UniverseData,
        params: &[TrialParams],
        cfg: UniverseConfig,
    ) -> Result<Self, HostError> {
        let (n, times) = (data.market.n_symbols(), data.market.n_times());
        if cfg.segment_len == 0 || cfg.train_start + 1 >= cfg.train_end || cfg.train_end > times {
            return Err(HostError::Config(format!(
                "training times [{}, {}) must hold at least 2 of the {times}, segments at least 1 step",
                cfg.train_start, cfg.train_end
            )));
        }
        if cfg.train_every == 0 || cfg.grad_steps == 0 {
            return Err(HostError::Config("train_every and grad_steps must be at least 1".to_owned()));
        }
        let rows_per_trial = cfg
            .envs_per_trial
            .checked_mul(n)
            .ok_or(HostError::InvalidLayout { trials: params.len(), envs_per_trial: cfg.envs_per_trial })?;
        // The portfolio env returns raw rewards: normalization, where asked, is the rows' replay's.
        let raw: Vec<TrialParams> = params.iter().map(|p| TrialParams { normalize_reward: 0, ..*p }).collect();
        let env = PortfolioEnvBatch::new(backend, &data.market, &raw, cfg.envs_per_trial)?;
        let layout = SimLayout::new(params.len(), rows_per_trial)?;
        // The rows' own segments are never walked; PPO checks its rollout against their length.
        let segment_len = cfg.segment_len.min(n * times - 1) as u32;
        let env_cfg = EnvConfig { segment_len, ring_capacity: cfg.ring_capacity, seed: cfg.seed, trial_groups: 1 };
        let rows = EnvBatch::new(backend, &data.row_market()?, params, layout, env_cfg)?;
        Ok(Self { data: data.clone(), cfg, params: params.to_vec(), env, rows, steps: 0 })
    }

    /// Every env starts over on its segment of episode `episode`: a start drawn uniformly (keyed by its
    /// trial's key, its index and the episode) so that the segment fits in the training part.
    fn reset(&mut self) -> Result<(), HostError> {
        let (cfg, ept) = (self.cfg, self.cfg.envs_per_trial);
        let episode = self.steps / cfg.segment_len as u64;
        let span = cfg.train_end - 1 - cfg.train_start;
        let len = cfg.segment_len.min(span);
        let segments: Vec<(usize, usize)> = (0..self.env.n_envs())
            .map(|env| {
                let stream = keyed(SEGMENT_STREAM, self.params[env / ept].key);
                let counter = episode * ept as u64 + (env % ept) as u64;
                let start = cfg.train_start + draw_below(cfg.seed, stream, counter, (span - len + 1) as u32) as usize;
                (start, start + len)
            })
            .collect();
        self.env.reset(&segments)
    }

    /// [`Self::reset`] when the env steps taken are a whole number of segments.
    fn reset_at_segment_start(&mut self) -> Result<(), HostError> {
        if self.steps.is_multiple_of(self.cfg.segment_len as u64) { self.reset() } else { Ok(()) }
    }

    /// The rows' observations now, `learner`'s codes for them and, with `step`, one env step on those codes
    /// with the rows' transitions written to the replay (or rollout): on CUDA without a transfer
    /// ([`crate::cuda::universe_act`]), on the CPU by the same kernel bodies.
    fn act(&mut self, mut learner: Learner<'_>, step: bool) -> Result<(), HostError> {
        let rows_per_trial = self.cfg.envs_per_trial * self.data.market.n_symbols();
        #[cfg(feature = "cuda")]
        {
            let (args, ring_args, f) = (self.env.args(), self.rows.args(1), self.data.n_features);
            if let (Some(env), crate::env_batch::Inner::Cuda(rows)) = (self.env.cuda_mut(), self.rows.inner_mut()) {
                crate::cuda::universe_act(env, rows, (&args, &ring_args, f), step, |stream, observe, actions| {
                    learner.act_device(rows_per_trial, stream, observe, actions)
                })?;
                if step {
                    self.rows.stepped_by_policy()?;
                    self.steps += 1;
                }
                return Ok(());
            }
        }
        let obs = observe_cpu(&self.data, &mut self.env)?;
        let actions = learner.act_host(&obs, rows_per_trial)?;
        if step {
            let args = self.env.args();
            let cpu = self.env.cpu_mut().ok_or(HostError::BackendMismatch)?;
            let transitions = cpu.step_rows(&args, &actions);
            self.rows.write_step(&transitions)?;
            self.steps += 1;
        }
        Ok(())
    }
}

/// A learner choosing the rows' codes, with the arguments of its acting call: DQN at env step `step`
/// (greedy or not), PPO at rollout step `rollout_step`.
enum Learner<'a> {
    Dqn(&'a mut DqnAgent, u64, bool),
    Ppo(&'a mut PpoAgent, u32, bool),
}

impl Learner<'_> {
    /// The codes of the rows whose observations are `obs` (on the host).
    fn act_host(&mut self, obs: &[f32], rows_per_trial: usize) -> Result<Vec<u8>, HostError> {
        match self {
            Self::Dqn(agent, step, greedy) => agent.act_rows(obs, rows_per_trial, *step, *greedy),
            Self::Ppo(agent, rollout_step, greedy) => agent.act_rows(obs, rows_per_trial, *rollout_step, *greedy),
        }
    }

    /// The codes of the rows into `actions` on `stream`, their observations written by `observe`.
    #[cfg(feature = "cuda")]
    fn act_device(
        &mut self,
        rows_per_trial: usize,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        observe: &mut dyn FnMut(&mut cudarc::driver::CudaSlice<f32>) -> Result<(), HostError>,
        actions: &mut cudarc::driver::CudaSlice<u8>,
    ) -> Result<(), HostError> {
        match self {
            Self::Dqn(agent, step, greedy) => {
                agent.act_rows_device(rows_per_trial, (*step, *greedy), stream, observe, actions)
            }
            Self::Ppo(agent, rollout_step, greedy) => {
                agent.act_rows_device(rows_per_trial, (*rollout_step, *greedy), stream, observe, actions)
            }
        }
    }
}

/// DQN on a universe: a shared per-symbol Q-network ([`DqnAgent`] on the rows), epsilon-greedy per row.
#[derive(Debug)]
pub struct UniverseDqn {
    envs: UniverseEnvs,
    agent: DqnAgent,
}

impl UniverseDqn {
    /// The networks of `params.len()` trials (`dqn[k]` trial k's, within `hidden` and `batch`) on `data`
    /// (kept: the learner trains and walks on it).
    pub fn new(
        backend: &Backend,
        data: &UniverseData,
        params: &[TrialParams],
        dqn: &[DqnParams],
        (hidden, batch): (usize, usize),
        cfg: UniverseConfig,
    ) -> Result<Self, HostError> {
        let envs = UniverseEnvs::new(backend, data, params, cfg)?;
        let agent = DqnAgent::new(backend, &envs.rows, dqn, hidden, batch, cfg.seed)?;
        Ok(Self { envs, agent })
    }

    /// `steps` env steps of every env (each row's epsilon-greedy action, one portfolio step per env, the
    /// row transitions into the replay), with `grad_steps` gradient steps every `train_every` steps after the
    /// warmup.
    pub fn train(&mut self, steps: u64) -> Result<(), HostError> {
        let cfg = self.envs.cfg;
        for _ in 0..steps {
            self.envs.reset_at_segment_start()?;
            let step = self.envs.steps;
            self.envs.act(Learner::Dqn(&mut self.agent, step, false), true)?;
            if self.envs.steps >= cfg.warmup_steps && self.envs.steps.is_multiple_of(cfg.train_every) {
                for _ in 0..cfg.grad_steps {
                    self.agent.train_step(&mut self.envs.rows)?;
                }
            }
        }
        Ok(())
    }

    /// The agent (its networks, losses, gradient steps).
    pub fn agent(&self) -> &DqnAgent {
        &self.agent
    }

    /// Each trial's greedy walk over times `[start, end]` ([`walk`]).
    pub fn greedy_walk(&mut self, start: usize, end: usize) -> Result<Vec<UniverseWalk>, HostError> {
        let (agent, data) = (&mut self.agent, &self.envs.data);
        walk(data, &self.envs.params, start, end, |obs| agent.act_rows(obs, data.market.n_symbols(), 0, true))
    }
}

/// PPO on a universe: a shared per-symbol actor-critic ([`PpoAgent`] on the rows), each row's action
/// sampled from its own head; a rollout is `ring_capacity / (envs_per_trial x N)` steps of every env.
#[derive(Debug)]
pub struct UniversePpo {
    envs: UniverseEnvs,
    agent: PpoAgent,
}

impl UniversePpo {
    /// The networks of `params.len()` trials (`ppo[k]` trial k's, within `hidden` and `batch`) on `data`
    /// (kept: the learner trains and walks on it).
    pub fn new(
        backend: &Backend,
        data: &UniverseData,
        params: &[TrialParams],
        ppo: &[PpoParams],
        (hidden, batch): (usize, usize),
        cfg: UniverseConfig,
    ) -> Result<Self, HostError> {
        let envs = UniverseEnvs::new(backend, data, params, cfg)?;
        let agent = PpoAgent::new(backend, &envs.rows, ppo, hidden, batch, cfg.seed)?;
        Ok(Self { envs, agent })
    }

    /// `rollouts` rollouts, each followed by its updates: every rollout step samples each row's action, takes
    /// one portfolio step per env and writes the row transitions; then the bootstrap values, GAE per row and
    /// the minibatch updates, all the single series' ([`PpoAgent`]).
    pub fn train(&mut self, rollouts: u64) -> Result<(), HostError> {
        let (cfg, n) = (self.envs.cfg, self.envs.data.market.n_symbols());
        let steps = cfg.ring_capacity / (cfg.envs_per_trial * n);
        for _ in 0..rollouts {
            for t in 0..steps {
                self.envs.reset_at_segment_start()?;
                self.envs.act(Learner::Ppo(&mut self.agent, t as u32, false), true)?;
            }
            // The bootstrap values from the rows' observations after the last step, then GAE.
            self.agent.check_row_rollout(&self.envs.rows)?;
            self.envs.act(Learner::Ppo(&mut self.agent, steps as u32, false), false)?;
            self.agent.finish_row_rollout(&mut self.envs.rows)?;
            self.agent.update(&mut self.envs.rows)?;
        }
        Ok(())
    }

    /// The agent (its networks, losses, updates).
    pub fn agent(&self) -> &PpoAgent {
        &self.agent
    }

    /// Each trial's greedy walk (the argmax of each row's logits) over times `[start, end]` ([`walk`]).
    pub fn greedy_walk(&mut self, start: usize, end: usize) -> Result<Vec<UniverseWalk>, HostError> {
        let (agent, data) = (&mut self.agent, &self.envs.data);
        walk(data, &self.envs.params, start, end, |obs| agent.act_rows(obs, data.market.n_symbols(), u32::MAX, true))
    }
}

/// One trial's walk over a universe: the codes it chose per step and symbol (`steps x N`), the sides the
/// account held after each step (`steps x N`), the account's equity at each close (the capital first,
/// `steps + 1` values) and the spread and commission it paid, by the portfolio env's rule.
#[derive(Clone, Debug, PartialEq)]
pub struct UniverseWalk {
    /// The chosen codes, step-major.
    pub actions: Vec<u8>,
    /// The sides held after each step (0 flat, 1 long, 2 short), step-major.
    pub sides: Vec<u8>,
    /// The equity curve.
    pub equity: Vec<f64>,
    /// Spread plus commission paid.
    pub costs: f64,
    /// The account's [`gpu_kernels::types::EnvStatus`] code after each step: the breaker's pending close
    /// (it ignores the actions), bankruptcy and the halt (the walk's later steps change nothing).
    pub status: Vec<u8>,
}

impl UniverseWalk {
    /// The backtests' statistics of the equity curve ([`gpu_kernels::equity::EquityStats`]: returns,
    /// volatility, Sharpe, Sortino, drawdowns, exposure as the closes that held a side), with `risk_free`
    /// per step and `bars_per_year` steps a year. The walk ends as the env does, without the portfolio
    /// backtest's end-of-data close; its fills are not counted (`trades` and the trade statistics are NaN).
    pub fn metrics(&self, bars_per_year: f64, risk_free: f64) -> Metrics {
        let steps = self.equity.len().saturating_sub(1);
        let n = self.sides.len().checked_div(steps).unwrap_or(0);
        let (first, last) = (self.equity.first(), self.equity.last());
        let mut stats = EquityStats::new(first.copied().unwrap_or(f64::NAN), 0, risk_free);
        for t in 0..steps {
            let held = self.sides[t * n..(t + 1) * n].iter().any(|&s| s != 0);
            stats.push(t + 1, self.equity[t], self.equity[t + 1], held);
        }
        Metrics {
            trades: f64::NAN,
            total_costs: self.costs,
            ..stats.finish(steps, last.copied().unwrap_or(f64::NAN), bars_per_year)
        }
    }
}

/// Every trial's single account walked over `[start, end]` on the CPU with the codes `policy` chooses from
/// its rows' observations (`trials x N` rows); the trials' rewards weights do not matter here.
pub fn walk(
    data: &UniverseData,
    params: &[TrialParams],
    start: usize,
    end: usize,
    mut policy: impl FnMut(&[f32]) -> Result<Vec<u8>, HostError>,
) -> Result<Vec<UniverseWalk>, HostError> {
    let n = data.market.n_symbols();
    let raw: Vec<TrialParams> = params.iter().map(|p| TrialParams { normalize_reward: 0, ..*p }).collect();
    let mut env = PortfolioEnvBatch::new(&Backend::Cpu, &data.market, &raw, 1)?;
    env.reset(&vec![(start, end); params.len()])?;
    let mut out: Vec<UniverseWalk> = raw
        .iter()
        .map(|p| UniverseWalk {
            actions: Vec::new(),
            sides: Vec::new(),
            equity: vec![p.initial_capital],
            costs: 0.0,
            status: Vec::new(),
        })
        .collect();
    for _ in start..end {
        let obs = observe_cpu(data, &mut env)?;
        let actions = policy(&obs)?;
        let scan = env.scan(&actions, 1)?;
        let accounts = env.accounts()?;
        for (k, w) in out.iter_mut().enumerate() {
            w.status.push(accounts[k].status as u8);
            w.actions.extend_from_slice(&actions[k * n..(k + 1) * n]);
            w.sides.extend_from_slice(&scan.sides[k * n..(k + 1) * n]);
            w.equity.push(scan.steps[k].equity);
            w.costs += scan.steps[k].costs;
        }
    }
    Ok(out)
}
