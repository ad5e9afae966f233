//! Errors of the runtime, each with the context needed to act on it.

/// Everything the runtime can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `--device cuda` (or a GPU-only call) on a machine where CUDA cannot be used.
    #[error("the CUDA backend was requested but cannot be used: {reason}")]
    CudaUnavailable {
        /// What detection found.
        reason: String,
    },
    /// A CUDA driver call failed.
    #[cfg(feature = "cuda")]
    #[error("CUDA driver error while {context}: {source}")]
    Driver {
        /// What the runtime was doing.
        context: String,
        /// The driver's error.
        source: cudarc::driver::DriverError,
    },
    /// The PTX module did not load (bad PTX, or an ISA the driver does not accept).
    #[error("loading the PTX module ({arch}) failed: {reason}")]
    Load {
        /// Target the PTX was built for.
        arch: String,
        /// The driver's reason.
        reason: String,
    },
    /// The module loaded but lacks a kernel the host launches.
    #[error("kernel `{name}` is missing from the PTX module")]
    MissingKernel {
        /// The entry name.
        name: &'static str,
    },
    /// Inputs whose sizes do not fit together.
    #[error("{what}: expected {expected}, got {got}")]
    Shape {
        /// Which input (or kernel argument).
        what: String,
        /// The size required.
        expected: usize,
        /// The size given.
        got: usize,
    },
    /// A layout with no envs or more than 2^32.
    #[error(
        "{trials} trials x {envs_per_trial} envs per trial is not a valid layout (each >= 1, fewer than 2^32 envs)"
    )]
    InvalidLayout {
        /// Trials asked for.
        trials: usize,
        /// Envs per trial asked for.
        envs_per_trial: usize,
    },
    /// A trial parameter out of its range.
    #[error("trial {trial}: {field} = {value} is invalid ({rule})")]
    InvalidParam {
        /// Index of the trial.
        trial: usize,
        /// Field name in `TrialParams`.
        field: &'static str,
        /// The value given.
        value: f64,
        /// The range it must be in.
        rule: &'static str,
    },
    /// An env segment that does not fit the price series.
    #[error("env {env}: segment [{start}, {end}] is invalid for {n_bars} bars (need start <= end < bars)")]
    InvalidSegment {
        /// Index of the env.
        env: usize,
        /// First bar.
        start: u32,
        /// Last bar.
        end: u32,
        /// Bars in the series.
        n_bars: usize,
    },
    /// A price that is not finite and positive.
    #[error("bar {bar}: {field} = {value} is not a finite positive price (or, for sigma, finite and >= 0)")]
    InvalidPrice {
        /// Bar index.
        bar: usize,
        /// open, high, low or close.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// A universe's cell that cannot be used: a price of a bar that is not finite and positive, a carried
    /// close that is not finite and >= 0 (0 only before the symbol's first bar), a flag other than 0 or 1.
    #[error("time {time}, symbol {symbol}: {field} = {value} is invalid")]
    InvalidUniversePrice {
        /// Time index.
        time: usize,
        /// Symbol index.
        symbol: usize,
        /// The field.
        field: &'static str,
        /// The value.
        value: f64,
    },
    /// A feature value that is NaN or infinite.
    #[error("feature {feature} of bar {bar} is not finite")]
    InvalidFeature {
        /// Bar index.
        bar: usize,
        /// Feature column.
        feature: usize,
    },
    /// A job that would not fit in device memory, refused before it allocates.
    #[error(
        "{what} needs {needed} bytes ({:.2} GiB) of device memory; {free} bytes ({:.2} GiB) are free",
        *needed as f64 / 1073741824.0,
        *free as f64 / 1073741824.0
    )]
    OutOfDeviceMemory {
        /// What would be allocated.
        what: String,
        /// Bytes it needs.
        needed: usize,
        /// Bytes free on the device.
        free: usize,
    },
    /// An agent and envs on different backends (a CPU agent acting on CUDA envs or the reverse).
    #[error("the agent and the envs live on different backends")]
    BackendMismatch,
    /// A request the batch's configuration cannot serve.
    #[error("{0}")]
    Config(String),
    /// The kernel profile's reader thread could not start or stopped by a panic.
    #[error("the kernel profile failed: {0}")]
    Profile(String),
    /// An action code outside FLAT/LONG/SHORT.
    #[error("step {step}, env {env}: action code {code} is not 0 (FLAT), 1 (LONG) or 2 (SHORT)")]
    InvalidAction {
        /// Step within the call.
        step: usize,
        /// Env index.
        env: usize,
        /// The code given (any integer type's value).
        code: i128,
    },
    /// A portfolio env's action code outside FLAT/LONG/SHORT.
    #[error("step {step}, env {env}, symbol {symbol}: action code {code} is not 0 (FLAT), 1 (LONG) or 2 (SHORT)")]
    InvalidSymbolAction {
        /// Step within the call.
        step: usize,
        /// Env index.
        env: usize,
        /// Symbol index in the universe.
        symbol: usize,
        /// The code given.
        code: u8,
    },
}

#[cfg(feature = "cuda")]
impl HostError {
    /// Wraps a driver error with what the runtime was doing.
    pub(crate) fn driver(context: impl Into<String>) -> impl FnOnce(cudarc::driver::DriverError) -> Self {
        let context = context.into();
        move |source| Self::Driver { context, source }
    }
}
