//! Synthetic bars with Brownian intrabar paths (`data::synthetic::generate_path`), the placebo surrogate
//! (`data::surrogate::placebo`) and `tradesim data synth` (issue 41): seeded, OHLC-consistent, the planted
//! signal present where planted and absent where not, and the surrogate keeping every |return| while
//! removing the direction.

use std::process::Command;
use std::str::FromStr;

use chrono::{DateTime, Duration};
use num_traits::ToPrimitive;
use rust_decimal::Decimal;
use tradesim::Error;
use tradesim::data::surrogate::{mirrored, placebo, placebo_universe};
use tradesim::data::synthetic::{PathConfig, PathKind, generate_path};
use tradesim::data::universe::Universe;
use tradesim::data::{CleanPolicy, Dataset, MarketBar, Series, load_file};

fn bars(kind: PathKind, n: usize, seed: u64) -> Series {
    let cfg = PathConfig { kind, bars: n, seed, ..PathConfig::default() };
    generate_path(&cfg).expect("a valid configuration").series.remove(0)
}

const AR: PathKind = PathKind::Autocorrelated { phi: 0.4 };
const REGIME: PathKind = PathKind::RegimeSwitch { drift: 0.000_5, switch_probability: 0.01 };

fn f(d: Decimal) -> f64 {
    d.to_f64().expect("a price within f64")
}

/// Close-to-close log returns.
fn returns(s: &Series) -> Vec<f64> {
    s.bars.windows(2).map(|w| (f(w[1].close) / f(w[0].close)).ln()).collect()
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Pearson correlation of x[t] with x[t + 1].
fn lag1(x: &[f64]) -> f64 {
    let m = mean(x);
    let cov: f64 = x.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    cov / x.iter().map(|v| (v - m).powi(2)).sum::<f64>()
}

fn assert_consistent(s: &Series) {
    for (t, b) in s.bars.iter().enumerate() {
        assert!(b.low > Decimal::ZERO, "bar {t}: {b:?}");
        assert!(b.low <= b.open.min(b.close) && b.open.max(b.close) <= b.high, "bar {t}: {b:?}");
    }
}

fn bar(o: &str, h: &str, l: &str, c: &str, hour: i64) -> MarketBar {
    let d = |s: &str| Decimal::from_str(s).expect("a decimal");
    let time = DateTime::from_timestamp(1_577_836_800, 0).expect("2020").fixed_offset() + Duration::hours(hour);
    MarketBar { time, open: d(o), high: d(h), low: d(l), close: d(c), volume: Decimal::from(10) }
}

#[test]
fn generator_is_seeded_hourly_and_labelled() {
    for kind in [PathKind::RandomWalk, AR, REGIME] {
        let cfg = PathConfig { kind, bars: 2_000, seed: 5, ..PathConfig::default() };
        let a = generate_path(&cfg).expect("valid");
        assert_eq!(a, generate_path(&cfg).expect("valid"), "{kind:?}");
        assert_ne!(a.series, generate_path(&PathConfig { seed: 6, ..cfg }).expect("valid").series, "{kind:?}");
        assert!(a.synthetic);
        assert!(a.source.starts_with(&format!("synthetic:kind={},seed=5,bars=2000,sub_steps=12", kind.name())));
        let s = &a.series[0];
        assert_eq!((s.symbol.as_str(), s.bars.len()), ("SYN", 2_000));
        assert_eq!(s.bars[0].time.to_rfc3339(), "2020-01-01T00:00:00+00:00");
        assert_eq!(s.bars[0].open, Decimal::from(100));
        for w in s.bars.windows(2) {
            assert_eq!(w[1].time - w[0].time, Duration::hours(1));
            // No gap by default: each bar opens at the previous close.
            assert_eq!(w[1].open, w[0].close);
        }
        assert_consistent(s);
    }
    assert!(
        generate_path(&PathConfig { kind: AR, ..PathConfig::default() }).expect("valid").source.ends_with("phi=0.4")
    );
}

#[test]
fn wicks_come_from_the_sub_steps() {
    // One sub-step: the path is open -> close, so high and low are the body's ends.
    let one = generate_path(&PathConfig { sub_steps: 1, bars: 1_000, ..PathConfig::default() }).expect("valid");
    for b in &one.series[0].bars {
        assert_eq!((b.high, b.low), (b.open.max(b.close), b.open.min(b.close)));
    }
    // Twelve: a 12-step walk peaks strictly inside in about 2/3 of the bars (1 - 2/sqrt(12 pi)).
    let twelve = bars(PathKind::RandomWalk, 4_000, 1);
    let wicked = twelve.bars.iter().filter(|b| b.high > b.open.max(b.close)).count();
    assert!((2_200..3_200).contains(&wicked), "{wicked} of 4000 bars with an upper wick");
    // A gap parameter moves the open away from the previous close.
    let gapped = generate_path(&PathConfig { gap_sigma: 0.000_5, bars: 100, ..PathConfig::default() }).expect("valid");
    assert!(gapped.series[0].bars.windows(2).all(|w| w[1].open != w[0].close));
    assert_consistent(&gapped.series[0]);
}

#[test]
fn random_walk_carries_no_edge() {
    let r = returns(&bars(PathKind::RandomWalk, 40_000, 11));
    let m = mean(&r);
    let se = (r.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (r.len() - 1) as f64 / r.len() as f64).sqrt();
    assert!(m.abs() < 3.0 * se, "mean return {m}, standard error {se}");
    // The per-bar std is sigma = 0.002.
    assert!((se * (r.len() as f64).sqrt() - 0.002).abs() < 0.000_05, "std {}", se * (r.len() as f64).sqrt());
    assert!(lag1(&r).abs() < 0.03, "lag-1 autocorrelation {}", lag1(&r));
}

#[test]
fn planted_signals_are_there() {
    let rho = lag1(&returns(&bars(AR, 40_000, 3)));
    assert!((rho - 0.4).abs() < 0.03, "AR(1) phi 0.4 gave lag-1 autocorrelation {rho}");
    // Regimes: the sign of the last 24 bars' return predicts the next bar's. Expected gain per bar about
    // drift * (2 * 0.89 - 1) = 3.9e-4 less the bars after a switch; its standard error is 0.002 / sqrt(40000).
    let r = returns(&bars(REGIME, 40_000, 3));
    let gains: Vec<f64> = (24..r.len()).map(|t| r[t - 24..t].iter().sum::<f64>().signum() * r[t]).collect();
    let se = 0.002 / (gains.len() as f64).sqrt();
    assert!(mean(&gains) > 20.0 * se, "trend-following gain {} per bar, standard error {se}", mean(&gains));
}

#[test]
fn bad_parameters_name_the_field() {
    let key = |cfg: PathConfig| match generate_path(&cfg) {
        Err(Error::Config { key, .. }) => key,
        other => panic!("{cfg:?} gave {other:?}"),
    };
    let base = PathConfig::default();
    assert_eq!(key(PathConfig { bars: 0, ..base }), "bars");
    assert_eq!(key(PathConfig { sub_steps: 0, ..base }), "sub_steps");
    assert_eq!(key(PathConfig { sigma: -0.1, ..base }), "sigma");
    assert_eq!(key(PathConfig { sigma: f64::NAN, ..base }), "sigma");
    assert_eq!(key(PathConfig { gap_sigma: -1.0, ..base }), "gap_sigma");
    assert_eq!(key(PathConfig { kind: PathKind::Autocorrelated { phi: 1.0 }, ..base }), "phi");
    let regime = |drift, switch_probability| PathKind::RegimeSwitch { drift, switch_probability };
    assert_eq!(key(PathConfig { kind: regime(0.0, 0.01), ..base }), "drift");
    assert_eq!(key(PathConfig { kind: regime(0.001, 1.5), ..base }), "switch_probability");
}

fn tradesim() -> Command {
    Command::new(std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned()))
}

