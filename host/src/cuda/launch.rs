//! Typed launch wrappers: the only place that launches kernels, hence the only `unsafe` launch code.
//! Each wrapper checks shapes, computes the launch configuration, pushes arguments in kernel order and
//! launches on the given stream.

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use gpu_kernels::{EnvState, TrialParams};

use crate::HostError;
use crate::cuda::CudaRuntime;

/// A kernel-crate struct as a device element: same layout, so cudarc can copy it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dev<T>(pub(crate) T);

// SAFETY: `TrialParams` and `EnvState` are `#[repr(C)]` plain old data (f64/u32/i32 fields, sizes locked by
// const asserts, no padding), valid for any bit pattern the kernels write.
unsafe impl DeviceRepr for Dev<TrialParams> {}
// SAFETY: as above.
unsafe impl DeviceRepr for Dev<EnvState> {}

/// Threads per block for per-env kernels.
const BLOCK: u32 = 256;

fn shape(what: &str, expected: usize, got: usize) -> Result<(), HostError> {
    if expected == got {
        Ok(())
    } else {
        Err(HostError::Shape {
            what: format!("portfolio_step: {what}"),
            expected,
            got,
        })
    }
}

fn as_u32(what: &str, n: usize) -> Result<u32, HostError> {
    u32::try_from(n).map_err(|_| HostError::Shape {
        what: format!("{what} (must fit in u32)"),
        expected: u32::MAX as usize,
        got: n,
    })
}

/// One portfolio step for a trial group: `states[i]` of trial `i / envs_per_trial` takes `actions[i]`.
#[allow(
    clippy::too_many_arguments,
    reason = "one argument per kernel parameter, in kernel order"
)]
pub(crate) fn portfolio_step(
    rt: &CudaRuntime,
    stream: &CudaStream,
    params: &CudaSlice<Dev<TrialParams>>,
    states: &mut CudaSlice<Dev<EnvState>>,
    actions: &CudaView<'_, u8>,
    open: &CudaSlice<f64>,
    close: &CudaSlice<f64>,
    envs_per_trial: usize,
) -> Result<(), HostError> {
    shape(
        "states (trials x envs per trial)",
        params.len() * envs_per_trial,
        states.len(),
    )?;
    shape("actions (one per env)", states.len(), actions.len())?;
    shape("close (bars of open)", open.len(), close.len())?;
    let n_envs = as_u32("envs", states.len())?;
    let n_bars = as_u32("bars", open.len())?;
    let envs_per_trial = as_u32("envs per trial", envs_per_trial)?;
    if n_envs == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig {
        grid_dim: (n_envs.div_ceil(BLOCK), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(&rt.kernels.portfolio_step);
    launch
        .arg(params)
        .arg(states)
        .arg(actions)
        .arg(open)
        .arg(close)
        .arg(&n_bars)
        .arg(&n_envs)
        .arg(&envs_per_trial);
    // SAFETY: argument order and types match `gpu_kernels::entries::portfolio_step`; lengths were checked above
    // (params: n_envs / envs_per_trial trials, states and actions: n_envs, open and close: n_bars), and each
    // thread writes only its own state.
    unsafe { launch.launch(cfg) }.map_err(HostError::driver("launching portfolio_step"))?;
    Ok(())
}
