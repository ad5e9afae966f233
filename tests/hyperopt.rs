//! The main job: a tiny seeded search completes with a consistent study, report and JSON; a search killed
//! with SIGKILL resumes with every finished trial intact and none counted twice; bad configurations are
//! refused with the key named.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tradesim::hyperopt::Study;
use tradesim::hyperopt::storage::StorageUrl;

fn bin() -> String {
    std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned())
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tradesim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A small search space: small networks and batches so a debug build finishes quickly.
fn config(dir: &Path, trials: usize, parallel: usize, epochs: usize, segment_len: usize) -> PathBuf {
    let path = dir.join("search.toml");
    let text = format!(
        "[study]\ntrials = {trials}\nparallel = {parallel}\nepochs = {epochs}\nstartup_trials = 2\nenvs = 8\nsegment_len = {segment_len}\nseed = 3\n\
         [space]\nhidden = {{ choices = [16, 32] }}\nbatch = {{ choices = [32, 64] }}\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn hyperopt(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin()).arg("hyperopt").args(["--device", "cpu"]).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn open(study: &Path) -> Result<Study, tradesim::Error> {
    Study::reopen(&StorageUrl::Sqlite(study.to_owned()), "tradesim")
}

/// (number, status, value) of every trial in the study.
fn stored(study: &Path) -> Vec<(i64, String, Option<f64>)> {
    let trials = open(study).and_then(|s| s.trials()).unwrap();
    trials.into_iter().map(|t| (t.number as i64, t.status, t.value.is_finite().then_some(t.value))).collect()
}

/// Whether trial `number`'s results are recorded (a pruned trial is not finished before its checkpoint is).
fn finished(study: &Path, number: i64) -> bool {
    open(study).and_then(|s| s.trials()).unwrap().iter().any(|t| t.number as i64 == number && t.finished())
}

#[test]
fn tiny_search_writes_a_consistent_study_and_report() {
    let dir = temp_dir("hyperopt");
    let cfg = config(&dir, 3, 2, 2, 32);
    let study = dir.join("study.sqlite");
    let report = dir.join("report");
    let (ok, stdout, stderr) = hyperopt(&[
        "--config",
        cfg.to_str().unwrap(),
        "--study",
        study.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    for file in [
        "index.html",
        "leaderboard.json",
        "leaderboard.csv",
        "learning-curves.svg",
        "learning-curves.png",
        "equity.png",
        "history.png",
        "parallel-coordinates.png",
    ] {
        assert!(report.join(file).is_file(), "{file} missing");
    }
    let trials = stored(&study);
    assert_eq!(trials.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(trials.iter().all(|t| t.1 == "complete" || t.1 == "pruned"), "{trials:?}");
    // The best: SQLite (complete, highest value), the table's rank 1, the JSON's "best".
    let best_sql = trials
        .iter()
        .filter(|t| t.1 == "complete")
        .max_by(|a, b| a.2.unwrap_or(f64::MIN).total_cmp(&b.2.unwrap_or(f64::MIN)).then(b.0.cmp(&a.0)))
        .map(|t| t.0)
        .unwrap();
    let table_best: i64 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rank 1 row in:\n{stdout}"));
    let json = std::fs::read_to_string(report.join("leaderboard.json")).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let json_best = parsed["best"].as_i64().unwrap();
    assert!(parsed["trials"].as_array().is_some_and(|t| !t.is_empty()), "{json}");
    assert_eq!((table_best, json_best), (best_sql, best_sql), "table, JSON and SQLite disagree:\n{stdout}\n{json}");
    assert!(stdout.contains(&format!("best trial {best_sql}:")), "{stdout}");
    assert!(stdout.contains("Decimal audit"), "{stdout}");
    // The best trial's test and the study's charts ran beside the evidence, and the line says so.
    let after = stdout.lines().find(|l| l.starts_with("after it: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        after.contains("evidence ") && after.contains("; beside them: the best trial's test and charts "),
        "{after}"
    );
    // Each chart's PNG is its own SVG's (drawn on other threads than the SVGs were written from).
    for chart in ["learning-curves", "history", "importances", "parallel-coordinates", "equity", "drawdown"] {
        let svg = std::fs::read_to_string(report.join(format!("{chart}.svg"))).unwrap();
        let png = std::fs::read(report.join(format!("{chart}.png"))).unwrap();
        assert!(png == tradesim::job::report::png_of(&svg).unwrap(), "{chart}.png is not {chart}.svg's");
    }
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Leaderboard") && html.contains(&format!("Best trial: {best_sql}")));
    renders_in_chromium(&report.join("index.html"));
    let (ok, _, stderr) = hyperopt(&["--config", cfg.to_str().unwrap(), "--study", study.to_str().unwrap()]);
    assert!(!ok && stderr.contains("pass --resume"), "an existing study must not be overwritten: {stderr}");
    // The same file holds a second study under another name.
    let (ok, _, stderr) =
        hyperopt(&["--config", cfg.to_str().unwrap(), "--study", study.to_str().unwrap(), "--study-name", "second"]);
    assert!(ok, "{stderr}");
    assert_eq!(Study::reopen(&StorageUrl::Sqlite(study.clone()), "second").unwrap().trials().unwrap().len(), 3);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A best trial whose test cannot be replayed (its test actions gone) fails the job with that error, after
/// the evidence was recorded in the study: the placebo searches' and folds' results are not lost with it.
#[test]
fn a_failed_best_trial_test_keeps_the_evidence() {
    let dir = temp_dir("best-test-fails");
    let cfg = config(&dir, 3, 3, 2, 32);
    let study = dir.join("study.sqlite");
    let (ok, _, stderr) = hyperopt(&["--config", cfg.to_str().unwrap(), "--study", study.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let verdict = || open(&study).unwrap().study_attr("verdict").unwrap();
    assert!(verdict().is_some());
    let db = Connection::open(&study).unwrap();
    db.execute_batch("DELETE FROM tradesim_test_actions; DELETE FROM study_user_attributes WHERE key = 'verdict';")
        .unwrap();
    drop(db);
    assert!(verdict().is_none());
    // Every trial is finished: the resumed job goes straight to what follows the search.
    let (ok, _, stderr) = hyperopt(&["--study", study.to_str().unwrap(), "--resume"]);
    assert!(!ok && stderr.contains("has no test actions"), "{stderr}");
    assert!(verdict().is_some_and(|v| v.contains("evidence")), "{:?}", verdict());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn killed_search_resumes_without_losing_or_repeating_trials() {
    let dir = temp_dir("resume");
    let cfg = config(&dir, 6, 2, 3, 64);
    let study = dir.join("study.sqlite");
    let mut child = Command::new(bin())
        .args(["hyperopt", "--device", "cpu", "--config", cfg.to_str().unwrap(), "--study", study.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let before_kill = loop {
        assert!(started.elapsed() < Duration::from_secs(300), "the search never reached its second batch");
        assert!(child.try_wait().unwrap().is_none(), "the search ended before it could be killed");
        if study.exists() {
            // One read of the study for both counts (two reads let the first batch finish in between, and
            // its trials looked running and finished at once).
            let trials =
                std::panic::catch_unwind(|| open(&study).and_then(|s| s.trials()).unwrap()).unwrap_or_default();
            let finished = trials.iter().filter(|t| t.finished()).count();
            if finished >= 2 && trials.iter().any(|t| t.status == "running" && !t.finished()) {
                break trials.iter().map(|t| (t.number as i64, t.status.clone())).collect::<Vec<_>>();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let after_kill = stored(&study);
    let finished: Vec<_> = after_kill.iter().filter(|t| finished(&study, t.0)).cloned().collect();
    assert!(finished.len() >= 2 && after_kill.iter().any(|t| t.1 == "running"), "{before_kill:?} / {after_kill:?}");
    let (ok, stdout, stderr) = hyperopt(&["--study", study.to_str().unwrap(), "--resume"]);
    assert!(ok, "{stderr}");
    let resumed = stored(&study);
    assert_eq!(resumed.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5], "{resumed:?}");
    assert!(resumed.iter().all(|t| t.1 == "complete" || t.1 == "pruned"), "{resumed:?}");
    for f in &finished {
        let now = resumed.iter().find(|t| t.0 == f.0).unwrap();
        assert_eq!((&now.1, now.2.map(f64::to_bits)), (&f.1, f.2.map(f64::to_bits)), "finished trial {} changed", f.0);
    }
    let all = open(&study).and_then(|s| s.epochs()).unwrap();
    let epochs = all.len();
    let per_trial_max = (0..6).map(|n| all.iter().filter(|e| e.trial == n).count()).max().unwrap();
    assert!(per_trial_max <= 3 && epochs <= 18, "epochs counted twice: {epochs} rows, {per_trial_max} max per trial");
    assert!(stdout.contains("report:"), "{stdout}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_configs_are_refused_with_the_key() {
    let dir = temp_dir("badcfg");
    for (text, key) in [
        ("[study]\ntrails = 3\n", "trails"),
        ("[space]\nlr = { low = 0.01, high = 0.001 }\n", "space.lr: empty range"),
        ("[space]\nlr = -0.5\n", "space.lr: -0.5 is invalid: the learning rate must be positive"),
        ("[space]\nmomentum = 0.9\n", "space.momentum: unknown parameter for dqn"),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let study = dir.join("never.sqlite");
        let (ok, _, stderr) = hyperopt(&["--config", path.to_str().unwrap(), "--study", study.to_str().unwrap()]);
        assert!(!ok && stderr.contains(key), "{text}: {stderr}");
        assert!(!study.exists(), "a refused configuration must not create a study");
    }
    let path = dir.join("mixed.toml");
    std::fs::write(&path, "[space]\nclip = 0.2\n").unwrap();
    let (ok, _, stderr) =
        hyperopt(&["--config", path.to_str().unwrap(), "--study", dir.join("x.sqlite").to_str().unwrap()]);
    assert!(!ok && stderr.contains("space.clip: unknown parameter for dqn"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A configuration that can be read only once (`--config /dev/stdin`, a pipe) is the search's: the CLI
/// reads the file once and the job and the early features both use that text.
#[test]
fn a_configuration_from_a_pipe_is_the_searchs() {
    use std::io::Write;
    let dir = temp_dir("pipecfg");
    let text = std::fs::read_to_string(config(&dir, 2, 2, 1, 16)).unwrap();
    let study = dir.join("s.sqlite");
    let mut child = Command::new(bin())
        .args(["hyperopt", "--device", "cpu", "--config", "/dev/stdin", "--study", study.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("2 trials (2 at a time, 1 epochs, 8 envs x 16 steps)"), "{stdout}");
    assert_eq!(stored(&study).len(), 2);
    std::fs::remove_dir_all(dir).unwrap();
}

/// PPO through the same search: a tiny study completes with every trial finished and a report.
#[test]
fn tiny_ppo_search_completes() {
    let dir = temp_dir("hyperopt-ppo");
    let path = dir.join("ppo.toml");
    std::fs::write(
        &path,
        "[study]\nalgo = \"ppo\"\ntrials = 2\nparallel = 2\nepochs = 2\nenvs = 8\nsegment_len = 32\n\
         [space]\nhidden = 16\nppo_epochs = 2\n",
    )
    .unwrap();
    let study = dir.join("study.sqlite");
    let (ok, stdout, stderr) = hyperopt(&["--config", path.to_str().unwrap(), "--study", study.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("hyperopt: PPO"), "{stdout}");
    let trials = stored(&study);
    assert_eq!(trials.len(), 2);
    assert!(trials.iter().all(|t| t.1 == "complete" || t.1 == "pruned"), "{trials:?}");
    assert!(dir.join("study-tradesim").join("report").join("index.html").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two workers (as with two GPUs; here two CPU backends) share one study: every trial runs exactly once.
#[test]
fn two_workers_share_a_study() {
    use tradesim::hyperopt::config::Dimension;
    use tradesim::hyperopt::{SearchConfig, SearchPaths, run_search};
    let dir = temp_dir("workers");
    let mut cfg = SearchConfig::default();
    cfg.study.trials = 4;
    cfg.study.parallel = 1;
    cfg.study.epochs = 1;
    cfg.study.envs = 4;
    cfg.study.segment_len = 16;
    cfg.space.insert("hidden".to_owned(), Dimension::Fixed(16.0));
    cfg.space.insert("batch".to_owned(), Dimension::Fixed(32.0));
    let study = dir.join("study.sqlite");
    let paths = SearchPaths {
        storage: StorageUrl::Sqlite(study.clone()),
        study_name: "tradesim".to_owned(),
        checkpoints: dir.join("checkpoints"),
        artifacts: None,
    };
    drop(Study::open(&paths.storage, "tradesim", false, "{}").unwrap());
    let d = tradesim::data::embedded().unwrap();
    let batches = std::sync::atomic::AtomicUsize::new(0);
    let data = tradesim::train::SplitData::new(&d.series[0], tradesim::train::DEFAULT_SPLIT, 100).unwrap();
    run_search(&[tradesim::Backend::Cpu, tradesim::Backend::Cpu], &data, &cfg, 6_048.0, &paths, &|p| {
        // Claims: a batch's first trials, then those freed slots take.
        match p {
            tradesim::hyperopt::Progress::Batch { numbers, .. } => {
                batches.fetch_add(numbers.len(), std::sync::atomic::Ordering::SeqCst);
            }
            tradesim::hyperopt::Progress::Refill { .. } => {
                batches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            _ => {}
        }
        Ok(())
    })
    .unwrap();
    let trials = stored(&study);
    assert_eq!(trials.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1, 2, 3], "{trials:?}");
    assert!(trials.iter().all(|t| t.1 != "running"), "{trials:?}");
    assert_eq!(batches.load(std::sync::atomic::Ordering::SeqCst), 4, "each trial is claimed once");
    for n in 0..4 {
        assert!(paths.checkpoints.join(format!("trial-{n}.safetensors")).is_file());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A corrupt parameter row in a study is an error naming the trial (a resume must not run the trial with an
/// empty parameter set).
#[test]
fn a_corrupt_parameter_row_is_an_error_naming_the_trial() {
    let dir = temp_dir("corrupt");
    let path = dir.join("study.sqlite");
    let study = Study::open(&StorageUrl::Sqlite(path.clone()), "tradesim", false, "{}").unwrap();
    let params: tradesim::hyperopt::sampler::Params = [("lr".to_owned(), 1e-3), ("hidden".to_owned(), 16.0)].into();
    study.start(0, &params, &[]).unwrap();
    study.start(1, &params, &[0]).unwrap();
    assert_eq!(study.trials().unwrap()[1].params, params);
    drop(study);
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE trial_params SET distribution_json = '{\"name\": \"Bogus\"' WHERE param_name = 'lr'
         AND trial_id = (SELECT trial_id FROM trials WHERE number = 1)",
        [],
    )
    .unwrap();
    drop(conn);
    let err = open(&path).unwrap().trials().unwrap_err();
    assert!(matches!(err, tradesim::Error::Study(_)), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("trial 1") && err.contains("stored parameters"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A study whose stored search configuration tradesim cannot read is refused with the attribute named (a
/// resume must not search a default space instead).
#[test]
fn a_corrupt_stored_configuration_is_an_error() {
    let dir = temp_dir("corrupt-config");
    let path = dir.join("study.sqlite");
    drop(Study::open(&StorageUrl::Sqlite(path.clone()), "tradesim", false, "{}").unwrap());
    assert!(open(&path).is_ok(), "an empty configuration is the defaults");
    let conn = Connection::open(&path).unwrap();
    let changed = conn
        .execute("UPDATE study_user_attributes SET value_json = '{\"study\": {\"trials\": \"many\"}}'", [])
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let err = open(&path).unwrap_err();
    assert!(matches!(err, tradesim::Error::Study(_)), "{err:?}");
    assert!(err.to_string().contains("`tradesim_config` attribute"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A trial whose objective is undefined (NaN) is marked `fail`, ranks after complete and pruned trials, and
/// is never the best: a study of failed trials has no best trial.
#[test]
fn failed_trials_are_never_best() {
    use tradesim::job::report::leaderboard;
    let dir = temp_dir("failed");
    let path = dir.join("study.sqlite");
    let study = Study::open(&StorageUrl::Sqlite(path), "tradesim", false, "{}").unwrap();
    let params: tradesim::hyperopt::sampler::Params = [("lr".to_owned(), 1e-3)].into();
    for n in 0..3 {
        study.start(n, &params, &[]).unwrap();
    }
    study.finish(0, f64::NAN, 0.0, 0.0, &[], "a").unwrap();
    study.finish(1, -0.5, 0.0, 0.0, &[], "b").unwrap();
    study.finish(2, f64::NAN, 0.0, 0.0, &[], "c").unwrap();
    let board = leaderboard(study.trials().unwrap());
    let order: Vec<(u64, &str)> = board.iter().map(|t| (t.number, t.status.as_str())).collect();
    assert_eq!(order, [(1, "complete"), (0, "fail"), (2, "fail")]);
    let only_failed: Vec<_> = board.iter().filter(|t| t.status == "fail").cloned().collect();
    let board = leaderboard(only_failed);
    assert!(board.first().is_none_or(|t| t.status != "complete"), "no complete trial, so no best trial");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Everything a study records about its trials and epochs, checkpoints by content (their folders differ).
fn snapshot(study: &Path) -> (Vec<String>, Vec<String>) {
    let hash =
        |b: &[u8]| b.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &x| (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3));
    let s = open(study).unwrap();
    let bits = |x: f64| x.to_bits();
    let trials = s
        .trials()
        .unwrap()
        .into_iter()
        .map(|t| {
            let weights =
                t.checkpoint.as_ref().map(|c| hash(&std::fs::read(c).expect("the recorded checkpoint exists")));
            let actions = s.test_actions(t.number).unwrap().map(|a| hash(&a));
            format!(
                "{} {} {} {} {:?} {} {} {actions:?} {weights:?} {:?}",
                t.number,
                serde_json::to_string(&t.params).unwrap(),
                t.status,
                bits(t.value),
                t.pruned_at,
                bits(t.test_return),
                bits(t.test_sharpe),
                t.history
            )
        })
        .collect();
    let epochs = s
        .epochs()
        .unwrap()
        .iter()
        .map(|e| format!("{} {} {} {} {}", e.trial, e.epoch, bits(e.loss), bits(e.valid_sharpe), bits(e.valid_return)))
        .collect();
    (trials, epochs)
}

/// The resumed study `killed` holds the 20 trials and the epochs of the uninterrupted `expected` (paths
/// under `dir` stripped: the checkpoint folders differ).
fn assert_same_study(dir: &Path, expected: &(Vec<String>, Vec<String>), killed: &Path) {
    let resumed = snapshot(killed);
    let strip = |v: &[String]| v.iter().map(|t| t.replace(dir.to_str().unwrap(), "")).collect::<Vec<_>>();
    assert_eq!(resumed.0.len(), 20);
    for (a, b) in strip(&expected.0).iter().zip(strip(&resumed.0).iter()) {
        assert_eq!(a, b);
    }
    assert_eq!(expected.1, resumed.1, "epoch records differ");
}

/// The search of the exact-resume tests (20 trials through 5 slots, 3 epochs, the median pruner from the
/// third complete trial on) written under `dir`, with the `[env]` table `env` (empty: the default costs):
/// run on study PATH, fresh or resumed, with a failpoint.
fn resumable_search(dir: &Path, env: &str) -> impl Fn(&Path, bool, Option<&str>) -> (bool, String) + use<> {
    let cfg = dir.join("search.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\ntrials = 20\nparallel = 5\nepochs = 3\nstartup_trials = 5\nprune_startup_trials = 3\n\
             envs = 4\nsegment_len = 24\nseed = 11\n[env]\n{env}\n\
             [space]\nhidden = {{ choices = [8, 16] }}\nbatch = {{ choices = [16, 32] }}\n"
        ),
    )
    .unwrap();
    move |study: &Path, resume: bool, failpoint: Option<&str>| {
        let mut cmd = Command::new(bin());
        cmd.args(["hyperopt", "--device", "cpu", "--study", study.to_str().unwrap()]);
        if resume {
            cmd.arg("--resume");
        } else {
            cmd.args(["--config", cfg.to_str().unwrap()]);
        }
        if let Some(f) = failpoint {
            cmd.env("TRADESIM_FAILPOINT", f);
        }
        let out = cmd.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Issue 17 item 5: a search killed right after its first prune (among trials 5-9, in the slots the first
/// five freed), resumed, killed again after two trials finished, and resumed to the end equals the
/// uninterrupted search: every trial's parameters, state, values, epochs, test results, history and
/// checkpoint bytes.
#[test]
fn a_resumed_search_equals_the_uninterrupted_one() {
    let dir = temp_dir("exact-resume");
    let run = resumable_search(&dir, "");
    let whole = dir.join("whole").join("study.sqlite");
    let (ok, stderr) = run(&whole, false, None);
    assert!(ok, "{stderr}");
    let expected = snapshot(&whole);
    let pruned_in_batch_2 = expected
        .0
        .iter()
        .filter(|t| t.split(' ').nth(2) == Some("pruned"))
        .filter_map(|t| t.split(' ').next()?.parse::<u64>().ok());
    assert!(pruned_in_batch_2.clone().any(|n| (5..10).contains(&n)), "no prune among trials 5-9: {:?}", expected.0);

    let killed = dir.join("killed").join("study.sqlite");
    // The first prune of the search is among trials 5-9 (the first five have no complete trial to compare with).
    let (ok, stderr) = run(&killed, false, Some("prune:1"));
    assert!(!ok && stderr.contains("failpoint prune:1"), "{stderr}");
    let after_prune = snapshot(&killed);
    // A pruned trial stays RUNNING, its prune epoch recorded, until its results are (issue 45).
    let pruned_running = |t: &String| {
        t.split(' ').nth(2) == Some("running") && t.split(' ').nth(4).is_some_and(|p| p.starts_with("Some"))
    };
    assert!(after_prune.0.iter().any(pruned_running), "the kill came after a prune: {:?}", after_prune.0);
    // Resumed, then killed after two of trials 5-9 are finished.
    let (ok, stderr) = run(&killed, true, Some("finish:2"));
    assert!(!ok && stderr.contains("failpoint finish:2"), "{stderr}");
    let (ok, stderr) = run(&killed, true, None);
    assert!(ok, "{stderr}");
    assert_same_study(&dir, &expected, &killed);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 12 item 5: a search whose batch refilled freed slots (pruned trials' slots take the next trials
/// mid-batch), killed right after a refill's claim and again after the refilled trials began to finish,
/// resumes to the study of the uninterrupted search: the same trials, places, histories, values, epochs and
/// checkpoint bytes. At the default costs the second kill comes at a boundary where every slot has just
/// freed (no trial left to restart: the batch goes on from there); with the costs below, while trials of
/// the batch still run (they restart at their places, the finished ones holding their slots).
#[test]
fn a_search_killed_after_refills_resumes_as_the_uninterrupted_one() {
    killed_after_refills("refill-resume", "", "finish:13", false);
}

/// The same with a spread of 0.0001 and no commission (the default costs before 37a73b9).
#[test]
fn a_search_killed_after_refills_while_trials_run_resumes_as_the_uninterrupted_one() {
    killed_after_refills("refill-resume-running", "spread = \"0.0001\"\ncommission = \"0\"", "finish:7", true);
}

/// The refill-resume case of the search with `[env]` table `env`, killed the second time at `finish` (a
/// failpoint); `running`: whether that kill leaves trials of the batch running (else it leaves none).
fn killed_after_refills(name: &str, env: &str, finish: &str, running: bool) {
    let dir = temp_dir(name);
    let run = resumable_search(&dir, env);
    let places = |study: &Path| -> Vec<(u64, String, Option<tradesim::hyperopt::study::Place>)> {
        open(study).unwrap().trials().unwrap().into_iter().map(|t| (t.number, t.status, t.place)).collect()
    };
    let whole = dir.join("whole").join("study.sqlite");
    let (ok, stderr) = run(&whole, false, None);
    assert!(ok, "{stderr}");
    let expected = snapshot(&whole);
    let placed = places(&whole);
    // One batch of 5 slots: trials started mid-batch in slots freed by pruned trials.
    assert!(placed.iter().all(|p| p.2.is_some_and(|q| q.batch == 0 && q.slot < 5)), "{placed:?}");
    let refills: Vec<_> = placed.iter().filter(|p| p.2.is_some_and(|q| q.tick > 0)).collect();
    assert!(refills.len() >= 10, "{placed:?}");
    let pruned_then_refilled = placed.iter().filter(|p| p.1 == "pruned").any(|p| {
        let q = p.2.unwrap();
        refills.iter().any(|r| r.2.is_some_and(|s| s.slot == q.slot && s.tick > q.tick && s.tick < q.tick + 3))
    });
    assert!(pruned_then_refilled, "no slot refilled before a trial's epochs would have ended: {placed:?}");

    let killed = dir.join("killed").join("study.sqlite");
    // The sixth claim for a freed slot: the first after pruned trials freed theirs, while the batch's other
    // trials run on and the pruned trials' slots are still to be refilled.
    let (ok, stderr) = run(&killed, false, Some("refill:6"));
    assert!(!ok && stderr.contains("failpoint refill:6"), "{stderr}");
    let after = places(&killed);
    let refilled = |p: &(u64, String, Option<tradesim::hyperopt::study::Place>)| {
        p.2.is_some_and(|q| {
            after.iter().any(|o| o.1 == "pruned" && o.2.is_some_and(|r| r.slot == q.slot && r.tick < q.tick))
        })
    };
    assert!(
        after.iter().any(|p| p.1 == "running" && refilled(p)),
        "no running trial in a pruned one's slot: {after:?}"
    );
    // Resumed, then killed again once trials started in freed slots are finishing.
    let (ok, stderr) = run(&killed, true, Some(finish));
    assert!(!ok && stderr.contains(&format!("failpoint {finish}")), "{stderr}");
    let stopped = places(&killed);
    assert_eq!(stopped.iter().any(|p| p.1 == "running"), running, "{stopped:?}");
    let (ok, stderr) = run(&killed, true, None);
    assert!(ok, "{stderr}");
    assert_same_study(&dir, &expected, &killed);
    assert_eq!(placed, places(&killed), "places differ");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 14: a study tradesim writes is an Optuna study. The real `optuna` (the release whose schema tradesim
/// writes, in the throwaway virtualenv of `scripts/setup-optuna.sh`, whose python `TRADESIM_OPTUNA_PYTHON`
/// names; `scripts/test.sh` sets it) loads it and finds every trial's state, value, parameters (with their
/// distributions), intermediate values per epoch and test attributes, and the same best trial.
#[test]
fn optuna_loads_the_study() {
    let Ok(python) = std::env::var("TRADESIM_OPTUNA_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run the Optuna check: TRADESIM_OPTUNA_PYTHON is unset");
        eprintln!("skipped: TRADESIM_OPTUNA_PYTHON is unset (scripts/test.sh sets it)");
        return;
    };
    let dir = temp_dir("optuna");
    let cfg = dir.join("search.toml");
    // Ranges (log and integer), choices and fixed values; pruning on, so the study has every state it can.
    std::fs::write(
        &cfg,
        "[study]\ntrials = 8\nparallel = 4\nepochs = 3\nstartup_trials = 4\nprune_startup_trials = 2\nenvs = 4\n\
         segment_len = 24\nseed = 5\n[space]\nhidden = { low = 8, high = 16 }\nbatch = { choices = [16, 32] }\n\
         lr = { low = 1e-4, high = 1e-2, log = true }\ntarget_every = 50\n",
    )
    .unwrap();
    let study = dir.join("study.sqlite");
    let (ok, _, stderr) = hyperopt(&[
        "--config",
        cfg.to_str().unwrap(),
        "--storage",
        &format!("sqlite:///{}", study.display()),
        "--study-name",
        "interop",
    ]);
    assert!(ok, "{stderr}");
    let s = Study::reopen(&StorageUrl::Sqlite(study.clone()), "interop").unwrap();
    let trials = s.trials().unwrap();
    let epochs = s.epochs().unwrap();
    let finite = |x: f64| if x.is_finite() { serde_json::json!(x) } else { serde_json::Value::Null };
    let expected: Vec<serde_json::Value> = trials
        .iter()
        .map(|t| {
            let steps: Vec<u64> = epochs.iter().filter(|e| e.trial == t.number).map(|e| e.epoch).collect();
            serde_json::json!({
                "number": t.number,
                "state": t.status.to_uppercase(),
                "value": finite(t.value),
                "params": t.params,
                "steps": steps,
                "user_attrs": {"test_return": finite(t.test_return), "test_sharpe": finite(t.test_sharpe), "checkpoint": t.checkpoint},
            })
        })
        .collect();
    let board = tradesim::job::report::leaderboard(trials.clone());
    let best = board.first().filter(|t| t.status == "complete").map(|t| t.number);
    let path = dir.join("expected.json");
    std::fs::write(&path, serde_json::json!({"best": best, "trials": expected}).to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("optuna_check.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(format!("sqlite:///{}", study.display()))
        .arg("interop")
        .arg(&path)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["trials"], 8, "{stdout}");
    assert!(trials.iter().any(|t| t.status == "pruned"), "the study should hold a pruned trial: {trials:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A search configuration for worker tests: 8 trials of 2 epochs in batches of 2, fast heartbeats.
fn worker_config(dir: &Path) -> PathBuf {
    let path = dir.join("workers.toml");
    std::fs::write(
        &path,
        "[study]\ntrials = 8\nparallel = 2\nepochs = 2\nstartup_trials = 4\nenvs = 4\nsegment_len = 24\nseed = 9\n\
         heartbeat_seconds = 0.2\nstale_seconds = 2.0\n[space]\nhidden = { choices = [8, 16] }\nbatch = 16\n",
    )
    .unwrap();
    path
}

/// `tradesim hyperopt --load-if-exists` on study `name` of `storage` as a background worker acting as `id`
/// (TRADESIM_WORKER_ID).
fn spawn_named(cfg: &Path, storage: &str, name: &str, id: &str) -> std::process::Child {
    Command::new(bin())
        .args(["hyperopt", "--device", "cpu", "--config", cfg.to_str().unwrap(), "--storage", storage])
        .args(["--study-name", name, "--load-if-exists"])
        .env("TRADESIM_WORKER_ID", id)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_ok(child: std::process::Child) {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "a worker failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Study `name` of `storage` (an error until a worker created it).
fn study_at(storage: &str, name: &str) -> Result<Study, tradesim::Error> {
    Study::reopen(&StorageUrl::parse(storage)?, name)
}

/// Two worker processes started at once on one study (one creates it, the other joins) share its trials:
/// all 8 finish, each claimed exactly once, and both workers ran some.
fn two_processes_share_a_study_on(storage: &str, name: &str, dir: &Path) {
    let cfg = worker_config(dir);
    let a = spawn_named(&cfg, storage, name, "host-a:1");
    let b = spawn_named(&cfg, storage, name, "host-b:1");
    wait_ok(a);
    wait_ok(b);
    let trials = study_at(storage, name).unwrap().trials().unwrap();
    assert_eq!(trials.iter().map(|t| t.number).collect::<Vec<_>>(), (0..8).collect::<Vec<u64>>());
    assert!(trials.iter().all(|t| t.finished() && t.runs == 1), "{trials:#?}");
    for w in ["host-a:1", "host-b:1"] {
        assert!(trials.iter().any(|t| t.worker.as_deref() == Some(w)), "{w} ran no trial");
    }
}

/// A worker killed with SIGKILL mid-batch: another worker takes its trials over (their worker's process is
/// seen gone on this machine and PID namespace, or their heartbeats go stale) and finishes the study; the
/// killed trials ran twice under their numbers, every other trial once.
fn a_killed_worker_is_taken_over_on(storage: &str, name: &str, dir: &Path) {
    let cfg = worker_config(dir);
    let mut a = spawn_named(&cfg, storage, name, "host-a:1");
    let started = Instant::now();
    // Which trials a runs, read after it is killed: read before, a could finish one and claim the next in
    // between.
    let running_on_a = || -> Vec<u64> {
        study_at(storage, name)
            .and_then(|s| s.trials())
            .unwrap_or_default()
            .iter()
            .filter(|t| t.status == "running" && t.worker.as_deref() == Some("host-a:1"))
            .map(|t| t.number)
            .collect()
    };
    while running_on_a().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(120), "worker a never claimed a trial");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.kill().unwrap();
    a.wait().unwrap();
    let killed = running_on_a();
    assert!(!killed.is_empty(), "a was killed between its trials");
    let b = spawn_named(&cfg, storage, name, "host-b:1");
    wait_ok(b);
    let trials = study_at(storage, name).unwrap().trials().unwrap();
    assert_eq!(trials.len(), 8, "{trials:#?}");
    assert!(trials.iter().all(|t| t.finished()), "{trials:#?}");
    for t in &trials {
        let want = if killed.contains(&t.number) { 2 } else { 1 };
        assert_eq!(t.runs, want, "trial {}: {trials:#?}", t.number);
    }
    assert!(killed.iter().all(|n| trials[*n as usize].worker.as_deref() == Some("host-b:1")));
}

#[test]
fn two_processes_share_a_sqlite_study() {
    let dir = temp_dir("share-sqlite");
    let storage = format!("sqlite:///{}", dir.join("study.sqlite").display());
    two_processes_share_a_study_on(&storage, "tradesim", &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_killed_worker_is_taken_over_on_sqlite() {
    let dir = temp_dir("takeover-sqlite");
    let storage = format!("sqlite:///{}", dir.join("study.sqlite").display());
    a_killed_worker_is_taken_over_on(&storage, "tradesim", &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

/// The PostgreSQL server of the tests (`scripts/test.sh` starts a throwaway one with `scripts/postgres.sh` and
/// sets `TRADESIM_POSTGRES_URL`); `None` outside CI when it is unset.
fn postgres_url() -> Option<String> {
    let url = std::env::var("TRADESIM_POSTGRES_URL").ok();
    assert!(
        url.is_some() || std::env::var_os("CI").is_none(),
        "CI must run the PostgreSQL tests: TRADESIM_POSTGRES_URL is unset"
    );
    if url.is_none() {
        eprintln!("skipped: TRADESIM_POSTGRES_URL is unset (scripts/test.sh sets it)");
    }
    url
}

#[test]
fn two_processes_share_a_postgres_study() {
    let Some(url) = postgres_url() else { return };
    let dir = temp_dir("share-pg");
    // A study name unique to this run (the tests share one database), and a connection option on the way.
    let name = format!("share-{}", std::process::id());
    two_processes_share_a_study_on(&format!("{url}?application_name={name}"), &name, &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_killed_worker_is_taken_over_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let dir = temp_dir("takeover-pg");
    let name = format!("takeover-{}", std::process::id());
    a_killed_worker_is_taken_over_on(&url, &name, &dir);
    // The password never shows in what a worker prints.
    let password = match StorageUrl::parse(&url).unwrap() {
        StorageUrl::Postgres { password, .. } => password.unwrap(),
        StorageUrl::Sqlite(_) => unreachable!(),
    };
    let out = Command::new(bin())
        .args(["hyperopt", "--device", "cpu", "--storage", &url, "--study-name", &name, "--resume"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(!text.contains(&password) && text.contains(":***@"), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// An Optuna worker (the real optuna, Python) runs its own trials on the same PostgreSQL study while a
/// tradesim worker runs the search: every trial number is used once, tradesim's 8 trials each ran once and
/// finished, Optuna's 4 are COMPLETE, and Optuna loads the study afterwards.
#[test]
fn an_optuna_worker_beside_tradesim_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let Ok(python) = std::env::var("TRADESIM_OPTUNA_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run the Optuna check: TRADESIM_OPTUNA_PYTHON is unset");
        return;
    };
    let dir = temp_dir("beside-pg");
    let name = format!("beside-{}", std::process::id());
    let cfg = worker_config(&dir);
    let ours = spawn_named(&cfg, &url, &name, "host-a:1");
    let started = Instant::now();
    while study_at(&url, &name).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "the study was never created");
        std::thread::sleep(Duration::from_millis(20));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("optuna_worker.py");
    let theirs = Command::new(&python).arg(script).args([url.as_str(), name.as_str(), "4"]).output().unwrap();
    assert!(theirs.status.success(), "{}", String::from_utf8_lossy(&theirs.stderr));
    wait_ok(ours);
    let trials = study_at(&url, &name).unwrap().trials().unwrap();
    let numbers: std::collections::BTreeSet<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers.len(), trials.len(), "a trial number used twice: {trials:#?}");
    assert_eq!(numbers.into_iter().collect::<Vec<_>>(), (0..12).collect::<Vec<u64>>());
    let (mine, foreign): (Vec<_>, Vec<_>) = trials.iter().partition(|t| t.ours);
    assert_eq!(mine.len(), 8);
    assert!(mine.iter().all(|t| t.finished() && t.runs == 1), "{mine:#?}");
    assert_eq!(foreign.len(), 4);
    assert!(foreign.iter().all(|t| t.status == "complete" && t.params.contains_key("lr")), "{foreign:#?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The reverse direction: a study the real optuna created (3 trials of its own, the same parameter names and
/// distributions) is continued by `tradesim hyperopt --load-if-exists`: tradesim adopts it with its
/// configuration, runs its own trials after Optuna's (numbers 3..), samples them with Optuna's trials in
/// TPE's history, and Optuna still loads the study.
#[test]
fn tradesim_continues_a_study_optuna_created() {
    let Ok(python) = std::env::var("TRADESIM_OPTUNA_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run the Optuna check: TRADESIM_OPTUNA_PYTHON is unset");
        return;
    };
    let dir = temp_dir("adopt");
    let study = dir.join("study.sqlite");
    let storage = format!("sqlite:///{}", study.display());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("optuna_create.py");
    let made = Command::new(&python).arg(script).args([storage.as_str(), "theirs", "3"]).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let cfg = config(&dir, 3, 3, 2, 24);
    let (ok, _, stderr) = hyperopt(&[
        "--config",
        cfg.to_str().unwrap(),
        "--storage",
        &storage,
        "--study-name",
        "theirs",
        "--load-if-exists",
    ]);
    assert!(ok, "{stderr}");
    let trials = Study::reopen(&StorageUrl::Sqlite(study.clone()), "theirs").unwrap().trials().unwrap();
    assert_eq!(
        trials.iter().map(|t| (t.number, t.ours)).collect::<Vec<_>>(),
        [(0, false), (1, false), (2, false), (3, true), (4, true), (5, true)]
    );
    assert!(trials[..3].iter().all(|t| t.finished() && t.params.contains_key("lr")), "{trials:#?}");
    assert!(trials[3..].iter().all(|t| t.finished() && t.history == [0, 1, 2]), "{trials:#?}");
    let check = Command::new(&python)
        .args([
            "-c",
            "import optuna, sys; s = optuna.load_study(study_name='theirs', storage=sys.argv[1]); print(len(s.trials))",
            &storage,
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&check.stdout).trim(), "6", "{}", String::from_utf8_lossy(&check.stderr));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The report page in headless Chromium (Debian's, `TRADESIM_CHROMIUM`; `scripts/test.sh` sets it): it loads
/// without console errors and its DOM holds the six charts (equity, drawdown, optimization history,
/// intermediate values, importances, parallel coordinates) with dates on the equity chart's axis.
fn renders_in_chromium(page: &Path) {
    let Ok(chromium) = std::env::var("TRADESIM_CHROMIUM") else {
        assert!(std::env::var_os("CI").is_none(), "CI must render the report: TRADESIM_CHROMIUM is unset");
        eprintln!("skipped the Chromium check: TRADESIM_CHROMIUM is unset (scripts/test.sh sets it)");
        return;
    };
    let profile = page.parent().unwrap().join("chromium-profile");
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    let (dom, log) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "chromium failed: {log}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE") || l.contains("Uncaught")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(dom.matches("<svg").count() >= 4, "charts missing from the DOM:\n{dom}");
    for title in
        ["equity on the test split", "drawdown on the test split", "Optimization history", "Intermediate values"]
    {
        assert!(dom.contains(title), "no chart `{title}` in the DOM");
    }
    let date = regex_like_date(&dom);
    assert!(date, "the equity chart's x axis has no dates");
}

/// Whether `text` holds a date `YYYY-MM-DD` inside an SVG text element.
fn regex_like_date(text: &str) -> bool {
    text.split('>').any(|part| {
        let b = part.trim_start().as_bytes();
        b.len() >= 10
            && b[..10].iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
    })
}

/// Two workers on one machine named by `TRADESIM_WORKER_ID` as `lab:a` and `lab:b` (the same "host", and
/// names that are no process ids): neither takes the other's live trials over, so every trial runs once.
fn named_workers_on_one_host_run_each_trial_once_on(storage: &str, name: &str, dir: &Path) {
    let cfg = worker_config(dir);
    let a = spawn_named(&cfg, storage, name, "lab:a");
    let b = spawn_named(&cfg, storage, name, "lab:b");
    wait_ok(a);
    wait_ok(b);
    let trials = study_at(storage, name).unwrap().trials().unwrap();
    assert_eq!(trials.iter().map(|t| t.number).collect::<Vec<_>>(), (0..8).collect::<Vec<u64>>());
    let twice: Vec<u64> = trials.iter().filter(|t| t.runs != 1).map(|t| t.number).collect();
    assert!(twice.is_empty(), "trials {twice:?} ran more than once: {trials:#?}");
    assert!(trials.iter().all(|t| t.finished()), "{trials:#?}");
}

#[test]
fn named_workers_on_one_host_run_each_trial_once_on_sqlite() {
    let dir = temp_dir("named-sqlite");
    let storage = format!("sqlite:///{}", dir.join("study.sqlite").display());
    named_workers_on_one_host_run_each_trial_once_on(&storage, "tradesim", &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn named_workers_on_one_host_run_each_trial_once_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let dir = temp_dir("named-pg");
    let name = format!("named-{}", std::process::id());
    named_workers_on_one_host_run_each_trial_once_on(&url, &name, &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two workers whose clocks are off by 90 s either way (`TRADESIM_TEST_CLOCK_SKEW_SECONDS`, more than
/// `stale_seconds` = 2) share a study as if their clocks agreed: heartbeats and the stale cutoff use the
/// database's clock, so neither takes the other's live trials over, and every heartbeat is on the
/// database's time (here the real time: the tests' SQLite and PostgreSQL run on this machine).
fn skewed_clocks_do_not_matter_on(storage: &str, name: &str, dir: &Path) {
    let cfg = worker_config(dir);
    let skewed = |id: &str, skew: &str| {
        Command::new(bin())
            .args(["hyperopt", "--device", "cpu", "--config", cfg.to_str().unwrap(), "--storage", storage])
            .args(["--study-name", name, "--load-if-exists"])
            .env("TRADESIM_WORKER_ID", id)
            .env("TRADESIM_TEST_CLOCK_SKEW_SECONDS", skew)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = skewed("slow:1", "-90");
    let b = skewed("fast:1", "90");
    wait_ok(a);
    wait_ok(b);
    let trials = study_at(storage, name).unwrap().trials().unwrap();
    assert_eq!(trials.len(), 8, "{trials:#?}");
    let twice: Vec<u64> = trials.iter().filter(|t| t.runs != 1).map(|t| t.number).collect();
    assert!(twice.is_empty(), "trials {twice:?} ran more than once: {trials:#?}");
    let now = chrono::Utc::now().naive_utc();
    for t in &trials {
        let beat = t.heartbeat.as_deref().unwrap();
        let beat = chrono::NaiveDateTime::parse_from_str(beat, "%Y-%m-%d %H:%M:%S%.f").unwrap();
        let age = (now - beat).num_seconds();
        assert!((0..60).contains(&age), "trial {}: heartbeat {beat} is {age} s old (a worker's clock)", t.number);
    }
}

#[test]
fn skewed_clocks_do_not_matter_on_sqlite() {
    let dir = temp_dir("skew-sqlite");
    let storage = format!("sqlite:///{}", dir.join("study.sqlite").display());
    skewed_clocks_do_not_matter_on(&storage, "tradesim", &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn skewed_clocks_do_not_matter_on_postgres() {
    let Some(url) = postgres_url() else { return };
    let dir = temp_dir("skew-pg");
    let name = format!("skew-{}", std::process::id());
    skewed_clocks_do_not_matter_on(&url, &name, &dir);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Fencing: worker A claims trial 0 (run 1), then B takes it over (run 2). A's epoch, prune, validation
/// actions and finish are refused with an error that says why, and a refused finish writes nothing (the
/// check is in the write's transaction); B's writes are accepted. A trial never claimed may be written
/// directly (as `failed_trials_are_never_best` does).
fn a_taken_over_claim_cannot_write_on(storage: &str, name: &str) {
    use tradesim::hyperopt::study::{EpochRecord, Worker};
    let url = StorageUrl::parse(storage).unwrap();
    let a = Study::open_with(&url, name, tradesim::hyperopt::Open::Create, "{}").unwrap();
    let b = Study::reopen(&url, name).unwrap();
    let params: tradesim::hyperopt::sampler::Params = [("lr".to_owned(), 1e-3)].into();
    a.start(0, &params, &[]).unwrap();
    let worker = |n: &str| Worker { name: n.to_owned(), process: None };
    a.claim_for(&[(0, 0)], &worker("a:1")).unwrap();
    let epoch = |e: u64| EpochRecord { trial: 0, epoch: e, loss: 0.5, valid_sharpe: 1.5, valid_return: 0.25 };
    a.record_epoch(&epoch(0)).unwrap();
    b.claim_for(&[(0, 1)], &worker("b:1")).unwrap();
    let refused = |r: Result<(), tradesim::Error>| {
        let e = r.unwrap_err().to_string();
        assert!(e.contains("trial 0") && e.contains("taken over by b:1 (run 2)") && e.contains("refused"), "{e}");
    };
    refused(a.record_epoch(&epoch(1)));
    refused(a.prune(0, 1, 1.5));
    refused(a.set_valid_actions(0, &[1, 2]));
    refused(a.finish(0, 1.5, 0.1, 0.2, &[1], "a.safetensors"));
    let t = &b.trials().unwrap()[0];
    assert_eq!((t.status.as_str(), t.checkpoint.as_deref(), t.pruned_at, t.runs), ("running", None, None, 2));
    b.record_epoch(&epoch(1)).unwrap();
    b.finish(0, 2.5, 0.1, 0.2, &[1], "b.safetensors").unwrap();
    let t = &b.trials().unwrap()[0];
    assert_eq!((t.status.as_str(), t.value, t.checkpoint.as_deref()), ("complete", 2.5, Some("b.safetensors")));
    // A finished trial takes no more writes, even from its own worker.
    let e = b.record_epoch(&epoch(2)).unwrap_err().to_string();
    assert!(e.contains("trial 0 is COMPLETE"), "{e}");
}

#[test]
fn a_taken_over_claim_cannot_write_on_sqlite() {
    let dir = temp_dir("fence-sqlite");
    a_taken_over_claim_cannot_write_on(&format!("sqlite:///{}", dir.join("study.sqlite").display()), "tradesim");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_taken_over_claim_cannot_write_on_postgres() {
    let Some(url) = postgres_url() else { return };
    a_taken_over_claim_cannot_write_on(&url, &format!("fence-{}", std::process::id()));
}

/// A pruned trial stays RUNNING until its test evaluation and checkpoint are recorded; then it becomes
/// PRUNED with them in one transaction (so Optuna, which never reads a finished trial again, sees them),
/// and a finished trial is never restarted (no PRUNED -> RUNNING).
#[test]
fn a_pruned_trial_leaves_running_with_its_results() {
    let dir = temp_dir("pruned-order");
    let study = Study::open(&StorageUrl::Sqlite(dir.join("study.sqlite")), "tradesim", false, "{}").unwrap();
    let params: tradesim::hyperopt::sampler::Params = [("lr".to_owned(), 1e-3)].into();
    study.start(0, &params, &[]).unwrap();
    study.prune(0, 1, 0.5).unwrap();
    let t = &study.trials().unwrap()[0];
    assert_eq!((t.status.as_str(), t.pruned_at, t.finished()), ("running", Some(1), false));
    study.finish(0, 0.5, 0.125, 0.75, &[2], "trial-0.safetensors").unwrap();
    let t = &study.trials().unwrap()[0];
    assert_eq!(
        (t.status.as_str(), t.value, t.test_return, t.test_sharpe, t.checkpoint.as_deref()),
        ("pruned", 0.5, 0.125, 0.75, Some("trial-0.safetensors"))
    );
    let e = study.restart(0).unwrap_err().to_string();
    assert!(e.contains("trial 0 is PRUNED") && e.contains("never restarted"), "{e}");
    assert_eq!(study.trials().unwrap()[0].status, "pruned");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A trial whose worker stopped in each of its `max_runs` runs fails instead of running again: a finished
/// two-trial study is set back by hand as if trial 0's worker had died twice and trial 1's once (both
/// claimed by another host, heartbeats long stale); `--resume` with `max_runs = 2` fails trial 0 with the
/// reason as its `fail_reason` user attribute, runs trial 1 a second time, and runs trial 0 no more.
#[test]
fn a_trial_that_keeps_stopping_its_worker_fails_after_max_runs() {
    let dir = temp_dir("max-runs");
    let cfg = dir.join("search.toml");
    std::fs::write(
        &cfg,
        "[study]\ntrials = 2\nparallel = 2\nepochs = 2\nstartup_trials = 2\nenvs = 4\nsegment_len = 24\nseed = 9\n\
         heartbeat_seconds = 0.2\nstale_seconds = 2.0\nmax_runs = 2\n[space]\nhidden = 8\nbatch = 16\n",
    )
    .unwrap();
    let study = dir.join("study.sqlite");
    let (ok, _, stderr) = hyperopt(&["--config", cfg.to_str().unwrap(), "--study", study.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let db = Connection::open(&study).unwrap();
    for (number, runs) in [(0, 2), (1, 1)] {
        db.execute_batch(&format!(
            "UPDATE trials SET state = 'RUNNING', datetime_complete = NULL WHERE number = {number};
             UPDATE trial_system_attributes SET value_json = '{runs}'
               WHERE key = 'tradesim_runs' AND trial_id = (SELECT trial_id FROM trials WHERE number = {number});
             UPDATE trial_system_attributes SET value_json = '\"elsewhere:7\"'
               WHERE key = 'tradesim_worker' AND trial_id = (SELECT trial_id FROM trials WHERE number = {number});
             DELETE FROM trial_system_attributes WHERE key = 'tradesim_worker_process'
               AND trial_id = (SELECT trial_id FROM trials WHERE number = {number});
             UPDATE trial_heartbeats SET heartbeat = '2000-01-01 00:00:00.000000'
               WHERE trial_id = (SELECT trial_id FROM trials WHERE number = {number});"
        ))
        .unwrap();
    }
    drop(db);
    let (ok, _, stderr) = hyperopt(&["--study", study.to_str().unwrap(), "--resume"]);
    assert!(ok, "{stderr}");
    let trials = open(&study).unwrap().trials().unwrap();
    assert_eq!((trials[0].status.as_str(), trials[0].runs), ("fail", 2), "{trials:#?}");
    assert!(trials[1].finished() && trials[1].status != "fail" && trials[1].runs == 2, "{trials:#?}");
    let reason: String = Connection::open(&study)
        .unwrap()
        .query_row(
            "SELECT a.value_json FROM trial_user_attributes a JOIN trials t ON t.trial_id = a.trial_id
             WHERE t.number = 0 AND a.key = 'fail_reason'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(reason.contains("each of its 2 runs") && reason.contains("max_runs"), "{reason}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// A worker whose heartbeats keep failing (a trigger refuses every heartbeat update once its trials train)
/// retries, then, after `stale_seconds` without a beat, stops its trials rather than training on while
/// another worker may take them over: the search ends with an error that says why, its trials unfinished.
#[test]
fn a_worker_whose_heartbeats_keep_failing_stops_its_trials() {
    let dir = temp_dir("beats-lost");
    let cfg = dir.join("search.toml");
    std::fs::write(
        &cfg,
        "[study]\ntrials = 2\nparallel = 2\nepochs = 400\nstartup_trials = 2\nenvs = 4\nsegment_len = 24\nseed = 9\n\
         heartbeat_seconds = 0.1\nstale_seconds = 0.5\n[space]\nhidden = 8\nbatch = 16\n",
    )
    .unwrap();
    let study = dir.join("study.sqlite");
    let child = Command::new(bin())
        .args(["hyperopt", "--device", "cpu", "--config", cfg.to_str().unwrap(), "--study", study.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !open(&study).and_then(|s| s.epochs()).is_ok_and(|e| !e.is_empty()) {
        assert!(started.elapsed() < Duration::from_secs(60), "the worker never trained an epoch");
        std::thread::sleep(Duration::from_millis(20));
    }
    Connection::open(&study)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER no_beats BEFORE UPDATE ON trial_heartbeats
             BEGIN SELECT RAISE(ABORT, 'heartbeat refused by the test'); END;",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("heartbeats failed for") && stderr.contains("heartbeat refused by the test"), "{stderr}");
    let trials = open(&study).unwrap().trials().unwrap();
    assert!(trials.iter().all(|t| t.status == "running" && t.checkpoint.is_none()), "{trials:#?}");
    assert!(open(&study).unwrap().epochs().unwrap().len() < 2 * 400, "the trials trained on");
    std::fs::remove_dir_all(dir).unwrap();
}
