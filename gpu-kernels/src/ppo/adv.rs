//! A minibatch's advantage moments in a fixed order of lanes ([`adv_moments_of`]), from the advantages the gather
//! copies in minibatch order ([`minibatch_advantage`], [`gathered_moments`]), and the normalized advantage
//! ([`normalized_advantage`]).

use super::params::PpoParams;

/// Lanes of a minibatch's advantage moments: lane `l` of a trial folds the samples `j = l, l + ADV_LANES,
/// ..` of its minibatch in ascending order ([`adv_lane_of`]), then the lanes are added pairwise in a fixed
/// tree ([`adv_tree`]); the GPU runs a thread per lane (a block of `ADV_LANES` per trial), the CPU the lanes
/// one after another. A minibatch of CleanRL's split of 1,024 envs x 292 steps (74,752 samples) is 73
/// samples a lane.
pub const ADV_LANES: usize = 1024;

/// Samples of a lane whose gathered advantages are loaded before they are folded ([`gathered_lane`]: their
/// loads overlap; the fold's order does not depend on it).
const ADV_AHEAD: usize = 8;

/// The bits the gather writes for a minibatch sample without a rollout index ([`minibatch_advantage`]): a
/// signaling NaN, which no arithmetic produces (a NaN result is quiet), so no advantage of the rollout has them.
pub const NO_ADVANTAGE: u32 = 0x7f80_0001;

/// The advantage of a minibatch sample whose rollout index is `index` ([`rollout_index`](super::rollout_index)'s),
/// as the gather copies it in minibatch order: `advantages[s]`, or [`NO_ADVANTAGE`]'s bits without an index.
#[inline]
pub fn minibatch_advantage(index: Option<usize>, advantages: &[f32]) -> f32 {
    index.map_or(f32::from_bits(NO_ADVANTAGE), |s| advantages[s])
}

/// One sample folded into a lane's sum `acc`: its advantage `a`, or with `mean` its squared deviation from it
/// (`fma(d, d, acc)`).
#[inline]
fn adv_fold(acc: f32, a: f32, mean: Option<f32>) -> f32 {
    match mean {
        None => acc + a,
        Some(m) => crate::tile::fma(a - m, a - m, acc),
    }
}

/// Lane `lane` of a minibatch of `batch` samples whose rollout indices `index(j)` gives (`None`: the sample is
/// not used): the number of samples and their folded sum (`adv_fold`), in ascending sample order `j = lane,
/// lane + ADV_LANES, ..`.
#[inline]
pub fn adv_lane_of(
    batch: usize,
    lane: usize,
    index: impl Fn(usize) -> Option<usize>,
    advantages: &[f32],
    mean: Option<f32>,
) -> (u32, f32) {
    let (mut count, mut acc) = (0u32, 0.0f32);
    let mut j = lane;
    while j < batch {
        if let Some(s) = index(j) {
            count += 1;
            acc = adv_fold(acc, advantages[s], mean);
        }
        j += ADV_LANES;
    }
    (count, acc)
}

