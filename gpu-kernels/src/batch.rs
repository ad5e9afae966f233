//! Per-thread bodies of the batch kernels, shared by the PTX entries and the CPU backend: the same function
//! computes the same element on both, in the same order.

use crate::env::{env_step_on_series, portfolio_floats, ring_slot, transition, write_observation};
use crate::reward::{MOMENT_CHUNK, merge, normalize, push};
use crate::rng::draw_u64;
use crate::types::{Bar, EnvState, Moments, Transition, TrialParams};

/// Scalar arguments of the batch kernels (passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BatchArgs {
    /// Transitions written per trial before this launch (ring head).
    pub head: u64,
    /// Bars in the price block.
    pub n_bars: u32,
    /// Trials in the launch.
    pub n_trials: u32,
    /// Envs per trial (E).
    pub envs_per_trial: u32,
    /// Steps this launch covers.
    pub steps: u32,
    /// Ring capacity per trial in transitions (0: no transitions are written).
    pub capacity: u32,
    /// Features per bar (F).
    pub n_features: u32,
}

const _: () = assert!(core::mem::size_of::<BatchArgs>() == 32);

impl BatchArgs {
    /// Envs in the launch.
    pub fn n_envs(&self) -> usize {
        self.n_trials as usize * self.envs_per_trial as usize
    }

    /// Chunks of [`MOMENT_CHUNK`] envs per trial.
    pub fn n_chunks(&self) -> usize {
        (self.envs_per_trial as usize).div_ceil(MOMENT_CHUNK)
    }

    /// The ring head of a trial whose replay clock starts at `ring_origin` ([`TrialParams::ring_origin`]):
    /// the batch's head less the transitions written before the trial began, so the trial's transitions
    /// land where they would alone (not reduced modulo the capacity; [`ring_slot`] reduces it).
    pub fn trial_head(&self, ring_origin: u64) -> u64 {
        let capacity = u64::from(self.capacity.max(1));
        self.head + (capacity - ring_origin % capacity) % capacity
    }

    /// Global ring index of env `env` (trial-major numbering) at step `step` of this launch, for a trial
    /// whose replay clock starts at `ring_origin`.
    pub fn ring_index(&self, env: usize, step: usize, ring_origin: u64) -> usize {
        let ept = self.envs_per_trial as usize;
        let (trial, e) = (env / ept, env % ept);
        let head = self.trial_head(ring_origin);
        let slot = ring_slot(head, step as u64, ept as u64, e as u64, u64::from(self.capacity));
        trial * self.capacity as usize + slot as usize
    }
}

/// Walks env `env` over `args.steps` bars with `actions[step * n_envs + env]`, handing each transition and
/// its ring index to `write` (not called when the ring capacity is 0).
#[inline]
pub fn scan_env(
    env: usize,
    args: &BatchArgs,
    params: &TrialParams,
    state: &mut EnvState,
    actions: &[u8],
    bars: &[Bar],
    mut write: impl FnMut(usize, Transition),
) {
    let n_envs = args.n_envs();
    for step in 0..args.steps as usize {
        let action = actions[step * n_envs + env];
        let bar = state.bar;
        let outcome = env_step_on_series(params, state, action, bars);
        if args.capacity > 0 {
            write(args.ring_index(env, step, params.ring_origin), transition(bar, action, &outcome));
        }
    }
}

/// Moments of the valid raw rewards of chunk `chunk` (envs `chunk * 64 ..`) of trial `trial` (replay clock
/// from `ring_origin`) at `step`, accumulated in env order.
#[inline]
pub fn chunk_moments(
    args: &BatchArgs,
    ring: &[Transition],
    (trial, ring_origin): (usize, u64),
    step: usize,
    chunk: usize,
) -> Moments {
    let ept = args.envs_per_trial as usize;
    let mut m = Moments::default();
    let first = chunk * MOMENT_CHUNK;
    let last = if first + MOMENT_CHUNK < ept { first + MOMENT_CHUNK } else { ept };
    for e in first..last {
        let t = &ring[args.ring_index(trial * ept + e, step, ring_origin)];
        if t.valid != 0 {
            push(&mut m, f64::from(t.reward));
        }
    }
    m
}

