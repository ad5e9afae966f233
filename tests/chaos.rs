//! Issue 45 item 3: chaos. Several `tradesim hyperopt --load-if-exists` workers on one study of 100 short
//! trials, killed at random moments and restarted, must leave the study a clean search would: every trial
//! number once, nothing RUNNING, every COMPLETE trial with its value, checkpoint file and epochs, no trial
//! run more than twice (`max_runs = 2`: a trial interrupted in both runs fails), a trial run again only
//! when something interrupted it, and each trial a kill interrupted run again (or failed) as it must.
//!
//! The kills, seeded: SIGKILLs of random workers after random numbers of finished trials, each a random
//! moment later (while a worker trains, claims or commits; one while the last trials run and the other
//! workers wait to take over; one once every trial has finished, while the workers still alive write their
//! reports).
//! The victim is stopped (SIGSTOP) first, so the trials it held are read from the study before it dies:
//! exactly those must run again. Two workers of the first generation abort right after committing a
//! trial's results (failpoint `finish`), and once the study is done a worker aborts halfway through
//! writing the report (failpoint `report`) and the next writes it whole. Every dead worker is restarted.
//! PostgreSQL with 4 workers; SQLite with 2.

mod common;

use common::{bin, temp_dir};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tradesim::hyperopt::storage::StorageUrl;
use tradesim::hyperopt::study::{Study, TrialRecord, UNDEFINED_OBJECTIVE};

