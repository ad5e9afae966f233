//! The study's database connection, SQLite or PostgreSQL, behind one small interface: statements written once
//! with `?N` placeholders (PostgreSQL gets `$N`), values as [`Val`], rows as vectors of [`Val`]. On PostgreSQL
//! each value is converted to the type the server inferred for its placeholder (Optuna's tables use `integer`,
//! `double precision`, `varchar`, `timestamp` and enum types), and each column is read by its type.

use std::cell::{Cell, RefCell};
use std::error::Error as StdError;

use postgres::types::{FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use rusqlite::types::{ToSqlOutput, Value as SqliteValue, ValueRef};

use super::storage::StorageUrl;
use super::tls::TlsOptions;
use crate::Error;

/// A value in or out of a statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// SQL NULL.
    Null,
    /// An integer.
    I64(i64),
    /// A float.
    F64(f64),
    /// Text (also an enum label on PostgreSQL).
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
    /// A UTC time as Optuna writes it, `YYYY-MM-DD HH:MM:SS.ffffff` (text on SQLite, `timestamp` on
    /// PostgreSQL).
    Time(String),
}

impl Val {
    /// The integer, if it is one.
    pub fn i64(&self) -> Option<i64> {
        match self {
            Self::I64(x) => Some(*x),
            _ => None,
        }
    }

    /// The float (an integer converted), if it is a number.
    pub fn f64(&self) -> Option<f64> {
        match self {
            Self::F64(x) => Some(*x),
            Self::I64(x) => Some(*x as f64),
            _ => None,
        }
    }

    /// The text (or time), if it is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Text(s) | Self::Time(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if it is a blob.
    pub fn blob(&self) -> Option<&[u8]> {
        match self {
            Self::Blob(b) => Some(b),
            _ => None,
        }
    }
}

impl From<i64> for Val {
    fn from(x: i64) -> Self {
        Self::I64(x)
    }
}

impl From<f64> for Val {
    fn from(x: f64) -> Self {
        Self::F64(x)
    }
}

