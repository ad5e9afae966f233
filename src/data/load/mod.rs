//! Reading CSV and Parquet into [`Dataset`]s: cells are typed once, then every row goes through the same
//! parsing and validation, whatever the format.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use chrono::{DateTime, FixedOffset};
use num_traits::FromPrimitive;
use rayon::prelude::*;
use rust_decimal::Decimal;

use super::columns::ColumnMap;
use super::time::{epoch, parse_time};
use super::validate::{CleanPolicy, Finding, IssueClass, LoadReport, Severity, check_bar, plainly_valid, repair};
use super::{Dataset, MarketBar, Series};

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

/// Loads a CSV or Parquet file (Parquet when it starts with the `PAR1` magic). Single-symbol files take the
/// file stem as their symbol.
pub fn load_file(path: &Path, policy: &CleanPolicy) -> Result<(Dataset, LoadReport), LoadReport> {
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
        return build(&name, table, &stem, policy);
    }
    load_bytes(&name, &bytes, &stem, policy)
}

/// The first bytes of a Parquet file.
const PARQUET_MAGIC: &[u8] = b"PAR1";

/// A file's bytes: mapped into memory when it is a regular file (a 17 MB CSV is there in about a millisecond,
/// where copying it into a fresh buffer took 14 ms on a 2-core machine), else read (a pipe, a FIFO).
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

/// Loads CSV or Parquet bytes named `name`; `default_symbol` names the series when there is no symbol column.
pub fn load_bytes(
    name: &str,
    bytes: &[u8],
    default_symbol: &str,
    policy: &CleanPolicy,
) -> Result<(Dataset, LoadReport), LoadReport> {
    let table = if bytes.starts_with(PARQUET_MAGIC) {
        read_parquet(name, bytes::Bytes::copy_from_slice(bytes))?
    } else {
        read_csv(name, bytes)?
    };
    build(name, table, default_symbol, policy)
}

/// One column of an in-memory table (a DataFrame's column, a numpy array) for [`load_columns`].
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnData {
    /// Floats (prices, volumes); NaN and infinities are findings, like `nan` in a CSV.
    Float(Vec<f64>),
    /// Integers (prices, volumes, or epoch seconds / milliseconds in a time column).
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
/// `iloc`), where a CSV file's findings give line numbers.
pub fn load_columns(
    name: &str,
    headers: &[String],
    columns: Vec<ColumnData>,
    default_symbol: &str,
    policy: &CleanPolicy,
) -> Result<(Dataset, LoadReport), LoadReport> {
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
    build(name, table, default_symbol, policy)
}

/// An error about the whole file (`row` 1 for the header).
fn file_finding(file: &str, row: Option<usize>, class: IssueClass, message: String) -> Finding {
    Finding { file: file.to_owned(), row, column: None, class, severity: Severity::Error, message }
}

fn file_error(file: &str, class: IssueClass, message: String) -> LoadReport {
    LoadReport {
        file: file.to_owned(),
        findings: vec![file_finding(file, None, class, message)],
        ..LoadReport::default()
    }
}

fn read_csv<'a>(name: &str, bytes: &'a [u8]) -> Result<Table<'a>, LoadReport> {
    let text_start = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first_line = text_start.split(|&b| b == b'\n').next().unwrap_or_default();
    let delimiter = [b',', b';', b'\t', b'|'].into_iter().max_by_key(|d| first_line.iter().filter(|b| *b == d).count());
    if is_plain(text_start) {
        return Ok(read_plain_csv(text_start, delimiter.unwrap_or(b',')));
    }
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter.unwrap_or(b','))
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text_start);
    let headers: Vec<String> = match reader.byte_headers() {
        Ok(h) => h.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect(),
        Err(e) => return Err(file_error(name, IssueClass::BadRow, format!("unreadable header: {e}"))),
    };
    let mut table = Table::new(headers);
    let mut record = csv::ByteRecord::new();
    // Line numbers counted from the records' byte offsets (the reader's own count skips blank lines, and a
    // record's offset is where the blank lines before it began).
    let (mut counted_to, mut lines_before) = (0usize, 0usize);
    let mut line_at = |byte: usize| {
        let mut byte = byte.clamp(counted_to, text_start.len());
        while matches!(text_start.get(byte), Some(b'\n' | b'\r')) {
            byte += 1;
        }
        lines_before += text_start[counted_to..byte].iter().filter(|&&b| b == b'\n').count();
        counted_to = byte;
        lines_before + 1
    };
    loop {
        let line = line_at(reader.position().byte() as usize);
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {
                let row = record.position().map_or(line, |p| line_at(p.byte() as usize));
                if record.iter().all(|f| f.is_empty()) {
                    continue;
                }
                if record.len() != table.headers.len() {
                    table.findings.push(row_finding(
                        name,
                        row,
                        None,
                        IssueClass::BadRow,
                        format!("{} fields, the header has {}", record.len(), table.headers.len()),
                    ));
                    continue;
                }
                match record
                    .iter()
                    .map(|f| std::str::from_utf8(f).map(|s| Cell::Text(Cow::Owned(s.to_owned()))))
                    .collect::<Result<Vec<_>, _>>()
                {
                    Ok(cells) => table.push(row, cells),
                    Err(_) => {
                        table.findings.push(row_finding(name, row, None, IssueClass::BadRow, "not UTF-8".to_owned()))
                    }
                }
            }
            Err(e) => {
                table.findings.push(row_finding(name, line + 1, None, IssueClass::BadRow, format!("unreadable: {e}")));
                if !matches!(e.kind(), csv::ErrorKind::Utf8 { .. } | csv::ErrorKind::UnequalLengths { .. }) {
                    break;
                }
            }
        }
    }
    Ok(table)
}

/// Whether `text` is plain CSV: no quote character (so every newline ends a record and every delimiter
/// separates fields) and no carriage return other than before a newline.
fn is_plain(text: &[u8]) -> bool {
    const PIECE: usize = 1 << 20;
    (0..text.len().div_ceil(PIECE)).into_par_iter().all(|k| {
        let (start, piece) = (k * PIECE, &text[k * PIECE..((k + 1) * PIECE).min(text.len())]);
        memchr::memchr(b'"', piece).is_none()
            && memchr::memchr_iter(b'\r', piece).all(|i| text.get(start + i + 1) == Some(&b'\n'))
    })
}

/// The fields of one line, trimmed (what the CSV reader gives with `Trim::All`).
fn fields(line: &[u8], delimiter: u8) -> impl Iterator<Item = &[u8]> {
    line.split(move |&b| b == delimiter).map(<[u8]>::trim_ascii)
}

/// A CSV without quote characters ([`is_plain`]): every newline ends a line and every delimiter separates
/// fields, so the body (the bytes after the header) is cut into chunks of whole lines that threads split
/// and parse on their own, in place (cells borrow the file's bytes). The `k`-th line of the body is line
/// `k + 2` of the file; rows and findings are those of the sequential reader.
struct PlainCsv<'a> {
    delimiter: u8,
    width: usize,
    /// Each chunk's bytes and the index of its first line in the body.
    chunks: Vec<(&'a [u8], usize)>,
    /// Lines in the body (a last line without a newline included).
    lines: usize,
}

/// The lines of `chunk`, each without its line end (a last line without a newline included, and one empty
/// line for an empty chunk, as the counts in [`read_plain_csv`] have it).
fn chunk_lines(chunk: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', chunk).map(|i| i + 1).chain((chunk.last() != Some(&b'\n')).then_some(chunk.len())).map(
        move |end| {
            let line = &chunk[start..end];
            start = end;
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            line.strip_suffix(b"\r").unwrap_or(line)
        },
    )
}

