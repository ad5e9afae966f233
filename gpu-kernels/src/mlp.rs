//! The networks: input D (F + 3) -> hidden h (ReLU) -> hidden h (ReLU) -> O outputs (3 Q-values for DQN;
//! 3 action logits and a value for PPO), one flat f32 block of parameters per trial. The block is laid out for the largest hidden width H of the batch (row stride
//! H), and each trial uses its own active width `h <= H`; entries beyond it stay zero. Every sum runs in a
//! fixed order with plain f32 operations, so the CPU and the GPU give the same bits.

/// Q-values per state (FLAT, LONG, SHORT).
pub const ACTIONS: usize = 3;

/// Outputs of the PPO actor-critic: 3 logits and the value.
pub const ACTOR_CRITIC: usize = ACTIONS + 1;

/// Largest output count.
pub const MAX_OUTPUTS: usize = ACTOR_CRITIC;

/// Where each tensor of a trial's parameter block starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Input width D.
    pub input: usize,
    /// Row stride H (the largest hidden width).
    pub hidden: usize,
    /// Outputs O (at most [`MAX_OUTPUTS`]).
    pub outputs: usize,
}

impl Layout {
    /// A Q-network: 3 outputs.
    pub const fn q_net(input: usize, hidden: usize) -> Self {
        Self { input, hidden, outputs: ACTIONS }
    }

    /// An actor-critic: 3 logits and a value.
    pub const fn actor_critic(input: usize, hidden: usize) -> Self {
        Self { input, hidden, outputs: ACTOR_CRITIC }
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

    /// Floats of per-sample training scratch: a1, a2, delta1, delta2 (H each), the output gradient (O),
    /// and two spare activations (H each) for a second forward pass.
    pub fn train_scratch(&self) -> usize {
        6 * self.hidden + self.outputs
    }
}

#[inline]
fn relu(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}

/// Forward pass with active width `h`: writes the post-ReLU activations `a1`, `a2` (first `h` entries) and
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
        a1[i] = relu(s);
    }
    for i in 0..h {
        let row = &w[l.w2() + i * stride..l.w2() + i * stride + h];
        let mut s = w[l.b2() + i];
        for j in 0..h {
            s += row[j] * a1[j];
        }
        a2[i] = relu(s);
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

/// Backward pass of one sample given the loss gradient `dout` w.r.t. its `l.outputs` outputs: writes the
/// pre-activation gradients `delta2`, `delta1` (first `h` entries) from the activations of [`forward`].
#[inline]
#[allow(clippy::too_many_arguments, reason = "the activations and gradients of one sample")]
pub fn backward(
    l: &Layout,
    w: &[f32],
    h: usize,
    dout: &[f32],
    a1: &[f32],
    a2: &[f32],
    delta1: &mut [f32],
    delta2: &mut [f32],
) {
    let stride = l.hidden;
    for i in 0..h {
        let mut back = 0.0;
        for (k, &g) in dout.iter().enumerate().take(l.outputs) {
            back += w[l.w3() + k * stride + i] * g;
        }
        delta2[i] = if a2[i] > 0.0 { back } else { 0.0 };
    }
    for i in 0..h {
        let mut s = 0.0;
        for m in 0..h {
            s += w[l.w2() + m * stride + i] * delta2[m];
        }
        delta1[i] = if a1[i] > 0.0 { s } else { 0.0 };
    }
}

/// The gradient of parameter `p` summed over samples `0..batch` in sample order, from each sample's
/// scratch (`l.train_scratch()` floats: a1, a2, delta1, delta2, output gradient) and input row; 0 outside the
/// active width `h`.
#[inline]
pub fn param_gradient(l: &Layout, h: usize, p: usize, batch: usize, scratch: &[f32], inputs: &[f32]) -> f32 {
    let (d, stride, per) = (l.input, l.hidden, l.train_scratch());
    let (a1, a2, d1, d2, d3) = (0, stride, 2 * stride, 3 * stride, 4 * stride);
    // (delta offset, input: None for a bias, Some((from the inputs?, offset))) of parameter p.
    let (delta, input): (usize, Option<(bool, usize)>) = if p < l.b1() {
        let (i, c) = (p / d, p % d);
        if i >= h {
            return 0.0;
        }
        (d1 + i, Some((true, c)))
    } else if p < l.w2() {
        let i = p - l.b1();
        if i >= h {
            return 0.0;
        }
        (d1 + i, None)
    } else if p < l.b2() {
        let (i, c) = ((p - l.w2()) / stride, (p - l.w2()) % stride);
        if i >= h || c >= h {
            return 0.0;
        }
        (d2 + i, Some((false, a1 + c)))
    } else if p < l.w3() {
        let i = p - l.b2();
        if i >= h {
            return 0.0;
        }
        (d2 + i, None)
    } else if p < l.b3() {
        let (k, c) = ((p - l.w3()) / stride, (p - l.w3()) % stride);
        if c >= h {
            return 0.0;
        }
        (d3 + k, Some((false, a2 + c)))
    } else {
        (d3 + (p - l.b3()), None)
    };
    let mut g = 0.0;
    for j in 0..batch {
        let s = &scratch[j * per..(j + 1) * per];
        let x = match input {
            None => 1.0,
            Some((true, c)) => inputs[j * d + c],
            Some((false, c)) => s[c],
        };
        g += s[delta] * x;
    }
    g
}

/// Adam moments and step of one parameter (bias-corrected; `t` >= 1 is the step number).
#[inline]
#[allow(clippy::too_many_arguments, reason = "Adam's state and hyperparameters of one parameter")]
pub fn adam(w: &mut f32, m: &mut f32, v: &mut f32, g: f32, lr: f32, beta1: f32, beta2: f32, eps: f32, t: u32) {
    *m = beta1 * *m + (1.0 - beta1) * g;
    *v = beta2 * *v + (1.0 - beta2) * (g * g);
    let m_hat = *m / (1.0 - libm::powf(beta1, t as f32));
    let v_hat = *v / (1.0 - libm::powf(beta2, t as f32));
    *w -= lr * m_hat / (libm::sqrtf(v_hat) + eps);
}
