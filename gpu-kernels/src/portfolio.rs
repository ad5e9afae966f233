//! Execution rules of ENVIRONMENT.md, "Actions and execution": decisions at the close of bar t fill at the
//! open of bar t+1 with half the spread against the trader plus commission on the notional; equity is marked
//! at the close; bankruptcy and the drawdown circuit breaker end the env.

use crate::types::{Action, EnvState, EnvStatus, NO_EXPIRY, TrialParams};

/// Price paid per unit when buying at `price`: `price x (1 + s/2)`.
#[inline]
pub fn buy_fill_price(price: f64, spread: f64) -> f64 {
    price * (1.0 + 0.5 * spread)
}

/// Price received per unit when selling at `price`: `price x (1 - s/2)`.
#[inline]
pub fn sell_fill_price(price: f64, spread: f64) -> f64 {
    price * (1.0 - 0.5 * spread)
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

/// Relative slack of the whole-units floor: a quotient this close below an integer buys that integer.
/// Prices in decimals have no exact binary form, so an exact quotient (1,100 / 1.10 = 1,000) comes out an
/// ulp low in f64 (999.9999999999999) and a plain floor would buy one unit less than the Decimal rules. The cost: a quotient truly within 1e-12 (relative) below an integer buys that integer, overdrawing
/// the cash by at most 1e-12 of it.
pub const WHOLE_UNITS_SLACK: f64 = 1e-12;

/// Relative slack of bankruptcy: equity at or below this fraction of the initial capital is bankrupt. An
/// all-in short (fractional units) whose price doubles has an equity of exactly zero in Decimal, and in f64
/// a residue of either sign around 1e-16 of the capital; with the slack both call it bankrupt.
pub const BANKRUPTCY_SLACK: f64 = 1e-12;

/// Units an open of `equity` buys at `fill_price`: `(1 - reserve) x equity / fill_price`, floored when
/// `whole_units` is set (with [`WHOLE_UNITS_SLACK`]). Zero or negative equity buys nothing.
#[inline]
pub fn open_units(params: &TrialParams, equity: f64, fill_price: f64) -> f64 {
    if equity <= 0.0 || fill_price <= 0.0 {
        return 0.0;
    }
    let units = (1.0 - params.cash_reserve_pct) * equity / fill_price;
    if params.whole_units != 0 { libm::floor(units * (1.0 + WHOLE_UNITS_SLACK)) } else { units }
}

/// The half spread paid on trading `units_abs` units around `price`: `units_abs x price x s/2`.
#[inline]
fn spread_cost(params: &TrialParams, units_abs: f64, price: f64) -> f64 {
    units_abs * price * (0.5 * params.spread)
}

/// Why a position was closed (the ledger's exit reason; codes 1-3 match [`crate::BarrierLabel`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// The action (signal) asked for another position.
    Signal = 0,
    /// Take-profit barrier.
    TakeProfit = 1,
    /// Stop-loss barrier.
    StopLoss = 2,
    /// Vertical barrier.
    Time = 3,
    /// The drawdown circuit breaker.
    Breaker = 4,
    /// Closed at the last bar's close when the backtest ended.
    EndOfData = 5,
    /// Closed at the close of the bar where equity fell to zero or below (the env terminates).
    Bankruptcy = 6,
}

impl ExitReason {
    /// The reason for a stored code.
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => Self::TakeProfit,
            2 => Self::StopLoss,
            3 => Self::Time,
            4 => Self::Breaker,
            5 => Self::EndOfData,
            6 => Self::Bankruptcy,
            _ => Self::Signal,
        }
    }
}

/// One side of a trade as executed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fill {
    /// Price per unit after the half spread.
    pub price: f64,
    /// Units traded (positive: bought; negative: sold).
    pub units: f64,
    /// Spread plus commission.
    pub costs: f64,
}

/// Receives the trades an env makes: the backtest's ledger implements it, `()` ignores them.
pub trait TradeLog {
    /// A position was opened on `bar` by `fill`, from flat with `cash_before`.
    fn opened(&mut self, _bar: u32, _fill: &Fill, _cash_before: f64) {}
    /// The position was closed on `bar` by `fill` for `reason`, leaving `cash_after` (flat).
    fn closed(&mut self, _bar: u32, _fill: &Fill, _reason: ExitReason, _cash_after: f64) {}
}

impl TradeLog for () {}

/// Closes the open position around `price` (the next open, or a barrier's exit price); returns the fill.
#[inline]
pub fn close_position(params: &TrialParams, state: &mut EnvState, price: f64) -> Fill {
    let units_abs = libm::fabs(state.units);
    let fill =
        if state.units > 0.0 { sell_fill_price(price, params.spread) } else { buy_fill_price(price, params.spread) };
    let commission = params.commission * (units_abs * fill);
    let closed_units = state.units;
    // Selling a long brings units x fill in; buying back a short pays |units| x fill: both are units x fill.
    state.cash = state.cash + state.units * fill - commission;
    state.units = 0.0;
    state.position = 0;
    state.entry_price = 0.0;
    state.take_profit = 0.0;
    state.stop_loss = 0.0;
    state.expiry_bar = NO_EXPIRY;
    state.barrier_live = 0;
    let costs = if units_abs == 0.0 { 0.0 } else { spread_cost(params, units_abs, price) + commission };
    Fill { price: fill, units: -closed_units, costs }
}

