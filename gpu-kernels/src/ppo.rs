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
    /// surrogate (CleanRL's `norm_adv`, [`adv_moments`]); 0: used as GAE gives them.
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

const ACT_STREAM: u64 = 0x9_0000;
const MINIBATCH_STREAM: u64 = 0x9_8000;
const SHUFFLE_STREAM: u64 = 0x9_c000;

/// Position `q` (< `n`) of a keyed pseudo-random permutation of `0..n`: a 4-round Feistel network on the
/// smallest even-bit power of two >= n, walked until it lands below `n` (cycle walking: a bijection of
/// `0..n`, a few rounds on average). `keys` are the rounds' keys. Stateless, so every GPU thread computes
/// its own sample and the CPU the same.
#[inline]
pub fn permute(q: u64, n: u64, keys: &[u64; 4]) -> u64 {
    let mut half = 1u32;
    while (1u64 << (2 * half)) < n {
        half += 1;
    }
    let mask = (1u64 << half) - 1;
    let mut x = q;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        for k in keys {
            let f = crate::rng::mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}

/// The rollout slot of position `q` of the trial's shuffle for update epoch `epoch` of rollout `rollout`
/// (the trial keyed `key`).
#[inline]
pub fn shuffled(q: u64, n: u64, seed: u64, key: u64, rollout: u64, epoch: u64) -> u64 {
    let stream = crate::rng::keyed(SHUFFLE_STREAM, key);
    let base = rollout.wrapping_mul(1 << 16).wrapping_add(epoch).wrapping_mul(4);
    let keys = [0, 1, 2, 3].map(|i| draw_u64(seed, stream, base + i));
    permute(q, n, &keys)
}

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
    // Steps in groups of GAE_AHEAD from the last: a group's transitions and values are all read before any
    // of its writes (on the GPU a read after a write through another pointer waited for the write: a global
    // round trip a step). The arithmetic, and so every bit, is the step-by-step recursion's.
    let mut end = steps;
    while end > 0 {
        let start = end.saturating_sub(GAE_AHEAD);
        let mut read = [(0u8, 0u8, 0.0f32, 0.0f32); GAE_AHEAD];
        const _: () = assert!(GAE_AHEAD == 8, "the unrolled groups below are written for 8 steps");
        crate::tile::unrolled!(k in [0, 1, 2, 3, 4, 5, 6, 7] {
            if k < end - start {
                let i = (end - 1 - k) * envs + e;
                let tr = &ring[i];
                read[k] = (tr.valid, tr.done, tr.reward, values[i]);
            }
        });
        crate::tile::unrolled!(k in [0, 1, 2, 3, 4, 5, 6, 7] {
            if k < end - start {
                let i = (end - 1 - k) * envs + e;
                let (valid, done, reward, value) = read[k];
                if valid == 0 {
                    gae = 0.0;
                    next_value = 0.0;
                    write(i, 0.0, 0.0);
                } else {
                    let (next, carry) = match done {
                        0 => (next_value, 1.0),
                        crate::types::TRUNCATED => (bootstrap, 0.0),
                        _ => (0.0, 0.0),
                    };
                    let delta = reward + gamma * next - value;
                    gae = delta + gamma * lambda * carry * gae;
                    write(i, gae, gae + value);
                    next_value = value;
                }
            }
        });
        end = start;
    }
}

/// Rollout steps [`gae_env`] reads ahead of its writes.
pub const GAE_AHEAD: usize = 8;

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
    /// The value predicted when it was taken (the centre of the value clip).
    pub value_old: f32,
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
    // Value clipping (CleanRL's clip_vloss): 0.5 max((v - R)^2, (v_clip - R)^2) with v_clip the value
    // moved at most `clip` from the rollout's; the clipped branch has no gradient where it clips.
    let (v_sq, v_grad) = if ppo.clip_vloss != 0 {
        let dv = out[ACTIONS] - s.value_old;
        let dv_clipped = if dv < -ppo.clip {
            -ppo.clip
        } else if dv > ppo.clip {
            ppo.clip
        } else {
            dv
        };
        let c_err = s.value_old + dv_clipped - s.ret;
        if c_err * c_err > v_err * v_err {
            (c_err * c_err, if dv_clipped == dv { c_err } else { 0.0 })
        } else {
            (v_err * v_err, v_err)
        }
    } else {
        (v_err * v_err, v_err)
    };
    let loss = policy_loss + ppo.vf_coef * 0.5 * v_sq - ppo.ent_coef * entropy;
    let scale = 1.0 / ppo.batch as f32;
    for k in 0..ACTIONS {
        let d_logp_k = d_logp * (if k == a { 1.0 } else { 0.0 } - p[k]);
        // dH/dz_k = -p_k (log p_k + H); the loss subtracts ent_coef x H.
        let d_entropy = -p[k] * (logp[k] + entropy);
        dout[k] = (d_logp_k - ppo.ent_coef * d_entropy) * scale;
    }
    dout[ACTIONS] = ppo.vf_coef * v_grad * scale;
    loss
}

