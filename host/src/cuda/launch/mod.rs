//! Typed launch wrappers: the only place that launches kernels, hence the only `unsafe` launch code.
//! Each wrapper checks the buffer lengths the kernel's safety contract needs, computes the launch
//! configuration, pushes arguments in kernel order and launches on the given stream. Grouped by concern:
//! [`env`] (stepping, rewards, sampling), [`net`] (products, greedy walk, FMA peak), [`dqn`], [`ppo`],
//! [`backtest`].

pub(crate) mod backtest;
pub(crate) mod dqn;
pub(crate) mod env;
pub(crate) mod net;
pub(crate) mod ppo;

use cudarc::driver::{CudaStream, LaunchConfig};

use super::runtime::CudaRuntime;
use crate::HostError;

/// Threads per block of every kernel (one thread per element).
pub(crate) const BLOCK: u32 = 256;

pub(crate) fn grid(kernel: &str, threads: usize) -> Result<LaunchConfig, HostError> {
    grid_of(kernel, threads, BLOCK)
}

/// [`grid`] with `block` threads per block.
pub(crate) fn grid_of(kernel: &str, threads: usize, block: u32) -> Result<LaunchConfig, HostError> {
    let threads = u32::try_from(threads).map_err(|_| HostError::Shape {
        what: format!("{kernel}: threads (must fit in u32)"),
        expected: u32::MAX as usize,
        got: threads,
    })?;
    Ok(LaunchConfig { grid_dim: (threads.div_ceil(block).max(1), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 })
}

/// A launch of `threads` threads for each of `trials` trials: the blocks of trial `t` are those of
/// `block_idx_y = t` (at most 65,535 trials, the grid's y limit).
pub(crate) fn per_trial_grid(kernel: &str, threads: usize, trials: usize) -> Result<LaunchConfig, HostError> {
    per_trial_grid_of(kernel, threads, BLOCK, trials)
}

/// [`per_trial_grid`] with `block` threads per block.
pub(crate) fn per_trial_grid_of(
    kernel: &str,
    threads: usize,
    block: u32,
    trials: usize,
) -> Result<LaunchConfig, HostError> {
    let cfg = grid_of(kernel, threads, block)?;
    match u32::try_from(trials) {
        Ok(y) if y <= 65_535 => Ok(LaunchConfig { grid_dim: (cfg.grid_dim.0, y.max(1), 1), ..cfg }),
        _ => Err(HostError::Shape { what: format!("{kernel}: trials per launch"), expected: 65_535, got: trials }),
    }
}

/// The launch of a row-gathering kernel (`gpu_kernels::entries::gather_rows`) over `rows` rows: blocks of
/// [`BLOCK`] threads, `GATHER_ROWS` rows and two u32 of shared memory for each (its slot and bar).
pub(crate) fn gather_grid(kernel: &str, rows: usize) -> Result<LaunchConfig, HostError> {
    use gpu_kernels::ppo::GATHER_ROWS;
    let cfg = grid(kernel, rows.div_ceil(GATHER_ROWS) * BLOCK as usize)?;
    Ok(LaunchConfig { shared_mem_bytes: 8 * GATHER_ROWS as u32, ..cfg })
}

/// The launch of a per-sample loss kernel that also computes its samples' hidden gradient of layer 2
/// (`dqn_td`, `ppo_loss`): per trial, a block of `LOSS_THREADS` for each `rows` of the `batch` samples.
pub(crate) fn loss_grid(kernel: &str, batch: usize, rows: usize, trials: usize) -> Result<LaunchConfig, HostError> {
    use gpu_kernels::net::LOSS_THREADS;
    per_trial_grid_of(kernel, batch.div_ceil(rows) * LOSS_THREADS as usize, LOSS_THREADS, trials)
}

/// Runs `go` (one launch on `stream`), bracketed by timing events when the runtime profiles
/// ([`CudaRuntime::start_profile`]).
pub(crate) fn timed<T>(
    rt: &CudaRuntime,
    stream: &CudaStream,
    kernel: &'static str,
    go: impl FnOnce() -> Result<T, cudarc::driver::DriverError>,
) -> Result<(), HostError> {
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = if rt.profiling() {
        Some(stream.record_event(timing).map_err(HostError::driver("recording an event"))?)
    } else {
        None
    };
    go().map_err(HostError::driver(format!("launching {kernel}")))?;
    if let Some(start) = start {
        let end = stream.record_event(timing).map_err(HostError::driver("recording an event"))?;
        rt.record_launch(kernel, start, end);
    }
    Ok(())
}

/// Fails unless `got >= needed` (a buffer may be larger than a launch uses, never smaller).
pub(crate) fn at_least(kernel: &str, what: &str, needed: usize, got: usize) -> Result<(), HostError> {
    if got >= needed {
        Ok(())
    } else {
        Err(HostError::Shape { what: format!("{kernel}: {what}"), expected: needed, got })
    }
}
