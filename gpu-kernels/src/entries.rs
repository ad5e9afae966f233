//! PTX entry points. Each shim computes its thread's element, bounds-checks it, turns raw pointers into
//! slices (shared inputs) or single-element references (its own outputs) and calls the body in
//! [`crate::batch`] that the CPU backend calls too. Names must match [`crate::kernel_names`].

use core::arch::nvptx;
use core::slice;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::backtest::{
    BacktestArgs, Metrics, SIGNAL_SMA_CROSS, SmaCross, Trade, WRITE_EQUITY, WRITE_LEDGER, run_column,
};
use crate::batch::{
    BatchArgs, SampleArgs, chunk_index, chunk_moments, merge_trial_moments, normalize_transition, observe_column,
    observe_entry, observe_floats, sample_entry, sample_of, sample_row, scan_env,
};
use crate::dqn::{DqnArgs, DqnParams, TrialStep, choose, td_sample, trial_step, update_param};
use crate::env::env_step_on_series;
use crate::mlp::{ACTIONS, ACTOR_CRITIC, argmax};
use crate::net::{
    LOSS_THREADS, NetArgs, NetTrial, PPO_LOSS_ROWS, TD_ROWS, WALK_LAYER_THREADS, WALK_THREADS, WalkShared, Work,
    dense_unit, gradient, hidden_gradient, walk_layers, walk_stage, walk_stage_len,
};
use crate::ppo::{
    GATHER_AHEAD, GATHER_ROWS, NORM_LANES, NORM_THREADS, NORM_WINDOW, PpoArgs, PpoParams, act_env, gae_env,
    gather_column, minibatch_slot, norm_window, sample_loss, update_weight,
};
use crate::tile::{GEMM_SHARED, Gemm, SHORT_ROWS, gpu_short_rows, gpu_tile, unrolled};

const _: () = assert!(GEMM_SHARED * 4 <= 17_408, "gemm_tiles declares 17,408 bytes of shared memory");
const _: () = assert!(crate::tile::NARROW_ROWS * (crate::tile::TILE_K + 1) + crate::tile::TILE_K * 4 <= GEMM_SHARED);
use crate::types::{Bar, EnvState, Moments, Transition, TrialParams};
use crate::vector::{ACTIONS_OK, ActionKind, VectorArgs, VectorMarket, VectorRow, action_at, reset_env, step_env};

/// Global thread index in a 1-D launch.
#[inline]
fn thread_index() -> usize {
    // SAFETY: reading the special registers has no side effects.
    unsafe { nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize + nvptx::_thread_idx_x() as usize }
}

/// Walks every env over `args.steps` bars (one thread per env), writing transitions to the ring.
///
/// # Safety
/// `params`: `n_trials`; `states`: `n_envs`; `actions`: `steps x n_envs`; `bars`: `n_bars`; `ring`:
/// `n_trials x capacity` (or 1 when capacity is 0). `steps x envs_per_trial <= capacity`, so no two threads
/// write one ring slot.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn env_scan(
    params: *const TrialParams,
    states: *mut EnvState,
    actions: *const u8,
    bars: *const Bar,
    ring: *mut Transition,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let env = thread_index();
    if env >= args.n_envs() {
        return;
    }
    // SAFETY: lengths as documented; this thread alone touches `states[env]` and its ring slots.
    unsafe {
        let params = &*params.add(env / args.envs_per_trial as usize);
        let state = &mut *states.add(env);
        let actions = slice::from_raw_parts(actions, args.steps as usize * args.n_envs());
        let bars = slice::from_raw_parts(bars, args.n_bars as usize);
        scan_env(env, &args, params, state, actions, bars, |i, t| *ring.add(i) = t);
    }
}

/// Writes each env's observation (F + 3 floats) to `out` (one thread per env and column: coalesced rows).
///
/// # Safety
/// `params`: `n_trials`; `states`: `n_envs`; `bars`: `n_bars`; `features`: `n_bars x n_features`;
/// `out`: `n_envs x (n_features + 3)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn observe(
    params: *const TrialParams,
    states: *const EnvState,
    bars: *const Bar,
    features: *const f32,
    out: *mut f32,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let width = args.n_features as usize + 3;
    if i >= args.n_envs() * width {
        return;
    }
    let (env, c) = (i / width, i % width);
    // SAFETY: lengths as documented; this thread alone writes `out[i]`.
    unsafe {
        let params = &*params.add(env / args.envs_per_trial as usize);
        let bars = slice::from_raw_parts(bars, args.n_bars as usize);
        let features = slice::from_raw_parts(features, args.n_bars as usize * args.n_features as usize);
        *out.add(i) = observe_entry(params, &*states.add(env), bars, features, args.n_features as usize, c);
    }
}

/// Moments of each (trial, step, chunk) of raw rewards (one thread each).
///
/// # Safety
/// `params`: `n_trials`; `ring`: `n_trials x capacity`; `chunks`: `n_trials x steps x n_chunks`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reward_chunk_moments(
    params: *const TrialParams,
    ring: *const Transition,
    chunks: *mut Moments,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let (n_chunks, steps) = (args.n_chunks(), args.steps as usize);
    if i >= args.n_trials as usize * steps * n_chunks {
        return;
    }
    let (trial, step, chunk) = (i / (steps * n_chunks), i / n_chunks % steps, i % n_chunks);
    // SAFETY: lengths as documented; this thread alone writes `chunks[i]`.
    unsafe {
        let ring = slice::from_raw_parts(ring, args.n_trials as usize * args.capacity as usize);
        let origin = (*params.add(trial)).ring_origin;
        *chunks.add(chunk_index(&args, trial, step, chunk)) = chunk_moments(&args, ring, (trial, origin), step, chunk);
    }
}

/// Merges each trial's chunk moments, step by step and in chunk order, into its running moments (one
/// thread per trial); `after_step` gets the running moments after each step.
///
/// # Safety
/// `running`: `n_trials`; `chunks`: `n_trials x steps x n_chunks`; `after_step`: `n_trials x steps`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reward_merge(
    running: *mut Moments,
    chunks: *const Moments,
    after_step: *mut Moments,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let trial = thread_index();
    if trial >= args.n_trials as usize {
        return;
    }
    let steps = args.steps as usize;
    // SAFETY: lengths as documented; this thread alone writes its trial's entries.
    unsafe {
        let chunks = slice::from_raw_parts(chunks, args.n_trials as usize * steps * args.n_chunks());
        merge_trial_moments(&args, chunks, trial, &mut *running.add(trial), |step, m| {
            *after_step.add(trial * steps + step) = m;
        });
    }
}

/// Normalizes the valid rewards of trials that ask for it (one thread per env and step).
///
/// # Safety
/// `params`: `n_trials`; `ring`: `n_trials x capacity`; `after_step`: `n_trials x steps`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reward_normalize(
    params: *const TrialParams,
    ring: *mut Transition,
    after_step: *const Moments,
    args: BatchArgs,
) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let (n_envs, steps) = (args.n_envs(), args.steps as usize);
    if i >= n_envs * steps {
        return;
    }
    let (step, env) = (i / n_envs, i % n_envs);
    let trial = env / args.envs_per_trial as usize;
    // SAFETY: lengths as documented; (env, step) pairs map to distinct ring slots.
    unsafe {
        let p = &*params.add(trial);
        let t = &mut *ring.add(args.ring_index(env, step, p.ring_origin));
        normalize_transition(p, t, &*after_step.add(trial * steps + step));
    }
}

