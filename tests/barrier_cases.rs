//! Hand-computed triple-barrier and reward cases (ENVIRONMENT.md), each on the CPU and the GPU. One env with
//! 10,000 of capital, no costs, fractional units and sigma fixed at 1%, so a long filled at 100 has its
//! take-profit at 100 x (1 + tp_mult x 1%) and its stop-loss at 100 x (1 - sl_mult x 1%).

mod common;

use common::{assert_close, bars, walk_bars};
use tradesim::{Backend, BarrierLabel, EnvStatus, TERMINATED, TRUNCATED, TrialParams};

const FLAT: u8 = 0;
const LONG: u8 = 1;
const SHORT: u8 = 2;
const SIGMA: f64 = 0.01;

/// Take-profit 2 sigma, stop-loss 1 sigma, reward = log return + 0.5 x barrier outcome.
fn params() -> TrialParams {
    TrialParams { take_profit_mult: 2.0, stop_loss_mult: 1.0, w_barrier: 0.5, ..TrialParams::frictionless(10_000.0) }
}

/// | bar | open  | high  | low  | close |
/// | 0   | 100   | 100   | 100  | 100   |   decide LONG
/// | 1   | 100   | 101   | 99.5 | 100.5 |   fill 100 units at 100: TP 102, SL 99, untouched
/// | 2   | 100.5 | 102.5 | 100  | 102.2 |   high 102.5 >= 102: take-profit, sold at 102 -> cash 10,200
fn long_take_profit(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 101.0, 99.5, 100.5), (100.5, 102.5, 100.0, 102.2)], SIGMA);
    let (s, t) = walk_bars(backend, params(), &b, &[LONG, LONG]);
    assert_close("take-profit level", s[0].take_profit, 102.0);
    assert_close("stop-loss level", s[0].stop_loss, 99.0);
    assert_eq!((s[0].expiry_bar, t[0].label), (u32::MAX, 0));
    assert_eq!((t[1].label, s[1].position, s[1].units), (BarrierLabel::TakeProfit as u8, 0, 0.0));
    assert_close("cash after the exit", s[1].cash, 10_200.0);
    let want = ((10_200.0f64 / 10_050.0).ln() + 0.5) as f32;
    assert!((t[1].reward - want).abs() < 1e-6, "reward {} vs {want}", t[1].reward);
}
test_device!(long_take_profit);

/// Short 100 units at 100: stop-loss above at 101, take-profit below at 98.
/// | 1 | 100   | 100.8 | 99.5 | 100.2 | untouched
/// | 2 | 100.3 | 101.5 | 100  | 101.2 | high 101.5 >= 101: stop-loss, bought back at 101 -> cash 20,000 - 10,100
fn short_stop_loss(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.8, 99.5, 100.2), (100.3, 101.5, 100.0, 101.2)], SIGMA);
    let (s, t) = walk_bars(backend, params(), &b, &[SHORT, SHORT]);
    assert_close("short take-profit below", s[0].take_profit, 98.0);
    assert_close("short stop-loss above", s[0].stop_loss, 101.0);
    assert_eq!((t[1].label, s[1].position), (BarrierLabel::StopLoss as u8, 0));
    assert_close("cash after the stop", s[1].cash, 9_900.0);
    let want = ((9_900.0f64 / (20_000.0 - 100.0 * 100.2)).ln() - 0.5) as f32;
    assert!((t[1].reward - want).abs() < 1e-6, "reward {} vs {want}", t[1].reward);
}
test_device!(short_stop_loss);

/// Bar 2 opens at 98, below the stop at 99: the exit is at the open (98), not at the barrier.
fn gap_through_a_barrier_fills_at_the_open(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.5, 99.5, 100.0), (98.0, 98.5, 97.0, 98.2)], SIGMA);
    let (s, t) = walk_bars(backend, params(), &b, &[LONG, LONG]);
    assert_eq!(t[1].label, BarrierLabel::StopLoss as u8);
    assert_close("cash after the gap exit", s[1].cash, 9_800.0);
}
test_device!(gap_through_a_barrier_fills_at_the_open);

/// A position held into bar 2, which opens at 103 above the take-profit at 102 and trades down to 97 below
/// the stop at 99: the open is checked first, so a resting take-profit fills at 103 (v1 said stop-loss at 99).
fn gap_through_the_take_profit_fills_at_the_open(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.5, 99.5, 100.0), (103.0, 103.5, 97.0, 98.0)], SIGMA);
    let (s, t) = walk_bars(backend, params(), &b, &[LONG, LONG]);
    assert_eq!(t[1].label, BarrierLabel::TakeProfit as u8);
    assert_close("cash after the gap exit", s[1].cash, 10_300.0);
}
test_device!(gap_through_the_take_profit_fills_at_the_open);

