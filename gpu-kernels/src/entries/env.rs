//! The env kernels: scans, observations, reward normalization, replay sampling; the portfolio env's scan.

use super::thread_index;
use crate::account::env::{PortfolioEnvArgs, PortfolioStep, ScanInputs, scan_portfolio_env};
use crate::account::{AccountState, Orders};
use crate::batch::{
    BatchArgs, SampleArgs, chunk_index, chunk_moments, merge_trial_moments, normalize_transition, observe_entry,
    sample_entry, sample_of, sample_row, scan_env,
};
use crate::types::{Bar, EnvState, Moments, Transition, TrialParams};
use core::slice;

/// Walks every env over `args.steps` bars (one thread per env), writing transitions to the ring.
///
/// # Safety
/// `params`: `n_trials`; `states`: `n_envs`; `actions`: `steps x n_envs`; `bars`: `n_bars`; `ring`:
/// `n_trials x capacity` (or 1 when capacity is 0). `steps x envs_per_trial <= capacity`, so no two threads
/// write one ring slot.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn env_scan(
    params: *const TrialParams,
    states: *mut EnvState,
    actions: *const u8,
    bars: *const Bar,
    ring: *mut Transition,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    if env >= args.n_envs() {
        return;
    }
    // SAFETY: lengths as documented; this thread alone touches `states[env]` and its ring slots.
    unsafe {
        let params = &*params.add(env / args.envs_per_trial as usize);
        let state = &mut *states.add(env);
        let actions = slice::from_raw_parts(actions, args.steps as usize * args.n_envs());
        let bars = slice::from_raw_parts(bars, args.n_bars as usize);
        scan_env(env, &args, params, state, actions, bars, |i, t| *ring.add(i) = t);
    }
}

/// Writes each env's observation (F + 3 floats) to `out` (one thread per env and column: coalesced rows).
///
/// # Safety
/// `params`: `n_trials`; `states`: `n_envs`; `bars`: `n_bars`; `features`: `n_bars x n_features`;
/// `out`: `n_envs x (n_features + 3)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn observe(
    params: *const TrialParams,
    states: *const EnvState,
    bars: *const Bar,
    features: *const f32,
    out: *mut f32,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let width = args.n_features as usize + 3;
    if i >= args.n_envs() * width {
        return;
    }
    let (env, c) = (i / width, i % width);
    // SAFETY: lengths as documented; this thread alone writes `out[i]`.
    unsafe {
        let params = &*params.add(env / args.envs_per_trial as usize);
        let bars = slice::from_raw_parts(bars, args.n_bars as usize);
        let features = slice::from_raw_parts(features, args.n_bars as usize * args.n_features as usize);
        *out.add(i) = observe_entry(params, &*states.add(env), bars, features, args.n_features as usize, c);
    }
}

/// Moments of each (trial, step, chunk) of raw rewards (one thread each).
///
/// # Safety
/// `params`: `n_trials`; `ring`: `n_trials x capacity`; `chunks`: `n_trials x steps x n_chunks`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reward_chunk_moments(
    params: *const TrialParams,
    ring: *const Transition,
    chunks: *mut Moments,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let (n_chunks, steps) = (args.n_chunks(), args.steps as usize);
    if i >= args.n_trials as usize * steps * n_chunks {
        return;
    }
    let (trial, step, chunk) = (i / (steps * n_chunks), i / n_chunks % steps, i % n_chunks);
    // SAFETY: lengths as documented; this thread alone writes `chunks[i]`.
    unsafe {
        let ring = slice::from_raw_parts(ring, args.n_trials as usize * args.capacity as usize);
        let origin = (*params.add(trial)).ring_origin;
        *chunks.add(chunk_index(&args, trial, step, chunk)) = chunk_moments(&args, ring, (trial, origin), step, chunk);
    }
}

/// Merges each trial's chunk moments, step by step and in chunk order, into its running moments (one
/// thread per trial); `after_step` gets the running moments after each step.
///
/// # Safety
/// `running`: `n_trials`; `chunks`: `n_trials x steps x n_chunks`; `after_step`: `n_trials x steps`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reward_merge(
    running: *mut Moments,
    chunks: *const Moments,
    after_step: *mut Moments,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let trial = thread_index();
    if trial >= args.n_trials as usize {
        return;
    }
    let steps = args.steps as usize;
    // SAFETY: lengths as documented; this thread alone writes its trial's entries.
    unsafe {
        let chunks = slice::from_raw_parts(chunks, args.n_trials as usize * steps * args.n_chunks());
        merge_trial_moments(&args, chunks, trial, &mut *running.add(trial), |step, m| {
            *after_step.add(trial * steps + step) = m;
        });
    }
}

