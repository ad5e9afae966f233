//! candle-core as the CPU reference of the learners' math: a trial's active tensors as candle variables, the
//! MLP as candle ops, and comparisons in candle's tensor order.

use candle_core::{Tensor, Var};
use gpu_kernels::mlp::Layout;
use tradesim::train::trial_tensors;

/// The tensors of a trial's network, in the order of [`vars`] and [`active`].
pub const TENSORS: [&str; 6] = ["l1.weight", "l1.bias", "l2.weight", "l2.bias", "l3.weight", "l3.bias"];

/// Candle variables of the active part (width `h`) of the parameter block `w`.
pub fn vars(l: &Layout, w: &[f32], h: usize) -> Vec<Var> {
    let t = trial_tensors(l, w, h).unwrap();
    TENSORS.iter().map(|k| Var::from_tensor(&t[*k]).unwrap()).collect()
}

/// The network (ReLU, ReLU, linear) on rows `x` with candle ops.
pub fn mlp(v: &[Var], x: &Tensor) -> Tensor {
    mlp_with(v, x, gpu_kernels::mlp::ACT_RELU)
}

/// [`mlp`] with the hidden layers' activation `act` (`gpu_kernels::mlp::ACT_RELU` or `ACT_TANH`).
pub fn mlp_with(v: &[Var], x: &Tensor, act: u32) -> Tensor {
    let f = |t: Tensor| if act == gpu_kernels::mlp::ACT_TANH { t.tanh().unwrap() } else { t.relu().unwrap() };
    let h1 = f(x.matmul(&v[0].t().unwrap()).unwrap().broadcast_add(&v[1]).unwrap());
    let h2 = f(h1.matmul(&v[2].t().unwrap()).unwrap().broadcast_add(&v[3]).unwrap());
    h2.matmul(&v[4].t().unwrap()).unwrap().broadcast_add(&v[5]).unwrap()
}

/// The largest absolute difference over the largest magnitude of `b`.
pub fn max_rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "compared tensors differ in size");
    let scale = b.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-12);
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// The block's active entries (width `h`) in candle's tensor order.
pub fn active(l: &Layout, w: &[f32], h: usize) -> Vec<Vec<f32>> {
    let t = trial_tensors(l, w, h).unwrap();
    TENSORS.iter().map(|k| t[*k].flatten_all().unwrap().to_vec1::<f32>().unwrap()).collect()
}

/// Whether parameter `q` of the block is inside the active width `h`.
pub fn is_active(l: &Layout, h: usize, q: usize) -> bool {
    let s = l.hidden;
    if q < l.b1() {
        q / l.input < h
    } else if q < l.w2() {
        q - l.b1() < h
    } else if q < l.b2() {
        (q - l.w2()) / s < h && (q - l.w2()) % s < h
    } else if q < l.w3() {
        q - l.b2() < h
    } else if q < l.b3() {
        (q - l.w3()) % s < h
    } else {
        true
    }
}

/// Every parameter outside the active width `h`: its gradient is exactly 0 and the step left it as it was.
pub fn assert_inactive_untouched(l: &Layout, h: usize, gradients: &[f32], before: &[f32], after: &[f32]) {
    let inactive: Vec<usize> = (0..l.params()).filter(|&q| !is_active(l, h, q)).collect();
    assert!(!inactive.is_empty(), "the test needs a block wider than the active width");
    for q in inactive {
        assert_eq!(gradients[q], 0.0, "gradient of parameter {q} beyond the active width");
        assert_eq!(after[q].to_bits(), before[q].to_bits(), "parameter {q} beyond the active width moved");
    }
}

/// The step our update made (`before` -> `after`, active entries) equals the step candle's optimizer made to
/// the variables `stepped` (which started at `before`), tensor by tensor, within `tolerance` relative error.
pub fn assert_steps_match(l: &Layout, h: usize, stepped: &[Var], before: &[f32], after: &[f32], tolerance: f32) {
    let (before, after) = (active(l, before, h), active(l, after, h));
    for (i, var) in stepped.iter().enumerate() {
        let theirs: Vec<f32> =
            var.flatten_all().unwrap().to_vec1::<f32>().unwrap().iter().zip(&before[i]).map(|(x, b)| x - b).collect();
        let ours: Vec<f32> = after[i].iter().zip(&before[i]).map(|(x, b)| x - b).collect();
        let err = max_rel_err(&ours, &theirs);
        assert!(err <= tolerance, "optimizer step of tensor {i}: relative error {err}");
    }
}
