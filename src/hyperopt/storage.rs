//! Storage URLs of a study, as Optuna and SQLAlchemy spell them: `sqlite:///relative/path.sqlite`,
//! `sqlite:////absolute/path.sqlite`, `postgresql://USER:PASSWORD@HOST:PORT/DB?options` (also
//! `postgres://` and `postgresql+psycopg2://`). A URL's password never leaves this module unmasked except
//! through [`StorageUrl::password`]: [`std::fmt::Display`] writes `***` in its place, so errors, logs,
//! progress lines and reports show the masked form.

use crate::Error;
use std::fmt;
use std::path::PathBuf;

/// A parsed storage URL.
#[derive(Clone, PartialEq, Eq)]
pub enum StorageUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    Postgres {
        /// User name (percent-decoded).
        user: String,
        /// Password (percent-decoded), if any.
        password: Option<String>,
        /// Host name or address (`[...]` kept for IPv6).
        host: String,
        /// Port (5432 when not given).
        port: u16,
        /// Database name (percent-decoded).
        database: String,
        /// The query string after `?`, as written (connection options such as `sslmode=require`).
        options: String,
    },
}

fn percent_decode(s: &str, what: &str) -> Result<String, Error> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).filter(|h| h.len() == 2);
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
            out.push(
                byte.ok_or_else(|| {
                    Error::config("--storage", format!("storage URL: bad percent escape in the {what}"))
                })?,
            );
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| Error::config("--storage", format!("storage URL: the {what} is not UTF-8 once decoded")))
}

impl StorageUrl {
    /// Parses `url`. Errors name what is wrong and show the URL masked.
    pub fn parse(url: &str) -> Result<Self, Error> {
        let masked = mask(url);
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| Error::config("--storage", format!("storage URL `{masked}`: expected SCHEME://...")))?;
        match scheme {
            "sqlite" => {
                let path = rest.strip_prefix('/').filter(|p| !p.is_empty()).ok_or_else(|| {
                    Error::config("--storage", format!("storage URL `{masked}`: expected sqlite:///PATH"))
                })?;
                Ok(Self::Sqlite(PathBuf::from(path)))
            }
            "postgresql" | "postgres" | "postgresql+psycopg2" | "postgresql+psycopg" => {
                let (authority, tail) = rest.split_once('/').ok_or_else(|| {
                    Error::config(
                        "--storage",
                        format!("storage URL `{masked}`: expected postgresql://USER:PASSWORD@HOST:PORT/DATABASE"),
                    )
                })?;
                let (database, options) = tail.split_once('?').unwrap_or((tail, ""));
                if database.is_empty() {
                    return Err(Error::config("--storage", format!("storage URL `{masked}`: no database name")));
                }
                let (credentials, hostport) = authority.rsplit_once('@').ok_or_else(|| {
                    Error::config(
                        "--storage",
                        format!("storage URL `{masked}`: expected USER[:PASSWORD]@ before the host"),
                    )
                })?;
                let (user, password) = match credentials.split_once(':') {
                    Some((u, p)) => (u, Some(percent_decode(p, "password")?)),
                    None => (credentials, None),
                };
                if user.is_empty() {
                    return Err(Error::config("--storage", format!("storage URL `{masked}`: no user name")));
                }
                let (host, port) = match hostport.rsplit_once(':').filter(|(h, _)| !h.ends_with(':')) {
                    Some((h, p)) if !p.contains(']') => (
                        h,
                        p.parse::<u16>().map_err(|_| {
                            Error::config("--storage", format!("storage URL `{masked}`: port `{p}` is not a number"))
                        })?,
                    ),
                    _ => (hostport, 5432),
                };
                if host.is_empty() {
                    return Err(Error::config("--storage", format!("storage URL `{masked}`: no host")));
                }
                Ok(Self::Postgres {
                    user: percent_decode(user, "user name")?,
                    password,
                    host: host.to_owned(),
                    port,
                    database: percent_decode(database, "database name")?,
                    options: options.to_owned(),
                })
            }
            other => Err(Error::config(
                "--storage",
                format!("storage URL `{masked}`: unknown scheme `{other}` (sqlite or postgresql)"),
            )),
        }
    }

    /// The password (for the database connection only; never print it).
    pub fn password(&self) -> Option<&str> {
        match self {
            Self::Postgres { password, .. } => password.as_deref(),
            Self::Sqlite(_) => None,
        }
    }
}

