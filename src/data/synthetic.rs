//! Seeded synthetic data, always labelled synthetic where shown. [`generate`]: bars for scale tests and
//! benchmarks: GARCH(1,1) volatility clustering inside a
//! three-regime Markov chain (calm up-trend, calm down-trend, turbulent), a market factor shared by the
//! symbols, OHLC consistent within each bar, volume rising with the move. Always labelled synthetic.

use chrono::{DateTime, Duration, FixedOffset};
use num_traits::FromPrimitive;
use rust_decimal::Decimal;

use super::{Dataset, MarketBar, Series};
use crate::PriceSeries;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneratorConfig {
    /// Bars per symbol.
    pub bars: usize,
    /// Symbols (SYN0, SYN1, ...).
    pub symbols: usize,
    /// Seed: the same seed gives the same bars.
    pub seed: u64,
    /// Seconds between bars.
    pub bar_seconds: i64,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self { bars: 300_000, symbols: 1, seed: 1, bar_seconds: 3_600 }
    }
}

/// Per-regime drift and volatility multiplier, and the chance per bar of leaving the regime.
const REGIMES: [(f64, f64); 3] = [(0.000_05, 0.8), (-0.000_04, 0.9), (0.0, 2.2)];
const SWITCH_PROBABILITY: f64 = 0.002;
/// GARCH(1,1) on the regime-free innovation e: var = OMEGA + ALPHA e^2 + BETA var (long-run per-bar vol about 0.5%).
const OMEGA: f64 = 2.5e-7;
const ALPHA: f64 = 0.05;
const BETA: f64 = 0.94;
/// Pull of the log price towards its start per bar (keeps 300K-bar paths within a few multiples).
const MEAN_REVERSION: f64 = 2e-5;

/// A uniform draw in (0, 1) from the counter-based generator.
fn uniform(seed: u64, stream: u64, counter: u64) -> f64 {
    ((gpu_kernels::rng::draw_u64(seed, stream, counter) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
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

/// Rounds a positive price to 6 decimal places as a Decimal.
fn price(x: f64) -> Decimal {
    Decimal::from_f64(x).unwrap_or(Decimal::ONE).round_dp(6).max(Decimal::new(1, 6))
}

/// Generates the dataset. 300,000 bars take well under a second.
pub fn generate(cfg: &GeneratorConfig) -> Dataset {
    let start: DateTime<FixedOffset> = DateTime::from_timestamp(1_577_836_800, 0).expect("2020-01-01").fixed_offset();
    let market: Vec<f64> = (0..cfg.bars as u64).map(|t| normal(cfg.seed, 100, t)).collect();
    let series = (0..cfg.symbols as u64)
        .map(|k| {
            let seed = cfg.seed ^ (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let anchor = 100.0 * (1.0 + k as f64 * 0.25);
            let (mut regime, mut var, mut close) = (0usize, OMEGA / (1.0 - ALPHA - BETA), anchor);
            let mut bars = Vec::with_capacity(cfg.bars);
            for t in 0..cfg.bars as u64 {
                if uniform(seed, 1, t) < SWITCH_PROBABILITY {
                    regime = (regime + 1 + usize::from(uniform(seed, 2, t) < 0.5)) % 3;
                }
                let (drift, vol_mult) = REGIMES[regime];
                let shock = 0.6 * market[t as usize] + 0.8 * normal(seed, 3, t);
                let innovation = var.sqrt() * shock;
                let sigma = var.sqrt() * vol_mult;
                let pull = -MEAN_REVERSION * (close / anchor).ln();
                let r = drift + pull + vol_mult * innovation;
                var = OMEGA + ALPHA * innovation * innovation + BETA * var;
                let open = close * (0.1 * sigma * normal(seed, 4, t)).exp();
                let new_close = open * r.exp();
                let high = open.max(new_close) * (0.5 * sigma * normal(seed, 5, t).abs()).exp();
                let low = open.min(new_close) / (0.5 * sigma * normal(seed, 6, t).abs()).exp();
                let volume = 1_000.0 * (1.0 + 3.0 * (r / sigma.max(1e-12)).abs()) * (0.3 * normal(seed, 7, t)).exp();
                let (o, c) = (price(open), price(new_close));
                bars.push(MarketBar {
                    time: start + Duration::seconds(cfg.bar_seconds * t as i64),
                    open: o,
                    high: price(high).max(o).max(c),
                    low: price(low).min(o).min(c),
                    close: c,
                    volume: Decimal::from_f64(volume.round()).unwrap_or(Decimal::ONE),
                });
                close = new_close;
            }
            Series { symbol: format!("SYN{k}"), bars }
        })
        .collect();
    Dataset {
        source: format!("synthetic:seed={},bars={},symbols={}", cfg.seed, cfg.bars, cfg.symbols),
        synthetic: true,
        series,
    }
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
