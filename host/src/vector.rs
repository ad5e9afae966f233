//! [`VectorBatch`]: the vector env's K trials x E envs on the chosen backend (Gymnasium's vector API:
//! observations, rewards, terminations and truncations per step, same-step autoreset, the equity each ended
//! episode ended with), one per-env rule for both backends ([`gpu_kernels::vector`]).

use gpu_kernels::TrialParams;
use gpu_kernels::vector::{ActionKind, VectorArgs};

use crate::cpu::vector::CpuVector;
use crate::env_batch::validate_params;
use crate::types::{DeviceOutputs, VectorOutputs};
use crate::{Backend, HostError, MarketData};

/// The vector env's envs and outputs.
#[derive(Debug)]
pub struct VectorBatch {
    args: VectorArgs,
    inner: Inner,
    /// Each trial's initial capital (a new episode's equity).
    capitals: Vec<f64>,
    /// The equity each episode that ended in the last step ended with (rows where `final_mask`).
    final_equity: Vec<f64>,
}

#[derive(Debug)]
enum Inner {
    Cpu(Box<CpuVector>),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaVector>),
}

impl VectorBatch {
    /// `params.len()` trials of `envs_per_trial` envs on `market`, episodes of `episode_len` bars starting at
    /// bars drawn from `seed`; every env starts its first episode.
    pub fn new(
        backend: &Backend,
        market: &MarketData,
        params: &[TrialParams],
        envs_per_trial: usize,
        episode_len: usize,
        seed: u64,
    ) -> Result<Self, HostError> {
        let n_bars = market.n_bars();
        if episode_len == 0 || episode_len + 1 >= n_bars || n_bars > u32::MAX as usize {
            return Err(HostError::Config(format!(
                "episode length {episode_len} bars: between 1 and bars - 2 = {}",
                n_bars.saturating_sub(2)
            )));
        }
        if params.is_empty() || envs_per_trial == 0 {
            return Err(HostError::Config("the vector env needs at least one trial and one env per trial".into()));
        }
        let n_envs = params.len().checked_mul(envs_per_trial).filter(|n| *n < u32::MAX as usize).ok_or_else(|| {
            HostError::Config(format!("{} trials x {envs_per_trial} envs: at most 2^32 - 1 envs", params.len()))
        })?;
        for (trial, p) in params.iter().enumerate() {
            validate_params(trial, p)?;
            if p.normalize_reward != 0 {
                return Err(HostError::Config(format!(
                    "trial {trial}: normalize_reward: the vector env returns raw rewards (normalize them in the learner)"
                )));
            }
        }
        let args = VectorArgs {
            seed,
            n_bars: n_bars as u32,
            n_envs: n_envs as u32,
            envs_per_trial: envs_per_trial as u32,
            n_features: market.n_features() as u32,
            episode_len: episode_len as u32,
            action_kind: ActionKind::U8.code(),
        };
        let inner = match backend {
            Backend::Cpu => Inner::Cpu(Box::new(CpuVector::new(market, params, &args))),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => Inner::Cuda(Box::new(crate::cuda::CudaVector::new(rt, market, params, &args)?)),
        };
        let capitals = params.iter().map(|p| p.initial_capital).collect();
        let mut v = Self { args, inner, capitals, final_equity: vec![0.0; n_envs] };
        v.reset(None)?;
        Ok(v)
    }

    /// Envs (K x E).
    pub fn n_envs(&self) -> usize {
        self.args.n_envs as usize
    }

    /// Floats per observation: the bar's features, then position, open-position return, equity change.
    pub fn obs_dim(&self) -> usize {
        self.args.n_features as usize + 3
    }

