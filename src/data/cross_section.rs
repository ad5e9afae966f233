//! The features of a universe (docs/FEATURES.md, "Universes"): each symbol's 51 features computed on its
//! own bars (no lookahead, its own warm-up) and carried to the calendar (a time without its bar shows its
//! last bar's row, zeros before its first), then the cross-sectional features of each time, from the bars
//! at that time only: the rank of each symbol's 1-bar and 20-bar log return among the symbols that have
//! one, the market's equal-weight 1-bar return and each symbol's return in excess of it.

use std::ops::Range;

use rayon::prelude::*;

use super::device::{columns, universe_market};
use super::features::{CLIP, FeatureMatrix, N_FEATURES, Normalizer, WARMUP};
use super::universe::Universe;
use crate::Error;
use tradesim_host::universe::UniverseData;

/// Cross-sectional features per symbol and time.
pub const N_CROSS_FEATURES: usize = 4;

/// Their names, in column order after the 51 ([`super::features::NAMES`]).
pub const CROSS_NAMES: [&str; N_CROSS_FEATURES] =
    ["xs_rank_ret_1", "xs_rank_ret_20", "xs_market_ret_1", "xs_excess_ret_1"];

/// Features per symbol and time in a universe: the 51 and the cross-sectional ones.
pub const N_UNIVERSE_FEATURES: usize = N_FEATURES + N_CROSS_FEATURES;

/// A universe's raw features, `times x symbols x` [`N_UNIVERSE_FEATURES`], time-major.
#[derive(Clone, Debug, PartialEq)]
pub struct UniverseFeatures {
    /// The values; `get(t, s, j)` is `values[(t x n_symbols + s) x N_UNIVERSE_FEATURES + j]`.
    pub values: Vec<f64>,
    /// Times (T).
    pub n_times: usize,
    /// Symbols (N).
    pub n_symbols: usize,
    /// 1 where the symbol has a bar at the time (it trades there), time-major.
    pub tradable: Vec<u8>,
    /// 1 where the symbol has a bar at the time and [`WARMUP`] bars of its own before it (its 51 features
    /// are defined): the cells a normalizer is fitted on.
    pub warm: Vec<u8>,
}

/// Average ranks (1-based, ties share their mean rank) of `values`, scaled to `[-0.5, 0.5]`:
/// `(rank - 1) / (m - 1) - 0.5`; 0 for each when fewer than 2.
fn scaled_ranks(values: &[f64]) -> Vec<f64> {
    let m = values.len();
    if m < 2 {
        return vec![0.0; m];
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
    let mut out = vec![0.0; m];
    let mut i = 0;
    while i < m {
        let mut j = i;
        while j + 1 < m && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = (rank - 1.0) / (m - 1) as f64 - 0.5;
        }
        i = j + 1;
    }
    out
}

impl UniverseFeatures {
    /// Computes every feature of `u`; the row of time t uses bars at or before t only.
    pub fn compute(u: &Universe) -> Result<Self, Error> {
        let (n_times, n) = (u.n_times(), u.n_symbols());
        let per_symbol: Vec<(Vec<f64>, FeatureMatrix)> = u
            .series
            .par_iter()
            .map(|series| {
                let cols = columns(series).map_err(|e| Error::Data(format!("symbol `{}`: {e}", series.symbol)))?;
                // From each symbol's second bar, over the bars it has so far: a late starter, or a calendar
                // shorter than the warm-up (a year of daily bars), has features where it trades, as the
                // learners see them on every part of the split.
                let features = FeatureMatrix::compute_from(&cols, 1);
                Ok((cols.close, features))
            })
            .collect::<Result<_, Error>>()?;
        let last = u.last_bar_indices();
        let width = N_UNIVERSE_FEATURES;
        let mut values = vec![0.0; n_times * n * width];
        let mut tradable = vec![0u8; n_times * n];
        let mut warm = vec![0u8; n_times * n];
        values
            .par_chunks_mut(n * width)
            .zip(tradable.par_chunks_mut(n))
            .zip(warm.par_chunks_mut(n))
            .enumerate()
            .for_each(|(t, ((row, flags), warm))| {
                let mut r1 = Vec::with_capacity(n);
                let mut r20 = Vec::with_capacity(n);
                for s in 0..n {
                    let cell = &mut row[s * width..(s + 1) * width];
                    if let Some(k) = last[t * n + s] {
                        cell[..N_FEATURES]
                            .copy_from_slice(&per_symbol[s].1.values[k * N_FEATURES..(k + 1) * N_FEATURES]);
                    }
                    let Some(i) = u.bar_index(t, s) else { continue };
                    flags[s] = 1;
                    warm[s] = u8::from(i >= WARMUP);
                    let close = &per_symbol[s].0;
                    if i >= 1 {
                        r1.push((s, close[i] / close[i - 1]));
                    }
                    if i >= 20 {
                        r20.push((s, (close[i] / close[i - 20]).ln()));
                    }
                }
                let logs: Vec<f64> = r1.iter().map(|&(_, g)| g.ln()).collect();
                for (&(s, _), rank) in r1.iter().zip(scaled_ranks(&logs)) {
                    row[s * width + N_FEATURES] = rank;
                }
                let r20_values: Vec<f64> = r20.iter().map(|&(_, r)| r).collect();
                for (&(s, _), rank) in r20.iter().zip(scaled_ranks(&r20_values)) {
                    row[s * width + N_FEATURES + 1] = rank;
                }
                let market =
                    if r1.is_empty() { 0.0 } else { r1.iter().map(|&(_, g)| g - 1.0).sum::<f64>() / r1.len() as f64 };
                for s in 0..n {
                    row[s * width + N_FEATURES + 2] = market;
                }
                for &(s, g) in &r1 {
                    row[s * width + N_FEATURES + 3] = (g - 1.0) - market;
                }
                for x in row.iter_mut() {
                    if !x.is_finite() {
                        *x = 0.0;
                    }
                }
            });
        Ok(Self { values, n_times, n_symbols: n, tradable, warm })
    }

