//! A vector env in Gymnasium's shape over a universe: K trials x E portfolio envs
//! ([`crate::PortfolioEnvBatch`], ENVIRONMENT.md "The portfolio env"), each one cash account over the
//! universe's N symbols stepped by an action per symbol, with episodes of a fixed number of times at seeded
//! start times and autoreset in the same step, as the single series' [`crate::vector::VectorEnv`]: an env
//! whose episode ended returns the first observation of its next episode, the last one of the ended episode
//! kept in [`PortfolioVectorEnv::final_observations`] with its equity, units and time. The Python package's
//! `tradesim.VectorEnv` over a universe is this type.
//!
//! An observation is `N x` [`OBS_PER_SYMBOL`] floats, one row per symbol: the symbol's universe features
//! at the decision time ([`N_UNIVERSE_FEATURES`], normalized over every time of the calendar and clipped as
//! the single series' are), then the account's view of it: the side held (-1, 0, 1), its weight in the
//! account (`units x close / equity`, 0 when the equity is not positive) and the account's
//! `equity / capital - 1` (the same in every row).

use gpu_kernels::account::env::held_side;
use gpu_kernels::rng::draw_below;

use crate::data::cross_section::{N_UNIVERSE_FEATURES, UniverseFeatures};
use crate::data::device::universe_market;
use crate::data::universe::Universe;
use crate::{Backend, Error, PortfolioEnvBatch, TERMINATED, TRUNCATED, TrialParams};

/// The random stream of the episodes' start times ("portfolio").
pub const PORTFOLIO_EPISODE_STREAM: u64 = 0x706f_7274_666f_6c69;

/// The account's floats that end each symbol's row of an observation.
pub const ACCOUNT_NAMES: [&str; 3] = ["position", "weight", "equity_return"];

/// Floats per symbol in an observation: the universe features, then [`ACCOUNT_NAMES`].
pub const OBS_PER_SYMBOL: usize = N_UNIVERSE_FEATURES + ACCOUNT_NAMES.len();

/// What the env's outputs hold after a step or reset, per env (`n_envs` rows; the per-symbol ones
/// `n_envs x n_symbols`, the observations `n_envs x n_symbols x` [`OBS_PER_SYMBOL`]).
#[derive(Debug, Default)]
struct Outputs {
    obs: Vec<f32>,
    final_obs: Vec<f32>,
    final_mask: Vec<bool>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    equity: Vec<f64>,
    final_equity: Vec<f64>,
    costs: Vec<f64>,
    units: Vec<f64>,
    final_units: Vec<f64>,
    time: Vec<u32>,
    final_time: Vec<u32>,
}

/// K trials x E portfolio envs over a universe, stepped together.
#[derive(Debug)]
pub struct PortfolioVectorEnv {
    batch: PortfolioEnvBatch,
    backend: &'static str,
    /// Normalized features, `times x symbols x` [`N_UNIVERSE_FEATURES`].
    features: Vec<f32>,
    /// Each symbol's close at each time (its last close where it has no bar, 0 before its first), `times x
    /// symbols`.
    closes: Vec<f64>,
    capital: Vec<f64>,
    envs_per_trial: usize,
    n_symbols: usize,
    n_times: usize,
    episode_len: usize,
    seed: u64,
    /// Episodes started so far per env (the counter of the next draw).
    episodes: Vec<u64>,
    out: Outputs,
}