/// The rollout slot of minibatch sample `j` of trial `p` at update `args.counter` (`ring`: the trial's `n`
/// slots): with a split, position `m x batch + j` of the update epoch's shuffle (`m` the minibatch), else a
/// draw with replacement ([`minibatch_index`]); `None` (a zero-weight sample) past the rollout or the batch,
/// without a valid transition, or when the trial sits this update out ([`trial_update`]).
#[inline]
pub fn minibatch_slot(args: &PpoArgs, p: &PpoParams, j: usize, ring: &[Transition]) -> Option<usize> {
    let n = ring.len();
    let update = trial_update(p, args)?;
    if j >= p.batch as usize {
        return None;
    }
    if p.minibatches == 0 {
        return minibatch_index(ring, n, args.seed, p.key, update, j as u64);
    }
    let per = updates_per_rollout(p, n);
    let (rollout, c) = (update / per, update % per);
    let (epoch, m) = (c / u64::from(p.minibatches), c % u64::from(p.minibatches));
    let q = m * u64::from(p.batch) + j as u64;
    if q >= n as u64 {
        return None;
    }
    let s = shuffled(q, n as u64, args.seed, p.key, rollout, epoch) as usize;
    (ring[s].valid != 0).then_some(s)
}

/// The rollout buffers of one trial that a minibatch sample reads (each `n` long, slot-indexed).
#[derive(Clone, Copy, Debug)]
pub struct Rollout<'a> {
    /// The transitions.
    pub ring: &'a [Transition],
    /// Log-probability of each action when it was taken.
    pub logps: &'a [f32],
    /// Value predicted at each step.
    pub values: &'a [f32],
    /// GAE advantages.
    pub advantages: &'a [f32],
    /// Returns (value targets).
    pub returns: &'a [f32],
}

/// Minibatch sample `j` of trial `p` at update `args.counter`: its slot ([`minibatch_slot`]) and its
/// training inputs, the advantage normalized with the minibatch's moments `moments` ([`adv_moments`]) when
/// the trial asks ([`PpoParams::norm_adv`]).
#[inline]
pub fn minibatch_sample(
    args: &PpoArgs,
    p: &PpoParams,
    j: usize,
    r: &Rollout,
    moments: [f32; 2],
) -> Option<(usize, PpoSample)> {
    let s = minibatch_slot(args, p, j, r.ring)?;
    let sample = PpoSample {
        action: r.ring[s].chosen,
        logp_old: r.logps[s],
        advantage: normalized_advantage(p, r.advantages[s], moments),
        ret: r.returns[s],
        value_old: r.values[s],
    };
    Some((s, sample))
}

/// Lanes of a minibatch's advantage moments: lane `l` of a trial folds the samples `j = l, l + ADV_LANES,
/// ..` of its minibatch in ascending order ([`adv_lane`]), then the lanes are added pairwise in a fixed
/// tree ([`adv_tree`]); the GPU runs a thread per lane (a block of `ADV_LANES` per trial), the CPU the lanes
/// one after another. A minibatch of CleanRL's split of 1,024 envs x 292 steps (74,752 samples) is 73
/// samples a lane.
pub const ADV_LANES: usize = 1024;

/// Samples of a lane whose slots are found before their advantages are loaded (their loads overlap).
const ADV_AHEAD: usize = 4;

