//! Products with their right operand staged whole, a row tile per block (`gpu_rows`, nvptx only), and
//! which products suit it ([`rows_suit`]).

#[cfg(target_arch = "nvptx64")]
use super::layout::RowsShared;
#[cfg(target_arch = "nvptx64")]
use super::stage::{accumulate, stage_rows};
#[cfg(target_arch = "nvptx64")]
use super::{CHAIN_UNITS, ROWS_PER_WARP};
use crate::tile::Gemm;
#[cfg(target_arch = "nvptx64")]
use crate::tile::unrolled;

/// Whether `gpu_rows` (nvptx only) can compute `g`: `A` and `B` row-major (unit column stride).
pub fn rows_suit(g: &Gemm) -> bool {
    g.a.col == 1 && g.b.col == 1
}

/// Row tile `tile` (`8 W` rows: [`CHAIN_ROWS`](super::CHAIN_ROWS) or [`WIDE_ROWS`](super::WIDE_ROWS)) of product `g`
/// with `B` staged whole, as a chain layer (`W` warps, operands a step ahead or not: `AHEAD`, as
/// [`gpu_chain`](super::gpu_chain)): warp `w` owns rows `8 w ..`, lane `l` the columns `4 l .. 4 l + 4` of each
/// 128-column chunk (an 8 x 4 patch, [`accumulate`]: `B`'s rows are the inputs, so a lane reads its four columns of
/// four `B` rows with four 16-byte loads, and the row loads are broadcasts). Each element is
/// [`crate::tile::reference`]'s: the same order, epilogue and padding. Used for the hidden gradient of layer 1 (`D2 W2`
/// masked by the activation of `A1`), for which `gemm_tiles`' few 64 x 64 blocks leave most warps idle.
///
/// With `from`, the product whose output is `g`'s `A` (the hidden gradient of layer 2: `D2 = (DOUT W3)`
/// masked by the ReLU of `A2`, `k` at most [`crate::tile::SHORT_K`]), the tile of `A` is computed instead of
/// read: the block stages `from`'s `aux` rows (`A2`) where `A`'s rows go and its `A` rows (`DOUT`) beside
/// them, and turns each staged element into `from`'s element in place: `fma` over `from`'s `k` ascending from
/// 0 and [`crate::tile::finish`], the bits `crate::tile::gpu_short_rows` (nvptx only) stores, and stores
/// them for the gradients (`mlp_gradients`). So the loss kernel need not store `D2`, nor read `A2` for it
/// (a PPO update's `A2` and `D2` are 191 MB each).
///
/// # Safety
/// `buffers` holds a valid device pointer for every buffer `g` (and `from`) names, long enough for it
/// ([`Gemm::extent`]); [`rows_suit`]`(g)`; with `from`: `from.c` is `g.a`, `from.m` is `g.m`, `from.n` is
/// `g.k`, `from.k <= SHORT_K`, its operands row-major; `smem` is this block's dynamic shared memory of
/// [`RowsShared::of_product`]`(g, 8 W).len` floats, 16-byte aligned; every thread of the block calls this.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn gpu_rows<const W: usize, const AHEAD: bool>(
    g: &Gemm,
    tile: usize,
    buffers: *const u64,
    smem: *mut f32,
    thread: usize,
    from: Option<&Gemm>,
) {
    use crate::nvptx_ops::{cp_async_wait_all, cp_async4, lds4, shared_addr};
    use crate::tile::{SHORT_K, finish, reads_aux, reads_bias};
    use core::arch::nvptx::_syncthreads;
    let (m, n_act, k, m_pad, n_pad) = (g.m as usize, g.n as usize, g.k as usize, g.m_pad as usize, g.n_pad as usize);
    let tile_rows = ROWS_PER_WARP * W;
    let m0 = tile * tile_rows;
    if m0 >= m_pad {
        return; // uniform over the block
    }
    let sh = RowsShared::of_product(g, tile_rows);
    let (lane, warp) = (thread % 32, thread / 32);
    let r0 = ROWS_PER_WARP * warp;
    // SAFETY: the caller's contract; staged reads stay inside the active rows and columns, shared offsets
    // inside `sh.len` floats, and the barrier orders the copies before the reads.
    unsafe {
        let buf = |b: u32| *buffers.add(b as usize) as *mut f32;
        let (a, b) = (smem, smem.add(sh.b));
        let rows = m.saturating_sub(m0).min(tile_rows);
        // `A`'s rows, or (`from`) the rows of `A2` and of the output gradient they are computed from.
        let (src, stride) = match from {
            Some(f) => (buf(f.aux.buf).add(f.aux.at(m0, 0)), f.aux.row),
            None => (buf(g.a.buf).add(g.a.at(m0, 0)), g.a.row),
        };
        stage_rows(src, stride as usize, a, sh.sa, rows, k, (thread, W));
        if let Some(f) = from {
            let (ko, dout) = (f.k as usize, buf(f.a.buf).add(f.a.at(m0, 0)));
            let mut i = thread;
            while i < rows * ko {
                let (r, kk) = (i / ko, i % ko);
                cp_async4(shared_addr(smem.add(sh.out + r * SHORT_K + kk)), dout.add(r * f.a.row as usize + kk));
                i += 32 * W;
            }
        }
        stage_rows(buf(g.b.buf).add(g.b.at(0, 0)), g.b.row as usize, b, sh.sb, k, n_act, (thread, W));
        // `from`'s `B` of the thread's first column, loaded while the copies land.
        let w_first = from.map(|f| from_weights(f, buffers, thread % CHAIN_UNITS, k));
        cp_async_wait_all();
        _syncthreads();
        if let (Some(f), Some(w)) = (from, w_first) {
            hidden_from_out::<W>(f, buffers, (a, sh.sa, smem.add(sh.out)), (m0, rows, k), thread, w);
            _syncthreads();
        }
        let (ab, bb, sa4, sb4) = (shared_addr(a), shared_addr(b), 4 * sh.sa as u32, 4 * sh.sb as u32);
        let xa: [u32; ROWS_PER_WARP] = core::array::from_fn(|i| ab + (r0 + i) as u32 * sa4);
        let (with_bias, with_aux) = (reads_bias(g.epilogue), reads_aux(g.epilogue));
        // An operand the epilogue does not read names no buffer (`Operand::NONE`): its address is not read.
        let c = buf(g.c.buf);
        let bias = if with_bias { buf(g.bias.buf) } else { core::ptr::null_mut() };
        let aux = if with_aux { buf(g.aux.buf) } else { core::ptr::null_mut() };
        let mut n0 = 0;
        while n0 < n_pad {
            // The lane's four columns; past the padded width it reads column 0 (its results are not stored).
            let col = n0 + 4 * lane;
            let cb = if col < n_pad { 4 * col as u32 } else { 0 };
            let acc = accumulate::<ROWS_PER_WARP, AHEAD>(
                &xa,
                k,
                |o| {
                    // Rows o / 4 .. o / 4 + 4 of B (o = 4 kk bytes: row kk starts kk * sb4 = o * sb bytes in).
                    let rows: [[f32; 4]; 4] =
                        core::array::from_fn(|u| lds4(bb + o * sh.sb as u32 + u as u32 * sb4 + cb));
                    core::array::from_fn(|j| core::array::from_fn(|u| rows[u][j]))
                },
                |i, kk| *a.add((r0 + i) * sh.sa + kk),
                |kk| core::array::from_fn(|j| *b.add(kk * sh.sb + cb as usize / 4 + j)),
            );
            // The epilogue's inputs before the first store (a store may alias them).
            let biases: [f32; 4] =
                core::array::from_fn(
                    |j| if with_bias && col + j < n_act { *bias.add(g.bias.at(0, col + j)) } else { 0.0 },
                );
            let mut auxes = [[0.0f32; 4]; ROWS_PER_WARP];
            if with_aux {
                unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                    unrolled!(j in [0, 1, 2, 3] {
                        let (row, n) = (m0 + r0 + i, col + j);
                        if row < m && n < n_act {
                            auxes[i][j] = *aux.add(g.aux.at(row, n));
                        }
                    });
                });
            }
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                unrolled!(j in [0, 1, 2, 3] {
                    let (row, n) = (m0 + r0 + i, col + j);
                    if row < m_pad && n < n_pad {
                        *c.add(g.c.at(row, n)) = finish(g, row, n, acc[i][j], biases[j], auxes[i][j]);
                    }
                });
            });
            n0 += CHAIN_UNITS;
        }
    }
}

