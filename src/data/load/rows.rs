//! One row's rules: its cells parsed into a bar, checked, and repaired or dropped as the policy says, with
//! what it gave besides its bar kept in a note; rows parse on their own, so threads share them.

use std::borrow::Cow;

use chrono::{DateTime, FixedOffset};
use rayon::prelude::*;
use rust_decimal::Decimal;

use super::csv::PlainCsv;
use super::decimal::decimal;
use super::{Cell, row_finding};
use crate::data::MarketBar;
use crate::data::columns::ColumnMap;
use crate::data::time::{TimeUnit, integer_time, integer_time_refusal, parse_time};
use crate::data::validate::{CleanPolicy, Finding, IssueClass, Severity, check_bar, plainly_valid, repair};

/// A time cell (or a date cell and a time cell) of column `column`. An integer (an integer cell, or text
/// that is only an integer) is read as `unit` says ([`integer_time`]), and refused without one: `20090102`
/// could be a date or an epoch count in any unit ([`integer_time_refusal`]), the rule Python's loader
/// applies to a DataFrame's integer column too.
pub(super) fn time(
    cell: &Cell<'_>,
    second: Option<&Cell<'_>>,
    unit: Option<TimeUnit>,
    column: &str,
) -> Result<DateTime<FixedOffset>, String> {
    let integer = |n: i64| match unit {
        Some(unit) => integer_time(n, unit),
        None => Err(integer_time_refusal(column, n)),
    };
    match (cell, second) {
        (Cell::Text(d), Some(Cell::Text(t))) => parse_time(&format!("{} {}", d.trim(), t.trim())),
        (Cell::Time(t), _) => Ok(*t),
        (Cell::Int(n), _) => integer(*n),
        (Cell::Text(s), _) => match integer_text(s) {
            Some(n) => integer(n),
            None => parse_time(s),
        },
        (other, _) => Err(format!("{other:?} is not a timestamp")),
    }
}

/// The integer a time cell's text is, when it is only one (an optional sign, then digits).
pub(super) fn integer_text(text: &str) -> Option<i64> {
    let s = text.trim();
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// What a row gave besides its bar, kept only for rows with something to say: its findings, whether the
/// policy dropped or repaired it, its symbol (`None`: the file's default), or that its line is not a row
/// (a blank or bad line of a plain CSV). Most rows have none, and their note is `None` (a null pointer
/// beside the bar, where a note inline would double the rows' memory).
pub(super) struct RowNote<'t> {
    pub(super) findings: Vec<Finding>,
    pub(super) dropped: bool,
    pub(super) repaired: bool,
    pub(super) symbol: Option<&'t str>,
    pub(super) skipped: bool,
}

/// Each row's note, beside the rows' bars.
pub(super) type Notes<'t> = Vec<Option<Box<RowNote<'t>>>>;

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
pub(super) struct RowRules<'r> {
    pub(super) name: &'r str,
    pub(super) headers: &'r [String],
    pub(super) map: &'r ColumnMap,
    pub(super) date_time_pair: Option<(usize, usize)>,
    pub(super) policy: &'r CleanPolicy,
    /// What an integer time counts (`None`: integer times are refused).
    pub(super) time_unit: Option<TimeUnit>,
    /// Time, open, high, low and close columns.
    pub(super) columns: [usize; 5],
}

impl RowRules<'_> {
    /// Row `row`'s bar (`no_bar()` when it gives none or is dropped) and its note, from its cells. Rows
    /// parse and check on their own, so any number of threads can do this, and their outcomes are then
    /// taken in row order ([`build`](super::build)).
    pub(super) fn parse<'t>(
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
        let t = time(&cells[t_col], second, self.time_unit, header(t_col))
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
        // A file with a symbol column names every row's symbol: a row without one belongs to no series (a
        // warning only when the policy drops the row for another finding).
        let no_symbol = map.symbol.filter(|_| symbol.is_none()).map(|col| {
            let message = "no symbol: the row belongs to no series".to_owned();
            findings.push(row_finding(name, row, Some(header(col)), IssueClass::BadRow, message));
            bar = None;
            findings.len() - 1
        });
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
        if let Some(i) = no_symbol
            && findings[i].severity == Severity::Error
            && findings.iter().any(|f| policy.drop.contains(&f.class) && f.severity == Severity::Warning)
        {
            findings[i].severity = Severity::Warning;
            findings[i].message += " (row dropped)";
        }
        let dropped = !keep;
        if let Some(symbol) = symbol {
            findings.iter_mut().for_each(|f| f.symbol = Some(symbol.to_owned()));
        }
        let note = (!findings.is_empty() || dropped || repaired || symbol.is_some())
            .then(|| Box::new(RowNote { findings, dropped, repaired, symbol, skipped: false }));
        (bar.filter(|_| keep).unwrap_or_else(no_bar), note)
    }
}

/// A plain CSV's rows parsed by chunk in parallel, each line's bar and note written into its own place of
/// vectors as long as the body's lines; lines that are not rows get a skipped note and their findings are
/// returned in line order, with the number of rows.
pub(super) fn parse_plain<'a>(
    plain: &PlainCsv<'a>,
    rules: &RowRules<'_>,
) -> (Vec<MarketBar>, Notes<'a>, Vec<Finding>, usize) {
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

/// Whether a row with this note gives a bar to the series (neither dropped nor a line that is not a row).
pub(super) fn kept(note: Option<&RowNote<'_>>) -> bool {
    note.is_none_or(|o| !o.dropped && !o.skipped)
}
