//! The `tradesim` command line: argument parsing here, one module per command. Not public API: the
//! library modules hold every rule the commands use.

mod backtest;
mod bench;
mod data;
mod hyperopt;
mod hyperopt_universe;
mod info;
mod portfolio;
mod profile;
mod progress;
mod simulate;
mod train;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::data::synthetic::{GeneratorConfig, generate};
use crate::data::time::TimeUnit;
use crate::data::{CleanPolicy, Dataset};
use crate::{Backend, DeviceRequest, Error};
use simulate::{DemoConfig, run_demo};

#[derive(Debug, Parser)]
#[command(name = "tradesim", version, about = "GPU trading environments for reinforcement learning")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the bars come from: `--data FILE`, `--synthetic BARS`, or the embedded default dataset.
#[derive(Debug, Args)]
struct DataArgs {
    /// CSV or Parquet file of OHLCV bars (default: the embedded EURUSD 1h 2017 data); repeat it for a
    /// universe of several files (each a symbol column, or one series named by the file).
    #[arg(long)]
    data: Vec<PathBuf>,
    /// Symbol to use from a multi-symbol file (only its rows are read and checked).
    #[arg(long, conflicts_with = "symbols")]
    symbol: Option<String>,
    /// Symbols of a universe, comma-separated (default: every symbol); only their rows are read and checked.
    #[arg(long, value_delimiter = ',')]
    symbols: Vec<String>,
    /// Use this many seeded synthetic bars instead of a file.
    #[arg(long, conflicts_with = "data")]
    synthetic: Option<usize>,
    /// Synthetic symbols.
    #[arg(long, default_value_t = 1)]
    synthetic_symbols: usize,
    #[command(flatten)]
    rows: RowArgs,
}

