//! The networks: input D (F + 3) -> hidden h -> hidden h -> O outputs (3 Q-values for DQN; 3 action logits
//! and a value for PPO), each hidden layer followed by the network's [`Layout::activation`] (ReLU for DQN,
//! as CleanRL's `dqn.py`; Tanh or ReLU for PPO, Tanh by default as CleanRL's `ppo.py`), one flat f32 block of parameters per trial. The block is laid out
//! for the largest hidden width H of the batch (row stride H), and each trial uses its own active width
//! `h <= H`; entries beyond it stay zero. The learners compute the layers as products ([`crate::net`]);
//! [`forward`] here is the plain single-row reference (no FMA) that tests compare with candle.

/// Q-values per state (FLAT, LONG, SHORT).
pub const ACTIONS: usize = 3;

/// Outputs of the PPO actor-critic: 3 logits and the value.
pub const ACTOR_CRITIC: usize = ACTIONS + 1;

/// Largest output count.
pub const MAX_OUTPUTS: usize = ACTOR_CRITIC;

/// The hidden layers' activation `relu(x) = max(x, 0)` (0 for NaN).
pub const ACT_RELU: u32 = 0;
/// The hidden layers' activation `tanh(x)` ([`tanh`]: the same bits on the host and the GPU).
pub const ACT_TANH: u32 = 1;

/// The activation code of a name (`relu`, `tanh`), or `None`.
pub fn activation_code(name: &str) -> Option<u32> {
    match name {
        "relu" => Some(ACT_RELU),
        "tanh" => Some(ACT_TANH),
        _ => None,
    }
}

/// The name of an activation code.
pub fn activation_name(code: u32) -> &'static str {
    if code == ACT_TANH { "tanh" } else { "relu" }
}

/// `e^y` for `0 <= y <= 18` from IEEE operations only: `y = k ln 2 + r` (`k` rounded to nearest by the
/// 1.5 x 2^23 trick, `ln 2` in two parts so `k ln2_hi` is exact), `e^r` (`|r| <= ln 2 / 2`) by its Taylor
/// polynomial to `r^7` (truncation below 4e-9), scaled by `2^k` through the exponent bits. The integer
/// `k` is read from the low bits of `t + ROUND` (a float-to-int cast saturates, a branch per lane on the
/// CPU that stops its epilogue loops from vectorizing).
#[inline]
fn exp_small(y: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 x 2^23: (t + ROUND) - ROUND rounds t to an integer
    let shifted = y * core::f32::consts::LOG2_E + ROUND;
    let k = shifted - ROUND;
    // `shifted` has ulp 1, so its bits are ROUND's plus k (0 ..= 26 here).
    let ki = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    // ln 2 = LN2_HI + LN2_LO, LN2_HI with 16 significant bits (0.693145751953125).
    const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
    let r = (y - k * LN2_HI) - k * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    p * f32::from_bits((ki + 127) << 23)
}

