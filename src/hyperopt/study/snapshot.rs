//! The study's trials as a worker reads them: all of them in one read ([`Study::trials`], for reports and
//! the leaderboard), or a copy kept in the worker's memory and refreshed from the rows added or changed
//! since its last read ([`Study::refresh`], [`Study::snapshot`]), which the search's claims and refills
//! read so that their cost does not grow with the study.
//!
//! A refresh reads the trials whose row id is above the snapshot's cursor (every row at or below it was
//! read) and again the unfinished ones it holds (their state, values, heartbeats and claims change); a
//! finished trial never changes (Optuna never moves a trial out of COMPLETE, PRUNED or FAIL, and tradesim
//! refuses writes to it), so it is read once. The cursor only moves where no insert can be in flight below
//! it: on SQLite (one writer at a time, row ids in commit order) always, on PostgreSQL only under the
//! study's lock ([`Study::in_locked_tx`] blocks inserts into `trials`), since a transaction that commits later may
//! hold a smaller row id. The snapshot drops a finished trial's history (the claim that sampled it is
//! done with it; a study of 100,000 trials would hold billions of numbers) and keeps the epochs of complete
//! trials for the median pruner's reference.

use std::cell::Ref;
use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::params::{from_typed, param_value, parse_distribution};
use super::{
    EpochRecord, FAIL_REASON_ATTR, Place, Study, TrialRecord, TrialSet, WorkerProcess, i64_of, ranges_to_numbers,
};
use crate::Error;
use crate::hyperopt::db::Val;
use crate::hyperopt::sampler::Params;

/// Which of the study's trial rows a read takes: all, or those above a row id and those named.
#[derive(Clone, Copy)]
enum Rows<'a> {
    All,
    /// All, without the system attributes and heartbeats [`Study::trials_brief`] leaves out.
    Brief,
    Since {
        after: i64,
        ids: &'a [i64],
    },
}

impl Rows<'_> {
    /// The condition on the trials `t` read: of the study (`?1`), and for [`Rows::Since`] with a row id
    /// above `?2` or in the list `?3`. The statement's text is the same for every read, so that the server
    /// prepares it once; a read since a cursor finds its rows by their row ids, never by scanning the
    /// study's trials: the study's condition is written `t.study_id + 0`, which no index serves (a planner
    /// whose statistics predate the study's growth would otherwise take the study's index and filter every
    /// trial of it), and the row id's range has both ends, which a plan made for any cursor estimates as
    /// narrow.
    fn sql(self, db: &crate::hyperopt::db::Db) -> String {
        match self {
            Rows::All | Rows::Brief => "t.study_id = ?1".to_owned(),
            Rows::Since { .. } => {
                let top = if db.is_postgres() { i64::from(i32::MAX) } else { i64::MAX };
                format!(
                    "t.study_id + 0 = ?1 AND ((t.trial_id > ?2 AND t.trial_id <= {top}) OR {})",
                    in_ids(db, "t.trial_id", 3)
                )
            }
        }
    }

    /// The values of [`Rows::sql`]'s placeholders, after the study's `?1`.
    fn values(self, study_id: i64) -> Vec<Val> {
        match self {
            Rows::All | Rows::Brief => vec![Val::I64(study_id)],
            Rows::Since { after, ids } => vec![Val::I64(study_id), Val::I64(after), ids_text(ids).into()],
        }
    }
}

/// `column` is one of the row ids of placeholder `?N` (`n`), which holds them as [`ids_text`] writes them.
fn in_ids(db: &crate::hyperopt::db::Db, column: &str, n: usize) -> String {
    if db.is_postgres() {
        format!("{column} = ANY(string_to_array(?{n}, ',')::int[])")
    } else {
        format!("{column} IN (SELECT value FROM json_each('[' || ?{n} || ']'))")
    }
}

