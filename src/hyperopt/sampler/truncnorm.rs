//! The truncated normal distribution of Optuna's TPE (`optuna/samplers/_tpe/_truncnorm.py`): the log of the
//! standard normal mass between two bounds, its log density and its quantile function, computed in the log
//! domain so that kernels far from a point (tails of 1e-300 and below) stay finite.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// `ln(1 / sqrt(2 pi))`.
const LN_INV_SQRT_2PI: f64 = -0.918_938_533_204_672_8;

/// `ln Phi(x)`, the log of the standard normal CDF; an asymptotic series far in the left tail, where
/// `erfc` underflows.
pub fn log_ndtr(x: f64) -> f64 {
    if x > 6.0 {
        -0.5 * libm::erfc(x * FRAC_1_SQRT_2)
    } else if x > -20.0 {
        (0.5 * libm::erfc(-x * FRAC_1_SQRT_2)).ln()
    } else {
        let x2 = x * x;
        -0.5 * x2 - (-x).ln() + LN_INV_SQRT_2PI + (1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2)).ln()
    }
}

/// `ln(exp(a) - exp(b))` for `a >= b`.
fn log_diff_exp(a: f64, b: f64) -> f64 {
    if b == f64::NEG_INFINITY { a } else { a + (-(b - a).exp()).ln_1p() }
}

/// `ln(Phi(b) - Phi(a))` for `a <= b`: Optuna's `_log_gauss_mass`, taken on the side of zero where the
/// difference does not cancel.
pub fn log_gauss_mass(a: f64, b: f64) -> f64 {
    if b <= 0.0 {
        log_diff_exp(log_ndtr(b), log_ndtr(a))
    } else if a > 0.0 {
        log_diff_exp(log_ndtr(-a), log_ndtr(-b))
    } else {
        // The mass straddles 0: 1 minus both tails, which are each at most one half.
        (1.0 - 0.5 * libm::erfc(-a * FRAC_1_SQRT_2) - 0.5 * libm::erfc(b * FRAC_1_SQRT_2)).ln()
    }
}

/// The standard normal quantile ([`crate::normal::acklam`], refined by one Halley step).
fn ndtri(p: f64) -> f64 {
    let x = crate::normal::acklam(p);
    let e = 0.5 * libm::erfc(-x * FRAC_1_SQRT_2) - p;
    let u = e * (2.0 * PI).sqrt() * (0.5 * x * x).exp();
    x - u / (1.0 + 0.5 * x * u)
}

/// The `x` with `ln Phi(x) = y` (`y <= 0`): the quantile where `exp(y)` is representable, refined by Newton
/// steps on `ln Phi` (which also carry it into the far left tail).
fn ndtri_exp(y: f64) -> f64 {
    let mut x = if y > -700.0 { ndtri(y.exp().min(1.0 - 1e-16)) } else { -(-2.0 * y).sqrt() };
    if y < -30.0 {
        for _ in 0..4 {
            let l = log_ndtr(x);
            let slope = (LN_INV_SQRT_2PI - 0.5 * x * x - l).exp();
            x -= (l - y) / slope;
        }
    }
    x
}

/// The quantile `q` in (0, 1) of the standard normal truncated to `[a, b]` (Optuna's `ppf`): mirrored when
/// the interval lies right of zero so that the log CDF is taken where it is precise.
pub fn ppf(q: f64, a: f64, b: f64) -> f64 {
    if a > 0.0 {
        return -ppf(1.0 - q, -b, -a);
    }
    let log_mass = log_gauss_mass(a, b);
    let la = log_ndtr(a);
    // ln(Phi(a) + q (Phi(b) - Phi(a))).
    let lq = q.ln() + log_mass;
    let target = if la > lq { la + (lq - la).exp().ln_1p() } else { lq + (la - lq).exp().ln_1p() };
    ndtri_exp(target.min(0.0)).clamp(a, b)
}

/// The log density at standardized `z` of the standard normal truncated to `[a, b]`, less `ln(scale)` for
/// the caller: `-z^2/2 - ln sqrt(2 pi) - ln(Phi(b) - Phi(a))`.
pub fn log_pdf_standard(z: f64, log_mass: f64) -> f64 {
    LN_INV_SQRT_2PI - 0.5 * z * z - log_mass
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ndtr_matches_known_values_in_body_and_tails() {
        // Phi(0) = 1/2, Phi(-1.96) = 0.0249979, Phi(-40) = 3.655893e-350 (ln -804.6084).
        assert!((log_ndtr(0.0) - 0.5f64.ln()).abs() < 1e-15);
        assert!((log_ndtr(-1.96) - 0.024_997_895_148_220_43f64.ln()).abs() < 1e-12);
        assert!((log_ndtr(-40.0) + 804.608_442_013_754_6).abs() < 1e-6);
        assert!((log_ndtr(8.0) + 6.220_960_574_271_784e-16).abs() < 1e-20);
    }

    #[test]
    fn mass_and_quantile_agree() {
        // The mass of [-1, 1] is 0.682689; the quantile inverts the truncated CDF, also far in a tail.
        assert!((log_gauss_mass(-1.0, 1.0) - 0.682_689_492_137_085_9f64.ln()).abs() < 1e-12);
        assert!((log_gauss_mass(1.0, 2.0) - log_gauss_mass(-2.0, -1.0)).abs() < 1e-14);
        for (a, b) in [(-3.0, 3.0), (0.5, 4.0), (-60.0, -50.0), (30.0, 90.0), (-0.1, 0.1)] {
            for q in [1e-9, 0.2, 0.5, 0.9, 1.0 - 1e-9] {
                let x = ppf(q, a, b);
                assert!((a..=b).contains(&x), "ppf({q}, {a}, {b}) = {x}");
                let cdf = (log_gauss_mass(a, x) - log_gauss_mass(a, b)).exp();
                assert!((cdf - q).abs() < 1e-6 * q.max(1e-3), "ppf({q}, {a}, {b}) = {x}: cdf {cdf}");
            }
        }
    }
}
