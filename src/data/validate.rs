//! Validation of loaded rows: every problem becomes a [`Finding`] naming file, row, column and symbol; a file
//! an unhandled error is refused with the full list. [`CleanPolicy`] may drop or repair named classes.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;

use super::MarketBar;

/// The kinds of problem the loader reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IssueClass {
    /// No data rows (or no bytes at all).
    EmptyFile,
    /// A required column is missing from the header.
    MissingColumn,
    /// A row that could not be read (wrong number of fields, bad encoding).
    BadRow,
    /// A price or volume that is not a number.
    BadNumber,
    /// A timestamp in no known format.
    BadTime,
    /// NaN or infinity.
    NonFinite,
    /// A price <= 0.
    NonPositivePrice,
    /// Negative volume.
    NegativeVolume,
    /// high < low.
    HighBelowLow,
    /// open outside [low, high].
    OpenOutsideRange,
    /// close outside [low, high].
    CloseOutsideRange,
    /// The same timestamp twice for one symbol.
    DuplicateTime,
    /// A timestamp before the previous one of the same symbol.
    DecreasingTime,
    /// Volume 0 (a warning: the bar is kept).
    ZeroVolume,
}

impl IssueClass {
    /// Every class, for listings.
    pub const ALL: [Self; 14] = [
        Self::EmptyFile,
        Self::MissingColumn,
        Self::BadRow,
        Self::BadNumber,
        Self::BadTime,
        Self::NonFinite,
        Self::NonPositivePrice,
        Self::NegativeVolume,
        Self::HighBelowLow,
        Self::OpenOutsideRange,
        Self::CloseOutsideRange,
        Self::DuplicateTime,
        Self::DecreasingTime,
        Self::ZeroVolume,
    ];

    /// The class's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::EmptyFile => "empty-file",
            Self::MissingColumn => "missing-column",
            Self::BadRow => "bad-row",
            Self::BadNumber => "bad-number",
            Self::BadTime => "bad-time",
            Self::NonFinite => "non-finite",
            Self::NonPositivePrice => "non-positive-price",
            Self::NegativeVolume => "negative-volume",
            Self::HighBelowLow => "high-below-low",
            Self::OpenOutsideRange => "open-outside-range",
            Self::CloseOutsideRange => "close-outside-range",
            Self::DuplicateTime => "duplicate-time",
            Self::DecreasingTime => "decreasing-time",
            Self::ZeroVolume => "zero-volume",
        }
    }

    /// Whether the class concerns a whole file (nothing to drop or repair).
    pub fn is_file_level(self) -> bool {
        matches!(self, Self::EmptyFile | Self::MissingColumn)
    }

    /// Whether `repair` knows how to fix rows of this class.
    pub fn is_repairable(self) -> bool {
        matches!(self, Self::HighBelowLow | Self::OpenOutsideRange | Self::CloseOutsideRange)
    }
}

impl FromStr for IssueClass {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|c| c.name() == s.trim()).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|c| c.name()).collect();
            format!("unknown issue class `{s}` (known: {})", names.join(", "))
        })
    }
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The file is refused unless the policy drops or repairs the class.
    Error,
    /// Reported; the bar is kept.
    Warning,
}

/// One problem, located.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// File (or source) name.
    pub file: String,
    /// Row: the CSV line number (header = line 1), the 1-based Parquet data row, or the 0-based position
    /// of an in-memory table ([`super::load_columns`], a DataFrame's `iloc`).
    pub row: Option<usize>,
    /// Column name as the file's header writes it.
    pub column: Option<String>,
    /// The row's symbol, in a file with a symbol column (`None` in a file of one series, named by the file).
    pub symbol: Option<String>,
    /// Kind of problem.
    pub class: IssueClass,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, with the value.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(row) = self.row {
            write!(f, ":{row}")?;
        }
        if let Some(col) = &self.column {
            write!(f, ":{col}")?;
        }
        let level = if self.severity == Severity::Error { "error" } else { "warning" };
        write!(f, ": {level}[{}]: ", self.class.name())?;
        if let Some(symbol) = &self.symbol {
            write!(f, "symbol {symbol}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// What the loader may do instead of refusing a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanPolicy {
    /// Rows with a finding of these classes are dropped.
    pub drop: BTreeSet<IssueClass>,
    /// Rows with a finding of these classes are repaired: high < low swaps them; an open or close outside
    /// [low, high] widens the range to include it.
    pub repair: BTreeSet<IssueClass>,
}

impl CleanPolicy {
    /// Parses `--drop` and `--repair` lists (comma-separated class names).
    pub fn parse(drop: &[String], repair: &[String]) -> Result<Self, crate::Error> {
        let mut policy = Self::default();
        for name in drop.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
            let class: IssueClass = name.parse().map_err(|e| crate::Error::config("--drop", e))?;
            if class.is_file_level() {
                return Err(crate::Error::config(
                    "--drop",
                    format!("`{}` concerns the whole file and cannot be dropped", class.name()),
                ));
            }
            policy.drop.insert(class);
        }
        for name in repair.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
            let class: IssueClass = name.parse().map_err(|e| crate::Error::config("--repair", e))?;
            if !class.is_repairable() {
                return Err(crate::Error::config(
                    "--repair",
                    format!(
                        "`{}` cannot be repaired (repairable: high-below-low, open-outside-range, \
                         close-outside-range)",
                        class.name()
                    ),
                ));
            }
            policy.repair.insert(class);
        }
        Ok(policy)
    }
}

