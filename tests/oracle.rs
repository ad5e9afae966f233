//! The engine against an independent oracle (tests/common/oracle.rs, a plain Decimal backtester): random
//! bars with gaps and jumps, costs, sizing, windows, both signal rules, barriers, breakers and bankruptcies
//! (property tests, CPU and GPU), and a public daily stock file with backtesting.py's SmaCross rules.
//! Trade lists must be identical (bars, sides, exit reasons; units exactly when whole), prices, PnL, costs
//! and every bar's equity within 1e-9 relative (of the capital where a value is near zero).

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;

use common::oracle::{self, ExitReason, OBar, Rules};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rust_decimal::Decimal;
use rust_decimal::prelude::*;
use tradesim::{Backend, BacktestResult, BacktestSpec, Bar, MarketData, Signals, SmaCross, backtest};

#[path = "common/shared_data.rs"]
mod shared_data;
use shared_data::shared_data;

/// One random case.
#[derive(Clone, Debug)]
struct Case {
    bars: Vec<OBar>,
    rules: Rules,
    fast: u32,
    slow: u32,
    cross: bool,
}

/// Bars in cents from per-bar draws: a close-to-close move of up to 3%, a small gap at the open (a jump to
/// half or double the price one bar in 25 each), wicks, and a sigma with nine places (barrier levels off
/// the cent grid, so no exact touch).
fn bars() -> impl Strategy<Value = Vec<OBar>> {
    let draw = (-300i64..=300, -40i64..=40, 0i64..150, 0i64..150, 0u32..50, 5_000_000i64..40_000_000);
    (500i64..20_000, prop::collection::vec(draw, 40..260)).prop_map(|(first, draws)| {
        let mut prev = first;
        let mut out = Vec::with_capacity(draws.len());
        for (i, (ret, gap, up, down, jump, sigma)) in draws.into_iter().enumerate() {
            let open = match jump {
                _ if i == 0 => prev,
                0 => prev / 2,
                1 => prev * 2,
                _ => prev * (10_000 + gap) / 10_000,
            }
            .max(1);
            let close = (open * (10_000 + ret) / 10_000).max(1);
            let high = open.max(close) * (10_000 + up) / 10_000;
            let low = (open.min(close) * (10_000 - down) / 10_000).max(1);
            let cents = |c: i64| Decimal::new(c, 2);
            out.push(OBar {
                open: cents(open),
                high: cents(high),
                low: cents(low),
                close: cents(close),
                sigma: Decimal::new(sigma, 9),
            });
            prev = close;
        }
        out
    })
}

