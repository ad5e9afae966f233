//! The products of a small network's step, shared by the learners: three dense layers (input D -> H -> H
//! -> O) for K trials at once, acting for every env, forward passes over minibatches, the backward pass and
//! the weight gradients in chunks ([`plan`]), and the single-row form of a layer for sequential walks
//! ([`dense_unit`]). Every element follows [`crate::tile`]'s order, so the CPU and the GPU give the same bits.

use crate::mlp::Layout;
use crate::tile::{EPI_BIAS, EPI_NONE, Gemm, Operand, backward_epilogue, forward_epilogue};

/// Sizes of a learner's networks and buffers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NetArgs {
    /// Trials.
    pub n_trials: u32,
    /// Envs per trial (acting).
    pub envs_per_trial: u32,
    /// Input width D = F + 3.
    pub input: u32,
    /// Row stride H.
    pub hidden: u32,
    /// Outputs O (3 Q-values; or 3 logits and a value).
    pub outputs: u32,
    /// Samples per trial in the minibatch buffers (B).
    pub batch: u32,
    /// Bars in the price block.
    pub n_bars: u32,
    /// The hidden layers' activation ([`crate::mlp::ACT_RELU`] or [`crate::mlp::ACT_TANH`]).
    pub activation: u32,
}

const _: () = assert!(core::mem::size_of::<NetArgs>() == 32);

impl NetArgs {
    /// The sizes of `n_trials` networks of `outputs` outputs (the learners' `net()` build them).
    #[allow(clippy::too_many_arguments, reason = "every size of the learner's buffers")]
    pub fn new(
        n_trials: u32,
        envs_per_trial: u32,
        input: u32,
        hidden: u32,
        outputs: usize,
        batch: u32,
        n_bars: u32,
    ) -> Self {
        Self {
            n_trials,
            envs_per_trial,
            input,
            hidden,
            outputs: outputs as u32,
            batch,
            n_bars,
            activation: crate::mlp::ACT_RELU,
        }
    }

    /// The same sizes with the hidden layers' activation `activation`.
    pub fn with_activation(self, activation: u32) -> Self {
        Self { activation, ..self }
    }

    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        Layout {
            input: self.input as usize,
            hidden: self.hidden as usize,
            outputs: self.outputs as usize,
            activation: self.activation,
        }
    }

    /// Floats of the per-chunk weight gradients ([`gradient`] reads them): [`grad_chunks`]`(batch) x
    /// n_trials x params`, chunk-major.
    pub fn partial_len(&self) -> usize {
        grad_chunks(self.batch as usize) * self.n_trials as usize * self.layout().params()
    }
}

/// One trial's active sizes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NetTrial {
    /// Active hidden width (<= H).
    pub hidden: u32,
    /// Active minibatch (<= B).
    pub batch: u32,
    /// Training forward passes ([`Stage::Forward`]): 1 (PPO), 2 (DQN), 3 (Double DQN).
    pub passes: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

/// Buffer indices of a learner's buffer table ([`crate::tile::Operand::buf`]).
pub mod buffers {
    /// Online parameters, `K x P`.
    pub const ONLINE: u32 = 0;
    /// Target parameters, `K x P`.
    pub const TARGET: u32 = 1;
    /// Sampled observations, `K x B x D`.
    pub const OBS: u32 = 2;
    /// Sampled next observations, `K x B x D`.
    pub const NEXT_OBS: u32 = 3;
    /// Training activations and gradients ([`super::Work`]).
    pub const WORK: u32 = 4;
    /// Per-chunk weight gradients, `chunks x K x P`.
    pub const PARTIAL: u32 = 5;
    /// Acting: observations, activations and Q-values of every env ([`super::ActWork`]).
    pub const ACT: u32 = 6;
    /// [`super::MAX_GRAD_CHUNK`] ones: the input of the bias gradients.
    pub const ONES: u32 = 7;
    /// Entries of the table.
    pub const COUNT: usize = 8;
}

/// The fewest samples per chunk of the split gradient sums: each chunk's products are summed in sample
/// order, then the chunks in chunk order ([`grad_chunk`] sizes them).
pub const GRAD_CHUNK: usize = 128;

