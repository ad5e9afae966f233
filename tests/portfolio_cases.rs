//! Hand-computed portfolio steps (ENVIRONMENT.md, "Actions and execution"), each run on the CPU and the GPU.
//! Every case is one env; its prices and the expected fills are written out so they can be checked by hand.

mod common;

use common::{assert_close, bars, walk_bars};
use tradesim::{Backend, EnvBatch, EnvConfig, EnvState, EnvStatus, MarketData, PriceSeries, SimLayout, TrialParams};

const FLAT: u8 = 0;
const LONG: u8 = 1;
const SHORT: u8 = 2;

/// Runs one env over `open`/`close` from bar 0 to the last bar, returning its state after each action.
fn walk(backend: &Backend, params: TrialParams, open: &[f64], close: &[f64], actions: &[u8]) -> Vec<EnvState> {
    let ohlc: Vec<_> = open.iter().zip(close).map(|(&o, &c)| (o, o.max(c), o.min(c), c)).collect();
    common::walk_bars(backend, params, &common::bars(&ohlc, 0.0), actions).0
}

/// A batch without a ring on explicit segments.
fn batch(
    backend: &Backend,
    prices: &PriceSeries,
    params: &[TrialParams],
    layout: SimLayout,
    segments: &[(u32, u32)],
) -> EnvBatch {
    let market = MarketData::prices_only(prices).unwrap();
    let cfg = EnvConfig { segment_len: 1, ..EnvConfig::default() };
    let mut envs = EnvBatch::new(backend, &market, params, layout, cfg).unwrap();
    envs.reset_segments(segments).unwrap();
    envs
}

fn params(capital: f64) -> TrialParams {
    TrialParams::frictionless(capital)
}

/// Long with spread 0.2% and commission 0.1%, whole units, then flat.
/// Buy at open 100 x 1.001 = 100.1: floor(10,000 / 100.1) = 99 units, notional 9,909.9, commission 9.9099,
/// cash 80.1901; equity at close 105 = 80.1901 + 10,395 = 10,475.1901; costs = 99 x 100 x 0.001 + 9.9099.
/// Sell at open 110 x 0.999 = 109.89: proceeds 10,879.11, commission 10.87911, cash 10,948.42099.
fn long_with_costs_then_flat(backend: &Backend) {
    let p = TrialParams { spread: 0.002, commission: 0.001, whole_units: 1, ..params(10_000.0) };
    let s = walk(backend, p, &[100.0, 100.0, 110.0, 110.0], &[100.0, 105.0, 108.0, 108.0], &[LONG, FLAT]);
    assert_eq!((s[0].position, s[0].units, s[0].bar), (1, 99.0, 1));
    assert_close("entry price", s[0].entry_price, 100.1);
    assert_close("cash after buy", s[0].cash, 80.1901);
    assert_close("equity at close 105", s[0].equity, 10_475.190_1);
    assert_close("costs of the buy", s[0].step_costs, 9.9 + 9.9099);
    assert_eq!((s[1].position, s[1].units), (0, 0.0));
    assert_close("cash after sell", s[1].cash, 10_948.420_99);
    assert_close("equity flat", s[1].equity, 10_948.420_99);
    assert_close("costs of the sell", s[1].step_costs, 99.0 * 110.0 * 0.001 + 10.87911);
}
test_device!(long_with_costs_then_flat);

/// Short 100 units at 100 (cash 20,000), marked at 95: equity 10,500. Reversal at open 90: buy back for
/// 9,000 (cash 11,000), then long 11,000 / 90 units, marked at 92: 11,000 x 92 / 90.
fn short_then_reversal(backend: &Backend) {
    let s = walk(backend, params(10_000.0), &[100.0, 100.0, 90.0, 95.0], &[100.0, 95.0, 92.0, 100.0], &[SHORT, LONG]);
    assert_eq!((s[0].position, s[0].units), (-1, -100.0));
    assert_close("cash after short", s[0].cash, 20_000.0);
    assert_close("short equity", s[0].equity, 10_500.0);
    assert_eq!(s[1].position, 1);
    assert_close("long units", s[1].units, 11_000.0 / 90.0);
    assert_close("equity after reversal", s[1].equity, 11_000.0 * 92.0 / 90.0);
    assert_eq!(s[1].step_costs, 0.0);
}
test_device!(short_then_reversal);

/// With shorts off, SHORT is FLAT: no trade, equity stays 10,000.
fn short_disabled_acts_as_flat(backend: &Backend) {
    let p = TrialParams { allow_short: 0, ..params(10_000.0) };
    let s = walk(backend, p, &[100.0, 100.0, 90.0], &[100.0, 95.0, 92.0], &[SHORT, SHORT]);
    for st in &s {
        assert_eq!((st.position, st.units, st.cash, st.equity), (0, 0.0, 10_000.0, 10_000.0));
    }
}
test_device!(short_disabled_acts_as_flat);

/// Whole units: 50 of cash cannot buy one unit at 100, so LONG is no trade and costs nothing.
fn whole_units_buying_zero_is_no_trade(backend: &Backend) {
    let p = TrialParams { whole_units: 1, commission: 0.01, ..params(50.0) };
    let s = walk(backend, p, &[100.0, 100.0, 100.0], &[100.0, 101.0, 102.0], &[LONG, LONG]);
    for st in &s {
        assert_eq!((st.position, st.units, st.step_costs, st.equity), (0, 0.0, 0.0, 50.0));
    }
}
test_device!(whole_units_buying_zero_is_no_trade);

