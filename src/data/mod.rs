//! Market data: bars in `rust_decimal::Decimal` from CSV or Parquet with full validation, the embedded
//! default dataset, seeded synthetic bars, the 51-feature pipeline, time-based splits, and the conversion to
//! the device layout (the only place prices become floats, through `num_traits::ToPrimitive`).

mod columns;
pub mod cross_section;
pub mod device;
pub mod features;
mod load;
pub mod splits;
pub mod surrogate;
pub mod synthetic;
pub mod time;
pub mod universe;
mod validate;
pub mod weights;

use chrono::{DateTime, FixedOffset};
use rust_decimal::Decimal;

pub use load::{
    ColumnData, ReadOptions, SymbolChoice, float_decimal, load_bytes, load_columns, load_file, load_files,
    merge_datasets,
};
pub use validate::{CleanPolicy, Finding, IssueClass, LoadReport, Severity};

/// One OHLCV bar, prices exactly as the file wrote them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarketBar {
    /// Bar time (a time without an offset in the file is UTC).
    pub time: DateTime<FixedOffset>,
    /// Open.
    pub open: Decimal,
    /// High.
    pub high: Decimal,
    /// Low.
    pub low: Decimal,
    /// Close.
    pub close: Decimal,
    /// Volume (0 when the file has no volume column).
    pub volume: Decimal,
}

/// The bars of one instrument, in time order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    /// Symbol (the file name's stem for single-symbol files).
    pub symbol: String,
    /// Bars, strictly increasing in time.
    pub bars: Vec<MarketBar>,
}

/// Everything loaded from one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dataset {
    /// Where the data came from (a path, `embedded:NAME`, or `synthetic:...`).
    pub source: String,
    /// True for generated data; every output that shows this data says so.
    pub synthetic: bool,
    /// One series per symbol, in order of first appearance.
    pub series: Vec<Series>,
}

impl Dataset {
    /// The series of `symbol`, or the only series when `symbol` is `None` and there is exactly one.
    pub fn select(&self, symbol: Option<&str>) -> Result<&Series, crate::Error> {
        match symbol {
            Some(s) => self.series.iter().find(|x| x.symbol.eq_ignore_ascii_case(s)).ok_or_else(|| {
                crate::Error::Data(format!("{}: no symbol `{s}` (symbols: {})", self.source, self.symbol_list(10)))
            }),
            None if self.series.len() == 1 => Ok(&self.series[0]),
            None => Err(crate::Error::Data(format!(
                "{} holds {} symbols; choose one with --symbol (e.g. {})",
                self.source,
                self.series.len(),
                self.symbol_list(10)
            ))),
        }
    }

    fn symbol_list(&self, max: usize) -> String {
        let mut names: Vec<&str> = self.series.iter().take(max).map(|s| s.symbol.as_str()).collect();
        if self.series.len() > max {
            names.push("...");
        }
        names.join(", ")
    }

    /// Bars over all series.
    pub fn n_bars(&self) -> usize {
        self.series.iter().map(|s| s.bars.len()).sum()
    }

    /// How outputs name this data: the source, marked SYNTHETIC when generated.
    pub fn label(&self) -> String {
        if self.synthetic { format!("SYNTHETIC ({})", self.source) } else { self.source.clone() }
    }
}

/// Name of the embedded default dataset.
pub const EMBEDDED_NAME: &str = "eurusd-1h-ask-2017.csv";

/// The embedded default dataset (data/README.md gives its provenance).
const EMBEDDED_CSV: &[u8] = include_bytes!("../../data/eurusd-1h-ask-2017.csv");

/// Loads the embedded default dataset (EURUSD ask, 1 hour bars, 2017).
pub fn embedded() -> Result<Dataset, LoadReport> {
    load_bytes(&format!("embedded:{EMBEDDED_NAME}"), EMBEDDED_CSV, "EURUSD", &CleanPolicy::default())
        .map(|(dataset, _)| dataset)
}
