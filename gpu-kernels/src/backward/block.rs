//! The block program of `mlp_backward` (nvptx only, [`gpu_backward`]): one block's share of a trial's
//! gradient chunk, stage by stage ([`BackwardBlock`]).

use super::{
    BACKWARD_MAX_OUTPUTS, BACKWARD_ROWS, BACKWARD_THREADS, BACKWARD_UNITS, BACKWARD_UNITS2, BackwardShared,
    backward_groups,
};
use crate::mlp::Layout;
use crate::net::{NetArgs, NetTrial, Work, buffers as bufs, grad_chunk};
use crate::nvptx_ops::{cp_async_wait_all, cp_async4, cp_async16, lds, lds4, shared_addr, sts};
use crate::tile::{fma, unrolled};
use core::arch::nvptx::_syncthreads;

const G: usize = BACKWARD_UNITS;
const S: usize = BACKWARD_ROWS;
const T: u32 = BACKWARD_THREADS;
const G2: usize = BACKWARD_UNITS2;

/// Block `(x, block)` of `mlp_backward` ([`backward_blocks`](super::backward_blocks)): for chunk `block /
/// n_trials` of trial `block % n_trials`, the layer-1 side of 32-unit group `x` (`D1` and the `W1` and `b1`
/// gradients) or, past the layer-1 groups, the layer-2 side of a 64-unit group (the `W2`, `b2`, `W3` and `b3`
/// gradients, which do not need `D1`), from the training buffer's `D2`, `A1`, `A2` and output gradients, the
/// sampled inputs and the online `W2` ([`crate::net::buffers`]).
///
/// # Safety
/// [`backward_suit`](super::backward_suit)`(net)`; `trials`: `net.n_trials` sizes with `hidden <= net.hidden`
/// and `batch <= net.batch`; `buffers` holds device pointers for the buffers [`crate::net::plan`]'s
/// [`crate::net::AFTER_LOSS`] products name, each long enough for them (16-byte aligned); `smem`: this
/// block's dynamic shared memory of [`BackwardShared::of`]`(net).len` floats, 16-byte aligned; every thread
/// of the block calls this with `thread < BACKWARD_THREADS`.
#[inline(always)]
pub unsafe fn gpu_backward(
    trials: *const NetTrial,
    buffers: *const u64,
    net: &NetArgs,
    smem: *mut f32,
    (x, block, thread): (usize, usize, usize),
    stored: bool,
) {
    // SAFETY: the caller's contract; the barriers order each stage's copies (waited by every thread) before
    // its reads, and its reads before the next copies into it.
    unsafe {
        let b = BackwardBlock::of(net, (trials, buffers), smem, [x, block, thread], stored);
        b.stage_w2_columns();
        // The W2 columns above are copied before the grid-dependency wait: the kernel launched just before
        // this one (the loss kernel, or `mlp_rows` before a stored D1) does not write the weights
        // (`EARLY_READS`); everything below reads what it wrote.
        crate::nvptx_ops::follow_previous();
        let subs = b.k.div_ceil(S);
        if subs > 0 {
            b.stage(0, 0);
        }
        // Layer-1 side: the W1 gradient (4 units x inputs lane and lane + 32), lanes 0-3: the b1 gradient.
        // Layer-2 side: the W2 gradient (8 units x columns 4 lane ..; past the width it reads column 0 and
        // stores nothing), the W3 gradient (unit w0 + l / 4, output l % 4), lanes 0-7: b2 of unit w0 + l,
        // 8-11: b3 (group 0, warp 0).
        let mut g2 = [[0.0f32; 4]; 8];
        let mut g1 = [[0.0f32; 2]; 4];
        let mut small = 0.0f32;
        let mut small2 = 0.0f32;
        let mut sub = 0;
        while sub < subs {
            cp_async_wait_all();
            _syncthreads();
            if sub + 1 < subs {
                // The other stage was last read in sub-tile sub - 1, which every thread has left (barrier).
                b.stage(sub + 1, (sub + 1) % 2);
            }
            let sb = b.stage_at(sub % 2);
            let rows = (b.k - sub * S).min(S);
            if b.first && !b.stored {
                b.hidden_gradient(sb, rows);
                _syncthreads();
            }
            if b.first {
                if b.live {
                    b.layer1_terms(sb, rows as u32, &mut g1, &mut small);
                }
            } else if b.live {
                b.layer2_terms(sb, rows as u32, &mut g2, (&mut small, &mut small2));
            }
            sub += 1;
        }
        // The partial sums (zero outside the active width; the padded rows and columns are written too).
        if b.live {
            if b.first {
                b.store_layer1(&g1, small);
            } else {
                b.store_layer2(&g2, small, small2);
            }
        }
    }
}

