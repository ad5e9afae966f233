//! A minibatch sample's training inputs ([`sample_at`]) and its loss: clipped surrogate, value loss and
//! entropy bonus, with its output gradient.

use super::act::log_softmax;
use super::adv::normalized_advantage;
use super::minibatch::{Rollout, rollout_index};
use super::params::{PpoArgs, PpoParams, trial_update};
use crate::mlp::{ACTIONS, ACTOR_CRITIC};

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

/// The training inputs of the sample at rollout index `s`, the advantage normalized with the minibatch's
/// moments `moments` ([`adv_moments_of`](super::adv_moments_of)) when the trial asks ([`PpoParams::norm_adv`]).
#[inline]
pub fn sample_at(p: &PpoParams, s: usize, r: &Rollout, moments: [f32; 2]) -> PpoSample {
    PpoSample {
        action: r.ring[s].chosen,
        logp_old: r.logps[s],
        advantage: normalized_advantage(p, r.advantages[s], moments),
        ret: r.returns[s],
        value_old: r.values[s],
    }
}

/// Loss and output gradient (`dout`) of minibatch sample `j` of trial `p` from its forward outputs `out`
/// (its rollout index from [`rollout_index`], [`sample_at`] with the minibatch's advantage `moments`,
/// [`loss_sample`]). `None` when the trial sits this update out ([`trial_update`]): its losses stay those of
/// its last update (`dout` is still written: zeros).
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
    sample_loss_at(args, p, (j, rollout_index(args, p, j, r.ring)), r, moments, (out, dout))
}

/// [`sample_loss`] of sample `j` whose rollout index ([`rollout_index`]'s) the caller found: `index`.
#[inline]
pub fn sample_loss_at(
    args: &PpoArgs,
    p: &PpoParams,
    (j, index): (usize, Option<usize>),
    r: &Rollout,
    moments: [f32; 2],
    (out, dout): (&[f32], &mut [f32]),
) -> Option<f32> {
    let sample = index.map(|s| sample_at(p, s, r, moments));
    let loss = loss_sample(j, p, out, sample, dout);
    trial_update(p, args).map(|_| loss)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

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
