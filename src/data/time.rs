//! Timestamps in the formats vendors write: ISO 8601 with or without offset (`T` or space), `YYYYMMDD`,
//! `DD.MM.YYYY HH:MM:SS(.fff)`, `M/D/YYYY( HH:MM(:SS))`, `YYYY-MM-DD`, and epoch seconds or milliseconds.
//! A time without an offset is read as UTC.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// Epoch values at or above this are milliseconds (1e11 s is the year 5138).
const EPOCH_MS_THRESHOLD: i64 = 100_000_000_000;

/// Parses one timestamp, or says which formats were tried.
pub fn parse_time(text: &str) -> Result<DateTime<FixedOffset>, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty timestamp".to_owned());
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

fn utc(t: NaiveDateTime) -> DateTime<FixedOffset> {
    Utc.from_utc_datetime(&t).fixed_offset()
}

/// Epoch seconds, or milliseconds when the value is too large to be seconds.
pub fn epoch(n: i64) -> Option<DateTime<FixedOffset>> {
    let t =
        if n.abs() >= EPOCH_MS_THRESHOLD { DateTime::from_timestamp_millis(n) } else { DateTime::from_timestamp(n, 0) };
    t.map(|t| t.fixed_offset())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