/// `line`'s fields between delimiters (an ASCII byte, so every cut is at a character boundary), trimmed,
/// into `buf`.
fn split_line<'a>(line: &'a str, delimiter: u8, buf: &mut Vec<Cell<'a>>) {
    buf.clear();
    let mut start = 0;
    for (j, &b) in line.as_bytes().iter().enumerate() {
        if b == delimiter {
            buf.push(Cell::Text(Cow::Borrowed(line[start..j].trim_ascii())));
            start = j + 1;
        }
    }
    buf.push(Cell::Text(Cow::Borrowed(line[start..].trim_ascii())));
}
impl<'a> PlainCsv<'a> {
    /// Walks chunk `c` line by line: `row(k, cells)` for each row (`k` its line in the body) until it
    /// returns `false`. Returns the findings of the lines that are not rows (a wrong number of fields, not
    /// UTF-8) and the indexes of those lines and of blank ones (nothing but delimiters and spaces).
    fn walk(
        &self,
        name: &str,
        c: usize,
        buf: &mut Vec<Cell<'a>>,
        mut row: impl FnMut(usize, &[Cell<'a>]) -> bool,
    ) -> (Vec<Finding>, Vec<usize>) {
        let (chunk, first) = self.chunks[c];
        let (mut findings, mut skipped) = (Vec::new(), Vec::new());
        let blank = |cells: &[Cell]| cells.iter().all(|c| matches!(c, Cell::Text(t) if t.is_empty()));
        // A chunk of whole lines that is UTF-8 as a whole has UTF-8 lines (a newline is ASCII).
        let utf8 = std::str::from_utf8(chunk).is_ok();
        for (j, line) in chunk_lines(chunk).enumerate() {
            let k = first + j;
            let text = if utf8 {
                // SAFETY: `chunk` is UTF-8 and `line` is cut from it at ASCII bytes (newlines, a carriage
                // return), so it is UTF-8 too.
                unsafe { std::str::from_utf8_unchecked(line) }
            } else if let Ok(text) = std::str::from_utf8(line) {
                text
            } else {
                skipped.push(k);
                let count = fields(line, self.delimiter).count();
                let message = if fields(line, self.delimiter).all(<[u8]>::is_empty) {
                    continue;
                } else if count != self.width {
                    format!("{count} fields, the header has {}", self.width)
                } else {
                    "not UTF-8".to_owned()
                };
                findings.push(row_finding(name, k + 2, None, IssueClass::BadRow, message));
                continue;
            };
            split_line(text, self.delimiter, buf);
            if buf.len() == self.width && !blank(buf) {
                if !row(k, buf) {
                    break;
                }
                continue;
            }
            skipped.push(k);
            if !blank(buf) {
                let message = format!("{} fields, the header has {}", buf.len(), self.width);
                findings.push(row_finding(name, k + 2, None, IssueClass::BadRow, message));
            }
        }
        (findings, skipped)
    }

    /// Every chunk walked in order without parsing: the findings of the lines that are not rows, and how
    /// many rows there are (what a file refused for its header still reports).
    fn survey(&self, name: &str) -> (Vec<Finding>, usize) {
        let mut buf = Vec::new();
        let (mut findings, mut skipped) = (Vec::new(), 0);
        for c in 0..self.chunks.len() {
            let (f, s) = self.walk(name, c, &mut buf, |_, _| true);
            findings.extend(f);
            skipped += s.len();
        }
        (findings, self.lines - skipped)
    }

    /// The first cell of the first row, when there is one (the pandas-index check).
    fn first_cell(&self, name: &str) -> Option<Cell<'a>> {
        let (mut buf, mut found) = (Vec::new(), None);
        for c in 0..self.chunks.len() {
            self.walk(name, c, &mut buf, |_, cells| {
                found = cells.first().cloned();
                false
            });
            if found.is_some() {
                break;
            }
        }
        found
    }
}

/// Plain CSV ([`is_plain`]): the header, then the body cut into chunks of whole lines (about eight per
/// thread) with the lines of each counted (in parallel), so that every line has its place in the row
/// vectors before any is parsed ([`build`]).
fn read_plain_csv<'a>(text: &'a [u8], delimiter: u8) -> Table<'a> {
    let header_end = text.iter().position(|&b| b == b'\n').map_or(text.len(), |i| i + 1);
    let headers: Vec<String> = fields(text[..header_end].trim_ascii_end(), delimiter)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let body = &text[header_end..];
    let pieces = (rayon::current_num_threads() * 8).max(1);
    let mut bounds = vec![0];
    for k in 1..pieces {
        let at = (body.len() * k / pieces).max(*bounds.last().unwrap_or(&0));
        let end = body[at..].iter().position(|&b| b == b'\n').map_or(body.len(), |i| at + i + 1);
        if end > *bounds.last().unwrap_or(&0) && end < body.len() {
            bounds.push(end);
        }
    }
    bounds.push(body.len());
    let counts: Vec<usize> = bounds.par_windows(2).map(|w| chunk_lines(&body[w[0]..w[1]]).count()).collect();
    let mut chunks = Vec::with_capacity(counts.len());
    let mut lines = 0;
    for (w, count) in bounds.windows(2).zip(counts) {
        chunks.push((&body[w[0]..w[1]], lines));
        lines += count;
    }
    let width = headers.len();
    let mut table = Table::new(headers);
    table.storage = Storage::Plain(PlainCsv { delimiter, width, chunks, lines });
    table
}

/// Parquet: flat files of the usual column types are read column by column (each column's pages decoded
/// in one pass, the columns in parallel); other schemas (nested columns, INT96, unsigned or unusual
/// logical types) go through the row iterator ([`read_parquet_rows`]). Both give the same cells.
fn read_parquet(name: &str, data: bytes::Bytes) -> Result<Table<'static>, LoadReport> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let bad =
        |e: parquet::errors::ParquetError| file_error(name, IssueClass::BadRow, format!("unreadable Parquet: {e}"));
    let reader = SerializedFileReader::new(data.clone()).map_err(bad)?;
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let kinds: Option<Vec<ParquetKind>> = schema.columns().iter().map(|c| ParquetKind::of(c)).collect();
    let Some(kinds) = kinds else { return read_parquet_rows(name, &data) };
    let headers: Vec<String> = schema.columns().iter().map(|c| c.name().to_owned()).collect();
    let n_rows = usize::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0);
    let columns = kinds
        .par_iter()
        .enumerate()
        .map(|(c, kind)| {
            // Each column reads the file on its own (a reader per thread over the shared bytes).
            let reader = SerializedFileReader::new(data.clone())?;
            let mut values = ParquetColumn::Cells(Vec::new());
            for g in 0..reader.num_row_groups() {
                let group = reader.get_row_group(g)?;
                let rows = usize::try_from(group.metadata().num_rows()).unwrap_or(0);
                kind.read(group.get_column_reader(c)?, rows, &mut values)?;
            }
            Ok(values)
        })
        .collect::<Result<Vec<ParquetColumn>, parquet::errors::ParquetError>>()
        .map_err(bad)?;
    if columns.iter().any(|c| c.len() != n_rows) {
        return read_parquet_rows(name, &data);
    }
    let mut table = Table::new(headers);
    table.rows = (1..=n_rows).collect();
    table.storage = Storage::Columns(columns);
    Ok(table)
}

