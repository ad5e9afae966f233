//! The optional cubin step of the build (build/cubin.rs), run with stand-in ptxas scripts: where the ptxas
//! comes from, what a named one's failure does, and the release line it reports.
#![cfg(unix)]

#[path = "../build/cubin.rs"]
mod cubin;
#[path = "common/script.rs"]
mod script;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use cubin::{CubinError, Ptxas};

/// A folder of its own for each test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tradesim-cubin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An executable `ptxas` in `dir` running `body` (sh).
fn stand_in(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("ptxas");
    script::write_script(&path, body);
    path
}

#[test]
fn the_ptxas_is_the_named_one_else_the_first_on_path_else_none() {
    let dir = scratch("resolve");
    let empty = scratch("resolve-empty");
    let found = stand_in(&dir, "exit 0");
    let path = std::env::join_paths([&empty, &dir]).unwrap();
    assert_eq!(Ptxas::resolve(None, Some(&path)), Ptxas::Found(found.clone()));
    assert_eq!(Ptxas::resolve(Some(OsStr::new("")), Some(&path)), Ptxas::Found(found));
    assert_eq!(Ptxas::resolve(Some(OsStr::new("/opt/x/ptxas")), Some(&path)), Ptxas::Named("/opt/x/ptxas".into()));
    // `off` builds the PTX alone, whatever PATH holds; so does a PATH without ptxas.
    assert_eq!(Ptxas::resolve(Some(OsStr::new("off")), Some(&path)), Ptxas::Off);
    assert_eq!(Ptxas::resolve(None, Some(empty.as_os_str())), Ptxas::Off);
    assert_eq!(Ptxas::resolve(None, None), Ptxas::Off);
    assert_eq!(Ptxas::Off.path(), None);
    // The arch the build compiles: the one H100 and H200 run.
    assert_eq!(cubin::ARCHS, ["sm_90"]);
}

#[test]
fn a_ptxas_compiles_the_module_it_is_given_into_the_cubin_asked_for() {
    let dir = scratch("compile");
    // ptxas's own argument order: --gpu-name=ARCH --output-file OUT IN; the stand-in records its arguments.
    let ptxas = stand_in(
        &dir,
        "case \"$1\" in --version) printf 'ptxas: NVIDIA (R)\\nCuda compilation tools, release 12.9, V12.9.86\\n';; \
         *) echo \"$@\" > \"$3\";; esac",
    );
    assert_eq!(cubin::version(&ptxas).unwrap(), "release 12.9, V12.9.86");
    let (ptx, out) = (dir.join("kernels-sm_90.ptx"), dir.join("kernels-sm_90.cubin"));
    std::fs::write(&ptx, ".target sm_90\n").unwrap();
    cubin::compile(&ptxas, "sm_90", &ptx, &out).unwrap();
    let args = std::fs::read_to_string(&out).unwrap();
    assert_eq!(args.trim(), format!("--gpu-name=sm_90 --output-file {} {}", out.display(), ptx.display()));
}

#[test]
fn a_failing_ptxas_is_reported_with_its_message() {
    let dir = scratch("fail");
    let ptxas =
        stand_in(&dir, "echo \"ptxas fatal   : Unsupported .version 7.8; current version is '7.4'\" >&2; exit 255");
    let err = cubin::compile(&ptxas, "sm_90", &dir.join("k.ptx"), &dir.join("k.cubin")).unwrap_err();
    assert!(matches!(err, CubinError::Failed { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("could not compile the sm_90 module") && text.contains("Unsupported .version 7.8"), "{text}");
    assert!(text.contains("TRADESIM_PTXAS=off"), "{text}");
    // `--version` failing, or not naming a release: no cubin either.
    assert!(matches!(cubin::version(&ptxas), Err(CubinError::Failed { .. })));
    let silent = stand_in(&scratch("silent"), "echo hello");
    assert!(cubin::version(&silent).is_err());
    let missing = dir.join("no-such-ptxas");
    assert!(matches!(
        cubin::compile(&missing, "sm_90", &dir.join("k.ptx"), &dir.join("k.cubin")),
        Err(CubinError::Spawn(..))
    ));
}
