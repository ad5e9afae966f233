//! The network kernels: a plan's products, fused chains, the backward pass, and the FMA probe.

use super::thread_index;
use crate::act::chain_block;
use crate::net::{NetArgs, NetTrial};
use crate::nvptx_ops::dyn_smem;
use crate::tile::{GEMM_SHARED, Gemm, gpu_tile};
use core::arch::nvptx;

const _: () = assert!(GEMM_SHARED * 4 <= 17_408, "gemm_tiles declares 17,408 bytes of shared memory");

const _: () = assert!(crate::tile::NARROW_ROWS * (crate::tile::TILE_K + 1) + crate::tile::TILE_K * 4 <= GEMM_SHARED);

/// One tile of one product of the plan (block `(tile, problem)`, 256 threads; [`crate::tile::gpu_tile`]).
///
/// # Safety
/// `problems`: `grid_dim_y` products; `buffers`: a device pointer per buffer index they name, each long
/// enough for [`Gemm::extent`]; no product writes what another product of the launch reads; 256 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tiles(problems: *const Gemm, buffers: *const u64) {
    crate::nvptx_ops::follow_previous();
    let smem: u64;
    // SAFETY: declares this block's tiles (GEMM_SHARED floats) and takes their generic address.
    unsafe {
        core::arch::asm!(
            ".shared .align 16 .b8 gemm_smem[17408];", // GEMM_SHARED floats
            "cvta.shared.u64 {p}, gemm_smem;",
            p = out(reg64) smem,
        );
    }
    // SAFETY: the caller's contract; the block index picks its product and tile.
    unsafe {
        // A copy in registers: read through `problems`, every field would be loaded again after each store
        // to shared memory (the compiler cannot tell that the stores do not alias the plan).
        let g: Gemm = *problems.add(nvptx::_block_idx_y() as usize);
        gpu_tile(&g, nvptx::_block_idx_x() as usize, buffers, smem as *mut f32, nvptx::_thread_idx_x() as usize);
    }
}

/// One row tile of one chain of the plan (block `(tile, chain)`, [`crate::chain::CHAIN_THREADS`] threads,
/// [`crate::chain::ChainShared`] bytes of dynamic shared memory; [`crate::chain::gpu_chain`]).
///
/// # Safety
/// `chains`: `grid_dim_y` row-major chains; `buffers`: a device pointer per buffer index they name, each
/// long enough for their products ([`crate::chain::Chain::layers`]); no chain writes what another reads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_chain(chains: *const crate::chain::Chain, buffers: *const u64, net: NetArgs) {
    use crate::chain::{CHAIN_THREADS, ROWS_PER_WARP, Staged};
    // SAFETY: the caller's contract.
    unsafe { chain_block::<ROWS_PER_WARP, { CHAIN_THREADS as usize / 32 }, true, _>(chains, buffers, &net, |_| Staged) }
}

/// [`mlp_chain`] on tiles of [`crate::chain::WIDE_ROWS`] rows: blocks of [`crate::chain::WIDE_THREADS`] threads,
/// [`crate::chain::Chain::shared`] bytes of dynamic shared memory.
///
/// # Safety
/// As [`mlp_chain`], for chains of wide tiles.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_chain_wide(
    chains: *const crate::chain::Chain,
    buffers: *const u64,
    net: NetArgs,
) {
    use crate::chain::{ROWS_PER_WARP, Staged, WIDE_THREADS};
    // SAFETY: the caller's contract.
    unsafe { chain_block::<ROWS_PER_WARP, { WIDE_THREADS as usize / 32 }, false, _>(chains, buffers, &net, |_| Staged) }
}

/// One row tile of one product of the plan with `B` staged whole (block `(tile, product)`,
/// [`crate::chain::CHAIN_THREADS`] threads, [`crate::chain::RowsShared`] bytes of dynamic shared memory for
/// the largest product; [`crate::chain::gpu_rows`]). With `from_out != 0`, product `i`'s `A` is computed
/// from product `i` of `seconds` (the hidden gradient of layer 1 from the output gradient: `gpu_rows`'
/// `from`); else `seconds` is not read.
///
/// # Safety
/// `problems`: `grid_dim_y` products that [`crate::chain::rows_suit`]; with `from_out`, `seconds` as many
/// products, each `gpu_rows`' `from` of its product; `buffers`: a device pointer per buffer index they
/// name, each long enough for them; no product writes what another reads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_rows(
    problems: *const Gemm,
    seconds: *const Gemm,
    buffers: *const u64,
    from_out: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: the caller's contract.
    unsafe { staged_rows::<{ crate::chain::CHAIN_THREADS as usize / 32 }, true>(problems, seconds, buffers, from_out) }
}