/// `tanh(x)` from IEEE `+ - x /` only (no fused operation, no library call), so the host and the GPU give
/// the same bits and the kernels can inline it (`libm::tanhf` is far larger and keeps a stack frame).
/// `|x| < 0.55`: the odd
/// Taylor polynomial to `x^19`; up to 9: `1 - 2 / (e^{2|x|} + 1)`; beyond, `+-1`; NaN stays NaN, -0 stays
/// -0. Within a few units in the last place of the true value (tested against f64). Both branches are
/// computed and one selected, without jumps, so the CPU's epilogue loops over it vectorize.
#[inline]
pub fn tanh(x: f32) -> f32 {
    let a = f32::from_bits(x.to_bits() & 0x7fff_ffff);
    let z = a * a;
    let p = -0.333_333_34
        + z * (0.133_333_34
            + z * (-0.053_968_254
                + z * (0.021_869_488
                    + z * (-0.008_863_236
                        + z * (0.003_592_128
                            + z * (-0.001_455_834_4 + z * (0.000_590_027_4 + z * -0.000_239_129_12)))))));
    let small = a + a * (z * p);
    let big = 1.0 - 2.0 / (exp_small(2.0 * a.min(9.0)) + 1.0);
    let t = if a < 0.55 {
        small
    } else if a < 9.0 {
        big
    } else {
        1.0
    };
    let t = if a.is_nan() { a } else { t };
    f32::from_bits(t.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// Activation `act` ([`ACT_RELU`] or [`ACT_TANH`]) of `x`.
#[inline]
pub fn activate(act: u32, x: f32) -> f32 {
    if act == ACT_TANH {
        tanh(x)
    } else if x > 0.0 {
        x
    } else {
        0.0
    }
}

/// The gradient through activation `act` of the incoming gradient `d`, from the activation's output `y`:
/// `d` where `y > 0` else 0 (ReLU), `d x (1 - y^2)` (Tanh; the products unfused, as written).
#[inline]
pub fn activate_grad(act: u32, d: f32, y: f32) -> f32 {
    if act == ACT_TANH {
        d * (1.0 - y * y)
    } else if y > 0.0 {
        d
    } else {
        0.0
    }
}

/// Where each tensor of a trial's parameter block starts, and the hidden layers' activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Input width D.
    pub input: usize,
    /// Row stride H (the largest hidden width).
    pub hidden: usize,
    /// Outputs O (at most [`MAX_OUTPUTS`]).
    pub outputs: usize,
    /// The hidden layers' activation ([`ACT_RELU`] or [`ACT_TANH`]).
    pub activation: u32,
}

impl Layout {
    /// A Q-network: 3 outputs, ReLU.
    pub const fn q_net(input: usize, hidden: usize) -> Self {
        Self { input, hidden, outputs: ACTIONS, activation: ACT_RELU }
    }

    /// An actor-critic: 3 logits and a value, ReLU (see [`Self::with_activation`]).
    pub const fn actor_critic(input: usize, hidden: usize) -> Self {
        Self { input, hidden, outputs: ACTOR_CRITIC, activation: ACT_RELU }
    }

    /// The same layout with the hidden layers' activation `activation`.
    pub const fn with_activation(self, activation: u32) -> Self {
        Self { activation, ..self }
    }

    /// W1, `H x D` (row i = hidden unit i).
    pub fn w1(&self) -> usize {
        0
    }
    /// b1, `H`.
    pub fn b1(&self) -> usize {
        self.hidden * self.input
    }
    /// W2, `H x H`.
    pub fn w2(&self) -> usize {
        self.b1() + self.hidden
    }
    /// b2, `H`.
    pub fn b2(&self) -> usize {
        self.w2() + self.hidden * self.hidden
    }
    /// W3, `O x H`.
    pub fn w3(&self) -> usize {
        self.b2() + self.hidden
    }
    /// b3, `O`.
    pub fn b3(&self) -> usize {
        self.w3() + self.outputs * self.hidden
    }
    /// Parameters per trial.
    pub fn params(&self) -> usize {
        self.b3() + self.outputs
    }
}

/// Forward pass with active width `h`: writes the activations (after [`Layout::activation`]) `a1`, `a2` (first `h` entries) and
/// the `l.outputs` outputs into `q`.
#[inline]
pub fn forward(l: &Layout, w: &[f32], h: usize, x: &[f32], a1: &mut [f32], a2: &mut [f32], q: &mut [f32]) {
    let (d, stride) = (l.input, l.hidden);
    for i in 0..h {
        let row = &w[l.w1() + i * d..l.w1() + (i + 1) * d];
        let mut s = w[l.b1() + i];
        for j in 0..d {
            s += row[j] * x[j];
        }
        a1[i] = activate(l.activation, s);
    }
    for i in 0..h {
        let row = &w[l.w2() + i * stride..l.w2() + i * stride + h];
        let mut s = w[l.b2() + i];
        for j in 0..h {
            s += row[j] * a1[j];
        }
        a2[i] = activate(l.activation, s);
    }
    for (k, qk) in q.iter_mut().enumerate().take(l.outputs) {
        let row = &w[l.w3() + k * stride..l.w3() + k * stride + h];
        let mut s = w[l.b3() + k];
        for j in 0..h {
            s += row[j] * a2[j];
        }
        *qk = s;
    }
}

/// Index of the largest of the first 3 values (the lowest index on ties).
#[inline]
pub fn argmax(q: &[f32]) -> usize {
    let mut best = 0;
    for k in 1..ACTIONS {
        if q[k] > q[best] {
            best = k;
        }
    }
    best
}

/// Huber loss of `d` with threshold `delta`.
#[inline]
pub fn huber(d: f32, delta: f32) -> f32 {
    let a = if d < 0.0 { -d } else { d };
    if a <= delta { 0.5 * d * d } else { delta * (a - 0.5 * delta) }
}

/// Derivative of [`huber`]: `d` clipped to `[-delta, delta]`.
#[inline]
pub fn huber_grad(d: f32, delta: f32) -> f32 {
    if d > delta {
        delta
    } else if d < -delta {
        -delta
    } else {
        d
    }
}

/// Adam's bias corrections at step `t` (>= 1): `1 - beta1^t` and `1 - beta2^t`. They are the same for every
/// parameter of a trial at a step, so DQN's update computes them once per trial on the CPU and once per block
/// of a trial's parameters on the GPU, then applies them with [`adam_corrected`]; the bits are those of
/// [`adam`] (which PPO's update still calls per parameter).
///
/// `beta^t` is [`pow_steps`]: squarings and products in f64, no memory access. (libm's `powf` reads its
/// constants from global memory: a chain of dependent round trips every `dqn_adam` block would wait for
/// at its barrier; it also takes the step as an f32, exact only below 2^24.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BiasCorrection {
    /// `1 - beta1^t`.
    pub first: f32,
    /// `1 - beta2^t`.
    pub second: f32,
}