/// The most samples per chunk of the split gradient sums (and the length of the bias gradients' ones).
pub const MAX_GRAD_CHUNK: usize = 1_024;

/// Samples per chunk of the split gradient sums of a minibatch buffer of `batch` samples: [`GRAD_CHUNK`],
/// doubled (up to [`MAX_GRAD_CHUNK`]) while 64 chunks or more of the doubled size would remain. A chunk is
/// one K-run of the gradient products: small minibatches (DQN's) keep many chunks to spread over the GPU,
/// large ones (PPO's quarter rollouts) take long runs, fewer partial sums to store and add. Both backends
/// use it, so it fixes the summation order (the bits) of a given `batch`.
pub const fn grad_chunk(batch: usize) -> usize {
    let mut chunk = GRAD_CHUNK;
    while chunk < MAX_GRAD_CHUNK && batch / (2 * chunk) >= 64 {
        chunk *= 2;
    }
    chunk
}

/// Chunks of the split gradient sums of a minibatch buffer of `batch` samples ([`grad_chunk`]).
pub const fn grad_chunks(batch: usize) -> usize {
    batch.div_ceil(grad_chunk(batch))
}

/// Regions of the training buffer, per trial (`B x H` floats for activations and hidden gradients, `B x O`
/// for outputs and output gradients): pass 0, online on the observations (`A1`, `A2`, `Q`); pass 1, target
/// on the next observations (`T1`, `T2`, `QT`); pass 2, online on the next observations (`U1`, `U2`, `QO`:
/// Double DQN); the output gradient `DOUT` and the hidden gradients `D1`, `D2`. PPO runs pass 0 alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// Minibatch buffer B.
    pub batch: usize,
    /// Row stride H.
    pub hidden: usize,
    /// Outputs O.
    pub outputs: usize,
}

impl Work {
    /// Hidden-width regions.
    pub const A1: usize = 0;
    /// See [`Work`].
    pub const A2: usize = 1;
    /// See [`Work`].
    pub const T1: usize = 2;
    /// See [`Work`].
    pub const T2: usize = 3;
    /// See [`Work`].
    pub const U1: usize = 4;
    /// See [`Work`].
    pub const U2: usize = 5;
    /// See [`Work`].
    pub const D1: usize = 6;
    /// See [`Work`].
    pub const D2: usize = 7;
    /// Output-width regions (numbered after the 8 hidden ones).
    pub const Q: usize = 8;
    /// See [`Work`].
    pub const QT: usize = 9;
    /// See [`Work`].
    pub const QO: usize = 10;
    /// See [`Work`].
    pub const DOUT: usize = 11;

    /// The training buffer of `net`.
    pub fn of(net: &NetArgs) -> Self {
        Self { batch: net.batch as usize, hidden: net.hidden as usize, outputs: net.outputs as usize }
    }
    /// Floats per trial.
    pub fn per_trial(&self) -> usize {
        self.batch * (8 * self.hidden + 4 * self.outputs)
    }
    /// Row stride of region `r`.
    pub fn stride(&self, r: usize) -> usize {
        if r < Self::Q { self.hidden } else { self.outputs }
    }
    /// First float of region `r` of trial `t`.
    pub fn at(&self, r: usize, t: usize) -> usize {
        let region = if r < Self::Q { r * self.hidden } else { 8 * self.hidden + (r - Self::Q) * self.outputs };
        t * self.per_trial() + self.batch * region
    }
    /// Region `r` of trial `t` as a row-major operand of the training buffer.
    pub fn operand(&self, r: usize, t: usize) -> Operand {
        Operand::rows(buffers::WORK, self.at(r, t), self.stride(r))
    }
}

/// The acting buffer of `n` envs with input width D, row stride H and O outputs: observations `n x D`, then
/// the two activations `n x H` each, then the outputs `n x O`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActWork {
    /// Envs.
    pub envs: usize,
    /// Input width D.
    pub input: usize,
    /// Row stride H.
    pub hidden: usize,
    /// Outputs O.
    pub outputs: usize,
}

