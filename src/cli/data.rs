//! `tradesim data check`, `tradesim data features` and `tradesim data synth`.

use crate::Error;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};

use super::{DataArgs, RowArgs, load};
use crate::data::synthetic::{self, PathConfig, PathKind};
use crate::data::universe::Universe;
use crate::data::{CleanPolicy, Dataset, SymbolChoice};

/// `tradesim data check`: each file's report (every finding with its file, row, column and symbol), its
/// series, and for more than one symbol the universe they make.
pub(super) fn check(files: &[PathBuf], symbols: &[String], rows: &RowArgs) -> Result<(), Error> {
    let policy = CleanPolicy::parse(&rows.drop, &rows.repair)?;
    let started = Instant::now();
    if files.is_empty() {
        let dataset = crate::data::embedded()?;
        print_series(&dataset, started.elapsed().as_secs_f64());
        return Ok(());
    }
    let (mut datasets, mut refused) = (Vec::new(), Vec::new());
    for path in files {
        match crate::data::load_file(path, (&policy, rows.time_unit, symbols)) {
            Ok((dataset, report)) => {
                print!("{report}");
                datasets.push(dataset);
            }
            Err(report) => {
                print!("{report}");
                refused.push(format!("{} is unusable: {} blocking finding(s)", report.file, report.blocking().count()));
            }
        }
    }
    if !refused.is_empty() {
        return Err(Error::Data(refused.join("; ")));
    }
    let choice = if symbols.is_empty() { SymbolChoice::All } else { SymbolChoice::List(symbols) };
    let dataset = crate::data::merge_datasets(datasets, choice)?;
    print_series(&dataset, started.elapsed().as_secs_f64());
    if dataset.series.len() > 1 {
        print_universe(&Universe::new(dataset, None)?);
    }
    Ok(())
}

/// The loaded series: symbol, bars and span (the first 20).
fn print_series(dataset: &Dataset, seconds: f64) {
    println!("loaded in {seconds:.3} s: {} symbol(s), {} bars", dataset.series.len(), dataset.n_bars());
    for s in dataset.series.iter().take(20) {
        let (first, last) = (s.bars.first(), s.bars.last());
        let span = first.zip(last).map(|(a, b)| format!("{} .. {}", a.time.to_rfc3339(), b.time.to_rfc3339()));
        println!("  {:<10} {:>8} bars  {}", s.symbol, s.bars.len(), span.unwrap_or_default());
    }
    if dataset.series.len() > 20 {
        println!("  ... {} more symbols", dataset.series.len() - 20);
    }
}

/// The universe of the loaded symbols: its calendar, the symbols that start late (not tradable before their
/// first bar) and those with times missing inside their span (no trade there, valued at the last close).
fn print_universe(u: &Universe) {
    let first: Vec<usize> = (0..u.n_symbols()).map(|s| u.first_time(s)).collect();
    let missing: Vec<usize> = (0..u.n_symbols()).map(|s| u.missing_inside(s)).collect();
    let span = match (u.times.first(), u.times.last()) {
        (Some(a), Some(b)) => format!("{} .. {}", a.to_rfc3339(), b.to_rfc3339()),
        _ => String::new(),
    };
    println!("universe: {} symbols on {} times ({span}), the union of their times", u.n_symbols(), u.n_times());
    let late: Vec<usize> = (0..u.n_symbols()).filter(|&s| first[s] > 0).collect();
    println!("  {} symbol(s) start after the first time (not tradable before their first bar)", late.len());
    for &s in late.iter().take(10) {
        println!("    {:<10} from {} ({} times before)", u.series[s].symbol, u.times[first[s]].to_rfc3339(), first[s]);
    }
    let last: Vec<usize> = (0..u.n_symbols()).filter(|&s| u.bar(u.n_times() - 1, s).is_none()).collect();
    println!(
        "  {} symbol(s) end before the last time (what they hold at the end stays valued at their last close)",
        last.len()
    );
    let mut gaps: Vec<usize> = (0..u.n_symbols()).filter(|&s| missing[s] > 0).collect();
    gaps.sort_by_key(|&s| std::cmp::Reverse(missing[s]));
    println!(
        "  {} symbol(s) miss times inside their span ({} cells: no trade there, worth the last close)",
        gaps.len(),
        missing.iter().sum::<usize>()
    );
    for &s in gaps.iter().take(10) {
        println!("    {:<10} {} missing of {} times", u.series[s].symbol, missing[s], u.n_times() - first[s]);
    }
}

