//! The `tradesim` command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::demo::{DemoConfig, run_demo};
use crate::{Backend, DeviceRequest, HostError};

#[derive(Debug, Parser)]
#[command(name = "tradesim", version, about = "GPU trading environments for reinforcement learning")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Backend, device, PTX target and kernels.
    Info {
        /// auto (CUDA when usable, else CPU), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// A short portfolio simulation: K trials x E envs of random actions on seeded synthetic bars.
    Simulate {
        /// auto (CUDA when usable, else CPU), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
        /// Trials (parameter sets).
        #[arg(long, default_value_t = 5)]
        trials: usize,
        /// Envs per trial.
        #[arg(long, default_value_t = 1_024)]
        envs: usize,
        /// Steps (bars) each env walks.
        #[arg(long, default_value_t = 500)]
        steps: usize,
        /// Seed of the bars, segment starts and actions.
        #[arg(long, default_value_t = 7)]
        seed: u64,
    },
    /// Benchmarks with machine-readable results (synthetic data).
    Bench {
        /// Workload: experience (env stepping into the replay ring, step and scan mode).
        #[arg(default_value = "experience")]
        workload: String,
        /// Small sizes (a smoke test, e.g. in CI).
        #[arg(long)]
        quick: bool,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<std::path::PathBuf>,
        /// auto (CPU, plus CUDA when usable), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
}

/// Runs the command line; errors are printed and turn into exit code 2.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { device } => info(device),
        Command::Simulate { device, trials, envs, steps, seed } => {
            select(device).and_then(|backend| run_demo(&backend, &DemoConfig { trials, envs, steps, seed }))
        }
        Command::Bench { workload, quick, json, device } => bench(&workload, quick, json.as_deref(), device),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

fn select(device: DeviceRequest) -> Result<Backend, HostError> {
    let (backend, fallback) = crate::select_backend_with_reason(device)?;
    if let Some(reason) = fallback {
        eprintln!("note: using the CPU backend: {reason}");
    }
    Ok(backend)
}

fn bench(workload: &str, quick: bool, json: Option<&std::path::Path>, device: DeviceRequest) -> Result<(), HostError> {
    if workload != "experience" {
        return Err(HostError::Config(format!("unknown bench workload `{workload}` (available: experience)")));
    }
    let (bars, envs): (usize, &[usize]) =
        if quick { (4_001, &[1, 64, 1_000]) } else { (300_000, &[1, 1_024, 16_384, 65_536]) };
    println!(
        "experience: {} trials x {bars} SYNTHETIC bars, F = {}, same transitions per variant",
        crate::bench::TRIALS,
        crate::bench::FEATURES
    );
    let rows = crate::bench::experience(device, bars, envs)?;
    print!("{}", crate::bench::markdown(&rows));
    if let Some(path) = json {
        std::fs::write(path, crate::bench::json(&rows, bars))
            .map_err(|e| HostError::Config(format!("writing {}: {e}", path.display())))?;
        println!("JSON: {}", path.display());
    }
    Ok(())
}

fn info(device: DeviceRequest) -> Result<(), HostError> {
    println!("tradesim {}", env!("CARGO_PKG_VERSION"));
    println!("CUDA:        {}", tradesim_host::detect());
    let (backend, fallback) = crate::select_backend_with_reason(device)?;
    let info = backend.info();
    match fallback {
        Some(reason) => println!("backend:     cpu (CUDA not used: {reason})"),
        None => println!("backend:     {}", info.backend),
    }
    if let Some(name) = &info.device_name {
        let (major, minor) = info.compute_capability.unwrap_or_default();
        let gib = info.total_memory.unwrap_or_default() as f64 / f64::from(1u32 << 30);
        println!("device:      {name} (compute capability {major}.{minor}, {gib:.1} GiB)");
        println!("multiprocessors: {}", info.parallelism);
    } else {
        println!("CPU threads: {}", info.parallelism);
    }
    #[cfg(feature = "cuda")]
    {
        println!("PTX arch:    {} ({} bytes, built at cargo build)", crate::ptx::ARCH, crate::ptx::PTX.len());
        println!("kernels:     {}", crate::ptx::ENTRIES.join(", "));
    }
    #[cfg(not(feature = "cuda"))]
    {
        println!("PTX arch:    none (built with --no-default-features: CPU path only)");
        println!("kernels:     {} (CPU)", gpu_kernels::kernel_names::ALL.join(", "));
    }
    Ok(())
}
