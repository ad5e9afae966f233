//! DQN's kernels: fused acting, selection, TD targets, Adam.

use super::short_rows;
use super::thread_index;
use crate::act::{DqnChoice, EnvStep, Observe, act_block};
use crate::batch::BatchArgs;
use crate::dqn::{DqnArgs, DqnParams, TrialStep, choose, td_sample, trial_step, update_param};
use crate::mlp::ACTIONS;
use crate::net::{NetArgs, TD_ROWS, Work, gradient, hidden_gradient};
use crate::nvptx_ops::dyn_smem;
use crate::types::{Bar, EnvState, Transition, TrialParams};
use core::arch::nvptx;
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

/// TD target, loss and output gradient of every minibatch sample, then (with `hidden != 0`, else as
/// [`ppo_loss`]) the hidden gradient of layer 2
/// ([`Stage::Backward2`](crate::net::Stage::Backward2)'s product) of the same samples: block `(tile,
/// trial)` of [`LOSS_THREADS`] threads takes samples `tile * TD_ROWS ..`, its first threads a sample each
/// ([`td_sample`]), then, after a barrier, all of them the product's rows ([`gpu_short_rows`]). (The
/// product as a `gemm_tiles` launch of its own, K = 3, cost twice this kernel.)
///
/// # Safety
/// `dqn`: `n_trials`; `work`: `n_trials x Work::per_trial`; `online`: `n_trials x params`; `actions`,
/// `rewards`, `dones`, `weights`, `losses`: `n_trials x batch`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the minibatch's buffers")]
pub unsafe extern "ptx-kernel" fn dqn_td(
    dqn: *const DqnParams,
    work: *mut f32,
    online: *const f32,
    actions: *const u32,
    rewards: *const f32,
    dones: *const f32,
    weights: *const f32,
    losses: *mut f32,
    args: DqnArgs,
    hidden: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: reads of special registers.
    let (tile, t, tid) =
        unsafe { (nvptx::_block_idx_x() as usize, nvptx::_block_idx_y() as usize, nvptx::_thread_idx_x() as usize) };
    let (b, j0) = (args.batch as usize, tile * TD_ROWS);
    if t >= args.n_trials as usize || j0 >= b {
        return; // uniform over the block
    }
    let net = args.net();
    let w = Work::of(&net);
    // SAFETY: lengths as documented; thread `tid < TD_ROWS` alone writes sample `j0 + tid`'s output gradient
    // and loss; the barrier orders them before the product reads them.
    unsafe {
        let dqn = &*dqn.add(t);
        let j = j0 + tid;
        if tid < TD_ROWS && j < b {
            let (i, row) = (t * b + j, |r: usize| w.at(r, t) + j * ACTIONS);
            let q = slice::from_raw_parts(work.add(row(Work::Q)), ACTIONS);
            let qt = slice::from_raw_parts(work.add(row(Work::QT)), ACTIONS);
            let qo = slice::from_raw_parts(work.add(row(Work::QO)), ACTIONS);
            let dout = slice::from_raw_parts_mut(work.add(row(Work::DOUT)), ACTIONS);
            let (action, reward, done, weight) = (*actions.add(i), *rewards.add(i), *dones.add(i), *weights.add(i));
            *losses.add(i) = td_sample(j, dqn, q, qt, qo, action, reward, done, weight, dout);
        }
        if hidden == 0 {
            return; // uniform: the products after the loss compute D2 where they read it
        }
        nvptx::_syncthreads();
        let g = hidden_gradient(&net, t, &dqn.net(), true);
        short_rows(&g, [work, online, work, work], work, j0, TD_ROWS, tid);
    }
}

/// Gradient, Adam step and target update of every parameter: the blocks of trial `block_idx_y`, a thread per
/// parameter. A thread issues its parameter's loads (the state, the chunk partials: [`gradient`] loads them
/// ahead) before the barrier behind which thread 0 has computed the trial's step and Adam's bias corrections
/// ([`trial_step`]) once for the block.
///
/// # Safety
/// `dqn`: `n_trials`; `online`, `target`, `m`, `v`: `n_trials x params`; `partial`:
/// [`NetArgs::partial_len`] floats; dynamic shared memory: one `Option<TrialStep>`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dqn_adam(
    dqn: *const DqnParams,
    online: *mut f32,
    target: *mut f32,
    m: *mut f32,
    v: *mut f32,
    partial: *const f32,
    args: DqnArgs,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: reads of special registers.
    let (t, tid, p) = unsafe {
        let tid = nvptx::_thread_idx_x() as usize;
        (nvptx::_block_idx_y() as usize, tid, nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize + tid)
    };
    if t >= args.n_trials as usize {
        return; // uniform over the block
    }
    let (net, n_params) = (args.net(), args.layout().params());
    let live = p < n_params;
    let i = t * n_params + p;
    // SAFETY: lengths as documented; this thread alone writes parameter i of each buffer; the shared step is
    // written by thread 0 before the barrier and read after it.
    unsafe {
        let dqn = &*dqn.add(t);
        let mut state = if live { [*online.add(i), *target.add(i), *m.add(i), *v.add(i)] } else { [0.0; 4] };
        // Thread 0 computes the step (arithmetic only) while the loads are in flight, then sums its gradient
        // like every thread: the barrier waits for no memory round trip of its own.
        let step = dyn_smem() as *mut Option<TrialStep>;
        if tid == 0 {
            *step = trial_step(&args, dqn);
        }
        let g = if live { gradient(&net, t, p, slice::from_raw_parts(partial, net.partial_len())) } else { 0.0 };
        nvptx::_syncthreads();
        if let (Some(s), true) = (*step, live) {
            let [w, tg, mi, vi] = &mut state;
            update_param(dqn, &s, g, w, tg, mi, vi);
            (*online.add(i), *target.add(i), *m.add(i), *v.add(i)) = (*w, *tg, *mi, *vi);
        }
    }
}
