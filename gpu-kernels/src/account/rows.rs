//! The learners' rows of a portfolio env (ENVIRONMENT.md, "Learners on a universe"): one row per (env,
//! symbol), the unit a shared per-symbol network sees, acts for and is credited for. A row's observation is
//! its symbol's features at the decision bar and 3 floats of the account ([`row_floats`]); its transition
//! is the single series' [`Transition`] with the bar `symbol x n_times + t` (the row features are stored
//! symbol-major, so the replay sampler rebuilds bars t and t + 1 of that symbol unchanged) and the
//! symbol's share of the account's step as its reward ([`env_rows`]). The learners' step calls them
//! through [`observe_universe_row`] (one row) and [`step_universe_env`] (one env's portfolio step and its
//! rows' transitions): the `universe_observe` and `universe_step` kernels per thread, the CPU backend per
//! row and per env (rayon), so both backends step the same bits.

use super::env::{NextBar, PortfolioEnvArgs, PortfolioStep, ScanInputs, held_side, portfolio_env_step, side_code};
use super::{AccountState, FillLog, Orders};
use crate::types::EnvStatus;
use crate::types::{Bar, Transition, TrialParams};

/// The 3 account floats of a row: the side the symbol holds (-1, 0, 1), its weight in the account
/// (`units x close / equity`, 0 for an account worth nothing) and the account's `equity / capital - 1`.
#[inline]
pub fn row_floats(params: &TrialParams, account: &AccountState, units: f64, close: f64) -> [f32; 3] {
    let weight = if account.equity > 0.0 { units * close / account.equity } else { 0.0 };
    [held_side(units) as f32, weight as f32, (account.equity / params.initial_capital - 1.0) as f32]
}

/// Writes a row's observation: the symbol's `features` at the decision bar, then [`row_floats`].
#[inline]
pub fn observe_row(
    params: &TrialParams,
    account: &AccountState,
    units: f64,
    close: f64,
    features: &[f32],
    out: &mut [f32],
) {
    let n = features.len();
    out[..n].copy_from_slice(features);
    out[n..n + 3].copy_from_slice(&row_floats(params, account, units, close));
}

/// One env's step as its rows see it: the account and units before and after it, the cells at the
/// decision bar t and at t + 1, and the step's outcome.
#[derive(Clone, Copy, Debug)]
pub struct EnvRowsStep<'a> {
    /// The account before the step.
    pub before: &'a AccountState,
    /// The account after the step.
    pub after: &'a AccountState,
    /// Units per symbol before the step.
    pub units_before: &'a [f64],
    /// Units per symbol after the step.
    pub units_after: &'a [f64],
    /// Cells at t (a symbol without a bar: its last close).
    pub now: &'a [Bar],
    /// Cells at t + 1.
    pub next: &'a [Bar],
    /// The step's outcome.
    pub step: &'a PortfolioStep,
    /// The codes the agent chose at t, one per symbol.
    pub chosen: &'a [u8],
}

/// The row transitions of one env's step, handed to `write(symbol, transition)` in symbol order.
///
/// A symbol's reward is its share of the account's step, over the equity at t: its price move
/// `units_before x (open - close_t) + units_after x (close_{t+1} - open)` (what its units earned before and
/// after the rebalance at the open of t + 1, at reference prices) less its share of the step's costs (in
/// proportion to the value it traded, `|units_after - units_before| x open`; equal shares when nothing
/// traded), the two together its part of the equity's change, times `w_pnl`; less `w_cost` times its share
/// of the costs again (the penalty the account's reward adds), less `w_drawdown` times an equal share of the
/// drawdown's rise. Summed over the symbols (fixed order) this is the account's reward with the simple
/// return in place of the log return (equal up to rounding; bankruptcy's closes at the close are credited
/// as costs only): the costs are paid in the equity whatever `w_cost` is, as in the single series' reward. `action` is the side each
/// symbol holds after the step (what the reward credits: a symbol that could not trade keeps its side; an
/// order that bought nothing leaves it flat), `chosen` the agent's code; `done` and `valid` the account's.
#[inline]
pub fn env_rows(params: &TrialParams, n_times: u32, s: EnvRowsStep<'_>, mut write: impl FnMut(usize, Transition)) {
    let n = s.units_before.len();
    let mut traded = 0.0;
    for k in 0..n {
        traded += (s.units_after[k] - s.units_before[k]).abs() * s.next[k].open;
    }
    let equity = s.before.equity;
    let scale = if equity > 0.0 { 1.0 / equity } else { 0.0 };
    let dd_rise = s.after.drawdown() - s.before.drawdown();
    let dd_share = if dd_rise > 0.0 { dd_rise / n as f64 } else { 0.0 };
    for k in 0..n {
        let (now, next) = (&s.now[k], &s.next[k]);
        let (ub, ua) = (s.units_before[k], s.units_after[k]);
        let pnl = ub * (next.open - now.close) + ua * (next.close - next.open);
        let share = if traded > 0.0 { (ua - ub).abs() * next.open / traded } else { 1.0 / n as f64 };
        let costs = s.step.costs * share;
        let reward =
            params.w_pnl * (pnl - costs) * scale - params.w_cost * costs * scale - params.w_drawdown * dd_share;
        let valid = s.step.valid != 0;
        write(
            k,
            Transition {
                bar: k as u32 * n_times + s.step.bar,
                state: row_floats(params, s.before, ub, now.close),
                next_state: row_floats(params, s.after, ua, next.close),
                reward: if valid { reward as f32 } else { 0.0 },
                action: side_code(held_side(ua)),
                done: s.step.done,
                label: 0,
                valid: s.step.valid,
                chosen: s.chosen[k],
                _pad: [0; 3],
            },
        );
    }
}