/// Samples `batch` transitions per trial and rebuilds their states (one thread per sample).
///
/// # Safety
/// `params`: `n_trials` (the launch's trials: each sample's RNG key);
/// `ring`: `n_trials x capacity`; `features`: the feature matrix; `obs`, `next_obs`:
/// `n_trials x batch x (n_features + 3)`; `actions`, `rewards`, `dones`, `weights`: `n_trials x batch`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sample_transitions(
    params: *const TrialParams,
    ring: *const Transition,
    features: *const f32,
    n_feature_values: u64,
    obs: *mut f32,
    next_obs: *mut f32,
    actions: *mut u32,
    rewards: *mut f32,
    dones: *mut f32,
    weights: *mut f32,
    args: SampleArgs,
) {
    crate::nvptx_ops::follow_previous();
    let idx = thread_index();
    let width = args.n_features as usize + 3;
    if idx >= args.n_trials as usize * args.batch as usize * width {
        return;
    }
    let (i, c) = (idx / width, idx % width);
    let trial = i / args.batch as usize;
    // SAFETY: lengths as documented; this thread alone writes column c of sample i (and its scalars for c = 0).
    unsafe {
        let ring = slice::from_raw_parts(ring.add(trial * args.capacity as usize), args.capacity as usize);
        let features = slice::from_raw_parts(features, n_feature_values as usize);
        let slot = sample_of(&args, &*params.add(trial), ring, i);
        (*obs.add(idx), *next_obs.add(idx)) = sample_entry(&args, ring, features, slot, c);
        if c == 0 {
            let row = sample_row(ring, slot);
            *actions.add(i) = row.action;
            *rewards.add(i) = row.reward;
            *dones.add(i) = row.done;
            *weights.add(i) = row.weight;
        }
    }
}

/// Backtests every column (one thread each): metrics and trade counts always; the ledger at `offsets`
/// and the equity curves when `args.write` asks for them.
///
/// # Safety
/// `params`: `n_params`; `targets`: `n_columns x (end - start)` for target signals; `sma`: `n_columns` for
/// SMA signals; `prefix`: `n_bars + 1`; `bars`: `n_bars`; `metrics`, `counts`: `n_columns`; with the
/// ledger, `offsets`: `n_columns` and `ledger` long enough for every column's trades at its offset; with
/// equity, `equity`: `n_columns x (end - start + 1)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn backtest(
    params: *const TrialParams,
    targets: *const u8,
    sma: *const SmaCross,
    prefix: *const i64,
    bars: *const Bar,
    metrics: *mut Metrics,
    counts: *mut u32,
    offsets: *const u64,
    ledger: *mut Trade,
    equity: *mut f64,
    args: BacktestArgs,
) {
    crate::nvptx_ops::follow_previous();
    let col = thread_index();
    if col >= args.n_columns as usize {
        return;
    }
    let steps = (args.end - args.start) as usize;
    // SAFETY: lengths as documented; this thread alone writes its column's outputs.
    unsafe {
        let params = slice::from_raw_parts(params, args.n_params as usize);
        let n_targets = if args.signal == SIGNAL_SMA_CROSS { 0 } else { args.n_columns as usize * steps };
        let targets = slice::from_raw_parts(targets, n_targets);
        let sma = slice::from_raw_parts(sma, if args.signal == SIGNAL_SMA_CROSS { args.n_columns as usize } else { 0 });
        let prefix = slice::from_raw_parts(prefix, args.n_bars as usize + 1);
        let bars = slice::from_raw_parts(bars, args.n_bars as usize);
        let base = if args.write & WRITE_LEDGER != 0 { *offsets.add(col) as usize } else { 0 };
        let mut written = 0;
        let (m, count) = run_column(
            col,
            &args,
            params,
            targets,
            sma,
            prefix,
            bars,
            |i, value| {
                if args.write & WRITE_EQUITY != 0 {
                    *equity.add(col * (steps + 1) + i) = value;
                }
            },
            |trade| {
                if args.write & WRITE_LEDGER != 0 {
                    *ledger.add(base + written) = trade;
                    written += 1;
                }
            },
        );
        *metrics.add(col) = m;
        *counts.add(col) = count;
    }
}

/// One tile of one product of the table (block `(tile, problem)`, 256 threads; [`crate::tile::gpu_tile`]).
///
/// # Safety
/// `problems`: `grid_dim_y` products; `buffers`: a device pointer per buffer index they name, each long
/// enough for [`Gemm::extent`]; no product writes what another product of the launch reads; 256 threads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_tiles(problems: *const Gemm, buffers: *const u64) {
    crate::nvptx_ops::follow_previous();
    let smem: u64;
    // SAFETY: declares this block's tiles (GEMM_SHARED floats) and takes their generic address.
    unsafe {
        core::arch::asm!(
            ".shared .align 16 .b8 gemm_smem[17408];", // GEMM_SHARED floats
            "cvta.shared.u64 {p}, gemm_smem;",
            p = out(reg64) smem,
        );
    }
    // SAFETY: the caller's contract; the block index picks its product and tile.
    unsafe {
        // A copy in registers: read through `problems`, every field would be loaded again after each store
        // to shared memory (the compiler cannot tell that the stores do not alias the table).
        let g: Gemm = *problems.add(nvptx::_block_idx_y() as usize);
        gpu_tile(&g, nvptx::_block_idx_x() as usize, buffers, smem as *mut f32, nvptx::_thread_idx_x() as usize);
    }
}

/// One row tile of one chain of the table (block `(tile, chain)`, [`crate::chain::CHAIN_THREADS`] threads,
/// [`crate::chain::ChainShared`] bytes of dynamic shared memory; [`crate::chain::gpu_chain`]).
///
/// # Safety
/// `chains`: `grid_dim_y` row-major chains; `buffers`: a device pointer per buffer index they name, each
/// long enough for their products ([`crate::chain::Chain::layers`]); no chain writes what another reads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_chain(chains: *const crate::chain::Chain, buffers: *const u64, net: NetArgs) {
    use crate::chain::{CHAIN_THREADS, ROWS_PER_WARP, Staged};
    // SAFETY: the caller's contract.
    unsafe { chain_block::<ROWS_PER_WARP, { CHAIN_THREADS as usize / 32 }, true, _>(chains, buffers, &net, |_| Staged) }
}

/// [`mlp_chain`] on tiles of [`crate::chain::WIDE_ROWS`] rows: blocks of [`crate::chain::WIDE_THREADS`] threads,
/// [`crate::chain::Chain::shared`] bytes of dynamic shared memory.
///
/// # Safety
/// As [`mlp_chain`], for chains of wide tiles.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_chain_wide(
    chains: *const crate::chain::Chain,
    buffers: *const u64,
    net: NetArgs,
) {
    use crate::chain::{ROWS_PER_WARP, Staged, WIDE_THREADS};
    // SAFETY: the caller's contract.
    unsafe { chain_block::<ROWS_PER_WARP, { WIDE_THREADS as usize / 32 }, false, _>(chains, buffers, &net, |_| Staged) }
}

/// The chain and row tile of this block's index through [`crate::chain::gpu_chain`] (`R` rows a warp, `W`
/// warps, operands a step ahead or not), with the ends `ends` makes for the chain.
///
/// # Safety
/// As [`crate::chain::gpu_chain`] for the chain `chains[block_idx_y]` and tile `block_idx_x`.
#[inline(always)]
unsafe fn chain_block<const R: usize, const W: usize, const AHEAD: bool, E: crate::chain::ChainEnds>(
    chains: *const crate::chain::Chain,
    buffers: *const u64,
    net: &NetArgs,
    ends: impl FnOnce(&crate::chain::Chain) -> E,
) {
    // SAFETY: the caller's contract; the block index picks its chain and row tile.
    unsafe {
        let c = *chains.add(nvptx::_block_idx_y() as usize);
        let (tile, thread) = (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize);
        let ends = ends(&c);
        crate::chain::gpu_chain::<R, W, AHEAD, _>(&c, net, tile, buffers, dyn_smem(), thread, &ends);
    }
}

/// An acting chain's input rows: each env's observation ([`observe_entry`]) written straight into the
/// block's shared memory (warp `w` the rows `w, w + 8, ..`, lane `l` the columns `l, l + 32, ..`), in place of
/// an `observe` launch and the staged copy of its output.
struct Observe {
    params: *const TrialParams,
    /// Read here, written by the fused env step ([`EnvStep`]).
    states: *mut EnvState,
    bars: *const Bar,
    features: *const f32,
    env: BatchArgs,
    trial: usize,
}

impl Observe {
    /// Global index of the trial's env `row`.
    fn env(&self, row: usize) -> usize {
        self.trial * self.env.envs_per_trial as usize + row
    }