/// One `mlp_backward` block's view of its work: its trial's sizes and chunk, its side and unit group, its
/// thread, where its operands are in global memory (from the chunk's first sample) and its shared layout.
struct BackwardBlock {
    l: Layout,
    /// Inputs, the row stride H, outputs, the trial's active width.
    d: usize,
    hs: usize,
    o: usize,
    h: usize,
    /// The chunk's active samples.
    k: usize,
    /// The layer-1 side (else the layer-2 side); D1 staged from the stored buffer.
    first: bool,
    stored: bool,
    /// The side's group number and its first unit.
    group: usize,
    u0: usize,
    /// This warp's first unit (`u0 + 4 warp` or `u0 + 8 warp`) and whether it exists (uniform over the warp).
    w0: usize,
    live: bool,
    thread: usize,
    lane: usize,
    warp: usize,
    sh: BackwardShared,
    /// The shared window's address of the block's first float.
    base: u32,
    d2g: *const f32,
    a1g: *const f32,
    d1g: *const f32,
    a2g: *const f32,
    doutg: *const f32,
    obsg: *const f32,
    params: *const f32,
    partial: *mut f32,
}

impl BackwardBlock {
    /// The block's work ([`gpu_backward`]'s arguments; `place`: the block `(x, block)` and the thread).
    ///
    /// # Safety
    /// [`gpu_backward`]'s contract.
    #[inline(always)]
    unsafe fn of(
        net: &NetArgs,
        (trials, buffers): (*const NetTrial, *const u64),
        smem: *mut f32,
        place: [usize; 3],
        stored: bool,
    ) -> Self {
        let [x, block, thread] = place;
        let l = net.layout();
        let (d, hs, o, b, n_trials) = (l.input, l.hidden, l.outputs, net.batch as usize, net.n_trials as usize);
        let (c, t) = (block / n_trials, block % n_trials);
        let groups = backward_groups(net).0;
        let first = x < groups;
        let (group, u0) = if first { (x, x * G) } else { (x - groups, (x - groups) * G2) };
        let w = Work::of(net);
        let (lane, warp) = (thread % 32, thread / 32);
        let w0 = u0 + if first { 4 } else { 8 } * warp;
        // SAFETY: the caller's contract: `t < n_trials`, and the chunk's rows lie inside the buffers.
        unsafe {
            let p = *trials.add(t);
            let (h, bt) = (p.hidden as usize, p.batch as usize);
            let chunk = grad_chunk(b);
            let s0 = c * chunk;
            let buf = |i: u32| *buffers.add(i as usize) as *mut f32;
            let work = buf(bufs::WORK);
            Self {
                l,
                d,
                hs,
                o,
                h,
                k: bt.saturating_sub(s0).min(chunk),
                first,
                stored,
                group,
                u0,
                w0,
                live: w0 < hs,
                thread,
                lane,
                warp,
                sh: BackwardShared::of(net),
                base: shared_addr(smem),
                d2g: work.add(w.at(Work::D2, t) + s0 * hs),
                a1g: work.add(w.at(Work::A1, t) + s0 * hs),
                d1g: work.add(w.at(Work::D1, t) + s0 * hs),
                a2g: work.add(w.at(Work::A2, t) + s0 * hs),
                doutg: work.add(w.at(Work::DOUT, t) + s0 * o),
                obsg: buf(bufs::OBS).add(t * b * d + s0 * d),
                params: buf(bufs::ONLINE).add(t * l.params()),
                partial: buf(bufs::PARTIAL).add((c * n_trials + t) * l.params()),
            }
        }
    }

    /// The shared window's address of float `f`.
    #[inline(always)]
    fn at(&self, f: usize) -> u32 {
        self.base + 4 * f as u32
    }

    /// Stage `st`'s first float (arithmetic: an indexed `sh.stage` put the layout in local memory).
    #[inline(always)]
    fn stage_at(&self, st: usize) -> usize {
        self.sh.stage[0] + st * (self.sh.stage[1] - self.sh.stage[0])
    }

