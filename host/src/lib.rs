//! tradesim's runtime: picks a backend without ever panicking, and drives K trials x E envs on it.
//!
//! The CPU backend calls [`gpu_kernels`]' functions directly (in parallel over envs with rayon); the CUDA
//! backend (feature `cuda`) loads the PTX built from the same functions and launches it through cudarc, one
//! stream per trial group. [`EnvBatch`] hides which one runs.
//!
//! Layout, as candle splits its backends: the public modules here dispatch and hold the public types
//! ([`env_batch`], [`dqn`], [`ppo`], [`mod@backtest`], [`types`]); `cpu/` holds the CPU backend and `cuda/` the
//! CUDA one (device buffers in `cuda/buffers.rs`, every `unsafe` launch in `cuda/launch/`). Both backends
//! call the same per-element rules of [`gpu_kernels`] and build their stages' plans with `plan.rs`; neither
//! imports the other.

pub mod backend;
pub mod backtest;
pub mod dqn;
pub mod env_batch;
pub mod error;
pub mod market;
pub mod module;
pub mod options;
pub mod portfolio;
pub mod portfolio_env;
pub mod ppo;
pub mod prices;

pub mod init;
pub mod types;
pub mod universe;
pub mod vector;
pub mod walk;

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
mod plan;

pub use backend::{Backend, BackendInfo, CudaAvailability, DeviceRequest, detect, select};
pub use backtest::{BacktestResult, BacktestSpec, Signals, backtest};
pub use dqn::{DqnAgent, NetState};
pub use env_batch::{EnvBatch, EnvConfig, SampleBatch, SimLayout};
pub use error::HostError;
pub use market::{DEFAULT_SIGMA_SPAN, MarketData, UniverseMarket, ewma_sigma, ewma_sigma_of_returns};
pub use module::{Cubin, ModuleLoad, ModuleSource, Modules};
pub use options::KernelOptions;
pub use portfolio::backtest_portfolios;
pub use portfolio_env::PortfolioEnvBatch;
pub use ppo::PpoAgent;
pub use prices::PriceSeries;
pub use types::{DeviceOutputs, PortfolioResult, PortfolioScan, VectorOutputs};
pub use vector::VectorBatch;
pub use walk::{PreparedWalk, WalkHandle};

#[cfg(feature = "cuda")]
pub use cuda::{CudaRuntime, KernelProfile};