/// The transition stores the action that took effect: LONG that buys no whole unit is stored as FLAT (the
/// position stayed flat), with the agent's LONG kept as `chosen`.
fn a_failed_open_is_stored_as_flat(backend: &Backend) {
    let p = TrialParams { whole_units: 1, ..params(50.0) };
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 101.0, 99.0, 101.0), (101.0, 102.0, 100.0, 102.0)], 0.01);
    let (s, t) = walk_bars(backend, p, &b, &[LONG, SHORT]);
    for (st, tr) in s.iter().zip(&t) {
        assert_eq!((st.position, tr.action), (0, FLAT));
    }
    assert_eq!((t[0].chosen, t[1].chosen), (LONG, SHORT));
    // With the cash for one unit the same LONG takes effect and is stored as LONG.
    let (s, t) = walk_bars(backend, TrialParams { whole_units: 1, ..params(150.0) }, &b, &[LONG, LONG]);
    assert_eq!((s[0].position, t[0].action, t[1].action), (1, LONG, LONG));
}
test_device!(a_failed_open_is_stored_as_flat);

/// Cash reserve 10%: an open uses 9,000 of 10,000: 90 units at 100, cash 1,000; holding costs nothing.
fn cash_reserve_and_hold(backend: &Backend) {
    let p = TrialParams { cash_reserve_pct: 0.1, ..params(10_000.0) };
    let s = walk(backend, p, &[100.0, 100.0, 120.0], &[100.0, 110.0, 130.0], &[LONG, LONG]);
    assert_close("units", s[0].units, 90.0);
    assert_close("cash", s[0].cash, 1_000.0);
    assert_close("equity", s[1].equity, 1_000.0 + 90.0 * 130.0);
    assert_eq!((s[1].units, s[1].step_costs, s[1].entry_price), (s[0].units, 0.0, 100.0));
}
test_device!(cash_reserve_and_hold);

/// Short 10 units at 100 with 1,000: cash 2,000; the close of 250 marks equity 2,000 - 2,500 = -500:
/// bankrupt, and later steps change nothing.
fn bankruptcy_ends_the_env(backend: &Backend) {
    let s =
        walk(backend, params(1_000.0), &[100.0, 100.0, 50.0, 50.0], &[100.0, 250.0, 50.0, 50.0], &[SHORT, FLAT, LONG]);
    assert_close("equity", s[0].equity, -500.0);
    assert_eq!(s[0].status(), EnvStatus::Bankrupt);
    assert_eq!((s[0].position, s[0].units), (0, 0.0), "bankruptcy closes the position at that close");
    assert_eq!(s[2].status(), EnvStatus::Bankrupt);
    assert_eq!((s[2].cash, s[2].units, s[2].bar), (s[0].cash, s[0].units, s[0].bar));
}
test_device!(bankruptcy_ends_the_env);

/// Max drawdown 20%: long 10 units at 100 marked at 75 is a 25% drawdown, so the breaker trips; the next
/// step closes at the open of 80 whatever the action (cash 800) and the env is halted.
fn drawdown_breaker_closes_at_next_open(backend: &Backend) {
    let p = TrialParams { max_drawdown: 0.2, ..params(1_000.0) };
    let s = walk(backend, p, &[100.0, 100.0, 80.0, 90.0, 90.0], &[100.0, 75.0, 85.0, 90.0, 90.0], &[LONG, LONG, LONG]);
    assert_eq!(s[0].status(), EnvStatus::HaltPending);
    assert_close("drawdown", s[0].drawdown(), 0.25);
    assert_eq!((s[1].status(), s[1].position, s[1].units), (EnvStatus::Halted, 0, 0.0));
    assert_close("cash after the forced close", s[1].cash, 800.0);
    assert_eq!((s[2].status(), s[2].position, s[2].cash), (EnvStatus::Halted, 0, s[1].cash));
}
test_device!(drawdown_breaker_closes_at_next_open);

/// A segment of bars [0, 1] ends after one step; the open position stays marked at the last close.
fn segment_end_stops_the_env(backend: &Backend) {
    let prices = PriceSeries::from_open_close(vec![100.0, 100.0, 200.0], vec![100.0, 110.0, 200.0]);
    let layout = SimLayout::new(1, 2).unwrap();
    let mut sim = batch(backend, &prices, &[params(1_000.0)], layout, &[(0, 1), (0, 2)]);
    sim.scan(&[LONG, LONG, LONG, LONG], 2).unwrap();
    let s = sim.states().unwrap();
    assert_eq!((s[0].status(), s[0].bar), (EnvStatus::SegmentEnd, 1));
    assert_close("equity at the segment's last close", s[0].equity, 1_100.0);
    assert_eq!((s[1].status(), s[1].bar), (EnvStatus::SegmentEnd, 2));
    assert_close("equity of the longer segment", s[1].equity, 2_000.0);
}
test_device!(segment_end_stops_the_env);

/// Trials keep their own parameters: the same action with spread 0 and 1% gives different fills, and envs
/// of one trial on different segments fill at their own next open.
fn per_trial_params_and_segments(backend: &Backend) {
    let prices = PriceSeries::from_open_close(vec![100.0, 100.0, 200.0, 200.0], vec![100.0, 100.0, 200.0, 200.0]);
    let layout = SimLayout::new(2, 2).unwrap();
    let trials = [params(1_000.0), TrialParams { spread: 0.01, ..params(1_000.0) }];
    let mut sim = batch(backend, &prices, &trials, layout, &[(0, 3), (1, 3), (0, 3), (1, 3)]);
    sim.step(&[LONG; 4]).unwrap();
    let s = sim.states().unwrap();
    for (env, want) in [100.0, 200.0, 100.5, 201.0].into_iter().enumerate() {
        assert_close(&format!("entry price of env {env}"), s[env].entry_price, want);
    }
    assert_eq!(s.iter().map(|st| st.bar).collect::<Vec<_>>(), [1, 2, 1, 2]);
}
test_device!(per_trial_params_and_segments);
