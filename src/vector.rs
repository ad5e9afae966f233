//! A vector env in Gymnasium's shape over K trials x E envs of the fused environment: `reset`,
//! `step(actions)` returning observations, rewards, terminations and truncations for every env, episodes of
//! a fixed number of bars at seeded start bars, and autoreset in the same step (Gymnasium's `SAME_STEP`
//! mode: an env whose episode ended returns the first observation of its next episode, the last one of the
//! ended episode kept in [`VectorEnv::final_observations`] and its equity in [`VectorEnv::final_equity`]). The Python package's `tradesim.VectorEnv` is
//! this type.
//!
//! Each step is one pass of [`gpu_kernels::vector::step_env`] over the envs, on the CPU or as a kernel on
//! the GPU (the same bits). On the CPU the outputs are host buffers, overwritten in place each step (Python
//! sees them without copies). On CUDA they live in device memory: copied to the host after each step by
//! default, or left there ([`VectorEnv::set_host_copies`]) and read in place through
//! [`VectorEnv::device_outputs`] (the Python package exports them with DLPack), with actions read from
//! device memory too ([`VectorEnv::step_device`]).

use crate::data::Series;
use crate::data::device::Prepared;
use crate::data::time::infer_bars_per_year;
use crate::train::SplitData;
use crate::{
    Backend, DEFAULT_SIGMA_SPAN, DeviceOutputs, EnvBatch, EnvConfig, Error, MarketData, Metrics, SimLayout,
    TrialParams, VectorBatch,
};

/// A part of `tradesim train`'s time split ([`SplitData`]): its bars, with the features normalized on the
/// train part, as the trainer's envs (train) and its greedy evaluations (validation, test) see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The training bars.
    Train,
    /// The validation bars.
    Valid,
    /// The test bars.
    Test,
}

impl Part {
    /// `train`, `valid` (or `validation`) or `test`.
    pub fn parse(name: &str) -> Result<Self, Error> {
        match name {
            "train" => Ok(Self::Train),
            "valid" | "validation" => Ok(Self::Valid),
            "test" => Ok(Self::Test),
            _ => Err(Error::config("split", format!("{name:?}: 'train', 'valid' or 'test'"))),
        }
    }

    /// This part's market data.
    pub fn of(self, data: &SplitData) -> &MarketData {
        match self {
            Self::Train => &data.train,
            Self::Valid => &data.valid,
            Self::Test => &data.test,
        }
    }
}

/// Refuses an episode that does not fit `n` bars (1 to `n - 2` bars), naming `episode_len`.
fn check_episode(episode_len: usize, n: usize) -> Result<(), Error> {
    if episode_len == 0 || episode_len + 1 >= n {
        return Err(Error::config(
            "episode_len",
            format!("{episode_len} bars: between 1 and bars - 2 = {}", n.saturating_sub(2)),
        ));
    }
    Ok(())
}

/// K trials x E envs stepped together.
#[derive(Debug)]
pub struct VectorEnv {
    batch: VectorBatch,
    backend: &'static str,
}

impl VectorEnv {
    /// Envs on `series` (features computed over all of it): `params.len()` trials (each its own key and
    /// money parameters) of `envs_per_trial` envs, episodes of `episode_len` bars starting at bars drawn
    /// from `seed`.
    pub fn new(
        backend: &Backend,
        series: &Series,
        params: &[TrialParams],
        envs_per_trial: usize,
        episode_len: usize,
        seed: u64,
    ) -> Result<Self, Error> {
        let n = series.bars.len();
        check_episode(episode_len, n)?;
        let market = Prepared::new(series, 0..n)?.market_data(0..n)?;
        Self::on_market(backend, &market, params, envs_per_trial, episode_len, seed)
    }

    /// [`Self::new`] on one part of `tradesim train`'s time split of `series` (`split`: the train and
    /// validation fractions after the feature warm-up), features normalized on the train part as the trainer
    /// does: the envs `tradesim train` trains on (`Part::Train`) for other learners.
    #[allow(clippy::too_many_arguments, reason = "the constructor's and the split's")]
    pub fn on_split(
        backend: &Backend,
        series: &Series,
        params: &[TrialParams],
        envs_per_trial: usize,
        episode_len: usize,
        seed: u64,
        split: (f64, f64),
        part: Part,
    ) -> Result<Self, Error> {
        let data = SplitData::new(series, split, DEFAULT_SIGMA_SPAN)?;
        let market = part.of(&data);
        check_episode(episode_len, market.n_bars())?;
        Self::on_market(backend, market, params, envs_per_trial, episode_len, seed)
    }

    fn on_market(
        backend: &Backend,
        market: &MarketData,
        params: &[TrialParams],
        envs_per_trial: usize,
        episode_len: usize,
        seed: u64,
    ) -> Result<Self, Error> {
        let batch = VectorBatch::new(backend, market, params, envs_per_trial, episode_len, seed)?;
        Ok(Self { batch, backend: backend.info().backend })
    }

    /// Envs (K x E).
    pub fn n_envs(&self) -> usize {
        self.batch.n_envs()
    }

    /// Floats per observation: the bar's features, then position, open-position return, equity change.
    pub fn obs_dim(&self) -> usize {
        self.batch.obs_dim()
    }

