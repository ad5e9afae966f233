//! A universe: the series of N symbols on one calendar, the union of their bar times (ENVIRONMENT.md,
//! "Portfolios"). Each symbol keeps its own bars in Decimal; at a time of the calendar where it has no bar
//! it does not trade (no fill is ever made up), and it is worth its last close; before its first bar it is
//! worth nothing and cannot trade.

use chrono::{DateTime, FixedOffset};
use rust_decimal::Decimal;

use super::{Dataset, MarketBar, Series};
use crate::Error;

/// Marks a calendar time at which a symbol has no bar.
const NO_BAR: u32 = u32::MAX;

/// N symbols on the union of their times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Universe {
    /// Where the data came from (the dataset's source).
    pub source: String,
    /// True for generated data.
    pub synthetic: bool,
    /// The calendar: every time at which some symbol has a bar, increasing (instants compared in UTC).
    pub times: Vec<DateTime<FixedOffset>>,
    /// The symbols' series, in the order chosen (or the dataset's).
    pub series: Vec<Series>,
    /// Time-major `times x symbols`: the index of symbol s's bar at time t in its series, or [`NO_BAR`].
    index: Vec<u32>,
}

impl Universe {
    /// The universe of `symbols` of `dataset` (any case, in the order given; `None` or empty: every series
    /// in the dataset's order). An unknown or repeated symbol is refused, naming it.
    pub fn new(dataset: Dataset, symbols: Option<&[String]>) -> Result<Self, Error> {
        let Dataset { source, synthetic, series: all } = dataset;
        let series: Vec<Series> = match symbols.filter(|s| !s.is_empty()) {
            None => all,
            Some(names) => {
                let mut chosen: Vec<Series> = Vec::with_capacity(names.len());
                for name in names {
                    if chosen.iter().any(|s| s.symbol.eq_ignore_ascii_case(name)) {
                        return Err(Error::config("--symbols", format!("`{name}` is listed twice")));
                    }
                    let found = all.iter().find(|s| s.symbol.eq_ignore_ascii_case(name)).ok_or_else(|| {
                        let known: Vec<&str> = all.iter().take(10).map(|s| s.symbol.as_str()).collect();
                        Error::Data(format!("{source}: no symbol `{name}` (symbols: {})", known.join(", ")))
                    })?;
                    chosen.push(found.clone());
                }
                chosen
            }
        };
        if let Some(empty) = series.iter().find(|s| s.bars.is_empty()) {
            return Err(Error::Data(format!("{source}: symbol `{}` has no bars", empty.symbol)));
        }
        if let Some((s, w)) =
            series.iter().find_map(|s| s.bars.windows(2).find(|w| w[0].time >= w[1].time).map(|w| (s, w)))
        {
            let (a, b) = (w[0].time.to_rfc3339(), w[1].time.to_rfc3339());
            return Err(Error::Data(format!(
                "{source}: symbol `{}`: bar at {b} after {a} (times must increase)",
                s.symbol
            )));
        }
        if series.is_empty() {
            return Err(Error::Data(format!("{source}: no symbols")));
        }
        let mut times: Vec<DateTime<FixedOffset>> = series.iter().flat_map(|s| s.bars.iter().map(|b| b.time)).collect();
        times.sort_unstable();
        times.dedup();
        let n = series.len();
        let mut index = vec![NO_BAR; times.len() * n];
        for (s, one) in series.iter().enumerate() {
            // Both are increasing: one walk of the calendar places every bar.
            let mut t = 0;
            for (i, bar) in one.bars.iter().enumerate() {
                while times[t] < bar.time {
                    t += 1;
                }
                index[t * n + s] = i as u32;
            }
        }
        Ok(Self { source, synthetic, times, series, index })
    }

    /// Times on the calendar (T).
    pub fn n_times(&self) -> usize {
        self.times.len()
    }

    /// Symbols (N).
    pub fn n_symbols(&self) -> usize {
        self.series.len()
    }

    /// The symbols' names, in order.
    pub fn symbols(&self) -> Vec<&str> {
        self.series.iter().map(|s| s.symbol.as_str()).collect()
    }

    /// The index of `symbol` (any case).
    pub fn symbol_index(&self, symbol: &str) -> Option<usize> {
        self.series.iter().position(|s| s.symbol.eq_ignore_ascii_case(symbol))
    }

    /// The index of `time` on the calendar.
    pub fn time_index(&self, time: &DateTime<FixedOffset>) -> Option<usize> {
        self.times.binary_search(time).ok()
    }

    /// The index in symbol `s`'s own bars of its bar at time `t`, if it has one.
    pub fn bar_index(&self, t: usize, s: usize) -> Option<usize> {
        match self.index[t * self.series.len() + s] {
            NO_BAR => None,
            i => Some(i as usize),
        }
    }

