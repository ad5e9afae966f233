//! The feature pipeline: no lookahead, warm-up, hand-checked values, normalization fitted on the training
//! rows only, splits, the synthetic generator and the Decimal -> f64 device boundary.

use num_traits::ToPrimitive;
use proptest::prelude::*;
use rust_decimal::Decimal;
use tradesim::data::device::{Prepared, columns};
use tradesim::data::features::{CLIP, FeatureMatrix, N_FEATURES, NAMES, WARMUP};
use tradesim::data::splits::time_split;
use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::data::{Dataset, Series};

fn synthetic(bars: usize, seed: u64) -> Dataset {
    generate(&GeneratorConfig { bars, symbols: 1, seed, bar_seconds: 3_600 })
}

fn features(series: &Series) -> FeatureMatrix {
    FeatureMatrix::compute(&columns(series).unwrap())
}

#[test]
fn names_are_unique_and_documented() {
    let docs = include_str!("../docs/FEATURES.md");
    for (i, name) in NAMES.iter().enumerate() {
        assert!(!NAMES[..i].contains(name), "duplicate {name}");
        assert!(docs.contains(&format!("`{name}`")), "{name} is not documented in docs/FEATURES.md");
    }
    assert_eq!(NAMES.len(), N_FEATURES);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    /// Changing bars after t never changes the features at or before t.
    #[test]
    fn no_lookahead(seed in 0u64..1_000, t in WARMUP..399usize, scale in 0.5f64..2.0) {
        let d = synthetic(400, seed);
        let before = features(&d.series[0]);
        let mut changed = d.series[0].clone();
        let factor = Decimal::from_f64_retain(scale).unwrap().round_dp(3);
        for b in &mut changed.bars[t + 1..] {
            b.open *= factor;
            b.high *= factor;
            b.low *= factor;
            b.close *= factor;
            b.volume += Decimal::from(1_000);
        }
        let after = features(&changed);
        prop_assert_eq!(&before.values[..(t + 1) * N_FEATURES], &after.values[..(t + 1) * N_FEATURES]);
        prop_assert_ne!(&before.values[(t + 1) * N_FEATURES..], &after.values[(t + 1) * N_FEATURES..]);
    }
}

#[test]
fn warm_up_rows_are_zero_and_the_rest_finite() {
    let d = synthetic(1_000, 3);
    let f = features(&d.series[0]);
    assert!(f.values[..WARMUP * N_FEATURES].iter().all(|&x| x == 0.0));
    assert!(f.values[WARMUP * N_FEATURES..].iter().all(|x| x.is_finite()));
    let nonzero = (0..N_FEATURES).filter(|&j| (WARMUP..1_000).any(|t| f.get(t, j) != 0.0)).count();
    assert!(
        nonzero >= N_FEATURES - 2,
        "only {nonzero} features vary (hour features are constant on hourly data at most)"
    );
}

