//! The fused backward pass of a training step (`mlp_backward`): the hidden gradient of layer 1 and every
//! weight and bias gradient of one (trial, gradient chunk, group of [`BACKWARD_UNITS`] hidden units) in one
//! block, instead of an `mlp_rows` launch for [`Stage::Backward1`] and a `gemm_tiles` launch for
//! [`Stage::Gradients`] (whose 64 x 64 tiles of short products, K = 128 samples, ran at ~12% of the FMA
//! peak and read every operand twice through global memory).
//!
//! **Bits.** Each value is the element of a [`crate::net::plan`] product, computed in the product contract's
//! order ([`crate::tile`]): `D1(s, j)` is `fma` over the units `n` of layer 2 ascending from 0, masked by the
//! activation of `A1`; a chunk's weight gradient is `fma` over its samples ascending from 0 (a bias gradient is the
//! product with a column of ones: `fma(delta, 1, acc)`); zero where the product writes zero (outside a
//! trial's active width). So the CPU, which runs the products one by one, needs no change. The terms a block
//! adds past the active sizes (zero-padded units up to a multiple of 4) are `fma(0, 0, acc) = acc`: a sum that
//! starts at +0 is never -0, so adding +0 leaves its bits.
//!
//! **Shape.** The blocks of one trial's chunk split the work in two sides: the layer-1 side (`D1` and the
//! gradients that read it, `W1` and `b1`), a block per group of [`BACKWARD_UNITS`] units, and the layer-2
//! side (`W2`, `b2`, `W3`, `b3`, which need only `D2` and the activations), a block per group of
//! [`BACKWARD_UNITS2`] units; both sides' blocks cost about the same. A DQN step (40 trial-chunks, H = 128)
//! is 240 blocks of [`BACKWARD_THREADS`], two a multiprocessor: one wave on the H200's 132. (One block per
//! 32-unit group doing both sides took 41.8 us a step: 160 blocks, 28 multiprocessors running two.) Each
//! block walks the chunk's samples in sub-tiles of [`BACKWARD_ROWS`], staging sub-tile `i + 1` with
//! `cp.async` while it computes sub-tile `i` ([`BackwardShared`] says where). Per sub-tile, the layer-1 side:
//! 1. `D1` of the group's units: warp `w` takes samples `4 w .. 4 w + 4`, lane `l` unit `u0 + l`, a chain over
//!    the staged `D2` rows (broadcast loads) and the group's columns of `W2` (staged once per block,
//!    transposed: a lane's four inputs are one vector load);
//! 2. after a barrier, warp `w` owns rows `u0 + 4 w .. + 4` of the `W1` gradient (lane `l`: inputs `l` and
//!    `l + 32`), lanes 0-3 the `b1` sums of those units (from the `D1` values the lane loads for the `W1`
//!    terms).
//!
//! The layer-2 side: warp `w` owns rows `u0 + 8 w .. + 8` of the `W2` gradient (lane `l`: columns `4 l .. 4 l +
//! 4`), the `W3` sums of those units (lane `l`: unit `l / 4`, output `l % 4`), lanes 0-7 their `b2` sums and
//! lanes 8-11 (group 0, warp 0) the `b3` sums. The accumulators stay in registers across sub-tiles, so a
//! chunk's sum runs over its samples in order.
//!
//! The layer-1 hidden gradient itself is not stored: only the gradients read it.
//!
//! [`Stage::Backward1`]: crate::net::Stage::Backward1
//! [`Stage::Gradients`]: crate::net::Stage::Gradients

use crate::net::{NetArgs, grad_chunks, walk_row_stride};

/// Threads of an `mlp_backward` block (8 warps).
pub const BACKWARD_THREADS: u32 = 256;
/// Hidden units of a layer-1 side block's group.
pub const BACKWARD_UNITS: usize = 32;
/// Hidden units of a layer-2 side block's group (8 rows of the `W2` gradient a warp).
pub const BACKWARD_UNITS2: usize = 64;
/// Samples of a sub-tile (4 a warp in the hidden-gradient step).
pub const BACKWARD_ROWS: usize = 32;
/// The widest hidden layer the kernel takes (a lane's four columns of the `W2` gradient).
pub const BACKWARD_MAX_HIDDEN: usize = 128;
/// The most inputs (a lane's two inputs of the `W1` gradient).
pub const BACKWARD_MAX_INPUT: usize = 64;
/// The most outputs (four lanes per unit for the `W3` gradient).
pub const BACKWARD_MAX_OUTPUTS: usize = 4;

