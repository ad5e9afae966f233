//! Reward of a transition and the deterministic moments used to normalize it.

use crate::types::{BarrierLabel, Moments, TrialParams};

/// Lower bound of `equity_{t+1} / equity_t` inside the log (a bankrupt step gives `ln(1e-12)`, not -inf).
pub const MIN_EQUITY_RATIO: f64 = 1e-12;

/// Envs per chunk of the normalization statistics: each chunk is reduced in env order, chunks are merged in
/// chunk order, on both backends.
pub const MOMENT_CHUNK: usize = 64;

/// Added to the standard deviation when normalizing.
pub const NORM_EPS: f64 = 1e-8;

/// `w_pnl ln(eq1/eq0) - w_cost costs/eq0 - w_dd max(0, dd1 - dd0) + w_barrier b`.
#[inline]
pub fn reward(
    params: &TrialParams,
    equity_before: f64,
    equity_after: f64,
    drawdown_before: f64,
    drawdown_after: f64,
    costs: f64,
    label: BarrierLabel,
) -> f64 {
    let ratio = equity_after / equity_before;
    let log_return = libm::log(if ratio > MIN_EQUITY_RATIO { ratio } else { MIN_EQUITY_RATIO });
    let dd_increase = drawdown_after - drawdown_before;
    let dd_increase = if dd_increase > 0.0 { dd_increase } else { 0.0 };
    let barrier = match label {
        BarrierLabel::TakeProfit => 1.0,
        BarrierLabel::StopLoss => -1.0,
        _ => 0.0,
    };
    params.w_pnl * log_return - params.w_cost * (costs / equity_before) - params.w_drawdown * dd_increase
        + params.w_barrier * barrier
}

/// Adds one value to `m` (Welford).
#[inline]
pub fn push(m: &mut Moments, x: f64) {
    m.count += 1.0;
    let delta = x - m.mean;
    m.mean += delta / m.count;
    m.m2 += delta * (x - m.mean);
}

/// Chan's parallel merge of `b` into `a`.
#[inline]
pub fn merge(a: &mut Moments, b: &Moments) {
    if b.count == 0.0 {
        return;
    }
    if a.count == 0.0 {
        *a = *b;
        return;
    }
    let count = a.count + b.count;
    let delta = b.mean - a.mean;
    a.mean += delta * (b.count / count);
    a.m2 = a.m2 + b.m2 + delta * delta * (a.count * b.count / count);
    a.count = count;
}

/// Population standard deviation of `m` (0 when empty).
#[inline]
pub fn std_dev(m: &Moments) -> f64 {
    if m.count > 0.0 { crate::sqrt(m.m2 / m.count) } else { 0.0 }
}

/// `(r - mean) / (std + 1e-8)`.
#[inline]
pub fn normalize(r: f64, m: &Moments) -> f64 {
    (r - m.mean) / (std_dev(m) + NORM_EPS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_equals_one_pass() {
        let xs = [1.0, 4.0, -2.0, 0.5, 3.0, 7.0, -1.5];
        let mut all = Moments::default();
        xs.iter().for_each(|&x| push(&mut all, x));
        let (mut a, mut b) = (Moments::default(), Moments::default());
        xs[..3].iter().for_each(|&x| push(&mut a, x));
        xs[3..].iter().for_each(|&x| push(&mut b, x));
        merge(&mut a, &b);
        assert_eq!(a.count, 7.0);
        assert!((a.mean - all.mean).abs() < 1e-12 && (a.m2 - all.m2).abs() < 1e-9);
        let mean = xs.iter().sum::<f64>() / 7.0;
        let m2: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
        assert!((a.mean - mean).abs() < 1e-12 && (a.m2 - m2).abs() < 1e-9);
    }

    #[test]
    fn reward_terms() {
        let p =
            TrialParams { w_pnl: 1.0, w_cost: 2.0, w_drawdown: 3.0, w_barrier: 0.5, ..TrialParams::frictionless(1.0) };
        // ln(110/100) - 2 x 1/100 - 3 x (0.1 - 0.05) + 0.5 x (+1)
        let r = reward(&p, 100.0, 110.0, 0.05, 0.1, 1.0, BarrierLabel::TakeProfit);
        let want = libm::log(1.1) - 0.02 - 0.15 + 0.5;
        assert!((r - want).abs() < 1e-12, "{r} vs {want}");
        // A drawdown decrease costs nothing; a bankrupt step is finite.
        let r = reward(&p, 100.0, -5.0, 0.2, 0.1, 0.0, BarrierLabel::None);
        assert_eq!(r, libm::log(MIN_EQUITY_RATIO));
    }
}
