//! Backend detection and selection. Nothing here panics: a machine with no driver, no device or a PTX the
//! driver refuses gets the CPU backend under `auto`, and an error that says why under `cuda`.

use std::fmt;
use std::str::FromStr;

use crate::{HostError, ModuleLoad, Modules};
#[cfg(feature = "cuda")]
use std::sync::Arc;

/// What the user asked for (`--device auto|cpu|cuda`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceRequest {
    /// CUDA when a usable GPU is present, else the CPU.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The CUDA backend, or an error.
    Cuda,
}

impl FromStr for DeviceRequest {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda),
            other => Err(format!("unknown device `{other}` (expected auto, cpu or cuda)")),
        }
    }
}

/// What detection found about CUDA on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CudaAvailability {
    /// A driver with this many devices.
    Available {
        /// Number of CUDA devices.
        devices: usize,
    },
    /// This build has no CUDA backend (`--no-default-features`).
    NotBuilt,
    /// The driver library (libcuda) could not be loaded.
    NoDriver,
    /// The driver loaded but reports no device.
    NoDevice,
    /// The driver failed to initialise or answer.
    DriverError(String),
}

impl fmt::Display for CudaAvailability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Available { devices } => write!(f, "{devices} CUDA device(s) found"),
            Self::NotBuilt => write!(f, "this build has no CUDA backend (built with --no-default-features)"),
            Self::NoDriver => write!(f, "no CUDA driver was found (libcuda could not be loaded)"),
            Self::NoDevice => write!(f, "the CUDA driver reports no device"),
            Self::DriverError(e) => write!(f, "the CUDA driver failed: {e}"),
        }
    }
}

