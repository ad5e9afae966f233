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
    let out = std::process::Command::new(common::bin())
        .args(["hyperopt", "--data"])
        .arg(shared.join("stocks-daily-5-tickers.csv"))
        .args(["--trials", "2", "--parallel", "2", "--epochs", "1", "--segment-len", "64", "--seed", "4"])
        .arg("--profile-kernels")
        .arg("--study")
        .arg(&study)
        .output()
        .unwrap();
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}\n{err}");
    assert!(text.contains("on a universe") && text.contains("5 symbols"), "{text}");
    // Where the time went, and the kernel profile (on a GPU) or the note that there is none.
    let done = text.lines().find(|l| l.starts_with("search done in ")).unwrap_or_default();
    assert!(done.contains("training") && done.contains("validation") && done.contains("test walks"), "{text}");
    assert!(
        text.contains("kernels (device 0): busy") || err.contains("--profile-kernels profiles GPU launches"),
        "{text}\n{err}"
    );
    assert!(text.contains("verdict:  "), "{text}");
    assert!(text.contains("Decimal audit: "), "{text}");
    let report = dir.join("study-tradesim").join("report");
    assert!(report.join("index.html").is_file());
    // Every chart as SVG and as a PNG beside it.
    for chart in ["learning-curves", "history", "equity"] {
        for ext in ["svg", "png"] {
            assert!(report.join(format!("{chart}.{ext}")).is_file(), "{chart}.{ext} missing");
        }
    }
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

