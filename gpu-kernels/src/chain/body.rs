//! The chain body (nvptx only): one block's row tile through the three layers ([`gpu_chain`]).

use super::ends::{ChainEnds, EARLY_INPUT, EARLY_WEIGHTS};
use super::stage::{accumulate, stage_rows};
use super::{CHAIN_UNITS, Chain};
use crate::mlp::ACT_RELU;
use crate::net::NetArgs;
use crate::tile::unrolled;

/// One wide layer (`k` inputs, hidden width `hs`, `h` active units, activation `ACT`) of the block's rows: from
/// `x` (rows `sx` apart) and the staged weights `w` (rows `sw` apart) into `y` (rows `sy` apart) and the
/// global output `out` (rows `m0 ..`, `m_pad` written, `m` active).
///
/// # Safety
/// The shared buffers hold [`CHAIN_ROWS`](super::CHAIN_ROWS) rows and `hs` weight rows; `out` and `bias` address valid
/// memory for the rows and units written; every thread of the block calls this.
#[allow(clippy::too_many_arguments, reason = "one layer's operands")]
#[inline(always)]
unsafe fn wide_layer<const R: usize, const AHEAD: bool, const ACT: u32>(
    x: *const f32,
    sx: usize,
    w: *const f32,
    sw: usize,
    k: usize,
    bias: *const f32,
    (hs, h): (usize, usize),
    y: *mut f32,
    sy: usize,
    out: *mut f32,
    out_row: usize,
    (m0, m, m_pad): (usize, usize, usize),
    thread: usize,
) {
    use crate::nvptx_ops::{lds, lds4, shared_addr, sts};
    let (lane, warp) = (thread % 32, thread / 32);
    let r0 = R * warp;
    // Shared-window addresses (32-bit `ld.shared`): the generic pointers cost a 64-bit add per load.
    let (xb, wb, yb) = (shared_addr(x), shared_addr(w), shared_addr(y));
    let (sx4, sw4) = (4 * sx as u32, 4 * sw as u32);
    let xa: [u32; R] = core::array::from_fn(|i| xb + (r0 + i) as u32 * sx4);
    let mut n0 = 0;
    // SAFETY: the caller's contract; weight rows are read only below `hs` (clamped), inputs below `k`.
    unsafe {
        while n0 < hs {
            // Units of this lane in the chunk; rows past the width read row 0 (their results are dropped).
            let units: [usize; 4] = core::array::from_fn(|j| n0 + lane + 32 * j);
            let wa: [u32; 4] = core::array::from_fn(|j| wb + if units[j] < hs { units[j] as u32 * sw4 } else { 0 });
            let acc = accumulate::<R, AHEAD>(
                &xa,
                k,
                |o| core::array::from_fn(|j| lds4(wa[j] + o)),
                |i, kk| lds(xa[i] + 4 * kk as u32),
                |kk| core::array::from_fn(|j| lds(wa[j] + 4 * kk as u32)),
            );
            // The four biases before the first store (one round trip, not one per unit).
            let biases: [f32; 4] = core::array::from_fn(|j| if units[j] < h { *bias.add(units[j]) } else { 0.0 });
            unrolled!(j in [0, 1, 2, 3] {
                let n = units[j];
                if n < hs {
                    let b = biases[j];
                    for (i, acc) in acc.iter().enumerate() {
                        let (r, row) = (r0 + i, m0 + r0 + i);
                        // `finish` of the hidden epilogue: act(acc + bias) inside the active sizes, 0 outside.
                        let s = acc[j] + b;
                        if ACT == ACT_RELU {
                            let value = if row < m && n < h { crate::mlp::activate(ACT, s) } else { 0.0 };
                            sts(yb + 4 * (r * sy + n) as u32, value);
                            if row < m_pad {
                                *out.add(row * out_row + n) = value;
                            }
                        } else {
                            sts(yb + 4 * (r * sy + n) as u32, s);
                        }
                    }
                }
            });
            if ACT != ACT_RELU {
                // The activation of the sums parked in `y` (each thread its own entries): inline in the loop
                // above, tanh's size stops its unrolling and the accumulators go to local memory.
                for i in 0..R {
                    let (r, row) = (r0 + i, m0 + r0 + i);
                    for j in 0..4 {
                        let n = n0 + lane + 32 * j;
                        if n < hs {
                            let at = yb + 4 * (r * sy + n) as u32;
                            let value = if row < m && n < h { crate::mlp::activate(ACT, lds(at)) } else { 0.0 };
                            sts(at, value);
                            if row < m_pad {
                                *out.add(row * out_row + n) = value;
                            }
                        }
                    }
                }
            }
            n0 += CHAIN_UNITS;
        }
    }
}

