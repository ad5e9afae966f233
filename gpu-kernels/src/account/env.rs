//! The portfolio env: one cash account over N symbols ([`super`]'s rule) stepped by an action per symbol
//! (ENVIRONMENT.md, "The portfolio env"). The CPU backend and the `portfolio_env_scan` kernel call
//! [`scan_portfolio_env`], one env per thread: the orders of a rebalance share the cash and go in value
//! order, so the symbols of one env cannot step apart.
//!
//! Each symbol's action code (0 flat, 1 long, 2 short; SHORT is FLAT where shorts are off) is a target
//! side. The sizing is an equal target weight across the sides that are not flat: with k of them, a symbol
//! of side `d` targets `d x (1 - cash_reserve_pct) / max(1, k)` of the account. A step whose target sides
//! equal the sides held on every symbol that trades at the next open sends no order (a hold: weights
//! drift); a step where one of them differs rebalances every symbol that trades there to its target weight
//! ([`super::account_step`]: fills at the next open, half the spread and the commission, sales first, a
//! purchase the cash limits, the breaker and bankruptcy on the account). The reward is the single series'
//! ([`crate::reward::reward`]) on the account's equity, without a barrier term.

use super::{AccountState, FillLog, Orders, account_step};
use crate::portfolio::target_side;
use crate::reward::reward;
use crate::types::{Action, Bar, BarrierLabel, EnvStatus, TERMINATED, TRUNCATED, TrialParams};

/// Scalar arguments of a portfolio env scan.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PortfolioEnvArgs {
    /// Times in the price block.
    pub n_times: u32,
    /// Symbols (N).
    pub n_symbols: u32,
    /// Envs (trials x envs per trial).
    pub n_envs: u32,
    /// Envs per trial (env `i` is trial `i / envs_per_trial`'s).
    pub envs_per_trial: u32,
    /// Steps of this scan.
    pub steps: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<PortfolioEnvArgs>() == 24);

impl PortfolioEnvArgs {
    /// Envs, as an index bound.
    #[inline]
    pub fn n_envs(&self) -> usize {
        self.n_envs as usize
    }
}

/// What one step of one env produced.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PortfolioStep {
    /// Raw reward (0 for a step that did not happen).
    pub reward: f64,
    /// The account's equity after the step.
    pub equity: f64,
    /// Spread plus commission paid by the step (bankruptcy's closes included).
    pub costs: f64,
    /// The decision bar t of the step (its close had been seen).
    pub bar: u32,
    /// How the env's run ended after the step: 0 it continues, [`TERMINATED`] or [`TRUNCATED`].
    pub done: u8,
    /// 0 for a step of an env that was already done (padding).
    pub valid: u8,
    /// 1 when the account sent its orders at the open: a side changed (a rebalance), or the breaker closed.
    pub rebalanced: u8,
    /// Padding (zero).
    pub _pad: u8,
}

const _: () = assert!(core::mem::size_of::<PortfolioStep>() == 32);

/// The side a symbol holds: 1 long, -1 short, 0 flat.
#[inline]
pub fn held_side(units: f64) -> i32 {
    if units > 0.0 {
        1
    } else if units < 0.0 {
        -1
    } else {
        0
    }
}

/// The action code of a held side (what took effect).
#[inline]
pub fn side_code(side: i32) -> u8 {
    match side {
        1 => Action::Long as u8,
        -1 => Action::Short as u8,
        _ => Action::Flat as u8,
    }
}

/// The target weight of a symbol of target side `side` when `open` symbols have a side that is not flat:
/// `side x (1 - cash_reserve_pct) / max(1, open)`.
#[inline]
pub fn equal_weight(params: &TrialParams, side: i32, open: u32) -> f64 {
    let per_position = (1.0 - params.cash_reserve_pct) / f64::from(if open > 1 { open } else { 1 });
    f64::from(side) * per_position
}

/// The done code of an account's status: [`TERMINATED`] after bankruptcy or the breaker's halt,
/// [`TRUNCATED`] at the segment's end, 0 while it steps.
#[inline]
pub fn done_code(status: EnvStatus) -> u8 {
    match status {
        EnvStatus::Bankrupt | EnvStatus::Halted => TERMINATED,
        EnvStatus::SegmentEnd => TRUNCATED,
        EnvStatus::Active | EnvStatus::HaltPending => 0,
    }
}

/// One bar of the universe for a step: bar t + 1's cells and flags of the N symbols.
#[derive(Clone, Copy, Debug)]
pub struct NextBar<'a> {
    /// The cells (a symbol without a bar: its last close in every field).
    pub bars: &'a [Bar],
    /// 1 where the symbol has a bar.
    pub tradable: &'a [u8],
}

/// Advances one env from the close of bar t to the close of bar t + 1 with `actions` (N codes decided at
/// t): the rebalance at the open when a target side differs from a held one on a symbol that trades
/// there (the breaker's close while it is pending), the mark at the close, the reward. A done env does not
/// change (its `step_costs` reads 0) and yields an invalid step.
#[inline]
pub fn portfolio_env_step(
    params: &TrialParams,
    state: &mut AccountState,
    units: &mut [f64],
    actions: &[u8],
    next: NextBar<'_>,
    orders: &mut Orders<'_>,
    log: &mut impl FillLog,
) -> PortfolioStep {
    let before = state.status();
    let bar = state.bar;
    if before.is_done() {
        state.step_costs = 0.0;
        return PortfolioStep { equity: state.equity, bar, done: done_code(before), ..PortfolioStep::default() };
    }
    let allow_short = params.allow_short != 0;
    let (mut open, mut changed) = (0u32, false);
    for (s, &held) in units.iter().enumerate() {
        let side = target_side(actions[s], allow_short);
        open += u32::from(side != 0);
        changed |= next.tradable[s] != 0 && side != held_side(held);
    }
    let (equity_before, drawdown_before) = (state.equity, state.drawdown());
    let target =
        |s: usize| if changed { equal_weight(params, target_side(actions[s], allow_short), open) } else { f64::NAN };
    let (bars, flags) = (next.bars, next.tradable);
    let (close, tradable) = (|s: usize| bars[s].close, |s: usize| flags[s] != 0);
    account_step(params, state, units, target, |s| bars[s].open, close, tradable, orders, log);
    let costs = state.step_costs;
    let r = reward(params, equity_before, state.equity, drawdown_before, state.drawdown(), costs, BarrierLabel::None);
    PortfolioStep {
        reward: r,
        equity: state.equity,
        costs,
        bar,
        done: done_code(state.status()),
        valid: 1,
        rebalanced: u8::from(changed || before == EnvStatus::HaltPending),
        _pad: 0,
    }
}