/// What loading found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Source name.
    pub file: String,
    /// Data rows read.
    pub rows: usize,
    /// Every finding, in file order.
    pub findings: Vec<Finding>,
    /// Rows dropped by the policy.
    pub dropped: usize,
    /// Rows repaired by the policy.
    pub repaired: usize,
    /// Whether the data can be used (no unhandled error).
    pub usable: bool,
    /// How the columns were read where that was a choice (e.g. pandas' unnamed index taken as the time).
    pub notes: Vec<String>,
}

impl LoadReport {
    /// Errors that the policy did not handle.
    pub fn blocking(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.severity == Severity::Error)
    }

    /// Number of findings of `class`.
    pub fn count(&self, class: IssueClass) -> usize {
        self.findings.iter().filter(|f| f.class == class).count()
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.usable { "usable" } else { "REFUSED" };
        writeln!(
            f,
            "{}: {} rows, {} dropped, {} repaired: {state}",
            self.file, self.rows, self.dropped, self.repaired
        )?;
        for note in &self.notes {
            writeln!(f, "  note: {note}")?;
        }
        for class in IssueClass::ALL {
            let of_class: Vec<&Finding> = self.findings.iter().filter(|x| x.class == class).collect();
            if of_class.is_empty() {
                continue;
            }
            writeln!(f, "  {}: {} finding(s)", class.name(), of_class.len())?;
            for finding in of_class.iter().take(10) {
                writeln!(f, "    {finding}")?;
            }
            if of_class.len() > 10 {
                writeln!(f, "    ... {} more", of_class.len() - 10)?;
            }
        }
        Ok(())
    }
}

/// Checks one bar's values; returns the findings as (class, column, message).
pub(crate) fn check_bar(bar: &MarketBar) -> Vec<(IssueClass, &'static str, String)> {
    let mut out = Vec::new();
    for (name, v) in [("open", bar.open), ("high", bar.high), ("low", bar.low), ("close", bar.close)] {
        if v <= Decimal::ZERO {
            out.push((IssueClass::NonPositivePrice, name, format!("{name} = {v} is not positive")));
        }
    }
    if bar.volume < Decimal::ZERO {
        out.push((IssueClass::NegativeVolume, "volume", format!("volume = {} is negative", bar.volume)));
    }
    if bar.high < bar.low {
        out.push((IssueClass::HighBelowLow, "high", format!("high {} < low {}", bar.high, bar.low)));
    }
    let (lo, hi) = (bar.low.min(bar.high), bar.high.max(bar.low));
    if bar.open < lo || bar.open > hi {
        out.push((
            IssueClass::OpenOutsideRange,
            "open",
            format!("open {} outside [low {}, high {}]", bar.open, bar.low, bar.high),
        ));
    }
    if bar.close < lo || bar.close > hi {
        out.push((
            IssueClass::CloseOutsideRange,
            "close",
            format!("close {} outside [low {}, high {}]", bar.close, bar.low, bar.high),
        ));
    }
    if bar.volume == Decimal::ZERO {
        out.push((IssueClass::ZeroVolume, "volume", "volume is 0".to_owned()));
    }
    out
}

/// Whether [`check_bar`] would find nothing, decided on the mantissas brought to one scale (a tenth of
/// `check_bar`'s time): positive prices, low <= open, close <= high, a positive volume. `false` means
/// "ask `check_bar`", not "invalid".
pub(crate) fn plainly_valid(bar: &MarketBar) -> bool {
    let prices = [bar.open, bar.high, bar.low, bar.close];
    let scale = prices.iter().map(Decimal::scale).max().unwrap_or(0);
    let at_scale = |d: &Decimal| 10i128.checked_pow(scale - d.scale()).and_then(|p| d.mantissa().checked_mul(p));
    let [Some(o), Some(h), Some(l), Some(c)] = prices.each_ref().map(at_scale) else { return false };
    l > 0 && l <= o && o <= h && l <= c && c <= h && bar.volume.is_sign_positive() && !bar.volume.is_zero()
}

/// Repairs `bar` for `class` (see [`CleanPolicy::repair`]).
pub(crate) fn repair(bar: &mut MarketBar, class: IssueClass) {
    match class {
        IssueClass::HighBelowLow if bar.high < bar.low => std::mem::swap(&mut bar.high, &mut bar.low),
        IssueClass::OpenOutsideRange | IssueClass::CloseOutsideRange => {
            let v = if class == IssueClass::OpenOutsideRange { bar.open } else { bar.close };
            bar.high = bar.high.max(v);
            bar.low = bar.low.min(v);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use rand::{RngExt, SeedableRng};

    /// The quick check never passes a bar that `check_bar` faults, over prices of mixed scales around each
    /// other (equal, crossing, zero, negative) and volumes of every sign; and it passes most clean bars.
    #[test]
    fn plainly_valid_bars_are_the_ones_check_bar_passes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let price = |rng: &mut rand::rngs::StdRng| {
            let scale = rng.random_range(0..=6);
            Decimal::new(rng.random_range(-2..40i64) * 10i64.pow(scale) / 10 + rng.random_range(0..3), scale)
        };
        let (mut clean, mut passed) = (0, 0);
        for _ in 0..200_000 {
            let bar = MarketBar {
                time: DateTime::UNIX_EPOCH.fixed_offset(),
                open: price(&mut rng),
                high: price(&mut rng),
                low: price(&mut rng),
                close: price(&mut rng),
                volume: Decimal::new(rng.random_range(-1..3), rng.random_range(0..3)),
            };
            let faults = check_bar(&bar);
            if plainly_valid(&bar) {
                assert!(faults.is_empty(), "{bar:?}: {faults:?}");
                passed += 1;
            }
            clean += usize::from(faults.is_empty());
        }
        assert!(clean > 1_000 && passed == clean, "{passed} passed of {clean} clean bars");
    }
}
