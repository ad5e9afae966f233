//! The vector env (Gymnasium's vector API, same-step autoreset): per-env bodies of its reset, its
//! action check and its step, shared by the PTX entries and the CPU backend (the same bits on both).
//!
//! An env's episodes are `episode_len` bars from start bars drawn per env from the seed
//! ([`segment`]); a step takes the env's action, writes its reward and done flags and its observation, and an
//! env whose episode ended keeps that observation as its final one and its equity, and starts its next
//! episode in the same step (its observation is then the new episode's first).

use crate::batch::observe_env;
use crate::env::{env_step_on_series, transition};
use crate::rng::draw_below;
use crate::types::{Bar, EnvState, TERMINATED, TRUNCATED, TrialParams};

/// The random stream of the episodes' start bars ("vector").
pub const EPISODE_STREAM: u64 = 0x7665_6374_6f72;

/// No invalid action was found (the check's status word before and after a good step).
pub const ACTIONS_OK: u32 = u32::MAX;

/// Scalar arguments of the vector env's kernels (passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct VectorArgs {
    /// Seed of the start-bar draws.
    pub seed: u64,
    /// Bars in the price block.
    pub n_bars: u32,
    /// Envs (trials x envs per trial).
    pub n_envs: u32,
    /// Envs per trial (env `i` is trial `i / envs_per_trial`'s).
    pub envs_per_trial: u32,
    /// Features per bar (F; an observation is F + 3 floats).
    pub n_features: u32,
    /// Bars per episode.
    pub episode_len: u32,
    /// Element type of the actions ([`ActionKind::code`]).
    pub action_kind: u32,
}

const _: () = assert!(core::mem::size_of::<VectorArgs>() == 32);

/// The integer element type of an action array: its width in bytes (1, 2, 4 or 8) and signedness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionKind {
    /// Bytes per element.
    pub bytes: u32,
    /// Two's complement signed or unsigned.
    pub signed: bool,
}

impl ActionKind {
    /// `u8` codes.
    pub const U8: Self = Self { bytes: 1, signed: false };

    /// The element type of `bits` bits (8, 16, 32 or 64), or `None`.
    pub fn of_bits(bits: u32, signed: bool) -> Option<Self> {
        matches!(bits, 8 | 16 | 32 | 64).then_some(Self { bytes: bits / 8, signed })
    }

    /// As a kernel argument.
    pub fn code(self) -> u32 {
        self.bytes | (u32::from(self.signed) << 8)
    }

    /// From a kernel argument.
    pub fn from_code(code: u32) -> Self {
        Self { bytes: code & 0xff, signed: code >> 8 != 0 }
    }
}

/// Action `i` of `raw` (elements of `kind`) as an action code, or `None` when it is not 0, 1 or 2.
///
/// # Safety
/// `raw` holds at least `i + 1` aligned elements of `kind`.
#[inline]
pub unsafe fn action_at(raw: *const u8, kind: ActionKind, i: usize) -> Option<u8> {
    // SAFETY: as the caller guarantees. Signed values are sign-extended, so negatives come out >= 2^63.
    let value: u64 = unsafe {
        match (kind.bytes, kind.signed) {
            (1, false) => u64::from(*raw.add(i)),
            (1, true) => i64::from(*raw.cast::<i8>().add(i)) as u64,
            (2, false) => u64::from(*raw.cast::<u16>().add(i)),
            (2, true) => i64::from(*raw.cast::<i16>().add(i)) as u64,
            (4, false) => u64::from(*raw.cast::<u32>().add(i)),
            (4, true) => i64::from(*raw.cast::<i32>().add(i)) as u64,
            (8, _) => *raw.cast::<u64>().add(i),
            _ => u64::MAX,
        }
    };
    (value < 3).then_some(value as u8)
}