/// The market and the actions a scan reads: `bars` and `tradable` time-major (`n_times x n_symbols`, a
/// [`super::backtest::portfolio_column`]'s block), `actions` step-major (`steps x n_envs x n_symbols`).
#[derive(Clone, Copy, Debug)]
pub struct ScanInputs<'a> {
    /// The cells.
    pub bars: &'a [Bar],
    /// The flags.
    pub tradable: &'a [u8],
    /// The action codes.
    pub actions: &'a [u8],
}

/// Env `env` walks `args.steps` steps ([`portfolio_env_step`] each) with its trial's `params`, its account
/// `state`, its `units` (N) and its `orders` scratch (N). Each step's outcome goes to `step_out(step,
/// outcome)` and each symbol's side held after it to `side_out(step, symbol, code)` (FLAT for a step that did
/// not happen). An env whose next bar lies past the block ends its segment.
#[allow(clippy::too_many_arguments, reason = "the inputs and outputs of one env, as a kernel passes them")]
#[inline]
pub fn scan_portfolio_env(
    env: usize,
    args: &PortfolioEnvArgs,
    params: &TrialParams,
    state: &mut AccountState,
    units: &mut [f64],
    orders: &mut Orders<'_>,
    input: ScanInputs<'_>,
    mut step_out: impl FnMut(usize, PortfolioStep),
    mut side_out: impl FnMut(usize, usize, u8),
) {
    let n = args.n_symbols as usize;
    for step in 0..args.steps as usize {
        let t = state.bar as usize;
        if t + 1 >= args.n_times as usize && !state.status().is_done() {
            state.status = EnvStatus::SegmentEnd as u32;
        }
        let row = ((t + 1) * n).min(input.bars.len() - n);
        let next = NextBar { bars: &input.bars[row..row + n], tradable: &input.tradable[row..row + n] };
        let at = (step * args.n_envs() + env) * n;
        let outcome = portfolio_env_step(params, state, units, &input.actions[at..at + n], next, orders, &mut ());
        for (s, &u) in units.iter().enumerate() {
            side_out(step, s, if outcome.valid != 0 { side_code(held_side(u)) } else { Action::Flat as u8 });
        }
        step_out(step, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal weights across the sides that are not flat, the cash reserve kept: 3 open at a 10% reserve
    /// is 0.3 each; none open is 0.
    #[test]
    fn equal_weights_share_what_the_reserve_leaves() {
        let p = TrialParams { cash_reserve_pct: 0.1, ..TrialParams::frictionless(1_000.0) };
        assert_eq!(equal_weight(&p, 1, 3), 0.9 / 3.0);
        assert_eq!(equal_weight(&p, -1, 3), -0.9 / 3.0);
        assert_eq!(equal_weight(&p, 1, 1), 0.9);
        assert_eq!(equal_weight(&p, 0, 0), 0.0);
    }

    /// A step whose sides equal the held ones sends no order, even though the weights drifted; a change on
    /// one symbol rebalances both. Frictionless, 1,000 of cash, two symbols opening at 10 and 20.
    #[test]
    fn a_hold_sends_no_order_and_a_change_rebalances_all() {
        let p = TrialParams::frictionless(1_000.0);
        let mut state = AccountState::new(&p, 0, 10);
        let mut units = [0.0; 2];
        let (mut v, mut u, mut s) = ([0.0; 2], [0.0; 2], [0u32; 2]);
        let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut s };
        let bar = |open: f64, close: f64| Bar { open, high: open.max(close), low: open.min(close), close, sigma: 0.0 };
        let first = [bar(10.0, 20.0), bar(20.0, 20.0)];
        let next = NextBar { bars: &first, tradable: &[1, 1] };
        let step = portfolio_env_step(&p, &mut state, &mut units, &[1, 1], next, &mut orders, &mut ());
        assert_eq!((units, step.rebalanced, step.equity), ([50.0, 25.0], 1, 1_500.0));
        // Symbol 0 doubled: 1,000 of 1,500 in it, yet the same sides hold.
        let second = [bar(20.0, 20.0), bar(20.0, 20.0)];
        let next = NextBar { bars: &second, tradable: &[1, 1] };
        let step = portfolio_env_step(&p, &mut state, &mut units, &[1, 1], next, &mut orders, &mut ());
        assert_eq!((units, step.rebalanced, step.costs), ([50.0, 25.0], 0, 0.0));
        // Symbol 1 goes flat: symbol 0 takes the whole account, 1,500 / 20 = 75 units.
        let step = portfolio_env_step(&p, &mut state, &mut units, &[1, 0], next, &mut orders, &mut ());
        assert_eq!((units, step.rebalanced, step.equity, state.cash), ([75.0, 0.0], 1, 1_500.0, 0.0));
    }
}
