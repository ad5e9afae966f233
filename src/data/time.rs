//! Timestamps in the formats vendors write: ISO 8601 with or without offset (`T` or space), `YYYYMMDD`,
//! `DD.MM.YYYY HH:MM:SS(.fff)`, `M/D/YYYY( HH:MM(:SS))`, `YYYY-MM-DD`, and epoch seconds or milliseconds.
//! A time without an offset is read as UTC. An integer time (a DataFrame's int64 dates, a Parquet INT64
//! column, a file's bare `20090102`) says nothing about its unit, so the loaders read it only with a
//! [`TimeUnit`] ([`integer_time`]; the CLI's `--time-unit`, Python's `time_unit=`) and never hand it to
//! [`parse_time`], whose epoch guess is left to callers that know their text is an epoch.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// Epoch values at or above this are milliseconds (1e11 s is the year 5138).
const EPOCH_MS_THRESHOLD: i64 = 100_000_000_000;

/// Parses one timestamp, or says which formats were tried.
pub fn parse_time(text: &str) -> Result<DateTime<FixedOffset>, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty timestamp".to_owned());
    }
    if let Some(t) = iso_naive(s) {
        return Ok(utc(t));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t);
    }
    for fmt in ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%:z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%dT%H:%M:%S%.f%z"] {
        if let Ok(t) = DateTime::parse_from_str(s, fmt) {
            return Ok(t);
        }
    }
    let naive_formats = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
        "%d.%m.%Y %H:%M:%S%.f",
        "%d.%m.%Y %H:%M",
        "%m/%d/%Y %H:%M:%S",
        "%m/%d/%Y %H:%M",
        "%Y%m%d %H:%M:%S",
        "%Y%m%d %H%M%S",
    ];
    for fmt in naive_formats {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Ok(utc(t));
        }
    }
    if s.len() == 8
        && s.bytes().all(|b| b.is_ascii_digit())
        && let Ok(d) = NaiveDate::parse_from_str(s, "%Y%m%d")
    {
        return Ok(utc(d.and_hms_opt(0, 0, 0).expect("midnight exists")));
    }
    for fmt in ["%Y-%m-%d", "%m/%d/%Y", "%d.%m.%Y"] {
        if let Ok(d) = NaiveDate::parse_from_str(s, fmt) {
            return Ok(utc(d.and_hms_opt(0, 0, 0).expect("midnight exists")));
        }
    }
    if let Ok(n) = s.parse::<i64>() {
        return epoch(n).ok_or_else(|| format!("epoch value {n} is out of range"));
    }
    if let Ok(x) = s.parse::<f64>()
        && x.is_finite()
        && x.fract() == 0.0
    {
        return epoch(x as i64).ok_or_else(|| format!("epoch value {s} is out of range"));
    }
    Err(format!("`{s}` is not a timestamp (tried ISO 8601, YYYYMMDD, DD.MM.YYYY HH:MM:SS.fff, M/D/YYYY, epoch s/ms)"))
}

/// The fast path of the commonest form, `YYYY-MM-DD[T ]HH:MM[:SS[.fff...]]` without an offset, read byte by
/// byte (the general formats below re-parse a format string per call); `None` for anything else, which
/// then goes through the full list.
fn iso_naive(s: &str) -> Option<NaiveDateTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        d.iter().try_fold(0u32, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0')))
    };
    if b.len() < 16 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') || b[13] != b':' {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(i32::try_from(num(0..4)?).ok()?, num(5..7)?, num(8..10)?)?;
    let (hour, minute) = (num(11..13)?, num(14..16)?);
    let (second, nanos) = match b.len() {
        16 => (0, 0),
        19 if b[16] == b':' => (num(17..19)?, 0),
        n if n > 20 && n <= 29 && b[16] == b':' && b[19] == b'.' => {
            let digits = n - 20;
            (num(17..19)?, num(20..n)? * 10u32.pow(9 - digits as u32))
        }
        _ => return None,
    };
    date.and_hms_nano_opt(hour, minute, second, nanos)
}

