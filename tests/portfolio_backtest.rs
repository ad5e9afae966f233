//! Portfolio backtests (issue 55, item 5) on hand-checkable numbers: target weights filled at the next open
//! with the half spread and commission, sells before buys, a purchase the cash limits, no trade without a
//! bar, the breaker and bankruptcy on the account, the end-of-data close; the host's refusals; and
//! `tradesim backtest --weights` end to end (exports that add up, refusals that name file, row, column and
//! symbol).

use std::process::Command;

use tradesim::{AccountFill, Backend, BacktestSpec, Bar, ExitReason, HostError, TrialParams, UniverseMarket};

fn bar(open: f64, close: f64) -> Bar {
    Bar { open, high: open.max(close), low: open.min(close), close, sigma: 0.0 }
}

/// A cell without a bar: the last close everywhere, flag 0.
fn carried(close: f64) -> Bar {
    Bar { open: close, high: close, low: close, close, sigma: 0.0 }
}

fn spec(end: usize) -> BacktestSpec {
    BacktestSpec { start: 0, end, bars_per_year: 252.0, risk_free: 0.0, ledger: true, equity: true }
}

/// `a` within 1e-12 relative of `b`.
fn close_to(what: &str, a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{what}: {a} vs {b}");
}

/// (bar, symbol, reason, limited) of each fill.
fn shape(fills: &[AccountFill]) -> Vec<(u32, u32, ExitReason, u32)> {
    fills.iter().map(|f| (f.bar, f.symbol, ExitReason::from_code(f.reason), f.limited)).collect()
}

/// Two symbols, 1,000 of cash, spread 0.002, commission 0.001. At t0 both target 0.5; B has no bar at t1, so
/// only A trades there: 50 units at 10.01. At t1 B targets 0.5 of 1,098.9995 (A opens at 12 on t2): 24.98
/// units at 22.022 cost more than the 498.9995 of cash, so it buys 498.9995 / 1.001 / 22.022. The end closes
/// A first (it moves more value) at 13 x 0.999, then B at 25 x 0.999.
#[test]
fn weights_fill_at_the_next_open_within_the_cash() {
    let bars = vec![bar(10.0, 10.0), bar(20.0, 20.0), bar(10.0, 11.0), carried(20.0), bar(12.0, 12.0), bar(22.0, 24.0)];
    let bars = [bars, vec![bar(12.0, 13.0), bar(24.0, 25.0)]].concat();
    let market = UniverseMarket::new(bars, vec![1, 1, 1, 0, 1, 1, 1, 1], 2).unwrap();
    let params = TrialParams { spread: 0.002, commission: 0.001, ..TrialParams::frictionless(1_000.0) };
    let nan = f64::NAN;
    let weights = [0.5, 0.5, nan, 0.5, nan, nan];
    let r = tradesim::backtest_portfolios(&Backend::Cpu, &market, &[params], &weights, &spec(3)).unwrap();
    let fills = r.column_fills(0);
    assert_eq!(
        shape(fills),
        [
            (1, 0, ExitReason::Signal, 0),
            (2, 1, ExitReason::Signal, 1),
            (3, 0, ExitReason::EndOfData, 0),
            (3, 1, ExitReason::EndOfData, 0)
        ]
    );
    let buy = |p: f64| p * (1.0 + 0.5 * 0.002);
    let sell = |p: f64| p * (1.0 - 0.5 * 0.002);
    let cash1 = 1_000.0 - 50.0 * buy(10.0) - 0.001 * (50.0 * buy(10.0));
    close_to("cash after A", cash1, 498.9995);
    let b_units = cash1 / 1.001 / buy(22.0);
    close_to("A's units", fills[0].units, 50.0);
    close_to("B's units", fills[1].units, b_units);
    close_to("B's price", fills[1].price, 22.022);
    let equity = &r.equity;
    close_to("equity at t1", equity[1], cash1 + 50.0 * 11.0);
    close_to("equity at t2", equity[2], 50.0 * 12.0 + b_units * 24.0);
    let end = 50.0 * sell(13.0) * 0.999 + b_units * sell(25.0) * 0.999;
    close_to("final equity", r.metrics[0].final_equity, end);
    close_to("units sold at the end", fills[2].units + fills[3].units, -50.0 - b_units);
    assert_eq!(r.metrics[0].trades, 4.0);
}