/// Lane `lane` of trial `p`'s minibatch at update `args.counter` ([`minibatch_slot`]'s samples; none when the
/// trial sits the update out): the number of samples and the sum of their advantages, or with `mean` the sum
/// of their squared deviations from it (`fma(d, d, acc)`), in ascending sample order.
#[inline]
pub fn adv_lane(args: &PpoArgs, p: &PpoParams, lane: usize, r: &Rollout, mean: Option<f32>) -> (u32, f32) {
    let (mut count, mut acc) = (0u32, 0.0f32);
    let batch = p.batch as usize;
    let mut j = lane;
    while j < batch {
        let slots: [Option<usize>; ADV_AHEAD] = core::array::from_fn(|u| {
            let ju = j + u * ADV_LANES;
            if ju < batch { minibatch_slot(args, p, ju, r.ring) } else { None }
        });
        let values: [f32; ADV_AHEAD] = core::array::from_fn(|u| slots[u].map_or(0.0, |s| r.advantages[s]));
        for (slot, a) in slots.iter().zip(values) {
            if slot.is_some() {
                count += 1;
                acc = match mean {
                    None => acc + a,
                    Some(m) => crate::tile::fma(a - m, a - m, acc),
                };
            }
        }
        j += ADV_AHEAD * ADV_LANES;
    }
    (count, acc)
}

/// One level of the lanes' fixed tree: lane `i < half` takes lane `i + half` (`ADV_LANES / 2, .., 1`).
#[inline]
pub fn adv_pair((c, s): (u32, f32), (c2, s2): (u32, f32)) -> (u32, f32) {
    (c + c2, s + s2)
}

/// The lanes (`ADV_LANES` of them) added pairwise: at each level `half = ADV_LANES / 2, .., 1`, lane `i <
/// half` adds lane `i + half` ([`adv_pair`]); lane 0 then holds the total. The GPU's order, level by level.
pub fn adv_tree(lanes: &mut [(u32, f32)]) -> (u32, f32) {
    let mut half = ADV_LANES / 2;
    while half > 0 {
        for i in 0..half {
            lanes[i] = adv_pair(lanes[i], lanes[i + half]);
        }
        half /= 2;
    }
    lanes[0]
}

/// The mean of a minibatch's advantages from its folded count and sum (0 for an empty minibatch).
#[inline]
pub fn adv_mean(count: u32, sum: f32) -> f32 {
    if count == 0 { 0.0 } else { sum / count as f32 }
}

/// The standard deviation of a minibatch's advantages from its folded count and sum of squared
/// deviations: unbiased (`n - 1`, as `torch.std`), 0 below two samples (where `torch.std` gives NaN).
#[inline]
pub fn adv_std(count: u32, squares: f32) -> f32 {
    if count < 2 { 0.0 } else { crate::sqrtf(squares / (count - 1) as f32) }
}

/// Trial `p`'s minibatch moments (mean, standard deviation) at update `args.counter`, its lanes in turn:
/// the CPU's form of the `ppo_adv` kernel (the same bits).
pub fn adv_moments(args: &PpoArgs, p: &PpoParams, r: &Rollout) -> [f32; 2] {
    let mut lanes = [(0u32, 0.0f32); ADV_LANES];
    for (l, x) in lanes.iter_mut().enumerate() {
        *x = adv_lane(args, p, l, r, None);
    }
    let (count, sum) = adv_tree(&mut lanes);
    let mean = adv_mean(count, sum);
    for (l, x) in lanes.iter_mut().enumerate() {
        *x = adv_lane(args, p, l, r, Some(mean));
    }
    let (_, squares) = adv_tree(&mut lanes);
    [mean, adv_std(count, squares)]
}

/// Advantage `a` as the loss uses it: `(a - mean) / (std + 1e-8)` with the minibatch's `moments` when the
/// trial normalizes (CleanRL's `norm_adv`), else `a`.
#[inline]
pub fn normalized_advantage(p: &PpoParams, a: f32, moments: [f32; 2]) -> f32 {
    if p.norm_adv != 0 { (a - moments[0]) / (moments[1] + 1e-8) } else { a }
}

/// Lanes of the gradient-norm sum: lane `l` of a trial sums the squares of its active gradients `l,
/// l + LANES, ...` (in [`active_param`] order, so the sum does not depend on the padded width of the
/// batch's layout) with FMAs, then the lanes are added in lane order ([`clip_scale`]).
pub const NORM_LANES: usize = 64;

/// The number of active parameters of a trial of width `h` ([`active_param`]).
#[inline]
pub fn active_params(l: &Layout, h: usize) -> usize {
    let (d, o) = (l.input, l.outputs);
    h * d + h + h * h + h + o * h + o
}