/// Opens a position of `side` (1 long, -1 short) from flat at `open`; returns the fill, or `None` when the
/// open would buy no units (no equity, or whole units rounding to 0): no trade.
#[inline]
pub fn open_position(params: &TrialParams, state: &mut EnvState, side: i32, open: f64) -> Option<Fill> {
    let fill = if side > 0 { buy_fill_price(open, params.spread) } else { sell_fill_price(open, params.spread) };
    // Flat, so equity at the open is the cash.
    let units_abs = open_units(params, state.cash, fill);
    if units_abs <= 0.0 {
        return None;
    }
    let commission = params.commission * (units_abs * fill);
    let units = if side > 0 { units_abs } else { -units_abs };
    state.cash = state.cash - units * fill - commission;
    state.units = units;
    state.position = side;
    state.entry_price = fill;
    Some(Fill { price: fill, units, costs: spread_cost(params, units_abs, open) + commission })
}

/// Moves the position to `target` at the open of `bar` (close, open, or both for a reversal), telling `log`;
/// returns the costs and whether a new position was opened. A close is for `reason`.
#[inline]
pub fn trade_at_open(
    params: &TrialParams,
    state: &mut EnvState,
    target: i32,
    open: f64,
    bar: u32,
    reason: ExitReason,
    log: &mut impl TradeLog,
) -> (f64, bool) {
    if target == state.position {
        return (0.0, false);
    }
    let mut costs = 0.0;
    if state.position != 0 {
        let fill = close_position(params, state, open);
        log.closed(bar, &fill, reason, state.cash);
        costs += fill.costs;
    }
    if target != 0 {
        let cash_before = state.cash;
        if let Some(fill) = open_position(params, state, target, open) {
            log.opened(bar, &fill, cash_before);
            costs += fill.costs;
        }
    }
    (costs, state.position != 0)
}

/// Marks the env at `close` after a step from status `before`, records `costs`, updates the peak, and
/// decides the status: bankrupt when equity <= [`BANKRUPTCY_SLACK`] x the initial capital; halted after the breaker's close; breaker pending when the
/// drawdown exceeds the limit; segment end once `bar == end_bar`.
#[inline]
pub fn mark_at_close(params: &TrialParams, state: &mut EnvState, before: EnvStatus, close: f64, costs: f64) {
    state.bar += 1;
    state.step_costs = costs;
    state.equity = state.cash + state.units * close;
    if state.equity > state.peak_equity {
        state.peak_equity = state.equity;
    }
    let next = if state.equity <= BANKRUPTCY_SLACK * params.initial_capital {
        EnvStatus::Bankrupt
    } else if before == EnvStatus::HaltPending {
        EnvStatus::Halted
    } else if params.max_drawdown > 0.0 && beyond_drawdown(state, params.max_drawdown) {
        EnvStatus::HaltPending
    } else {
        EnvStatus::Active
    };
    state.status =
        if !next.is_done() && state.bar >= state.end_bar { EnvStatus::SegmentEnd as u32 } else { next as u32 };
}

/// `state.drawdown() > limit`, with its division only where equity is near or below the limit: for
/// `0 < limit < 1`, an equity above `peak x (1 - limit) x (1 + 1e-9)` (computed with at most 3 roundings)
/// means `equity / peak > 1 - limit` exactly, and then the rounded `1 - equity / peak` cannot exceed
/// `limit` (rounding is monotonic and `limit` is a double), so the answer is the division's whatever the
/// numbers; the division runs on a few bars of a breaker's neighbourhood instead of every bar.
#[inline]
fn beyond_drawdown(state: &EnvState, limit: f64) -> bool {
    let peak = state.peak_equity;
    if limit < 1.0 && peak > 0.0 && state.equity > peak * (1.0 - limit) * (1.0 + 1e-9) {
        return false;
    }
    state.drawdown() > limit
}

/// The target position for `action` given the env's status: FLAT while the breaker is pending.
#[inline]
pub fn effective_target(params: &TrialParams, status: EnvStatus, action: u8) -> i32 {
    if status == EnvStatus::HaltPending { 0 } else { target_side(action, params.allow_short != 0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The drawdown test without a division agrees with the division at and around every limit.
    #[test]
    fn drawdown_prefilter_is_the_division() {
        let mut counter = 0;
        let mut next = move || {
            counter += 1;
            (crate::rng::draw_u64(9, 0, counter) >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut state = EnvState::new(&TrialParams::frictionless(1_000.0), 0, 10);
        for case in 0..200_000 {
            let limit = [next(), 0.25, 1e-12, 0.999_999, 1.0, 1.5][case % 6];
            state.peak_equity = 1_000.0 * (0.5 + next());
            let at = state.peak_equity * (1.0 - limit);
            // Equity at the limit's equity to within a few ulps, near it, or anywhere.
            state.equity = match case % 3 {
                0 => f64::from_bits(at.to_bits().wrapping_add((next() * 16.0) as u64).wrapping_sub(8)),
                1 => at * (1.0 + (next() - 0.5) * 4e-9),
                _ => state.peak_equity * next() * 1.2,
            };
            assert_eq!(beyond_drawdown(&state, limit), state.drawdown() > limit, "{state:?} {limit}");
        }
    }

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
        let p = TrialParams { whole_units: 1, cash_reserve_pct: 0.5, ..TrialParams::frictionless(1.0) };
        assert_eq!(open_units(&p, 1_000.0, 30.0), 16.0); // 500 / 30 = 16.67
        assert_eq!(open_units(&p, -5.0, 30.0), 0.0);
    }
}