pub(super) fn features(args: &DataArgs) -> Result<(), Error> {
    let started = Instant::now();
    let dataset = load(args)?;
    let loaded = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut rows = 0;
    for series in &dataset.series {
        let prepared = crate::data::device::Prepared::new(series, 0..series.bars.len())?;
        rows += prepared.features.rows;
    }
    let featurized = started.elapsed().as_secs_f64();
    let universe = (dataset.series.len() > 1)
        .then(|| {
            let started = Instant::now();
            let universe = Universe::new(dataset.clone(), None)?;
            let features = crate::data::cross_section::UniverseFeatures::compute(&universe)?;
            Ok::<_, Error>((universe.n_times(), features.n_symbols, started.elapsed().as_secs_f64()))
        })
        .transpose()?;
    println!("data:     {}: {} symbol(s), {} bars", dataset.label(), dataset.series.len(), dataset.n_bars());
    println!("load:     {loaded:.3} s");
    println!(
        "features: {featurized:.3} s for {rows} rows x {} features ({:.2} M rows/s)",
        crate::data::features::N_FEATURES,
        rows as f64 / featurized.max(1e-9) / 1e6
    );
    if let Some((times, symbols, seconds)) = universe {
        println!(
            "universe: {seconds:.3} s for {times} times x {symbols} symbols x {} features (the 51 carried to the \
             calendar, {} cross-sectional)",
            crate::data::cross_section::N_UNIVERSE_FEATURES,
            crate::data::cross_section::N_CROSS_FEATURES
        );
    }
    Ok(())
}

/// The signal of `tradesim data synth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum SynthKind {
    /// No signal at all, or a constant drift with --drift (a trend buy-and-hold earns).
    RandomWalk,
    /// AR(1) bar returns (--phi).
    Autocorrelated,
    /// Two trending regimes (--drift, --switch-probability).
    Regime,
}

/// `tradesim data synth`: seeded bars whose OHLC come from Brownian sub-steps (docs/SYNTHETIC.md).
#[derive(Debug, Args)]
pub(super) struct SynthArgs {
    /// The signal in the returns.
    #[arg(long, value_enum)]
    kind: SynthKind,
    /// Bars (hourly from 2020-01-01).
    #[arg(long)]
    bars: usize,
    /// Brownian sub-steps per bar.
    #[arg(long, default_value_t = 12)]
    sub_steps: usize,
    /// Standard deviation of a bar's log return.
    #[arg(long, default_value_t = 0.002)]
    sigma: f64,
    /// Standard deviation of the log gap between a bar's open and the previous close.
    #[arg(long, default_value_t = 0.0)]
    gap_sigma: f64,
    /// Lag-1 coefficient of the returns, for --kind autocorrelated (default 0.4).
    #[arg(long)]
    phi: Option<f64>,
    /// Drift per bar: of a regime for --kind regime (default 0.0005), or the constant drift of a trend for
    /// --kind random-walk (default 0: no signal).
    #[arg(long)]
    drift: Option<f64>,
    /// Chance per bar of a regime switch, for --kind regime (default 0.01).
    #[arg(long)]
    switch_probability: Option<f64>,
    /// Seed: the same seed gives the same bars.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The CSV file to write (`tradesim data check FILE` and `--data FILE` read it).
    #[arg(long)]
    out: PathBuf,
}

impl SynthArgs {
    /// The generator's configuration; a parameter of another kind is refused, naming its flag.
    fn config(&self) -> Result<PathConfig, Error> {
        let unused = |flag: &str, given: bool, kind: &str| {
            if given { Err(Error::config(flag, format!("applies to --kind {kind} only"))) } else { Ok(()) }
        };
        if self.kind != SynthKind::Autocorrelated {
            unused("--phi", self.phi.is_some(), "autocorrelated")?;
        }
        if self.kind == SynthKind::Autocorrelated {
            unused("--drift", self.drift.is_some(), "regime or random-walk")?;
        }
        if self.kind != SynthKind::Regime {
            unused("--switch-probability", self.switch_probability.is_some(), "regime")?;
        }
        let kind = match self.kind {
            SynthKind::RandomWalk => match self.drift {
                Some(drift) if drift != 0.0 => PathKind::Trend { drift },
                _ => PathKind::RandomWalk,
            },
            SynthKind::Autocorrelated => PathKind::Autocorrelated { phi: self.phi.unwrap_or(synthetic::DEFAULT_PHI) },
            SynthKind::Regime => PathKind::RegimeSwitch {
                drift: self.drift.unwrap_or(synthetic::DEFAULT_REGIME_DRIFT),
                switch_probability: self.switch_probability.unwrap_or(synthetic::DEFAULT_SWITCH_PROBABILITY),
            },
        };
        let (bars, sub_steps, sigma, gap_sigma, seed) =
            (self.bars, self.sub_steps, self.sigma, self.gap_sigma, self.seed);
        Ok(PathConfig { kind, bars, sub_steps, sigma, gap_sigma, seed })
    }
}

pub(super) fn synth(args: &SynthArgs) -> Result<(), Error> {
    // The generator names its fields (`sub_steps`); the command line names the flag (`--sub-steps`).
    let as_flag = |err| match err {
        Error::Config { key, message } => Error::config(format!("--{}", key.replace('_', "-")), message),
        other => other,
    };
    let dataset = synthetic::generate_path(&args.config()?).map_err(as_flag)?;
    let file = std::fs::File::create(&args.out).map_err(Error::io(&args.out))?;
    let mut out = std::io::BufWriter::new(file);
    synthetic::write_csv(&dataset, &mut out).and_then(|()| out.flush()).map_err(Error::io(&args.out))?;
    println!("wrote {} bars of {} to {}", dataset.n_bars(), dataset.label(), args.out.display());
    Ok(())
}