impl BiasCorrection {
    /// The corrections at step `t`.
    #[inline]
    pub fn at(beta1: f32, beta2: f32, t: u64) -> Self {
        Self { first: (1.0 - pow_steps(beta1, t)) as f32, second: (1.0 - pow_steps(beta2, t)) as f32 }
    }
}

/// `beta^t` in f64 by binary exponentiation (at most 64 squarings): IEEE products only, so both backends
/// give the same bits. Each squaring doubles the relative error carried in, so it stays below about `2 t`
/// units of f64's last place: far inside an f32 unit of `1 - beta^t` (what Adam uses) at any step where
/// `beta^t` has not yet flushed to zero.
#[inline]
pub fn pow_steps(beta: f32, t: u64) -> f64 {
    let (mut base, mut acc, mut e) = (f64::from(beta), 1.0f64, t);
    while e > 0 {
        if e & 1 == 1 {
            acc *= base;
        }
        base *= base;
        e >>= 1;
    }
    acc
}

/// Adam moments and step of one parameter (bias-corrected; `t` >= 1 is the step number).
#[inline]
#[allow(clippy::too_many_arguments, reason = "Adam's state and hyperparameters of one parameter")]
pub fn adam(w: &mut f32, m: &mut f32, v: &mut f32, g: f32, lr: f32, beta1: f32, beta2: f32, eps: f32, t: u64) {
    adam_corrected(w, m, v, g, lr, beta1, beta2, eps, BiasCorrection::at(beta1, beta2, t));
}

/// [`adam`] with its bias corrections computed before ([`BiasCorrection::at`] of the same step).
#[inline]
#[allow(clippy::too_many_arguments, reason = "Adam's state and hyperparameters of one parameter")]
pub fn adam_corrected(
    w: &mut f32,
    m: &mut f32,
    v: &mut f32,
    g: f32,
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    bias: BiasCorrection,
) {
    *m = beta1 * *m + (1.0 - beta1) * g;
    *v = beta2 * *v + (1.0 - beta2) * (g * g);
    let m_hat = *m / bias.first;
    let v_hat = *v / bias.second;
    *w -= lr * m_hat / (crate::sqrtf(v_hat) + eps);
}

#[cfg(test)]
mod tests {

