//! The register walk ([`greedy_walk_regs`]): the wide layers' weights in registers, a bar a step.

use super::{WalkCandidates, WalkTrial};
use crate::net::{NetArgs, NetTrial, WALK_LAYER_THREADS, WALK_REG_UNITS};
use crate::nvptx_ops::{barrier_sync_count, dyn_smem, prefetch};
use crate::tile::unrolled;
use crate::types::{Bar, EnvState, TrialParams};

/// Named barrier `id` of `count` threads (whole warps).
///
/// # Safety
/// Every thread of the warps counted executes the same sequence of barriers with this id.
#[inline(always)]
unsafe fn named_barrier(id: u32, count: usize) {
    // SAFETY: the caller's contract.
    unsafe { barrier_sync_count(id, count as u32) };
}

/// `sum_j x[j] w[j]` over `j < 32 * ceil(h / 32)` as one FMA chain in ascending `j` from 0 (`dot_aligned`'s
/// order): `x` the shared address of [`WALK_REG_UNITS`] floats (16-byte
/// aligned), `w` a register row. The terms past `h` must be zeros in both (`+0` added to a sum that is never
/// `-0`: the sum of the first `h` terms, bit for bit). Eight inputs (two vector loads) are loaded while the
/// eight before them are summed. The width is tested once per 32 terms, not per 8: each test is a branch
/// and copies of the loaded registers at its join.
///
/// # Safety
/// `x` addresses this block's shared memory, holding `WALK_REG_UNITS` floats.
#[inline(always)]
#[allow(unused_assignments, reason = "the last chunk's load ahead is not read")]
unsafe fn dot_regs(x: u32, w: &[f32; WALK_REG_UNITS], h: usize) -> f32 {
    use crate::nvptx_ops::lds4;
    use crate::tile::fma;
    const LAST: usize = WALK_REG_UNITS / 8 - 1;
    const _: () = assert!(LAST == 15, "the unrolled groups below are 4 of 4 chunks");
    // SAFETY: the caller's contract; chunk c reads floats 8c .. 8c + 8, c <= LAST.
    let load = |c: usize| unsafe { (lds4(x + 32 * c as u32), lds4(x + 32 * c as u32 + 16)) };
    let mut acc = 0.0f32;
    let mut ahead = load(0);
    unrolled!(g in [0, 1, 2, 3] {
        if 32 * g < h {
            unrolled!(i in [0, 1, 2, 3] {
                let c = 4 * g + i;
                let (lo, hi) = ahead;
                ahead = load((c + 1).min(LAST));
                unrolled!(u in [0, 1, 2, 3] {
                    acc = fma(lo[u], w[8 * c + u], acc);
                });
                unrolled!(u in [0, 1, 2, 3] {
                    acc = fma(hi[u], w[8 * c + 4 + u], acc);
                });
            });
        }
    });
    acc
}

