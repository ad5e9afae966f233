//! The study, in Optuna's RDB schema (optuna 5.0.0, schema version 12; `docs/OPTUNA-SCHEMA.md`), so that
//! `optuna.load_study` and optuna-dashboard read it: the study (direction maximize, the configuration as a
//! user attribute `tradesim_config`), every trial's state (RUNNING, COMPLETE, PRUNED, FAIL), parameters with
//! their distributions, objective value, and each epoch's validation Sharpe as an intermediate value; test
//! metrics and the checkpoint as user attributes, the trial's history and prune epoch as system attributes.
//! What Optuna has no place for (per-epoch losses and returns, the greedy test actions) lives in
//! `tradesim_epochs`, `tradesim_test_actions` and `tradesim_valid_actions`, which Optuna ignores.
//! Each change is committed when it happens, so a killed search loses at most the trials it was running,
//! which `--resume` runs again under the same numbers and parameters.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::config::{Dimension, SearchConfig, is_integer};
use super::db::{Db, Val, timestamp};
use super::sampler::Params;
use super::storage::StorageUrl;
use crate::Error;

/// The Optuna schema version written (Optuna refuses a storage of another version).
pub const OPTUNA_SCHEMA_VERSION: i64 = 12;
/// The Optuna release whose schema this is.
pub const OPTUNA_LIBRARY_VERSION: &str = "5.0.0";
/// Optuna's alembic head for that schema.
pub const OPTUNA_ALEMBIC_HEAD: &str = "v3.2.0.a";
/// The study user attribute holding the search configuration.
pub const CONFIG_ATTR: &str = "tradesim_config";
/// The trial user attribute that says why a trial failed: its validation objective was undefined
/// ([`UNDEFINED_OBJECTIVE`]), or it ran `[study] max_runs` times and its worker stopped each time.
pub const FAIL_REASON_ATTR: &str = "fail_reason";
/// The reason a finished trial is a FAIL: its last validation epoch gave no objective.
pub const UNDEFINED_OBJECTIVE: &str = "the validation objective (the last epoch's Sharpe ratio) is undefined (NaN): \
     the policy traded but its returns had no variance, or its values were not finite";

/// Optuna's tables exactly as optuna 5.0.0 creates them on SQLite, then tradesim's own.
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS studies (study_id INTEGER NOT NULL, study_name VARCHAR(512) NOT NULL, PRIMARY KEY (study_id));
CREATE UNIQUE INDEX IF NOT EXISTS ix_studies_study_name ON studies (study_name);
CREATE TABLE IF NOT EXISTS version_info (version_info_id INTEGER NOT NULL, schema_version INTEGER,
  library_version VARCHAR(256), PRIMARY KEY (version_info_id), CHECK (version_info_id=1));
