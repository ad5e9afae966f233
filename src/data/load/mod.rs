//! Reading CSV and Parquet into [`Dataset`]s: cells are typed once, then every row goes through the same
//! parsing and validation, whatever the format. The entry points and the table every reader fills are
//! here; one file per job: [`csv`] and [`parquet`] read files into tables, [`decimal`] reads prices and
//! volumes, [`rows`] holds one row's rules, [`dataset`] turns a table into the dataset and its report, and
//! [`weights`] reads a file of target weights through the same cells.

mod csv;
mod dataset;
mod decimal;
mod parquet;
mod rows;
mod weights;

use std::borrow::Cow;
use std::path::Path;

use chrono::{DateTime, FixedOffset};
use rust_decimal::Decimal;

use self::csv::{PlainCsv, read_csv};
#[cfg(test)]
use self::dataset::build;
use self::dataset::build_symbol;
pub use self::decimal::float_decimal;
use self::parquet::{ParquetColumn, read_parquet};
pub use self::weights::{WeightRow, WeightTable, load_weights, weights_from_bytes};
use super::Dataset;
use super::time::TimeUnit;
use super::validate::{CleanPolicy, Finding, IssueClass, LoadReport, Severity};

/// One cell as the file typed it.
#[derive(Clone, Debug, PartialEq)]
enum Cell<'a> {
    /// Text as written (borrowed from the file's bytes or the caller's column where it can be).
    Text(Cow<'a, str>),
    Float(f64),
    Int(i64),
    Decimal(Decimal),
    Time(DateTime<FixedOffset>),
    Null,
}

/// How a table holds its rows' cells.
enum Storage<'a> {
    /// Each row's `headers.len()` cells, row after row in one vector (no allocation per row).
    Cells(Vec<Cell<'a>>),
    /// Parquet read by column: column `c`'s values, one per row.
    Columns(Vec<ParquetColumn>),
    /// A CSV without quotes, split into cells where each row is built ([`PlainCsv`]).
    Plain(PlainCsv<'a>),
}

/// Rows of a file: header names, then the rows, numbered (a plain CSV numbers its rows by line), and the
/// findings of reading them (lines that are not rows).
struct Table<'a> {
    headers: Vec<String>,
    /// Row `i`'s number (`Cells` and `Columns`; empty for `Plain`).
    rows: Vec<usize>,
    storage: Storage<'a>,
    findings: Vec<Finding>,
}

impl<'a> Table<'a> {
    fn new(headers: Vec<String>) -> Self {
        Self { headers, rows: Vec::new(), storage: Storage::Cells(Vec::new()), findings: Vec::new() }
    }

    /// Row `row` of `cells` (as many as the headers), into a table of `Cells`.
    fn push(&mut self, row: usize, cells: impl IntoIterator<Item = Cell<'a>>) {
        self.rows.push(row);
        let Storage::Cells(all) = &mut self.storage else { unreachable!("rows are pushed into tables of cells") };
        all.extend(cells);
    }

    /// The cells of row `i` of a `Cells` or `Columns` table (a `Plain` table's rows are split by
    /// [`PlainCsv::walk`]): a slice of the cells, or the row gathered from the columns into `buf`.
    fn row_cells<'s>(&'s self, i: usize, buf: &'s mut Vec<Cell<'a>>) -> &'s [Cell<'a>] {
        match &self.storage {
            Storage::Cells(cells) => &cells[i * self.headers.len()..(i + 1) * self.headers.len()],
            Storage::Columns(columns) => {
                buf.clear();
                buf.extend(columns.iter().map(|c| c.cell(i)));
                buf
            }
            Storage::Plain(_) => unreachable!("a plain CSV's rows are split by PlainCsv::walk"),
        }
    }

    /// [`Table::row_cells`] where only the columns `needed` are read: a `Columns` table makes cells of
    /// those alone (the others stay `Null` in `buf`, a buffer used for nothing else), since a row's cells
    /// are built for every row and most of a wide file's columns are not prices.
    fn row_cells_in<'s>(&'s self, i: usize, needed: &[usize], buf: &'s mut Vec<Cell<'a>>) -> &'s [Cell<'a>] {
        match &self.storage {
            Storage::Columns(columns) => {
                buf.resize(self.headers.len(), Cell::Null);
                for &c in needed {
                    buf[c] = columns[c].cell(i);
                }
                buf
            }
            _ => self.row_cells(i, buf),
        }
    }

    /// Row `i`'s text in column `col` of a `Cells` or `Columns` table, trimmed, when it is text.
    fn text(&self, i: usize, col: usize) -> Option<&str> {
        let cell = match &self.storage {
            Storage::Cells(cells) => &cells[i * self.headers.len() + col],
            Storage::Columns(columns) => match &columns[col] {
                ParquetColumn::Cells(cells) => &cells[i],
                _ => return None,
            },
            Storage::Plain(_) => return None,
        };
        match cell {
            Cell::Text(s) => Some(s.trim()),
            _ => None,
        }
    }
}

