//! PTX entry points. Each shim computes its thread's element, bounds-checks it, turns raw pointers into
//! slices (shared inputs) or single-element references (its own outputs) and calls the body in
//! [`crate::batch`] that the CPU backend calls too. Names must match [`crate::registry`].
//! One file per family. The greedy walks are kernels of their own in [`crate::walk`] (a block's whole
//! program, not a thread's element); the acting kernels' bodies are in [`crate::act`].

mod backtest;
mod dqn;
mod env;
mod net;
mod ppo;
mod vector;

use core::arch::nvptx;

use crate::net::LOSS_THREADS;
use crate::tile::{Gemm, SHORT_ROWS, gpu_short_rows};

/// Global thread index in a 1-D launch.
#[inline]
fn thread_index() -> usize {
    // SAFETY: reading the special registers has no side effects.
    unsafe { nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize + nvptx::_thread_idx_x() as usize }
}

/// Rows `j0 .. j0 + rows` of `g` by the block's [`LOSS_THREADS`] threads, [`SHORT_ROWS`] at a time.
///
/// # Safety
/// [`gpu_short_rows`]'s, for each group of rows.
#[inline(always)]
unsafe fn short_rows(g: &Gemm, inputs: [*const f32; 4], c: *mut f32, j0: usize, rows: usize, tid: usize) {
    let mut r0 = j0;
    while r0 < (j0 + rows).min(g.m_pad as usize) {
        // SAFETY: the caller's contract.
        unsafe { gpu_short_rows(g, inputs, c, r0, tid, LOSS_THREADS as usize) };
        r0 += SHORT_ROWS;
    }
}