/// Merges trial `trial`'s chunk moments step by step into its running moments, in chunk order, and records
/// the running moments after each step in `after_step[step]`.
#[inline]
pub fn merge_trial_moments(
    args: &BatchArgs,
    chunks: &[Moments],
    trial: usize,
    running: &mut Moments,
    mut after_step: impl FnMut(usize, Moments),
) {
    let n_chunks = args.n_chunks();
    for step in 0..args.steps as usize {
        let base = (trial * args.steps as usize + step) * n_chunks;
        let mut batch = Moments::default();
        for chunk in &chunks[base..base + n_chunks] {
            merge(&mut batch, chunk);
        }
        merge(running, &batch);
        after_step(step, *running);
    }
}

/// Index of (trial, step, chunk) in the chunk-moments buffer.
#[inline]
pub fn chunk_index(args: &BatchArgs, trial: usize, step: usize, chunk: usize) -> usize {
    (trial * args.steps as usize + step) * args.n_chunks() + chunk
}

/// Normalizes a transition's reward in place when its trial asks for it and the transition is valid, given
/// the running moments after its step.
#[inline]
pub fn normalize_transition(params: &TrialParams, t: &mut Transition, moments: &Moments) {
    if params.normalize_reward != 0 && t.valid != 0 {
        t.reward = normalize(f64::from(t.reward), moments) as f32;
    }
}

/// RNG stream of the replay sampler.
const SAMPLE_STREAM: u64 = 0x5a3_0000;

/// Uniform draws per sample before a sample is dropped ([`draw_valid`]).
pub const MAX_DRAWS: u64 = 64;

/// A slot among the first `n` of `ring`, uniform over the valid ones, by rejection: up to [`MAX_DRAWS`]
/// uniform draws (counters `counter x MAX_DRAWS + attempt` of `stream`), the first valid one wins. `None`
/// when every draw lands on an invalid slot (likely only when fewer than ~1 in 15 slots is valid): the sample
/// is dropped rather than moved to a neighbour, so the kept samples stay exactly uniform.
#[inline]
pub fn draw_valid(ring: &[Transition], n: usize, seed: u64, stream: u64, counter: u64) -> Option<usize> {
    if n == 0 {
        return None;
    }
    (0..MAX_DRAWS).find_map(|attempt| {
        let x = draw_u64(seed, stream, counter.wrapping_mul(MAX_DRAWS).wrapping_add(attempt)) >> 32;
        let slot = ((x * n as u64) >> 32) as usize;
        (ring[slot].valid != 0).then_some(slot)
    })
}

/// Ring slot (within the trial keyed `key`) of sample `draw`: uniform over the valid transitions among the `count`
/// written ([`draw_valid`]); `None` (a zero-weight sample) when none was found.
#[inline]
pub fn sample_slot(ring: &[Transition], count: u32, seed: u64, key: u64, draw: u64) -> Option<usize> {
    draw_valid(ring, count as usize, seed, crate::rng::keyed(SAMPLE_STREAM, key), draw)
}

/// The scalar outputs of one sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleRow {
    /// Action code.
    pub action: u32,
    /// Reward.
    pub reward: f32,
    /// 1.0 when the next state is terminal.
    pub done: f32,
    /// 1.0 for a real sample, 0.0 when the trial's ring held no valid transition (outputs zeroed).
    pub weight: f32,
}

/// Sample `i` (trial-major over `n_trials x batch`): draws a valid transition from its trial's `ring`,
/// writes the rebuilt `obs` and `next_obs` (F + 3 floats each: features of bars t and t+1, then the
/// portfolio floats) and returns the scalars.
#[inline]
pub fn sample_one(
    args: &SampleArgs,
    p: &TrialParams,
    ring: &[Transition],
    features: &[f32],
    i: usize,
    obs: &mut [f32],
    next_obs: &mut [f32],
) -> SampleRow {
    let slot = sample_of(args, p, ring, i);
    for c in 0..args.n_features as usize + 3 {
        (obs[c], next_obs[c]) = sample_entry(args, ring, features, slot, c);
    }
    sample_row(ring, slot)
}

/// The ring slot of sample `i` (trial-major) of the trial with parameters `p`, `None` where the trial's ring
/// holds no valid transition. The trial's own clocks decide: its key ([`TrialParams::key`]), the transitions
/// it wrote ([`TrialParams::ring_origin`]) and its draws so far ([`TrialParams::draw_origin`]), so a trial
/// started in a freed slot samples what it would alone.
#[inline]
pub fn sample_of(args: &SampleArgs, p: &TrialParams, ring: &[Transition], i: usize) -> Option<usize> {
    let j = (i % args.batch as usize) as u64;
    let count = args.written.wrapping_sub(p.ring_origin).min(u64::from(args.capacity)) as u32;
    let draw = args.draw.wrapping_sub(p.draw_origin);
    sample_slot(ring, count, args.seed, p.key, draw.wrapping_mul(1 << 20).wrapping_add(j))
}

