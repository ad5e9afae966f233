//! Launches of the PPO kernels between the products: selection, GAE, gather, loss, gradient, norm, Adam.

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use gpu_kernels::Transition;
use gpu_kernels::batch::BatchArgs;
use gpu_kernels::net::NetArgs;
use gpu_kernels::ppo::PpoArgs;

use super::{Launch, at_least, gather_grid, grid, loss_grid, per_trial_grid_of, timed};
use crate::HostError;
use crate::cuda::buffers::{ChainPlan, Dev, PolicyView, PpoBuffers};
use crate::cuda::runtime::CudaRuntime;

fn check_ppo(kernel: &str, b: &PpoBuffers, args: &PpoArgs) -> Result<(), HostError> {
    let l = args.layout();
    let trials = args.n_trials as usize;
    let rollout = trials * args.steps as usize * args.envs_per_trial as usize;
    let samples = trials * args.batch as usize;
    for (what, needed, got) in [
        ("PPO parameter sets", trials, b.params.len()),
        ("weights", trials * l.params(), b.weights.len()),
        ("adam m", trials * l.params(), b.m.len()),
        ("adam v", trials * l.params(), b.v.len()),
        ("log-probabilities", rollout, b.logps.len()),
        ("values", rollout, b.values.len()),
        ("bootstrap values", trials * args.envs_per_trial as usize, b.bootstrap.len()),
        ("advantages", rollout, b.advantages.len()),
        ("returns", rollout, b.returns.len()),
        ("minibatch observations", samples * l.input, b.obs.len()),
        ("gathered advantages", samples, b.gathered_advantages.len()),
        ("training buffer", trials * gpu_kernels::net::Work::of(&args.net()).per_trial(), b.work.len()),
        ("losses", samples, b.losses.len()),
        ("gradients", trials * l.params(), b.grads.len()),
        ("gradient-norm lanes", trials * gpu_kernels::ppo::NORM_LANES, b.norm_lanes.len()),
    ] {
        at_least(kernel, what, needed, got)?;
    }
    Ok(())
}

/// [`check_ppo`] and the rollout ring of `args` (`K x T x E` transitions).
fn check_rollout(
    kernel: &str,
    b: &PpoBuffers,
    args: &PpoArgs,
    ring: &CudaSlice<Dev<Transition>>,
) -> Result<(), HostError> {
    check_ppo(kernel, b, args)?;
    let transitions = args.n_trials as usize * args.envs_per_trial as usize * args.steps as usize;
    at_least(kernel, "rollout transitions", transitions, ring.len())
}

/// `ppo_select`: actions (and log-probabilities and values at rollout step `rollout_step`, or bootstrap values)
/// from the acting outputs.
pub(crate) fn ppo_select(
    rt: &CudaRuntime,
    stream: &CudaStream,
    b: &mut PpoBuffers,
    actions: &mut CudaSlice<u8>,
    args: &PpoArgs,
    rollout_step: u32,
) -> Result<(), HostError> {
    let kernel = rt.kernels.ppo_select.name;
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    let aw = gpu_kernels::net::ActWork::of(&args.net());
    at_least(kernel, "acting buffer", aw.len(), b.act.len())?;
    at_least(kernel, "actions", n_envs, actions.len())?;
    let bootstrap = check_select(kernel, b, args, rollout_step)?;
    let out = b.act.slice(aw.q()..);
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_select);
    launch.arg(&b.params).arg(&out).arg(actions);
    if bootstrap {
        launch.arg(&mut b.logps).arg(&mut b.bootstrap);
    } else {
        launch.arg(&mut b.logps).arg(&mut b.values);
    }
    launch.arg(&rollout_step).arg(&dev_args);
    let cfg = grid(kernel, n_envs)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo::ppo_select`; lengths checked above (with
    // `rollout_step >= steps` the kernel writes only `n_envs` values, into the bootstrap buffer).
    timed(rt, stream, rt.kernels.ppo_select.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_act`: every env's observation, the acting layers and every env's action, log-probability and
