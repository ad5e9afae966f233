//! Initial network parameters, identical for every backend: PyTorch's default for linear layers and
//! CleanRL's orthogonal initialization, drawn from keyed counter-based streams.

use gpu_kernels::mlp::{ACTIONS, Layout};
use gpu_kernels::rng::draw_u64;

/// RNG stream of the weight initialization.
const INIT_STREAM: u64 = 0x1417_0000;

/// The initial parameters of one trial: PyTorch's default for linear layers, U(-1/sqrt(fan_in),
/// 1/sqrt(fan_in)) for weights and biases, over the active width; zero beyond it.
pub fn init_weights(l: &Layout, hidden: usize, seed: u64, key: u64) -> Vec<f32> {
    let mut w = vec![0.0f32; l.params()];
    let mut counter = 0;
    let mut draw = |fan_in: usize| {
        counter += 1;
        let u = gpu_kernels::rng::unit_open(draw_u64(seed, gpu_kernels::rng::keyed(INIT_STREAM, key), counter));
        (2.0 * u - 1.0) / (fan_in as f32).sqrt()
    };
    let (d, stride) = (l.input, l.hidden);
    for i in 0..hidden {
        for j in 0..d {
            w[l.w1() + i * d + j] = draw(d);
        }
        w[l.b1() + i] = draw(d);
    }
    for i in 0..hidden {
        for j in 0..hidden {
            w[l.w2() + i * stride + j] = draw(hidden);
        }
        w[l.b2() + i] = draw(hidden);
    }
    for k in 0..l.outputs {
        for j in 0..hidden {
            w[l.w3() + k * stride + j] = draw(hidden);
        }
        w[l.b3() + k] = draw(hidden);
    }
    w
}

/// The initial parameters of one actor-critic trial as CleanRL's PPO sets them: orthogonal weights
/// (PyTorch's `orthogonal_`: the rows, or the columns when there are more rows than columns, of each matrix
/// orthonormal, from the Gram-Schmidt QR of a Gaussian matrix with the signs of R's diagonal made
/// positive) scaled by sqrt(2) for the hidden layers, 0.01 for the three policy logits and 1 for the value
/// row; biases 0. Over the active width; zero beyond it. Computed in f64 on the host, identical for every
/// backend.
pub fn init_orthogonal(l: &Layout, hidden: usize, seed: u64, key: u64) -> Vec<f32> {
    let mut w = vec![0.0f32; l.params()];
    let mut counter = 0u64;
    let stream = gpu_kernels::rng::keyed(INIT_STREAM ^ 0x0f0f, key);
    let mut gauss = || {
        counter += 2;
        let u1 = ((draw_u64(seed, stream, counter) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let u2 = ((draw_u64(seed, stream, counter + 1) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    // Writes an orthogonal `rows x cols` block (row stride `stride`) at `at`, scaled by `gain`.
    let mut block = |w: &mut [f32], at: usize, rows: usize, cols: usize, stride: usize, gain: f64| {
        let (small, large) = (rows.min(cols), rows.max(cols));
        let mut q: Vec<Vec<f64>> = Vec::with_capacity(small);
        for _ in 0..small {
            let mut v: Vec<f64> = (0..large).map(|_| gauss()).collect();
            for u in &q {
                let dot: f64 = u.iter().zip(&v).map(|(a, b)| a * b).sum();
                v.iter_mut().zip(u).for_each(|(x, u)| *x -= dot * u);
            }
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            q.push(v);
        }
        for r in 0..rows {
            for c in 0..cols {
                let x = if rows <= cols { q[r][c] } else { q[c][r] };
                w[at + r * stride + c] = (gain * x) as f32;
            }
        }
    };
    let root2 = std::f64::consts::SQRT_2;
    block(&mut w, l.w1(), hidden, l.input, l.input, root2);
    block(&mut w, l.w2(), hidden, hidden, l.hidden, root2);
    block(&mut w, l.w3(), ACTIONS, hidden, l.hidden, 0.01);
    block(&mut w, l.w3() + ACTIONS * l.hidden, l.outputs - ACTIONS, hidden, l.hidden, 1.0);
    w
}
