//! The CPU backend: [`gpu_kernels`]' per-element bodies and the tile contract's products, in parallel
//! (rayon) where there is enough work, with the same bits as the CUDA backend.
//!
//! - [`env`]: the envs of a batch, their replay ring and reward statistics, the sampler.
//! - [`tile`]: the products of a plan ([`gpu_kernels::tile::Gemm`]s) and the greedy walk.
//! - [`dqn`], [`ppo`]: the learners' buffers and steps.
//! - [`backtest`]: the backtest of many columns; [`portfolio`]: the backtest of many portfolios.
//! - [`portfolio_env`]: the portfolio envs (one cash account over N symbols each).

pub(crate) mod backtest;
pub(crate) mod dqn;
pub(crate) mod env;
pub(crate) mod portfolio;
pub(crate) mod portfolio_env;
pub(crate) mod ppo;
pub(crate) mod tile;
pub(crate) mod vector;
