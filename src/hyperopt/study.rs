//! The study in SQLite: every trial's parameters, status, per-epoch metrics, test evaluation and checkpoint.
//! Each change is committed when it happens, so a killed search loses at most the trials it was running,
//! which `--resume` runs again under the same numbers and parameters.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::sampler::Params;

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
}

impl TrialRecord {
    /// Whether the trial is finished: its test evaluation and checkpoint are recorded (complete, pruned or
    /// fail). A trial that is running, or was pruned or finishing when its search was killed, is not.
    pub fn finished(&self) -> bool {
        self.checkpoint.is_some()
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

/// An open study.
#[derive(Debug)]
pub struct Study {
    conn: Connection,
}

fn sql(e: rusqlite::Error) -> String {
    format!("study database: {e}")
}

fn nan_to_null(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl Study {
    /// Creates a study at `path` (refusing to overwrite one unless `resume`), or reopens it with `resume`.
    pub fn open(path: &Path, resume: bool, config_json: &str) -> Result<Self, String> {
        let exists = path.exists();
        if exists && !resume {
            return Err(format!("{} exists: pass --resume to continue it, or choose another --study", path.display()));
        }
        if !exists && resume {
            return Err(format!("--resume: no study at {}", path.display()));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        let conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(30)).map_err(sql)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
             CREATE TABLE IF NOT EXISTS trials (
                 number INTEGER PRIMARY KEY, params TEXT NOT NULL, status TEXT NOT NULL, value REAL,
                 pruned_at INTEGER, test_return REAL, test_sharpe REAL, test_actions BLOB, checkpoint TEXT,
                 history TEXT NOT NULL DEFAULT '');
             CREATE TABLE IF NOT EXISTS epochs (
                 trial INTEGER NOT NULL, epoch INTEGER NOT NULL, loss REAL, valid_sharpe REAL, valid_return REAL,
                 PRIMARY KEY (trial, epoch));",
        )
        .map_err(sql)?;
        if !exists {
            conn.execute("INSERT INTO meta (key, value) VALUES ('config', ?1)", params![config_json]).map_err(sql)?;
        }
        Ok(Self { conn })
    }

    /// Another connection to an existing study (one per search worker).
    pub fn reopen(path: &Path) -> Result<Self, String> {
        let conn = Connection::open(path).map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(60)).map_err(sql)?;
        Ok(Self { conn })
    }

    /// The configuration the study was created with.
    pub fn config_json(&self) -> Result<String, String> {
        self.conn.query_row("SELECT value FROM meta WHERE key = 'config'", [], |r| r.get(0)).map_err(sql)
    }

    /// Starts trial `number` with its parameters and the finished trials they were drawn from (`history`).
    pub fn start(&self, number: u64, params: &Params, history: &[u64]) -> Result<(), String> {
        let json = serde_json::to_string(params).map_err(|e| e.to_string())?;
        self.conn
            .execute(
                "INSERT INTO trials (number, params, status, history) VALUES (?1, ?2, 'running', ?3)",
                params![number as i64, json, numbers_to_ranges(history)],
            )
            .map_err(sql)?;
        Ok(())
    }

    /// Restarts an interrupted trial (running, or pruned or finishing when its search was killed) under its
    /// number, parameters and history: status running, its epochs and results removed, in one transaction.
    pub fn restart(&self, number: u64) -> Result<(), String> {
        self.conn
            .execute_batch(&format!(
                "BEGIN IMMEDIATE;
                 DELETE FROM epochs WHERE trial = {number};
                 UPDATE trials SET status = 'running', value = NULL, pruned_at = NULL, test_return = NULL,
                     test_sharpe = NULL, test_actions = NULL, checkpoint = NULL WHERE number = {number};
                 COMMIT;"
            ))
            .map_err(sql)
    }

    /// Records an epoch.
    pub fn record_epoch(&self, e: &EpochRecord) -> Result<(), String> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO epochs (trial, epoch, loss, valid_sharpe, valid_return) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![e.trial as i64, e.epoch as i64, nan_to_null(e.loss), nan_to_null(e.valid_sharpe), nan_to_null(e.valid_return)],
            )
            .map_err(sql)?;
        Ok(())
    }

    /// Marks a trial pruned at `epoch` with its metric there.
    pub fn prune(&self, number: u64, epoch: u64, value: f64) -> Result<(), String> {
        self.conn
            .execute(
                "UPDATE trials SET status = 'pruned', value = ?2, pruned_at = ?3 WHERE number = ?1",
                params![number as i64, nan_to_null(value), epoch as i64],
            )
            .map_err(sql)?;
        Ok(())
    }

    /// Finishes a trial (complete unless pruned earlier) with its test evaluation and checkpoint.
    pub fn finish(
        &self,
        number: u64,
        value: f64,
        test_return: f64,
        test_sharpe: f64,
        test_actions: &[u8],
        checkpoint: &str,
    ) -> Result<(), String> {
        self.conn
            .execute(
                "UPDATE trials SET status = CASE WHEN status = 'pruned' THEN 'pruned'
                                            WHEN ?2 IS NULL THEN 'fail' ELSE 'complete' END,
                     value = CASE status WHEN 'pruned' THEN value ELSE ?2 END,
                     test_return = ?3, test_sharpe = ?4, test_actions = ?5, checkpoint = ?6 WHERE number = ?1",
                params![
                    number as i64,
                    nan_to_null(value),
                    nan_to_null(test_return),
                    nan_to_null(test_sharpe),
                    test_actions,
                    checkpoint
                ],
            )
            .map_err(sql)?;
        Ok(())
    }

    /// Every trial, by number. A parameter row that is not the JSON object tradesim wrote (a corrupt or
    /// hand-edited study) is an error naming the trial, never an empty parameter set.
    pub fn trials(&self) -> Result<Vec<TrialRecord>, String> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT number, params, status, value, pruned_at, test_return, test_sharpe, checkpoint, history
                 FROM trials ORDER BY number",
            )
            .map_err(sql)?;
        let rows = stmt
            .query_map([], |r| {
                let params: String = r.get(1)?;
                let record = TrialRecord {
                    number: r.get::<_, i64>(0)? as u64,
                    params: Params::new(),
                    status: r.get(2)?,
                    value: r.get::<_, Option<f64>>(3)?.unwrap_or(f64::NAN),
                    pruned_at: r.get::<_, Option<i64>>(4)?.map(|e| e as u64),
                    test_return: r.get::<_, Option<f64>>(5)?.unwrap_or(f64::NAN),
                    test_sharpe: r.get::<_, Option<f64>>(6)?.unwrap_or(f64::NAN),
                    checkpoint: r.get(7)?,
                    history: Vec::new(),
                };
                Ok((record, params, r.get::<_, String>(8)?))
            })
            .map_err(sql)?;
        let mut out = Vec::new();
        for row in rows {
            let (mut record, params, history) = row.map_err(sql)?;
            record.history = ranges_to_numbers(&history)
                .map_err(|e| format!("study database: trial {}: stored history: {e}", record.number))?;
            record.params = serde_json::from_str(&params).map_err(|e| {
                format!(
                    "study database: trial {}: stored parameters are not a JSON object of numbers ({e}): {params:?}",
                    record.number
                )
            })?;
            out.push(record);
        }
        Ok(out)
    }

    /// Every epoch of every trial.
    pub fn epochs(&self) -> Result<Vec<EpochRecord>, String> {
        let mut stmt = self
            .conn
            .prepare("SELECT trial, epoch, loss, valid_sharpe, valid_return FROM epochs ORDER BY trial, epoch")
            .map_err(sql)?;
        let rows = stmt
            .query_map([], |r| {
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
        self.conn
            .query_row("SELECT test_actions FROM trials WHERE number = ?1", params![number as i64], |r| {
                r.get::<_, Option<Vec<u8>>>(0)
            })
            .optional()
            .map(Option::flatten)
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
