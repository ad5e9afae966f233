//! Dot products in the product contract's order ([`dot_strided`], [`dot_aligned`], [`dots_aligned`]) and the
//! single-row form of a layer ([`dense_unit`] through a [`LayerView`]).

/// `acc = fma(x[j], w[j * sj], acc)` for j ascending from `acc = 0` (the product contract's order,
/// [`crate::tile`]), the loads of eight terms issued ahead of their FMAs.
///
/// # Safety
/// `x` holds `k` floats and `w` holds an element at every `j * sj` for `j < k`.
#[inline(always)]
pub unsafe fn dot_strided(x: *const f32, w: *const f32, sj: usize, k: usize) -> f32 {
    let mut acc = 0.0f32;
    let mut j = 0;
    // SAFETY: the caller's contract bounds every offset below.
    unsafe {
        while j + 8 <= k {
            let xs: [f32; 8] = core::array::from_fn(|u| *x.add(j + u));
            let ws: [f32; 8] = core::array::from_fn(|u| *w.add((j + u) * sj));
            for u in 0..8 {
                acc = crate::tile::fma(xs[u], ws[u], acc);
            }
            j += 8;
        }
        while j < k {
            acc = crate::tile::fma(*x.add(j), *w.add(j * sj), acc);
            j += 1;
        }
    }
    acc
}

/// Eight consecutive floats from a 16-byte aligned address (two vector loads).
///
/// # Safety
/// `p` is 16-byte aligned and holds 8 floats.
#[cfg(not(target_arch = "nvptx64"))]
#[inline(always)]
unsafe fn load8(p: *const f32) -> [f32; 8] {
    use crate::tile::F4;
    // SAFETY: the caller's contract.
    let (a, b) = unsafe { ((*(p as *const F4)).0, (*(p.add(4) as *const F4)).0) };
    [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
}

/// [`dot_strided`] with unit stride on 16-byte aligned `x` and `w`: the same sum in the same order, eight
/// terms per pair of vector loads, the next eight loaded while the current ones are accumulated (two
/// register sets in turn, so no set is copied into the other). On the GPU both operands are in the block's
/// shared memory (a staged walk layer and its input, a chain's output layer), read through 32-bit
/// shared-window addresses.
///
/// # Safety
/// `x` and `w` are 16-byte aligned and hold `k` floats each; on the GPU both lie in this block's shared
/// memory.
#[inline(always)]
pub unsafe fn dot_aligned(x: *const f32, w: *const f32, k: usize) -> f32 {
    // SAFETY: the caller's contract.
    unsafe { dots_aligned(x, [w], k)[0] }
}

/// [`dot_aligned`] of one input `x` with each of `N` weight rows `w`: each sum is [`dot_aligned`]'s (the same
/// terms in the same order), the `N` chains interleaved, and `x`'s eight floats of a step loaded once for
/// all of them.
///
/// # Safety
/// As [`dot_aligned`] for each of the `N` rows.
#[inline(always)]
pub unsafe fn dots_aligned<const N: usize>(x: *const f32, w: [*const f32; N], k: usize) -> [f32; N] {
    let mut acc = [0.0f32; N];
    let chunks = k / 8;
    #[cfg(target_arch = "nvptx64")]
    let load = {
        use crate::nvptx_ops::{lds4, shared_addr};
        let xa = shared_addr(x);
        let wa: [u32; N] = core::array::from_fn(|n| shared_addr(w[n]));
        let eight = |a: [f32; 4], b: [f32; 4]| [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]];
        // SAFETY: the caller's contract; chunk c reads floats 8c .. 8c + 8 <= k.
        move |c: usize| unsafe {
            let o = 32 * c as u32;
            let xs = eight(lds4(xa + o), lds4(xa + o + 16));
            let ws: [[f32; 8]; N] = core::array::from_fn(|n| eight(lds4(wa[n] + o), lds4(wa[n] + o + 16)));
            (xs, ws)
        }
    };
    #[cfg(not(target_arch = "nvptx64"))]
    // SAFETY: the caller's contract; chunk c reads floats 8c .. 8c + 8 <= k.
    let load = |c: usize| unsafe {
        let ws: [[f32; 8]; N] = core::array::from_fn(|n| load8(w[n].add(8 * c)));
        (load8(x.add(8 * c)), ws)
    };
    let sum8 = |acc: &mut [f32; N], (xs, ws): ([f32; 8], [[f32; 8]; N])| {
        for u in 0..8 {
            for n in 0..N {
                acc[n] = crate::tile::fma(xs[u], ws[n][u], acc[n]);
            }
        }
    };
    if chunks > 0 {
        let last = chunks - 1;
        let mut c = 0;
        let mut a = load(0);
        loop {
            let b = load((c + 1).min(last));
            sum8(&mut acc, a);
            if c == last {
                break;
            }
            a = load((c + 2).min(last));
            sum8(&mut acc, b);
            c += 2;
            if c > last {
                break;
            }
        }
    }
    // SAFETY: as above.
    unsafe {
        for j in 8 * chunks..k {
            for n in 0..N {
                acc[n] = crate::tile::fma(*x.add(j), *w[n].add(j), acc[n]);
            }
        }
    }
    acc
}

