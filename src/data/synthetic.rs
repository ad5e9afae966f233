//! Seeded synthetic data, always labelled synthetic where shown. [`generate`]: bars for scale tests and
//! benchmarks: GARCH(1,1) volatility clustering inside a
//! three-regime Markov chain (calm up-trend, calm down-trend, turbulent), a market factor shared by the
//! symbols, OHLC consistent within each bar, volume rising with the move. Always labelled synthetic.
//!
//! [`generate_path`]: bars with a known amount of signal ([`PathKind`]: none, AR(1) returns, or trending
//! regimes), each bar's OHLC taken from a Brownian log-price path of [`PathConfig::sub_steps`] points, so
//! that the wicks are as wide as a price observed at discrete points makes them (docs/SYNTHETIC.md).

use chrono::{DateTime, Duration, FixedOffset};
use num_traits::FromPrimitive;
use rust_decimal::Decimal;

use super::{Dataset, MarketBar, Series};
use crate::{Error, PriceSeries};

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

/// The daily noise of [`cross_section_universe`]'s symbols.
pub const CROSS_SECTION_NOISE: f64 = 0.01;

/// A universe of `n` symbols over `days` daily bars (from 2020-01-01), for a universe search to learn or not:
/// each symbol's daily log return is noise ([`CROSS_SECTION_NOISE`] x a standard normal keyed by `seed`, the
/// symbol and the day), plus, when `edge` is not 0, `edge` for the symbol whose return was the lowest the
/// day before (tomorrow's best is today's worst, in expectation) less `edge / n` for every symbol, so that
/// the universe as a whole does not drift and buy-and-hold earns nothing from the pattern. `edge = 0`: `n`
/// independent random walks. Opens are the previous close; high and low the larger and smaller of the two;
/// prices at 6 decimal places.
pub fn cross_section_universe(n: usize, days: usize, seed: u64, edge: f64) -> Dataset {
    let start: DateTime<FixedOffset> = DateTime::from_timestamp(1_577_836_800, 0).expect("2020-01-01").fixed_offset();
    let mut returns = vec![0.0f64; days * n];
    for t in 1..days {
        let yesterday = &returns[(t - 1) * n..t * n];
        let worst = (0..n).min_by(|&a, &b| yesterday[a].total_cmp(&yesterday[b])).unwrap_or(0);
        for s in 0..n {
            let planted =
                if t > 1 && edge != 0.0 { f64::from(u8::from(s == worst)) * edge - edge / n as f64 } else { 0.0 };
            returns[t * n + s] = CROSS_SECTION_NOISE * normal(seed, s as u64, t as u64) + planted;
        }
    }
    let series = (0..n)
        .map(|s| {
            let mut close = 100.0;
            let bars = (0..days)
                .map(|t| {
                    let open = close;
                    close = open * returns[t * n + s].exp();
                    let (o, c) = (price(open), price(close));
                    MarketBar {
                        time: start + Duration::days(t as i64),
                        open: o,
                        high: o.max(c),
                        low: o.min(c),
                        close: c,
                        volume: Decimal::ONE,
                    }
                })
                .collect();
            Series { symbol: format!("X{s}"), bars }
        })
        .collect();
    Dataset {
        source: format!("synthetic:cross-section,seed={seed},symbols={n},days={days},edge={edge}"),
        synthetic: true,
        series,
    }
}

/// Generates the dataset. Each bar's random draws are functions of the seed, the stream and the bar alone
/// ([`normal`]'s counter-based draws), so they are drawn in parallel; only the regime, the GARCH variance and
/// the close carry from bar to bar (one pass of arithmetic); the wicks, the volume and the Decimal
/// prices are again per bar, in parallel. The same bars as one sequential loop, bit for bit (a test keeps that
/// loop as the reference).
pub fn generate(cfg: &GeneratorConfig) -> Dataset {
    use rayon::prelude::*;
    let start: DateTime<FixedOffset> = DateTime::from_timestamp(1_577_836_800, 0).expect("2020-01-01").fixed_offset();
    let market: Vec<f64> = (0..cfg.bars as u64).into_par_iter().map(|t| normal(cfg.seed, 100, t)).collect();
    let series = (0..cfg.symbols as u64)
        .map(|k| {
            let seed = symbol_seed(cfg.seed, k);
            let walk = walk_symbol(seed, symbol_anchor(k), &market);
            let bars = walk
                .par_iter()
                .enumerate()
                .map(|(t, w)| {
                    let t = t as u64;
                    let high = w.open.max(w.close) * (0.5 * w.sigma * normal(seed, 5, t).abs()).exp();
                    let low = w.open.min(w.close) / (0.5 * w.sigma * normal(seed, 6, t).abs()).exp();
                    let volume =
                        1_000.0 * (1.0 + 3.0 * (w.r / w.sigma.max(1e-12)).abs()) * (0.3 * normal(seed, 7, t)).exp();
                    let (o, c) = (price(w.open), price(w.close));
                    MarketBar {
                        time: start + Duration::seconds(cfg.bar_seconds * t as i64),
                        open: o,
                        high: price(high).max(o).max(c),
                        low: price(low).min(o).min(c),
                        close: c,
                        volume: Decimal::from_f64(volume.round()).unwrap_or(Decimal::ONE),
                    }
                })
                .collect();
            Series { symbol: format!("SYN{k}"), bars }
        })
        .collect();
    Dataset {
        source: format!("synthetic:seed={},bars={},symbols={}", cfg.seed, cfg.bars, cfg.symbols),
        synthetic: true,
        series,
    }
}

