//! One environment step (execution, triple barrier, marking, reward) and what it exposes to a policy: the
//! observation and the compressed transition.

use crate::barrier::{check_barriers, set_barriers};
use crate::portfolio::{ExitReason, TradeLog, close_position, effective_target, mark_at_close, trade_at_open};
use crate::reward::reward;
use crate::types::{Bar, BarrierLabel, EnvState, Transition, TrialParams};

/// What one step produced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOutcome {
    /// Portfolio floats of s_t.
    pub state: [f32; 3],
    /// Portfolio floats of s_{t+1}.
    pub next_state: [f32; 3],
    /// Raw reward (before normalization).
    pub reward: f64,
    /// Barrier resolved on bar t+1.
    pub label: BarrierLabel,
    /// The env's run ended at s_{t+1} (terminated or truncated).
    pub done: bool,
    /// It ended by reaching the end of its segment or of the data (a truncation, not a terminal state).
    pub truncated: bool,
    /// Action code that took effect (FLAT when the breaker overrode the agent or a disallowed SHORT acted as
    /// FLAT).
    pub effective: u8,
    /// The env was active at t (false: nothing happened, the transition is padding).
    pub valid: bool,
}

impl StepOutcome {
    /// The outcome of an env that no longer steps: nothing paid or labelled, an invalid (padding) transition.
    #[inline]
    fn no_step(state: &mut EnvState, floats: [f32; 3]) -> Self {
        rest(state);
        Self {
            state: floats,
            next_state: floats,
            reward: 0.0,
            label: BarrierLabel::None,
            done: true,
            truncated: state.status() == crate::EnvStatus::SegmentEnd,
            effective: 0,
            valid: false,
        }
    }
}

/// What a step that does not step leaves: nothing paid, no barrier label.
#[inline]
fn rest(state: &mut EnvState) {
    state.step_costs = 0.0;
    state.label = 0;
}

/// The 3 portfolio floats of the state: position, open-position return `(close / entry - 1) x side`
/// (0 when flat), `equity / initial_capital - 1`.
#[inline]
pub fn portfolio_floats(params: &TrialParams, state: &EnvState, close: f64) -> [f32; 3] {
    let open_return = if state.position != 0 && state.entry_price > 0.0 {
        (close / state.entry_price - 1.0) * f64::from(state.position)
    } else {
        0.0
    };
    [state.position as f32, open_return as f32, (state.equity / params.initial_capital - 1.0) as f32]
}

/// Advances one env from the close of bar t (`decision`) to the close of bar t+1 (`next`), given the
/// action decided at t: trade at the open, barrier check on the rest of the bar, mark at the close, reward.
/// A done env does not change (its `step_costs` and `label` read 0) and yields an invalid outcome.
#[inline]
pub fn env_step(params: &TrialParams, state: &mut EnvState, action: u8, decision: &Bar, next: &Bar) -> StepOutcome {
    env_step_logged(params, state, action, decision, next, &mut ())
}

/// [`env_step`], telling `log` about every trade.
#[inline]
pub fn env_step_logged(
    params: &TrialParams,
    state: &mut EnvState,
    action: u8,
    decision: &Bar,
    next: &Bar,
    log: &mut impl TradeLog,
) -> StepOutcome {
    let before = state.status();
    let floats_before = portfolio_floats(params, state, decision.close);
    if before.is_done() {
        return StepOutcome::no_step(state, floats_before);
    }
    let (equity_before, drawdown_before) = (state.equity, state.drawdown());
    let (held, costs, label) = advance(params, state, action, decision, next, log);
    let r = reward(params, equity_before, state.equity, drawdown_before, state.drawdown(), costs, label);
    StepOutcome {
        state: floats_before,
        next_state: portfolio_floats(params, state, next.close),
        reward: r,
        label,
        done: state.status().is_done(),
        truncated: state.status() == crate::EnvStatus::SegmentEnd,
        effective: match held {
            1 => crate::Action::Long as u8,
            -1 => crate::Action::Short as u8,
            _ => crate::Action::Flat as u8,
        },
        valid: true,
    }
}

/// The account's side of a step (what a backtest needs, without the state floats and the reward): a done
/// env does not change; otherwise trade at the open, barrier check on the rest of the bar, mark at the close.
/// Every rule is [`env_step_logged`]'s, which calls it.
#[inline]
pub fn account_step(
    params: &TrialParams,
    state: &mut EnvState,
    action: u8,
    decision: &Bar,
    next: &Bar,
    log: &mut impl TradeLog,
) {
    if state.status().is_done() {
        rest(state);
    } else {
        advance(params, state, action, decision, next, log);
    }
}

