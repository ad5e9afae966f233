//! `tradesim data check`, `tradesim data features` and `tradesim data synth`.

use crate::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};

use super::{DataArgs, load};
use crate::data::synthetic::{self, PathConfig, PathKind};
use crate::data::time::TimeUnit;
use crate::data::{CleanPolicy, LoadReport};

pub(super) fn check(
    file: Option<&Path>,
    drop: &[String],
    repair: &[String],
    time_unit: Option<TimeUnit>,
) -> Result<(), Error> {
    let policy = CleanPolicy::parse(drop, repair)?;
    let started = Instant::now();
    let result = match file {
        Some(path) => crate::data::load_file(path, (&policy, time_unit)),
        None => crate::data::embedded().map(|d| (d, LoadReport { usable: true, ..LoadReport::default() })),
    };
    let seconds = started.elapsed().as_secs_f64();
    match result {
        Ok((dataset, report)) => {
            print!("{report}");
            println!("loaded in {seconds:.3} s: {} symbol(s), {} bars", dataset.series.len(), dataset.n_bars());
            for s in dataset.series.iter().take(20) {
                let (first, last) = (s.bars.first(), s.bars.last());
                let span = first.zip(last).map(|(a, b)| format!("{} .. {}", a.time.to_rfc3339(), b.time.to_rfc3339()));
                println!("  {:<10} {:>8} bars  {}", s.symbol, s.bars.len(), span.unwrap_or_default());
            }
            if dataset.series.len() > 20 {
                println!("  ... {} more symbols", dataset.series.len() - 20);
            }
            Ok(())
        }
        Err(report) => {
            print!("{report}");
            Err(Error::Data(format!("{} is unusable: {} blocking finding(s)", report.file, report.blocking().count())))
        }
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
    println!("data:     {}: {} symbol(s), {} bars", dataset.label(), dataset.series.len(), dataset.n_bars());
    println!("load:     {loaded:.3} s");
    println!(
        "features: {featurized:.3} s for {rows} rows x {} features ({:.2} M rows/s)",
        crate::data::features::N_FEATURES,
        rows as f64 / featurized.max(1e-9) / 1e6
    );
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