/// Symbol `k`'s seed in [`generate`].
fn symbol_seed(seed: u64, k: u64) -> u64 {
    seed ^ (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Symbol `k`'s starting price and the level its log price is pulled to.
fn symbol_anchor(k: u64) -> f64 {
    100.0 * (1.0 + k as f64 * 0.25)
}

/// One bar of [`walk_symbol`]: its open and close, the volatility and the log return it was drawn with.
#[derive(Clone, Copy)]
struct WalkBar {
    open: f64,
    close: f64,
    sigma: f64,
    r: f64,
}

/// The part of [`generate`] that carries from bar to bar: the regime's Markov chain, the GARCH variance and
/// the close (pulled towards `anchor`), one bar per entry of `market` (the shared factor's draws). The draws
/// each bar reads are made first, in parallel.
fn walk_symbol(seed: u64, anchor: f64, market: &[f64]) -> Vec<WalkBar> {
    use rayon::prelude::*;
    let draws: Vec<[f64; 4]> = (0..market.len() as u64)
        .into_par_iter()
        .map(|t| [uniform(seed, 1, t), uniform(seed, 2, t), normal(seed, 3, t), normal(seed, 4, t)])
        .collect();
    let (mut regime, mut var, mut close) = (0usize, OMEGA / (1.0 - ALPHA - BETA), anchor);
    market
        .iter()
        .zip(&draws)
        .map(|(&m, &[switch, which, own, gap])| {
            if switch < SWITCH_PROBABILITY {
                regime = (regime + 1 + usize::from(which < 0.5)) % 3;
            }
            let (drift, vol_mult) = REGIMES[regime];
            let shock = 0.6 * m + 0.8 * own;
            let innovation = var.sqrt() * shock;
            let sigma = var.sqrt() * vol_mult;
            let pull = -MEAN_REVERSION * (close / anchor).ln();
            let r = drift + pull + vol_mult * innovation;
            var = OMEGA + ALPHA * innovation * innovation + BETA * var;
            let open = close * (0.1 * sigma * gap).exp();
            close = open * r.exp();
            WalkBar { open, close, sigma, r }
        })
        .collect()
}

/// The signal [`generate_path`] plants in the bars' returns (docs/SYNTHETIC.md gives the formulas).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PathKind {
    /// No signal: zero drift, every bar's return an independent N(0, sigma^2).
    RandomWalk,
    /// A random walk with a constant drift: every bar's return is `drift` plus an independent N(0, sigma^2)
    /// draw. Buy-and-hold earns the drift; nothing about a bar is predictable beyond it.
    Trend {
        /// The drift per bar (log return), of either sign.
        drift: f64,
    },
    /// AR(1) bar returns, `r_t = phi r_(t-1) + sqrt(1 - phi^2) sigma e_t` (stationary std sigma): the part
    /// `phi r_(t-1)` is known when the bar opens.
    Autocorrelated {
        /// The lag-1 coefficient, in (-1, 1).
        phi: f64,
    },
    /// Two trending regimes: each bar's return is `+drift` (up) or `-drift` (down) plus N(0, sigma^2) noise,
    /// and the regime flips with probability `switch_probability` at each bar.
    RegimeSwitch {
        /// The regime's drift per bar (log return), positive.
        drift: f64,
        /// The chance per bar of a switch, in (0, 1).
        switch_probability: f64,
    },
}

impl PathKind {
    /// The name the command line and the dataset's source use.
    pub fn name(self) -> &'static str {
        match self {
            Self::RandomWalk => "random-walk",
            Self::Trend { .. } => "trend",
            Self::Autocorrelated { .. } => "autocorrelated",
            Self::RegimeSwitch { .. } => "regime",
        }
    }
}

