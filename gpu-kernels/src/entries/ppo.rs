//! PPO's thread-per-element kernels: fused acting, selection, gradients, Adam, GAE. The block kernels
//! (minibatch gathers, advantage moments, the loss, gradient norms) are in `crate::ppo::blocks`.

use super::thread_index;
use crate::act::{EnvStep, Observe, PpoChoice, act_block, write_act};
use crate::batch::BatchArgs;
use crate::mlp::ACTOR_CRITIC;
use crate::net::{NetArgs, gradient};
use crate::ppo::{NORM_LANES, PpoArgs, PpoParams, act_env, gae_env, update_weight};
use crate::types::{Bar, EnvState, Transition, TrialParams};
use core::slice;

/// PPO acting in one launch ([`dqn_act`]'s shape): observations, the three layers, then each env's action,
/// log-probability and value ([`act_env`]): the `observe`, `mlp_chain` and `ppo_select` launches in one.
///
/// # Safety
/// As [`dqn_act`] (the env step included), with `ppo`, `actions`, `logps`, `values`, `rollout_step` and `args` as
/// [`ppo_select`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the chains', the envs' and the selection's buffers")]
pub unsafe extern "ptx-kernel" fn ppo_act(
    chains: *const crate::chain::Chain,
    buffers: *const u64,
    net: NetArgs,
    params: *const TrialParams,
    states: *mut EnvState,
    bars: *const Bar,
    features: *const f32,
    env: BatchArgs,
    ring: *mut Transition,
    step: u32,
    early: u32,
    actions: *mut u8,
    ppo: *const PpoParams,
    logps: *mut f32,
    values: *mut f32,
    rollout_step: u32,
    args: PpoArgs,
) {
    let envs = Observe { params, states, bars, features, env, trial: 0 };
    let step = EnvStep { ring, actions, on: step != 0 };
    let choice = PpoChoice { ppo, actions, logps, values, rollout_step, args };
    // SAFETY: the caller's contract.
    unsafe { act_block(chains, buffers, &net, envs, choice, step, early) }
}

/// PPO acting (one thread per env) from the acting outputs `out` (3 logits and a value per env): the sampled
/// (or greedy) action into `actions`, its log-probability and the state's value at rollout step
/// `rollout_step` (`trial x steps x E + rollout_step x E + e`); with `rollout_step >= steps`, the value goes
/// to `values[env]` (the bootstrap after the last step) and no log-probability is written.
///
/// # Safety
/// `ppo`: `n_trials`; `out`: `n_envs x 4`; `actions`: `n_envs`; `logps`, `values`: `n_trials x steps x E`
/// (or `n_envs` values for the bootstrap).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_select(
    ppo: *const PpoParams,
    out: *const f32,
    actions: *mut u8,
    logps: *mut f32,
    values: *mut f32,
    rollout_step: u32,
    args: PpoArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    let ept = args.envs_per_trial as usize;
    if env >= args.n_trials as usize * ept {
        return;
    }
    // SAFETY: lengths as documented; this thread alone writes its outputs.
    unsafe {
        let out = slice::from_raw_parts(out.add(env * ACTOR_CRITIC), ACTOR_CRITIC);
        write_act(act_env(env, &args, &*ppo.add(env / ept), out, rollout_step), env, actions, logps, values);
    }
}

/// The gradient of every parameter from the chunk partials (one thread per trial and parameter).
///
/// # Safety
/// `grads`: `n_trials x params`; `partial`: [`NetArgs::partial_len`] floats.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_grad(partial: *const f32, grads: *mut f32, args: PpoArgs) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let (trials, n_params) = (args.n_trials as usize, args.layout().params());
    if i >= trials * n_params {
        return;
    }
    // SAFETY: lengths as documented; this thread alone writes gradient i.
    unsafe {
        let partial = slice::from_raw_parts(partial, args.net().partial_len());
        *grads.add(i) = gradient(&args.net(), i / n_params, i % n_params, partial);
    }
}

/// The clipped gradient and Adam step of every parameter (one thread per trial and parameter).
///
/// # Safety
/// `ppo`: `n_trials`; `weights`, `m`, `v`, `grads`: `n_trials x params`; `lanes`: `n_trials x NORM_LANES`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_adam(
    ppo: *const PpoParams,
    weights: *mut f32,
    m: *mut f32,
    v: *mut f32,
    grads: *const f32,
    lanes: *const f32,
    args: PpoArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let (trials, n_params) = (args.n_trials as usize, args.layout().params());
    if i >= trials * n_params {
        return;
    }
    let t = i / n_params;
    // SAFETY: lengths as documented; this thread alone writes parameter i of each buffer.
    unsafe {
        let lanes = slice::from_raw_parts(lanes.add(t * NORM_LANES), NORM_LANES);
        update_weight(&args, &*ppo.add(t), lanes, *grads.add(i), &mut *weights.add(i), &mut *m.add(i), &mut *v.add(i));
    }
}

/// GAE over each env's rollout (one thread per trial and env).
///
/// # Safety
/// `ppo`: `n_trials`; `ring`: `n_trials x steps x E` transitions; `values`, `advantages`, `returns`:
/// `n_trials x steps x E`; `bootstrap`: `n_trials x E`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_gae(
    ppo: *const PpoParams,
    ring: *const Transition,
    values: *const f32,
    bootstrap: *const f32,
    advantages: *mut f32,
    returns: *mut f32,
    args: PpoArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    let ept = args.envs_per_trial as usize;
    if env >= args.n_trials as usize * ept {
        return;
    }
    let (trial, e) = (env / ept, env % ept);
    let n = args.steps as usize * ept;
    // SAFETY: lengths as documented; this thread alone writes its env's steps of the rollout.
    unsafe {
        let p = &*ppo.add(trial);
        let ring = slice::from_raw_parts(ring.add(trial * n), n);
        let values = slice::from_raw_parts(values.add(trial * n), n);
        gae_env(e, ept, args.steps as usize, p.gamma, p.lambda, ring, values, *bootstrap.add(env), |i, adv, ret| {
            *advantages.add(trial * n + i) = adv;
            *returns.add(trial * n + i) = ret;
        });
    }
}
