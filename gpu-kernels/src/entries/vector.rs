//! The Gymnasium-style vector env's kernels: reset, action check, step.

use super::thread_index;
use crate::types::{Bar, EnvState, TrialParams};
use crate::vector::{ACTIONS_OK, ActionKind, VectorArgs, VectorMarket, VectorRow, action_at, reset_env, step_env};
use core::slice;
use core::sync::atomic::{AtomicU32, Ordering};

/// One env's outputs of the vector env's kernels, from the output buffers.
///
/// # Safety
/// `obs`, `final_obs`: `n_envs x (n_features + 3)`; the others `n_envs`; the calling thread alone touches
/// env `env`'s elements.
#[allow(clippy::too_many_arguments, reason = "the kernel's output buffers")]
unsafe fn vector_row<'a>(
    args: &VectorArgs,
    env: usize,
    obs: *mut f32,
    final_obs: *mut f32,
    rewards: *mut f32,
    terminated: *mut bool,
    truncated: *mut bool,
    final_mask: *mut bool,
    equity: *mut f64,
) -> VectorRow<'a> {
    let d = args.n_features as usize + 3;
    // SAFETY: as the caller guarantees.
    unsafe {
        VectorRow {
            obs: slice::from_raw_parts_mut(obs.add(env * d), d),
            final_obs: slice::from_raw_parts_mut(final_obs.add(env * d), d),
            reward: &mut *rewards.add(env),
            terminated: &mut *terminated.add(env),
            truncated: &mut *truncated.add(env),
            final_mask: &mut *final_mask.add(env),
            equity: &mut *equity.add(env),
        }
    }
}

/// The market of the vector env's kernels.
///
/// # Safety
/// `bars`: `n_bars`; `features`: `n_bars x n_features`.
unsafe fn vector_market<'a>(args: &VectorArgs, bars: *const Bar, features: *const f32) -> VectorMarket<'a> {
    let n = args.n_bars as usize;
    // SAFETY: as the caller guarantees.
    unsafe {
        VectorMarket {
            bars: slice::from_raw_parts(bars, n),
            features: slice::from_raw_parts(features, n * args.n_features as usize),
        }
    }
}

/// A new episode for every env ([`crate::vector::reset_env`], one thread per env).
///
/// # Safety
/// `params`: `n_envs / envs_per_trial`; `states`, `episodes`: `n_envs`; the market and outputs as in
/// [`vector_row`] and [`vector_market`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn vector_reset(
    params: *const TrialParams,
    states: *mut EnvState,
    episodes: *mut u64,
    bars: *const Bar,
    features: *const f32,
    obs: *mut f32,
    final_obs: *mut f32,
    rewards: *mut f32,
    terminated: *mut bool,
    truncated: *mut bool,
    final_mask: *mut bool,
    equity: *mut f64,
    args: VectorArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    if env >= args.n_envs as usize {
        return;
    }
    // SAFETY: lengths as documented; this thread alone touches env `env`'s state, counter and outputs.
    unsafe {
        let out = vector_row(&args, env, obs, final_obs, rewards, terminated, truncated, final_mask, equity);
        let params = &*params.add(env / args.envs_per_trial as usize);
        let market = vector_market(&args, bars, features);
        reset_env(&args, env, params, &mut *states.add(env), &mut *episodes.add(env), market, out);
    }
}

/// Checks every env's action ([`crate::vector::action_at`], one thread per env): `status` becomes the
/// lowest env whose action is not 0, 1 or 2 (an integer minimum: the same whatever the order), and stays
/// [`ACTIONS_OK`] when all are valid.
///
/// # Safety
/// `actions`: `n_envs` elements of `args.action_kind`; `status`: one word.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn vector_check(actions: *const u8, status: *mut u32, args: VectorArgs) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    if env >= args.n_envs as usize {
        return;
    }
    // SAFETY: lengths as documented; the status word is only changed atomically.
    unsafe {
        if action_at(actions, ActionKind::from_code(args.action_kind), env).is_none() {
            AtomicU32::from_ptr(status).fetch_min(env as u32, Ordering::Relaxed);
        }
    }
}

/// One step of every env ([`crate::vector::step_env`], one thread per env), unless `status` names an
/// invalid action (then nothing changes).
///
/// # Safety
/// As [`vector_reset`]; `actions`: `n_envs` elements of `args.action_kind`, each valid unless `status` says
/// otherwise; `status`: one word, written by [`vector_check`] in an earlier launch (or [`ACTIONS_OK`]).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn vector_step(
    params: *const TrialParams,
    states: *mut EnvState,
    episodes: *mut u64,
    actions: *const u8,
    status: *const u32,
    bars: *const Bar,
    features: *const f32,
    obs: *mut f32,
    final_obs: *mut f32,
    rewards: *mut f32,
    terminated: *mut bool,
    truncated: *mut bool,
    final_mask: *mut bool,
    equity: *mut f64,
    args: VectorArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    // SAFETY: lengths as documented; this thread alone touches env `env`'s state, counter and outputs.
    unsafe {
        if env >= args.n_envs as usize || *status != ACTIONS_OK {
            return;
        }
        let Some(action) = action_at(actions, ActionKind::from_code(args.action_kind), env) else { return };
        let out = vector_row(&args, env, obs, final_obs, rewards, terminated, truncated, final_mask, equity);
        let params = &*params.add(env / args.envs_per_trial as usize);
        let market = vector_market(&args, bars, features);
        step_env(&args, env, params, &mut *states.add(env), &mut *episodes.add(env), action, market, out);
    }
}