/// Column `c` of the rebuilt observation and next observation of the transition in `slot` (features of
/// bars t and t+1, then the portfolio floats); zeros without a slot.
#[inline]
pub fn sample_entry(
    args: &SampleArgs,
    ring: &[Transition],
    features: &[f32],
    slot: Option<usize>,
    c: usize,
) -> (f32, f32) {
    let Some(slot) = slot else { return (0.0, 0.0) };
    let t = &ring[slot];
    let f = args.n_features as usize;
    if c < f {
        (features[t.bar as usize * f + c], features[(t.bar as usize + 1) * f + c])
    } else {
        (t.state[c - f], t.next_state[c - f])
    }
}

/// The scalars of the transition in `slot` (a zero-weight terminal row without one).
#[inline]
pub fn sample_row(ring: &[Transition], slot: Option<usize>) -> SampleRow {
    let Some(slot) = slot else { return SampleRow { action: 0, reward: 0.0, done: 1.0, weight: 0.0 } };
    let t = &ring[slot];
    // Only a terminal s' stops the bootstrap; a truncated one (the segment's end) bootstraps from Q(s').
    let terminal = if t.done == crate::types::TERMINATED { 1.0 } else { 0.0 };
    SampleRow { action: u32::from(t.action), reward: t.reward, done: terminal, weight: 1.0 }
}

/// Writes env `state`'s observation: bar `state.bar`'s features and its portfolio floats.
#[inline]
pub fn observe_env(
    params: &TrialParams,
    state: &EnvState,
    bars: &[Bar],
    features: &[f32],
    n_features: usize,
    out: &mut [f32],
) {
    let t = state.bar as usize;
    let close = bars.get(t).map_or(0.0, |b| b.close);
    let row = &features[t * n_features..(t + 1) * n_features];
    write_observation(params, state, row, close, out);
}

/// Column `c` of [`observe_env`]'s observation (the same values, one at a time: a thread per column).
#[inline]
pub fn observe_entry(
    params: &TrialParams,
    state: &EnvState,
    bars: &[Bar],
    features: &[f32],
    n_features: usize,
    c: usize,
) -> f32 {
    observe_column(features, n_features, state.bar as usize, |k| observe_floats(params, state, bars)[k], c)
}

/// Column `c` of the observation at bar `bar` whose portfolio floats are `floats(k)`: bar `bar`'s feature
/// `c` for `c < n_features`, else `floats(c - n_features)` ([`observe_entry`]; the fused acting kernels
/// call it with the floats they computed once per env).
#[inline(always)]
pub fn observe_column(
    features: &[f32],
    n_features: usize,
    bar: usize,
    floats: impl FnOnce(usize) -> f32,
    c: usize,
) -> f32 {
    if c < n_features { features[bar * n_features + c] } else { floats(c - n_features) }
}

/// The portfolio floats of [`observe_env`]'s observation (its last 3 columns).
#[inline]
pub fn observe_floats(params: &TrialParams, state: &EnvState, bars: &[Bar]) -> [f32; 3] {
    portfolio_floats(params, state, bars.get(state.bar as usize).map_or(0.0, |b| b.close))
}

/// Scalar arguments of the replay sampler.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SampleArgs {
    /// Seed of the draws.
    pub seed: u64,
    /// Minibatch number: sample j of a trial draws with counter `(draw - draw_origin) x 2^20 + j` (the same
    /// for a trial whatever the other trials' batches, and wherever it started; [`sample_of`]).
    pub draw: u64,
    /// Transitions written per trial since the batch began (each trial counts from its
    /// [`TrialParams::ring_origin`]; capped at the capacity).
    pub written: u64,
    /// Samples per trial.
    pub batch: u32,
    /// Trials.
    pub n_trials: u32,
    /// Ring capacity per trial.
    pub capacity: u32,
    /// Features per bar.
    pub n_features: u32,
    /// Index in the env batch of the launch's first trial (a launch per trial group). The draws no longer
    /// depend on it: each trial's stream is keyed by its `TrialParams::key`.
    pub trial_offset: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<SampleArgs>() == 48);
