//! Backtests: metrics on hand-checkable series and against a plain reference computation, the ledger
//! (reversal, barrier exit, end-of-data close, whole units, no trades), the SMA signal, ranking, and the
//! Decimal audit — each on the CPU and the GPU.

mod common;

use common::bars;
use tradesim::audit::{DecimalParams, audit_column};
use tradesim::data::device::Prepared;
use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::{Backend, BacktestSpec, ExitReason, MarketData, Signals, SmaCross, TrialParams, backtest};

const FLAT: u8 = 0;
const LONG: u8 = 1;
const SHORT: u8 = 2;

fn spec(end: usize) -> BacktestSpec {
    BacktestSpec { start: 0, end, bars_per_year: 252.0, risk_free: 0.0, ledger: true, equity: true }
}

/// Bars without gaps (each open is the previous close) closing at `closes`.
fn path(closes: &[f64]) -> MarketData {
    let ohlc: Vec<_> = closes
        .iter()
        .enumerate()
        .map(|(t, &c)| {
            let o = if t == 0 { c } else { closes[t - 1] };
            (o, o.max(c), o.min(c), c)
        })
        .collect();
    MarketData::from_bars(bars(&ohlc, 0.01), Vec::new(), 0).unwrap()
}

/// Always long on closes 100, 110, 99, 108.9, 119.79 with 1,000: 10 units, equity 1,100, 990, 1,089,
/// 1,197.9; returns 0.1, -0.1, 0.1, 0.1: mean 0.05, std (ddof 1) 0.1, downside deviation
/// sqrt(0.01 / 4) = 0.05; max drawdown -10% from bar 1, regained at bar 4 (3 bars).
fn metrics_by_hand(backend: &Backend) {
    let market = path(&[100.0, 110.0, 99.0, 108.9, 119.79]);
    let r = backtest(
        backend,
        &market,
        &[TrialParams::frictionless(1_000.0)],
        Signals::Targets { targets: &[LONG; 4], columns: 1 },
        &spec(4),
    )
    .unwrap();
    let m = r.metrics[0];
    let close = |what: &str, got: f64, want: f64| {
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{what}: {got} vs {want}")
    };
    close("total return", m.total_return, 0.1979);
    close("annual return", m.annual_return, 1.1979f64.powf(252.0 / 4.0) - 1.0);
    close("volatility", m.annual_volatility, 0.1 * 252f64.sqrt());
    close("sharpe", m.sharpe, 0.5 * 252f64.sqrt());
    close("sortino", m.sortino, 0.05 * 252.0 / (0.05 * 252f64.sqrt()));
    close("max drawdown", m.max_drawdown, -0.1);
    assert_eq!(m.max_drawdown_bars, 3.0);
    close("calmar", m.calmar, m.annual_return / 0.1);
    assert_eq!((m.trades, m.win_rate, m.profit_factor), (1.0, 1.0, f64::INFINITY));
    close("average trade return", m.avg_trade_return, 0.1979);
    assert_eq!((m.exposure, m.bars), (1.0, 4.0));
    close("final equity", m.final_equity, 1_197.9);
    assert_eq!(r.equity.len(), 5);
    close("equity at bar 2", r.equity[2], 990.0);
    let t = r.column_trades(0)[0];
    assert_eq!((t.entry_bar, t.exit_bar, t.side, ExitReason::from_code(t.reason)), (1, 4, 1, ExitReason::EndOfData));
    close("trade pnl", t.pnl, 197.9);
}
test_device!(metrics_by_hand);