    /// # Safety
    /// `observe`'s contract for the envs of `self.trial`; `d == n_features + 3`; `a` and `scratch` as
    /// [`ChainEnds::input`]; `rows <= ACT_ROWS`.
    ///
    /// Two phases: thread `r` reads env `r`'s state once and leaves its bar and portfolio floats
    /// ([`observe_floats`]) in `scratch`; after a barrier, each thread fills its elements (rows `w + 4 i`,
    /// columns `l` and `l + 32` of each 64-column band) with the features of its row's bar or the
    /// row's portfolio floats: [`observe_entry`]'s values. A thread's loads of a band precede its stores
    /// (stores through generic pointers may alias the loads, so a loop that stored each value as it came
    /// waited a global round trip per row); with the whole observation per element (a state read, a
    /// divergent f64 branch) the fused acting took 8 us more than the layers alone.
    #[inline(always)]
    unsafe fn rows(
        &self,
        a: *mut f32,
        sa: usize,
        scratch: *mut f32,
        (m0, rows): (usize, usize),
        d: usize,
        thread: usize,
    ) {
        use crate::chain::{ACT_ROWS, ACT_THREADS};
        const WARPS: usize = ACT_THREADS as usize / 32;
        const R: usize = ACT_ROWS / WARPS;
        let (nf, n_bars) = (self.env.n_features as usize, self.env.n_bars as usize);
        let (lane, warp) = (thread % 32, thread / 32);
        // SAFETY: the caller's contract; `scratch` holds 4 floats for each of the tile's rows.
        unsafe {
            let bars = slice::from_raw_parts(self.bars, n_bars);
            let features = slice::from_raw_parts(self.features, n_bars * nf);
            // Shared stores by shared address (no generic store: the kernel may run this before its
            // grid-dependency wait, where it writes no global memory; the PTX test checks that).
            use crate::nvptx_ops::{shared_addr, sts};
            if thread < rows {
                let state = &*self.states.add(self.env(m0 + thread));
                let floats = observe_floats(&*self.params.add(self.trial), state, bars);
                sts(shared_addr(scratch.add(4 * thread)), f32::from_bits(state.bar));
                for (k, f) in floats.into_iter().enumerate() {
                    sts(shared_addr(scratch.add(4 * thread + 1 + k)), f);
                }
            }
            core::arch::nvptx::_syncthreads();
            let mut c0 = 0;
            while c0 < d {
                let at = |i: usize, k: usize| (warp + WARPS * i, c0 + lane + 32 * k);
                let values: [[f32; 2]; R] = core::array::from_fn(|i| {
                    core::array::from_fn(|k| {
                        let (r, col) = at(i, k);
                        if r < rows && col < d {
                            let bar = (*scratch.add(4 * r)).to_bits() as usize;
                            observe_column(features, nf, bar, |k| *scratch.add(4 * r + 1 + k), col)
                        } else {
                            0.0
                        }
                    })
                });
                for (i, pair) in values.iter().enumerate() {
                    for (k, &v) in pair.iter().enumerate() {
                        let (r, col) = at(i, k);
                        if r < rows && col < d {
                            sts(shared_addr(a.add(r * sa + col)), v);
                        }
                    }
                }
                c0 += 64;
            }
        }
    }
}

/// An acting kernel's choice from one env's outputs.
trait Choice {
    /// Chooses env `env`'s action (trial `trial`) from its outputs `out` and writes what the kernel writes.
    ///
    /// # Safety
    /// The kernel's contract; one thread per env.
    unsafe fn choose(&self, env: usize, trial: usize, out: &[f32]);
}

/// Acting around the layers: observations in ([`Observe`]), each env's choice out, then (where asked) its
/// env's step on the action chosen ([`EnvStep`]).
struct Act<C> {
    obs: Observe,
    choice: C,
    step: EnvStep,
    /// [`crate::chain::ChainEnds::early`]'s flags, from the host.
    early: u32,
}

/// The env step fused after an acting kernel's choice (`env_scan` over one bar, in the same thread that
/// chose the action: [`scan_env`] with `steps = 1` reading the action just written), in place of an
/// `env_scan` launch after the acting one; the same bits.
#[derive(Clone, Copy)]
struct EnvStep {
    ring: *mut Transition,
    actions: *const u8,
    on: bool,
}

impl EnvStep {
    /// Steps env `env` of `obs`'s trial, where asked.
    ///
    /// # Safety
    /// `env_scan`'s contract for `obs.env` (with `steps == 1`) and the acting kernel's: this thread alone
    /// wrote env `env`'s action and alone touches its state (read by [`Observe::rows`] before the layers'
    /// barriers) and ring slot.
    #[inline(always)]
    unsafe fn run(&self, env: usize, obs: &Observe) {
        if !self.on {
            return;
        }
        // SAFETY: the caller's contract.
        unsafe {
            let params = &*obs.params.add(obs.trial);
            let bars = slice::from_raw_parts(obs.bars, obs.env.n_bars as usize);
            let actions = slice::from_raw_parts(self.actions, obs.env.n_envs());
            scan_env(env, &obs.env, params, &mut *obs.states.add(env), actions, bars, |i, t| *self.ring.add(i) = t);
        }
    }
}

impl<C: Choice> crate::chain::ChainEnds for Act<C> {
    const INPUT: bool = true;
    const OUTPUT: bool = true;

    fn early(&self) -> u32 {
        self.early
    }

    unsafe fn input(&self, a: *mut f32, sa: usize, scratch: *mut f32, rows: (usize, usize), d: usize, thread: usize) {
        // SAFETY: the acting kernel's contract.
        unsafe { self.obs.rows(a, sa, scratch, rows, d, thread) }
    }

    unsafe fn output(&self, row: usize, out: &[f32]) {
        // SAFETY: the acting kernel's contract; a thread per row, so per env.
        unsafe {
            let env = self.obs.env(row);
            self.choice.choose(env, self.obs.trial, out);
            self.step.run(env, &self.obs);
        }
    }
}

/// DQN's choice: the epsilon-greedy action ([`choose`]).
struct DqnChoice {
    dqn: *const DqnParams,
    actions: *mut u8,
    args: DqnArgs,
}

impl Choice for DqnChoice {
    unsafe fn choose(&self, env: usize, trial: usize, q: &[f32]) {
        // SAFETY: `dqn_act`'s contract; this thread alone writes its env's action.
        unsafe { *self.actions.add(env) = choose(env, &self.args, &*self.dqn.add(trial), q) }
    }
}

/// PPO's choice: the sampled action, its log-probability and the value ([`act_env`]).
struct PpoChoice {
    ppo: *const PpoParams,
    actions: *mut u8,
    logps: *mut f32,
    values: *mut f32,
    slot: u32,
    args: PpoArgs,
}

impl Choice for PpoChoice {
    unsafe fn choose(&self, env: usize, trial: usize, out: &[f32]) {
        // SAFETY: `ppo_act`'s contract; this thread alone writes its env's outputs.
        unsafe {
            let a = act_env(env, &self.args, &*self.ppo.add(trial), out, self.slot);
            write_act(a, env, self.actions, self.logps, self.values);
        }
    }
}

/// One env's PPO acting outputs ([`ppo_select`], [`ppo_act`]).
///
/// # Safety
/// The ranges of `ppo_select`'s contract; the caller alone writes this env's outputs.
#[inline(always)]
unsafe fn write_act(a: crate::ppo::ActOutput, env: usize, actions: *mut u8, logps: *mut f32, values: *mut f32) {
    // SAFETY: the caller's contract.
    unsafe {
        *actions.add(env) = a.action;
        match a.rollout {
            Some(i) => {
                *logps.add(i) = a.logp;
                *values.add(i) = a.value;
            }
            None => *values.add(env) = a.value,
        }
    }
}