/// How a file's rows with findings are treated and its integer times read (the data options and `data
/// check`'s).
#[derive(Debug, Clone, Args)]
struct RowArgs {
    /// Drop rows with findings of these classes (comma-separated, e.g. open-outside-range,zero-volume).
    #[arg(long, value_delimiter = ',')]
    drop: Vec<String>,
    /// Repair rows with findings of these classes (high-below-low, open-outside-range, close-outside-range).
    #[arg(long, value_delimiter = ',')]
    repair: Vec<String>,
    /// What the integers of an integer time column count: YYYYMMDD, s, ms, us or ns (refused without it).
    #[arg(long)]
    time_unit: Option<TimeUnit>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Backend, device, PTX target and kernels.
    Info {
        /// auto (CUDA when usable, else CPU), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// A short simulation: K trials x E envs of random actions on the data.
    Simulate {
        #[command(flatten)]
        data: DataArgs,
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
        /// Seed of segment starts and actions.
        #[arg(long, default_value_t = 7)]
        seed: u64,
    },
    /// Market data: validation reports and feature timing.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// The main job: a hyperparameter search (TPE, K trials at once, pruning, an Optuna study on SQLite or
    /// PostgreSQL, an HTML report) and its evidence (deflated Sharpe, PBO, placebo searches, the verdict).
    Hyperopt {
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        job: crate::job::JobArgs,
        /// auto (CUDA when usable, else CPU), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
        /// Prints the searchable hyperparameters (name, type, allowed values, each learner's default) as a
        /// Markdown table and exits.
        #[arg(long)]
        list_params: bool,
        /// On a GPU: a pair of CUDA events around every launch, and at the end the time the device ran any
        /// kernel over the wall time and the kernels that took longest (the events cost host time: the
        /// search runs slower than without).
        #[arg(long)]
        profile_kernels: bool,
    },
    /// Backtests a strategy grid over the data and prints the columns ranked by Sharpe.
    Backtest {
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        backtest: backtest::BacktestArgs,
        /// auto (CUDA when usable, else CPU), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// Trains DQN or PPO agents (K trials at once) on the train split, evaluating on the validation split each
    /// epoch.
    Train {
        #[command(flatten)]
        data: DataArgs,
        #[command(flatten)]
        train: train::TrainArgs,
        /// auto (CUDA when usable, else CPU), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// Benchmarks with machine-readable results (synthetic data).
    Bench {
        /// Workload (`tradesim bench --help` lists them all; `all` runs every one).
        #[arg(value_enum, default_value_t = crate::bench::Workload::All)]
        workload: crate::bench::Workload,
        /// Small sizes (a smoke test, e.g. in CI).
        #[arg(long)]
        quick: bool,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// auto (CPU, plus CUDA when usable), cpu or cuda.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
        /// The GPU kernels to measure: `default`, or a comma-separated list of unfused (one launch per
        /// layer), narrow-chains (32-row tiles), multiwave-fused (`mlp_backward` in many waves),
        /// classic-launch (no programmatic dependent launch), event-tracking (cudarc's per-buffer events).
        /// The same bits every way; recorded in the JSON as `variant`.
        #[arg(long, default_value = "default")]
        variant: tradesim_host::KernelOptions,
        /// Trials of the learner workloads (W3, W4; default 5), e.g. 1024 for the wide-batch figure.
        #[arg(long)]
        trials: Option<usize>,
        /// A Python with vectorbt installed (e.g. the throwaway virtualenv of scripts/bench-vectorbt.sh):
        /// W2e then runs vectorbt on the same CSV file beside tradesim's end-to-end backtest and prints the
        /// ratio and the command it ran.
        #[arg(long, value_name = "PYTHON")]
        vectorbt: Option<PathBuf>,
        /// A Python with PyTorch installed: W3 and W4 on a GPU then run the PyTorch peer of their epochs
        /// (benches/peers/torch_learners.py: eager, torch.compile, CUDA graph) and give tradesim's ratio to
        /// the fastest (`ratio_to_pytorch` in the JSON).
        #[arg(long, value_name = "PYTHON")]
        torch: Option<PathBuf>,
        /// A Python with FinRL's portfolio env importable (the throwaway virtualenv of scripts/setup-finrl.sh):
        /// W11 then steps FinRL's `PortfolioOptimizationEnv` on the same bars on one CPU core
        /// (benches/peers/finrl_portfolio.py) and gives tradesim's CPU ratio per core.
        #[arg(long, value_name = "PYTHON")]
        finrl: Option<PathBuf>,
        #[command(flatten)]
        power: crate::bench::power::PowerArgs,
    },
}

#[derive(Debug, Subcommand)]
enum DataCommand {
    /// Validates files and prints every finding; several files (or a file with several symbols) are also
    /// checked as a universe; exits with 2 when the data is unusable.
    Check {
        /// The files (default: the embedded dataset).
        files: Vec<PathBuf>,
        /// Symbols to check, comma-separated (default: every symbol); only their rows are read and checked.
        #[arg(long, value_delimiter = ',')]
        symbols: Vec<String>,
        #[command(flatten)]
        rows: RowArgs,
    },
    /// Loads the data and computes the 51 features of every symbol, with timings.
    Features {
        #[command(flatten)]
        data: DataArgs,
    },
    /// Writes seeded synthetic bars whose OHLC come from Brownian sub-steps, as CSV (docs/SYNTHETIC.md).
    Synth(data::SynthArgs),
}

/// Runs the command line; an error is printed and turns into its class's exit code
/// ([`Error::exit_code`]: 2 for bad input or configuration, 1 for I/O, study, output and driver failures, 130
/// after Ctrl-C).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The tests' hooks, refused when malformed rather than ignored.
    let hooks = crate::failpoint::check().and(crate::hyperopt::study::clock_skew().map(|_| ()));
    let result = hooks.and_then(|()| match cli.command {
        Command::Info { device } => info::run(device),
        Command::Simulate { data, device, trials, envs, steps, seed } => {
            simulate(&data, device, DemoConfig { trials, envs, steps, seed })
        }
        Command::Data { command: DataCommand::Check { files, symbols, rows } } => data::check(&files, &symbols, &rows),
        Command::Data { command: DataCommand::Features { data } } => data::features(&data),
        Command::Data { command: DataCommand::Synth(args) } => data::synth(&args),
        Command::Backtest { data, backtest, device } => {
            let (loaded, backend) = load_beside(&data, || select(device));
            match &backtest.weights {
                Some(weights) => portfolio::run_command(loaded, &data, weights, &backtest, backend),
                None => backtest::run(loaded, &data, &backtest, backend),
            }
        }
        Command::Train { data, train, device } => {
            let symbol = data.symbol.as_deref();
            let early = |d: &Dataset| crate::job::EarlyFeatures::compute(d, symbol, train.sigma_span);
            let (loaded, early, backend) = load_then_beside(&data, early, || select(device));
            train::run(loaded, symbol, early, &train, backend)
        }
        Command::Hyperopt { list_params: true, .. } => {
            print!("{}", crate::hyperopt::hyperparameters::markdown_table());
            Ok(())
        }
        Command::Hyperopt { data, job, device, profile_kernels, .. } => {
            // The series' features are computed while the device opens, with the configuration's sigma
            // span (a study that exists and stores another span computes its own); the configuration is
            // read once, as the job reads it again.
            let job = job.with_config_read();
            let sigma_span = job.configure().map(|c| c.env.sigma_span).ok();
            let symbol = data.symbol.as_deref();
            let early = |d: &Dataset| sigma_span.and_then(|s| crate::job::EarlyFeatures::compute(d, symbol, s));
            let (loaded, early, backends) = load_then_beside(&data, early, || crate::select_backends(device));
            let backends = backends.map(|(b, reason)| {
                if let Some(reason) = reason {
                    eprintln!("note: using the CPU backend: {reason}");
                }
                b
            });
            let profiled: Vec<Backend> = match &backends {
                Ok(b) if profile_kernels => b.iter().filter(|b| b.is_cuda()).cloned().collect(),
                _ => Vec::new(),
            };
            if profile_kernels && profiled.is_empty() {
                eprintln!("note: --profile-kernels profiles GPU launches; this search runs on the CPU");
            }
            let started = std::time::Instant::now();
            profile::start(&profiled)?;
            let ran = hyperopt::run(loaded, symbol, early, &job, backends.map_err(Error::from));
            let stopped = profile::stop(&profiled, started.elapsed().as_secs_f64());
            ran.and(stopped)
        }
        Command::Bench { workload: crate::bench::Workload::Power, quick, json, device, power, .. } => {
            bench::power(&power, quick, json.as_deref(), device)
        }
        Command::Bench { workload, quick, json, device, variant, trials, vectorbt, torch, finrl, .. } => {
            let peers = crate::bench::Peers { vectorbt, torch, finrl };
            bench::run(workload, quick, json.as_deref(), device, variant, trials, &peers)
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

/// Loads the data the arguments name while `open` opens the device on a thread of its own (the driver's
/// context and the kernels' module take a few tenths of a second on a GPU host): neither waits for the other.
fn load_beside<T: Send>(args: &DataArgs, open: impl FnOnce() -> T + Send) -> (Result<Dataset, Error>, T) {
    let (loaded, (), opened) = load_then_beside(args, |_| (), open);
    (loaded, opened)
}

/// [`load_beside`], with `then` run on the data once loaded (where it loaded), still beside the opening.
fn load_then_beside<T: Send, U: Default>(
    args: &DataArgs,
    then: impl FnOnce(&Dataset) -> U,
    open: impl FnOnce() -> T + Send,
) -> (Result<Dataset, Error>, U, T) {
    std::thread::scope(|s| {
        let opening = s.spawn(open);
        let loaded = load(args);
        let after = loaded.as_ref().map(then).unwrap_or_default();
        (loaded, after, opening.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// Loads the data the arguments name.
fn load(args: &DataArgs) -> Result<Dataset, Error> {
    if let Some(bars) = args.synthetic {
        let cfg = GeneratorConfig { bars, symbols: args.synthetic_symbols.max(1), ..GeneratorConfig::default() };
        return Ok(generate(&cfg));
    }
    let policy = CleanPolicy::parse(&args.rows.drop, &args.rows.repair)?;
    if args.data.is_empty() {
        return crate::data::embedded().map_err(Error::from);
    }
    let unit = args.rows.time_unit;
    let (dataset, reports) = match &args.symbol {
        Some(symbol) => crate::data::load_files(&args.data, (&policy, unit, Some(symbol.as_str())))?,
        None => crate::data::load_files(&args.data, (&policy, unit, args.symbols.as_slice()))?,
    };
    let (dropped, repaired) = reports.iter().fold((0, 0), |(d, r), x| (d + x.dropped, r + x.repaired));
    if dropped + repaired > 0 {
        eprintln!("note: {dropped} rows dropped, {repaired} repaired by --drop/--repair");
    }
    Ok(dataset)
}

fn select(device: DeviceRequest) -> Result<Backend, Error> {
    let (backend, fallback) = crate::select_backend_with_reason(device)?;
    if let Some(reason) = fallback {
        eprintln!("note: using the CPU backend: {reason}");
    }
    Ok(backend)
}

fn simulate(args: &DataArgs, device: DeviceRequest, cfg: DemoConfig) -> Result<(), Error> {
    let dataset = load(args)?;
    let series = dataset.select(args.symbol.as_deref())?;
    let backend = select(device)?;
    run_demo(&backend, series, &dataset.label(), &cfg)
}
