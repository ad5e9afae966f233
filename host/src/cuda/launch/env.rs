//! Launches of the env kernels: stepping, observations, reward statistics, the sampler.

use cudarc::driver::{CudaSlice, CudaStream, CudaView, PushKernelArg};
use gpu_kernels::account::env::{PortfolioEnvArgs, PortfolioStep};
use gpu_kernels::batch::{BatchArgs, SampleArgs};
use gpu_kernels::vector::{ActionKind, VectorArgs};
use gpu_kernels::{Moments, Transition, TrialParams};

use super::{Launch, at_least, grid, grid_of, timed};
use crate::HostError;
use crate::cuda::buffers::{Dev, EnvBuffers, PortfolioEnvBuffers, SampleBuffers, VectorBuffers};
use crate::cuda::runtime::CudaRuntime;

fn ring_len(args: &BatchArgs) -> usize {
    (args.n_trials as usize * args.capacity as usize).max(1)
}

/// What a launch that writes `args.steps` steps of every env into a ring of `ring` slots needs (`env_scan`,
/// the acting kernels' fused step): the ring's slots, and no more steps than the ring holds, so that no two
/// threads write one slot.
pub(crate) fn check_ring_writes(kernel: &str, args: &BatchArgs, ring: usize) -> Result<(), HostError> {
    at_least(kernel, "ring slots (trials x capacity)", ring_len(args), ring)?;
    if args.capacity > 0 && args.steps as usize * args.envs_per_trial as usize > args.capacity as usize {
        return Err(HostError::Shape {
            what: format!("{kernel}: steps x envs per trial (ring slots one launch may write)"),
            expected: args.capacity as usize,
            got: args.steps as usize * args.envs_per_trial as usize,
        });
    }
    Ok(())
}

impl EnvBuffers<'_> {
    fn check(&self, kernel: &str, args: &BatchArgs) -> Result<(), HostError> {
        at_least(kernel, "trial parameters", args.n_trials as usize, self.params.len())?;
        at_least(kernel, "env states", args.n_envs(), self.states.len())?;
        at_least(kernel, "bars", args.n_bars as usize, self.bars.len())?;
        at_least(kernel, "ring slots (trials x capacity)", ring_len(args), self.ring.len())
    }
}

/// Threads per block of `env_scan`: a thread walks its env alone (a serial chain of dependent f64 steps),
/// so smaller blocks spread the envs over more multiprocessors (5 trials x 1,024 envs: 80 blocks of 64
/// rather than 20 of 256).
const ENV_SCAN_BLOCK: u32 = 64;