impl ActWork {
    /// The acting buffer of `net`'s envs.
    pub fn of(net: &NetArgs) -> Self {
        Self {
            envs: net.n_trials as usize * net.envs_per_trial as usize,
            input: net.input as usize,
            hidden: net.hidden as usize,
            outputs: net.outputs as usize,
        }
    }
    /// Floats in all.
    pub fn len(&self) -> usize {
        self.envs * (self.input + 2 * self.hidden + self.outputs)
    }
    /// Always false (a buffer of at least one env).
    pub fn is_empty(&self) -> bool {
        self.envs == 0
    }
    /// Observations.
    pub fn obs(&self) -> usize {
        0
    }
    /// First activation.
    pub fn h1(&self) -> usize {
        self.envs * self.input
    }
    /// Second activation.
    pub fn h2(&self) -> usize {
        self.h1() + self.envs * self.hidden
    }
    /// Outputs (Q-values, or logits and value).
    pub fn q(&self) -> usize {
        self.h2() + self.envs * self.hidden
    }
    /// Trial `t`'s rows (`e` envs a trial) of the observations, the two activations and the outputs, as
    /// row-major operands: acting's layer `l` reads entry `l` and writes entry `l + 1`.
    pub fn trial_rows(&self, t: usize, e: usize) -> [Operand; 4] {
        let (d, hs, o) = (self.input, self.hidden, self.outputs);
        [
            Operand::rows(buffers::ACT, self.obs() + t * e * d, d),
            Operand::rows(buffers::ACT, self.h1() + t * e * hs, hs),
            Operand::rows(buffers::ACT, self.h2() + t * e * hs, hs),
            Operand::rows(buffers::ACT, self.q() + t * e * o, o),
        ]
    }
}

/// Layer `layer` (0, 1 or 2) of trial `t`'s network in buffer `net` on `rows` active input rows
/// (`rows_pad` written) of `x` into `out`: `out = relu(x W^T + b)` (no ReLU on the output layer).
#[allow(clippy::too_many_arguments, reason = "one dense layer of one trial")]
pub fn dense(
    l: &Layout,
    net: u32,
    t: usize,
    layer: usize,
    h: usize,
    x: Operand,
    out: Operand,
    rows: usize,
    rows_pad: usize,
) -> Gemm {
    let base = t * l.params();
    let (w, b, k, n, n_pad, epilogue, w_stride) = match layer {
        0 => (l.w1(), l.b1(), l.input, h, l.hidden, forward_epilogue(l.activation), l.input),
        1 => (l.w2(), l.b2(), h, h, l.hidden, forward_epilogue(l.activation), l.hidden),
        _ => (l.w3(), l.b3(), h, l.outputs, l.outputs, EPI_BIAS, l.hidden),
    };
    Gemm {
        a: x,
        b: Operand::cols(net, base + w, w_stride),
        bias: Operand::rows(net, base + b, 0),
        aux: Operand::NONE,
        c: out,
        m: rows as u32,
        n: n as u32,
        k: k as u32,
        m_pad: rows_pad as u32,
        n_pad: n_pad as u32,
        epilogue,
        _pad: [0; 2],
    }
}

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

/// Row stride of a staged walk layer with `k` inputs: `k` rounded up to 8, plus 4, so rows start 16-byte
/// aligned and the eight rows a quarter-warp's vector loads touch fall in different banks.
pub fn walk_row_stride(k: usize) -> usize {
    k.next_multiple_of(8) + 4
}

/// Where a walk block reads layer `layer`'s weights: the element (unit `n`, input `j`) at
/// `base + n * unit + j * step`. In place (`aligned = false`): the trial's row-major block in global memory;
/// staged: the block's padded copy in shared memory ([`walk_stage`]: rows of [`walk_row_stride`] floats,
/// read with vector loads).
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

/// Output `n` of a layer for one input row `x` ([`LayerView`]; `bias` its bias, `act` the hidden layers'
/// activation, `None` on the output layer): the product contract's order (the dot product, then the bias
/// and the activation), so it equals the element of a [`dense`] product bit for bit.
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

/// The stages of a learner's step, each one launch of products ([`plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Acting, layer 0, 1 or 2 on every env's observation.
    Act(usize),
    /// Training forward passes, layer 0, 1 or 2 (each trial's [`NetTrial::passes`] of: online on the
    /// observations, target on the next ones, online on the next ones).
    Forward(usize),
    /// Hidden gradient of layer 2 (from the output gradient).
    Backward2,
    /// Hidden gradient of layer 1.
    Backward1,
    /// Weight and bias gradients, per trial and chunk of [`grad_chunk`] samples.
    Gradients,
}

