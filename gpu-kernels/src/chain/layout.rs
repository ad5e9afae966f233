//! Where a chain block ([`ChainShared`]) and a `gpu_rows` block ([`RowsShared`]) keep their operands in
//! shared memory.

use super::{ACT_ROWS, ACT_SHARED_APART, CHAIN_ROWS};
use crate::net::{NetArgs, walk_row_stride};
use crate::tile::Gemm;

/// Where a chain block keeps its operands in shared memory (float offsets from a 16-byte aligned base).
///
/// The weights region holds one wide layer's staged weights at a time: W1 at its end (`w1`), then W2 from
/// its start, so the first [`ChainShared::ahead`] rows of W2, which lie below W1, are copied while layer 1
/// runs. W3 (3 or 4 rows) has a region of its own, copied with W1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainShared {
    /// Row stride of the staged layer-1 weights and of the input rows ([`walk_row_stride`] of D).
    pub s1: usize,
    /// Row stride of the staged layer-2 and layer-3 weights and of the activations.
    pub s2: usize,
    /// Row stride of buffer `a` (the input rows, then the second activation).
    pub sa: usize,
    /// The staged weights of one wide layer, `H x max(s1, s2)`: W2 from here.
    pub weights: usize,
    /// The staged W1 (`H x s1`), at the end of the weights region.
    pub w1: usize,
    /// Rows of W2 that lie below `w1` (copied during layer 1).
    pub ahead: usize,
    /// The staged W3 (`O x s2`).
    pub w3: usize,
    /// Buffer `a`: `rows x sa`.
    pub a: usize,
    /// Buffer `b` (the first activation): `rows x s2`.
    pub b: usize,
    /// Floats in all.
    pub len: usize,
}

impl ChainShared {
    /// The layout for `net`'s sizes and tiles of [`CHAIN_ROWS`] (acting and narrow training chains).
    pub fn of(net: &NetArgs) -> Self {
        Self::with_rows(net, CHAIN_ROWS)
    }

    /// The layout for `net`'s sizes and tiles of `rows`.
    pub fn with_rows(net: &NetArgs, rows: usize) -> Self {
        Self::laid_out(net, rows, false)
    }

    /// The layout for `net` and tiles of `rows` with W2 and W1 apart (W2, then W1): every row of W2 is
    /// copied while layer 1 runs ([`Self::ahead`] is the hidden width), none waited for after it.
    pub fn apart(net: &NetArgs, rows: usize) -> Self {
        Self::laid_out(net, rows, true)
    }

    /// The weights region (W1 at its end over W2's last rows, or with `apart` after all of W2), W3, then
    /// the two row buffers.
    fn laid_out(net: &NetArgs, rows: usize, apart: bool) -> Self {
        let (d, hs, o) = (net.input as usize, net.hidden as usize, net.outputs as usize);
        let (s1, s2) = (walk_row_stride(d), walk_row_stride(hs));
        let sa = s1.max(s2);
        let weights = 0;
        let end = weights + if apart { hs * (s2 + s1) } else { hs * s1.max(s2) };
        let w1 = end - hs * s1;
        let w3 = end;
        let a = w3 + o * s2;
        let b = a + rows * sa;
        Self { s1, s2, sa, weights, w1, ahead: (w1 - weights) / s2, w3, a, b, len: b + rows * s2 }
    }

    /// The acting chains' layout: [`Self::apart`] for [`ACT_ROWS`] where it takes at most
    /// [`ACT_SHARED_APART`] bytes, else [`Self::with_rows`].
    pub fn acting(net: &NetArgs) -> Self {
        let apart = Self::apart(net, ACT_ROWS);
        if apart.bytes() <= ACT_SHARED_APART { apart } else { Self::with_rows(net, ACT_ROWS) }
    }

    /// Bytes of dynamic shared memory a chain block needs.
    pub fn bytes(&self) -> usize {
        4 * self.len
    }
}

/// Where a `gpu_rows` (nvptx only) block keeps its operands in shared memory (float offsets from a 16-byte aligned
/// base): its tile of `A` ([`CHAIN_ROWS`] or [`WIDE_ROWS`](super::WIDE_ROWS) rows of `k`), all of `B` (`k` rows of
/// `n_pad`) and room for the tile's output gradients ([`crate::tile::SHORT_K`] a row), which a block whose tile of `A`
/// is computed from them (`gpu_rows`' `from`, nvptx only) stages (2 KB at 128 rows, in every layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsShared {
    /// Row stride of the staged `A` rows ([`walk_row_stride`] of `k`).
    pub sa: usize,
    /// Row stride of the staged `B` rows ([`walk_row_stride`] of `n_pad`).
    pub sb: usize,
    /// The staged `B`.
    pub b: usize,
    /// The tile's output gradients ([`crate::tile::SHORT_K`] floats a row, 16-byte aligned).
    pub out: usize,
    /// Floats in all.
    pub len: usize,
}

impl RowsShared {
    /// The layout for a product of `k` and `n_pad` on tiles of `rows` rows.
    pub fn of(k: usize, n_pad: usize, rows: usize) -> Self {
        let (sa, sb) = (walk_row_stride(k), walk_row_stride(n_pad));
        let b = rows * sa;
        let out = b + k * sb;
        Self { sa, sb, b, out, len: out + rows * crate::tile::SHORT_K }
    }