/// `env_scan`: every env walks `args.steps` bars with `actions` (`steps x n_envs`).
pub(crate) fn env_scan(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: EnvBuffers<'_>,
    actions: &CudaView<'_, u8>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.env_scan.name;
    buf.check(kernel, args)?;
    at_least(kernel, "actions (steps x envs)", args.steps as usize * args.n_envs(), actions.len())?;
    check_ring_writes(kernel, args, buf.ring.len())?;
    let cfg = grid_of(kernel, args.n_envs(), ENV_SCAN_BLOCK)?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.env_scan);
    launch.arg(buf.params).arg(buf.states).arg(actions).arg(buf.bars).arg(buf.ring).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::env::env_scan` in order and type; every length its safety
    // contract names was checked above, including that no two threads write one ring slot.
    timed(rt, stream, rt.kernels.env_scan.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `observe`: each env's observation into `out` (`n_envs x (F + 3)`).
pub(crate) fn observe(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: EnvBuffers<'_>,
    features: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.observe.name;
    buf.check(kernel, args)?;
    at_least(
        kernel,
        "feature values (bars x features)",
        args.n_bars as usize * args.n_features as usize,
        features.len(),
    )?;
    at_least(kernel, "observation floats", args.n_envs() * (args.n_features as usize + 3), out.len())?;
    let cfg = grid(kernel, args.n_envs() * (args.n_features as usize + 3))?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.observe);
    launch.arg(buf.params).arg(&*buf.states).arg(buf.bars).arg(features).arg(out).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::env::observe`; lengths checked above.
    timed(rt, stream, rt.kernels.observe.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// The lengths [`update_rewards`] needs: `lens` are those of the trial parameters, the ring, the running
/// moments, the chunk moments and the per-step moments. The steps' transitions must fit in the ring
/// (`steps x E <= capacity`): a longer run would wrap and count slots twice.
fn check_update_rewards(args: &BatchArgs, lens: [usize; 5]) -> Result<(), HostError> {
    let (trials, steps) = (args.n_trials as usize, args.steps as usize);
    let n_chunk_values = trials * steps * args.n_chunks();
    use gpu_kernels::registry::{REWARD_CHUNK_MOMENTS, REWARD_MERGE};
    at_least(
        REWARD_CHUNK_MOMENTS,
        "ring capacity per trial (steps x envs per trial)",
        steps * args.envs_per_trial as usize,
        args.capacity as usize,
    )?;
    let [params, ring, running, chunks, after_step] = lens;
    for (kernel, what, needed, got) in [
        (REWARD_CHUNK_MOMENTS, "trial parameters", trials, params),
        (REWARD_CHUNK_MOMENTS, "ring slots", ring_len(args), ring),
        (REWARD_MERGE, "running moments", trials, running),
        (REWARD_CHUNK_MOMENTS, "chunk moments", n_chunk_values, chunks),
        (REWARD_MERGE, "per-step moments", trials * steps, after_step),
    ] {
        at_least(kernel, what, needed, got)?;
    }
    Ok(())
}

/// The three reward-statistics kernels: chunk moments, per-trial merge, normalization.
#[allow(clippy::too_many_arguments, reason = "the buffers of three kernels, each named for what it holds")]
pub(crate) fn update_rewards(
    rt: &CudaRuntime,
    stream: &CudaStream,
    params: &CudaSlice<Dev<TrialParams>>,
    ring: &mut CudaSlice<Dev<Transition>>,
    running: &mut CudaSlice<Dev<Moments>>,
    chunks: &mut CudaSlice<Dev<Moments>>,
    after_step: &mut CudaSlice<Dev<Moments>>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let lens = [params.len(), ring.len(), running.len(), chunks.len(), after_step.len()];
    check_update_rewards(args, lens)?;
    let (trials, steps) = (args.n_trials as usize, args.steps as usize);
    let n_chunk_values = trials * steps * args.n_chunks();
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.reward_chunk_moments);
    launch.arg(params).arg(&*ring).arg(&mut *chunks).arg(&dev_args);
    let cfg = grid(rt.kernels.reward_chunk_moments.name, n_chunk_values)?;
    // SAFETY: arguments match `gpu_kernels::entries::env::reward_chunk_moments`; lengths checked above.
    timed(rt, stream, rt.kernels.reward_chunk_moments.label(), || unsafe { launch.launch(cfg) })?;
    let mut launch = Launch::new(rt, stream, &rt.kernels.reward_merge);
    launch.arg(running).arg(&*chunks).arg(&mut *after_step).arg(&dev_args);
    let cfg = grid(rt.kernels.reward_merge.name, trials)?;
    // SAFETY: arguments match `gpu_kernels::entries::env::reward_merge`; lengths checked above.
    timed(rt, stream, rt.kernels.reward_merge.label(), || unsafe { launch.launch(cfg) })?;
    let mut launch = Launch::new(rt, stream, &rt.kernels.reward_normalize);
    launch.arg(params).arg(ring).arg(&*after_step).arg(&dev_args);
    let cfg = grid(rt.kernels.reward_normalize.name, args.n_envs() * steps)?;
    // SAFETY: arguments match `gpu_kernels::entries::env::reward_normalize`; lengths checked above.
    timed(rt, stream, rt.kernels.reward_normalize.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `sample_transitions`: `args.batch` samples per trial into `out`.
#[allow(clippy::too_many_arguments, reason = "the sampler's inputs and outputs")]
pub(crate) fn sample_transitions(
    rt: &CudaRuntime,
    stream: &CudaStream,
    params: &CudaSlice<Dev<TrialParams>>,
    ring: &CudaSlice<Dev<Transition>>,
    features: &CudaSlice<f32>,
    n_feature_values: usize,
    out: &mut SampleBuffers,
    args: &SampleArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.sample_transitions.name;
    let samples = args.n_trials as usize * args.batch as usize;
    let width = args.n_features as usize + 3;
    at_least(kernel, "trial parameters", args.n_trials as usize, params.len())?;
    at_least(kernel, "ring slots", args.n_trials as usize * args.capacity as usize, ring.len())?;
    at_least(kernel, "feature values", n_feature_values, features.len())?;
    for (what, got) in [("observation floats", out.obs.len()), ("next-observation floats", out.next_obs.len())] {
        at_least(kernel, what, samples * width, got)?;
    }
    for (what, got) in [
        ("actions", out.actions.len()),
        ("rewards", out.rewards.len()),
        ("dones", out.dones.len()),
        ("weights", out.weights.len()),
    ] {
        at_least(kernel, what, samples, got)?;
    }
    let n_values = n_feature_values as u64;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.sample_transitions);
    launch
        .arg(params)
        .arg(ring)
        .arg(features)
        .arg(&n_values)
        .arg(&mut out.obs)
        .arg(&mut out.next_obs)
        .arg(&mut out.actions)
        .arg(&mut out.rewards)
        .arg(&mut out.dones)
        .arg(&mut out.weights)
        .arg(&dev_args);
    let cfg = grid(kernel, samples * width)?;
    // SAFETY: arguments match `gpu_kernels::entries::env::sample_transitions`; lengths checked above.
    timed(rt, stream, rt.kernels.sample_transitions.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

impl VectorBuffers<'_> {
    fn check(&self, kernel: &str, args: &VectorArgs) -> Result<(), HostError> {
        let n = args.n_envs as usize;
        let d = args.n_features as usize + 3;
        at_least(kernel, "trial parameters", n / (args.envs_per_trial.max(1) as usize), self.params.len())?;
        at_least(kernel, "env states", n, self.states.len())?;
        at_least(kernel, "episode counters", n, self.episodes.len())?;
        at_least(kernel, "bars", args.n_bars as usize, self.bars.len())?;
        at_least(kernel, "feature values", args.n_bars as usize * args.n_features as usize, self.features.len())?;
        let o = &self.out;
        at_least(kernel, "observation floats", n * d, o.obs.len().min(o.final_obs.len()))?;
        let flags = o.terminated.len().min(o.truncated.len()).min(o.final_mask.len());
        at_least(kernel, "rewards, flags and equity", n, o.rewards.len().min(flags).min(o.equity.len()))
    }
}

/// `vector_reset`: a new episode for every env.
pub(crate) fn vector_reset(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: VectorBuffers<'_>,
    args: &VectorArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.vector_reset.name;
    buf.check(kernel, args)?;
    let cfg = grid(kernel, args.n_envs as usize)?;
    let dev_args = Dev(*args);
    let o = buf.out;
    let mut launch = Launch::new(rt, stream, &rt.kernels.vector_reset);
    launch.arg(buf.params).arg(buf.states).arg(buf.episodes).arg(buf.bars).arg(buf.features);
    launch.arg(&mut o.obs).arg(&mut o.final_obs).arg(&mut o.rewards).arg(&mut o.terminated).arg(&mut o.truncated);
    launch.arg(&mut o.final_mask).arg(&mut o.equity).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::vector::vector_reset` in order and type; lengths checked above.
    timed(rt, stream, rt.kernels.vector_reset.label(), || unsafe { launch.launch(cfg) })
}

/// Actions for [`vector_check`] and [`vector_step`]: a buffer of ours, or a raw device pointer.
pub(crate) enum VectorActions<'a> {
    /// Codes uploaded from the host (already checked).
    Codes(&'a CudaSlice<u8>),
    /// `n_envs` elements of `args.action_kind` at a device address of this context (DLPack).
    Raw(u64),
}

/// `vector_check`: `status` becomes the lowest env with an invalid action (left alone when all are valid).
///
/// # Safety
/// `actions` is the address of `args.n_envs` aligned elements of `args.action_kind` in this context's
/// device memory, valid until the launch has run.
pub(crate) unsafe fn vector_check(
    rt: &CudaRuntime,
    stream: &CudaStream,
    actions: u64,
    status: &mut CudaSlice<u32>,
    args: &VectorArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.vector_check.name;
    at_least(kernel, "status words", 1, status.len())?;
    let cfg = grid(kernel, args.n_envs as usize)?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.vector_check);
    launch.arg(&actions).arg(status).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::vector::vector_check`; the caller vouches for `actions`.
    timed(rt, stream, rt.kernels.vector_check.label(), || unsafe { launch.launch(cfg) })
}

/// `vector_step`: one step of every env, unless `status` names an invalid action.
///
/// # Safety
/// With [`VectorActions::Raw`], as [`vector_check`].
pub(crate) unsafe fn vector_step(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: VectorBuffers<'_>,
    actions: VectorActions<'_>,
    status: &CudaSlice<u32>,
    args: &VectorArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.vector_step.name;
    buf.check(kernel, args)?;
    at_least(kernel, "status words", 1, status.len())?;
    let cfg = grid(kernel, args.n_envs as usize)?;
    let dev_args = Dev(*args);
    let o = buf.out;
    let mut launch = Launch::new(rt, stream, &rt.kernels.vector_step);
    launch.arg(buf.params).arg(buf.states).arg(buf.episodes);
    let raw;
    match actions {
        VectorActions::Codes(codes) => {
            at_least(kernel, "action codes", args.n_envs as usize, codes.len())?;
            if args.action_kind != ActionKind::U8.code() {
                return Err(HostError::Config(format!("{kernel}: uploaded codes are u8")));
            }
            launch.arg(codes)
        }
        VectorActions::Raw(ptr) => {
            raw = ptr;
            launch.arg(&raw)
        }
    };
    launch.arg(status).arg(buf.bars).arg(buf.features);
    launch.arg(&mut o.obs).arg(&mut o.final_obs).arg(&mut o.rewards).arg(&mut o.terminated).arg(&mut o.truncated);
    launch.arg(&mut o.final_mask).arg(&mut o.equity).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::vector::vector_step` in order and type; lengths checked above;
    // the caller vouches for raw actions.
    timed(rt, stream, rt.kernels.vector_step.label(), || unsafe { launch.launch(cfg) })
}

/// `portfolio_env_scan`: every portfolio env walks `args.steps` bars with `actions` (`steps x n_envs x
/// n_symbols`), writing each step's outcome to `steps_out` (`steps x n_envs`) and the sides held to `sides`
/// (`steps x n_envs x n_symbols`).
pub(crate) fn portfolio_env_scan(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: PortfolioEnvBuffers<'_>,
    actions: &CudaSlice<u8>,
    steps_out: &mut CudaSlice<Dev<PortfolioStep>>,
    sides: &mut CudaSlice<u8>,
    args: &PortfolioEnvArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.portfolio_env_scan.name;
    let (n_envs, n, steps) = (args.n_envs(), args.n_symbols as usize, args.steps as usize);
    let trials = n_envs / (args.envs_per_trial.max(1) as usize);
    at_least(kernel, "trial parameters", trials, buf.params.len())?;
    at_least(kernel, "accounts", n_envs, buf.accounts.len())?;
    at_least(kernel, "units", n_envs * n, buf.units.len())?;
    at_least(kernel, "order values", n_envs * n, buf.order_value.len())?;
    at_least(kernel, "order units", n_envs * n, buf.order_units.len())?;
    at_least(kernel, "order symbols", n_envs * n, buf.order_symbol.len())?;
    at_least(kernel, "universe cells (times x symbols)", args.n_times as usize * n, buf.bars.len())?;
    at_least(kernel, "universe flags (times x symbols)", args.n_times as usize * n, buf.tradable.len())?;
    at_least(kernel, "actions (steps x envs x symbols)", steps * n_envs * n, actions.len())?;
    at_least(kernel, "step outcomes (steps x envs)", steps * n_envs, steps_out.len())?;
    at_least(kernel, "sides (steps x envs x symbols)", steps * n_envs * n, sides.len())?;
    let cfg = grid_of(kernel, n_envs, ENV_SCAN_BLOCK)?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.portfolio_env_scan);
    launch
        .arg(buf.params)
        .arg(buf.accounts)
        .arg(buf.units)
        .arg(buf.order_value)
        .arg(buf.order_units)
        .arg(buf.order_symbol)
        .arg(actions)
        .arg(buf.bars)
        .arg(buf.tradable)
        .arg(steps_out)
        .arg(sides)
        .arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::env::portfolio_env_scan` in order and type; every length its
    // safety contract names was checked above (the parameters cover every env's trial: n_envs / envs_per_trial).
    timed(rt, stream, rt.kernels.portfolio_env_scan.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `universe_observe`: every row's observation (`n_envs x n_symbols` rows of `n_features + 3` floats) into
/// the first floats of `out` (a learner's acting buffer), from the portfolio env's accounts and units and
/// the rows' `features` (symbol-major, `n_symbols x n_times x n_features`).
pub(crate) fn universe_observe(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: &PortfolioEnvBuffers<'_>,
    features: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    args: &PortfolioEnvArgs,
    n_features: usize,
) -> Result<(), HostError> {
    let kernel = rt.kernels.universe_observe.name;
    let (n_envs, n, times) = (args.n_envs(), args.n_symbols as usize, args.n_times as usize);
    let trials = n_envs / (args.envs_per_trial.max(1) as usize);
    at_least(kernel, "trial parameters", trials, buf.params.len())?;
    at_least(kernel, "accounts", n_envs, buf.accounts.len())?;
    at_least(kernel, "units", n_envs * n, buf.units.len())?;
    at_least(kernel, "universe cells (times x symbols)", times * n, buf.bars.len())?;
    at_least(kernel, "row features (symbols x times x features)", n * times * n_features, features.len())?;
    at_least(kernel, "observation floats (rows x (features + 3))", n_envs * n * (n_features + 3), out.len())?;
    let features_u32 = u32::try_from(n_features).map_err(|_| HostError::Shape {
        what: format!("{kernel}: features (must fit in u32)"),
        expected: u32::MAX as usize,
        got: n_features,
    })?;
    let cfg = grid(kernel, n_envs * n)?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, stream, &rt.kernels.universe_observe);
    launch
        .arg(buf.params)
        .arg(&*buf.accounts)
        .arg(&*buf.units)
        .arg(buf.bars)
        .arg(features)
        .arg(out)
        .arg(&dev_args)
        .arg(&features_u32);
    // SAFETY: arguments match `gpu_kernels::entries::rows::universe_observe` in order and type; every length
    // its safety contract names was checked above.
    timed(rt, stream, rt.kernels.universe_observe.label(), || unsafe { launch.launch(cfg) })
}

/// `universe_step`: one portfolio step of every env with the rows' codes `actions` (`n_envs x n_symbols`),
/// each row's transition into its slot of the rows' `ring` (`ring_args`: the rows' batch, one step).
#[allow(
    clippy::too_many_arguments,
    reason = "the portfolio env's buffers and the rows' ring, as the kernel takes them"
)]
pub(crate) fn universe_step(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: PortfolioEnvBuffers<'_>,
    units_before: &mut CudaSlice<f64>,
    actions: &CudaSlice<u8>,
    row_params: &CudaSlice<Dev<TrialParams>>,
    ring: &mut CudaSlice<Dev<Transition>>,
    args: &PortfolioEnvArgs,
    ring_args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.universe_step.name;
    let (n_envs, n, times) = (args.n_envs(), args.n_symbols as usize, args.n_times as usize);
    let trials = n_envs / (args.envs_per_trial.max(1) as usize);
    at_least(kernel, "trial parameters", trials, buf.params.len())?;
    at_least(kernel, "accounts", n_envs, buf.accounts.len())?;
    for (what, len) in [
        ("units", buf.units.len()),
        ("units before", units_before.len()),
        ("order values", buf.order_value.len()),
        ("order units", buf.order_units.len()),
        ("order symbols", buf.order_symbol.len()),
        ("actions (envs x symbols)", actions.len()),
    ] {
        at_least(kernel, what, n_envs * n, len)?;
    }
    at_least(kernel, "universe cells (times x symbols)", times * n, buf.bars.len())?;
    at_least(kernel, "universe flags (times x symbols)", times * n, buf.tradable.len())?;
    if times < 2 || ring_args.capacity == 0 || ring_args.steps != 1 || ring_args.n_envs() != n_envs * n {
        return Err(HostError::Config(format!(
            "{kernel}: one step of {n_envs} envs x {n} symbols into a ring of their rows (at least 2 times; got \
             {} rows, {} steps, capacity {})",
            ring_args.n_envs(),
            ring_args.steps,
            ring_args.capacity
        )));
    }
    at_least(kernel, "row parameters", ring_args.n_trials as usize, row_params.len())?;
    check_ring_writes(kernel, ring_args, ring.len())?;
    let cfg = grid_of(kernel, n_envs, ENV_SCAN_BLOCK)?;
    let (dev_args, dev_ring_args) = (Dev(*args), Dev(*ring_args));
    let mut launch = Launch::new(rt, stream, &rt.kernels.universe_step);
    launch
        .arg(buf.params)
        .arg(buf.accounts)
        .arg(buf.units)
        .arg(units_before)
        .arg(buf.order_value)
        .arg(buf.order_units)
        .arg(buf.order_symbol)
        .arg(actions)
        .arg(buf.bars)
        .arg(buf.tradable)
        .arg(row_params)
        .arg(ring)
        .arg(&dev_args)
        .arg(&dev_ring_args);
    // SAFETY: arguments match `gpu_kernels::entries::rows::universe_step` in order and type; every length its
    // safety contract names was checked above (one step of the rows, at most the ring's capacity per trial).
    timed(rt, stream, rt.kernels.universe_step.label(), || unsafe { launch.launch(cfg) })
}

#[cfg(test)]
mod tests {
    use gpu_kernels::batch::BatchArgs;

    use super::check_update_rewards;
    use crate::HostError;

    /// More steps than the ring holds per trial are refused by the launch itself, whatever its caller did.
    #[test]
    fn reward_statistics_refuse_steps_beyond_the_ring() {
        let args = BatchArgs { n_trials: 2, envs_per_trial: 4, steps: 3, capacity: 12, ..BatchArgs::default() };
        let lens = |a: &BatchArgs| {
            let (k, s) = (a.n_trials as usize, a.steps as usize);
            [k, k * a.capacity as usize, k, k * s * a.n_chunks(), k * s]
        };
        assert!(check_update_rewards(&args, lens(&args)).is_ok());
        let over = BatchArgs { steps: 4, ..args };
        let err = check_update_rewards(&over, lens(&over)).unwrap_err();
        assert!(matches!(err, HostError::Shape { expected: 16, got: 12, .. }), "{err}");
    }
}
