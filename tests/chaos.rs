//! Issue 45 item 3: chaos. Several `tradesim hyperopt --load-if-exists` workers on one study of 100 short
//! trials, killed at random moments and restarted, must leave the study a clean search would: every trial
//! number once, nothing RUNNING, every COMPLETE trial with its value, checkpoint file and epochs, and no
//! trial run more than twice; a trial runs again only when a kill interrupted it.
//!
//! The kills: SIGKILLs at seeded random moments while the workers train (the victim is stopped with SIGSTOP
//! first, so the trials it held are read from the study before it dies: exactly those may run twice; a
//! worker holding a trial already run twice is spared), two workers of the first generation abort right
//! after committing a trial's results (failpoint `finish`), and one late worker aborts halfway through
//! writing the report (failpoint `report`). Kills stop while enough of the budget is left that no worker
//! has started taking over others' trials (a worker only does so once every trial is claimed), so the
//! trials each kill interrupted are known exactly. PostgreSQL with 4 workers; SQLite with 2.

mod common;

use common::{bin, temp_dir};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tradesim::hyperopt::storage::StorageUrl;
use tradesim::hyperopt::study::{Study, TrialRecord};

const TRIALS: usize = 100;
const EPOCHS: u64 = 2;

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

/// A worker process and the name it records on the trials it claims.
struct Worker {
    child: Child,
    name: String,
}

struct Chaos {
    dir: PathBuf,
    cfg: PathBuf,
    storage: String,
    study: String,
}