/// A block of an acting kernel (`dqn_act`, `ppo_act`): the chain and row tile of its block index, through
/// [`crate::chain::gpu_chain`] with `envs`' observations in (its trial set to the chain's) and `choice` out.
///
/// # Safety
/// The acting kernel's contract.
#[inline(always)]
unsafe fn act_block<C: Choice>(
    chains: *const crate::chain::Chain,
    buffers: *const u64,
    net: &NetArgs,
    envs: Observe,
    choice: C,
    step: EnvStep,
    early: u32,
) {
    use crate::chain::{ACT_ROWS, ACT_THREADS};
    // SAFETY: the caller's contract.
    unsafe {
        chain_block::<{ ACT_ROWS / (ACT_THREADS as usize / 32) }, { ACT_THREADS as usize / 32 }, true, _>(
            chains,
            buffers,
            net,
            |c| Act { obs: Observe { trial: c.trial as usize, ..envs }, choice, step, early },
        )
    }
}

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

/// PPO acting in one launch ([`dqn_act`]'s shape): observations, the three layers, then each env's action,
/// log-probability and value ([`act_env`]): the `observe`, `mlp_chain` and `ppo_select` launches in one.
///
/// # Safety
/// As [`dqn_act`] (the env step included), with `ppo`, `actions`, `logps`, `values`, `slot` and `args` as
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
    slot: u32,
    args: PpoArgs,
) {
    let envs = Observe { params, states, bars, features, env, trial: 0 };
    let step = EnvStep { ring, actions, on: step != 0 };
    let choice = PpoChoice { ppo, actions, logps, values, slot, args };
    // SAFETY: the caller's contract.
    unsafe { act_block(chains, buffers, &net, envs, choice, step, early) }
}

/// One row tile of one product of the table with `B` staged whole (block `(tile, product)`,
/// [`crate::chain::CHAIN_THREADS`] threads, [`crate::chain::RowsShared`] bytes of dynamic shared memory for
/// the largest product; [`crate::chain::gpu_rows`]). With `from_out != 0`, product `i`'s `A` is computed
/// from product `i` of `seconds` (the hidden gradient of layer 1 from the output gradient: `gpu_rows`'
/// `from`); else `seconds` is not read.
///
/// # Safety
/// `problems`: `grid_dim_y` products that [`crate::chain::rows_suit`]; with `from_out`, `seconds` as many
/// products, each `gpu_rows`' `from` of its product; `buffers`: a device pointer per buffer index they
/// name, each long enough for them; no product writes what another reads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_rows(
    problems: *const Gemm,
    seconds: *const Gemm,
    buffers: *const u64,
    from_out: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: the caller's contract.
    unsafe { staged_rows::<{ crate::chain::CHAIN_THREADS as usize / 32 }, true>(problems, seconds, buffers, from_out) }
}

/// [`mlp_rows`] on tiles of [`crate::chain::WIDE_ROWS`] rows: blocks of [`crate::chain::WIDE_THREADS`] threads,
/// [`crate::chain::RowsShared`] bytes for wide tiles.
///
/// # Safety
/// As [`mlp_rows`], for wide tiles.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_rows_wide(
    problems: *const Gemm,
    seconds: *const Gemm,
    buffers: *const u64,
    from_out: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: the caller's contract.
    unsafe { staged_rows::<{ crate::chain::WIDE_THREADS as usize / 32 }, false>(problems, seconds, buffers, from_out) }
}

/// The block `(tile, product)` of a staged-products launch: `W` warps, operands a step ahead or not
/// ([`crate::chain::gpu_rows`]).
///
/// # Safety
/// As [`mlp_rows`], with blocks of `32 W` threads.
#[inline(always)]
unsafe fn staged_rows<const W: usize, const AHEAD: bool>(
    problems: *const Gemm,
    seconds: *const Gemm,
    buffers: *const u64,
    from_out: u32,
) {
    // SAFETY: the caller's contract; the block index picks its product and row tile.
    unsafe {
        let i = nvptx::_block_idx_y() as usize;
        let g: Gemm = *problems.add(i);
        let from: Option<Gemm> = if from_out != 0 { Some(*seconds.add(i)) } else { None };
        let (tile, thread) = (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize);
        crate::chain::gpu_rows::<W, AHEAD>(&g, tile, buffers, dyn_smem(), thread, from.as_ref());
    }
}

/// The fused backward pass of a training step: block `(side x groups + group, chunk x n_trials + trial)`,
/// [`crate::backward::BACKWARD_THREADS`] threads, [`crate::backward::BackwardShared`] bytes of dynamic shared
/// memory ([`crate::backward::gpu_backward`]).
///
/// # Safety
/// As [`crate::backward::gpu_backward`]; the grid is [`crate::backward::backward_blocks`]`(&net)`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_backward(trials: *const NetTrial, buffers: *const u64, net: NetArgs) {
    // SAFETY: the caller's contract.
    unsafe { backward_block(trials, buffers, &net, false) }
}

/// [`mlp_backward`] after the hidden gradient of layer 1 was stored (`mlp_rows`): the layer-1 side's blocks
/// stage their units' columns of it instead of computing them, so each reads only its own columns (no
/// `D2` rows, no `W2`): the weight and bias gradients' partial sums of a step whose blocks take many waves.
///
/// # Safety
/// As [`mlp_backward`]; the training buffer holds the step's `D1` ([`crate::net::Stage::Backward1`]).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mlp_gradients(trials: *const NetTrial, buffers: *const u64, net: NetArgs) {
    // SAFETY: the caller's contract.
    unsafe { backward_block(trials, buffers, &net, true) }
}

/// The block `(group, chunk x n_trials + trial)` of `mlp_backward` or (`stored`) `mlp_gradients`.
///
/// # Safety
/// As [`mlp_backward`] (with `stored`, [`mlp_gradients`]).
#[inline(always)]
unsafe fn backward_block(trials: *const NetTrial, buffers: *const u64, net: &NetArgs, stored: bool) {
    // SAFETY: the caller's contract; the block index picks the group and the (chunk, trial).
    unsafe {
        let (x, block) = (nvptx::_block_idx_x() as usize, nvptx::_block_idx_y() as usize);
        let thread = nvptx::_thread_idx_x() as usize;
        crate::backward::gpu_backward(trials, buffers, net, dyn_smem(), (x, block, thread), stored);
    }
}

// The dynamic shared memory of the kernels launched with `shared_mem_bytes` (the greedy walk, the chains).
core::arch::global_asm!(".extern .shared .align 16 .b8 dyn_smem[];");

/// Generic address of this block's dynamic shared memory.
#[inline(always)]
fn dyn_smem() -> *mut f32 {
    let p: u64;
    // SAFETY: takes the generic address of the module's dynamic shared window (no memory access).
    unsafe { core::arch::asm!("cvta.shared.u64 {p}, dyn_smem;", p = out(reg64) p) };
    p as *mut f32
}

/// Asks the memory system to bring the line holding `p` into L1 (a hint: no fault, no effect on results).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    // SAFETY: a prefetch never faults and writes nothing.
    unsafe { core::arch::asm!("prefetch.L1 [{p}];", p = in(reg64) p) };
}

unsafe extern "C" {
    /// `barrier.sync id, count` (the LLVM intrinsic is convergent: the optimizer never duplicates it into
    /// paths that threads of one warp could take apart, which an `asm!` barrier does not guarantee).
    #[link_name = "llvm.nvvm.barrier.cta.sync.count"]
    fn barrier_sync_count(id: u32, count: u32);
}

/// Barrier of a whole walk block (barrier 0, all [`WALK_THREADS`]; safe where a warp's threads diverged).
#[inline(always)]
fn walk_barrier() {
    // SAFETY: every thread of the block executes the same sequence of these barriers.
    unsafe { barrier_sync_count(0, WALK_THREADS as u32) };
}

/// Barrier among the walk's layer threads alone (named barrier 1; the env warps do not take part).
#[inline(always)]
fn layer_barrier() {
    // SAFETY: every layer thread executes the same sequence of these barriers (uniform control flow).
    unsafe { barrier_sync_count(1, WALK_LAYER_THREADS as u32) };
}

/// A walk block's candidates in shared memory ([`WalkShared`]'s first regions, both walk kernels): `2 x
/// ACTIONS` env states with their portfolio floats and `2 x outputs` Q-values, double-buffered by step
/// parity. Step `s` reads the parity of `s - 1` and writes its own; the block-wide barrier that ends a step
/// orders its writes before the next step's reads.
#[derive(Clone, Copy)]
struct WalkCandidates {
    slots: *mut EnvState,
    floats: *mut [f32; 3],
    q: *mut f32,
    o: usize,
}