/// A Parquet column as read: its plain values (8 bytes a row, made into a cell when its row is built) while
/// every slot has one, or cells (a column with nulls, text, decimals, dates).
enum ParquetColumn {
    Floats(Vec<f64>),
    Ints(Vec<i64>),
    /// Timestamps in units of 1/`.1` second since the epoch (1,000 or 1,000,000).
    Stamps(Vec<i64>, i64),
    Cells(Vec<Cell<'static>>),
}

/// A timestamp cell (`Null` out of range), as the row iterator gives it.
fn time_cell(t: Option<DateTime<chrono::Utc>>) -> Cell<'static> {
    t.map_or(Cell::Null, |t| Cell::Time(t.fixed_offset()))
}

/// `DateTime::from_timestamp_millis` (`per_second` 1,000) or `_micros` (1,000,000) of `v`, with the
/// calendar date of the thread's last day kept: consecutive bars mostly share a day, and turning a day
/// number into a date was the most expensive part of reading a timestamp.
fn stamp_time(v: i64, per_second: i64) -> Option<DateTime<chrono::Utc>> {
    use chrono::{NaiveDate, NaiveTime};
    thread_local!(static LAST_DAY: std::cell::Cell<Option<(i64, NaiveDate)>> = const { std::cell::Cell::new(None) });
    let per_day = 86_400 * per_second;
    let (day, within) = (v.div_euclid(per_day), v.rem_euclid(per_day));
    let date = match LAST_DAY.get() {
        Some((d, date)) if d == day => date,
        _ => {
            // Days from 0001-01-01 (day 1 of the common era) to 1970-01-01: 719,163.
            let date = NaiveDate::from_num_days_from_ce_opt(i32::try_from(day.checked_add(719_163)?).ok()?)?;
            LAST_DAY.set(Some((day, date)));
            date
        }
    };
    let nanos = (within % per_second) * (1_000_000_000 / per_second);
    let time = NaiveTime::from_num_seconds_from_midnight_opt((within / per_second) as u32, nanos as u32)?;
    Some(date.and_time(time).and_utc())
}

impl ParquetColumn {
    fn len(&self) -> usize {
        match self {
            Self::Floats(v) => v.len(),
            Self::Ints(v) | Self::Stamps(v, _) => v.len(),
            Self::Cells(v) => v.len(),
        }
    }

    /// Row `i`'s cell.
    fn cell(&self, i: usize) -> Cell<'static> {
        match self {
            Self::Floats(v) => Cell::Float(v[i]),
            Self::Ints(v) => Cell::Int(v[i]),
            Self::Stamps(v, unit) => time_cell(stamp_time(v[i], *unit)),
            Self::Cells(v) => v[i].clone(),
        }
    }

    /// The column as cells (plain values become cells, for a later row group with nulls).
    fn cells(&mut self) -> &mut Vec<Cell<'static>> {
        if !matches!(self, Self::Cells(_)) {
            let cells = (0..self.len()).map(|i| self.cell(i)).collect();
            *self = Self::Cells(cells);
        }
        let Self::Cells(cells) = self else { unreachable!("made cells above") };
        cells
    }

    /// Appends a row group's floats (no nulls) when the column holds floats or nothing yet; `false`
    /// otherwise (the caller then spreads them as cells).
    fn extend_floats(&mut self, values: &mut Vec<f64>) -> bool {
        match self {
            // The first row group's vector becomes the column's (no copy).
            Self::Cells(c) if c.is_empty() => *self = Self::Floats(std::mem::take(values)),
            Self::Floats(v) => v.extend_from_slice(values),
            _ => return false,
        }
        true
    }

    /// Appends a row group's integers (no nulls): timestamps of `unit` per second, or plain integers
    /// (`unit` `None`), when the column holds the same or nothing yet; `false` otherwise.
    fn extend_ints(&mut self, values: &mut Vec<i64>, unit: Option<i64>) -> bool {
        match (&mut *self, unit) {
            (Self::Cells(c), _) if c.is_empty() => {
                let v = std::mem::take(values);
                *self = match unit {
                    Some(u) => Self::Stamps(v, u),
                    None => Self::Ints(v),
                };
            }
            (Self::Ints(v), None) => v.extend_from_slice(values),
            (Self::Stamps(v, held), Some(u)) if *held == u => v.extend_from_slice(values),
            _ => return false,
        }
        true
    }
}

/// How a flat Parquet column becomes cells (as the row iterator's fields would).
#[derive(Clone, Copy, Debug)]
enum ParquetKind {
    Int,
    Float,
    Bool,
    Text,
    /// Days since the epoch.
    Date,
    /// Units per second (1e3, 1e6, 1e9) since the epoch.
    Timestamp(i64),
    /// An unscaled integer (INT32, INT64 or big-endian bytes) and its scale and precision.
    Decimal(i32, i32),
}

impl ParquetKind {
    /// `None` for what the column reader does not take (the row iterator does).
    fn of(c: &parquet::schema::types::ColumnDescriptor) -> Option<Self> {
        use parquet::basic::{ConvertedType, LogicalType, TimeUnit, Type};
        if c.max_rep_level() > 0 || c.max_def_level() > 1 {
            return None;
        }
        let decimal = Self::Decimal(c.type_scale(), c.type_precision());
        let logical = c.logical_type_ref();
        let converted = c.converted_type();
        Some(match (c.physical_type(), logical, converted) {
            (Type::INT32 | Type::INT64, Some(LogicalType::Decimal(_)), _)
            | (Type::INT32 | Type::INT64, _, ConvertedType::DECIMAL) => decimal,
            (Type::INT32, Some(LogicalType::Date), _) | (Type::INT32, _, ConvertedType::DATE) => Self::Date,
            (Type::INT64, Some(LogicalType::Timestamp(t)), _) => Self::Timestamp(match t.unit {
                TimeUnit::MILLIS => 1_000,
                TimeUnit::MICROS => 1_000_000,
                TimeUnit::NANOS => return None,
            }),
            (Type::INT64, None, ConvertedType::TIMESTAMP_MILLIS) => Self::Timestamp(1_000),
            (Type::INT64, None, ConvertedType::TIMESTAMP_MICROS) => Self::Timestamp(1_000_000),
            (Type::INT32 | Type::INT64, None, ConvertedType::NONE) => Self::Int,
            (Type::INT32 | Type::INT64, Some(LogicalType::Integer(i)), _) if i.is_signed => Self::Int,
            (
                Type::INT32 | Type::INT64,
                None,
                ConvertedType::INT_8 | ConvertedType::INT_16 | ConvertedType::INT_32 | ConvertedType::INT_64,
            ) => Self::Int,
            (Type::FLOAT | Type::DOUBLE, None, ConvertedType::NONE) => Self::Float,
            (Type::BOOLEAN, None, ConvertedType::NONE) => Self::Bool,
            (Type::BYTE_ARRAY, Some(LogicalType::String), _) | (Type::BYTE_ARRAY, None, ConvertedType::UTF8) => {
                Self::Text
            }
            (Type::BYTE_ARRAY | Type::FIXED_LEN_BYTE_ARRAY, Some(LogicalType::Decimal(_)), _)
            | (Type::BYTE_ARRAY | Type::FIXED_LEN_BYTE_ARRAY, _, ConvertedType::DECIMAL) => decimal,
            _ => return None,
        })
    }

