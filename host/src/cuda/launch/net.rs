//! Launches shared by the learners: a plan's products (`gemm_tiles`), observations for a device
//! policy, the greedy walk, and the FMA throughput reference.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use gpu_kernels::batch::BatchArgs;
use gpu_kernels::net::{NetArgs, NetTrial, Stage};
use gpu_kernels::tile::GEMM_THREADS;

use super::{Launch, at_least, grid, timed};
use crate::HostError;
use crate::cuda::buffers::{ChainPlan, Dev, GemmPlan, PolicyView};
use crate::cuda::runtime::{CudaRuntime, Kernel};

/// `gemm_tiles`: every product of `plan` (a block per 64 x 64 output tile of each) on the buffers whose
/// device addresses `pointers` holds.
pub(crate) fn gemm(
    rt: &CudaRuntime,
    stream: &CudaStream,
    plan: &GemmPlan,
    pointers: &CudaSlice<u64>,
    stage: Stage,
) -> Result<(), HostError> {
    if plan.host.is_empty() {
        return Ok(());
    }
    let tiles = plan.host.iter().map(|g| g.tiles().0 * g.tiles().1).max().unwrap_or(0);
    let (tiles, problems) = match (u32::try_from(tiles), u32::try_from(plan.host.len())) {
        (Ok(t), Ok(p)) if p <= 65_535 => (t.max(1), p),
        _ => {
            return Err(HostError::Shape {
                what: "gemm_tiles: products per launch".to_owned(),
                expected: 65_535,
                got: plan.host.len(),
            });
        }
    };
    let cfg = LaunchConfig { grid_dim: (tiles, problems, 1), block_dim: (GEMM_THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut launch = Launch::new(rt, stream, &rt.kernels.gemm_tiles);
    launch.arg(&plan.dev).arg(pointers);
    let stage = match stage {
        Stage::Act(0) => "act0",
        Stage::Act(1) => "act1",
        Stage::Act(_) => "act2",
        Stage::Forward(0) => "forward0",
        Stage::Forward(1) => "forward1",
        Stage::Forward(_) => "forward2",
        Stage::Backward2 => "backward2",
        Stage::Backward1 => "backward1",
        Stage::Gradients => "gradients",
    };
    // SAFETY: arguments match `gpu_kernels::entries::net::gemm_tiles`; the plan was checked against the lengths
    // of the buffers its addresses name when it was built (`GemmPlan`), and no product of one stage writes
    // what another reads (`gpu_kernels::net::plan`).
    timed(rt, stream, rt.kernels.gemm_tiles.at(stage), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// The launch of `plan`'s chains (`mlp_chain`, `mlp_chain_wide`, `dqn_act`, `ppo_act`): a block per row
/// tile of each chain, of the chains' threads ([`gpu_kernels::chain::Chain::threads`]) and dynamic shared
/// memory ([`gpu_kernels::chain::Chain::shared`]); `None` for an empty plan. `tile_rows` is the rows of a
/// tile the kernel computes ([`gpu_kernels::chain::CHAIN_ROWS`], `WIDE_ROWS` or `ACT_ROWS`), which every
/// chain must have.
pub(crate) fn chain_config(
    rt: &CudaRuntime,
    plan: &ChainPlan,
    net: &NetArgs,
    kernel: &str,
    tile_rows: usize,
) -> Result<Option<LaunchConfig>, HostError> {
    let Some(first) = plan.host.first() else {
        return Ok(None);
    };
    if plan.host.iter().any(|c| c.tile_rows() != tile_rows) {
        return Err(HostError::Config(format!("{kernel}: a chain of the plan has tiles of another height")));
    }
    let tiles = plan.host.iter().map(|c| c.tiles()).max().unwrap_or(0);
    let shared = first.shared(net).bytes();
    match (u32::try_from(tiles), u32::try_from(plan.host.len()), u32::try_from(shared)) {
        (Ok(t), Ok(c), Ok(s)) if c <= 65_535 && (s as usize) <= rt.shared_per_block() => Ok(Some(LaunchConfig {
            grid_dim: (t.max(1), c, 1),
            block_dim: (first.threads(), 1, 1),
            shared_mem_bytes: s,
        })),
        _ => {
            Err(HostError::Config(format!("{kernel}: {} chains of {tiles} tiles do not fit a launch", plan.host.len())))
        }
    }
}

/// `mlp_chain` (or `mlp_chain_wide` for chains of wide tiles): every training chain of `plan`
/// ([`chain_config`]) on the buffers whose addresses `pointers` holds.
pub(crate) fn chain(
    rt: &CudaRuntime,
    stream: &CudaStream,
    plan: &ChainPlan,
    pointers: &CudaSlice<u64>,
    net: &NetArgs,
) -> Result<(), HostError> {
    use gpu_kernels::chain::{CHAIN_ROWS, WIDE_ROWS};
    let wide = plan.host.first().is_some_and(|c| c.tile_rows() == WIDE_ROWS);
    let (kernel, rows) =
        if wide { (&rt.kernels.mlp_chain_wide, WIDE_ROWS) } else { (&rt.kernels.mlp_chain, CHAIN_ROWS) };
    let Some(cfg) = chain_config(rt, plan, net, kernel.name, rows)? else {
        return Ok(());
    };
    let dev_net = Dev(*net);
    let mut launch = Launch::new(rt, stream, kernel);
    launch.arg(&plan.dev).arg(pointers).arg(&dev_net);
    // SAFETY: arguments match `gpu_kernels::entries::net::mlp_chain` (and `mlp_chain_wide`); the plan's products
    // were checked against the lengths of the buffers its addresses name and are row-major
    // (`DevicePlans::launch_layers`); the block and shared memory are the chains' (`chain_config`); no
    // chain writes what another reads (`gpu_kernels::net::plan`).
    timed(rt, stream, kernel.at("forward"), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// What an acting kernel about to be launched on `stream` may read before its grid-dependency wait
/// (`gpu_kernels::chain::ChainEnds::early`): only what the kernel launched just before it there does not
/// write. After an acting kernel (the step before: it writes the envs' states and the actions, not the
/// weights) the weights; after an update (DQN's or PPO's Adam: the weights, not the envs) the envs'
/// observations; after anything else, nothing. (A copy or an event between them is no kernel: the acting
/// kernel then starts after it, and the kernel before, have completed.)
pub(crate) fn act_early(rt: &CudaRuntime, stream: &CudaStream) -> u32 {
    use gpu_kernels::chain::{EARLY_INPUT, EARLY_WEIGHTS};
    use gpu_kernels::registry::{DQN_ACT, DQN_ADAM, PPO_ACT, PPO_ADAM};
    match rt.last_kernel(stream) {
        Some(k) if k == DQN_ACT || k == PPO_ACT => EARLY_WEIGHTS,
        Some(k) if k == DQN_ADAM || k == PPO_ADAM => EARLY_INPUT,
        _ => 0,
    }
}

/// A fused acting launch of `function` (`dqn_act` or `ppo_act`, named `kernel` in errors): checks the envs'
/// buffers as `observe` needs them and that the envs are the chains' rows (`env` matches `net`) and the
/// selection's (`select`: its trials and envs per trial), then pushes the arguments the two kernels share
/// (chains, buffer addresses, network sizes, the envs' buffers and sizes, the ring and `step`, the actions)
/// and returns the launch's configuration; the caller pushes the selection's other arguments and launches.
/// With `step` the kernel also steps every env one bar on its action, as `env_scan` would (the ring and
/// `env.steps == 1` checked here as `env_scan` checks them). `early` ([`act_early`]) says what the kernel
/// reads before its grid-dependency wait.
pub(crate) fn act_launch<'a>(
    rt: &CudaRuntime,
    function: &'a Kernel,
    view: &'a mut PolicyView<'_>,
    chains: (&'a ChainPlan, &'a CudaSlice<u64>),
    sizes: (&'a Dev<NetArgs>, &'a Dev<BatchArgs>),
    select: (u32, u32),
    step: bool,
) -> Result<(Launch<'a>, LaunchConfig), HostError> {
    let (net, env) = (&sizes.0.0, &sizes.1.0);
    let kernel = function.name;
    check_observe(kernel, view, env)?;
    if step {
        if env.steps != 1 {
            return Err(HostError::Config(format!("{kernel}: a fused env step takes one step, not {}", env.steps)));
        }
        super::env::check_ring_writes(kernel, env, view.ring.len())?;
    }
    let same = (env.n_trials, env.envs_per_trial) == select
        && env.n_trials == net.n_trials
        && env.envs_per_trial == net.envs_per_trial
        && env.n_features as usize + 3 == net.input as usize;
    if !same {
        return Err(HostError::Config(format!(
            "{kernel}: envs of {} trials x {} with {} features for a network of {} trials x {} rows and {} inputs \
             and a selection of {} x {}",
            env.n_trials,
            env.envs_per_trial,
            env.n_features,
            net.n_trials,
            net.envs_per_trial,
            net.input,
            select.0,
            select.1
        )));
    }
    let Some(cfg) = chain_config(rt, chains.0, net, kernel, gpu_kernels::chain::ACT_ROWS)? else {
        return Err(HostError::Config(format!("{kernel}: no acting chains")));
    };
    let mut launch = Launch::new(rt, view.stream, function);
    launch.arg(&chains.0.dev).arg(chains.1).arg(sizes.0);
    at_least(kernel, "actions", env.n_envs(), view.actions.len())?;
    launch.arg(view.params).arg(&mut *view.states).arg(view.bars).arg(view.features).arg(sizes.1);
    let early = act_early(rt, view.stream);
    launch.arg(&mut *view.ring).scalar(u32::from(step)).scalar(early).arg(&mut *view.actions);
    Ok((launch, cfg))
}

/// `mlp_rows`: every product of `plan` (a block of 128 threads per 32-row tile of each, the dynamic
/// shared memory of the largest: [`gpu_kernels::chain::RowsShared`]), or with `wide` `mlp_rows_wide` (a
/// block of 512 threads per 128-row tile); the launch is the `Stage::Backward1` product in profiles. With
/// `from`, product `i`'s `A` is computed from product `i` of `from` (`gpu_rows`' `from`: the caller checked
/// that they pair).
pub(crate) fn rows(
    rt: &CudaRuntime,
    stream: &CudaStream,
    plan: &GemmPlan,
    from: Option<&GemmPlan>,
    pointers: &CudaSlice<u64>,
    wide: bool,
) -> Result<(), HostError> {
    use gpu_kernels::chain::{CHAIN_ROWS, CHAIN_THREADS, RowsShared, WIDE_ROWS, WIDE_THREADS};
    if plan.host.is_empty() {
        return Ok(());
    }
    let (rows, threads, function) = if wide {
        (WIDE_ROWS, WIDE_THREADS, &rt.kernels.mlp_rows_wide)
    } else {
        (CHAIN_ROWS, CHAIN_THREADS, &rt.kernels.mlp_rows)
    };
    let label = function.at("backward1");
    let tiles = plan.host.iter().map(|g| (g.m_pad as usize).div_ceil(rows)).max().unwrap_or(0);
    let shared = plan.host.iter().map(|g| RowsShared::of_product(g, rows).bytes()).max().unwrap_or(0);
    let (tiles, problems, shared) = match (u32::try_from(tiles), u32::try_from(plan.host.len()), u32::try_from(shared))
    {
        (Ok(t), Ok(p), Ok(s)) if p <= 65_535 && (s as usize) <= rt.shared_per_block() => (t.max(1), p, s),
        _ => {
            return Err(HostError::Config(format!(
                "{label}: {} products of {tiles} tiles and {shared} bytes of shared memory do not fit a launch",
                plan.host.len()
            )));
        }
    };
    let cfg = LaunchConfig { grid_dim: (tiles, problems, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared };
    if from.is_some_and(|f| f.host.len() != plan.host.len()) {
        return Err(HostError::Config(format!("{label}: the hidden gradients' plans differ in length")));
    }
    let mut launch = Launch::new(rt, stream, function);
    launch.arg(&plan.dev).arg(&from.unwrap_or(plan).dev).arg(pointers).scalar(u32::from(from.is_some()));
    // SAFETY: arguments match `gpu_kernels::entries::net::mlp_rows` (and `mlp_rows_wide`); the plans were checked
    // against the lengths of the buffers their addresses name when they were built, their products suit the
    // kernel (`DevicePlans::launch`, `DevicePlans::hidden_from_out`: `from`'s products pair with the
    // plan's), the shared memory is the largest product's layout for the tile height; no product of a stage
    // writes what another reads.
    timed(rt, stream, label, || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// `mlp_backward`: the hidden gradient of layer 1 and every weight gradient partial of the step
/// ([`gpu_kernels::backward`]: a block of 256 threads per unit group, gradient chunk and trial) on the
/// buffers whose addresses `pointers` holds, for the trials whose sizes `trials` holds on the device.
pub(crate) fn backward(
    rt: &CudaRuntime,
    stream: &CudaStream,
    trials: &CudaSlice<Dev<NetTrial>>,
    pointers: &CudaSlice<u64>,
    net: &NetArgs,
    stored: bool,
) -> Result<(), HostError> {
    use gpu_kernels::backward::{BACKWARD_THREADS, BackwardShared, backward_blocks, backward_suit};
    let function = if stored { &rt.kernels.mlp_gradients } else { &rt.kernels.mlp_backward };
    let kernel = function.name;
    at_least(kernel, "trial sizes", net.n_trials as usize, trials.len())?;
    let (groups, blocks) = backward_blocks(net);
    let shared = BackwardShared::of(net).bytes();
    let (groups, blocks, shared) = match (u32::try_from(groups), u32::try_from(blocks), u32::try_from(shared)) {
        (Ok(g), Ok(b), Ok(s)) if backward_suit(net) && b <= 65_535 && (s as usize) <= rt.shared_per_block() => {
            (g, b, s)
        }
        _ => {
            return Err(HostError::Config(format!(
                "{kernel}: {blocks} blocks of {shared} bytes of shared memory for {net:?} do not fit a launch"
            )));
        }
    };
    let cfg =
        LaunchConfig { grid_dim: (groups, blocks, 1), block_dim: (BACKWARD_THREADS, 1, 1), shared_mem_bytes: shared };
    let dev_net = Dev(*net);
    let mut launch = Launch::new(rt, stream, function);
    launch.arg(trials).arg(pointers).arg(&dev_net);
    // SAFETY: arguments match `gpu_kernels::entries::net::mlp_backward` (and `mlp_gradients`, after the stored
    // hidden gradient of layer 1 on the same stream); the products it replaces were checked
    // against the lengths of the buffers `pointers` names (`DevicePlans::launch_backward`), the sizes suit
    // the kernel and the shared memory is its layout's size; its blocks write disjoint partial sums.
    timed(rt, stream, function.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// A greedy walk launched on an env's stream ([`greedy_walk`]): [`DeviceWalk::finish`] waits for it and
/// downloads its actions. It owns the copies of the weights and trial sizes the walk reads, so they live
/// until then.
pub(crate) struct DeviceWalk {
    stream: Arc<CudaStream>,
    actions: CudaSlice<u8>,
    n: usize,
    _weights: CudaSlice<f32>,
    _trials: CudaSlice<Dev<NetTrial>>,
}

/// A walk dropped unfinished (an error on the way) still reads its copies, which are freed on the
/// learner's stream: wait for the walk's stream first.
impl Drop for DeviceWalk {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
    }
}

impl DeviceWalk {
    /// Waits for the walk and downloads its actions (`n_trials x steps`, trial-major).
    pub(crate) fn finish(self) -> Result<Vec<u8>, HostError> {
        let mut out = self.stream.clone_dtoh(&self.actions).map_err(HostError::driver("downloading walk actions"))?;
        out.truncate(self.n);
        Ok(out)
    }
}

/// Copies of a learner's `weights` and trial sizes `trials` for a walk, made on the learner's `stream` once
/// the work queued so far on `trained_on` (the stream of the last update) is done, not after the whole
/// device: a walk started earlier may still be running. The caller records the copies' completion on
/// `stream` ([`copied`]): the walk's stream waits for it before the walk reads them, and the learner's next
/// update before it writes `weights` ([`WalkCopy::order`]), so training may go on while the walk runs.
/// cudarc's own tracking does not cover it: a buffer keeps one read event, and a kernel of the training
/// stream that reads the weights as an argument (`dqn_td`, `ppo_loss`) replaces the copy's.
pub(crate) fn walk_weights(
    stream: &Arc<CudaStream>,
    trained_on: Option<&CudaStream>,
    weights: &CudaSlice<f32>,
    trials: &CudaSlice<Dev<NetTrial>>,
) -> Result<(CudaSlice<f32>, CudaSlice<Dev<NetTrial>>), HostError> {
    if let Some(trained_on) = trained_on {
        let updated = trained_on
            .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(HostError::driver("recording the last update's event"))?;
        stream.wait(&updated).map_err(HostError::driver("ordering a walk after the last update"))?;
    }
    let copy = stream.clone_dtod(weights).map_err(HostError::driver("copying weights for a walk"))?;
    let trials = stream.clone_dtod(trials).map_err(HostError::driver("copying trial sizes for a walk"))?;
    Ok((copy, trials))
}

/// An event recorded on `stream` after the work queued so far (a walk's copies, [`walk_weights`]).
pub(crate) fn copied(stream: &CudaStream) -> Result<CudaEvent, HostError> {
    stream
        .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .map_err(HostError::driver("recording a walk's weight copy"))
}

/// The completion of the last walk's weight copy ([`walk_weights`]), which the next update must wait for.
#[derive(Debug, Default)]
pub(crate) struct WalkCopy(Option<CudaEvent>);

impl WalkCopy {
    /// The copy whose completion `done` records.
    pub(crate) fn new(done: CudaEvent) -> Self {
        Self(Some(done))
    }

    /// Makes `stream` (the one the update runs on) wait for the copy, once.
    pub(crate) fn order(&mut self, stream: &CudaStream) -> Result<(), HostError> {
        match self.0.take() {
            Some(done) => {
                stream.wait(&done).map_err(HostError::driver("ordering an update after a walk's weight copy"))
            }
            None => Ok(()),
        }
    }
}

/// The stream of a learner's last launches. Its buffers are used on the stream of whichever env batch it
/// acts on or trains from, and cudarc's per-buffer events, which would order those uses, are off
/// ([`CudaRuntime::new`]): a launch on another stream (acting on the validation envs after training, say)
/// first waits for the work queued on the last one.
#[derive(Debug, Default)]
pub(crate) struct LastStream(Option<Arc<CudaStream>>);

impl LastStream {
    /// Orders the launches about to go to `stream` after those queued on the last stream, if it differs.
    pub(crate) fn switch_to(&mut self, stream: &Arc<CudaStream>) -> Result<(), HostError> {
        match &self.0 {
            Some(last) if Arc::ptr_eq(last, stream) => return Ok(()),
            Some(last) => stream.join(last).map_err(HostError::driver("ordering a learner's launches"))?,
            None => {}
        }
        self.0 = Some(stream.clone());
        Ok(())
    }
}

/// How a greedy walk of `net` is launched ([`walk_plan`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WalkPlan {
    /// `greedy_walk_regs` (the wide layers' weights in registers), else `greedy_walk`.
    regs: bool,
    /// Whether `greedy_walk` stages the network in shared memory.
    staged: u32,
    /// Shared memory bytes of a block.
    shared: usize,
}

/// The walk kernel for `net`: `greedy_walk_regs` (the wide layers' weights in registers) for hidden layers
/// of at most 128 units unless the per-layer kernels are asked for (`KernelOptions::fused` off), else
/// `greedy_walk` with the network staged (padded rows) in shared memory when it fits in a block's, read in
/// place otherwise. `None` when even the walk's buffers do not fit (the caller walks a CPU copy).
pub(crate) fn walk_plan(rt: &CudaRuntime, net: &NetArgs) -> Option<WalkPlan> {
    let regs_bytes = 4 * gpu_kernels::net::WalkRegsShared::of(net).len;
    let regs = rt.fused() && gpu_kernels::net::walk_regs_suit(net) && regs_bytes <= rt.shared_per_block();
    let buffers = 4 * gpu_kernels::net::walk_shared(net);
    let staged_bytes = buffers + 4 * gpu_kernels::net::walk_stage_floats(net);
    let (staged, shared) = if regs {
        (1u32, regs_bytes)
    } else if staged_bytes <= rt.shared_per_block() {
        (1u32, staged_bytes)
    } else if buffers <= rt.shared_per_block() {
        (0, buffers)
    } else {
        return None;
    };
    Some(WalkPlan { regs, staged, shared })
}

/// `greedy_walk`: launches the greedy actions of each trial's single env over `steps` bars (`n_trials x
/// steps`) on the env's stream from `weights` and `trials` (copies, [`walk_weights`], which the stream
/// has been made to wait for), a block per trial, as `plan` ([`walk_plan`]) says.
pub(crate) fn greedy_walk(
    rt: &CudaRuntime,
    view: &PolicyView<'_>,
    trials: CudaSlice<Dev<NetTrial>>,
    weights: CudaSlice<f32>,
    net: &NetArgs,
    plan: WalkPlan,
    steps: usize,
) -> Result<DeviceWalk, HostError> {
    let WalkPlan { regs, staged, shared } = plan;
    let kernel = if regs { rt.kernels.greedy_walk_regs.name } else { rt.kernels.greedy_walk.name };
    let k = net.n_trials as usize;
    if net.envs_per_trial != 1 {
        return Err(HostError::Config(format!("{kernel}: needs one env per trial")));
    }
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
    let threads = if regs { gpu_kernels::net::WALK_REGS_THREADS } else { gpu_kernels::net::WALK_THREADS } as u32;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes };
    let dev_net = Dev(*net);
    let function = if regs { &rt.kernels.greedy_walk_regs } else { &rt.kernels.greedy_walk };
    let mut launch = Launch::new(rt, view.stream, function);
    launch
        .arg(view.params)
        .arg(&*view.states)
        .arg(view.bars)
        .arg(view.features)
        .arg(&trials)
        .arg(&weights)
        .arg(&mut actions)
        .arg(&dev_net)
        .arg(&steps32);
    if !regs {
        launch.arg(&staged);
    }
    // SAFETY: arguments match `gpu_kernels::walk::greedy_walk` (or `greedy_walk_regs`, which takes no
    // `staged`); lengths checked above, and the shared memory holds the walk's buffers (and the staged
    // network when `staged`; `WalkRegsShared` for the register walk, whose sizes `walk_regs_suit` checked);
    // one block per trial.
    let launched = timed(rt, view.stream, function.label(), || unsafe { launch.launch(cfg) });
    // From here the walk owns the copies: should the launch's profiling fail after the kernel was queued,
    // dropping the walk waits for its stream before the copies are freed (on the learner's stream).
    let walk = DeviceWalk { stream: view.stream.clone(), actions, n, _weights: weights, _trials: trials };
    launched.map(|()| walk)
}

/// `observe` for a device policy: every env's observation into the first `n_envs x (F + 3)` floats of `out`.
pub(crate) fn observe_view(
    rt: &CudaRuntime,
    view: &PolicyView<'_>,
    out: &mut CudaSlice<f32>,
    args: &BatchArgs,
) -> Result<(), HostError> {
    let kernel = rt.kernels.observe.name;
    let n_envs = args.n_envs();
    check_observe(kernel, view, args)?;
    at_least(kernel, "observation floats", n_envs * (args.n_features as usize + 3), out.len())?;
    let dev_args = Dev(*args);
    let mut launch = Launch::new(rt, view.stream, &rt.kernels.observe);
    launch.arg(view.params).arg(&*view.states).arg(view.bars).arg(view.features).arg(out).arg(&dev_args);
    let cfg = grid(kernel, n_envs * (args.n_features as usize + 3))?;
    // SAFETY: arguments match `gpu_kernels::entries::env::observe`; lengths checked above.
    timed(rt, view.stream, rt.kernels.observe.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}

/// The envs' buffers an observation reads ([`gpu_kernels::batch::observe_entry`]) are long enough for `args`.
fn check_observe(kernel: &str, view: &PolicyView<'_>, args: &BatchArgs) -> Result<(), HostError> {
    at_least(kernel, "env parameters", args.n_trials as usize, view.params.len())?;
    at_least(kernel, "env states", args.n_envs(), view.states.len())?;
    at_least(kernel, "bars", args.n_bars as usize, view.bars.len())?;
    at_least(kernel, "features", args.n_bars as usize * args.n_features as usize, view.features.len())
}

/// `fma_peak`: `iters` rounds of 8 independent FMA chains per thread (the throughput reference).
pub(crate) fn fma_peak(
    rt: &CudaRuntime,
    stream: &CudaStream,
    out: &mut CudaSlice<f32>,
    iters: u32,
    cfg: LaunchConfig,
) -> Result<(), HostError> {
    at_least(rt.kernels.fma_peak.name, "outputs", (cfg.grid_dim.0 * cfg.block_dim.0) as usize, out.len())?;
    let mut launch = Launch::new(rt, stream, &rt.kernels.fma_peak);
    launch.arg(out).arg(&iters);
    // SAFETY: arguments match `gpu_kernels::entries::net::fma_peak`; one output per thread, checked above.
    timed(rt, stream, rt.kernels.fma_peak.label(), || unsafe { launch.launch(cfg) })?;
    Ok(())
}
