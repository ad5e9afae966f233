//! The products of a small network's step, shared by the learners: three dense layers (input D -> H -> H
//! -> O) for K trials at once, acting for every env, forward passes over minibatches, the backward pass and
//! the weight gradients in chunks ([`plan`]), and the single-row form of a layer for sequential walks
//! ([`dense_unit`]). Every element follows [`crate::tile`]'s order, so the CPU and the GPU give the same bits.
//!
//! The files: the sizes here ([`NetArgs`], [`NetTrial`]) and the buffers' indices ([`buffers`]); the
//! training and acting buffers' regions (`work`); the products of each stage (`products`: [`plan`]); the
//! gradient chunks and in-order folds (`grad`); dot products and the single-row layer (`dot`); the greedy
//! walks' staged weights and shared-memory layouts (`walk`).

pub mod buffers;
mod dot;
mod grad;
mod products;
mod walk;
mod work;

pub use dot::{LayerView, dense_unit, dot_aligned, dot_strided, dots_aligned};
pub use grad::{FOLD_AHEAD, GRAD_CHUNK, MAX_GRAD_CHUNK, fold_ahead, grad_chunk, grad_chunks, gradient};
#[cfg(target_arch = "nvptx64")]
pub use products::gpu_loss_rows;
pub use products::{
    ACTING, AFTER_LOSS, BACKWARD, FORWARD, LOSS_THREADS, PASSES, PPO_LOSS_ROWS, Stage, TD_ROWS, dense, hidden_gradient,
    plan,
};
pub use walk::{
    WALK_LAYER_THREADS, WALK_OUTPUT_THREAD, WALK_REG_UNITS, WALK_REGS_THREADS, WALK_STATE_FLOATS, WALK_THREADS,
    WalkRegsShared, WalkShared, walk_layers, walk_regs_suit, walk_row_stride, walk_shared, walk_stage,
    walk_stage_floats, walk_stage_len,
};
pub use work::{ActWork, Work};

use crate::mlp::Layout;

/// Sizes of a learner's networks and buffers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NetArgs {
    /// Trials.
    pub n_trials: u32,
    /// Envs per trial (acting).
    pub envs_per_trial: u32,
    /// Input width D = F + 3.
    pub input: u32,
    /// Row stride H.
    pub hidden: u32,
    /// Outputs O (3 Q-values; or 3 logits and a value).
    pub outputs: u32,
    /// Samples per trial in the minibatch buffers (B).
    pub batch: u32,
    /// Bars in the price block.
    pub n_bars: u32,
    /// The hidden layers' activation ([`crate::mlp::ACT_RELU`] or [`crate::mlp::ACT_TANH`]).
    pub activation: u32,
}

const _: () = assert!(core::mem::size_of::<NetArgs>() == 32);

impl NetArgs {
    /// The sizes of `n_trials` networks of `outputs` outputs (the learners' `net()` build them).
    #[allow(clippy::too_many_arguments, reason = "every size of the learner's buffers")]
    pub fn new(
        n_trials: u32,
        envs_per_trial: u32,
        input: u32,
        hidden: u32,
        outputs: usize,
        batch: u32,
        n_bars: u32,
    ) -> Self {
        Self {
            n_trials,
            envs_per_trial,
            input,
            hidden,
            outputs: outputs as u32,
            batch,
            n_bars,
            activation: crate::mlp::ACT_RELU,
        }
    }

    /// The same sizes with the hidden layers' activation `activation`.
    pub fn with_activation(self, activation: u32) -> Self {
        Self { activation, ..self }
    }

    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        Layout {
            input: self.input as usize,
            hidden: self.hidden as usize,
            outputs: self.outputs as usize,
            activation: self.activation,
        }
    }

    /// Floats of the per-chunk weight gradients ([`gradient`] reads them): [`grad_chunks`]`(batch) x
    /// n_trials x params`, chunk-major.
    pub fn partial_len(&self) -> usize {
        grad_chunks(self.batch as usize) * self.n_trials as usize * self.layout().params()
    }
}

/// One trial's active sizes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct NetTrial {
    /// Active hidden width (<= H).
    pub hidden: u32,
    /// Active minibatch (<= B).
    pub batch: u32,
    /// Training forward passes ([`Stage::Forward`]): 1 (PPO), 2 (DQN), 3 (Double DQN).
    pub passes: u32,
    /// Keeps the size a multiple of 8.
    pub _pad: u32,
}
