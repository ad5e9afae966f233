//! Data-snooping tests over a whole search: Hansen's (2005) test of superior predictive ability (SPA) and
//! Romano and Wolf's (2005) StepM, over the per-bar return differentials `d[t, k] = r_k[t] - b[t]` of the
//! models (the search's trials) against a benchmark, with the stationary bootstrap of Politis and Romano
//! (1994). The computation follows `arch.bootstrap.SPA` and `StepM` (Kevin Sheppard's `arch`, which
//! tests/evidence_spa.rs compares with): the same re-centring (lower, consistent, upper), the same
//! asymptotic variance of the differentials (the stationary bootstrap's kernel), the same percentile rule
//! for StepM's critical values. With `studentize`, every model's differential is divided by the standard
//! error of its mean before the maximum is taken (Hansen's statistic); without, the raw means are
//! compared (`arch`'s `compute`). The bootstrap draws are counter-based ([`gpu_kernels::rng`]), so the
//! result is a pure function of the data, the block length, the replications and the seed.

use gpu_kernels::rng::draw_u64;
use rayon::prelude::*;
use serde::Serialize;

use crate::Error;

/// The random stream of the bootstrap's draws.
const STREAM: u64 = 0x5ba;

/// How to run the tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpaConfig {
    /// Bootstrap replications.
    pub reps: usize,
    /// Mean block length of the stationary bootstrap (a new block starts with probability 1 / block).
    pub block: usize,
    /// The seed of the bootstrap's draws.
    pub seed: u64,
    /// Divide each differential by the standard error of its mean (Hansen's SPA) before the maximum.
    pub studentize: bool,
    /// StepM's family-wise error rate.
    pub size: f64,
}

/// The default mean block length for `bars` returns: `floor(sqrt(bars))`, `arch`'s default, at least 1.
pub fn default_block(bars: usize) -> usize {
    ((bars as f64).sqrt().floor() as usize).max(1)
}

/// SPA's p-values and StepM's superior models.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpaResult {
    /// P-value that re-centres only models that beat the benchmark in sample (a lower bound).
    pub lower: f64,
    /// Hansen's consistent p-value: models far below the benchmark (by `sqrt(2 ln ln T)` standard errors)
    /// are not re-centred.
    pub consistent: f64,
    /// White's Reality Check: every model re-centred (an upper bound).
    pub upper: f64,
    /// StepM (consistent critical values, family-wise error rate `size`): the models shown to beat the
    /// benchmark, by index, ascending.
    pub superior: Vec<usize>,
    /// Models compared.
    pub models: usize,
    /// Returns per model.
    pub bars: usize,
    /// Mean block length.
    pub block: usize,
    /// Replications.
    pub reps: usize,
    /// Whether the statistic was studentized.
    pub studentized: bool,
}

/// The asymptotic variance of each column's mean times T under the stationary bootstrap (Politis and
/// Romano 1994, eq. 2.4; `arch`'s `_compute_variance`): `g0 + 2 sum_i kappa_i g_i` over lags 1..T-1 with
/// `kappa_i = (1 - i/T) q^i + (i/T) q^(T - i)`, `q = 1 - 1/block`, autocovariances `g_i` with divisor T.
/// In O(T) a column instead of O(T^2): with `C_i = sum_t x_t x_(t+i)` (x demeaned), the first part
/// `sum_i (1 - i/T) q^i C_i = sum_t x_t (y_t - z_t / T)` with `y_t = sum_i q^i x_(t+i)` and
/// `z_t = sum_i i q^i x_(t+i)` from the backward recursions `y_t = q (x_(t+1) + y_(t+1))`,
/// `z_t = q z_(t+1) + y_t`; the second `sum_i (i/T) q^(T-i) C_i = (1/T) sum_(t<s) (x_t q^t)(x_s q^(T-s)) (s - t)`
/// from running sums of `x_t q^t` and `t x_t q^t`.
pub fn kernel_variance(diff: &[Vec<f64>], block: usize) -> Vec<f64> {
    let q = 1.0 - 1.0 / block as f64;
    diff.par_iter()
        .map(|col| {
            let t = col.len();
            let n = t as f64;
            let mean = col.iter().sum::<f64>() / n;
            let x: Vec<f64> = col.iter().map(|v| v - mean).collect();
            let g0 = x.iter().map(|v| v * v).sum::<f64>() / n;
            let (mut y, mut z, mut first) = (0.0, 0.0, 0.0);
            for s in (0..t.saturating_sub(1)).rev() {
                y = q * (x[s + 1] + y);
                z = q * z + y;
                first += x[s] * (y - z / n);
            }
            // The powers of q by running products (0 once they underflow, where they are negligible).
            let q_to: Vec<f64> = std::iter::successors(Some(1.0), |p| Some(p * q)).take(t + 1).collect();
            let (mut a, mut ta, mut second) = (0.0, 0.0, 0.0);
            for s in 0..t {
                second += x[s] * q_to[t - s] * (s as f64 * a - ta);
                a += x[s] * q_to[s];
                ta += s as f64 * x[s] * q_to[s];
            }
            g0 + 2.0 * (first + second / n) / n
        })
        .collect()
}