    /// `tanh` is within 4 units in the last place of f64's tanh over a fine sweep of [-12, 12] (both
    /// branches and their seams), odd, -0 and NaN kept, and +-1 in the tails.
    #[test]
    fn tanh_is_within_a_few_ulp() {
        use super::tanh;
        let mut worst = 0.0f64;
        let mut x = -12.0f32;
        while x <= 12.0 {
            for v in [x, x * 1e-3, x * 1e-6] {
                let (got, want) = (f64::from(tanh(v)), libm::tanh(f64::from(v)));
                let ulp = f64::from(f32::EPSILON) * want.abs().max(f64::from(f32::MIN_POSITIVE));
                worst = worst.max((got - want).abs() / ulp);
                assert_eq!(tanh(-v).to_bits(), (-tanh(v)).to_bits(), "odd at {v}");
            }
            x += 0.000_37;
        }
        assert!(worst <= 4.0, "worst error {worst} ulp");
        for seam in [0.55f32, 9.0] {
            let below = f32::from_bits(seam.to_bits() - 1);
            assert!((tanh(seam) - tanh(below)).abs() <= 4.0 * f32::EPSILON, "jump at {seam}");
        }
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!((tanh(30.0), tanh(-1e30), tanh(f32::INFINITY)), (1.0, -1.0, 1.0));
    }
    /// `exp_small`'s integer `k` from the bits of `t + ROUND` is the rounded `k` itself (what a cast would
    /// give) over its whole domain, every 61st float of [0, 18] and the points where `k` changes.
    #[test]
    fn exp_small_reads_k_from_the_bits() {
        const ROUND: f32 = 12_582_912.0;
        let check = |y: f32| {
            let shifted = y * core::f32::consts::LOG2_E + ROUND;
            let k = shifted - ROUND;
            assert_eq!(shifted.to_bits().wrapping_sub(ROUND.to_bits()), k as u32, "k at {y}");
            let e = f64::from(super::exp_small(y));
            assert!((e - f64::from(y).exp()).abs() <= 4.0 * f64::from(f32::EPSILON) * e, "e^{y}: {e}");
        };
        let mut bits = 0u32;
        while f32::from_bits(bits) <= 18.0 {
            check(f32::from_bits(bits));
            bits += 61;
        }
        for k in 0..27 {
            let y = (k as f32 + 0.5) * core::f32::consts::LN_2;
            for b in y.to_bits() - 2..y.to_bits() + 3 {
                check(f32::from_bits(b));
            }
        }
        check(18.0);
    }

    use super::adam;

    /// `pow_steps` is exact where the powers are (a dyadic beta), within `2 t` f64 ulps of the f64 `powf`
    /// for Adam's betas over steps 1 .. 2^40 (the step is a u64, not rounded to a float), and the f32
    /// corrections it gives are within one f32 ulp of those from `powf`.
    #[test]
    fn pow_steps_is_beta_to_the_step() {
        use super::pow_steps;
        assert_eq!(pow_steps(0.5, 0), 1.0);
        assert_eq!(pow_steps(0.5, 10), 0.5f64.powi(10));
        assert_eq!(pow_steps(0.75, 3), 0.421875);
        for beta in [0.9f32, 0.99, 0.999, 0.9999] {
            for t in [1u64, 2, 3, 7, 100, 1_000, 123_457, 1 << 20, (1 << 30) + 5, 1 << 40] {
                let (got, want) = (pow_steps(beta, t), f64::from(beta).powf(t as f64));
                let tol = 2.0 * t as f64 * f64::EPSILON * want + f64::MIN_POSITIVE;
                assert!((got - want).abs() <= tol, "beta {beta}, t {t}: {got:e} vs {want:e}");
                let (c, w) = ((1.0 - got) as f32, (1.0 - want) as f32);
                assert!((c - w).abs() <= f32::EPSILON * w, "beta {beta}, t {t}: correction {c:e} vs {w:e}");
            }
        }
    }

    /// The step counter is u64 end to end: at step 2^32 (a u32 counter wraps to 0 there, and the bias
    /// correction divides by 1 - beta^0 = 0) the update is finite and the bias corrections are 1.
    #[test]
    fn adam_past_u32_steps_stays_finite() {
        let (mut w, mut m, mut v) = (1.0f32, 0.1f32, 0.01f32);
        adam(&mut w, &mut m, &mut v, 0.5, 1e-3, 0.9, 0.999, 1e-8, 1u64 << 32);
        assert!(w.is_finite() && m.is_finite() && v.is_finite(), "w {w}, m {m}, v {v}");
        let (m_want, v_want): (f32, f32) = (0.9 * 0.1 + 0.1 * 0.5, 0.999 * 0.01 + 0.001 * 0.25);
        let w_want = 1.0 - 1e-3 * m_want / (v_want.sqrt() + 1e-8);
        assert!((w - w_want).abs() < 1e-6, "{w} vs {w_want}");
    }
}
