//! The nested nightly cargo that compiles `gpu-kernels` for `nvptx64-nvidia-cuda` (ARCHITECTURE.md).

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gpu_kernels::registry::{DEPENDENT_LAUNCH_ARCH, sm_number};

use crate::cubin::{self, CubinError, Ptxas};

const DEFAULT_ARCH: &str = "sm_80";
/// The nightly the PTX build uses, named in one place (`build/NIGHTLY`; `scripts/setup-toolchain.sh` installs
/// exactly it): `nightly-2026-05-20`, rustc 1.97.0-nightly (e50aa6fba 2026-05-19).
const PINNED_NIGHTLY: &str = include_str!("NIGHTLY");

const INSTALL_HINT: &str = "The PTX build needs the pinned nightly (build/NIGHTLY) with rust-src:\n    \
     bash scripts/setup-toolchain.sh\n\
     (or set TRADESIM_NIGHTLY to the name of another nightly toolchain).\n\
     To build the CPU path alone with stable Rust: cargo build --no-default-features";

/// Why the PTX could not be built.
#[derive(Debug)]
pub enum PtxError {
    Spawn(std::io::Error),
    Cargo { status: String, stderr: String },
    Read(PathBuf, std::io::Error),
    MissingEntries(Vec<String>),
    ExternSymbols(Vec<String>),
    Write(PathBuf, std::io::Error),
    Cubin(CubinError),
}

impl fmt::Display for PtxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "could not start `cargo +{}`: {e}\n{INSTALL_HINT}", nightly()),
            Self::Cargo { status, stderr } => {
                write!(f, "the nightly nvptx64 build of gpu-kernels failed ({status}):\n{stderr}\n{INSTALL_HINT}")
            }
            Self::Read(p, e) => write!(f, "could not read {}: {e}", p.display()),
            Self::MissingEntries(names) => write!(
                f,
                "the PTX lacks `.entry` points the host expects: {}. Each name in \
                 gpu_kernels::registry::ALL needs a #[unsafe(no_mangle)] extern \"ptx-kernel\" fn \
                 of that name in gpu-kernels/src/entries.rs.",
                names.join(", ")
            ),
            Self::ExternSymbols(lines) => write!(
                f,
                "the PTX calls functions it does not define (the driver would refuse to load it):\n  {}\n\
                 Kernel code must be self-contained: use libm for math, no std, no alloc.",
                lines.join("\n  ")
            ),
            Self::Write(p, e) => write!(f, "could not write {}: {e}", p.display()),
            Self::Cubin(e) => write!(f, "TRADESIM_PTXAS: {e}"),
        }
    }
}

/// Compiles the PTX into `$OUT_DIR/kernels.ptx` (for `GPU_ARCH`, default sm_80) and, where that target is
/// older than sm_90, the same kernels for sm_90 into `$OUT_DIR/kernels-sm_90.ptx` (the host loads it on
/// GPUs that can run it: programmatic dependent launch); checks both, compiles the cubins of
/// [`cubin::ARCHS`] where a ptxas is at hand ([`build_cubins`]) and writes `$OUT_DIR/ptx.rs`.
pub fn build_and_generate(expected: &[&str]) -> Result<(), PtxError> {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let arch = std::env::var("GPU_ARCH").unwrap_or_else(|_| DEFAULT_ARCH.to_owned());
    let entries = build_module(&root, &out_dir, &arch, "kernels.ptx", expected)?;
    let mut modules = vec![(arch.clone(), "kernels.ptx".to_owned())];
    let newer_arch = DEPENDENT_LAUNCH_ARCH;
    let newer = sm_number(&arch).is_some_and(|n| sm_number(newer_arch).is_some_and(|newer| n < newer));
    if newer {
        let file = format!("kernels-{newer_arch}.ptx");
        build_module(&root, &out_dir, newer_arch, &file, expected)?;
        modules.push((newer_arch.to_owned(), file));
    }
    let cubins = build_cubins(&out_dir, &modules)?;
    let generated = out_dir.join("ptx.rs");
    std::fs::write(&generated, generate(&arch, &entries, newer.then_some(newer_arch), &cubins))
        .map_err(|e| PtxError::Write(generated, e))
}

/// The cubins built: (target, file in `$OUT_DIR`) and the ptxas release that built them.
#[derive(Default)]
pub struct Cubins {
    files: Vec<(String, String)>,
    release: Option<String>,
}