/// The layout position of active parameter `a` of a trial of width `h`: W1 (`h x D`), b1, W2 (`h x h`),
/// b2, W3 (`O x h`), b3, each row-major.
#[inline]
pub fn active_param(l: &Layout, h: usize, a: usize) -> usize {
    let (d, s) = (l.input, l.hidden);
    let mut a = a;
    if a < h * d {
        return l.w1() + a;
    }
    a -= h * d;
    if a < h {
        return l.b1() + a;
    }
    a -= h;
    if a < h * h {
        return l.w2() + (a / h) * s + a % h;
    }
    a -= h * h;
    if a < h {
        return l.b2() + a;
    }
    a -= h;
    if a < l.outputs * h {
        return l.w3() + (a / h) * s + a % h;
    }
    l.b3() + (a - l.outputs * h)
}

/// Lane `lane`'s sum of squares over the active gradients of trial `p` (`g(i)`: the gradient at layout
/// position `i`).
#[inline]
pub fn norm_lane(lane: usize, l: &Layout, p: &PpoParams, g: impl Fn(usize) -> f32) -> f32 {
    let h = p.hidden as usize;
    let n = active_params(l, h);
    // Terms `lane, lane + NORM_LANES, ..` in order, loaded ahead of the sum ([`crate::net::fold_ahead`]).
    let terms = if lane < n { (n - lane).div_ceil(NORM_LANES) } else { 0 };
    crate::net::fold_ahead(
        terms,
        |k| g(active_param(l, h, lane + k * NORM_LANES)),
        0.0,
        |s, x| crate::tile::fma(x, x, s),
    )
}

/// Threads of a `ppo_norm` block (a block per trial).
pub const NORM_THREADS: u32 = 512;
/// Active gradients a `ppo_norm` block stages in shared memory at a time (16 a thread; a multiple of
/// [`NORM_LANES`], so a lane's terms keep their lane in every window): 32 KB.
pub const NORM_WINDOW: usize = 8192;
const _: () = assert!(NORM_WINDOW.is_multiple_of(NORM_LANES) && NORM_WINDOW.is_multiple_of(NORM_THREADS as usize));

/// [`norm_lane`]'s sum continued from `acc` over the active gradients `window` (the `window.len()` gradients
/// from a multiple of [`NORM_WINDOW`], in [`active_param`] order): its terms `lane, lane + NORM_LANES, ..`
/// in order, so that folding the windows in order gives [`norm_lane`]'s bits.
#[inline]
pub fn norm_window(lane: usize, window: &[f32], acc: f32) -> f32 {
    let terms = if lane < window.len() { (window.len() - lane).div_ceil(NORM_LANES) } else { 0 };
    crate::net::fold_ahead(terms, |k| window[lane + k * NORM_LANES], acc, |s, x| crate::tile::fma(x, x, s))
}

/// The factor a trial's gradient is multiplied by before Adam: `min(1, max_grad_norm / (norm + 1e-6))`
/// (PyTorch's `clip_grad_norm_`), `norm` the square root of the lanes' sum; 1 without clipping.
#[inline]
pub fn clip_scale(p: &PpoParams, lanes: &[f32]) -> f32 {
    if p.max_grad_norm <= 0.0 {
        return 1.0;
    }
    let sq = crate::net::fold_ahead(NORM_LANES, |i| lanes[i], 0.0, |s, x| s + x);
    let c = p.max_grad_norm / (crate::sqrtf(sq) + 1e-6);
    if c < 1.0 { c } else { 1.0 }
}

/// Column `c` of the observation of the transition in rollout slot `slot` (features of its bar, then its
/// portfolio floats); 0 without a slot.
#[inline]
pub fn gather_entry(ring: &[Transition], features: &[f32], n_features: usize, slot: Option<usize>, c: usize) -> f32 {
    let Some(slot) = slot else { return 0.0 };
    let t = &ring[slot];
    gather_column(features, n_features, t.bar, |k| t.state[k], c)
}

/// Column `c` of [`gather_entry`] for a transition at bar `bar` whose portfolio floats `state(k)` gives (read
/// only for the last 3 columns, one element): the GPU gather passes the bar it found once per sample.
#[inline]
pub fn gather_column(features: &[f32], n_features: usize, bar: u32, state: impl FnOnce(usize) -> f32, c: usize) -> f32 {
    if c < n_features { features[bar as usize * n_features + c] } else { state(c - n_features) }
}