/// A stop-loss touched inside a bar is a stop-market order: with `stop_slippage` 0.25 it fills a quarter of
/// the bar's range beyond its level, never beyond the bar's extreme.
/// | 2 | 100 | 100.2 | 98.6 | 99.5 | range 1.6: the stop at 99 fills at 99 - 0.4 = 98.6 (the low) -> cash 9,860
/// | 2 | 100 | 100.6 | 98.8 | 99.5 | range 1.8: fills at 99 - 0.45 = 98.55, below the low: at 98.8 -> 9,880
fn a_touched_stop_fills_beyond_its_level(backend: &Backend) {
    let p = TrialParams { stop_slippage: 0.25, ..params() };
    let cases = [((100.0, 100.2, 98.6, 99.5), 9_860.0), ((100.0, 100.6, 98.8, 99.5), 9_880.0)];
    for (bar2, cash) in cases {
        let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.5, 99.5, 100.0), bar2], SIGMA);
        let (s, t) = walk_bars(backend, p, &b, &[LONG, LONG]);
        assert_eq!((t[1].label, s[1].position), (BarrierLabel::StopLoss as u8, 0));
        assert_close("cash after the stop", s[1].cash, cash);
    }
    // Short 100 units at 100: stop-loss 101; bar 2's high 101.6 and low 100.0 (range 1.6) -> bought back at
    // 101 + 0.4 = 101.4 -> cash 20,000 - 10,140.
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.5, 99.5, 100.0), (100.5, 101.6, 100.0, 101.0)], SIGMA);
    let (s, t) = walk_bars(backend, p, &b, &[SHORT, SHORT]);
    assert_eq!(t[1].label, BarrierLabel::StopLoss as u8);
    assert_close("cash after the short's stop", s[1].cash, 9_860.0);
    // A gap through the stop still fills at the open, whatever the slippage.
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.5, 99.5, 100.0), (98.0, 98.5, 97.0, 98.2)], SIGMA);
    let (s, _) = walk_bars(backend, p, &b, &[LONG, LONG]);
    assert_close("cash after the gap exit", s[1].cash, 9_800.0);
}
test_device!(a_touched_stop_fills_beyond_its_level);

/// Bar 2 touches both 102 (high 103) and 99 (low 98.5): the stop-loss wins, exit at 99.
fn both_barriers_in_one_bar_is_a_stop_loss(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.5, 99.5, 100.0), (100.0, 103.0, 98.5, 101.0)], SIGMA);
    let (s, t) = walk_bars(backend, params(), &b, &[LONG, LONG]);
    assert_eq!(t[1].label, BarrierLabel::StopLoss as u8);
    assert_close("cash after the stop", s[1].cash, 9_900.0);
}
test_device!(both_barriers_in_one_bar_is_a_stop_loss);

/// No price barriers, max hold 2 bars: filled on bar 1, expiry bar 3, time exit at bar 3's close of 103.
fn vertical_barrier_exits_at_the_close(backend: &Backend) {
    let p = TrialParams { take_profit_mult: 0.0, stop_loss_mult: 0.0, max_hold_bars: 2, ..params() };
    let ohlc: Vec<_> = (0..5).map(|i| 100.0 + f64::from(i)).map(|c| (100.0, c + 0.1, 99.9, c)).collect();
    let (s, t) = walk_bars(backend, p, &bars(&ohlc, SIGMA), &[LONG, LONG, LONG]);
    assert_eq!(s[0].expiry_bar, 3);
    assert_eq!((t[0].label, t[1].label, t[2].label), (0, 0, BarrierLabel::Time as u8));
    assert_eq!(s[2].position, 0);
    assert_close("cash after the time exit", s[2].cash, 10_300.0);
}
test_device!(vertical_barrier_exits_at_the_close);

/// `barrier_exits = false`: the take-profit of case 1 only labels; the position stays (100 units marked at
/// 102.2) and the resolved barrier labels nothing again.
fn barriers_that_only_label(backend: &Backend) {
    let p = TrialParams { barrier_exits: 0, ..params() };
    let b = bars(
        &[
            (100.0, 100.0, 100.0, 100.0),
            (100.0, 101.0, 99.5, 100.5),
            (100.5, 102.5, 100.0, 102.2),
            (102.2, 103.0, 98.0, 99.0),
        ],
        SIGMA,
    );
    let (s, t) = walk_bars(backend, p, &b, &[LONG, LONG, LONG]);
    assert_eq!((t[1].label, s[1].position, s[1].barrier_live), (BarrierLabel::TakeProfit as u8, 1, 0));
    assert_close("equity with the position kept", s[1].equity, 10_220.0);
    assert_eq!((t[2].label, s[2].position), (0, 1));
}
test_device!(barriers_that_only_label);

