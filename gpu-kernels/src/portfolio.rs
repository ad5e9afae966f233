//! Execution rules of ENVIRONMENT.md, "Actions and execution": decisions at the close of bar t fill at the
//! open of bar t+1 with half the spread against the trader plus commission on the notional; equity is marked
//! at the close; bankruptcy and the drawdown circuit breaker end the env.

use crate::types::{Action, EnvState, EnvStatus, TrialParams};

/// Price paid per unit when buying at `open`: `open x (1 + s/2)`.
#[inline]
pub fn buy_fill_price(open: f64, spread: f64) -> f64 {
    open * (1.0 + 0.5 * spread)
}

/// Price received per unit when selling at `open`: `open x (1 - s/2)`.
#[inline]
pub fn sell_fill_price(open: f64, spread: f64) -> f64 {
    open * (1.0 - 0.5 * spread)
}

/// The position (-1, 0, 1) an action code asks for; SHORT is FLAT when shorts are off, unknown codes are FLAT.
#[inline]
pub fn target_side(action: u8, allow_short: bool) -> i32 {
    match Action::from_code(action) {
        Some(Action::Long) => 1,
        Some(Action::Short) if allow_short => -1,
        _ => 0,
    }
}

/// Units an open of `equity` buys at `fill_price`: `(1 - reserve) x equity / fill_price`, floored when
/// `whole_units` is set. Zero or negative equity buys nothing.
#[inline]
pub fn open_units(params: &TrialParams, equity: f64, fill_price: f64) -> f64 {
    if equity <= 0.0 || fill_price <= 0.0 {
        return 0.0;
    }
    let units = (1.0 - params.cash_reserve_pct) * equity / fill_price;
    if params.whole_units != 0 {
        libm::floor(units)
    } else {
        units
    }
}

/// The half spread paid on trading `units_abs` units at `open`: `units_abs x open x s/2`.
#[inline]
fn spread_cost(params: &TrialParams, units_abs: f64, open: f64) -> f64 {
    units_abs * open * (0.5 * params.spread)
}

/// Closes the open position at `open`; returns the costs paid.
#[inline]
pub fn close_position(params: &TrialParams, state: &mut EnvState, open: f64) -> f64 {
    if state.units == 0.0 {
        state.position = 0;
        state.entry_price = 0.0;
        return 0.0;
    }
    let units_abs = libm::fabs(state.units);
    let fill = if state.units > 0.0 {
        sell_fill_price(open, params.spread)
    } else {
        buy_fill_price(open, params.spread)
    };
    let commission = params.commission * (units_abs * fill);
    // Selling a long brings units x fill in; buying back a short pays |units| x fill: both are units x fill.
    state.cash = state.cash + state.units * fill - commission;
    state.units = 0.0;
    state.position = 0;
    state.entry_price = 0.0;
    spread_cost(params, units_abs, open) + commission
}

/// Opens a position of `side` (1 long, -1 short) from flat at `open`; returns the costs paid.
/// An open that would buy no units (no equity, or whole units rounding to 0) is no trade.
#[inline]
pub fn open_position(params: &TrialParams, state: &mut EnvState, side: i32, open: f64) -> f64 {
    let fill = if side > 0 {
        buy_fill_price(open, params.spread)
    } else {
        sell_fill_price(open, params.spread)
    };
    // Flat, so equity at the open is the cash.
    let units_abs = open_units(params, state.cash, fill);
    if units_abs <= 0.0 {
        return 0.0;
    }
    let commission = params.commission * (units_abs * fill);
    let units = if side > 0 { units_abs } else { -units_abs };
    state.cash = state.cash - units * fill - commission;
    state.units = units;
    state.position = side;
    state.entry_price = fill;
    spread_cost(params, units_abs, open) + commission
}

/// Advances one env from the close of bar t to the close of bar t+1 given the action decided at t.
///
/// `open_next` and `close_next` are bar t+1's prices. A done env does not change (its `step_costs` is
/// zeroed). After the step: bankrupt when equity <= 0; a drawdown beyond `max_drawdown` closes the position
/// at the next open whatever the action, after which the env is halted; reaching `end_bar` ends the segment.
#[inline]
pub fn step_env(
    params: &TrialParams,
    state: &mut EnvState,
    action: u8,
    open_next: f64,
    close_next: f64,
) {
    let status = state.status();
    if status.is_done() {
        state.step_costs = 0.0;
        return;
    }
    let target = if status == EnvStatus::HaltPending {
        0
    } else {
        target_side(action, params.allow_short != 0)
    };
    let mut costs = 0.0;
    if target != state.position {
        if state.position != 0 {
            costs += close_position(params, state, open_next);
        }
        if target != 0 {
            costs += open_position(params, state, target, open_next);
        }
    }
    state.bar += 1;
    state.step_costs = costs;
    state.equity = state.cash + state.units * close_next;
    if state.equity > state.peak_equity {
        state.peak_equity = state.equity;
    }
    let next = if state.equity <= 0.0 {
        EnvStatus::Bankrupt
    } else if status == EnvStatus::HaltPending {
        EnvStatus::Halted
    } else if params.max_drawdown > 0.0 && state.drawdown() > params.max_drawdown {
        EnvStatus::HaltPending
    } else {
        EnvStatus::Active
    };
    state.status = if !next.is_done() && state.bar >= state.end_bar {
        EnvStatus::SegmentEnd as u32
    } else {
        next as u32
    };
}

/// Steps one env on the price series: the per-env body of the `portfolio_step` kernel and of the CPU loop.
///
/// Reads bar `state.bar + 1` of `open`/`close` (the whole series); an env whose next bar lies past the series
/// ends its segment.
#[inline]
pub fn step_env_on_series(
    params: &TrialParams,
    state: &mut EnvState,
    action: u8,
    open: &[f64],
    close: &[f64],
) {
    let next = state.bar as usize + 1;
    if next >= open.len() || next >= close.len() {
        if !state.status().is_done() {
            state.status = EnvStatus::SegmentEnd as u32;
        }
        state.step_costs = 0.0;
        return;
    }
    step_env(params, state, action, open[next], close[next]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_take_half_the_spread() {
        assert_eq!(buy_fill_price(100.0, 0.002), 100.1);
        assert_eq!(sell_fill_price(100.0, 0.002), 99.9);
    }

    #[test]
    fn short_is_flat_when_disabled() {
        assert_eq!(target_side(2, true), -1);
        assert_eq!(target_side(2, false), 0);
        assert_eq!(target_side(1, false), 1);
        assert_eq!(target_side(9, true), 0);
    }

    #[test]
    fn whole_units_floor_and_reserve() {
        let p = TrialParams {
            whole_units: 1,
            cash_reserve_pct: 0.5,
            ..TrialParams::frictionless(1.0)
        };
        assert_eq!(open_units(&p, 1_000.0, 30.0), 16.0); // 500 / 30 = 16.67
        assert_eq!(open_units(&p, -5.0, 30.0), 0.0);
    }
}