/// Compiles each of `modules` (target, PTX file in `out_dir`) whose target is in [`cubin::ARCHS`] into
/// `kernels-{target}.cubin` with the ptxas named by `TRADESIM_PTXAS` (`off`: none) or found on `PATH`; none
/// without a ptxas. A named ptxas that fails fails the build; one found on `PATH` that fails is a warning,
/// and the build embeds the PTX alone.
fn build_cubins(out_dir: &Path, modules: &[(String, String)]) -> Result<Cubins, PtxError> {
    let ptxas = Ptxas::resolve(std::env::var_os("TRADESIM_PTXAS").as_deref(), std::env::var_os("PATH").as_deref());
    let Some(path) = ptxas.path() else { return Ok(Cubins::default()) };
    println!("cargo::rerun-if-changed={}", path.display());
    let built = (|| -> Result<Cubins, CubinError> {
        let release = cubin::version(path)?;
        let mut files = Vec::new();
        for (arch, ptx) in modules.iter().filter(|(arch, _)| cubin::ARCHS.contains(&arch.as_str())) {
            let file = format!("kernels-{arch}.cubin");
            let started = Instant::now();
            cubin::compile(path, arch, &out_dir.join(ptx), &out_dir.join(&file))?;
            let bytes = std::fs::metadata(out_dir.join(&file)).map_or(0, |m| m.len());
            println!(
                "cargo::warning=built cubin for {arch} with ptxas {release} ({}): {bytes} bytes, {:.1} s",
                path.display(),
                started.elapsed().as_secs_f64()
            );
            files.push((arch.clone(), file));
        }
        Ok(Cubins { files, release: Some(release) })
    })();
    match (built, &ptxas) {
        (Ok(cubins), _) => Ok(cubins),
        (Err(e), Ptxas::Found(_)) => {
            let reason = e.to_string().replace('\n', " ");
            println!("cargo::warning=no cubin (the PTX alone is embedded): the ptxas on PATH failed: {reason}");
            Ok(Cubins::default())
        }
        (Err(e), _) => Err(PtxError::Cubin(e)),
    }
}

