//! Properties of the environment step over random bars, parameters and actions (CPU path).

use gpu_kernels::env::{env_step, env_step_on_series, walk_step_on_series};
use gpu_kernels::{Bar, BarrierLabel, EnvState, TrialParams};
use proptest::prelude::*;

fn params() -> impl Strategy<Value = TrialParams> {
    (
        (1.0f64..1e7, 0.0f64..0.02, 0.0f64..0.01, 0.0f64..0.5, 0.0f64..0.9),
        (0.0f64..3.0, 0.0f64..3.0, 0u32..30, 0u32..2, 0u32..2, 0u32..2),
    )
        .prop_map(|((capital, spread, commission, reserve, max_dd), (tp, sl, hold, short, whole, exits))| {
            TrialParams {
                spread,
                commission,
                cash_reserve_pct: reserve,
                max_drawdown: max_dd,
                take_profit_mult: tp,
                stop_loss_mult: sl,
                max_hold_bars: hold,
                allow_short: short,
                whole_units: whole,
                barrier_exits: exits,
                w_cost: 1.0,
                w_drawdown: 1.0,
                w_barrier: 1.0,
                ..TrialParams::frictionless(capital)
            }
        })
}

/// A bar from an open, a close and two wick sizes (OHLC consistent), with sigma.
fn bar() -> impl Strategy<Value = Bar> {
    (0.01f64..1e5, -0.2f64..0.2, 0.0f64..0.1, 0.0f64..0.1, 0.0f64..0.05).prop_map(|(open, ret, up, down, sigma)| {
        let close = open * (1.0 + ret);
        Bar { open, high: open.max(close) * (1.0 + up), low: open.min(close) * (1.0 - down), close, sigma }
    })
}

/// Every field of a state as its bits (floats by `to_bits`: -0 and NaN payloads count).
fn bits(s: &EnvState) -> ([u64; 8], [u32; 7]) {
    let floats = [s.cash, s.units, s.equity, s.peak_equity, s.entry_price, s.step_costs, s.take_profit, s.stop_loss];
    let ints = [s.bar, s.end_bar, s.position as u32, s.status, s.expiry_bar, s.barrier_live, s.label];
    (floats.map(f64::to_bits), ints)
}

proptest! {
    /// After every step: equity == cash + units x close, all fields and the reward finite, the side matches
    /// the units, the peak never falls below equity, costs >= 0; a label appears only where the barrier
    /// that produced it is enabled, and with exits on it leaves the env flat.
    #[test]
    fn step_invariants(
        p in params(),
        bars in prop::collection::vec(bar(), 2..60),
        actions in prop::collection::vec(0u8..3, 60),
    ) {
        let mut s = EnvState::new(&p, 0, (bars.len() - 1) as u32);
        for t in 1..bars.len() {
            let out = env_step(&p, &mut s, actions[t], &bars[t - 1], &bars[t]);
            for v in [s.cash, s.units, s.equity, s.peak_equity, s.entry_price, s.step_costs, out.reward] {
                prop_assert!(v.is_finite(), "non-finite value in {s:?} / {out:?}");
            }
            if out.valid {
                prop_assert_eq!(s.equity, s.cash + s.units * bars[t].close);
                prop_assert_eq!(s.bar as usize, t);
            }
            prop_assert_eq!(s.position, i32::from(s.units > 0.0) - i32::from(s.units < 0.0));
            prop_assert!(s.peak_equity >= s.equity);
            prop_assert!(s.step_costs >= 0.0);
            if p.whole_units == 1 {
                prop_assert_eq!(s.units, s.units.trunc());
            }
            match out.label {
                BarrierLabel::None => {}
                label => {
                    prop_assert!(out.valid);
                    prop_assert!(match label {
                        BarrierLabel::TakeProfit => p.take_profit_mult > 0.0,
                        BarrierLabel::StopLoss => p.stop_loss_mult > 0.0,
                        _ => p.max_hold_bars > 0,
                    }, "label {label:?} from a disabled barrier");
                    if p.barrier_exits == 1 {
                        prop_assert_eq!(s.position, 0);
                    }
                }
            }
        }
    }

    /// The greedy walks' step (`walk_step_on_series`: no reward, no state floats) leaves every byte of the
    /// state as the env step on the series does, through the segment's end (a done env) and past the last
    /// bar (actions keep coming after both).
    #[test]
    fn walk_step_changes_the_state_as_the_env_step(
        p in params(),
        bars in prop::collection::vec(bar(), 2..40),
        end in 1u32..45,
        actions in prop::collection::vec(0u8..3, 50),
    ) {
        let mut env = EnvState::new(&p, 0, end);
        let mut walk = env;
        for &a in &actions {
            env_step_on_series(&p, &mut env, a, &bars);
            walk_step_on_series(&p, &mut walk, a, &bars);
            prop_assert_eq!(bits(&walk), bits(&env), "after action {}", a);
        }
        prop_assert!(env.status().is_done());
    }
}