CREATE TABLE IF NOT EXISTS study_directions (study_direction_id INTEGER NOT NULL, direction VARCHAR(8) NOT NULL,
  study_id INTEGER NOT NULL, objective INTEGER NOT NULL, PRIMARY KEY (study_direction_id),
  UNIQUE (study_id, objective), FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE IF NOT EXISTS study_user_attributes (study_user_attribute_id INTEGER NOT NULL, study_id INTEGER,
  "key" VARCHAR(512), value_json TEXT, PRIMARY KEY (study_user_attribute_id), UNIQUE (study_id, "key"),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE IF NOT EXISTS study_system_attributes (study_system_attribute_id INTEGER NOT NULL, study_id INTEGER,
  "key" VARCHAR(512), value_json TEXT, PRIMARY KEY (study_system_attribute_id), UNIQUE (study_id, "key"),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE TABLE IF NOT EXISTS trials (trial_id INTEGER NOT NULL, number INTEGER, study_id INTEGER,
  state VARCHAR(8) NOT NULL, datetime_start DATETIME, datetime_complete DATETIME, PRIMARY KEY (trial_id),
  FOREIGN KEY(study_id) REFERENCES studies (study_id));
CREATE INDEX IF NOT EXISTS ix_trials_study_id ON trials (study_id);
CREATE TABLE IF NOT EXISTS trial_user_attributes (trial_user_attribute_id INTEGER NOT NULL, trial_id INTEGER,
  "key" VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_user_attribute_id), UNIQUE (trial_id, "key"),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS trial_system_attributes (trial_system_attribute_id INTEGER NOT NULL, trial_id INTEGER,
  "key" VARCHAR(512), value_json TEXT, PRIMARY KEY (trial_system_attribute_id), UNIQUE (trial_id, "key"),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS trial_params (param_id INTEGER NOT NULL, trial_id INTEGER, param_name VARCHAR(512),
  param_value FLOAT, distribution_json TEXT, PRIMARY KEY (param_id), UNIQUE (trial_id, param_name),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS trial_values (trial_value_id INTEGER NOT NULL, trial_id INTEGER NOT NULL,
  objective INTEGER NOT NULL, value FLOAT, value_type VARCHAR(7) NOT NULL, PRIMARY KEY (trial_value_id),
  UNIQUE (trial_id, objective), FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS trial_intermediate_values (trial_intermediate_value_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL, step INTEGER NOT NULL, intermediate_value FLOAT,
  intermediate_value_type VARCHAR(7) NOT NULL, PRIMARY KEY (trial_intermediate_value_id), UNIQUE (trial_id, step),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS trial_heartbeats (trial_heartbeat_id INTEGER NOT NULL, trial_id INTEGER NOT NULL,
  heartbeat DATETIME NOT NULL, PRIMARY KEY (trial_heartbeat_id), UNIQUE (trial_id),
  FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS alembic_version (version_num VARCHAR(32) NOT NULL,
  CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num));
CREATE TABLE IF NOT EXISTS tradesim_epochs (trial_id INTEGER NOT NULL, epoch INTEGER NOT NULL, loss FLOAT,
  valid_sharpe FLOAT, valid_return FLOAT, PRIMARY KEY (trial_id, epoch), FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS tradesim_test_actions (trial_id INTEGER NOT NULL, actions BLOB NOT NULL,
  PRIMARY KEY (trial_id), FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
CREATE TABLE IF NOT EXISTS tradesim_valid_actions (trial_id INTEGER NOT NULL, actions BLOB NOT NULL,
  PRIMARY KEY (trial_id), FOREIGN KEY(trial_id) REFERENCES trials (trial_id));
"#;

/// A trial as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialRecord {
    /// Trial number (0, 1, ...).
    pub number: u64,
    /// Parameters.
    pub params: Params,
    /// running, complete or pruned.
    pub status: String,
    /// The validation metric (NaN when undefined or not finished).
    pub value: f64,
    /// Epoch at which it was pruned.
    pub pruned_at: Option<u64>,
    /// Test-split total return and Sharpe of the greedy policy.
    pub test_return: f64,
    /// Test Sharpe.
    pub test_sharpe: f64,
    /// Weights file.
    pub checkpoint: Option<String>,
    /// Why it failed (its [`FAIL_REASON_ATTR`]; `None` unless its status is `fail`).
    pub fail_reason: Option<String>,
    /// The trials that were finished when this trial's number was issued (TPE sampled its parameters from
    /// them; the median rule compares it with the complete ones among them), ascending.
    pub history: Vec<u64>,
    /// Whether tradesim ran it (it has a history); a trial another Optuna worker added is not ours.
    pub ours: bool,
    /// The worker that last claimed it (`host:pid`).
    pub worker: Option<String>,
    /// How many times a worker claimed it (1; more when it was re-run after its worker died).
    pub runs: u64,
    /// Its last heartbeat (UTC, `YYYY-MM-DD HH:MM:SS.ffffff`, sortable as text).
    pub heartbeat: Option<String>,
    /// Where it ran: its batch, slot and the batch's epoch it started at (trials recorded by versions
    /// before slot refills have none).
    pub place: Option<Place>,
}

/// Where a trial runs: the batch (numbered by its first trial), the slot, and the batch's epoch at which
/// the trial started (0 for the batch's first trials; later for one started in a freed slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The batch's first trial number.
    pub batch: u64,
    /// The slot.
    pub slot: usize,
    /// The batch's epoch at which the trial started.
    pub tick: usize,
}

impl TrialRecord {
    /// Whether the trial is finished: it left RUNNING. tradesim moves a trial out of RUNNING once, in the
    /// transaction that records its test evaluation and checkpoint ([`Study::finish`]), or when it fails
    /// after `[study] max_runs` interrupted runs ([`Study::fail_interrupted`]); a trial pruned or finishing
    /// when its search was killed is still RUNNING. A trial of another Optuna worker is finished likewise.
    pub fn finished(&self) -> bool {
        self.status != "running"
    }
}

/// A search worker as recorded on the trials it claims: its name (`tradesim_worker`, shown) and, where the
/// system has `/proc`, its process ([`WorkerProcess`], `tradesim_worker_process`), the proof another worker
/// needs before it may judge from a process check that this one is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worker {
    /// `host:pid`, or `TRADESIM_WORKER_ID`.
    pub name: String,
    /// This process, where `/proc` tells.
    pub process: Option<WorkerProcess>,
}

/// A worker's process: the machine's boot (`/proc/sys/kernel/random/boot_id`, new at each boot of each
/// machine or VM), its PID namespace (the inode of `/proc/self/ns/pid`, one per container) and its PID in
/// that namespace. Two workers with the same boot and namespace see the same PIDs; otherwise a PID tells
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WorkerProcess {
    /// The machine's boot id.
    pub boot_id: String,
    /// The inode of the PID namespace.
    pub pid_namespace: u64,
    /// The PID in that namespace.
    pub pid: u32,
}

impl WorkerProcess {
    /// This process (`None` without `/proc`).
    pub fn this() -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?.trim().to_owned();
        let pid_namespace = std::fs::metadata("/proc/self/ns/pid").ok()?.ino();
        (!boot_id.is_empty()).then(|| Self { boot_id, pid_namespace, pid: std::process::id() })
    }

    /// Whether `other` runs on the same machine, since the same boot, in the same PID namespace: only then
    /// do its PIDs mean the same processes as this one's.
    pub fn shares_pids_with(&self, other: &Self) -> bool {
        self.boot_id == other.boot_id && self.pid_namespace == other.pid_namespace
    }
}

/// Trial numbers as ascending ranges, `0-4,7,9-12` (a trial's history in one short text however long the
/// study).
pub fn numbers_to_ranges(numbers: &[u64]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let mut j = i;
        while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
            j += 1;
        }
        out.push(if i == j { numbers[i].to_string() } else { format!("{}-{}", numbers[i], numbers[j]) });
        i = j + 1;
    }
    out.join(",")
}

/// The numbers of [`numbers_to_ranges`]' text.
pub fn ranges_to_numbers(text: &str) -> Result<Vec<u64>, Error> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || Error::Study(format!("`{part}` is not a trial number or range"));
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b) = (a.parse::<u64>().map_err(|_| bad())?, b.parse::<u64>().map_err(|_| bad())?);
        if b < a || out.last().is_some_and(|&l| a <= l) {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// One epoch of one trial.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochRecord {
    /// Trial.
    pub trial: u64,
    /// Epoch.
    pub epoch: u64,
    /// Mean loss of the last gradient step.
    pub loss: f64,
    /// Validation Sharpe.
    pub valid_sharpe: f64,
    /// Validation total return.
    pub valid_return: f64,
}

/// How [`Study::open_with`] treats an existing study.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Open {
    /// Create it; an existing study of that name is an error.
    Create,
    /// Continue it; it must exist.
    Resume,
    /// Create it, or join it when it exists (Optuna's `load_if_exists`).
    LoadIfExists,
}

/// An open study.
#[derive(Debug)]
pub struct Study {
    db: Db,
    study_id: i64,
    space: BTreeMap<String, Dimension>,
    /// The trials this handle claimed, with the run count of its claim ([`TrialRecord::runs`]): its writes
    /// to a trial are refused once another claim replaced it ([`Study::claim_for`]).
    claims: RefCell<HashMap<u64, u64>>,
}

/// Optuna's schema on PostgreSQL (its own `pg_dump -s`), run once in an empty database.
const POSTGRES_SCHEMA: &str = include_str!("optuna_postgres.sql");

/// tradesim's own tables on PostgreSQL.
const POSTGRES_TRADESIM: &str = "
CREATE TABLE IF NOT EXISTS tradesim_epochs (trial_id integer NOT NULL REFERENCES trials (trial_id), epoch integer NOT NULL,
  loss double precision, valid_sharpe double precision, valid_return double precision, PRIMARY KEY (trial_id, epoch));
CREATE TABLE IF NOT EXISTS tradesim_test_actions (trial_id integer NOT NULL PRIMARY KEY REFERENCES trials (trial_id),
  actions bytea NOT NULL);
CREATE TABLE IF NOT EXISTS tradesim_valid_actions (trial_id integer NOT NULL PRIMARY KEY REFERENCES trials (trial_id),
  actions bytea NOT NULL);
";

fn nan_to_null(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Optuna's value and type columns for a float: FINITE with the value, INF_POS / INF_NEG / NAN without.
fn typed(x: f64) -> (Option<f64>, &'static str) {
    if x.is_finite() {
        (Some(x), "FINITE")
    } else if x.is_nan() {
        (None, "NAN")
    } else if x > 0.0 {
        (None, "INF_POS")
    } else {
        (None, "INF_NEG")
    }
}

fn from_typed(value: Option<f64>, kind: &str) -> f64 {
    match kind {
        "FINITE" => value.unwrap_or(f64::NAN),
        "INF_POS" => f64::INFINITY,
        "INF_NEG" => f64::NEG_INFINITY,
        _ => f64::NAN,
    }
}

/// A number as JSON: an integer when `integer` and whole (Optuna's int parameters and choices).
fn number(x: f64, integer: bool) -> Value {
    if integer && x.fract() == 0.0 && x.abs() < 9.0e15 { json!(x as i64) } else { json!(x) }
}

/// Optuna's distribution of parameter `name` and the stored value of `value` under it: a range is a
/// FloatDistribution (IntDistribution for integer parameters), choices a CategoricalDistribution (the
/// value is the index of the choice), a fixed value a CategoricalDistribution of one choice.
fn distribution(space: &BTreeMap<String, Dimension>, name: &str, value: f64) -> (f64, Value) {
    let int = is_integer(name);
    let categorical = |choices: &[f64]| {
        let index = choices.iter().position(|c| *c == value).unwrap_or(0);
        let choices: Vec<Value> = choices.iter().map(|&c| number(c, int)).collect();
        (index as f64, json!({"name": "CategoricalDistribution", "attributes": {"choices": choices}}))
    };
    match space.get(name) {
        Some(Dimension::Range { low, high, log }) if int => (
            value,
            json!({"name": "IntDistribution", "attributes": {"log": log, "step": 1, "low": number(*low, true), "high": number(*high, true)}}),
        ),
        Some(Dimension::Range { low, high, log }) => (
            value,
            json!({"name": "FloatDistribution", "attributes": {"step": null, "low": low, "high": high, "log": log}}),
        ),
        Some(Dimension::Choice { choices }) if choices.contains(&value) => categorical(choices),
        _ => categorical(&[value]),
    }
}

/// The parameter value stored under a distribution (the choice at the index for a categorical).
fn param_value(stored: f64, distribution: &str) -> Result<f64, String> {
    let d: Value = serde_json::from_str(distribution).map_err(|e| format!("distribution JSON: {e}"))?;
    match d["name"].as_str() {
        Some("CategoricalDistribution") => {
            let choices =
                d["attributes"]["choices"].as_array().ok_or_else(|| "categorical without choices".to_owned())?;
            let choice = choices.get(stored as usize).ok_or_else(|| format!("choice index {stored} out of range"))?;
            choice.as_f64().ok_or_else(|| format!("choice {choice} is not a number"))
        }
        Some("FloatDistribution" | "IntDistribution") => Ok(stored),
        _ => Err(format!("unknown distribution {distribution}")),
    }
}

/// The worker's clock, for `datetime_start` and `datetime_complete` (Optuna's workers write theirs); no
/// decision depends on it (heartbeats and their cutoff use the database's clock, [`Study::beat`]).
/// `TRADESIM_TEST_CLOCK_SKEW_SECONDS` shifts it, for the tests that check that (like `TRADESIM_FAILPOINT`,
/// set only by tests).
fn now() -> String {
    static SKEW: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let skew = *SKEW.get_or_init(|| {
        std::env::var("TRADESIM_TEST_CLOCK_SKEW_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(0.0)
    });
    timestamp((chrono::Utc::now() + chrono::Duration::milliseconds((skew * 1e3) as i64)).naive_utc())
}

/// The database's clock now, in UTC and Optuna's format (`YYYY-MM-DD HH:MM:SS.ffffff`), as SQL: the
/// server's `now()` on PostgreSQL; SQLite's `'now'` (milliseconds, padded to Optuna's six digits).
fn db_now(db: &Db) -> &'static str {
    if db.is_postgres() { "(now() AT TIME ZONE 'UTC')" } else { "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')" }
}

fn i64_of(v: &Val) -> i64 {
    v.i64().unwrap_or(0)
}

/// Creates Optuna's schema (and tradesim's tables) where it is missing; checks the version where it is there.
fn ensure_schema(db: &Db, shown: &str) -> Result<(), Error> {
    if db.is_postgres() {
        db.begin()?;
        let made = (|| {
            // One creator at a time (workers may start together).
            db.query("SELECT pg_advisory_xact_lock(7146811)", &[])?;
            let exists = db.query(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'studies'",
                &[],
            )?;
            if exists.first().and_then(|r| r[0].i64()) == Some(0) {
                db.batch(POSTGRES_SCHEMA)?;
                db.exec(
                    "INSERT INTO version_info (version_info_id, schema_version, library_version) VALUES (1, ?1, ?2)",
                    &[Val::I64(OPTUNA_SCHEMA_VERSION), OPTUNA_LIBRARY_VERSION.into()],
                )?;
                db.exec("INSERT INTO alembic_version (version_num) VALUES (?1)", &[OPTUNA_ALEMBIC_HEAD.into()])?;
            }
            db.batch(POSTGRES_TRADESIM)
        })();
        match made {
            Ok(()) => db.commit()?,
            Err(e) => {
                db.rollback();
                return Err(e);
            }
        }
    } else {
        let own = db.query("SELECT COUNT(*) FROM sqlite_master WHERE name = 'meta'", &[])?;
        if own.first().and_then(|r| r[0].i64()).unwrap_or(0) > 0 {
            return Err(Error::Study(format!(
                "{shown}: a study in tradesim's schema before version 0.2 (not Optuna's); start a new study"
            )));
        }
        db.sqlite_wal()?;
        db.batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA}
             INSERT INTO version_info (version_info_id, schema_version, library_version)
                 VALUES (1, {OPTUNA_SCHEMA_VERSION}, '{OPTUNA_LIBRARY_VERSION}') ON CONFLICT DO NOTHING;
             INSERT INTO alembic_version (version_num) SELECT '{OPTUNA_ALEMBIC_HEAD}'
                 WHERE NOT EXISTS (SELECT 1 FROM alembic_version);
             COMMIT;"
        ))?;
    }
    let version = db.query("SELECT schema_version FROM version_info", &[])?;
    let version = version.first().and_then(|r| r[0].i64()).unwrap_or(0);
    if version != OPTUNA_SCHEMA_VERSION {
        return Err(Error::Study(format!(
            "{shown}: Optuna schema version {version}; tradesim writes version {OPTUNA_SCHEMA_VERSION} (optuna \
             {OPTUNA_LIBRARY_VERSION}); upgrade the storage with `optuna storage upgrade`"
        )));
    }
    Ok(())
}

