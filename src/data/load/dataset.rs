//! From a table to a dataset: the columns found by their headers, every row parsed by the row rules
//! (threads for the rows, outcomes taken in row order), then the kept bars grouped into series with their
//! time order checked, and the load report of it all.

use std::collections::HashMap;

use rayon::prelude::*;

use super::rows::{Notes, RowRules, integer_text, kept, parse_plain, time};
use super::{Cell, Storage, SymbolChoice, Table, file_finding, row_finding};
use crate::data::columns::ColumnMap;
use crate::data::time::{TimeUnit, integer_time_refusal};
use crate::data::validate::{CleanPolicy, Finding, IssueClass, LoadReport, Severity};
use crate::data::{Dataset, MarketBar, Series};

/// [`build_symbol`] of every symbol.
#[cfg(test)]
pub(super) fn build(
    name: &str,
    table: Table<'_>,
    default_symbol: &str,
    policy: &CleanPolicy,
    time_unit: Option<TimeUnit>,
) -> Result<(Dataset, LoadReport), LoadReport> {
    build_symbol(name, table, default_symbol, policy, time_unit, SymbolChoice::All)
}

/// The dataset of `table`, or of the chosen `symbols`' rows alone when the table has a symbol column (any
/// case, as [`Dataset::select`] matches): the other symbols' rows are then neither checked nor kept.
pub(super) fn build_symbol(
    name: &str,
    mut table: Table<'_>,
    default_symbol: &str,
    policy: &CleanPolicy,
    time_unit: Option<TimeUnit>,
    symbols: SymbolChoice<'_>,
) -> Result<(Dataset, LoadReport), LoadReport> {
    let mut report = LoadReport {
        file: name.to_owned(),
        rows: table.rows.len(),
        findings: std::mem::take(&mut table.findings),
        ..LoadReport::default()
    };
    let (mut map, date_time_pair) = ColumnMap::from_headers(&table.headers);
    if map.time.is_none()
        && let Some(note) = pandas_index(name, &table)
    {
        map.time = Some(0);
        report.notes.push(note);
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
    if time_unit.is_none()
        && date_time_pair.is_none()
        && let Some(finding) = integer_time_column(name, &table, t_col)
    {
        if let Storage::Plain(plain) = &table.storage {
            (report.findings, report.rows) = plain.survey(name);
        }
        report.findings.push(finding);
        return Err(report);
    }
    let rules = RowRules { name, headers: &table.headers, map: &map, date_time_pair, policy, time_unit, columns };
    let (bars, mut notes) = parse_rows(&table, &rules, &mut report);
    if symbols != SymbolChoice::All && map.symbol.is_some() {
        only_symbols(name, symbols, &mut notes, &mut report)?;
    }
    if report.rows == 0 {
        report.findings.push(file_finding(name, None, IssueClass::EmptyFile, "no data rows".to_owned()));
        return Err(report);
    }
    let mut any_gone = false;
    for o in notes.iter().flatten() {
        report.dropped += usize::from(o.dropped);
        report.repaired += usize::from(o.repaired);
        any_gone |= o.dropped || o.skipped;
    }
    let is_kept = |i: usize| kept(notes[i].as_deref());
    // One symbol whose times increase (the common case): the kept bars, compacted in place, are the series.
    let mut previous = None;
    let in_order = map.symbol.is_none()
        && if any_gone {
            bars.iter().enumerate().all(|(i, b)| !is_kept(i) || previous.replace(b.time).is_none_or(|p| p < b.time))
        } else {
            bars.par_windows(2).all(|w| w[0].time < w[1].time)
        };
    let (series, ordering) = if in_order {
        let mut bars = bars;
        if any_gone {
            let mut i = 0;
            bars.retain(|_| {
                i += 1;
                is_kept(i - 1)
            });
        }
        (vec![Series { symbol: default_symbol.to_owned(), bars }], Vec::new())
    } else {
        by_symbol(&rules, &table, bars, &notes, default_symbol, &mut report.dropped)
    };
    // The rows' own findings in row order, then the ordering findings symbol by symbol.
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

/// Sets aside every row of a symbol not `chosen` (its findings and its bar), or refuses a table with no
/// row of any chosen symbol.
fn only_symbols(
    name: &str,
    chosen: SymbolChoice<'_>,
    notes: &mut Notes<'_>,
    report: &mut LoadReport,
) -> Result<(), LoadReport> {
    let mut any = false;
    let mut others: Vec<&str> = Vec::new();
    for note in notes.iter_mut().flatten() {
        match note.symbol {
            Some(s) if !chosen.contains(s) => {
                if others.len() < 10 && !others.contains(&s) {
                    others.push(s);
                }
                note.findings.clear();
                note.skipped = true;
                note.dropped = false;
                note.repaired = false;
            }
            _ => any = true,
        }
    }
    if any {
        return Ok(());
    }
    let names = chosen.names().iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
    let what = if chosen.names().len() == 1 { "symbol" } else { "symbols" };
    let message = format!("no rows of {what} {names} (symbols: {})", others.join(", "));
    let mut refused = std::mem::take(report);
    refused.findings = vec![file_finding(name, None, IssueClass::EmptyFile, message)];
    Err(refused)
}

/// The refusal of an integer time column read without a unit, judged by its first row (every row would
/// be refused alike): one finding naming the file, that row and the column, instead of one per row.
fn integer_time_column(name: &str, table: &Table<'_>, t_col: usize) -> Option<Finding> {
    let (row, cell) = match &table.storage {
        Storage::Plain(plain) => plain.first_row_cell(name, t_col)?,
        _ => (*table.rows.first()?, table.row_cells(0, &mut Vec::new()).get(t_col)?.clone()),
    };
    let n = match &cell {
        Cell::Int(n) => *n,
        Cell::Text(t) => integer_text(t)?,
        _ => return None,
    };
    let header = table.headers[t_col].trim();
    Some(row_finding(name, row, Some(header), IssueClass::BadTime, integer_time_refusal(header, n)))
}

/// pandas' `to_csv()` writes the index (a DatetimeIndex) first with an empty header (`Unnamed: 0` once
/// read back and written again): that column is the time when its first value is a written date or time
/// that parses (a bare integer is a RangeIndex, not epoch seconds). The report's note saying so when it
/// is, `None` otherwise.
fn pandas_index(name: &str, table: &Table<'_>) -> Option<String> {
    let dated = |c: &Cell| match c {
        Cell::Text(t) => integer_text(t).is_none() && time(c, None, None, "").is_ok(),
        Cell::Time(_) => true,
        _ => false,
    };
    let first_cell = || match &table.storage {
        Storage::Plain(plain) => plain.first_cell(name),
        _ => table.rows.first().and_then(|_| table.row_cells(0, &mut Vec::new()).first().cloned()),
    };
    let first = table.headers.first()?;
    let index_header = first.trim().trim_matches('"').is_empty() || first.trim().eq_ignore_ascii_case("unnamed: 0");
    (index_header && first_cell().is_some_and(|c| dated(&c))).then(|| {
        format!("the first column (header `{}`, pandas' index) holds timestamps: it is the time column", first.trim())
    })
}

/// Every row's bar (or `no_bar()`) written straight into its place in one vector, its note beside it, so
/// that the outcomes can be taken in row order and the findings and the series do not depend on the
/// threads. A plain CSV's lines that are not rows add their findings and set the report's count of rows.
fn parse_rows<'s>(table: &'s Table<'_>, rules: &RowRules<'_>, report: &mut LoadReport) -> (Vec<MarketBar>, Notes<'s>) {
    let map = rules.map;
    let needed: Vec<usize> =
        rules.columns.iter().copied().chain(map.volume).chain(rules.date_time_pair.map(|(_, t)| t)).collect();
    match &table.storage {
        Storage::Plain(plain) => {
            let (bars, notes, findings, rows) = parse_plain(plain, rules);
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
    }
}

/// The kept bars by symbol, in order of first appearance, and each series' ordering findings: a kept bar
/// is checked against its symbol's last kept bar (a duplicate or earlier time is a finding, and the row is
/// dropped, counted in `dropped`, when the policy drops its class).
fn by_symbol(
    rules: &RowRules<'_>,
    table: &Table<'_>,
    bars: Vec<MarketBar>,
    notes: &Notes<'_>,
    default_symbol: &str,
    dropped: &mut usize,
) -> (Vec<Series>, Vec<Vec<Finding>>) {
    let (name, policy, t_col) = (rules.name, rules.policy, rules.columns[0]);
    let row_of = |i: usize| if let Storage::Plain(_) = table.storage { i + 2 } else { table.rows[i] };
    let mut ordering: Vec<Vec<Finding>> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    // Rows of one symbol usually come together: the last group is tried before the index.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut last: Option<(Option<&str>, usize)> = None;
    for (i, bar) in bars.into_iter().enumerate() {
        if !kept(notes[i].as_deref()) {
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
        let message = format!("{} after {prev}", bar.time.to_rfc3339());
        let mut f = row_finding(name, row_of(i), Some(&table.headers[t_col]), class, message);
        f.symbol = Some(series[g].symbol.clone());
        if policy.drop.contains(&class) {
            f.severity = Severity::Warning;
            f.message += " (row dropped)";
            *dropped += 1;
        }
        ordering[g].push(f);
    }
    (series, ordering)
}
