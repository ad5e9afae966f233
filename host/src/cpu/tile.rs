//! The CPU backend of [`gpu_kernels::tile`]: every product of a table, element by element in the contract's
//! order (`acc = fma(A(m, k), B(k, n), acc)` for k ascending, then the epilogue), so the bits equal the GPU
//! tiles'. Rows run in parallel; `B` is packed once per product so the inner loop is a contiguous
//! multiply-add over the row's outputs (AVX2 + FMA where the CPU has them, `f32::mul_add` elsewhere: both
//! correctly rounded).

use gpu_kernels::batch::observe_env;
use gpu_kernels::mlp::Layout;
use gpu_kernels::net::{NetArgs, Work, gradient};
use gpu_kernels::tile::{EPI_BIAS, EPI_BIAS_RELU, EPI_RELU_MASK, Gemm, finish};
use rayon::prelude::*;

use super::env::PolicyView;
use crate::HostError;

/// `y[i] = fma(a, x[i], y[i])`.
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        unsafe { axpy_avx2(a, x, y) };
        return;
    }
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi = a.mul_add(*xi, *yi);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn axpy_avx2(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi = a.mul_add(*xi, *yi);
    }
}

/// The `m_pad x n_pad` outputs of `g` (row-major) from the buffer table.
fn compute(g: &Gemm, bufs: &[&[f32]]) -> Vec<f32> {
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    let n_pad = g.n_pad as usize;
    let mut out = vec![0.0f32; g.m_pad as usize * n_pad];
    if m == 0 || n == 0 {
        return out;
    }
    let a = bufs[g.a.buf as usize];
    let b = bufs[g.b.buf as usize];
    let packed: Vec<f32> = (0..k).flat_map(|kk| (0..n).map(move |j| b[g.b.at(kk, j)])).collect();
    let bias: Vec<f32> = if matches!(g.epilogue, EPI_BIAS | EPI_BIAS_RELU) {
        (0..n).map(|j| bufs[g.bias.buf as usize][g.bias.at(0, j)]).collect()
    } else {
        vec![0.0; n]
    };
    let row = |(r, row): (usize, &mut [f32])| {
        let acc = &mut row[..n];
        for kk in 0..k {
            axpy(a[g.a.at(r, kk)], &packed[kk * n..(kk + 1) * n], acc);
        }
        for j in 0..n {
            let aux = if g.epilogue == EPI_RELU_MASK { bufs[g.aux.buf as usize][g.aux.at(r, j)] } else { 0.0 };
            row[j] = finish(g, r, j, row[j], bias[j], aux);
        }
    };
    if m * n * k >= 1 << 16 {
        out.par_chunks_mut(n_pad).take(m).enumerate().for_each(row);
    } else {
        out.chunks_mut(n_pad).take(m).enumerate().for_each(row);
    }
    out
}

/// Stores each sample's output gradient (`per_sample[i].0`, sample `i` trial-major) in region `DOUT` of
/// the training buffer `work` laid out as `w`, and its loss in `losses[i]`: the CPU side of a learner's
/// loss kernel.
pub(crate) fn store_outputs<const O: usize>(
    w: &Work,
    work: &mut [f32],
    losses: &mut [f32],
    per_sample: Vec<([f32; O], f32)>,
) {
    for (i, (dout, loss)) in per_sample.into_iter().enumerate() {
        let at = w.at(Work::DOUT, i / w.batch) + (i % w.batch) * O;
        work[at..at + O].copy_from_slice(&dout);
        losses[i] = loss;
    }
}

/// Every parameter's gradient (`K x P`) from the chunk partials ([`gpu_kernels::net::gradient`]).
pub(crate) fn gradients(net: &NetArgs, partial: &[f32]) -> Vec<f32> {
    let n_params = net.layout().params();
    (0..net.n_trials as usize * n_params)
        .into_par_iter()
        .map(|i| gradient(net, i / n_params, i % n_params, partial))
        .collect()
}

