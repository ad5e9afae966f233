//! The observation rows of minibatch samples, gathered from the rollout's transitions and the features.

use super::minibatch::minibatch_slot;
use super::params::{PpoArgs, PpoParams};
use crate::types::Transition;

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
