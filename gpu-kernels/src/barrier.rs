//! Triple barrier (AFML ch. 3) on the agent's own positions: take-profit and stop-loss at multiples of sigma
//! from the fill, a vertical barrier `max_hold_bars` after the fill bar.

use crate::types::{Bar, BarrierLabel, EnvState, NO_EXPIRY, TrialParams};

/// Sets the barriers of a position just opened at `fill` on bar `fill_bar`, decided at a bar whose sigma is
/// `sigma`. A multiple of 0, or a sigma of 0 (no volatility estimate yet), disables that barrier.
#[inline]
pub fn set_barriers(params: &TrialParams, state: &mut EnvState, sigma: f64, fill_bar: u32) {
    let fill = state.entry_price;
    let side = f64::from(state.position);
    let width = |mult: f64| {
        if mult > 0.0 && sigma > 0.0 { mult * sigma } else { 0.0 }
    };
    let (tp, sl) = (width(params.take_profit_mult), width(params.stop_loss_mult));
    // Long: take-profit above, stop-loss below; short: mirrored.
    state.take_profit = if tp > 0.0 { fill * (1.0 + side * tp) } else { 0.0 };
    state.stop_loss = if sl > 0.0 { fill * (1.0 - side * sl) } else { 0.0 };
    state.expiry_bar = if params.max_hold_bars > 0 { fill_bar.saturating_add(params.max_hold_bars) } else { NO_EXPIRY };
    let live = state.take_profit > 0.0 || state.stop_loss > 0.0 || state.expiry_bar != NO_EXPIRY;
    state.barrier_live = u32::from(live);
}

/// Checks the open position's barriers on bar `u` (from the fill bar on). Returns the label and exit price
/// (before the spread): first the open (`gap`: the position was held into this bar), a gap beyond either
/// barrier filling at the open; then the range, stop-loss when both were touched; then the time expiry at
/// the close. A take-profit touched inside the bar fills at its level (a resting limit order); a stop-loss
/// touched inside the bar is a stop-market order, filled [`stop_fill`] beyond its level.
#[inline]
pub fn check_barriers(
    params: &TrialParams,
    state: &EnvState,
    bar: &Bar,
    u: u32,
    gap: bool,
) -> Option<(BarrierLabel, f64)> {
    if state.barrier_live == 0 || state.position == 0 {
        return None;
    }
    let long = state.position > 0;
    let (sl, tp) = (state.stop_loss, state.take_profit);
    // Adverse and favourable extremes of the bar for this side.
    let (adverse, favourable) = if long { (bar.low, bar.high) } else { (bar.high, bar.low) };
    let beyond = |price: f64, level: f64, up: bool| if up { price >= level } else { price <= level };
    if gap && tp > 0.0 && beyond(bar.open, tp, long) {
        return Some((BarrierLabel::TakeProfit, bar.open));
    }
    if gap && sl > 0.0 && beyond(bar.open, sl, !long) {
        return Some((BarrierLabel::StopLoss, bar.open));
    }
    if sl > 0.0 && beyond(adverse, sl, !long) {
        return Some((BarrierLabel::StopLoss, stop_fill(params, sl, bar, long)));
    }
    if tp > 0.0 && beyond(favourable, tp, long) {
        return Some((BarrierLabel::TakeProfit, tp));
    }
    if state.expiry_bar != NO_EXPIRY && u >= state.expiry_bar {
        return Some((BarrierLabel::Time, bar.close));
    }
    None
}

/// The price at which a stop-loss at `level`, touched inside `bar`, fills: `stop_slippage` of the bar's range
/// beyond the level, capped at the bar's adverse extreme (low for a long, high for a short). Prices seen at
/// discrete moments are already past a level when its touch is seen; filling exactly at the level would
/// spare every stopped trade that overshoot, which a search over stop widths learns to harvest.
#[inline]
pub fn stop_fill(params: &TrialParams, level: f64, bar: &Bar, long: bool) -> f64 {
    let slip = params.stop_slippage * (bar.high - bar.low);
    if long { (level - slip).max(bar.low) } else { (level + slip).min(bar.high) }
}