    /// Symbol `s`'s bar at time `t`, if it has one.
    pub fn bar(&self, t: usize, s: usize) -> Option<&MarketBar> {
        self.bar_index(t, s).map(|i| &self.series[s].bars[i])
    }

    /// For every time and symbol (time-major), the index of the symbol's bar at or before that time in its
    /// own bars (`None` before its first bar): the bar that values it there.
    pub fn last_bar_indices(&self) -> Vec<Option<usize>> {
        let n = self.series.len();
        let mut out = vec![None; self.index.len()];
        for t in 0..self.times.len() {
            for s in 0..n {
                out[t * n + s] = self.bar_index(t, s).or(if t > 0 { out[(t - 1) * n + s] } else { None });
            }
        }
        out
    }

    /// Symbol `s`'s bar at time `t` or, without one, its last bar before `t` (`None` before its first bar):
    /// the bar whose close values it at `t`.
    pub fn last_bar(&self, t: usize, s: usize) -> Option<&MarketBar> {
        (0..=t).rev().find_map(|u| self.bar(u, s))
    }

    /// Symbol `s`'s last close at or before time `t` (`None` before its first bar): what it is worth at `t`.
    pub fn carried_close(&self, t: usize, s: usize) -> Option<Decimal> {
        self.last_bar(t, s).map(|b| b.close)
    }

    /// The calendar index of symbol `s`'s first bar.
    pub fn first_time(&self, s: usize) -> usize {
        (0..self.times.len()).find(|&t| self.bar(t, s).is_some()).unwrap_or(self.times.len())
    }

    /// Calendar times between symbol `s`'s first and last bar at which it has no bar (a halt, a gap in the
    /// file): it does not trade there and is worth its last close.
    pub fn missing_inside(&self, s: usize) -> usize {
        let with: Vec<usize> = (0..self.times.len()).filter(|&t| self.bar(t, s).is_some()).collect();
        match (with.first(), with.last()) {
            (Some(&a), Some(&b)) => b - a + 1 - with.len(),
            _ => 0,
        }
    }

    /// How outputs name this data: the source, marked SYNTHETIC when generated.
    pub fn label(&self) -> String {
        if self.synthetic { format!("SYNTHETIC ({})", self.source) } else { self.source.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(symbol: &str, days: &[u32], closes: &[i64]) -> Series {
        let bars = days
            .iter()
            .zip(closes)
            .map(|(&d, &c)| {
                let p = Decimal::from(c);
                let time = DateTime::parse_from_rfc3339(&format!("2020-01-{d:02}T00:00:00+00:00")).unwrap();
                MarketBar { time, open: p, high: p, low: p, close: p, volume: Decimal::ONE }
            })
            .collect();
        Series { symbol: symbol.to_owned(), bars }
    }

    /// Symbol B starts on day 3 and misses day 5: the calendar is days 1..=6; B has no bar on days 1, 2
    /// and 5, is worth nothing before day 3 and its day-4 close (40) on day 5.
    #[test]
    fn the_calendar_is_the_union_and_a_missing_bar_carries_the_close() {
        let a = series("A", &[1, 2, 3, 4, 5, 6], &[10, 11, 12, 13, 14, 15]);
        let b = series("B", &[3, 4, 6], &[30, 40, 60]);
        let dataset = Dataset { source: "t".to_owned(), synthetic: false, series: vec![a, b] };
        let u = Universe::new(dataset, None).unwrap();
        assert_eq!((u.n_times(), u.n_symbols()), (6, 2));
        let present: Vec<bool> = (0..6).map(|t| u.bar(t, 1).is_some()).collect();
        assert_eq!(present, [false, false, true, true, false, true]);
        let worth: Vec<Option<Decimal>> = (0..6).map(|t| u.carried_close(t, 1)).collect();
        let d = |x: i64| Some(Decimal::from(x));
        assert_eq!(worth, [None, None, d(30), d(40), d(40), d(60)]);
        assert_eq!((u.first_time(1), u.missing_inside(1), u.missing_inside(0)), (2, 1, 0));
    }

    /// `--symbols` picks and orders (any case); an unknown or repeated name is refused, naming it.
    #[test]
    fn symbols_are_chosen_by_name() {
        let dataset = Dataset {
            source: "t".to_owned(),
            synthetic: false,
            series: vec![series("A", &[1, 2], &[1, 2]), series("B", &[1, 2], &[3, 4]), series("C", &[2, 3], &[5, 6])],
        };
        let pick = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
            Universe::new(dataset.clone(), Some(&names))
        };
        let u = pick(&["c", "A"]).unwrap();
        assert_eq!((u.symbols(), u.n_times()), (vec!["C", "A"], 3));
        let err = pick(&["A", "Z"]).unwrap_err().to_string();
        assert!(err.contains("no symbol `Z`") && err.contains("A, B, C"), "{err}");
        let err = pick(&["A", "a"]).unwrap_err().to_string();
        assert!(err.contains("--symbols") && err.contains("`a` is listed twice"), "{err}");
    }
}