/// Row ids as the comma-separated text of a list placeholder ([`in_ids`]).
fn ids_text(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// A trial's parameters `(name, stored value, distribution JSON)`, attributes `(key, value)` and heartbeat,
/// as read.
#[derive(Default)]
struct Details {
    params: Vec<(String, f64, String)>,
    user: Vec<(String, Value)>,
    system: Vec<(String, Value)>,
    beat: Option<String>,
}

/// An attribute's JSON value (`json`), an error naming its `key` when it is not JSON.
fn parse_attr(key: &Val, json: &Val) -> Result<Value, Error> {
    serde_json::from_str(json.text().unwrap_or("null"))
        .map_err(|e| Error::Study(format!("attribute {}: {e}", key.text().unwrap_or_default())))
}

/// A trial as read: its row id, its record, and its worker's process where recorded.
type Read = (i64, TrialRecord, Option<WorkerProcess>);

/// A worker's copy of the study's trials (the module's doc says how it is kept).
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// Trials by number, ascending; finished ones without their history.
    pub(super) trials: TrialSet,
    /// Row ids of the unfinished trials held (read again at each refresh).
    unfinished: HashSet<i64>,
    /// Every trial row with an id at or below it has been read.
    cursor: i64,
    /// The process of the worker that last claimed each trial, where recorded.
    processes: BTreeMap<u64, WorkerProcess>,
    /// The epochs of each complete trial (empty when it reported none), by number.
    complete_epochs: BTreeMap<u64, Vec<EpochRecord>>,
}

impl Study {
    /// Attributes of every trial of the study: `(trial_id, key) -> JSON value`.
    #[cfg(test)]
    pub(super) fn attributes(&self, table: &str) -> Result<BTreeMap<(i64, String), Value>, Error> {
        let mut out = BTreeMap::new();
        for r in self.db.query(
            &format!(
                "SELECT a.trial_id, a.key, a.value_json FROM {table} a JOIN trials t ON t.trial_id = a.trial_id
                 WHERE t.study_id = ?1"
            ),
            &[Val::I64(self.study_id)],
        )? {
            let key = r[1].text().unwrap_or_default().to_owned();
            out.insert((i64_of(&r[0]), key), parse_attr(&r[1], &r[2])?);
        }
        Ok(out)
    }

    /// Every trial, by number. A parameter row tradesim cannot read (a corrupt or hand-edited study) is an
    /// error naming the trial, never an empty parameter set.
    pub fn trials(&self) -> Result<Vec<TrialRecord>, Error> {
        Ok(self.read(Rows::All, |_| true)?.into_iter().map(|r| r.1).collect())
    }

    /// Every trial, by number, as [`Study::trials`] without what a report and a ranking never read: their
    /// histories (a study of 100,000 trials would hold billions of numbers), workers, runs, places and
    /// heartbeats (left `None` and 0).
    pub fn trials_brief(&self) -> Result<Vec<TrialRecord>, Error> {
        Ok(self.read(Rows::Brief, |_| false)?.into_iter().map(|r| r.1).collect())
    }