/// Where an `mlp_backward` block keeps its operands in shared memory (float offsets from a 16-byte aligned
/// base). Two stages of sub-tile operands (`D2`; the layer-2 side's `A1` rows and output gradients; the
/// layer-1 side's inputs; the group's columns of `A2` (layer-2 side) or `A1` (the layer-1 side's ReLU mask):
/// offsets inside a stage), the group's columns of `W2` and the sub-tile's `D1` (layer-1 side), and a 1.0 (the
/// bias gradients' second factor). Both sides use the one layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackwardShared {
    /// Row stride of the staged `D2` and `A1` rows ([`walk_row_stride`] of H).
    pub sd: usize,
    /// Row stride of the staged input rows ([`walk_row_stride`] of D).
    pub so: usize,
    /// `W2`'s columns `u0 ..` of the group, transposed: [`BACKWARD_UNITS`] rows of H (row stride `sd`), so a
    /// lane reads four inputs of its unit with one vector load.
    pub w2: usize,
    /// The sub-tile's `D1` of the group: [`BACKWARD_ROWS`] rows of [`BACKWARD_UNITS`].
    pub d1: usize,
    /// A 1.0.
    pub one: usize,
    /// First float of each stage.
    pub stage: [usize; 2],
    /// In a stage: the `D2` rows.
    pub d2: usize,
    /// In a stage: the `A1` rows (layer-2 side).
    pub a1: usize,
    /// In a stage: the input rows (layer-1 side; the slot of `a1`).
    pub obs: usize,
    /// In a stage: the group's columns of `A2` or `A1` ([`BACKWARD_UNITS2`] a row).
    pub a2: usize,
    /// In a stage: the output gradients (4 a row).
    pub dout: usize,
    /// Floats in all.
    pub len: usize,
}

impl BackwardShared {
    /// The layout for `net`'s sizes.
    pub fn of(net: &NetArgs) -> Self {
        let (d, hs) = (net.input as usize, net.hidden as usize);
        let (sd, so) = (walk_row_stride(hs), walk_row_stride(d));
        let (r, g) = (BACKWARD_ROWS, BACKWARD_UNITS);
        let w2 = 0;
        let d1 = w2 + g * sd;
        let one = d1 + r * g;
        let (d2, a1) = (0, r * sd);
        // The layer-1 side reads no A1 rows and the layer-2 side no inputs: one slot holds either.
        let obs = a1;
        let a2 = a1 + r * sd.max(so);
        let dout = a2 + r * BACKWARD_UNITS2;
        let stage_len = dout + r * BACKWARD_MAX_OUTPUTS;
        let first = one + 4;
        Self {
            sd,
            so,
            w2,
            d1,
            one,
            stage: [first, first + stage_len],
            d2,
            a1,
            obs,
            a2,
            dout,
            len: first + 2 * stage_len,
        }
    }

    /// Bytes of dynamic shared memory a block needs.
    pub fn bytes(&self) -> usize {
        4 * self.len
    }
}

/// Whether `mlp_backward` takes `net`: hidden width (the row stride) at most [`BACKWARD_MAX_HIDDEN`] and a
/// multiple of 4 (16-byte rows), at most [`BACKWARD_MAX_INPUT`] inputs and [`BACKWARD_MAX_OUTPUTS`] outputs.
pub fn backward_suit(net: &NetArgs) -> bool {
    let (d, hs, o) = (net.input as usize, net.hidden as usize, net.outputs as usize);
    (1..=BACKWARD_MAX_HIDDEN).contains(&hs)
        && hs.is_multiple_of(4)
        && (1..=BACKWARD_MAX_INPUT).contains(&d)
        && (1..=BACKWARD_MAX_OUTPUTS).contains(&o)
}

/// Unit groups of the layer-1 side and of the layer-2 side.
pub fn backward_groups(net: &NetArgs) -> (usize, usize) {
    let hs = net.hidden as usize;
    (hs.div_ceil(BACKWARD_UNITS), hs.div_ceil(BACKWARD_UNITS2))
}