/// The training forward passes in order ([`NetTrial::passes`] of them): the weights' buffer, the input
/// rows' buffer, and the [`Work`] regions of the two activations and the outputs.
pub const PASSES: [(u32, u32, [usize; 3]); 3] = [
    (buffers::ONLINE, buffers::OBS, [Work::A1, Work::A2, Work::Q]),
    (buffers::TARGET, buffers::NEXT_OBS, [Work::T1, Work::T2, Work::QT]),
    (buffers::ONLINE, buffers::NEXT_OBS, [Work::U1, Work::U2, Work::QO]),
];

/// Acting's three layers, one launch each.
pub const ACTING: [Stage; 3] = [Stage::Act(0), Stage::Act(1), Stage::Act(2)];
/// The training forward passes, one launch per layer.
pub const FORWARD: [Stage; 3] = [Stage::Forward(0), Stage::Forward(1), Stage::Forward(2)];
/// The backward pass (hidden gradients) and the weight gradients, after the output gradient is known.
pub const BACKWARD: [Stage; 3] = [Stage::Backward2, Stage::Backward1, Stage::Gradients];

/// Every product of `stage` for the trials `trials` of `args` (`args.envs_per_trial` envs per trial when
/// acting), in a fixed order, through `push`.
pub fn plan(args: &NetArgs, trials: &[NetTrial], stage: Stage, mut push: impl FnMut(Gemm)) {
    use buffers::{OBS, ONES, ONLINE, PARTIAL, WORK};
    let l = args.layout();
    let (d, hs, o, b) = (l.input, l.hidden, l.outputs, args.batch as usize);
    let w = Work::of(args);
    for (t, p) in trials.iter().enumerate() {
        let (h, bt) = (p.hidden as usize, p.batch as usize);
        match stage {
            Stage::Act(layer) => {
                let e = args.envs_per_trial as usize;
                let rows = ActWork::of(args).trial_rows(t, e);
                let layer = layer.min(2);
                push(dense(&l, ONLINE, t, layer, h, rows[layer], rows[layer + 1], e, e));
            }
            Stage::Forward(layer) => {
                for &(net, input, regions) in &PASSES[..(p.passes as usize).min(3)] {
                    let x =
                        if layer == 0 { Operand::rows(input, t * b * d, d) } else { w.operand(regions[layer - 1], t) };
                    push(dense(&l, net, t, layer, h, x, w.operand(regions[layer], t), bt, b));
                }
            }
            Stage::Backward2 | Stage::Backward1 => push(hidden_gradient(args, t, p, stage == Stage::Backward2)),
            Stage::Gradients => {
                let n_params = l.params();
                let chunk = grad_chunk(b);
                for c in 0..b.div_ceil(chunk) {
                    let s0 = c * chunk;
                    let k = bt.saturating_sub(s0).min(chunk);
                    let partial = (c * args.n_trials as usize + t) * n_params;
                    // (left operand: a delta transposed, rows and padded rows; right operand: the layer's input,
                    // columns and padded columns; output offset and its row/column strides). A bias is the
                    // weight of an input of ones. The output layer's gradient is computed transposed
                    // (`a2^T dout`, 3 columns: a narrow product) and stored in W3's layout.
                    let ones = Operand { buf: ONES, off: 0, row: 1, col: 0 };
                    let delta = |r: usize| Operand::cols(WORK, w.at(r, t) + s0 * w.stride(r), w.stride(r));
                    let a1 = Operand::rows(WORK, w.at(Work::A1, t) + s0 * hs, hs);
                    let a2_t = Operand::cols(WORK, w.at(Work::A2, t) + s0 * hs, hs);
                    let dout = Operand::rows(WORK, w.at(Work::DOUT, t) + s0 * o, o);
                    let obs = Operand::rows(OBS, t * b * d + s0 * d, d);
                    let grads = [
                        (delta(Work::D1), h, hs, obs, d, d, l.w1(), d, 1),
                        (delta(Work::D2), h, hs, a1, h, hs, l.w2(), hs, 1),
                        (a2_t, h, hs, dout, o, o, l.w3(), 1, hs),
                        (delta(Work::D1), h, hs, ones, 1, 1, l.b1(), 1, 0),
                        (delta(Work::D2), h, hs, ones, 1, 1, l.b2(), 1, 0),
                        (delta(Work::DOUT), o, o, ones, 1, 1, l.b3(), 1, 0),
                    ];
                    for (a, m, m_pad, input, n, n_pad, at, row, col) in grads {
                        push(Gemm {
                            a,
                            b: input,
                            bias: Operand::NONE,
                            aux: Operand::NONE,
                            c: Operand { buf: PARTIAL, off: (partial + at) as u32, row: row as u32, col: col as u32 },
                            m: m as u32,
                            n: n as u32,
                            k: k as u32,
                            m_pad: m_pad as u32,
                            n_pad: n_pad as u32,
                            epilogue: EPI_NONE,
                            _pad: [0; 2],
                        });
                    }
                }
            }
        }
    }
}