/// The features computed in parallel keep the serial definitions' bits: the two sigma features are the
/// price block's EWMA sigma of the closes (spans 100 and 20), and the range estimators (Parkinson and
/// Garman-Klass over 20 bars) are their formulas summed in bar order.
#[test]
fn parallel_columns_keep_the_serial_bits() {
    let d = synthetic(3_000, 7);
    let c = columns(&d.series[0]).unwrap();
    let f = FeatureMatrix::compute(&c);
    let col = |name: &str| NAMES.iter().position(|n| *n == name).unwrap();
    let (s100, s20) = (tradesim::ewma_sigma(&c.close, 100), tradesim::ewma_sigma(&c.close, 20));
    let (parkinson, gk) = (col("parkinson_vol_20"), col("garman_klass_vol_20"));
    for t in WARMUP..c.len() {
        assert_eq!(f.get(t, col("ewma_vol_100")).to_bits(), s100[t].to_bits(), "sigma 100 at {t}");
        assert_eq!(f.get(t, col("ewma_vol_20")).to_bits(), s20[t].to_bits(), "sigma 20 at {t}");
        let hl: Vec<f64> = (t - 19..=t).map(|u| (c.high[u] / c.low[u]).ln()).collect();
        let co: Vec<f64> = (t - 19..=t).map(|u| (c.close[u] / c.open[u]).ln()).collect();
        let p = (hl.iter().map(|x| x * x).sum::<f64>() / (20.0 * 4.0 * std::f64::consts::LN_2)).sqrt();
        let g: f64 = hl.iter().zip(&co).map(|(a, b)| 0.5 * a * a - (2.0 * std::f64::consts::LN_2 - 1.0) * b * b).sum();
        assert_eq!(f.get(t, parkinson).to_bits(), p.to_bits(), "Parkinson at {t}");
        assert_eq!(f.get(t, gk).to_bits(), (g / 20.0).max(0.0).sqrt().to_bits(), "Garman-Klass at {t}");
        let r = (c.close[t] / c.close[t - 1]).ln();
        assert_eq!(f.get(t, col("logret_1")).to_bits(), r.to_bits(), "log return at {t}");
    }
    // Normalization by rows in parallel: each value as (x - mean) / std clipped, row after row.
    let norm = f.fit(WARMUP..2_000);
    let rows = 1_500..2_700;
    let out = f.normalized(&norm, rows.clone());
    assert_eq!(out.len(), rows.len() * N_FEATURES);
    for (i, t) in rows.enumerate() {
        for j in 0..N_FEATURES {
            let want = ((f.get(t, j) - norm.mean[j]) / norm.std[j]).clamp(-CLIP, CLIP) as f32;
            assert_eq!(out[i * N_FEATURES + j].to_bits(), want.to_bits(), "normalized row {t}, feature {j}");
        }
    }
    assert!(f.normalized(&norm, 5..5).is_empty());
}

/// Bars closing at 100 + t with open 99.5 + t, high close + 1, low open - 1: logret_1 = ln(c_t / c_{t-1}),
/// ret_5 = c_t / c_{t-5} - 1, range = 2.5 / c, gap = o_t / c_{t-1} - 1, close location = 1.5 / 2.5 - 0.5.
#[test]
fn hand_checked_values() {
    let mut d = synthetic(300, 1);
    for (t, b) in d.series[0].bars.iter_mut().enumerate() {
        let c = Decimal::from(100 + t);
        b.close = c;
        b.open = c - Decimal::new(5, 1);
        b.high = c + Decimal::ONE;
        b.low = b.open - Decimal::ONE;
    }
    let f = features(&d.series[0]);
    let t = 250;
    let c = |u: usize| (100 + u) as f64;
    let col = |name: &str| NAMES.iter().position(|n| *n == name).unwrap();
    assert!((f.get(t, col("logret_1")) - (c(t) / c(t - 1)).ln()).abs() < 1e-12);
    assert!((f.get(t, col("ret_5")) - (c(t) / c(t - 5) - 1.0)).abs() < 1e-12);
    assert!((f.get(t, col("range")) - 2.5 / c(t)).abs() < 1e-12);
    assert!((f.get(t, col("gap")) - ((c(t) - 0.5) / c(t - 1) - 1.0)).abs() < 1e-12);
    assert!((f.get(t, col("close_location")) - (1.5 / 2.5 - 0.5)).abs() < 1e-12);
    assert!((f.get(t, col("sma_dist_10")) - (c(t) / (c(t) - 4.5) - 1.0)).abs() < 1e-12);
    assert!(f.get(t, col("rsi_14")) > 0.49, "a steady rise has RSI near 100");
}

#[test]
fn normalization_uses_training_rows_only() {
    let d = synthetic(2_000, 5);
    let split = time_split(WARMUP, 2_000, 0.7, 0.15).unwrap();
    let base = Prepared::new(&d.series[0], split.train.clone()).unwrap();
    let mut changed = d.series[0].clone();
    for b in &mut changed.bars[split.valid.start..] {
        b.close *= Decimal::from(3);
        b.high *= Decimal::from(3);
    }
    let other = Prepared::new(&changed, split.train.clone()).unwrap();
    assert_eq!(base.normalizer, other.normalizer, "validation and test bars must not move the statistics");
    let train = base.features.normalized(&base.normalizer, split.train.clone());
    let j = 0;
    let col: Vec<f64> = train.chunks(N_FEATURES).map(|r| f64::from(r[j])).collect();
    let mean = col.iter().sum::<f64>() / col.len() as f64;
    let var = col.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / col.len() as f64;
    assert!(mean.abs() < 1e-3 && (var - 1.0).abs() < 0.05, "mean {mean}, var {var}");
}