/// Writes the observation of symbol `symbol` of the env whose account is `account` and who holds `units`
/// of it ([`observe_row`]): the decision bar is the account's (at most the last time), `bars` the universe's
/// cells time-major (`n_times x n_symbols`) and `features` the rows' features symbol-major (`n_symbols x
/// n_times x n_features`: the rows' replay market, whose bar `symbol x n_times + t` a row's transition names).
#[allow(clippy::too_many_arguments, reason = "one row's inputs, as a kernel thread reads them")]
#[inline]
pub fn observe_universe_row(
    args: &PortfolioEnvArgs,
    params: &TrialParams,
    account: &AccountState,
    units: f64,
    bars: &[Bar],
    features: &[f32],
    symbol: usize,
    out: &mut [f32],
) {
    let (n, times) = (args.n_symbols as usize, args.n_times as usize);
    let f = out.len() - 3;
    let t = (account.bar as usize).min(times - 1);
    let at = (symbol * times + t) * f;
    observe_row(params, account, units, bars[t * n + symbol].close, &features[at..at + f], out);
}

/// One env's state as the learners' step changes it: its account, its units (N), a scratch copy of the
/// units before the step (N) and its orders' scratch (N each).
#[derive(Debug)]
pub struct UniverseEnv<'a> {
    /// The account.
    pub account: &'a mut AccountState,
    /// Units per symbol.
    pub units: &'a mut [f64],
    /// Scratch: the units before the step.
    pub units_before: &'a mut [f64],
    /// The orders' scratch.
    pub orders: Orders<'a>,
}

/// No fill log: `()`'s, as a type of its own. [`step_universe_env`] steps with it so that
/// [`portfolio_env_step`] for `()` keeps `portfolio_env_scan` as its single caller and stays inlined there
/// (that kernel's PTX unchanged by this one's).
struct NoLog;

impl FillLog for NoLog {}

