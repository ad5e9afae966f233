//! tradesim: trading environments for reinforcement learning as GPU kernels written in Rust.
//!
//! The kernel logic lives in [`gpu_kernels`] (plain functions, compiled for the host and to PTX); the runtime
//! that picks a backend and drives trials x envs lives in [`tradesim_host`]. This crate adds the PTX module
//! built at `cargo build` and the command-line tool.
//!
//! ```
//! use tradesim::{DeviceRequest, EnvBatch, EnvConfig, MarketData, PriceSeries, SimLayout, TrialParams};
//!
//! // Three bars; envs decide at the close of bar 0 and fill at the open of bar 1.
//! let prices = PriceSeries::from_open_close(vec![100.0, 100.0, 110.0], vec![100.0, 105.0, 110.0]);
//! let market = MarketData::prices_only(&prices).unwrap();
//! let backend = tradesim::select_backend(DeviceRequest::Cpu).unwrap();
//! let layout = SimLayout::new(1, 2).unwrap(); // one trial, two envs
//! let params = [TrialParams::frictionless(1_000.0)];
//! let cfg = EnvConfig { segment_len: 2, ring_capacity: 16, ..EnvConfig::default() };
//! let mut envs = EnvBatch::new(&backend, &market, &params, layout, cfg).unwrap();
//! envs.reset_segments(&[(0, 2), (0, 2)]).unwrap();
//! envs.step(&[1, 0]).unwrap(); // env 0 goes long at 100, env 1 stays flat
//! let states = envs.states().unwrap();
//! assert_eq!(states[0].equity, 1_050.0); // 10 units marked at the close of 105
//! assert_eq!(states[1].equity, 1_000.0);
//! let ring = envs.transitions().unwrap();
//! assert_eq!(ring[0].reward, (1.05f64).ln() as f32); // reward = ln(equity_1 / equity_0)
//! ```

pub use gpu_kernels::account::env::PortfolioStep;
pub use gpu_kernels::account::{AccountFill, AccountState};
pub use gpu_kernels::backtest::{Metrics, RULE_CROSS, RULE_STATE, SmaCross, Trade};
pub use gpu_kernels::dqn::DqnParams;
pub use gpu_kernels::portfolio::ExitReason;
pub use gpu_kernels::ppo::PpoParams;
pub use gpu_kernels::{
    Action, Bar, BarrierLabel, EnvState, EnvStatus, Moments, TERMINATED, TRUNCATED, Transition, TrialParams,
};
#[cfg(feature = "cuda")]
pub use tradesim_host::KernelProfile;
pub use tradesim_host::{
    Backend, BackendInfo, BacktestResult, BacktestSpec, Cubin, CudaAvailability, DEFAULT_SIGMA_SPAN, DeviceOutputs,
    DeviceRequest, DqnAgent, EnvBatch, EnvConfig, HostError, MarketData, ModuleLoad, ModuleSource, Modules, NetState,
    PortfolioEnvBatch, PortfolioResult, PortfolioScan, PpoAgent, PreparedWalk, PriceSeries, SampleBatch, Signals,
    SimLayout, UniverseMarket, VectorBatch, VectorOutputs, WalkHandle, backtest, backtest_portfolios, detect,
    ewma_sigma,
};

pub mod audit;
pub mod bench;
#[doc(hidden)]
pub mod cli;
pub mod data;
pub mod error;
pub mod evidence;
mod failpoint;
pub mod findings;
pub mod grid;
pub mod html;
pub mod hyperopt;
pub mod job;
pub mod json;
pub mod normal;
pub mod portfolio;
pub mod table;
pub mod train;
pub mod vector;

pub use error::Error;

/// The default spread (a fraction of the price) of every entry point: `tradesim backtest`, `tradesim train`,
/// the search's `[env]`, and Python's `backtest`, `VectorEnv` and `TradingEnv`. Two basis points: what a
/// liquid major pays at a retail broker; a default no kinder than the market.
pub const DEFAULT_SPREAD: &str = "0.0002";
/// The default commission (a fraction of the notional) of every entry point, as [`DEFAULT_SPREAD`].
pub const DEFAULT_COMMISSION: &str = "0.0001";