/// Adam step of one parameter with its gradient `g` (already clipped) at the trial's update `update`
/// (0-based) of rollout `rollout` (the learning rate's schedule, [`learning_rate`]).
#[inline]
pub fn adam_step(p: &PpoParams, g: f32, w: &mut f32, m: &mut f32, v: &mut f32, update: u64, rollout: u64) {
    crate::mlp::adam(w, m, v, g, learning_rate(p, rollout), p.beta1, p.beta2, p.adam_eps, update + 1);
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
    /// The rollout index (`(trial x steps + slot) x E + e`) of the log-probability and value; `None` after
    /// the last step (`slot >= steps`): then the value is the env's bootstrap (index `env`) and no
    /// log-probability is kept.
    pub rollout: Option<usize>,
}

/// Acting for env `env` at rollout step `slot` from its trial's outputs `out` (3 logits and the value): the
/// action ([`choose`]) and the routing of its log-probability and value. The PTX shim and the CPU backend
/// both call this.
#[inline]
pub fn act_env(env: usize, args: &PpoArgs, p: &PpoParams, out: &[f32], slot: u32) -> ActOutput {
    let (action, logp, value) = choose(env, args, p, out);
    let ept = args.envs_per_trial as usize;
    let rollout = (slot < args.steps).then(|| ((env / ept) * args.steps as usize + slot as usize) * ept + env % ept);
    ActOutput { action, logp, value, rollout }
}

/// The observation of minibatch sample `j` of trial `p` at update `args.counter` ([`minibatch_slot`], then
/// [`gather_entry`] for every column of `row`); zeros for a zero-weight sample.
#[inline]
pub fn gather_row(args: &PpoArgs, p: &PpoParams, j: usize, ring: &[Transition], features: &[f32], row: &mut [f32]) {
    let slot = minibatch_slot(args, p, j, ring);
    let n_features = args.input as usize - 3;
    for (c, x) in row.iter_mut().enumerate() {
        *x = gather_entry(ring, features, n_features, slot, c);
    }
}

/// Minibatch samples per block of the GPU's gather: the block's first threads find the samples' rollout
/// slots (a shuffle each, once per sample), then all its threads copy the rows' columns (the values of
/// [`gather_row`]).
pub const GATHER_ROWS: usize = 32;
/// Elements a thread of a row-gathering kernel loads before it stores them.
pub const GATHER_AHEAD: usize = 8;

/// Loss and output gradient (`dout`) of minibatch sample `j` of trial `p` from its forward outputs `out`
/// ([`minibatch_sample`] with the minibatch's advantage `moments`, [`loss_sample`]). `None` when the trial
/// sits this update out ([`trial_update`]): its losses stay those of its last update (`dout` is still
/// written: zeros).
#[inline]
pub fn sample_loss(
    args: &PpoArgs,
    p: &PpoParams,
    j: usize,
    r: &Rollout,
    moments: [f32; 2],
    out: &[f32],
    dout: &mut [f32],
) -> Option<f32> {
    let sample = minibatch_sample(args, p, j, r, moments).map(|(_, s)| s);
    let loss = loss_sample(j, p, out, sample, dout);
    trial_update(p, args).map(|_| loss)
}

