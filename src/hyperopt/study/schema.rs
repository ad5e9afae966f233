//! Optuna's tables as optuna 5.0.0 creates them (schema version 12) on SQLite and PostgreSQL, and
//! tradesim's own: created where missing, their version checked where present.

use super::{OPTUNA_ALEMBIC_HEAD, OPTUNA_LIBRARY_VERSION, OPTUNA_SCHEMA_VERSION, i64_of};
use crate::Error;
use crate::hyperopt::db::{Db, Val};

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

/// Optuna's schema on PostgreSQL (its own `pg_dump -s`), run once in an empty database.
const POSTGRES_SCHEMA: &str = include_str!("../optuna_postgres.sql");

/// tradesim's own tables on PostgreSQL.
const POSTGRES_TRADESIM: &str = "
CREATE TABLE IF NOT EXISTS tradesim_epochs (trial_id integer NOT NULL REFERENCES trials (trial_id), epoch integer NOT NULL,
  loss double precision, valid_sharpe double precision, valid_return double precision, PRIMARY KEY (trial_id, epoch));
CREATE TABLE IF NOT EXISTS tradesim_test_actions (trial_id integer NOT NULL PRIMARY KEY REFERENCES trials (trial_id),
  actions bytea NOT NULL);
CREATE TABLE IF NOT EXISTS tradesim_valid_actions (trial_id integer NOT NULL PRIMARY KEY REFERENCES trials (trial_id),
  actions bytea NOT NULL);
";

/// Creates Optuna's schema (and tradesim's tables) where it is missing; checks the version where it is there.
pub(super) fn ensure_schema(db: &Db, shown: &str) -> Result<(), Error> {
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

pub(super) fn study_id_of(db: &Db, name: &str) -> Result<Option<i64>, Error> {
    Ok(db.query("SELECT study_id FROM studies WHERE study_name = ?1", &[name.into()])?.first().map(|r| i64_of(&r[0])))
}