fn utc(t: NaiveDateTime) -> DateTime<FixedOffset> {
    Utc.from_utc_datetime(&t).fixed_offset()
}

/// Epoch seconds, or milliseconds when the value is too large to be seconds.
pub fn epoch(n: i64) -> Option<DateTime<FixedOffset>> {
    let t =
        if n.abs() >= EPOCH_MS_THRESHOLD { DateTime::from_timestamp_millis(n) } else { DateTime::from_timestamp(n, 0) };
    t.map(|t| t.fixed_offset())
}

/// What the integers of a time column count: calendar dates written as `YYYYMMDD`, or time since the Unix
/// epoch (UTC) in seconds, milliseconds, microseconds or nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// `20090102`: 2 January 2009, midnight UTC.
    YearMonthDay,
    /// Seconds since 1970-01-01 UTC.
    Seconds,
    /// Milliseconds since 1970-01-01 UTC.
    Millis,
    /// Microseconds since 1970-01-01 UTC.
    Micros,
    /// Nanoseconds since 1970-01-01 UTC.
    Nanos,
}

impl TimeUnit {
    /// Every unit, as it is spelled (`time_unit=` in Python).
    pub const NAMES: [&'static str; 5] = ["YYYYMMDD", "s", "ms", "us", "ns"];

    /// The unit's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::YearMonthDay => "YYYYMMDD",
            Self::Seconds => "s",
            Self::Millis => "ms",
            Self::Micros => "us",
            Self::Nanos => "ns",
        }
    }
}

impl std::str::FromStr for TimeUnit {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "YYYYMMDD" => Self::YearMonthDay,
            "s" => Self::Seconds,
            "ms" => Self::Millis,
            "us" => Self::Micros,
            "ns" => Self::Nanos,
            other => return Err(format!("`{other}` is not a time unit (one of {})", Self::NAMES.join(", "))),
        })
    }
}

/// Why an integer time column without a unit is refused (`column`: its header, `example`: its first value):
/// `20090102` read as an epoch count is a date in 1970, with no error to show it.
pub fn integer_time_refusal(column: &str, example: i64) -> String {
    format!(
        "column `{column}` holds integers ({example}, ...), which could be dates or epoch counts in any unit; \
         say which with the time unit (--time-unit in the CLI, time_unit= in Python: {})",
        TimeUnit::NAMES.join(", ")
    )
}

/// One integer time read as `unit` says, or why it is not a time.
pub fn integer_time(n: i64, unit: TimeUnit) -> Result<DateTime<FixedOffset>, String> {
    let t = match unit {
        TimeUnit::YearMonthDay => {
            let date = u32::try_from(n).ok().and_then(|n| {
                let year = i32::try_from(n / 10_000).ok()?;
                NaiveDate::from_ymd_opt(year, n / 100 % 100, n % 100)
            });
            date.map(|d| Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).expect("midnight exists")))
        }
        TimeUnit::Seconds => DateTime::from_timestamp(n, 0),
        TimeUnit::Millis => DateTime::from_timestamp_millis(n),
        TimeUnit::Micros => DateTime::from_timestamp_micros(n),
        TimeUnit::Nanos => Some(DateTime::from_timestamp_nanos(n)),
    };
    t.map(|t| t.fixed_offset()).ok_or_else(|| match unit {
        TimeUnit::YearMonthDay => format!("{n} is not a date written YYYYMMDD"),
        _ => format!("{n} {} since 1970 is out of range", unit.name()),
    })
}

