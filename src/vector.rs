//! A vectorized environment in Gymnasium's shape over K trials x E envs of the fused environment: `reset`,
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
use crate::{Backend, DeviceOutputs, Error, TrialParams, VectorBatch};

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
        if episode_len == 0 || episode_len + 1 >= n {
            return Err(Error::config(
                "episode_len",
                format!("{episode_len} bars: between 1 and bars - 2 = {}", n.saturating_sub(2)),
            ));
        }
        let market = Prepared::new(series, 0..n)?.market_data(0..n)?;
        let batch = VectorBatch::new(backend, &market, params, envs_per_trial, episode_len, seed)?;
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