/// Compiles the kernels for `arch` into `$OUT_DIR/{file}` with launch bounds; returns the module's entries.
fn build_module(
    root: &Path,
    out_dir: &Path,
    arch: &str,
    file: &str,
    expected: &[&str],
) -> Result<Vec<String>, PtxError> {
    // rustc's own output, kept apart from the module with launch bounds: a nested build that finds the kernels
    // fresh does not emit it again, and the bounds must not be written into an already bounded file.
    let raw_path = out_dir.join(format!("rustc-{file}"));
    let ptx_path = out_dir.join(file);
    let started = Instant::now();
    compile(root, arch, &raw_path)?;
    let ptx = std::fs::read_to_string(&raw_path).map_err(|e| PtxError::Read(raw_path.clone(), e))?;
    let entries = check(&ptx, expected)?;
    let ptx = with_launch_bounds(&ptx, gpu_kernels::registry::LAUNCH_BOUNDS)?;
    std::fs::write(&ptx_path, &ptx).map_err(|e| PtxError::Write(ptx_path.clone(), e))?;
    println!(
        "cargo::warning=built PTX for {arch}: {} bytes, {} kernels, {:.1} s",
        ptx.len(),
        entries.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(entries)
}

/// `TRADESIM_NIGHTLY`, or the pinned nightly.
fn nightly() -> String {
    std::env::var("TRADESIM_NIGHTLY").unwrap_or_else(|_| PINNED_NIGHTLY.trim().to_owned())
}

fn compile(root: &Path, arch: &str, ptx_path: &Path) -> Result<(), PtxError> {
    let toolchain = nightly();
    let mut cmd = Command::new("cargo");
    // The outer build exports its own toolchain and flags; the nested nightly build must see none of them.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO") || key.starts_with("RUSTC") || key.starts_with("RUSTDOC") {
            cmd.env_remove(key.as_ref());
        }
    }
    for key in ["RUSTFLAGS", "RUSTUP_TOOLCHAIN", "TARGET", "HOST", "OUT_DIR", "PROFILE", "OPT_LEVEL", "DEBUG"] {
        cmd.env_remove(key);
    }
    cmd.current_dir(root)
        .env("RUSTFLAGS", "-Zunstable-options -Cpanic=immediate-abort")
        .arg(format!("+{toolchain}"))
        .args(["rustc", "-p", "gpu-kernels", "--profile", "ptx", "--crate-type", "staticlib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core", "--target-dir"])
        // A target directory per arch: the two builds would otherwise invalidate each other's kernels.
        .arg(root.join("target").join(if arch == DEFAULT_ARCH { "ptx".to_owned() } else { format!("ptx-{arch}") }))
        .arg("--")
        .arg(format!("--emit=asm={}", ptx_path.display()))
        .args(["-C", &format!("target-cpu={arch}")]);
    let output = cmd.output().map_err(PtxError::Spawn)?;
    if output.status.success() {
        // The nested build's own warnings (code compiled only for the GPU, which the host's clippy never
        // sees) would otherwise stay in its captured output: pass them on.
        for w in nested_warnings(&String::from_utf8_lossy(&output.stderr)) {
            println!("cargo::warning=gpu-kernels (nvptx64): {w}");
        }
        Ok(())
    } else {
        Err(PtxError::Cargo {
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// `ptx` with `.maxntid` (and `.minnctapersm` where asked) after the parameter list of each kernel in
/// `bounds`.
fn with_launch_bounds(ptx: &str, bounds: &[(&str, u32, u32)]) -> Result<String, PtxError> {
    let mut out = String::with_capacity(ptx.len() + 64 * bounds.len());
    let mut pending: Option<&(&str, u32, u32)> = None;
    let mut applied: Vec<&str> = Vec::new();
    for line in ptx.lines() {
        if let Some(name) = entry_name(line) {
            pending = bounds.iter().find(|b| b.0 == name);
        }
        // The body's opening brace ends the entry's header.
        if line.trim() == "{"
            && let Some(&(name, threads, blocks)) = pending.take()
        {
            out.push_str(&format!(".maxntid {threads}, 1, 1\n"));
            if blocks > 0 {
                out.push_str(&format!(".minnctapersm {blocks}\n"));
            }
            applied.push(name);
        }
        out.push_str(line);
        out.push('\n');
    }
    let missing: Vec<String> = bounds.iter().filter(|b| !applied.contains(&b.0)).map(|b| b.0.to_owned()).collect();
    if !missing.is_empty() {
        return Err(PtxError::MissingEntries(missing));
    }
    Ok(out)
}

/// The kernel name of a line that opens an `.entry`.
fn entry_name(line: &str) -> Option<&str> {
    line.trim_start().strip_prefix(".visible .entry ")?.split(['(', ' ']).next()
}

/// The `.entry` names of the module, after checking every expected one is there and nothing is external.
fn check(ptx: &str, expected: &[&str]) -> Result<Vec<String>, PtxError> {
    let entries: Vec<String> = ptx.lines().filter_map(entry_name).map(str::to_owned).collect();
    let missing: Vec<String> =
        expected.iter().filter(|name| !entries.iter().any(|e| e == *name)).map(|name| (*name).to_owned()).collect();
    if !missing.is_empty() {
        return Err(PtxError::MissingEntries(missing));
    }
    let externs: Vec<String> =
        ptx.lines().filter(|line| line.contains(".extern .func")).map(|line| line.trim().to_owned()).collect();
    if !externs.is_empty() {
        return Err(PtxError::ExternSymbols(externs));
    }
    Ok(entries)
}

fn generate(arch: &str, entries: &[String], newer: Option<&str>, cubins: &Cubins) -> String {
    let mut src = String::from(
        "/// The PTX module built from gpu-kernels at `cargo build`.\n\
         pub const PTX: &str = include_str!(concat!(env!(\"OUT_DIR\"), \"/kernels.ptx\"));\n",
    );
    src +=
        &format!("/// The `-C target-cpu` the PTX was built for (env GPU_ARCH).\npub const ARCH: &str = {arch:?};\n");
    src += &format!("/// Every `.entry` of the module.\npub const ENTRIES: &[&str] = &{entries:?};\n");
    src += "/// The same kernels built for a newer target (sm_90: programmatic dependent launch) where [`ARCH`] is \
            older: the target and the module.\n";
    src += &match newer {
        Some(newer) => format!(
            "pub const NEWER: Option<(&str, &str)> = Some(({newer:?}, \
             include_str!(concat!(env!(\"OUT_DIR\"), \"/kernels-{newer}.ptx\"))));\n"
        ),
        None => "pub const NEWER: Option<(&str, &str)> = None;\n".to_owned(),
    };
    src += "/// Machine code compiled by ptxas at `cargo build` from the module of the same target (docs/BUILD.md): \
            (target, cubin). Empty where the build had no ptxas.\npub const CUBINS: &[(&str, &[u8])] = &[";
    for (arch, file) in &cubins.files {
        src += &format!("({arch:?}, include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\"))), ");
    }
    src += "];\n";
    src += &format!(
        "/// The ptxas release that compiled [`CUBINS`] (`ptxas --version`), if any.\npub const PTXAS: Option<&str> = {:?};\n",
        cubins.release.as_deref().filter(|_| !cubins.files.is_empty())
    );
    src
}

/// The first line and location of each warning in a nested cargo build's stderr (not the summary line).
fn nested_warnings(stderr: &str) -> Vec<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        // Not the summary ("`gpu-kernels` (lib) generated N warnings").
        if let Some(msg) = line.strip_prefix("warning: ")
            && !(msg.starts_with('`') && msg.contains(" generated "))
        {
            let at = lines.get(i + 1).and_then(|l| l.trim_start().strip_prefix("--> ")).unwrap_or("");
            out.push(if at.is_empty() { msg.to_owned() } else { format!("{msg} at {at}") });
        }
    }
    out
}
