//! A vectorized environment in Gymnasium's shape over K trials x E envs of the fused environment: `reset`,
//! `step(actions)` returning observations, rewards, terminations and truncations for every env, episodes of
//! a fixed number of bars at seeded start bars, and autoreset in the same step (Gymnasium's `SAME_STEP`
//! mode: an env whose episode ended returns the first observation of its next episode, the last one of the
//! ended episode kept in [`VectorEnv::final_observations`]). The Python package's `tradesim.VectorEnv` is
//! this type; the buffers are kept and overwritten in place each step (Python sees them without copies).

use gpu_kernels::rng::draw_below;

use crate::data::Series;
use crate::data::device::Prepared;
use crate::{Backend, EnvBatch, EnvConfig, Error, SimLayout, TERMINATED, TRUNCATED, TrialParams};

/// The random stream of the episodes' start bars.
const EPISODE_STREAM: u64 = 0x7665_6374_6f72; // "vector"

/// K trials x E envs stepped together.
#[derive(Debug)]
pub struct VectorEnv {
    env: EnvBatch,
    backend: &'static str,
    episode_len: u32,
    n_bars: usize,
    seed: u64,
    /// Episodes started so far per env (the counter of its start-bar draws).
    episodes: Vec<u64>,
    obs: Vec<f32>,
    final_obs: Vec<f32>,
    final_mask: Vec<bool>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    equity: Vec<f64>,
}

impl VectorEnv {
    /// Envs on `series` (features computed over all of it): `params.len()` trials (each its own key) of
    /// `envs_per_trial` envs, episodes of `episode_len` bars starting at bars drawn from `seed`.
    pub fn new(
        backend: &Backend,
        series: &Series,
        params: &[TrialParams],
        envs_per_trial: usize,
        episode_len: usize,
        seed: u64,
    ) -> Result<Self, Error> {
        let n = series.bars.len();
        if episode_len == 0 || episode_len + 1 >= n {
            return Err(Error::config(
                "episode_len",
                format!("{episode_len} bars: between 1 and bars - 2 = {}", n.saturating_sub(2)),
            ));
        }
        let market = Prepared::new(series, 0..n)?.market_data(0..n)?;
        let layout = SimLayout::new(params.len(), envs_per_trial)?;
        // A ring of one step per env: each step's transitions (rewards, done flags) are read back from it.
        let cfg = EnvConfig { segment_len: episode_len as u32, ring_capacity: envs_per_trial, seed, trial_groups: 1 };
        let env = EnvBatch::new(backend, &market, params, layout, cfg)?;
        let n_envs = layout.n_envs();
        let d = env.n_features() + 3;
        let mut v = Self {
            env,
            backend: backend.info().backend,
            episode_len: episode_len as u32,
            n_bars: n,
            seed,
            episodes: vec![0; n_envs],
            obs: vec![0.0; n_envs * d],
            final_obs: vec![0.0; n_envs * d],
            final_mask: vec![false; n_envs],
            rewards: vec![0.0; n_envs],
            terminated: vec![false; n_envs],
            truncated: vec![false; n_envs],
            equity: vec![0.0; n_envs],
        };
        v.reset(None)?;
        Ok(v)
    }

    /// Envs (K x E).
    pub fn n_envs(&self) -> usize {
        self.episodes.len()
    }

    /// Floats per observation: the bar's features, then position, open-position return, equity change.
    pub fn obs_dim(&self) -> usize {
        self.env.n_features() + 3
    }

    /// The backend (`cpu` or `cuda`).
    pub fn backend_name(&self) -> &'static str {
        self.backend
    }

    /// The segment of env `i`'s next episode.
    fn next_segment(&mut self, i: usize) -> (u32, u32) {
        let last_start = (self.n_bars - 1) as u32 - self.episode_len;
        let start = draw_below(self.seed, EPISODE_STREAM ^ i as u64, self.episodes[i], last_start + 1);
        self.episodes[i] += 1;
        (start, start + self.episode_len)
    }

    /// New episodes for every env (with `seed`, the draws start over from it).
    pub fn reset(&mut self, seed: Option<u64>) -> Result<(), Error> {
        if let Some(s) = seed {
            self.seed = s;
            self.episodes.fill(0);
        }
        let segments: Vec<(u32, u32)> = (0..self.n_envs()).map(|i| self.next_segment(i)).collect();
        self.env.reset_segments(&segments)?;
        self.rewards.fill(0.0);
        self.terminated.fill(false);
        self.truncated.fill(false);
        self.final_mask.fill(false);
        self.observe()?;
        self.read_equity()?;
        Ok(())
    }

    /// Every env's observation, into the env's buffer.
    fn observe(&mut self) -> Result<(), Error> {
        let obs = self.env.observations()?;
        self.obs.copy_from_slice(&obs);
        Ok(())
    }

    /// Every env's equity, into the env's buffer.
    fn read_equity(&mut self) -> Result<(), Error> {
        for (e, s) in self.equity.iter_mut().zip(self.env.states()?) {
            *e = s.equity;
        }
        Ok(())
    }

    /// One step of every env with `actions[i]` (0 flat, 1 long, 2 short); envs whose episode ends are reset.
    pub fn step(&mut self, actions: &[u8]) -> Result<(), Error> {
        if let Some((i, a)) = actions.iter().enumerate().find(|(_, a)| **a > 2) {
            return Err(Error::config("actions", format!("action {a} of env {i}: 0 (flat), 1 (long) or 2 (short)")));
        }
        self.env.step(actions)?;
        let ring = self.env.transitions()?;
        let ept = self.env.layout().envs_per_trial();
        let head = self.env.transitions_written().wrapping_sub(ept as u64) % ept as u64;
        let d = self.obs_dim();
        // The equity is read once, after any resets (a reset env shows its new episode's capital).
        self.observe()?;
        let mut resets = Vec::new();
        for i in 0..self.n_envs() {
            let (trial, e) = (i / ept, i % ept);
            let t = &ring[trial * ept + ((head + e as u64) % ept as u64) as usize];
            self.rewards[i] = if t.valid != 0 { t.reward } else { 0.0 };
            self.terminated[i] = t.done == TERMINATED;
            self.truncated[i] = t.done == TRUNCATED;
            self.final_mask[i] = t.done != 0;
            if t.done != 0 {
                self.final_obs[i * d..(i + 1) * d].copy_from_slice(&self.obs[i * d..(i + 1) * d]);
                let (start, end) = self.next_segment(i);
                resets.push((i, start, end));
            }
        }
        if !resets.is_empty() {
            self.env.reset_envs(&resets)?;
            self.observe()?;
        }
        self.read_equity()?;
        Ok(())
    }

    /// Observations (`n_envs x obs_dim`, env-major).
    pub fn observations(&self) -> &[f32] {
        &self.obs
    }

    /// Last observations of the episodes that ended in the last step (rows where [`Self::final_mask`]).
    pub fn final_observations(&self) -> &[f32] {
        &self.final_obs
    }

    /// Which envs' episodes ended in the last step.
    pub fn final_mask(&self) -> &[bool] {
        &self.final_mask
    }

    /// Rewards of the last step.
    pub fn rewards(&self) -> &[f32] {
        &self.rewards
    }

    /// Envs whose episode terminated (the circuit breaker, ruin) in the last step.
    pub fn terminated(&self) -> &[bool] {
        &self.terminated
    }

    /// Envs whose episode reached its last bar in the last step.
    pub fn truncated(&self) -> &[bool] {
        &self.truncated
    }

    /// Each env's equity now (after any reset: the new episode's capital).
    pub fn equity(&self) -> &[f64] {
        &self.equity
    }
}