/// The breaker on the account: all in at 10, a close at 8 (20% below the peak, the limit 10%), everything
/// sold at the next open (9) for `Breaker`; then nothing trades and the equity stays.
#[test]
fn the_breaker_closes_everything_at_the_next_open() {
    let bars = vec![bar(10.0, 10.0), bar(10.0, 8.0), bar(9.0, 9.5), bar(9.5, 12.0)];
    let market = UniverseMarket::new(bars, vec![1; 4], 1).unwrap();
    let params = TrialParams { max_drawdown: 0.1, ..TrialParams::frictionless(1_000.0) };
    let r = tradesim::backtest_portfolios(&Backend::Cpu, &market, &[params], &[1.0, 1.0, 1.0], &spec(3)).unwrap();
    let fills = r.column_fills(0);
    assert_eq!(shape(fills), [(1, 0, ExitReason::Signal, 0), (2, 0, ExitReason::Breaker, 0)]);
    assert_eq!((fills[0].units, fills[1].units), (100.0, -100.0));
    assert_eq!(r.equity, [1_000.0, 800.0, 900.0, 900.0]);
}

/// The breaker waits for a symbol without a bar: A and B half each at 10, closes at 8; A is sold at the next
/// open (9), B (no bar there) at its next bar's open (6), both for `Breaker`; nothing is left for the end.
#[test]
fn the_breaker_closes_a_symbol_without_a_bar_at_its_next_bar() {
    let bars = vec![bar(10.0, 10.0), bar(10.0, 10.0), bar(10.0, 8.0), bar(10.0, 8.0), bar(9.0, 9.0), carried(8.0)];
    let bars = [bars, vec![bar(9.0, 9.0), bar(6.0, 6.0), bar(9.0, 9.0), bar(7.0, 7.0)]].concat();
    let market = UniverseMarket::new(bars, vec![1, 1, 1, 1, 1, 0, 1, 1, 1, 1], 2).unwrap();
    let params = TrialParams { max_drawdown: 0.1, ..TrialParams::frictionless(1_000.0) };
    let r = tradesim::backtest_portfolios(&Backend::Cpu, &market, &[params], &[0.5; 8], &spec(4)).unwrap();
    let fills = r.column_fills(0);
    let breaker = ExitReason::Breaker;
    assert_eq!(
        shape(fills),
        [(1, 0, ExitReason::Signal, 0), (1, 1, ExitReason::Signal, 0), (2, 0, breaker, 0), (3, 1, breaker, 0)]
    );
    assert_eq!(r.equity, [1_000.0, 800.0, 850.0, 750.0, 750.0]);
}

/// Bankruptcy: all in short at 10 (100 units sold, 2,000 of cash) and a close at 20: the account is worth 0,
/// the short is bought back at that close, and nothing happens after.
#[test]
fn bankruptcy_closes_at_the_close_and_ends_the_account() {
    let bars = vec![bar(10.0, 10.0), bar(10.0, 20.0), bar(20.0, 5.0), bar(5.0, 5.0)];
    let market = UniverseMarket::new(bars, vec![1; 4], 1).unwrap();
    let params = TrialParams::frictionless(1_000.0);
    let r = tradesim::backtest_portfolios(&Backend::Cpu, &market, &[params], &[-1.0, -1.0, -1.0], &spec(3)).unwrap();
    let fills = r.column_fills(0);
    assert_eq!(shape(fills), [(1, 0, ExitReason::Signal, 0), (1, 0, ExitReason::Bankruptcy, 0)]);
    assert_eq!((fills[0].units, fills[1].units, fills[1].price), (-100.0, 100.0, 20.0));
    assert_eq!(r.equity, [1_000.0, 0.0, 0.0, 0.0]);
    // Without shorts the same weights are flat: nothing trades.
    let long_only = TrialParams { allow_short: 0, ..params };
    let r = tradesim::backtest_portfolios(&Backend::Cpu, &market, &[long_only], &[-1.0, -1.0, -1.0], &spec(3)).unwrap();
    assert!(r.fills.is_empty() && r.metrics[0].final_equity == 1_000.0);
}

