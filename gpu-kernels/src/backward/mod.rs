//! The fused backward pass of a training step (`mlp_backward`): the hidden gradient of layer 1 and every
//! weight and bias gradient of one (trial, gradient chunk, group of [`BACKWARD_UNITS`] hidden units) in one
//! block, instead of an `mlp_rows` launch for [`Stage::Backward1`] and a `gemm_tiles` launch for
//! [`Stage::Gradients`] (whose tiles of short products, K = 128 samples, read every operand twice through
//! global memory).
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
//! is 240 blocks of [`BACKWARD_THREADS`], two a multiprocessor: one wave on the H200's 132 (one block per
//! group doing both sides would leave most multiprocessors with one block). Each block walks the chunk's samples
//! in sub-tiles of [`BACKWARD_ROWS`], staging sub-tile `i + 1` with `cp.async` while it computes sub-tile
//! `i` ([`BackwardShared`] says where; `gpu_backward` runs the stages). Per sub-tile, the layer-1 side:
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

#[cfg(target_arch = "nvptx64")]
mod block;

#[cfg(target_arch = "nvptx64")]
pub use block::gpu_backward;

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
/// layer-1 side's inputs; the group's columns of `A2` (layer-2 side) or `A1` (the layer-1 side's activation gradient):
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