/// A pruned trial's stored test walk and checkpoint are its network's at the epoch that pruned it (not the
/// network it went on training with its batch-mates): a batch rebuilt from the study's parameters and
/// trained to that epoch walks the test times to the same codes and has the same weights, and a complete
/// trial's after every epoch. Every trial's checkpoint is uploaded as its Optuna artifact (`--artifacts`).
#[test]
fn a_pruned_trials_test_walk_is_its_network_at_its_pruning() {
    use tradesim::hyperopt::Study;
    use tradesim::hyperopt::search::universe::{UniverseLearner, UniverseSplit, universe_env, universe_planner};
    let u = universe(5, EDGE);
    let dir = temp("pruned");
    let config = "[study]\nalgo = \"dqn\"\ntrials = 8\nparallel = 4\nepochs = 4\nenvs = 48\nsegment_len = 60\n\
                  startup_trials = 8\nprune_startup_trials = 1\n";
    let store = dir.join("store");
    let args = JobArgs {
        config_text: Some(("test".to_owned(), config.to_owned())),
        study: Some(dir.join("study.sqlite")),
        seed: Some(3),
        artifacts: Some(store.clone()),
        ..JobArgs::default()
    };
    let job = Job::prepare(&args).unwrap();
    job.run_universe(&Backend::Cpu, &u, &|_| Ok(())).unwrap();
    let study = Study::reopen(&job.storage, &job.name).unwrap();
    let trials = study.trials().unwrap();
    // Every trial's checkpoint, in the checkpoints folder and as its Optuna artifact.
    for t in &trials {
        let local = std::path::PathBuf::from(t.checkpoint.as_deref().expect("a checkpoint"));
        assert_eq!(local.file_name().unwrap().to_string_lossy(), format!("trial-{}.safetensors", t.number));
        let metas = study.artifacts(t.number).unwrap();
        assert_eq!(metas.len(), 1, "trial {}", t.number);
        assert_eq!(metas[0].filename, format!("trial-{}.safetensors", t.number));
        let uploaded = std::fs::read(store.join(&metas[0].artifact_id)).unwrap();
        assert_eq!(uploaded, std::fs::read(&local).unwrap(), "trial {}", t.number);
    }
    let tensors = |path: &Path| -> Vec<(String, Vec<f32>)> {
        let mut all: Vec<_> = candle_core::safetensors::load(path, &candle_core::Device::Cpu)
            .unwrap()
            .into_iter()
            .map(|(name, t)| (name, t.flatten_all().unwrap().to_vec1::<f32>().unwrap()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    };
    let pruned: Vec<_> = trials.iter().filter(|t| t.status == "pruned").collect();
    assert!(!pruned.is_empty(), "no trial was pruned: the test checks nothing");
    let split = UniverseSplit::new(&u, tradesim::train::DEFAULT_SPLIT).unwrap();
    let planner = universe_planner(&job.cfg, split.bars_per_year, split.train.len()).unwrap();
    let mut checked = 0;
    for batch in trials.iter().filter_map(|t| t.place.map(|p| p.batch)).collect::<std::collections::BTreeSet<_>>() {
        let mut mates: Vec<_> = trials.iter().filter(|t| t.place.is_some_and(|p| p.batch == batch)).collect();
        mates.sort_by_key(|t| t.place.unwrap().slot);
        if !mates.iter().any(|t| t.status == "pruned") {
            continue;
        }
        let hs: Vec<_> = mates.iter().map(|t| planner.read(&t.params).unwrap()).collect();
        let envs: Vec<_> = hs.iter().zip(&mates).map(|(h, t)| universe_env(&planner, h, t.number).unwrap()).collect();
        let mut learner = UniverseLearner::new(&Backend::Cpu, &split, &job.cfg, &planner, &hs, &envs).unwrap();
        for epoch in 0..job.cfg.study.epochs as u64 {
            learner.epoch(&job.cfg, &split).unwrap();
            let walks = learner.walk(&split.test).unwrap();
            for (t, w) in mates.iter().zip(&walks) {
                let ends_here = match t.pruned_at {
                    Some(e) => e == epoch,
                    None => epoch + 1 == job.cfg.study.epochs as u64,
                };
                if ends_here {
                    let stored = study.test_actions(t.number).unwrap().unwrap();
                    assert_eq!(stored, w.actions, "trial {} ({}, pruned at {:?})", t.number, t.status, t.pruned_at);
                    // Its checkpoint is this network too.
                    let k = mates.iter().position(|m| m.number == t.number).unwrap();
                    let again = dir.join(format!("again-{}.safetensors", t.number));
                    learner.save(&[(k, again.clone())]).unwrap();
                    let stored = std::path::PathBuf::from(t.checkpoint.as_deref().unwrap());
                    assert_eq!(tensors(&stored), tensors(&again), "trial {} checkpoint", t.number);
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > pruned.len(), "{checked} trials checked, {} pruned", pruned.len());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Walk-forward and walk-forward optimisation on a universe: 3 folds tiling the times after the validation
/// split, each trained from the first time to its start and walked on its times (unseen by the search);
/// 2 fold searches in studies `NAME.wfo-k`, each won on its past and walked on its fold; both in the
/// evidence's summary. On the planted pattern the walk-forward folds earn on average.
#[test]
fn walk_forward_and_its_search_run_on_a_universe() {
    let u = universe(5, EDGE);
    let dir = temp("walk-forward");
    let config =
        config(2, 0).replace("segment_len = 500", "segment_len = 200") + "walk_forward = 3\nwalk_forward_search = 2\n";
    let done = search(&u, config, 1, &dir);
    let e = &done.evidence;
    let (_, valid, test) = &done.split;
    assert_eq!(e.walk_forward.len(), 3);
    assert_eq!(e.walk_forward[0].test.0, valid.end);
    assert_eq!(e.walk_forward[2].test.1, test.end);
    for (j, f) in e.walk_forward.iter().enumerate() {
        assert_eq!(f.fold, j + 1);
        assert_eq!(f.train, (0, f.test.0));
        assert!(!f.seen_by_search);
        assert_eq!(f.returns.len(), f.test.1 - f.test.0 - 1);
        if j > 0 {
            assert_eq!(e.walk_forward[j - 1].test.1, f.test.0);
        }
    }
    assert!(e.walk_forward_unseen.is_some());
    let mean = e.walk_forward.iter().map(|f| f.sharpe).sum::<f64>() / 3.0;
    assert!(mean > 0.0, "walk-forward folds' mean Sharpe {mean} on the planted pattern: {:?}", e.walk_forward);
    assert_eq!(e.walk_forward_search.len(), 2);
    for (j, f) in e.walk_forward_search.iter().enumerate() {
        assert!(f.study.ends_with(&format!(".wfo-{}", j + 1)), "{}", f.study);
        assert_eq!(f.train.0, 0);
        assert_eq!((f.train.1, f.valid.1), (f.valid.0, f.test.0));
        assert!(f.trial.is_some(), "fold {} had no winner", j + 1);
        assert_eq!(f.returns.len(), f.test.1 - f.test.0 - 1);
    }
    assert_eq!(e.walk_forward_search[1].test.1, test.end);
    assert!(e.walk_forward_search_oos.is_some());
    let text = tradesim::evidence::summary_text(e);
    assert!(text.contains("walk-forward Sharpe") && text.contains("walk-forward optimisation Sharpe"), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// After the drawdown breaker (the walk's account closes every position at the next open, whatever the
/// actions, then halts), the walk's target weights close what the account closed and send nothing more: the
/// portfolio backtest of them is the walk to rounding (before, the policy's later codes reopened positions
/// in the backtest that the halted walk never held).
#[test]
fn walk_weights_follow_the_breaker_and_the_halt() {
    use rust_decimal::Decimal;
    use tradesim::job::universe::{time_slice, walk_weights};
    use tradesim::portfolio::{PortfolioRequest, run_portfolios};
    let u = universe(5, 0.0);
    let n = u.n_symbols();
    let data = tradesim::data::cross_section::learner_data(&u, 0..800).unwrap();
    let req = PortfolioRequest {
        capital: Decimal::from(100_000),
        spread: Decimal::new(1, 4),
        commission: Decimal::new(5, 4),
        whole_units: false,
        allow_short: true,
        bars_per_year: Some(252.0),
    };
    let params = tradesim::TrialParams { max_drawdown: 0.03, ..req.decimals().to_params().unwrap() };
    let (start, end) = (900, DAYS - 1);
    // Long every symbol at every step: the account buys once, then holds until the breaker closes it.
    let w = tradesim_host::universe::walk(&data, &[params], start, end, |_| Ok(vec![1u8; n])).unwrap().remove(0);
    let halted = w.status.iter().position(|&s| s == 3).expect("the breaker halted the walk");
    assert!(w.status[..halted].contains(&1), "the breaker's pending close comes first: {:?}", &w.status[..=halted]);
    assert!(w.equity[halted + 1..].iter().all(|&e| e == w.equity[halted + 1]), "a halted walk changes nothing");
    let slice = time_slice(&u, &(start..end + 1)).unwrap();
    let weights = walk_weights(&u, &slice, start, &w, (0.0, true), "w").unwrap();
    let run = run_portfolios(&Backend::Cpu, &slice, &weights, &req).unwrap();
    let backtest = &run.result.equity[..slice.n_times()];
    assert_eq!(backtest.len(), w.equity.len());
    for (t, (b, e)) in backtest.iter().zip(&w.equity).enumerate() {
        assert!((b / e - 1.0).abs() < 1e-9, "time {t}: backtest {b} vs walk {e}");
    }
}

/// A trial trains the same bits whatever its batch-mates: the last two trials of a batch of four, trained
/// again without the first two (as a resumed batch retrains its unfinished trials without its finished
/// ones), walk the test times to their stored codes. Every random stream is keyed by the trial's key, not
/// its place, so a resumed universe study repeats the uninterrupted one.
#[test]
fn a_trial_trains_alike_without_its_batch_mates() {
    use tradesim::hyperopt::Study;
    use tradesim::hyperopt::search::universe::{UniverseLearner, UniverseSplit, universe_env, universe_planner};
    for algo in ["dqn", "ppo"] {
        let u = universe(5, EDGE);
        let dir = temp(&format!("mates-{algo}"));
        let config = format!(
            "[study]\nalgo = \"{algo}\"\ntrials = 4\nparallel = 4\nepochs = 2\nenvs = 48\nsegment_len = 60\n\
             prune = \"none\"\n"
        );
        let args = JobArgs {
            config_text: Some(("test".to_owned(), config)),
            study: Some(dir.join("study.sqlite")),
            seed: Some(11),
            ..JobArgs::default()
        };
        let job = Job::prepare(&args).unwrap();
        job.run_universe(&Backend::Cpu, &u, &|_| Ok(())).unwrap();
        let study = Study::reopen(&job.storage, &job.name).unwrap();
        let mut trials = study.trials().unwrap();
        trials.sort_by_key(|t| t.place.unwrap().slot);
        assert_eq!(trials.len(), 4);
        let split = UniverseSplit::new(&u, tradesim::train::DEFAULT_SPLIT).unwrap();
        let planner = universe_planner(&job.cfg, split.bars_per_year, split.train.len()).unwrap();
        let rest = &trials[2..];
        let hs: Vec<_> = rest.iter().map(|t| planner.read(&t.params).unwrap()).collect();
        let envs: Vec<_> = hs.iter().zip(rest).map(|(h, t)| universe_env(&planner, h, t.number).unwrap()).collect();
        let mut learner = UniverseLearner::new(&Backend::Cpu, &split, &job.cfg, &planner, &hs, &envs).unwrap();
        for _ in 0..job.cfg.study.epochs {
            learner.epoch(&job.cfg, &split).unwrap();
        }
        for (t, w) in rest.iter().zip(learner.walk(&split.test).unwrap()) {
            assert_eq!(study.test_actions(t.number).unwrap().unwrap(), w.actions, "{algo} trial {}", t.number);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
