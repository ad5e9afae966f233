//! The greedy evaluation walks (nvptx only): a block per trial steps its env bar by bar with the network in
//! the block ([`greedy_walk`]; [`regs::greedy_walk_regs`] with the wide layers in registers). They are
//! kernels themselves (no shim in `entries`): each is a whole block's program, not one thread's element.

use crate::batch::observe_floats;
use crate::env::walk_step_on_series;
use crate::mlp::{ACTIONS, argmax};
use crate::net::{
    NetArgs, NetTrial, WALK_LAYER_THREADS, WALK_THREADS, WalkShared, dense_unit, walk_layers, walk_stage,
    walk_stage_len,
};
use crate::nvptx_ops::{barrier_sync_count, dyn_smem, prefetch};
use crate::types::{Bar, EnvState, TrialParams};
use core::arch::nvptx;
use core::slice;

mod regs;

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
            walk_step_on_series(params, &mut state, action, bars);
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

/// What both walks' blocks share: the trial this block walks (block `t`, thread `tid`), its env parameters,
/// the bars and market features (`f` a bar), its network's layout, hidden width and weights.
#[derive(Clone, Copy)]
struct WalkTrial<'a> {
    t: usize,
    tid: usize,
    l: crate::mlp::Layout,
    params: &'a TrialParams,
    hidden: usize,
    f: usize,
    bars: &'a [Bar],
    features: &'a [f32],
    w: *const f32,
}

impl<'a> WalkTrial<'a> {
    /// This block's trial (none past the last trial: the block has nothing to do).
    ///
    /// # Safety
    /// The walk kernels' pointer contract ([`greedy_walk`]).
    #[inline(always)]
    unsafe fn of(
        args: &NetArgs,
        env_params: *const TrialParams,
        (bars, features): (*const Bar, *const f32),
        trials: *const NetTrial,
        weights: *const f32,
    ) -> Option<Self> {
        // SAFETY: the caller's contract: `t < n_trials` indexes the trials' arrays, the bars and features are
        // `n_bars` long.
        unsafe {
            let (t, tid) = (nvptx::_block_idx_x() as usize, nvptx::_thread_idx_x() as usize);
            if t >= args.n_trials as usize {
                return None;
            }
            let l = args.layout();
            let (f, n_bars) = (l.input - 3, args.n_bars as usize);
            Some(Self {
                t,
                tid,
                l,
                params: &*env_params.add(t),
                hidden: (*trials.add(t)).hidden as usize,
                f,
                bars: slice::from_raw_parts(bars, n_bars),
                features: slice::from_raw_parts(features, n_bars * f),
                w: weights.add(t * l.params()),
            })
        }
    }

    /// Thread `by` prefetches the lines of the bars after bar `bar + 1` (the next step's env step reads them).
    #[inline(always)]
    fn prefetch_bars(&self, bar: usize, by: usize) {
        if self.tid == by && bar + 2 < self.bars.len() {
            // SAFETY: a prefetch does not fault; the addresses are inside `bars` or its last byte before.
            unsafe {
                prefetch(self.bars.as_ptr().add(bar + 2));
                prefetch((self.bars.as_ptr().add(bar + 3) as *const u8).wrapping_sub(1));
            }
        }
    }

    /// The walk's `steps` steps over the block's candidates: thread [`WALK_LAYER_THREADS`] starts from the
    /// trial's state; each step `work(step, a_prev)` runs this thread's part of the network (false: none),
    /// the first lane of each env warp of a thread without one steps its action's candidate, `barrier` ends
    /// the step (every thread) and the argmax's action is recorded; the chosen state is stored at the end.
    ///
    /// # Safety
    /// `states`: the trials' states, `actions`: `n_trials x steps`; every thread of the block calls this,
    /// `barrier` is a block-wide barrier and `work` takes only barriers among the threads for which it runs.
    #[inline(always)]
    unsafe fn run(
        &self,
        cands: &WalkCandidates,
        (states, actions, steps): (*mut EnvState, *mut u8, usize),
        barrier: impl Fn(),
        mut work: impl FnMut(usize, usize) -> bool,
    ) {
        const ENV: usize = WALK_LAYER_THREADS;
        let tid = self.tid;
        // SAFETY: the caller's contract; the candidates' writes and reads are ordered by `barrier`.
        unsafe {
            if tid == ENV {
                cands.start(self.params, *states.add(self.t), self.bars);
            }
            barrier();
            let env_lane = (ENV..WALK_THREADS).contains(&tid) && (tid - ENV).is_multiple_of(32);
            let my_action = (tid.saturating_sub(ENV) / 32) as u8;
            for step in 0..steps {
                let a_prev = cands.chosen(step);
                if !work(step, a_prev) && env_lane {
                    cands.step(self.params, self.bars, step, a_prev, my_action);
                }
                barrier();
                if tid == ENV {
                    *actions.add(self.t * steps + step) = cands.chosen(step + 1) as u8;
                }
            }
            if tid == ENV {
                *states.add(self.t) = cands.last(steps);
            }
        }
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
        let Some(trial) = WalkTrial::of(&args, env_params, (bars, features), trials, weights) else { return };
        let WalkTrial { tid, l, hidden: h, f, bars, features, w, .. } = trial;
        let o = l.outputs;
        let smem = dyn_smem();
        let ws = WalkShared::of(&args);
        let cands = WalkCandidates::of(smem, &ws, o);
        let (q, obs, h1, h2) = (smem.add(ws.q), smem.add(ws.obs), smem.add(ws.h1), smem.add(ws.h2));
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
        let io = (states, actions, steps as usize);
        trial.run(&cands, io, walk_barrier, |step, a_prev| {
            if tid >= WALK_LAYER_THREADS {
                return false;
            }
            // The observation of the chosen state: features of its bar, then its portfolio floats.
            let (state, pf) = cands.previous(step, a_prev);
            let bar = (*state).bar as usize;
            let mut c = tid;
            while c < f {
                *obs.add(c) = features[bar * f + c];
                if bar + 1 < bars.len() {
                    prefetch(features.as_ptr().add((bar + 1) * f + c));
                }
                c += WALK_LAYER_THREADS;
            }
            if tid < 3 {
                *obs.add(f + tid) = pf[tid];
            }
            trial.prefetch_bars(bar, WALK_LAYER_THREADS - 1);
            layer_barrier();
            let mut n = tid;
            while n < h {
                *h1.add(n) = dense_unit(&layers[0], *w.add(l.b1() + n), Some(l.activation), n, obs);
                n += WALK_LAYER_THREADS;
            }
            layer_barrier();
            let mut n = tid;
            while n < h {
                *h2.add(n) = dense_unit(&layers[1], *w.add(l.b2() + n), Some(l.activation), n, h1);
                n += WALK_LAYER_THREADS;
            }
            layer_barrier();
            if tid < o {
                *q.add(step % 2 * o + tid) = dense_unit(&layers[2], *w.add(l.b3() + tid), None, tid, h2);
            }
            true
        });
    }
}
