//! The study, in Optuna's RDB schema (optuna 5.0.0, schema version 12; `docs/OPTUNA-SCHEMA.md`), so that
//! `optuna.load_study` and optuna-dashboard read it: the study (direction maximize, the configuration as a
//! user attribute `tradesim_config`), every trial's state (RUNNING, COMPLETE, PRUNED, FAIL), parameters with
//! their distributions, objective value, and each epoch's validation Sharpe as an intermediate value; test
//! metrics and the checkpoint as user attributes, the trial's history and prune epoch as system attributes.
//! What Optuna has no place for (per-epoch losses and returns, the greedy test actions) lives in
//! `tradesim_epochs` and `tradesim_test_actions`, which Optuna ignores.
//! Each change is committed when it happens, so a killed search loses at most the trials it was running,
//! which `--resume` runs again under the same numbers and parameters.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Value, json};

use super::config::{Dimension, SearchConfig, is_integer};
use super::sampler::Params;
use super::storage::StorageUrl;

/// The Optuna schema version written (Optuna refuses a storage of another version).
pub const OPTUNA_SCHEMA_VERSION: i64 = 12;
/// The Optuna release whose schema this is.
pub const OPTUNA_LIBRARY_VERSION: &str = "5.0.0";
/// Optuna's alembic head for that schema.
pub const OPTUNA_ALEMBIC_HEAD: &str = "v3.2.0.a";
/// The study user attribute holding the search configuration.
pub const CONFIG_ATTR: &str = "tradesim_config";

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
}

impl TrialRecord {
    /// Whether the trial is finished: its test evaluation and checkpoint are recorded (complete, pruned or
    /// fail). A trial that is running, or was pruned or finishing when its search was killed, is not. A trial
    /// of another Optuna worker is finished once it left RUNNING.
    pub fn finished(&self) -> bool {
        self.checkpoint.is_some() || (!self.ours && self.status != "running")
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
pub fn ranges_to_numbers(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("`{part}` is not a trial number or range");
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

/// A row of the trials query: trial id, number, state, objective value and its type.
type TrialRow = (i64, i64, String, Option<f64>, Option<String>);

/// An open study.
#[derive(Debug)]
pub struct Study {
    conn: Connection,
    study_id: i64,
    space: BTreeMap<String, Dimension>,
}

fn sql(e: rusqlite::Error) -> String {
    format!("study database: {e}")
}

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
            let choices = d["attributes"]["choices"].as_array().ok_or("categorical without choices")?;
            let choice = choices.get(stored as usize).ok_or_else(|| format!("choice index {stored} out of range"))?;
            choice.as_f64().ok_or_else(|| format!("choice {choice} is not a number"))
        }
        Some("FloatDistribution" | "IntDistribution") => Ok(stored),
        _ => Err(format!("unknown distribution {distribution}")),
    }
}

fn now() -> String {
    timestamp(chrono::Utc::now())
}

/// A UTC time as Optuna writes it (`YYYY-MM-DD HH:MM:SS.ffffff`; text order is time order).
pub fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

fn sqlite_path(storage: &StorageUrl) -> Result<&Path, String> {
    match storage {
        StorageUrl::Sqlite(path) => Ok(path),
        other => Err(format!("{other}: PostgreSQL storage is not built yet (issue 14); use sqlite:///PATH")),
    }
}

fn connect(path: &Path) -> Result<Connection, String> {
    let conn = Connection::open(path).map_err(sql)?;
    conn.busy_timeout(std::time::Duration::from_secs(60)).map_err(sql)?;
    Ok(conn)
}

impl Study {
    /// Creates study `name` in `storage` (refusing to overwrite one of that name unless `resume`), or reopens
    /// it with `resume`. A storage may hold other studies (Optuna's or tradesim's); they are left alone.
    pub fn open(storage: &StorageUrl, name: &str, resume: bool, config_json: &str) -> Result<Self, String> {
        Self::open_with(storage, name, if resume { Open::Resume } else { Open::Create }, config_json)
    }

