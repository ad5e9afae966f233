//! The CUDA backend: one context and PTX module per device, every kernel resolved at start-up, a pool of
//! stream per trial group. All `unsafe` launch code is in [`launch`].

mod backtest;
mod dqn;
mod env;
mod launch;
mod ppo;
mod runtime;
mod tables;

pub(crate) use backtest::backtest;
pub(crate) use dqn::CudaDqn;
pub(crate) use env::CudaEnv;
pub(crate) use ppo::CudaPpo;
pub use runtime::CudaRuntime;

use crate::CudaAvailability;
use cudarc::driver::CudaContext;

/// Probes the driver without panicking: cudarc panics when libcuda is missing, so its presence is checked
/// first.
pub(crate) fn detect() -> CudaAvailability {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library and drops it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return CudaAvailability::NoDriver;
    }
    match CudaContext::device_count() {
        Ok(0) => CudaAvailability::NoDevice,
        Ok(n) => CudaAvailability::Available { devices: usize::try_from(n).unwrap_or(0) },
        Err(e) => CudaAvailability::DriverError(e.to_string()),
    }
}
