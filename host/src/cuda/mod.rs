//! The CUDA backend: one context and PTX module per device, every kernel resolved at start-up, a pool of
//! stream per trial group. All `unsafe` launch code is in [`launch`].

mod backtest;
mod buffers;
mod dqn;
mod env;
mod launch;
mod learner;
mod peak;
mod plans;
mod portfolio_env;
mod ppo;
mod profile;
mod runtime;
mod vector;

pub(crate) use backtest::backtest;
pub(crate) use dqn::CudaDqn;
pub(crate) use env::CudaEnv;
pub(crate) use launch::net::DeviceWalk;
pub(crate) use learner::WalkSnapshot;
pub(crate) use portfolio_env::{CudaPortfolioEnv, universe_act};
pub(crate) use ppo::CudaPpo;
pub use profile::KernelProfile;
pub use runtime::CudaRuntime;
pub(crate) use vector::CudaVector;

use cudarc::driver::CudaContext;

/// Probes the driver without panicking (cudarc panics when libcuda is missing, so its presence is checked
/// first): `None` without a driver library, else the device count or the driver's error.
pub(crate) fn probe() -> Option<Result<usize, String>> {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library and drops it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    Some(CudaContext::device_count().map(|n| usize::try_from(n).unwrap_or(0)).map_err(|e| e.to_string()))
}
