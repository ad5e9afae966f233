//! What the greedy walks need of a network: its weights staged in padded rows ([`walk_stage`],
//! [`walk_layers`]) and their blocks' shared-memory layouts ([`WalkShared`], [`WalkRegsShared`]).

use super::NetArgs;
use super::dot::LayerView;
use crate::mlp::Layout;

/// Row stride of a staged walk layer with `k` inputs: `k` rounded up to 8, plus 4, so rows start 16-byte
/// aligned and the eight rows a quarter-warp's vector loads touch fall in different banks.
pub fn walk_row_stride(k: usize) -> usize {
    k.next_multiple_of(8) + 4
}

/// The three layers of a walk block's network (`w`: the trial's weights in global memory; `stage`: the
/// padded copy [`walk_stage`] wrote there, when staged).
pub fn walk_layers(l: &Layout, w: *const f32, h: usize, stage: Option<*const f32>) -> [LayerView; 3] {
    let d = l.input;
    match stage {
        Some(s) => {
            let (s1, s2) = (walk_row_stride(d), walk_row_stride(h));
            [
                LayerView { base: s, unit: s1, step: 1, k: d, aligned: true },
                LayerView { base: s.wrapping_add(h * s1), unit: s2, step: 1, k: h, aligned: true },
                LayerView { base: s.wrapping_add(h * s1 + h * s2), unit: s2, step: 1, k: h, aligned: true },
            ]
        }
        None => [
            LayerView { base: w.wrapping_add(l.w1()), unit: l.input, step: 1, k: d, aligned: false },
            LayerView { base: w.wrapping_add(l.w2()), unit: l.hidden, step: 1, k: h, aligned: false },
            LayerView { base: w.wrapping_add(l.w3()), unit: l.hidden, step: 1, k: h, aligned: false },
        ],
    }
}

/// Floats of the padded weights a staged walk keeps in shared memory (at most; `h <= hidden`).
pub fn walk_stage_floats(net: &NetArgs) -> usize {
    let l = net.layout();
    l.hidden * walk_row_stride(l.input) + (l.hidden + l.outputs) * walk_row_stride(l.hidden)
}

/// Elements [`walk_stage`] copies for a trial of width `h`.
pub fn walk_stage_len(l: &Layout, h: usize) -> usize {
    h * (l.input + h + l.outputs)
}

/// Copies element `i` of the walk's staged weights (`i < walk_stage_len`, any order): row n of `W1` to
/// `stage[n * s1 ..]`, then the rows of `W2` and `W3` ([`walk_layers`] says where), padding untouched.
///
/// # Safety
/// `w`: the trial's weights (`l.params()` floats); `stage`: [`walk_stage_floats`] floats.
#[inline]
pub unsafe fn walk_stage(l: &Layout, w: *const f32, h: usize, stage: *mut f32, i: usize) {
    let (d, o) = (l.input, l.outputs);
    let (s1, s2) = (walk_row_stride(d), walk_row_stride(h));
    // SAFETY: the caller's lengths bound every offset (`n` below each layer's units, `j` below its inputs).
    unsafe {
        if i < d * h {
            let (n, j) = (i / d, i % d);
            *stage.add(n * s1 + j) = *w.add(l.w1() + n * l.input + j);
        } else if i < d * h + h * h {
            let (n, j) = ((i - d * h) / h, (i - d * h) % h);
            *stage.add(h * s1 + n * s2 + j) = *w.add(l.w2() + n * l.hidden + j);
        } else if i < d * h + h * h + o * h {
            let (n, j) = ((i - d * h - h * h) / h, (i - d * h - h * h) % h);
            *stage.add(h * s1 + h * s2 + n * s2 + j) = *w.add(l.w3() + n * l.hidden + j);
        }
    }
}

/// Threads of a greedy-walk block that compute the layers (a unit each, looping when the width is larger).
pub const WALK_LAYER_THREADS: usize = 128;
/// Threads of a greedy-walk block: the layer threads, then one warp per action whose first lane steps a copy
/// of the env with that action while the layers run (the chosen copy is kept once the Q-values are known).
pub const WALK_THREADS: usize = WALK_LAYER_THREADS + 32 * crate::mlp::ACTIONS;

/// Floats of an env state in a walk block's candidate slots.
pub const WALK_STATE_FLOATS: usize = core::mem::size_of::<crate::types::EnvState>() / 4;

/// Where a greedy-walk block keeps its buffers in shared memory (float offsets from a 16-byte aligned base).
/// Candidates and Q-values are double-buffered by step parity, so the writers of step s + 1 never meet the
/// readers of step s between the block-wide barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkShared {
    /// `2 x ACTIONS` candidate env states ([`WALK_STATE_FLOATS`] each), first (8-byte aligned).
    pub slots: usize,
    /// `2 x ACTIONS x 3` portfolio floats of the candidates.
    pub floats: usize,
    /// `2 x outputs` Q-values (or logits and value).
    pub q: usize,
    /// The observation (`input` floats).
    pub obs: usize,
    /// First hidden activations (`hidden` floats).
    pub h1: usize,
    /// Second hidden activations.
    pub h2: usize,
    /// Floats in all, rounded up to 4 (the staged weights follow, 16-byte aligned).
    pub len: usize,
}