/// The host refuses what the rule does not use and shapes that do not fit, naming them.
#[test]
fn the_host_refuses_what_a_portfolio_cannot_use() {
    let market = UniverseMarket::new(vec![bar(10.0, 10.0); 6], vec![1; 6], 2).unwrap();
    let reserve = TrialParams { cash_reserve_pct: 0.1, ..TrialParams::frictionless(1_000.0) };
    let run = |p: TrialParams, w: &[f64]| tradesim::backtest_portfolios(&Backend::Cpu, &market, &[p], w, &spec(2));
    let err = run(reserve, &[0.5; 4]).unwrap_err();
    assert!(matches!(err, HostError::InvalidParam { field: "cash_reserve_pct", .. }), "{err}");
    let err = run(TrialParams::frictionless(1_000.0), &[0.5; 5]).unwrap_err();
    assert!(matches!(err, HostError::Shape { got: 5, .. }), "{err}");
    let err = run(TrialParams::frictionless(1_000.0), &[0.5, 0.5, f64::INFINITY, 0.5]).unwrap_err().to_string();
    assert!(err.contains("column 0: the target weight of symbol 0 decided at time 1 is inf"), "{err}");
    let err = UniverseMarket::new(vec![bar(10.0, 10.0); 5], vec![1; 5], 2).unwrap_err();
    assert!(matches!(err, HostError::Shape { .. }), "{err}");
}

/// The equal-weight buy-and-hold benchmark without costs: each symbol bought to 1/N of the equity at its
/// first fill and held, so the final equity is the capital's N parts each grown by its symbol's move from
/// that open to the last close; a symbol listed later is bought at its first bar's open.
#[test]
fn the_equal_weight_hold_buys_each_symbol_once_and_holds_it() {
    use rust_decimal::Decimal;
    use tradesim::data::universe::Universe;
    use tradesim::data::{Dataset, MarketBar, Series};
    use tradesim::portfolio::{PortfolioRequest, equal_weight_hold, run_portfolios};
    let time = |d: i64| chrono::DateTime::from_timestamp(1_600_000_000 + d * 86_400, 0).unwrap().fixed_offset();
    let series = |symbol: &str, first: i64, prices: &[(i64, i64)]| Series {
        symbol: symbol.to_owned(),
        bars: prices
            .iter()
            .enumerate()
            .map(|(k, &(o, c))| {
                let (o, c) = (Decimal::from(o), Decimal::from(c));
                MarketBar {
                    time: time(first + k as i64),
                    open: o,
                    high: o.max(c),
                    low: o.min(c),
                    close: c,
                    volume: Decimal::ONE,
                }
            })
            .collect(),
    };
    // A from day 0, B from day 2 (its first bar's open 40), C from day 0 falling.
    let a = series("A", 0, &[(10, 10), (10, 12), (12, 14), (14, 15), (15, 16), (16, 20)]);
    let b = series("B", 2, &[(40, 42), (42, 44), (44, 46), (46, 50)]);
    let c = series("C", 0, &[(30, 30), (30, 27), (27, 25), (25, 24), (24, 21), (21, 15)]);
    let universe =
        Universe::new(Dataset { source: "three".to_owned(), synthetic: true, series: vec![a, b, c] }, None).unwrap();
    let weights = equal_weight_hold(&universe).unwrap();
    assert_eq!(weights.orders.len(), 3, "one order a symbol");
    assert_eq!(weights.orders.iter().map(|o| (o.time, o.symbol)).collect::<Vec<_>>(), [(0, 0), (0, 2), (1, 1)]);
    let req = PortfolioRequest {
        capital: Decimal::from(3_000),
        spread: Decimal::ZERO,
        commission: Decimal::ZERO,
        whole_units: false,
        allow_short: false,
        bars_per_year: Some(252.0),
    };
    let run = run_portfolios(&Backend::Cpu, &universe, &weights, &req).unwrap();
    // A and C are bought at time 1's opens (10 and 30) with 1,000 each; 1,000 stays in cash. B's order is
    // decided at time 1's close (equity 1,200 + 900 + 1,000 = 3,100, target 1,033.33) and fills at 40 on
    // time 2, limited by the 1,000 of cash: 25 units. The end values A's 100 units at 20, C's 33.33 at 15
    // and B's 25 at 50.
    let expected = 100.0 * 20.0 + (1_000.0 / 30.0) * 15.0 + (1_000.0 / 40.0) * 50.0;
    close_to("final equity", run.result.metrics[0].final_equity, expected);
    assert_eq!(run.result.metrics[0].trades, 6.0, "three buys and three closes at the end");
}

fn tradesim(args: &[&str]) -> std::process::Output {
    let bin = std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned());
    Command::new(bin).args(args).output().expect("run tradesim")
}