/// The same variance summed lag by lag as `arch` does (O(T^2)): the reference of the unit test.
#[cfg(test)]
fn kernel_variance_direct(col: &[f64], block: usize) -> f64 {
    let (t, p) = (col.len(), 1.0 / block as f64);
    let mean = col.iter().sum::<f64>() / t as f64;
    let x: Vec<f64> = col.iter().map(|v| v - mean).collect();
    let mut var = x.iter().map(|v| v * v).sum::<f64>() / t as f64;
    for i in 1..t {
        let f = i as f64 / t as f64;
        let kappa = (1.0 - f) * (1.0 - p).powi(i as i32) + f * (1.0 - p).powi((t - i) as i32);
        let cross: f64 = x[..t - i].iter().zip(&x[i..]).map(|(a, b)| a * b).sum();
        var += 2.0 * kappa * cross / t as f64;
    }
    var
}

/// One replication of the stationary bootstrap of `t` indices as blocks `(start, length)` of consecutive
/// indices (wrapping at the end): index 0 is uniform; each following index starts a new uniform block with
/// probability `1 / block`, else follows its predecessor.
fn blocks(t: usize, block: usize, seed: u64, rep: usize) -> Vec<(usize, usize)> {
    let p = 1.0 / block as f64;
    let base = rep as u64 * 2 * t as u64;
    let uniform = |c: u64| (draw_u64(seed, STREAM, base + c) >> 11) as f64 / (1u64 << 53) as f64;
    let index = |c: u64| ((u128::from(draw_u64(seed, STREAM, base + c)) * t as u128) >> 64) as usize;
    let mut out = vec![(index(0), 1)];
    for i in 1..t as u64 {
        if uniform(2 * i) < p {
            out.push((index(2 * i + 1), 1));
        } else if let Some(last) = out.last_mut() {
            last.1 += 1;
        }
    }
    out
}

/// The sum of `col[start..start + len]` (wrapping) from its prefix sums.
fn block_sum(prefix: &[f64], t: usize, (start, len): (usize, usize)) -> f64 {
    if start + len <= t {
        prefix[start + len] - prefix[start]
    } else {
        (prefix[t] - prefix[start]) + prefix[start + len - t]
    }
}

/// The 100 q-th percentile of `xs` with linear interpolation between order statistics (numpy's default).
fn percentile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (pos - lo as f64) * (v[hi] - v[lo])
}