/// [`mlp_rows`] on tiles of [`crate::chain::WIDE_ROWS`] rows: blocks of [`crate::chain::WIDE_THREADS`] threads,
/// [`crate::chain::RowsShared`] bytes for wide tiles.
///
/// # Safety
/// As [`mlp_rows`], for wide tiles.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_rows_wide(
    problems: *const Gemm,
    seconds: *const Gemm,
    buffers: *const u64,
    from_out: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: the caller's contract.
    unsafe { staged_rows::<{ crate::chain::WIDE_THREADS as usize / 32 }, false>(problems, seconds, buffers, from_out) }
}

/// The block `(tile, product)` of a staged-products launch: `W` warps, operands a step ahead or not
/// ([`crate::chain::gpu_rows`]).
///
/// # Safety
/// As [`mlp_rows`], with blocks of `32 W` threads.
#[inline(always)]
unsafe fn staged_rows<const W: usize, const AHEAD: bool>(
    problems: *const Gemm,
    seconds: *const Gemm,
    buffers: *const u64,
    from_out: u32,
) {
    // SAFETY: the caller's contract; the block index picks its product and row tile.
    unsafe {
        let i = nvptx::_block_idx_y() as usize;
        let g: Gemm = *problems.add(i);
        let from: Option<Gemm> = if from_out != 0 { Some(*seconds.add(i)) } else { None };
        let (tile, thread) = (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize);
        crate::chain::gpu_rows::<W, AHEAD>(&g, tile, buffers, dyn_smem(), thread, from.as_ref());
    }
}

/// The fused backward pass of a training step: block `(side x groups + group, chunk x n_trials + trial)`,
/// [`crate::backward::BACKWARD_THREADS`] threads, [`crate::backward::BackwardShared`] bytes of dynamic shared
/// memory ([`crate::backward::gpu_backward`]).
///
/// # Safety
/// As [`crate::backward::gpu_backward`]; the grid is [`crate::backward::backward_blocks`]`(&net)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_backward(trials: *const NetTrial, buffers: *const u64, net: NetArgs) {
    // SAFETY: the caller's contract.
    unsafe { backward_block(trials, buffers, &net, false) }
}

/// [`mlp_backward`] after the hidden gradient of layer 1 was stored (`mlp_rows`): the layer-1 side's blocks
/// stage their units' columns of it instead of computing them, so each reads only its own columns (no
/// `D2` rows, no `W2`): the weight and bias gradients' partial sums of a step whose blocks take many waves.
///
/// # Safety
/// As [`mlp_backward`]; the training buffer holds the step's `D1` ([`crate::net::Stage::Backward1`]).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_gradients(trials: *const NetTrial, buffers: *const u64, net: NetArgs) {
    // SAFETY: the caller's contract.
    unsafe { backward_block(trials, buffers, &net, true) }
}

/// The block `(group, chunk x n_trials + trial)` of `mlp_backward` or (`stored`) `mlp_gradients`.
///
/// # Safety
/// As [`mlp_backward`] (with `stored`, [`mlp_gradients`]).
#[inline(always)]
unsafe fn backward_block(trials: *const NetTrial, buffers: *const u64, net: &NetArgs, stored: bool) {
    // SAFETY: the caller's contract; the block index picks the group and the (chunk, trial).
    unsafe {
        let (x, block) = (nvptx::_block_idx_x() as usize, nvptx::_block_idx_y() as usize);
        let thread = nvptx::_thread_idx_x() as usize;
        crate::backward::gpu_backward(trials, buffers, net, dyn_smem(), (x, block, thread), stored);
    }
}

/// `iters` rounds of 8 independent FMA chains per thread, the sum written to `out[thread]` (the FP32
/// throughput reference of the benchmarks: 16 FLOP per thread and round).
///
/// # Safety
/// `out`: one float per launched thread.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn fma_peak(out: *mut f32, iters: u32) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let mut acc = [0.0f32; 8];
    let (a, b) = (1.0f32 + i as f32 * 1e-9, 0.999_f32);
    for _ in 0..iters {
        for (j, x) in acc.iter_mut().enumerate() {
            *x = crate::tile::fma(*x, b, a + j as f32);
        }
    }
    // SAFETY: one output per thread, as documented.
    unsafe { *out.add(i) = acc.iter().sum() };
}
