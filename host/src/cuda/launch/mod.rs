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

use std::ffi::c_void;
use std::mem::ManuallyDrop;

use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DriverError, LaunchConfig,
    PushKernelArg, SyncOnDrop,
};

use super::buffers::Dev;

use super::profile::Label;
use super::runtime::{CudaRuntime, Kernel};
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

/// The launch of a row-gathering kernel (`gpu_kernels::ppo::blocks::gather_rows`) over `rows` rows: blocks of
/// [`BLOCK`] threads, `GATHER_ROWS` rows and two u32 of shared memory for each (its rollout index and bar).
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

/// The most arguments a kernel takes (`sample_transitions`: 11).
const MAX_ARGS: usize = 16;

/// A kernel launch being built: cudarc's `LaunchArgs` with the same `arg` calls (the buffers' device
/// addresses, values by reference), launched with programmatic stream serialization where the runtime allows
/// it ([`CudaRuntime::dependent_launch`]): the kernel's launch and block dispatch may then overlap the end of
/// the kernel before it on the stream, whose completion every kernel waits for before it reads what that one
/// wrote (`griddepcontrol.wait`, `gpu_kernels::registry::EARLY_READS`).
pub(crate) struct Launch<'a> {
    stream: &'a CudaStream,
    function: &'a CudaFunction,
    dependent: bool,
    /// The device addresses of buffer arguments and the scalars kept here, where `args` points (boxed: the
    /// builder may move).
    addresses: Box<[CUdeviceptr; MAX_ARGS]>,
    buffers: usize,
    args: Vec<*mut c_void>,
    /// Records each buffer's use on its event after the launch when cudarc tracks events
    /// (`KernelOptions::event_tracking`; nothing otherwise). Emptied by [`Self::launch`] alone, so that the
    /// builder itself needs no drop and the buffers' borrows end at its last use (as cudarc's builder's do);
    /// a builder never launched records nothing.
    guards: ManuallyDrop<Vec<SyncOnDrop<'a>>>,
}

impl<'a> Launch<'a> {
    /// A launch of `kernel` on `stream`.
    pub(crate) fn new(rt: &CudaRuntime, stream: &'a CudaStream, kernel: &'a Kernel) -> Self {
        Self {
            stream,
            function: &kernel.function,
            dependent: rt.dependent_launch(),
            addresses: Box::new([0; MAX_ARGS]),
            buffers: 0,
            args: Vec::with_capacity(MAX_ARGS),
            guards: ManuallyDrop::new(Vec::new()),
        }
    }

    fn address(&mut self, address: CUdeviceptr, guard: SyncOnDrop<'a>) -> &mut Self {
        // More than MAX_ARGS buffers is a wrapper's bug (every kernel's arguments are fixed), not an input.
        let slot = &mut self.addresses[self.buffers];
        *slot = address;
        self.args.push(slot as *mut CUdeviceptr as *mut c_void);
        self.buffers += 1;
        self.guards.push(guard);
        self
    }

    /// A `u32` argument by value, kept in the builder (no caller storage to outlive it).
    pub(crate) fn scalar(&mut self, value: u32) -> &mut Self {
        // The slot is a u64: the kernel reads the low four bytes (little-endian), `value`.
        self.address(u64::from(value), SyncOnDrop::Record(None))
    }

    fn value<T>(&mut self, value: &'a T) -> &mut Self {
        self.args.push(value as *const T as *mut c_void);
        self
    }

    /// Launches the kernel with `cfg`.
    ///
    /// # Safety
    /// The arguments pushed match the kernel's parameters in order and type, and every length the kernel's
    /// safety contract names holds (cudarc's `LaunchArgs::launch`).
    pub(crate) unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<(), DriverError> {
        self.stream.context().bind_to_thread()?;
        let mut attribute = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
        };
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: u32::from(self.dependent),
        };
        // SAFETY: `config` and `attribute` outlive the call; `args` holds a pointer to each argument's value
        // (the caller's contract), all alive for the builder's lifetime.
        let launched = unsafe {
            sys::cuLaunchKernelEx(&config, self.function.cu_function(), self.args.as_mut_ptr(), std::ptr::null_mut())
                .result()
        };
        // The guards record the buffers' uses after the launch (an empty vector stays behind: nothing to drop).
        drop(std::mem::take(&mut *self.guards));
        launched
    }
}

