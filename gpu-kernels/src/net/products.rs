//! The products of each stage of a learner's step ([`plan`]): the dense layers ([`dense`]), the hidden
//! gradients ([`hidden_gradient`]) and the weight gradients in chunks.

use super::grad::grad_chunk;
use super::work::{ActWork, Work};
use super::{NetArgs, NetTrial, buffers};
use crate::mlp::Layout;
use crate::tile::{EPI_BIAS, EPI_NONE, Gemm, Operand, backward_epilogue, forward_epilogue};

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
/// minibatches large, so every thread of the block runs it (16 samples a block would leave 112 threads idle during the rule).
pub const PPO_LOSS_ROWS: usize = LOSS_THREADS as usize;
const _: () = assert!(PPO_LOSS_ROWS <= LOSS_THREADS as usize, "a thread per sample of the block");
const _: () = assert!(TD_ROWS.is_multiple_of(crate::tile::SHORT_ROWS));
const _: () = assert!(PPO_LOSS_ROWS.is_multiple_of(crate::tile::SHORT_ROWS));
const _: () = assert!(crate::mlp::ACTIONS <= crate::tile::SHORT_K && crate::mlp::ACTOR_CRITIC <= crate::tile::SHORT_K);

/// Rows `j0 .. j0 + rows` of `g` (a loss block's [`Stage::Backward2`] product, [`hidden_gradient`]) by the
/// block's [`LOSS_THREADS`] threads, `crate::tile::SHORT_ROWS` at a time (`crate::tile::gpu_short_rows`;
/// nvptx only).
///
/// # Safety
/// `gpu_short_rows`' contract, for each group of rows; `tid < LOSS_THREADS`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn gpu_loss_rows(g: &Gemm, inputs: [*const f32; 4], c: *mut f32, j0: usize, rows: usize, tid: usize) {
    let mut r0 = j0;
    while r0 < (j0 + rows).min(g.m_pad as usize) {
        // SAFETY: the caller's contract.
        unsafe { crate::tile::gpu_short_rows(g, inputs, c, r0, tid, LOSS_THREADS as usize) };
        r0 += crate::tile::SHORT_ROWS;
    }
}

/// The stages the device runs as products after the per-sample loss kernels (`dqn_td`, `ppo_loss`), which
/// compute [`Stage::Backward2`] themselves; the CPU backend runs all of [`BACKWARD`].
pub const AFTER_LOSS: [Stage; 2] = [Stage::Backward1, Stage::Gradients];
