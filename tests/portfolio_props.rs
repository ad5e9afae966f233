//! Properties of the portfolio rules over random prices, parameters and actions (CPU path).

use gpu_kernels::portfolio::step_env;
use gpu_kernels::{EnvState, TrialParams};
use proptest::prelude::*;

fn params() -> impl Strategy<Value = TrialParams> {
    (
        1.0f64..1e7,
        0.0f64..0.02,
        0.0f64..0.01,
        0.0f64..0.5,
        0.0f64..0.9,
        0u32..2,
        0u32..2,
    )
        .prop_map(
            |(
                initial_capital,
                spread,
                commission,
                cash_reserve_pct,
                max_drawdown,
                allow_short,
                whole_units,
            )| {
                TrialParams {
                    initial_capital,
                    spread,
                    commission,
                    cash_reserve_pct,
                    max_drawdown,
                    allow_short,
                    whole_units,
                }
            },
        )
}

proptest! {
    /// After every step: equity == cash + units x close, all fields finite, the side matches the units,
    /// and the peak never falls below equity.
    #[test]
    fn equity_is_cash_plus_marked_units(
        p in params(),
        bars in prop::collection::vec((0.01f64..1e5, 0.01f64..1e5), 2..60),
        actions in prop::collection::vec(0u8..3, 60),
    ) {
        let mut s = EnvState::new(&p, 0, (bars.len() - 1) as u32);
        for (t, &(open, close)) in bars.iter().enumerate().skip(1) {
            step_env(&p, &mut s, actions[t], open, close);
            for v in [s.cash, s.units, s.equity, s.peak_equity, s.entry_price, s.step_costs] {
                prop_assert!(v.is_finite(), "non-finite state {s:?}");
            }
            if !s.status().is_done() || s.bar as usize == t {
                prop_assert_eq!(s.equity, s.cash + s.units * close);
            }
            prop_assert_eq!(s.position, i32::from(s.units > 0.0) - i32::from(s.units < 0.0));
            prop_assert!(s.peak_equity >= s.equity);
            prop_assert!(s.step_costs >= 0.0);
            if p.whole_units == 1 {
                prop_assert_eq!(s.units, s.units.trunc());
            }
        }
    }
}