impl WalkCandidates {
    /// The candidates of the block whose shared memory starts at `smem`.
    ///
    /// # Safety
    /// `smem` holds `ws` (16-byte aligned).
    #[inline(always)]
    unsafe fn of(smem: *mut f32, ws: &WalkShared, outputs: usize) -> Self {
        // SAFETY: the caller's contract.
        unsafe {
            Self {
                slots: smem.add(ws.slots) as *mut EnvState,
                floats: smem.add(ws.floats) as *mut [f32; 3],
                q: smem.add(ws.q),
                o: outputs,
            }
        }
    }

    /// The action chosen at step `s - 1` (the Q-values' argmax; candidate 0 before step 0).
    ///
    /// # Safety
    /// The Q-values of step `s - 1` are written and ordered before this read (a barrier).
    #[inline(always)]
    unsafe fn chosen(&self, s: usize) -> usize {
        // SAFETY: the caller's contract; the parity's `o` Q-values lie inside the block's buffers.
        if s == 0 { 0 } else { argmax(unsafe { slice::from_raw_parts(self.q.add((s - 1) % 2 * self.o), self.o) }) }
    }

    /// The state chosen at step `s - 1` (`a_prev`) and its portfolio floats.
    ///
    /// # Safety
    /// As [`Self::chosen`], for the candidates.
    #[inline(always)]
    unsafe fn previous(&self, s: usize, a_prev: usize) -> (*mut EnvState, [f32; 3]) {
        let c = (s + 1) % 2 * ACTIONS + a_prev;
        // SAFETY: the caller's contract; `c < 2 ACTIONS`.
        unsafe { (self.slots.add(c), *self.floats.add(c)) }
    }

    /// The state before step 0 as candidate 0 of parity 1 (the "previous" step), chosen by convention.
    ///
    /// # Safety
    /// One thread calls this, before a barrier that precedes step 0.
    #[inline(always)]
    unsafe fn start(&self, params: &TrialParams, start: EnvState, bars: &[Bar]) {
        // SAFETY: the caller's contract.
        unsafe {
            *self.slots.add(ACTIONS) = start;
            *self.floats.add(ACTIONS) = observe_floats(params, &start, bars);
        }
    }

    /// Step `s`'s candidate of `action`: a copy of the state chosen at step `s - 1` stepped with it, and its
    /// portfolio floats.
    ///
    /// # Safety
    /// One thread per action calls this in step `s`, after the barrier that ends step `s - 1`.
    #[inline(always)]
    unsafe fn step(&self, params: &TrialParams, bars: &[Bar], s: usize, a_prev: usize, action: u8) {
        // SAFETY: the caller's contract; the candidate of `action` is this thread's alone in step `s`.
        unsafe {
            let mut state = *self.previous(s, a_prev).0;
            env_step_on_series(params, &mut state, action, bars);
            let c = s % 2 * ACTIONS + action as usize;
            *self.floats.add(c) = observe_floats(params, &state, bars);
            *self.slots.add(c) = state;
        }
    }

    /// The state chosen after the last of `steps` steps.
    ///
    /// # Safety
    /// After the barrier that ends the last step.
    #[inline(always)]
    unsafe fn last(&self, steps: usize) -> EnvState {
        // SAFETY: the caller's contract.
        unsafe { *self.previous(steps, self.chosen(steps)).0 }
    }
}

/// The greedy walk of every trial's single env over `steps` bars, a block of [`WALK_THREADS`] per trial.
/// Each step, the layer threads build the observation of the state chosen at the previous step (features a
/// column per thread) and compute the layers (a unit per thread, [`dense_unit`], barriers among themselves
/// only); meanwhile the first lane of each env warp steps a copy of the state with its own action (0, 1, 2)
/// and publishes the candidate and its portfolio floats. After one block-wide barrier the Q-values' argmax
/// picks the candidate: the env lanes keep it as the state and the next step's observation reads it. So the
/// env step is off the critical path, and every bar gets the state of stepping the argmax action, as the CPU
/// walk's sequence does (`actions[trial * steps + step]`). With `staged != 0` the block first copies its
/// network into shared memory after its buffers ([`walk_stage`]: padded rows read with vector loads, the
/// next eight terms loaded while eight are summed); otherwise it reads the weights in place. The next bar's lines are prefetched.
///
/// # Safety
/// `env_params`, `trials`, `states`: `n_trials` (one env per trial); `bars`: `n_bars`; `features`:
/// `n_bars x (input - 3)`; `weights`: `n_trials x params`; `actions`: `n_trials x steps`; dynamic shared
/// memory: `walk_shared(args)` floats, plus `walk_stage_floats(args)` when staged (16-byte aligned); one block of
/// [`WALK_THREADS`] per trial.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn greedy_walk(
    env_params: *const TrialParams,
    states: *mut EnvState,
    bars: *const Bar,
    features: *const f32,
    trials: *const NetTrial,
    weights: *const f32,
    actions: *mut u8,
    args: NetArgs,
    steps: u32,
    staged: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: the caller's contract. Shared writes and their reads are ordered by the barriers: candidates
    // and Q-values of step s are written before the block-wide barrier of step s and read after it, into
    // the parity-s buffers, which step s + 1 leaves alone (it writes the other parity).
    unsafe {
        let (t, tid) = (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize);
        if t >= args.n_trials as usize {
            return;
        }
        let l = args.layout();
        let (d, o) = (l.input, l.outputs);
        let smem = dyn_smem();
        let ws = WalkShared::of(&args);
        let cands = WalkCandidates::of(smem, &ws, o);
        let q = smem.add(ws.q);
        let obs = smem.add(ws.obs);
        let (h1, h2) = (smem.add(ws.h1), smem.add(ws.h2));
        let params = &*env_params.add(t);
        let h = (*trials.add(t)).hidden as usize;
        let f = d - 3;
        let n_bars = args.n_bars as usize;
        let bars = slice::from_raw_parts(bars, n_bars);
        let features = slice::from_raw_parts(features, n_bars * f);
        let w = weights.add(t * l.params());
        let stage = if staged != 0 {
            let s = smem.add(ws.len);
            let mut i = tid;
            while i < walk_stage_len(&l, h) {
                walk_stage(&l, w, h, s, i);
                i += WALK_THREADS;
            }
            Some(s as *const f32)
        } else {
            None
        };
        let layers = walk_layers(&l, w, h, stage);
        if tid == WALK_LAYER_THREADS {
            cands.start(params, *states.add(t), bars);
        }
        walk_barrier();
        let env_lane = tid >= WALK_LAYER_THREADS && (tid - WALK_LAYER_THREADS).is_multiple_of(32);
        let my_action = (tid.saturating_sub(WALK_LAYER_THREADS) / 32) as u8;
        for step in 0..steps as usize {
            let cur = step % 2;
            let a_prev = cands.chosen(step);
            if tid < WALK_LAYER_THREADS {
                // The observation of the chosen state: features of its bar, then its portfolio floats.
                let (state, pf) = cands.previous(step, a_prev);
                let bar = (*state).bar as usize;
                let mut c = tid;
                while c < f {
                    *obs.add(c) = features[bar * f + c];
                    if bar + 1 < n_bars {
                        prefetch(features.as_ptr().add((bar + 1) * f + c));
                    }
                    c += WALK_LAYER_THREADS;
                }
                if tid < 3 {
                    *obs.add(f + tid) = pf[tid];
                }
                if tid == WALK_LAYER_THREADS - 1 && bar + 2 < n_bars {
                    prefetch(bars.as_ptr().add(bar + 2));
                    prefetch((bars.as_ptr().add(bar + 3) as *const u8).wrapping_sub(1));
                }
                layer_barrier();
                let mut n = tid;
                while n < h {
                    *h1.add(n) = dense_unit(&layers[0], *w.add(l.b1() + n), true, n, obs);
                    n += WALK_LAYER_THREADS;
                }
                layer_barrier();
                let mut n = tid;
                while n < h {
                    *h2.add(n) = dense_unit(&layers[1], *w.add(l.b2() + n), true, n, h1);
                    n += WALK_LAYER_THREADS;
                }
                layer_barrier();
                if tid < o {
                    *q.add(cur * o + tid) = dense_unit(&layers[2], *w.add(l.b3() + tid), false, tid, h2);
                }
            } else if env_lane {
                cands.step(params, bars, step, a_prev, my_action);
            }
            walk_barrier();
            if tid == WALK_LAYER_THREADS {
                *actions.add(t * steps as usize + step) = cands.chosen(step + 1) as u8;
            }
        }
        if tid == WALK_LAYER_THREADS {
            *states.add(t) = cands.last(steps as usize);
        }
    }
}

