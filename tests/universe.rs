//! Universes (issue 55, item 1): files with a symbol column or several files become one calendar of N
//! symbols; every finding names its file, row, column and symbol; a missing bar is no trade and a carried
//! close; the cross-sectional features use no later bar; a weights file is refused row by row, never
//! silently.

use std::path::PathBuf;

use num_traits::ToPrimitive;
use rust_decimal::Decimal;
use tradesim::data::cross_section::{N_CROSS_FEATURES, N_UNIVERSE_FEATURES, UniverseFeatures};
use tradesim::data::features::N_FEATURES;
use tradesim::data::time::TimeUnit;
use tradesim::data::universe::Universe;
use tradesim::data::weights::{TargetWeights, weights_from_bytes};
use tradesim::data::{CleanPolicy, Dataset, IssueClass, MarketBar, Series, load_bytes, load_file, load_files};

#[path = "common/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tradesim-universe-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The S&P 500 members file's known dirt (78 opens outside the bar's range): every finding names the file,
/// its line, the column and the row's symbol; repaired, the 524 symbols make a universe of 245 days where
/// 25 symbols start late and 114 miss days inside their span.
#[test]
fn sp500_findings_name_their_symbol_and_the_universe_has_gaps() {
    let Some(dir) = shared_data() else { return };
    let path = dir.join("sp500-members-daily-2009-2010.csv");
    let unit = Some(TimeUnit::YearMonthDay);
    let report = load_file(&path, (&CleanPolicy::default(), unit)).unwrap_err();
    let outside: Vec<_> = report.findings.iter().filter(|f| f.class == IssueClass::OpenOutsideRange).collect();
    assert_eq!(outside.len(), 78, "{report}");
    for f in &outside {
        assert!(f.file.ends_with("sp500-members-daily-2009-2010.csv") && f.row.is_some(), "{f}");
        assert_eq!((f.column.as_deref(), f.symbol.is_some()), (Some("Open"), true), "{f}");
    }
    let first = outside[0].to_string();
    assert!(
        first
            .ends_with(":2230:Open: error[open-outside-range]: symbol ADP: open 41.05 outside [low 40.51, high 41.02]"),
        "{first}"
    );
    let policy = CleanPolicy::parse(&[], &["open-outside-range".to_owned()]).unwrap();
    let (data, _) = load_file(&path, (&policy, unit)).unwrap();
    let u = Universe::new(data, None).unwrap();
    assert_eq!((u.n_symbols(), u.n_times()), (524, 245));
    let late = (0..524).filter(|&s| u.first_time(s) > 0).count();
    let gaps = (0..524).filter(|&s| u.missing_inside(s) > 0).count();
    assert_eq!((late, gaps), (25, 114));
    // A gap is no bar, and the symbol is worth its last close there.
    let etfc = u.symbol_index("ETFC").unwrap();
    let t = (1..245).find(|&t| u.bar(t, etfc).is_none() && u.bar(t - 1, etfc).is_some()).unwrap();
    assert_eq!(u.carried_close(t, etfc), Some(u.bar(t - 1, etfc).unwrap().close));
    let block = tradesim::data::device::universe_market(&u).unwrap();
    let cell = block.bars()[t * 524 + etfc];
    assert_eq!(
        (block.tradable()[t * 524 + etfc], cell.close),
        (0, u.bar(t - 1, etfc).unwrap().close.to_f64().unwrap())
    );
}