#[test]
fn synth_command_writes_what_the_loader_reads_back() {
    let dir = std::env::temp_dir().join(format!("tradesim-synth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("ar.csv");
    let status = tradesim()
        .args(["data", "synth", "--kind", "autocorrelated", "--bars", "3000", "--phi", "0.3", "--seed", "9"])
        .args(["--sub-steps", "6", "--sigma", "0.001", "--out"])
        .arg(&out)
        .status()
        .expect("run tradesim");
    assert!(status.success());
    let cfg = PathConfig {
        kind: PathKind::Autocorrelated { phi: 0.3 },
        bars: 3_000,
        sub_steps: 6,
        sigma: 0.001,
        gap_sigma: 0.0,
        seed: 9,
    };
    let expected = generate_path(&cfg).expect("valid");
    let (loaded, report) = load_file(&out, &CleanPolicy::default()).expect("the written file loads");
    assert!(report.usable && report.findings.is_empty(), "{report}");
    assert_eq!(loaded.series, expected.series);
    assert!(tradesim().args(["data", "check"]).arg(&out).status().expect("run tradesim").success());

    // A parameter of another kind and an out-of-range value are refused, naming the flag (exit code 2).
    for (args, flag) in [
        (&["--kind", "random-walk", "--phi", "0.2"][..], "--phi"),
        (&["--kind", "autocorrelated", "--drift", "0.001"][..], "--drift"),
        (&["--kind", "random-walk", "--drift", "2"][..], "--drift"),
        (&["--kind", "regime", "--sub-steps", "0"][..], "--sub-steps"),
        (&["--kind", "regime", "--switch-probability", "2"][..], "--switch-probability"),
    ] {
        let run =
            tradesim().args(["data", "synth", "--bars", "10", "--out"]).arg(&out).args(args).output().expect("run");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("error: {flag}:")), "{stderr}");
    }
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}