/// One block of chain `c`: row tile `tile` (`4 R` rows, [`Chain::tile_rows`]) through the three layers, `R`
/// rows a warp, its input rows and what follows the outputs as `ends` says ([`ChainEnds`]).
///
/// # Safety
/// `buffers` holds a valid device pointer for every buffer `c` names, long enough for the products of [`Chain::layers`]
/// ([`Gemm::extent`](crate::tile::Gemm::extent)); `c` is row-major ([`Chain::row_major`]); `smem` is this block's
/// dynamic shared memory of [`ChainShared::of`](super::ChainShared::of)`(net).len` floats, 16-byte aligned; every
/// thread of the block calls this (it synchronizes the block); `ends`' contracts hold.
#[inline(always)]
pub unsafe fn gpu_chain<const R: usize, const W: usize, const AHEAD: bool, E: ChainEnds>(
    c: &Chain,
    net: &NetArgs,
    tile: usize,
    buffers: *const u64,
    smem: *mut f32,
    thread: usize,
    ends: &E,
) {
    use crate::nvptx_ops::{cp_async_commit, cp_async_wait, cp_async_wait_all};
    use core::arch::nvptx::_syncthreads;
    if tile >= c.tiles() {
        return; // uniform over the block
    }
    let l = net.layout();
    let sh = c.shared(net);
    let (d, hs, o) = (l.input, l.hidden, l.outputs);
    let (h, m, m_pad) = (c.h as usize, c.m as usize, c.m_pad as usize);
    let tile_rows = R * W;
    let m0 = tile * tile_rows;
    // SAFETY: the caller's contract; staged reads stay inside the active rows and units, and the shared
    // offsets inside `sh.len` floats; barriers separate every buffer's writers from its readers.
    unsafe {
        let buf = |b: u32| *buffers.add(b as usize) as *mut f32;
        let params = buf(c.net).add(c.trial as usize * l.params());
        let (ws, a, b) = (smem.add(sh.weights), smem.add(sh.a), smem.add(sh.b));
        let rows = m.saturating_sub(m0).min(tile_rows);
        // W1 and W3 into their regions; the tile's input rows into `a`; then the rows of W2 below W1. What
        // the kernel launched just before this one does not write is read before the grid-dependency wait
        // (`EARLY_READS`): a training chain's weights (the sampler or PPO's gather ran before it), an acting
        // chain's weights or observations as `ends.early()` says. The copies' groups are W1 and W3, the input
        // rows (training), W2, in every order of the calls, so `wait_group 1` leaves W2 alone in flight.
        let early = ends.early();
        let stage_w13 = || {
            stage_rows(params.add(l.w1()), d, smem.add(sh.w1), sh.s1, h, d, (thread, W));
            stage_rows(params.add(l.w3()), hs, smem.add(sh.w3), sh.s2, o, h, (thread, W));
            cp_async_commit();
        };
        if early & EARLY_WEIGHTS != 0 {
            stage_w13();
        }
        if E::INPUT && early & EARLY_INPUT != 0 {
            ends.input(a, sh.sa, b, (m0, rows), d, thread);
        }
        crate::nvptx_ops::follow_previous();
        if early & EARLY_WEIGHTS == 0 {
            stage_w13();
        }
        if !E::INPUT {
            let x = buf(c.x.buf).add(c.x.off as usize + m0 * c.x.row as usize);
            stage_rows(x, c.x.row as usize, a, sh.sa, rows, d, (thread, W));
            cp_async_commit();
        }
        let ahead = h.min(sh.ahead);
        stage_rows(params.add(l.w2()), hs, ws, sh.s2, ahead, h, (thread, W));
        cp_async_commit();
        if E::INPUT && early & EARLY_INPUT == 0 {
            ends.input(a, sh.sa, b, (m0, rows), d, thread);
        }
        cp_async_wait::<1>();
        _syncthreads();
        let out = |i: usize| buf(c.out[i].buf).add(c.out[i].off as usize);
        let rows_of = |i: usize| c.out[i].row as usize;
        // The activation is a constant of each layer's instance: with the tanh inline in the same loop,
        // the compiler does not unroll the row loop and the accumulators go to local memory.
        macro_rules! layer {
            ($($operand:expr),* $(,)?) => {
                if l.activation == crate::mlp::ACT_TANH {
                    wide_layer::<R, AHEAD, { crate::mlp::ACT_TANH }>($($operand),*)
                } else {
                    wide_layer::<R, AHEAD, { crate::mlp::ACT_RELU }>($($operand),*)
                }
            };
        }
        layer!(
            a,
            sh.sa,
            smem.add(sh.w1),
            sh.s1,
            d,
            params.add(l.b1()),
            (hs, h),
            b,
            sh.s2,
            out(0),
            rows_of(0),
            (m0, m, m_pad),
            thread,
        );
        _syncthreads();
        // Layer 2: from `b` into `a`; the rest of W2 over W1, which every thread has left (barrier).
        let rest = (ahead * hs, ahead * sh.s2);
        stage_rows(params.add(l.w2() + rest.0), hs, ws.add(rest.1), sh.s2, h - ahead, h, (thread, W));
        // These copies are in no committed group yet: `wait_all` commits and waits for them (a bare
        // `wait_group 0` did not, and layer 2 read rows of W2 that had not landed).
        cp_async_wait_all();
        _syncthreads();
        layer!(
            b,
            sh.s2,
            ws,
            sh.s2,
            h,
            params.add(l.b2()),
            (hs, h),
            a,
            sh.sa,
            out(1),
            rows_of(1),
            (m0, m, m_pad),
            thread,
        );
        _syncthreads();
        output_layer::<W>(
            a,
            sh.sa,
            smem.add(sh.w3),
            sh.s2,
            (params.add(l.b3()), o, h),
            (out(2), rows_of(2)),
            (m0, m, m_pad, tile_rows),
            thread,
        );
        if E::OUTPUT {
            // The barrier orders the block's output stores before the reads (global memory, one block).
            _syncthreads();
            if thread < rows {
                let row = m0 + thread;
                ends.output(row, core::slice::from_raw_parts(out(2).add(row * rows_of(2)), o));
            }
        }
    }
}