impl PortfolioVectorEnv {
    /// Envs on `universe` (features computed and normalized over all its times): `params.len()` trials
    /// (each its own key and money parameters) of `envs_per_trial` envs, episodes of `episode_len` steps
    /// starting at times drawn from `seed`. The parameters are a portfolio env's (no barriers, raw rewards).
    pub fn new(
        backend: &Backend,
        universe: &Universe,
        params: &[TrialParams],
        envs_per_trial: usize,
        episode_len: usize,
        seed: u64,
    ) -> Result<Self, Error> {
        let n_times = universe.n_times();
        if episode_len == 0 || episode_len >= n_times {
            return Err(Error::config(
                "episode_len",
                format!("{episode_len} steps: between 1 and times - 1 = {}", n_times.saturating_sub(1)),
            ));
        }
        let raw = UniverseFeatures::compute(universe)?;
        let features = raw.normalized(&raw.fit(0..n_times), 0..n_times);
        let market = universe_market(universe)?;
        let closes = market.bars().iter().map(|b| b.close).collect();
        let batch = PortfolioEnvBatch::new(backend, &market, params, envs_per_trial)?;
        let (n_envs, n) = (batch.n_envs(), universe.n_symbols());
        let mut env = Self {
            batch,
            backend: backend.info().backend,
            features,
            closes,
            capital: params.iter().map(|p| p.initial_capital).collect(),
            envs_per_trial,
            n_symbols: n,
            n_times,
            episode_len,
            seed,
            episodes: vec![0; n_envs],
            out: Outputs {
                obs: vec![0.0; n_envs * n * OBS_PER_SYMBOL],
                final_obs: vec![0.0; n_envs * n * OBS_PER_SYMBOL],
                final_mask: vec![false; n_envs],
                rewards: vec![0.0; n_envs],
                terminated: vec![false; n_envs],
                truncated: vec![false; n_envs],
                equity: vec![0.0; n_envs],
                final_equity: vec![0.0; n_envs],
                costs: vec![0.0; n_envs],
                units: vec![0.0; n_envs * n],
                final_units: vec![0.0; n_envs * n],
                time: vec![0; n_envs],
                final_time: vec![0; n_envs],
            },
        };
        env.reset(None)?;
        Ok(env)
    }

    /// Envs (K x E).
    pub fn n_envs(&self) -> usize {
        self.episodes.len()
    }

    /// Symbols (N).
    pub fn n_symbols(&self) -> usize {
        self.n_symbols
    }

    /// Floats per symbol of an observation ([`OBS_PER_SYMBOL`]).
    pub fn obs_per_symbol(&self) -> usize {
        OBS_PER_SYMBOL
    }