/// Blocks of the launch: (unit groups of both sides, gradient chunks x trials). Block `(x, c * n_trials + t)`
/// writes the partial sums of chunk `c` of trial `t`: for layer-1 group `x` while `x < g1` (`W1`, `b1`),
/// else for layer-2 group `x - g1` (`W2`, `b2`, `W3`, `b3`), `(g1, g2)` = [`backward_groups`].
pub fn backward_blocks(net: &NetArgs) -> (usize, usize) {
    let (g1, g2) = backward_groups(net);
    (g1 + g2, grad_chunks(net.batch as usize) * net.n_trials as usize)
}

/// Block `(x, block)` of `mlp_backward` ([`backward_blocks`]): for chunk `block / n_trials` of trial `block %
/// n_trials`, the layer-1 side of 32-unit group `x` (`D1` and the `W1` and `b1` gradients) or, past the
/// layer-1 groups, the layer-2 side of a 64-unit group (the `W2`, `b2`, `W3` and `b3` gradients, which do not
/// need `D1`), from the
/// training buffer's `D2`, `A1`, `A2` and output gradients, the sampled inputs and the online `W2`
/// ([`crate::net::buffers`]).
///
/// # Safety
/// [`backward_suit`]`(net)`; `trials`: `net.n_trials` sizes with `hidden <= net.hidden` and `batch <=
/// net.batch`; `buffers` holds device pointers for the buffers [`crate::net::plan`]'s
/// [`crate::net::AFTER_LOSS`] products name, each long enough for them (16-byte aligned); `smem`: this
/// block's dynamic shared memory of [`BackwardShared::of`]`(net).len` floats, 16-byte aligned; every thread
/// of the block calls this with `thread < BACKWARD_THREADS`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn gpu_backward(
    trials: *const crate::net::NetTrial,
    buffers: *const u64,
    net: &NetArgs,
    smem: *mut f32,
    (x, block, thread): (usize, usize, usize),
    stored: bool,
) {
    use crate::net::{Work, buffers as bufs, grad_chunk};
    use crate::nvptx_ops::{cp_async_wait_all, cp_async4, cp_async16, lds, lds4, shared_addr, sts};
    use crate::tile::{fma, unrolled};
    use core::arch::nvptx::_syncthreads;
    const G: usize = BACKWARD_UNITS;
    const S: usize = BACKWARD_ROWS;
    const T: u32 = BACKWARD_THREADS;
    const G2: usize = BACKWARD_UNITS2;
    let l = net.layout();
    let (d, hs, o, b, n_trials) = (l.input, l.hidden, l.outputs, net.batch as usize, net.n_trials as usize);
    let (c, t) = (block / n_trials, block % n_trials);
    let groups = backward_groups(net).0;
    let first = x < groups;
    let (group, u0) = if first { (x, x * G) } else { (x - groups, (x - groups) * G2) };
    let sh = BackwardShared::of(net);
    let w = Work::of(net);
    let (lane, warp) = (thread % 32, thread / 32);
    // SAFETY: the caller's contract: every global read is inside the trial's active rows (`k` samples from
    // `s0`) and the buffers' extents, every shared offset inside `sh.len` floats; the barriers order each
    // stage's copies (waited by every thread) before its reads, and its reads before the next copies into it.
    unsafe {
        let p = *trials.add(t);
        let (h, bt) = (p.hidden as usize, p.batch as usize);
        let chunk = grad_chunk(b);
        let s0 = c * chunk;
        let k = bt.saturating_sub(s0).min(chunk);
        let buf = |i: u32| *buffers.add(i as usize) as *mut f32;
        let work = buf(bufs::WORK);
        let d2g = work.add(w.at(Work::D2, t) + s0 * hs);
        let a1g = work.add(w.at(Work::A1, t) + s0 * hs);
        let d1g = work.add(w.at(Work::D1, t) + s0 * hs);
        let a2g = work.add(w.at(Work::A2, t) + s0 * hs);
        let doutg = work.add(w.at(Work::DOUT, t) + s0 * o);
        let obsg = buf(bufs::OBS).add(t * b * d + s0 * d);
        let params = buf(bufs::ONLINE).add(t * l.params());
        let partial = buf(bufs::PARTIAL).add((c * n_trials + t) * l.params());
        let base = shared_addr(smem);
        let at = |f: usize| base + 4 * f as u32;
        // Stage `st`'s first float (arithmetic: an indexed `sh.stage` put the layout in local memory).
        let stage_at = |st: usize| sh.stage[0] + st * (sh.stage[1] - sh.stage[0]);
        // The layer-1 side: the group's columns of W2, transposed (zero past the active width: their terms add
        // +0). Consecutive threads read consecutive columns of a W2 row.
        // (Nothing to read for the layer-2 side, a stored D1 or an empty chunk.)
        let mut i = if first && !stored && k > 0 { thread as u32 } else { (hs * G) as u32 };
        while i < (hs * G) as u32 {
            let (n, j) = ((i / G as u32) as usize, (i % G as u32) as usize);
            let dst = at(sh.w2 + j * sh.sd + n);
            if n < h && u0 + j < hs {
                cp_async4(dst, params.add(l.w2() + n * hs + u0 + j));
            } else {
                sts(dst, 0.0);
            }
            i += T;
        }
        if thread == 0 {
            sts(at(sh.one), 1.0);
        }
        // The group's `width` columns of an H-wide region (A1 for the layer-1 side's mask, A2 for the W3
        // gradient) into the stage's `a2` rows.
        let group_cols = |src: *const f32, sb: usize, r0: usize, rows: u32, width: usize| {
            let quads = (width / 4) as u32;
            let mut i = thread as u32;
            while i < rows * quads {
                let (r, q) = ((i / quads) as usize, 4 * (i % quads) as usize);
                if u0 + q < hs {
                    cp_async16(at(sb + sh.a2 + r * G2 + q), src.add((r0 + r) * hs + u0 + q));
                }
                i += T;
            }
        };
        // `width` floats of each of `rows` rows (row r at `src + r * src_stride`) to shared float `dst + r *
        // dst_stride`, 4 bytes a copy (the inputs' and output gradients' rows are not 16-byte aligned).
        let narrow_rows =
            |src: *const f32, src_stride: usize, dst: usize, dst_stride: usize, rows: u32, width: usize| {
                let mut i = thread as u32;
                while i < rows * width as u32 {
                    let (r, j) = ((i / width as u32) as usize, (i % width as u32) as usize);
                    cp_async4(at(dst + r * dst_stride + j), src.add(r * src_stride + j));
                    i += T;
                }
            };
        // Sub-tile `sub`'s operands into stage `st` (rows below `k` only; 16-byte copies of the H-wide rows):
        // D2 for both sides; the group's A1 columns and the inputs for the layer-1 side; all of A1, the group's
        // A2 columns and the output gradients for the layer-2 side. With `stored`, the layer-1 side's D2 and A1
        // columns are the group's columns of the stored D1 instead (in the A1 columns' slot).
        let stage = |sub: usize, st: usize| {
            let r0 = sub * S;
            let rows = (k - r0).min(S) as u32;
            let sb = stage_at(st);
            let q4 = (hs / 4) as u32;
            let mut i = if first && stored { rows * q4 } else { thread as u32 };
            while i < rows * q4 {
                let (r, q) = ((i / q4) as usize, 4 * (i % q4) as usize);
                let src = (r0 + r) * hs + q;
                cp_async16(at(sb + sh.d2 + r * sh.sd + q), d2g.add(src));
                if !first {
                    cp_async16(at(sb + sh.a1 + r * sh.sd + q), a1g.add(src));
                }
                i += T;
            }
            if first {
                group_cols(if stored { d1g } else { a1g }, sb, r0, rows, G);
                narrow_rows(obsg.add(r0 * d), d, sb + sh.obs, sh.so, rows, d);
            } else {
                group_cols(a2g, sb, r0, rows, G2);
                narrow_rows(doutg.add(r0 * o), o, sb + sh.dout, BACKWARD_MAX_OUTPUTS, rows, o);
            }
        };
        // The W2 columns above are copied before the grid-dependency wait: the kernel launched just before
        // this one (the loss kernel, or `mlp_rows` before a stored D1) does not write the weights
        // (`EARLY_READS`); everything below reads what it wrote.
        crate::nvptx_ops::follow_previous();
        let subs = k.div_ceil(S);
        if subs > 0 {
            stage(0, 0);
        }
        // This warp's units (rows of the W1 or W2 gradient: 4 or 8 from u0 + 4 warp or u0 + 8 warp) exist
        // (uniform over the warp).
        let rows_of_warp = if first { 4 } else { 8 };
        let w0 = u0 + rows_of_warp * warp;
        let live = w0 < hs;
        // Layer-1 side: the W1 gradient (4 units x inputs lane and lane + 32), lanes 0-3: the b1 gradient.
        // Layer-2 side: the W2 gradient (8 units x columns 4 lane ..; past the width it reads column 0 and
        // stores nothing), the W3 gradient (unit w0 + l / 4, output l % 4), lanes 0-7: b2 of unit w0 + l,
        // 8-11: b3 (group 0, warp 0).
        let mut g2 = [[0.0f32; 4]; 8];
        let mut g1 = [[0.0f32; 2]; 4];
        let mut small = 0.0f32;
        let mut small2 = 0.0f32;
        let cb = if 4 * lane < hs { 4 * lane } else { 0 };
        let (x1, x2) = (lane.min(d - 1), if lane + 32 < d { lane + 32 } else { lane.min(d - 1) });
        let (x1, x2) = (4 * x1 as u32, 4 * x2 as u32);
        let mut sub = 0;
        while sub < subs {
            cp_async_wait_all();
            _syncthreads();
            if sub + 1 < subs {
                // The other stage was last read in sub-tile sub - 1, which every thread has left (barrier).
                stage(sub + 1, (sub + 1) % 2);
            }
            let sb = stage_at(sub % 2);
            let rows = (k - sub * S).min(S);
            // The small sums' two factors: address and row stride (the second is the 1.0 for a bias).
            // (The layer-1 side's b1 sums take their factor from the W1 step's D1 loads, and 1.0.)
            let (fa, sa, fb, sbb) =
                (sb + sh.a2 + 8 * warp + lane / 4, G2, sb + sh.dout + lane % 4, BACKWARD_MAX_OUTPUTS);
            let (fc, sc) = match lane {
                0..8 => (sb + sh.d2 + w0 + lane, sh.sd),
                8..12 => (sb + sh.dout + lane - 8, BACKWARD_MAX_OUTPUTS),
                _ => (sh.one, 0),
            };
            let (fa, fb, sa4, sb4) = (at(fa), at(fb), 4 * sa as u32, 4 * sbb as u32);
            let (fc, sc4, one) = (at(fc), 4 * sc as u32, at(sh.one));
            let (rows32, sd4) = (rows as u32, 4 * sh.sd as u32);
            if first && !stored {
                // 1. D1 of samples 4 warp + i, unit u0 + lane.
                let rows_at: [u32; 4] = core::array::from_fn(|i| at(sb + sh.d2 + (4 * warp + i) * sh.sd));
                let col = at(sh.w2 + lane * sh.sd);
                // Inputs n .. n + 4 (byte offset 4 n into the rows and into the lane's transposed column).
                let load = |o: u32| {
                    let x: [[f32; 4]; 4] = core::array::from_fn(|i| lds4(rows_at[i] + o));
                    (x, lds4(col + o))
                };
                let step = |acc: &mut [f32; 4], (x, wv): ([[f32; 4]; 4], [f32; 4])| {
                    unrolled!(i in [0, 1, 2, 3] {
                        unrolled!(q in [0, 1, 2, 3] {
                            acc[i] = fma(x[i][q], wv[q], acc[i]);
                        });
                    });
                };
                let mut acc = [0.0f32; 4];
                // Eight inputs a step, both sets loaded before their FMAs (u32 offsets: 64-bit counters doubled
                // the loop's integer work).
                let (h4, mut o) = (4 * h.next_multiple_of(4) as u32, 0u32);
                while o + 32 <= h4 {
                    let (x, y) = (load(o), load(o + 16));
                    step(&mut acc, x);
                    step(&mut acc, y);
                    o += 32;
                }
                if o < h4 {
                    step(&mut acc, load(o));
                }
                let j = u0 + lane;
                unrolled!(i in [0, 1, 2, 3] {
                    let r = 4 * warp + i;
                    // The gradient through the activation of `A1` (`finish` of the backward epilogue).
                    let v = if r < rows && j < h {
                        crate::mlp::activate_grad(l.activation, acc[i], lds(at(sb + sh.a2 + r * G2 + lane)))
                    } else {
                        0.0
                    };
                    sts(at(sh.d1 + r * G + lane), v);
                });
                _syncthreads();
            }
            if first {
                // 2. The W1 and b1 gradients' terms of these samples, in sample order, from the D1 just
                // computed or (`stored`) staged.
                if live {
                    let (d1r, d1s) = if stored { (at(sb + sh.a2 + 4 * warp), G2) } else { (at(sh.d1 + 4 * warp), G) };
                    let (obr, so4, d1s4) = (at(sb + sh.obs), 4 * sh.so as u32, 4 * d1s as u32);
                    let load = |r: u32| {
                        let ob = obr + r * so4;
                        (lds4(d1r + r * d1s4), [lds(ob + x1), lds(ob + x2)])
                    };
                    // Lanes 0-3: the b1 sum of unit w0 + lane, `fma(D1, 1.0, acc)` (the product with the
                    // column of ones) from the D1 value the lane already holds, picked by bit masks (a `match`
                    // on the lane compiled to an indirect branch per sample).
                    let masks: [u32; 4] = core::array::from_fn(|i| if lane & 3 == i { u32::MAX } else { 0 });
                    let step = |(ev, xv): ([f32; 4], [f32; 2])| {
                        unrolled!(i in [0, 1, 2, 3] {
                            unrolled!(e in [0, 1] {
                                g1[i][e] = fma(ev[i], xv[e], g1[i][e]);
                            });
                        });
                        let mut mine = 0u32;
                        unrolled!(i in [0, 1, 2, 3] {
                            mine |= ev[i].to_bits() & masks[i];
                        });
                        small = fma(f32::from_bits(mine), 1.0, small);
                    };
                    in_pairs(rows32, load, step);
                }
            } else if live {
                // The W2, b2, W3 and b3 gradients' terms of these samples, in sample order.
                let (d2r, a1r) = (at(sb + sh.d2 + w0), at(sb + sh.a1 + cb));
                let load = |r: u32| {
                    (
                        [lds4(d2r + r * sd4), lds4(d2r + r * sd4 + 16)],
                        lds4(a1r + r * sd4),
                        [lds(fa + r * sa4), lds(fb + r * sb4), lds(fc + r * sc4), lds(one)],
                    )
                };
                let step = |(dv, av, sv): ([[f32; 4]; 2], [f32; 4], [f32; 4])| {
                    unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                        unrolled!(q in [0, 1, 2, 3] {
                            g2[i][q] = fma(dv[i / 4][i % 4], av[q], g2[i][q]);
                        });
                    });
                    small = fma(sv[0], sv[1], small);
                    small2 = fma(sv[2], sv[3], small2);
                };
                in_pairs(rows32, load, step);
            }
            sub += 1;
        }
        // The partial sums (zero outside the active width; the padded rows and columns are written too).
        if !live {
            return;
        }
        if first {
            unrolled!(i in [0, 1, 2, 3] {
                let n = w0 + i;
                if n < hs {
                    unrolled!(e in [0, 1] {
                        let x = if e == 0 { lane } else { lane + 32 };
                        if x < d {
                            *partial.add(l.w1() + n * d + x) = if n < h { g1[i][e] } else { 0.0 };
                        }
                    });
                }
            });
            let n = w0 + lane;
            if lane < 4 && n < hs {
                *partial.add(l.b1() + n) = if n < h { small } else { 0.0 };
            }
            return;
        }
        unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
            let n = w0 + i;
            if n < hs {
                unrolled!(q in [0, 1, 2, 3] {
                    let j = 4 * lane + q;
                    if j < hs {
                        *partial.add(l.w2() + n * hs + j) = if n < h && j < h { g2[i][q] } else { 0.0 };
                    }
                });
            }
        });
        let (n, out) = (w0 + lane / 4, lane % 4);
        if n < hs && out < o {
            *partial.add(l.w3() + out * hs + n) = if n < h { small } else { 0.0 };
        }
        let n = w0 + lane;
        match lane {
            0..8 if n < hs => *partial.add(l.b2() + n) = if n < h { small2 } else { 0.0 },
            8..12 if group == 0 && warp == 0 && lane - 8 < o => *partial.add(l.b3() + lane - 8) = small2,
            _ => {}
        }
    }
}