/// The five large caps: one file with a symbol column, or five files of one series each, make the same
/// universe (3,270 days; GOOG from day 1,122, FB from day 3,074, zeros and no trade before). A symbol in two
/// files, and a file whose series is not among `--symbols`, are refused naming the files.
#[test]
fn one_file_or_several_make_the_same_universe() {
    let Some(dir) = shared_data() else { return };
    let (whole, _) = load_file(&dir.join("stocks-daily-5-tickers.csv"), &CleanPolicy::default()).unwrap();
    let u = Universe::new(whole.clone(), None).unwrap();
    assert_eq!((u.n_times(), u.first_time(2), u.first_time(1)), (3_270, 1_122, 3_074));
    let block = tradesim::data::device::universe_market(&u).unwrap();
    let fb = u.symbol_index("FB").unwrap();
    assert_eq!((block.tradable()[3_073 * 5 + fb], block.bars()[3_073 * 5 + fb].close), (0, 0.0));
    assert_eq!(block.tradable()[3_074 * 5 + fb], 1);
    let tmp = temp_dir("split");
    let paths: Vec<PathBuf> = whole
        .series
        .iter()
        .map(|s| {
            let path = tmp.join(format!("{}.csv", s.symbol.to_lowercase()));
            let mut text = String::from("date,open,high,low,close,volume\n");
            for b in &s.bars {
                text += &format!("{},{},{},{},{},{}\n", b.time.to_rfc3339(), b.open, b.high, b.low, b.close, b.volume);
            }
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
    let (split, reports) = load_files(&paths, &CleanPolicy::default()).unwrap();
    assert_eq!(reports.len(), 5);
    let v = Universe::new(split, None).unwrap();
    assert_eq!((v.symbols(), &v.times), (u.symbols(), &u.times));
    assert!((0..5).all(|s| v.series[s].bars == u.series[s].bars));
    let twice = load_files(&[paths[0].clone(), dir.join("stocks-daily-5-tickers.csv")], &CleanPolicy::default());
    let err = twice.unwrap_err().to_string();
    assert!(err.contains("`AAPL` is in both") && err.contains("aapl.csv") && err.contains("stocks-daily"), "{err}");
    let chosen = vec!["IBM".to_owned()];
    let policy = CleanPolicy::default();
    let err = load_files(&paths[..2], (&policy, None, chosen.as_slice())).unwrap_err().to_string();
    assert!(err.contains("aapl.csv") && err.contains("`AAPL` is not among the chosen symbols (IBM)"), "{err}");
    std::fs::remove_dir_all(tmp).unwrap();
}

/// In a file with a symbol column, a row without a symbol belongs to no series: a bad-row finding on its
/// line and the symbol column, not a series named after the file.
#[test]
fn a_row_without_a_symbol_is_refused() {
    let csv =
        "symbol,date,open,high,low,close\nA,2020-01-01,1,2,1,1.5\n,2020-01-02,1,2,1,1.5\nA,2020-01-03,1,2,1,1.5\n";
    let report = load_bytes("t.csv", csv.as_bytes(), "T", &CleanPolicy::default()).unwrap_err();
    let f = report.findings.iter().find(|f| f.class == IssueClass::BadRow).unwrap();
    assert_eq!((f.row, f.column.as_deref(), f.symbol.as_deref()), (Some(3), Some("symbol"), None), "{report}");
    let policy = CleanPolicy::parse(&["bad-row".to_owned()], &[]).unwrap();
    let (d, report) = load_bytes("t.csv", csv.as_bytes(), "T", &policy).unwrap();
    assert_eq!((d.series.len(), d.series[0].bars.len(), report.dropped), (1, 2, 1));
}

fn day(d: u32) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(&format!("2020-01-{d:02}T00:00:00+00:00")).unwrap()
}

fn series(symbol: &str, closes: &[(u32, i64)]) -> Series {
    let bars = closes
        .iter()
        .map(|&(d, c)| {
            let p = Decimal::from(c);
            MarketBar { time: day(d), open: p, high: p, low: p, close: p, volume: Decimal::ONE }
        })
        .collect();
    Series { symbol: symbol.to_owned(), bars }
}

/// Day 2's cross-section of three symbols (B misses day 2): A +10% and C -5% rank 0.5 and -0.5, the market
/// returns 2.5% and each its excess; B, without a bar, has no rank or excess.
#[test]
fn cross_sectional_features_by_hand() {
    let a = series("A", &[(1, 100), (2, 110), (3, 121)]);
    let b = series("B", &[(1, 50), (3, 56)]);
    let c = series("C", &[(1, 40), (2, 38), (3, 38)]);
    let u = Universe::new(Dataset { source: "t".to_owned(), synthetic: false, series: vec![a, b, c] }, None).unwrap();
    let x = UniverseFeatures::compute(&u).unwrap();
    assert_eq!(x.tradable, [1, 1, 1, 1, 0, 1, 1, 1, 1]);
    let xs = |t: usize, s: usize| -> Vec<f64> { (N_FEATURES..N_UNIVERSE_FEATURES).map(|j| x.get(t, s, j)).collect() };
    let (up, down) = (110.0 / 100.0 - 1.0, 38.0 / 40.0 - 1.0);
    let market = (up + down) / 2.0;
    assert_eq!(xs(1, 0), [0.5, 0.0, market, up - market]);
    assert_eq!(xs(1, 2), [-0.5, 0.0, market, down - market]);
    assert_eq!(xs(1, 1), [0.0, 0.0, market, 0.0]);
    // Day 3: B's return spans its gap (56 / 50), the best of three.
    assert_eq!(x.get(2, 1, N_FEATURES), 0.5);
    assert_eq!(N_CROSS_FEATURES, 4);
}

/// No lookahead: raising every bar after day t of one symbol leaves every feature of every symbol at days
/// <= t unchanged, bit for bit (the cross-section of day t + 1 changes).
#[test]
fn universe_features_use_no_later_bar() {
    let Some(dir) = shared_data() else { return };
    let (data, _) = load_file(&dir.join("stocks-daily-5-tickers.csv"), &CleanPolicy::default()).unwrap();
    let u = Universe::new(data.clone(), None).unwrap();
    let before = UniverseFeatures::compute(&u).unwrap();
    let cut = 2_500;
    let mut later = data;
    let ibm = later.series.iter().position(|s| s.symbol == "IBM").unwrap();
    for b in later.series[ibm].bars.iter_mut().filter(|b| b.time > u.times[cut]) {
        for p in [&mut b.open, &mut b.high, &mut b.low, &mut b.close] {
            *p *= Decimal::new(15, 1);
        }
    }
    let after = UniverseFeatures::compute(&Universe::new(later, None).unwrap()).unwrap();
    let width = 5 * N_UNIVERSE_FEATURES;
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&before.values[..(cut + 1) * width]), bits(&after.values[..(cut + 1) * width]));
    let next = (cut + 1) * width..(cut + 2) * width;
    assert_ne!(bits(&before.values[next.clone()]), bits(&after.values[next]));
    let norm = before.fit(0..cut);
    let rows = before.normalized(&norm, 200..cut);
    assert_eq!(rows.len(), (cut - 200) * width);
    assert!(rows.iter().all(|x| x.abs() <= 10.0));
}