    /// The layout of product `g` on tiles of `rows` rows ([`CHAIN_ROWS`]: `mlp_rows`; [`WIDE_ROWS`](super::WIDE_ROWS):
    /// `mlp_rows_wide`).
    pub fn of_product(g: &Gemm, rows: usize) -> Self {
        Self::of(g.k as usize, g.n_pad as usize, rows)
    }

    /// Bytes of dynamic shared memory a block needs.
    pub fn bytes(&self) -> usize {
        4 * self.len
    }
}

#[cfg(test)]
mod tests {
    use super::ChainShared;
    use crate::chain::{ACT_ROWS, ACT_SHARED_APART, CHAIN_ROWS, Chain, WIDE_ROWS};
    use crate::net::NetArgs;

    /// The shared layout: rows 16-byte aligned and padded so that eight consecutive rows fall in distinct
    /// bank quads; the buffers do not overlap; D = 54, H = 128 fits two blocks per H200 multiprocessor.
    #[test]
    fn shared_layout_is_aligned_and_fits_two_blocks() {
        let sh = ChainShared::of(&NetArgs::new(5, 1024, 54, 128, 3, 1024, 300_000));
        for s in [sh.s1, sh.s2, sh.sa] {
            assert_eq!(s % 4, 0);
            assert_eq!((s / 4) % 2, 1, "stride {s}: odd in quads");
        }
        assert!(sh.a >= 128 * sh.s1.max(sh.s2) && sh.b == sh.a + CHAIN_ROWS * sh.sa);
        assert!(2 * (sh.bytes() + 1024) <= 228 * 1024, "{} bytes", sh.bytes());
        // W1 ends where W3 begins; the W2 rows copied during layer 1 end at or below W1's start.
        assert_eq!(sh.w1 + 128 * sh.s1, sh.w3);
        assert_eq!(sh.ahead, sh.w1 / sh.s2);
        assert!(sh.ahead > 0 && sh.weights + sh.ahead * sh.s2 <= sh.w1);
        assert_eq!(sh.a, sh.w3 + 3 * sh.s2);
        // Narrow hidden widths: W1 fills the region, so no W2 row is copied ahead, and W2 still fits.
        let narrow = ChainShared::of(&NetArgs::new(2, 64, 57, 11, 4, 64, 1_000));
        assert_eq!((narrow.w1, narrow.ahead), (0, 0));
        assert!(11 * narrow.s2 <= narrow.w3 && narrow.a == narrow.w3 + 4 * narrow.s2);
        // Wide tiles: the same weights' layout, buffers of 128 rows; D = 54, H = 128 fits one block in an H200
        // multiprocessor's 227 KB a block (its layers' weights once for 128 rows).
        let net = NetArgs::new(5, 1024, 54, 128, 3, 1024, 300_000);
        let wide = ChainShared::with_rows(&net, WIDE_ROWS);
        assert_eq!((wide.w1, wide.w3, wide.a, wide.ahead), (sh.w1, sh.w3, sh.a, sh.ahead));
        assert_eq!(wide.b, wide.a + WIDE_ROWS * wide.sa);
        assert_eq!(wide.len, wide.b + WIDE_ROWS * wide.s2);
        assert!(wide.bytes() <= 227 * 1024, "{} bytes", wide.bytes());
        let c = Chain { rows: WIDE_ROWS as u32, ..Chain::default() };
        assert_eq!(c.shared(&net), wide);
        assert_eq!(Chain { rows: CHAIN_ROWS as u32, ..c }.shared(&net), sh);
    }

    /// The acting layout keeps W2 and W1 apart (every row of W2 ahead) where it takes at most
    /// `ACT_SHARED_APART` bytes: D = 54, H = 128 does, one block of 40 rows a multiprocessor; wider hidden
    /// layers fall back to the shared weights region.
    #[test]
    fn acting_layout_keeps_the_weights_apart_where_they_fit() {
        let net = NetArgs::new(5, 1024, 54, 128, 3, 1024, 300_000);
        let act = ChainShared::acting(&net);
        assert_eq!(act, ChainShared::apart(&net, ACT_ROWS));
        assert_eq!(Chain { rows: ACT_ROWS as u32, ..Chain::default() }.shared(&net), act);
        assert_eq!((act.weights, act.ahead, act.w1), (0, 128, 128 * act.s2));
        assert_eq!(act.w3, act.w1 + 128 * act.s1);
        assert_eq!((act.a, act.b), (act.w3 + 3 * act.s2, act.w3 + 3 * act.s2 + ACT_ROWS * act.sa));
        assert_eq!(act.len, act.b + ACT_ROWS * act.s2);
        assert!(act.bytes() <= ACT_SHARED_APART, "{} bytes", act.bytes());
        let wide = NetArgs::new(5, 1024, 54, 192, 3, 1024, 300_000);
        assert!(ChainShared::apart(&wide, ACT_ROWS).bytes() > ACT_SHARED_APART);
        assert_eq!(ChainShared::acting(&wide), ChainShared::with_rows(&wide, ACT_ROWS));
    }
}
