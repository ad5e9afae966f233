//! The statistics that say how much of a search's best result is skill: the probabilistic and deflated Sharpe
//! ratios and the minimum track record length (Bailey and López de Prado 2012, 2014), and the probability of
//! backtest overfitting by combinatorially symmetric cross-validation (Bailey, Borwein, López de Prado and
//! Zhu 2015). Plain functions on `f64` slices; every Sharpe ratio here is per period (per bar), never
//! annualized.
//!
//! References:
//! - BL12: D. Bailey, M. López de Prado, "The Sharpe Ratio Efficient Frontier", Journal of Risk 15(2), 2012.
//! - BL14: D. Bailey, M. López de Prado, "The Deflated Sharpe Ratio: Correcting for Selection Bias, Backtest
//!   Overfitting and Non-Normality", Journal of Portfolio Management 40(5), 2014.
//! - BBLZ15: D. Bailey, J. Borwein, M. López de Prado, Q. J. Zhu, "The Probability of Backtest Overfitting",
//!   Journal of Computational Finance 20(4), 2017 (working paper 2015).

use rayon::prelude::*;

use crate::Error;

/// The Euler-Mascheroni constant γ of BL14's expected maximum.
pub const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Simple returns of an equity curve: `r_t = e_t / e_(t-1) - 1`, one fewer than the points; a return after
/// an equity at or below 0 (a ruined account, which holds nothing) is 0, so a finite curve gives finite
/// returns.
pub fn returns_from_equity(equity: &[f64]) -> Vec<f64> {
    equity.windows(2).map(|w| if w[0] > 0.0 { w[1] / w[0] - 1.0 } else { 0.0 }).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Whether every value is the same (no variance, whatever the rounding of the mean).
fn constant(xs: &[f64]) -> bool {
    xs.iter().all(|&x| x == xs[0])
}

/// The population central moment `m_k = (1/n) Σ (x_i - x̄)^k`.
fn central_moment(xs: &[f64], k: i32) -> f64 {
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(k)).sum::<f64>() / xs.len() as f64
}

/// The per-period Sharpe ratio `SR = x̄ / s` with the sample standard deviation
/// `s = sqrt(Σ (x_i - x̄)² / (n - 1))` (ddof = 1), no risk-free rate and no annualization. NaN when it is
/// undefined: fewer than 2 returns, zero variance, or a non-finite return.
pub fn sharpe(returns: &[f64]) -> f64 {
    let n = returns.len();
    if n < 2 || constant(returns) {
        return f64::NAN;
    }
    let m = mean(returns);
    let var = returns.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    if var > 0.0 { m / var.sqrt() } else { f64::NAN }
}

/// The skewness γ3 of BL14 from population moments: `γ3 = m3 / m2^(3/2)` (not bias-corrected; 0 for a
/// normal). NaN with fewer than 3 returns (2 returns always give 0, which says nothing) or zero variance.
pub fn skewness(returns: &[f64]) -> f64 {
    let m2 = central_moment(returns, 2);
    if returns.len() < 3 || constant(returns) || m2.is_nan() {
        return f64::NAN;
    }
    central_moment(returns, 3) / m2.powf(1.5)
}

/// The kurtosis γ4 of BL14 from population moments: `γ4 = m4 / m2²`, Pearson's, not excess (3 for a
/// normal). NaN with fewer than 3 returns or zero variance.
pub fn kurtosis(returns: &[f64]) -> f64 {
    let m2 = central_moment(returns, 2);
    if returns.len() < 3 || constant(returns) || m2.is_nan() {
        return f64::NAN;
    }
    central_moment(returns, 4) / (m2 * m2)
}

