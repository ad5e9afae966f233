//! DQN's block kernels (nvptx only), whose blocks work as one (shared memory, barriers) rather than a thread
//! per element: the TD step and layer-2 hidden gradient of a tile of samples ([`dqn_td`]) and the Adam step
//! of a block of a trial's parameters around the step they share ([`dqn_adam`]). They are kernels themselves,
//! as the greedy walks are (`crate::walk`); the thread-per-element kernels' shims are in `entries::dqn`.

use super::{DqnArgs, DqnParams, TrialStep, td_sample, trial_step, update_param};
use crate::mlp::ACTIONS;
use crate::net::{TD_ROWS, Work, gpu_loss_rows, gradient, hidden_gradient};
use crate::nvptx_ops::dyn_smem;
use core::arch::nvptx;
use core::slice;

/// TD target, loss and output gradient of every minibatch sample, then (with `hidden != 0`, else as
/// `ppo_loss`) the hidden gradient of layer 2 ([`Stage::Backward2`](crate::net::Stage::Backward2)'s product)
/// of the same samples: block `(tile, trial)` of [`LOSS_THREADS`](crate::net::LOSS_THREADS) threads takes
/// samples `tile * TD_ROWS ..`, its first threads a sample each ([`td_sample`]), then, after a barrier, all of
/// them the product's rows ([`gpu_loss_rows`]). (The product as a `gemm_tiles` launch of its own, K = 3, cost
/// twice this kernel.)
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
        gpu_loss_rows(&g, [work, online, work, work], work, j0, TD_ROWS, tid);
    }
}

/// Gradient, Adam step and target update of every parameter: the blocks of trial `block_idx_y`, a thread per
/// parameter. A thread issues its parameter's loads (the state, the chunk partials: [`gradient`] loads them
/// ahead) before the barrier behind which thread 0 has computed the trial's step and Adam's bias corrections
/// ([`trial_step`]) once for the block.
///
/// # Safety
/// `dqn`: `n_trials`; `online`, `target`, `m`, `v`: `n_trials x params`; `partial`:
/// [`NetArgs::partial_len`](crate::net::NetArgs::partial_len) floats; dynamic shared memory: one `Option<TrialStep>`.
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