/// A calendar shorter than the 200-bar warm-up (a year of daily bars, as the S&P 500 file): every symbol's
/// 51 features have values from its second bar on (from its bars so far), so a feature that varies on the
/// test times varies on the training times too, where the normalizer is fitted (before, they were zeros
/// there and raw values at test); from the 200th bar on they are the single series' bits.
#[test]
fn a_calendar_shorter_than_the_warm_up_has_features_everywhere() {
    use tradesim::data::features::FeatureMatrix;
    let (n, days) = (4, 250);
    let u = Universe::new(tradesim::data::synthetic::cross_section_universe(n, days, 7, 0.0), None).unwrap();
    let x = UniverseFeatures::compute(&u).unwrap();
    for t in 1..days {
        for s in 0..n {
            assert!((0..N_FEATURES).any(|j| x.get(t, s, j) != 0.0), "time {t} symbol {s}: all 51 features zero");
        }
    }
    let (train, test) = (0..175, 212..days);
    let norm = x.fit(train.clone());
    let spread = |range: std::ops::Range<usize>, j: usize| {
        let rows = x.normalized(&norm, range);
        let v: Vec<f32> = rows.chunks(N_UNIVERSE_FEATURES).map(|r| r[j]).collect();
        v.iter().copied().fold(f32::MIN, f32::max) - v.iter().copied().fold(f32::MAX, f32::min)
    };
    let mut varying = 0;
    for j in 0..N_FEATURES {
        if spread(test.clone(), j) > 0.0 {
            varying += 1;
            assert!(spread(train.clone(), j) > 0.0, "feature {j} varies on the test times but not on training");
        }
    }
    assert!(varying > 40, "{varying} of 51 features vary on the test times");
    // From the warm-up on, a symbol's rows are the single series' features of its bars, bit for bit.
    let long = Universe::new(tradesim::data::synthetic::cross_section_universe(2, 400, 3, 0.0), None).unwrap();
    let x = UniverseFeatures::compute(&long).unwrap();
    for (s, series) in long.series.iter().enumerate() {
        let alone = FeatureMatrix::compute(&tradesim::data::device::columns(series).unwrap());
        for t in 200..400 {
            for j in 0..N_FEATURES {
                assert_eq!(x.get(t, s, j).to_bits(), alone.get(t, j).to_bits(), "symbol {s} time {t} feature {j}");
            }
        }
    }
}