/// The standard normal CDF `Z(x) = erfc(-x / √2) / 2` (`libm`'s erfc), accurate in relative terms in the
/// lower tail.
pub fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The standard normal quantile `Z^-1(p)`: Acklam's rational approximation ([`crate::normal::acklam`])
/// refined by two Halley steps on [`norm_cdf`], to double precision. For `p > 1/2` it is `-Z^-1(1 - p)`, so
/// the refinement always runs in the lower tail where `Z` keeps its relative precision. `-inf` at 0, `+inf`
/// at 1, NaN outside `[0, 1]`.
pub fn norm_inv_cdf(p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p > 0.5 {
        return -norm_inv_cdf(1.0 - p);
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    let mut x = crate::normal::acklam(p);
    for _ in 0..2 {
        // Halley: with e = Z(x) - p and u = e / φ(x), x <- x - u / (1 + x u / 2).
        let u = (norm_cdf(x) - p) * (2.0 * std::f64::consts::PI).sqrt() * (0.5 * x * x).exp();
        x -= u / (1.0 + 0.5 * x * u);
    }
    x
}

/// The expected maximum Sharpe ratio of `n_trials` independent skill-less trials whose Sharpe ratios have
/// variance `var_sharpe` (BL14 eq. 1, the benchmark SR0 of the deflated Sharpe):
/// `E[max SR_n] ≈ sqrt(V) ((1 - γ) Z^-1(1 - 1/N) + γ Z^-1(1 - 1/(N e)))`, γ = [`EULER_GAMMA`].
/// 0 for one trial (nothing was selected) and for `V = 0`; NaN for no trials or a negative or NaN variance.
pub fn expected_max_sharpe(n_trials: usize, var_sharpe: f64) -> f64 {
    if n_trials == 0 || var_sharpe.is_nan() || var_sharpe < 0.0 {
        return f64::NAN;
    }
    if n_trials == 1 || var_sharpe == 0.0 {
        return 0.0;
    }
    let n = n_trials as f64;
    let z1 = norm_inv_cdf(1.0 - 1.0 / n);
    let z2 = norm_inv_cdf(1.0 - 1.0 / (n * std::f64::consts::E));
    var_sharpe.sqrt() * ((1.0 - EULER_GAMMA) * z1 + EULER_GAMMA * z2)
}

/// The variance factor of the Sharpe ratio's estimator under non-normal returns (BL12 eq. 3 times n - 1):
/// `1 - γ3 SR + (γ4 - 1)/4 SR²`. For population moments it is never negative (`γ4 >= 1 + γ3²`).
fn sharpe_variance_factor(sr: f64, skew: f64, kurt: f64) -> f64 {
    1.0 - skew * sr + (kurt - 1.0) / 4.0 * sr * sr
}

/// The probabilistic Sharpe ratio (BL12 eq. 5; BL14 eq. 2), the probability that the true Sharpe
/// exceeds `sr_benchmark` given the observed per-period `sr` over `n_obs` returns with skewness `skew` and
/// kurtosis `kurt` (not excess): `PSR = Z[(SR - SR*) sqrt(n - 1) / sqrt(1 - γ3 SR + (γ4 - 1)/4 SR²)]`.
/// NaN with fewer than 3 observations, any NaN input, or a variance factor that is not positive.
pub fn probabilistic_sharpe(sr: f64, sr_benchmark: f64, n_obs: usize, skew: f64, kurt: f64) -> f64 {
    let factor = sharpe_variance_factor(sr, skew, kurt);
    if n_obs < 3 || sr_benchmark.is_nan() || factor.is_nan() || factor <= 0.0 {
        return f64::NAN;
    }
    norm_cdf((sr - sr_benchmark) * ((n_obs - 1) as f64).sqrt() / factor.sqrt())
}

/// A deflated Sharpe ratio and what it was computed from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeflatedSharpe {
    /// DSR: the probability that the true Sharpe exceeds `sr0`.
    pub dsr: f64,
    /// The benchmark SR0 = E[max SR] of `n_trials` skill-less trials ([`expected_max_sharpe`]).
    pub sr0: f64,
    /// The observed per-period Sharpe ratio.
    pub sharpe: f64,
    /// Returns it was measured on.
    pub n_obs: usize,
    /// Skewness of those returns.
    pub skew: f64,
    /// Kurtosis of those returns (not excess).
    pub kurtosis: f64,
    /// Trials the selection was made from.
    pub n_trials: usize,
    /// Variance of the trials' per-period Sharpe ratios.
    pub var_sharpe: f64,
}