/// Episode `episode`'s bars `(start, end)` of env `env`: a start drawn uniformly from the bars that leave
/// `episode_len` bars after it.
#[inline]
pub fn segment(args: &VectorArgs, env: usize, episode: u64) -> (u32, u32) {
    let last_start = args.n_bars - 1 - args.episode_len;
    let start = draw_below(args.seed, EPISODE_STREAM ^ env as u64, episode, last_start + 1);
    (start, start + args.episode_len)
}

/// One env's outputs of a step or reset.
#[derive(Debug)]
pub struct VectorRow<'a> {
    /// The observation (F + 3 floats).
    pub obs: &'a mut [f32],
    /// The ended episode's last observation (written when it ended).
    pub final_obs: &'a mut [f32],
    /// The step's reward (0 for a step that did not happen).
    pub reward: &'a mut f32,
    /// The episode ended by the circuit breaker or ruin.
    pub terminated: &'a mut bool,
    /// The episode reached its last bar.
    pub truncated: &'a mut bool,
    /// The episode ended (`final_obs` holds its last observation).
    pub final_mask: &'a mut bool,
    /// The stepped episode's equity after the step: for an episode that ended, the equity it ended with
    /// (the next episode starts at its trial's capital; the host writes that for its readers); after a
    /// reset, the capital.
    pub equity: &'a mut f64,
}

/// What one env reads: its trial's parameters and the market.
#[derive(Clone, Copy, Debug)]
pub struct VectorMarket<'a> {
    /// Bars.
    pub bars: &'a [Bar],
    /// Features (`n_bars x n_features`).
    pub features: &'a [f32],
}

/// Starts env `env`'s next episode (the `episodes`-th) and writes its first observation.
#[inline]
fn start_episode(
    args: &VectorArgs,
    env: usize,
    params: &TrialParams,
    state: &mut EnvState,
    episodes: &mut u64,
    market: VectorMarket<'_>,
    obs: &mut [f32],
) {
    let (start, end) = segment(args, env, *episodes);
    *episodes += 1;
    *state = EnvState::new(params, start, end);
    observe_env(params, state, market.bars, market.features, args.n_features as usize, obs);
}

/// A new episode for env `env`: zero reward, no flags, its first observation and capital.
#[inline]
pub fn reset_env(
    args: &VectorArgs,
    env: usize,
    params: &TrialParams,
    state: &mut EnvState,
    episodes: &mut u64,
    market: VectorMarket<'_>,
    out: VectorRow<'_>,
) {
    start_episode(args, env, params, state, episodes, market, out.obs);
    *out.reward = 0.0;
    *out.terminated = false;
    *out.truncated = false;
    *out.final_mask = false;
    *out.equity = state.equity;
}

/// One step of env `env` with `action` (0 flat, 1 long, 2 short): reward, flags, observation and equity;
/// an ended episode's last observation goes to `final_obs`, its equity stays in `equity` (written before the
/// restart, so the ended episode's result is not lost) and the next episode starts.
#[inline]
#[allow(clippy::too_many_arguments, reason = "one env's inputs and outputs")]
pub fn step_env(
    args: &VectorArgs,
    env: usize,
    params: &TrialParams,
    state: &mut EnvState,
    episodes: &mut u64,
    action: u8,
    market: VectorMarket<'_>,
    out: VectorRow<'_>,
) {
    let bar = state.bar;
    let outcome = env_step_on_series(params, state, action, market.bars);
    let t = transition(bar, action, &outcome);
    *out.reward = if t.valid != 0 { t.reward } else { 0.0 };
    *out.terminated = t.done == TERMINATED;
    *out.truncated = t.done == TRUNCATED;
    *out.final_mask = t.done != 0;
    observe_env(params, state, market.bars, market.features, args.n_features as usize, out.obs);
    *out.equity = state.equity;
    if t.done != 0 {
        out.final_obs.copy_from_slice(out.obs);
        start_episode(args, env, params, state, episodes, market, out.obs);
    }
}