/// Named barrier `id` of `count` threads (whole warps).
///
/// # Safety
/// Every thread of the warps counted executes the same sequence of barriers with this id.
#[inline(always)]
unsafe fn named_barrier(id: u32, count: usize) {
    // SAFETY: the caller's contract.
    unsafe { barrier_sync_count(id, count as u32) };
}

/// `sum_j x[j] w[j]` over `j < 32 * ceil(h / 32)` as one FMA chain in ascending `j` from 0 (`dot_aligned`'s
/// order): `x` the shared address of [`WALK_REG_UNITS`](crate::net::WALK_REG_UNITS) floats (16-byte
/// aligned), `w` a register row. The terms past `h` must be zeros in both (`+0` added to a sum that is never
/// `-0`: the sum of the first `h` terms, bit for bit). Eight inputs (two vector loads) are loaded while the
/// eight before them are summed. The width is tested once per 32 terms, not per 8: each test is a branch
/// and copies of the loaded registers at its join.
///
/// # Safety
/// `x` addresses this block's shared memory, holding `WALK_REG_UNITS` floats.
#[inline(always)]
#[allow(unused_assignments, reason = "the last chunk's load ahead is not read")]
unsafe fn dot_regs(x: u32, w: &[f32; crate::net::WALK_REG_UNITS], h: usize) -> f32 {
    use crate::nvptx_ops::lds4;
    use crate::tile::fma;
    const LAST: usize = crate::net::WALK_REG_UNITS / 8 - 1;
    const _: () = assert!(LAST == 15, "the unrolled groups below are 4 of 4 chunks");
    // SAFETY: the caller's contract; chunk c reads floats 8c .. 8c + 8, c <= LAST.
    let load = |c: usize| unsafe { (lds4(x + 32 * c as u32), lds4(x + 32 * c as u32 + 16)) };
    let mut acc = 0.0f32;
    let mut ahead = load(0);
    unrolled!(g in [0, 1, 2, 3] {
        if 32 * g < h {
            unrolled!(i in [0, 1, 2, 3] {
                let c = 4 * g + i;
                let (lo, hi) = ahead;
                ahead = load((c + 1).min(LAST));
                unrolled!(u in [0, 1, 2, 3] {
                    acc = fma(lo[u], w[8 * c + u], acc);
                });
                unrolled!(u in [0, 1, 2, 3] {
                    acc = fma(hi[u], w[8 * c + 4 + u], acc);
                });
            });
        }
    });
    acc
}

/// [`greedy_walk`] with the wide layers' weights in registers, for networks of at most
/// [`WALK_REG_UNITS`](crate::net::WALK_REG_UNITS) hidden units ([`crate::net::walk_regs_suit`]): a block of
/// [`WALK_REGS_THREADS`](crate::net::WALK_REGS_THREADS) per trial. Layer thread `n` keeps unit `n`'s row of
/// `W2`, lane `o` of the output warp output `o`'s row of `W3` (zeros past the trial's width); `W1` is
/// staged in shared memory. Layer 1 is split at the portfolio floats: the market features' part of each
/// unit's sum (its first `input - 3` terms, which do not depend on the actions) is computed for the next
/// bar while the output warp computes this bar's outputs, and the bar's portfolio floats add their three
/// terms to it (the same FMA chain, so the same bits); a bar that was not the one foreseen (a done env
/// stays on its bar) has its part computed when it is observed. Per bar the critical path is three terms,
/// layer 2's chain, the output chain and three barriers; the env warps step the candidates meanwhile, as in
/// [`greedy_walk`]. Every unit is [`dense_unit`]'s element, bit for bit.
///
/// # Safety
/// [`greedy_walk`]'s, with dynamic shared memory of [`crate::net::WalkRegsShared::of`]`(args).len` floats
/// (16-byte aligned), `args.hidden <= WALK_REG_UNITS`, `args.outputs <= 32`; one block of
/// `WALK_REGS_THREADS` per trial.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn greedy_walk_regs(
    env_params: *const TrialParams,
    states: *mut EnvState,
    bars: *const Bar,
    features: *const f32,
    trials: *const NetTrial,
    weights: *const f32,
    actions: *mut u8,
    args: NetArgs,
    steps: u32,
) {
    crate::nvptx_ops::follow_previous();
    use crate::net::{
        WALK_OUTPUT_THREAD, WALK_REG_UNITS, WALK_REGS_THREADS, WalkRegsShared, dot_aligned, walk_row_stride,
    };
    use crate::nvptx_ops::shared_addr;
    use crate::tile::fma;
    const LAYER: usize = WALK_LAYER_THREADS;
    // Barrier ids: 0 the whole block, 1 the layer threads, 2 the layer threads and the output warp.
    // SAFETY: every thread of the block takes barrier 0 in the same order.
    let block_barrier = || unsafe { named_barrier(0, WALK_REGS_THREADS) };
    // SAFETY: every layer thread takes barrier 1 in the same order (uniform control flow).
    let layer_barrier = || unsafe { named_barrier(1, LAYER) };
    // SAFETY: every layer thread and the output warp take barrier 2 in the same order.
    let output_barrier = || unsafe { named_barrier(2, LAYER + 32) };
    // SAFETY: the caller's contract. Shared writes and their reads are ordered by the barriers: the
    // candidates and outputs as in `greedy_walk`; `h1` is written before barrier 1 and read after it, `h2`
    // before barrier 2 and read after it, `next` before barrier 1 and read after barrier 2, `now` before the
    // barrier 1 of its branch and read after it; every buffer is rewritten only in a later step, after the
    // block-wide barrier that ends the step of its readers.
    unsafe {
        let (t, tid) = (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize);
        if t >= args.n_trials as usize {
            return;
        }
        let l = args.layout();
        let (d, o) = (l.input, l.outputs);
        let smem = dyn_smem();
        let ws = WalkRegsShared::of(&args);
        let cands = WalkCandidates::of(smem, &ws.base, o);
        let q = smem.add(ws.base.q);
        let (h1, h2, now, next, w1s) =
            (smem.add(ws.h1), smem.add(ws.h2), smem.add(ws.now), smem.add(ws.next), smem.add(ws.w1));
        let params = &*env_params.add(t);
        let h = ((*trials.add(t)).hidden as usize).min(WALK_REG_UNITS);
        let f = d - 3;
        let s1 = walk_row_stride(d);
        let n_bars = args.n_bars as usize;
        let bars = slice::from_raw_parts(bars, n_bars);
        let features = slice::from_raw_parts(features, n_bars * f);
        let w = weights.add(t * l.params());
        let mut i = tid;
        while i < h * d {
            let (n, j) = (i / d, i % d);
            *w1s.add(n * s1 + j) = *w.add(l.w1() + n * d + j);
            i += WALK_REGS_THREADS;
        }
        let (layer, lane) = (tid < LAYER, tid.wrapping_sub(WALK_OUTPUT_THREAD));
        let unit = layer && tid < h;
        let output = lane < o;
        // This thread's register row and bias: unit `tid`'s of layer 2, or output `lane`'s of layer 3.
        let (row, bias) = if unit {
            (w.add(l.w2() + tid * l.hidden), *w.add(l.b2() + tid))
        } else if output {
            (w.add(l.w3() + lane * l.hidden), *w.add(l.b3() + lane))
        } else {
            (w, 0.0)
        };
        // Every element written at a constant index (an array-repeat initializer is a loop with a variable
        // index, which keeps the row in local memory).
        let mut wr: [f32; WALK_REG_UNITS] = core::mem::zeroed();
        let live = if unit || output { h } else { 0 };
        unrolled!(c in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            unrolled!(u in [0, 1, 2, 3, 4, 5, 6, 7] {
                wr[8 * c + u] = if 8 * c + u < live { *row.add(8 * c + u) } else { 0.0 };
            });
        });
        // Layer 1's bias and its weights of the three portfolio floats (the last inputs).
        let (b1, tail) = if unit {
            let r = w.add(l.w1() + tid * d + f);
            (*w.add(l.b1() + tid), [*r, *r.add(1), *r.add(2)])
        } else {
            (0.0, [0.0; 3])
        };
        let w1row = w1s.add(tid.min(WALK_REG_UNITS - 1) * s1);
        if tid == LAYER {
            cands.start(params, *states.add(t), bars);
        }
        block_barrier();
        let env_lane = (LAYER..WALK_OUTPUT_THREAD).contains(&tid) && (tid - LAYER).is_multiple_of(32);
        let my_action = (tid.saturating_sub(LAYER) / 32) as u8;
        let (h1a, h2a) = (shared_addr(h1), shared_addr(h2));
        // Layer 1's market part of unit `tid` for bar `cur_bar` and for the foreseen `next_bar` (none: MAX).
        let (mut cur_part, mut cur_bar, mut next_part, mut next_bar) = (0.0f32, usize::MAX, 0.0f32, usize::MAX);
        for step in 0..steps as usize {
            let cur = step % 2;
            let a_prev = cands.chosen(step);
            if layer {
                let (state, pf) = cands.previous(step, a_prev);
                let bar = (*state).bar as usize;
                if bar == next_bar {
                    cur_part = next_part;
                } else if bar != cur_bar {
                    // Not foreseen (uniform over the layer threads: they read the same state).
                    let mut c = tid;
                    while c < f {
                        *now.add(c) = features[bar * f + c];
                        c += LAYER;
                    }
                    layer_barrier();
                    cur_part = if unit { dot_aligned(now, w1row, f) } else { 0.0 };
                }
                cur_bar = bar;
                let ahead = bar + 1;
                if ahead < n_bars {
                    let mut c = tid;
                    while c < f {
                        *next.add(c) = features[ahead * f + c];
                        if ahead + 1 < n_bars {
                            prefetch(features.as_ptr().add((ahead + 1) * f + c));
                        }
                        c += LAYER;
                    }
                }
                if tid == LAYER - 1 && bar + 2 < n_bars {
                    prefetch(bars.as_ptr().add(bar + 2));
                    prefetch((bars.as_ptr().add(bar + 3) as *const u8).wrapping_sub(1));
                }
                // `dense_unit` of layer 1: the chain goes on from the market part with the portfolio floats.
                let v = if unit {
                    let s = fma(pf[2], tail[2], fma(pf[1], tail[1], fma(pf[0], tail[0], cur_part))) + b1;
                    if s > 0.0 { s } else { 0.0 }
                } else {
                    0.0
                };
                *h1.add(tid) = v;
                layer_barrier();
                let v = if unit {
                    let s = dot_regs(h1a, &wr, h) + bias;
                    if s > 0.0 { s } else { 0.0 }
                } else {
                    0.0
                };
                *h2.add(tid) = v;
                output_barrier();
                // While the output warp computes this bar's outputs: the next bar's market part.
                if ahead < n_bars {
                    next_part = if unit { dot_aligned(next, w1row, f) } else { 0.0 };
                    next_bar = ahead;
                } else {
                    next_bar = usize::MAX;
                }
            } else if tid >= WALK_OUTPUT_THREAD {
                output_barrier();
                if output {
                    *q.add(cur * o + lane) = dot_regs(h2a, &wr, h) + bias;
                }
            } else if env_lane {
                cands.step(params, bars, step, a_prev, my_action);
            }
            block_barrier();
            if tid == LAYER {
                *actions.add(t * steps as usize + step) = cands.chosen(step + 1) as u8;
            }
        }
        if tid == LAYER {
            *states.add(t) = cands.last(steps as usize);
        }
    }
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