/// `step(load(r))` for the samples `r` of a sub-tile in order, two a step with both loaded before their
/// FMAs, then the odd one.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn in_pairs<L>(rows: u32, load: impl Fn(u32) -> L, mut step: impl FnMut(L)) {
    let mut r = 0u32;
    while r + 2 <= rows {
        let (x, y) = (load(r), load(r + 1));
        step(x);
        step(y);
        r += 2;
    }
    if r < rows {
        step(load(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block's buffers are 16-byte aligned (its vector reads), none overlaps the next, each stage holds
    /// a sub-tile's rows at their strides, and the benchmarks' networks (D = 54, H = 128; 3 or 4 outputs)
    /// fit two blocks in an H200 multiprocessor's 228 KB (1 KB of it reserved per block).
    #[test]
    fn backward_layout_is_aligned_and_disjoint() {
        let (r, g) = (BACKWARD_ROWS, BACKWARD_UNITS);
        for (input, hidden, outputs) in [(54, 128, 3), (54, 128, 4), (5, 16, 3), (43, 100, 3), (64, 4, 4)] {
            let net = NetArgs::new(3, 1, input, hidden, outputs, 64, 100);
            assert!(backward_suit(&net), "{input}/{hidden}/{outputs}");
            let l = BackwardShared::of(&net);
            let (hs, d) = (hidden as usize, input as usize);
            assert!(l.sd >= hs && l.so >= d);
            let stage = |st: usize| {
                [
                    (st + l.d2, r * l.sd),
                    (st + l.a1, r * l.sd.max(l.so)),
                    (st + l.a2, r * BACKWARD_UNITS2),
                    (st + l.dout, r * BACKWARD_MAX_OUTPUTS),
                ]
            };
            for st in l.stage {
                assert_eq!(l.obs, l.a1, "the inputs share the A1 rows' slot");
                assert!(st + l.obs + r * l.so <= st + l.a2, "{input}/{hidden}: the inputs overflow their slot");
            }
            let ([a, b, c, d0], [e, f, gg, j]) = (stage(l.stage[0]), stage(l.stage[1]));
            let regions = [(l.w2, g * l.sd), (l.d1, r * g), (l.one, 1), a, b, c, d0, e, f, gg, j];
            for w in regions.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{input}/{hidden}: {:?} overlaps {:?}", w[0], w[1]);
            }
            for (at, _) in &regions {
                assert_eq!(at % 4, 0, "{input}/{hidden}: offset {at} not 16-byte aligned");
            }
            assert_eq!(l.len, j.0 + j.1);
        }
        let bench = BackwardShared::of(&NetArgs::new(5, 1, 54, 128, 4, 1_024, 100)).bytes();
        assert!(2 * (bench + 1_024) <= 228 * 1_024, "{bench} bytes: one block a multiprocessor");
    }

    /// Sizes past a lane's reach go to the unfused launches.
    #[test]
    fn backward_refuses_what_its_lanes_cannot_hold() {
        let suit = |input, hidden, outputs| backward_suit(&NetArgs::new(1, 1, input, hidden, outputs, 64, 100));
        assert!(suit(54, 128, 3));
        assert!(!suit(54, 132, 3), "a hidden width past 128");
        assert!(!suit(54, 126, 3), "a row stride that is not a multiple of 4");
        assert!(!suit(65, 64, 3), "more than 64 inputs");
        assert!(!suit(54, 64, 5), "more than 4 outputs");
    }

    /// The grid: a block per unit group of each side (32 units on the layer-1 side, 64 on the layer-2 side),
    /// and per gradient chunk of each trial.
    #[test]
    fn backward_blocks_cover_groups_and_chunks() {
        let net = NetArgs::new(5, 1_024, 54, 100, 3, 1_024, 100);
        assert_eq!(backward_blocks(&net), (4 + 2, 5 * crate::net::grad_chunks(1_024)));
        assert_eq!(backward_blocks(&NetArgs::new(2, 1, 54, 16, 3, 45, 100)).0, 2);
    }
}