    /// The backend (`cpu` or `cuda`).
    pub fn backend_name(&self) -> &'static str {
        self.backend
    }

    /// New episodes for every env (with `seed`, the draws start over from it).
    pub fn reset(&mut self, seed: Option<u64>) -> Result<(), Error> {
        Ok(self.batch.reset(seed)?)
    }

    /// One step of every env with `actions[i]` (0 flat, 1 long, 2 short); envs whose episode ends are reset.
    pub fn step(&mut self, actions: &[u8]) -> Result<(), Error> {
        self.batch.step(actions).map_err(|e| Error::config("actions", e.to_string()))
    }

    /// [`Self::step`] with the actions in device memory (CUDA): `n_envs` integers of `bits` bits at
    /// `address`, checked on the device.
    ///
    /// # Safety
    /// As [`VectorBatch::step_device`]: `address` holds `n_envs` aligned integers of that type in this
    /// env's device memory, ready for its stream, valid until the call returns.
    pub unsafe fn step_device(&mut self, address: u64, bits: u32, signed: bool) -> Result<(), Error> {
        // SAFETY: as the caller guarantees.
        unsafe { self.batch.step_device(address, bits, signed) }.map_err(|e| Error::config("actions", e.to_string()))
    }

    /// On CUDA, whether each step copies the outputs to the host (on by default; the accessors below read
    /// those copies). Off, the outputs stay on the device ([`Self::device_outputs`]).
    pub fn set_host_copies(&mut self, on: bool) {
        self.batch.set_host_copies(on);
    }

    /// Where the outputs live on the device (CUDA), `None` on the CPU.
    pub fn device_outputs(&self) -> Option<DeviceOutputs> {
        self.batch.device_outputs()
    }

    /// Observations (`n_envs x obs_dim`, env-major).
    pub fn observations(&self) -> &[f32] {
        &self.batch.outputs().obs
    }

    /// Last observations of the episodes that ended in the last step (rows where [`Self::final_mask`]).
    pub fn final_observations(&self) -> &[f32] {
        &self.batch.outputs().final_obs
    }

    /// Which envs' episodes ended in the last step.
    pub fn final_mask(&self) -> &[bool] {
        &self.batch.outputs().final_mask
    }

    /// Rewards of the last step.
    pub fn rewards(&self) -> &[f32] {
        &self.batch.outputs().rewards
    }

    /// Envs whose episode terminated (the circuit breaker, ruin) in the last step.
    pub fn terminated(&self) -> &[bool] {
        &self.batch.outputs().terminated
    }

    /// Envs whose episode reached its last bar in the last step.
    pub fn truncated(&self) -> &[bool] {
        &self.batch.outputs().truncated
    }

    /// Each env's equity now (after any reset: the new episode's capital).
    pub fn equity(&self) -> &[f64] {
        &self.batch.outputs().equity
    }

    /// The equity each episode that ended in the last step ended with (rows where [`Self::final_mask`]).
    pub fn final_equity(&self) -> &[f64] {
        self.batch.final_equity()
    }
}

/// A greedy evaluation as `tradesim train` runs one after each epoch (`train::prepare_greedy`), for a policy
/// that lives elsewhere (a Python network): one env walks every bar of a part of the time split, an action
/// at a time, on the CPU; [`SplitWalk::finish`] backtests the actions that took effect with the backtest
/// engine, so the metrics (the validation Sharpe above all) are those the trainer reports for its own
/// policies, computed by the same code.
#[derive(Debug)]
pub struct SplitWalk {
    env: EnvBatch,
    market: MarketData,
    params: TrialParams,
    steps: usize,
    taken: usize,
    bars_per_year: f64,
}

impl SplitWalk {
    /// A walk over `part` of `series`' time split (`split` as in [`VectorEnv::on_split`]) with the money
    /// parameters of `params`; the metrics annualize with the bars per year `tradesim train` infers from the
    /// whole series' times.
    pub fn new(series: &Series, params: TrialParams, split: (f64, f64), part: Part) -> Result<Self, Error> {
        let data = SplitData::new(series, split, DEFAULT_SIGMA_SPAN)?;
        let market = part.of(&data).clone();
        let steps = market.n_bars() - 1;
        let params = TrialParams { ring_origin: 0, draw_origin: 0, ..params };
        let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: steps, seed: 0, trial_groups: 1 };
        let mut env = EnvBatch::new(&Backend::Cpu, &market, &[params], SimLayout::new(1, 1)?, cfg)?;
        env.reset_segments(&[(0, steps as u32)])?;
        let bars_per_year = infer_bars_per_year(&series.bars.iter().map(|b| b.time).collect::<Vec<_>>());
        Ok(Self { env, market, params, steps, taken: 0, bars_per_year })
    }

    /// Steps of the walk (the part's bars - 1).
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Steps taken so far.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// Bars per year of the metrics.
    pub fn bars_per_year(&self) -> f64 {
        self.bars_per_year
    }

    /// Floats per observation.
    pub fn obs_dim(&self) -> usize {
        self.env.n_features() + 3
    }

    /// The env's observation now (features of its bar, then the three portfolio floats).
    pub fn observation(&mut self) -> Result<Vec<f32>, Error> {
        Ok(self.env.observations()?)
    }

    /// One step with `action` (0 flat, 1 long, 2 short).
    pub fn step(&mut self, action: u8) -> Result<(), Error> {
        if self.taken >= self.steps {
            return Err(Error::config("step", format!("the walk has taken all its {} steps", self.steps)));
        }
        self.env.step(&[action])?;
        self.taken += 1;
        Ok(())
    }

    /// The backtest of the actions that took effect (one per step) and those actions; every step taken first.
    pub fn finish(&self) -> Result<(Metrics, Vec<u8>), Error> {
        if self.taken != self.steps {
            return Err(Error::config("finish", format!("{} of the walk's {} steps taken", self.taken, self.steps)));
        }
        let targets: Vec<u8> = self.env.transitions()?.iter().map(|t| t.action).collect();
        let metrics = crate::train::backtest_walk(&self.market, &[self.params], &targets, self.bars_per_year)?;
        Ok((metrics[0], targets))
    }
}