/// The deflated Sharpe ratio (BL14 eq. 2): the [`probabilistic_sharpe`] against the expected maximum of
/// `n_trials` skill-less trials, `DSR = PSR(SR0)` with `SR0 = E[max SR_n]` ([`expected_max_sharpe`]). With
/// one trial SR0 = 0 and the DSR is the PSR against 0; NaN where either part is.
pub fn deflated_sharpe(
    sr: f64,
    n_obs: usize,
    skew: f64,
    kurt: f64,
    n_trials: usize,
    var_sharpe: f64,
) -> DeflatedSharpe {
    let sr0 = expected_max_sharpe(n_trials, var_sharpe);
    DeflatedSharpe {
        dsr: probabilistic_sharpe(sr, sr0, n_obs, skew, kurt),
        sr0,
        sharpe: sr,
        n_obs,
        skew,
        kurtosis: kurt,
        n_trials,
        var_sharpe,
    }
}

/// The minimum track record length (BL12 eq. 9), in observations: how many returns with the same Sharpe,
/// skewness and kurtosis make `PSR(SR*) >= confidence`:
/// `MinTRL = 1 + (1 - γ3 SR + (γ4 - 1)/4 SR²) (Z^-1(confidence) / (SR - SR*))²`.
/// `+inf` when `sr <= sr_benchmark` (no record is long enough); NaN for a NaN input, a confidence outside
/// `(0, 1)` or a variance factor that is not positive.
pub fn min_track_record_length(sr: f64, sr_benchmark: f64, skew: f64, kurt: f64, confidence: f64) -> f64 {
    let factor = sharpe_variance_factor(sr, skew, kurt);
    if sr_benchmark.is_nan() || factor.is_nan() || factor <= 0.0 || !(confidence > 0.0 && confidence < 1.0) {
        return f64::NAN;
    }
    if sr <= sr_benchmark {
        return f64::INFINITY;
    }
    1.0 + factor * (norm_inv_cdf(confidence) / (sr - sr_benchmark)).powi(2)
}

/// The result of [`pbo_cscv`]: the probability of backtest overfitting and what each split saw, every
/// vector in split order (the lexicographic order of the in-sample block sets, as Python's
/// `itertools.combinations(range(S), S // 2)` lists them).
#[derive(Clone, Debug, PartialEq)]
pub struct Cscv {
    /// PBO: the share of splits whose logit is `<= 0`, i.e. whose in-sample best ranks at or below the
    /// out-of-sample median.
    pub pbo: f64,
    /// Blocks S.
    pub blocks: usize,
    /// Every split's logit `λ = ln(w / (1 - w))` of the selected trial's out-of-sample relative rank `w`.
    pub logits: Vec<f64>,
    /// Every split's in-sample Sharpe of the selected trial.
    pub is_sharpe: Vec<f64>,
    /// Every split's out-of-sample Sharpe of the selected trial.
    pub oos_sharpe: Vec<f64>,
    /// Least-squares slope of `oos_sharpe` on `is_sharpe` (performance degradation; NaN when every split
    /// selects the same in-sample Sharpe).
    pub degradation_slope: f64,
    /// The share of splits whose selected trial has an out-of-sample Sharpe below 0.
    pub prob_loss: f64,
}

impl Cscv {
    /// The logits in `bins` equal bins ([`logit_histogram`]).
    pub fn histogram(&self, bins: usize) -> Vec<(f64, f64, usize)> {
        logit_histogram(&self.logits, bins)
    }
}

