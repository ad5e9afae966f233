//! The errors of the library and the command line, each variant something a caller can act on; the command
//! line maps them to exit codes ([`Error::exit_code`]): 2 for bad input (data, configuration, arguments, a
//! device that is not there), 1 for a failure while running (a file that cannot be written, the study's
//! database, the driver).

use std::path::PathBuf;

use crate::HostError;
use crate::findings::LoadReport;

/// Everything tradesim can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Market data with blocking findings; the report lists every finding with its file, row and column.
    #[error(
        "the data is unusable ({} blocking finding(s)); see `tradesim data check`:\n{report}",
        report.blocking().count()
    )]
    DataRefused {
        /// The load report (findings, counts, what was dropped or repaired).
        report: Box<LoadReport>,
    },
    /// Data that loaded but cannot serve the request: a missing symbol, too few bars for a split, a price
    /// without an f64 value.
    #[error("{0}")]
    Data(String),
    /// A configuration value, command-line argument or environment variable out of its range, naming it.
    #[error("{key}: {message}")]
    Config {
        /// The TOML key (`study.trials`), flag (`--fast`) or environment variable (`TRADESIM_FAILPOINT`).
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// The study's storage: the database could not be reached or written, or holds something tradesim
    /// cannot use (another schema version, a corrupt row), named by trial where there is one.
    #[error("study database: {0}")]
    Study(String),
    /// An output (report, chart, checkpoint) could not be produced.
    #[error("{0}")]
    Output(String),
    /// Stopped by the user (Ctrl-C) while running; a study continues with `--resume`.
    #[error("interrupted")]
    Interrupted,
    /// The runtime: backend selection, shapes, device memory, kernels.
    #[error(transparent)]
    Host(#[from] HostError),
}

impl Error {
    /// A [`Error::Config`] for `key`.
    pub fn config(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config { key: key.into(), message: message.into() }
    }

    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }

    /// The process exit code of this error: 2 for bad input, 1 for a failure while running, 130 when
    /// interrupted.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::DataRefused { .. } | Self::Data(_) | Self::Config { .. } => 2,
            Self::Io { .. } | Self::Study(_) | Self::Output(_) => 1,
            // 128 + SIGINT, as shells report a process stopped by Ctrl-C.
            Self::Interrupted => 130,
            Self::Host(h) => match h {
                #[cfg(feature = "cuda")]
                HostError::Driver { .. } => 1,
                HostError::Load { .. } | HostError::MissingKernel { .. } => 1,
                _ => 2,
            },
        }
    }
}

impl From<LoadReport> for Error {
    fn from(report: LoadReport) -> Self {
        Self::DataRefused { report: Box::new(report) }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
