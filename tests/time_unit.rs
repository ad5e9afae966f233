//! Integer time columns (issue 46): read only with a unit, by the CLI and the library alike
//! (`tradesim::data::time::integer_time`, the rule Python's loader applies too); without one the file is
//! refused with one finding that names the file, the first row and the column.

mod common;

use std::process::Command;

use tradesim::data::time::TimeUnit;
use tradesim::data::{CleanPolicy, ColumnData, IssueClass, load_bytes, load_columns};

/// Two daily bars of one symbol, the dates written as the S&P 500 file writes them.
const YYYYMMDD: &str =
    "Date,Open,High,Low,Close,Volume\n20090821,25.6,25.61,25.22,25.55,34758\n20090824,25.64,25.74,25.33,25.5,22247\n";

/// 2009-08-21 and 2009-08-24, midnight UTC, in epoch seconds.
const DAYS: [i64; 2] = [1_250_812_800, 1_251_072_000];

fn times(csv: &str, unit: Option<TimeUnit>) -> Vec<i64> {
    let policy = CleanPolicy::default();
    let (d, _) = load_bytes("t.csv", csv.as_bytes(), "X", (&policy, unit)).unwrap_or_else(|r| panic!("{r}"));
    d.series[0].bars.iter().map(|b| b.time.timestamp()).collect()
}

#[test]
fn integer_dates_are_refused_without_a_unit_with_one_finding() {
    let quoted = YYYYMMDD.replacen("Date", "\"Date\"", 1);
    for csv in [YYYYMMDD, quoted.as_str()] {
        let report = load_bytes("t.csv", csv.as_bytes(), "X", &CleanPolicy::default()).unwrap_err();
        assert_eq!(report.findings.len(), 1, "{report}");
        let f = &report.findings[0];
        assert_eq!(
            (f.file.as_str(), f.row, f.column.as_deref(), f.class),
            ("t.csv", Some(2), Some("Date"), IssueClass::BadTime)
        );
        assert!(f.message.contains("20090821") && f.message.contains("--time-unit"), "{}", f.message);
        assert_eq!(report.rows, 2);
    }
}

#[test]
fn each_unit_reads_its_integers() {
    assert_eq!(times(YYYYMMDD, Some(TimeUnit::YearMonthDay)), DAYS);
    for (unit, scale) in [
        (TimeUnit::Seconds, 1),
        (TimeUnit::Millis, 1_000),
        (TimeUnit::Micros, 1_000_000),
        (TimeUnit::Nanos, 1_000_000_000),
    ] {
        let csv = format!("time,open,high,low,close\n{},1,1,1,1\n{},1,1,1,1\n", DAYS[0] * scale, DAYS[1] * scale);
        assert_eq!(times(&csv, Some(unit)), DAYS, "{unit:?}");
    }
    // Epoch seconds read as dates are not dates: every row says so.
    let policy = CleanPolicy::default();
    let csv = format!("time,open,high,low,close\n{},1,1,1,1\n", DAYS[0]);
    let report = load_bytes("t.csv", csv.as_bytes(), "X", (&policy, Some(TimeUnit::YearMonthDay))).unwrap_err();
    assert!(
        report.findings.iter().any(|f| f.row == Some(2) && f.message.contains("not a date written YYYYMMDD")),
        "{report}"
    );
    // Written times are read as before, with or without a unit.
    assert_eq!(times("time,open,high,low,close\n2009-08-21,1,1,1,1\n", None), [DAYS[0]]);
    assert_eq!(times("time,open,high,low,close\n2009-08-21,1,1,1,1\n", Some(TimeUnit::Seconds)), [DAYS[0]]);
}

/// An integer column (what Python passes for a DataFrame's int64 dates) and the same integers as a file's
/// text give the same bars, or the same refusal.
#[test]
fn in_memory_integers_follow_the_files_rule() {
    let headers: Vec<String> = ["Date", "Open", "High", "Low", "Close"].map(str::to_owned).into();
    let columns = || {
        vec![
            ColumnData::Int(vec![20_090_821, 20_090_824]),
            ColumnData::Float(vec![25.6, 25.64]),
            ColumnData::Float(vec![25.61, 25.74]),
            ColumnData::Float(vec![25.22, 25.33]),
            ColumnData::Float(vec![25.55, 25.5]),
        ]
    };
    let policy = CleanPolicy::default();
    let report = load_columns("frame", &headers, columns(), "X", &policy).unwrap_err();
    assert_eq!((report.findings.len(), report.findings[0].column.as_deref()), (1, Some("Date")));
    let (d, _) = load_columns("frame", &headers, columns(), "X", (&policy, Some(TimeUnit::YearMonthDay))).unwrap();
    let got: Vec<i64> = d.series[0].bars.iter().map(|b| b.time.timestamp()).collect();
    assert_eq!(got, DAYS);
}

#[test]
fn the_cli_takes_time_unit() {
    let dir = std::env::temp_dir().join(format!("tradesim-time-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("daily.csv");
    std::fs::write(&file, YYYYMMDD).unwrap();
    let run =
        |extra: &[&str]| Command::new(common::bin()).args(["data", "check"]).arg(&file).args(extra).output().unwrap();
    let refused = run(&[]);
    let out = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(2), "{out}");
    assert!(
        out.contains(&format!("{}:2:Date: error[bad-time]", file.display())) && out.contains("--time-unit"),
        "{out}"
    );
    let read = run(&["--time-unit", "YYYYMMDD"]);
    let out = String::from_utf8_lossy(&read.stdout);
    assert!(read.status.success(), "{out}");
    assert!(out.contains("2 bars  2009-08-21T00:00:00+00:00 .. 2009-08-24T00:00:00+00:00"), "{out}");
    let bad = run(&["--time-unit", "days"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("`days` is not a time unit"));
    std::fs::remove_dir_all(dir).unwrap();
}