/// The finite values of `logits` in `bins` equal bins from their minimum to their maximum (one bin of width
/// 1 from the minimum when all are equal): `(from, to, count)`; empty for no bins or no finite value.
pub fn logit_histogram(logits: &[f64], bins: usize) -> Vec<(f64, f64, usize)> {
    let finite = || logits.iter().copied().filter(|x| x.is_finite());
    let (lo, hi) = finite().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    if bins == 0 || lo > hi {
        return Vec::new();
    }
    let width = if hi > lo { (hi - lo) / bins as f64 } else { 1.0 };
    let mut counts = vec![0usize; bins];
    for x in finite() {
        counts[(((x - lo) / width) as usize).min(bins - 1)] += 1;
    }
    counts.into_iter().enumerate().map(|(i, n)| (lo + i as f64 * width, lo + (i + 1) as f64 * width, n)).collect()
}

/// Every set of `k` of `n` blocks as a bit mask, in lexicographic order of the sorted block indices.
fn combinations(n: usize, k: usize) -> Vec<u64> {
    let mut idx: Vec<usize> = (0..k).collect();
    let mut out = Vec::new();
    loop {
        out.push(idx.iter().fold(0u64, |m, &b| m | (1 << b)));
        let Some(i) = (0..k).rev().find(|&i| idx[i] < n - k + i) else { return out };
        idx[i] += 1;
        for j in i + 1..k {
            idx[j] = idx[j - 1] + 1;
        }
    }
}

/// The Sharpe ratio from a count, a sum and a sum of squares (ddof = 1); 0 when the variance is not positive
/// (a trial that took no risk in those blocks shows no edge), so every trial can be ranked.
fn sharpe_of_sums(n: f64, sum: f64, sum_sq: f64) -> f64 {
    let m = sum / n;
    let var = (sum_sq - sum * m) / (n - 1.0);
    if var > 0.0 { m / var.sqrt() } else { 0.0 }
}

/// Scratch buffers of one thread's splits: sums and sums of squares of one half per trial, and both
/// halves' Sharpe ratios.
struct SplitScratch {
    sum: Vec<f64>,
    sq: Vec<f64>,
    half: Vec<f64>,
    rest: Vec<f64>,
}

/// The per-block sums of [`pbo_cscv`], block-major, with each block's length and every trial's totals.
struct BlockSums {
    n_trials: usize,
    sums: Vec<f64>,
    sqs: Vec<f64>,
    lens: Vec<f64>,
    total_sum: Vec<f64>,
    total_sq: Vec<f64>,
}

/// What one split of CSCV saw: the selected trial's logit, in-sample Sharpe and out-of-sample Sharpe.
type SplitResult = (f64, f64, f64);

/// The split whose in-sample Sharpes are `is` and out-of-sample Sharpes `oos`: the in-sample best (a tie goes
/// to the lowest trial index), its average out-of-sample rank r among the N trials (1 = worst; tied trials
/// share their mean rank), `w = r / (N + 1)` in (0, 1) and the logit `ln(w / (1 - w))`.
fn select_and_rank(is: &[f64], oos: &[f64]) -> SplitResult {
    let (mut best, mut best_is) = (0, f64::NEG_INFINITY);
    for (t, &sr) in is.iter().enumerate() {
        if sr > best_is {
            (best, best_is) = (t, sr);
        }
    }
    let selected = oos[best];
    let (below, equal) = oos
        .iter()
        .fold((0usize, 0usize), |(b, e), &sr| (b + usize::from(sr < selected), e + usize::from(sr == selected)));
    // `equal` counts the selected trial itself.
    let rank = 1.0 + below as f64 + 0.5 * (equal - 1) as f64;
    let w = rank / (is.len() as f64 + 1.0);
    ((w / (1.0 - w)).ln(), best_is, selected)
}