#[test]
fn device_prices_come_from_decimals_through_to_primitive() {
    let d = synthetic(500, 9);
    let series = &d.series[0];
    let prepared = Prepared::new(series, WARMUP..400).unwrap();
    let market = prepared.market_data(WARMUP..500).unwrap();
    assert_eq!((market.n_bars(), market.n_features()), (300, N_FEATURES));
    for (i, bar) in market.bars().iter().enumerate() {
        let src = &series.bars[WARMUP + i];
        assert_eq!(bar.open, src.open.to_f64().unwrap());
        assert_eq!(bar.close, src.close.to_f64().unwrap());
        assert!(bar.sigma > 0.0);
    }
}

#[test]
fn generator_is_seeded_consistent_and_labelled() {
    let a = generate(&GeneratorConfig { bars: 20_000, symbols: 2, seed: 4, bar_seconds: 60 });
    assert_eq!(a, generate(&GeneratorConfig { bars: 20_000, symbols: 2, seed: 4, bar_seconds: 60 }));
    assert_ne!(
        a.series[0].bars,
        generate(&GeneratorConfig { bars: 20_000, symbols: 1, seed: 5, bar_seconds: 60 }).series[0].bars
    );
    assert!(a.synthetic && a.label().starts_with("SYNTHETIC"));
    assert_eq!(a.series.len(), 2);
    let bars = &a.series[0].bars;
    for w in bars.windows(2) {
        assert!(w[1].time > w[0].time);
    }
    for b in bars {
        assert!(b.low <= b.open.min(b.close) && b.high >= b.open.max(b.close) && b.low > Decimal::ZERO);
    }
    // Volatility clustering: |r| is autocorrelated.
    let r: Vec<f64> =
        bars.windows(2).map(|w| (w[1].close.to_f64().unwrap() / w[0].close.to_f64().unwrap()).ln().abs()).collect();
    let m = r.iter().sum::<f64>() / r.len() as f64;
    let cov: f64 = r.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    let var: f64 = r.iter().map(|x| (x - m).powi(2)).sum();
    assert!(cov / var > 0.05, "|r| autocorrelation {}", cov / var);
}

/// Flat closes: every log return is 0, so `signed_volume_z_20` is sign(0) x z = 0 (f64::signum gave +z),
/// and `rvol_ratio_5_60` is undefined (no variation), documented as 0 (v1: -1).
#[test]
fn flat_prices_give_zero_sign_and_ratio() {
    let mut d = synthetic(300, 2);
    for (t, b) in d.series[0].bars.iter_mut().enumerate() {
        b.open = Decimal::from(100);
        b.close = Decimal::from(100);
        b.high = Decimal::from(101);
        b.low = Decimal::from(99);
        b.volume = Decimal::from(1_000 + (t * 37) % 500);
    }
    let f = features(&d.series[0]);
    let col = |name: &str| NAMES.iter().position(|n| *n == name).unwrap();
    for t in [WARMUP, 250, 299] {
        assert!(f.get(t, col("volume_z_20")) != 0.0, "the check needs a nonzero volume z at {t}");
        assert_eq!(f.get(t, col("signed_volume_z_20")), 0.0, "bar {t}");
        assert_eq!(f.get(t, col("rvol_ratio_5_60")), 0.0, "bar {t}");
    }
}

/// The sigma EWMA span is a setting: a shorter span gives another sigma; span 0 is refused.
#[test]
fn sigma_span_is_configurable() {
    let d = synthetic(400, 3);
    let s = &d.series[0];
    let bars = |span: usize| Prepared::with_sigma_span(s, WARMUP..300, span).unwrap().market_data(WARMUP..400).unwrap();
    let (default, short) = (bars(tradesim::DEFAULT_SIGMA_SPAN), bars(20));
    assert_eq!(Prepared::new(s, WARMUP..300).unwrap().market_data(WARMUP..400).unwrap().bars(), default.bars());
    assert!(default.bars().iter().zip(short.bars()).any(|(a, b)| a.sigma != b.sigma));
    assert!(Prepared::with_sigma_span(s, WARMUP..300, 0).is_err());
}