/// A URL's query with the value of any `password=` option replaced by `***` (libpq takes the password
/// there too).
pub fn mask_options(options: &str) -> String {
    let masked: Vec<String> = options
        .split('&')
        .map(|o| match o.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => o.to_owned(),
        })
        .collect();
    masked.join("&")
}

/// `url` with the password of its `USER:PASSWORD@` part replaced by `***` (for text that is not known to
/// parse, such as an error about it).
pub fn mask(url: &str) -> String {
    if let Some((head, query)) = url.split_once('?') {
        return format!("{}?{}", mask(head), mask_options(query));
    }
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

impl fmt::Display for StorageUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite:///{}", path.display()),
            Self::Postgres { user, password, host, port, database, options } => {
                let secret = if password.is_some() { ":***" } else { "" };
                let query = if options.is_empty() { String::new() } else { format!("?{}", mask_options(options)) };
                write!(f, "postgresql://{user}{secret}@{host}:{port}/{database}{query}")
            }
        }
    }
}

/// Debug is the masked form too (a `{:?}` in an error must not leak the password).
impl fmt::Debug for StorageUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StorageUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of a `--storage` configuration error; any other kind of error fails the test.
    fn config_error(url: &str) -> String {
        match StorageUrl::parse(url).unwrap_err() {
            e @ Error::Config { .. } if e.to_string().starts_with("--storage: ") => e.to_string(),
            other => panic!("{url}: not a --storage configuration error: {other:?}"),
        }
    }

    #[test]
    fn sqlite_urls_give_paths_as_sqlalchemy_reads_them() {
        assert_eq!(
            StorageUrl::parse("sqlite:///runs/a/study.sqlite").unwrap(),
            StorageUrl::Sqlite("runs/a/study.sqlite".into())
        );
        assert_eq!(StorageUrl::parse("sqlite:////tmp/s.db").unwrap(), StorageUrl::Sqlite("/tmp/s.db".into()));
        assert!(config_error("sqlite://").contains("sqlite:///PATH"));
    }

    #[test]
    fn postgres_urls_parse_and_never_show_the_password() {
        let url = "postgresql://alice:s3cr%40t:x@db.example:6543/studies?sslmode=require";
        let s = StorageUrl::parse(url).unwrap();
        assert_eq!(s.password(), Some("s3cr@t:x"));
        let StorageUrl::Postgres { user, host, port, database, options, .. } = &s else { panic!("{s}") };
        assert_eq!((user.as_str(), host.as_str(), *port, database.as_str()), ("alice", "db.example", 6543, "studies"));
        assert_eq!(options, "sslmode=require");
        for shown in [s.to_string(), format!("{s:?}"), mask(url)] {
            assert!(!shown.contains("s3cr") && shown.contains("***"), "{shown}");
        }
        let s = StorageUrl::parse("postgres://bob@[::1]/db").unwrap();
        assert_eq!(s.to_string(), "postgresql://bob@[::1]:5432/db");
        assert_eq!(s.password(), None);
    }

    /// libpq also takes a password as a query option: it is masked in the URL's Display and in `mask`.
    #[test]
    fn a_password_option_is_masked() {
        let url = "postgresql://alice@db.example:5432/studies?sslmode=require&password=hunter2&application_name=x";
        let shown = StorageUrl::parse(url).unwrap().to_string();
        assert!(!shown.contains("hunter2") && shown.contains("password=***&application_name=x"), "{shown}");
        let masked = mask(url);
        assert!(!masked.contains("hunter2") && masked.contains("sslmode=require&password=***"), "{masked}");
    }

    #[test]
    fn bad_urls_are_errors_that_mask_the_password() {
        for (url, says) in [
            ("mysql://u:pw@h/db", "unknown scheme"),
            ("postgresql://u:pw@h:port/db", "port `port`"),
            ("postgresql://u:pw@h:5432/", "no database"),
            ("postgresql://h:5432/db", "USER[:PASSWORD]@"),
            ("postgresql://u:p%zz@h/db", "percent escape"),
            ("study.sqlite", "SCHEME://"),
        ] {
            let err = config_error(url);
            assert!(err.contains(says), "{url}: {err}");
            assert!(!err.contains(":pw@") && !err.contains("p%zz"), "{url}: the password leaked: {err}");
        }
    }
}