fn rules() -> impl Strategy<Value = Rules> {
    let frac = |places: u32, range: std::ops::Range<i64>| range.prop_map(move |k| Decimal::new(k, places));
    let or_zero = move |places: u32, range: std::ops::Range<i64>| prop_oneof![Just(Decimal::ZERO), frac(places, range)];
    (
        prop::sample::select(vec![1_000i64, 10_000, 100_000]),
        or_zero(6, 1..2_000),
        or_zero(6, 1..1_000),
        or_zero(4, 1..1_000),
        or_zero(6, 20_000..300_000),
        (or_zero(6, 300_000..3_000_000), or_zero(6, 300_000..3_000_000)),
        prop_oneof![Just(0u32), 1u32..30],
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(capital, spread, commission, reserve, max_drawdown, (tp, sl), max_hold, (exits, short, whole))| Rules {
                capital: Decimal::from(capital),
                spread,
                commission,
                reserve,
                max_drawdown,
                take_profit: tp,
                stop_loss: sl,
                max_hold,
                barrier_exits: exits,
                allow_short: short,
                whole_units: whole,
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (bars(), rules(), 1u32..15, 2u32..40, any::<bool>()).prop_map(|(bars, rules, fast, slow, cross)| Case {
        bars,
        rules,
        fast,
        slow,
        cross,
    })
}

/// The engine's bars for Decimal ones.
fn engine_bars(bars: &[OBar]) -> Vec<Bar> {
    let f = |d: Decimal| d.to_f64().expect("a price converts to f64");
    bars.iter()
        .map(|b| Bar { open: f(b.open), high: f(b.high), low: f(b.low), close: f(b.close), sigma: f(b.sigma) })
        .collect()
}

/// Runs one SMA column on the engine over all of `bars`.
fn engine_run(backend: &Backend, bars: &[OBar], rules: &Rules, sma: SmaCross) -> BacktestResult {
    let market = MarketData::from_bars(engine_bars(bars), Vec::new(), 0).unwrap();
    let spec = BacktestSpec {
        start: 0,
        end: bars.len() - 1,
        bars_per_year: 252.0,
        risk_free: 0.0,
        ledger: true,
        equity: true,
    };
    backtest(backend, &market, &[rules.to_params()], Signals::SmaCross(&[sma]), &spec).unwrap()
}

/// The engine's result against the oracle's run: the first difference, if any.
fn compare(got: &BacktestResult, want: &oracle::Run, rules: &Rules) -> Result<(), String> {
    let capital = rules.capital.to_f64().unwrap();
    let f = |d: Decimal| d.to_f64().unwrap();
    let near = |what: &str, i: usize, a: f64, b: Decimal, scale: f64| {
        let b = f(b);
        if (a - b).abs() <= 1e-9 * b.abs().max(scale) {
            Ok(())
        } else {
            Err(format!("{what} {i}: engine {a}, oracle {b}"))
        }
    };
    let trades = got.column_trades(0);
    let key = |t: &tradesim::Trade| (t.entry_bar as usize, t.exit_bar as usize, t.side, t.reason);
    let want_keys: Vec<_> = want.trades.iter().map(|t| (t.entry_bar, t.exit_bar, t.side, t.exit as u32)).collect();
    let got_keys: Vec<_> = trades.iter().map(key).collect();
    if got_keys != want_keys {
        return Err(format!("trades (entry, exit, side, reason): engine {got_keys:?}, oracle {want_keys:?}"));
    }
    for (i, (g, w)) in trades.iter().zip(&want.trades).enumerate() {
        if rules.whole_units {
            if g.units != f(w.units) {
                return Err(format!("units of trade {i}: engine {}, oracle {}", g.units, w.units));
            }
        } else {
            near("units of trade", i, g.units, w.units, 0.0)?;
        }
        near("entry price of trade", i, g.entry_price, w.entry_price, 0.0)?;
        near("exit price of trade", i, g.exit_price, w.exit_price, 0.0)?;
        near("pnl of trade", i, g.pnl, w.pnl, capital)?;
        near("costs of trade", i, g.costs, w.costs, capital)?;
    }
    if got.equity.len() != want.equity.len() {
        return Err(format!("equity points: engine {}, oracle {}", got.equity.len(), want.equity.len()));
    }
    for (i, (&g, &w)) in got.equity.iter().zip(&want.equity).enumerate() {
        near("equity at bar", i, g, w, capital)?;
    }
    let m = &got.metrics[0];
    near("final equity", 0, m.final_equity, *want.equity.last().unwrap(), capital)?;
    near("total costs", 0, m.total_costs, want.trades.iter().map(|t| t.costs).sum(), capital)?;
    Ok(())
}

/// Random cases on `backend`: every one agrees with the oracle; across them every exit reason occurs.
fn random_cases_match_the_oracle(backend: &Backend) {
    let cases = 1_500;
    let reasons = Mutex::new(BTreeMap::<u32, usize>::new());
    // A fixed seed: the same 1,500 cases on every run and backend (CI must not pass or fail by the draw).
    // Other seeds found two classes of f64-against-Decimal boundaries: an exact whole-unit quotient (fixed,
    // `whole_units_at_an_exact_quotient`) and an all-in short whose equity is exactly zero at a close
    // (bankrupt in f64, not in Decimal, or the reverse; settled by the bankruptcy slack,
    // `exact_zero_equity_is_bankrupt`).
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    let rng = proptest::test_runner::TestRng::deterministic_rng(config.rng_algorithm);
    let mut runner = TestRunner::new_with_rng(config, rng);
    runner
        .run(&case(), |c| {
            let closes: Vec<Decimal> = c.bars.iter().map(|b| b.close).collect();
            let sides = oracle::sma_sides(&closes, c.fast as usize, c.slow as usize, c.cross);
            let want = oracle::run(&c.bars, &sides, &c.rules, 0, c.bars.len() - 1);
            let rule = if c.cross { tradesim::RULE_CROSS } else { tradesim::RULE_STATE };
            let sma = SmaCross { fast: c.fast, slow: c.slow, allow_short: u32::from(c.rules.allow_short), rule };
            let got = engine_run(backend, &c.bars, &c.rules, sma);
            compare(&got, &want, &c.rules).map_err(TestCaseError::fail)?;
            let mut tally = reasons.lock().unwrap();
            for t in &want.trades {
                *tally.entry(t.exit as u32).or_default() += 1;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let tally = reasons.into_inner().unwrap();
    eprintln!("{cases} cases, trades by exit reason: {tally:?}");
    for reason in [
        ExitReason::Signal,
        ExitReason::TakeProfit,
        ExitReason::StopLoss,
        ExitReason::Time,
        ExitReason::Breaker,
        ExitReason::EndOfData,
        ExitReason::Bankruptcy,
    ] {
        assert!(tally.get(&(reason as u32)).copied().unwrap_or(0) >= 5, "too few {reason:?} exits: {tally:?}");
    }
    assert!(tally.values().sum::<usize>() > 5 * cases as usize, "too few trades: {tally:?}");
}
test_device!(random_cases_match_the_oracle);

/// The oracle's own rules on hand-checkable bars (so that it is not trusted blindly either): a cross at
/// bar 3's close is filled at bar 4's open with the half spread and commission, and closed at the last
/// close.
#[test]
fn the_oracle_on_a_hand_checked_path() {
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    let closes = ["10", "9", "8", "12", "13", "14"];
    let bars: Vec<OBar> = closes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let o = if i == 0 { d(c) } else { d(closes[i - 1]) };
            OBar { open: o, high: o.max(d(c)), low: o.min(d(c)), close: d(c), sigma: Decimal::ZERO }
        })
        .collect();
    let sides = oracle::sma_sides(&bars.iter().map(|b| b.close).collect::<Vec<_>>(), 1, 2, true);
    // SMA 1 vs SMA 2: bar 1: 9 < 9.5, bar 2: 8 < 8.5, bar 3: 12 > 10 (the cross), then above.
    assert_eq!(sides, [0, 0, 0, 1, 1, 1]);
    let rules = Rules::all_in(d("1000"), d("0.002"), d("0.001"));
    let run = oracle::run(&bars, &sides, &rules, 0, 5);
    // Filled at 12 x 1.001 = 12.012: floor(1000 / 12.012) = 83 units, commission 0.001 x 83 x 12.012.
    let t = run.trades[0];
    assert_eq!((run.trades.len(), t.entry_bar, t.exit_bar, t.side, t.exit), (1, 4, 5, 1, ExitReason::EndOfData));
    assert_eq!((t.units, t.entry_price, t.exit_price), (d("83"), d("12.012"), d("13.986")));
    let cash = d("1000") - d("83") * d("12.012") * d("1.001") + d("83") * d("13.986") * d("0.999");
    assert_eq!(*run.equity.last().unwrap(), cash);
    assert_eq!(t.pnl, cash - d("1000"));
    assert_eq!(run.equity[4], d("1000") - d("83") * d("12.012") * d("1.001") + d("83") * d("13"));
}

/// Whole units at an exact quotient: all in with 1,100 at an open of 1.10 buys exactly 1,000 units. The f64
/// quotient of the two is 999.9999999999999 (1.1 has no exact binary form), so a plain floor buys one unit
/// less than the Decimal rules; the engine's floor allows a relative slack of 1e-12 (a random property case
/// found this on the H200: units 20,319 against the oracle's 20,320).
fn whole_units_at_an_exact_quotient(backend: &Backend) {
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    let closes = ["1.00", "1.05", "1.12", "1.15", "1.13"];
    let opens = ["1.00", "1.02", "1.10", "1.12", "1.16"];
    let bars: Vec<OBar> = closes
        .iter()
        .zip(opens)
        .map(|(c, o)| OBar { open: d(o), high: d(o).max(d(c)), low: d(o).min(d(c)), close: d(c), sigma: Decimal::ZERO })
        .collect();
    let rules = Rules::all_in(d("1100"), Decimal::ZERO, Decimal::ZERO);
    let sides = oracle::sma_sides(&closes.map(d), 1, 2, false);
    let want = oracle::run(&bars, &sides, &rules, 0, bars.len() - 1);
    assert_eq!((want.trades[0].entry_bar, want.trades[0].units), (2, d("1000")));
    let sma = SmaCross { fast: 1, slow: 2, allow_short: 1, rule: tradesim::RULE_STATE };
    let got = engine_run(backend, &bars, &rules, sma);
    compare(&got, &want, &rules).unwrap();
}
test_device!(whole_units_at_an_exact_quotient);

/// An all-in short with fractional units whose price doubles by the close: its equity is exactly zero in
/// Decimal and a residue of either sign around 1e-16 of the capital in f64, so the side of zero decided
/// bankruptcy differently (a random property case found this: engine Bankruptcy, oracle EndOfData). With
/// the bankruptcy slack (1e-12 of the capital) both close the trade for bankruptcy at that close, for every
/// fill price tried.
fn exact_zero_equity_is_bankrupt(backend: &Backend) {
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    let mut rules = Rules::all_in(d("1000"), Decimal::ZERO, Decimal::ZERO);
    rules.whole_units = false;
    // Fills whose f64 residue is positive (0.11 .. 0.73), negative (15 .. 0.37) and zero (3, 7).
    for fill in ["0.11", "19", "2.7", "5.4", "0.73", "15", "1.9", "0.21", "29", "0.37", "3", "7"] {
        let p = d(fill);
        // SMA 1 vs 2 (state rule): bar 1 closes below bar 0, so the side at its close is short, filled at
        // bar 2's open `p`; bar 2 closes at 2p.
        let ohlc = [(d("10"), d("10")), (d("10"), d("9")), (p, p * d("2")), (p * d("2"), p * d("2"))];
        let bars: Vec<OBar> = ohlc
            .iter()
            .map(|&(o, c)| OBar { open: o, high: o.max(c), low: o.min(c), close: c, sigma: Decimal::ZERO })
            .collect();
        let closes: Vec<Decimal> = bars.iter().map(|b| b.close).collect();
        let want = oracle::run(&bars, &oracle::sma_sides(&closes, 1, 2, false), &rules, 0, bars.len() - 1);
        let t = want.trades[0];
        assert_eq!((want.trades.len(), t.side, t.exit_bar, t.exit), (1, -1, 2, ExitReason::Bankruptcy), "fill {fill}");
        let sma = SmaCross { fast: 1, slow: 2, allow_short: 1, rule: tradesim::RULE_STATE };
        let got = engine_run(backend, &bars, &rules, sma);
        compare(&got, &want, &rules).unwrap_or_else(|e| panic!("fill {fill}: {e}"));
    }
}
test_device!(exact_zero_equity_is_bankrupt);

/// AAPL daily 2000-2013 (unadjusted, Quandl WIKI via bokeh_sampledata): backtesting.py's SmaCross rules
/// (SMA 10 / 30 crossovers, close and reverse at the next open, all in, whole units, no costs) with the
/// last position closed at the last close: the engine's trades equal the oracle's bar for bar.
fn aapl_daily_sma_cross_matches_the_oracle(backend: &Backend) {
    let Some(dir) = shared_data() else { return };
    let policy = tradesim::data::CleanPolicy::default();
    let (data, _) =
        tradesim::data::load_file(&dir.join("stocks-daily-5-tickers.csv"), &policy).unwrap_or_else(|r| panic!("{r}"));
    let series = data.select(Some("AAPL")).unwrap();
    let market = tradesim::data::device::price_market(series).unwrap();
    let bars: Vec<OBar> = series
        .bars
        .iter()
        .map(|b| OBar { open: b.open, high: b.high, low: b.low, close: b.close, sigma: Decimal::ZERO })
        .collect();
    let rules = Rules::all_in(Decimal::from(10_000), Decimal::ZERO, Decimal::ZERO);
    let end = bars.len() - 1;
    let closes: Vec<Decimal> = bars.iter().map(|b| b.close).collect();
    let want = oracle::run(&bars, &oracle::sma_sides(&closes, 10, 30, true), &rules, 0, end);
    let spec = BacktestSpec { start: 0, end, bars_per_year: 252.0, risk_free: 0.0, ledger: true, equity: true };
    let sma = SmaCross { fast: 10, slow: 30, allow_short: 1, rule: tradesim::RULE_CROSS };
    let got = backtest(backend, &market, &[rules.to_params()], Signals::SmaCross(&[sma]), &spec).unwrap();
    compare(&got, &want, &rules).unwrap();
    assert!(want.trades.len() > 100, "{} trades", want.trades.len());
    // Crossovers alternate: every trade reverses the previous one.
    assert!(want.trades.windows(2).all(|w| w[0].side == -w[1].side && w[0].exit_bar == w[1].entry_bar));
}
test_device!(aapl_daily_sma_cross_matches_the_oracle);