/// The product of [`Stage::Backward2`] (`second`: the hidden gradient of layer 2, from the output gradient)
/// or [`Stage::Backward1`] for trial `t` of sizes `p`: `D = (delta W)` through the activation of `A`
/// ([`crate::mlp::activate_grad`]).
pub fn hidden_gradient(args: &NetArgs, t: usize, p: &NetTrial, second: bool) -> Gemm {
    let l = args.layout();
    let (hs, o, b) = (l.hidden, l.outputs, args.batch as usize);
    let (h, bt) = (p.hidden as usize, p.batch as usize);
    let w = Work::of(args);
    let (from, weights, aux, out, k) =
        if second { (Work::DOUT, l.w3(), Work::A2, Work::D2, o) } else { (Work::D2, l.w2(), Work::A1, Work::D1, h) };
    Gemm {
        a: w.operand(from, t),
        b: Operand::rows(buffers::ONLINE, t * l.params() + weights, hs),
        bias: Operand::NONE,
        aux: w.operand(aux, t),
        c: w.operand(out, t),
        m: bt as u32,
        n: h as u32,
        k: k as u32,
        m_pad: b as u32,
        n_pad: hs as u32,
        epilogue: backward_epilogue(l.activation),
        _pad: [0; 2],
    }
}

/// Threads of a block of the kernels that compute a per-sample rule and then, after a barrier, the
/// [`Stage::Backward2`] product of those samples (`crate::tile::gpu_short_rows`, nvptx only): `dqn_td`, `ppo_loss`.
pub const LOSS_THREADS: u32 = 128;
/// Samples of a `dqn_td` block: its rule is light, and a minibatch of 1,024 samples per trial needs small
/// blocks to fill the device.
pub const TD_ROWS: usize = 16;
/// Samples of a `ppo_loss` block: a thread each. Its rule (log-probabilities, entropy) is heavy and its
/// minibatches large; with 16 samples a block (the other 112 threads idle during the rule) the kernel took
/// 28.3 us per env step against 18.4 for the rule and the product as two launches.
pub const PPO_LOSS_ROWS: usize = LOSS_THREADS as usize;
const _: () = assert!(PPO_LOSS_ROWS <= LOSS_THREADS as usize, "a thread per sample of the block");
const _: () = assert!(TD_ROWS.is_multiple_of(crate::tile::SHORT_ROWS));
const _: () = assert!(PPO_LOSS_ROWS.is_multiple_of(crate::tile::SHORT_ROWS));
const _: () = assert!(crate::mlp::ACTIONS <= crate::tile::SHORT_K && crate::mlp::ACTOR_CRITIC <= crate::tile::SHORT_K);

/// The stages the device runs as products after the per-sample loss kernels (`dqn_td`, `ppo_loss`), which
/// compute [`Stage::Backward2`] themselves; the CPU backend runs all of [`BACKWARD`].
pub const AFTER_LOSS: [Stage; 2] = [Stage::Backward1, Stage::Gradients];

