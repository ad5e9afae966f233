//! Launches of the DQN kernels between the products: selection, TD targets, Adam.

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use gpu_kernels::batch::BatchArgs;
use gpu_kernels::dqn::DqnArgs;
use gpu_kernels::net::NetArgs;

use super::{Launch, at_least, grid, loss_grid, per_trial_grid, timed};
use crate::HostError;
use crate::cuda::buffers::{ChainPlan, Dev, DqnBuffers, PolicyView, SampleBuffers};
use crate::cuda::runtime::CudaRuntime;

/// `dqn_select`: every env's action from the acting Q-values.
pub(crate) fn dqn_select(
    rt: &CudaRuntime,
    stream: &CudaStream,
    nets: &DqnBuffers,
    actions: &mut CudaSlice<u8>,
    args: &DqnArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.dqn_select.name;
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    let aw = gpu_kernels::net::ActWork::of(&args.net());
    at_least(kernel, "DQN parameter sets", args.n_trials as usize, nets.params.len())?;
    at_least(kernel, "acting buffer", aw.len(), nets.act.len())?;
    at_least(kernel, "actions", n_envs, actions.len())?;
    let q = nets.act.slice(aw.q()..);
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.dqn_select);
    launch.arg(&nets.params).arg(&q).arg(actions).arg(&dev_args);
    let cfg = grid(kernel, n_envs)?;
    // SAFETY: arguments match `gpu_kernels::entries::dqn::dqn_select`; lengths checked above.
    timed(rt, stream, rt.kernels.dqn_select.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `dqn_act`: every env's observation, the acting layers ([`ChainPlan`] `chains` on the buffers whose
/// addresses `pointers` holds) and every env's action, in one launch (`observe`, `mlp_chain` and
/// `dqn_select` fused: the same bits); with `step`, every env's step on its action too (`env_scan`'s).
#[allow(clippy::too_many_arguments, reason = "the chains, the envs and the selection")]
pub(crate) fn dqn_act(
    rt: &CudaRuntime,
    view: &mut PolicyView<'_>,
    chains: &ChainPlan,
    pointers: &CudaSlice<u64>,
    net: &NetArgs,
    env: &BatchArgs,
    nets: &DqnBuffers,
    args: &DqnArgs,
    step: bool,
) -> Result<(), HostError> {
    let kernel = rt.kernels.dqn_act.name;
    at_least(kernel, "DQN parameter sets", args.n_trials as usize, nets.params.len())?;
    let (stream, dev_args) = (view.stream.clone(), Dev(*args));
    let select = (args.n_trials, args.envs_per_trial);
    let sizes = (&Dev(*net), &Dev(*env));
    let (mut launch, cfg) =
        super::net::act_launch(rt, &rt.kernels.dqn_act, view, (chains, pointers), sizes, select, step)?;
    launch.arg(&nets.params).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::dqn::dqn_act`; the chains were checked against the buffers'
    // lengths when built, the envs' buffers and actions by `act_launch`, the parameter sets above.
    timed(rt, &stream, rt.kernels.dqn_act.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `dqn_td`: TD targets, losses and output gradients of every sample, and the hidden gradients of layer 2.
pub(crate) fn dqn_td(
    rt: &CudaRuntime,
    stream: &CudaStream,
    samples: &SampleBuffers,
    nets: &mut DqnBuffers,
    args: &DqnArgs,
    hidden: bool,
) -> Result<(), HostError> {
    let kernel = rt.kernels.dqn_td.name;
    let n_samples = args.n_trials as usize * args.batch as usize;
    at_least(kernel, "DQN parameter sets", args.n_trials as usize, nets.params.len())?;
    let work = args.n_trials as usize * gpu_kernels::net::Work::of(&args.net()).per_trial();
    at_least(kernel, "training buffer", work, nets.work.len())?;
    for (what, len) in [
        ("sampled actions", samples.actions.len()),
        ("rewards", samples.rewards.len()),
        ("dones", samples.dones.len()),
        ("weights", samples.weights.len()),
        ("losses", nets.losses.len()),
    ] {
        at_least(kernel, what, n_samples, len)?;
    }
    at_least(kernel, "online", args.n_trials as usize * args.layout().params(), nets.online.len())?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.dqn_td);
    launch
        .arg(&nets.params)
        .arg(&mut nets.work)
        .arg(&nets.online)
        .arg(&samples.actions)
        .arg(&samples.rewards)
        .arg(&samples.dones)
        .arg(&samples.weights)
        .arg(&mut nets.losses)
        .arg(&dev_args)
        .scalar(u32::from(hidden));
    let cfg = loss_grid(kernel, args.batch as usize, gpu_kernels::net::TD_ROWS, args.n_trials as usize)?;
    // SAFETY: arguments match `gpu_kernels::dqn::blocks::dqn_td`; lengths checked above.
    timed(rt, stream, rt.kernels.dqn_td.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `dqn_adam`: gradients from the chunk partials, Adam, target update.
pub(crate) fn dqn_adam(
    rt: &CudaRuntime,
    stream: &CudaStream,
    nets: &mut DqnBuffers,
    args: &DqnArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.dqn_adam.name;
    let (trials, n_params) = (args.n_trials as usize, args.layout().params());
    at_least(kernel, "DQN parameter sets", trials, nets.params.len())?;
    for (what, len) in
        [("online", nets.online.len()), ("target", nets.target.len()), ("m", nets.m.len()), ("v", nets.v.len())]
    {
        at_least(kernel, what, trials * n_params, len)?;
    }
    at_least(kernel, "gradient partials", args.net().partial_len(), nets.partial.len())?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.dqn_adam);
    launch
        .arg(&nets.params)
        .arg(&mut nets.online)
        .arg(&mut nets.target)
        .arg(&mut nets.m)
        .arg(&mut nets.v)
        .arg(&nets.partial)
        .arg(&dev_args);
    let step = std::mem::size_of::<Option<gpu_kernels::dqn::TrialStep>>() as u32;
    let cfg = LaunchConfig { shared_mem_bytes: step, ..per_trial_grid(kernel, n_params, trials)? };
    // SAFETY: arguments match `gpu_kernels::dqn::blocks::dqn_adam`; lengths checked above.
    timed(rt, stream, rt.kernels.dqn_adam.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}