/// SPA and StepM of `models` (each a column of T per-bar returns) against `benchmark` (T returns): the
/// null is that no model's expected return exceeds the benchmark's.
pub fn spa(models: &[Vec<f64>], benchmark: &[f64], cfg: &SpaConfig) -> Result<SpaResult, Error> {
    let t = benchmark.len();
    if models.is_empty() || t < 3 || models.iter().any(|m| m.len() != t) {
        return Err(Error::Data(format!("SPA needs models of the benchmark's {t} (>= 3) returns each")));
    }
    if cfg.reps == 0 || cfg.block == 0 || !(cfg.size > 0.0 && cfg.size < 1.0) {
        return Err(Error::Data("SPA needs reps >= 1, a block >= 1 and a size in (0, 1)".to_owned()));
    }
    let diff: Vec<Vec<f64>> = models.iter().map(|m| m.iter().zip(benchmark).map(|(a, b)| a - b).collect()).collect();
    let k = diff.len();
    let means: Vec<f64> = diff.iter().map(|c| c.iter().sum::<f64>() / t as f64).collect();
    let var = kernel_variance(&diff, cfg.block);
    // A model far below the benchmark (beyond the law of the iterated logarithm's bound) is irrelevant to the
    // null's distribution and keeps mean 0 in the consistent re-centring.
    let bound = |j: usize| -((var[j] / t as f64) * 2.0 * (t as f64).ln().ln()).sqrt();
    let scale: Vec<f64> = (0..k)
        .map(|j| if cfg.studentize { (var[j] / t as f64).sqrt() } else { 1.0 })
        .map(|s| if s > 0.0 && s.is_finite() { s } else { 1.0 })
        .collect();
    let centre: [Vec<f64>; 3] = [
        means.iter().map(|&m| m.max(0.0)).collect(),
        (0..k).map(|j| if means[j] >= bound(j) { means[j] } else { 0.0 }).collect(),
        means.clone(),
    ];
    let prefix: Vec<Vec<f64>> = diff
        .iter()
        .map(|c| {
            let mut p = Vec::with_capacity(t + 1);
            let mut s = 0.0;
            p.push(0.0);
            for v in c {
                s += v;
                p.push(s);
            }
            p
        })
        .collect();
    // Each replication's bootstrap mean of every model, replication-major.
    let boot: Vec<Vec<f64>> = (0..cfg.reps)
        .into_par_iter()
        .map(|r| {
            let b = blocks(t, cfg.block, cfg.seed, r);
            prefix.iter().map(|p| b.iter().map(|&blk| block_sum(p, t, blk)).sum::<f64>() / t as f64).collect()
        })
        .collect();
    // The largest re-centred (scaled) bootstrap mean over the selected models, per replication.
    let max_sim = |c: &[f64], selected: &[bool]| -> Vec<f64> {
        boot.iter()
            .map(|m| {
                (0..k).filter(|&j| selected[j]).map(|j| (m[j] - c[j]) / scale[j]).fold(f64::NEG_INFINITY, f64::max)
            })
            .collect()
    };
    let all = vec![true; k];
    let observed = (0..k).map(|j| means[j] / scale[j]).fold(f64::NEG_INFINITY, f64::max);
    let p_of = |c: &[f64]| {
        let sims = max_sim(c, &all);
        sims.iter().filter(|&&s| s > observed).count() as f64 / cfg.reps as f64
    };
    let (lower, consistent, upper) = (p_of(&centre[0]), p_of(&centre[1]), p_of(&centre[2]));
    // StepM: reject the models above the consistent critical value, drop them, repeat on the rest.
    let mut selected = vec![true; k];
    let mut superior = Vec::new();
    loop {
        let crit = percentile(&max_sim(&centre[1], &selected), 1.0 - cfg.size);
        let better: Vec<usize> = (0..k).filter(|&j| selected[j] && means[j] / scale[j] > crit).collect();
        for &j in &better {
            selected[j] = false;
        }
        superior.extend_from_slice(&better);
        if better.is_empty() || superior.len() == k {
            break;
        }
    }
    superior.sort_unstable();
    Ok(SpaResult {
        lower,
        consistent,
        upper,
        superior,
        models: k,
        bars: t,
        block: cfg.block,
        reps: cfg.reps,
        studentized: cfg.studentize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stationary_bootstrap_covers_t_indices_in_blocks_of_the_mean_length() {
        let (t, block) = (10_000, 20);
        let b = blocks(t, block, 7, 3);
        assert_eq!(b.iter().map(|x| x.1).sum::<usize>(), t);
        assert!(b.iter().all(|&(s, l)| s < t && l >= 1));
        let mean_len = t as f64 / b.len() as f64;
        assert!((mean_len - block as f64).abs() < 3.0, "mean block {mean_len}");
        assert_eq!(b, blocks(t, block, 7, 3));
        assert_ne!(b, blocks(t, block, 7, 4));
    }

    #[test]
    fn the_linear_time_kernel_variance_is_the_lag_by_lag_sum() {
        for (t, block, k) in [(50, 3, 1), (400, 20, 2), (3, 1, 3), (1_000, 31, 4)] {
            let col: Vec<f64> = (0..t as u64)
                .map(|i| (draw_u64(k, 1, i) >> 11) as f64 / (1u64 << 53) as f64 - 0.4 + 0.3 * (i as f64 * 0.1).sin())
                .collect();
            let fast = kernel_variance(std::slice::from_ref(&col), block)[0];
            let direct = kernel_variance_direct(&col, block);
            assert!((fast - direct).abs() <= 1e-12 * direct.abs(), "T {t}, block {block}: {fast} against {direct}");
        }
    }

    #[test]
    fn a_wrapping_block_sums_across_the_end() {
        let prefix = [0.0, 1.0, 3.0, 6.0, 10.0]; // 1 2 3 4
        assert_eq!(block_sum(&prefix, 4, (1, 2)), 5.0);
        assert_eq!(block_sum(&prefix, 4, (3, 3)), 4.0 + 1.0 + 2.0);
        assert_eq!(percentile(&[3.0, 1.0, 2.0, 4.0], 0.5), 2.5);
    }

    #[test]
    fn a_model_far_above_the_benchmark_is_found_and_one_equal_to_it_is_not() {
        let t = 2_000;
        let noise = |k: u64| -> Vec<f64> {
            (0..t as u64).map(|i| (draw_u64(9, k, i) >> 11) as f64 / (1u64 << 53) as f64 - 0.5).collect()
        };
        let bench = noise(0);
        let same = noise(1);
        let better: Vec<f64> = noise(2).iter().map(|x| x + 0.1).collect();
        let cfg = SpaConfig { reps: 500, block: default_block(t), seed: 1, studentize: true, size: 0.05 };
        let r = spa(&[same.clone(), better], &bench, &cfg).unwrap();
        assert!(r.consistent < 0.01 && r.lower <= r.consistent && r.consistent <= r.upper, "{r:?}");
        assert_eq!(r.superior, vec![1]);
        let null = spa(&[same], &bench, &cfg).unwrap();
        assert!(null.consistent > 0.05 && null.superior.is_empty(), "{null:?}");
        assert_eq!(spa(&[noise(3)], &bench, &cfg).unwrap(), spa(&[noise(3)], &bench, &cfg).unwrap());
        assert!(spa(&[vec![0.0; 5]], &bench, &cfg).is_err());
    }
}