/// A reversal is two trades; the second (short) is closed at the last close. Whole units with spread 0.2%:
/// 1,000 at 100 x 1.001 buys 9 units; the reversal at the next open (100) sells them at 99.9.
fn ledger_reversal_and_end_close(backend: &Backend) {
    let market = path(&[100.0, 100.0, 120.0, 110.0, 100.0]);
    let p = TrialParams { spread: 0.002, whole_units: 1, ..TrialParams::frictionless(1_000.0) };
    let r = backtest(
        backend,
        &market,
        &[p],
        Signals::Targets { targets: &[LONG, SHORT, SHORT, SHORT], columns: 1 },
        &spec(4),
    )
    .unwrap();
    let trades = r.column_trades(0);
    assert_eq!(trades.len(), 2);
    assert_eq!((trades[0].side, trades[0].units, trades[0].entry_bar, trades[0].exit_bar), (1, 9.0, 1, 2));
    assert_eq!(ExitReason::from_code(trades[0].reason), ExitReason::Signal);
    assert!((trades[0].entry_price - 100.1).abs() < 1e-9 && (trades[0].exit_price - 99.9).abs() < 1e-9);
    assert!((trades[0].pnl - 9.0 * (99.9 - 100.1)).abs() < 1e-9, "{}", trades[0].pnl);
    assert_eq!(
        (trades[1].side, ExitReason::from_code(trades[1].reason), trades[1].exit_bar),
        (-1, ExitReason::EndOfData, 4)
    );
    let m = r.metrics[0];
    assert_eq!(m.trades, 2.0);
    assert!((m.final_equity - (1_000.0 + trades[0].pnl + trades[1].pnl)).abs() < 1e-9);
    let costs: f64 = trades.iter().map(|t| t.costs).sum();
    assert!((m.total_costs - costs).abs() < 1e-12 && costs > 0.0);
}
test_device!(ledger_reversal_and_end_close);

/// A take-profit at 2 sigma (sigma 1%): long at 100 exits at 102 within bar 2; the ledger says so.
fn ledger_barrier_exit(backend: &Backend) {
    let ohlc = [
        (100.0, 100.0, 100.0, 100.0),
        (100.0, 101.0, 99.5, 100.5),
        (100.5, 102.5, 100.0, 102.2),
        (102.2, 102.2, 102.2, 102.2),
    ];
    let market = MarketData::from_bars(bars(&ohlc, 0.01), Vec::new(), 0).unwrap();
    let p = TrialParams { take_profit_mult: 2.0, ..TrialParams::frictionless(10_000.0) };
    let r = backtest(backend, &market, &[p], Signals::Targets { targets: &[LONG, LONG, FLAT], columns: 1 }, &spec(3))
        .unwrap();
    let t = r.column_trades(0);
    assert_eq!(t.len(), 1);
    assert_eq!(
        (ExitReason::from_code(t[0].reason), t[0].exit_bar, t[0].exit_price),
        (ExitReason::TakeProfit, 2, 102.0)
    );
}
test_device!(ledger_barrier_exit);

/// No trades: flat all along; undefined ratios are NaN, as documented.
fn zero_trade_column(backend: &Backend) {
    let market = path(&[100.0, 101.0, 102.0]);
    let r = backtest(
        backend,
        &market,
        &[TrialParams::frictionless(1_000.0)],
        Signals::Targets { targets: &[FLAT; 2], columns: 1 },
        &spec(2),
    )
    .unwrap();
    let m = r.metrics[0];
    assert_eq!((m.trades, m.total_return, m.exposure, m.max_drawdown), (0.0, 0.0, 0.0, 0.0));
    assert!(m.sharpe.is_nan() && m.sortino.is_nan() && m.win_rate.is_nan() && m.profit_factor.is_nan());
    assert!(m.calmar.is_nan() && m.avg_trade_return.is_nan());
    assert!(r.column_trades(0).is_empty());
}
test_device!(zero_trade_column);

/// The metrics of random columns equal a plain computation from their equity curves and ledgers.
fn metrics_match_a_plain_reference(backend: &Backend) {
    let p = TrialParams { spread: 0.0005, commission: 0.0002, ..TrialParams::frictionless(10_000.0) };
    plain_reference(backend, p, 0, 4);
}
test_device!(metrics_match_a_plain_reference);