    /// The layer-1 side's columns of W2 for the group, transposed (zero past the active width: their terms
    /// add +0; consecutive threads read consecutive columns of a W2 row), and the 1.0. Nothing to read for
    /// the layer-2 side, a stored D1 or an empty chunk.
    ///
    /// # Safety
    /// Every thread of the block calls this once, before the first barrier.
    #[inline(always)]
    unsafe fn stage_w2_columns(&self) {
        let (sh, l, u0, h, hs) = (&self.sh, &self.l, self.u0, self.h, self.hs);
        let mut i = if self.first && !self.stored && self.k > 0 { self.thread as u32 } else { (hs * G) as u32 };
        // SAFETY: reads inside the trial's W2, writes inside the shared `w2` region.
        unsafe {
            while i < (hs * G) as u32 {
                let (n, j) = ((i / G as u32) as usize, (i % G as u32) as usize);
                let dst = self.at(sh.w2 + j * sh.sd + n);
                if n < h && u0 + j < hs {
                    cp_async4(dst, self.params.add(l.w2() + n * hs + u0 + j));
                } else {
                    sts(dst, 0.0);
                }
                i += T;
            }
            if self.thread == 0 {
                sts(self.at(sh.one), 1.0);
            }
        }
    }

    /// The group's `width` columns of an H-wide region (A1 for the layer-1 side's mask, A2 for the W3
    /// gradient) into stage `sb`'s `a2` rows: `rows` rows from row `r0`.
    ///
    /// # Safety
    /// The rows are active samples of the chunk.
    #[inline(always)]
    unsafe fn group_cols(&self, src: *const f32, sb: usize, r0: usize, rows: u32, width: usize) {
        let quads = (width / 4) as u32;
        let mut i = self.thread as u32;
        // SAFETY: the caller's contract; columns past the width are not copied.
        unsafe {
            while i < rows * quads {
                let (r, q) = ((i / quads) as usize, 4 * (i % quads) as usize);
                if self.u0 + q < self.hs {
                    cp_async16(self.at(sb + self.sh.a2 + r * G2 + q), src.add((r0 + r) * self.hs + self.u0 + q));
                }
                i += T;
            }
        }
    }

    /// `width` floats of each of `rows` rows (row r at `src + r * src_stride`) to shared float `dst + r *
    /// dst_stride`, 4 bytes a copy (the inputs' and output gradients' rows are not 16-byte aligned).
    ///
    /// # Safety
    /// The rows are active samples of the chunk; the destination lies in a stage's region of `width` floats.
    #[inline(always)]
    unsafe fn narrow_rows(
        &self,
        src: *const f32,
        src_stride: usize,
        (dst, dst_stride): (usize, usize),
        rows: u32,
        width: usize,
    ) {
        let mut i = self.thread as u32;
        // SAFETY: the caller's contract.
        unsafe {
            while i < rows * width as u32 {
                let (r, j) = ((i / width as u32) as usize, (i % width as u32) as usize);
                cp_async4(self.at(dst + r * dst_stride + j), src.add(r * src_stride + j));
                i += T;
            }
        }
    }

    /// Sub-tile `sub`'s operands into stage `st` (rows below `k` only; 16-byte copies of the H-wide rows):
    /// D2 for both sides; the group's A1 columns and the inputs for the layer-1 side; all of A1, the group's
    /// A2 columns and the output gradients for the layer-2 side. With `stored`, the layer-1 side's D2 and A1
    /// columns are the group's columns of the stored D1 instead (in the A1 columns' slot).
    ///
    /// # Safety
    /// Every thread calls this; no thread reads stage `st` until the copies are waited and a barrier passed,
    /// and every thread has left its previous reads of the stage (a barrier).
    #[inline(always)]
    unsafe fn stage(&self, sub: usize, st: usize) {
        let (sh, hs) = (&self.sh, self.hs);
        let r0 = sub * S;
        let rows = (self.k - r0).min(S) as u32;
        let sb = self.stage_at(st);
        let q4 = (hs / 4) as u32;
        let mut i = if self.first && self.stored { rows * q4 } else { self.thread as u32 };
        // SAFETY: the caller's contract; the rows are the chunk's active samples.
        unsafe {
            while i < rows * q4 {
                let (r, q) = ((i / q4) as usize, 4 * (i % q4) as usize);
                let src = (r0 + r) * hs + q;
                cp_async16(self.at(sb + sh.d2 + r * sh.sd + q), self.d2g.add(src));
                if !self.first {
                    cp_async16(self.at(sb + sh.a1 + r * sh.sd + q), self.a1g.add(src));
                }
                i += T;
            }
            if self.first {
                self.group_cols(if self.stored { self.d1g } else { self.a1g }, sb, r0, rows, G);
                self.narrow_rows(self.obsg.add(r0 * self.d), self.d, (sb + sh.obs, sh.so), rows, self.d);
            } else {
                self.group_cols(self.a2g, sb, r0, rows, G2);
                let dst = (sb + sh.dout, BACKWARD_MAX_OUTPUTS);
                self.narrow_rows(self.doutg.add(r0 * self.o), self.o, dst, rows, self.o);
            }
        }
    }