/// value (`ppo_select`'s outputs) in one launch ([`super::dqn::dqn_act`]'s shape).
#[allow(clippy::too_many_arguments, reason = "the chains, the envs and the selection")]
pub(crate) fn ppo_act(
    rt: &CudaRuntime,
    view: &mut PolicyView<'_>,
    chains: &ChainPlan,
    pointers: &CudaSlice<u64>,
    net: &NetArgs,
    env: &BatchArgs,
    b: &mut PpoBuffers,
    args: &PpoArgs,
    rollout_step: u32,
    step: bool,
) -> Result<(), HostError> {
    let kernel = rt.kernels.ppo_act.name;
    let bootstrap = check_select(kernel, b, args, rollout_step)?;
    let (stream, dev_args) = (view.stream.clone(), Dev(*args));
    let select = (args.n_trials, args.envs_per_trial);
    let sizes = (&Dev(*net), &Dev(*env));
    let (mut launch, cfg) =
        super::net::act_launch(rt, &rt.kernels.ppo_act, view, (chains, pointers), sizes, select, step)?;
    launch.arg(&b.params).arg(&mut b.logps);
    launch.arg(if bootstrap { &mut b.bootstrap } else { &mut b.values });
    launch.arg(&rollout_step).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::ppo::ppo_act`; the chains were checked against the buffers'
    // lengths when built, the envs' buffers and actions by `act_launch`, the selection's by `check_select`.
    timed(rt, &stream, rt.kernels.ppo_act.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// Checks `ppo_select`'s (and `ppo_act`'s) PPO buffers; whether `rollout_step` is the bootstrap step (the values go
/// to the bootstrap buffer).
fn check_select(kernel: &str, b: &PpoBuffers, args: &PpoArgs, rollout_step: u32) -> Result<bool, HostError> {
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    at_least(kernel, "PPO parameter sets", args.n_trials as usize, b.params.len())?;
    let bootstrap = rollout_step >= args.steps;
    if bootstrap {
        at_least(kernel, "bootstrap values", n_envs, b.bootstrap.len())?;
    } else {
        check_ppo(kernel, b, args)?;
    }
    Ok(bootstrap)
}

/// `ppo_gae` over the rollout in `ring`.
pub(crate) fn ppo_gae(
    rt: &CudaRuntime,
    stream: &CudaStream,
    ring: &CudaSlice<Dev<Transition>>,
    b: &mut PpoBuffers,
    args: &PpoArgs,
) -> Result<(), HostError> {
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    check_rollout(rt.kernels.ppo_gae.name, b, args, ring)?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_gae);
    launch
        .arg(&b.params)
        .arg(ring)
        .arg(&b.values)
        .arg(&b.bootstrap)
        .arg(&mut b.advantages)
        .arg(&mut b.returns)
        .arg(&dev_args);
    let cfg = grid(rt.kernels.ppo_gae.name, n_envs)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo::ppo_gae`; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_gae.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_gather`: the minibatch observations and advantages of update `args.counter`.
pub(crate) fn ppo_gather(
    rt: &CudaRuntime,
    stream: &CudaStream,
    ring: &CudaSlice<Dev<Transition>>,
    features: &CudaSlice<f32>,
    b: &mut PpoBuffers,
    args: &PpoArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.ppo_gather.name;
    check_rollout(kernel, b, args, ring)?;
    at_least(kernel, "features", args.n_bars as usize * (args.input as usize - 3), features.len())?;
    if args.steps as usize * args.envs_per_trial as usize >= u32::MAX as usize {
        return Err(HostError::Config(format!("{kernel}: a rollout of u32::MAX transitions or more")));
    }
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_gather);
    launch
        .arg(&b.params)
        .arg(ring)
        .arg(&b.advantages)
        .arg(features)
        .arg(&mut b.obs)
        .arg(&mut b.gathered_advantages)
        .arg(&dev_args);
    let cfg = gather_grid(kernel, args.n_trials as usize * args.batch as usize)?;
    // SAFETY: arguments match `gpu_kernels::ppo::blocks::ppo_gather` with its launch; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_gather.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_adv`: the advantage moments of every normalizing trial's minibatch at update `args.counter`, from the
/// advantages [`ppo_gather`] copied for this update.
pub(crate) fn ppo_adv(
    rt: &CudaRuntime,
    stream: &CudaStream,
    b: &mut PpoBuffers,
    args: &PpoArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.ppo_adv.name;
    check_ppo(kernel, b, args)?;
    at_least(kernel, "advantage moments", 2 * args.n_trials as usize, b.adv_moments.len())?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_adv);
    launch.arg(&b.params).arg(&b.gathered_advantages).arg(&mut b.adv_moments).arg(&dev_args);
    // A block of a thread per lane for each trial (`block_idx_y`), the lanes' sums in shared memory.
    let lanes = gpu_kernels::ppo::ADV_LANES;
    let cfg = LaunchConfig {
        shared_mem_bytes: 8 * lanes as u32,
        ..per_trial_grid_of(kernel, lanes, lanes as u32, args.n_trials as usize)?
    };
    // SAFETY: arguments match `gpu_kernels::ppo::blocks::ppo_adv`; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_adv.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_loss`: loss and output gradient of every minibatch sample, and with `hidden` the hidden gradient of
/// layer 2 (else the products after it compute it: [`crate::cuda::plans::BackwardKernels`]).
pub(crate) fn ppo_loss(
    rt: &CudaRuntime,
    stream: &CudaStream,
    ring: &CudaSlice<Dev<Transition>>,
    b: &mut PpoBuffers,
    args: &PpoArgs,
    hidden: bool,
) -> Result<(), HostError> {
    let kernel = rt.kernels.ppo_loss.name;
    check_rollout(kernel, b, args, ring)?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_loss);
    launch
        .arg(&b.params)
        .arg(ring)
        .arg(&b.logps)
        .arg(&b.values)
        .arg(&b.advantages)
        .arg(&b.returns)
        .arg(&b.adv_moments)
        .arg(&mut b.work)
        .arg(&b.weights)
        .arg(&mut b.losses)
        .arg(&dev_args)
        .scalar(u32::from(hidden));
    let cfg = loss_grid(kernel, args.batch as usize, gpu_kernels::net::PPO_LOSS_ROWS, args.n_trials as usize)?;
    // SAFETY: arguments match `gpu_kernels::ppo::blocks::ppo_loss`; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_loss.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_grad`, `ppo_norm`, `ppo_adam`: the gradients from the chunk partials, their norms, the clipped
/// gradients' Adam step.
pub(crate) fn ppo_adam(
    rt: &CudaRuntime,
    stream: &CudaStream,
    b: &mut PpoBuffers,
    args: &PpoArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.ppo_adam.name;
    check_ppo(kernel, b, args)?;
    let (trials, n_params) = (args.n_trials as usize, args.layout().params());
    at_least(kernel, "gradient partials", args.net().partial_len(), b.partial.len())?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_grad);
    launch.arg(&b.partial).arg(&mut b.grads).arg(&dev_args);
    let cfg = grid(rt.kernels.ppo_grad.name, trials * n_params)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo::ppo_grad`; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_grad.label(), || unsafe { launch.launch(cfg) })?;
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_norm);
    launch.arg(&b.params).arg(&b.grads).arg(&mut b.norm_lanes).arg(&dev_args);
    // A block per trial (`block_idx_y`) and its window of gradients in shared memory.
    let threads = gpu_kernels::ppo::NORM_THREADS;
    let cfg = LaunchConfig {
        shared_mem_bytes: 4 * gpu_kernels::ppo::NORM_WINDOW as u32,
        ..per_trial_grid_of(rt.kernels.ppo_norm.name, threads as usize, threads, trials)?
    };
    // SAFETY: arguments match `gpu_kernels::ppo::blocks::ppo_norm`; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_norm.label(), || unsafe { launch.launch(cfg) })?;
    let mut launch = Launch::new(rt, stream, &rt.kernels.ppo_adam);
    launch
        .arg(&b.params)
        .arg(&mut b.weights)
        .arg(&mut b.m)
        .arg(&mut b.v)
        .arg(&b.grads)
        .arg(&b.norm_lanes)
        .arg(&dev_args);
    let cfg = grid(kernel, trials * n_params)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo::ppo_adam`; lengths checked above.
    timed(rt, stream, rt.kernels.ppo_adam.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}
