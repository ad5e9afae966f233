//! What loading market data found: every problem a [`Finding`] naming file, row, column and symbol, of an
//! [`IssueClass`] and a [`Severity`], gathered in a [`LoadReport`] (the data module validates and re-exports
//! them; the crate's error for refused data carries a refused file's report).

use std::fmt;
use std::str::FromStr;

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
    /// of an in-memory table (`data::load_columns`, a DataFrame's `iloc`).
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