    /// Appends one row group's column: plain values while the column has no nulls, else cells (nulls
    /// where the definition level says so).
    fn read(
        self,
        column: parquet::column::reader::ColumnReader,
        rows: usize,
        out: &mut ParquetColumn,
    ) -> parquet::errors::Result<()> {
        use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
        use parquet::data_type::DataType;
        /// Every value and definition level of a column chunk of `rows` rows (read into vectors of that
        /// capacity: no regrowing).
        fn read_all<T: DataType>(
            mut r: ColumnReaderImpl<T>,
            rows: usize,
        ) -> parquet::errors::Result<(Vec<T::T>, Vec<i16>)> {
            let (mut values, mut defs) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
            loop {
                let (records, _, _) = r.read_records(1 << 16, Some(&mut defs), None, &mut values)?;
                if records == 0 {
                    return Ok((values, defs));
                }
            }
        }
        /// `cell(value)` for each defined slot, `Null` for the others (no levels: every slot is defined).
        fn spread<V>(
            out: &mut Vec<Cell<'static>>,
            values: Vec<V>,
            defs: &[i16],
            mut cell: impl FnMut(V) -> Cell<'static>,
        ) {
            if defs.is_empty() || defs.iter().all(|&d| d > 0) {
                out.extend(values.into_iter().map(cell));
                return;
            }
            let mut values = values.into_iter();
            out.extend(
                defs.iter().map(|&d| if d > 0 { values.next().map_or(Cell::Null, &mut cell) } else { Cell::Null }),
            );
        }
        let full = |defs: &[i16]| defs.iter().all(|&d| d > 0);
        let scaled = |v: i64, scale: i32| {
            u32::try_from(scale)
                .ok()
                .and_then(|s| Decimal::try_from_i128_with_scale(i128::from(v), s).ok())
                .map_or(Cell::Null, Cell::Decimal)
        };
        match (self, column) {
            (kind, ColumnReader::Int32ColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                match kind {
                    Self::Date => spread(out.cells(), values, &defs, |d| {
                        epoch(i64::from(d) * 86_400).map_or(Cell::Null, Cell::Time)
                    }),
                    Self::Decimal(scale, _) => spread(out.cells(), values, &defs, |v| scaled(i64::from(v), scale)),
                    _ if full(&defs) && out.extend_ints(&mut values.iter().map(|&v| i64::from(v)).collect(), None) => {}
                    _ => spread(out.cells(), values, &defs, |v| Cell::Int(i64::from(v))),
                }
            }
            (kind, ColumnReader::Int64ColumnReader(r)) => {
                let (mut values, defs) = read_all(r, rows)?;
                match kind {
                    Self::Timestamp(unit) if full(&defs) && out.extend_ints(&mut values, Some(unit)) => {}
                    Self::Int if full(&defs) && out.extend_ints(&mut values, None) => {}
                    Self::Timestamp(unit) => spread(out.cells(), values, &defs, |v| time_cell(stamp_time(v, unit))),
                    Self::Decimal(scale, _) => spread(out.cells(), values, &defs, |v| scaled(v, scale)),
                    _ => spread(out.cells(), values, &defs, Cell::Int),
                }
            }
            (_, ColumnReader::FloatColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                if !(full(&defs) && out.extend_floats(&mut values.iter().map(|&v| f64::from(v)).collect())) {
                    spread(out.cells(), values, &defs, |v| Cell::Float(f64::from(v)));
                }
            }
            (_, ColumnReader::DoubleColumnReader(r)) => {
                let (mut values, defs) = read_all(r, rows)?;
                if !(full(&defs) && out.extend_floats(&mut values)) {
                    spread(out.cells(), values, &defs, Cell::Float);
                }
            }
            (_, ColumnReader::BoolColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| Cell::Text(Cow::Owned(v.to_string())));
            }
            (Self::Decimal(scale, precision), ColumnReader::ByteArrayColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| {
                    let d = parquet::data_type::Decimal::from_bytes(v, precision, scale);
                    parquet_decimal(&d).map_or(Cell::Null, Cell::Decimal)
                });
            }
            (_, ColumnReader::ByteArrayColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| {
                    Cell::Text(Cow::Owned(String::from_utf8_lossy(v.data()).into_owned()))
                });
            }
            (Self::Decimal(scale, precision), ColumnReader::FixedLenByteArrayColumnReader(r)) => {
                let (values, defs) = read_all(r, rows)?;
                spread(out.cells(), values, &defs, |v| {
                    let d = parquet::data_type::Decimal::from_bytes(v.into(), precision, scale);
                    parquet_decimal(&d).map_or(Cell::Null, Cell::Decimal)
                });
            }
            (_, _) => {
                return Err(parquet::errors::ParquetError::General(
                    "a column type the column reader does not take".into(),
                ));
            }
        }
        Ok(())
    }
}

/// Parquet through the crate's row iterator (any schema: what the column reader below does not take).
fn read_parquet_rows(name: &str, bytes: &[u8]) -> Result<Table<'static>, LoadReport> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let bad =
        |e: parquet::errors::ParquetError| file_error(name, IssueClass::BadRow, format!("unreadable Parquet: {e}"));
    let reader = SerializedFileReader::new(bytes::Bytes::copy_from_slice(bytes)).map_err(bad)?;
    let headers: Vec<String> =
        reader.metadata().file_metadata().schema_descr().columns().iter().map(|c| c.name().to_owned()).collect();
    let mut table = Table::new(headers);
    for (i, row) in reader.get_row_iter(None).map_err(bad)?.enumerate() {
        let row = row.map_err(bad)?;
        let cells: Vec<Cell<'static>> = row
            .get_column_iter()
            .map(|(_, field)| match field {
                Field::Null => Cell::Null,
                Field::Byte(v) => Cell::Int(i64::from(*v)),
                Field::Short(v) => Cell::Int(i64::from(*v)),
                Field::Int(v) => Cell::Int(i64::from(*v)),
                Field::Long(v) => Cell::Int(*v),
                Field::UByte(v) => Cell::Int(i64::from(*v)),
                Field::UShort(v) => Cell::Int(i64::from(*v)),
                Field::UInt(v) => Cell::Int(i64::from(*v)),
                Field::ULong(v) => i64::try_from(*v).map_or(Cell::Null, Cell::Int),
                Field::Float(v) => Cell::Float(f64::from(*v)),
                Field::Double(v) => Cell::Float(*v),
                Field::Decimal(d) => parquet_decimal(d).map_or(Cell::Null, Cell::Decimal),
                Field::Str(s) => Cell::Text(Cow::Owned(s.clone())),
                Field::Date(days) => epoch(i64::from(*days) * 86_400).map_or(Cell::Null, Cell::Time),
                Field::TimestampMillis(ms) => {
                    DateTime::from_timestamp_millis(*ms).map_or(Cell::Null, |t| Cell::Time(t.fixed_offset()))
                }
                Field::TimestampMicros(us) => {
                    DateTime::from_timestamp_micros(*us).map_or(Cell::Null, |t| Cell::Time(t.fixed_offset()))
                }
                other => Cell::Text(Cow::Owned(other.to_string())),
            })
            .collect();
        table.push(i + 1, cells);
    }
    Ok(table)
}

/// A Parquet DECIMAL (big-endian two's complement unscaled value, scale) as a Decimal.
fn parquet_decimal(d: &parquet::data_type::Decimal) -> Option<Decimal> {
    let data = d.data();
    if data.is_empty() || data.len() > 16 {
        return None;
    }
    let fill = if data[0] & 0x80 != 0 { 0xFF } else { 0x00 };
    let mut buf = [fill; 16];
    buf[16 - data.len()..].copy_from_slice(data);
    Decimal::try_from_i128_with_scale(i128::from_be_bytes(buf), u32::try_from(d.scale()).ok()?).ok()
}

fn row_finding(file: &str, row: usize, column: Option<&str>, class: IssueClass, message: String) -> Finding {
    let severity = if class == IssueClass::ZeroVolume { Severity::Warning } else { Severity::Error };
    Finding { file: file.to_owned(), row: Some(row), column: column.map(str::to_owned), class, severity, message }
}