/// Which symbols of a table with a symbol column a load reads (any case): only their rows are checked
/// and kept. A table without a symbol column is one series whatever the choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SymbolChoice<'p> {
    /// Every symbol.
    #[default]
    All,
    /// One symbol (`--symbol`).
    One(&'p str),
    /// These symbols (`--symbols A,B,...`).
    List(&'p [String]),
}

impl SymbolChoice<'_> {
    /// Whether rows of `symbol` are read.
    pub fn contains(&self, symbol: &str) -> bool {
        match self {
            Self::All => true,
            Self::One(s) => s.eq_ignore_ascii_case(symbol),
            Self::List(list) => list.iter().any(|s| s.eq_ignore_ascii_case(symbol)),
        }
    }

    /// The chosen names (none for [`SymbolChoice::All`]).
    pub fn names(&self) -> Vec<&str> {
        match self {
            Self::All => Vec::new(),
            Self::One(s) => vec![s],
            Self::List(list) => list.iter().map(String::as_str).collect(),
        }
    }
}

/// How a file is read: the cleaning policy, and what the integers of an integer time column count
/// (`None`: such a column is refused, since `20090102` could be a date or an epoch count in any unit).
/// The loaders take `&policy` (no time unit), `(&policy, time_unit)`, or with the symbols to read
/// `(&policy, time_unit, Some("AAPL"))` or `(&policy, time_unit, &symbols[..])` (an empty list: all).
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions<'p> {
    /// Which findings drop or repair their rows.
    pub policy: &'p CleanPolicy,
    /// What an integer time counts.
    pub time_unit: Option<TimeUnit>,
    /// The symbols to read from a table with a symbol column.
    pub symbols: SymbolChoice<'p>,
}

impl<'p> From<&'p CleanPolicy> for ReadOptions<'p> {
    fn from(policy: &'p CleanPolicy) -> Self {
        Self { policy, time_unit: None, symbols: SymbolChoice::All }
    }
}

impl<'p> From<(&'p CleanPolicy, Option<TimeUnit>)> for ReadOptions<'p> {
    fn from((policy, time_unit): (&'p CleanPolicy, Option<TimeUnit>)) -> Self {
        Self { policy, time_unit, symbols: SymbolChoice::All }
    }
}

impl<'p> From<(&'p CleanPolicy, Option<TimeUnit>, Option<&'p str>)> for ReadOptions<'p> {
    fn from((policy, time_unit, symbol): (&'p CleanPolicy, Option<TimeUnit>, Option<&'p str>)) -> Self {
        Self { policy, time_unit, symbols: symbol.map_or(SymbolChoice::All, SymbolChoice::One) }
    }
}

impl<'p> From<(&'p CleanPolicy, Option<TimeUnit>, &'p [String])> for ReadOptions<'p> {
    fn from((policy, time_unit, symbols): (&'p CleanPolicy, Option<TimeUnit>, &'p [String])) -> Self {
        let symbols = if symbols.is_empty() { SymbolChoice::All } else { SymbolChoice::List(symbols) };
        Self { policy, time_unit, symbols }
    }
}