/// `from`'s `B` of column `c` (`W3`: one weight an output, zero past `from.k` and for `c >= k`).
///
/// # Safety
/// As [`gpu_rows`] with `from`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn from_weights(from: &Gemm, buffers: *const u64, c: usize, k: usize) -> [f32; crate::tile::SHORT_K] {
    let mut wv = [0.0f32; crate::tile::SHORT_K];
    // SAFETY: the caller's contract: `(kk, c)` is inside `from`'s active `k x n` (`from.n` is `k`).
    unsafe {
        let wb = *buffers.add(from.b.buf as usize) as *const f32;
        unrolled!(kk in [0, 1, 2, 3] {
            if kk < from.k as usize && c < k {
                wv[kk] = *wb.add(from.b.at(kk, c));
            }
        });
    }
    wv
}

/// Turns the staged tile of `from`'s `aux` rows (`A2`: `rows` rows of `k` at `a`, row stride `sa`) into
/// `from`'s elements of those rows (rows `m0 ..` of the product) and stores them in `from`'s `C` as well
/// (every column to `from.n_pad`, zero past `k`: the row as `crate::tile::gpu_short_rows` writes it), reading
/// the staged output gradients (`out`: [`crate::tile::SHORT_K`] a row) and `from`'s `B` (`W3`) from global
/// memory: thread `i` takes column `i % 128` of each 128-column chunk, rows `i / 128` apart by `W / 4`; each
/// element is `fma` over `from.k` ascending from 0, then [`crate::tile::finish`] ([`gpu_rows`]).
///
/// # Safety
/// As [`gpu_rows`] with `from`; the staged rows are complete (a barrier) and no thread reads them until
/// the next barrier; no other block writes these rows of `from`'s `C`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn hidden_from_out<const W: usize>(
    from: &Gemm,
    buffers: *const u64,
    (a, sa, out): (*mut f32, usize, *const f32),
    (m0, rows, k): (usize, usize, usize),
    thread: usize,
    w_first: [f32; crate::tile::SHORT_K],
) {
    use crate::nvptx_ops::{lds, lds4, shared_addr, sts};
    use crate::tile::{finish, fma};
    const { assert!(W.is_multiple_of(4), "whole 128-thread groups") };
    let (col, step) = (thread % CHAIN_UNITS, W / 4);
    let (ko, n_pad) = (from.k as usize, from.n_pad as usize);
    // SAFETY: the caller's contract: every shared offset is inside the staged tile, every global read of
    // `B` inside `from`'s active `k x n`, every store inside `from`'s `C`.
    unsafe {
        let c_out = *buffers.add(from.c.buf as usize) as *mut f32;
        let (ab, ob) = (shared_addr(a), shared_addr(out));
        let mut c = col;
        while c < n_pad {
            let wv = if c == col { w_first } else { from_weights(from, buffers, c, k) };
            let mut r = thread / CHAIN_UNITS;
            while r < rows {
                let (mut acc, mut x) = (0.0f32, 0.0f32);
                if c < k {
                    let dv = lds4(ob + 16 * r as u32);
                    x = lds(ab + 4 * (r * sa + c) as u32);
                    unrolled!(kk in [0, 1, 2, 3] {
                        if kk < ko {
                            acc = fma(dv[kk], wv[kk], acc);
                        }
                    });
                }
                let v = finish(from, m0 + r, c, acc, 0.0, x);
                if c < k {
                    sts(ab + 4 * (r * sa + c) as u32, v);
                }
                *c_out.add(from.c.at(m0 + r, c)) = v;
                r += step;
            }
            c += CHAIN_UNITS;
        }
    }
}
