//! Builds `gpu-kernels` to PTX (feature `cuda`), and to cubins where a ptxas is at hand, and generates `ptx.rs`
//! with the modules and their kernel names.
#[path = "build/cubin.rs"]
mod cubin;
#[path = "build/ptx.rs"]
mod ptx;

fn main() {
    for path in
        ["build.rs", "build/ptx.rs", "build/cubin.rs", "build/NIGHTLY", "gpu-kernels/src", "gpu-kernels/Cargo.toml"]
    {
        println!("cargo::rerun-if-changed={path}");
    }
    println!("cargo::rerun-if-env-changed=GPU_ARCH");
    // The commit `tradesim bench` records in its JSON: set by the scripts that build binaries for
    // measurement (scripts/gpu-suite.sh); unset, the JSON says `null` rather than a commit it cannot vouch for.
    println!("cargo::rerun-if-env-changed=TRADESIM_COMMIT");
    println!("cargo::rustc-env=TRADESIM_COMMIT={}", std::env::var("TRADESIM_COMMIT").unwrap_or_default());
    println!("cargo::rerun-if-env-changed=TRADESIM_NIGHTLY");
    println!("cargo::rerun-if-env-changed=TRADESIM_PTXAS");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    if let Err(err) = ptx::build_and_generate(gpu_kernels::registry::ALL) {
        eprintln!("error: tradesim could not build its PTX kernels.\n{err}");
        std::process::exit(1);
    }
}
