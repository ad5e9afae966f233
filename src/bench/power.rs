//! W10 (`tradesim bench power`): the verdict's size and power measured, not asserted. Seeded families of
//! bars from the synthetic generator (12 Brownian sub-steps a bar): signal-free random walks, drift-only
//! trends (a random walk whose log prices rise by a constant drift a bar), AR(1) returns at phi 0.05, 0.10,
//! 0.15 and 0.30, and regime switches. Every run is the default search (the study defaults of the day;
//! `--algo` picks the learner) with 19 placebo searches and a 3-fold walk-forward on a fresh path. Per
//! family: the share of runs whose verdict says `evidence` with its 95% Wilson interval, under today's
//! gates and under the previous rule (issue 41's gates; both from the same runs), and the medians of the best
//! trial's, buy-and-hold's and the oracle's test Sharpe (after costs: the oracle holds the sign of each
//! bar's planted drift). On the random walks and trends every `evidence` is a false alarm (size); on the
//! others it is power. `--quick`: a few small searches on the CPU, a smoke test for CI.

use std::time::Instant;

use clap::Args;

use super::learning::{oracle, policy_sharpe};
use crate::data::Dataset;
use crate::data::synthetic::{
    DEFAULT_REGIME_DRIFT, DEFAULT_SWITCH_PROBABILITY, PathConfig, PathKind, generate_path_with_drifts,
};
use crate::hyperopt::config::Algo;
use crate::job::{Job, JobArgs};
use crate::{Action, Backend, Error};

/// The drift a bar of the trend family (log return): buy-and-hold's test Sharpe about 5.9 a year on hourly
/// bars of sigma 0.002 (issue 59's trending file).
pub const TREND_DRIFT: f64 = 1.5e-4;

/// The search of a `--quick` run.
const QUICK_SEARCH: &str = "the quick search (4 trials, 1 epoch, 16 envs x 32 steps)";

/// What `tradesim bench power` runs.
#[derive(Args, Clone, Debug, Default)]
pub struct PowerArgs {
    /// W10: the families, comma-separated, of random-walk, trend, ar05, ar10, ar15, ar30, regime (default:
    /// all; `--quick`: random-walk,trend,ar30).
    #[arg(long, value_delimiter = ',')]
    pub families: Vec<String>,
    /// W10: runs (seeds) of each null family (random-walk, trend): default 40, `--quick` 1.
    #[arg(long)]
    pub null_seeds: Option<usize>,
    /// W10: runs (seeds) of each signal family: default 16, `--quick` 1.
    #[arg(long)]
    pub signal_seeds: Option<usize>,
    /// W10: the first seed (data and search); run i uses seed first + i, so calls can split the seeds.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// W10: bars of each path: default 40,000, `--quick` 6,000.
    #[arg(long)]
    pub bars: Option<usize>,
    /// W10: the learner of the search (default: the search's default).
    #[arg(long)]
    pub algo: Option<Algo>,
    /// W10: run nothing; print the table of the runs in these JSON files (written by earlier calls' --json),
    /// comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "JSON")]
    pub merge: Vec<std::path::PathBuf>,
}

/// The runs of W10 JSON files (`--json` of earlier calls), in the order given.
pub fn read_runs(paths: &[std::path::PathBuf]) -> Result<Vec<Run>, Error> {
    let mut runs = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| Error::Data(format!("{}: {e}", path.display())))?;
        let more: Vec<Run> = serde_json::from_value(v["runs"].clone())
            .map_err(|e| Error::Data(format!("{}: runs: {e}", path.display())))?;
        runs.extend(more);
    }
    Ok(runs)
}

/// A family of paths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Family {
    /// Its name on the command line.
    pub name: &'static str,
    /// The generator's kind.
    pub kind: PathKind,
    /// Whether a run's `evidence` is a false alarm.
    pub null: bool,
}

/// Every family, in the table's order.
pub fn families() -> Vec<Family> {
    let ar = |name, phi| Family { name, kind: PathKind::Autocorrelated { phi }, null: false };
    vec![
        Family { name: "random-walk", kind: PathKind::RandomWalk, null: true },
        Family { name: "trend", kind: PathKind::Trend { drift: TREND_DRIFT }, null: true },
        ar("ar05", 0.05),
        ar("ar10", 0.10),
        ar("ar15", 0.15),
        ar("ar30", 0.30),
        Family {
            name: "regime",
            kind: PathKind::RegimeSwitch {
                drift: DEFAULT_REGIME_DRIFT,
                switch_probability: DEFAULT_SWITCH_PROBABILITY,
            },
            null: false,
        },
    ]
}

/// The bars of `family` at `seed` (`tradesim data synth` makes the same: the trend is `--kind random-walk
/// --drift 0.00015`), and each bar's planted drift (what the oracle knows).
pub fn path(family: &Family, bars: usize, seed: u64) -> Result<(Dataset, Vec<f64>), Error> {
    generate_path_with_drifts(&PathConfig { kind: family.kind, bars, seed, ..PathConfig::default() })
}