/// [`greedy_walk`](super::greedy_walk) with the wide layers' weights in registers, for networks of at most
/// [`WALK_REG_UNITS`] hidden units ([`crate::net::walk_regs_suit`]): a block of
/// [`WALK_REGS_THREADS`](crate::net::WALK_REGS_THREADS) per trial. Layer thread `n` keeps unit `n`'s row of
/// `W2`, lane `o` of the output warp output `o`'s row of `W3` (zeros past the trial's width); `W1` is
/// staged in shared memory. Layer 1 is split at the portfolio floats: the market features' part of each
/// unit's sum (its first `input - 3` terms, which do not depend on the actions) is computed for the next
/// bar while the output warp computes this bar's outputs, and the bar's portfolio floats add their three
/// terms to it (the same FMA chain, so the same bits); a bar that was not the one foreseen (a done env
/// stays on its bar) has its part computed when it is observed. Per bar the critical path is three terms,
/// layer 2's chain, the output chain and three barriers; the env warps step the candidates meanwhile, as in
/// [`greedy_walk`](super::greedy_walk). Every unit is [`dense_unit`](crate::net::dense_unit)'s element, bit for bit.
///
/// # Safety
/// [`greedy_walk`](super::greedy_walk)'s, with dynamic shared memory of [`crate::net::WalkRegsShared::of`]`(args).len` floats
/// (16-byte aligned), `args.hidden <= WALK_REG_UNITS`, `args.outputs <= 32`; one block of
/// `WALK_REGS_THREADS` per trial.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn greedy_walk_regs(
    env_params: *const TrialParams,
    states: *mut EnvState,
    bars: *const Bar,
    features: *const f32,
    trials: *const NetTrial,
    weights: *const f32,
    actions: *mut u8,
    args: NetArgs,
    steps: u32,
) {
    crate::nvptx_ops::follow_previous();
    use crate::net::{
        WALK_OUTPUT_THREAD, WALK_REG_UNITS, WALK_REGS_THREADS, WalkRegsShared, dot_aligned, walk_row_stride,
    };
    use crate::nvptx_ops::shared_addr;
    use crate::tile::fma;
    const LAYER: usize = WALK_LAYER_THREADS;
    // Barrier ids: 0 the whole block, 1 the layer threads, 2 the layer threads and the output warp.
    // SAFETY: every thread of the block takes barrier 0 in the same order.
    let block_barrier = || unsafe { named_barrier(0, WALK_REGS_THREADS) };
    // SAFETY: every layer thread takes barrier 1 in the same order (uniform control flow).
    let layer_barrier = || unsafe { named_barrier(1, LAYER) };
    // SAFETY: every layer thread and the output warp take barrier 2 in the same order.
    let output_barrier = || unsafe { named_barrier(2, LAYER + 32) };
    // SAFETY: the caller's contract. Shared writes and their reads are ordered by the barriers: the
    // candidates and outputs as in `greedy_walk`; `h1` is written before barrier 1 and read after it, `h2`
    // before barrier 2 and read after it, `next` before barrier 1 and read after barrier 2, `now` before the
    // barrier 1 of its branch and read after it; every buffer is rewritten only in a later step, after the
    // block-wide barrier that ends the step of its readers.
    unsafe {
        let Some(trial) = WalkTrial::of(&args, env_params, (bars, features), trials, weights) else { return };
        let WalkTrial { tid, l, f, bars, features, w, .. } = trial;
        let (d, o) = (l.input, l.outputs);
        let h = trial.hidden.min(WALK_REG_UNITS);
        let smem = dyn_smem();
        let ws = WalkRegsShared::of(&args);
        let cands = WalkCandidates::of(smem, &ws.base, o);
        let q = smem.add(ws.base.q);
        let (h1, h2, now, next, w1s) =
            (smem.add(ws.h1), smem.add(ws.h2), smem.add(ws.now), smem.add(ws.next), smem.add(ws.w1));
        let s1 = walk_row_stride(d);
        let mut i = tid;
        while i < h * d {
            let (n, j) = (i / d, i % d);
            *w1s.add(n * s1 + j) = *w.add(l.w1() + n * d + j);
            i += WALK_REGS_THREADS;
        }
        let (layer, lane) = (tid < LAYER, tid.wrapping_sub(WALK_OUTPUT_THREAD));
        let unit = layer && tid < h;
        let output = lane < o;
        let (wr, bias) = register_row(&l, w, h, unit.then_some(tid), output.then_some(lane));
        // Layer 1's bias and its weights of the three portfolio floats (the last inputs).
        let (b1, tail) = if unit {
            let r = w.add(l.w1() + tid * d + f);
            (*w.add(l.b1() + tid), [*r, *r.add(1), *r.add(2)])
        } else {
            (0.0, [0.0; 3])
        };
        let w1row = w1s.add(tid.min(WALK_REG_UNITS - 1) * s1);
        let (h1a, h2a) = (shared_addr(h1), shared_addr(h2));
        let n_bars = bars.len();
        // Layer 1's market part of unit `tid` for bar `cur_bar` and for the foreseen `next_bar` (none: MAX).
        let (mut cur_part, mut cur_bar, mut next_part, mut next_bar) = (0.0f32, usize::MAX, 0.0f32, usize::MAX);
        let io = (states, actions, steps as usize);
        trial.run(&cands, io, block_barrier, |step, a_prev| {
            if tid >= WALK_OUTPUT_THREAD {
                output_barrier();
                if output {
                    *q.add(step % 2 * o + lane) = dot_regs(h2a, &wr, h) + bias;
                }
                return true;
            }
            if !layer {
                return false;
            }
            let (state, pf) = cands.previous(step, a_prev);
            let bar = (*state).bar as usize;
            if bar == next_bar {
                cur_part = next_part;
            } else if bar != cur_bar {
                // Not foreseen (uniform over the layer threads: they read the same state).
                let mut c = tid;
                while c < f {
                    *now.add(c) = features[bar * f + c];
                    c += LAYER;
                }
                layer_barrier();
                cur_part = if unit { dot_aligned(now, w1row, f) } else { 0.0 };
            }
            cur_bar = bar;
            let ahead = bar + 1;
            if ahead < n_bars {
                let mut c = tid;
                while c < f {
                    *next.add(c) = features[ahead * f + c];
                    if ahead + 1 < n_bars {
                        prefetch(features.as_ptr().add((ahead + 1) * f + c));
                    }
                    c += LAYER;
                }
            }
            trial.prefetch_bars(bar, LAYER - 1);
            // `dense_unit` of layer 1: the chain goes on from the market part with the portfolio floats.
            let v = if unit {
                let s = fma(pf[2], tail[2], fma(pf[1], tail[1], fma(pf[0], tail[0], cur_part))) + b1;
                crate::mlp::activate(l.activation, s)
            } else {
                0.0
            };
            *h1.add(tid) = v;
            layer_barrier();
            let v = if unit {
                let s = dot_regs(h1a, &wr, h) + bias;
                crate::mlp::activate(l.activation, s)
            } else {
                0.0
            };
            *h2.add(tid) = v;
            output_barrier();
            // While the output warp computes this bar's outputs: the next bar's market part.
            if ahead < n_bars {
                next_part = if unit { dot_aligned(next, w1row, f) } else { 0.0 };
                next_bar = ahead;
            } else {
                next_bar = usize::MAX;
            }
            true
        });
    }
}

