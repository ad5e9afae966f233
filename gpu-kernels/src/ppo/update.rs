//! The weight update: the gradient's norm in lanes ([`norm_lane`]), its clipping ([`clip_scale`]) and the Adam
//! step ([`update_weight`]).

use super::params::{PpoArgs, PpoParams, learning_rate, trial_rollout, trial_update};
use crate::mlp::Layout;

/// Lanes of the gradient-norm sum: lane `l` of a trial sums the squares of its active gradients `l,
/// l + LANES, ...` (in [`active_param`] order, so the sum does not depend on the padded width of the
/// batch's layout) with FMAs, then the lanes are added in lane order ([`clip_scale`]).
pub const NORM_LANES: usize = 64;

/// The number of active parameters of a trial of width `h` ([`active_param`]).
#[inline]
pub fn active_params(l: &Layout, h: usize) -> usize {
    let (d, o) = (l.input, l.outputs);
    h * d + h + h * h + h + o * h + o
}

/// The layout position of active parameter `a` of a trial of width `h`: W1 (`h x D`), b1, W2 (`h x h`),
/// b2, W3 (`O x h`), b3, each row-major.
#[inline]
pub fn active_param(l: &Layout, h: usize, a: usize) -> usize {
    let (d, s) = (l.input, l.hidden);
    let mut a = a;
    if a < h * d {
        return l.w1() + a;
    }
    a -= h * d;
    if a < h {
        return l.b1() + a;
    }
    a -= h;
    if a < h * h {
        return l.w2() + (a / h) * s + a % h;
    }
    a -= h * h;
    if a < h {
        return l.b2() + a;
    }
    a -= h;
    if a < l.outputs * h {
        return l.w3() + (a / h) * s + a % h;
    }
    l.b3() + (a - l.outputs * h)
}

/// Lane `lane`'s sum of squares over the active gradients of trial `p` (`g(i)`: the gradient at layout
/// position `i`).
#[inline]
pub fn norm_lane(lane: usize, l: &Layout, p: &PpoParams, g: impl Fn(usize) -> f32) -> f32 {
    let h = p.hidden as usize;
    let n = active_params(l, h);
    // Terms `lane, lane + NORM_LANES, ..` in order, loaded ahead of the sum ([`crate::net::fold_ahead`]).
    let terms = if lane < n { (n - lane).div_ceil(NORM_LANES) } else { 0 };
    crate::net::fold_ahead(
        terms,
        |k| g(active_param(l, h, lane + k * NORM_LANES)),
        0.0,
        |s, x| crate::tile::fma(x, x, s),
    )
}

/// Threads of a `ppo_norm` block (a block per trial).
pub const NORM_THREADS: u32 = 512;
/// Active gradients a `ppo_norm` block stages in shared memory at a time (16 a thread; a multiple of
/// [`NORM_LANES`], so a lane's terms keep their lane in every window): 32 KB.
pub const NORM_WINDOW: usize = 8192;
const _: () = assert!(NORM_WINDOW.is_multiple_of(NORM_LANES) && NORM_WINDOW.is_multiple_of(NORM_THREADS as usize));

/// [`norm_lane`]'s sum continued from `acc` over the active gradients `window` (the `window.len()` gradients
/// from a multiple of [`NORM_WINDOW`], in [`active_param`] order): its terms `lane, lane + NORM_LANES, ..`
/// in order, so that folding the windows in order gives [`norm_lane`]'s bits.
#[inline]
pub fn norm_window(lane: usize, window: &[f32], acc: f32) -> f32 {
    let terms = if lane < window.len() { (window.len() - lane).div_ceil(NORM_LANES) } else { 0 };
    crate::net::fold_ahead(terms, |k| window[lane + k * NORM_LANES], acc, |s, x| crate::tile::fma(x, x, s))
}

/// The factor a trial's gradient is multiplied by before Adam: `min(1, max_grad_norm / (norm + 1e-6))`
/// (PyTorch's `clip_grad_norm_`), `norm` the square root of the lanes' sum; 1 without clipping.
#[inline]
pub fn clip_scale(p: &PpoParams, lanes: &[f32]) -> f32 {
    if p.max_grad_norm <= 0.0 {
        return 1.0;
    }
    let sq = crate::net::fold_ahead(NORM_LANES, |i| lanes[i], 0.0, |s, x| s + x);
    let c = p.max_grad_norm / (crate::sqrtf(sq) + 1e-6);
    if c < 1.0 { c } else { 1.0 }
}