/// A number written as JSON (`null` for NaN, as serde_json writes it) read back.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// One run's outcome.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Run {
    /// The family.
    pub family: String,
    /// The data and search seed.
    pub seed: u64,
    /// Today's verdict.
    pub evidence: bool,
    /// The verdict of the previous rule (issue 41's gates).
    pub evidence_before: bool,
    /// The verdict's line.
    pub verdict: String,
    /// The best trial's test Sharpe (annualized; NaN when it never traded).
    #[serde(deserialize_with = "nan_if_null")]
    pub best_test_sharpe: f64,
    /// Buy-and-hold's.
    #[serde(deserialize_with = "nan_if_null")]
    pub buy_and_hold_test_sharpe: f64,
    /// The oracle's, after costs.
    #[serde(deserialize_with = "nan_if_null")]
    pub oracle_test_sharpe: f64,
    /// Seconds of the whole run (search, placebo searches, walk-forward, report).
    #[serde(deserialize_with = "nan_if_null")]
    pub seconds: f64,
}

/// One run: the default search with 19 placebo searches and a 3-fold walk-forward on `family` at `seed`.
fn run_one(
    family: &Family,
    seed: u64,
    bars: usize,
    args: &PowerArgs,
    quick: bool,
    backend: &Backend,
) -> Result<Run, Error> {
    let (dataset, drifts) = path(family, bars, seed)?;
    let dir = std::env::temp_dir().join(format!("tradesim-w10-{}-{}-{seed}", std::process::id(), family.name));
    let _ = std::fs::remove_dir_all(&dir);
    let job_args = JobArgs {
        config_text: quick
            .then(|| ("bench power --quick".to_owned(), "[study]\nenvs = 16\nsegment_len = 32\n".to_owned())),
        algo: args.algo,
        trials: quick.then_some(4),
        parallel: quick.then_some(4),
        epochs: quick.then_some(1),
        seed: Some(seed),
        // The default search is sized for the device it runs on (docs/CLI.md, "Budgets").
        gpu: backend.is_cuda(),
        placebo: Some(19),
        walk_forward: Some(3),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        ..JobArgs::default()
    };
    let started = Instant::now();
    let ran = (|| {
        let job = Job::prepare(&job_args)?;
        let done = job.run(std::slice::from_ref(backend), &dataset, None, &|_| Ok(()))?;
        let data =
            crate::train::SplitData::new(&dataset.series[0], crate::train::DEFAULT_SPLIT, job.cfg.env.sigma_span)?;
        let env = &job.cfg.env;
        let start = data.split.test.start;
        let oracle = policy_sharpe(env, &data, done.bars_per_year, |t| oracle(&drifts, start, env, t, 1))?;
        let hold = policy_sharpe(env, &data, done.bars_per_year, |_| Action::Long)?;
        Ok::<_, Error>((done, oracle, hold))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (done, oracle, hold) = ran?;
    let e = &done.evidence;
    Ok(Run {
        family: family.name.to_owned(),
        seed,
        evidence: e.verdict.evidence,
        evidence_before: e.verdict_before.evidence,
        verdict: e.verdict.line.clone(),
        best_test_sharpe: e.baselines.as_ref().map_or(f64::NAN, |b| b.best_test_sharpe),
        buy_and_hold_test_sharpe: hold,
        oracle_test_sharpe: oracle,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The 95% Wilson score interval of `x` successes in `n` trials.
pub fn wilson(x: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (z, n) = (1.959_963_984_540_054_f64, n as f64);
    let p = x as f64 / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The median of the finite values (NaN when none).
fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = xs.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 }
}

/// W10's table: a row per family.
pub fn table(runs: &[Run], backend: &str, quick: bool) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "| family | kind | runs | `evidence` now (95% Wilson) | before issue 53 (95% Wilson) | median best test \
         Sharpe | \
         buy-and-hold | oracle | s a run |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for f in families() {
        let rs: Vec<&Run> = runs.iter().filter(|r| r.family == f.name).collect();
        if rs.is_empty() {
            continue;
        }
        let n = rs.len();
        let share = |x: usize| {
            let (lo, hi) = wilson(x, n);
            format!("{x}/{n} = {:.0}% [{:.0}%, {:.0}%]", 100.0 * x as f64 / n as f64, 100.0 * lo, 100.0 * hi)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {n} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} |",
            f.name,
            if f.null { "size (null)" } else { "power" },
            share(rs.iter().filter(|r| r.evidence).count()),
            share(rs.iter().filter(|r| r.evidence_before).count()),
            median(rs.iter().map(|r| r.best_test_sharpe)),
            median(rs.iter().map(|r| r.buy_and_hold_test_sharpe)),
            median(rs.iter().map(|r| r.oracle_test_sharpe)),
            median(rs.iter().map(|r| r.seconds)),
        );
    }
    let search = if quick { QUICK_SEARCH } else { "the default search" };
    let _ = writeln!(out, "\nbackend: {backend}; every run: {search}, 19 placebo searches, 3 folds");
    out
}

/// W10 on `backend`: every run of the chosen families, each printed to stderr as it ends and handed to
/// `ended` with the runs so far (so a call cut short keeps what it measured); the runs.
pub fn power(
    args: &PowerArgs,
    quick: bool,
    backend: &Backend,
    mut ended: impl FnMut(&[Run]) -> Result<(), Error>,
) -> Result<Vec<Run>, Error> {
    let all = families();
    let names: Vec<String> = if !args.families.is_empty() {
        args.families.clone()
    } else if quick {
        vec!["random-walk".to_owned(), "trend".to_owned(), "ar30".to_owned()]
    } else {
        all.iter().map(|f| f.name.to_owned()).collect()
    };
    let bars = args.bars.unwrap_or(if quick { 6_000 } else { 40_000 });
    let mut runs = Vec::new();
    for name in &names {
        let f = all.iter().find(|f| f.name == name).ok_or_else(|| {
            let known: Vec<&str> = all.iter().map(|f| f.name).collect();
            Error::config("--families", format!("unknown family {name:?}; known: {}", known.join(", ")))
        })?;
        let seeds = if f.null {
            args.null_seeds.unwrap_or(if quick { 1 } else { 40 })
        } else {
            args.signal_seeds.unwrap_or(if quick { 1 } else { 16 })
        };
        for i in 0..seeds as u64 {
            let r = run_one(f, args.first_seed + i, bars, args, quick, backend)?;
            eprintln!(
                "W10 {} seed {}: {} (before: {}); best test Sharpe {:.2}, buy-and-hold {:.2}, oracle {:.2}; {:.1} s",
                r.family,
                r.seed,
                if r.evidence { "evidence" } else { "no evidence" },
                if r.evidence_before { "evidence" } else { "no evidence" },
                r.best_test_sharpe,
                r.buy_and_hold_test_sharpe,
                r.oracle_test_sharpe,
                r.seconds
            );
            runs.push(r);
            ended(&runs)?;
        }
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::prelude::ToPrimitive;

    #[test]
    fn wilson_intervals_match_the_textbook_values() {
        // 0 of 40: [0, 8.8%]; 8 of 16: [28.0%, 72.0%] (Wilson 1927; Newcombe 1998's table).
        let (lo, hi) = wilson(0, 40);
        assert!(lo == 0.0 && (hi - 0.0876).abs() < 5e-4, "{hi}");
        let (lo, hi) = wilson(8, 16);
        assert!((lo - 0.2800).abs() < 5e-4 && (hi - 0.7200).abs() < 5e-4, "{lo} {hi}");
    }

    #[test]
    fn the_trend_rises_by_its_drift_and_keeps_valid_bars() {
        let f = families().into_iter().find(|f| f.name == "trend").unwrap();
        let (d, drifts) = path(&f, 5_000, 3).unwrap();
        let (plain, _) = path(&families()[0], 5_000, 3).unwrap();
        let log = |b: &crate::data::MarketBar| b.close.to_f64().unwrap().ln();
        let (bars, flat) = (&d.series[0].bars, &plain.series[0].bars);
        let rise = (log(&bars[4_999]) - log(&bars[0])) - (log(&flat[4_999]) - log(&flat[0]));
        assert!((rise - TREND_DRIFT * 4_999.0).abs() < 1e-4, "{rise}");
        assert!(bars.iter().all(|b| b.low <= b.open && b.low <= b.close && b.high >= b.open && b.high >= b.close));
        assert!(drifts.iter().all(|&x| x == TREND_DRIFT));
    }

    #[test]
    fn runs_written_as_json_read_back_into_the_same_table() {
        let run = |family: &str, seed, evidence, best: f64| Run {
            family: family.to_owned(),
            seed,
            evidence,
            evidence_before: false,
            verdict: String::new(),
            best_test_sharpe: best,
            buy_and_hold_test_sharpe: 1.0,
            oracle_test_sharpe: f64::NAN,
            seconds: 2.0,
        };
        let runs = vec![run("ar30", 1, true, 3.0), run("ar30", 2, false, f64::NAN), run("random-walk", 1, false, -1.0)];
        let path = std::env::temp_dir().join(format!("tradesim-w10-json-{}.json", std::process::id()));
        std::fs::write(&path, serde_json::json!({ "runs": runs }).to_string()).unwrap();
        let back = read_runs(std::slice::from_ref(&path)).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(back[1].best_test_sharpe.is_nan() && back[0].oracle_test_sharpe.is_nan());
        assert_eq!(table(&back, "cpu", true), table(&runs, "cpu", true));
        assert!(table(&runs, "cpu", true).contains("| ar30 | power | 2 | 1/2 = 50% [9%, 91%] | 0/2 = 0%"));
    }

    #[test]
    fn medians_skip_undefined_sharpes() {
        assert_eq!(median([3.0, f64::NAN, 1.0, 2.0].into_iter()), 2.0);
        assert!(median([f64::NAN].into_iter()).is_nan());
    }
}