/// Where a walk block reads layer `layer`'s weights: the element (unit `n`, input `j`) at `base + n * unit + j * step`.
/// In place (`aligned = false`): the trial's row-major block in global memory; staged: the block's padded copy in
/// shared memory ([`walk_stage`](super::walk_stage): rows of [`walk_row_stride`](super::walk_row_stride) floats, read
/// with vector loads).
#[derive(Clone, Copy, Debug)]
pub struct LayerView {
    /// Address of unit 0's first weight.
    pub base: *const f32,
    /// Distance between units.
    pub unit: usize,
    /// Distance between inputs (1 when aligned).
    pub step: usize,
    /// Inputs.
    pub k: usize,
    /// Rows and inputs 16-byte aligned ([`dot_aligned`]; on the GPU both in the block's shared memory).
    pub aligned: bool,
}

/// Output `n` of a layer for one input row `x` ([`LayerView`]; `bias` its bias, `act` the hidden layers'
/// activation, `None` on the output layer): the product contract's order (the dot product, then the bias
/// and the activation), so it equals the element of a [`dense`](super::dense) product bit for bit.
///
/// # Safety
/// `x` holds `v.k` floats (16-byte aligned when `v.aligned`) and `v` addresses the layer's weights; on the
/// GPU, when `v.aligned`, `x` and the weights lie in this block's shared memory ([`dot_aligned`]).
#[inline(always)]
pub unsafe fn dense_unit(v: &LayerView, bias: f32, act: Option<u32>, n: usize, x: *const f32) -> f32 {
    let row = v.base.wrapping_add(n * v.unit);
    // SAFETY: the caller's contract.
    let dot = unsafe { if v.aligned { dot_aligned(x, row, v.k) } else { dot_strided(x, row, v.step, v.k) } };
    let s = dot + bias;
    match act {
        Some(a) => crate::mlp::activate(a, s),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    /// `dots_aligned` is `dot_aligned` of each row and `dot_strided` with unit stride, bit for bit, for lengths
    /// with and without a partial chunk of eight (the chain's output layer and the walk rely on it).
    #[test]
    fn dots_aligned_are_each_rows_dot() {
        use super::{dot_aligned, dot_strided, dots_aligned};
        // 16-byte aligned rows of 136 floats: x, then four weight rows.
        let mut rows = [crate::tile::F4([0.0; 4]); 5 * 34];
        let mut r = 0x2545_f491_4f6c_dd1d_u64;
        for q in rows.iter_mut() {
            for v in q.0.iter_mut() {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                *v = (r >> 40) as f32 / (1u64 << 22) as f32 - 2.0;
            }
        }
        let base = rows.as_ptr() as *const f32;
        // SAFETY: each row holds 136 floats, 16-byte aligned; k <= 136.
        unsafe {
            let (x, w) = (base, [base.add(136), base.add(272), base.add(408), base.add(544)]);
            for k in [0, 1, 7, 8, 9, 54, 100, 128, 131, 136] {
                let three = dots_aligned(x, [w[0], w[1], w[2]], k);
                let four = dots_aligned(x, w, k);
                for n in 0..4 {
                    let one = dot_aligned(x, w[n], k);
                    assert_eq!(one.to_bits(), dot_strided(x, w[n], 1, k).to_bits(), "k {k}, row {n}");
                    assert_eq!(four[n].to_bits(), one.to_bits(), "k {k}, row {n} of 4");
                    if n < 3 {
                        assert_eq!(three[n].to_bits(), one.to_bits(), "k {k}, row {n} of 3");
                    }
                }
            }
        }
    }
}