/// Columns that the drawdown breaker ends (their later bars skip the signal and the account step): the
/// equity stays flat after the breaker's exit, and the metrics still equal the plain computation over
/// every bar (the flat bars' returns are zeros).
fn ended_columns_match_a_plain_reference(backend: &Backend) {
    let p =
        TrialParams { spread: 0.0005, commission: 0.0002, max_drawdown: 0.04, ..TrialParams::frictionless(10_000.0) };
    let r = plain_reference(backend, p, gpu_kernels::backtest::RULE_CROSS, 1);
    let mut ended = 0;
    for c in 0..r.metrics.len() {
        let Some(last) = r.column_trades(c).last().copied() else { continue };
        if ExitReason::from_code(last.reason) == ExitReason::Breaker {
            ended += 1;
            let eq = &r.equity[c * 3_000..(c + 1) * 3_000];
            let after = &eq[last.exit_bar as usize..];
            assert!(
                after.len() > 100 && after.iter().all(|&e| e == after[0]),
                "column {c}: not flat after the breaker"
            );
        }
    }
    assert!(ended >= 2, "only {ended} columns ended by the breaker: the test checks little");
}
test_device!(ended_columns_match_a_plain_reference);

/// [`metrics_match_a_plain_reference`] for trial `p` and signal rule `rule`, each column with `min_trades`
/// trades or more; returns the result.
fn plain_reference(backend: &Backend, p: TrialParams, rule: u32, min_trades: usize) -> tradesim::BacktestResult {
    let d = generate(&GeneratorConfig { bars: 3_000, symbols: 1, seed: 8, bar_seconds: 86_400 });
    let market = Prepared::new(&d.series[0], 0..3_000).unwrap().market_data(0..3_000).unwrap();
    let grid: Vec<SmaCross> = [(5, 20, 0), (10, 50, 1), (3, 7, 1), (20, 100, 0)]
        .iter()
        .map(|&(fast, slow, allow_short)| SmaCross { fast, slow, allow_short, rule })
        .collect();
    let s = BacktestSpec { risk_free: 0.0001, ..spec(2_999) };
    let r = backtest(backend, &market, &[p], Signals::SmaCross(&grid), &s).unwrap();
    for (c, m) in r.metrics.iter().enumerate() {
        let eq = &r.equity[c * 3_000..(c + 1) * 3_000];
        let rets: Vec<f64> = eq.windows(2).map(|w| w[1] / w[0] - 1.0 - 0.0001).collect();
        let n = rets.len() as f64;
        let mean = rets.iter().sum::<f64>() / n;
        let std = (rets.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let down = (rets.iter().map(|x| x.min(0.0).powi(2)).sum::<f64>() / n).sqrt();
        let mut peak = eq[0];
        let mut mdd = 0.0f64;
        for &e in eq {
            peak = peak.max(e);
            mdd = mdd.min(e / peak - 1.0);
        }
        let trades = r.column_trades(c);
        let wins = trades.iter().filter(|t| t.pnl > 0.0).count() as f64;
        let rel = |what: &str, got: f64, want: f64| {
            assert!((got - want).abs() <= 1e-9 * want.abs().max(1e-3), "column {c} {what}: {got} vs {want}")
        };
        rel("sharpe", m.sharpe, mean / std * 252f64.sqrt());
        rel("sortino", m.sortino, mean * 252.0 / (down * 252f64.sqrt()));
        rel("max drawdown", m.max_drawdown, mdd);
        rel("total return", m.total_return, eq[2_999] / eq[0] - 1.0);
        rel("win rate", m.win_rate, wins / trades.len() as f64);
        assert_eq!(m.trades as usize, trades.len());
        assert!(trades.len() >= min_trades, "column {c} should trade {min_trades} times or more");
    }
    let order = r.ranking(|m| m.sharpe);
    for w in order.windows(2) {
        assert!(r.metrics[w[0]].sharpe >= r.metrics[w[1]].sharpe);
    }
    r
}

/// The Decimal audit of a 20,000-bar SMA column with costs: final equity within 1e-9 relative.
fn decimal_audit_agrees(backend: &Backend) {
    let d = generate(&GeneratorConfig { bars: 20_000, symbols: 1, seed: 2, bar_seconds: 3_600 });
    let series = &d.series[0];
    let market = Prepared::new(series, 0..20_000).unwrap().market_data(0..20_000).unwrap();
    let dp = DecimalParams {
        initial_capital: "100000".parse().unwrap(),
        spread: "0.0002".parse().unwrap(),
        commission: "0.0001".parse().unwrap(),
        cash_reserve_pct: "0.01".parse().unwrap(),
        whole_units: false,
        allow_short: true,
    };
    let grid = [SmaCross { fast: 12, slow: 60, allow_short: 1, rule: 0 }];
    let r = backtest(backend, &market, &[dp.to_params().unwrap()], Signals::SmaCross(&grid), &spec(19_999)).unwrap();
    let report = audit_column(&series.bars, &dp, r.column_trades(0), &r.metrics[0]).unwrap();
    assert!(report.trades > 100, "{report}");
    assert!(report.equity_rel_diff < 1e-9, "{report}");
}
test_device!(decimal_audit_agrees);

#[test]
fn bad_specs_are_refused() {
    let market = path(&[100.0, 101.0, 102.0]);
    let p = [TrialParams::frictionless(1.0)];
    let err = backtest(&Backend::Cpu, &market, &p, Signals::Targets { targets: &[FLAT; 2], columns: 1 }, &spec(3))
        .unwrap_err();
    assert!(err.to_string().contains("start < end < bars"), "{err}");
    let err = backtest(&Backend::Cpu, &market, &p, Signals::Targets { targets: &[FLAT; 3], columns: 1 }, &spec(2))
        .unwrap_err();
    assert!(err.to_string().contains("expected 2, got 3"), "{err}");
    let bad = [SmaCross { fast: 0, slow: 5, allow_short: 0, rule: 0 }];
    assert!(backtest(&Backend::Cpu, &market, &p, Signals::SmaCross(&bad), &spec(2)).is_err());
}

/// Capital 100: a winning long (100 -> 120, +20), then a short of 1.2 units at 100 with the close going to
/// 250: equity 120 - 180 = -60, bankrupt. The short is closed at that close (reason Bankruptcy), so the loss
/// that ended the column is in the trade statistics (v1: win rate 1, profit factor inf, exposure 3/5) and
/// exposure stops with it.
fn a_bankrupt_column_closes_its_position(backend: &Backend) {
    let market = path(&[100.0, 100.0, 120.0, 100.0, 250.0, 250.0]);
    let targets = [LONG, LONG, FLAT, SHORT, FLAT];
    let r = backtest(
        backend,
        &market,
        &[TrialParams::frictionless(100.0)],
        Signals::Targets { targets: &targets, columns: 1 },
        &spec(5),
    )
    .unwrap();
    let m = r.metrics[0];
    let close = |what: &str, got: f64, want: f64| {
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{what}: {got} vs {want}")
    };
    assert_eq!((m.trades, m.win_rate), (2.0, 0.5));
    close("profit factor", m.profit_factor, 20.0 / 180.0);
    close("total return", m.total_return, -1.6);
    close("exposure", m.exposure, 2.0 / 5.0);
    let t = r.column_trades(0);
    assert_eq!(t.len(), 2);
    assert_eq!((t[1].side, t[1].exit_bar, ExitReason::from_code(t[1].reason)), (-1, 4, ExitReason::Bankruptcy));
    close("bankrupt exit price", t[1].exit_price, 250.0);
    close("bankrupt trade pnl", t[1].pnl, -180.0);
}
test_device!(a_bankrupt_column_closes_its_position);

/// empyrical's Sortino edge: no negative return and a positive mean is +inf (v1: NaN); a flat column
/// (mean 0) stays NaN.
fn sortino_without_losses_is_infinite(backend: &Backend) {
    let market = path(&[100.0, 110.0, 121.0, 133.1]);
    let run = |targets: &[u8]| {
        backtest(
            backend,
            &market,
            &[TrialParams::frictionless(1_000.0)],
            Signals::Targets { targets, columns: 1 },
            &spec(3),
        )
        .unwrap()
        .metrics[0]
    };
    assert_eq!(run(&[LONG; 3]).sortino, f64::INFINITY);
    assert!(run(&[FLAT; 3]).sortino.is_nan());
}
test_device!(sortino_without_losses_is_infinite);

/// `backtest` refuses the parameters an env refuses, naming the field (capital 0 gave NaN metrics).
#[test]
fn backtest_validates_its_parameters() {
    let market = path(&[100.0, 110.0, 121.0]);
    let err = backtest(
        &Backend::Cpu,
        &market,
        &[TrialParams::frictionless(0.0)],
        Signals::Targets { targets: &[LONG; 2], columns: 1 },
        &spec(2),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("initial_capital"), "{err}");
}

/// (side, entry bar) of each trade of a column.
type Entries = Vec<(i32, u32)>;

/// SMA 2 / 4 columns of both rules over `closes`: the (side, entry bar) of their trades.
fn rule_trades(backend: &Backend, closes: &[f64]) -> (Entries, Entries) {
    let market = path(closes);
    let run = |rule: u32| {
        let grid = [SmaCross { fast: 2, slow: 4, allow_short: 1, rule }];
        let p = [TrialParams::frictionless(1_000.0)];
        let r = backtest(backend, &market, &p, Signals::SmaCross(&grid), &spec(closes.len() - 1)).unwrap();
        r.column_trades(0).iter().map(|t| (t.side, t.entry_bar)).collect::<Vec<_>>()
    };
    (run(tradesim::RULE_STATE), run(tradesim::RULE_CROSS))
}

/// The cross rule acts on events only: closes rising from the start put fast (2) above slow (4) as soon as
/// both exist (bar 3), which is no crossover, so `cross` stays flat where `state` goes long at once; the
/// fall crosses fast below slow at bar 6's close (short from bar 7), the rise crosses back above at bar
/// 10's (long from bar 11). From the first event on, both rules hold the same side.
fn cross_acts_on_crossover_events_only(backend: &Backend) {
    let closes = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 11.0, 9.0, 8.0, 9.0, 12.0, 15.0, 16.0, 17.0];
    let (state, cross) = rule_trades(backend, &closes);
    assert_eq!(state, [(1, 4), (-1, 7), (1, 11)]);
    assert_eq!(cross, [(-1, 7), (1, 11)]);
}
test_device!(cross_acts_on_crossover_events_only);

