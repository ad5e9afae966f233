//! The universe learners' row kernels: every row's observation into the acting buffer, and every env's
//! portfolio step with its rows' transitions into the replay ring or rollout ([`crate::account::rows`]).

use super::thread_index;
use crate::account::env::{PortfolioEnvArgs, ScanInputs};
use crate::account::rows::{UniverseEnv, observe_universe_row, step_universe_env};
use crate::account::{AccountState, Orders};
use crate::batch::BatchArgs;
use crate::types::{Bar, Transition, TrialParams};
use core::slice;

/// Writes every row's observation (`n_features + 3` floats; row `env x n_symbols + symbol`) to `out`, one
/// thread per row ([`observe_universe_row`]).
///
/// # Safety
/// `params`: `n_envs / envs_per_trial`; `accounts`: `n_envs`; `units`: `n_envs x n_symbols`; `bars`:
/// `n_times x n_symbols`; `features`: `n_symbols x n_times x n_features`; `out`: `n_envs x n_symbols x
/// (n_features + 3)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn universe_observe(
    params: *const TrialParams,
    accounts: *const AccountState,
    units: *const f64,
    bars: *const Bar,
    features: *const f32,
    out: *mut f32,
    args: PortfolioEnvArgs,
    n_features: u32,
) {
    crate::nvptx_ops::follow_previous();
    let row = thread_index();
    let n = args.n_symbols as usize;
    if row >= args.n_envs() * n {
        return;
    }
    let (env, symbol) = (row / n, row % n);
    let (f, block) = (n_features as usize, args.n_times as usize * n);
    // SAFETY: lengths as documented; this thread alone writes row `row` of `out`.
    unsafe {
        observe_universe_row(
            &args,
            &*params.add(env / args.envs_per_trial as usize),
            &*accounts.add(env),
            *units.add(row),
            slice::from_raw_parts(bars, block),
            slice::from_raw_parts(features, block * f),
            symbol,
            slice::from_raw_parts_mut(out.add(row * (f + 3)), f + 3),
        );
    }
}

/// One portfolio step of every env with the rows' codes `actions` (`n_envs x n_symbols`), each row's
/// transition written to its ring slot (`ring_args.ring_index(row, 0, ring_origin)`), one thread per env
/// ([`step_universe_env`]).
///
/// # Safety
/// `params`: `n_envs / envs_per_trial`; `accounts`: `n_envs`; `units`, `units_before`, `order_value`,
/// `order_units`, `order_symbol`, `actions`: `n_envs x n_symbols`; `bars`, `tradable`: `n_times x
/// n_symbols`; `row_params`: `ring_args.n_trials`; `ring`: `ring_args.n_trials x ring_args.capacity`, with
/// `ring_args.n_envs() = n_envs x n_symbols <= ring_args.n_trials x ring_args.capacity` (the rows of one
/// step fill distinct slots).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn universe_step(
    params: *const TrialParams,
    accounts: *mut AccountState,
    units: *mut f64,
    units_before: *mut f64,
    order_value: *mut f64,
    order_units: *mut f64,
    order_symbol: *mut u32,
    actions: *const u8,
    bars: *const Bar,
    tradable: *const u8,
    row_params: *const TrialParams,
    ring: *mut Transition,
    args: PortfolioEnvArgs,
    ring_args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    if env >= args.n_envs() {
        return;
    }
    let n = args.n_symbols as usize;
    let block = args.n_times as usize * n;
    // SAFETY: lengths as documented; this thread alone touches env `env`'s account, units, scratch rows and
    // its rows' ring slots.
    unsafe {
        let trial = env / args.envs_per_trial as usize;
        let state = UniverseEnv {
            account: &mut *accounts.add(env),
            units: slice::from_raw_parts_mut(units.add(env * n), n),
            units_before: slice::from_raw_parts_mut(units_before.add(env * n), n),
            orders: Orders {
                value: slice::from_raw_parts_mut(order_value.add(env * n), n),
                units: slice::from_raw_parts_mut(order_units.add(env * n), n),
                symbol: slice::from_raw_parts_mut(order_symbol.add(env * n), n),
            },
        };
        let input = ScanInputs {
            bars: slice::from_raw_parts(bars, block),
            tradable: slice::from_raw_parts(tradable, block),
            actions: slice::from_raw_parts(actions, args.n_envs() * n),
        };
        let origin = (*row_params.add(env * n / ring_args.envs_per_trial as usize)).ring_origin;
        step_universe_env(env, &args, &*params.add(trial), state, input, |k, t| {
            *ring.add(ring_args.ring_index(env * n + k, 0, origin)) = t;
        });
    }
}
