//! DQN's thread-per-element kernels: fused acting, selection. The block kernels (TD targets, Adam) are in
//! `crate::dqn::blocks`.

use super::thread_index;
use crate::act::{DqnChoice, EnvStep, Observe, act_block};
use crate::batch::BatchArgs;
use crate::dqn::{DqnArgs, DqnParams, choose};
use crate::mlp::ACTIONS;
use crate::net::NetArgs;
use crate::types::{Bar, EnvState, Transition, TrialParams};
use core::slice;

/// DQN acting in one launch: each block an acting chain's row tile ([`crate::chain::ACT_ROWS`] rows, 5 a
/// warp; block `(tile, chain)`) from the envs' observations, computed in shared memory ([`observe_entry`]),
/// through the three layers ([`crate::chain::gpu_chain`]) to each env's action ([`choose`]): the
/// `observe`, `mlp_chain` and `dqn_select` launches in one, the same bits. With `step != 0`, each env then
/// steps one bar on its action ([`EnvStep`]: the `env_scan` launch after it too).
///
/// # Safety
/// As [`mlp_chain`] for acting chains (one per trial, [`crate::chain::chain_plan`]); `params`, `states`,
/// `bars`, `features` as [`observe`] with `env` (whose envs per trial are the chains' rows, its
/// `n_features + 3` the network's input); `dqn`: `n_trials`; `actions`: `n_trials x envs_per_trial`; with
/// `step != 0`, `ring` and `env` as [`env_scan`]'s with `env.steps == 1`; `early`
/// ([`crate::chain::ChainEnds::early`]) names only what the kernel launched just before this one on the
/// stream does not write: the weights ([`crate::chain::EARLY_WEIGHTS`]), the envs' parameters, states, bars
/// and features ([`crate::chain::EARLY_INPUT`]).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the chains', the envs' and the selection's buffers")]
pub unsafe extern "ptx-kernel" fn dqn_act(
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
    dqn: *const DqnParams,
    args: DqnArgs,
) {
    let envs = Observe { params, states, bars, features, env, trial: 0 };
    let step = EnvStep { ring, actions, on: step != 0 };
    // SAFETY: the caller's contract.
    unsafe { act_block(chains, buffers, &net, envs, DqnChoice { dqn, actions, args }, step, early) }
}

/// Epsilon-greedy (or greedy) action of every env from its Q-values (one thread per env).
///
/// # Safety
/// `dqn`: `n_trials`; `q`: `n_trials x envs_per_trial x 3`; `actions`: `n_trials x envs_per_trial`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dqn_select(dqn: *const DqnParams, q: *const f32, actions: *mut u8, args: DqnArgs) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    let ept = args.envs_per_trial as usize;
    if env >= args.n_trials as usize * ept {
        return;
    }
    // SAFETY: lengths as documented; this thread alone writes its action.
    unsafe {
        let q = slice::from_raw_parts(q.add(env * ACTIONS), ACTIONS);
        *actions.add(env) = choose(env, &args, &*dqn.add(env / ept), q);
    }
}