    /// The trials `rows` takes, by number, with their row ids and worker processes; the history parsed
    /// for those that `history` accepts (the others' left empty).
    fn read(&self, rows: Rows<'_>, history: impl Fn(&str) -> bool) -> Result<Vec<Read>, Error> {
        let values = rows.values(self.study_id);
        let scope = rows.sql(&self.db);
        let found = self.db.query(
            &format!(
                "SELECT t.trial_id, t.number, t.state, v.value, v.value_type FROM trials t
                 LEFT JOIN trial_values v ON v.trial_id = t.trial_id AND v.objective = 0
                 WHERE {scope} ORDER BY t.number"
            ),
            &values,
        )?;
        // The trials' parameters, attributes and heartbeats in one statement (one round trip): rows of
        // (kind, trial_id, name or key, parameter value, distribution, attribute JSON or heartbeat).
        let heartbeat = if self.db.is_postgres() {
            "to_char(h.heartbeat, 'YYYY-MM-DD HH24:MI:SS.US')"
        } else {
            "CAST(h.heartbeat AS TEXT)"
        };
        let (system_keys, heartbeats) = match rows {
            Rows::Brief => (" AND a.key IN ('tradesim_history', 'tradesim_pruned_at')", String::new()),
            _ => (
                "",
                format!(
                    " UNION ALL SELECT 3, h.trial_id, NULL, NULL, {heartbeat} FROM trial_heartbeats h
                     JOIN trials t ON t.trial_id = h.trial_id WHERE {scope}"
                ),
            ),
        };
        let details = self.db.query(
            &format!(
                "SELECT 0, p.trial_id, p.param_name, p.param_value, p.distribution_json FROM trial_params p
                 JOIN trials t ON t.trial_id = p.trial_id WHERE {scope}
                 UNION ALL SELECT 1, a.trial_id, a.key, NULL, a.value_json FROM trial_user_attributes a
                 JOIN trials t ON t.trial_id = a.trial_id WHERE {scope}
                 UNION ALL SELECT 2, a.trial_id, a.key, NULL, a.value_json FROM trial_system_attributes a
                 JOIN trials t ON t.trial_id = a.trial_id WHERE {scope}{system_keys}{heartbeats}"
            ),
            &values,
        )?;
        // Each trial's details by row id; each distribution's JSON parsed once (a study's trials share a few).
        let mut details_of: HashMap<i64, Details> = HashMap::new();
        let mut distributions: HashMap<String, Result<Value, Error>> = HashMap::new();
        for r in details {
            let id = i64_of(&r[1]);
            let d = details_of.entry(id).or_default();
            match r[0].i64() {
                Some(0) => {
                    let dist = r[4].text().unwrap_or_default();
                    if !distributions.contains_key(dist) {
                        distributions.insert(dist.to_owned(), parse_distribution(dist));
                    }
                    d.params.push((
                        r[2].text().unwrap_or_default().to_owned(),
                        r[3].f64().unwrap_or(f64::NAN),
                        dist.to_owned(),
                    ));
                }
                Some(k @ (1 | 2)) => {
                    let key = r[2].text().unwrap_or_default().to_owned();
                    let v = parse_attr(&r[2], &r[4])?;
                    if k == 1 { &mut d.user } else { &mut d.system }.push((key, v));
                }
                _ => d.beat = r[4].text().map(str::to_owned),
            }
        }
        let mut out = Vec::with_capacity(found.len());
        for r in found {
            let (id, number) = (i64_of(&r[0]), i64_of(&r[1]));
            let state = r[2].text().unwrap_or_default().to_owned();
            let d = details_of.remove(&id).unwrap_or_default();
            let attr = |m: &[(String, Value)], k: &str| m.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
            let (user, system) = (&d.user[..], &d.system[..]);
            let float = |k: &str| attr(user, k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
            let (history, ours) = match attr(system, "tradesim_history") {
                Some(Value::String(text)) if history(&state) => (
                    ranges_to_numbers(&text)
                        .map_err(|e| Error::Study(format!("trial {number}: stored history: {e}")))?,
                    true,
                ),
                Some(Value::String(_)) => (Vec::new(), true),
                _ => (Vec::new(), false),
            };
            let mut params = Params::new();
            for (name, stored, dist) in d.params {
                let value = match &distributions[&dist] {
                    Ok(parsed) => param_value(stored, parsed, &dist),
                    Err(Error::Study(e)) => Err(Error::Study(e.clone())),
                    Err(e) => Err(Error::Study(e.to_string())),
                };
                match value {
                    Ok(v) => {
                        params.insert(name, v);
                    }
                    // Another Optuna worker's parameter tradesim cannot use (a text choice, say) is left out.
                    Err(_) if !ours => {}
                    Err(Error::Study(e)) => {
                        return Err(Error::Study(format!("trial {number}: stored parameters: {name}: {e}")));
                    }
                    Err(e) => return Err(e),
                }
            }
            let process = attr(system, "tradesim_worker_process").and_then(|v| serde_json::from_value(v).ok());
            let record = TrialRecord {
                number: number as u64,
                params,
                status: state.to_lowercase(),
                value: r[4].text().map_or(f64::NAN, |k| from_typed(r[3].f64(), k)),
                pruned_at: attr(system, "tradesim_pruned_at").and_then(|v| v.as_u64()),
                test_return: float("test_return"),
                test_sharpe: float("test_sharpe"),
                checkpoint: attr(user, "checkpoint").and_then(|v| v.as_str().map(str::to_owned)),
                fail_reason: attr(user, FAIL_REASON_ATTR)
                    .filter(|_| state == "FAIL")
                    .and_then(|v| v.as_str().map(str::to_owned)),
                history,
                ours,
                worker: attr(system, "tradesim_worker").and_then(|v| v.as_str().map(str::to_owned)),
                runs: attr(system, "tradesim_runs").and_then(|v| v.as_u64()).unwrap_or(0),
                heartbeat: d.beat,
                place: attr(system, "tradesim_place").and_then(|v| {
                    let a = v.as_array()?;
                    let at = |i: usize| a.get(i).and_then(Value::as_u64);
                    Some(Place { batch: at(0)?, slot: at(1)? as usize, tick: at(2)? as usize })
                }),
            };
            out.push((id, record, process));
        }
        Ok(out)
    }

    /// Brings this handle's snapshot of the trials up to date: the trials added since its last refresh and
    /// its unfinished ones are read again (the module's doc says why that is all that changes). `locked`:
    /// the caller holds the study's lock in the open transaction ([`Study::in_locked_tx`]), so that the cursor may
    /// move on PostgreSQL.
    pub fn refresh(&self, locked: bool) -> Result<(), Error> {
        let (after, ids) = {
            let s = self.snapshot.borrow();
            let mut ids: Vec<i64> = s.unfinished.iter().copied().filter(|&i| i <= s.cursor).collect();
            ids.sort_unstable();
            (s.cursor, ids)
        };
        let read = self.read(Rows::Since { after, ids: &ids }, |state| state == "RUNNING")?;
        let moves = locked || !self.db.is_postgres();
        let mut complete = Vec::new();
        {
            let mut s = self.snapshot.borrow_mut();
            let mut ids = self.ids.borrow_mut();
            for (id, record, process) in read {
                ids.insert(record.number, id);
                if moves {
                    s.cursor = s.cursor.max(id);
                }
                match process {
                    Some(p) => s.processes.insert(record.number, p),
                    None => s.processes.remove(&record.number),
                };
                if record.finished() {
                    s.unfinished.remove(&id);
                    if record.status == "complete" && !s.complete_epochs.contains_key(&record.number) {
                        complete.push((id, record.number));
                    }
                } else {
                    s.unfinished.insert(id);
                }
                s.trials.upsert(record);
            }
        }
        if !complete.is_empty() {
            self.read_complete_epochs(&complete)?;
        }
        Ok(())
    }

    /// Reads the epochs of newly complete trials `(row id, number)` into the snapshot.
    fn read_complete_epochs(&self, complete: &[(i64, u64)]) -> Result<(), Error> {
        let ids: Vec<i64> = complete.iter().map(|c| c.0).collect();
        let within = in_ids(&self.db, "e.trial_id", 1);
        let rows = self.db.query(
            &format!(
                "SELECT e.trial_id, e.epoch, e.loss, e.valid_sharpe, e.valid_return FROM tradesim_epochs e
                 WHERE {within} ORDER BY e.trial_id, e.epoch"
            ),
            &[ids_text(&ids).into()],
        )?;
        let number_of: HashMap<i64, u64> = complete.iter().copied().collect();
        let mut s = self.snapshot.borrow_mut();
        for &(_, number) in complete {
            s.complete_epochs.insert(number, Vec::new());
        }
        for r in rows {
            let Some(&trial) = number_of.get(&i64_of(&r[0])) else { continue };
            s.complete_epochs.entry(trial).or_default().push(EpochRecord {
                trial,
                epoch: i64_of(&r[1]) as u64,
                loss: r[2].f64().unwrap_or(f64::NAN),
                valid_sharpe: r[3].f64().unwrap_or(f64::NAN),
                valid_return: r[4].f64().unwrap_or(f64::NAN),
            });
        }
        Ok(())
    }

    /// The trials as of this handle's last [`Study::refresh`], by number (finished ones without their
    /// history). Held only while nothing refreshes the snapshot.
    pub fn snapshot(&self) -> Ref<'_, TrialSet> {
        Ref::map(self.snapshot.borrow(), |s| &s.trials)
    }