/// Normalizes the valid rewards of trials that ask for it (one thread per env and step).
///
/// # Safety
/// `params`: `n_trials`; `ring`: `n_trials x capacity`; `after_step`: `n_trials x steps`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reward_normalize(
    params: *const TrialParams,
    ring: *mut Transition,
    after_step: *const Moments,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let (n_envs, steps) = (args.n_envs(), args.steps as usize);
    if i >= n_envs * steps {
        return;
    }
    let (step, env) = (i / n_envs, i % n_envs);
    let trial = env / args.envs_per_trial as usize;
    // SAFETY: lengths as documented; (env, step) pairs map to distinct ring slots.
    unsafe {
        let p = &*params.add(trial);
        let t = &mut *ring.add(args.ring_index(env, step, p.ring_origin));
        normalize_transition(p, t, &*after_step.add(trial * steps + step));
    }
}

/// Samples `batch` transitions per trial and rebuilds their states (one thread per sample).
///
/// # Safety
/// `params`: `n_trials` (the launch's trials: each sample's RNG key);
/// `ring`: `n_trials x capacity`; `features`: the feature matrix; `obs`, `next_obs`:
/// `n_trials x batch x (n_features + 3)`; `actions`, `rewards`, `dones`, `weights`: `n_trials x batch`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sample_transitions(
    params: *const TrialParams,
    ring: *const Transition,
    features: *const f32,
    n_feature_values: u64,
    obs: *mut f32,
    next_obs: *mut f32,
    actions: *mut u32,
    rewards: *mut f32,
    dones: *mut f32,
    weights: *mut f32,
    args: SampleArgs,
) {
    crate::nvptx_ops::follow_previous();
    let idx = thread_index();
    let width = args.n_features as usize + 3;
    if idx >= args.n_trials as usize * args.batch as usize * width {
        return;
    }
    let (i, c) = (idx / width, idx % width);
    let trial = i / args.batch as usize;
    // SAFETY: lengths as documented; this thread alone writes column c of sample i (and its scalars for c = 0).
    unsafe {
        let ring = slice::from_raw_parts(ring.add(trial * args.capacity as usize), args.capacity as usize);
        let features = slice::from_raw_parts(features, n_feature_values as usize);
        let slot = sample_of(&args, &*params.add(trial), ring, i);
        (*obs.add(idx), *next_obs.add(idx)) = sample_entry(&args, ring, features, slot, c);
        if c == 0 {
            let row = sample_row(ring, slot);
            *actions.add(i) = row.action;
            *rewards.add(i) = row.reward;
            *dones.add(i) = row.done;
            *weights.add(i) = row.weight;
        }
    }
}

/// Walks every portfolio env over `args.steps` bars (one thread per env: [`scan_portfolio_env`]).
///
/// # Safety
/// `params`: `n_envs / envs_per_trial`; `accounts`: `n_envs`; `units`, `order_value`, `order_units`,
/// `order_symbol`: `n_envs x n_symbols`; `actions`: `steps x n_envs x n_symbols`; `bars`, `tradable`:
/// `n_times x n_symbols`; `steps_out`: `steps x n_envs`; `sides`: `steps x n_envs x n_symbols`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn portfolio_env_scan(
    params: *const TrialParams,
    accounts: *mut AccountState,
    units: *mut f64,
    order_value: *mut f64,
    order_units: *mut f64,
    order_symbol: *mut u32,
    actions: *const u8,
    bars: *const Bar,
    tradable: *const u8,
    steps_out: *mut PortfolioStep,
    sides: *mut u8,
    args: PortfolioEnvArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    if env >= args.n_envs() {
        return;
    }
    let (n, steps, n_envs) = (args.n_symbols as usize, args.steps as usize, args.n_envs());
    // SAFETY: lengths as documented; this thread alone touches env `env`'s account, units, scratch rows and
    // outputs.
    unsafe {
        let params = &*params.add(env / args.envs_per_trial as usize);
        let mut orders = Orders {
            value: slice::from_raw_parts_mut(order_value.add(env * n), n),
            units: slice::from_raw_parts_mut(order_units.add(env * n), n),
            symbol: slice::from_raw_parts_mut(order_symbol.add(env * n), n),
        };
        let block = args.n_times as usize * n;
        let input = ScanInputs {
            bars: slice::from_raw_parts(bars, block),
            tradable: slice::from_raw_parts(tradable, block),
            actions: slice::from_raw_parts(actions, steps * n_envs * n),
        };
        scan_portfolio_env(
            env,
            &args,
            params,
            &mut *accounts.add(env),
            slice::from_raw_parts_mut(units.add(env * n), n),
            &mut orders,
            input,
            |step, outcome| *steps_out.add(step * n_envs + env) = outcome,
            |step, s, code| *sides.add((step * n_envs + env) * n + s) = code,
        );
    }
}