    /// Step 1 of the layer-1 side: D1 of samples `4 warp + i` of the sub-tile staged at `sb` (`rows` active),
    /// unit `u0 + lane`, into the shared `d1` rows.
    ///
    /// # Safety
    /// The stage's copies and the W2 columns have landed (waited, then a barrier).
    #[inline(always)]
    unsafe fn hidden_gradient(&self, sb: usize, rows: usize) {
        let (sh, warp, lane) = (&self.sh, self.warp, self.lane);
        let rows_at: [u32; 4] = core::array::from_fn(|i| self.at(sb + sh.d2 + (4 * warp + i) * sh.sd));
        let col = self.at(sh.w2 + lane * sh.sd);
        // SAFETY: the caller's contract; the loads stay in the staged rows and the transposed columns.
        unsafe {
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
            let (h4, mut o) = (4 * self.h.next_multiple_of(4) as u32, 0u32);
            while o + 32 <= h4 {
                let (x, y) = (load(o), load(o + 16));
                step(&mut acc, x);
                step(&mut acc, y);
                o += 32;
            }
            if o < h4 {
                step(&mut acc, load(o));
            }
            let j = self.u0 + lane;
            unrolled!(i in [0, 1, 2, 3] {
                let r = 4 * warp + i;
                // The gradient through the activation of `A1` (`finish` of the backward epilogue).
                let v = if r < rows && j < self.h {
                    crate::mlp::activate_grad(self.l.activation, acc[i], lds(self.at(sb + sh.a2 + r * G2 + lane)))
                } else {
                    0.0
                };
                sts(self.at(sh.d1 + r * G + lane), v);
            });
        }
    }

