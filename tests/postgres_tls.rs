//! Issue 45 item 1: TLS to PostgreSQL with libpq's `sslmode` and `sslrootcert`, against the real server of
//! `scripts/postgres.sh` (ssl=on, a certificate made when it starts: signed by `ca.crt`, valid for
//! `localhost` only; `other-ca.crt` signed nothing). `scripts/test.sh` sets `TRADESIM_POSTGRES_URL` and
//! `TRADESIM_POSTGRES_TLS` (that directory).

mod common;

use std::path::PathBuf;
use std::process::Command;

use tradesim::hyperopt::db::Db;
use tradesim::hyperopt::storage::StorageUrl;

/// The server's URL and its certificates' directory; `None` outside CI when unset.
fn server() -> Option<(String, PathBuf)> {
    let url = std::env::var("TRADESIM_POSTGRES_URL").ok();
    let tls = std::env::var("TRADESIM_POSTGRES_TLS").ok();
    assert!(
        (url.is_some() && tls.is_some()) || std::env::var_os("CI").is_none(),
        "CI must run the TLS tests: TRADESIM_POSTGRES_URL or TRADESIM_POSTGRES_TLS is unset"
    );
    if url.is_none() || tls.is_none() {
        eprintln!("skipped: TRADESIM_POSTGRES_URL or TRADESIM_POSTGRES_TLS is unset (scripts/test.sh sets them)");
    }
    Some((url?, PathBuf::from(tls?)))
}

/// The URL with host `host` and the query `query`; `localhost` connects to 127.0.0.1 (`hostaddr`, as libpq
/// spells it: the server listens there only, and a host name resolving to ::1 first must not hide a TLS
/// error behind a refused connection), its certificate still checked against `localhost`.
fn with(url: &str, host: &str, query: &str) -> String {
    let (head, tail) = url.rsplit_once('@').unwrap();
    let port_db = tail.split_once(':').unwrap().1;
    let addr = if host == "localhost" { "hostaddr=127.0.0.1&" } else { "" };
    format!("{head}@{host}:{port_db}?{addr}{query}")
}

fn password(url: &str) -> String {
    match StorageUrl::parse(url).unwrap() {
        StorageUrl::Postgres { password, .. } => password.unwrap(),
        StorageUrl::Sqlite(_) => unreachable!(),
    }
}