/// Bars per year from the timestamps: 252 trading days times the median number of bars per calendar day.
pub fn infer_bars_per_year(times: &[chrono::DateTime<chrono::FixedOffset>]) -> f64 {
    let mut per_day: Vec<usize> = Vec::new();
    let mut last_day = None;
    for t in times {
        let day = t.date_naive();
        if last_day == Some(day) {
            if let Some(n) = per_day.last_mut() {
                *n += 1;
            }
        } else {
            per_day.push(1);
            last_day = Some(day);
        }
    }
    per_day.sort_unstable();
    252.0 * per_day.get(per_day.len() / 2).copied().unwrap_or(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte-level fast path reads what chrono's formats read (fractions of 1 to 9 digits, `T` or space,
    /// with or without seconds) and leaves everything else to them (offsets, leap seconds, bad dates).
    #[test]
    fn iso_fast_path_agrees_with_the_formats() {
        for s in [
            "2024-02-29T23:59:59",
            "2024-02-29 23:59",
            "2017-01-02T00:00:00.5",
            "2017-01-02 00:00:00.123456789",
            "1999-12-31T12:34:56.000001",
        ] {
            let fast = iso_naive(s).unwrap_or_else(|| panic!("{s} takes the fast path"));
            let general = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]
                .iter()
                .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
                .unwrap();
            assert_eq!(fast, general, "{s}");
        }
        for s in ["2024-02-30T00:00:00", "2024-01-01T00:00:60", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00+02:00"] {
            assert!(iso_naive(s).is_none(), "{s} is left to the general parsers");
        }
        assert_eq!(ts("2024-01-01T00:00:00+02:00"), ts("2023-12-31T22:00:00"));
    }

    fn ts(s: &str) -> i64 {
        parse_time(s).unwrap_or_else(|e| panic!("{e}")).timestamp_millis()
    }

    #[test]
    fn formats_seen_in_real_files() {
        let noon = 1_483_272_000_000; // 2017-01-01 12:00:00 UTC
        assert_eq!(ts("2017-01-01T12:00:00Z"), noon);
        assert_eq!(ts("2017-01-01 12:00:00"), noon);
        assert_eq!(ts("2017-01-01T12:00:00.000"), noon);
        assert_eq!(ts("2017-01-01 07:00:00-05:00"), noon);
        assert_eq!(ts("01.01.2017 12:00:00.000"), noon);
        assert_eq!(ts("1/1/2017 12:00"), noon);
        assert_eq!(ts("1483272000"), noon);
        assert_eq!(ts("1483272000000"), noon);
        assert_eq!(ts("20170101"), noon - 12 * 3_600_000);
        assert_eq!(ts("1/1/2017"), noon - 12 * 3_600_000);
        assert_eq!(ts("2017-01-01"), noon - 12 * 3_600_000);
    }

    #[test]
    fn offsets_are_kept() {
        let t = parse_time("2024-08-06 09:30:00-04:00").unwrap();
        assert_eq!(t.offset().local_minus_utc(), -4 * 3_600);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for s in ["", "yesterday", "2017-13-01", "32.01.2017 00:00:00", "1e400", "99999999999999999999"] {
            assert!(parse_time(s).is_err(), "{s} parsed");
        }
    }

    #[test]
    fn integer_times_in_each_unit() {
        let noon = 1_483_272_000_000; // 2017-01-01 12:00:00 UTC
        let ms = |n, unit: &str| integer_time(n, unit.parse().unwrap()).unwrap().timestamp_millis();
        assert_eq!(ms(20_170_101, "YYYYMMDD"), noon - 12 * 3_600_000);
        assert_eq!(ms(1_483_272_000, "s"), noon);
        assert_eq!(ms(1_483_272_000_000, "ms"), noon);
        assert_eq!(ms(1_483_272_000_000_000, "us"), noon);
        assert_eq!(ms(1_483_272_000_000_000_000, "ns"), noon);
        for bad in [20_170_231, 2_017_010, -20_170_101] {
            assert!(integer_time(bad, TimeUnit::YearMonthDay).is_err(), "{bad} read as a date");
        }
        assert!(integer_time(i64::MAX, TimeUnit::Seconds).is_err());
        assert!("days".parse::<TimeUnit>().unwrap_err().contains("YYYYMMDD, s, ms, us, ns"));
        let why = integer_time_refusal("date", 20_090_102);
        assert!(why.contains("`date`") && why.contains("20090102") && why.contains("time_unit"), "{why}");
    }
}
