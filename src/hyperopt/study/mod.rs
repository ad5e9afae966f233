//! The study, in Optuna's RDB schema (optuna 5.0.0, schema version 12; `docs/OPTUNA-SCHEMA.md`), so that
//! `optuna.load_study` and optuna-dashboard read it: the study (direction maximize, the configuration as a
//! user attribute `tradesim_config`), every trial's state (RUNNING, COMPLETE, PRUNED, FAIL), parameters with
//! their distributions, objective value, and each epoch's validation Sharpe as an intermediate value; test
//! metrics and the checkpoint as user attributes, the trial's history and prune epoch as system attributes.
//! What Optuna has no place for (per-epoch losses and returns, the greedy test actions) lives in
//! `tradesim_epochs`, `tradesim_test_actions` and `tradesim_valid_actions`, which Optuna ignores.
//! Each change is committed when it happens, so a killed search loses at most the trials it was running,
//! which `--resume` runs again under the same numbers and parameters.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

use serde_json::{Value, json};

use super::config::{Dimension, SearchConfig};
use super::db::{Db, Val};
use super::sampler::Params;
use super::storage::StorageUrl;
use crate::Error;

mod clock;
mod params;
mod schema;
mod snapshot;
mod trial_set;
mod workers;

pub use clock::clock_skew;
use clock::{db_now, now};
use params::{distribution, nan_to_null, typed};
use schema::{ensure_schema, study_id_of};
pub use trial_set::TrialSet;
pub use workers::{Worker, WorkerProcess};

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

    /// A trial of tradesim's with `status` and nothing else recorded (value 0, no parameters, one run): the
    /// tests' starting point.
    #[cfg(test)]
    pub(crate) fn ours(number: u64, status: &str) -> Self {
        Self {
            number,
            params: Params::new(),
            status: status.to_owned(),
            value: 0.0,
            pruned_at: None,
            test_return: 0.0,
            test_sharpe: 0.0,
            checkpoint: None,
            fail_reason: None,
            history: Vec::new(),
            ours: true,
            worker: None,
            runs: 1,
            heartbeat: None,
            place: None,
        }
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
    /// This handle's copy of the trials ([`Study::refresh`]).
    snapshot: RefCell<snapshot::Snapshot>,
    /// Each trial's row id by number, as this handle learnt them (a row id never changes).
    ids: RefCell<HashMap<u64, i64>>,
    /// What this handle's TPE draws are salted with ([`Study::sample_salt`]): 0 until another worker's claim
    /// overtook one of its samples.
    salt: Cell<u64>,
}

/// How [`Study::transaction`] opens its transaction: plainly, with the study's claim lock, or with the
/// lock a write to a claimed trial takes.
#[derive(Clone, Copy)]
enum Begin {
    Plain,
    Claim,
    Write,
}