/// `tradesim backtest --weights` end to end: the fills ledger's cash flows add up to the final equity (all
/// closed at the end), the equity export ends at it, the JSON ranks both portfolios; a weights file with an
/// unknown symbol exits with 2 naming file, row, column and symbol.
#[test]
fn the_command_backtests_portfolios() {
    let dir = std::env::temp_dir().join(format!("tradesim-portfolio-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut data = String::from("ticker,date,open,high,low,close,volume\n");
    for (s, base) in [("AAA", 10.0), ("BBB", 50.0)] {
        for d in 1..=20 {
            let o = base + f64::from(d) * 0.5;
            let c = o + if d % 3 == 0 { -0.25 } else { 0.75 };
            data += &format!("{s},2021-03-{d:02},{o},{},{},{c},1000\n", o.max(c) + 0.1, o.min(c) - 0.1);
        }
    }
    let (data_path, weights_path) = (dir.join("u.csv"), dir.join("w.csv"));
    std::fs::write(&data_path, data).unwrap();
    let mut weights = String::from("date,symbol,half,tilt\n");
    for d in [1, 6, 11, 16] {
        weights += &format!("2021-03-{d:02},AAA,0.5,0.8\n2021-03-{d:02},BBB,0.5,0.1\n");
    }
    std::fs::write(&weights_path, weights).unwrap();
    let (json, equity, fills) = (dir.join("m.json"), dir.join("e.csv"), dir.join("f.csv"));
    let p = |x: &std::path::Path| x.to_str().unwrap().to_owned();
    let args = [
        "backtest",
        "--data",
        &p(&data_path),
        "--weights",
        &p(&weights_path),
        "--device",
        "cpu",
        "--json",
        &p(&json),
        "--equity",
        &p(&equity),
        "--trades",
        &p(&fills),
        "--columns",
        "all",
        "--capital",
        "10000",
    ];
    let out = tradesim(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("2 symbols (AAA, BBB) on 20 times") && stdout.contains("Decimal audit"), "{stdout}");
    assert!(stdout.contains("benchmark: equal-weight buy-and-hold of the 2 symbols: total "), "{stdout}");
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Both symbols rise over the 20 days: the benchmark ends above its capital, after its two buys and two
    // end-of-data closes.
    let benchmark = &m["benchmark"];
    assert_eq!(benchmark["portfolio"], "equal-weight buy-and-hold", "{benchmark}");
    assert!(benchmark["final_equity"].as_f64().unwrap() > 10_000.0, "{benchmark}");
    assert_eq!(benchmark["trades"].as_f64(), Some(4.0), "{benchmark}");
    let portfolios = m["portfolios"].as_array().unwrap();
    assert_eq!((portfolios.len(), m["orders"].as_u64(), m["unfilled_orders"].as_u64()), (2, Some(8), Some(0)));
    let fills_text = std::fs::read_to_string(&fills).unwrap();
    let equity_text = std::fs::read_to_string(&equity).unwrap();
    let last_equity: Vec<f64> =
        equity_text.lines().last().unwrap().split(',').skip(2).map(|x| x.parse().unwrap()).collect();
    for (c, name) in ["half", "tilt"].iter().enumerate() {
        let mut cash = 10_000.0;
        for line in fills_text.lines().skip(1).filter(|l| l.starts_with(&format!("{name},"))) {
            let cells: Vec<&str> = line.split(',').collect();
            let (units, price, commission): (f64, f64, f64) =
                (cells[5].parse().unwrap(), cells[6].parse().unwrap(), cells[7].parse().unwrap());
            cash -= units * price + commission;
        }
        let row = portfolios.iter().find(|r| r["portfolio"] == *name).unwrap();
        let final_equity = row["final_equity"].as_f64().unwrap();
        assert!((cash - final_equity).abs() < 1e-6, "{name}: fills give {cash}, final equity {final_equity}");
        assert_eq!(last_equity[c], final_equity, "{name}");
        // Each symbol's contribution is its own fills' cash; together they are the profit.
        let by_symbol = &row["contributions"];
        let (a, b) = (by_symbol["AAA"].as_f64().unwrap(), by_symbol["BBB"].as_f64().unwrap());
        assert!((a + b - (final_equity - 10_000.0)).abs() < 1e-6, "{name}: {a} + {b} vs {final_equity}");
        assert!(a != 0.0 && b != 0.0, "{name}: both symbols traded");
    }
    std::fs::write(&weights_path, "date,symbol,half\n2021-03-01,AAA,0.5\n2021-03-01,ZZZ,0.5\n").unwrap();
    let out = tradesim(&["backtest", "--data", &p(&data_path), "--weights", &p(&weights_path), "--device", "cpu"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("w.csv:3:symbol: error[bad-row]: symbol ZZZ: `ZZZ` is not a symbol of the data"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