/// Rows `j0 .. j0 + rows` of `g` by the block's [`LOSS_THREADS`] threads, [`SHORT_ROWS`] at a time.
///
/// # Safety
/// [`gpu_short_rows`]'s, for each group of rows.
#[inline(always)]
unsafe fn short_rows(g: &Gemm, inputs: [*const f32; 4], c: *mut f32, j0: usize, rows: usize, tid: usize) {
    let mut r0 = j0;
    while r0 < (j0 + rows).min(g.m_pad as usize) {
        // SAFETY: the caller's contract.
        unsafe { gpu_short_rows(g, inputs, c, r0, tid, LOSS_THREADS as usize) };
        r0 += SHORT_ROWS;
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

/// PPO acting (one thread per env) from the acting outputs `out` (3 logits and a value per env): the sampled
/// (or greedy) action into `actions`, its log-probability and the state's value at rollout step `slot`
/// (`trial x steps x E + slot x E + e`); with `slot >= steps`, the value goes to `values[env]` (the
/// bootstrap after the last step) and no log-probability is written.
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
    slot: u32,
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
        write_act(act_env(env, &args, &*ppo.add(env / ept), out, slot), env, actions, logps, values);
    }
}

/// The minibatch observations of update `args.counter`, [`GATHER_ROWS`] samples per block ([`gather_rows`]):
/// each sample's rollout slot ([`minibatch_slot`], a shuffle), then its columns ([`gather_column`]); zeros
/// for a trial that sits the update out.
///
/// # Safety
/// `ppo`: `n_trials`; `ring`: `n_trials x steps x E` transitions (fewer than `u32::MAX` per trial);
/// `features`: `n_bars x (input - 3)`; `obs`: `n_trials x batch x input`; [`gather_rows`]'s launch.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_gather(
    ppo: *const PpoParams,
    ring: *const Transition,
    features: *const f32,
    obs: *mut f32,
    args: PpoArgs,
) {
    crate::nvptx_ops::follow_previous();
    let (b, d) = (args.batch as usize, args.input as usize);
    let n = args.steps as usize * args.envs_per_trial as usize;
    // SAFETY: lengths as documented; each element is written by one thread of one block.
    unsafe {
        let ring_of = |i: usize| slice::from_raw_parts(ring.add(i / b * n), n);
        let features = slice::from_raw_parts(features, args.n_bars as usize * (d - 3));
        gather_rows(
            args.n_trials as usize * b,
            d,
            |i| {
                let ring = ring_of(i);
                minibatch_slot(&args, &*ppo.add(i / b), i % b, ring).map(|s| (s, ring[s].bar))
            },
            |i, slot, bar, c| gather_column(features, d - 3, bar, |k| ring_of(i)[slot].state[k], c),
            |e, v| *obs.add(e) = v,
        );
    }
}

