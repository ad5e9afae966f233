//! CSV: a file without quote characters is split in place by threads ([`PlainCsv`]), any other through
//! the `csv` crate's reader; both give the same rows, row numbers and findings.

use std::borrow::Cow;

use rayon::prelude::*;

use super::{Cell, Storage, Table, file_error, row_finding};
use crate::data::validate::{Finding, IssueClass, LoadReport};

pub(super) fn read_csv<'a>(name: &str, bytes: &'a [u8]) -> Result<Table<'a>, LoadReport> {
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
pub(super) struct PlainCsv<'a> {
    delimiter: u8,
    /// Fields in the header (what every row has).
    pub(super) width: usize,
    /// Each chunk's bytes and the index of its first line in the body.
    pub(super) chunks: Vec<(&'a [u8], usize)>,
    /// Lines in the body (a last line without a newline included).
    pub(super) lines: usize,
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
    pub(super) fn walk(
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
    pub(super) fn survey(&self, name: &str) -> (Vec<Finding>, usize) {
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
    pub(super) fn first_cell(&self, name: &str) -> Option<Cell<'a>> {
        self.first_row_cell(name, 0).map(|(_, cell)| cell)
    }

    /// The first row's number (its line) and its cell in column `col`, when there is such a row.
    pub(super) fn first_row_cell(&self, name: &str, col: usize) -> Option<(usize, Cell<'a>)> {
        let (mut buf, mut found) = (Vec::new(), None);
        for c in 0..self.chunks.len() {
            self.walk(name, c, &mut buf, |k, cells| {
                found = cells.get(col).cloned().map(|cell| (k + 2, cell));
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
/// vectors before any is parsed ([`build`](super::build)).
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
