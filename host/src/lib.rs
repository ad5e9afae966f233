//! tradesim's runtime: picks a backend without ever panicking, and drives K trials x E envs on it.
//!
//! The CPU backend calls [`gpu_kernels`]' functions directly (in parallel over envs with rayon); the CUDA
//! backend (feature `cuda`) loads the PTX built from the same functions and launches it through cudarc, one
//! stream per trial group. [`PortfolioSim`] hides which one runs.

pub mod backend;
pub mod error;
pub mod prices;
pub mod sim;

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

pub use backend::{Backend, BackendInfo, CudaAvailability, DeviceRequest, detect, select};
pub use error::HostError;
pub use prices::PriceSeries;
pub use sim::{PortfolioSim, SimLayout};

#[cfg(feature = "cuda")]
pub use cuda::CudaRuntime;
