//! Device buffers: the [`Dev`] wrapper that lets cudarc copy the kernel crate's `#[repr(C)]` structs, the
//! buffer bundles each launch takes, the view a device policy acts through, and zeroed allocation. Plain
//! data: the launches ([`super::launch`]) check the lengths.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
use gpu_kernels::account::AccountState;
use gpu_kernels::backtest::{Metrics, SmaCross, Trade};
use gpu_kernels::dqn::DqnParams;
use gpu_kernels::ppo::PpoParams;
use gpu_kernels::tile::Gemm;
use gpu_kernels::{Bar, EnvState, Transition, TrialParams};

use crate::HostError;

/// A kernel-crate struct as a device element or kernel argument: same layout, so cudarc can copy it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dev<T>(pub(crate) T);

// SAFETY: `T: Pod` (derived in gpu-kernels, which checks at compile time that the `#[repr(C)]` struct has no
// padding and only plain fields) is valid for any bit pattern the kernels write and has the same layout as
// `Dev<T>` (`repr(transparent)`), so cudarc may copy it to and from the device and pass it by value.
unsafe impl<T: bytemuck::Pod> DeviceRepr for Dev<T> {}
// SAFETY: `Pod` implies `Zeroable`: all-zero bits are a valid value.
unsafe impl<T: bytemuck::Pod> ValidAsZeroBits for Dev<T> {}

/// The portfolio env's buffers: parameters, accounts, units and the orders' scratch (`n_envs x n_symbols`
/// each), the universe's block and flags.
pub(crate) struct PortfolioEnvBuffers<'a> {
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) accounts: &'a mut CudaSlice<Dev<AccountState>>,
    pub(crate) units: &'a mut CudaSlice<f64>,
    pub(crate) order_value: &'a mut CudaSlice<f64>,
    pub(crate) order_units: &'a mut CudaSlice<f64>,
    pub(crate) order_symbol: &'a mut CudaSlice<u32>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
    pub(crate) tradable: &'a CudaSlice<u8>,
}

/// Buffers of one trial group's envs.
pub(crate) struct EnvBuffers<'a> {
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) states: &'a mut CudaSlice<Dev<EnvState>>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
    pub(crate) ring: &'a mut CudaSlice<Dev<Transition>>,
}

/// The vector env's outputs on the device (one row or element per env).
#[derive(Debug)]
pub(crate) struct VectorDevice {
    pub(crate) obs: CudaSlice<f32>,
    pub(crate) final_obs: CudaSlice<f32>,
    pub(crate) rewards: CudaSlice<f32>,
    pub(crate) terminated: CudaSlice<bool>,
    pub(crate) truncated: CudaSlice<bool>,
    pub(crate) final_mask: CudaSlice<bool>,
    pub(crate) equity: CudaSlice<f64>,
}

/// What the vector env's kernels read and write.
pub(crate) struct VectorBuffers<'a> {
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) states: &'a mut CudaSlice<Dev<EnvState>>,
    pub(crate) episodes: &'a mut CudaSlice<u64>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
    pub(crate) features: &'a CudaSlice<f32>,
    pub(crate) out: &'a mut VectorDevice,
}

/// Outputs of the sampler.
#[derive(Debug)]
pub(crate) struct SampleBuffers {
    pub(crate) obs: CudaSlice<f32>,
    pub(crate) next_obs: CudaSlice<f32>,
    pub(crate) actions: CudaSlice<u32>,
    pub(crate) rewards: CudaSlice<f32>,
    pub(crate) dones: CudaSlice<f32>,
    pub(crate) weights: CudaSlice<f32>,
}

/// Inputs of a backtest launch.
pub(crate) struct BacktestInputs<'a> {
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) targets: &'a CudaSlice<u8>,
    pub(crate) sma: &'a CudaSlice<Dev<SmaCross>>,
    pub(crate) prefix: &'a CudaSlice<i64>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
}

/// Outputs of a backtest launch.
pub(crate) struct BacktestOutputs<'a> {
    pub(crate) metrics: &'a mut CudaSlice<Dev<Metrics>>,
    pub(crate) counts: &'a mut CudaSlice<u32>,
    pub(crate) offsets: &'a CudaSlice<u64>,
    pub(crate) ledger: &'a mut CudaSlice<Dev<Trade>>,
    pub(crate) equity: &'a mut CudaSlice<f64>,
}

/// The DQN networks, their Adam state and the step buffers of every trial on the device.
#[derive(Debug)]
pub(crate) struct DqnBuffers {
    pub(crate) params: CudaSlice<Dev<DqnParams>>,
    pub(crate) online: CudaSlice<f32>,
    pub(crate) target: CudaSlice<f32>,
    pub(crate) m: CudaSlice<f32>,
    pub(crate) v: CudaSlice<f32>,
    /// Training activations and gradients ([`gpu_kernels::net::Work`]).
    pub(crate) work: CudaSlice<f32>,
    /// Per-chunk weight gradients.
    pub(crate) partial: CudaSlice<f32>,
    /// Acting buffer ([`gpu_kernels::net::ActWork`]).
    pub(crate) act: CudaSlice<f32>,
    /// `MAX_GRAD_CHUNK` ones (the input of the bias gradients).
    pub(crate) ones: CudaSlice<f32>,
    pub(crate) losses: CudaSlice<f32>,
}