/// Costs inside the reward: spread 0.2%, commission 0.1%, whole units, w_cost 1. The buy of case
/// "long_with_costs" in portfolio_cases: 99 units at 100.1, costs 19.8099, equity 10,475.1901 at 105.
/// reward = ln(10,475.1901 / 10,000) - 19.8099 / 10,000.
fn costs_inside_the_reward(backend: &Backend) {
    let p = TrialParams {
        spread: 0.002,
        commission: 0.001,
        whole_units: 1,
        w_cost: 1.0,
        ..TrialParams::frictionless(10_000.0)
    };
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 105.0, 100.0, 105.0)], 0.0);
    let (_, t) = walk_bars(backend, p, &b, &[LONG]);
    let want = ((10_475.190_1f64 / 10_000.0).ln() - 19.809_9 / 10_000.0) as f32;
    assert!((t[0].reward - want).abs() < 1e-6, "reward {} vs {want}", t[0].reward);
    // The segment's end truncates (nothing happened to the account): not a terminal state.
    assert_eq!((t[0].valid, t[0].done, t[0].action, t[0].bar), (1, TRUNCATED, LONG, 0));
}
test_device!(costs_inside_the_reward);

/// Drawdown term (w_dd 2): long 100 units at 100 marked at 90 is a 10% drawdown from the 10,000 peak:
/// reward = ln(9,000 / 10,000) - 2 x 0.1. The next bar recovers to 95: the drawdown shrinks, no penalty.
fn drawdown_increase_is_penalized(backend: &Backend) {
    let p = TrialParams { w_drawdown: 2.0, ..TrialParams::frictionless(10_000.0) };
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 100.0, 90.0, 90.0), (90.0, 95.0, 90.0, 95.0)], 0.0);
    let (_, t) = walk_bars(backend, p, &b, &[LONG, LONG]);
    let want = ((0.9f64).ln() - 0.2) as f32;
    assert!((t[0].reward - want).abs() < 1e-6, "reward {} vs {want}", t[0].reward);
    let want = ((95.0f64 / 90.0).ln()) as f32;
    assert!((t[1].reward - want).abs() < 1e-6, "reward {} vs {want}", t[1].reward);
}
test_device!(drawdown_increase_is_penalized);

/// A bankrupt step terminates the env with a finite reward of ln(1e-12); its position is closed at that
/// close; later steps write invalid (padding) transitions.
fn bankruptcy_is_terminal(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 250.0, 100.0, 250.0), (250.0, 250.0, 250.0, 250.0)], 0.0);
    let (s, t) = walk_bars(backend, TrialParams::frictionless(1_000.0), &b, &[SHORT, FLAT]);
    assert_eq!(s[0].status(), EnvStatus::Bankrupt);
    assert_eq!((s[0].position, s[0].units), (0, 0.0));
    assert_close("equity after the bankrupt close", s[0].equity, -500.0);
    assert_eq!((t[0].done, t[0].valid), (TERMINATED, 1));
    assert_eq!(t[0].reward, (1e-12f64).ln() as f32);
    assert_eq!((t[1].valid, t[1].reward), (0, 0.0));
}
test_device!(bankruptcy_is_terminal);

/// Max drawdown 20%: the long marked at 75 trips the breaker; at the next step the agent asks LONG but the
/// breaker closes the position: the transition stores FLAT (what took effect) and LONG (what was chosen),
/// and the halt terminates the env. A SHORT where shorts are not allowed acts, and is stored, as FLAT.
fn stored_action_is_the_one_that_took_effect(backend: &Backend) {
    let p = TrialParams { max_drawdown: 0.2, ..TrialParams::frictionless(1_000.0) };
    let b = bars(
        &[(100.0, 100.0, 100.0, 100.0), (100.0, 100.0, 75.0, 75.0), (80.0, 85.0, 80.0, 85.0), (90.0, 90.0, 90.0, 90.0)],
        0.0,
    );
    let (s, t) = walk_bars(backend, p, &b, &[LONG, LONG]);
    assert_eq!(s[0].status(), EnvStatus::HaltPending);
    assert_eq!((t[0].action, t[0].chosen, t[0].done), (LONG, LONG, 0));
    assert_eq!((t[1].action, t[1].chosen, t[1].done), (FLAT, LONG, TERMINATED));
    let no_short = TrialParams { allow_short: 0, ..TrialParams::frictionless(1_000.0) };
    let (_, t) = walk_bars(backend, no_short, &b, &[SHORT]);
    assert_eq!((t[0].action, t[0].chosen), (FLAT, SHORT));
}
test_device!(stored_action_is_the_one_that_took_effect);
