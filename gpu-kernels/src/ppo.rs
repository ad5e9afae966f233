//! PPO on the actor-critic of [`crate::net`] (3 logits and a value): sampling actions for every env, GAE as a
//! reverse scan per env, and the clipped-surrogate update with a value loss and an entropy bonus over
//! minibatches drawn from the rollout. The layers, backward pass and gradients are the products of
//! [`crate::net::plan`]; the per-element rules between them ([`choose`], [`gae_env`], [`minibatch_sample`],
//! [`gather_entry`], [`loss_sample`]) are shared by the PTX entries and the CPU backend.

use crate::mlp::{ACTIONS, ACTOR_CRITIC, Layout, argmax};
use crate::net::{NetArgs, NetTrial};
use crate::rng::draw_u64;
use crate::types::Transition;

/// Per-trial PPO hyperparameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoParams {
    /// Adam learning rate.
    pub lr: f32,
    /// Discount.
    pub gamma: f32,
    /// GAE lambda.
    pub lambda: f32,
    /// Clip range of the probability ratio.
    pub clip: f32,
    /// Weight of the value loss.
    pub vf_coef: f32,
    /// Weight of the entropy bonus.
    pub ent_coef: f32,
    /// Adam beta1.
    pub beta1: f32,
    /// Adam beta2.
    pub beta2: f32,
    /// Adam epsilon.
    pub adam_eps: f32,
    /// Active hidden width (<= H).
    pub hidden: u32,
    /// Active minibatch size (<= B).
    pub batch: u32,
    /// Passes over each rollout.
    pub epochs: u32,
    /// Keeps the size a multiple of 8.
    /// The trial's random-number key (the agent sets it from the env's `TrialParams::key`).
    pub key: u64,
    /// Keeps the size a multiple of 16.
    pub _pad: [u32; 2],
}

const _: () = assert!(core::mem::size_of::<PpoParams>() == 64);

impl Default for PpoParams {
    fn default() -> Self {
        Self {
            lr: 3e-4,
            gamma: 0.99,
            lambda: 0.95,
            clip: 0.2,
            vf_coef: 0.5,
            ent_coef: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            adam_eps: 1e-8,
            hidden: 64,
            batch: 256,
            epochs: 4,
            key: 0,
            _pad: [0; 2],
        }
    }
}

/// Scalar arguments of the PPO kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PpoArgs {
    /// Trials.
    pub n_trials: u32,
    /// Envs per trial (E).
    pub envs_per_trial: u32,
    /// Input width D = F + 3.
    pub input: u32,
    /// Row stride H.
    pub hidden: u32,
    /// Minibatch buffer per trial (B).
    pub batch: u32,
    /// Bars in the price block.
    pub n_bars: u32,
    /// Rollout length T (steps per env).
    pub steps: u32,
    /// 1: act greedily (argmax of the logits).
    pub greedy: u32,
    /// Seed of the draws.
    pub seed: u64,
    /// Acting: the rollout step (global); training: the update's index within this rollout (0-based).
    pub counter: u64,
    /// Training: rollouts whose updates are done (each trial's update number is
    /// `rollout x` [`updates_per_rollout`] `+ counter`).
    pub rollout: u64,
}

const _: () = assert!(core::mem::size_of::<PpoArgs>() == 56);

/// Updates trial `p` makes per rollout of `n` transitions: `epochs x ceil(n / batch)` minibatches of its own
/// batch (so a trial's passes over its rollout do not depend on its batch-mates).
#[inline]
pub fn updates_per_rollout(p: &PpoParams, n: usize) -> u64 {
    u64::from(p.epochs) * n.div_ceil(p.batch.max(1) as usize) as u64
}

/// The trial's own update number (0-based, over all its rollouts) at update `args.counter` of this rollout,
/// or `None` when the trial has made all its updates of the rollout (it sits the rest out).
#[inline]
pub fn trial_update(p: &PpoParams, args: &PpoArgs) -> Option<u64> {
    let per = updates_per_rollout(p, args.steps as usize * args.envs_per_trial as usize);
    (args.counter < per).then(|| args.rollout * per + args.counter)
}