/// Layer 3 of the block's rows: a thread per row, its `o` outputs (3 or 4 interleaved: `dots_aligned`, each
/// `dense_unit`'s order, the row's inputs loaded once for all of them) from the `h` inputs of `x` (rows `sx`
/// apart) and the staged `W3` rows (`sw` apart) plus `bias`, into `out` (rows `out_row` apart; rows `m0 ..`,
/// `m_pad` written, `m` active, zeros past them).
///
/// # Safety
/// `x` and `w3` address this block's shared rows ([`CHAIN_ROWS`](super::CHAIN_ROWS) of `x`, `o` of `w3`),
/// `out` and `bias` valid memory for the rows and outputs written; `o <= 4`.
#[allow(clippy::too_many_arguments, reason = "one layer's operands")]
#[inline(always)]
unsafe fn output_layer<const W: usize>(
    x: *const f32,
    sx: usize,
    w3: *const f32,
    sw: usize,
    (bias, o, h): (*const f32, usize, usize),
    (out, out_row): (*mut f32, usize),
    (m0, m, m_pad, tile_rows): (usize, usize, usize, usize),
    thread: usize,
) {
    // SAFETY: the caller's contract; reads stay inside the active rows' `h` inputs and the `o` staged rows.
    unsafe {
        let mut r = thread;
        while r < tile_rows {
            let row = m0 + r;
            if row < m_pad {
                let x = x.add(r * sx);
                let mut values = [0.0f32; 4];
                if row < m {
                    let bias = |n: usize| *bias.add(n);
                    match o {
                        3 => {
                            let d = crate::net::dots_aligned(x, core::array::from_fn::<_, 3, _>(|n| w3.add(n * sw)), h);
                            unrolled!(n in [0, 1, 2] { values[n] = d[n] + bias(n); });
                        }
                        4 => {
                            let d = crate::net::dots_aligned(x, core::array::from_fn::<_, 4, _>(|n| w3.add(n * sw)), h);
                            unrolled!(n in [0, 1, 2, 3] { values[n] = d[n] + bias(n); });
                        }
                        _ => {
                            let view = crate::net::LayerView { base: w3, unit: sw, step: 1, k: h, aligned: true };
                            unrolled!(n in [0, 1, 2, 3] {
                                if n < o {
                                    values[n] = crate::net::dense_unit(&view, bias(n), None, n, x);
                                }
                            });
                        }
                    }
                }
                unrolled!(n in [0, 1, 2, 3] {
                    if n < o {
                        *out.add(row * out_row + n) = values[n];
                    }
                });
            }
            r += 32 * W;
        }
    }
}