/// A weights file is refused with every finding located (file, row, column, symbol): an unknown symbol, a
/// time off the calendar, a short without `allow_short`, a time and symbol twice, a bad number; a price
/// column says the file is data. An order whose symbol has no bar at the next time is listed, not placed.
#[test]
fn weights_files_are_refused_row_by_row() {
    let a = series("A", &[(1, 10), (2, 11), (3, 12), (4, 13)]);
    let b = series("B", &[(1, 20), (2, 21), (4, 23)]);
    let u = Universe::new(Dataset { source: "t".to_owned(), synthetic: false, series: vec![a, b] }, None).unwrap();
    let bad = "time,symbol,p1,p2\n\
               2020-01-01,A,0.5,\n\
               2020-01-01,Z,0.5,\n\
               2020-01-09,A,0.5,\n\
               2020-01-02,B,-0.2,0.1\n\
               2020-01-01,a,0.3,\n\
               2020-01-03,A,x,\n";
    let table = weights_from_bytes("w.csv", bad.as_bytes(), None).unwrap_err();
    let f = &table.findings;
    assert_eq!(f.len(), 1, "{table}");
    assert_eq!(
        (f[0].row, f[0].column.as_deref(), f[0].symbol.as_deref(), f[0].class),
        (Some(7), Some("p1"), Some("A"), IssueClass::BadNumber)
    );
    let table = weights_from_bytes("w.csv", bad.replace(",x,", ",0.1,").as_bytes(), None).unwrap();
    let report = TargetWeights::new(table, &u, false).unwrap_err();
    let located: Vec<_> =
        report.findings.iter().map(|f| (f.row, f.column.as_deref(), f.symbol.as_deref(), f.class)).collect();
    assert_eq!(
        located,
        [
            (Some(3), Some("symbol"), Some("Z"), IssueClass::BadRow),
            (Some(4), Some("time"), Some("A"), IssueClass::BadTime),
            (Some(5), Some("p1"), Some("B"), IssueClass::BadNumber),
            (Some(6), Some("time"), Some("a"), IssueClass::DuplicateTime),
        ],
        "{report}"
    );
    assert!(report.to_string().contains("w.csv:5:p1: error[bad-number]: symbol B: weight -0.2 is a short"), "{report}");
    let good = "time,symbol,p1,p2\n2020-01-01,A,0.5,\n2020-01-02,B,0.2,0.1\n2020-01-03,B,0.3,\n2020-01-04,A,0,0\n";
    let w = TargetWeights::new(weights_from_bytes("w.csv", good.as_bytes(), None).unwrap(), &u, false).unwrap();
    // B has no bar on day 3, so its day-2 order cannot fill; the day-4 order is decided at the last time.
    let unfilled: Vec<(usize, usize, usize)> = w.unfilled.iter().map(|o| (o.row, o.time, o.symbol)).collect();
    assert_eq!(unfilled, [(3, 1, 1), (5, 3, 0)]);
    assert_eq!(
        (w.orders.len(), w.weight(0, 0, 0), w.weight(1, 0, 0), w.weight(0, 2, 1)),
        (2, Some(Decimal::new(5, 1)), None, Some(Decimal::new(3, 1)))
    );
    let data = "time,symbol,open,close\n2020-01-01,A,1,1\n";
    let refused = weights_from_bytes("d.csv", data.as_bytes(), None).unwrap_err();
    assert!(refused.to_string().contains("`open` is a price or volume column"), "{refused}");
    let no_symbol = weights_from_bytes("w.csv", b"time,p1\n2020-01-01,0.5\n", None).unwrap_err();
    assert_eq!(no_symbol.findings[0].class, IssueClass::MissingColumn);
}