impl Chaos {
    fn spawn(&self, name: String, failpoint: Option<&str>) -> Worker {
        let mut cmd = Command::new(bin());
        cmd.current_dir(&self.dir)
            .args(["hyperopt", "--device", "cpu", "--config", self.cfg.to_str().unwrap()])
            .args(["--storage", &self.storage, "--study-name", &self.study, "--load-if-exists"])
            .env("TRADESIM_WORKER_ID", &name)
            .env("RAYON_NUM_THREADS", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(f) = failpoint {
            cmd.env("TRADESIM_FAILPOINT", f);
        }
        Worker { child: cmd.spawn().unwrap(), name }
    }

    fn trials(&self) -> Vec<TrialRecord> {
        Study::reopen(&StorageUrl::parse(&self.storage).unwrap(), &self.study)
            .and_then(|s| s.trials())
            .unwrap_or_default()
    }

    /// The trials worker `name` holds now (RUNNING, claimed last by it).
    fn held_by(&self, name: &str) -> Vec<TrialRecord> {
        self.trials().into_iter().filter(|t| t.status == "running" && t.worker.as_deref() == Some(name)).collect()
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {}", child.id());
}

/// Runs the chaos on `storage` with `workers` workers (kill schedule seeded by `seed`), then checks the study.
fn chaos(storage: &str, workers: usize, name: &str, seed: u64) {
    let dir = temp_dir(name);
    let cfg = dir.join("search.toml");
    std::fs::write(
        &cfg,
        format!(
            "[study]\ntrials = {TRIALS}\nparallel = 3\nepochs = {EPOCHS}\nstartup_trials = 10\nenvs = 4\n\
             segment_len = 16\nseed = 5\nheartbeat_seconds = 0.5\nstale_seconds = 5\n\
             [space]\nhidden = 8\nbatch = 16\n"
        ),
    )
    .unwrap();
    let c =
        Chaos { dir: dir.clone(), cfg, storage: storage.to_owned(), study: format!("{name}-{}", std::process::id()) };
    let mut rng = Rng(seed | 1);
    // The trials each kill interrupted, and what happened, for the messages.
    let mut interrupted: BTreeSet<u64> = BTreeSet::new();
    let mut log: Vec<String> = Vec::new();
    let mut generation = 0;
    // Per slot of the pool: its running worker (None once one exited having finished) and whether it is a
    // first-generation worker armed to abort after committing a trial (never picked for a SIGKILL).
    let mut pool: Vec<Option<Worker>> = (0..workers)
        .map(|i| {
            Some(c.spawn(format!("chaos-w{i}-g0"), [Some("finish:3"), Some("finish:6")].get(i).copied().flatten()))
        })
        .collect();
    let mut armed: Vec<bool> = (0..workers).map(|i| i < 2).collect();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let (mut kills, mut aborts) = (0, 0);
    let mut next_kill = Instant::now() + Duration::from_millis(300 + rng.below(700));
    // Kills stop once this many trials exist: the rest of the budget keeps every worker sampling new trials
    // (none takes over another's until all are claimed), so each kill's interrupted trials are those read.
    let kill_phase = TRIALS * 6 / 10;
    // Every trial each live worker was seen holding (the study read every pass): what an abort interrupts
    // is what the worker held when it died, which the last reads cover (a failpoint abort comes at a
    // boundary, after its claims; nobody takes its trials over before it is restarted, every trial being
    // not yet claimed; SIGKILLs wait until the armed workers have aborted).
    let mut seen: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    while pool.iter().any(Option::is_some) {
        assert!(Instant::now() < deadline, "seed {seed}: the study did not finish in 600 s; {log:?}");
        for t in c.trials().into_iter().filter(|t| t.status == "running" && t.runs == 1) {
            seen.entry(t.worker.unwrap_or_default()).or_default().insert(t.number);
        }
        for i in 0..pool.len() {
            let Some(w) = pool[i].as_mut() else { continue };
            let Some(status) = w.child.try_wait().unwrap() else { continue };
            let w = pool[i].take().unwrap();
            if status.success() {
                continue;
            }
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut w.child.stderr.unwrap(), &mut stderr).unwrap();
            assert!(stderr.contains("failpoint finish:"), "seed {seed}: worker {} failed: {stderr}", w.name);
            // An abort at a failpoint: its trials are still its own (nobody takes over before every trial
            // is claimed, and it is restarted only now).
            let held = c.held_by(&w.name);
            assert!(held.iter().all(|t| t.runs == 1), "seed {seed}: {} held re-run trials: {held:?}", w.name);
            assert!(c.trials().len() < TRIALS, "seed {seed}: {} aborted after every trial was claimed", w.name);
            interrupted.extend(held.iter().map(|t| t.number));
            interrupted.extend(seen.get(&w.name).into_iter().flatten().copied());
            log.push(format!("{} aborted after a finish, holding {:?}", w.name, numbers(&held)));
            (aborts, generation, armed[i]) = (aborts + 1, generation + 1, false);
            pool[i] = Some(c.spawn(format!("chaos-w{i}-g{generation}"), None));
        }
        let count = c.trials().len();
        if count < kill_phase && !armed.contains(&true) && Instant::now() >= next_kill {
            next_kill = Instant::now() + Duration::from_millis(300 + rng.below(700));
            let i = rng.below(pool.len() as u64) as usize;
            if let Some(w) = pool[i].as_mut().filter(|_| !armed[i])
                && w.child.try_wait().unwrap().is_none()
            {
                signal(&w.child, "-STOP");
                let held = c.held_by(&w.name);
                if held.iter().any(|t| t.runs > 1) {
                    // Spared: a trial it holds already ran twice.
                    signal(&w.child, "-CONT");
                } else {
                    w.child.kill().unwrap();
                    w.child.wait().unwrap();
                    interrupted.extend(held.iter().map(|t| t.number));
                    log.push(format!("{} killed at {count} trials, holding {:?}", w.name, numbers(&held)));
                    (kills, generation) = (kills + 1, generation + 1);
                    pool[i] = Some(c.spawn(format!("chaos-w{i}-g{generation}"), None));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every worker finished (each wrote the report). One more aborts halfway through the report; the next
    // writes it whole.
    let mut w = c.spawn("chaos-report-1".to_owned(), Some("report:1"));
    let status = w.child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut w.child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success() && stderr.contains("failpoint report:1"), "seed {seed}: {stderr}");
    let mut w = c.spawn("chaos-report-2".to_owned(), None);
    assert!(w.child.wait().unwrap().success(), "seed {seed}: the worker after the report abort failed");

    let trials = c.trials();
    let study = Study::reopen(&StorageUrl::parse(storage).unwrap(), &c.study).unwrap();
    let epochs = study.epochs().unwrap();
    let summary = format!("seed {seed}, {kills} kills, {aborts} aborts: {log:?}");
    let numbers_seen: Vec<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers_seen, (0..TRIALS as u64).collect::<Vec<_>>(), "every trial number once; {summary}");
    assert!(trials.iter().all(TrialRecord::finished), "a trial left RUNNING; {summary}");
    let mut per_trial: BTreeMap<u64, u64> = BTreeMap::new();
    for e in &epochs {
        *per_trial.entry(e.trial).or_default() += 1;
    }
    for t in trials.iter().filter(|t| t.status == "complete") {
        assert!(t.value.is_finite(), "trial {} has no value; {summary}", t.number);
        let checkpoint = Path::new(t.checkpoint.as_deref().unwrap_or_default());
        let checkpoint = if checkpoint.is_absolute() { checkpoint.to_path_buf() } else { dir.join(checkpoint) };
        assert!(checkpoint.is_file(), "trial {}: no checkpoint at {}; {summary}", t.number, checkpoint.display());
        assert_eq!(per_trial.get(&t.number), Some(&EPOCHS), "trial {} epochs; {summary}", t.number);
    }
    assert!(trials.iter().all(|t| t.runs <= 2), "a trial ran more than twice; {summary}");
    let rerun: BTreeSet<u64> = trials.iter().filter(|t| t.runs == 2).map(|t| t.number).collect();
    assert!(
        rerun.is_subset(&interrupted),
        "re-run without an interruption: {:?}; {summary}",
        rerun.difference(&interrupted)
    );
    assert!(!rerun.is_empty() && kills >= 3 && aborts >= 2, "the chaos interrupted too little; {summary}");
    eprintln!(
        "chaos {name}: {TRIALS} trials, {kills} kills, {aborts} aborts, {} trials re-run, {:.1} s",
        rerun.len(),
        started.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(dir).unwrap();
}

fn numbers(trials: &[TrialRecord]) -> Vec<u64> {
    trials.iter().map(|t| t.number).collect()
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
    chaos(&url, 4, "chaos-pg", 0x5eed_0045);
}

#[test]
fn killed_and_restarted_workers_leave_a_clean_sqlite_study() {
    let dir = temp_dir("chaos-sqlite-db");
    let storage = format!("sqlite:///{}", dir.join("study.sqlite").display());
    chaos(&storage, 2, "chaos-sqlite", 0x5eed_0046);
    std::fs::remove_dir_all(dir).unwrap();
}
