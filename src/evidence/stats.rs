//! The statistics of overfitting: Sharpe ratio moments, the probabilistic and deflated Sharpe ratios
//! (Bailey and López de Prado 2012, 2014), the minimum track record length, and the probability of
//! backtest overfitting by combinatorially symmetric cross-validation (Bailey, Borwein, López de Prado and
//! Zhu 2015). Plain functions on per-period returns; every Sharpe here is per period (not annualized).

use rayon::prelude::*;

use crate::Error;

/// The Euler-Mascheroni constant.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Simple returns of an equity curve: `e[i + 1] / e[i] - 1` (NaN where `e[i]` is not positive).
pub fn returns_from_equity(equity: &[f64]) -> Vec<f64> {
    equity.windows(2).map(|w| if w[0] > 0.0 { w[1] / w[0] - 1.0 } else { f64::NAN }).collect()
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Per-period Sharpe ratio `mean / std` (ddof = 1); NaN with fewer than 2 returns or no variance.
pub fn sharpe(r: &[f64]) -> f64 {
    if r.len() < 2 {
        return f64::NAN;
    }
    let m = mean(r);
    let var = r.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (r.len() - 1) as f64;
    if var > 0.0 { m / var.sqrt() } else { f64::NAN }
}

/// Population central moments 2, 3, 4.
fn moments(r: &[f64]) -> (f64, f64, f64) {
    let m = mean(r);
    let n = r.len() as f64;
    let (mut m2, mut m3, mut m4) = (0.0, 0.0, 0.0);
    for x in r {
        let d = x - m;
        m2 += d * d;
        m3 += d * d * d;
        m4 += d * d * d * d;
    }
    (m2 / n, m3 / n, m4 / n)
}

/// Skewness `m3 / m2^1.5` with population moments (the papers' gamma_3); 0 without variance.
pub fn skewness(r: &[f64]) -> f64 {
    let (m2, m3, _) = moments(r);
    if r.is_empty() || m2 <= 0.0 { 0.0 } else { m3 / m2.powf(1.5) }
}

/// Kurtosis `m4 / m2^2` with population moments, not excess (3 for a normal; the papers' gamma_4); 3
/// without variance.
pub fn kurtosis(r: &[f64]) -> f64 {
    let (m2, _, m4) = moments(r);
    if r.is_empty() || m2 <= 0.0 { 3.0 } else { m4 / (m2 * m2) }
}

/// The standard normal CDF, `erfc(-x / sqrt 2) / 2`.
pub fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal quantile: Acklam's rational approximation refined by one Halley step on
/// [`norm_cdf`] (full double precision). `p` outside (0, 1) gives -inf, +inf or NaN.
pub fn norm_ppf(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] =
        [7.784_695_709_041_462e-3, 3.224_671_290_700_398e-1, 2.445_134_137_142_996, 3.754_408_661_907_416];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // Halley's step: e = Phi(x) - p, u = e sqrt(2 pi) exp(x^2 / 2).
    let e = norm_cdf(x) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// The expected maximum Sharpe ratio of `n` independent skill-less trials whose Sharpe ratios have variance
/// `var_sharpe` (Bailey and López de Prado 2014, eq. 9, from the false strategy theorem):
/// `sqrt(V) ((1 - g) Z^-1(1 - 1/N) + g Z^-1(1 - 1/(N e)))`, g the Euler-Mascheroni constant. 0 for
/// `n <= 1` or `V <= 0` (nothing to deflate).
pub fn expected_max_sharpe(n: usize, var_sharpe: f64) -> f64 {
    if n <= 1 || var_sharpe.is_nan() || var_sharpe <= 0.0 {
        return 0.0;
    }
    let n = n as f64;
    var_sharpe.sqrt()
        * ((1.0 - EULER_GAMMA) * norm_ppf(1.0 - 1.0 / n)
            + EULER_GAMMA * norm_ppf(1.0 - 1.0 / (n * std::f64::consts::E)))
}

/// The probabilistic Sharpe ratio (Bailey and López de Prado 2012, eq. 5; the deflated Sharpe ratio of
/// 2014, eq. 2, with `sr_benchmark` the expected maximum): the probability that the true Sharpe exceeds
/// `sr_benchmark`, given the estimate `sr` from `n_obs` returns of skewness `skew` and (non-excess)
/// kurtosis `kurt`: `Phi((sr - sr*) sqrt(T - 1) / sqrt(1 - g3 sr + (g4 - 1) / 4 sr^2))`. NaN with fewer
/// than 2 observations, a NaN Sharpe or a non-positive denominator.
pub fn probabilistic_sharpe(sr: f64, sr_benchmark: f64, n_obs: usize, skew: f64, kurt: f64) -> f64 {
    let denominator = 1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr * sr;
    if n_obs < 2 || !sr.is_finite() || denominator.is_nan() || denominator <= 0.0 {
        return f64::NAN;
    }
    norm_cdf((sr - sr_benchmark) * ((n_obs - 1) as f64).sqrt() / denominator.sqrt())
}

/// The minimum track record length (Bailey and López de Prado 2012, eq. 11): the returns needed for `sr`
/// to exceed `sr_benchmark` with probability `confidence`:
/// `1 + (1 - g3 sr + (g4 - 1) / 4 sr^2) (Z_conf / (sr - sr*))^2`. +inf when `sr <= sr*` (no length is
/// enough); NaN for a NaN Sharpe.
pub fn min_track_record_length(sr: f64, sr_benchmark: f64, skew: f64, kurt: f64, confidence: f64) -> f64 {
    if !sr.is_finite() {
        return f64::NAN;
    }
    if sr <= sr_benchmark {
        return f64::INFINITY;
    }
    let z = norm_ppf(confidence);
    1.0 + (1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr * sr) * (z / (sr - sr_benchmark)).powi(2)
}

/// What CSCV found.
#[derive(Clone, Debug, PartialEq)]
pub struct Cscv {
    /// The share of splits whose logit is <= 0 (the in-sample best at or below the out-of-sample median).
    pub pbo: f64,
    /// Each split's logit `ln(w / (1 - w))`, `w` the selected trial's out-of-sample rank over N + 1, in the
    /// order of the splits (combinations of blocks in lexicographic order of their bit masks).
    pub logits: Vec<f64>,
    /// Least-squares slope of the selected trial's out-of-sample Sharpe on its in-sample Sharpe.
    pub degradation_slope: f64,
    /// The share of splits whose selected trial has a negative out-of-sample Sharpe.
    pub prob_loss: f64,
}

/// Probability of backtest overfitting by CSCV (Bailey, Borwein, López de Prado and Zhu 2015): `matrix`
/// holds `n_trials` rows of `n_obs` per-period returns (trial-major; a NaN return counts as 0: no position);
/// the rows are cut into `s_blocks` contiguous blocks of `n_obs / s_blocks` returns (the remainder at the
/// end is dropped); each of the C(S, S/2) choices of S/2 blocks is in-sample, the rest out-of-sample; the
/// performance is the Sharpe ratio of the concatenated blocks (from per-block sums and sums of squares);
/// the in-sample best (ties: the lowest trial) gets its out-of-sample rank (1 = worst, ties averaged) and
/// `w = rank / (N + 1)`. Splits run in parallel, each written at its index: the same bits every run.
pub fn pbo_cscv(matrix: &[f64], n_trials: usize, n_obs: usize, s_blocks: usize) -> Result<Cscv, Error> {
    if s_blocks < 2 || !s_blocks.is_multiple_of(2) || s_blocks > 30 {
        return Err(Error::config("pbo blocks", format!("{s_blocks} must be even, at least 2 and at most 30")));
    }
    if n_trials < 2 {
        return Err(Error::Data(format!("CSCV needs at least 2 trials, got {n_trials}")));
    }
    if matrix.len() != n_trials * n_obs {
        return Err(Error::Data(format!("CSCV: {} returns for {n_trials} trials x {n_obs} bars", matrix.len())));
    }
    let block = n_obs / s_blocks;
    if block < 2 {
        return Err(Error::Data(format!("CSCV: {n_obs} bars are too few for {s_blocks} blocks of 2 or more")));
    }
    // Per trial and block: count, sum and sum of squares of the returns.
    let mut sums = vec![(0.0f64, 0.0f64); n_trials * s_blocks];
    for t in 0..n_trials {
        for b in 0..s_blocks {
            let r = &matrix[t * n_obs + b * block..t * n_obs + (b + 1) * block];
            let (s, q) =
                r.iter().map(|x| if x.is_finite() { *x } else { 0.0 }).fold((0.0, 0.0), |(s, q), x| (s + x, q + x * x));
            sums[t * s_blocks + b] = (s, q);
        }
    }
    let half = s_blocks / 2;
    let masks: Vec<u32> = (0u32..(1 << s_blocks)).filter(|m| m.count_ones() as usize == half).collect();
    let n = (half * block) as f64;
    let perf = |t: usize, mask: u32, inside: bool| {
        let (mut s, mut q) = (0.0, 0.0);
        for b in 0..s_blocks {
            if ((mask >> b) & 1 == 1) == inside {
                let (bs, bq) = sums[t * s_blocks + b];
                s += bs;
                q += bq;
            }
        }
        let m = s / n;
        let var = (q - n * m * m) / (n - 1.0);
        if var > 0.0 { m / var.sqrt() } else { 0.0 }
    };
    let splits: Vec<(f64, f64, f64)> = masks
        .par_iter()
        .map(|&mask| {
            let is: Vec<f64> = (0..n_trials).map(|t| perf(t, mask, true)).collect();
            let best = (0..n_trials).fold(0, |b, t| if is[t] > is[b] { t } else { b });
            let oos: Vec<f64> = (0..n_trials).map(|t| perf(t, mask, false)).collect();
            let below = oos.iter().filter(|&&x| x < oos[best]).count() as f64;
            let equal = oos.iter().filter(|&&x| x == oos[best]).count() as f64;
            let rank = below + (equal + 1.0) / 2.0;
            let w = rank / (n_trials + 1) as f64;
            ((w / (1.0 - w)).ln(), is[best], oos[best])
        })
        .collect();
    let count = splits.len() as f64;
    let pbo = splits.iter().filter(|s| s.0 <= 0.0).count() as f64 / count;
    let prob_loss = splits.iter().filter(|s| s.2 < 0.0).count() as f64 / count;
    let (mx, my) = (splits.iter().map(|s| s.1).sum::<f64>() / count, splits.iter().map(|s| s.2).sum::<f64>() / count);
    let (sxy, sxx) = splits.iter().fold((0.0, 0.0), |(a, b), s| (a + (s.1 - mx) * (s.2 - my), b + (s.1 - mx).powi(2)));
    let degradation_slope = if sxx > 0.0 { sxy / sxx } else { f64::NAN };
    Ok(Cscv { pbo, logits: splits.iter().map(|s| s.0).collect(), degradation_slope, prob_loss })
}
