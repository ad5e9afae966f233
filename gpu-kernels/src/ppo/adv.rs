//! A minibatch's advantage moments in a fixed order of lanes ([`adv_moments_of`]) and the normalized advantage
//! ([`normalized_advantage`]).

use super::minibatch::{Rollout, rollout_index};
use super::params::{PpoArgs, PpoParams};

/// Lanes of a minibatch's advantage moments: lane `l` of a trial folds the samples `j = l, l + ADV_LANES,
/// ..` of its minibatch in ascending order ([`adv_lane`]), then the lanes are added pairwise in a fixed
/// tree ([`adv_tree`]); the GPU runs a thread per lane (a block of `ADV_LANES` per trial), the CPU the lanes
/// one after another. A minibatch of CleanRL's split of 1,024 envs x 292 steps (74,752 samples) is 73
/// samples a lane.
pub const ADV_LANES: usize = 1024;

/// Samples of a lane whose rollout indices are found before their advantages are loaded (their loads overlap).
const ADV_AHEAD: usize = 4;

/// Lane `lane` of trial `p`'s minibatch at update `args.counter` ([`rollout_index`]'s samples; none when the
/// trial sits the update out): [`adv_lane_of`].
#[inline]
pub fn adv_lane(args: &PpoArgs, p: &PpoParams, lane: usize, r: &Rollout, mean: Option<f32>) -> (u32, f32) {
    adv_lane_of(p.batch as usize, lane, |j| rollout_index(args, p, j, r.ring), r.advantages, mean)
}

/// Lane `lane` of a minibatch of `batch` samples whose rollout indices `index(j)` gives (`None`: the sample is
/// not used): the number of samples and the sum of their `advantages`, or with `mean` the sum of their
/// squared deviations from it (`fma(d, d, acc)`), in ascending sample order.
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
        let indices: [Option<usize>; ADV_AHEAD] = core::array::from_fn(|u| {
            let ju = j + u * ADV_LANES;
            if ju < batch { index(ju) } else { None }
        });
        let values: [f32; ADV_AHEAD] = core::array::from_fn(|u| indices[u].map_or(0.0, |s| advantages[s]));
        for (index, a) in indices.iter().zip(values) {
            if index.is_some() {
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

/// The moments (mean, standard deviation) of a minibatch of `batch` samples whose rollout indices `index(j)`
/// gives ([`adv_lane_of`]'s lanes, then [`adv_tree`], twice): the CPU's form of the `ppo_adv` kernel (the same
/// bits; the kernel's indices are [`rollout_index`]'s, which the CPU finds once per update).
pub fn adv_moments_of(batch: usize, index: impl Fn(usize) -> Option<usize>, advantages: &[f32]) -> [f32; 2] {
    let mut lanes = [(0u32, 0.0f32); ADV_LANES];
    for (l, x) in lanes.iter_mut().enumerate() {
        *x = adv_lane_of(batch, l, &index, advantages, None);
    }
    let (count, sum) = adv_tree(&mut lanes);
    let mean = adv_mean(count, sum);
    for (l, x) in lanes.iter_mut().enumerate() {
        *x = adv_lane_of(batch, l, &index, advantages, Some(mean));
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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::ppo::tests::ring;
    use crate::ppo::{PpoArgs, split_batch};
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
}
