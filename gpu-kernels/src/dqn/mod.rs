//! DQN on top of [`crate::net`]: epsilon-greedy acting for every env, and a training step for every trial
//! at once (TD targets from the target network, optional Double DQN, Huber loss, backward, Adam, target
//! update). The layers, the backward pass and the weight gradients are the products of the stages' plans
//! ([`crate::net::plan`]); the per-element rules between them ([`choose`], [`td_sample`],
//! [`update_param`]) are shared by the PTX entries and the CPU backend. The kernels whose blocks work as one,
//! `dqn_td` and `dqn_adam`, are in `blocks` (nvptx only).

#[cfg(target_arch = "nvptx64")]
mod blocks;

use crate::mlp::{ACTIONS, BiasCorrection, Layout, adam_corrected, argmax, huber, huber_grad};
use crate::net::{NetArgs, NetTrial};
use crate::rng::{draw_below, draw_u64, keyed};

/// Per-trial DQN hyperparameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DqnParams {
    /// Adam learning rate.
    pub lr: f32,
    /// Discount.
    pub gamma: f32,
    /// Exploration at step 0.
    pub eps_start: f32,
    /// Exploration after the decay.
    pub eps_end: f32,
    /// Env steps over which epsilon decays linearly.
    pub eps_decay_steps: f32,
    /// Polyak rate of the target network (0: hard copies every `target_every` gradient steps).
    pub tau: f32,
    /// Huber threshold.
    pub huber_delta: f32,
    /// Adam beta1.
    pub beta1: f32,
    /// Adam beta2.
    pub beta2: f32,
    /// Adam epsilon.
    pub adam_eps: f32,
    /// Active hidden width (<= the batch's H).
    pub hidden: u32,
    /// Active minibatch size (<= the batch's B).
    pub batch: u32,
    /// Hard target update period in gradient steps (with tau = 0).
    pub target_every: u32,
    /// 1: Double DQN targets.
    pub double_dqn: u32,
    /// The trial's random-number key (the agent sets it from the env's `TrialParams::key`).
    pub key: u64,
    /// Env steps the batch had taken when the trial began (0 in a fresh batch): its exploration schedule
    /// and draws count from here ([`choose`]).
    pub origin_steps: u64,
    /// Gradient steps the agent had taken before the trial's first (0 in a fresh batch): its Adam step and
    /// target updates count from here, and it sits out the agent's gradient steps up to it
    /// ([`trial_step`]).
    pub origin_grads: u64,
}

const _: () = assert!(core::mem::size_of::<DqnParams>() == 80);

impl DqnParams {
    /// The active sizes: two forward passes, three with Double DQN.
    pub fn net(&self) -> NetTrial {
        NetTrial { hidden: self.hidden, batch: self.batch, passes: if self.double_dqn != 0 { 3 } else { 2 }, _pad: 0 }
    }
}

impl Default for DqnParams {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            gamma: 0.99,
            eps_start: 1.0,
            eps_end: 0.05,
            eps_decay_steps: 10_000.0,
            tau: 0.0,
            huber_delta: 1.0,
            beta1: 0.9,
            beta2: 0.999,
            adam_eps: 1e-8,
            hidden: 128,
            batch: 256,
            target_every: 250,
            double_dqn: 1,
            key: 0,
            origin_steps: 0,
            origin_grads: 0,
        }
    }
}

/// Scalar arguments of the DQN kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DqnArgs {
    /// Trials.
    pub n_trials: u32,
    /// Envs per trial (acting).
    pub envs_per_trial: u32,
    /// Input width D = F + 3.
    pub input: u32,
    /// Row stride H.
    pub hidden: u32,
    /// Samples per trial in the minibatch buffers (B).
    pub batch: u32,
    /// Bars in the price block.
    pub n_bars: u32,
    /// Env step (epsilon schedule and exploration draws) or gradient step number (Adam, >= 1).
    pub step: u64,
    /// Seed of the exploration draws.
    pub seed: u64,
    /// 1: act greedily (evaluation).
    pub greedy: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}

const _: () = assert!(core::mem::size_of::<DqnArgs>() == 48);

impl DqnArgs {
    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        Layout::q_net(self.input as usize, self.hidden as usize)
    }

    /// The network sizes.
    pub fn net(&self) -> NetArgs {
        NetArgs::new(self.n_trials, self.envs_per_trial, self.input, self.hidden, ACTIONS, self.batch, self.n_bars)
    }
}

/// RNG stream of exploration.
const EXPLORE_STREAM: u64 = 0xe4_0000;

/// Epsilon at env step `step`: linear from `eps_start` to `eps_end` over `eps_decay_steps`.
#[inline]
pub fn epsilon(p: &DqnParams, step: u64) -> f32 {
    let frac = if p.eps_decay_steps > 0.0 { step as f32 / p.eps_decay_steps } else { 1.0 };
    let frac = if frac > 1.0 { 1.0 } else { frac };
    p.eps_start + (p.eps_end - p.eps_start) * frac
}

