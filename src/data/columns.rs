//! Column mapping by header name, case-insensitive, with the aliases vendors use.

/// A column the loader understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Column {
    Time,
    Open,
    High,
    Low,
    Close,
    Volume,
    Symbol,
}

impl Column {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Time => "time",
            Self::Open => "open",
            Self::High => "high",
            Self::Low => "low",
            Self::Close => "close",
            Self::Volume => "volume",
            Self::Symbol => "symbol",
        }
    }
}

/// The column a header names, if any (`Adj Close` and other extras are ignored).
fn column_of(header: &str) -> Option<Column> {
    let h: String = header.trim().trim_matches('"').to_ascii_lowercase().replace(['_', '-'], " ");
    let h = h.trim_start_matches('<').trim_end_matches('>');
    Some(match h {
        "date" | "datetime" | "date time" | "time" | "timestamp" | "gmt time" | "local time" | "dt" => Column::Time,
        "open" | "o" => Column::Open,
        "high" | "h" => Column::High,
        "low" | "l" => Column::Low,
        "close" | "c" | "last" | "price" => Column::Close,
        "volume" | "vol" | "v" => Column::Volume,
        "symbol" | "ticker" | "instrument" | "asset" => Column::Symbol,
        _ => return None,
    })
}

/// Where each column sits in a header row.
#[derive(Clone, Debug, Default)]
pub(crate) struct ColumnMap {
    pub(crate) time: Option<usize>,
    pub(crate) open: Option<usize>,
    pub(crate) high: Option<usize>,
    pub(crate) low: Option<usize>,
    pub(crate) close: Option<usize>,
    pub(crate) volume: Option<usize>,
    pub(crate) symbol: Option<usize>,
}

impl ColumnMap {
    /// Maps a header row. A file with both `Date` and `Time` columns uses the pair (joined with a space).
    pub(crate) fn from_headers(headers: &[String]) -> (Self, Option<(usize, usize)>) {
        let mut map = Self::default();
        let mut date_and_time = None;
        for (i, h) in headers.iter().enumerate() {
            let Some(col) = column_of(h) else { continue };
            let slot = match col {
                Column::Time => &mut map.time,
                Column::Open => &mut map.open,
                Column::High => &mut map.high,
                Column::Low => &mut map.low,
                Column::Close => &mut map.close,
                Column::Volume => &mut map.volume,
                Column::Symbol => &mut map.symbol,
            };
            match slot {
                None => *slot = Some(i),
                Some(first) if col == Column::Time => date_and_time = Some((*first, i)),
                Some(_) => {}
            }
        }
        (map, date_and_time)
    }

    /// The required columns that are missing.
    pub(crate) fn missing(&self) -> Vec<Column> {
        [(Column::Time, self.time), (Column::Open, self.open), (Column::High, self.high), (Column::Low, self.low)]
            .into_iter()
            .chain([(Column::Close, self.close)])
            .filter(|(_, at)| at.is_none())
            .map(|(c, _)| c)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(h: &[&str]) -> Vec<String> {
        h.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn aliases_in_any_case_and_order() {
        let (m, _) = ColumnMap::from_headers(&headers(&[
            "Ticker",
            "Date",
            "Open",
            "High",
            "Low",
            "Close",
            "Volume",
            "Adj Close",
        ]));
        assert_eq!((m.symbol, m.time, m.open, m.close, m.volume), (Some(0), Some(1), Some(2), Some(5), Some(6)));
        let (m, _) = ColumnMap::from_headers(&headers(&["DATETIME", "CLOSE", "LOW", "HIGH", "OPEN"]));
        assert_eq!(
            (m.time, m.open, m.high, m.low, m.close, m.volume),
            (Some(0), Some(4), Some(3), Some(2), Some(1), None)
        );
        assert!(m.missing().is_empty());
        let (m, _) = ColumnMap::from_headers(&headers(&["when", "open", "close"]));
        assert_eq!(m.missing(), [Column::Time, Column::High, Column::Low]);
        let (_, pair) = ColumnMap::from_headers(&headers(&["Date", "Time", "Open", "High", "Low", "Close"]));
        assert_eq!(pair, Some((0, 1)));
    }
}