    /// The backend (`cpu` or `cuda`).
    pub fn backend_name(&self) -> &'static str {
        self.backend
    }

    /// Env `env`'s `episode`-th segment of times: a start drawn uniformly from the times that leave
    /// `episode_len` steps after it.
    fn segment(&self, env: usize, episode: u64) -> (usize, usize) {
        let starts = (self.n_times - self.episode_len) as u32;
        let start = draw_below(self.seed, PORTFOLIO_EPISODE_STREAM ^ env as u64, episode, starts) as usize;
        (start, start + self.episode_len)
    }

    /// Env `env`'s next segment (its episode counter moves on).
    fn next_segment(&mut self, env: usize) -> (usize, usize) {
        let segment = self.segment(env, self.episodes[env]);
        self.episodes[env] += 1;
        segment
    }

    /// Writes env `env`'s observation at time `t` with `units` held and `equity` into `obs`.
    fn observe(&self, obs: &mut [f32], env: usize, t: usize, units: &[f64], equity: f64) {
        let (n, w) = (self.n_symbols, N_UNIVERSE_FEATURES);
        let capital = self.capital[env / self.envs_per_trial];
        let equity_return = (equity / capital - 1.0) as f32;
        for (s, row) in obs.chunks_exact_mut(OBS_PER_SYMBOL).enumerate() {
            row[..w].copy_from_slice(&self.features[(t * n + s) * w..(t * n + s + 1) * w]);
            let weight = if equity > 0.0 { units[s] * self.closes[t * n + s] / equity } else { 0.0 };
            row[w] = held_side(units[s]) as f32;
            row[w + 1] = weight as f32;
            row[w + 2] = equity_return;
        }
    }

    /// Env `env` starts its segment: flat, its trial's capital, the start time's observation.
    fn write_start(&mut self, env: usize, start: usize) {
        let (n, width) = (self.n_symbols, self.n_symbols * OBS_PER_SYMBOL);
        let capital = self.capital[env / self.envs_per_trial];
        let mut obs = std::mem::take(&mut self.out.obs);
        self.observe(&mut obs[env * width..(env + 1) * width], env, start, &vec![0.0; n], capital);
        self.out.obs = obs;
        self.out.units[env * n..(env + 1) * n].fill(0.0);
        self.out.equity[env] = capital;
        self.out.time[env] = start as u32;
    }

    /// New episodes for every env (with `seed`, the draws start over from it).
    pub fn reset(&mut self, seed: Option<u64>) -> Result<(), Error> {
        if let Some(seed) = seed {
            self.seed = seed;
            self.episodes.fill(0);
        }
        let segments: Vec<(usize, usize)> = (0..self.n_envs()).map(|env| self.next_segment(env)).collect();
        self.batch.reset(&segments)?;
        for (env, &(start, _)) in segments.iter().enumerate() {
            self.write_start(env, start);
        }
        let o = &mut self.out;
        o.rewards.fill(0.0);
        o.costs.fill(0.0);
        o.terminated.fill(false);
        o.truncated.fill(false);
        o.final_mask.fill(false);
        Ok(())
    }

    /// One step of every env with `actions` (`n_envs x n_symbols` codes, env-major: 0 flat, 1 long, 2 short
    /// per symbol); envs whose episode ends start their next one. An invalid code fails the call before any
    /// env moves.
    pub fn step(&mut self, actions: &[u8]) -> Result<(), Error> {
        let (n, width) = (self.n_symbols, self.n_symbols * OBS_PER_SYMBOL);
        let scan = self.batch.scan(actions, 1).map_err(|e| Error::config("actions", e.to_string()))?;
        let accounts = self.batch.accounts()?;
        let units = self.batch.units()?;
        let mut obs = std::mem::take(&mut self.out.obs);
        let mut restarts = Vec::new();
        for (env, (step, account)) in scan.steps.iter().zip(&accounts).enumerate() {
            let held = &units[env * n..(env + 1) * n];
            let t = account.bar as usize;
            self.observe(&mut obs[env * width..(env + 1) * width], env, t, held, step.equity);
            let o = &mut self.out;
            o.rewards[env] = step.reward as f32;
            o.costs[env] = step.costs;
            o.terminated[env] = step.done == TERMINATED;
            o.truncated[env] = step.done == TRUNCATED;
            o.final_mask[env] = step.done != 0;
            o.equity[env] = step.equity;
            o.units[env * n..(env + 1) * n].copy_from_slice(held);
            o.time[env] = t as u32;
            if step.done != 0 {
                o.final_obs[env * width..(env + 1) * width].copy_from_slice(&obs[env * width..(env + 1) * width]);
                o.final_equity[env] = step.equity;
                o.final_units[env * n..(env + 1) * n].copy_from_slice(held);
                o.final_time[env] = t as u32;
                restarts.push(env);
            }
        }
        self.out.obs = obs;
        let restarts: Vec<(usize, (usize, usize))> =
            restarts.into_iter().map(|env| (env, self.next_segment(env))).collect();
        self.batch.restart(&restarts)?;
        for &(env, (start, _)) in &restarts {
            self.write_start(env, start);
        }
        Ok(())
    }

    /// Observations, `n_envs x n_symbols x` [`OBS_PER_SYMBOL`].
    pub fn observations(&self) -> &[f32] {
        &self.out.obs
    }

    /// The ended episodes' last observations (where [`Self::final_mask`]).
    pub fn final_observations(&self) -> &[f32] {
        &self.out.final_obs
    }

    /// Which envs' episodes ended in the last step.
    pub fn final_mask(&self) -> &[bool] {
        &self.out.final_mask
    }

    /// The last step's rewards (the account's raw reward; 0 after a reset).
    pub fn rewards(&self) -> &[f32] {
        &self.out.rewards
    }

    /// Episodes ended by the breaker or bankruptcy in the last step.
    pub fn terminated(&self) -> &[bool] {
        &self.out.terminated
    }

    /// Episodes that reached their last time in the last step.
    pub fn truncated(&self) -> &[bool] {
        &self.out.truncated
    }

    /// Each env's equity now (an ended env's: its next episode's capital).
    pub fn equity(&self) -> &[f64] {
        &self.out.equity
    }

    /// The equity each ended episode ended with (where [`Self::final_mask`]).
    pub fn final_equity(&self) -> &[f64] {
        &self.out.final_equity
    }

    /// The spread and commission each env paid in the last step.
    pub fn costs(&self) -> &[f64] {
        &self.out.costs
    }

    /// Each env's units of each symbol now, `n_envs x n_symbols` (positive long, negative short).
    pub fn units(&self) -> &[f64] {
        &self.out.units
    }

    /// The units each ended episode ended with (where [`Self::final_mask`]).
    pub fn final_units(&self) -> &[f64] {
        &self.out.final_units
    }

    /// Each env's time now: the index on the universe's calendar of its observation's decision time.
    pub fn time(&self) -> &[u32] {
        &self.out.time
    }

    /// The time of each ended episode's last observation (where [`Self::final_mask`]).
    pub fn final_time(&self) -> &[u32] {
        &self.out.final_time
    }
}
