//! Typed launch wrappers: the only place that launches kernels, hence the only `unsafe` launch code.
//! Each wrapper checks the buffer lengths the kernel's safety contract needs, computes the launch
//! configuration, pushes arguments in kernel order and launches on the given stream.

use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use gpu_kernels::backtest::{BacktestArgs, Metrics, SIGNAL_SMA_CROSS, SmaCross, Trade, WRITE_EQUITY, WRITE_LEDGER};
use gpu_kernels::batch::{BatchArgs, SampleArgs};
use gpu_kernels::dqn::{DqnArgs, DqnParams};
use gpu_kernels::net::{NetArgs, NetTrial, Stage};
use gpu_kernels::ppo::{PpoArgs, PpoParams};
use gpu_kernels::tile::{GEMM_THREADS, Gemm};
use gpu_kernels::{Bar, EnvState, Moments, Transition, TrialParams};

use crate::HostError;
use crate::cuda::CudaRuntime;

/// A kernel-crate struct as a device element or kernel argument: same layout, so cudarc can copy it.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dev<T>(pub(crate) T);

// The wrapped types are `#[repr(C)]` plain old data (f64/f32/u64/u32/i32/u8 fields, sizes locked by const
// asserts in gpu-kernels, no padding), valid for any bit pattern the kernels write, and all-zero bits are a
// valid value of each.
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<TrialParams> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<EnvState> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<Bar> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<Transition> {}
// SAFETY: see above.
unsafe impl ValidAsZeroBits for Dev<Transition> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<Moments> {}
// SAFETY: see above.
unsafe impl ValidAsZeroBits for Dev<Moments> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<BatchArgs> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<SampleArgs> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<BacktestArgs> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<DqnArgs> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<DqnParams> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<Gemm> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<NetArgs> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<NetTrial> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<PpoArgs> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<PpoParams> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<SmaCross> {}
// SAFETY: see above.
unsafe impl ValidAsZeroBits for Dev<SmaCross> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<Metrics> {}
// SAFETY: see above.
unsafe impl ValidAsZeroBits for Dev<Metrics> {}
// SAFETY: see above.
unsafe impl DeviceRepr for Dev<Trade> {}
// SAFETY: see above.
unsafe impl ValidAsZeroBits for Dev<Trade> {}

/// Threads per block of every kernel (one thread per element).
const BLOCK: u32 = 256;

fn grid(kernel: &str, threads: usize) -> Result<LaunchConfig, HostError> {
    let threads = u32::try_from(threads).map_err(|_| HostError::Shape {
        what: format!("{kernel}: threads (must fit in u32)"),
        expected: u32::MAX as usize,
        got: threads,
    })?;
    Ok(LaunchConfig { grid_dim: (threads.div_ceil(BLOCK).max(1), 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 })
}

/// Runs `go` (one launch on `stream`), bracketed by timing events when the runtime profiles
/// ([`CudaRuntime::start_profile`]).
fn timed<T>(
    rt: &CudaRuntime,
    stream: &CudaStream,
    kernel: &'static str,
    go: impl FnOnce() -> Result<T, cudarc::driver::DriverError>,
) -> Result<(), HostError> {
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = if rt.profiling() {
        Some(stream.record_event(timing).map_err(HostError::driver("recording an event"))?)
    } else {
        None
    };
    go().map_err(HostError::driver(format!("launching {kernel}")))?;
    if let Some(start) = start {
        let end = stream.record_event(timing).map_err(HostError::driver("recording an event"))?;
        rt.record_launch(kernel, start, end);
    }
    Ok(())
}

/// Fails unless `got >= needed` (a buffer may be larger than a launch uses, never smaller).
fn at_least(kernel: &str, what: &str, needed: usize, got: usize) -> Result<(), HostError> {
    if got >= needed {
        Ok(())
    } else {
        Err(HostError::Shape { what: format!("{kernel}: {what}"), expected: needed, got })
    }
}

fn ring_len(args: &BatchArgs) -> usize {
    (args.n_trials as usize * args.capacity as usize).max(1)
}

/// Buffers of one trial group's envs.
pub(crate) struct EnvBuffers<'a> {
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) states: &'a mut CudaSlice<Dev<EnvState>>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
    pub(crate) ring: &'a mut CudaSlice<Dev<Transition>>,
}