/// Loads a CSV or Parquet file (Parquet when it starts with the `PAR1` magic) with `options`: the cleaning
/// policy, or the policy and the unit of an integer time column (`(&policy, Some(TimeUnit::YearMonthDay))`;
/// without one, integer times are refused). Single-symbol files take the file stem as their symbol.
pub fn load_file<'p>(path: &Path, options: impl Into<ReadOptions<'p>>) -> Result<(Dataset, LoadReport), LoadReport> {
    let ReadOptions { policy, time_unit, symbols } = options.into();
    let name = path.display().to_string();
    let bytes = file_bytes(path).map_err(|e| file_error(&name, IssueClass::BadRow, format!("cannot read: {e}")))?;
    let stem = path.file_stem().map_or_else(|| "DATA".to_owned(), |s| s.to_string_lossy().to_uppercase());
    if bytes.starts_with(PARQUET_MAGIC) {
        // The Parquet reader shares the mapping (no copy of the file).
        let data = match bytes {
            FileBytes::Mapped(map) => bytes::Bytes::from_owner(map),
            FileBytes::Read(v) => bytes::Bytes::from(v),
        };
        let table = read_parquet(&name, data)?;
        return build_symbol(&name, table, &stem, policy, time_unit, symbols);
    }
    load_bytes(&name, &bytes, &stem, ReadOptions { policy, time_unit, symbols })
}

/// Loads one or more files ([`load_file`] each, with the same `options`) into one dataset
/// ([`merge_datasets`]), with each file's report; the first file refused is the error.
pub fn load_files<'p>(
    paths: &[std::path::PathBuf],
    options: impl Into<ReadOptions<'p>>,
) -> Result<(Dataset, Vec<LoadReport>), crate::Error> {
    let options = options.into();
    let mut datasets = Vec::with_capacity(paths.len());
    let mut reports = Vec::with_capacity(paths.len());
    for path in paths {
        let (dataset, report) = load_file(path, options)?;
        datasets.push(dataset);
        reports.push(report);
    }
    Ok((merge_datasets(datasets, options.symbols)?, reports))
}

/// The datasets of several files as one: the series of each in file order, the source their sources joined
/// by ` + `. A symbol comes from one file only. With a list of symbols every file must hold one of them (a
/// file without a symbol column holds the series its name gives) and every one must be found.
pub fn merge_datasets(datasets: Vec<Dataset>, symbols: SymbolChoice<'_>) -> Result<Dataset, crate::Error> {
    let mut series: Vec<super::Series> = Vec::new();
    let (mut names, mut origin): (Vec<String>, Vec<usize>) = Default::default();
    let synthetic = datasets.iter().any(|d| d.synthetic);
    for (f, dataset) in datasets.into_iter().enumerate() {
        for s in dataset.series {
            if !symbols.contains(&s.symbol) {
                return Err(crate::Error::Data(format!(
                    "{}: its series `{}` is not among the chosen symbols ({})",
                    dataset.source,
                    s.symbol,
                    symbols.names().join(", ")
                )));
            }
            if let Some(k) = series.iter().position(|x| x.symbol.eq_ignore_ascii_case(&s.symbol)) {
                return Err(crate::Error::Data(format!(
                    "symbol `{}` is in both {} and {}: a symbol comes from one file",
                    s.symbol, names[origin[k]], dataset.source
                )));
            }
            series.push(s);
            origin.push(f);
        }
        names.push(dataset.source);
    }
    if names.is_empty() {
        return Err(crate::Error::Data("no data file given".to_owned()));
    }
    let missing: Vec<&str> =
        symbols.names().into_iter().filter(|n| !series.iter().any(|s| s.symbol.eq_ignore_ascii_case(n))).collect();
    if !missing.is_empty() {
        return Err(crate::Error::Data(format!("{}: no rows of symbol(s) {}", names.join(" + "), missing.join(", "))));
    }
    Ok(Dataset { source: names.join(" + "), synthetic, series })
}

/// The first bytes of a Parquet file.
const PARQUET_MAGIC: &[u8] = b"PAR1";

/// A file's bytes: mapped into memory when it is a regular file (no copy into a fresh buffer), else read (a
/// pipe, a FIFO).
enum FileBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(m) => m,
            Self::Read(v) => v,
        }
    }
}

fn file_bytes(path: &Path) -> std::io::Result<FileBytes> {
    let file = std::fs::File::open(path)?;
    if file.metadata()?.is_file() {
        // SAFETY: a read-only private mapping that lives while the load reads it. As with every mapped
        // reader, another process truncating the file during those milliseconds would fault the read
        // (documented in the README); changing it in place gives torn rows, as a plain read would.
        if let Ok(map) = unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
            return Ok(FileBytes::Mapped(map));
        }
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes)?;
    Ok(FileBytes::Read(bytes))
}