/// Env `env` takes one portfolio step with its codes in `input.actions` (`n_envs x n_symbols`, one step),
/// as [`super::env::scan_portfolio_env`] takes a step of one (the segment ends where the next bar lies past
/// the block; then [`portfolio_env_step`]), and its rows' transitions go to `write(symbol, transition)`
/// ([`env_rows`], the cells of the step's decision bar t and of t + 1, t at most `n_times - 2`). Returns the
/// step's outcome.
#[inline]
pub fn step_universe_env(
    env: usize,
    args: &PortfolioEnvArgs,
    params: &TrialParams,
    state: UniverseEnv<'_>,
    input: ScanInputs<'_>,
    write: impl FnMut(usize, Transition),
) -> PortfolioStep {
    let n = args.n_symbols as usize;
    let UniverseEnv { account, units, units_before, mut orders } = state;
    let before = *account;
    units_before.copy_from_slice(units);
    let t = account.bar as usize;
    if t + 1 >= args.n_times as usize && !account.status().is_done() {
        account.status = EnvStatus::SegmentEnd as u32;
    }
    let row = ((t + 1) * n).min(input.bars.len() - n);
    let next = NextBar { bars: &input.bars[row..row + n], tradable: &input.tradable[row..row + n] };
    let chosen = &input.actions[env * n..(env + 1) * n];
    let outcome = portfolio_env_step(params, account, units, chosen, next, &mut orders, &mut NoLog);
    let t = (outcome.bar as usize).min(args.n_times as usize - 2);
    let rows = EnvRowsStep {
        before: &before,
        after: account,
        units_before,
        units_after: units,
        now: &input.bars[t * n..(t + 1) * n],
        next: &input.bars[(t + 1) * n..(t + 2) * n],
        step: &outcome,
        chosen,
    };
    env_rows(params, args.n_times, rows, write);
    outcome
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::account::Orders;
    use crate::account::env::{NextBar, portfolio_env_step};

    fn bar(open: f64, close: f64) -> Bar {
        Bar { open, high: open.max(close), low: open.min(close), close, sigma: 0.0 }
    }

    /// 1,000 in cash, both symbols long at the opens 10 and 20 (500 each: 50 and 25 units), closing at 11
    /// and 19: the rows earn 50 x 1 / 1,000 = 0.05 and 25 x -1 / 1,000 = -0.025; with a 0.1% commission
    /// the costs (0.5 + 0.5) are shared by traded value, 0.0005 each, and the rows still sum to the
    /// account's simple return.
    #[test]
    fn rows_earn_their_units_moves_and_share_the_costs() {
        for (commission, w_cost) in [(0.0, 1.0), (0.001, 0.0), (0.001, 1.0), (0.001, 2.0)] {
            let p = TrialParams { commission, w_cost, ..TrialParams::frictionless(1_000.0) };
            let mut account = AccountState::new(&p, 0, 10);
            let before = account;
            let mut units = [0.0; 2];
            let (mut v, mut u, mut s) = ([0.0; 2], [0.0; 2], [0u32; 2]);
            let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut s };
            let (now, next) = ([bar(10.0, 10.0), bar(20.0, 20.0)], [bar(10.0, 11.0), bar(20.0, 19.0)]);
            let step = portfolio_env_step(
                &p,
                &mut account,
                &mut units,
                &[1, 1],
                NextBar { bars: &next, tradable: &[1, 1] },
                &mut orders,
                &mut (),
            );
            let rows = EnvRowsStep {
                before: &before,
                after: &account,
                units_before: &[0.0; 2],
                units_after: &units,
                now: &now,
                next: &next,
                step: &step,
                chosen: &[1, 1],
            };
            let mut out = [Transition::default(); 2];
            env_rows(&p, 10, rows, |k, t| out[k] = t);
            let (r0, r1) = (f64::from(out[0].reward), f64::from(out[1].reward));
            if commission == 0.0 {
                assert_eq!(units, [50.0, 25.0]);
                assert_eq!((r0, r1), (f64::from(0.05f32), f64::from(-0.025f32)));
            }
            // The rows add up to the account's reward with the simple return: the costs are in the equity's
            // change whatever w_cost, and w_cost charges them again.
            assert!(step.costs > 0.0 || commission == 0.0);
            let account_reward = p.w_pnl * (account.equity / 1_000.0 - 1.0) - w_cost * step.costs / 1_000.0;
            assert!((r0 + r1 - account_reward).abs() < 1e-7, "{commission}, {w_cost}: {r0} + {r1} vs {account_reward}");
            assert_eq!((out[0].bar, out[1].bar), (0, 10));
            assert_eq!((out[0].action, out[0].state[0], out[0].next_state[0]), (1, 0.0, 1.0));
        }
    }

    /// [`step_universe_env`] over a whole segment (and a step past its end) gives the accounts, units,
    /// outcomes and row transitions of [`crate::account::env::scan_portfolio_env`] followed by [`env_rows`],
    /// bit for bit; [`observe_universe_row`] reads a row's features symbol-major where [`observe_row`] is
    /// handed them. 2 envs of 3 symbols over 6 times, shorts and a commission, seeded codes.
    #[test]
    fn the_universe_bodies_step_and_observe_as_the_scan_and_the_rows() {
        use crate::account::env::{PortfolioEnvArgs, ScanInputs, scan_portfolio_env};
        use std::vec::Vec;
        use std::{format, vec};
        let (n, times, envs, f) = (3usize, 6usize, 2usize, 2usize);
        let p = TrialParams { commission: 0.001, allow_short: 1, w_cost: 1.0, ..TrialParams::frictionless(1_000.0) };
        let bars: Vec<Bar> =
            (0..times * n).map(|i| bar(10.0 + (i * 7 % 5) as f64, 10.0 + (i * 3 % 7) as f64)).collect();
        let tradable = vec![1u8; times * n];
        let time_major: Vec<f32> = (0..times * n * f).map(|i| i as f32 * 0.5).collect();
        let mut symbol_major = Vec::new();
        for sym in 0..n {
            for t in 0..times {
                symbol_major.extend_from_slice(&time_major[(t * n + sym) * f..(t * n + sym + 1) * f]);
            }
        }
        let args = PortfolioEnvArgs {
            n_times: times as u32,
            n_symbols: n as u32,
            n_envs: envs as u32,
            envs_per_trial: 2,
            steps: 1,
            _pad: 0,
        };
        let mut a = [AccountState::new(&p, 1, 5), AccountState::new(&p, 2, 5)];
        let mut b = a;
        let (mut ua, mut ub) = (vec![0.0; envs * n], vec![0.0; envs * n]);
        for step in 0..5u32 {
            let actions: Vec<u8> = (0..envs * n).map(|i| ((i as u32 * 5 + step * 3) % 3) as u8).collect();
            let input = ScanInputs { bars: &bars, tradable: &tradable, actions: &actions };
            for env in 0..envs {
                let sym = env * n..(env + 1) * n;
                for k in 0..n {
                    let (mut want, mut got) = ([0.0f32; 5], [0.0f32; 5]);
                    let t = (b[env].bar as usize).min(times - 1);
                    let feat = &time_major[(t * n + k) * f..(t * n + k + 1) * f];
                    observe_row(&p, &b[env], ub[env * n + k], bars[t * n + k].close, feat, &mut want);
                    observe_universe_row(&args, &p, &a[env], ua[env * n + k], &bars, &symbol_major, k, &mut got);
                    assert_eq!(want.map(f32::to_bits), got.map(f32::to_bits), "step {step} env {env} symbol {k}");
                }
                // The reference: the scan's step, then the rows of the step.
                let (before, units_before) = (b[env], ub[sym.clone()].to_vec());
                let (mut v, mut u, mut o) = ([0.0; 3], [0.0; 3], [0u32; 3]);
                let mut orders = Orders { value: &mut v, units: &mut u, symbol: &mut o };
                let mut outcome = PortfolioStep::default();
                scan_portfolio_env(
                    env,
                    &args,
                    &p,
                    &mut b[env],
                    &mut ub[sym.clone()],
                    &mut orders,
                    input,
                    |_, s| outcome = s,
                    |_, _, _| {},
                );
                let t = (outcome.bar as usize).min(times - 2);
                let rows = EnvRowsStep {
                    before: &before,
                    after: &b[env],
                    units_before: &units_before,
                    units_after: &ub[sym.clone()],
                    now: &bars[t * n..(t + 1) * n],
                    next: &bars[(t + 1) * n..(t + 2) * n],
                    step: &outcome,
                    chosen: &actions[sym.clone()],
                };
                let mut want = [Transition::default(); 3];
                env_rows(&p, times as u32, rows, |k, tr| want[k] = tr);
                // The body.
                let (mut v, mut u, mut o, mut scratch) = ([0.0; 3], [0.0; 3], [0u32; 3], [0.0; 3]);
                let state = UniverseEnv {
                    account: &mut a[env],
                    units: &mut ua[sym.clone()],
                    units_before: &mut scratch,
                    orders: Orders { value: &mut v, units: &mut u, symbol: &mut o },
                };
                let mut got = [Transition::default(); 3];
                let got_outcome = step_universe_env(env, &args, &p, state, input, |k, tr| got[k] = tr);
                assert_eq!(format!("{outcome:?}"), format!("{got_outcome:?}"), "step {step} env {env}");
                assert_eq!(format!("{want:?}"), format!("{got:?}"), "step {step} env {env}");
                assert_eq!(format!("{:?}", b[env]), format!("{:?}", a[env]));
            }
            assert_eq!(
                ua.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                ub.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
        }
        assert!(a.iter().all(|x| x.status().is_done()), "the segments ended");
    }
}