impl EnvBuffers<'_> {
    fn check(&self, kernel: &str, args: &BatchArgs) -> Result<(), HostError> {
        at_least(kernel, "trial parameters", args.n_trials as usize, self.params.len())?;
        at_least(kernel, "env states", args.n_envs(), self.states.len())?;
        at_least(kernel, "bars", args.n_bars as usize, self.bars.len())?;
        at_least(kernel, "ring slots (trials x capacity)", ring_len(args), self.ring.len())
    }
}

/// `env_scan`: every env walks `args.steps` bars with `actions` (`steps x n_envs`).
pub(crate) fn env_scan(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: EnvBuffers<'_>,
    actions: &CudaView<'_, u8>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = "env_scan";
    buf.check(kernel, args)?;
    at_least(kernel, "actions (steps x envs)", args.steps as usize * args.n_envs(), actions.len())?;
    if args.capacity > 0 && args.steps as usize * args.envs_per_trial as usize > args.capacity as usize {
        return Err(HostError::Shape {
            what: format!("{kernel}: steps x envs per trial (ring slots one launch may write)"),
            expected: args.capacity as usize,
            got: args.steps as usize * args.envs_per_trial as usize,
        });
    }
    let cfg = grid(kernel, args.n_envs())?;
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.env_scan);
    launch.arg(buf.params).arg(buf.states).arg(actions).arg(buf.bars).arg(buf.ring).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::env_scan` in order and type; every length its safety
    // contract names was checked above, including that no two threads write one ring slot.
    timed(rt, stream, "env_scan", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `observe`: each env's state vector into `out` (`n_envs x (F + 3)`).
pub(crate) fn observe(
    rt: &CudaRuntime,
    stream: &CudaStream,
    buf: EnvBuffers<'_>,
    features: &CudaSlice<f32>,
    out: &mut CudaSlice<f32>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = "observe";
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
    let mut launch = stream.launch_builder(&rt.kernels.observe);
    launch.arg(buf.params).arg(&*buf.states).arg(buf.bars).arg(features).arg(out).arg(&dev_args);
    // SAFETY: arguments match `gpu_kernels::entries::observe`; lengths checked above.
    timed(rt, stream, "observe", || unsafe { launch.launch(cfg) })?;
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
    let (trials, steps) = (args.n_trials as usize, args.steps as usize);
    let n_chunk_values = trials * steps * args.n_chunks();
    for (kernel, what, needed, got) in [
        ("reward_merge", "trial parameters", trials, params.len()),
        ("reward_chunk_moments", "ring slots", ring_len(args), ring.len()),
        ("reward_merge", "running moments", trials, running.len()),
        ("reward_chunk_moments", "chunk moments", n_chunk_values, chunks.len()),
        ("reward_merge", "per-step moments", trials * steps, after_step.len()),
    ] {
        at_least(kernel, what, needed, got)?;
    }
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.reward_chunk_moments);
    launch.arg(&*ring).arg(&mut *chunks).arg(&dev_args);
    let cfg = grid("reward_chunk_moments", n_chunk_values)?;
    // SAFETY: arguments match `gpu_kernels::entries::reward_chunk_moments`; lengths checked above.
    timed(rt, stream, "reward_chunk_moments", || unsafe { launch.launch(cfg) })?;
    let mut launch = stream.launch_builder(&rt.kernels.reward_merge);
    launch.arg(running).arg(&*chunks).arg(&mut *after_step).arg(&dev_args);
    let cfg = grid("reward_merge", trials)?;
    // SAFETY: arguments match `gpu_kernels::entries::reward_merge`; lengths checked above.
    timed(rt, stream, "reward_merge", || unsafe { launch.launch(cfg) })?;
    let mut launch = stream.launch_builder(&rt.kernels.reward_normalize);
    launch.arg(params).arg(ring).arg(&*after_step).arg(&dev_args);
    let cfg = grid("reward_normalize", args.n_envs() * steps)?;
    // SAFETY: arguments match `gpu_kernels::entries::reward_normalize`; lengths checked above.
    timed(rt, stream, "reward_normalize", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// Outputs of the sampler.
#[derive(Debug)]
pub(crate) struct SampleBuffers {
    pub(crate) obs: CudaSlice<f32>,
    pub(crate) next_obs: CudaSlice<f32>,
    pub(crate) actions: CudaSlice<u32>,
    pub(crate) rewards: CudaSlice<f32>,
    pub(crate) dones: CudaSlice<f32>,
    pub(crate) weights: CudaSlice<f32>,
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
    let kernel = "sample_transitions";
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
    let mut launch = stream.launch_builder(&rt.kernels.sample_transitions);
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
    // SAFETY: arguments match `gpu_kernels::entries::sample_transitions`; lengths checked above.
    timed(rt, stream, "sample_transitions", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// Inputs of a backtest launch.
pub(crate) struct BacktestInputs<'a> {
    pub(crate) params: &'a CudaSlice<Dev<TrialParams>>,
    pub(crate) targets: &'a CudaSlice<u8>,
    pub(crate) sma: &'a CudaSlice<Dev<SmaCross>>,
    pub(crate) prefix: &'a CudaSlice<i64>,
    pub(crate) bars: &'a CudaSlice<Dev<Bar>>,
}

/// Outputs of a backtest launch.
pub(crate) struct BacktestOutputs<'a> {
    pub(crate) metrics: &'a mut CudaSlice<Dev<Metrics>>,
    pub(crate) counts: &'a mut CudaSlice<u32>,
    pub(crate) offsets: &'a CudaSlice<u64>,
    pub(crate) ledger: &'a mut CudaSlice<Dev<Trade>>,
    pub(crate) equity: &'a mut CudaSlice<f64>,
}

/// `backtest`: every column, one thread each. `ledger_len` is the total trade count the offsets describe.
pub(crate) fn backtest(
    rt: &CudaRuntime,
    stream: &CudaStream,
    input: &BacktestInputs<'_>,
    out: BacktestOutputs<'_>,
    ledger_len: usize,
    args: &BacktestArgs,
) -> Result<(), HostError> {
    let kernel = "backtest";
    let (columns, steps) = (args.n_columns as usize, (args.end - args.start) as usize);
    at_least(kernel, "parameter sets", args.n_params as usize, input.params.len())?;
    if args.signal == SIGNAL_SMA_CROSS {
        at_least(kernel, "SMA parameters", columns, input.sma.len())?;
    } else {
        at_least(kernel, "target actions", columns * steps, input.targets.len())?;
    }
    at_least(kernel, "close tick prefix sums", args.n_bars as usize + 1, input.prefix.len())?;
    at_least(kernel, "bars", args.n_bars as usize, input.bars.len())?;
    at_least(kernel, "metrics", columns, out.metrics.len())?;
    at_least(kernel, "trade counts", columns, out.counts.len())?;
    if args.write & WRITE_LEDGER != 0 {
        at_least(kernel, "ledger offsets", columns, out.offsets.len())?;
        at_least(kernel, "ledger", ledger_len, out.ledger.len())?;
    }
    if args.write & WRITE_EQUITY != 0 {
        at_least(kernel, "equity values", columns * (steps + 1), out.equity.len())?;
    }
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.backtest);
    launch
        .arg(input.params)
        .arg(input.targets)
        .arg(input.sma)
        .arg(input.prefix)
        .arg(input.bars)
        .arg(out.metrics)
        .arg(out.counts)
        .arg(out.offsets)
        .arg(out.ledger)
        .arg(out.equity)
        .arg(&dev_args);
    let cfg = grid(kernel, columns)?;
    // SAFETY: arguments match `gpu_kernels::entries::backtest`; lengths checked above, and the offsets were
    // computed from this launch's own count pass, so each column's trades fit at its offset.
    timed(rt, stream, "backtest", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// The DQN networks, their Adam state and the step buffers of every trial on the device.
#[derive(Debug)]
pub(crate) struct DqnBuffers {
    pub(crate) params: CudaSlice<Dev<DqnParams>>,
    pub(crate) online: CudaSlice<f32>,
    pub(crate) target: CudaSlice<f32>,
    pub(crate) m: CudaSlice<f32>,
    pub(crate) v: CudaSlice<f32>,
    /// Training activations and gradients ([`gpu_kernels::net::Work`]).
    pub(crate) work: CudaSlice<f32>,
    /// Per-chunk weight gradients.
    pub(crate) partial: CudaSlice<f32>,
    /// Acting buffer ([`gpu_kernels::net::ActWork`]).
    pub(crate) act: CudaSlice<f32>,
    /// `GRAD_CHUNK` ones (the input of the bias gradients).
    pub(crate) ones: CudaSlice<f32>,
    pub(crate) losses: CudaSlice<f32>,
}

/// A table of products on the device, with its host copy (grid size), checked against the lengths of the
/// buffers of a pointer table when it was built ([`crate::tile::check`]).
#[derive(Debug)]
pub(crate) struct GemmTable {
    pub(crate) host: Vec<Gemm>,
    pub(crate) dev: CudaSlice<Dev<Gemm>>,
}

/// `gemm_tiles`: every product of `table` (a block per 64 x 64 output tile of each) on the buffers whose
/// device addresses `pointers` holds.
pub(crate) fn gemm(
    rt: &CudaRuntime,
    stream: &CudaStream,
    table: &GemmTable,
    pointers: &CudaSlice<u64>,
    stage: Stage,
) -> Result<(), HostError> {
    if table.host.is_empty() {
        return Ok(());
    }
    let tiles = table.host.iter().map(|g| g.tiles().0 * g.tiles().1).max().unwrap_or(0);
    let (tiles, problems) = match (u32::try_from(tiles), u32::try_from(table.host.len())) {
        (Ok(t), Ok(p)) if p <= 65_535 => (t.max(1), p),
        _ => {
            return Err(HostError::Shape {
                what: "gemm_tiles: products per launch".to_owned(),
                expected: 65_535,
                got: table.host.len(),
            });
        }
    };
    let cfg = LaunchConfig { grid_dim: (tiles, problems, 1), block_dim: (GEMM_THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut launch = stream.launch_builder(&rt.kernels.gemm_tiles);
    launch.arg(&table.dev).arg(pointers);
    let label = match stage {
        Stage::Act(0) => "gemm_tiles act0",
        Stage::Act(1) => "gemm_tiles act1",
        Stage::Act(_) => "gemm_tiles act2",
        Stage::Forward(0) => "gemm_tiles forward0",
        Stage::Forward(1) => "gemm_tiles forward1",
        Stage::Forward(_) => "gemm_tiles forward2",
        Stage::Backward2 => "gemm_tiles backward2",
        Stage::Backward1 => "gemm_tiles backward1",
        Stage::Gradients => "gemm_tiles gradients",
    };
    // SAFETY: arguments match `gpu_kernels::entries::gemm_tiles`; the table was checked against the lengths
    // of the buffers its pointers name when it was built (`GemmTable`), and no product of one stage writes
    // what another reads (`gpu_kernels::net::plan`).
    timed(rt, stream, label, || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `dqn_select`: every env's action from the acting Q-values.
pub(crate) fn dqn_select(
    rt: &CudaRuntime,
    stream: &CudaStream,
    nets: &DqnBuffers,
    actions: &mut CudaSlice<u8>,
    args: &DqnArgs,
) -> Result<(), HostError> {
    let kernel = "dqn_select";
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    let aw = gpu_kernels::net::ActWork::of(&args.net());
    at_least(kernel, "DQN parameter sets", args.n_trials as usize, nets.params.len())?;
    at_least(kernel, "acting buffer", aw.len(), nets.act.len())?;
    at_least(kernel, "actions", n_envs, actions.len())?;
    let q = nets.act.slice(aw.q()..);
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.dqn_select);
    launch.arg(&nets.params).arg(&q).arg(actions).arg(&dev_args);
    let cfg = grid(kernel, n_envs)?;
    // SAFETY: arguments match `gpu_kernels::entries::dqn_select`; lengths checked above.
    timed(rt, stream, "dqn_select", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `dqn_td`: TD targets, losses and output gradients of every sample.
pub(crate) fn dqn_td(
    rt: &CudaRuntime,
    stream: &CudaStream,
    samples: &SampleBuffers,
    nets: &mut DqnBuffers,
    args: &DqnArgs,
) -> Result<(), HostError> {
    let kernel = "dqn_td";
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
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.dqn_td);
    launch
        .arg(&nets.params)
        .arg(&mut nets.work)
        .arg(&samples.actions)
        .arg(&samples.rewards)
        .arg(&samples.dones)
        .arg(&samples.weights)
        .arg(&mut nets.losses)
        .arg(&dev_args);
    let cfg = grid(kernel, n_samples)?;
    // SAFETY: arguments match `gpu_kernels::entries::dqn_td`; lengths checked above.
    timed(rt, stream, "dqn_td", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `dqn_adam`: gradients from the chunk partials, Adam, target update.
pub(crate) fn dqn_adam(
    rt: &CudaRuntime,
    stream: &CudaStream,
    nets: &mut DqnBuffers,
    args: &DqnArgs,
) -> Result<(), HostError> {
    let kernel = "dqn_adam";
    let (trials, n_params) = (args.n_trials as usize, args.layout().params());
    at_least(kernel, "DQN parameter sets", trials, nets.params.len())?;
    for (what, len) in
        [("online", nets.online.len()), ("target", nets.target.len()), ("m", nets.m.len()), ("v", nets.v.len())]
    {
        at_least(kernel, what, trials * n_params, len)?;
    }
    let chunks = (args.batch as usize).div_ceil(gpu_kernels::net::GRAD_CHUNK);
    at_least(kernel, "gradient partials", chunks * trials * n_params, nets.partial.len())?;
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.dqn_adam);
    launch
        .arg(&nets.params)
        .arg(&mut nets.online)
        .arg(&mut nets.target)
        .arg(&mut nets.m)
        .arg(&mut nets.v)
        .arg(&nets.partial)
        .arg(&dev_args);
    let cfg = grid(kernel, trials * n_params)?;
    // SAFETY: arguments match `gpu_kernels::entries::dqn_adam`; lengths checked above.
    timed(rt, stream, "dqn_adam", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `greedy_walk`: the greedy actions of each trial's single env over `steps` bars (`n_trials x steps`,
/// downloaded), a block of `WALK_THREADS` per trial; the network staged (padded rows) in shared memory when it
/// fits in a block's, read in place otherwise. `None` when even the walk's buffers do not fit (the caller
/// walks a CPU copy).
pub(crate) fn greedy_walk(
    rt: &CudaRuntime,
    view: &super::env::PolicyView<'_>,
    trials: &CudaSlice<Dev<NetTrial>>,
    weights: &CudaSlice<f32>,
    net: &NetArgs,
    steps: usize,
) -> Result<Option<Vec<u8>>, HostError> {
    let kernel = "greedy_walk";
    let k = net.n_trials as usize;
    if net.envs_per_trial != 1 {
        return Err(HostError::Config(format!("{kernel}: needs one env per trial")));
    }
    let buffers = 4 * gpu_kernels::net::walk_shared(net);
    let staged_bytes = buffers + 4 * gpu_kernels::net::walk_stage_floats(net);
    let (staged, shared) = if staged_bytes <= rt.shared_per_block() {
        (1u32, staged_bytes)
    } else if buffers <= rt.shared_per_block() {
        (0, buffers)
    } else {
        return Ok(None);
    };
    at_least(kernel, "trial sizes", k, trials.len())?;
    at_least(kernel, "weights", k * net.layout().params(), weights.len())?;
    at_least(kernel, "env parameters", k, view.params.len())?;
    at_least(kernel, "env states", k, view.states.len())?;
    at_least(kernel, "bars", net.n_bars as usize, view.bars.len())?;
    at_least(kernel, "features", net.n_bars as usize * (net.input as usize - 3), view.features.len())?;
    let n = k * steps;
    let mut actions = view.stream.alloc_zeros::<u8>(n.max(1)).map_err(HostError::driver("allocating walk actions"))?;
    let steps32 = u32::try_from(steps).map_err(|_| HostError::Shape {
        what: format!("{kernel}: steps (must fit in u32)"),
        expected: u32::MAX as usize,
        got: steps,
    })?;
    let blocks = u32::try_from(k).map_err(|_| HostError::Config(format!("{kernel}: too many trials")))?;
    let shared_mem_bytes = u32::try_from(shared).unwrap_or(u32::MAX);
    let threads = gpu_kernels::net::WALK_THREADS as u32;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes };
    let dev_net = Dev(*net);
    let mut launch = view.stream.launch_builder(&rt.kernels.greedy_walk);
    launch
        .arg(view.params)
        .arg(view.states)
        .arg(view.bars)
        .arg(view.features)
        .arg(trials)
        .arg(weights)
        .arg(&mut actions)
        .arg(&dev_net)
        .arg(&steps32)
        .arg(&staged);
    // SAFETY: arguments match `gpu_kernels::entries::greedy_walk`; lengths checked above, and the shared
    // memory holds the walk's buffers (and the staged network when `staged`); one block per trial.
    timed(rt, view.stream, "greedy_walk", || unsafe { launch.launch(cfg) })?;
    let mut out = view.stream.clone_dtoh(&actions).map_err(HostError::driver("downloading walk actions"))?;
    out.truncate(n);
    Ok(Some(out))
}

/// `observe` for a device policy: every env's observation into the first `n_envs x (F + 3)` floats of `out`.
pub(crate) fn observe_view(
    rt: &CudaRuntime,
    view: &super::env::PolicyView<'_>,
    out: &mut CudaSlice<f32>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = "observe";
    let n_envs = args.n_envs();
    at_least(kernel, "env parameters", args.n_trials as usize, view.params.len())?;
    at_least(kernel, "env states", n_envs, view.states.len())?;
    at_least(kernel, "bars", args.n_bars as usize, view.bars.len())?;
    at_least(kernel, "features", args.n_bars as usize * args.n_features as usize, view.features.len())?;
    at_least(kernel, "observation floats", n_envs * (args.n_features as usize + 3), out.len())?;
    let dev_args = Dev(*args);
    let mut launch = view.stream.launch_builder(&rt.kernels.observe);
    launch.arg(view.params).arg(view.states).arg(view.bars).arg(view.features).arg(out).arg(&dev_args);
    let cfg = grid(kernel, n_envs * (args.n_features as usize + 3))?;
    // SAFETY: arguments match `gpu_kernels::entries::observe`; lengths checked above.
    timed(rt, view.stream, "observe", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// The PPO networks, rollout buffers and step buffers of every trial on the device.
#[derive(Debug)]
pub(crate) struct PpoBuffers {
    pub(crate) params: CudaSlice<Dev<PpoParams>>,
    pub(crate) weights: CudaSlice<f32>,
    pub(crate) m: CudaSlice<f32>,
    pub(crate) v: CudaSlice<f32>,
    /// Acting buffer ([`gpu_kernels::net::ActWork`]).
    pub(crate) act: CudaSlice<f32>,
    pub(crate) logps: CudaSlice<f32>,
    pub(crate) values: CudaSlice<f32>,
    pub(crate) bootstrap: CudaSlice<f32>,
    pub(crate) advantages: CudaSlice<f32>,
    pub(crate) returns: CudaSlice<f32>,
    /// Minibatch observations, `K x B x D`.
    pub(crate) obs: CudaSlice<f32>,
    /// Training buffer ([`gpu_kernels::net::Work`]).
    pub(crate) work: CudaSlice<f32>,
    /// Per-chunk gradients.
    pub(crate) partial: CudaSlice<f32>,
    /// The gradient, `K x params`.
    pub(crate) grads: CudaSlice<f32>,
    /// The lanes of the gradient-norm sums, `K x NORM_LANES`.
    pub(crate) norm_lanes: CudaSlice<f32>,
    /// `GRAD_CHUNK` ones (the input of the bias gradients).
    pub(crate) ones: CudaSlice<f32>,
    pub(crate) losses: CudaSlice<f32>,
}

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
        ("training buffer", trials * gpu_kernels::net::Work::of(&args.net()).per_trial(), b.work.len()),
        ("losses", samples, b.losses.len()),
        ("gradients", trials * l.params(), b.grads.len()),
        ("gradient-norm lanes", trials * gpu_kernels::ppo::NORM_LANES, b.norm_lanes.len()),
    ] {
        at_least(kernel, what, needed, got)?;
    }
    Ok(())
}

/// `ppo_select`: actions (and log-probabilities and values at rollout step `slot`, or bootstrap values) from
/// the acting outputs.
pub(crate) fn ppo_select(
    rt: &CudaRuntime,
    stream: &CudaStream,
    b: &mut PpoBuffers,
    actions: &mut CudaSlice<u8>,
    args: &PpoArgs,
    slot: u32,
) -> Result<(), HostError> {
    let kernel = "ppo_select";
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    let aw = gpu_kernels::net::ActWork::of(&args.net());
    at_least(kernel, "acting buffer", aw.len(), b.act.len())?;
    at_least(kernel, "actions", n_envs, actions.len())?;
    let bootstrap = slot >= args.steps;
    if bootstrap {
        at_least(kernel, "bootstrap values", n_envs, b.bootstrap.len())?;
    } else {
        check_ppo(kernel, b, args)?;
    }
    let out = b.act.slice(aw.q()..);
    let dev_args = Dev(*args);
    at_least(kernel, "PPO parameter sets", args.n_trials as usize, b.params.len())?;
    let mut launch = stream.launch_builder(&rt.kernels.ppo_select);
    launch.arg(&b.params).arg(&out).arg(actions);
    if bootstrap {
        launch.arg(&mut b.logps).arg(&mut b.bootstrap);
    } else {
        launch.arg(&mut b.logps).arg(&mut b.values);
    }
    launch.arg(&slot).arg(&dev_args);
    let cfg = grid(kernel, n_envs)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_select`; lengths checked above (with `slot >= steps`
    // the kernel writes only `n_envs` values, into the bootstrap buffer).
    timed(rt, stream, "ppo_select", || unsafe { launch.launch(cfg) })?;
    Ok(())
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
    check_ppo("ppo_gae", b, args)?;
    at_least("ppo_gae", "ring slots", n_envs * args.steps as usize, ring.len())?;
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.ppo_gae);
    launch
        .arg(&b.params)
        .arg(ring)
        .arg(&b.values)
        .arg(&b.bootstrap)
        .arg(&mut b.advantages)
        .arg(&mut b.returns)
        .arg(&dev_args);
    let cfg = grid("ppo_gae", n_envs)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_gae`; lengths checked above.
    timed(rt, stream, "ppo_gae", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_gather`: the minibatch observations of update `args.counter`.