    /// [`Study::open`] with Optuna's `load_if_exists` as a third way: create the study, or join it when it
    /// exists (two workers starting at once: one creates it, the other joins).
    pub fn open_with(storage: &StorageUrl, name: &str, how: Open, config_json: &str) -> Result<Self, String> {
        let resume = how == Open::Resume;
        let path = sqlite_path(storage)?;
        if !path.exists() && resume {
            return Err(format!("--resume: no study at {}", path.display()));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        let conn = connect(path)?;
        let own_schema: bool = conn
            .query_row("SELECT COUNT(*) > 0 FROM sqlite_master WHERE name = 'meta'", [], |r| r.get(0))
            .map_err(sql)?;
        if own_schema {
            return Err(format!(
                "{}: a study in tradesim's schema before version 0.2 (not Optuna's); start a new study",
                path.display()
            ));
        }
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;").map_err(sql)?;
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA}
             INSERT OR IGNORE INTO version_info (version_info_id, schema_version, library_version)
                 VALUES (1, {OPTUNA_SCHEMA_VERSION}, '{OPTUNA_LIBRARY_VERSION}');
             INSERT INTO alembic_version (version_num) SELECT '{OPTUNA_ALEMBIC_HEAD}'
                 WHERE NOT EXISTS (SELECT 1 FROM alembic_version);
             COMMIT;"
        ))
        .map_err(sql)?;
        let version: i64 = conn.query_row("SELECT schema_version FROM version_info", [], |r| r.get(0)).map_err(sql)?;
        if version != OPTUNA_SCHEMA_VERSION {
            return Err(format!(
                "{}: Optuna schema version {version}; tradesim writes version {OPTUNA_SCHEMA_VERSION} (optuna \
                 {OPTUNA_LIBRARY_VERSION}); upgrade the storage with `optuna storage upgrade`",
                path.display()
            ));
        }
        let existing: Option<i64> = conn
            .query_row("SELECT study_id FROM studies WHERE study_name = ?1", params![name], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        let study_id = match (existing, resume) {
            (Some(id), false) if how == Open::LoadIfExists => id,
            (Some(_), false) => {
                return Err(format!(
                    "study `{name}` exists in {}: pass --resume to continue it, or choose another --study-name or \
                     --study",
                    path.display()
                ));
            }
            (Some(id), true) => id,
            (None, true) => {
                let names: Vec<String> = conn
                    .prepare("SELECT study_name FROM studies ORDER BY study_id")
                    .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
                    .map_err(sql)?;
                return Err(format!(
                    "--resume: no study named `{name}` in {} (studies there: {})",
                    path.display(),
                    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                ));
            }
            (None, false) => {
                let config: Value =
                    serde_json::from_str(config_json).map_err(|e| format!("configuration JSON: {e}"))?;
                let tx = conn.unchecked_transaction().map_err(sql)?;
                tx.execute("INSERT INTO studies (study_name) VALUES (?1)", params![name]).map_err(sql)?;
                let id = tx.last_insert_rowid();
                tx.execute(
                    "INSERT INTO study_directions (direction, study_id, objective) VALUES ('MAXIMIZE', ?1, 0)",
                    params![id],
                )
                .map_err(sql)?;
                tx.execute(
                    "INSERT INTO study_user_attributes (study_id, key, value_json) VALUES (?1, ?2, ?3)",
                    params![id, CONFIG_ATTR, config.to_string()],
                )
                .map_err(sql)?;
                tx.commit().map_err(sql)?;
                id
            }
        };
        Self::with(conn, study_id)
    }

    fn with(conn: Connection, study_id: i64) -> Result<Self, String> {
        let mut study = Self { conn, study_id, space: BTreeMap::new() };
        let cfg: SearchConfig = serde_json::from_str(&study.config_json()?).unwrap_or_default();
        study.space = cfg.space;
        Ok(study)
    }

    /// Another connection to study `name` (one per search worker).
    pub fn reopen(storage: &StorageUrl, name: &str) -> Result<Self, String> {
        let path = sqlite_path(storage)?;
        let conn = connect(path)?;
        let study_id: i64 = conn
            .query_row("SELECT study_id FROM studies WHERE study_name = ?1", params![name], |r| r.get(0))
            .optional()
            .map_err(sql)?
            .ok_or_else(|| format!("no study named `{name}` in {}", path.display()))?;
        Self::with(conn, study_id)
    }

    /// The configuration the study was created with (JSON).
    pub fn config_json(&self) -> Result<String, String> {
        let text: String = self
            .conn
            .query_row(
                "SELECT value_json FROM study_user_attributes WHERE study_id = ?1 AND key = ?2",
                params![self.study_id, CONFIG_ATTR],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?
            .ok_or_else(|| format!("the study has no `{CONFIG_ATTR}` attribute (not written by tradesim)"))?;
        Ok(text)
    }

    /// Runs `f` in a write transaction (`BEGIN IMMEDIATE`: other writers wait, so what `f` reads stays true
    /// until it commits), or inside the caller's transaction when one is open. Rolled back when `f` fails.
    pub fn in_tx<T>(&self, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
        if !self.conn.is_autocommit() {
            return f();
        }
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
        match f() {
            Ok(v) => {
                self.conn.execute_batch("COMMIT").map_err(sql)?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn trial_id(&self, number: u64) -> Result<i64, String> {
        self.conn
            .query_row(
                "SELECT trial_id FROM trials WHERE study_id = ?1 AND number = ?2",
                params![self.study_id, number as i64],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?
            .ok_or_else(|| format!("study database: no trial {number}"))
    }

    /// Starts trial `number` with its parameters and the finished trials they were drawn from (`history`).
    pub fn start(&self, number: u64, params: &Params, history: &[u64]) -> Result<(), String> {
        let tx = &self.conn;
        self.in_tx(|| {
        tx.execute(
            "INSERT INTO trials (number, study_id, state, datetime_start) VALUES (?1, ?2, 'RUNNING', ?3)",
            params![number as i64, self.study_id, now()],
        )
        .map_err(sql)?;
        let id = tx.last_insert_rowid();
        for (name, &value) in params {
            let (stored, dist) = distribution(&self.space, name, value);
            tx.execute(
                "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?1, ?2, ?3, ?4)",
                params![id, name, stored, dist.to_string()],
            )
            .map_err(sql)?;
        }
        tx.execute(
            "INSERT INTO trial_system_attributes (trial_id, key, value_json) VALUES (?1, 'tradesim_history', ?2)",
            params![id, json!(numbers_to_ranges(history)).to_string()],
        )
        .map_err(sql)?;
        Ok(())
        })
    }

    /// Restarts an interrupted trial (running, or pruned or finishing when its search was killed) under its
    /// number, parameters and history: state RUNNING, its epochs and results removed, in one transaction.
    pub fn restart(&self, number: u64) -> Result<(), String> {
        let id = self.trial_id(number)?;
        let tx = &self.conn;
        self.in_tx(|| {
            for table in [
                "trial_intermediate_values",
                "trial_values",
                "trial_user_attributes",
                "tradesim_epochs",
                "tradesim_test_actions",
            ] {
                tx.execute(&format!("DELETE FROM {table} WHERE trial_id = ?1"), params![id]).map_err(sql)?;
            }
            tx.execute(
                "DELETE FROM trial_system_attributes WHERE trial_id = ?1 AND key = 'tradesim_pruned_at'",
                params![id],
            )
            .map_err(sql)?;
            tx.execute(
            "UPDATE trials SET state = 'RUNNING', datetime_start = ?2, datetime_complete = NULL WHERE trial_id = ?1",
            params![id, now()],
        )
        .map_err(sql)?;
            Ok(())
        })
    }

    /// Records an epoch: the validation Sharpe as Optuna's intermediate value (step = epoch), the rest in
    /// `tradesim_epochs`.
    pub fn record_epoch(&self, e: &EpochRecord) -> Result<(), String> {
        let id = self.trial_id(e.trial)?;
        let (value, kind) = typed(e.valid_sharpe);
        let tx = &self.conn;
        self.in_tx(|| {
        tx.execute(
            "INSERT OR REPLACE INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type)
             VALUES (?1, ?2, ?3, ?4)",
            params![id, e.epoch as i64, value, kind],
        )
        .map_err(sql)?;
        tx.execute(
            "INSERT OR REPLACE INTO tradesim_epochs (trial_id, epoch, loss, valid_sharpe, valid_return) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, e.epoch as i64, nan_to_null(e.loss), nan_to_null(e.valid_sharpe), nan_to_null(e.valid_return)],
        )
        .map_err(sql)?;
        Ok(())
        })
    }

    fn set_value(tx: &Connection, id: i64, value: f64) -> Result<(), String> {
        let (v, kind) = typed(value);
        if kind != "NAN" {
            tx.execute(
                "INSERT OR REPLACE INTO trial_values (trial_id, objective, value, value_type) VALUES (?1, 0, ?2, ?3)",
                params![id, v, kind],
            )
            .map_err(sql)?;
        }
        Ok(())
    }

    /// Marks a trial PRUNED at `epoch` with its metric there as its value (Optuna stores a pruned trial's
    /// last intermediate value).
    pub fn prune(&self, number: u64, epoch: u64, value: f64) -> Result<(), String> {
        let id = self.trial_id(number)?;
        let tx = &self.conn;
        self.in_tx(|| {
        tx.execute(
            "UPDATE trials SET state = 'PRUNED', datetime_complete = ?2 WHERE trial_id = ?1",
            params![id, now()],
        )
        .map_err(sql)?;
        Self::set_value(tx, id, value)?;
        tx.execute(
            "INSERT OR REPLACE INTO trial_system_attributes (trial_id, key, value_json) VALUES (?1, 'tradesim_pruned_at', ?2)",
            params![id, epoch.to_string()],
        )
        .map_err(sql)?;
        Ok(())
        })
    }

    /// Finishes a trial (COMPLETE with its value, FAIL when the value is NaN, or left PRUNED) with its test
    /// evaluation and checkpoint as user attributes and its greedy test actions.
    pub fn finish(
        &self,
        number: u64,
        value: f64,
        test_return: f64,
        test_sharpe: f64,
        test_actions: &[u8],
        checkpoint: &str,
    ) -> Result<(), String> {
        let id = self.trial_id(number)?;
        let tx = &self.conn;
        self.in_tx(|| {
            let state: String =
                tx.query_row("SELECT state FROM trials WHERE trial_id = ?1", params![id], |r| r.get(0)).map_err(sql)?;
            if state != "PRUNED" {
                let state = if value.is_nan() { "FAIL" } else { "COMPLETE" };
                tx.execute(
                    "UPDATE trials SET state = ?2, datetime_complete = ?3 WHERE trial_id = ?1",
                    params![id, state, now()],
                )
                .map_err(sql)?;
                Self::set_value(tx, id, value)?;
            }
            for (key, v) in [
                ("test_return", json!(nan_to_null(test_return))),
                ("test_sharpe", json!(nan_to_null(test_sharpe))),
                ("checkpoint", json!(checkpoint)),
            ] {
                tx.execute(
                    "INSERT OR REPLACE INTO trial_user_attributes (trial_id, key, value_json) VALUES (?1, ?2, ?3)",
                    params![id, key, v.to_string()],
                )
                .map_err(sql)?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO tradesim_test_actions (trial_id, actions) VALUES (?1, ?2)",
                params![id, test_actions],
            )
            .map_err(sql)?;
            Ok(())
        })
    }

    /// Attributes of every trial of the study: `(trial_id, key) -> JSON value`.
    fn attributes(&self, table: &str) -> Result<BTreeMap<(i64, String), Value>, String> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT a.trial_id, a.key, a.value_json FROM {table} a JOIN trials t ON t.trial_id = a.trial_id
                 WHERE t.study_id = ?1"
            ))
            .map_err(sql)?;
        let rows = stmt
            .query_map(params![self.study_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
            })
            .map_err(sql)?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (id, key, text) = row.map_err(sql)?;
            let v: Value = serde_json::from_str(&text).map_err(|e| format!("study database: attribute {key}: {e}"))?;
            out.insert((id, key), v);
        }
        Ok(out)
    }

    /// Every trial, by number. A parameter row tradesim cannot read (a corrupt or hand-edited study) is an
    /// error naming the trial, never an empty parameter set.
    pub fn trials(&self) -> Result<Vec<TrialRecord>, String> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT t.trial_id, t.number, t.state, v.value, v.value_type FROM trials t
                 LEFT JOIN trial_values v ON v.trial_id = t.trial_id AND v.objective = 0
                 WHERE t.study_id = ?1 ORDER BY t.number",
            )
            .map_err(sql)?;
        let rows: Vec<TrialRow> = stmt
            .query_map(params![self.study_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        let mut params_of: BTreeMap<i64, Vec<(String, f64, String)>> = BTreeMap::new();
        let mut stmt = self
            .conn
            .prepare(
                "SELECT p.trial_id, p.param_name, p.param_value, p.distribution_json FROM trial_params p
                 JOIN trials t ON t.trial_id = p.trial_id WHERE t.study_id = ?1",
            )
            .map_err(sql)?;
        let param_rows = stmt
            .query_map(params![self.study_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<f64>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .map_err(sql)?;
        for row in param_rows {
            let (id, name, value, dist) = row.map_err(sql)?;
            params_of.entry(id).or_default().push((name, value.unwrap_or(f64::NAN), dist.unwrap_or_default()));
        }
        let user = self.attributes("trial_user_attributes")?;
        let system = self.attributes("trial_system_attributes")?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT h.trial_id, h.heartbeat FROM trial_heartbeats h JOIN trials t ON t.trial_id = h.trial_id
                 WHERE t.study_id = ?1",
            )
            .map_err(sql)?;
        let beats: BTreeMap<i64, String> = stmt
            .query_map(params![self.study_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(sql)?
            .collect::<Result<_, _>>()
            .map_err(sql)?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, number, state, value, kind) in rows {
            let attr = |m: &BTreeMap<(i64, String), Value>, k: &str| m.get(&(id, k.to_owned())).cloned();
            let float = |k: &str| attr(&user, k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
            let mut params = Params::new();
            for (name, stored, dist) in params_of.remove(&id).unwrap_or_default() {
                let v = param_value(stored, &dist)
                    .map_err(|e| format!("study database: trial {number}: stored parameters: {name}: {e}"))?;
                params.insert(name, v);
            }
            let (history, ours) = match attr(&system, "tradesim_history") {
                Some(Value::String(text)) => (
                    ranges_to_numbers(&text)
                        .map_err(|e| format!("study database: trial {number}: stored history: {e}"))?,
                    true,
                ),
                _ => (Vec::new(), false),
            };
            out.push(TrialRecord {
                number: number as u64,
                params,
                status: state.to_lowercase(),
                value: kind.map_or(f64::NAN, |k| from_typed(value, &k)),
                pruned_at: attr(&system, "tradesim_pruned_at").and_then(|v| v.as_u64()),
                test_return: float("test_return"),
                test_sharpe: float("test_sharpe"),
                checkpoint: attr(&user, "checkpoint").and_then(|v| v.as_str().map(str::to_owned)),
                history,
                ours,
                worker: attr(&system, "tradesim_worker").and_then(|v| v.as_str().map(str::to_owned)),
                runs: attr(&system, "tradesim_runs").and_then(|v| v.as_u64()).unwrap_or(0),
                heartbeat: beats.get(&id).cloned(),
            });
        }
        Ok(out)
    }

    /// Claims trials `numbers` for `worker` and writes their heartbeats (in the caller's transaction, or one
    /// of its own).
    pub fn claim_for(&self, numbers: &[u64], worker: &str) -> Result<(), String> {
        self.in_tx(|| {
            for &n in numbers {
                let id = self.trial_id(n)?;
                self.conn
                    .execute(
                        "INSERT OR REPLACE INTO trial_system_attributes (trial_id, key, value_json)
                         VALUES (?1, 'tradesim_worker', ?2)",
                        params![id, json!(worker).to_string()],
                    )
                    .map_err(sql)?;
                self.conn
                    .execute(
                        "INSERT INTO trial_system_attributes (trial_id, key, value_json) VALUES (?1, 'tradesim_runs', '1')
                         ON CONFLICT(trial_id, key) DO UPDATE SET value_json = CAST(value_json AS INTEGER) + 1",
                        params![id],
                    )
                    .map_err(sql)?;
            }
            self.beat(numbers)
        })
    }

    /// Writes the heartbeats of trials `numbers` (now).
    pub fn beat(&self, numbers: &[u64]) -> Result<(), String> {
        let t = now();
        self.in_tx(|| {
            for &n in numbers {
                let id = self.trial_id(n)?;
                self.conn
                    .execute(
                        "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES (?1, ?2)
                         ON CONFLICT(trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
                        params![id, t],
                    )
                    .map_err(sql)?;
            }
            Ok(())
        })
    }

    /// Every epoch of every trial.
    pub fn epochs(&self) -> Result<Vec<EpochRecord>, String> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT t.number, e.epoch, e.loss, e.valid_sharpe, e.valid_return FROM tradesim_epochs e
                 JOIN trials t ON t.trial_id = e.trial_id WHERE t.study_id = ?1 ORDER BY t.number, e.epoch",
            )
            .map_err(sql)?;
        let rows = stmt
            .query_map(params![self.study_id], |r| {
                Ok(EpochRecord {
                    trial: r.get::<_, i64>(0)? as u64,
                    epoch: r.get::<_, i64>(1)? as u64,
                    loss: r.get::<_, Option<f64>>(2)?.unwrap_or(f64::NAN),
                    valid_sharpe: r.get::<_, Option<f64>>(3)?.unwrap_or(f64::NAN),
                    valid_return: r.get::<_, Option<f64>>(4)?.unwrap_or(f64::NAN),
                })
            })
            .map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }

    /// A trial's greedy actions on the test split.
    pub fn test_actions(&self, number: u64) -> Result<Option<Vec<u8>>, String> {
        let id = self.trial_id(number)?;
        self.conn
            .query_row("SELECT actions FROM tradesim_test_actions WHERE trial_id = ?1", params![id], |r| r.get(0))
            .optional()
            .map_err(sql)
    }
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
}