/// The body of a row-gathering kernel, [`GATHER_ROWS`] rows per block of 256 threads with `2 x GATHER_ROWS`
/// u32 of dynamic shared memory. The block's first threads find their row's ring slot and its bar
/// (`find(row)`, once per row: a random draw or a shuffle, which one thread per element would repeat `width`
/// times); then each thread computes the values of up to [`GATHER_AHEAD`] elements `(row, column)` of the
/// block's rows, 256 apart (`value(row, slot, bar, column)`, whose loads depend only on shared memory, so
/// they are in flight together), before it stores them (`put(row x width + column, value)`); a row without
/// a slot gets zeros.
///
/// # Safety
/// Blocks of 256 threads and `8 x GATHER_ROWS` bytes of dynamic shared memory; every thread of the block
/// calls it (it holds a barrier); slots below `u32::MAX`.
#[inline(always)]
unsafe fn gather_rows<T: Copy + Default>(
    rows: usize,
    width: usize,
    find: impl Fn(usize) -> Option<(usize, u32)>,
    value: impl Fn(usize, usize, u32, usize) -> T,
    put: impl Fn(usize, T),
) {
    let slots = dyn_smem() as *mut u32;
    // SAFETY: reading the special registers has no side effects.
    let (block, thread) = unsafe { (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize) };
    let first = block * GATHER_ROWS;
    // SAFETY: thread `r < GATHER_ROWS` alone writes slot and bar `r` before the barrier; all read them after.
    unsafe {
        let bars = slots.add(GATHER_ROWS);
        if thread < GATHER_ROWS && first + thread < rows {
            let (slot, bar) = find(first + thread).map_or((u32::MAX, 0), |(s, b)| (s as u32, b));
            *slots.add(thread) = slot;
            *bars.add(thread) = bar;
        }
        barrier_sync_count(0, 256);
        // Elements of the block's rows (fewer than 2^32: GATHER_ROWS rows of a u32 width).
        let (n, w) = ((rows.min(first + GATHER_ROWS).saturating_sub(first) * width) as u32, width as u32);
        let mut e0 = thread as u32;
        while e0 < n {
            const _: () = assert!(GATHER_AHEAD == 8, "the unrolled loops below are written for 8 elements");
            let mut vals = [T::default(); GATHER_AHEAD];
            unrolled!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let e = e0 + 256 * j as u32;
                let (r, c) = ((e / w) as usize, (e % w) as usize);
                let slot = if e < n { *slots.add(r) } else { u32::MAX };
                if slot != u32::MAX {
                    vals[j] = value(first + r, slot as usize, *bars.add(r), c);
                }
            });
            unrolled!(j in [0, 1, 2, 3, 4, 5, 6, 7] {
                let e = e0 + 256 * j as u32;
                if e < n {
                    put(first * width + e as usize, vals[j]);
                }
            });
            e0 += 256 * GATHER_AHEAD as u32;
        }
    }
}

/// Loss and output gradient of every minibatch sample, from the forward outputs in `work`'s region `Q` into
/// its region `DOUT`, then (with `hidden != 0`) the hidden gradient of layer 2 of the same samples: blocks as
/// in [`dqn_td`], of [`PPO_LOSS_ROWS`] samples. Without it the products after the loss compute `D2` from the
/// output gradient (`mlp_rows`' `from_out`, which stores it for `mlp_gradients`).
///
/// # Safety
/// `ppo`: `n_trials`; `ring`, `logps`, `values`, `advantages`, `returns`: `n_trials x steps x E`; `work`:
/// `n_trials x Work::per_trial`; `weights`: `n_trials x params`; `losses`: `n_trials x batch`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "the rollout's buffers")]
pub unsafe extern "ptx-kernel" fn ppo_loss(
    ppo: *const PpoParams,
    ring: *const Transition,
    logps: *const f32,
    values: *const f32,
    advantages: *const f32,
    returns: *const f32,
    work: *mut f32,
    weights: *const f32,
    losses: *mut f32,
    args: PpoArgs,
    hidden: u32,
) {
    crate::nvptx_ops::follow_previous();
    // SAFETY: reads of special registers.
    let (tile, t, tid) =
        unsafe { (nvptx::_block_idx_x() as usize, nvptx::_block_idx_y() as usize, nvptx::_thread_idx_x() as usize) };
    let (b, j0) = (args.batch as usize, tile * PPO_LOSS_ROWS);
    if t >= args.n_trials as usize || j0 >= b {
        return; // uniform over the block
    }
    let n = args.steps as usize * args.envs_per_trial as usize;
    let net = args.net();
    let w = Work::of(&net);
    // SAFETY: lengths as documented; thread `tid < PPO_LOSS_ROWS` alone writes sample `j0 + tid`'s output gradient
    // and loss; the barrier orders them before the product reads them.
    unsafe {
        let p = &*ppo.add(t);
        let j = j0 + tid;
        if tid < PPO_LOSS_ROWS && j < b {
            let row = |r: usize| w.at(r, t) + j * ACTOR_CRITIC;
            let at = |p: *const f32| slice::from_raw_parts(p.add(t * n), n);
            let ring = slice::from_raw_parts(ring.add(t * n), n);
            let out = slice::from_raw_parts(work.add(row(Work::Q)), ACTOR_CRITIC);
            let dout = slice::from_raw_parts_mut(work.add(row(Work::DOUT)), ACTOR_CRITIC);
            let (logps, values, advantages, returns) = (at(logps), at(values), at(advantages), at(returns));
            // A trial that sits the update out keeps the losses of its last one.
            if let Some(loss) = sample_loss(&args, p, j, ring, logps, values, advantages, returns, out, dout) {
                *losses.add(t * b + j) = loss;
            }
        }
        if hidden == 0 {
            return; // uniform: the products after the loss compute D2 where they read it
        }
        nvptx::_syncthreads();
        let g = hidden_gradient(&net, t, &p.net(), true);
        short_rows(&g, [work, weights, work, work], work, j0, PPO_LOSS_ROWS, tid);
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

/// The lanes of every trial's gradient-norm sum ([`norm_lane`]'s bits): a block of [`NORM_THREADS`] per
/// trial stages the trial's active gradients [`NORM_WINDOW`] at a time in shared memory (16 loads a thread
/// in flight at once), and its first [`NORM_LANES`] threads fold their lanes over each window in turn
/// ([`norm_window`]). (A thread per lane loading its own terms, 8 at a time, waited ~47 global round trips:
/// 77 us a launch on the H200.)
///
/// # Safety
/// `ppo`: `n_trials`; `grads`: `n_trials x params`; `lanes`: `n_trials x NORM_LANES`; blocks of
/// `NORM_THREADS` threads, block `(0, t)` for trial `t`, with `4 x NORM_WINDOW` bytes of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ppo_norm(ppo: *const PpoParams, grads: *const f32, lanes: *mut f32, args: PpoArgs) {
    crate::nvptx_ops::follow_previous();
    const PER_THREAD: usize = NORM_WINDOW / NORM_THREADS as usize;
    // SAFETY: reads of special registers.
    let (t, thread) = unsafe { (nvptx::_block_idx_y() as usize, nvptx::_thread_idx_x() as usize) };
    if t >= args.n_trials as usize {
        return; // uniform over the block
    }
    let l = args.layout();
    // SAFETY: lengths as documented; thread `j` alone writes window elements `j + NORM_THREADS i`, the
    // barriers order them before the lanes' reads and those before the next window's writes; thread `lane`
    // alone writes lane `lane` of trial `t`.
    unsafe {
        let h = (*ppo.add(t)).hidden as usize;
        let n = crate::ppo::active_params(&l, h);
        let g = grads.add(t * l.params());
        let window = dyn_smem();
        let mut acc = 0.0f32;
        let mut w0 = 0;
        while w0 < n {
            let len = (n - w0).min(NORM_WINDOW);
            let at = |i: usize| thread + NORM_THREADS as usize * i;
            const _: () = assert!(PER_THREAD == 16, "the unrolled loops below are written for 16 loads");
            let mut vals = [0.0f32; PER_THREAD];
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if at(i) < len {
                    vals[i] = *g.add(crate::ppo::active_param(&l, h, w0 + at(i)));
                }
            });
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                if at(i) < len {
                    *window.add(at(i)) = vals[i];
                }
            });
            nvptx::_syncthreads();
            if thread < NORM_LANES {
                acc = norm_window(thread, slice::from_raw_parts(window, len), acc);
            }
            nvptx::_syncthreads();
            w0 += NORM_WINDOW;
        }
        if thread < NORM_LANES {
            *lanes.add(t * NORM_LANES + thread) = acc;
        }
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
    // SAFETY: lengths as documented; this thread alone writes its env's slots.
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

/// `iters` rounds of 8 independent FMA chains per thread, the sum written to `out[thread]` (the FP32
/// throughput reference of the benchmarks: 16 FLOP per thread and round).
///
/// # Safety
/// `out`: one float per launched thread.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn fma_peak(out: *mut f32, iters: u32) {
    crate::nvptx_ops::follow_previous();
    let i = thread_index();
    let mut acc = [0.0f32; 8];
    let (a, b) = (1.0f32 + i as f32 * 1e-9, 0.999_f32);
    for _ in 0..iters {
        for (j, x) in acc.iter_mut().enumerate() {
            *x = crate::tile::fma(*x, b, a + j as f32);
        }
    }
    // SAFETY: one output per thread, as documented.
    unsafe { *out.add(i) = acc.iter().sum() };
}

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
