//! A file of target weights (`tradesim backtest --weights`, docs/CLI.md): a long table, CSV or Parquet, with
//! a time column, a symbol column and one column per portfolio, read through the same cells, time rules and
//! decimal rules as a data file. A row is an order: at the close of that time, each portfolio with a value
//! in the row targets that weight of its account in that symbol; an empty cell is no order. Every finding
//! names the file, the row, the column and the symbol.

use std::path::Path;

use chrono::{DateTime, FixedOffset};
use rust_decimal::Decimal;

use super::decimal::decimal;
use super::rows::time;
use super::{Cell, PARQUET_MAGIC, Storage, Table, file_bytes, file_error, file_finding, row_finding};
use crate::data::columns::ColumnMap;
use crate::data::time::TimeUnit;
use crate::data::validate::{Finding, IssueClass, LoadReport};

/// One row of a weights file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightRow {
    /// Its row: the CSV line (header = 1) or the 1-based Parquet row.
    pub row: usize,
    /// The time at whose close the weights are decided.
    pub time: DateTime<FixedOffset>,
    /// The symbol, as written.
    pub symbol: String,
    /// One target weight per portfolio (`None`: an empty cell, no order).
    pub weights: Vec<Option<Decimal>>,
}

/// A weights file as read, before it meets a universe ([`crate::data::weights::TargetWeights`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightTable {
    /// The file's name.
    pub file: String,
    /// The portfolio columns' headers, in file order.
    pub portfolios: Vec<String>,
    /// The time column's header and the symbol column's (the columns findings name).
    pub time_column: String,
    /// The symbol column's header.
    pub symbol_column: String,
    /// The rows, in file order.
    pub rows: Vec<WeightRow>,
}

/// Reads a weights file (Parquet when it starts with the `PAR1` magic, else CSV); `time_unit` says what an
/// integer time counts, as for data files.
pub fn load_weights(path: &Path, time_unit: Option<TimeUnit>) -> Result<WeightTable, LoadReport> {
    let name = path.display().to_string();
    let bytes = file_bytes(path).map_err(|e| file_error(&name, IssueClass::BadRow, format!("cannot read: {e}")))?;
    weights_from_bytes(&name, &bytes, time_unit)
}

/// [`load_weights`] of bytes named `name`.
pub fn weights_from_bytes(name: &str, bytes: &[u8], time_unit: Option<TimeUnit>) -> Result<WeightTable, LoadReport> {
    let table = if bytes.starts_with(PARQUET_MAGIC) {
        super::parquet::read_parquet(name, bytes::Bytes::copy_from_slice(bytes))?
    } else {
        super::csv::read_csv(name, bytes)?
    };
    let refuse =
        |finding: Finding| LoadReport { file: name.to_owned(), findings: vec![finding], ..LoadReport::default() };
    let (map, pair) = ColumnMap::from_headers(&table.headers);
    let (Some(t_col), Some(s_col)) = (map.time, map.symbol) else {
        let message = format!(
            "a weights file needs a time column and a symbol column, then one column per portfolio (header: {})",
            table.headers.join(",")
        );
        return Err(refuse(file_finding(name, Some(1), IssueClass::MissingColumn, message)));
    };
    let prices = [map.open, map.high, map.low, map.close, map.volume];
    if let Some(c) = prices.into_iter().flatten().next() {
        let message = format!(
            "`{}` is a price or volume column: a weights file holds time, symbol and portfolio columns (a data file \
             goes to --data)",
            table.headers[c].trim()
        );
        return Err(refuse(row_finding(name, 1, Some(table.headers[c].trim()), IssueClass::BadRow, message)));
    }
    let second = pair.map(|(_, t)| t);
    let weight_cols: Vec<usize> =
        (0..table.headers.len()).filter(|&c| c != t_col && c != s_col && Some(c) != second).collect();
    if weight_cols.is_empty() {
        let message = format!(
            "no portfolio column: after time and symbol, one column per portfolio (header: {})",
            table.headers.join(",")
        );
        return Err(refuse(file_finding(name, Some(1), IssueClass::MissingColumn, message)));
    }
    let header = |c: usize| table.headers[c].trim().to_owned();
    let mut out = WeightTable {
        file: name.to_owned(),
        portfolios: weight_cols.iter().map(|&c| header(c)).collect(),
        time_column: header(t_col),
        symbol_column: header(s_col),
        rows: Vec::new(),
    };
    let mut findings = table.findings.clone();
    let walked = each_row(name, &table, |row, cells| {
        let symbol = match &cells[s_col] {
            Cell::Text(t) if !t.trim().is_empty() => Some(t.trim().to_owned()),
            _ => None,
        };
        let mut located = |col: usize, class: IssueClass, message: String| {
            let mut f = row_finding(name, row, Some(&header(col)), class, message);
            f.symbol.clone_from(&symbol);
            findings.push(f);
        };
        let when = time(&cells[t_col], second.map(|c| &cells[c]), time_unit, &header(t_col))
            .map_err(|m| located(t_col, IssueClass::BadTime, m))
            .ok();
        if symbol.is_none() {
            located(s_col, IssueClass::BadRow, "no symbol".to_owned());
        }
        let mut weights = Vec::with_capacity(weight_cols.len());
        for &c in &weight_cols {
            weights.push(match &cells[c] {
                Cell::Null => None,
                Cell::Text(t) if t.trim().is_empty() => None,
                cell => decimal(cell).map_err(|(class, m)| located(c, class, m)).ok(),
            });
        }
        if let (Some(time), Some(symbol)) = (when, symbol.clone()) {
            out.rows.push(WeightRow { row, time, symbol, weights });
        }
    });
    findings.extend(walked);
    if !findings.is_empty() {
        return Err(LoadReport { file: name.to_owned(), rows: out.rows.len(), findings, ..LoadReport::default() });
    }
    if out.rows.is_empty() {
        return Err(refuse(file_finding(name, None, IssueClass::EmptyFile, "no weight rows".to_owned())));
    }
    Ok(out)
}

/// Calls `f(row, cells)` for every row of `table` in file order; returns the findings of the lines of a plain
/// CSV that are not rows.
fn each_row<'a>(name: &str, table: &Table<'a>, mut f: impl FnMut(usize, &[Cell<'a>])) -> Vec<Finding> {
    let mut buf = Vec::with_capacity(table.headers.len());
    match &table.storage {
        Storage::Plain(plain) => {
            let mut findings = Vec::new();
            for c in 0..plain.chunks.len() {
                let (walked, _) = plain.walk(name, c, &mut buf, |k, cells| {
                    f(k + 2, cells);
                    true
                });
                findings.extend(walked);
            }
            findings
        }
        _ => {
            for (i, &row) in table.rows.iter().enumerate() {
                f(row, table.row_cells(i, &mut buf));
            }
            Vec::new()
        }
    }
}