fn study_id_of(db: &Db, name: &str) -> Result<Option<i64>, Error> {
    Ok(db.query("SELECT study_id FROM studies WHERE study_name = ?1", &[name.into()])?.first().map(|r| i64_of(&r[0])))
}

impl Study {
    /// Creates study `name` in `storage` (refusing to overwrite one of that name unless `resume`), or reopens
    /// it with `resume`. A storage may hold other studies (Optuna's or tradesim's); they are left alone.
    pub fn open(storage: &StorageUrl, name: &str, resume: bool, config_json: &str) -> Result<Self, Error> {
        Self::open_with(storage, name, if resume { Open::Resume } else { Open::Create }, config_json)
    }

    /// [`Study::open`] with Optuna's `load_if_exists` as a third way: create the study, or join it when it
    /// exists (two workers starting at once: one creates it, the other joins).
    pub fn open_with(storage: &StorageUrl, name: &str, how: Open, config_json: &str) -> Result<Self, Error> {
        let shown = storage.to_string();
        if let StorageUrl::Sqlite(path) = storage {
            if !path.exists() && how == Open::Resume {
                return Err(Error::Study(format!("--resume: no study at {}", path.display())));
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| Error::Study(format!("creating {}: {e}", dir.display())))?;
            }
        }
        let db = Db::connect(storage)?;
        ensure_schema(&db, &shown)?;
        let study_id = match (study_id_of(&db, name)?, how) {
            (Some(id), Open::Resume | Open::LoadIfExists) => {
                // A study another Optuna program created: tradesim adopts it with this configuration (its
                // trials stay theirs; TPE learns from them).
                let has = db.query(
                    "SELECT COUNT(*) FROM study_user_attributes WHERE study_id = ?1 AND key = ?2",
                    &[Val::I64(id), CONFIG_ATTR.into()],
                )?;
                if has.first().and_then(|r| r[0].i64()) == Some(0) {
                    let config: Value = serde_json::from_str(config_json)
                        .map_err(|e| Error::Study(format!("configuration JSON: {e}")))?;
                    let directions = db.query(
                        "SELECT direction FROM study_directions WHERE study_id = ?1 ORDER BY objective",
                        &[Val::I64(id)],
                    )?;
                    let directions: Vec<&str> = directions.iter().filter_map(|r| r[0].text()).collect();
                    if directions != ["MAXIMIZE"] {
                        return Err(Error::Study(format!(
                            "study `{name}` in {shown} has directions {directions:?}; tradesim maximizes one objective \
                             (the validation Sharpe)"
                        )));
                    }
                    db.exec(
                        "INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (?1, ?2, ?3)
                         ON CONFLICT (study_id, key) DO NOTHING",
                        &[Val::I64(id), CONFIG_ATTR.into(), config.to_string().into()],
                    )?;
                }
                id
            }
            (Some(_), Open::Create) => {
                return Err(Error::Study(format!(
                    "study `{name}` exists in {shown}: pass --resume to continue it, or choose another --study-name or \
                     --study"
                )));
            }
            (None, Open::Resume) => {
                let names: Vec<String> = db
                    .query("SELECT study_name FROM studies ORDER BY study_id", &[])?
                    .iter()
                    .filter_map(|r| r[0].text().map(str::to_owned))
                    .collect();
                return Err(Error::Study(format!(
                    "--resume: no study named `{name}` in {shown} (studies there: {})",
                    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                )));
            }
            (None, Open::Create | Open::LoadIfExists) => {
                let config: Value =
                    serde_json::from_str(config_json).map_err(|e| Error::Study(format!("configuration JSON: {e}")))?;
                db.begin()?;
                let created = (|| {
                    if db.is_postgres() {
                        db.query("SELECT pg_advisory_xact_lock(7146812)", &[])?;
                    }
                    // Another worker may have created it since the check (load_if_exists): join it then.
                    if let Some(id) = study_id_of(&db, name)? {
                        return if how == Open::LoadIfExists {
                            Ok(id)
                        } else {
                            Err(Error::Study(format!("study `{name}` exists in {shown}: pass --resume to continue it")))
                        };
                    }
                    let id = i64_of(
                        &db.query("INSERT INTO studies (study_name) VALUES (?1) RETURNING study_id", &[name.into()])?
                            [0][0],
                    );
                    db.exec(
                        "INSERT INTO study_directions (direction, study_id, objective) VALUES (?1, ?2, 0)",
                        &["MAXIMIZE".into(), Val::I64(id)],
                    )?;
                    db.exec(
                        "INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (?1, ?2, ?3)",
                        &[Val::I64(id), CONFIG_ATTR.into(), config.to_string().into()],
                    )?;
                    Ok(id)
                })();
                match created {
                    Ok(id) => {
                        db.commit()?;
                        id
                    }
                    Err(e) => {
                        db.rollback();
                        return Err(e);
                    }
                }
            }
        };
        Self::with(db, study_id)
    }

    fn with(db: Db, study_id: i64) -> Result<Self, Error> {
        let mut study = Self { db, study_id, space: BTreeMap::new(), claims: RefCell::new(HashMap::new()) };
        let cfg: SearchConfig = serde_json::from_str(&study.config_json()?).map_err(|e| {
            Error::Study(format!("the study's `{CONFIG_ATTR}` attribute is not a tradesim search configuration: {e}"))
        })?;
        study.space = cfg.space;
        Ok(study)
    }

    /// Another connection to study `name` (one per search worker).
    pub fn reopen(storage: &StorageUrl, name: &str) -> Result<Self, Error> {
        let db = Db::connect(storage)?;
        let id =
            study_id_of(&db, name)?.ok_or_else(|| Error::Study(format!("no study named `{name}` in {storage}")))?;
        Self::with(db, id)
    }

    /// The configuration the study was created with (JSON).
    pub fn config_json(&self) -> Result<String, Error> {
        let rows = self.db.query(
            "SELECT value_json FROM study_user_attributes WHERE study_id = ?1 AND key = ?2",
            &[Val::I64(self.study_id), CONFIG_ATTR.into()],
        )?;
        rows.first().and_then(|r| r[0].text().map(str::to_owned)).ok_or_else(|| {
            Error::Study(format!("the study has no `{CONFIG_ATTR}` attribute (not written by tradesim)"))
        })
    }

    /// Sets study user attribute `key` (JSON text), which optuna-dashboard shows beside the study.
    pub fn set_study_attr(&self, key: &str, json_text: String) -> Result<(), Error> {
        self.in_tx(|| {
            self.db.exec(
                "INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (?1, ?2, ?3)
                 ON CONFLICT (study_id, key) DO UPDATE SET value_json = excluded.value_json",
                &[Val::I64(self.study_id), key.into(), json_text.into()],
            )?;
            Ok(())
        })
    }

    /// Study user attribute `key` (JSON text), if set.
    pub fn study_attr(&self, key: &str) -> Result<Option<String>, Error> {
        let rows = self.db.query(
            "SELECT value_json FROM study_user_attributes WHERE study_id = ?1 AND key = ?2",
            &[Val::I64(self.study_id), key.into()],
        )?;
        Ok(rows.first().and_then(|r| r[0].text().map(str::to_owned)))
    }

    /// Runs `f` in a write transaction (SQLite: `BEGIN IMMEDIATE`, other writers wait; PostgreSQL: claims
    /// also lock the study's row, [`Study::lock`]), or inside the caller's transaction when one is open.
    /// Rolled back when `f` fails.
    pub fn in_tx<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        if self.db.in_transaction() {
            return f();
        }
        self.db.begin()?;
        match f() {
            Ok(v) => {
                self.db.commit()?;
                Ok(v)
            }
            Err(e) => {
                self.db.rollback();
                Err(e)
            }
        }
    }

    /// Serializes claims on this study until the open transaction ends (a worker reads the trials, decides
    /// and writes its claim while no other worker can claim).
    pub fn lock(&self) -> Result<(), Error> {
        self.db.lock_study(self.study_id)
    }

    fn trial_id(&self, number: u64) -> Result<i64, Error> {
        let rows = self.db.query(
            "SELECT trial_id FROM trials WHERE study_id = ?1 AND number = ?2",
            &[Val::I64(self.study_id), Val::I64(number as i64)],
        )?;
        rows.first().map(|r| i64_of(&r[0])).ok_or_else(|| Error::Study(format!("no trial {number}")))
    }

    fn set_attr(&self, table: &str, id: i64, key: &str, json_text: String) -> Result<(), Error> {
        self.db.exec(
            &format!(
                "INSERT INTO {table} (trial_id, key, value_json) VALUES (?1, ?2, ?3)
                 ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json"
            ),
            &[Val::I64(id), key.into(), json_text.into()],
        )?;
        Ok(())
    }

    /// Starts trial `number` with its parameters and the finished trials they were drawn from (`history`).
    pub fn start(&self, number: u64, params: &Params, history: &[u64]) -> Result<(), Error> {
        self.in_tx(|| {
            let id = i64_of(
                &self.db.query(
                    "INSERT INTO trials (number, study_id, state, datetime_start) VALUES (?1, ?2, ?3, ?4) RETURNING trial_id",
                    &[Val::I64(number as i64), Val::I64(self.study_id), "RUNNING".into(), Val::Time(now())],
                )?[0][0],
            );
            for (name, &value) in params {
                let (stored, dist) = distribution(&self.space, name, value);
                self.db.exec(
                    "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?1, ?2, ?3, ?4)",
                    &[Val::I64(id), name.as_str().into(), Val::F64(stored), dist.to_string().into()],
                )?;
            }
            self.set_attr("trial_system_attributes", id, "tradesim_history", json!(numbers_to_ranges(history)).to_string())
        })
    }

    /// Records where trial `number` runs ([`TrialRecord::place`]).
    pub fn place(&self, number: u64, place: Place) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            let value = json!([place.batch, place.slot, place.tick]).to_string();
            self.set_attr("trial_system_attributes", id, "tradesim_place", value)
        })
    }

    /// Restarts an interrupted trial (RUNNING: running, or pruned or finishing when its search was killed)
    /// under its number, parameters and history: its epochs and results removed, in one transaction. A
    /// finished trial is never restarted (Optuna never moves a trial out of COMPLETE, PRUNED or FAIL).
    pub fn restart(&self, number: u64) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            let state = self.db.query("SELECT state FROM trials WHERE trial_id = ?1", &[Val::I64(id)])?;
            let state = state.first().and_then(|r| r[0].text().map(str::to_owned)).unwrap_or_default();
            if state != "RUNNING" {
                return Err(Error::Study(format!("trial {number} is {state}: a finished trial is never restarted")));
            }
            for table in [
                "trial_intermediate_values",
                "trial_values",
                "trial_user_attributes",
                "tradesim_epochs",
                "tradesim_test_actions",
                "tradesim_valid_actions",
            ] {
                self.db.exec(&format!("DELETE FROM {table} WHERE trial_id = ?1"), &[Val::I64(id)])?;
            }
            // The interrupted run's artifact links go too (their files stay in the store, unlinked).
            self.db.exec(
                "DELETE FROM trial_system_attributes WHERE trial_id = ?1
                 AND (key = 'tradesim_pruned_at' OR key LIKE 'artifacts:%')",
                &[Val::I64(id)],
            )?;
            self.db.exec(
                "UPDATE trials SET datetime_start = ?2, datetime_complete = NULL WHERE trial_id = ?1",
                &[Val::I64(id), Val::Time(now())],
            )?;
            Ok(())
        })
    }

    /// Links an artifact to trial `number` as `optuna.artifacts.upload_artifact` does (the trial system
    /// attribute `artifacts:ID`, a JSON string holding the meta's JSON); refused unless this handle holds the trial's claim.
    pub fn link_artifact(&self, number: u64, meta: &super::artifacts::ArtifactMeta) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            self.check_owner(id, number)?;
            let key = format!("{}{}", super::artifacts::ARTIFACTS_ATTR_PREFIX, meta.artifact_id);
            // Optuna stores an attribute's value as JSON, and upload_artifact's value is itself JSON text.
            self.set_attr("trial_system_attributes", id, &key, json!(meta.to_json()).to_string())
        })
    }

    /// The artifacts linked to trial `number`, by file name.
    pub fn artifacts(&self, number: u64) -> Result<Vec<super::artifacts::ArtifactMeta>, Error> {
        let id = self.trial_id(number)?;
        let rows = self.db.query(
            "SELECT value_json FROM trial_system_attributes WHERE trial_id = ?1 AND key LIKE 'artifacts:%'",
            &[Val::I64(id)],
        )?;
        let mut out: Vec<_> = rows
            .iter()
            .filter_map(|r| super::artifacts::ArtifactMeta::from_json(&parse_json_text(r[0].text()?)?))
            .collect();
        out.sort_by(|a, b| a.filename.cmp(&b.filename));
        Ok(out)
    }

    /// Fails an interrupted trial that ran `runs` times, its worker stopping each time (`[study] max_runs`;
    /// Optuna fails stale trials too): state FAIL, the reason as user attribute [`FAIL_REASON_ATTR`].
    pub fn fail_interrupted(&self, number: u64, runs: u64) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            let reason = format!(
                "its worker stopped (died or went silent) in each of its {runs} runs; not run again (study.max_runs)"
            );
            self.set_attr("trial_user_attributes", id, FAIL_REASON_ATTR, json!(reason).to_string())?;
            self.db.exec(
                "UPDATE trials SET state = 'FAIL', datetime_complete = ?2 WHERE trial_id = ?1 AND state = 'RUNNING'",
                &[Val::I64(id), Val::Time(now())],
            )?;
            Ok(())
        })
    }

    /// Refuses a write to trial `number` (row `id`) from this handle unless it holds the trial's current
    /// claim: the run count it claimed is the trial's ([`TrialRecord::runs`]; every claim counts it up, in the
    /// claim's transaction) and the trial is RUNNING. A trial never claimed may be written by a handle that
    /// never claimed it (a study written directly, as the tests do). Called in the write's transaction, with
    /// the trial's row locked on PostgreSQL, so that no claim commits between the check and the write.
    fn check_owner(&self, id: i64, number: u64) -> Result<(), Error> {
        if self.db.is_postgres() {
            // The table lock a claim conflicts with first (it waits for a claim in flight, and a claim for
            // it), then the row: taking the row first could deadlock with a takeover of this trial.
            self.db.batch("LOCK TABLE trials IN ROW EXCLUSIVE MODE")?;
        }
        let lock = if self.db.is_postgres() { " FOR UPDATE" } else { "" };
        let state = self.db.query(&format!("SELECT state FROM trials WHERE trial_id = ?1{lock}"), &[Val::I64(id)])?;
        let state = state.first().and_then(|r| r[0].text().map(str::to_owned)).unwrap_or_default();
        let attrs = self.db.query(
            "SELECT key, value_json FROM trial_system_attributes WHERE trial_id = ?1 AND key IN ('tradesim_worker', 'tradesim_runs')",
            &[Val::I64(id)],
        )?;
        let attr = |k: &str| {
            attrs.iter().find(|r| r[0].text() == Some(k)).and_then(|r| serde_json::from_str::<Value>(r[1].text()?).ok())
        };
        let worker = attr("tradesim_worker").and_then(|v| v.as_str().map(str::to_owned));
        let runs = attr("tradesim_runs").and_then(|v| v.as_u64());
        let mine = self.claims.borrow().get(&number).copied();
        if state != "RUNNING" {
            return Err(Error::Study(format!("trial {number} is {state}: a write to a finished trial is refused")));
        }
        match (mine, runs) {
            (Some(m), Some(r)) if m == r => Ok(()),
            (None, None) => Ok(()),
            (Some(m), _) => Err(Error::Study(format!(
                "trial {number}: this worker's claim (run {m}) was taken over by {} (run {}) after this worker's \
                 heartbeats went stale; its write is refused and the trial is left to its new worker",
                worker.as_deref().unwrap_or("another worker"),
                runs.unwrap_or(0)
            ))),
            (None, Some(r)) => Err(Error::Study(format!(
                "trial {number} is claimed by {} (run {r}), not by this worker; its write is refused",
                worker.as_deref().unwrap_or("another worker")
            ))),
        }
    }

    /// Records an epoch: the validation Sharpe as Optuna's intermediate value (step = epoch), the rest in
    /// `tradesim_epochs`.
    pub fn record_epoch(&self, e: &EpochRecord) -> Result<(), Error> {
        let (value, kind) = typed(e.valid_sharpe);
        self.in_tx(|| {
            let id = self.trial_id(e.trial)?;
            self.check_owner(id, e.trial)?;
            self.db.exec(
                "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (trial_id, step) DO UPDATE SET
                 intermediate_value = excluded.intermediate_value, intermediate_value_type = excluded.intermediate_value_type",
                &[Val::I64(id), Val::I64(e.epoch as i64), value.into(), kind.into()],
            )?;
            self.db.exec(
                "INSERT INTO tradesim_epochs (trial_id, epoch, loss, valid_sharpe, valid_return) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (trial_id, epoch) DO UPDATE SET loss = excluded.loss, valid_sharpe = excluded.valid_sharpe,
                 valid_return = excluded.valid_return",
                &[
                    Val::I64(id),
                    Val::I64(e.epoch as i64),
                    nan_to_null(e.loss).into(),
                    nan_to_null(e.valid_sharpe).into(),
                    nan_to_null(e.valid_return).into(),
                ],
            )?;
            Ok(())
        })
    }

    fn set_value(&self, id: i64, value: f64) -> Result<(), Error> {
        let (v, kind) = typed(value);
        if kind != "NAN" {
            self.db.exec(
                "INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?1, 0, ?2, ?3)
                 ON CONFLICT (trial_id, objective) DO UPDATE SET value = excluded.value, value_type = excluded.value_type",
                &[Val::I64(id), v.into(), kind.into()],
            )?;
        }
        Ok(())
    }

    /// Records that a trial is pruned at `epoch` with its metric there as its value (Optuna stores a pruned
    /// trial's last intermediate value). The trial stays RUNNING until [`Study::finish`] records its test
    /// evaluation and checkpoint and makes it PRUNED in one transaction: Optuna's readers cache a finished
    /// trial and never read it again, so it must leave RUNNING with everything it will ever have.
    pub fn prune(&self, number: u64, epoch: u64, value: f64) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            self.check_owner(id, number)?;
            self.set_value(id, value)?;
            self.set_attr("trial_system_attributes", id, "tradesim_pruned_at", epoch.to_string())
        })
    }

    /// Finishes a trial with its test evaluation and checkpoint as user attributes and its greedy test
    /// actions, then its state: PRUNED when it was pruned ([`Study::prune`], value already recorded),
    /// otherwise COMPLETE with its value, FAIL when the value is NaN (the reason [`UNDEFINED_OBJECTIVE`] as
    /// user attribute [`FAIL_REASON_ATTR`]); all in one transaction.
    pub fn finish(
        &self,
        number: u64,
        value: f64,
        test_return: f64,
        test_sharpe: f64,
        test_actions: &[u8],
        checkpoint: &str,
    ) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            self.check_owner(id, number)?;
            let pruned = self.db.query(
                "SELECT COUNT(*) FROM trial_system_attributes WHERE trial_id = ?1 AND key = 'tradesim_pruned_at'",
                &[Val::I64(id)],
            )?;
            let pruned = pruned.first().and_then(|r| r[0].i64()).unwrap_or(0) > 0;
            for (key, v) in [
                ("test_return", json!(nan_to_null(test_return))),
                ("test_sharpe", json!(nan_to_null(test_sharpe))),
                ("checkpoint", json!(checkpoint)),
            ] {
                self.set_attr("trial_user_attributes", id, key, v.to_string())?;
            }
            self.db.exec(
                "INSERT INTO tradesim_test_actions (trial_id, actions) VALUES (?1, ?2)
                 ON CONFLICT (trial_id) DO UPDATE SET actions = excluded.actions",
                &[Val::I64(id), test_actions.into()],
            )?;
            let state = match (pruned, value.is_nan()) {
                (true, _) => "PRUNED",
                (false, true) => "FAIL",
                (false, false) => "COMPLETE",
            };
            if !pruned {
                self.set_value(id, value)?;
            }
            if state == "FAIL" {
                self.set_attr("trial_user_attributes", id, FAIL_REASON_ATTR, json!(UNDEFINED_OBJECTIVE).to_string())?;
            }
            self.db.exec(
                "UPDATE trials SET state = ?2, datetime_complete = ?3 WHERE trial_id = ?1",
                &[Val::I64(id), state.into(), Val::Time(now())],
            )?;
            Ok(())
        })
    }

    /// Attributes of every trial of the study: `(trial_id, key) -> JSON value`.
    fn attributes(&self, table: &str) -> Result<BTreeMap<(i64, String), Value>, Error> {
        let rows = self.db.query(
            &format!(
                "SELECT a.trial_id, a.key, a.value_json FROM {table} a JOIN trials t ON t.trial_id = a.trial_id
                 WHERE t.study_id = ?1"
            ),
            &[Val::I64(self.study_id)],
        )?;
        let mut out = BTreeMap::new();
        for r in rows {
            let key = r[1].text().unwrap_or_default().to_owned();
            let v: Value = serde_json::from_str(r[2].text().unwrap_or("null"))
                .map_err(|e| Error::Study(format!("attribute {key}: {e}")))?;
            out.insert((i64_of(&r[0]), key), v);
        }
        Ok(out)
    }

    /// Every trial, by number. A parameter row tradesim cannot read (a corrupt or hand-edited study) is an
    /// error naming the trial, never an empty parameter set.
    pub fn trials(&self) -> Result<Vec<TrialRecord>, Error> {
        let sid = [Val::I64(self.study_id)];
        let rows = self.db.query(
            "SELECT t.trial_id, t.number, t.state, v.value, v.value_type FROM trials t
             LEFT JOIN trial_values v ON v.trial_id = t.trial_id AND v.objective = 0
             WHERE t.study_id = ?1 ORDER BY t.number",
            &sid,
        )?;
        let mut params_of: BTreeMap<i64, Vec<(String, f64, String)>> = BTreeMap::new();
        for r in self.db.query(
            "SELECT p.trial_id, p.param_name, p.param_value, p.distribution_json FROM trial_params p
             JOIN trials t ON t.trial_id = p.trial_id WHERE t.study_id = ?1",
            &sid,
        )? {
            params_of.entry(i64_of(&r[0])).or_default().push((
                r[1].text().unwrap_or_default().to_owned(),
                r[2].f64().unwrap_or(f64::NAN),
                r[3].text().unwrap_or_default().to_owned(),
            ));
        }
        let user = self.attributes("trial_user_attributes")?;
        let system = self.attributes("trial_system_attributes")?;
        let beats: BTreeMap<i64, String> = self
            .db
            .query(
                "SELECT h.trial_id, h.heartbeat FROM trial_heartbeats h JOIN trials t ON t.trial_id = h.trial_id
                 WHERE t.study_id = ?1",
                &sid,
            )?
            .iter()
            .filter_map(|r| Some((i64_of(&r[0]), r[1].text()?.to_owned())))
            .collect();
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let (id, number) = (i64_of(&r[0]), i64_of(&r[1]));
            let state = r[2].text().unwrap_or_default().to_owned();
            let attr = |m: &BTreeMap<(i64, String), Value>, k: &str| m.get(&(id, k.to_owned())).cloned();
            let float = |k: &str| attr(&user, k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
            let (history, ours) = match attr(&system, "tradesim_history") {
                Some(Value::String(text)) => (
                    ranges_to_numbers(&text)
                        .map_err(|e| Error::Study(format!("trial {number}: stored history: {e}")))?,
                    true,
                ),
                _ => (Vec::new(), false),
            };
            let mut params = Params::new();
            for (name, stored, dist) in params_of.remove(&id).unwrap_or_default() {
                match param_value(stored, &dist) {
                    Ok(v) => {
                        params.insert(name, v);
                    }
                    // Another Optuna worker's parameter tradesim cannot use (a text choice, say) is left out.
                    Err(_) if !ours => {}
                    Err(e) => return Err(Error::Study(format!("trial {number}: stored parameters: {name}: {e}"))),
                }
            }
            out.push(TrialRecord {
                number: number as u64,
                params,
                status: state.to_lowercase(),
                value: r[4].text().map_or(f64::NAN, |k| from_typed(r[3].f64(), k)),
                pruned_at: attr(&system, "tradesim_pruned_at").and_then(|v| v.as_u64()),
                test_return: float("test_return"),
                test_sharpe: float("test_sharpe"),
                checkpoint: attr(&user, "checkpoint").and_then(|v| v.as_str().map(str::to_owned)),
                fail_reason: attr(&user, FAIL_REASON_ATTR)
                    .filter(|_| state == "FAIL")
                    .and_then(|v| v.as_str().map(str::to_owned)),
                history,
                ours,
                worker: attr(&system, "tradesim_worker").and_then(|v| v.as_str().map(str::to_owned)),
                runs: attr(&system, "tradesim_runs").and_then(|v| v.as_u64()).unwrap_or(0),
                heartbeat: beats.get(&id).cloned(),
                place: attr(&system, "tradesim_place").and_then(|v| {
                    let a = v.as_array()?;
                    let at = |i: usize| a.get(i).and_then(Value::as_u64);
                    Some(Place { batch: at(0)?, slot: at(1)? as usize, tick: at(2)? as usize })
                }),
            });
        }
        Ok(out)
    }

    /// Claims trials for `worker`: `claims` holds each trial's number and its claims so far (its
    /// [`TrialRecord::runs`], 0 for a new trial), counted up by one; records the worker's name and process
    /// and writes their heartbeats (in the caller's transaction, or one of its own). This handle's writes to
    /// them are accepted until another claim replaces this one.
    pub fn claim_for(&self, claims: &[(u64, u64)], worker: &Worker) -> Result<(), Error> {
        self.in_tx(|| {
            for &(n, runs) in claims {
                let id = self.trial_id(n)?;
                self.set_attr("trial_system_attributes", id, "tradesim_worker", json!(worker.name).to_string())?;
                self.set_attr("trial_system_attributes", id, "tradesim_runs", (runs + 1).to_string())?;
                match &worker.process {
                    Some(p) => self.set_attr("trial_system_attributes", id, "tradesim_worker_process", json!(p).to_string())?,
                    None => {
                        self.db.exec(
                            "DELETE FROM trial_system_attributes WHERE trial_id = ?1 AND key = 'tradesim_worker_process'",
                            &[Val::I64(id)],
                        )?;
                    }
                }
                self.claims.borrow_mut().insert(n, runs + 1);
            }
            self.beat(&claims.iter().map(|c| c.0).collect::<Vec<_>>(), worker)
        })
    }

    /// Writes the heartbeats of those of trials `numbers` that `worker` holds (its name and process are the
    /// trial's), at the database's time (Optuna's `trial_heartbeats`, which it also writes with the
    /// database's `now()`): a worker's clock never decides whether a trial is stale.
    pub fn beat(&self, numbers: &[u64], worker: &Worker) -> Result<(), Error> {
        let name = json!(worker.name).to_string();
        let process = worker.process.as_ref().map(|p| json!(p).to_string());
        let sql = format!(
            "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?1, {})
             ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
            db_now(&self.db)
        );
        self.in_tx(|| {
            for &n in numbers {
                let id = self.trial_id(n)?;
                let holder = self.db.query(
                    "SELECT key, value_json FROM trial_system_attributes WHERE trial_id = ?1
                     AND key IN ('tradesim_worker', 'tradesim_worker_process')",
                    &[Val::I64(id)],
                )?;
                let attr = |k: &str| holder.iter().find(|r| r[0].text() == Some(k)).and_then(|r| r[1].text());
                if attr("tradesim_worker") == Some(name.as_str())
                    && attr("tradesim_worker_process") == process.as_deref()
                {
                    self.db.exec(&sql, &[Val::I64(id)])?;
                }
            }
            Ok(())
        })
    }

    /// The database's time `seconds` ago, in the format of [`TrialRecord::heartbeat`]: the cutoff before
    /// which a heartbeat is stale, on the clock that wrote it.
    pub fn db_time_ago(&self, seconds: f64) -> Result<String, Error> {
        let rows = if self.db.is_postgres() {
            self.db.query("SELECT (now() AT TIME ZONE 'UTC') - make_interval(secs => ?1)", &[Val::F64(seconds)])?
        } else {
            self.db.query(
                "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now', ?1) || '000'",
                &[format!("-{seconds:.3} seconds").into()],
            )?
        };
        rows.first()
            .and_then(|r| r[0].text().map(str::to_owned))
            .ok_or_else(|| Error::Study("the database did not tell its time".to_owned()))
    }

    /// The process of the worker that last claimed each trial, where recorded ([`WorkerProcess`]).
    pub fn worker_processes(&self) -> Result<BTreeMap<u64, WorkerProcess>, Error> {
        let rows = self.db.query(
            "SELECT t.number, a.value_json FROM trial_system_attributes a JOIN trials t ON t.trial_id = a.trial_id
             WHERE t.study_id = ?1 AND a.key = 'tradesim_worker_process'",
            &[Val::I64(self.study_id)],
        )?;
        // A record this version cannot read proves nothing: that trial's heartbeat decides.
        Ok(rows.iter().filter_map(|r| Some((i64_of(&r[0]) as u64, serde_json::from_str(r[1].text()?).ok()?))).collect())
    }

    /// Every epoch of every trial.
    pub fn epochs(&self) -> Result<Vec<EpochRecord>, Error> {
        let rows = self.db.query(
            "SELECT t.number, e.epoch, e.loss, e.valid_sharpe, e.valid_return FROM tradesim_epochs e
             JOIN trials t ON t.trial_id = e.trial_id WHERE t.study_id = ?1 ORDER BY t.number, e.epoch",
            &[Val::I64(self.study_id)],
        )?;
        Ok(rows
            .iter()
            .map(|r| EpochRecord {
                trial: i64_of(&r[0]) as u64,
                epoch: i64_of(&r[1]) as u64,
                loss: r[2].f64().unwrap_or(f64::NAN),
                valid_sharpe: r[3].f64().unwrap_or(f64::NAN),
                valid_return: r[4].f64().unwrap_or(f64::NAN),
            })
            .collect())
    }

    /// A trial's greedy actions on the test split.
    pub fn test_actions(&self, number: u64) -> Result<Option<Vec<u8>>, Error> {
        self.actions("tradesim_test_actions", number)
    }

    /// A trial's greedy actions on the validation split, those of its last reported epoch (whose
    /// validation Sharpe is its value): with its parameters they reproduce its per-bar validation returns.
    pub fn valid_actions(&self, number: u64) -> Result<Option<Vec<u8>>, Error> {
        self.actions("tradesim_valid_actions", number)
    }

    /// Records a trial's greedy validation actions ([`Self::valid_actions`]); called before the trial
    /// finishes, so a reader that sees it finished finds them.
    pub fn set_valid_actions(&self, number: u64, actions: &[u8]) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            self.check_owner(id, number)?;
            self.db.exec(
                "INSERT INTO tradesim_valid_actions (trial_id, actions) VALUES (?1, ?2)
                 ON CONFLICT (trial_id) DO UPDATE SET actions = excluded.actions",
                &[Val::I64(id), actions.into()],
            )?;
            Ok(())
        })
    }

    fn actions(&self, table: &str, number: u64) -> Result<Option<Vec<u8>>, Error> {
        let id = self.trial_id(number)?;
        let rows = self.db.query(&format!("SELECT actions FROM {table} WHERE trial_id = ?1"), &[Val::I64(id)])?;
        Ok(rows.first().and_then(|r| r[0].blob().map(<[u8]>::to_vec)))
    }
}