/// Lag-1 coefficient of [`PathKind::Autocorrelated`]: a known part of `phi * sigma * sqrt(2/pi)` = 6.4e-4
/// per bar at sigma 0.002, six times a 1e-4 spread (docs/SYNTHETIC.md).
pub const DEFAULT_PHI: f64 = 0.4;
/// Drift per bar of [`PathKind::RegimeSwitch`]: a quarter of the default sigma, so the sign of the last 24
/// bars' return names the regime about nine times in ten (docs/SYNTHETIC.md).
pub const DEFAULT_REGIME_DRIFT: f64 = 0.000_5;
/// Switch probability per bar of [`PathKind::RegimeSwitch`] (regimes last 100 bars on average).
pub const DEFAULT_SWITCH_PROBABILITY: f64 = 0.01;

/// What [`generate_path`] builds: one symbol `SYN` of hourly bars from 2020-01-01, starting at 100.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathConfig {
    /// The signal in the returns.
    pub kind: PathKind,
    /// Bars.
    pub bars: usize,
    /// Brownian points per bar (the open excluded): high and low are the extremes over them and the open.
    pub sub_steps: usize,
    /// Standard deviation of a bar's log return (of its unpredictable part for the regimes).
    pub sigma: f64,
    /// Standard deviation of the log gap between a bar's open and the previous close (0: open = close).
    pub gap_sigma: f64,
    /// Seed: the same seed gives the same bars.
    pub seed: u64,
}

impl Default for PathConfig {
    fn default() -> Self {
        Self { kind: PathKind::RandomWalk, bars: 40_000, sub_steps: 12, sigma: 0.002, gap_sigma: 0.0, seed: 1 }
    }
}

impl PathConfig {
    /// Checks every field; an error names the field (`bars`, `sub_steps`, `sigma`, `gap_sigma`, `phi`,
    /// `drift`, `switch_probability`).
    pub fn validate(&self) -> Result<(), Error> {
        let in_range = |key: &str, v: f64, ok: bool, allowed: &str| {
            if v.is_finite() && ok { Ok(()) } else { Err(Error::config(key, format!("{v} is not {allowed}"))) }
        };
        if self.bars == 0 {
            return Err(Error::config("bars", "0 bars; give at least 1"));
        }
        if self.sub_steps == 0 {
            return Err(Error::config("sub_steps", "0 sub-steps; give at least 1"));
        }
        in_range("sigma", self.sigma, self.sigma > 0.0 && self.sigma < 1.0, "in (0, 1)")?;
        in_range("gap_sigma", self.gap_sigma, (0.0..1.0).contains(&self.gap_sigma), "in [0, 1)")?;
        match self.kind {
            PathKind::RandomWalk => Ok(()),
            PathKind::Trend { drift } => in_range("drift", drift, drift.abs() < 1.0, "in (-1, 1)"),
            PathKind::Autocorrelated { phi } => in_range("phi", phi, phi.abs() < 1.0, "in (-1, 1)"),
            PathKind::RegimeSwitch { drift, switch_probability: p } => {
                in_range("drift", drift, drift > 0.0 && drift < 1.0, "in (0, 1)")?;
                in_range("switch_probability", p, p > 0.0 && p < 1.0, "in (0, 1)")
            }
        }
    }

    /// The dataset's source: `synthetic:` with the kind, seed, bars and every parameter.
    pub fn source(&self) -> String {
        let signal = match self.kind {
            PathKind::RandomWalk => String::new(),
            PathKind::Trend { drift } => format!(",drift={drift}"),
            PathKind::Autocorrelated { phi } => format!(",phi={phi}"),
            PathKind::RegimeSwitch { drift, switch_probability } => {
                format!(",drift={drift},switch_probability={switch_probability}")
            }
        };
        format!(
            "synthetic:kind={},seed={},bars={},sub_steps={},sigma={},gap_sigma={}{signal}",
            self.kind.name(),
            self.seed,
            self.bars,
            self.sub_steps,
            self.sigma,
            self.gap_sigma
        )
    }
}

/// Draw streams of [`generate_path`] (apart from those of [`generate`] and [`random_walk`]).
const STREAM_SUB_STEP: u64 = 20;
const STREAM_GAP: u64 = 21;
const STREAM_REGIME: u64 = 22;
const STREAM_START: u64 = 23;
const STREAM_VOLUME: u64 = 24;

/// The signal's state between bars: the last bar's return (AR(1)) and the regime (up or down).
struct SignalState {
    last_return: f64,
    up: bool,
}