/// Adam step of one parameter with its gradient `g` (already clipped) at the trial's update `update`
/// (0-based) of rollout `rollout` (the learning rate's schedule, [`learning_rate`]).
#[inline]
pub fn adam_step(p: &PpoParams, g: f32, w: &mut f32, m: &mut f32, v: &mut f32, update: u64, rollout: u64) {
    crate::mlp::adam(w, m, v, g, learning_rate(p, rollout), p.beta1, p.beta2, p.adam_eps, update + 1);
}

/// The update of one parameter of trial `p`: its gradient `g` clipped by the trial's norm lanes
/// ([`clip_scale`]) and the Adam step at the trial's own update number ([`adam_step`]); nothing for a trial
/// that sits this update out.
#[inline]
pub fn update_weight(args: &PpoArgs, p: &PpoParams, lanes: &[f32], g: f32, w: &mut f32, m: &mut f32, v: &mut f32) {
    if let Some(u) = trial_update(p, args) {
        adam_step(p, g * clip_scale(p, lanes), w, m, v, u, trial_rollout(p, args.rollout));
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// `ppo_norm` stages the active gradients in windows and folds each lane over them in turn: the same bits
    /// as `norm_lane`'s one pass, for sizes below, at and past a window.
    #[test]
    fn norm_lanes_over_windows_are_the_one_pass_sums() {
        let l = Layout::actor_critic(54, 128);
        for h in [1usize, 7, 64, 128] {
            let n = active_params(&l, h);
            let g: Vec<f32> = (0..l.params()).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1.0e-3).collect();
            let active: Vec<f32> = (0..n).map(|a| g[active_param(&l, h, a)]).collect();
            let p = PpoParams { hidden: h as u32, ..PpoParams::default() };
            for lane in [0, 1, 17, NORM_LANES - 1] {
                let whole = norm_lane(lane, &l, &p, |i| g[i]);
                let windows = active.chunks(NORM_WINDOW).fold(0.0, |acc, w| norm_window(lane, w, acc));
                assert_eq!(windows.to_bits(), whole.to_bits(), "h {h}, lane {lane}, {n} gradients");
            }
            assert!(n <= NORM_WINDOW || h == 128, "h {h}: {n} gradients");
        }
    }

    #[test]
    fn the_gradient_is_clipped_to_its_norm() {
        let layout = Layout::actor_critic(5, 8);
        let p = PpoParams { max_grad_norm: 0.5, hidden: 8, ..PpoParams::default() };
        let lanes_of =
            |g: &[f32]| -> Vec<f32> { (0..NORM_LANES).map(|l| norm_lane(l, &layout, &p, |i| g[i])).collect() };
        assert_eq!(active_params(&layout, 8), layout.params());
        // Norm 5 (3 and 4 in two of the parameters, in different lanes).
        let mut g = vec![0.0f32; layout.params()];
        (g[7], g[130]) = (3.0, 4.0);
        let scale = clip_scale(&p, &lanes_of(&g));
        assert!((scale - 0.1).abs() < 1e-6, "{scale}");
        g[7] = 0.03;
        g[130] = 0.04;
        assert_eq!(clip_scale(&p, &lanes_of(&g)), 1.0, "a small gradient is left alone");
        let off = PpoParams { max_grad_norm: 0.0, ..p };
        assert_eq!(clip_scale(&off, &lanes_of(&g)), 1.0);
    }

    /// The active parameters of a narrower trial map one to one onto its positions in a wider layout.
    #[test]
    fn active_parameters_cover_the_trial_once() {
        let wide = Layout::actor_critic(6, 16);
        let (h, n) = (11, active_params(&wide, 11));
        let mut seen = vec![false; wide.params()];
        for a in 0..n {
            let i = active_param(&wide, h, a);
            assert!(!seen[i], "{i} twice");
            seen[i] = true;
        }
        assert_eq!(seen.iter().filter(|&&s| s).count(), n);
        // Row 3 of W2 starts at its padded row.
        assert_eq!(active_param(&wide, h, 6 * h + h + 3 * h), wide.w2() + 3 * 16);
    }
}
