//! The bodies of the kernels around the fused chains (nvptx only): a chain's block ([`chain_block`]) and the
//! acting ends ([`act_block`]): each env's observation built in shared memory, the layers, each env's choice
//! (DQN's or PPO's) and, where asked, its env step, in one launch. The shims in `entries::dqn` and
//! `entries::ppo` call them.

use crate::batch::{BatchArgs, observe_column, observe_floats, scan_env};
use crate::dqn::{DqnArgs, DqnParams, choose};
use crate::net::NetArgs;
use crate::nvptx_ops::dyn_smem;
use crate::ppo::{PpoArgs, PpoParams, act_env};
use crate::types::{Bar, EnvState, Transition, TrialParams};
use core::arch::nvptx;
use core::slice;

/// The chain and row tile of this block's index through [`crate::chain::gpu_chain`] (`R` rows a warp, `W`
/// warps, operands a step ahead or not), with the ends `ends` makes for the chain.
///
/// # Safety
/// As [`crate::chain::gpu_chain`] for the chain `chains[block_idx_y]` and tile `block_idx_x`.
#[inline(always)]
pub(crate) unsafe fn chain_block<const R: usize, const W: usize, const AHEAD: bool, E: crate::chain::ChainEnds>(
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
pub(crate) struct Observe {
    pub(crate) params: *const TrialParams,
    /// Read here, written by the fused env step ([`EnvStep`]).
    pub(crate) states: *mut EnvState,
    pub(crate) bars: *const Bar,
    pub(crate) features: *const f32,
    pub(crate) env: BatchArgs,
    pub(crate) trial: usize,
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
    /// would wait a global round trip per row); the portfolio floats are computed once per row, not per element
    /// (a state read and a divergent f64 branch each).
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
pub(crate) trait Choice {
    /// Chooses env `env`'s action (trial `trial`) from its outputs `out` and writes what the kernel writes.
    ///
    /// # Safety
    /// The kernel's contract; one thread per env.
    unsafe fn choose(&self, env: usize, trial: usize, out: &[f32]);
}

/// Acting around the layers: observations in ([`Observe`]), each env's choice out, then (where asked) its
/// env's step on the action chosen ([`EnvStep`]).
pub(crate) struct Act<C> {
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
pub(crate) struct EnvStep {
    pub(crate) ring: *mut Transition,
    pub(crate) actions: *const u8,
    pub(crate) on: bool,
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
pub(crate) struct DqnChoice {
    pub(crate) dqn: *const DqnParams,
    pub(crate) actions: *mut u8,
    pub(crate) args: DqnArgs,
}

impl Choice for DqnChoice {
    unsafe fn choose(&self, env: usize, trial: usize, q: &[f32]) {
        // SAFETY: `dqn_act`'s contract; this thread alone writes its env's action.
        unsafe { *self.actions.add(env) = choose(env, &self.args, &*self.dqn.add(trial), q) }
    }
}

/// PPO's choice: the sampled action, its log-probability and the value ([`act_env`]).
pub(crate) struct PpoChoice {
    pub(crate) ppo: *const PpoParams,
    pub(crate) actions: *mut u8,
    pub(crate) logps: *mut f32,
    pub(crate) values: *mut f32,
    pub(crate) rollout_step: u32,
    pub(crate) args: PpoArgs,
}

impl Choice for PpoChoice {
    unsafe fn choose(&self, env: usize, trial: usize, out: &[f32]) {
        // SAFETY: `ppo_act`'s contract; this thread alone writes its env's outputs.
        unsafe {
            let a = act_env(env, &self.args, &*self.ppo.add(trial), out, self.rollout_step);
            write_act(a, env, self.actions, self.logps, self.values);
        }
    }
}

/// One env's PPO acting outputs ([`ppo_select`], [`ppo_act`]).
///
/// # Safety
/// The ranges of `ppo_select`'s contract; the caller alone writes this env's outputs.
#[inline(always)]
pub(crate) unsafe fn write_act(
    a: crate::ppo::ActOutput,
    env: usize,
    actions: *mut u8,
    logps: *mut f32,
    values: *mut f32,
) {
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
pub(crate) unsafe fn act_block<C: Choice>(
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
