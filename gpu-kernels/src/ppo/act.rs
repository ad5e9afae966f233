//! Acting: each env's action sampled from the softmax of its logits, or the argmax ([`choose`], [`act_env`]).

use super::params::{PpoArgs, PpoParams};
use crate::mlp::{ACTIONS, argmax};
use crate::rng::draw_u64;

const ACT_STREAM: u64 = 0x9_0000;

/// log-softmax of the 3 logits.
#[inline]
pub fn log_softmax(logits: &[f32]) -> [f32; ACTIONS] {
    let m = logits[..ACTIONS].iter().fold(f32::MIN, |a, &b| if b > a { b } else { a });
    let mut sum = 0.0;
    for &z in &logits[..ACTIONS] {
        sum += libm::expf(z - m);
    }
    let lse = m + libm::logf(sum);
    [logits[0] - lse, logits[1] - lse, logits[2] - lse]
}

fn uniform(seed: u64, stream: u64, counter: u64) -> f32 {
    crate::rng::unit_open(draw_u64(seed, stream, counter))
}

/// Env `env`'s action from its trial's outputs `out` (3 logits and the value): sampled from the softmax, or
/// the argmax when greedy; with its log-probability and the value.
#[inline]
pub fn choose(env: usize, args: &PpoArgs, p: &PpoParams, out: &[f32]) -> (u8, f32, f32) {
    let logp = log_softmax(out);
    let action = if args.greedy != 0 {
        argmax(out)
    } else {
        // Keyed by the trial's key, its own env index and its own rollout steps: the draws do not depend on
        // the batch, nor on when the trial began.
        let ept = u64::from(args.envs_per_trial);
        let step = args.counter.wrapping_sub(p.origin_rollouts.wrapping_mul(u64::from(args.steps)));
        let counter = step.wrapping_mul(ept).wrapping_add(env as u64 % ept);
        let u = uniform(args.seed, crate::rng::keyed(ACT_STREAM, p.key), counter);
        let (mut cdf, mut pick) = (0.0, ACTIONS - 1);
        for (k, lp) in logp.iter().enumerate() {
            cdf += libm::expf(*lp);
            if u < cdf {
                pick = k;
                break;
            }
        }
        pick
    };
    (action as u8, logp[action], out[ACTIONS])
}

/// What acting computed for one env ([`act_env`]): the action, its log-probability, the state's value, and
/// where the log-probability and value go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActOutput {
    /// The chosen action code.
    pub action: u8,
    /// Its log-probability.
    pub logp: f32,
    /// The state's value.
    pub value: f32,
    /// Where the log-probability and value go in the rollout buffers, `(trial x steps + rollout_step) x E + e`
    /// (the trial's offset plus the rollout index); `None` after the last step (`rollout_step >= steps`): then
    /// the value is the env's bootstrap (index `env`) and no log-probability is kept.
    pub rollout: Option<usize>,
}

/// Acting for env `env` at rollout step `rollout_step` from its trial's outputs `out` (3 logits and the
/// value): the action ([`choose`]) and the routing of its log-probability and value. The PTX shim and the CPU
/// backend both call this.
#[inline]
pub fn act_env(env: usize, args: &PpoArgs, p: &PpoParams, out: &[f32], rollout_step: u32) -> ActOutput {
    let (action, logp, value) = choose(env, args, p, out);
    let ept = args.envs_per_trial as usize;
    let rollout = (rollout_step < args.steps)
        .then(|| ((env / ept) * args.steps as usize + rollout_step as usize) * ept + env % ept);
    ActOutput { action, logp, value, rollout }
}