/// Looks for a CUDA driver and devices; never panics.
pub fn detect() -> CudaAvailability {
    #[cfg(feature = "cuda")]
    {
        match crate::cuda::probe() {
            None => CudaAvailability::NoDriver,
            Some(Ok(0)) => CudaAvailability::NoDevice,
            Some(Ok(devices)) => CudaAvailability::Available { devices },
            Some(Err(e)) => CudaAvailability::DriverError(e),
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        CudaAvailability::NotBuilt
    }
}

/// A ready backend.
#[derive(Clone, Debug)]
pub enum Backend {
    /// gpu-kernels' functions on the host, parallel over envs.
    Cpu,
    /// The PTX module on a CUDA device.
    #[cfg(feature = "cuda")]
    Cuda(Arc<crate::CudaRuntime>),
}

/// What `tradesim info` prints about the chosen backend.
#[derive(Clone, Debug)]
pub struct BackendInfo {
    /// "cpu" or "cuda".
    pub backend: &'static str,
    /// Why the CPU backend was chosen under `auto`, if it was.
    pub fallback_reason: Option<String>,
    /// Device name (CUDA).
    pub device_name: Option<String>,
    /// Compute capability (CUDA).
    pub compute_capability: Option<(i32, i32)>,
    /// Device memory in bytes (CUDA).
    pub total_memory: Option<usize>,
    /// Worker threads (CPU) or streaming multiprocessors (CUDA).
    pub parallelism: usize,
    /// The target of the PTX module loaded (CUDA), e.g. `sm_90`.
    pub ptx_target: Option<String>,
    /// Whether kernels are launched with programmatic dependent launch (CUDA,
    /// [`crate::CudaRuntime::dependent_launch`]).
    pub dependent_launch: bool,
    /// How the module was obtained and how long loading it took (CUDA, [`crate::CudaRuntime::module_load`]).
    pub module_load: Option<ModuleLoad>,
}

impl Backend {
    /// Describes the backend.
    pub fn info(&self) -> BackendInfo {
        match self {
            Self::Cpu => BackendInfo {
                backend: "cpu",
                fallback_reason: None,
                device_name: None,
                compute_capability: None,
                total_memory: None,
                parallelism: rayon::current_num_threads(),
                ptx_target: None,
                dependent_launch: false,
                module_load: None,
            },
            #[cfg(feature = "cuda")]
            Self::Cuda(rt) => BackendInfo {
                backend: "cuda",
                fallback_reason: None,
                device_name: Some(rt.device_name().to_owned()),
                compute_capability: Some(rt.compute_capability()),
                total_memory: Some(rt.total_memory()),
                parallelism: rt.multiprocessors(),
                ptx_target: Some(rt.ptx_target().to_owned()),
                dependent_launch: rt.dependent_launch(),
                module_load: Some(rt.module_load().clone()),
            },
        }
    }

    /// Whether this is the CUDA backend.
    pub fn is_cuda(&self) -> bool {
        !matches!(self, Self::Cpu)
    }

    /// The backend a replay of stored actions (`columns` columns over `bars` bars: a job's evidence, its best
    /// trial's test) runs on: the CPU below [`Self::REPLAY_ON_CPU_BELOW`] bar-columns, else this one. Below it
    /// the device's uploads, allocations, launch and download take longer than the CPU's walk over them
    /// (docs/PERFORMANCE.md, ec8505d); both give the same bits, equity curves included (the backtest is one
    /// body compiled twice: tests/backtest_parity.rs).
    pub fn for_replay(&self, columns: usize, bars: usize) -> &Self {
        static CPU: Backend = Backend::Cpu;
        if columns.saturating_mul(bars) < Self::REPLAY_ON_CPU_BELOW { &CPU } else { self }
    }

    /// Bar-columns below which [`Self::for_replay`] takes the CPU.
    pub const REPLAY_ON_CPU_BELOW: usize = 1 << 24;

    /// Free device memory in bytes (`None` on the CPU).
    pub fn free_memory(&self) -> Result<Option<usize>, HostError> {
        match self {
            Self::Cpu => Ok(None),
            #[cfg(feature = "cuda")]
            Self::Cuda(rt) => rt.memory().map(|(free, _)| Some(free)),
        }
    }

    /// Runs `work` and returns its result with the most device memory it held at once (`None` on the CPU;
    /// [`crate::CudaRuntime::close_mark`]). Work on the device beside it counts too.
    pub fn measure_memory<T>(&self, work: impl FnOnce() -> T) -> Result<(T, Option<usize>), HostError> {
        match self {
            Self::Cpu => Ok((work(), None)),
            #[cfg(feature = "cuda")]
            Self::Cuda(rt) => {
                let mark = rt.mark_memory()?;
                let out = work();
                Ok((out, Some(rt.close_mark(mark))))
            }
        }
    }
}

/// Picks the backend for `request`. `modules` holds the modules CUDA may load ([`crate::CudaRuntime::new`];
/// `None` in CPU-only builds).
///
/// `auto` falls back to the CPU when CUDA is absent or unusable (the reason is kept for [`select_with_reason`]);
/// `cuda` returns [`HostError::CudaUnavailable`] or the load error instead.
pub fn select(request: DeviceRequest, modules: Option<Modules<'_>>) -> Result<Backend, HostError> {
    select_with_reason(request, modules).map(|(backend, _)| backend)
}

/// [`select`], also returning why `auto` chose the CPU (if it did).
pub fn select_with_reason(
    request: DeviceRequest,
    modules: Option<Modules<'_>>,
) -> Result<(Backend, Option<String>), HostError> {
    match request {
        DeviceRequest::Cpu => Ok((Backend::Cpu, None)),
        DeviceRequest::Cuda => open_cuda(modules).map(|b| (b, None)),
        DeviceRequest::Auto => match open_cuda(modules) {
            Ok(b) => Ok((b, None)),
            // `auto` requested nothing: the reason alone, not "the CUDA backend was requested but ...".
            Err(HostError::CudaUnavailable { reason }) => Ok((Backend::Cpu, Some(reason))),
            Err(e) => Ok((Backend::Cpu, Some(e.to_string()))),
        },
    }
}

fn open_cuda(modules: Option<Modules<'_>>) -> Result<Backend, HostError> {
    match detect() {
        #[cfg(feature = "cuda")]
        CudaAvailability::Available { .. } => {
            let modules = modules.filter(|m| !m.ptx.is_empty()).ok_or_else(|| HostError::CudaUnavailable {
                reason: "no PTX module was given to the CUDA backend".to_owned(),
            })?;
            crate::CudaRuntime::new(0, modules).map(|rt| Backend::Cuda(Arc::new(rt)))
        }
        other => {
            let _ = modules;
            Err(HostError::CudaUnavailable { reason: other.to_string() })
        }
    }
}

#[cfg(test)]
mod replay_tests {
    use super::Backend;

    #[test]
    fn small_replays_run_on_the_cpu_and_large_ones_where_the_job_runs() {
        let job = Backend::Cpu;
        // A search's evidence: 10 trials over 45,000 bars.
        assert!(!std::ptr::eq(job.for_replay(10, 45_000), &job));
        assert!(!std::ptr::eq(job.for_replay(1, Backend::REPLAY_ON_CPU_BELOW - 1), &job));
        // A study of 100,000 trials: the job's own backend.
        assert!(std::ptr::eq(job.for_replay(100_000, 45_000), &job));
        assert!(std::ptr::eq(job.for_replay(1, Backend::REPLAY_ON_CPU_BELOW), &job));
        assert!(std::ptr::eq(job.for_replay(usize::MAX, 2), &job));
    }
}