/// Connects to `url`: whether the session is encrypted (the server's own view, `pg_stat_ssl`), or the error.
fn session(url: &str) -> Result<bool, String> {
    let db = Db::connect(&StorageUrl::parse(url).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let rows = db
        .query("SELECT CASE WHEN ssl THEN 'tls' ELSE 'plain' END FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .map_err(|e| e.to_string())?;
    Ok(rows[0][0].text() == Some("tls"))
}

#[test]
fn verify_full_connects_to_the_certified_host_name() {
    let Some((url, tls)) = server() else { return };
    let ca = tls.join("ca.crt");
    let q = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    assert_eq!(session(&with(&url, "localhost", &q)), Ok(true));
}

#[test]
fn a_wrong_host_name_or_root_is_refused_saying_why() {
    let Some((url, tls)) = server() else { return };
    let secret = password(&url);
    let ca = tls.join("ca.crt");
    // The certificate names `localhost`, not 127.0.0.1.
    let q = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let e = session(&with(&url, "127.0.0.1", &q)).unwrap_err();
    assert!(e.contains("not valid for host `127.0.0.1`") && e.contains("verify-full"), "{e}");
    assert!(!e.contains(&secret) && e.contains(":***@"), "{e}");
    // A root that signed nothing of the server's.
    let other = tls.join("other-ca.crt");
    for mode in ["verify-full", "verify-ca", "require"] {
        let q = format!("sslmode={mode}&sslrootcert={}", other.display());
        let e = session(&with(&url, "localhost", &q)).unwrap_err();
        assert!(e.contains("not signed by a certificate authority in sslrootcert"), "{mode}: {e}");
        assert!(e.contains(&other.display().to_string()) && !e.contains(&secret), "{mode}: {e}");
    }
    // verify-ca checks the chain before it ignores the name: a wrong root is refused at a name it would skip.
    let q = format!("sslmode=verify-ca&sslrootcert={}", other.display());
    let e = session(&with(&url, "127.0.0.1", &q)).unwrap_err();
    assert!(e.contains("not signed by a certificate authority in sslrootcert"), "{e}");
    // A root file that is not there.
    let e = session(&with(&url, "localhost", "sslmode=verify-ca&sslrootcert=/nonexistent/root.crt")).unwrap_err();
    assert!(e.contains("sslrootcert `/nonexistent/root.crt`") && !e.contains(&secret), "{e}");
}

#[test]
fn verify_ca_checks_the_chain_not_the_host_name() {
    let Some((url, tls)) = server() else { return };
    let q = format!("sslmode=verify-ca&sslrootcert={}", tls.join("ca.crt").display());
    assert_eq!(session(&with(&url, "127.0.0.1", &q)), Ok(true));
}

#[test]
fn require_encrypts_without_verifying_disable_does_not_encrypt() {
    let Some((url, _)) = server() else { return };
    assert_eq!(session(&with(&url, "127.0.0.1", "sslmode=require")), Ok(true));
    // prefer (libpq's default, and so the URL without sslmode) takes the TLS the server offers.
    assert_eq!(session(&with(&url, "127.0.0.1", "sslmode=prefer")), Ok(true));
    assert_eq!(session(&url), Ok(true));
    assert_eq!(session(&with(&url, "127.0.0.1", "sslmode=disable")), Ok(false));
    let e = session(&with(&url, "127.0.0.1", "sslmode=verify")).unwrap_err();
    assert!(e.contains("sslmode `verify` is not one of"), "{e}");
}

/// A search over verify-full: the study is written through TLS, and nothing the command prints holds the
/// password.
#[test]
fn a_search_runs_over_verified_tls() {
    let Some((url, tls)) = server() else { return };
    let dir = std::env::temp_dir().join(format!("tradesim-tls-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("search.toml");
    std::fs::write(&cfg, "[study]\ntrials = 2\nparallel = 2\nepochs = 1\nenvs = 4\nsegment_len = 24\nseed = 3\n")
        .unwrap();
    let name = format!("tls-{}", std::process::id());
    let storage = with(&url, "localhost", &format!("sslmode=verify-full&sslrootcert={}", tls.join("ca.crt").display()));
    let out = Command::new(common::bin())
        .current_dir(&dir)
        .args(["hyperopt", "--device", "cpu", "--config", cfg.to_str().unwrap(), "--storage", &storage])
        .args(["--study-name", &name])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(!text.contains(&password(&url)), "{text}");
    let study = tradesim::hyperopt::study::Study::reopen(&StorageUrl::parse(&storage).unwrap(), &name).unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(trials.len(), 2);
    assert!(trials.iter().all(|t| t.finished()), "{trials:?}");
    // Optuna (psycopg2, so libpq) reads the study through the same URL, encrypted.
    let Ok(python) = std::env::var("TRADESIM_OPTUNA_PYTHON") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run the Optuna check: TRADESIM_OPTUNA_PYTHON is unset");
        return std::fs::remove_dir_all(dir).unwrap();
    };
    let script = "import sys, optuna, sqlalchemy\n\
        s = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])\n\
        e = sqlalchemy.create_engine(sys.argv[1])\n\
        with e.connect() as c:\n    \
            ssl = c.execute(sqlalchemy.text('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).scalar()\n\
        print(len(s.trials), sum(t.state.name == 'COMPLETE' or t.state.name == 'PRUNED' for t in s.trials), ssl)\n";
    let libpq = storage.replacen("postgresql://", "postgresql+psycopg2://", 1);
    let out = Command::new(python).args(["-c", script, &libpq, &name]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.trim(), "2 2 True");
    std::fs::remove_dir_all(dir).unwrap();
}
