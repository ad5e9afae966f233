//! The observation rows of minibatch samples, gathered from the rollout's transitions and the features.

use crate::types::Transition;

/// Column `c` of the observation of a transition at bar `bar` (features of its bar, then its portfolio
/// floats, which `state(k)` gives: read only for the last 3 columns, one element): the GPU gather passes the
/// bar it found once per sample.
#[inline]
pub fn gather_column(features: &[f32], n_features: usize, bar: u32, state: impl FnOnce(usize) -> f32, c: usize) -> f32 {
    if c < n_features { features[bar as usize * n_features + c] } else { state(c - n_features) }
}

/// The observation of the transition at rollout index `index` ([`rollout_index`](super::rollout_index)'s for
/// a minibatch sample): the values [`gather_column`] gives for every column of `row`, copied as two slices
/// (the `n_features` features of its bar, then its portfolio floats); zeros without an index.
#[inline]
pub fn gather_row(ring: &[Transition], features: &[f32], n_features: usize, index: Option<usize>, row: &mut [f32]) {
    let Some(index) = index else {
        row.fill(0.0);
        return;
    };
    let t = &ring[index];
    let at = t.bar as usize * n_features;
    let (market, portfolio) = row.split_at_mut(n_features);
    market.copy_from_slice(&features[at..at + n_features]);
    portfolio.copy_from_slice(&t.state[..portfolio.len()]);
}

/// Minibatch samples per block of the GPU's gather: the block's first threads find the samples' rollout
/// indices (a shuffle each, once per sample), then all its threads copy the rows' columns (the values of
/// [`gather_row`]).
pub const GATHER_ROWS: usize = 32;
/// Elements a thread of a row-gathering kernel loads before it stores them.
pub const GATHER_AHEAD: usize = 8;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// A gathered row is [`gather_column`]'s value in every column (the GPU gather's), and zeros without an index.
    #[test]
    fn gather_row_is_gather_column_of_every_column() {
        let n_features = 5;
        let features: Vec<f32> = (0..40).map(|i| i as f32 * 0.25 - 3.0).collect();
        let ring: Vec<Transition> = (0..4u32)
            .map(|i| Transition { bar: 2 * i + 1, state: [i as f32, -0.5, 0.125 * i as f32], ..Transition::default() })
            .collect();
        for index in [None, Some(0), Some(3)] {
            let mut row = [f32::NAN; 8];
            gather_row(&ring, &features, n_features, index, &mut row);
            for (c, x) in row.iter().enumerate() {
                let want =
                    index.map_or(0.0, |s| gather_column(&features, n_features, ring[s].bar, |k| ring[s].state[k], c));
                assert_eq!(x.to_bits(), want.to_bits(), "{index:?} {c}");
            }
        }
    }
}