impl PpoArgs {
    /// The actor-critic layout.
    pub fn layout(&self) -> Layout {
        Layout::actor_critic(self.input as usize, self.hidden as usize)
    }

    /// The network sizes.
    pub fn net(&self) -> NetArgs {
        NetArgs::new(self.n_trials, self.envs_per_trial, self.input, self.hidden, ACTOR_CRITIC, self.batch, self.n_bars)
    }
}

impl PpoParams {
    /// The active sizes: one forward pass (online on the minibatch).
    pub fn net(&self) -> NetTrial {
        NetTrial { hidden: self.hidden, batch: self.batch, passes: 1, _pad: 0 }
    }
}

const ACT_STREAM: u64 = 0x9_0000;
const MINIBATCH_STREAM: u64 = 0x9_8000;

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
pub fn choose(env: usize, args: &PpoArgs, key: u64, out: &[f32]) -> (u8, f32, f32) {
    let logp = log_softmax(out);
    let action = if args.greedy != 0 {
        argmax(out)
    } else {
        // Keyed by the trial's key and its own env index: the draws do not depend on the batch.
        let ept = u64::from(args.envs_per_trial);
        let counter = args.counter.wrapping_mul(ept).wrapping_add(env as u64 % ept);
        let u = uniform(args.seed, crate::rng::keyed(ACT_STREAM, key), counter);
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

/// GAE for env `e` of a trial over its rollout of `steps`: `ring`, `values` hold the trial's `steps x E`
/// transitions and values (step-major), `bootstrap` the value of the env's state after the rollout. Writes
/// advantages and returns (`advantage + value`). A slot of an env that was already done is not a transition:
/// advantage and return 0, and it cuts the recursion. A terminated transition does not bootstrap; a truncated
/// one (the segment's end) bootstraps from `bootstrap`, which is the value of its next state (a done env does
/// not move), and starts a new recursion.
#[inline]
#[allow(clippy::too_many_arguments, reason = "one env's rollout")]
pub fn gae_env(
    e: usize,
    envs: usize,
    steps: usize,
    gamma: f32,
    lambda: f32,
    ring: &[Transition],
    values: &[f32],
    bootstrap: f32,
    mut write: impl FnMut(usize, f32, f32),
) {
    let mut next_value = bootstrap;
    let mut gae = 0.0f32;
    for t in (0..steps).rev() {
        let i = t * envs + e;
        let tr = &ring[i];
        if tr.valid == 0 {
            gae = 0.0;
            next_value = 0.0;
            write(i, 0.0, 0.0);
            continue;
        }
        let (next, carry) = match tr.done {
            0 => (next_value, 1.0),
            crate::types::TRUNCATED => (bootstrap, 0.0),
            _ => (0.0, 0.0),
        };
        let delta = tr.reward + gamma * next - values[i];
        gae = delta + gamma * lambda * carry * gae;
        write(i, gae, gae + values[i]);
        next_value = values[i];
    }
}

/// The index (within the trial's `n` rollout slots) of minibatch sample `j` of the trial's update `update`
/// (the trial keyed `key`): uniform over the valid transitions ([`crate::batch::draw_valid`]); `None` (a
/// zero-weight sample) when none was found.
#[inline]
pub fn minibatch_index(ring: &[Transition], n: usize, seed: u64, key: u64, update: u64, j: u64) -> Option<usize> {
    let stream = crate::rng::keyed(MINIBATCH_STREAM, key);
    crate::batch::draw_valid(ring, n, seed, stream, update.wrapping_mul(1 << 20).wrapping_add(j))
}

/// Inputs of one PPO training sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoSample {
    /// Action taken.
    pub action: u8,
    /// Its log-probability when it was taken.
    pub logp_old: f32,
    /// Advantage.
    pub advantage: f32,
    /// Return (value target).
    pub ret: f32,
}

/// The loss of one minibatch sample from its outputs `out` (3 logits and the value): clipped surrogate,
/// value loss, entropy bonus; writes the output gradient `dout` (4 floats, scaled by 1 / batch). Samples past
/// the trial's active batch (or without a transition) have zero loss and gradient.
#[inline]
pub fn loss_sample(j: usize, ppo: &PpoParams, out: &[f32], sample: Option<PpoSample>, dout: &mut [f32]) -> f32 {
    let Some(s) = sample.filter(|_| j < ppo.batch as usize) else {
        dout[..ACTOR_CRITIC].fill(0.0);
        return 0.0;
    };
    let logp = log_softmax(out);
    let a = (s.action as usize).min(ACTIONS - 1);
    let ratio = libm::expf(logp[a] - s.logp_old);
    let (lo, hi) = (1.0 - ppo.clip, 1.0 + ppo.clip);
    let clipped = if ratio < lo {
        lo
    } else if ratio > hi {
        hi
    } else {
        ratio
    };
    let (surr1, surr2) = (ratio * s.advantage, clipped * s.advantage);
    let policy_loss = -(if surr1 < surr2 { surr1 } else { surr2 });
    // d(policy loss)/d logp[a]: -A x ratio unless the clipped term is the smaller one and clipping bites.
    let clip_active = (s.advantage >= 0.0 && ratio > hi) || (s.advantage < 0.0 && ratio < lo);
    let d_logp = if clip_active { 0.0 } else { -s.advantage * ratio };
    let p: [f32; ACTIONS] = [libm::expf(logp[0]), libm::expf(logp[1]), libm::expf(logp[2])];
    let entropy = -(p[0] * logp[0] + p[1] * logp[1] + p[2] * logp[2]);
    let v_err = out[ACTIONS] - s.ret;
    let loss = policy_loss + ppo.vf_coef * 0.5 * v_err * v_err - ppo.ent_coef * entropy;
    let scale = 1.0 / ppo.batch as f32;
    for k in 0..ACTIONS {
        let d_logp_k = d_logp * (if k == a { 1.0 } else { 0.0 } - p[k]);
        // dH/dz_k = -p_k (log p_k + H); the loss subtracts ent_coef x H.
        let d_entropy = -p[k] * (logp[k] + entropy);
        dout[k] = (d_logp_k - ppo.ent_coef * d_entropy) * scale;
    }
    dout[ACTIONS] = ppo.vf_coef * v_err * scale;
    loss
}

/// Minibatch sample `j` of trial `p` at update `args.counter`: its slot in the trial's rollout (`ring`, the
/// trial's `n` slots) and its training inputs; `None` without a valid transition or when the trial sits
/// this update out ([`trial_update`]).
#[inline]
pub fn minibatch_sample(
    args: &PpoArgs,
    p: &PpoParams,
    j: usize,
    ring: &[Transition],
    logps: &[f32],
    advantages: &[f32],
    returns: &[f32],
) -> Option<(usize, PpoSample)> {
    let n = ring.len();
    let s = minibatch_index(ring, n, args.seed, p.key, trial_update(p, args)?, j as u64)?;
    Some((s, PpoSample { action: ring[s].chosen, logp_old: logps[s], advantage: advantages[s], ret: returns[s] }))
}

/// Column `c` of the observation of the transition in rollout slot `slot` (features of its bar, then its
/// portfolio floats); 0 without a slot.
#[inline]
pub fn gather_entry(ring: &[Transition], features: &[f32], n_features: usize, slot: Option<usize>, c: usize) -> f32 {
    let Some(slot) = slot else { return 0.0 };
    let t = &ring[slot];
    if c < n_features { features[t.bar as usize * n_features + c] } else { t.state[c - n_features] }
}

/// Adam step of one parameter with its gradient `g` (`update` >= 1 is the update number).
#[inline]
pub fn adam_step(p: &PpoParams, g: f32, w: &mut f32, m: &mut f32, v: &mut f32, update: u64) {
    crate::mlp::adam(w, m, v, g, p.lr, p.beta1, p.beta2, p.adam_eps, update);
}