/// A price or volume cell as a Decimal.
fn decimal(cell: &Cell<'_>) -> Result<Decimal, (IssueClass, String)> {
    match cell {
        Cell::Decimal(d) => Ok(*d),
        Cell::Int(i) => Ok(Decimal::from(*i)),
        Cell::Float(x) if !x.is_finite() => Err((IssueClass::NonFinite, format!("{x} is not finite"))),
        Cell::Float(x) => {
            float_decimal(*x).ok_or_else(|| (IssueClass::BadNumber, format!("{x} does not fit a Decimal")))
        }
        Cell::Text(s) => {
            if let Some(d) = plain_decimal(s) {
                return Ok(d);
            }
            let t = s.trim();
            Decimal::from_str(t).or_else(|_| Decimal::from_scientific(t)).map_err(|_| {
                let non_finite = ["nan", "inf", "+inf", "-inf", "infinity", "-infinity", "+infinity"];
                if non_finite.iter().any(|w| w.eq_ignore_ascii_case(t)) {
                    (IssueClass::NonFinite, format!("`{t}` is not finite"))
                } else {
                    (IssueClass::BadNumber, format!("`{t}` is not a number"))
                }
            })
        }
        Cell::Time(_) | Cell::Null => Err((IssueClass::BadNumber, "empty or not a number".to_owned())),
    }
}

/// `[-]DIGITS[.DIGITS]` of at most 18 digits (how prices and volumes are written) read straight into a
/// mantissa and a scale: the value and scale `Decimal::from_str` gives. `None` for anything else (signs,
/// exponents, underscores, a negative zero, longer numbers), which takes the general parser.
fn plain_decimal(text: &str) -> Option<Decimal> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    // At most 18 digits and a point (10^18 - 1 fits a u64).
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let (mut mantissa, mut point) = (0u64, None);
    for (i, &b) in digits.iter().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d < 10 {
            mantissa = mantissa * 10 + u64::from(d);
        } else if b == b'.' && point.is_none() && i > 0 && i + 1 < digits.len() {
            point = Some(i);
        } else {
            return None;
        }
    }
    if (point.is_none() && digits.len() > 18) || (negative && mantissa == 0) {
        return None;
    }
    let scale = point.map_or(0, |p| digits.len() - p - 1) as u32;
    // Exact: the mantissa is below 2^64 and the scale below 19.
    Some(Decimal::from_parts(mantissa as u32, (mantissa >> 32) as u32, 0, negative, scale))
}

/// Powers of ten that are exact doubles, by exponent.
const POWERS: [f64; 16] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// The decimal a float (a cell, a money parameter from Python) stands for: the shortest decimal that reads back as `x` when one of at most
/// 15 significant digits exists (every number written with at most 15 digits and parsed into a double,
/// as pandas or Parquet writers do); others, with `Decimal::from_f64`. Found without text: the first scale
/// `k <= 15` at which `m = round(x 10^k)` (below 2^50) satisfies `m / 10^k == x` in f64 (`m` and `10^k`
/// are exact and the division is correctly rounded, so this is exactly "m at scale k reads back as x";
/// below 2^50 the rounding of `x 10^k` cannot pick the wrong `m`).
///
/// A column's values usually share a scale, so the scale that worked last on this thread is tried first:
/// when `m` at that scale reads back as `x` and has at most 15 digits, `m` without its trailing zeros is
/// the answer of the search (a smaller scale reading back as `x` would be another decimal of at most 15
/// significant digits rounding to the same double, which the 15.95 digits of a double rule out).
pub fn float_decimal(x: f64) -> Option<Decimal> {
    thread_local!(static LAST_SCALE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
    // The thread's last reading (the answer depends on `x` alone): a bar's open is often the last close,
    // and its high or low its open or close.
    thread_local!(static LAST_READ: std::cell::Cell<(u64, Decimal)> = const { std::cell::Cell::new((0, Decimal::ZERO)) });
    if !x.is_finite() || x == 0.0 {
        return Decimal::from_f64(x);
    }
    let (bits, last) = LAST_READ.get();
    if bits == x.to_bits() {
        return Some(last);
    }
    let hint = LAST_SCALE.get();
    // Rounded by adding a half and truncating (`round` is a library call here): a nearest integer off by
    // one in the rare cases this misrounds fails the read-back test and takes the search, and any `m` that
    // passes the test is the answer (above), however it was found.
    let y = x * POWERS[hint];
    let m = if y.abs() < 1e15 { (y + 0.5f64.copysign(y)) as i64 } else { i64::MAX };
    if m.unsigned_abs() < 1_000_000_000_000_000 && m as f64 / POWERS[hint] == x {
        let (mut m, mut k) = (m, hint as u32);
        while k > 0 && m % 10 == 0 {
            (m, k) = (m / 10, k - 1);
        }
        let d = Decimal::new(m, k);
        LAST_READ.set((x.to_bits(), d));
        return Some(d);
    }
    let found = searched_decimal(x);
    if let Some(d) = found {
        LAST_SCALE.set(d.scale() as usize);
        LAST_READ.set((x.to_bits(), d));
    }
    found.or_else(|| Decimal::from_f64(x))
}

/// The search of [`float_decimal`] from scale 0 (`None`: no decimal of at most 15 digits reads back as `x`).
fn searched_decimal(x: f64) -> Option<Decimal> {
    const LIMIT: f64 = (1u64 << 50) as f64;
    for (k, p) in POWERS.iter().enumerate() {
        let m = (x * p).round();
        if m.abs() >= LIMIT {
            break;
        }
        if m / p == x {
            return Some(Decimal::new(m as i64, k as u32));
        }
    }
    None
}

/// A time cell (or a date cell and a time cell).
fn time(cell: &Cell<'_>, second: Option<&Cell<'_>>) -> Result<DateTime<FixedOffset>, String> {
    match (cell, second) {
        (Cell::Text(d), Some(Cell::Text(t))) => parse_time(&format!("{} {}", d.trim(), t.trim())),
        (Cell::Time(t), _) => Ok(*t),
        (Cell::Int(n), _) => epoch(*n).ok_or_else(|| format!("epoch value {n} is out of range")),
        (Cell::Text(s), _) => parse_time(s),
        (other, _) => Err(format!("{other:?} is not a timestamp")),
    }
}

/// What a row gave besides its bar, kept only for rows with something to say: its findings, whether the
/// policy dropped or repaired it, its symbol (`None`: the file's default), or that its line is not a row
/// (a blank or bad line of a plain CSV). Most rows have none, and their note is `None` (a null pointer
/// beside the bar, where a note inline would double the rows' memory).
struct RowNote<'t> {
    findings: Vec<Finding>,
    dropped: bool,
    repaired: bool,
    symbol: Option<&'t str>,
    skipped: bool,
}

/// Each row's note, beside the rows' bars.
type Notes<'t> = Vec<Option<Box<RowNote<'t>>>>;

/// What stands in the bars vector for a row that gave no bar (it is dropped before anything reads it).
fn no_bar() -> MarketBar {
    MarketBar {
        time: DateTime::UNIX_EPOCH.fixed_offset(),
        open: Decimal::ZERO,
        high: Decimal::ZERO,
        low: Decimal::ZERO,
        close: Decimal::ZERO,
        volume: Decimal::ZERO,
    }
}

/// The text of a cell that borrows the file's bytes (a plain CSV's), trimmed.
fn borrowed_text<'a>(cell: &Cell<'a>) -> Option<&'a str> {
    match cell {
        Cell::Text(Cow::Borrowed(s)) => Some(s.trim()),
        _ => None,
    }
}

/// How every row is read: the file's name and headers, where the columns are, and the policy.
struct RowRules<'r> {
    name: &'r str,
    headers: &'r [String],
    map: &'r ColumnMap,
    date_time_pair: Option<(usize, usize)>,
    policy: &'r CleanPolicy,
    /// Time, open, high, low and close columns.
    columns: [usize; 5],
}