impl From<Option<f64>> for Val {
    fn from(x: Option<f64>) -> Self {
        x.map_or(Self::Null, Self::F64)
    }
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for Val {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<&[u8]> for Val {
    fn from(b: &[u8]) -> Self {
        Self::Blob(b.to_vec())
    }
}

impl rusqlite::ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Self::Null => ToSqlOutput::Owned(SqliteValue::Null),
            Self::I64(x) => ToSqlOutput::Owned(SqliteValue::Integer(*x)),
            Self::F64(x) => ToSqlOutput::Owned(SqliteValue::Real(*x)),
            Self::Text(s) | Self::Time(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Self::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

const TIME_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.f";

/// A UTC time as Optuna writes it (`YYYY-MM-DD HH:MM:SS.ffffff`; text order is time order): what
/// [`Val::Time`] holds on both databases.
pub fn timestamp(t: chrono::NaiveDateTime) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

/// A [`Val`] bound to the type PostgreSQL inferred for its placeholder.
#[derive(Debug)]
struct PgParam<'a>(&'a Val);

impl ToSql for PgParam<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let bad = || format!("cannot store {:?} as PostgreSQL {ty}", self.0).into();
        match (self.0, ty) {
            (Val::Null, _) => Ok(IsNull::Yes),
            (Val::I64(x), &Type::INT2) => i16::try_from(*x)?.to_sql(ty, out),
            (Val::I64(x), &Type::INT4) => i32::try_from(*x)?.to_sql(ty, out),
            (Val::I64(x), &Type::INT8) => x.to_sql(ty, out),
            (Val::I64(x), &Type::FLOAT8) => (*x as f64).to_sql(ty, out),
            (Val::F64(x), &Type::FLOAT8) => x.to_sql(ty, out),
            (Val::F64(x), &Type::FLOAT4) => (*x as f32).to_sql(ty, out),
            (Val::Text(s), t) if matches!(t.kind(), Kind::Enum(_)) => {
                out.extend_from_slice(s.as_bytes());
                Ok(IsNull::No)
            }
            (Val::Text(s), _) => s.as_str().to_sql(ty, out),
            (Val::Time(s), &Type::TIMESTAMP) => chrono::NaiveDateTime::parse_from_str(s, TIME_FORMAT)
                .map_err(|e| Error::Study(format!("{s}: {e}")))?
                .to_sql(ty, out),
            (Val::Time(s), _) => s.as_str().to_sql(ty, out),
            (Val::Blob(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out),
            _ => Err(bad()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A PostgreSQL column read by its type.
struct PgColumn(Val);

impl<'a> FromSql<'a> for PgColumn {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Self(match *ty {
            Type::INT2 => Val::I64(i16::from_sql(ty, raw)?.into()),
            Type::INT4 => Val::I64(i32::from_sql(ty, raw)?.into()),
            Type::INT8 => Val::I64(i64::from_sql(ty, raw)?),
            Type::FLOAT4 => Val::F64(f32::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Val::F64(f64::from_sql(ty, raw)?),
            Type::BOOL => Val::I64(bool::from_sql(ty, raw)?.into()),
            Type::BYTEA => Val::Blob(raw.to_vec()),
            Type::TIMESTAMP => Val::Time(timestamp(chrono::NaiveDateTime::from_sql(ty, raw)?)),
            _ => Val::Text(std::str::from_utf8(raw)?.to_owned()),
        }))
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(Self(Val::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// `?N` placeholders as PostgreSQL's `$N`.
fn dollar(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A connection to the study's database.
pub enum Db {
    /// A SQLite file.
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL database (whether a transaction is open).
    Postgres(RefCell<Box<postgres::Client>>, Cell<bool>, RefCell<Prepared>),
}

/// The statements a PostgreSQL connection has prepared, by their text: a statement is parsed and planned by
/// the server once per connection, then each run is one round trip (bind and execute) instead of two.
#[derive(Default)]
pub struct Prepared(std::collections::HashMap<String, postgres::Statement>);

/// How many statements a connection keeps prepared; past it the cache starts again (tradesim's statements
/// are a few dozen fixed texts, so this is only a bound against a caller that writes values into them).
const PREPARED_MAX: usize = 256;

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prepared({} statements)", self.0.len())
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sqlite(_) => "Db::Sqlite",
            Self::Postgres(..) => "Db::Postgres",
        })
    }
}

fn sqlite_err(e: rusqlite::Error) -> Error {
    Error::Study(e.to_string())
}

fn pg_err(e: postgres::Error) -> Error {
    // The server's message (the error's Display is only "db error").
    let detail = e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned());
    Error::Study(format!("(PostgreSQL) {detail}"))
}

impl Prepared {
    /// Statement `sql` (`?N` placeholders) prepared on `client`: as prepared before, or now.
    fn get(&mut self, client: &mut postgres::Client, sql: &str) -> Result<postgres::Statement, Error> {
        if let Some(stmt) = self.0.get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = client.prepare(&dollar(sql)).map_err(pg_err)?;
        if self.0.len() >= PREPARED_MAX {
            self.0.clear();
        }
        self.0.insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    /// A run of `sql` failed with `e`: it is prepared again at its next run (a schema changed by another
    /// program since, say, invalidates its plan), and `e` is the error.
    fn failed(&mut self, sql: &str, e: postgres::Error) -> Error {
        self.0.remove(sql);
        pg_err(e)
    }
}

impl Db {
    /// Connects to `storage` (the URL's password is used here and never shown).
    pub fn connect(storage: &StorageUrl) -> Result<Self, Error> {
        match storage {
            StorageUrl::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).map_err(sqlite_err)?;
                conn.set_prepared_statement_cache_capacity(PREPARED_MAX);
                conn.busy_timeout(std::time::Duration::from_secs(60)).map_err(sqlite_err)?;
                Ok(Self::Sqlite(conn))
            }
            StorageUrl::Postgres { user, password, host, port, database, options } => {
                let mut config = postgres::Config::new();
                config.user(user).host(host.trim_start_matches('[').trim_end_matches(']')).port(*port).dbname(database);
                if let Some(p) = password {
                    config.password(p);
                }
                let mut tls = TlsOptions::default();
                for option in options.split('&').filter(|o| !o.is_empty()) {
                    match option.split_once('=') {
                        Some(("hostaddr", v)) => {
                            let ip = v
                                .parse()
                                .map_err(|_| Error::Study(format!("{storage}: hostaddr `{v}` is not an IP address")))?;
                            config.hostaddr(ip);
                        }
                        Some(("sslmode", v)) => tls.mode = Some(v.to_owned()),
                        Some(("sslrootcert", v)) => tls.rootcert = Some(v.to_owned()),
                        Some(("application_name", v)) => {
                            config.application_name(v);
                        }
                        Some(("connect_timeout", v)) => {
                            let secs: u64 =
                                v.parse().map_err(|_| Error::Study(format!("{storage}: connect_timeout `{v}`")))?;
                            config.connect_timeout(std::time::Duration::from_secs(secs));
                        }
                        _ => {
                            let shown = super::storage::mask_options(option);
                            return Err(Error::Study(format!("{storage}: unsupported connection option `{shown}`")));
                        }
                    }
                }
                // The options are the storage URL's (or PGSSLMODE's): refused as configuration, naming the
                // storage (its password masked).
                let tls = tls.with_environment().resolve().map_err(|e| match e {
                    Error::Config { message, .. } => Error::config(storage.to_string(), message),
                    e => e,
                })?;
                config.ssl_mode(tls.negotiate);
                let mut client = config.connect(tls.connector.clone()).map_err(|e| {
                    let why = tls.explain(&e, host).unwrap_or_else(|| pg_err(e).to_string());
                    Error::Study(format!("connecting to {storage}: {why}"))
                })?;
                // tradesim's statements read and write a few rows each: a parallel plan's workers (which a
                // planner may pick for a union once its statistics count a large study) cost more to start
                // than they save, on every run of the statement.
                client.batch_execute("SET max_parallel_workers_per_gather = 0").map_err(pg_err)?;
                Ok(Self::Postgres(RefCell::new(Box::new(client)), Cell::new(false), RefCell::default()))
            }
        }
    }

    /// Whether this is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres(..))
    }

    /// Runs a statement; the number of rows it changed.
    pub fn exec(&self, sql: &str, params: &[Val]) -> Result<u64, Error> {
        match self {
            Self::Sqlite(c) => c
                .prepare_cached(sql)
                .and_then(|mut stmt| stmt.execute(rusqlite::params_from_iter(params)))
                .map(|n| n as u64)
                .map_err(sqlite_err),
            Self::Postgres(c, _, prepared) => {
                let mut c = c.borrow_mut();
                let stmt = prepared.borrow_mut().get(&mut c, sql)?;
                let ps: Vec<PgParam<'_>> = params.iter().map(PgParam).collect();
                let refs: Vec<&(dyn ToSql + Sync)> = ps.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                c.execute(&stmt, &refs).map_err(|e| prepared.borrow_mut().failed(sql, e))
            }
        }
    }

    /// Runs a query; its rows.
    pub fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, Error> {
        match self {
            Self::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql).map_err(sqlite_err)?;
                let n = stmt.column_count();
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(params), |r| {
                        (0..n)
                            .map(|i| {
                                Ok(match r.get_ref(i)? {
                                    ValueRef::Null => Val::Null,
                                    ValueRef::Integer(x) => Val::I64(x),
                                    ValueRef::Real(x) => Val::F64(x),
                                    ValueRef::Text(t) => Val::Text(String::from_utf8_lossy(t).into_owned()),
                                    ValueRef::Blob(b) => Val::Blob(b.to_vec()),
                                })
                            })
                            .collect::<rusqlite::Result<Vec<Val>>>()
                    })
                    .map_err(sqlite_err)?;
                rows.collect::<rusqlite::Result<_>>().map_err(sqlite_err)
            }
            Self::Postgres(c, _, prepared) => {
                let mut c = c.borrow_mut();
                let stmt = prepared.borrow_mut().get(&mut c, sql)?;
                let ps: Vec<PgParam<'_>> = params.iter().map(PgParam).collect();
                let refs: Vec<&(dyn ToSql + Sync)> = ps.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                let rows = c.query(&stmt, &refs).map_err(|e| prepared.borrow_mut().failed(sql, e))?;
                rows.iter()
                    .map(|r| (0..r.len()).map(|i| r.try_get::<_, PgColumn>(i).map(|v| v.0).map_err(pg_err)).collect())
                    .collect()
            }
        }
    }

    /// Statements without parameters, separated by `;`.
    pub fn batch(&self, sql: &str) -> Result<(), Error> {
        match self {
            Self::Sqlite(c) => c.execute_batch(sql).map_err(sqlite_err),
            Self::Postgres(c, ..) => c.borrow_mut().batch_execute(sql).map_err(pg_err),
        }
    }

    /// SQLite: write-ahead logging (readers beside one writer) and full syncs. Switching the file to WAL
    /// needs it to itself for a moment, which SQLite refuses at once (no busy wait) while another worker
    /// opening the same new study holds it: the switch is skipped when the file already is in WAL mode and
    /// retried for up to a minute otherwise. PostgreSQL: nothing to do.
    pub fn sqlite_wal(&self) -> Result<(), Error> {
        let Self::Sqlite(c) = self else { return Ok(()) };
        let started = std::time::Instant::now();
        loop {
            let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(sqlite_err)?;
            if mode.eq_ignore_ascii_case("wal") {
                break;
            }
            match c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
                Ok(_) => break,
                Err(e)
                    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                        && started.elapsed() < std::time::Duration::from_secs(60) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(sqlite_err(e)),
            }
        }
        c.execute_batch("PRAGMA synchronous = FULL;").map_err(sqlite_err)
    }

    /// Whether a transaction is open.
    pub fn in_transaction(&self) -> bool {
        match self {
            Self::Sqlite(c) => !c.is_autocommit(),
            Self::Postgres(_, open, _) => open.get(),
        }
    }

    /// Opens a write transaction (SQLite: `BEGIN IMMEDIATE`, other writers wait).
    pub fn begin(&self) -> Result<(), Error> {
        self.begin_with("")
    }

    /// Opens a write transaction and runs `then` (statements without parameters; PostgreSQL's locks, from
    /// [`Db::claim_locks`] or [`Db::write_locks`]) in the same round trip. Rolled back when `then` fails.
    pub fn begin_with(&self, then: &str) -> Result<(), Error> {
        match self {
            Self::Sqlite(_) => {
                self.batch("BEGIN IMMEDIATE")?;
                if then.is_empty() { Ok(()) } else { self.batch(then).inspect_err(|_| self.rollback()) }
            }
            Self::Postgres(_, open, _) => {
                open.set(true);
                let sql = if then.is_empty() { "BEGIN".to_owned() } else { format!("BEGIN; {then}") };
                self.batch(&sql).inspect_err(|_| self.rollback())
            }
        }
    }

    /// Commits the open transaction.
    pub fn commit(&self) -> Result<(), Error> {
        if let Self::Postgres(_, open, _) = self {
            open.set(false);
        }
        self.batch("COMMIT")
    }

    /// Rolls the open transaction back.
    pub fn rollback(&self) {
        if let Self::Postgres(_, open, _) = self {
            open.set(false);
        }
        let _ = self.batch("ROLLBACK");
    }

    /// The statements that serialize claims on study `study_id` until the transaction ends (PostgreSQL: its
    /// row locked and trial inserts held back; SQLite's `BEGIN IMMEDIATE` already serializes every writer,
    /// so none).
    pub fn claim_locks(&self, study_id: i64) -> String {
        if !self.is_postgres() {
            return String::new();
        }
        // Optuna's workers insert trials without that lock and number them by counting the trials before
        // them: blocking inserts until the claim commits (and waiting for theirs in flight) keeps every trial
        // number unique.
        format!(
            "SELECT study_id FROM studies WHERE study_id = {study_id} FOR UPDATE; \
             LOCK TABLE trials IN SHARE ROW EXCLUSIVE MODE"
        )
    }

    /// The statement a write to a claimed trial takes first (PostgreSQL: the table lock that a claim
    /// conflicts with; SQLite: none).
    pub fn write_locks(&self) -> String {
        if self.is_postgres() { "LOCK TABLE trials IN ROW EXCLUSIVE MODE".to_owned() } else { String::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars() {
        assert_eq!(
            dollar("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?'"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?'"
        );
    }
}