    /// New episodes for every env (with `seed`, the draws start over from it).
    pub fn reset(&mut self, seed: Option<u64>) -> Result<(), HostError> {
        if let Some(s) = seed {
            self.args.seed = s;
        }
        let args = self.args;
        match &mut self.inner {
            Inner::Cpu(c) => {
                c.reset(&args, seed.is_some());
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.reset(&args, seed.is_some()),
        }
    }

    /// One step of every env with `actions[i]` (0 flat, 1 long, 2 short); envs whose episode ends start
    /// their next one in the same step. An invalid action fails the step before any env moves.
    pub fn step(&mut self, actions: &[u8]) -> Result<(), HostError> {
        let n = self.n_envs();
        if actions.len() != n {
            return Err(HostError::Shape { what: "actions (one per env)".into(), expected: n, got: actions.len() });
        }
        if let Some(env) = actions.iter().position(|&a| a > 2) {
            return Err(HostError::InvalidAction { step: 0, env, code: actions[env].into() });
        }
        let args = self.args;
        match &mut self.inner {
            Inner::Cpu(c) => c.step(&args, actions),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.step(&args, actions)?,
        }
        self.settle_final_equity();
        Ok(())
    }

    /// [`Self::step`] with the actions in device memory: `n_envs` integers of `bits` bits (8, 16, 32 or
    /// 64, `signed` or not) at `address`, checked on the device (an invalid one fails the step before any env
    /// moves). CUDA only.
    ///
    /// # Safety
    /// `address` holds `n_envs` aligned elements of that type in the memory of this env's device (its
    /// primary context), their writes complete or ordered before work on [`DeviceOutputs::stream`] (DLPack's
    /// `__dlpack__(stream=...)` does this), and stays valid until this call returns.
    pub unsafe fn step_device(&mut self, address: u64, bits: u32, signed: bool) -> Result<(), HostError> {
        let kind = ActionKind::of_bits(bits, signed)
            .ok_or_else(|| HostError::Config(format!("actions: {bits}-bit integers (8, 16, 32 or 64 bits)")))?;
        if address == 0 || !address.is_multiple_of(u64::from(kind.bytes)) {
            return Err(HostError::Config(format!("actions: device address {address:#x} is not aligned")));
        }
        match &mut self.inner {
            Inner::Cpu(_) => {
                Err(HostError::Config("device actions need the CUDA backend; this vector env runs on the CPU".into()))
            }
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => {
                let args = VectorArgs { action_kind: kind.code(), ..self.args };
                // SAFETY: as the caller guarantees.
                unsafe { c.step_device(&args, address) }?;
                self.settle_final_equity();
                Ok(())
            }
        }
    }

    /// The step leaves an ended episode's equity in its env's `equity` (the rule writes it before the
    /// restart): on the host, it moves to [`Self::final_equity`] and `equity` becomes the next episode's,
    /// its trial's capital (the bits the restart gives).
    fn settle_final_equity(&mut self) {
        if !self.host_copies() {
            return;
        }
        let ept = self.args.envs_per_trial as usize;
        let out = match &mut self.inner {
            Inner::Cpu(c) => &mut c.out,
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => &mut c.out,
        };
        for (env, _) in out.final_mask.iter().enumerate().filter(|(_, ended)| **ended) {
            self.final_equity[env] = out.equity[env];
            out.equity[env] = self.capitals[env / ept];
        }
    }

    /// Whether each step copies the outputs to the host (always on the CPU; on CUDA, on unless turned off
    /// with [`Self::set_host_copies`]).
    pub fn host_copies(&self) -> bool {
        match &self.inner {
            Inner::Cpu(_) => true,
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.host_copies,
        }
    }

    /// On CUDA: with `false`, steps leave the outputs on the device only ([`Self::device_outputs`]; the host
    /// outputs keep the last copied values) and wait for other streams' work on the device before
    /// overwriting them. No effect on the CPU.
    pub fn set_host_copies(&mut self, on: bool) {
        #[cfg(feature = "cuda")]
        if let Inner::Cuda(c) = &mut self.inner {
            c.host_copies = on;
        }
        let _ = on;
    }

    /// The outputs on the host (on CUDA: copies from the last step while host copies are on).
    pub fn outputs(&self) -> &VectorOutputs {
        match &self.inner {
            Inner::Cpu(c) => &c.out,
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => &c.out,
        }
    }

    /// The equity each episode that ended in the last step ended with (rows where the outputs'
    /// `final_mask`; other rows keep older values). Updated by steps that copy their outputs to the host.
    pub fn final_equity(&self) -> &[f64] {
        &self.final_equity
    }

    /// The outputs' device addresses (CUDA), `None` on the CPU. On the device, an env whose episode ended
    /// in the last step has the equity that episode ended with in `equity` (the next one starts at its
    /// trial's capital).
    pub fn device_outputs(&self) -> Option<DeviceOutputs> {
        match &self.inner {
            Inner::Cpu(_) => None,
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => Some(c.outputs()),
        }
    }
}