/// Epsilon-greedy (greedy when `args.greedy`) choice of env `env` from its Q-values `q`.
#[inline]
pub fn choose(env: usize, args: &DqnArgs, dqn: &DqnParams, q: &[f32]) -> u8 {
    if args.greedy == 0 {
        // Keyed by the trial's key, its own env index and its own step count: the draws do not depend on the
        // batch, nor on when the trial began.
        let (ept, step) = (u64::from(args.envs_per_trial), args.step.wrapping_sub(dqn.origin_steps));
        let counter = step.wrapping_mul(ept).wrapping_add(env as u64 % ept);
        let u = crate::rng::unit(draw_u64(args.seed, keyed(EXPLORE_STREAM, dqn.key), counter));
        if u < epsilon(dqn, step) {
            return draw_below(args.seed, keyed(EXPLORE_STREAM + 1, dqn.key), counter, ACTIONS as u32) as u8;
        }
    }
    argmax(q) as u8
}

/// The TD step of minibatch sample `j` of a trial from its Q-values (`q` online on the observation, `qt`
/// target on the next one, `qo` online on the next one, read with Double DQN): writes the output gradient
/// `dout` (3 floats: the Huber gradient at the taken action, scaled by weight / batch) and returns the
/// weighted loss (0 and a zero gradient for masked samples and those past the trial's batch).
#[inline]
#[allow(clippy::too_many_arguments, reason = "the inputs of one sample")]
pub fn td_sample(
    j: usize,
    dqn: &DqnParams,
    q: &[f32],
    qt: &[f32],
    qo: &[f32],
    action: u32,
    reward: f32,
    done: f32,
    weight: f32,
    dout: &mut [f32],
) -> f32 {
    if weight == 0.0 || j >= dqn.batch as usize {
        dout[..ACTIONS].fill(0.0);
        return 0.0;
    }
    let next_value = if dqn.double_dqn != 0 { qt[argmax(qo)] } else { qt[argmax(qt)] };
    let y = reward + dqn.gamma * (1.0 - done) * next_value;
    let a = (action as usize).min(ACTIONS - 1);
    let diff = q[a] - y;
    let g = huber_grad(diff, dqn.huber_delta) * weight / dqn.batch as f32;
    for (k, dk) in dout.iter_mut().enumerate().take(ACTIONS) {
        *dk = if k == a { g } else { 0.0 };
    }
    huber(diff, dqn.huber_delta) * weight
}

/// What every parameter of a trial shares at one of the agent's gradient steps: the trial's own step
/// ([`trial_grad_step`]) and Adam's bias corrections at it (computed once per trial on the CPU and once per
/// block of the trial's parameters on the GPU, not once per parameter: same bits).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrialStep {
    /// The trial's own gradient step (>= 1).
    pub step: u64,
    /// Adam's bias corrections at `step`.
    pub bias: BiasCorrection,
}

/// The trial's [`TrialStep`] at the agent's gradient step `args.step`, or `None` while the trial has not
/// begun to learn (nothing of it changes).
#[inline]
pub fn trial_step(args: &DqnArgs, dqn: &DqnParams) -> Option<TrialStep> {
    trial_grad_step(args, dqn).map(|step| TrialStep { step, bias: BiasCorrection::at(dqn.beta1, dqn.beta2, step) })
}

/// Adam step of one parameter `w` with its gradient `g` at the trial's step `s` ([`trial_step`]), then the
/// target update (Polyak with tau > 0, else a copy every `target_every` of the trial's gradient steps).
#[inline]
#[allow(clippy::too_many_arguments, reason = "one parameter's online, target and Adam state")]
pub fn update_param(dqn: &DqnParams, s: &TrialStep, g: f32, w: &mut f32, target: &mut f32, m: &mut f32, v: &mut f32) {
    adam_corrected(w, m, v, g, dqn.lr, dqn.beta1, dqn.beta2, dqn.adam_eps, s.bias);
    if dqn.tau > 0.0 {
        *target = dqn.tau * *w + (1.0 - dqn.tau) * *target;
    } else if dqn.target_every > 0 && s.step.is_multiple_of(u64::from(dqn.target_every)) {
        *target = *w;
    }
}

/// The trial's own gradient step (>= 1) at the agent's gradient step `args.step`, or `None` while the agent's
/// steps are those before the trial's first ([`DqnParams::origin_grads`]: a trial started in a freed slot
/// sits out the gradient steps of its warm-up, which its batch-mates take).
#[inline]
pub fn trial_grad_step(args: &DqnArgs, dqn: &DqnParams) -> Option<u64> {
    (args.step > dqn.origin_grads).then(|| args.step - dqn.origin_grads)
}
