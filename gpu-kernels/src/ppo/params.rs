//! PPO's hyperparameters ([`PpoParams`]), the kernels' arguments ([`PpoArgs`]) and a trial's update
//! schedule: updates per rollout, its own rollout and update numbers, the learning rate.

use crate::mlp::{ACTOR_CRITIC, Layout};
use crate::net::{NetArgs, NetTrial};

/// Per-trial PPO hyperparameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
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
    /// Active minibatch size (<= B). With `minibatches > 0` the agent sets it to `ceil(n / minibatches)`
    /// for rollouts of `n` transitions.
    pub batch: u32,
    /// Passes over each rollout (update epochs).
    pub epochs: u32,
    /// Minibatches per update epoch (CleanRL's `num_minibatches`): each epoch shuffles the rollout and
    /// splits it into this many minibatches, every transition used once. 0: minibatches of `batch` drawn
    /// uniformly with replacement, `ceil(n / batch)` of them per epoch.
    pub minibatches: u32,
    /// Clip the trial's gradient to this global L2 norm before Adam (CleanRL's `max_grad_norm`); 0: off.
    pub max_grad_norm: f32,
    /// 1: clip the value loss around the rollout's values with `clip` (CleanRL's `clip_vloss`); 0: off.
    pub clip_vloss: u32,
    /// Anneal the learning rate linearly to 0 over this many rollouts (CleanRL's `anneal_lr`, where it
    /// is the run's number of iterations); 0: constant.
    pub anneal_rollouts: u32,
    /// The trial's random-number key (the agent sets it from the env's `TrialParams::key`).
    pub key: u64,
    /// Initial weights: 1, orthogonal with CleanRL's gains; 0, PyTorch's default uniform (host only).
    pub orthogonal_init: u32,
    /// 1: each minibatch's advantages are normalized to zero mean and unit standard deviation before the
    /// surrogate (CleanRL's `norm_adv`, [`adv_moments_of`](super::adv_moments_of)); 0: used as GAE gives them.
    pub norm_adv: u32,
    /// Rollouts the agent had collected when the trial began (0 in a fresh batch): its rollout, update and
    /// action-draw numbers, and so its learning-rate schedule, count from here ([`trial_rollout`]).
    pub origin_rollouts: u64,
    /// The hidden layers' activation ([`crate::mlp::ACT_TANH`], CleanRL's, or [`crate::mlp::ACT_RELU`]); the
    /// trials of a batch share it (their layers are the same launches).
    pub activation: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<PpoParams>() == 96);

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
            adam_eps: 1e-5,
            hidden: 64,
            batch: 256,
            epochs: 4,
            minibatches: 4,
            max_grad_norm: 0.5,
            clip_vloss: 1,
            anneal_rollouts: 0,
            key: 0,
            orthogonal_init: 1,
            norm_adv: 1,
            origin_rollouts: 0,
            activation: crate::mlp::ACT_TANH,
            _pad: 0,
        }
    }
}

/// Scalar arguments of the PPO kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
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
    /// The hidden layers' activation of every trial ([`PpoParams::activation`]).
    pub activation: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<PpoArgs>() == 64);

/// Updates trial `p` makes per rollout of `n` transitions: `epochs x minibatches`, or `epochs x
/// ceil(n / batch)` minibatches of its own batch without a split (so a trial's passes over its rollout do
/// not depend on its batch-mates).
#[inline]
pub fn updates_per_rollout(p: &PpoParams, n: usize) -> u64 {
    let per_epoch = if p.minibatches > 0 { p.minibatches as usize } else { n.div_ceil(p.batch.max(1) as usize) };
    u64::from(p.epochs) * per_epoch as u64
}

/// The minibatch size of the split into `minibatches` of a rollout of `n` (`ceil(n / minibatches)`; the last
/// minibatch is short when `minibatches` does not divide `n`).
#[inline]
pub fn split_batch(n: usize, minibatches: u32) -> u32 {
    n.div_ceil(minibatches.max(1) as usize) as u32
}

/// The learning rate of trial `p` in rollout `rollout` (0-based): `lr x (1 - rollout / anneal_rollouts)`
/// with annealing (CleanRL's schedule, per iteration), else `lr`.
#[inline]
pub fn learning_rate(p: &PpoParams, rollout: u64) -> f32 {
    if p.anneal_rollouts == 0 {
        return p.lr;
    }
    let done = rollout.min(u64::from(p.anneal_rollouts)) as f32;
    p.lr * (1.0 - done / p.anneal_rollouts as f32)
}

/// The trial's own update number (0-based, over all its rollouts) at update `args.counter` of this rollout,
/// or `None` when the trial has made all its updates of the rollout (it sits the rest out).
#[inline]
pub fn trial_update(p: &PpoParams, args: &PpoArgs) -> Option<u64> {
    let per = updates_per_rollout(p, args.steps as usize * args.envs_per_trial as usize);
    (args.counter < per).then(|| trial_rollout(p, args.rollout) * per + args.counter)
}

/// The trial's own number of the agent's rollout `rollout`: counted from the rollouts collected before the
/// trial began ([`PpoParams::origin_rollouts`]), so a trial started in a freed slot anneals, shuffles and
/// draws as it would alone.
#[inline]
pub fn trial_rollout(p: &PpoParams, rollout: u64) -> u64 {
    rollout.wrapping_sub(p.origin_rollouts)
}

impl PpoArgs {
    /// The actor-critic layout.
    pub fn layout(&self) -> Layout {
        Layout::actor_critic(self.input as usize, self.hidden as usize).with_activation(self.activation)
    }

    /// The network sizes.
    pub fn net(&self) -> NetArgs {
        NetArgs::new(self.n_trials, self.envs_per_trial, self.input, self.hidden, ACTOR_CRITIC, self.batch, self.n_bars)
            .with_activation(self.activation)
    }
}

impl PpoParams {
    /// The active sizes: one forward pass (online on the minibatch).
    pub fn net(&self) -> NetTrial {
        NetTrial { hidden: self.hidden, batch: self.batch, passes: 1, _pad: 0 }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn the_learning_rate_anneals_to_zero() {
        let p = PpoParams { lr: 1e-3, anneal_rollouts: 4, ..PpoParams::default() };
        let lrs: Vec<f32> = (0..6).map(|r| learning_rate(&p, r)).collect();
        assert_eq!(lrs, [1e-3, 0.75e-3, 0.5e-3, 0.25e-3, 0.0, 0.0]);
        assert_eq!(learning_rate(&PpoParams { anneal_rollouts: 0, ..p }, 3), 1e-3);
    }
}