impl RowRules<'_> {
    /// Row `row`'s bar (`no_bar()` when it gives none or is dropped) and its note, from its cells. Rows
    /// parse and check on their own, so any number of threads can do this, and their outcomes are then
    /// taken in row order ([`build`]).
    fn parse<'t>(
        &self,
        cells: &[Cell<'_>],
        row: usize,
        symbol: Option<&'t str>,
    ) -> (MarketBar, Option<Box<RowNote<'t>>>) {
        let (name, map, policy) = (self.name, self.map, self.policy);
        let [t_col, o_col, h_col, l_col, c_col] = self.columns;
        let header = |i: usize| self.headers[i].as_str();
        let mut findings: Vec<Finding> = Vec::new();
        let second = self.date_time_pair.map(|(_, t)| &cells[t]);
        let t = time(&cells[t_col], second)
            .map_err(|m| row_finding(name, row, Some(header(t_col)), IssueClass::BadTime, m));
        let mut number = |col: usize| {
            decimal(&cells[col])
                .map_err(|(class, m)| findings.push(row_finding(name, row, Some(header(col)), class, m)))
                .ok()
        };
        let (open, high, low, close) = (number(o_col), number(h_col), number(l_col), number(c_col));
        let volume = map.volume.map_or(Some(Decimal::ZERO), &mut number);
        let time = t.map_err(|f| findings.push(f)).ok();
        let mut bar = match (time, open, high, low, close, volume) {
            (Some(time), Some(open), Some(high), Some(low), Some(close), Some(volume)) => {
                Some(MarketBar { time, open, high, low, close, volume })
            }
            _ => None,
        };
        let mut keep = bar.is_some();
        let mut repaired = false;
        if let Some(b) = bar.as_mut().filter(|b| !plainly_valid(b)) {
            for (class, column, message) in check_bar(b) {
                let col = match column {
                    "open" => o_col,
                    "high" => h_col,
                    "low" => l_col,
                    "close" => c_col,
                    _ => map.volume.unwrap_or(c_col),
                };
                let mut f = row_finding(name, row, Some(header(col)), class, message);
                if class == IssueClass::ZeroVolume && map.volume.is_none() {
                    continue;
                }
                if policy.repair.contains(&class) {
                    repair(b, class);
                    repaired = true;
                    f.severity = Severity::Warning;
                    f.message += " (repaired)";
                } else if policy.drop.contains(&class) {
                    keep = false;
                    f.severity = Severity::Warning;
                    f.message += " (row dropped)";
                }
                findings.push(f);
            }
        }
        let repaired = repaired && keep;
        let handled = |class: IssueClass| policy.drop.contains(&class) || policy.repair.contains(&class);
        for f in findings.iter_mut().filter(|f| bar.is_none() && handled(f.class) && f.severity == Severity::Error) {
            f.severity = Severity::Warning;
            f.message += " (row dropped)";
        }
        let dropped = !keep;
        let note = (!findings.is_empty() || dropped || repaired || symbol.is_some())
            .then(|| Box::new(RowNote { findings, dropped, repaired, symbol, skipped: false }));
        (bar.filter(|_| keep).unwrap_or_else(no_bar), note)
    }
}

/// A plain CSV's rows parsed by chunk in parallel, each line's bar and note written into its own place of
/// vectors as long as the body's lines; lines that are not rows get a skipped note and their findings are
/// returned in line order, with the number of rows.
fn parse_plain<'a>(plain: &PlainCsv<'a>, rules: &RowRules<'_>) -> (Vec<MarketBar>, Notes<'a>, Vec<Finding>, usize) {
    let n = plain.lines;
    let (mut bars, mut notes) = (Vec::new(), Vec::new());
    (0..n).into_par_iter().map(|_| no_bar()).collect_into_vec(&mut bars);
    (0..n).into_par_iter().map(|_| None).collect_into_vec(&mut notes);
    let mut places = Vec::with_capacity(plain.chunks.len());
    let (mut bars_left, mut notes_left) = (&mut bars[..], &mut notes[..]);
    for (c, &(_, first)) in plain.chunks.iter().enumerate() {
        let len = plain.chunks.get(c + 1).map_or(n, |next| next.1) - first;
        let (b, rest) = std::mem::take(&mut bars_left).split_at_mut(len);
        bars_left = rest;
        let (o, rest) = std::mem::take(&mut notes_left).split_at_mut(len);
        notes_left = rest;
        places.push((c, first, b, o));
    }
    let symbol_col = rules.map.symbol;
    let walked: Vec<(Vec<Finding>, Vec<usize>)> = places
        .into_par_iter()
        .map(|(c, first, bars, notes)| {
            let mut buf = Vec::with_capacity(plain.width);
            plain.walk(rules.name, c, &mut buf, |k, cells| {
                let symbol = symbol_col.and_then(|col| borrowed_text(&cells[col])).filter(|s| !s.is_empty());
                (bars[k - first], notes[k - first]) = rules.parse(cells, k + 2, symbol);
                true
            })
        })
        .collect();
    let mut findings = Vec::new();
    let mut rows = n;
    for (f, skipped) in walked {
        findings.extend(f);
        rows -= skipped.len();
        for k in skipped {
            let note = RowNote { findings: Vec::new(), dropped: false, repaired: false, symbol: None, skipped: true };
            notes[k] = Some(Box::new(note));
        }
    }
    (bars, notes, findings, rows)
}

