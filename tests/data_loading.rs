//! Market data loading: formats, every validation class with file:row:column, drop/repair, the real files,
//! Parquet, and arbitrary bytes never panicking the loader.

use proptest::prelude::*;
use rust_decimal::Decimal;
use tradesim::data::time::TimeUnit;
use tradesim::data::{CleanPolicy, Dataset, IssueClass, LoadReport, Severity, load_bytes, load_file};

#[path = "common/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

fn load(csv: &str) -> Result<(Dataset, LoadReport), LoadReport> {
    load_bytes("t.csv", csv.as_bytes(), "X", &CleanPolicy::default())
}

/// Loads `csv` whose times are bare integers in `unit` (refused without one: tests/time_unit.rs).
fn load_unit(csv: &str, unit: TimeUnit) -> Result<(Dataset, LoadReport), LoadReport> {
    load_bytes("t.csv", csv.as_bytes(), "X", (&CleanPolicy::default(), Some(unit)))
}

fn refused(csv: &str) -> LoadReport {
    load(csv).map(|_| ()).expect_err("the file should be refused")
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

#[test]
fn timestamp_formats_and_column_order() {
    let cases = [
        ("datetime,open,high,low,close,volume\n2024-08-06 09:30:00-04:00,1,2,0.5,1.5,10\n", 1_722_951_000),
        ("Time,Open,High,Low,Close,Volume\n01.01.2017 22:00:00.000,1.05,1.06,1.04,1.05,1\n", 1_483_308_000),
        ("date,close,low,high,open\n1/2/2017,1,1,1,1\n", 1_483_315_200),
        ("Date;Time;Open;High;Low;Close\n2017-01-02;10:00;1;1;1;1\n", 1_483_351_200),
    ];
    for (csv, epoch) in cases {
        let (d, _) = load(csv).unwrap_or_else(|r| panic!("{csv}: {r}"));
        assert_eq!(d.series[0].bars[0].time.timestamp(), epoch, "{csv}");
    }
    // Bare integer times are read in the unit the caller names.
    let integer_cases = [
        (
            "Date,Symbol,Open,High,Low,Close,Volume\n20090821,A,25.6,25.61,25.22,25.55,34758\n",
            TimeUnit::YearMonthDay,
            1_250_812_800,
        ),
        ("timestamp,open,high,low,close\n1483315200,1,1,1,1\n", TimeUnit::Seconds, 1_483_315_200),
        ("timestamp,open,high,low,close\n1483315200000,1,1,1,1\n", TimeUnit::Millis, 1_483_315_200),
    ];
    for (csv, unit, epoch) in integer_cases {
        let (d, _) = load_unit(csv, unit).unwrap_or_else(|r| panic!("{csv}: {r}"));
        assert_eq!(d.series[0].bars[0].time.timestamp(), epoch, "{csv}");
    }
    let (d, _) = load("DATE,CLOSE,LOW,HIGH,OPEN,VOL\n2020-01-01,1.5,1,2,1.25,7\n").unwrap();
    let b = &d.series[0].bars[0];
    assert_eq!((b.open, b.high, b.low, b.close, b.volume), (dec("1.25"), dec("2"), dec("1"), dec("1.5"), dec("7")));
}

#[test]
fn prices_are_exact_decimals() {
    let (d, _) = load("datetime,open,high,low,close,volume\n2024-01-01,205.38999938964844,206.25,201.07000732421875,204.89010620117188,0.1\n").unwrap();
    let b = &d.series[0].bars[0];
    assert_eq!(b.open.to_string(), "205.38999938964844");
    assert_eq!(b.low.to_string(), "201.07000732421875");
    assert_eq!(b.volume, dec("0.1"));
}

#[test]
fn multi_symbol_long_format() {
    let csv = "Ticker,Date,Open,High,Low,Close,Volume\nAAA,2020-01-01,1,1,1,1,1\nBBB,2020-01-01,2,2,2,2,1\nAAA,2020-01-02,1,1,1,1,1\nBBB,2020-01-02,2,2,2,2,1\n";
    let (d, _) = load(csv).unwrap();
    assert_eq!(
        d.series.iter().map(|s| (s.symbol.as_str(), s.bars.len())).collect::<Vec<_>>(),
        [("AAA", 2), ("BBB", 2)]
    );
    assert_eq!(d.select(Some("bbb")).unwrap().bars[0].open, dec("2"));
    for (symbol, says) in [(None, "holds 2 symbols"), (Some("ZZZ"), "no symbol `ZZZ`")] {
        match d.select(symbol).unwrap_err() {
            tradesim::Error::Data(text) => assert!(text.contains(says), "{text}"),
            other => panic!("not a data error: {other:?}"),
        }
    }
}

/// One inline file per class: the finding names file, row (CSV line) and column.
#[test]
fn every_validation_class_is_located() {
    let h = "datetime,open,high,low,close,volume\n";
    let cases: [(&str, IssueClass, &str); 12] = [
        ("2020-01-01,abc,2,1,1.5,1\n", IssueClass::BadNumber, "t.csv:2:open:"),
        ("yesterday,1,2,1,1.5,1\n", IssueClass::BadTime, "t.csv:2:datetime:"),
        ("2020-01-01,NaN,2,1,1.5,1\n", IssueClass::NonFinite, "t.csv:2:open:"),
        ("2020-01-01,1,2,1,inf,1\n", IssueClass::NonFinite, "t.csv:2:close:"),
        ("2020-01-01,0,2,0,1,1\n", IssueClass::NonPositivePrice, "t.csv:2:open:"),
        ("2020-01-01,1.5,1,2,1.5,1\n", IssueClass::HighBelowLow, "t.csv:2:high:"),
        ("2020-01-01,3,2,1,1.5,1\n", IssueClass::OpenOutsideRange, "t.csv:2:open:"),
        ("2020-01-01,1.5,2,1,0.5,1\n", IssueClass::CloseOutsideRange, "t.csv:2:close:"),
        ("2020-01-01,1,2,1,1.5,-1\n", IssueClass::NegativeVolume, "t.csv:2:volume:"),
        ("2020-01-01,1,2,1,1.5,1\n2020-01-01,1,2,1,1.5,1\n", IssueClass::DuplicateTime, "t.csv:3:datetime:"),
        ("2020-01-02,1,2,1,1.5,1\n2020-01-01,1,2,1,1.5,1\n", IssueClass::DecreasingTime, "t.csv:3:datetime:"),
        ("2020-01-01,1,2,1,1.5\n", IssueClass::BadRow, "t.csv:2:"),
    ];
    for (rows, class, location) in cases {
        let report = refused(&format!("{h}{rows}"));
        let f = report
            .findings
            .iter()
            .find(|f| f.class == class)
            .unwrap_or_else(|| panic!("{rows}: no {class:?} in {report}"));
        assert!(f.to_string().starts_with(location), "{rows}: {f}");
        assert_eq!(f.severity, Severity::Error);
        assert!(!report.usable);
    }
    let report = refused("");
    assert!(report.findings.iter().any(|f| f.class == IssueClass::MissingColumn || f.class == IssueClass::EmptyFile));
    assert_eq!(refused(h).count(IssueClass::EmptyFile), 1);
    let missing = refused("date,open,close\n2020-01-01,1,1\n");
    assert!(missing.findings[0].message.contains("missing column(s) high, low"), "{missing}");
}

#[test]
fn zero_volume_is_a_warning_and_every_problem_is_listed() {
    let (d, report) =
        load("datetime,open,high,low,close,volume\n2020-01-01,1,2,1,1.5,0\n2020-01-02,1,2,1,1.5,5\n").unwrap();
    assert_eq!((d.n_bars(), report.count(IssueClass::ZeroVolume)), (2, 1));
    assert_eq!(report.findings[0].severity, Severity::Warning);
    let bad = refused(
        "datetime,open,high,low,close,volume\n2020-01-01,x,2,1,1.5,1\n2020-01-02,1,2,1,9,1\n2020-01-03,1,2,1,y,1\n",
    );
    assert_eq!(bad.blocking().count(), 3, "all problems, not only the first: {bad}");
}

#[test]
fn drop_and_repair_touch_only_named_classes_and_count_rows() {
    let csv = "datetime,open,high,low,close,volume\n2020-01-01,3,2,1,1.5,1\n2020-01-02,1,2,1,1.5,1\n2020-01-03,1.5,1,2,1.5,1\n";
    let only_drop = CleanPolicy::parse(&["open-outside-range".to_owned()], &[]).unwrap();
    let err = load_bytes("t.csv", csv.as_bytes(), "X", &only_drop).unwrap_err();
    assert_eq!(err.blocking().count(), 1, "high-below-low is still an error: {err}");
    let policy = CleanPolicy::parse(&["open-outside-range".to_owned()], &["high-below-low".to_owned()]).unwrap();
    let (d, report) = load_bytes("t.csv", csv.as_bytes(), "X", &policy).unwrap();
    assert_eq!((d.n_bars(), report.dropped, report.repaired), (2, 1, 1));
    let repaired = &d.series[0].bars[1];
    assert_eq!((repaired.high, repaired.low), (dec("2"), dec("1")));
    match CleanPolicy::parse(&["nonsense".to_owned()], &[]).unwrap_err() {
        tradesim::Error::Config { key, message } => {
            assert_eq!(key, "--drop");
            assert!(message.contains("unknown issue class"), "{message}");
        }
        other => panic!("not a configuration error: {other:?}"),
    }
    match CleanPolicy::parse(&[], &["zero-volume".to_owned()]).unwrap_err() {
        tradesim::Error::Config { key, message } => {
            assert_eq!(key, "--repair");
            assert!(message.contains("cannot be repaired"), "{message}");
        }
        other => panic!("not a configuration error: {other:?}"),
    }
    assert!(CleanPolicy::parse(&["missing-column".to_owned()], &[]).is_err());
}

/// The real files of the shared data folder (CI has it beside the clone; elsewhere, set
/// TRADESIM_SHARED_DATA or the test is skipped).
#[test]
fn real_files_load_with_the_expected_findings() {
    let Some(dir) = shared_data() else { return };
    let policy = CleanPolicy::default();
    let expect = [
        ("stocks-daily-5-tickers.csv", 5, 12_154),
        ("eurusd-1h-ask-2017.csv", 1, 6_225),
        ("aapl-1m-2026.csv", 1, 2_382),
        ("aapl-1h-2024-2026.csv", 1, 3_479),
    ];
    for (name, symbols, bars) in expect {
        let (d, report) = load_file(&dir.join(name), &policy).unwrap_or_else(|r| panic!("{r}"));
        assert_eq!((d.series.len(), d.n_bars()), (symbols, bars), "{name}");
        assert!(report.usable);
    }
    let (_, aapl) = load_file(&dir.join("aapl-1m-2026.csv"), &policy).unwrap();
    let last_row = aapl.findings.iter().filter(|f| f.class == IssueClass::ZeroVolume).filter_map(|f| f.row).max();
    assert_eq!(last_row, Some(2_383), "the zero-volume stub is the last row");
    let sp500 = dir.join("sp500-members-daily-2009-2010.csv");
    let report = load_file(&sp500, (&policy, Some(TimeUnit::YearMonthDay))).unwrap_err();
    let outside = report.count(IssueClass::OpenOutsideRange) + report.count(IssueClass::CloseOutsideRange);
    assert!((70..=90).contains(&outside), "about 78 rows have open or close outside [low, high]: {outside}");
    let drop = CleanPolicy::parse(&["open-outside-range,close-outside-range".to_owned()], &[]).unwrap();
    let (d, report) = load_file(&sp500, (&drop, Some(TimeUnit::YearMonthDay))).unwrap_or_else(|r| panic!("{r}"));
    assert_eq!(d.series.len(), 524);
    assert_eq!(d.n_bars() + report.dropped, report.rows);
}

#[test]
fn embedded_dataset_is_the_eurusd_file() {
    let d = tradesim::data::embedded().unwrap();
    assert_eq!((d.series.len(), d.n_bars(), d.synthetic), (1, 6_225, false));
    assert_eq!(d.series[0].symbol, "EURUSD");
    assert!(d.source.starts_with("embedded:"));
}

/// A Parquet file with a timestamp column, double prices and an int volume.
#[test]
fn parquet_files_load() {
    use parquet::data_type::{DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;
    let schema = Arc::new(
        parse_message_type(
            "message bars { required int64 timestamp (TIMESTAMP(MILLIS,true)); required double open; required double high; \
             required double low; required double close; required int64 volume; }",
        )
        .unwrap(),
    );
    let mut buf = Vec::new();
    {
        let mut writer = SerializedFileWriter::new(&mut buf, schema, Arc::new(WriterProperties::default())).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let times = [1_483_315_200_000i64, 1_483_318_800_000];
        let mut col = group.next_column().unwrap().unwrap();
        col.typed::<Int64Type>().write_batch(&times, None, None).unwrap();
        col.close().unwrap();
        for values in [[1.5, 1.25], [2.0, 1.5], [1.0, 1.0], [1.75, 1.25]] {
            let mut col = group.next_column().unwrap().unwrap();
            col.typed::<DoubleType>().write_batch(&values, None, None).unwrap();
            col.close().unwrap();
        }
        let mut col = group.next_column().unwrap().unwrap();
        col.typed::<Int64Type>().write_batch(&[100, 0], None, None).unwrap();
        col.close().unwrap();
        group.close().unwrap();
        writer.close().unwrap();
    }
    let (d, report) = load_bytes("bars.parquet", &buf, "PQ", &CleanPolicy::default()).unwrap_or_else(|r| panic!("{r}"));
    let bars = &d.series[0].bars;
    assert_eq!(bars.len(), 2);
    assert_eq!(bars[1].time.timestamp(), 1_483_318_800);
    assert_eq!((bars[0].open, bars[0].close, bars[0].volume), (dec("1.5"), dec("1.75"), dec("100")));
    assert_eq!(report.count(IssueClass::ZeroVolume), 1);
    assert_eq!(report.findings[0].to_string(), "bars.parquet:2:volume: warning[zero-volume]: volume is 0");
    let err = load_bytes("bad.parquet", b"PAR1 not really", "PQ", &CleanPolicy::default()).unwrap_err();
    assert!(err.findings[0].message.contains("unreadable Parquet"), "{err}");
}

proptest! {
    /// Arbitrary bytes never panic the loader.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = load_bytes("fuzz", &bytes, "X", &CleanPolicy::default());
    }

    /// The parallel reader of plain CSV (no quotes) and the CSV crate's reader (which a quoted header
    /// selects) give the same series, findings and row numbers: good and bad rows, blank lines, short
    /// rows, CRLF endings, two symbols, enough rows to cut the file into many chunks.
    #[test]
    fn plain_and_quoted_csv_read_alike(
        rows in prop::collection::vec((0u8..12, 1u32..5_000, 0u32..300, any::<bool>()), 0..1_500),
        crlf in any::<bool>(),
    ) {
        let end = if crlf { "\r\n" } else { "\n" };
        let mut body = String::new();
        for (i, (kind, price, spread, sym)) in rows.iter().enumerate() {
            let (p, h) = (f64::from(*price) / 100.0, f64::from(price + spread) / 100.0);
            let t = format!("2020-01-01 {:02}:{:02}:{:02}", i / 3600, i / 60 % 60, i % 60);
            let symbol = if *sym { "AA" } else { "BB" };
            body += &match kind {
                0 => String::new(),
                1 => format!("{t},{symbol},{p}"),
                2 => format!("{t},{symbol},{p},x,{p},{p},1"),
                3 => " , , , , , , ".to_owned(),
                _ => format!("{t},{symbol},{p},{h},{p},{p},{}", kind * 10),
            };
            body += end;
        }
        let plain = format!("time,symbol,open,high,low,close,volume{end}{body}");
        let quoted = format!("\"time\",symbol,open,high,low,close,volume{end}{body}");
        let policy = CleanPolicy::default();
        let a = load_bytes("f.csv", plain.as_bytes(), "X", &policy);
        let b = load_bytes("f.csv", quoted.as_bytes(), "X", &policy);
        match (a, b) {
            (Ok((da, ra)), Ok((db, rb))) => {
                prop_assert_eq!(da, db);
                prop_assert_eq!(ra, rb);
            }
            (Err(ra), Err(rb)) => prop_assert_eq!(ra, rb),
            (a, b) => prop_assert!(false, "one reader refused the file: {:?} / {:?}", a.is_ok(), b.is_ok()),
        }
    }

    /// The same for a file of one series (no symbol column: the rows are compacted in place when some are
    /// dropped or are not rows), under the default or a policy that drops and repairs, with rows out of
    /// order, lines that are not UTF-8, and a header that names the time, leaves it to pandas' index (an
    /// empty first header, blank lines before the first row), or lacks it (the file is refused with every
    /// finding of its lines and its row count).
    #[test]
    fn plain_and_quoted_csv_read_alike_in_one_series(
        rows in prop::collection::vec((0u8..16, 1u32..5_000, 0u32..300), 0..1_500),
        header in 0u8..3,
        crlf in any::<bool>(),
        lenient in any::<bool>(),
    ) {
        let end = if crlf { "\r\n" } else { "\n" };
        let mut body: Vec<u8> = Vec::new();
        if header == 1 {
            body.extend(format!("{end}{end}").as_bytes());
        }
        for (i, (kind, price, spread)) in rows.iter().enumerate() {
            let (p, h) = (f64::from(*price) / 100.0, f64::from(price + spread) / 100.0);
            let at = |i: usize| format!("2020-01-01 {:02}:{:02}:{:02}", i / 3600, i / 60 % 60, i % 60);
            let t = at(i);
            let line = match kind {
                0 => String::new(),
                1 => format!("{t},{p}"),
                2 => format!("{t},{p},x,{p},{p},1"),
                3 => " , , , , , ".to_owned(),
                4 => format!("{t},{p},{p},{h},{p},7"),
                5 => format!("{t},{p},{h},{p},{p},0"),
                6 => format!("{},{p},{h},{p},{p},3", at(i / 2)),
                7 => {
                    body.extend(format!("{t},\u{fffd}").as_bytes());
                    body.extend(b"\xff,1,1,1,1");
                    String::new()
                }
                _ => format!("{t},{p},{h},{p},{p},{}", kind * 10),
            };
            body.extend(line.as_bytes());
            body.extend(end.as_bytes());
        }
        let names = ["time,open,high,low,close,volume", ",open,high,low,close,volume", "stamp,open,high,low,close,volume"];
        let quoted_names = ["time,\"open\",high,low,close,volume", ",\"open\",high,low,close,volume", "stamp,\"open\",high,low,close,volume"];
        let file = |names: &str| [format!("{names}{end}").as_bytes(), &body].concat();
        let policy = if lenient {
            CleanPolicy::parse(&["bad-number".to_owned(), "decreasing-time".to_owned(), "duplicate-time".to_owned()], &["high-below-low".to_owned()]).unwrap()
        } else {
            CleanPolicy::default()
        };
        let a = load_bytes("f.csv", &file(names[usize::from(header)]), "X", &policy);
        let b = load_bytes("f.csv", &file(quoted_names[usize::from(header)]), "X", &policy);
        match (a, b) {
            (Ok((da, ra)), Ok((db, rb))) => {
                prop_assert_eq!(da, db);
                prop_assert_eq!(ra, rb);
            }
            (Err(ra), Err(rb)) => prop_assert_eq!(ra, rb),
            (a, b) => prop_assert!(false, "one reader refused the file: {:?} / {:?}", a.is_ok(), b.is_ok()),
        }
    }

    /// CSV-shaped garbage (a valid header, random cells) never panics and every finding has a row.
    #[test]
    fn csv_shaped_garbage_never_panics(rows in prop::collection::vec(prop::collection::vec("[-0-9a-zA-Z.:/ ]{0,12}", 0..8), 0..20)) {
        let mut csv = String::from("datetime,open,high,low,close,volume\n");
        for row in &rows {
            csv += &row.join(",");
            csv.push('\n');
        }
        if let Err(report) = load_bytes("fuzz.csv", csv.as_bytes(), "X", &CleanPolicy::default()) {
            prop_assert!(!report.findings.is_empty());
        }
    }
}

/// A CSV as pandas' `df.to_csv()` writes it: the DatetimeIndex first, under an empty header (and under
/// `Unnamed: 0` after a round trip through `read_csv`). That column is the time, and the report says so;
/// without timestamps in it, the file is still refused for its missing time column.
#[test]
fn pandas_index_column_is_the_time() {
    for first in ["", "Unnamed: 0"] {
        let csv = format!(
            "{first},Open,High,Low,Close,Volume\n2024-01-02,10,11,9.5,10.5,100\n2024-01-03,10.5,12,10,11.5,120\n"
        );
        let (d, report) = load(&csv).unwrap_or_else(|r| panic!("{r}"));
        assert_eq!(d.series[0].bars.len(), 2);
        assert_eq!(d.series[0].bars[1].close, dec("11.5"));
        assert!(report.notes.iter().any(|n| n.contains("pandas")), "{report}");
        assert!(report.to_string().contains("note: the first column"), "{report}");
    }
    let report = refused(",Open,High,Low,Close\n0,10,11,9.5,10.5\n");
    assert!(report.findings.iter().any(|f| f.class == IssueClass::MissingColumn), "{report}");
}

/// Times out of order after a dropped row, in a one-symbol file: the ordering findings name the rows they
/// came from, each bar is compared with the last kept one, and the kept bars are the in-order ones.
#[test]
fn out_of_order_rows_after_dropped_rows_keep_their_row_numbers() {
    let csv = "datetime,open,high,low,close,volume\n\
               2020-01-01,1,2,1,1.5,1\n\
               2020-01-02,3,2,1,1.5,1\n\
               2020-01-04,1,2,1,1.5,1\n\
               2020-01-03,1,2,1,1.5,1\n\
               2020-01-05,1,2,1,1.5,1\n\
               2020-01-05,1,2,1,1.6,1\n\
               2020-01-06,1,2,1,1.7,1\n";
    let policy = CleanPolicy::parse(
        &["open-outside-range".to_owned(), "decreasing-time".to_owned(), "duplicate-time".to_owned()],
        &[],
    )
    .unwrap();
    let (d, report) = load_bytes("t.csv", csv.as_bytes(), "X", &policy).unwrap();
    let days: Vec<String> = d.series[0].bars.iter().map(|b| b.time.format("%d").to_string()).collect();
    assert_eq!(days, ["01", "04", "05", "06"]);
    assert_eq!(d.series[0].bars[2].close, dec("1.5"), "the first of two bars at one time is kept");
    let located: Vec<(Option<usize>, IssueClass)> = report.findings.iter().map(|f| (f.row, f.class)).collect();
    assert_eq!(
        located,
        [
            (Some(3), IssueClass::OpenOutsideRange),
            (Some(5), IssueClass::DecreasingTime),
            (Some(7), IssueClass::DuplicateTime)
        ]
    );
    assert_eq!(report.dropped, 3);
    // Without the bad rows the times increase: every bar is kept, nothing is found.
    let in_order: String =
        csv.lines().enumerate().filter(|(i, _)| ![2, 4, 6].contains(i)).map(|(_, l)| format!("{l}\n")).collect();
    let (d, report) = load(&in_order).unwrap();
    assert_eq!((d.n_bars(), report.findings.len()), (4, 0), "{report}");
}

/// A chosen symbol (`--symbol`, Python's `symbol=`) is the only one whose rows are read and checked
/// (issue 56 item 2): MSFT's high-below-low rows do not refuse AAPL; a symbol the file lacks is refused.
#[test]
fn a_chosen_symbols_rows_are_the_only_ones_checked() {
    let csv = "date,symbol,open,high,low,close\n\
               2024-01-01,AAPL,10,11,9,10.5\n2024-01-01,MSFT,20,19,21,20\n\
               2024-01-02,AAPL,10.5,12,10,11\n2024-01-02,MSFT,20,22,19,21\n2024-01-03,AAPL,11,12,10,11.5\n";
    let policy = CleanPolicy::default();
    let options = |symbol| (&policy, None, symbol);
    let all = load_bytes("t.csv", csv.as_bytes(), "X", &policy).expect_err("MSFT's row 3 is refused");
    assert!(all.findings.iter().any(|f| f.class == IssueClass::HighBelowLow && f.row == Some(3)), "{all}");
    let (aapl, report) = load_bytes("t.csv", csv.as_bytes(), "X", options(Some("aapl"))).unwrap();
    assert_eq!(aapl.series.len(), 1);
    assert_eq!(aapl.series[0].symbol, "AAPL");
    assert_eq!(aapl.series[0].bars.iter().map(|b| b.close).collect::<Vec<_>>(), [dec("10.5"), dec("11"), dec("11.5")]);
    assert!(report.findings.is_empty() && report.dropped == 0, "{report}");
    let msft = load_bytes("t.csv", csv.as_bytes(), "X", options(Some("MSFT"))).expect_err("MSFT is refused");
    assert!(msft.findings.iter().all(|f| f.row == Some(3) || f.row.is_none()), "{msft}");
    let none = load_bytes("t.csv", csv.as_bytes(), "X", options(Some("TSLA"))).expect_err("no TSLA rows");
    let message = none.to_string();
    assert!(message.contains("no rows of symbol `TSLA`") && message.contains("AAPL"), "{message}");
}