#[test]
fn placebo_mirrors_a_bar_by_hand() {
    // Bar 1 gaps up from 100.00 to 100.50. Mirrored: open' = 100.00 * 100.00 / 100.50 = 99.50 (2 places),
    // high' = 99.50 * 100.50 / 99.00 = 101.01, low' = 99.50 * 100.50 / 102.00 = 98.04, close' = 99.50 *
    // 100.50 / 101.00 = 99.01. Kept: the bar as it was.
    let series = Series {
        symbol: "X".to_owned(),
        bars: vec![bar("100.00", "101.00", "99.00", "100.00", 0), bar("100.50", "102.00", "99.00", "101.00", 1)],
    };
    let flipped = bar("99.50", "101.01", "98.04", "99.01", 1);
    let mut seen = [false; 2];
    for index in 0..32 {
        let s = placebo(&series, 4, index).expect("positive prices");
        assert_eq!(s.bars[0], series.bars[0], "the first bar keeps its prices");
        let want = if mirrored(4, index, 1) { &flipped } else { &series.bars[1] };
        assert_eq!(&s.bars[1], want, "index {index}");
        seen[usize::from(mirrored(4, index, 1))] = true;
    }
    assert_eq!(seen, [true, true], "both outcomes among 32 surrogates");
}

#[test]
fn placebo_keeps_every_absolute_return() {
    let series = bars(AR, 40_000, 8);
    let s = placebo(&series, 21, 0).expect("positive prices");
    assert_eq!(s, placebo(&series, 21, 0).expect("positive prices"), "seeded");
    assert_ne!(s, placebo(&series, 21, 1).expect("positive prices"), "another index");
    assert_ne!(s, placebo(&series, 22, 0).expect("positive prices"), "another seed");
    assert_consistent(&s);
    let (r, r2) = (returns(&series), returns(&s));
    // Two roundings to 6 places (the open, then the close) bound the error of each log return.
    let tolerance: Vec<f64> =
        s.bars[1..].iter().map(|b| 0.5e-6 * (1.0 / f(b.open) + 1.0 / f(b.close)) + 1e-12).collect();
    for t in 0..r.len() {
        assert!((r[t].abs() - r2[t].abs()).abs() <= tolerance[t], "bar {}: {} vs {}", t + 1, r[t], r2[t]);
        let range = |b: &MarketBar| (f(b.high) / f(b.low)).ln();
        assert!((range(&series.bars[t + 1]) - range(&s.bars[t + 1])).abs() <= 2.0 * tolerance[t], "bar {}", t + 1);
        assert_eq!(s.bars[t + 1].volume, series.bars[t + 1].volume);
        assert_eq!(s.bars[t + 1].time, series.bars[t + 1].time);
    }
    let abs_mean = |x: &[f64]| mean(&x.iter().map(|v| v.abs()).collect::<Vec<_>>());
    assert!((abs_mean(&r) - abs_mean(&r2)).abs() <= mean(&tolerance), "{} vs {}", abs_mean(&r), abs_mean(&r2));
}

#[test]
fn placebo_removes_autocorrelation() {
    let series = bars(AR, 40_000, 8);
    let rho = lag1(&returns(&series));
    assert!((rho - 0.4).abs() < 0.03, "input lag-1 autocorrelation {rho}");
    for index in 0..3 {
        let rho = lag1(&returns(&placebo(&series, 21, index).expect("positive prices")));
        assert!(rho.abs() < 0.05, "surrogate {index}: lag-1 autocorrelation {rho}");
    }
}

#[test]
fn placebo_of_the_embedded_data_keeps_its_tick() {
    let dataset = tradesim::data::embedded().expect("the embedded data loads");
    let series = &dataset.series[0];
    let scale = series.bars.iter().map(|b| b.close.scale()).max();
    let s = placebo(series, 1, 0).expect("positive prices");
    assert_consistent(&s);
    assert!(s.bars.iter().all(|b| [b.open, b.high, b.low, b.close].iter().all(|p| Some(p.scale()) <= scale)));
    assert_eq!(s.bars.len(), series.bars.len());
}