/// Runs every product of `problems` (one launch's table: no product reads what another writes).
pub(crate) fn run(problems: &[Gemm], bufs: &mut [&mut [f32]]) -> Result<(), HostError> {
    let lens: Vec<usize> = bufs.iter().map(|b| b.len()).collect();
    crate::plan::check("tile products", problems, &lens)?;
    let outputs: Vec<Vec<f32>> = {
        let read: Vec<&[f32]> = bufs.iter().map(|b| &**b).collect();
        problems.par_iter().map(|g| compute(g, &read)).collect()
    };
    for (g, out) in problems.iter().zip(outputs) {
        let c = &mut *bufs[g.c.buf as usize];
        let n_pad = g.n_pad as usize;
        for (r, row) in out.chunks(n_pad.max(1)).enumerate() {
            for (j, &x) in row.iter().enumerate() {
                c[g.c.at(r, j)] = x;
            }
        }
    }
    Ok(())
}

/// The greedy walks of every trial's single env in `view` over `steps` bars from their current states
/// (`trials x steps`, trial-major), a thread per trial; `hiddens` are the trials' widths and `online` their
/// parameters.
pub(crate) fn walk_all(
    net: &NetArgs,
    hiddens: &[usize],
    online: &[f32],
    view: &PolicyView<'_>,
    steps: usize,
) -> Vec<u8> {
    let l = net.layout();
    let walks: Vec<Vec<u8>> = (0..hiddens.len())
        .into_par_iter()
        .map(|t| {
            let w = &online[t * l.params()..(t + 1) * l.params()];
            let mut state = view.states[t];
            walk_one(&l, w, hiddens[t], &view.params[t], &mut state, view.bars, view.features, steps)
        })
        .collect();
    walks.concat()
}

/// One trial's greedy walk on the CPU: observation, the three layers ([`dense_row`]), argmax of the first 3
/// outputs, env step, bar after bar; the GPU walk's sequence (`gpu_kernels::walk::greedy_walk`).
#[allow(clippy::too_many_arguments, reason = "one trial's network and env")]
fn walk_one(
    l: &Layout,
    w: &[f32],
    h: usize,
    params: &gpu_kernels::TrialParams,
    state: &mut gpu_kernels::EnvState,
    bars: &[gpu_kernels::Bar],
    features: &[f32],
    steps: usize,
) -> Vec<u8> {
    let (mut obs, mut h1, mut h2, mut q) = (vec![0.0; l.input], vec![0.0; h], vec![0.0; h], vec![0.0; l.outputs]);
    let mut actions = Vec::with_capacity(steps);
    for _ in 0..steps {
        observe_env(params, state, bars, features, l.input - 3, &mut obs);
        dense_row(l, w, 0, h, &obs, &mut h1);
        dense_row(l, w, 1, h, &h1, &mut h2);
        dense_row(l, w, 2, h, &h2, &mut q);
        let a = gpu_kernels::mlp::argmax(&q) as u8;
        actions.push(a);
        gpu_kernels::env::env_step_on_series(params, state, a, bars);
    }
    actions
}

