//! The optional cubin step of the build (docs/BUILD.md): a module's PTX compiled by `ptxas` to machine code
//! for the cards in use, so that the driver loads it without compiling it first. Without a ptxas the build
//! embeds the PTX alone, as it always did.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The targets whose module gets a cubin where it is built: H100 and H200 (compute capability 9.0).
pub const ARCHS: &[&str] = &["sm_90"];

/// Where the ptxas of the build comes from.
#[derive(Debug, PartialEq, Eq)]
pub enum Ptxas {
    /// None: `TRADESIM_PTXAS=off`, or unset with no `ptxas` on `PATH`.
    Off,
    /// Named by `TRADESIM_PTXAS`: a failure fails the build.
    Named(PathBuf),
    /// Found on `PATH`: a failure is a warning, and the build goes on with the PTX alone.
    Found(PathBuf),
}

impl Ptxas {
    /// The ptxas for `setting` (the value of `TRADESIM_PTXAS`) and `path` (the value of `PATH`).
    pub fn resolve(setting: Option<&OsStr>, path: Option<&OsStr>) -> Self {
        match setting {
            Some(s) if s == "off" => Self::Off,
            Some(s) if !s.is_empty() => Self::Named(PathBuf::from(s)),
            _ => path
                .into_iter()
                .flat_map(std::env::split_paths)
                .map(|dir| dir.join("ptxas"))
                .find(|p| p.is_file())
                .map_or(Self::Off, Self::Found),
        }
    }

    /// The ptxas to run, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Off => None,
            Self::Named(p) | Self::Found(p) => Some(p),
        }
    }
}

/// Why a cubin could not be built.
#[derive(Debug)]
pub enum CubinError {
    Spawn(PathBuf, std::io::Error),
    Failed { ptxas: PathBuf, arch: String, status: String, stderr: String },
}

impl fmt::Display for CubinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn(p, e) => write!(f, "could not run {}: {e}", p.display()),
            Self::Failed { ptxas, arch, status, stderr } => write!(
                f,
                "{} could not compile the {arch} module ({status}):\n{stderr}\n\
                 (bash scripts/setup-ptxas.sh installs one that can; TRADESIM_PTXAS=off builds the PTX alone)",
                ptxas.display()
            ),
        }
    }
}

/// The release `ptxas --version` names (`release 12.9, V12.9.86`).
pub fn version(ptxas: &Path) -> Result<String, CubinError> {
    let out = Command::new(ptxas).arg("--version").output().map_err(|e| CubinError::Spawn(ptxas.to_owned(), e))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find_map(|l| l.split_once("compilation tools, ").map(|(_, v)| v.trim().to_owned()));
    match (out.status.success(), line) {
        (true, Some(line)) => Ok(line),
        (_, line) => Err(CubinError::Failed {
            ptxas: ptxas.to_owned(),
            arch: "any".to_owned(),
            status: format!("`--version`: {}", out.status),
            stderr: line.unwrap_or(text),
        }),
    }
}

/// Compiles the PTX file `ptx` (built for `arch`) into the cubin `cubin`.
pub fn compile(ptxas: &Path, arch: &str, ptx: &Path, cubin: &Path) -> Result<(), CubinError> {
    let mut args: Vec<OsString> = vec![format!("--gpu-name={arch}").into(), "--output-file".into()];
    args.extend([cubin.as_os_str().to_owned(), ptx.as_os_str().to_owned()]);
    let out = Command::new(ptxas).args(&args).output().map_err(|e| CubinError::Spawn(ptxas.to_owned(), e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(CubinError::Failed {
        ptxas: ptxas.to_owned(),
        arch: arch.to_owned(),
        status: out.status.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
