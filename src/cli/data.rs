//! `tradesim data check` and `tradesim data features`.

use crate::Error;
use std::path::Path;
use std::time::Instant;

use super::{DataArgs, load};
use crate::data::{CleanPolicy, LoadReport};

pub(super) fn check(file: Option<&Path>, drop: &[String], repair: &[String]) -> Result<(), Error> {
    let policy = CleanPolicy::parse(drop, repair)?;
    let started = Instant::now();
    let result = match file {
        Some(path) => crate::data::load_file(path, &policy),
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