/// The gradient of parameter `p` of trial `t`: the sum of its chunk partials (`partial`, `chunks x K x P`,
/// [`Stage::Gradients`]) in chunk order (0 outside the active width, where every partial is 0).
#[inline]
pub fn gradient(args: &NetArgs, t: usize, p: usize, partial: &[f32]) -> f32 {
    let (n_params, trials) = (args.layout().params(), args.n_trials as usize);
    debug_assert!(partial.len() >= args.partial_len());
    fold_ahead(grad_chunks(args.batch as usize), |c| partial[(c * trials + t) * n_params + p], 0.0, |g, x| g + x)
}

/// Values [`fold_ahead`] loads before it folds them.
pub const FOLD_AHEAD: usize = 8;

/// `step` folded over `load(0), load(1), .., load(n - 1)` in that order from `init`, loading
/// [`FOLD_AHEAD`] values before folding them. A GPU thread issues its instructions in order, so the plain
/// loop (`acc = step(acc, load(i))`) waits a memory round trip for every value; this waits one per
/// [`FOLD_AHEAD`] values. The fold's order is the plain loop's: the same bits on both backends.
#[inline(always)]
pub fn fold_ahead(n: usize, load: impl Fn(usize) -> f32, init: f32, step: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = init;
    let mut i0 = 0;
    while i0 < n {
        let vals: [f32; FOLD_AHEAD] = core::array::from_fn(|j| if i0 + j < n { load(i0 + j) } else { 0.0 });
        for (j, &x) in vals.iter().enumerate() {
            if i0 + j < n {
                acc = step(acc, x);
            }
        }
        i0 += FOLD_AHEAD;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::{
        FOLD_AHEAD, GRAD_CHUNK, MAX_GRAD_CHUNK, NetArgs, WALK_REG_UNITS, WalkRegsShared, fold_ahead, grad_chunk,
        grad_chunks, walk_regs_suit, walk_row_stride,
    };

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

    /// `fold_ahead` is the plain in-order fold, bit for bit, for counts below, at and past multiples of its
    /// batch (an order-sensitive fold: sums of terms of very different magnitudes, and a sum of squares
    /// by FMA).
    #[test]
    fn fold_ahead_is_the_plain_fold() {
        let term = |i: usize| ((i * 7919 % 1013) as f32 - 500.0) * if i.is_multiple_of(3) { 1e7 } else { 1e-3 };
        for n in [0, 1, 7, FOLD_AHEAD, FOLD_AHEAD + 1, 3 * FOLD_AHEAD - 1, 100, 1_000] {
            let plain = (0..n).fold(0.5f32, |a, i| a + term(i));
            assert_eq!(fold_ahead(n, term, 0.5, |a, x| a + x).to_bits(), plain.to_bits(), "sum of {n}");
            let squares = (0..n).fold(0.0f32, |a, i| term(i).mul_add(term(i), a));
            let ahead = fold_ahead(n, term, 0.0, |a, x| x.mul_add(x, a));
            assert_eq!(ahead.to_bits(), squares.to_bits(), "squares of {n}");
        }
        // The order matters for these terms: a reversed fold differs, so the checks above can fail.
        let reversed = (0..100).rev().fold(0.5f32, |a, i| a + term(i));
        assert_ne!(reversed.to_bits(), (0..100).fold(0.5f32, |a, i| a + term(i)).to_bits());
    }

    /// Chunks stay at the smallest size until 64 chunks of twice it fit, never exceed the largest, and
    /// cover the batch.
    #[test]
    fn gradient_chunks_grow_with_large_batches() {
        for batch in (1..300_000).step_by(97).chain([16_383, 16_384, 32_767, 32_768, 1 << 20]) {
            let chunk = grad_chunk(batch);
            assert!(chunk.is_power_of_two() && (GRAD_CHUNK..=MAX_GRAD_CHUNK).contains(&chunk), "{batch}: {chunk}");
            if chunk > GRAD_CHUNK {
                assert!(batch / chunk >= 64, "{batch}: {chunk} leaves fewer than 64 chunks");
            }
            if chunk < MAX_GRAD_CHUNK {
                assert!(batch / (2 * chunk) < 64, "{batch}: {chunk} could double");
            }
            assert!(grad_chunks(batch) * chunk >= batch && (grad_chunks(batch) - 1) * chunk < batch);
        }
        assert_eq!(grad_chunk(1_024), GRAD_CHUNK, "DQN's minibatches keep the smallest chunks");
    }
}
