//! The nvptx helpers both chain bodies use: staging rows into shared memory with `cp.async`
//! ([`stage_rows`]) and a thread's patch of accumulators ([`accumulate`]).

use crate::tile::unrolled;

/// Starts copying rows `0..rows` (`k` floats each, row `r` at `src + r * src_stride`) to `dst + r *
/// dst_stride` with `cp.async` (no registers, no wait: the caller commits and waits, then a barrier):
/// warp `w` of the block's `warps` takes rows `w, w + warps, ..`, lane `l` columns `l, l + 32, ..`. (Loads
/// into registers and stores from them cost ten instructions an element and held 64 registers; this, two or
/// three.)
///
/// # Safety
/// The ranges are valid, the source unwritten during the kernel; `thread < 32 warps`.
#[inline(always)]
pub(super) unsafe fn stage_rows(
    src: *const f32,
    src_stride: usize,
    dst: *mut f32,
    dst_stride: usize,
    rows: usize,
    k: usize,
    (thread, warps): (usize, usize),
) {
    use crate::nvptx_ops::{cp_async4, shared_addr};
    let warps = warps as u32;
    // u32 indices (64-bit compares and adds doubled the loop): a staged layer and its source rows lie inside
    // one buffer, whose offsets [`Chain`]'s products already keep below 2^32.
    let (rows, k, ss, ds) = (rows as u32, k as u32, src_stride as u32, dst_stride as u32);
    let (lane, warp, db) = (thread as u32 % 32, thread as u32 / 32, shared_addr(dst));
    let mut j0 = lane;
    // SAFETY: the caller's contract; every copied element has `r < rows`, `j < k`.
    unsafe {
        while j0 < k {
            // Columns j0 + 32 c of every row of the warp: pointers stepped per row, the columns as offsets.
            let live: [bool; 4] = core::array::from_fn(|c| j0 + 32 * (c as u32) < k);
            let (mut r, mut s, mut d) = (warp, src.add((warp * ss + j0) as usize), db + 4 * (warp * ds + j0));
            while r < rows {
                unrolled!(c in [0, 1, 2, 3] {
                    if live[c] {
                        cp_async4(d + 128 * c as u32, s.add(32 * c));
                    }
                });
                (r, s, d) = (r + warps, s.add((warps * ss) as usize), d + 4 * warps * ds);
            }
            j0 += 128;
        }
    }
}

/// The `R` x 4 patch of a thread: `acc[i][j] = sum over k of x[i][k] w[j][k]`, each a chain of FMAs in
/// ascending `k` from 0 (the product contract's order). `xa` are the shared addresses of the warp's `R` rows
/// (16-byte aligned, `k` floats each); `wload(o)` gives the four units' weights of inputs `o / 4 .. o / 4 +
/// 4` (`o` in bytes, as `[unit][input]`); `x_tail(i, kk)` and `w_tail(kk)` the inputs past the last full
/// quad. With `AHEAD`, two register sets in turn, each loaded one step ahead of its FMAs (latency hiding
/// without copying one set into the other; the loads past the last step re-read it, clamped); without, one
/// set (blocks of many warps, at most 128 registers a thread, hide the loads' latency with other warps).
///
/// # Safety
/// The addresses `wload`, `xa` and the tail closures read hold the operands; shared memory written before a
/// barrier that every thread has passed.
#[inline(always)]
pub(super) unsafe fn accumulate<const R: usize, const AHEAD: bool>(
    xa: &[u32; R],
    k: usize,
    wload: impl Fn(u32) -> [[f32; 4]; 4],
    x_tail: impl Fn(usize, usize) -> f32,
    w_tail: impl Fn(usize) -> [f32; 4],
) -> [[f32; 4]; R] {
    use crate::nvptx_ops::lds4;
    use crate::tile::fma;
    let vecs = k / 4;
    let mut acc = [[0.0f32; 4]; R];
    // SAFETY: the caller's contract; inputs are read below `k` only.
    unsafe {
        let load = |o: u32| {
            let xs: [[f32; 4]; R] = core::array::from_fn(|i| lds4(xa[i] + o));
            (xs, wload(o))
        };
        let step = |acc: &mut [[f32; 4]; R], (xs, ws): ([[f32; 4]; R], [[f32; 4]; 4])| {
            unrolled!(u in [0, 1, 2, 3] {
                for i in 0..R {
                    unrolled!(j in [0, 1, 2, 3] {
                        acc[i][j] = fma(xs[i][u], ws[j][u], acc[i][j]);
                    });
                }
            });
        };
        if !AHEAD {
            let mut o = 0;
            while o < 16 * vecs as u32 {
                step(&mut acc, load(o));
                o += 16;
            }
        } else if vecs > 0 {
            let last = 16 * (vecs as u32 - 1);
            let mut o = 0;
            let mut a = load(0);
            loop {
                let b = load((o + 16).min(last));
                step(&mut acc, a);
                if o == last {
                    break;
                }
                a = load((o + 32).min(last));
                step(&mut acc, b);
                o += 32;
                if o > last {
                    break;
                }
            }
        }
        for kk in 4 * vecs..k {
            let ws = w_tail(kk);
            for (i, acc) in acc.iter_mut().enumerate() {
                let xv = x_tail(i, kk);
                unrolled!(j in [0, 1, 2, 3] {
                    acc[j] = fma(xv, ws[j], acc[j]);
                });
            }
        }
    }
    acc
}