/// A tie is not a crossover: fast above slow, then equal at bar 6's close (SMA 2 = SMA 4 = 13.5, exact in
/// binary), then below: no cross-below event (fast was not above at t - 1 when it went below), so `cross`
/// holds flat until the cross above at bar 10's close; `state` goes flat on the tie and short after it.
fn a_tie_is_not_a_crossover(backend: &Backend) {
    let closes = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 12.0, 9.0, 8.0, 9.0, 12.0, 15.0, 16.0, 17.0];
    let (state, cross) = rule_trades(backend, &closes);
    assert_eq!(state, [(1, 4), (-1, 8), (1, 11)]);
    assert_eq!(cross, [(1, 11)]);
}
test_device!(a_tie_is_not_a_crossover);

/// Exact ties: closes 1.1, 2.2, 1.65, 1.65 put SMA 2 and SMA 4 both at 1.65 at bar 3's close. Summed as
/// f64 the fast one came out 1.6499999999999997 (below: a short); on the data's ticks (cents, scale 2) the
/// sums are compared as integers, so the tie is a tie (flat, no trade) on both backends.
fn exact_ties_are_ties(backend: &Backend) {
    let market = path(&[1.1, 2.2, 1.65, 1.65, 1.65]);
    let (prefix, scale) = tradesim::backtest::tick_prefix(&market).unwrap();
    assert_eq!((scale, prefix.clone()), (2, vec![0, 110, 330, 495, 660, 825]));
    let grid = [SmaCross { fast: 2, slow: 4, allow_short: 1, rule: tradesim::RULE_STATE }];
    let r =
        backtest(backend, &market, &[TrialParams::frictionless(1_000.0)], Signals::SmaCross(&grid), &spec(4)).unwrap();
    assert_eq!(r.metrics[0].trades, 0.0, "{:?}", r.column_trades(0));
}
test_device!(exact_ties_are_ties);
