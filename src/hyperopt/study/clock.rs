//! The clocks of a study's records: the worker's (Optuna's `datetime_start` and `datetime_complete`) and the
//! database's (heartbeats and their cutoff).

use crate::Error;
use crate::hyperopt::db::{Db, timestamp};

/// The worker's clock, for `datetime_start` and `datetime_complete` (Optuna's workers write theirs); no
/// decision depends on it (heartbeats and their cutoff use the database's clock, [`super::Study::beat`]).
/// `TRADESIM_TEST_CLOCK_SKEW_SECONDS` shifts it, for the tests that check that (like `TRADESIM_FAILPOINT`,
/// set only by tests).
pub(super) fn now() -> String {
    static SKEW: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    let skew = *SKEW.get_or_init(|| clock_skew().unwrap_or(0.0));
    timestamp((chrono::Utc::now() + chrono::Duration::milliseconds((skew * 1e3) as i64)).naive_utc())
}

/// `TRADESIM_TEST_CLOCK_SKEW_SECONDS` (0 when unset); a value that is not a number of seconds within a day
/// either way is an error (the CLI checks it before a command runs).
pub fn clock_skew() -> Result<f64, Error> {
    let text = match std::env::var("TRADESIM_TEST_CLOCK_SKEW_SECONDS") {
        Err(std::env::VarError::NotPresent) => return Ok(0.0),
        Err(std::env::VarError::NotUnicode(v)) => v.to_string_lossy().into_owned(),
        Ok(text) => text,
    };
    text.trim().parse::<f64>().ok().filter(|s| s.abs() <= 86_400.0).ok_or_else(|| {
        Error::config(
            "TRADESIM_TEST_CLOCK_SKEW_SECONDS",
            format!("`{text}`: expected a number of seconds within a day either way"),
        )
    })
}

/// The database's clock now, in UTC and Optuna's format (`YYYY-MM-DD HH:MM:SS.ffffff`), as SQL: the
/// server's `now()` on PostgreSQL; SQLite's `'now'` (milliseconds, padded to Optuna's six digits).
pub(super) fn db_now(db: &Db) -> &'static str {
    if db.is_postgres() { "(now() AT TIME ZONE 'UTC')" } else { "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')" }
}