/// The PTX module built from `gpu-kernels` by `build.rs`.
#[cfg(feature = "cuda")]
pub mod ptx {
    include!(concat!(env!("OUT_DIR"), "/ptx.rs"));

    /// The modules the CUDA backend may load: the PTX, newest target first ([`NEWER`]'s where built, then
    /// [`PTX`]; the runtime loads the first the device can run), and the [`CUBINS`] built from them, which
    /// the runtime loads instead on a device of their architecture. `TRADESIM_MODULE=ptx` leaves the cubins
    /// out (the driver compiles the PTX, as in a build without ptxas: the cold start measured against the
    /// cubin's); unset or `auto`, they are used. For kernel development, the file named by
    /// `TRADESIM_DEV_PTX` alone (a variant of the same kernels, e.g. other launch bounds, measured without
    /// rebuilding the binary; build.rs's entry checks have not run on it, so a missing kernel is reported at
    /// load). Read once per process.
    pub fn sources() -> Result<tradesim_host::Modules<'static>, tradesim_host::HostError> {
        static SOURCES: std::sync::OnceLock<Result<tradesim_host::Modules<'static>, String>> =
            std::sync::OnceLock::new();
        SOURCES
            .get_or_init(|| {
                let Some(path) = std::env::var_os("TRADESIM_DEV_PTX") else {
                    let ptx = NEWER.map(|(_, ptx)| ptx).into_iter().chain([PTX]).collect::<Box<[_]>>();
                    return Ok(tradesim_host::Modules { ptx: Box::leak(ptx), cubins: cubins()? });
                };
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("TRADESIM_DEV_PTX={}: {e}", path.to_string_lossy()))?;
                Ok(tradesim_host::Modules::ptx(Box::leak(Box::new([&*Box::leak(text.into_boxed_str())]))))
            })
            .clone()
            .map_err(tradesim_host::HostError::Config)
    }

    /// [`CUBINS`], or none under `TRADESIM_MODULE=ptx`.
    fn cubins() -> Result<&'static [tradesim_host::Cubin<'static>], String> {
        match std::env::var("TRADESIM_MODULE").as_deref() {
            Err(std::env::VarError::NotPresent) | Ok("auto") => Ok(Box::leak(
                CUBINS.iter().map(|&(arch, image)| tradesim_host::Cubin { arch, image }).collect::<Box<[_]>>(),
            )),
            Ok("ptx") => Ok(&[]),
            Ok(other) => Err(format!("TRADESIM_MODULE={other}: expected `auto` or `ptx`")),
            Err(e) => Err(format!("TRADESIM_MODULE: {e}")),
        }
    }
}

/// Picks a backend for `request`, loading this crate's PTX when CUDA is chosen.
pub fn select_backend(request: DeviceRequest) -> Result<Backend, HostError> {
    select_backend_with_reason(request).map(|(backend, _)| backend)
}

/// Every usable device for `request`: all GPUs of the host when CUDA is chosen (device 0 first), else the
/// CPU once; plus why `auto` chose the CPU (if it did).
pub fn select_backends(request: DeviceRequest) -> Result<(Vec<Backend>, Option<String>), HostError> {
    let (first, reason) = select_backend_with_reason(request)?;
    #[cfg(feature = "cuda")]
    if first.is_cuda()
        && let CudaAvailability::Available { devices } = detect()
    {
        let mut all = vec![first];
        for ordinal in 1..devices {
            let rt = tradesim_host::CudaRuntime::new(ordinal, ptx::sources()?)?;
            all.push(Backend::Cuda(std::sync::Arc::new(rt)));
        }
        return Ok((all, reason));
    }
    Ok((vec![first], reason))
}

/// [`select_backend`], also returning why `auto` chose the CPU (if it did).
pub fn select_backend_with_reason(request: DeviceRequest) -> Result<(Backend, Option<String>), HostError> {
    #[cfg(feature = "cuda")]
    let modules = Some(ptx::sources()?);
    #[cfg(not(feature = "cuda"))]
    let modules = None;
    tradesim_host::backend::select_with_reason(request, modules)
}