/// The update of one parameter of trial `p`: its gradient `g` clipped by the trial's norm lanes
/// ([`clip_scale`]) and the Adam step at the trial's own update number ([`adam_step`]); nothing for a trial
/// that sits this update out.
#[inline]
pub fn update_weight(args: &PpoArgs, p: &PpoParams, lanes: &[f32], g: f32, w: &mut f32, m: &mut f32, v: &mut f32) {
    if let Some(u) = trial_update(p, args) {
        adam_step(p, g * clip_scale(p, lanes), w, m, v, u, trial_rollout(p, args.rollout));
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// `ppo_norm` stages the active gradients in windows and folds each lane over them in turn: the same bits
    /// as `norm_lane`'s one pass, for sizes below, at and past a window.
    #[test]
    fn norm_lanes_over_windows_are_the_one_pass_sums() {
        let l = Layout::actor_critic(54, 128);
        for h in [1usize, 7, 64, 128] {
            let n = active_params(&l, h);
            let g: Vec<f32> = (0..l.params()).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * 1.0e-3).collect();
            let active: Vec<f32> = (0..n).map(|a| g[active_param(&l, h, a)]).collect();
            let p = PpoParams { hidden: h as u32, ..PpoParams::default() };
            for lane in [0, 1, 17, NORM_LANES - 1] {
                let whole = norm_lane(lane, &l, &p, |i| g[i]);
                let windows = active.chunks(NORM_WINDOW).fold(0.0, |acc, w| norm_window(lane, w, acc));
                assert_eq!(windows.to_bits(), whole.to_bits(), "h {h}, lane {lane}, {n} gradients");
            }
            assert!(n <= NORM_WINDOW || h == 128, "h {h}: {n} gradients");
        }
    }

    /// `gae_env` reads its steps in groups ahead of its writes: the same bits as the plain backward
    /// recursion, for rollouts shorter than, equal to and past a group, with done, truncated and invalid steps.
    #[test]
    fn gae_in_groups_is_the_step_by_step_recursion() {
        let (envs, gamma, lambda, bootstrap) = (3usize, 0.99f32, 0.95f32, 0.37f32);
        for steps in [1usize, 7, 8, 9, 29] {
            let n = steps * envs;
            let ring: Vec<Transition> = (0..n)
                .map(|i| Transition {
                    reward: ((i * 37 % 17) as f32 - 8.0) * 0.01,
                    done: [0, 0, 0, crate::types::TRUNCATED, 1][i % 5],
                    valid: u8::from(i % 11 != 4),
                    ..Transition::default()
                })
                .collect();
            let values: Vec<f32> = (0..n).map(|i| ((i * 53 % 23) as f32 - 11.0) * 0.03).collect();
            for e in 0..envs {
                let mut got = vec![(0.0f32, 0.0f32); n];
                gae_env(e, envs, steps, gamma, lambda, &ring, &values, bootstrap, |i, a, r| got[i] = (a, r));
                let (mut next_value, mut gae) = (bootstrap, 0.0f32);
                for t in (0..steps).rev() {
                    let i = t * envs + e;
                    let tr = &ring[i];
                    let want = if tr.valid == 0 {
                        (gae, next_value) = (0.0, 0.0);
                        (0.0, 0.0)
                    } else {
                        let (next, carry) = match tr.done {
                            0 => (next_value, 1.0),
                            crate::types::TRUNCATED => (bootstrap, 0.0),
                            _ => (0.0, 0.0),
                        };
                        gae = tr.reward + gamma * next - values[i] + gamma * lambda * carry * gae;
                        next_value = values[i];
                        (gae, gae + values[i])
                    };
                    assert_eq!(got[i].0.to_bits(), want.0.to_bits(), "steps {steps}, env {e}, t {t}");
                    assert_eq!(got[i].1.to_bits(), want.1.to_bits(), "steps {steps}, env {e}, t {t}");
                }
            }
        }
    }

    #[test]
    fn permute_is_a_bijection_of_any_size() {
        for n in [1u64, 2, 3, 5, 16, 17, 100, 1_000, 4_097] {
            let keys = [n, 7, 11, 13];
            let mut seen = vec![false; n as usize];
            for q in 0..n {
                let s = permute(q, n, &keys) as usize;
                assert!(!seen[s], "n {n}: {s} twice");
                seen[s] = true;
            }
        }
        // Different epochs shuffle differently.
        let a: Vec<u64> = (0..100).map(|q| shuffled(q, 100, 1, 2, 0, 0)).collect();
        let b: Vec<u64> = (0..100).map(|q| shuffled(q, 100, 1, 2, 0, 1)).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<u64>>(), "not the identity");
    }

    fn ring(n: usize, invalid: &[usize]) -> Vec<Transition> {
        (0..n).map(|i| Transition { valid: u8::from(!invalid.contains(&i)), ..Transition::default() }).collect()
    }

    /// With a split, each update epoch uses every valid transition exactly once over its minibatches; the
    /// last minibatch is short when the split does not divide the rollout; positions of invalid slots are
    /// zero-weight samples.
    #[test]
    fn a_split_epoch_uses_every_transition_once() {
        let (steps, envs) = (10u32, 7u32);
        let n = (steps * envs) as usize;
        let ring = ring(n, &[3, 40]);
        let p = PpoParams { minibatches: 4, epochs: 2, batch: split_batch(n, 4), key: 5, ..PpoParams::default() };
        assert_eq!((p.batch, updates_per_rollout(&p, n)), (18, 8));
        for rollout in 0..2u64 {
            for epoch in 0..2u64 {
                let mut count = vec![0u32; n];
                let mut empty = 0;
                for m in 0..4u64 {
                    let args = PpoArgs {
                        steps,
                        envs_per_trial: envs,
                        seed: 9,
                        counter: epoch * 4 + m,
                        rollout,
                        ..PpoArgs::default()
                    };
                    for j in 0..p.batch as usize + 3 {
                        match minibatch_slot(&args, &p, j, &ring) {
                            Some(s) => count[s] += 1,
                            None => empty += 1,
                        }
                    }
                }
                let want: Vec<u32> = (0..n).map(|i| u32::from(i != 3 && i != 40)).collect();
                assert_eq!(count, want, "rollout {rollout} epoch {epoch}");
                // 4 x 18 = 72 positions for 70 slots, 2 of them invalid, and 3 past the batch per minibatch.
                assert_eq!(empty, 2 + 2 + 4 * 3);
            }
        }
        // After its 8 updates the trial sits out.
        let args = PpoArgs { steps, envs_per_trial: envs, counter: 8, ..PpoArgs::default() };
        assert_eq!(minibatch_slot(&args, &p, 0, &ring), None);
    }

    /// A minibatch's advantage moments are the mean and the unbiased standard deviation of exactly the
    /// samples the minibatch uses (invalid slots and a trial that sits the update out excluded); normalized
    /// advantages then have mean 0 and standard deviation 1; with `norm_adv = 0` they are left alone.
    #[test]
    fn minibatch_advantages_are_normalized_over_the_minibatch() {
        let (steps, envs) = (10u32, 7u32);
        let n = (steps * envs) as usize;
        let ring = ring(n, &[3, 40]);
        let advantages: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 3.0) * 0.7 + (i as f32).sin()).collect();
        let r = Rollout { ring: &ring, logps: &[], values: &[], advantages: &advantages, returns: &[] };
        let p = PpoParams { minibatches: 4, epochs: 2, batch: split_batch(n, 4), key: 5, ..PpoParams::default() };
        for counter in 0..8u64 {
            let args = PpoArgs { steps, envs_per_trial: envs, seed: 9, counter, ..PpoArgs::default() };
            let used: Vec<f64> = (0..p.batch as usize)
                .filter_map(|j| minibatch_slot(&args, &p, j, &ring))
                .map(|s| f64::from(advantages[s]))
                .collect();
            let k = used.len() as f64;
            let mean = used.iter().sum::<f64>() / k;
            let std = (used.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
            let [m, sd] = adv_moments(&args, &p, &r);
            assert!(
                (f64::from(m) - mean).abs() < 1e-5 && (f64::from(sd) - std).abs() < 1e-5,
                "{m} {sd} vs {mean} {std}"
            );
            let normed: Vec<f64> =
                used.iter().map(|&a| f64::from(normalized_advantage(&p, a as f32, [m, sd]))).collect();
            let nm = normed.iter().sum::<f64>() / k;
            let nsd = (normed.iter().map(|a| (a - nm).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
            assert!(nm.abs() < 1e-5 && (nsd - 1.0).abs() < 1e-4, "normalized mean {nm}, std {nsd}");
            let off = PpoParams { norm_adv: 0, ..p };
            assert_eq!(normalized_advantage(&off, 1.25, [m, sd]), 1.25);
        }
        // A trial that sits the update out has an empty minibatch: moments 0.
        let args = PpoArgs { steps, envs_per_trial: envs, counter: 8, ..PpoArgs::default() };
        assert_eq!(adv_moments(&args, &p, &r), [0.0, 0.0]);
        // One sample: no deviation (torch.std would give NaN), its normalized advantage 0.
        assert_eq!(adv_std(1, 0.0), 0.0);
        assert_eq!(normalized_advantage(&p, 2.0, [2.0, 0.0]), 0.0);
    }

    /// ReLU through `activate` is the old `max(x, 0)` with NaN to 0, and its gradient the old mask; Tanh's
    /// gradient is `d (1 - y^2)`.
    #[test]
    fn activations_and_their_gradients() {
        use crate::mlp::{ACT_RELU, ACT_TANH, activate, activate_grad};
        for x in [-2.5f32, -0.0, 0.0, 1e-30, 3.75, f32::NAN] {
            let relu = if x > 0.0 { x } else { 0.0 };
            assert_eq!(activate(ACT_RELU, x).to_bits(), relu.to_bits());
            assert_eq!(activate_grad(ACT_RELU, 1.5, x).to_bits(), (if x > 0.0 { 1.5f32 } else { 0.0 }).to_bits());
        }
        assert_eq!(activate(ACT_TANH, 0.5), crate::mlp::tanh(0.5));
        let y = activate(ACT_TANH, 0.5);
        assert_eq!(activate_grad(ACT_TANH, 2.0, y), 2.0 * (1.0 - y * y));
        assert!(activate(ACT_TANH, 30.0) <= 1.0 && activate(ACT_TANH, -30.0) >= -1.0);
    }

    #[test]
    fn the_gradient_is_clipped_to_its_norm() {
        let layout = Layout::actor_critic(5, 8);
        let p = PpoParams { max_grad_norm: 0.5, hidden: 8, ..PpoParams::default() };
        let lanes_of =
            |g: &[f32]| -> Vec<f32> { (0..NORM_LANES).map(|l| norm_lane(l, &layout, &p, |i| g[i])).collect() };
        assert_eq!(active_params(&layout, 8), layout.params());
        // Norm 5 (3 and 4 in two of the parameters, in different lanes).
        let mut g = vec![0.0f32; layout.params()];
        (g[7], g[130]) = (3.0, 4.0);
        let scale = clip_scale(&p, &lanes_of(&g));
        assert!((scale - 0.1).abs() < 1e-6, "{scale}");
        g[7] = 0.03;
        g[130] = 0.04;
        assert_eq!(clip_scale(&p, &lanes_of(&g)), 1.0, "a small gradient is left alone");
        let off = PpoParams { max_grad_norm: 0.0, ..p };
        assert_eq!(clip_scale(&off, &lanes_of(&g)), 1.0);
    }

    /// The active parameters of a narrower trial map one to one onto its positions in a wider layout.
    #[test]
    fn active_parameters_cover_the_trial_once() {
        let wide = Layout::actor_critic(6, 16);
        let (h, n) = (11, active_params(&wide, 11));
        let mut seen = vec![false; wide.params()];
        for a in 0..n {
            let i = active_param(&wide, h, a);
            assert!(!seen[i], "{i} twice");
            seen[i] = true;
        }
        assert_eq!(seen.iter().filter(|&&s| s).count(), n);
        // Row 3 of W2 starts at its padded row.
        assert_eq!(active_param(&wide, h, 6 * h + h + 3 * h), wide.w2() + 3 * 16);
    }

    #[test]
    fn the_learning_rate_anneals_to_zero() {
        let p = PpoParams { lr: 1e-3, anneal_rollouts: 4, ..PpoParams::default() };
        let lrs: Vec<f32> = (0..6).map(|r| learning_rate(&p, r)).collect();
        assert_eq!(lrs, [1e-3, 0.75e-3, 0.5e-3, 0.25e-3, 0.0, 0.0]);
        assert_eq!(learning_rate(&PpoParams { anneal_rollouts: 0, ..p }, 3), 1e-3);
    }

    /// CleanRL's clipped value loss: 0.5 max((v - R)^2, (v_clip - R)^2) with v_clip within `clip` of the
    /// rollout's value; no value gradient where the clipped branch is the larger and clips.
    #[test]
    fn the_value_loss_is_clipped() {
        let p = PpoParams { batch: 1, clip: 0.2, vf_coef: 0.5, ent_coef: 0.0, ..PpoParams::default() };
        let sample = PpoSample { action: 0, logp_old: 0.0, advantage: 0.0, ret: 1.0, value_old: 0.0 };
        let value_grad = |p: &PpoParams, v: f32| {
            let mut dout = [0.0f32; ACTOR_CRITIC];
            let loss = loss_sample(0, p, &[0.0, 0.0, 0.0, v], Some(sample), &mut dout);
            (loss, dout[ACTIONS])
        };
        let policy_loss = -0.0; // advantage 0
        // v = 0.5 moved 0.5 > 0.2: clipped value 0.2, (0.2 - 1)^2 = 0.64 > (0.5 - 1)^2: no gradient.
        let (loss, g) = value_grad(&p, 0.5);
        assert_eq!(g, 0.0);
        assert!((loss - (policy_loss + 0.5 * 0.5 * 0.64)).abs() < 1e-6, "{loss}");
        // Inside the clip range: the plain gradient vf_coef (v - R).
        let (_, g) = value_grad(&p, 0.1);
        assert!((g - 0.5 * (0.1 - 1.0)).abs() < 1e-7, "{g}");
        // Moved away from the return (v = -0.5): the unclipped error (1.5 vs 1.2) is the larger: its gradient.
        let (_, g) = value_grad(&p, -0.5);
        assert!((g - 0.5 * (-0.5 - 1.0)).abs() < 1e-7, "{g}");
        // Off: the plain gradient at v = 0.5.
        let (_, g) = value_grad(&PpoParams { clip_vloss: 0, ..p }, 0.5);
        assert!((g - 0.5 * (0.5 - 1.0)).abs() < 1e-7, "{g}");
    }
}