/// [`adv_lane_of`] from the minibatch's gathered advantages ([`minibatch_advantage`]'s, in minibatch order;
/// [`NO_ADVANTAGE`]: no sample): the same samples in the same order, so the same bits, with the loads of
/// `ADV_AHEAD` samples issued before they are folded (consecutive lanes load consecutive samples).
#[inline]
pub fn gathered_lane(batch: usize, lane: usize, gathered: &[f32], mean: Option<f32>) -> (u32, f32) {
    let gathered = &gathered[..batch];
    let (mut count, mut acc) = (0u32, 0.0f32);
    let mut j = lane;
    while j < batch {
        let values: [f32; ADV_AHEAD] = core::array::from_fn(|u| {
            let ju = j + u * ADV_LANES;
            if ju < batch { gathered[ju] } else { f32::from_bits(NO_ADVANTAGE) }
        });
        for &a in &values {
            if a.to_bits() != NO_ADVANTAGE {
                count += 1;
                acc = adv_fold(acc, a, mean);
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

/// The moments (mean, standard deviation) of a minibatch from its lanes, `lane(l, mean)` lane `l`'s count and
/// sum (with `mean`, of squared deviations): the lanes added in [`adv_tree`], the mean, then again.
fn moments_of_lanes(lane: impl Fn(usize, Option<f32>) -> (u32, f32)) -> [f32; 2] {
    let mut lanes = [(0u32, 0.0f32); ADV_LANES];
    for (l, x) in lanes.iter_mut().enumerate() {
        *x = lane(l, None);
    }
    let (count, sum) = adv_tree(&mut lanes);
    let mean = adv_mean(count, sum);
    for (l, x) in lanes.iter_mut().enumerate() {
        *x = lane(l, Some(mean));
    }
    let (_, squares) = adv_tree(&mut lanes);
    [mean, adv_std(count, squares)]
}

/// The moments (mean, standard deviation) of a minibatch of `batch` samples whose rollout indices `index(j)`
/// gives ([`adv_lane_of`]'s lanes, then [`adv_tree`], twice): what [`gathered_moments`] computes.
pub fn adv_moments_of(batch: usize, index: impl Fn(usize) -> Option<usize>, advantages: &[f32]) -> [f32; 2] {
    moments_of_lanes(|l, mean| adv_lane_of(batch, l, &index, advantages, mean))
}

/// The moments of a minibatch of `batch` samples from its gathered advantages ([`minibatch_advantage`]'s;
/// [`gathered_lane`]'s lanes): [`adv_moments_of`]'s bits, the CPU's form of the `ppo_adv` kernel.
pub fn gathered_moments(batch: usize, gathered: &[f32]) -> [f32; 2] {
    moments_of_lanes(|l, mean| gathered_lane(batch, l, gathered, mean))
}

/// Advantage `a` as the loss uses it: `(a - mean) / (std + 1e-8)` with the minibatch's `moments` when the
/// trial normalizes (CleanRL's `norm_adv`), else `a`.
#[inline]
pub fn normalized_advantage(p: &PpoParams, a: f32, moments: [f32; 2]) -> f32 {
    if p.norm_adv != 0 { (a - moments[0]) / (moments[1] + 1e-8) } else { a }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::ppo::tests::ring;
    use crate::ppo::{PpoArgs, Rollout, rollout_index, split_batch, updates_per_rollout};
    use std::vec::Vec;

    /// A minibatch's advantage moments are the mean and the unbiased standard deviation of exactly the
    /// samples the minibatch uses (invalid transitions and a trial that sits the update out excluded); normalized
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
                .filter_map(|j| rollout_index(&args, &p, j, &ring))
                .map(|s| f64::from(advantages[s]))
                .collect();
            let k = used.len() as f64;
            let mean = used.iter().sum::<f64>() / k;
            let std = (used.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
            let [m, sd] = adv_moments_of(p.batch as usize, |j| rollout_index(&args, &p, j, r.ring), r.advantages);
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
        assert_eq!(adv_moments_of(p.batch as usize, |j| rollout_index(&args, &p, j, r.ring), r.advantages), [0.0, 0.0]);
        // One sample: no deviation (torch.std would give NaN), its normalized advantage 0.
        assert_eq!(adv_std(1, 0.0), 0.0);
        assert_eq!(normalized_advantage(&p, 2.0, [2.0, 0.0]), 0.0);
    }

    /// The moments from the gathered advantages are the moments from the rollout indices, bit for bit, at every
    /// update of two rollouts (every minibatch of every epoch, then the updates the trial sits out): a rollout
    /// of 37 x 700 = 25,900 transitions with invalid ones, split into 3 minibatches of 8,634 (lanes of 8 and 9
    /// samples, so more than one round of `ADV_AHEAD` loads) in a buffer of 8,700 rows, and advantages of
    /// mixed magnitudes and signs, -0.0 and subnormals among them.
    #[test]
    fn gathered_moments_are_the_rollout_indices_moments() {
        let (steps, envs) = (37u32, 700u32);
        let n = (steps * envs) as usize;
        let invalid: Vec<usize> = (0..n).filter(|i| i % 97 == 5 || (1_000..1_040).contains(i)).collect();
        let ring = ring(n, &invalid);
        let advantages: Vec<f32> = (0..n)
            .map(|i| match i % 13 {
                0 => -0.0,
                1 => f32::from_bits(3 + i as u32 % 7),
                2 => 1.0e6 * (i as f32).cos(),
                _ => (i as f32 * 0.37).sin() * (1 + i % 5) as f32 - 0.25,
            })
            .collect();
        let p = PpoParams { minibatches: 3, epochs: 2, batch: split_batch(n, 3), key: 11, ..PpoParams::default() };
        let rows = 8_700;
        assert_eq!((p.batch, updates_per_rollout(&p, n)), (8_634, 6));
        assert!(p.batch as usize > ADV_AHEAD * ADV_LANES);
        for rollout in 0..2u64 {
            for counter in 0..8u64 {
                let args = PpoArgs { steps, envs_per_trial: envs, seed: 4, counter, rollout, ..PpoArgs::default() };
                let indices: Vec<Option<usize>> = (0..rows).map(|j| rollout_index(&args, &p, j, &ring)).collect();
                let gathered: Vec<f32> = indices.iter().map(|&s| minibatch_advantage(s, &advantages)).collect();
                let by_index = adv_moments_of(p.batch as usize, |j| indices[j], &advantages);
                let by_gathered = gathered_moments(p.batch as usize, &gathered);
                assert_eq!(
                    by_gathered.map(f32::to_bits),
                    by_index.map(f32::to_bits),
                    "rollout {rollout} update {counter}"
                );
                assert_eq!(by_index == [0.0; 2], counter >= 6, "only the updates sat out are empty");
            }
        }
    }

    /// No advantage has [`NO_ADVANTAGE`]'s bits: NaNs from arithmetic are quiet, and a NaN advantage makes
    /// both forms' moments NaN alike.
    #[test]
    fn no_advantage_is_no_arithmetic_result() {
        let zero = core::hint::black_box(0.0f32);
        let inf = core::hint::black_box(f32::INFINITY);
        for nan in [zero / zero, inf - inf, f32::NAN, -f32::NAN, f32::NAN * 2.0] {
            assert!(nan.is_nan() && nan.to_bits() != NO_ADVANTAGE, "{:#x}", nan.to_bits());
        }
        assert!(f32::from_bits(NO_ADVANTAGE).is_nan());
        let advantages = [1.0, f32::NAN, 2.0, 4.0];
        let indices = [Some(0), None, Some(1), Some(3), Some(2)];
        let gathered: Vec<f32> = indices.iter().map(|&s| minibatch_advantage(s, &advantages)).collect();
        assert_eq!(gathered[1].to_bits(), NO_ADVANTAGE);
        assert_eq!(gathered[3], 4.0);
        let (a, b) = (adv_moments_of(5, |j| indices[j], &advantages), gathered_moments(5, &gathered));
        assert!(a[0].is_nan() && b[0].is_nan() && a[1].is_nan() && b[1].is_nan());
    }
}
