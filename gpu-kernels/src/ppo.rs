//! PPO on the actor-critic of [`crate::mlp`] (3 logits and a value): sampling actions for every env, GAE as a
//! reverse scan per env, and the clipped-surrogate update with a value loss and an entropy bonus over
//! minibatches drawn from the rollout. Per-thread bodies shared by the PTX entries and the CPU backend.

use crate::batch::observe_env;
use crate::mlp::{ACTIONS, ACTOR_CRITIC, Layout, argmax, backward, forward};
use crate::rng::draw_u64;
use crate::types::{Bar, EnvState, Transition, TrialParams};

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
    pub _pad: [u32; 4],
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
            _pad: [0; 4],
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
    /// Acting: the rollout step (global); training: the update number (Adam's step, >= 1).
    pub counter: u64,
}

const _: () = assert!(core::mem::size_of::<PpoArgs>() == 48);

impl PpoArgs {
    /// The actor-critic layout.
    pub fn layout(&self) -> Layout {
        Layout::actor_critic(self.input as usize, self.hidden as usize)
    }

    /// Floats of per-env acting scratch: observation, two activations.
    pub fn act_scratch(&self) -> usize {
        self.input as usize + 2 * self.hidden as usize
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
    ((draw_u64(seed, stream, counter) >> 40) as f32 + 0.5) / (1u32 << 24) as f32
}

/// Env `env`'s action from its trial's policy (sampled, or argmax when greedy), with its log-probability and
/// the value of its state. `scratch` holds `args.act_scratch()` floats.
#[inline]
#[allow(clippy::too_many_arguments, reason = "the inputs of one env's decision")]
pub fn act_env(
    env: usize,
    args: &PpoArgs,
    env_params: &TrialParams,
    state: &EnvState,
    bars: &[Bar],
    features: &[f32],
    ppo: &PpoParams,
    weights: &[f32],
    scratch: &mut [f32],
) -> (u8, f32, f32) {
    let l = args.layout();
    let (obs, rest) = scratch.split_at_mut(l.input);
    let (a1, a2) = rest.split_at_mut(l.hidden);
    observe_env(env_params, state, bars, features, l.input - 3, obs);
    let mut out = [0.0; ACTOR_CRITIC];
    forward(&l, weights, ppo.hidden as usize, obs, a1, a2, &mut out);
    let logp = log_softmax(&out);
    let action = if args.greedy != 0 {
        argmax(&out)
    } else {
        let counter =
            args.counter.wrapping_mul(u64::from(args.n_trials * args.envs_per_trial)).wrapping_add(env as u64);
        let u = uniform(args.seed, ACT_STREAM, counter);
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
/// transitions and values (step-major), `bootstrap` the value after the last step. Writes advantages and
/// returns (`advantage + value`). A slot of an env that was already done is not a transition: advantage and
/// return 0, and it cuts the recursion.
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
        let not_done = if tr.done != 0 { 0.0 } else { 1.0 };
        let delta = tr.reward + gamma * next_value * not_done - values[i];
        gae = delta + gamma * lambda * not_done * gae;
        write(i, gae, gae + values[i]);
        next_value = values[i];
    }
}

/// The index (within the trial's `n` rollout slots) of minibatch sample `j` of update `counter`: uniform,
/// moved forward to the next valid transition; `None` when none is valid.
#[inline]
pub fn minibatch_index(ring: &[Transition], n: usize, seed: u64, trial: u64, counter: u64, j: u64) -> Option<usize> {
    let x = draw_u64(seed, MINIBATCH_STREAM + trial, counter.wrapping_mul(1 << 20).wrapping_add(j)) >> 32;
    let start = ((x * n as u64) >> 32) as usize;
    (0..n).map(|p| (start + p) % n).find(|&i| ring[i].valid != 0)
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

/// One minibatch sample: forward, clipped surrogate, value loss, entropy bonus; the output gradient goes
/// through the backward pass into `scratch` (`layout.train_scratch()` floats). Returns the sample's loss.
/// Samples past the trial's active batch (or without a transition) have zero gradients.
#[inline]
pub fn train_sample(
    j: usize,
    args: &PpoArgs,
    ppo: &PpoParams,
    weights: &[f32],
    obs: &[f32],
    sample: Option<PpoSample>,
    scratch: &mut [f32],
) -> f32 {
    let l = args.layout();
    let (h, stride) = (ppo.hidden as usize, l.hidden);
    let (a1, rest) = scratch.split_at_mut(stride);
    let (a2, rest) = rest.split_at_mut(stride);
    let (d1, rest) = rest.split_at_mut(stride);
    let (d2, rest) = rest.split_at_mut(stride);
    let d3 = &mut rest[..ACTOR_CRITIC];
    let Some(s) = sample.filter(|_| j < ppo.batch as usize) else {
        for x in a1.iter_mut().chain(a2.iter_mut()).chain(d1.iter_mut()).chain(d2.iter_mut()).chain(d3.iter_mut()) {
            *x = 0.0;
        }
        return 0.0;
    };
    let mut out = [0.0; ACTOR_CRITIC];
    forward(&l, weights, h, obs, a1, a2, &mut out);
    let logp = log_softmax(&out);
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
        d3[k] = (d_logp_k - ppo.ent_coef * d_entropy) * scale;
    }
    d3[ACTIONS] = ppo.vf_coef * v_err * scale;
    backward(&l, weights, h, d3, a1, a2, d1, d2);
    loss
}

/// Gathers the observation of transition `t` (features of its bar, then its portfolio floats) into `obs`.
#[inline]
pub fn gather_obs(t: &Transition, features: &[f32], n_features: usize, obs: &mut [f32]) {
    let bar = t.bar as usize;
    obs[..n_features].copy_from_slice(&features[bar * n_features..(bar + 1) * n_features]);
    obs[n_features..n_features + 3].copy_from_slice(&t.state);
}