    /// Feature `j` of symbol `s` at time `t`.
    pub fn get(&self, t: usize, s: usize, j: usize) -> f64 {
        self.values[(t * self.n_symbols + s) * N_UNIVERSE_FEATURES + j]
    }

    /// Means and standard deviations per feature over the warm cells of times `train` (population
    /// standard deviation; 1 for a feature constant there). A training part without a warm cell (a universe
    /// shorter than the features' warm-up, such as one year of daily bars) is fitted over all its cells:
    /// their values come from the bars up to each time (no lookahead), the slow features from fewer bars
    /// ([`FeatureMatrix::compute_from`]).
    pub fn fit(&self, train: Range<usize>) -> Normalizer {
        let all: Vec<(usize, usize)> =
            train.filter(|&t| t < self.n_times).flat_map(|t| (0..self.n_symbols).map(move |s| (t, s))).collect();
        let warm: Vec<(usize, usize)> =
            all.iter().copied().filter(|&(t, s)| self.warm[t * self.n_symbols + s] != 0).collect();
        let cells = if warm.is_empty() { all } else { warm };
        let count = cells.len().max(1) as f64;
        let mean: Vec<f64> =
            (0..N_UNIVERSE_FEATURES).map(|j| cells.iter().map(|&(t, s)| self.get(t, s, j) / count).sum()).collect();
        let std = (0..N_UNIVERSE_FEATURES)
            .map(|j| {
                let var: f64 = cells.iter().map(|&(t, s)| (self.get(t, s, j) - mean[j]).powi(2) / count).sum();
                if var > 1e-24 { var.sqrt() } else { 1.0 }
            })
            .collect();
        Normalizer { mean, std }
    }

    /// Times `range`, normalized with `norm` and clipped to +-[`CLIP`], as f32 (`range x symbols x`
    /// [`N_UNIVERSE_FEATURES`]).
    pub fn normalized(&self, norm: &Normalizer, range: Range<usize>) -> Vec<f32> {
        let (a, b) = (range.start * self.n_symbols, range.end * self.n_symbols);
        self.values[a * N_UNIVERSE_FEATURES..b * N_UNIVERSE_FEATURES]
            .chunks(N_UNIVERSE_FEATURES)
            .flat_map(|cell| {
                cell.iter()
                    .zip(norm.mean.iter().zip(&norm.std))
                    .map(|(x, (m, s))| ((x - m) / s).clamp(-CLIP, CLIP) as f32)
            })
            .collect()
    }
}

/// What the universe learners ([`tradesim_host::universe`]) train and walk on: the universe's price block
/// ([`universe_market`]) and its features ([`UniverseFeatures`]: the 51 per symbol and
/// the cross-sectional ones) normalized with the means and deviations of the times `train` (the learners'
/// training part: no later time informs them).
pub fn learner_data(u: &Universe, train: Range<usize>) -> Result<UniverseData, Error> {
    if train.is_empty() || train.end > u.n_times() {
        return Err(Error::Data(format!(
            "training times {train:?} must be a non-empty part of the universe's {} times",
            u.n_times()
        )));
    }
    let features = UniverseFeatures::compute(u)?;
    let norm = features.fit(train);
    let values = features.normalized(&norm, 0..u.n_times());
    Ok(UniverseData::new(universe_market(u)?, values, N_UNIVERSE_FEATURES)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ties share their rank: returns +10%, -5%, +10% rank 2.5, 1, 2.5 of 3, scaled 0.25, -0.5, 0.25.
    #[test]
    fn ranks_are_averaged_over_ties_and_scaled() {
        assert_eq!(scaled_ranks(&[0.1, -0.05, 0.1]), [0.25, -0.5, 0.25]);
        assert_eq!(scaled_ranks(&[3.0]), [0.0]);
        assert_eq!(scaled_ranks(&[1.0, 2.0, 3.0, 4.0, 5.0]), [-0.5, -0.25, 0.0, 0.25, 0.5]);
    }
}