    /// The process of the worker that last claimed each trial of the snapshot, where recorded
    /// ([`Study::worker_processes`] as of the last refresh).
    /// Held only while nothing refreshes the snapshot.
    pub fn snapshot_processes(&self) -> Ref<'_, BTreeMap<u64, WorkerProcess>> {
        Ref::map(self.snapshot.borrow(), |s| &s.processes)
    }

    /// The median rule's reference for a trial with `history`, from the snapshot: the epochs of the complete
    /// trials among the history (by trial, then epoch) and how many they are
    /// ([`crate::hyperopt::search::pruning_reference`] over the whole study gives the same).
    pub fn snapshot_reference(&self, history: &[u64]) -> (Vec<EpochRecord>, usize) {
        let s = self.snapshot.borrow();
        let mut at = Vec::new();
        let mut n = 0;
        for number in history {
            if let Some(epochs) = s.complete_epochs.get(number) {
                at.extend_from_slice(epochs);
                n += 1;
            }
        }
        (at, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyperopt::search::pruning_reference;
    use crate::hyperopt::storage::StorageUrl;

    /// A handle's snapshot, refreshed from the rows added or changed since its last refresh while another
    /// handle writes, holds what a full read of the study gives (finished trials without their history),
    /// and its pruning reference is the one computed from every trial and epoch.
    #[test]
    fn a_refreshed_snapshot_is_a_full_read() {
        let dir = std::env::temp_dir().join(format!("tradesim-snapshot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("study.sqlite");
        let _ = std::fs::remove_file(&path);
        let writer = Study::open(&StorageUrl::Sqlite(path.clone()), "s", false, "{}").unwrap();
        let reader = Study::reopen(&StorageUrl::Sqlite(path), "s").unwrap();
        let params: Params = [("lr".to_owned(), 1e-3)].into();
        let check = |step: &str| {
            reader.refresh(step.len().is_multiple_of(2)).unwrap();
            let mut full = writer.trials().unwrap();
            for t in full.iter_mut().filter(|t| t.finished()) {
                t.history.clear();
            }
            // Compared as text: a trial without a value holds NaN, which equals nothing.
            assert_eq!(format!("{:?}", &**reader.snapshot()), format!("{full:?}"), "after {step}");
            let (trials, epochs) = (writer.trials().unwrap(), writer.epochs().unwrap());
            let history: Vec<u64> = (0..12).collect();
            assert_eq!(reader.snapshot_reference(&history), pruning_reference(&trials, &epochs, &history), "{step}");
        };
        check("empty");
        for n in 0..6 {
            writer.start(n, &params, &(0..n).collect::<Vec<_>>()).unwrap();
        }
        check("six started");
        for n in 0..3 {
            for epoch in 0..2 {
                let e = EpochRecord { trial: n, epoch, loss: 0.1, valid_sharpe: n as f64 + 0.5, valid_return: 0.0 };
                writer.record_epoch(&e).unwrap();
            }
        }
        writer.finish(0, 0.5, 0.1, 0.2, &[1], "a").unwrap();
        writer.prune(1, 1, 1.5).unwrap();
        writer.finish(1, 1.5, 0.1, 0.2, &[1], "b").unwrap();
        writer.finish(2, f64::NAN, 0.1, 0.2, &[1], "c").unwrap();
        check("three finished");
        writer.beat(&[3, 4], &crate::hyperopt::study::Worker { name: "w".to_owned(), process: None }).unwrap();
        writer.place(5, Place { batch: 3, slot: 2, tick: 1 }).unwrap();
        writer.start(6, &params, &[0, 1, 2]).unwrap();
        writer.finish(3, 2.5, 0.1, 0.2, &[1], "d").unwrap();
        check("beats, a place, a new trial");
        writer.finish(6, 3.5, 0.1, 0.2, &[1], "e").unwrap();
        check("the new trial finished");
        drop((writer, reader));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