// SAFETY: the address pushed is the buffer's device address on the launch's stream; cudarc's `device_ptr`
// (`_mut`) orders the stream after the buffer's earlier uses when it tracks events, and the guard records this
// use after the launch.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b CudaSlice<T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b CudaSlice<T>) -> &mut Self {
        let (address, guard) = arg.device_ptr(self.stream);
        self.address(address, guard)
    }
}

// SAFETY: the address pushed is the buffer's device address on the launch's stream; cudarc's `device_ptr`
// (`_mut`) orders the stream after the buffer's earlier uses when it tracks events, and the guard records this
// use after the launch.
unsafe impl<'a, 'b: 'a, T> PushKernelArg<&'b mut CudaSlice<T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b mut CudaSlice<T>) -> &mut Self {
        let (address, guard) = arg.device_ptr_mut(self.stream);
        self.address(address, guard)
    }
}

// SAFETY: the address pushed is the buffer's device address on the launch's stream; cudarc's `device_ptr`
// (`_mut`) orders the stream after the buffer's earlier uses when it tracks events, and the guard records this
// use after the launch.
unsafe impl<'a, 'b: 'a, 'c: 'b, T> PushKernelArg<&'b CudaView<'c, T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b CudaView<'c, T>) -> &mut Self {
        let (address, guard) = arg.device_ptr(self.stream);
        self.address(address, guard)
    }
}

// SAFETY: the address pushed is the buffer's device address on the launch's stream; cudarc's `device_ptr`
// (`_mut`) orders the stream after the buffer's earlier uses when it tracks events, and the guard records this
// use after the launch.
unsafe impl<'a, 'b: 'a, 'c: 'b, T> PushKernelArg<&'b mut CudaViewMut<'c, T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b mut CudaViewMut<'c, T>) -> &mut Self {
        let (address, guard) = arg.device_ptr_mut(self.stream);
        self.address(address, guard)
    }
}

// SAFETY: a `Pod` struct passed by value (`Dev`'s `DeviceRepr` contract); the pointer is to the caller's
// value, alive for the builder's lifetime.
unsafe impl<'a, 'b: 'a, T: bytemuck::Pod> PushKernelArg<&'b Dev<T>> for Launch<'a> {
    fn arg(&mut self, arg: &'b Dev<T>) -> &mut Self {
        self.value(arg)
    }
}

/// Scalars passed by value.
macro_rules! scalar_args {
    ($($t:ty),*) => {$(
        // SAFETY: a plain scalar passed by value; the pointer is to the caller's value, alive for the
        // builder's lifetime.
        unsafe impl<'a, 'b: 'a> PushKernelArg<&'b $t> for Launch<'a> {
            fn arg(&mut self, arg: &'b $t) -> &mut Self {
                self.value(arg)
            }
        }
    )*};
}
scalar_args!(u32, u64, i32, f32);

/// Runs `go` (one launch on `stream`, recorded as `label`), bracketed by timing events when the runtime
/// profiles ([`CudaRuntime::start_profile`]).
pub(crate) fn timed<T>(
    rt: &CudaRuntime,
    stream: &CudaStream,
    label: Label,
    go: impl FnOnce() -> Result<T, cudarc::driver::DriverError>,
) -> Result<(), HostError> {
    let events = rt.profile_events()?;
    if let Some((start, _)) = &events {
        start.record(stream).map_err(HostError::driver("recording an event"))?;
    }
    go().map_err(HostError::driver(format!("launching {label}")))?;
    rt.launched(stream, label.kernel);
    if let Some((start, end)) = events {
        end.record(stream).map_err(HostError::driver("recording an event"))?;
        rt.record_launch(label, start, end);
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