impl SignalState {
    /// The state before bar 0: a last return drawn from the stationary N(0, sigma^2) and a regime drawn
    /// with probability 1/2 each.
    fn start(cfg: &PathConfig) -> Self {
        Self {
            last_return: cfg.sigma * normal(cfg.seed, STREAM_START, 0),
            up: uniform(cfg.seed, STREAM_REGIME, 0) < 0.5,
        }
    }

    /// Bar `t`'s drift (the part of its return known at the open) and the std of the rest.
    fn drift_and_noise(&mut self, cfg: &PathConfig, t: u64) -> (f64, f64) {
        match cfg.kind {
            PathKind::RandomWalk => (0.0, cfg.sigma),
            PathKind::Trend { drift } => (drift, cfg.sigma),
            PathKind::Autocorrelated { phi } => (phi * self.last_return, cfg.sigma * (1.0 - phi * phi).sqrt()),
            PathKind::RegimeSwitch { drift, switch_probability } => {
                // Counter 0 of the stream drew the first regime; bar t's switch uses counter t + 1.
                if uniform(cfg.seed, STREAM_REGIME, t + 1) < switch_probability {
                    self.up = !self.up;
                }
                (if self.up { drift } else { -drift }, cfg.sigma)
            }
        }
    }
}

/// One bar's log path from the log open: `sub_steps` steps of `drift / m` plus N(0, noise^2 / m) each, so
/// the bar's return is `drift` plus an N(0, noise^2) draw. Returns the log (high, low, close).
fn bar_path(cfg: &PathConfig, t: u64, open: f64, drift: f64, noise: f64) -> (f64, f64, f64) {
    let m = cfg.sub_steps as u64;
    let (step_drift, step_std) = (drift / m as f64, noise / (m as f64).sqrt());
    let (mut x, mut high, mut low) = (open, open, open);
    for j in 0..m {
        x += step_drift + step_std * normal(cfg.seed, STREAM_SUB_STEP, t * m + j);
        high = high.max(x);
        low = low.min(x);
    }
    (high, low, x)
}

/// Generates the bars of `cfg` (checked first: an error names the field). Prices are rounded to 6 decimal
/// places; rounding keeps order, so low <= open, close <= high holds after it. Volumes are seeded whole
/// numbers around 1,000, drawn apart from the prices.
pub fn generate_path(cfg: &PathConfig) -> Result<Dataset, Error> {
    Ok(generate_path_with_drifts(cfg)?.0)
}

/// [`generate_path`] and the part of each bar's log return known when it opens (the planted signal: `phi`
/// times the last bar's return, or the regime's drift; 0 for a random walk), what an oracle trades on.
pub fn generate_path_with_drifts(cfg: &PathConfig) -> Result<(Dataset, Vec<f64>), Error> {
    cfg.validate()?;
    let mut drifts = Vec::with_capacity(cfg.bars);
    let start: DateTime<FixedOffset> = DateTime::from_timestamp(1_577_836_800, 0).expect("2020-01-01").fixed_offset();
    let mut state = SignalState::start(cfg);
    let mut close = 100.0_f64.ln();
    let mut bars = Vec::with_capacity(cfg.bars);
    for t in 0..cfg.bars as u64 {
        let open = close + cfg.gap_sigma * normal(cfg.seed, STREAM_GAP, t);
        let (drift, noise) = state.drift_and_noise(cfg, t);
        drifts.push(drift);
        let (high, low, new_close) = bar_path(cfg, t, open, drift, noise);
        state.last_return = new_close - open;
        close = new_close;
        let volume = (1_000.0 * (0.3 * normal(cfg.seed, STREAM_VOLUME, t)).exp()).round().max(1.0) as i64;
        bars.push(MarketBar {
            time: start + Duration::hours(t as i64),
            open: price(open.exp()),
            high: price(high.exp()),
            low: price(low.exp()),
            close: price(close.exp()),
            volume: Decimal::from(volume),
        });
    }
    let dataset =
        Dataset { source: cfg.source(), synthetic: true, series: vec![Series { symbol: "SYN".to_owned(), bars }] };
    Ok((dataset, drifts))
}