/// The two splits of one set of blocks `mask` and its complement: one with `mask` in sample, one with it out
/// of sample. Both halves' Sharpe ratios are computed once: the half in `mask` from its blocks' sums, the
/// other from the totals less those.
fn split_pair(mask: u64, b: &BlockSums, s: &mut SplitScratch) -> (SplitResult, SplitResult) {
    let n_trials = b.n_trials;
    s.sum.iter_mut().for_each(|x| *x = 0.0);
    s.sq.iter_mut().for_each(|x| *x = 0.0);
    let mut n_half = 0.0;
    for (block, len) in b.lens.iter().enumerate().filter(|(block, _)| mask & (1 << block) != 0) {
        n_half += len;
        let range = block * n_trials..(block + 1) * n_trials;
        for ((acc, acc_sq), (x, x_sq)) in
            s.sum.iter_mut().zip(s.sq.iter_mut()).zip(b.sums[range.clone()].iter().zip(&b.sqs[range]))
        {
            *acc += x;
            *acc_sq += x_sq;
        }
    }
    let n_rest = b.lens.iter().sum::<f64>() - n_half;
    for t in 0..n_trials {
        s.half[t] = sharpe_of_sums(n_half, s.sum[t], s.sq[t]);
        s.rest[t] = sharpe_of_sums(n_rest, b.total_sum[t] - s.sum[t], b.total_sq[t] - s.sq[t]);
    }
    (select_and_rank(&s.half, &s.rest), select_and_rank(&s.rest, &s.half))
}

/// Per-block sums and sums of squares of `matrix`, block-major (`[block * n_trials + trial]`), in bar order.
/// Block `b` covers bars `[b L, (b + 1) L)` with `L = n_obs / S`; the last block also takes the remainder.
/// Refuses a non-finite return, named by trial and bar (found by its non-finite sums, then searched).
fn block_sums(matrix: &[f64], n_trials: usize, n_obs: usize, blocks: usize) -> Result<BlockSums, Error> {
    let len = n_obs / blocks;
    let bounds = |b: usize| (b * len, if b + 1 == blocks { n_obs } else { (b + 1) * len });
    let per_trial: Vec<Vec<(f64, f64)>> = matrix
        .par_chunks(n_obs)
        .map(|row| {
            (0..blocks)
                .map(|b| {
                    let (from, to) = bounds(b);
                    row[from..to].iter().fold((0.0, 0.0), |(s, q), &x| (s + x, q + x * x))
                })
                .collect()
        })
        .collect();
    let (mut sums, mut sqs) = (vec![0.0; blocks * n_trials], vec![0.0; blocks * n_trials]);
    for (t, row) in per_trial.iter().enumerate() {
        for (b, &(s, q)) in row.iter().enumerate() {
            if !(s.is_finite() && q.is_finite()) {
                return Err(Error::Data(
                    match matrix[t * n_obs..(t + 1) * n_obs].iter().position(|x| !x.is_finite()) {
                        Some(i) => format!("CSCV: trial {t} bar {i} has a non-finite return"),
                        None => format!("CSCV: trial {t} block {b}: the returns' sum of squares overflows"),
                    },
                ));
            }
            sums[b * n_trials + t] = s;
            sqs[b * n_trials + t] = q;
        }
    }
    let total =
        |of: &[f64]| -> Vec<f64> { (0..n_trials).map(|t| (0..blocks).map(|b| of[b * n_trials + t]).sum()).collect() };
    let (total_sum, total_sq) = (total(&sums), total(&sqs));
    let lens = (0..blocks).map(bounds).map(|(from, to)| (to - from) as f64).collect();
    Ok(BlockSums { n_trials, sums, sqs, lens, total_sum, total_sq })
}