fn build(
    name: &str,
    mut table: Table<'_>,
    default_symbol: &str,
    policy: &CleanPolicy,
) -> Result<(Dataset, LoadReport), LoadReport> {
    let mut report = LoadReport {
        file: name.to_owned(),
        rows: table.rows.len(),
        findings: std::mem::take(&mut table.findings),
        ..LoadReport::default()
    };
    let (mut map, date_time_pair) = ColumnMap::from_headers(&table.headers);
    // pandas' `to_csv()` writes the index (a DatetimeIndex) first with an empty header (`Unnamed: 0` once
    // read back and written again): that column is the time when its first value is a written date or
    // time that parses (a bare integer is a RangeIndex, not epoch seconds).
    let dated = |c: &Cell| match c {
        Cell::Text(t) => !t.trim().chars().all(|ch| ch.is_ascii_digit()) && time(c, None).is_ok(),
        Cell::Time(_) => true,
        _ => false,
    };
    let first_cell = || match &table.storage {
        Storage::Plain(plain) => plain.first_cell(name),
        _ => table.rows.first().and_then(|_| table.row_cells(0, &mut Vec::new()).first().cloned()),
    };
    if map.time.is_none()
        && let Some(first) = table.headers.first()
        && (first.trim().trim_matches('"').is_empty() || first.trim().eq_ignore_ascii_case("unnamed: 0"))
        && first_cell().is_some_and(|c| dated(&c))
    {
        map.time = Some(0);
        report.notes.push(format!(
            "the first column (header `{}`, pandas' index) holds timestamps: it is the time column",
            first.trim()
        ));
    }
    let missing = map.missing();
    if !missing.is_empty() {
        if let Storage::Plain(plain) = &table.storage {
            (report.findings, report.rows) = plain.survey(name);
        }
        let names: Vec<&str> = missing.iter().map(|c| c.name()).collect();
        report.findings.push(file_finding(
            name,
            Some(1),
            IssueClass::MissingColumn,
            format!("missing column(s) {} (header: {})", names.join(", "), table.headers.join(",")),
        ));
        return Err(report);
    }
    let idx = |c: Option<usize>| c.expect("required columns are present");
    let t_col = idx(map.time);
    let columns = [t_col, idx(map.open), idx(map.high), idx(map.low), idx(map.close)];
    let rules = RowRules { name, headers: &table.headers, map: &map, date_time_pair, policy, columns };
    let needed: Vec<usize> = columns.iter().copied().chain(map.volume).chain(date_time_pair.map(|(_, t)| t)).collect();
    // Every row's bar (or `no_bar()`) is written straight into its place in one vector, its note beside it;
    // the outcomes are then taken in row order, so the findings and the series do not depend on the threads.
    let (bars, notes) = match &table.storage {
        Storage::Plain(plain) => {
            let (bars, notes, findings, rows) = parse_plain(plain, &rules);
            report.findings.extend(findings);
            report.rows = rows;
            (bars, notes)
        }
        _ => table
            .rows
            .par_iter()
            .enumerate()
            .map_init(
                || Vec::with_capacity(table.headers.len()),
                |buf, (i, &row)| {
                    let symbol = map.symbol.and_then(|col| table.text(i, col)).filter(|s| !s.is_empty());
                    rules.parse(table.row_cells_in(i, &needed, buf), row, symbol)
                },
            )
            .unzip(),
    };
    if report.rows == 0 {
        report.findings.push(file_finding(name, None, IssueClass::EmptyFile, "no data rows".to_owned()));
        return Err(report);
    }
    let row_of = |i: usize| if let Storage::Plain(_) = table.storage { i + 2 } else { table.rows[i] };
    let mut any_gone = false;
    for o in notes.iter().flatten() {
        report.dropped += usize::from(o.dropped);
        report.repaired += usize::from(o.repaired);
        any_gone |= o.dropped || o.skipped;
    }
    let kept = |i: usize| notes[i].as_ref().is_none_or(|o| !o.dropped && !o.skipped);
    // Each kept bar is checked against its symbol's last kept bar (a duplicate or earlier time is a
    // finding); those findings follow the rows' own, symbol by symbol in row order.
    let mut ordering: Vec<Vec<Finding>> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    // One symbol whose times increase (the common case): the kept bars, compacted in place, are the series.
    let mut previous = None;
    let in_order = map.symbol.is_none()
        && if any_gone {
            bars.iter().enumerate().all(|(i, b)| !kept(i) || previous.replace(b.time).is_none_or(|p| p < b.time))
        } else {
            bars.par_windows(2).all(|w| w[0].time < w[1].time)
        };
    if in_order {
        let mut bars = bars;
        if any_gone {
            let mut i = 0;
            bars.retain(|_| {
                i += 1;
                kept(i - 1)
            });
        }
        series.push(Series { symbol: default_symbol.to_owned(), bars });
    } else {
        // Bars by symbol, in order of first appearance (rows of one symbol usually come together: the last
        // group is tried before the index).
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut last: Option<(Option<&str>, usize)> = None;
        for (i, bar) in bars.into_iter().enumerate() {
            if !kept(i) {
                continue;
            }
            let symbol = notes[i].as_ref().and_then(|o| o.symbol);
            let g = match last {
                Some((s, g)) if s == symbol => g,
                _ => {
                    let name = symbol.unwrap_or(default_symbol);
                    let g = *index.entry(name.to_owned()).or_insert_with(|| {
                        series.push(Series { symbol: name.to_owned(), bars: Vec::new() });
                        ordering.push(Vec::new());
                        series.len() - 1
                    });
                    last = Some((symbol, g));
                    g
                }
            };
            let bars = &mut series[g].bars;
            let class = match bars.last() {
                Some(prev) if bar.time == prev.time => Some(IssueClass::DuplicateTime),
                Some(prev) if bar.time < prev.time => Some(IssueClass::DecreasingTime),
                _ => None,
            };
            let Some(class) = class else {
                bars.push(bar);
                continue;
            };
            let prev = bars.last().map(|b| b.time.to_rfc3339()).unwrap_or_default();
            let message = format!("{}: {} after {prev}", series[g].symbol, bar.time.to_rfc3339());
            let mut f = row_finding(name, row_of(i), Some(&table.headers[t_col]), class, message);
            if policy.drop.contains(&class) {
                f.severity = Severity::Warning;
                f.message += " (row dropped)";
                report.dropped += 1;
            }
            ordering[g].push(f);
        }
    }
    report.findings.extend(notes.into_iter().flatten().flat_map(|o| o.findings));
    report.findings.extend(ordering.into_iter().flatten());
    report.usable = report.blocking().next().is_none() && series.iter().any(|s| !s.bars.is_empty());
    if report.usable {
        Ok((Dataset { source: name.to_owned(), synthetic: false, series }, report))
    } else {
        if series.iter().all(|s| s.bars.is_empty()) && report.blocking().next().is_none() {
            report.findings.push(file_finding(name, None, IssueClass::EmptyFile, "no usable rows left".to_owned()));
        }
        Err(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Parquet file of `groups` row groups (their row counts): millisecond timestamps, a FLOAT open with
    /// nulls, DOUBLE high/low, a DECIMAL(12, 5) INT64 close, an INT32 volume, an optional UTF8 symbol.
    fn parquet_file(groups: &[usize]) -> Vec<u8> {
        use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type};
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        use std::sync::Arc;
        let schema = Arc::new(
            parse_message_type(
                "message bars { required int64 time (TIMESTAMP(MILLIS,true)); optional float open; \
                 required double high; required double low; required int64 close (DECIMAL(12,5)); \
                 required int32 volume; optional binary symbol (UTF8); }",
            )
            .unwrap(),
        );
        let props = Arc::new(WriterProperties::builder().set_write_batch_size(4096).build());
        let mut buf = Vec::new();
        let mut writer = SerializedFileWriter::new(&mut buf, schema, props).unwrap();
        let mut first = 0usize;
        for &n in groups {
            let rows = first..first + n;
            first += n;
            let defs: Vec<i16> = rows.clone().map(|i| i16::from(i % 97 != 5)).collect();
            let mut group = writer.next_row_group().unwrap();
            let times: Vec<i64> = rows.clone().map(|i| 1_483_315_200_000 + i as i64 * 3_600_000).collect();
            let open: Vec<f32> = rows.clone().filter(|i| i % 97 != 5).map(|i| 1.5 + (i % 7) as f32 * 0.125).collect();
            let high: Vec<f64> = rows.clone().map(|i| 2.5 + (i % 5) as f64 * 0.1).collect();
            let low: Vec<f64> = rows.clone().map(|i| 0.5 + (i % 3) as f64 * 0.01).collect();
            let close: Vec<i64> = rows.clone().map(|i| 150_000 + (i % 11) as i64 * 1_234).collect();
            let volume: Vec<i32> = rows.clone().map(|i| (i % 13) as i32).collect();
            let symbols: Vec<ByteArray> = rows
                .clone()
                .filter(|i| i % 97 != 5)
                .map(|i| ByteArray::from(if i < 1_000 { "AAA" } else { "BBB" }))
                .collect();
            macro_rules! column {
                ($t:ty, $values:expr, $defs:expr) => {{
                    let mut col = group.next_column().unwrap().unwrap();
                    col.typed::<$t>().write_batch(&$values, $defs, None).unwrap();
                    col.close().unwrap();
                }};
            }
            column!(Int64Type, times, None);
            column!(FloatType, open, Some(&defs[..]));
            column!(DoubleType, high, None);
            column!(DoubleType, low, None);
            column!(Int64Type, close, None);
            column!(Int32Type, volume, None);
            column!(ByteArrayType, symbols, Some(&defs[..]));
            group.close().unwrap();
        }
        writer.close().unwrap();
        buf
    }

    /// A float cell is the decimal that was written, for every decimal of at most 15 significant digits
    /// (where `Decimal::from_f64` can add a digit of noise), and reads back as the same double always.
    #[test]
    fn float_cells_are_the_decimals_written() {
        use num_traits::ToPrimitive;
        use rand::{RngExt, SeedableRng};
        let x = 4_255_223.196f64;
        assert_eq!(
            Decimal::from_f64(x).map(|d| d.to_string()).as_deref(),
            Some("4255223.196000001"),
            "from_f64's noise"
        );
        assert_eq!(float_decimal(x).map(|d| d.to_string()).as_deref(), Some("4255223.196"));
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..300_000 {
            let digits = rng.random_range(1..=15u32);
            let m: i64 = rng.random_range(0..10i64.pow(digits));
            let scale = rng.random_range(0..=digits.min(15));
            let written = Decimal::new(if rng.random::<bool>() { m } else { -m }, scale).normalize();
            let x = written.to_f64().expect("finite");
            let read = float_decimal(x).expect("finite");
            assert_eq!((read, read.scale()), (written, written.scale()), "{written} read as {read}");
            let bits = f64::from_bits(rng.random::<u64>());
            // Any double: the fast reading reads back as it; the others are from_f64's.
            if let Some(d) = float_decimal(bits) {
                assert!(d.to_f64() == Some(bits) || Decimal::from_f64(bits) == Some(d), "{bits:e} read as {d}");
            }
        }
        for x in [0.1, 0.3, 0.1 + 0.2, 1.1, 1e-7, 123_456.789_01, 1e14 + 0.5, 2.5e-12, 1e300, -1e-300] {
            let d = float_decimal(x);
            assert!(d.is_some() || Decimal::from_f64(x).is_none(), "{x:e}");
        }
        assert_eq!(float_decimal(0.1 + 0.2), Decimal::from_f64(0.1 + 0.2), "17 digits: from_f64's reading");
        assert_eq!(float_decimal(-0.0), Decimal::from_f64(-0.0));
    }

    /// The scale tried first (the last one found on the thread) gives what the search from scale 0 gives,
    /// value and scale, whatever scale came before: written decimals of every scale, with trailing zeros,
    /// large and tiny ones, and random doubles.
    #[test]
    fn the_scale_tried_first_finds_the_searched_decimal() {
        use num_traits::ToPrimitive;
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut compared = 0;
        for _ in 0..300_000 {
            // Prime the thread's scale with a decimal of a random scale, then read another.
            let prime = Decimal::new(rng.random_range(1..10i64.pow(9)), rng.random_range(0..=15));
            float_decimal(prime.to_f64().expect("finite"));
            let digits = rng.random_range(1..=16u32);
            let m: i64 = rng.random_range(1..10i64.pow(digits));
            let x = if rng.random_range(0..4) == 0 {
                f64::from_bits(rng.random::<u64>())
            } else {
                Decimal::new(m * 10i64.pow(rng.random_range(0..3)), rng.random_range(0..=18)).to_f64().expect("finite")
            };
            let Some(searched) = searched_decimal(x) else { continue };
            let read = float_decimal(x).expect("finite");
            assert_eq!((read, read.scale()), (searched, searched.scale()), "{x:e}");
            compared += 1;
        }
        assert!(compared > 150_000, "{compared} readings compared");
    }

    /// Timestamps read with the thread's last day are chrono's, in and out of range, within a day and
    /// across days and the epoch, in both units.
    #[test]
    fn stamps_read_as_chrono_reads_them() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut v: i64 = -3 * 86_400_000;
        for k in 0..200_000 {
            v = match k % 50 {
                0 => rng.random::<i64>(),
                1 => rng.random_range(-10i64.pow(17)..10i64.pow(17)),
                _ => v.wrapping_add(rng.random_range(0..4_000_000)),
            };
            assert_eq!(stamp_time(v, 1_000), DateTime::from_timestamp_millis(v), "{v} ms");
            assert_eq!(stamp_time(v, 1_000_000), DateTime::from_timestamp_micros(v), "{v} us");
        }
    }

    /// The fast reading of plain numbers is `Decimal::from_str`'s (value and scale) wherever it answers,
    /// and it answers for every plain number of up to 18 digits but a negative zero (left to `from_str`).
    #[test]
    fn plain_numbers_read_as_from_str_reads_them() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let alphabet = b"0123456789.-+e_ ";
        for case in 0..200_000 {
            let text: String = if case % 2 == 0 {
                let len = rng.random_range(0..22);
                (0..len).map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())])).collect()
            } else {
                let digits = rng.random_range(1..=18usize);
                let mut t: String = (0..digits).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect();
                if digits > 1 && rng.random::<bool>() {
                    t.insert(rng.random_range(1..digits), '.');
                }
                if rng.random::<bool>() { format!("-{t}") } else { t }
            };
            let fast = plain_decimal(&text);
            let general = Decimal::from_str(&text).ok();
            if let Some(d) = fast {
                let g = general.unwrap_or_else(|| panic!("`{text}`: fast {d}, from_str refuses"));
                assert_eq!((d, d.scale(), d.is_sign_negative()), (g, g.scale(), g.is_sign_negative()), "`{text}`");
            } else if case % 2 == 1 && !(text.starts_with('-') && text.chars().all(|c| matches!(c, '-' | '0' | '.'))) {
                panic!("`{text}` is plain but was not read");
            }
        }
    }

    /// The column reader gives the row iterator's cells: the same series, bars and findings (row
    /// numbers included), across row groups and batches, with nulls, decimals and text.
    #[test]
    fn parquet_columns_read_as_the_rows_do() {
        let bytes = parquet_file(&[70_000, 3_000]);
        let by_columns = read_parquet("b.parquet", bytes::Bytes::copy_from_slice(&bytes)).unwrap();
        assert!(matches!(by_columns.storage, Storage::Columns(_)), "read by column");
        let by_rows = read_parquet_rows("b.parquet", &bytes).unwrap();
        assert_eq!(by_columns.rows, by_rows.rows);
        let (mut buf, mut by_rows_buf) = (Vec::new(), Vec::new());
        for i in [0, 5, 97 + 5, 65_535, 65_536, 69_999, 70_000, 72_999] {
            assert_eq!(by_columns.row_cells(i, &mut buf), by_rows.row_cells(i, &mut by_rows_buf), "row {i}");
        }
        let policy = CleanPolicy::default();
        let a = build("b.parquet", by_columns, "X", &policy);
        let b = build("b.parquet", by_rows, "X", &policy);
        let (a, b) = (a.map(|_| ()).expect_err("nulls are findings"), b.map(|_| ()).expect_err("nulls are findings"));
        assert_eq!(a.findings, b.findings);
        assert!(a.findings.iter().any(|f| f.row == Some(6) && f.column.as_deref() == Some("open")), "{a}");
        let lenient = CleanPolicy::parse(&["bad-number".to_owned()], &[]).unwrap();
        let (da, ra) = load_bytes("b.parquet", &bytes, "X", &lenient).unwrap();
        let rows = read_parquet_rows("b.parquet", &bytes).unwrap();
        let (db, rb) = build("b.parquet", rows, "X", &lenient).unwrap();
        assert_eq!((da.series.len(), ra.findings.len(), ra.dropped), (db.series.len(), rb.findings.len(), rb.dropped));
        for (x, y) in da.series.iter().zip(&db.series) {
            assert_eq!((&x.symbol, &x.bars), (&y.symbol, &y.bars));
        }
        assert_eq!(da.series[1].bars[0].close, Decimal::new(150_000 + (1_000 % 11) * 1_234, 5));
    }
}