/// A stage's plan (a launch's products or chains) on the device, with its host copy (grid size), checked
/// against the lengths of the buffers its addresses name when it was built (`crate::plan::check`).
#[derive(Debug)]
pub(crate) struct DevPlan<T> {
    pub(crate) host: Vec<T>,
    pub(crate) dev: CudaSlice<Dev<T>>,
}

impl<T: bytemuck::Pod> DevPlan<T> {
    /// Uploads `host` on `stream` and waits for the copy (plans are read by launches on other streams,
    /// which no event orders: [`crate::cuda::runtime::CudaRuntime`] turns cudarc's tracking off).
    pub(crate) fn upload(stream: &Arc<CudaStream>, host: Vec<T>) -> Result<Self, HostError> {
        let items: Vec<_> = host.iter().copied().map(Dev).collect();
        let dev = stream.clone_htod(&items).map_err(HostError::driver("uploading plans"))?;
        stream.synchronize().map_err(HostError::driver("uploading plans"))?;
        Ok(Self { host, dev })
    }
}

/// Products of `gemm_tiles` ([`gpu_kernels::net::plan`]).
pub(crate) type GemmPlan = DevPlan<Gemm>;
/// Fused layer chains of `mlp_chain` ([`gpu_kernels::chain::chain_plan`]).
pub(crate) type ChainPlan = DevPlan<gpu_kernels::chain::Chain>;

/// The PPO networks, rollout buffers and step buffers of every trial on the device.
#[derive(Debug)]
pub(crate) struct PpoBuffers {
    pub(crate) params: CudaSlice<Dev<PpoParams>>,
    pub(crate) weights: CudaSlice<f32>,
    pub(crate) m: CudaSlice<f32>,
    pub(crate) v: CudaSlice<f32>,
    /// Acting buffer ([`gpu_kernels::net::ActWork`]).
    pub(crate) act: CudaSlice<f32>,
    pub(crate) logps: CudaSlice<f32>,
    pub(crate) values: CudaSlice<f32>,
    pub(crate) bootstrap: CudaSlice<f32>,
    pub(crate) advantages: CudaSlice<f32>,
    pub(crate) returns: CudaSlice<f32>,
    /// Minibatch observations, `K x B x D`.
    pub(crate) obs: CudaSlice<f32>,
    /// Training buffer ([`gpu_kernels::net::Work`]).
    pub(crate) work: CudaSlice<f32>,
    /// Per-chunk gradients.
    pub(crate) partial: CudaSlice<f32>,
    /// The gradient, `K x params`.
    pub(crate) grads: CudaSlice<f32>,
    /// The lanes of the gradient-norm sums, `K x NORM_LANES`.
    pub(crate) norm_lanes: CudaSlice<f32>,
    /// Each minibatch sample's advantage in minibatch order (`ppo_gather`, read by `ppo_adv`), `K x B`.
    pub(crate) gathered_advantages: CudaSlice<f32>,
    /// Each trial's minibatch advantage mean and standard deviation (`ppo_adv`), `2 x K`.
    pub(crate) adv_moments: CudaSlice<f32>,
    /// `MAX_GRAD_CHUNK` ones (the input of the bias gradients).
    pub(crate) ones: CudaSlice<f32>,
    pub(crate) losses: CudaSlice<f32>,
}

/// What a device policy reads and writes: group 0's buffers (policies need a single trial group).
pub(crate) struct PolicyView<'a> {
    pub(crate) stream: &'a Arc<CudaStream>,
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) states: &'a mut CudaSlice<Dev<EnvState>>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
    pub(crate) features: &'a CudaSlice<f32>,
    pub(crate) actions: &'a mut CudaSlice<u8>,
    /// The replay ring (or rollout) the fused env step writes (`dqn_act`, `ppo_act` with `step`).
    pub(crate) ring: &'a mut CudaSlice<Dev<Transition>>,
}

pub(crate) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> Result<CudaSlice<T>, HostError> {
    stream.alloc_zeros(len.max(1)).map_err(HostError::driver("allocating device memory"))
}

/// Zeroed sampler outputs for `samples` samples of `width` floats.
pub(crate) fn sample_buffers(
    stream: &Arc<CudaStream>,
    samples: usize,
    width: usize,
) -> Result<SampleBuffers, HostError> {
    Ok(SampleBuffers {
        obs: zeros(stream, samples * width)?,
        next_obs: zeros(stream, samples * width)?,
        actions: zeros(stream, samples)?,
        rewards: zeros(stream, samples)?,
        dones: zeros(stream, samples)?,
        weights: zeros(stream, samples)?,
    })
}

/// `slot` holding a zeroed buffer of at least `len` elements.
pub(crate) fn ensure<'a, T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    slot: &'a mut Option<CudaSlice<T>>,
    len: usize,
) -> Result<&'a mut CudaSlice<T>, HostError> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        *slot = Some(zeros(stream, len)?);
    }
    Ok(slot.as_mut().expect("filled above"))
}