/// The text a JSON string literal holds (`None` when `json` is not one).
fn parse_json_text(json: &str) -> Option<String> {
    serde_json::from_str::<String>(json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histories_round_trip_as_ranges() {
        for numbers in [vec![], vec![3], vec![0, 1, 2, 3, 4], vec![0, 1, 2, 5, 7, 8, 9, 12]] {
            let text = numbers_to_ranges(&numbers);
            assert_eq!(ranges_to_numbers(&text).unwrap(), numbers, "{text}");
        }
        assert_eq!(numbers_to_ranges(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        for bad in ["x", "3-1", "4,2", "1-2,2", "-1"] {
            assert!(ranges_to_numbers(bad).is_err(), "{bad}");
        }
    }

    /// A trial finished with an undefined (NaN) value is a FAIL whose reason the study stores as the
    /// `fail_reason` user attribute (what Optuna shows) and the trial records carry; a complete one has none.
    #[test]
    fn a_failed_trial_keeps_its_reason() {
        let dir = std::env::temp_dir().join(format!("tradesim-fail-reason-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("study.sqlite");
        let _ = std::fs::remove_file(&path);
        let study = Study::open(&StorageUrl::Sqlite(path), "t", false, "{}").unwrap();
        let params: Params = [("lr".to_owned(), 1e-3)].into();
        for n in 0..2 {
            study.start(n, &params, &[]).unwrap();
        }
        study.finish(0, f64::NAN, 0.0, 0.0, &[], "a").unwrap();
        study.finish(1, 0.25, 0.0, 0.0, &[], "b").unwrap();
        let trials = study.trials().unwrap();
        assert_eq!((trials[0].status.as_str(), trials[0].fail_reason.as_deref()), ("fail", Some(UNDEFINED_OBJECTIVE)));
        assert_eq!((trials[1].status.as_str(), trials[1].fail_reason.as_deref()), ("complete", None));
        let stored = study.attributes("trial_user_attributes").unwrap();
        let reasons: Vec<&Value> =
            stored.iter().filter(|((_, key), _)| key == FAIL_REASON_ATTR).map(|(_, v)| v).collect();
        assert_eq!(reasons, [&json!(UNDEFINED_OBJECTIVE)], "one trial's reason, as an Optuna user attribute");
        drop(study);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