/// The register row of a [`greedy_walk_regs`] thread and its bias: unit `unit`'s row of `W2` (its first `h`
/// weights), or output `output`'s row of `W3`, or zeros (neither).
///
/// # Safety
/// `w` is a trial's parameter block of layout `l`; `h <= WALK_REG_UNITS` and `<= l.hidden`.
#[inline(always)]
unsafe fn register_row(
    l: &crate::mlp::Layout,
    w: *const f32,
    h: usize,
    unit: Option<usize>,
    output: Option<usize>,
) -> ([f32; WALK_REG_UNITS], f32) {
    const _: () = assert!(WALK_REG_UNITS == 128, "the unrolled loads below are 16 x 8");
    // SAFETY: the caller's contract; reads stay in the row's first `h` floats.
    unsafe {
        let (row, bias, live) = match (unit, output) {
            (Some(n), _) => (w.add(l.w2() + n * l.hidden), *w.add(l.b2() + n), h),
            (None, Some(o)) => (w.add(l.w3() + o * l.hidden), *w.add(l.b3() + o), h),
            (None, None) => (w, 0.0, 0),
        };
        // Every element written at a constant index (an array-repeat initializer is a loop with a variable
        // index, which keeps the row in local memory).
        let mut wr: [f32; WALK_REG_UNITS] = core::mem::zeroed();
        unrolled!(c in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            unrolled!(u in [0, 1, 2, 3, 4, 5, 6, 7] {
                wr[8 * c + u] = if 8 * c + u < live { *row.add(8 * c + u) } else { 0.0 };
            });
        });
        (wr, bias)
    }
}