/// Writes the bars as CSV, `time,symbol,open,high,low,close,volume` (RFC 3339 times, the Decimals as they
/// print), the layout [`crate::data::load_file`] reads back to the same bars.
pub fn write_csv(dataset: &Dataset, out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(out, "time,symbol,open,high,low,close,volume")?;
    for series in &dataset.series {
        for b in &series.bars {
            let time = b.time.to_rfc3339();
            writeln!(out, "{time},{},{},{},{},{},{}", series.symbol, b.open, b.high, b.low, b.close, b.volume)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_traits::ToPrimitive;

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

    /// The drifts an oracle trades on are the planted signal: `phi` times the last bar's open-to-close log
    /// return (from the rounded prices, so to rounding), or plus or minus the regime's drift; and the bars
    /// are `generate_path`'s.
    #[test]
    fn drifts_are_the_planted_signal() {
        let phi = DEFAULT_PHI;
        let cfg = PathConfig { kind: PathKind::Autocorrelated { phi }, bars: 500, seed: 5, ..PathConfig::default() };
        let (data, drifts) = generate_path_with_drifts(&cfg).unwrap();
        assert_eq!(data, generate_path(&cfg).unwrap());
        assert_eq!(drifts.len(), 500);
        let ln = |d: Decimal| d.to_f64().unwrap().ln();
        for (t, w) in data.series[0].bars.windows(2).enumerate() {
            let last = ln(w[0].close) - ln(w[0].open);
            assert!((drifts[t + 1] - phi * last).abs() < 1e-7, "bar {}: {} vs {}", t + 1, drifts[t + 1], phi * last);
        }
        let regime = PathKind::RegimeSwitch { drift: DEFAULT_REGIME_DRIFT, switch_probability: 0.05 };
        let (_, drifts) = generate_path_with_drifts(&PathConfig { kind: regime, ..cfg }).unwrap();
        assert!(drifts.iter().all(|d| (d.abs() - DEFAULT_REGIME_DRIFT).abs() < 1e-15));
        assert!(drifts.iter().any(|&d| d > 0.0) && drifts.iter().any(|&d| d < 0.0), "both regimes occur");
    }

    /// A trend's drift is every bar's planted drift, and its bars' mean log return is the drift within
    /// four standard errors (sigma / sqrt(bars)).
    #[test]
    fn a_trend_drifts_by_its_drift() {
        let (drift, bars) = (1.5e-4, 40_000);
        let cfg = PathConfig { kind: PathKind::Trend { drift }, bars, seed: 9, ..PathConfig::default() };
        let (data, drifts) = generate_path_with_drifts(&cfg).unwrap();
        assert!(drifts.iter().all(|&d| d == drift));
        let b = &data.series[0].bars;
        let ln = |d: Decimal| d.to_f64().unwrap().ln();
        let mean = (ln(b[bars - 1].close) - ln(b[0].open)) / bars as f64;
        assert!((mean - drift).abs() < 4.0 * cfg.sigma / (bars as f64).sqrt(), "mean {mean} vs drift {drift}");
        assert!(cfg.source().contains("kind=trend") && cfg.source().contains("drift=0.00015"), "{}", cfg.source());
    }

    /// [`generate`] (draws in parallel, one pass for what carries from bar to bar) gives the bars of the
    /// sequential loop it replaced, bit for bit, for every symbol.
    #[test]
    fn generate_is_the_sequential_loop() {
        let cfg = GeneratorConfig { bars: 5_000, symbols: 3, seed: 17, bar_seconds: 60 };
        let start: DateTime<FixedOffset> =
            DateTime::from_timestamp(1_577_836_800, 0).expect("2020-01-01").fixed_offset();
        let market: Vec<f64> = (0..cfg.bars as u64).map(|t| normal(cfg.seed, 100, t)).collect();
        let got = generate(&cfg);
        assert_eq!(got.series.len(), 3);
        for (k, series) in got.series.iter().enumerate() {
            let k = k as u64;
            let seed = cfg.seed ^ (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let anchor = 100.0 * (1.0 + k as f64 * 0.25);
            let (mut regime, mut var, mut close) = (0usize, OMEGA / (1.0 - ALPHA - BETA), anchor);
            assert_eq!(series.bars.len(), cfg.bars);
            let walk = walk_symbol(symbol_seed(cfg.seed, k), symbol_anchor(k), &market);
            for (t, bar) in series.bars.iter().enumerate() {
                let t = t as u64;
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
                let w = walk[t as usize];
                let floats = [(w.open, open), (w.close, new_close), (w.sigma, sigma), (w.r, r)];
                assert!(floats.iter().all(|(a, b)| a.to_bits() == b.to_bits()), "symbol {k}, bar {t}: {floats:?}");
                let (o, c) = (price(open), price(new_close));
                let want = MarketBar {
                    time: start + Duration::seconds(cfg.bar_seconds * t as i64),
                    open: o,
                    high: price(high).max(o).max(c),
                    low: price(low).min(o).min(c),
                    close: c,
                    volume: Decimal::from_f64(volume.round()).unwrap_or(Decimal::ONE),
                };
                assert_eq!(bar, &want, "symbol {k}, bar {t}");
                close = new_close;
            }
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