    /// Step 2 of the layer-1 side: the W1 and b1 gradients' terms of the sub-tile's `rows` samples (staged at
    /// `sb`), in sample order, from the D1 just computed or (`stored`) staged, into `g1` and `small`.
    ///
    /// # Safety
    /// D1 of the sub-tile is in place (a barrier after [`Self::hidden_gradient`], or the stage landed).
    #[inline(always)]
    unsafe fn layer1_terms(&self, sb: usize, rows: u32, g1: &mut [[f32; 2]; 4], small: &mut f32) {
        let (sh, warp, lane, d) = (&self.sh, self.warp, self.lane, self.d);
        let (x1, x2) = (lane.min(d - 1), if lane + 32 < d { lane + 32 } else { lane.min(d - 1) });
        let (x1, x2) = (4 * x1 as u32, 4 * x2 as u32);
        let (d1r, d1s) =
            if self.stored { (self.at(sb + sh.a2 + 4 * warp), G2) } else { (self.at(sh.d1 + 4 * warp), G) };
        let (obr, so4, d1s4) = (self.at(sb + sh.obs), 4 * sh.so as u32, 4 * d1s as u32);
        // SAFETY: the caller's contract; the loads stay in the staged rows.
        let load = |r: u32| unsafe {
            let ob = obr + r * so4;
            (lds4(d1r + r * d1s4), [lds(ob + x1), lds(ob + x2)])
        };
        // Lanes 0-3: the b1 sum of unit w0 + lane, `fma(D1, 1.0, acc)` (the product with the column of
        // ones) from the D1 value the lane already holds, picked by bit masks (a `match` on the lane compiled
        // to an indirect branch per sample).
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
            *small = fma(f32::from_bits(mine), 1.0, *small);
        };
        in_pairs(rows, load, step);
    }

    /// The layer-2 side: the W2, b2, W3 and b3 gradients' terms of the sub-tile's `rows` samples (staged at
    /// `sb`), in sample order, into `g2` and `small` (W3, or b2's factors) and `small2` (b2 or b3).
    ///
    /// # Safety
    /// The stage's copies have landed (waited, then a barrier).
    #[inline(always)]
    unsafe fn layer2_terms(&self, sb: usize, rows: u32, g2: &mut [[f32; 4]; 8], (small, small2): (&mut f32, &mut f32)) {
        let (sh, warp, lane, w0) = (&self.sh, self.warp, self.lane, self.w0);
        let cb = if 4 * lane < self.hs { 4 * lane } else { 0 };
        // The small sums' two factors: address and row stride (the second is the 1.0 for a bias).
        let (fa, sa, fb, sbb) = (sb + sh.a2 + 8 * warp + lane / 4, G2, sb + sh.dout + lane % 4, BACKWARD_MAX_OUTPUTS);
        let (fc, sc) = match lane {
            0..8 => (sb + sh.d2 + w0 + lane, sh.sd),
            8..12 => (sb + sh.dout + lane - 8, BACKWARD_MAX_OUTPUTS),
            _ => (sh.one, 0),
        };
        let (fa, fb, sa4, sb4) = (self.at(fa), self.at(fb), 4 * sa as u32, 4 * sbb as u32);
        let (fc, sc4, one) = (self.at(fc), 4 * sc as u32, self.at(sh.one));
        let sd4 = 4 * sh.sd as u32;
        let (d2r, a1r) = (self.at(sb + sh.d2 + w0), self.at(sb + sh.a1 + cb));
        // SAFETY: the caller's contract; the loads stay in the staged rows.
        let load = |r: u32| unsafe {
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
            *small = fma(sv[0], sv[1], *small);
            *small2 = fma(sv[2], sv[3], *small2);
        };
        in_pairs(rows, load, step);
    }

    /// The layer-1 side's partial sums: this warp's rows of the W1 gradient, lanes 0-3 the b1 sums.
    ///
    /// # Safety
    /// The block's `partial` block holds the trial's parameters.
    #[inline(always)]
    unsafe fn store_layer1(&self, g1: &[[f32; 2]; 4], small: f32) {
        let (l, w0, lane, d, h, hs) = (&self.l, self.w0, self.lane, self.d, self.h, self.hs);
        // SAFETY: the caller's contract; every index is inside the padded W1 and b1.
        unsafe {
            unrolled!(i in [0, 1, 2, 3] {
                let n = w0 + i;
                if n < hs {
                    unrolled!(e in [0, 1] {
                        let x = if e == 0 { lane } else { lane + 32 };
                        if x < d {
                            *self.partial.add(l.w1() + n * d + x) = if n < h { g1[i][e] } else { 0.0 };
                        }
                    });
                }
            });
            let n = w0 + lane;
            if lane < 4 && n < hs {
                *self.partial.add(l.b1() + n) = if n < h { small } else { 0.0 };
            }
        }
    }

    /// The layer-2 side's partial sums: this warp's rows of the W2 gradient, the W3 sums, lanes 0-7 the b2
    /// sums, lanes 8-11 (group 0, warp 0) the b3 sums.
    ///
    /// # Safety
    /// As [`Self::store_layer1`].
    #[inline(always)]
    unsafe fn store_layer2(&self, g2: &[[f32; 4]; 8], small: f32, small2: f32) {
        let (l, w0, lane, h, hs, o) = (&self.l, self.w0, self.lane, self.h, self.hs, self.o);
        // SAFETY: the caller's contract; every index is inside the padded W2, W3, b2 and b3.
        unsafe {
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                let n = w0 + i;
                if n < hs {
                    unrolled!(q in [0, 1, 2, 3] {
                        let j = 4 * lane + q;
                        if j < hs {
                            *self.partial.add(l.w2() + n * hs + j) = if n < h && j < h { g2[i][q] } else { 0.0 };
                        }
                    });
                }
            });
            let (n, out) = (w0 + lane / 4, lane % 4);
            if n < hs && out < o {
                *self.partial.add(l.w3() + out * hs + n) = if n < h { small } else { 0.0 };
            }
            let n = w0 + lane;
            match lane {
                0..8 if n < hs => *self.partial.add(l.b2() + n) = if n < h { small2 } else { 0.0 },
                8..12 if self.group == 0 && self.warp == 0 && lane - 8 < o => {
                    *self.partial.add(l.b3() + lane - 8) = small2
                }
                _ => {}
            }
        }
    }
}

/// `step(load(r))` for the samples `r` of a sub-tile in order, two a step with both loaded before their
/// FMAs, then the odd one.
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
