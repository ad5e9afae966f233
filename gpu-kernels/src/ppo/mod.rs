//! PPO on the actor-critic of [`crate::net`] (3 logits and a value): sampling actions for every env, GAE as a
//! reverse scan per env, and the clipped-surrogate update with a value loss and an entropy bonus over
//! minibatches drawn from the rollout. The layers, backward pass and gradients are the products of
//! [`crate::net::plan`]; the per-element rules between them ([`choose`], [`gae_env`], [`sample_at`],
//! [`gather_column`], [`loss_sample`]) are shared by the PTX entries and the CPU backend.
//!
//! The files: the hyperparameters, kernel arguments and update schedule (`params`); acting (`act`); GAE
//! (`gae`); the minibatches' shuffles and rollout indices (`minibatch`) and observation rows (`gather`); the
//! minibatch's advantage moments, from its advantages gathered in minibatch order (`adv`); a sample's training
//! inputs and loss (`loss`); the gradient-norm lanes, clipping and Adam (`update`); the kernels whose blocks
//! work as one, `ppo_gather`, `ppo_adv`, `ppo_loss` and `ppo_norm` (`blocks`, nvptx only).

mod act;
mod adv;
#[cfg(target_arch = "nvptx64")]
mod blocks;
mod gae;
mod gather;
mod loss;
mod minibatch;
mod params;
mod update;

pub use act::{ActOutput, act_env, choose, log_softmax};
pub use adv::{
    ADV_LANES, NO_ADVANTAGE, adv_lane_of, adv_mean, adv_moments_of, adv_pair, adv_std, adv_tree, gathered_lane,
    gathered_moments, minibatch_advantage, normalized_advantage,
};
pub use gae::{GAE_AHEAD, gae_env};
pub use gather::{GATHER_AHEAD, GATHER_ROWS, gather_column, gather_row};
pub use loss::{PpoSample, loss_sample, sample_at, sample_loss, sample_loss_at};
pub use minibatch::{Rollout, draw_rollout_index, permute, rollout_index, shuffled};
pub use params::{PpoArgs, PpoParams, learning_rate, split_batch, trial_rollout, trial_update, updates_per_rollout};
pub use update::{
    NORM_LANES, NORM_THREADS, NORM_WINDOW, active_param, active_params, adam_step, clip_scale, norm_lane, norm_window,
    update_weight,
};

#[cfg(test)]
mod tests {
    extern crate std;
    use crate::types::Transition;
    use std::vec::Vec;

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

    /// A rollout of `n` transitions, those in `invalid` not valid (the minibatch and advantage tests).
    pub(super) fn ring(n: usize, invalid: &[usize]) -> Vec<Transition> {
        (0..n).map(|i| Transition { valid: u8::from(!invalid.contains(&i)), ..Transition::default() }).collect()
    }
}
