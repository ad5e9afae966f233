//! Seeded synthetic bars for demos and tests (always labelled synthetic where shown).

use gpu_kernels::rng::draw_u64;

use crate::PriceSeries;

/// A uniform draw in (0, 1) from the counter-based generator.
fn uniform(seed: u64, stream: u64, counter: u64) -> f64 {
    ((draw_u64(seed, stream, counter) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// A standard normal draw (Box-Muller on two uniform draws).
pub fn normal(seed: u64, stream: u64, counter: u64) -> f64 {
    let (u1, u2) = (uniform(seed, stream, 2 * counter), uniform(seed, stream, 2 * counter + 1));
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A geometric random walk of `n_bars` OHLC bars starting at 100 with per-bar volatility `sigma`: each open
/// gaps slightly from the previous close, and high/low bracket open and close.
pub fn random_walk(n_bars: usize, sigma: f64, seed: u64) -> PriceSeries {
    let (mut open, mut high, mut low, mut close) = (
        Vec::with_capacity(n_bars),
        Vec::with_capacity(n_bars),
        Vec::with_capacity(n_bars),
        Vec::with_capacity(n_bars),
    );
    let mut prev_close = 100.0_f64;
    for t in 0..n_bars as u64 {
        let o = prev_close * (0.1 * sigma * normal(seed, 0, t)).exp();
        let c = o * (sigma * normal(seed, 1, t)).exp();
        let wick_up = (0.5 * sigma * normal(seed, 2, t)).abs().exp();
        let wick_down = (0.5 * sigma * normal(seed, 3, t)).abs().exp();
        open.push(o);
        close.push(c);
        high.push(o.max(c) * wick_up);
        low.push(o.min(c) / wick_down);
        prev_close = c;
    }
    PriceSeries::new(open, high, low, close).expect("a geometric walk has finite positive prices")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_is_seeded_and_bars_are_consistent() {
        let a = random_walk(1_000, 0.01, 3);
        assert_eq!(a, random_walk(1_000, 0.01, 3));
        assert_ne!(a, random_walk(1_000, 0.01, 4));
        for t in 0..a.len() {
            assert!(a.low()[t] <= a.open()[t].min(a.close()[t]));
            assert!(a.high()[t] >= a.open()[t].max(a.close()[t]));
        }
    }

    #[test]
    fn normal_draws_have_unit_scale() {
        let n = 20_000;
        let draws: Vec<f64> = (0..n).map(|i| normal(11, 0, i)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "variance {var}");
    }
}