/// Loads CSV or Parquet bytes named `name`; `default_symbol` names the series when there is no symbol column;
/// `options` as [`load_file`]'s.
pub fn load_bytes<'p>(
    name: &str,
    bytes: &[u8],
    default_symbol: &str,
    options: impl Into<ReadOptions<'p>>,
) -> Result<(Dataset, LoadReport), LoadReport> {
    let ReadOptions { policy, time_unit, symbols } = options.into();
    let table = if bytes.starts_with(PARQUET_MAGIC) {
        read_parquet(name, bytes::Bytes::copy_from_slice(bytes))?
    } else {
        read_csv(name, bytes)?
    };
    build_symbol(name, table, default_symbol, policy, time_unit, symbols)
}

/// One column of an in-memory table (a DataFrame's column, a numpy array) for [`load_columns`].
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnData {
    /// Floats (prices, volumes); NaN and infinities are findings, like `nan` in a CSV.
    Float(Vec<f64>),
    /// Integers (prices, volumes, or times read with a time unit, see [`load_file`]).
    Int(Vec<i64>),
    /// Timestamps as nanoseconds since the Unix epoch, UTC; `None` for a missing time (pandas' NaT).
    TimeNs(Vec<Option<i64>>),
    /// Text cells (timestamps, symbols, numbers written as text); `None` for a missing cell.
    Text(Vec<Option<String>>),
}

impl ColumnData {
    fn len(&self) -> usize {
        match self {
            Self::Float(v) => v.len(),
            Self::Int(v) => v.len(),
            Self::TimeNs(v) => v.len(),
            Self::Text(v) => v.len(),
        }
    }

    fn cell(&self, i: usize) -> Cell<'_> {
        match self {
            Self::Float(v) => Cell::Float(v[i]),
            Self::Int(v) => Cell::Int(v[i]),
            Self::TimeNs(v) => {
                v[i].map_or(Cell::Null, |ns| Cell::Time(DateTime::from_timestamp_nanos(ns).fixed_offset()))
            }
            Self::Text(v) => v[i].as_deref().map_or(Cell::Null, |s| Cell::Text(Cow::Borrowed(s))),
        }
    }
}

/// Loads an in-memory table (`headers[i]` names `columns[i]`, all the same length) named `name` through the
/// same column mapping and validation as a file. Rows are numbered by position from 0 (a DataFrame's
/// `iloc`), where a CSV file's findings give line numbers. `options` as [`load_file`]'s.
pub fn load_columns<'p>(
    name: &str,
    headers: &[String],
    columns: Vec<ColumnData>,
    default_symbol: &str,
    options: impl Into<ReadOptions<'p>>,
) -> Result<(Dataset, LoadReport), LoadReport> {
    let ReadOptions { policy, time_unit, symbols } = options.into();
    if headers.len() != columns.len() {
        let message = format!("{} headers for {} columns", headers.len(), columns.len());
        return Err(file_error(name, IssueClass::BadRow, message));
    }
    let rows = columns.first().map_or(0, ColumnData::len);
    if let Some((h, c)) = headers.iter().zip(&columns).find(|(_, c)| c.len() != rows) {
        let message = format!("column `{h}` has {} rows, the first column {rows}", c.len());
        return Err(file_error(name, IssueClass::BadRow, message));
    }
    let mut table = Table::new(headers.to_vec());
    table.rows.reserve(rows);
    table.storage = Storage::Cells(Vec::with_capacity(rows * columns.len()));
    for i in 0..rows {
        table.push(i, columns.iter().map(|c| c.cell(i)));
    }
    build_symbol(name, table, default_symbol, policy, time_unit, symbols)
}

/// An error about the whole file (`row` 1 for the header).
fn file_finding(file: &str, row: Option<usize>, class: IssueClass, message: String) -> Finding {
    Finding { file: file.to_owned(), row, column: None, symbol: None, class, severity: Severity::Error, message }
}

fn file_error(file: &str, class: IssueClass, message: String) -> LoadReport {
    LoadReport {
        file: file.to_owned(),
        findings: vec![file_finding(file, None, class, message)],
        ..LoadReport::default()
    }
}

/// A finding about one row (a zero volume is a warning, anything else an error).
fn row_finding(file: &str, row: usize, column: Option<&str>, class: IssueClass, message: String) -> Finding {
    let severity = if class == IssueClass::ZeroVolume { Severity::Warning } else { Severity::Error };
    let column = column.map(str::to_owned);
    Finding { file: file.to_owned(), row: Some(row), column, symbol: None, class, severity, message }
}