pub(crate) fn ppo_gather(
    rt: &CudaRuntime,
    stream: &CudaStream,
    ring: &CudaSlice<Dev<Transition>>,
    features: &CudaSlice<f32>,
    b: &mut PpoBuffers,
    args: &PpoArgs,
) -> Result<(), HostError> {
    let kernel = "ppo_gather";
    check_ppo(kernel, b, args)?;
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    at_least(kernel, "ring slots", n_envs * args.steps as usize, ring.len())?;
    at_least(kernel, "features", args.n_bars as usize * (args.input as usize - 3), features.len())?;
    let dev_args = Dev(*args);
    at_least(kernel, "PPO parameter sets", args.n_trials as usize, b.params.len())?;
    let mut launch = stream.launch_builder(&rt.kernels.ppo_gather);
    launch.arg(&b.params).arg(ring).arg(features).arg(&mut b.obs).arg(&dev_args);
    let threads = args.n_trials as usize * args.batch as usize * args.input as usize;
    let cfg = grid(kernel, threads)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_gather`; lengths checked above.
    timed(rt, stream, "ppo_gather", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `ppo_loss`: loss and output gradient of every minibatch sample.
pub(crate) fn ppo_loss(
    rt: &CudaRuntime,
    stream: &CudaStream,
    ring: &CudaSlice<Dev<Transition>>,
    b: &mut PpoBuffers,
    args: &PpoArgs,
) -> Result<(), HostError> {
    let kernel = "ppo_loss";
    check_ppo(kernel, b, args)?;
    let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
    at_least(kernel, "ring slots", n_envs * args.steps as usize, ring.len())?;
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.ppo_loss);
    launch
        .arg(&b.params)
        .arg(ring)
        .arg(&b.logps)
        .arg(&b.values)
        .arg(&b.advantages)
        .arg(&b.returns)
        .arg(&mut b.work)
        .arg(&mut b.losses)
        .arg(&dev_args);
    let samples = args.n_trials as usize * args.batch as usize;
    let cfg = grid(kernel, samples)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_loss`; lengths checked above.
    timed(rt, stream, "ppo_loss", || unsafe { launch.launch(cfg) })?;
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
    let kernel = "ppo_adam";
    check_ppo(kernel, b, args)?;
    let (trials, n_params) = (args.n_trials as usize, args.layout().params());
    let chunks = (args.batch as usize).div_ceil(gpu_kernels::net::GRAD_CHUNK);
    at_least(kernel, "gradient partials", chunks * trials * n_params, b.partial.len())?;
    let dev_args = Dev(*args);
    let mut launch = stream.launch_builder(&rt.kernels.ppo_grad);
    launch.arg(&b.partial).arg(&mut b.grads).arg(&dev_args);
    let cfg = grid("ppo_grad", trials * n_params)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_grad`; lengths checked above.
    timed(rt, stream, "ppo_grad", || unsafe { launch.launch(cfg) })?;
    let mut launch = stream.launch_builder(&rt.kernels.ppo_norm);
    launch.arg(&b.params).arg(&b.grads).arg(&mut b.norm_lanes).arg(&dev_args);
    let cfg = grid("ppo_norm", trials * gpu_kernels::ppo::NORM_LANES)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_norm`; lengths checked above.
    timed(rt, stream, "ppo_norm", || unsafe { launch.launch(cfg) })?;
    let mut launch = stream.launch_builder(&rt.kernels.ppo_adam);
    launch
        .arg(&b.params)
        .arg(&mut b.weights)
        .arg(&mut b.m)
        .arg(&mut b.v)
        .arg(&b.grads)
        .arg(&b.norm_lanes)
        .arg(&dev_args);
    let cfg = grid(kernel, trials * n_params)?;
    // SAFETY: arguments match `gpu_kernels::entries::ppo_adam`; lengths checked above.
    timed(rt, stream, "ppo_adam", || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `fma_peak`: `iters` rounds of 8 independent FMA chains per thread (the throughput reference).
pub(crate) fn fma_peak(
    rt: &CudaRuntime,
    stream: &CudaStream,
    out: &mut CudaSlice<f32>,
    iters: u32,
    cfg: LaunchConfig,
) -> Result<(), HostError> {
    at_least("fma_peak", "outputs", (cfg.grid_dim.0 * cfg.block_dim.0) as usize, out.len())?;
    let mut launch = stream.launch_builder(&rt.kernels.fma_peak);
    launch.arg(out).arg(&iters);
    // SAFETY: arguments match `gpu_kernels::entries::fma_peak`; one output per thread, checked above.
    timed(rt, stream, "fma_peak", || unsafe { launch.launch(cfg) })?;
    Ok(())
}