/// Every output of layer `layer` of one network for one input row: each the element
/// [`gpu_kernels::net::dense_unit`] computes, in its order (`acc = fma(x[k], W(n, k), acc)`, k ascending,
/// then bias and ReLU), eight outputs' chains interleaved so the FMA units stay busy.
fn dense_row(l: &Layout, w: &[f32], layer: usize, h: usize, x: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the feature the function is compiled for.
        unsafe { dense_row_fma(l, w, layer, h, x, out) };
        return;
    }
    dense_row_plain(l, w, layer, h, x, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn dense_row_fma(l: &Layout, w: &[f32], layer: usize, h: usize, x: &[f32], out: &mut [f32]) {
    dense_row_plain(l, w, layer, h, x, out);
}

#[inline(always)]
fn dense_row_plain(l: &Layout, w: &[f32], layer: usize, h: usize, x: &[f32], out: &mut [f32]) {
    let (wo, bo, k, stride, relu) = match layer {
        0 => (l.w1(), l.b1(), l.input, l.input, true),
        1 => (l.w2(), l.b2(), h, l.hidden, true),
        _ => (l.w3(), l.b3(), h, l.hidden, false),
    };
    let n_out = out.len();
    for n0 in (0..n_out).step_by(8) {
        let rows: [usize; 8] = std::array::from_fn(|j| wo + (n0 + j).min(n_out - 1) * stride);
        let mut acc = [0.0f32; 8];
        for (kk, &xk) in x[..k].iter().enumerate() {
            for j in 0..8 {
                acc[j] = xk.mul_add(w[rows[j] + kk], acc[j]);
            }
        }
        for j in 0..8.min(n_out - n0) {
            let s = acc[j] + w[bo + n0 + j];
            out[n0 + j] = match (relu, s > 0.0) {
                (true, false) => 0.0,
                _ => s,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_kernels::tile::{EPI_BIAS_RELU, EPI_NONE, EPI_RELU_MASK, Gemm, Operand, reference};

    use super::run;

    fn noise(seed: u32, n: usize) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let x = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)).wrapping_mul(2_246_822_519);
                (x >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// Products of odd sizes (not multiples of anything), strided and transposed operands and every
    /// epilogue: the packed, parallel CPU path gives the element-by-element reference's bits.
    #[test]
    fn cpu_products_equal_the_reference_bitwise() {
        let (m, n, k) = (37, 29, 53);
        let cases = [
            // X W^T + b, ReLU (a forward layer).
            Gemm {
                a: Operand::rows(0, 3, k + 2),
                b: Operand::cols(1, 5, k),
                bias: Operand::rows(1, 2, 0),
                c: Operand::rows(2, 1, n + 4),
                epilogue: EPI_BIAS_RELU,
                ..Gemm::default()
            },
            // Delta^T X (a weight gradient).
            Gemm {
                a: Operand::cols(0, 0, m + 1),
                b: Operand::rows(1, 7, n),
                c: Operand::rows(2, 0, n + 3),
                epilogue: EPI_NONE,
                ..Gemm::default()
            },
            // Delta W masked by a ReLU output (a backward pass).
            Gemm {
                a: Operand::rows(0, 0, k),
                b: Operand::rows(1, 0, n),
                aux: Operand::rows(1, 11, n + 1),
                c: Operand::rows(2, 0, n + 1),
                epilogue: EPI_RELU_MASK,
                ..Gemm::default()
            },
        ];
        for (i, g) in cases.into_iter().enumerate() {
            let g = Gemm { m: m as u32, n: n as u32, k: k as u32, m_pad: m as u32 + 5, n_pad: n as u32 + 1, ..g };
            let a = noise(1 + i as u32, 8_000);
            let b = noise(7 + i as u32, 8_000);
            let mut want = vec![f32::NAN; 3_000];
            reference(&g, |buf, idx| if buf == 0 { a[idx] } else { b[idx] }, |idx, x| want[idx] = x);
            let (mut a2, mut b2, mut got) = (a.clone(), b.clone(), vec![f32::NAN; 3_000]);
            run(&[g], &mut [&mut a2, &mut b2, &mut got]).unwrap();
            let differ = want.iter().zip(&got).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            assert_eq!(differ, 0, "case {i}: {differ} outputs differ from the reference");
            let written = got.iter().filter(|x| !x.is_nan()).count();
            assert_eq!(written, (m + 5) * (n + 1), "case {i}: every padded output is written once");
            assert!(got.iter().any(|x| *x != 0.0 && !x.is_nan()), "case {i}: all zero");
        }
    }

    /// A product that reaches past its buffer is refused with the lengths, not run.
    #[test]
    fn short_buffers_are_refused() {
        let g = Gemm {
            a: Operand::rows(0, 0, 4),
            b: Operand::rows(1, 0, 4),
            c: Operand::rows(2, 0, 4),
            m: 4,
            n: 4,
            k: 4,
            m_pad: 4,
            n_pad: 4,
            ..Gemm::default()
        };
        let (mut a, mut b, mut c) = (vec![0.0; 16], vec![0.0; 15], vec![0.0; 16]);
        let err = run(&[g], &mut [&mut a, &mut b, &mut c]).unwrap_err();
        assert!(matches!(err, crate::HostError::Shape { expected: 16, got: 15, .. }), "{err}");
    }
}