/// The study's trials: 100, or `TRADESIM_CHAOS_TRIALS` (the long run of `scripts/scale-postgres.sh --chaos`).
fn study_trials() -> usize {
    std::env::var("TRADESIM_CHAOS_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(100)
}
const EPOCHS: u64 = 2;
/// `[study] max_runs`: a trial interrupted in its second run fails rather than run a third time.
const MAX_RUNS: u64 = 2;

/// A seeded xorshift generator: the kill schedule of a seed is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A worker process, the name it records on the trials it claims, and the file its stderr goes to.
struct Worker {
    child: Child,
    name: String,
    stderr: PathBuf,
}

impl Worker {
    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

struct Chaos {
    dir: PathBuf,
    cfg: PathBuf,
    storage: String,
    study: String,
    seed: u64,
    /// The test's own connection to the study, once a worker has created it.
    reader: RefCell<Option<Study>>,
}

impl Chaos {
    fn spawn(&self, name: String, failpoint: Option<&str>, report: Option<&Path>) -> Worker {
        let stderr = self.dir.join(format!("{name}.stderr"));
        let mut cmd = Command::new(bin());
        cmd.current_dir(&self.dir)
            .args(["hyperopt", "--device", "cpu", "--synthetic", "1500", "--config", self.cfg.to_str().unwrap()])
            .args(["--storage", &self.storage, "--study-name", &self.study, "--load-if-exists"])
            .env("TRADESIM_WORKER_ID", &name)
            .env("RAYON_NUM_THREADS", "1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if let Some(f) = failpoint {
            cmd.env("TRADESIM_FAILPOINT", f);
        }
        if let Some(r) = report {
            cmd.args(["--report", r.to_str().unwrap()]);
        }
        Worker { child: cmd.spawn().unwrap(), name, stderr }
    }

    /// The study's trials; an error before the first worker has created the study.
    fn trials(&self) -> Result<Vec<TrialRecord>, tradesim::Error> {
        let mut reader = self.reader.borrow_mut();
        if reader.is_none() {
            *reader = Some(Study::reopen(&StorageUrl::parse(&self.storage).unwrap(), &self.study)?);
        }
        reader.as_ref().expect("just opened").trials()
    }

    /// Kills worker `w` so that what it interrupted is known: stopped (SIGSTOP), a pause for a commit it had
    /// already sent to land, the trials it holds read (number, run), then SIGKILLed.
    fn kill(&self, w: &mut Worker) -> Vec<(u64, u64)> {
        signal(&w.child, "-STOP");
        std::thread::sleep(Duration::from_millis(100));
        let trials = self.trials().unwrap_or_else(|e| panic!("seed {}: reading the study: {e}", self.seed));
        w.child.kill().unwrap();
        w.child.wait().unwrap();
        held_by(&trials, &w.name)
    }
}

/// The trials worker `name` holds in `trials` (RUNNING, claimed last by it), with their runs.
fn held_by(trials: &[TrialRecord], name: &str) -> Vec<(u64, u64)> {
    trials
        .iter()
        .filter(|t| t.status == "running" && t.worker.as_deref() == Some(name))
        .map(|t| (t.number, t.runs))
        .collect()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {}", child.id());
}

/// The finished-trial counts after which a worker is killed: `n` of them, sorted; one while the last trials
/// run, one once every trial has finished.
fn kill_schedule(rng: &mut Rng, n: usize) -> Vec<usize> {
    let mut at: Vec<usize> = (2..n).map(|_| 2 + rng.below(study_trials() as u64 - 10) as usize).collect();
    at.extend([study_trials() - 1 - rng.below(6) as usize, study_trials()]);
    at.sort_unstable();
    at
}

/// The kill schedule's seed: `TRADESIM_CHAOS_SEED` (to replay a failure's schedule, or try others), else
/// the test's own. The schedule replays; the workers' timing does not, so a replay may take another course.
fn seed_or(default: u64) -> u64 {
    std::env::var("TRADESIM_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// Runs the chaos on `storage` with `workers` workers and `scheduled` kills (schedule seeded by `seed`), then
/// checks the study.
fn chaos(storage: &str, workers: usize, scheduled: usize, name: &str, seed: u64) {
    let dir = temp_dir(name);
    let cfg = dir.join("search.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\ntrials = {}\nparallel = 3\nepochs = {EPOCHS}\nstartup_trials = 10\nenvs = 4\n\
             segment_len = 16\nseed = 5\nheartbeat_seconds = 0.5\nstale_seconds = 5\nmax_runs = {MAX_RUNS}\n\
             [space]\nhidden = 8\nbatch = 16\n",
            study_trials()
        ),
    )
    .unwrap();
    let study = format!("{name}-{}", std::process::id());
    let c = Chaos { dir: dir.clone(), cfg, storage: storage.to_owned(), study, seed, reader: RefCell::new(None) };
    let mut rng = Rng(seed | 1);
    let schedule = kill_schedule(&mut rng, scheduled);
    // What each kill interrupted, exactly (trial, run); what each abort may have (every trial its worker was
    // seen holding: a trial it held may be taken over before the study is read after the abort).
    let mut killed: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut aborted: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut seen: BTreeMap<String, BTreeSet<(u64, u64)>> = BTreeMap::new();
    let mut log: Vec<String> = Vec::new();
    let mut generation = 0;
    // Per slot: its worker (None once one exited having finished), and whether it is a first-generation
    // worker armed to abort after committing a trial (never picked for a SIGKILL).
    let mut pool: Vec<Option<Worker>> = (0..workers)
        .map(|i| {
            Some(c.spawn(
                format!("chaos-w{i}-g0"),
                [Some("finish:3"), Some("finish:6")][..].get(i).copied().flatten(),
                None,
            ))
        })
        .collect();
    let mut armed: Vec<bool> = (0..workers).map(|i| i < 2).collect();
    let started = Instant::now();
    // 300 s for the CI sizes; a long run (TRADESIM_CHAOS_TRIALS) a tenth of a second a trial.
    let limit = (study_trials() as u64 / 10).max(300);
    let deadline = started + Duration::from_secs(limit);
    let (mut kills, mut aborts, mut next) = (0, 0, 0);
    let mut kill_at: Option<Instant> = None;
    while pool.iter().any(Option::is_some) {
        assert!(Instant::now() < deadline, "seed {seed}: the study did not finish in {limit} s; {log:?}");
        let trials = match c.trials() {
            Ok(trials) => trials,
            Err(_) if c.reader.borrow().is_none() => Vec::new(), // no worker has created the study yet
            Err(e) => panic!("seed {seed}: reading the study: {e}"),
        };
        for t in trials.iter().filter(|t| t.status == "running") {
            seen.entry(t.worker.clone().unwrap_or_default()).or_default().insert((t.number, t.runs));
        }
        for i in 0..pool.len() {
            let Some(w) = pool[i].as_mut() else { continue };
            let Some(status) = w.child.try_wait().unwrap() else { continue };
            let w = pool[i].take().unwrap();
            if status.success() {
                continue;
            }
            let stderr = w.stderr_text();
            assert!(stderr.contains("failpoint finish:"), "seed {seed}: worker {} failed: {stderr}", w.name);
            let now = c.trials().unwrap_or_else(|e| panic!("seed {seed}: reading the study: {e}"));
            let held = held_by(&now, &w.name);
            aborted.extend(held.iter().copied().chain(seen.get(&w.name).into_iter().flatten().copied()));
            log.push(format!("{} aborted after a finish, holding {held:?}", w.name));
            (aborts, generation, armed[i]) = (aborts + 1, generation + 1, false);
            pool[i] = Some(c.spawn(format!("chaos-w{i}-g{generation}"), None, None));
        }
        let finished = trials.iter().filter(|t| t.finished()).count();
        if kill_at.is_none() && schedule.get(next).is_some_and(|&n| finished >= n) {
            // Within about the time a few trials take (a study of 100 tiny trials runs in seconds), so that
            // each kill lands before the next one is due and the schedule is spent before the study ends.
            kill_at = Some(Instant::now() + Duration::from_millis(rng.below(100)));
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            (kill_at, next) = (None, next + 1);
            let live: Vec<usize> = (0..pool.len()).filter(|&i| pool[i].is_some() && !armed[i]).collect();
            if !live.is_empty() {
                let i = live[rng.below(live.len() as u64) as usize];
                let w = pool[i].as_mut().unwrap();
                let held = c.kill(w);
                killed.extend(held.iter().copied());
                log.push(format!("{} killed at {finished} finished, holding {held:?}", w.name));
                (kills, generation) = (kills + 1, generation + 1);
                pool[i] = Some(c.spawn(format!("chaos-w{i}-g{generation}"), None, None));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = format!("seed {seed} (replay: TRADESIM_CHAOS_SEED={seed}), {kills} kills, {aborts} aborts: {log:?}");
    check_report(&c, &summary);

    let trials = c.trials().unwrap();
    let numbers: Vec<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..study_trials() as u64).collect::<Vec<_>>(), "every trial number once; {summary}");
    assert!(trials.iter().all(TrialRecord::finished), "a trial left RUNNING; {summary}");
    let epochs = c.reader.borrow().as_ref().expect("the study was read").epochs().unwrap();
    let mut per_trial: BTreeMap<u64, u64> = BTreeMap::new();
    for e in &epochs {
        *per_trial.entry(e.trial).or_default() += 1;
    }
    for t in trials.iter().filter(|t| t.status == "complete") {
        assert!(t.value.is_finite(), "trial {} has no value; {summary}", t.number);
        let checkpoint = dir.join(t.checkpoint.as_deref().unwrap_or_default());
        assert!(checkpoint.is_file(), "trial {}: no checkpoint at {}; {summary}", t.number, checkpoint.display());
        assert_eq!(per_trial.get(&t.number), Some(&EPOCHS), "trial {} epochs; {summary}", t.number);
    }
    let bad_runs: Vec<(u64, u64)> =
        trials.iter().filter(|t| !(1..=MAX_RUNS).contains(&t.runs)).map(|t| (t.number, t.runs)).collect();
    assert!(bad_runs.is_empty(), "trials run more than {MAX_RUNS} times (number, runs): {bad_runs:?}; {summary}");
    let runs: BTreeMap<u64, u64> = trials.iter().map(|t| (t.number, t.runs)).collect();
    // Failed because their worker stopped in both runs (a trial may also fail for an undefined objective).
    let spent: BTreeSet<u64> = trials
        .iter()
        .filter(|t| t.status == "fail" && t.fail_reason.as_deref() != Some(UNDEFINED_OBJECTIVE))
        .map(|t| t.number)
        .collect();
    let interrupted_in = |run: u64| -> BTreeSet<u64> {
        killed.iter().chain(&aborted).filter(|(_, r)| *r == run).map(|(n, _)| *n).collect()
    };
    let rerun: BTreeSet<u64> = runs.iter().filter(|(_, r)| **r == 2).map(|(n, _)| *n).collect();
    let unexplained: Vec<u64> = rerun.difference(&interrupted_in(1)).copied().collect();
    assert!(unexplained.is_empty(), "re-run though nothing interrupted them: {unexplained:?}; {summary}");
    let unexplained: Vec<u64> = spent.difference(&interrupted_in(2)).copied().collect();
    assert!(
        unexplained.is_empty(),
        "failed for stopped workers though not interrupted twice: {unexplained:?}; {summary}"
    );
    for &(n, run) in &killed {
        let t = &trials[n as usize];
        let ok = if run < MAX_RUNS { t.runs == run + 1 } else { spent.contains(&n) };
        assert!(ok, "trial {n}, killed in run {run}, ended {} after {} runs; {summary}", t.status, t.runs);
    }
    assert!(
        kills * 2 >= scheduled && aborts == 2 && killed.iter().any(|(_, r)| *r == 1),
        "the chaos interrupted too little (under half the scheduled kills, an abort missing, or no trial killed in \
         its first run); {summary}"
    );
    eprintln!(
        "chaos {name}: {} trials, {kills} kills ({} trial runs interrupted), {aborts} aborts, {} re-run, {} \
         failed after {MAX_RUNS} interrupted runs, {:.1} s",
        study_trials(),
        killed.len(),
        rerun.len(),
        spent.len(),
        started.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Once the study is done: a worker aborts halfway through its report (the leaderboard written, the page
/// not); the next one writes it whole, every trial on its leaderboard.
fn check_report(c: &Chaos, summary: &str) {
    let report = c.dir.join("final-report");
    let mut w = c.spawn("chaos-report-1".to_owned(), Some("report:1"), Some(&report));
    let status = w.child.wait().unwrap();
    assert!(!status.success() && w.stderr_text().contains("failpoint report:1"), "{}; {summary}", w.stderr_text());
    assert!(
        report.join("leaderboard.json").is_file() && !report.join("index.html").exists(),
        "half a report; {summary}"
    );
    let mut w = c.spawn("chaos-report-2".to_owned(), None, Some(&report));
    assert!(w.child.wait().unwrap().success(), "the report after the abort: {}; {summary}", w.stderr_text());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("leaderboard.json")).unwrap()).unwrap();
    let listed = json["trials"].as_array().map_or(0, Vec::len);
    assert_eq!(listed, study_trials(), "trials on the rewritten leaderboard; {summary}");
    assert!(report.join("index.html").is_file(), "no page after the rewrite; {summary}");
}

#[test]
fn killed_and_restarted_workers_leave_a_clean_postgres_study() {
    let url = std::env::var("TRADESIM_POSTGRES_URL").ok();
    assert!(
        url.is_some() || std::env::var_os("CI").is_none(),
        "CI must run the chaos test: TRADESIM_POSTGRES_URL is unset"
    );
    let Some(url) = url else {
        eprintln!("skipped: TRADESIM_POSTGRES_URL is unset (scripts/test.sh sets it)");
        return;
    };
    chaos(&url, 4, 10, "chaos-pg", seed_or(0x5eed_0045));
}

#[test]
fn killed_and_restarted_workers_leave_a_clean_sqlite_study() {
    let dir = temp_dir("chaos-sqlite-db");
    let storage = format!("sqlite:///{}", dir.join("study.sqlite").display());
    chaos(&storage, 2, 8, "chaos-sqlite", seed_or(0x5eed_0046));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The long chaos of issue 54 item 4, not in CI (ignored): `TRADESIM_CHAOS_TRIALS` trials (10,000 from
/// `scripts/scale-postgres.sh --chaos`) on PostgreSQL with 8 workers and a kill every 50 trials on average
/// throughout the study, checked as the short one is.
#[test]
#[ignore = "hours: run by scripts/scale-postgres.sh --chaos"]
fn long_chaos() {
    let url = std::env::var("TRADESIM_POSTGRES_URL").expect("TRADESIM_POSTGRES_URL names the server");
    chaos(&url, 8, (study_trials() / 50).max(10), "chaos-long", seed_or(0x5eed_0054));
}
