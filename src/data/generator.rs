//! Seeded synthetic bars for scale tests and benchmarks: GARCH(1,1) volatility clustering inside a
//! three-regime Markov chain (calm up-trend, calm down-trend, turbulent), a market factor shared by the
//! symbols, OHLC consistent within each bar, volume rising with the move. Always labelled synthetic.

use chrono::{DateTime, Duration, FixedOffset};
use num_traits::FromPrimitive;
use rust_decimal::Decimal;

use super::{Dataset, MarketBar, Series};
use crate::synthetic::normal;

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

fn uniform(seed: u64, stream: u64, i: u64) -> f64 {
    ((gpu_kernels::rng::draw_u64(seed, stream, i) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
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
