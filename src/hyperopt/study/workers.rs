//! Workers and their claims: who runs a trial (its worker and process), claims and heartbeats on the
//! database's clock, the fencing that refuses a write from a worker whose claim was taken over, and the
//! restarts and failures of interrupted trials.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{FAIL_REASON_ATTR, Study, db_now, i64_of, now, value_rows};
use crate::Error;
use crate::hyperopt::db::Val;

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

impl Study {
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
    /// claim: the run count it claimed is the trial's ([`TrialRecord::runs`](super::TrialRecord::runs); every claim counts it up, in the
    /// claim's transaction) and the trial is RUNNING. A trial never claimed may be written by a handle that
    /// never claimed it (a study written directly, as the tests do). Called in a transaction of
    /// [`Study::in_write_tx`], which took the table lock a claim conflicts with first (it waits for a claim in
    /// flight, and a claim for it); the check then locks the trial's row on PostgreSQL, so that no claim
    /// commits between the check and the write (taking the row before the table could deadlock with a
    /// takeover of this trial). Returns whether the trial was pruned ([`Study::prune`]). One query.
    pub(super) fn check_owner(&self, id: i64, number: u64) -> Result<bool, Error> {
        let lock = if self.db.is_postgres() { " FOR UPDATE OF t" } else { "" };
        let found = self.db.query(
            &format!(
                "SELECT t.state,
                   (SELECT a.value_json FROM trial_system_attributes a WHERE a.trial_id = t.trial_id AND a.key = 'tradesim_worker'),
                   (SELECT a.value_json FROM trial_system_attributes a WHERE a.trial_id = t.trial_id AND a.key = 'tradesim_runs'),
                   (SELECT COUNT(*) FROM trial_system_attributes a WHERE a.trial_id = t.trial_id AND a.key = 'tradesim_pruned_at')
                 FROM trials t WHERE t.trial_id = ?1{lock}"
            ),
            &[Val::I64(id)],
        )?;
        let row = found.first();
        let state = row.and_then(|r| r[0].text().map(str::to_owned)).unwrap_or_default();
        let attr = |i: usize| row.and_then(|r| serde_json::from_str::<Value>(r[i].text()?).ok());
        let worker = attr(1).and_then(|v| v.as_str().map(str::to_owned));
        let runs = attr(2).and_then(|v| v.as_u64());
        let pruned = row.and_then(|r| r[3].i64()).unwrap_or(0) > 0;
        let mine = self.claims.borrow().get(&number).copied();
        if state != "RUNNING" {
            return Err(Error::Study(format!("trial {number} is {state}: a write to a finished trial is refused")));
        }
        match (mine, runs) {
            (Some(m), Some(r)) if m == r => Ok(pruned),
            (None, None) => Ok(pruned),
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

    /// Claims trials for `worker`: `claims` holds each trial's number and its claims so far (its
    /// [`TrialRecord::runs`](super::TrialRecord::runs), 0 for a new trial), counted up by one; records the worker's name and process
    /// and writes their heartbeats (in the caller's transaction, or one of its own). This handle's writes to
    /// them are accepted until another claim replaces this one.
    pub fn claim_for(&self, claims: &[(u64, u64)], worker: &Worker) -> Result<(), Error> {
        let name = json!(worker.name).to_string();
        let process = worker.process.as_ref().map(|p| json!(p).to_string());
        self.in_tx(|| {
            let mut attrs = Vec::with_capacity(3 * claims.len());
            let mut ids = Vec::with_capacity(claims.len());
            for &(n, runs) in claims {
                let id = self.trial_id(n)?;
                attrs.push((id, "tradesim_worker", name.clone()));
                attrs.push((id, "tradesim_runs", (runs + 1).to_string()));
                match &process {
                    Some(p) => attrs.push((id, "tradesim_worker_process", p.clone())),
                    None => {
                        self.db.exec(
                            "DELETE FROM trial_system_attributes WHERE trial_id = ?1 AND key = 'tradesim_worker_process'",
                            &[Val::I64(id)],
                        )?;
                    }
                }
                ids.push(id);
            }
            self.set_attrs("trial_system_attributes", &attrs)?;
            // The trials are this worker's now (written above): their heartbeats without the holder check of
            // `beat`.
            self.write_beats(&ids)?;
            for &(n, runs) in claims {
                self.claims.borrow_mut().insert(n, runs + 1);
            }
            Ok(())
        })
    }

    /// Writes the heartbeats of those of trials `numbers` that `worker` holds (its name and process are the
    /// trial's), at the database's time (Optuna's `trial_heartbeats`, which it also writes with the
    /// database's `now()`): a worker's clock never decides whether a trial is stale.
    pub fn beat(&self, numbers: &[u64], worker: &Worker) -> Result<(), Error> {
        let name = json!(worker.name).to_string();
        let process = worker.process.as_ref().map(|p| json!(p).to_string());
        self.in_tx(|| {
            let mut held = Vec::with_capacity(numbers.len());
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
                    held.push(id);
                }
            }
            self.write_beats(&held)
        })
    }

    /// Writes the heartbeats of trial rows `ids` at the database's time, in one statement.
    fn write_beats(&self, ids: &[i64]) -> Result<(), Error> {
        if ids.is_empty() {
            return Ok(());
        }
        self.db.exec(
            &format!(
                "INSERT INTO trial_heartbeats (trial_id, heartbeat) VALUES {}
                 ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
                value_rows(ids.len(), 1, &format!(", {}", db_now(&self.db)))
            ),
            &ids.iter().map(|&id| Val::I64(id)).collect::<Vec<_>>(),
        )?;
        Ok(())
    }

    /// The database's time `seconds` ago, in the format of [`TrialRecord::heartbeat`](super::TrialRecord::heartbeat): the cutoff before
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
}
