//! Issue 45 item 2: each finished trial's checkpoint and test ledger uploaded to an Optuna artifact store
//! (`--artifacts DIR`, or `[study] artifacts`) and linked to the trial as `optuna.artifacts.upload_artifact`
//! links it; the real optuna and optuna-dashboard's API find them (`tests/optuna_artifacts.py`, run with
//! the python of `scripts/setup-optuna.sh`, which `scripts/test.sh` sets as `TRADESIM_OPTUNA_PYTHON`).

mod common;

use common::{bin, temp_dir};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use tradesim::hyperopt::storage::StorageUrl;
use tradesim::hyperopt::study::Study;

#[test]
fn finished_trials_upload_their_checkpoint_and_ledger_as_optuna_artifacts() {
    let dir = temp_dir("artifacts");
    let (store, unused) = (dir.join("store"), dir.join("unused-store"));
    let cfg = dir.join("search.toml");
    // Pruning on, so pruned trials (finished too) have their files; the TOML key names another store,
    // which the flag overrides.
    std::fs::write(
        &cfg,
        format!(
            "[study]\ntrials = 6\nparallel = 3\nepochs = 3\nstartup_trials = 3\nprune_startup_trials = 2\nenvs = 4\n\
             segment_len = 24\nseed = 11\nartifacts = \"{}\"\n",
            unused.display()
        ),
    )
    .unwrap();
    let study_path = dir.join("study.sqlite");
    let out = Command::new(bin())
        .args(["hyperopt", "--device", "cpu", "--config", cfg.to_str().unwrap()])
        .args(["--study", study_path.to_str().unwrap(), "--artifacts", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!unused.exists(), "the flag overrides the TOML key");

    let storage = StorageUrl::Sqlite(study_path.clone());
    let study = Study::reopen(&storage, "tradesim").unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(trials.len(), 6);
    assert!(trials.iter().any(|t| t.status == "pruned"), "the search pruned no trial: {trials:?}");
    let mut expected: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for t in &trials {
        let metas = study.artifacts(t.number).unwrap();
        let names: Vec<&str> = metas.iter().map(|m| m.filename.as_str()).collect();
        let (weights, ledger) = (format!("trial-{}.safetensors", t.number), format!("trial-{}-trades.csv", t.number));
        assert_eq!(names, [ledger.as_str(), weights.as_str()], "trial {}", t.number);
        let file = |name: &str| store.join(&metas.iter().find(|m| m.filename == name).unwrap().artifact_id);
        // The checkpoint's bytes are the local checkpoint's.
        let local = PathBuf::from(t.checkpoint.as_deref().unwrap());
        assert_eq!(std::fs::read(file(&weights)).unwrap(), std::fs::read(&local).unwrap(), "trial {}", t.number);
        let csv = std::fs::read_to_string(file(&ledger)).unwrap();
        assert!(csv.starts_with("column,"), "trial {}: {csv}", t.number);
        assert!(metas.iter().all(|m| m.encoding.is_none()));
        assert_eq!(
            metas.iter().map(|m| m.mimetype.as_str()).collect::<Vec<_>>(),
            ["text/csv", "application/octet-stream"]
        );
        expected.insert(
            t.number.to_string(),
            [(weights, local), (ledger.clone(), file(&ledger))]
                .into_iter()
                .map(|(name, path)| (name, path.display().to_string()))
                .collect(),
        );
    }
    // The best trial's ledger is the report's best-trades.csv (the same replay, times and columns).
    let best: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("study-tradesim").join("report").join("leaderboard.json")).unwrap(),
    )
    .unwrap();
    let best_number = best["trials"][0]["number"].as_u64().unwrap();
    if best["trials"][0]["status"] == "complete" {
        let ledger = &expected[&best_number.to_string()][&format!("trial-{best_number}-trades.csv")];
        assert_eq!(
            std::fs::read_to_string(ledger).unwrap(),
            std::fs::read_to_string(dir.join("study-tradesim").join("report").join("best-trades.csv")).unwrap()
        );
    }
    // The store holds these files and nothing half-written.
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 2 * trials.len());

    let Ok(python) = std::env::var("TRADESIM_OPTUNA_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run the Optuna check: TRADESIM_OPTUNA_PYTHON is unset");
        eprintln!("skipped the optuna part: TRADESIM_OPTUNA_PYTHON is unset (scripts/test.sh sets it)");
        return std::fs::remove_dir_all(dir).unwrap();
    };
    let expected_path = dir.join("expected.json");
    std::fs::write(&expected_path, serde_json::to_string(&expected).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/optuna_artifacts.py");
    let out = Command::new(python)
        .args([script, &format!("sqlite:///{}", study_path.display()), "tradesim", store.to_str().unwrap()])
        .arg(&expected_path)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("artifacts ok: 6 trials, 12 files"), "{text}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--artifacts` is stored with the study it creates, as an absolute path: a worker that joins the study
/// without the flag uploads to the same store; a joiner's own flag wins for that joiner; a study created
/// without a store has none.
#[test]
fn a_joining_worker_uses_the_store_the_study_was_created_with() {
    use tradesim::job::{Job, JobArgs};
    let dir = temp_dir("artifacts-join");
    let (store, other) = (dir.join("shared-store"), dir.join("own-store"));
    let args = |study: &str, artifacts: Option<&PathBuf>, join: bool| JobArgs {
        study: Some(dir.join(study)),
        artifacts: artifacts.cloned(),
        load_if_exists: join,
        trials: Some(2),
        ..JobArgs::default()
    };
    let created = Job::prepare(&args("a.sqlite", Some(&store), false)).unwrap();
    assert_eq!(created.paths.artifacts.as_ref().map(|s| s.dir().to_path_buf()), Some(store.clone()));
    assert_eq!(created.cfg.study.artifacts.as_deref(), store.to_str(), "the flag is stored");
    let joined = Job::prepare(&args("a.sqlite", None, true)).unwrap();
    assert_eq!(joined.paths.artifacts.as_ref().map(|s| s.dir().to_path_buf()), Some(store.clone()));
    let own = Job::prepare(&args("a.sqlite", Some(&other), true)).unwrap();
    assert_eq!(own.paths.artifacts.as_ref().map(|s| s.dir().to_path_buf()), Some(other));
    let plain = Job::prepare(&args("b.sqlite", None, false)).unwrap();
    assert!(plain.paths.artifacts.is_none() && plain.cfg.study.artifacts.is_none());
    assert!(Job::prepare(&args("b.sqlite", None, true)).unwrap().paths.artifacts.is_none());
    std::fs::remove_dir_all(dir).unwrap();
}

/// A relative `--artifacts` is stored as the absolute path it names here; a creator that cannot create its
/// store leaves no study behind; a joiner that cannot create the stored store is told where the path came
/// from and how to name another.
#[test]
fn the_stored_store_is_absolute_and_a_joiner_is_told_where_it_came_from() {
    use tradesim::job::{Job, JobArgs};
    let args = JobArgs { artifacts: Some(PathBuf::from("relative/store")), ..JobArgs::default() };
    let stored = args.configure().unwrap().study.artifacts.unwrap();
    let stored = PathBuf::from(stored);
    assert!(stored.is_absolute() && stored.ends_with("relative/store"), "{}", stored.display());
    assert_eq!(stored, std::env::current_dir().unwrap().join("relative/store"));

    let dir = temp_dir("artifacts-unreachable");
    // A file where the store's folder would be: the store cannot be created.
    let blocked = dir.join("blocked");
    std::fs::write(&blocked, "").unwrap();
    let study = dir.join("s.sqlite");
    let create = JobArgs { study: Some(study.clone()), artifacts: Some(blocked.join("store")), ..JobArgs::default() };
    let message = Job::prepare(&create).unwrap_err().to_string();
    assert!(message.contains("cannot create") && message.contains("blocked"), "{message}");
    assert!(!study.exists(), "the creator left no study behind");

    // A study whose store was created, then made unreachable: a joiner inherits the store and fails.
    let shared = dir.join("shared");
    let create = JobArgs { study: Some(study.clone()), artifacts: Some(shared.join("store")), ..JobArgs::default() };
    Job::prepare(&create).unwrap();
    std::fs::remove_dir_all(&shared).unwrap();
    std::fs::write(&shared, "").unwrap();
    let join = JobArgs { study: Some(study), load_if_exists: true, ..JobArgs::default() };
    let message = Job::prepare(&join).unwrap_err().to_string();
    assert!(message.contains("study `tradesim`'s configuration") && message.contains("--artifacts"), "{message}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two studies in one folder (issue 56 item 1): each writes under its own folder (`STEM-NAME/` beside its
/// file), every checkpoint the first recorded keeps its bytes after the second ran, the recorded paths are
/// absolute (the study was named relative to another working directory), and a study sent into another's
/// folder is refused with both named.
#[test]
fn two_studies_in_one_folder_keep_their_own_checkpoints() {
    let dir = temp_dir("study-folders");
    let cfg = dir.join("search.toml");
    std::fs::write(&cfg, "[study]\ntrials = 2\nparallel = 2\nepochs = 1\nenvs = 4\nsegment_len = 24\nseed = 5\n")
        .unwrap();
    // Each study named relative to `dir`, run from `dir`.
    let search = |study: &str, extra: &[&str]| {
        Command::new(bin())
            .current_dir(&dir)
            .args(["hyperopt", "--device", "cpu", "--config", "search.toml", "--study", study])
            .args(extra)
            .output()
            .unwrap()
    };
    let recorded = |study: &str| -> BTreeMap<PathBuf, Vec<u8>> {
        let trials = Study::reopen(&StorageUrl::Sqlite(dir.join(study)), "tradesim").unwrap().trials().unwrap();
        assert_eq!(trials.len(), 2, "{study}");
        trials
            .iter()
            .map(|t| {
                let path = PathBuf::from(t.checkpoint.as_deref().unwrap());
                assert!(path.is_absolute(), "{study}: {}", path.display());
                let bytes = std::fs::read(&path).unwrap();
                (path, bytes)
            })
            .collect()
    };
    let out = search("s1.sqlite", &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = recorded("s1.sqlite");
    assert!(first.keys().all(|p| p.starts_with(dir.join("s1-tradesim").join("checkpoints"))), "{first:?}");
    assert!(dir.join("s1-tradesim").join("report").join("index.html").is_file());

    let out = search("s2.sqlite", &["--seed", "6"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second = recorded("s2.sqlite");
    assert!(second.keys().all(|p| p.starts_with(dir.join("s2-tradesim"))), "{second:?}");
    assert_eq!(recorded("s1.sqlite"), first, "the first study's checkpoints changed");
    // A second study in the first one's file has a folder of its own too.
    let out = search("s1.sqlite", &["--study-name", "other"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.join("s1-other").join("checkpoints").join("trial-0.safetensors").is_file());
    assert_eq!(recorded("s1.sqlite"), first, "the first study's checkpoints changed");

    // A report folder another study owns is refused before anything is written, naming both studies.
    let report_before = std::fs::read(dir.join("s1-tradesim/report/leaderboard.json")).unwrap();
    let out = search("s3.sqlite", &["--report", "s1-tradesim/report"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("s1.sqlite") && stderr.contains("s3.sqlite"), "{stderr}");
    assert!(!dir.join("s3.sqlite").exists(), "the refused study was created");
    assert_eq!(std::fs::read(dir.join("s1-tradesim/report/leaderboard.json")).unwrap(), report_before);
    assert_eq!(recorded("s1.sqlite"), first);
    std::fs::remove_dir_all(dir).unwrap();
}