impl WalkShared {
    /// The layout for `net`.
    pub fn of(net: &NetArgs) -> Self {
        let (d, hs, o) = (net.input as usize, net.hidden as usize, net.outputs as usize);
        let a = crate::mlp::ACTIONS;
        let slots = 0;
        let floats = slots + 2 * a * WALK_STATE_FLOATS;
        let q = floats + 2 * a * 3;
        // The layer inputs start 16-byte aligned (vector loads).
        let obs = (q + 2 * o).next_multiple_of(4);
        let h1 = (obs + d).next_multiple_of(4);
        let h2 = (h1 + hs).next_multiple_of(4);
        Self { slots, floats, q, obs, h1, h2, len: (h2 + hs).next_multiple_of(4) }
    }
}

/// Floats of a greedy-walk block's buffers ([`WalkShared`]).
pub fn walk_shared(net: &NetArgs) -> usize {
    WalkShared::of(net).len
}

/// The widest hidden layer of the register walk (`greedy_walk_regs`): each layer thread keeps its unit's row
/// of `W2` in registers, the output warp's lanes their rows of `W3`.
pub const WALK_REG_UNITS: usize = WALK_LAYER_THREADS;
/// Threads of a register-walk block: the layer threads (a unit each), the env warps, then the output warp.
pub const WALK_REGS_THREADS: usize = WALK_THREADS + 32;
/// First thread of the register walk's output warp (lane `o` computes output `o`).
pub const WALK_OUTPUT_THREAD: usize = WALK_THREADS;

/// Whether `net` suits the register walk: hidden layers of at most [`WALK_REG_UNITS`] and at most 32 outputs.
pub fn walk_regs_suit(net: &NetArgs) -> bool {
    net.hidden as usize <= WALK_REG_UNITS && net.outputs <= 32 && net.input >= 3
}

/// Where a register-walk block keeps its buffers in shared memory (float offsets from a 16-byte aligned
/// base). The candidates, their portfolio floats and the outputs are [`WalkShared`]'s (double-buffered by
/// step parity); the activations hold [`WALK_REG_UNITS`] floats each (zeros past the trial's width, which
/// the zero weights past it multiply: the padded terms add `+0` to a sum that is never `-0`, so the sums
/// are the unpadded ones bit for bit); two rows of market features (the bar about to be observed when it
/// was not foreseen, and the next bar's); `W1`'s rows padded ([`walk_row_stride`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkRegsShared {
    /// Candidate states, portfolio floats and outputs, as [`WalkShared`] places them.
    pub base: WalkShared,
    /// First hidden activations ([`WALK_REG_UNITS`] floats).
    pub h1: usize,
    /// Second hidden activations ([`WALK_REG_UNITS`] floats).
    pub h2: usize,
    /// Market features of a bar whose layer-1 prefix was not computed ahead (`input - 3` floats).
    pub now: usize,
    /// Market features of the next bar (`input - 3` floats).
    pub next: usize,
    /// The staged `W1`: `hidden` rows of [`walk_row_stride`]`(input)` floats.
    pub w1: usize,
    /// Floats in all.
    pub len: usize,
}

impl WalkRegsShared {
    /// The layout for `net`.
    pub fn of(net: &NetArgs) -> Self {
        let base = WalkShared::of(net);
        let (d, hs) = (net.input as usize, net.hidden as usize);
        let f = d.saturating_sub(3);
        let h1 = (base.q + 2 * net.outputs as usize).next_multiple_of(4);
        let h2 = h1 + WALK_REG_UNITS;
        let now = h2 + WALK_REG_UNITS;
        let next = (now + f).next_multiple_of(4);
        let w1 = (next + f).next_multiple_of(4);
        Self { base, h1, h2, now, next, w1, len: w1 + hs * walk_row_stride(d) }
    }
}

#[cfg(test)]
mod tests {
    use super::{WALK_REG_UNITS, WalkRegsShared, walk_regs_suit, walk_row_stride};
    use crate::net::NetArgs;

    /// The register walk's buffers: the activations hold `WALK_REG_UNITS` floats each (its chains read whole
    /// groups of 32 past a trial's width), the vector-read buffers start 16-byte aligned, none overlaps the
    /// next, `W1` ends the layout, and the DQN and PPO networks of the benchmarks (D = 54, H = 128) fit a
    /// block's 227 KB with room to spare; wider networks are not for it.
    #[test]
    fn register_walk_layout_is_aligned_and_disjoint() {
        for (input, hidden, outputs) in [(54, 128, 3), (54, 128, 4), (54, 12, 3), (7, 1, 3), (130, 128, 4)] {
            let net = NetArgs::new(5, 1, input, hidden, outputs, 1, 100);
            assert!(walk_regs_suit(&net));
            let l = WalkRegsShared::of(&net);
            let f = input as usize - 3;
            let regions = [
                (l.base.q, 2 * outputs),
                (l.h1, WALK_REG_UNITS),
                (l.h2, WALK_REG_UNITS),
                (l.now, f),
                (l.next, f),
                (l.w1, hidden as usize * walk_row_stride(input as usize)),
            ];
            for w in regions.windows(2) {
                assert!(w[0].0 + w[0].1 <= w[1].0, "{input}/{hidden}: {:?} overlaps {:?}", w[0], w[1]);
            }
            for (at, _) in &regions[1..] {
                assert_eq!(at % 4, 0, "{input}/{hidden}: offset {at} not 16-byte aligned");
            }
            assert_eq!(l.len, l.w1 + hidden as usize * walk_row_stride(input as usize));
            assert!(l.base.q + 2 * outputs <= l.h1 && l.base.floats < l.base.q);
        }
        assert!(4 * WalkRegsShared::of(&NetArgs::new(5, 1, 54, 128, 4, 1, 100)).len < 64 * 1024);
        assert!(!walk_regs_suit(&NetArgs::new(5, 1, 54, 129, 3, 1, 100)));
    }
}