fn i64_of(v: &Val) -> i64 {
    v.i64().unwrap_or(0)
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
        let mut study = Self {
            db,
            study_id,
            space: BTreeMap::new(),
            claims: RefCell::new(HashMap::new()),
            snapshot: RefCell::default(),
            ids: RefCell::default(),
            salt: Cell::new(0),
        };
        let cfg: SearchConfig = serde_json::from_str(&study.config_json()?).map_err(|e| {
            Error::Study(format!("the study's `{CONFIG_ATTR}` attribute is not a tradesim search configuration: {e}"))
        })?;
        study.space = cfg.space;
        study.snapshot.borrow_mut().trials = TrialSet::new(cfg.study.epochs as u64);
        Ok(study)
    }

    /// The salt of this handle's TPE draws (XORed into the study's seed): 0, so that one worker draws what
    /// the seed says, until another worker's claim overtook a sample of this handle
    /// ([`Study::overtaken`]); from then on a value of this handle's own. Two workers that sample the same
    /// trial number from the same snapshot would otherwise draw the same point, and the later one would
    /// have to sample again.
    pub fn sample_salt(&self) -> u64 {
        self.salt.get()
    }

    /// Records that another worker's claim took the trial numbers a sample of this handle was drawn for:
    /// its later draws are salted ([`Study::sample_salt`]) with a value unique to this handle (its process,
    /// a counter of the process's handles and the time).
    pub fn overtaken(&self) {
        static HANDLES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        if self.salt.get() == 0 {
            let handle = HANDLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            let mut x = (u64::from(std::process::id()) << 32) ^ handle ^ nanos.rotate_left(17);
            // SplitMix64's finalizer: nearby inputs give unrelated salts.
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            self.salt.set((x ^ (x >> 31)).max(1));
        }
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

    /// Runs `f` in a write transaction (SQLite: `BEGIN IMMEDIATE`, other writers wait), or inside the
    /// caller's transaction when one is open. Rolled back when `f` fails.
    pub fn in_tx<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.transaction(Begin::Plain, f)
    }

    /// [`Study::in_tx`] holding the study's claim lock ([`Db::claim_locks`]) from its start: a claim reads
    /// the trials, decides and writes while no other worker can claim. A new transaction opens and locks in
    /// one round trip to the server; inside the caller's transaction the lock is taken there.
    pub fn in_locked_tx<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.transaction(Begin::Claim, f)
    }

    /// [`Study::in_tx`] for a write to a trial this handle claimed: the write lock a claim conflicts with
    /// is taken first ([`Study::check_owner`] says why), in the round trip that opens the transaction.
    fn in_write_tx<T>(&self, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.transaction(Begin::Write, f)
    }

    fn transaction<T>(&self, how: Begin, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        let nested = self.db.in_transaction();
        let locks = match how {
            Begin::Plain => String::new(),
            Begin::Claim => self.db.claim_locks(self.study_id),
            Begin::Write => self.db.write_locks(),
        };
        if nested {
            if !locks.is_empty() {
                self.db.batch(&locks)?;
            }
            return f();
        }
        self.db.begin_with(&locks)?;
        match f() {
            Ok(v) => {
                self.db.commit()?;
                Ok(v)
            }
            Err(e) => {
                self.db.rollback();
                // A row id learnt in the transaction may be of a row it inserted, now gone.
                self.ids.borrow_mut().clear();
                Err(e)
            }
        }
    }

    /// Trial `number`'s row id: as this handle learnt it (a row id never changes; what it learnt is dropped
    /// when one of its transactions rolls back), else read once (a scan of the study's trials: Optuna's
    /// schema indexes `trials` by study, not by number).
    fn trial_id(&self, number: u64) -> Result<i64, Error> {
        if let Some(&id) = self.ids.borrow().get(&number) {
            return Ok(id);
        }
        let rows = self.db.query(
            "SELECT trial_id FROM trials WHERE study_id = ?1 AND number = ?2",
            &[Val::I64(self.study_id), Val::I64(number as i64)],
        )?;
        let id = rows.first().map(|r| i64_of(&r[0])).ok_or_else(|| Error::Study(format!("no trial {number}")))?;
        self.ids.borrow_mut().insert(number, id);
        Ok(id)
    }

    fn set_attr(&self, table: &str, id: i64, key: &str, json_text: String) -> Result<(), Error> {
        self.set_attrs(table, &[(id, key, json_text)])
    }

    /// Sets attributes `(trial row id, key, JSON text)` of `table` in one statement.
    fn set_attrs(&self, table: &str, attrs: &[(i64, &str, String)]) -> Result<(), Error> {
        if attrs.is_empty() {
            return Ok(());
        }
        let values: Vec<Val> =
            attrs.iter().flat_map(|(id, key, v)| [Val::I64(*id), (*key).into(), v.as_str().into()]).collect();
        self.db.exec(
            &format!(
                "INSERT INTO {table} (trial_id, key, value_json) VALUES {}
                 ON CONFLICT (trial_id, key) DO UPDATE SET value_json = excluded.value_json",
                value_rows(attrs.len(), 3, "")
            ),
            &values,
        )?;
        Ok(())
    }

    /// Starts trial `number` with its parameters and the finished trials they were drawn from (`history`).
    pub fn start(&self, number: u64, params: &Params, history: &[u64]) -> Result<(), Error> {
        self.start_at(number, params, history, None)
    }

    /// [`Study::start`], and where the trial runs ([`Study::place`]) when `place` says.
    pub fn start_at(&self, number: u64, params: &Params, history: &[u64], place: Option<Place>) -> Result<(), Error> {
        self.in_tx(|| {
            let id = i64_of(
                &self.db.query(
                    "INSERT INTO trials (number, study_id, state, datetime_start) VALUES (?1, ?2, ?3, ?4) RETURNING trial_id",
                    &[Val::I64(number as i64), Val::I64(self.study_id), "RUNNING".into(), Val::Time(now())],
                )?[0][0],
            );
            self.ids.borrow_mut().insert(number, id);
            if !params.is_empty() {
                let mut values = Vec::with_capacity(4 * params.len());
                for (name, &value) in params {
                    let (stored, dist) = distribution(&self.space, name, value);
                    values.extend([Val::I64(id), name.as_str().into(), Val::F64(stored), dist.to_string().into()]);
                }
                self.db.exec(
                    &format!(
                        "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES {}",
                        value_rows(params.len(), 4, "")
                    ),
                    &values,
                )?;
            }
            let mut attrs = vec![(id, "tradesim_history", json!(numbers_to_ranges(history)).to_string())];
            if let Some(at) = place {
                attrs.push((id, "tradesim_place", place_json(at)));
            }
            self.set_attrs("trial_system_attributes", &attrs)
        })
    }

    /// Records where trial `number` runs ([`TrialRecord::place`]).
    pub fn place(&self, number: u64, place: Place) -> Result<(), Error> {
        self.in_tx(|| {
            let id = self.trial_id(number)?;
            self.set_attr("trial_system_attributes", id, "tradesim_place", place_json(place))
        })
    }

    /// Links an artifact to trial `number` as `optuna.artifacts.upload_artifact` does (the trial system
    /// attribute `artifacts:ID`, a JSON string holding the meta's JSON); refused unless this handle holds the trial's claim.
    pub fn link_artifact(&self, number: u64, meta: &super::artifacts::ArtifactMeta) -> Result<(), Error> {
        self.in_write_tx(|| {
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

    /// Records an epoch: the validation Sharpe as Optuna's intermediate value (step = epoch), the rest in
    /// `tradesim_epochs`.
    pub fn record_epoch(&self, e: &EpochRecord) -> Result<(), Error> {
        let (value, kind) = typed(e.valid_sharpe);
        self.in_write_tx(|| {
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
        self.in_write_tx(|| {
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
        self.in_write_tx(|| {
            let id = self.trial_id(number)?;
            let pruned = self.check_owner(id, number)?;
            let mut attrs = vec![
                (id, "test_return", json!(nan_to_null(test_return)).to_string()),
                (id, "test_sharpe", json!(nan_to_null(test_sharpe)).to_string()),
                (id, "checkpoint", json!(checkpoint).to_string()),
            ];
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
                attrs.push((id, FAIL_REASON_ATTR, json!(UNDEFINED_OBJECTIVE).to_string()));
            }
            self.set_attrs("trial_user_attributes", &attrs)?;
            self.db.exec(
                "UPDATE trials SET state = ?2, datetime_complete = ?3 WHERE trial_id = ?1",
                &[Val::I64(id), state.into(), Val::Time(now())],
            )?;
            Ok(())
        })
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
        self.in_write_tx(|| {
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

/// A [`Place`] as its system attribute's JSON, `[batch, slot, tick]`.
fn place_json(place: Place) -> String {
    json!([place.batch, place.slot, place.tick]).to_string()
}

/// `rows` rows of `columns` placeholders each, numbered on from `?1` (`(?1, ?2), (?3, ?4)`), each row ended
/// by `tail` (a further column's SQL, or nothing): a multi-row `VALUES` list.
fn value_rows(rows: usize, columns: usize, tail: &str) -> String {
    let row = |r: usize| {
        let cells: Vec<String> = (1..=columns).map(|c| format!("?{}", r * columns + c)).collect();
        format!("({}{tail})", cells.join(", "))
    };
    (0..rows).map(row).collect::<Vec<_>>().join(", ")
}

/// The text a JSON string literal holds (`None` when `json` is not one).
fn parse_json_text(json: &str) -> Option<String> {
    serde_json::from_str::<String>(json).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_rows_number_placeholders_row_by_row() {
        assert_eq!(value_rows(2, 3, ""), "(?1, ?2, ?3), (?4, ?5, ?6)");
        assert_eq!(value_rows(2, 1, ", now()"), "(?1, now()), (?2, now())");
        assert_eq!(value_rows(0, 4, ""), "");
    }

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