/// The probability of backtest overfitting by combinatorially symmetric cross-validation (BBLZ15 §2):
/// `matrix` holds `n_trials` rows of `n_obs` per-bar returns (trial-major). The bars are cut into `blocks`
/// (S) contiguous blocks of `n_obs / S` bars, the last taking the remainder; each of the C(S, S/2) sets of
/// S/2 blocks is once the in-sample set and its complement the out-of-sample set. Per split, performance is
/// the Sharpe ratio (ddof = 1) of the concatenated blocks, computed from per-block sums and sums of squares,
/// so a split costs O(trials x S); the in-sample best trial (ties to the lowest index) gets its
/// out-of-sample average rank r among the N trials (1 = worst), `w = r / (N + 1)` and the logit
/// `λ = ln(w / (1 - w))`. PBO is the share of splits with `λ <= 0` (a selected trial at the median counts as
/// overfit). A trial with no variance in a block set scores 0 there. A split and the split of its complement
/// are computed together from the same two halves. Splits run in parallel, each written at its own index,
/// and every sum over splits runs in split order, so the result is the same on any thread count.
///
/// Refuses (with [`Error::Config`] for the blocks, [`Error::Data`] for the matrix) an odd S, S < 2 or S > 62,
/// fewer than 2 trials, fewer than 2 bars per block, a matrix of another length than `n_trials x n_obs`,
/// and a non-finite return (named by trial and bar): a NaN is never read as a return of 0.
pub fn pbo_cscv(matrix: &[f64], n_trials: usize, n_obs: usize, blocks: usize) -> Result<Cscv, Error> {
    if blocks < 2 || !blocks.is_multiple_of(2) || blocks > 62 {
        return Err(Error::config("blocks", format!("CSCV needs an even number of blocks from 2 to 62, not {blocks}")));
    }
    if n_trials < 2 {
        return Err(Error::Data(format!("CSCV needs at least 2 trials, got {n_trials}")));
    }
    if n_obs < 2 * blocks {
        return Err(Error::Data(format!("CSCV with {blocks} blocks needs at least {} bars, got {n_obs}", 2 * blocks)));
    }
    if matrix.len() != n_trials * n_obs {
        return Err(Error::Data(format!(
            "CSCV: {} returns for {n_trials} trials x {n_obs} bars ({} expected)",
            matrix.len(),
            n_trials * n_obs
        )));
    }
    let sums = block_sums(matrix, n_trials, n_obs, blocks)?;
    let masks = combinations(blocks, blocks / 2);
    // In lexicographic order the complement of the i-th set is the (C - 1 - i)-th: the first half of the
    // list pairs with the second, reversed.
    let half = masks.len() / 2;
    let full = (1u64 << blocks) - 1;
    debug_assert!((0..half).all(|i| masks[masks.len() - 1 - i] == full & !masks[i]));
    let pairs: Vec<(SplitResult, SplitResult)> = masks[..half]
        .par_iter()
        .map_init(
            || SplitScratch {
                sum: vec![0.0; n_trials],
                sq: vec![0.0; n_trials],
                half: vec![0.0; n_trials],
                rest: vec![0.0; n_trials],
            },
            |scratch, &mask| split_pair(mask, &sums, scratch),
        )
        .collect();
    let splits: Vec<SplitResult> = pairs.iter().map(|p| p.0).chain(pairs.iter().rev().map(|p| p.1)).collect();
    let n = splits.len() as f64;
    let logits: Vec<f64> = splits.iter().map(|s| s.0).collect();
    let is_sharpe: Vec<f64> = splits.iter().map(|s| s.1).collect();
    let oos_sharpe: Vec<f64> = splits.iter().map(|s| s.2).collect();
    Ok(Cscv {
        pbo: logits.iter().filter(|&&l| l <= 0.0).count() as f64 / n,
        blocks,
        degradation_slope: least_squares_slope(&is_sharpe, &oos_sharpe),
        prob_loss: oos_sharpe.iter().filter(|&&x| x < 0.0).count() as f64 / n,
        logits,
        is_sharpe,
        oos_sharpe,
    })
}

/// The least-squares slope of `y` on `x`: `Σ (x - x̄)(y - ȳ) / Σ (x - x̄)²`, sums in index order; NaN when
/// every `x` is the same.
fn least_squares_slope(x: &[f64], y: &[f64]) -> f64 {
    let (mx, my) = (mean(x), mean(y));
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    if sxx > 0.0 { sxy / sxx } else { f64::NAN }
}