/// One step of an env that is not done: returns the position held after the trade at the open (the action
/// that took effect: FLAT when an open bought nothing, the breaker's FLAT), the step's costs and the barrier
/// label.
#[inline]
fn advance(
    params: &TrialParams,
    state: &mut EnvState,
    action: u8,
    decision: &Bar,
    next: &Bar,
    log: &mut impl TradeLog,
) -> (i32, f64, BarrierLabel) {
    let before = state.status();
    let fill_bar = state.bar + 1;
    let target = effective_target(params, before, action);
    let reason = if before == crate::EnvStatus::HaltPending { ExitReason::Breaker } else { ExitReason::Signal };
    let (mut costs, opened) = trade_at_open(params, state, target, next.open, fill_bar, reason, log);
    let held = state.position;
    if opened {
        set_barriers(params, state, decision.sigma, fill_bar);
    }
    let mut label = BarrierLabel::None;
    // A position held into this bar can gap through a barrier at the open; one opened at this open cannot.
    if let Some((hit, exit_price)) = check_barriers(params, state, next, fill_bar, !opened) {
        label = hit;
        state.barrier_live = 0;
        if params.barrier_exits != 0 {
            let fill = close_position(params, state, exit_price);
            log.closed(fill_bar, &fill, ExitReason::from_code(hit as u32), state.cash);
            costs += fill.costs;
        }
    }
    mark_at_close(params, state, before, next.close, costs);
    if state.status() == crate::EnvStatus::Bankrupt && state.position != 0 {
        // Bankruptcy terminates the env: its position is closed at this close, costs charged, in the ledger.
        let fill = close_position(params, state, next.close);
        log.closed(fill_bar, &fill, ExitReason::Bankruptcy, state.cash);
        costs += fill.costs;
        state.step_costs = costs;
        state.equity = state.cash;
    }
    state.label = label as u32;
    (held, costs, label)
}

/// [`env_step`] on the whole price series: reads bars `state.bar` and `state.bar + 1`. An env whose next bar
/// lies past the series ends its segment (invalid outcome).
#[inline]
pub fn env_step_on_series(params: &TrialParams, state: &mut EnvState, action: u8, bars: &[Bar]) -> StepOutcome {
    let t = state.bar as usize;
    if t + 1 >= bars.len() {
        if !state.status().is_done() {
            state.status = crate::EnvStatus::SegmentEnd as u32;
        }
        let floats = portfolio_floats(params, state, bars.get(t).map_or(0.0, |b| b.close));
        return StepOutcome::no_step(state, floats);
    }
    env_step(params, state, action, &bars[t], &bars[t + 1])
}

/// [`env_step_on_series`]'s change of `state` alone, for the greedy walks: the account's side of the step
/// ([`account_step`]), without the reward (a logarithm and two divisions in `f64`) or the state floats before
/// and after it, which a walk does not read. The state ends with the same bits as after
/// [`env_step_on_series`]: a done env or one past the series' end keeps its state with `step_costs` and
/// `label` zeroed (the series' end first marks it ended), any other takes [`account_step`]'s step, which is
/// [`env_step`]'s.
#[inline]
pub fn walk_step_on_series(params: &TrialParams, state: &mut EnvState, action: u8, bars: &[Bar]) {
    let t = state.bar as usize;
    if t + 1 >= bars.len() {
        if !state.status().is_done() {
            state.status = crate::EnvStatus::SegmentEnd as u32;
        }
        rest(state);
        return;
    }
    account_step(params, state, action, &bars[t], &bars[t + 1], &mut ());
}

/// The compressed transition of a step taken from bar `bar` with the agent's `action` (the transition keeps
/// the action that took effect, and the chosen one beside it).
#[inline]
pub fn transition(bar: u32, action: u8, outcome: &StepOutcome) -> Transition {
    let done = match (outcome.done, outcome.truncated) {
        (false, _) => 0,
        (true, false) => crate::types::TERMINATED,
        (true, true) => crate::types::TRUNCATED,
    };
    Transition {
        bar,
        state: outcome.state,
        next_state: outcome.next_state,
        reward: outcome.reward as f32,
        action: outcome.effective,
        done,
        label: outcome.label as u8,
        valid: u8::from(outcome.valid),
        chosen: action,
        _pad: [0; 3],
    }
}

/// Ring slot of env `env` (within its trial) at step `step` after `head` transitions per trial were written:
/// each step writes the trial's E envs contiguously, in env order, wrapping at `capacity`.
#[inline]
pub fn ring_slot(head: u64, step: u64, envs_per_trial: u64, env: u64, capacity: u64) -> u64 {
    (head + step * envs_per_trial + env) % capacity
}

/// Writes the observation of an env: `features` (bar t's row) then its 3 portfolio floats.
#[inline]
pub fn write_observation(params: &TrialParams, state: &EnvState, features: &[f32], close: f64, out: &mut [f32]) {
    let n = features.len();
    out[..n].copy_from_slice(features);
    out[n..n + 3].copy_from_slice(&portfolio_floats(params, state, close));
}
