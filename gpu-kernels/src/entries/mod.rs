//! PTX entry points, shims only. Each computes its thread's element, bounds-checks it, turns raw pointers
//! into slices (shared inputs) or single-element references (its own outputs) and calls the body in
//! [`crate::batch`] (or its family's module) that the CPU backend calls too; the kernels of a block's fused
//! program read the block's index and call it ([`crate::chain::gpu_chain`], [`crate::backward::gpu_backward`],
//! the acting kernels' bodies in [`crate::act`]). Names must match [`crate::registry`]. One file per family.
//! The kernels whose whole block works as one are kernels of their own in their family's module, not shims:
//! the greedy walks ([`crate::walk`]), DQN's TD and Adam kernels (`crate::dqn::blocks`), PPO's gather,
//! advantage-moment, loss and gradient-norm kernels (`crate::ppo::blocks`).

mod backtest;
mod dqn;
mod env;
mod net;
mod ppo;
mod rows;
mod vector;

use core::arch::nvptx;

/// Global thread index in a 1-D launch.
#[inline]
fn thread_index() -> usize {
    // SAFETY: reading the special registers has no side effects.
    unsafe { nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize + nvptx::_thread_idx_x() as usize }
}