#[test]
fn placebo_refuses_what_it_cannot_price() {
    let mut series = Series {
        symbol: "X".to_owned(),
        bars: vec![bar("1.00", "1.00", "1.00", "1.00", 0), bar("1.00", "2.00", "0", "1.50", 1)],
    };
    let err = placebo(&series, 1, 0).expect_err("a zero low").to_string();
    assert!(err.contains("bar 1 (2020-01-01T01:00:00+00:00)") && err.contains("low = 0"), "{err}");
    series.bars[1] = bar("1.00", "1.40", "0.90", "1.50", 1);
    let err = placebo(&series, 1, 0).expect_err("a close above the high").to_string();
    assert!(err.contains("bar 1") && err.contains("not within [low, high]"), "{err}");
    // A hundredfold rise from 0.01: mirrored, the low is 0.01 * 0.01 / 1.00 = 0.0001, zero at 2 places.
    series.bars = vec![bar("0.01", "0.01", "0.01", "0.01", 0), bar("0.01", "1.00", "0.01", "1.00", 1)];
    for index in 0..8 {
        match placebo(&series, 1, index) {
            Ok(s) => assert!(!mirrored(1, index, 1) && s == series, "index {index}"),
            Err(e) => {
                assert!(mirrored(1, index, 1), "index {index}: {e}");
                assert!(e.to_string().contains("bar 1") && e.to_string().contains("low rounds to 0"), "{e}");
            }
        }
    }
}

/// A universe of `n` seeded random walks, symbol `k` named `S{k}`, with symbol 0's bars at the odd hours
/// removed when `gaps` (it then has no bar at half the calendar's times).
fn universe(n: usize, bars: usize, gaps: bool) -> Universe {
    let mut series: Vec<Series> = (0..n)
        .map(|k| {
            let cfg = PathConfig { kind: PathKind::RandomWalk, bars, seed: 40 + k as u64, ..PathConfig::default() };
            let mut s = generate_path(&cfg).expect("a valid configuration").series.remove(0);
            s.symbol = format!("S{k}");
            s
        })
        .collect();
    if gaps {
        let kept: Vec<MarketBar> = series[0].bars.iter().step_by(2).cloned().collect();
        series[0].bars = kept;
    }
    Universe::new(Dataset { source: "test".to_owned(), synthetic: true, series }, None).expect("a universe")
}

/// Whether a surrogate's log move `b` keeps the original's `a` (rather than reversing it), judged by which
/// is nearer: rounding to the tick moves either by far less than the move itself.
fn kept(a: f64, b: f64) -> bool {
    (a - b).abs() < (a + b).abs()
}

#[test]
fn universe_placebo_uses_one_coin_per_calendar_time_for_every_symbol() {
    let u = universe(3, 300, false);
    let p = placebo_universe(&u, 9, 2).expect("positive prices");
    assert_eq!(p.symbols(), u.symbols());
    assert_eq!(p.times, u.times, "the calendar is kept");
    assert!(p.source.contains("placebo 2 of test"), "{}", p.source);
    // On a full calendar a symbol's bar index is its time's index: each series is the single-series surrogate.
    for (k, one) in u.series.iter().enumerate() {
        assert_eq!(p.series[k], placebo(one, 9, 2).expect("positive prices"), "symbol {k}");
    }
    // The shared coin: at every time all symbols' bar moves (close over open) are kept or all reversed.
    let mut mirrored_times = 0;
    for t in 1..u.n_times() {
        let coin = mirrored(9, 2, t as u64);
        mirrored_times += usize::from(coin);
        for k in 0..3 {
            let (a, b) = (&u.series[k].bars[t], &p.series[k].bars[t]);
            let (la, lb) = ((f(a.close) / f(a.open)).ln(), (f(b.close) / f(b.open)).ln());
            if la.abs() > 1e-3 {
                assert_eq!(kept(la, lb), !coin, "time {t}, symbol {k}: {la} -> {lb}");
            }
        }
    }
    assert!((100..200).contains(&mirrored_times), "{mirrored_times} of 299 times mirrored");
    assert_ne!(p, placebo_universe(&u, 9, 3).expect("positive prices"), "another index");
}

#[test]
fn universe_placebo_takes_the_coin_of_each_bars_time_across_gaps() {
    let u = universe(2, 200, true);
    let p = placebo_universe(&u, 5, 1).expect("positive prices");
    assert_eq!(p.series[0].bars.len(), 100, "symbol 0 keeps its own bars, no more");
    assert_eq!(p.series[1].bars.len(), 200);
    // Symbol 0's bar i sits at calendar time 2i: its coin is that time's, not its own index's.
    let (a, b) = (&u.series[0].bars, &p.series[0].bars);
    let mut checked = 0;
    for i in 1..a.len() {
        let (la, lb) = ((f(a[i].close) / f(a[i].open)).ln(), (f(b[i].close) / f(b[i].open)).ln());
        if la.abs() > 1e-3 {
            assert_eq!(kept(la, lb), !mirrored(5, 1, 2 * i as u64), "bar {i}: {la} -> {lb}");
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked} bars checked");
    assert_consistent(&p.series[0]);
    assert_consistent(&p.series[1]);
}
