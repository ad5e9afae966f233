//! The search on a universe (issue 55, item 4): universe learners searched through the study, judged on the
//! account's returns. A planted cross-sectional pattern (tomorrow's best symbol is today's worst,
//! `cross_section_universe`) is found with evidence, placebo searches included; independent random walks
//! are not; the command line runs a search on the shared five-stock file end to end (study, verdict,
//! report, ledger with a symbol column, Decimal audit); the same seed gives the same study.

mod common;
#[path = "common/shared_data.rs"]
mod shared_data;

use std::path::{Path, PathBuf};

use tradesim::Backend;
use tradesim::data::synthetic::cross_section_universe;
use tradesim::data::universe::Universe;
use tradesim::job::universe::UniverseDone;
use tradesim::job::{Job, JobArgs};

/// Symbols and days of the generated universes; the planted move of yesterday's worst symbol.
const N: usize = 6;
const DAYS: usize = 1_200;
const EDGE: f64 = 0.015;

/// A study's configuration: `trials` DQN trials of 8 accounts (48 rows) over 3 epochs of 500 steps.
fn config(trials: usize, placebo: usize) -> String {
    config_for("dqn", trials, placebo)
}

/// [`config`] for `algo`.
fn config_for(algo: &str, trials: usize, placebo: usize) -> String {
    format!(
        "[study]\nalgo = \"{algo}\"\ntrials = {trials}\nparallel = {trials}\nepochs = 3\nenvs = {}\nsegment_len = 500\n\
         placebo = {placebo}\n",
        8 * N
    )
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tradesim-universe-search-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The search of `config` on `u` with seed `seed`, its study in `dir`.
fn search(u: &Universe, config: String, seed: u64, dir: &Path) -> UniverseDone {
    search_on(&Backend::Cpu, u, config, seed, dir)
}

/// [`search`] on `backend` (the study's budget as written in `config`, the same on either backend).
fn search_on(backend: &Backend, u: &Universe, config: String, seed: u64, dir: &Path) -> UniverseDone {
    let args = JobArgs {
        config_text: Some(("test".to_owned(), config)),
        study: Some(dir.join("study.sqlite")),
        seed: Some(seed),
        ..JobArgs::default()
    };
    let job = Job::prepare(&args).unwrap();
    job.run_universe(backend, u, &|_| Ok(())).unwrap()
}

fn universe(seed: u64, edge: f64) -> Universe {
    Universe::new(cross_section_universe(N, DAYS, seed, edge), None).unwrap()
}

#[test]
#[cfg_attr(debug_assertions, ignore = "runs 20 searches: scripts/test.sh runs it with --release")]
fn a_planted_cross_sectional_pattern_is_evidence() {
    planted_is_evidence("dqn");
}

#[test]
#[cfg_attr(debug_assertions, ignore = "runs 20 searches: scripts/test.sh runs it with --release")]
fn ppo_finds_the_planted_pattern_with_evidence_too() {
    planted_is_evidence("ppo");
}

/// A 2-trial search of `algo` with 19 placebo searches on the planted universe gives `evidence`.
fn planted_is_evidence(algo: &str) {
    let dir = temp(&format!("planted-{algo}"));
    let done = search(&universe(3, EDGE), config_for(algo, 2, 19), 1, &dir);
    eprintln!("{}", done.evidence.verdict.line);
    assert!(done.evidence.verdict.evidence, "{}", done.evidence.verdict.line);
    let p = done.evidence.placebo.as_ref().unwrap();
    assert_eq!(p.searches.len(), 19);
    // The best trial beats the universe's equal-weight buy-and-hold on the test times.
    let b = done.evidence.baselines.as_ref().unwrap();
    assert!(b.best_test_sharpe > b.buy_and_hold_test_sharpe, "{b:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[cfg_attr(debug_assertions, ignore = "runs 20 searches: scripts/test.sh runs it with --release")]
fn independent_random_walks_are_not_evidence() {
    let dir = temp("walks");
    let done = search(&universe(3, 0.0), config(2, 19), 1, &dir);
    eprintln!("{}", done.evidence.verdict.line);
    assert!(!done.evidence.verdict.evidence, "{}", done.evidence.verdict.line);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The same seed gives the same trials, values and test results.
#[test]
fn the_same_seed_gives_the_same_study() {
    let u = universe(5, EDGE);
    let runs: Vec<Vec<(u64, String, u64, u64)>> = (0..2)
        .map(|i| {
            let dir = temp(&format!("seed-{i}"));
            let done = search(&u, config(3, 0).replace("segment_len = 500", "segment_len = 100"), 7, &dir);
            std::fs::remove_dir_all(dir).unwrap();
            done.leaderboard
                .iter()
                .map(|t| (t.number, t.status.clone(), t.value.to_bits(), t.test_return.to_bits()))
                .collect()
        })
        .collect();
    assert_eq!(runs[0].len(), 3);
    assert_eq!(runs[0], runs[1]);
}

/// A study's trials (number, status, value and test return bits) and the best trial's test-walk equity bits.
type StudyBits = (Vec<(u64, String, u64, u64)>, Vec<u64>);

/// The search on the GPU (trials trained there, the portfolio backtest of the outputs on the CPU) stores the
/// CPU's study bit for bit: values, statuses, test returns and the best trial's test-walk equity.
#[test]
fn the_search_on_the_gpu_stores_the_cpus_study() {
    let Some(gpu) = common::gpu_backend() else { return };
    let u = universe(5, EDGE);
    let config = || config_for("ppo", 2, 0).replace("segment_len = 500", "segment_len = 100");
    let runs: Vec<StudyBits> = [Backend::Cpu, gpu]
        .iter()
        .enumerate()
        .map(|(i, backend)| {
            let dir = temp(&format!("gpu-{i}"));
            let done = search_on(backend, &u, config(), 7, &dir);
            std::fs::remove_dir_all(dir).unwrap();
            let board = done
                .leaderboard
                .iter()
                .map(|t| (t.number, t.status.clone(), t.value.to_bits(), t.test_return.to_bits()))
                .collect();
            let equity = done.outputs.iter().map(|o| o.walk_final_equity.to_bits()).collect();
            (board, equity)
        })
        .collect();
    assert_eq!(runs[0].0.len(), 2);
    assert_eq!(runs[0], runs[1], "CPU vs GPU");
}

/// `tradesim hyperopt --data FILE` of five stocks: a universe search with a study, a verdict, a report, a
/// fills ledger with a symbol column and the Decimal audit line.
#[test]
fn the_command_line_searches_a_universe_end_to_end() {
    let Some(shared) = shared_data::shared_data() else { return };
    let dir = temp("cli");
    let study = dir.join("study.sqlite");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradesim"))
        .args(["hyperopt", "--data"])
        .arg(shared.join("stocks-daily-5-tickers.csv"))
        .args(["--trials", "2", "--parallel", "2", "--epochs", "1", "--segment-len", "64", "--seed", "4"])
        .arg("--study")
        .arg(&study)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("on a universe") && text.contains("5 symbols"), "{text}");
    assert!(text.contains("verdict:  "), "{text}");
    assert!(text.contains("Decimal audit: "), "{text}");
    let report = dir.join("study-tradesim").join("report");
    assert!(report.join("index.html").is_file());
    let ledger = std::fs::read_to_string(report.join("trades.csv")).unwrap();
    let header = ledger.lines().next().unwrap();
    assert!(header.split(',').any(|c| c == "symbol"), "{header}");
    assert!(ledger.lines().count() > 1, "no fills");
    assert!(study.is_file());
    walk_and_backtest_agree(&std::fs::read_to_string(report.join("equity.csv")).unwrap());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The best trial's test walk run as target weights through the portfolio backtest is the walk: the same
/// equity at every time to rounding, but the last, where the backtest closes everything (its costs).
fn walk_and_backtest_agree(csv: &str) {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let walk = header.iter().position(|c| c.ends_with(" walk")).expect("a walk column");
    let backtest = header.iter().position(|&c| format!("{c} walk") == header[walk]).expect("its backtest column");
    let rows: Vec<Vec<f64>> =
        lines.map(|l| l.split(',').skip(1).map(|x| x.parse().unwrap_or(f64::NAN)).collect()).collect();
    let (walk, backtest) = (walk - 1, backtest - 1);
    for r in &rows[..rows.len() - 1] {
        assert!((r[walk] / r[backtest] - 1.0).abs() < 1e-9, "walk {} vs backtest {}", r[walk], r[backtest]);
    }
    let last = rows.last().unwrap();
    assert!(last[backtest] <= last[walk], "the end-of-data close costs: {last:?}");
}
