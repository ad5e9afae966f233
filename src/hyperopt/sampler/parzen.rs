//! Optuna's Parzen estimator (`optuna/samplers/_tpe/parzen_estimator.py`, `probability_distributions.py`):
//! a mixture of product kernels, one component per observed trial plus the prior, in the space where a
//! dimension is searched (the logarithm of log ranges; integer ranges widened by half a step at each end).

use super::truncnorm::{log_gauss_mass, log_pdf_standard, ppf};

/// A searched dimension in TPE's terms (Optuna's `FloatDistribution`, `IntDistribution`,
/// `CategoricalDistribution`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Axis {
    /// A range; `step` 1 for integers (both ends included), `log` for a log scale.
    Numeric {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
        /// Searched on the log scale.
        log: bool,
        /// Integer step (`Some(1.0)` for integers).
        step: Option<f64>,
    },
    /// Choice indices `0..n`.
    Categorical(usize),
}

impl Axis {
    /// The bounds of the kernels' space: widened by half a step for integers, then logged for log ranges.
    fn adapted(&self) -> (f64, f64) {
        match *self {
            Self::Numeric { low, high, log, step } => {
                let half = step.map_or(0.0, |s| s / 2.0);
                let (lo, hi) = (low - half, high + half);
                if log { (lo.ln(), hi.ln()) } else { (lo, hi) }
            }
            Self::Categorical(n) => (0.0, n as f64),
        }
    }
}

/// One dimension's kernels, one per component (the last is the prior).
enum Kernels {
    Numeric { mu: Vec<f64>, sigma: Vec<f64>, log_mass: Vec<f64> },
    Categorical { weights: Vec<Vec<f64>> },
}

/// Optuna's `default_weights`: the 25 newest observations weigh 1, older ones ramp up from 1/n.
pub fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let ramp = n - 25;
    let mut w: Vec<f64> = (0..ramp)
        .map(|i| {
            if ramp == 1 {
                1.0 / n as f64
            } else {
                1.0 / n as f64 + (1.0 - 1.0 / n as f64) * i as f64 / (ramp - 1) as f64
            }
        })
        .collect();
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

/// A mixture of product kernels fitted to observations (rows in trial-number order, one value per axis in
/// the axis's external terms: the value of a range, the index of a choice).
pub struct ParzenEstimator {
    axes: Vec<Axis>,
    log_weights: Vec<f64>,
    weights: Vec<f64>,
    kernels: Vec<Kernels>,
}

impl ParzenEstimator {
    /// Optuna's defaults: `prior_weight` 1, `consider_magic_clip`, not `consider_endpoints`, weights by
    /// [`default_weights`].
    pub fn new(observations: &[Vec<f64>], axes: &[Axis]) -> Self {
        const PRIOR_WEIGHT: f64 = 1.0;
        let n = observations.len();
        let mut weights = default_weights(n);
        if n == 0 {
            weights = vec![1.0];
        } else {
            weights.push(PRIOR_WEIGHT);
        }
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
        let kernels = axes
            .iter()
            .enumerate()
            .map(|(j, axis)| {
                let column: Vec<f64> = observations.iter().map(|row| row[j]).collect();
                match *axis {
                    Axis::Categorical(choices) => {
                        let mut rows = Vec::with_capacity(n + 1);
                        if n == 0 {
                            rows.push(vec![1.0 / choices as f64; choices]);
                        } else {
                            let kernels = (n + 1) as f64;
                            for i in 0..=n {
                                let mut row = vec![PRIOR_WEIGHT / kernels; choices];
                                if let Some(&c) = column.get(i) {
                                    row[c as usize] += 1.0;
                                }
                                let sum: f64 = row.iter().sum();
                                row.iter_mut().for_each(|v| *v /= sum);
                                rows.push(row);
                            }
                        }
                        Kernels::Categorical { weights: rows }
                    }
                    Axis::Numeric { log, .. } => {
                        let (low, high) = axis.adapted();
                        let mut mu: Vec<f64> = column.iter().map(|&x| if log { x.ln() } else { x }).collect();
                        let mut sigma = neighbour_sigmas(&mu, low, high);
                        mu.push(0.5 * (low + high));
                        sigma.push(high - low);
                        let log_mass =
                            mu.iter().zip(&sigma).map(|(m, s)| log_gauss_mass((low - m) / s, (high - m) / s)).collect();
                        Kernels::Numeric { mu, sigma, log_mass }
                    }
                }
            })
            .collect();
        Self { axes: axes.to_vec(), log_weights: weights.iter().map(|w| w.ln()).collect(), weights, kernels }
    }

    /// Draws `size` points: a component by its weight, then each axis from that component's kernel.
    /// `uniform(i)` gives the i-th uniform in (0, 1) of this draw.
    pub fn sample(&self, size: usize, uniform: impl Fn(u64) -> f64) -> Vec<Vec<f64>> {
        let per = self.axes.len() as u64 + 1;
        (0..size as u64)
            .map(|c| {
                let u = uniform(c * per);
                let mut acc = 0.0;
                let k = self
                    .weights
                    .iter()
                    .position(|w| {
                        acc += w;
                        u < acc
                    })
                    .unwrap_or(self.weights.len() - 1);
                self.axes
                    .iter()
                    .zip(&self.kernels)
                    .enumerate()
                    .map(|(j, (axis, kernels))| {
                        let q = uniform(c * per + j as u64 + 1);
                        match (axis, kernels) {
                            (Axis::Numeric { low, high, log, step }, Kernels::Numeric { mu, sigma, .. }) => {
                                let (lo, hi) = axis.adapted();
                                let (m, s) = (mu[k], sigma[k]);
                                let z = ppf(q, (lo - m) / s, (hi - m) / s);
                                let x = if *log { (m + s * z).exp() } else { m + s * z };
                                match step {
                                    Some(st) => (low + ((x - low) / st).round() * st).clamp(*low, *high),
                                    None => x.clamp(*low, *high),
                                }
                            }
                            (_, Kernels::Categorical { weights }) => {
                                let mut acc = 0.0;
                                let row = &weights[k];
                                row.iter()
                                    .position(|w| {
                                        acc += w;
                                        q < acc
                                    })
                                    .unwrap_or(row.len() - 1) as f64
                            }
                            _ => unreachable!("kernels are built per axis kind"),
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The log density (mass for integers and choices) of the mixture at `x`.
    pub fn log_pdf(&self, x: &[f64]) -> f64 {
        let mut per_component = self.log_weights.clone();
        for ((axis, kernels), &v) in self.axes.iter().zip(&self.kernels).zip(x) {
            match (axis, kernels) {
                (Axis::Numeric { log, step, .. }, Kernels::Numeric { mu, sigma, log_mass }) => {
                    let t = |y: f64| if *log { y.ln() } else { y };
                    for (k, lp) in per_component.iter_mut().enumerate() {
                        let (m, s) = (mu[k], sigma[k]);
                        *lp += match step {
                            None => log_pdf_standard((t(v) - m) / s, log_mass[k]) - s.ln(),
                            Some(st) => {
                                log_gauss_mass((t(v - st / 2.0) - m) / s, (t(v + st / 2.0) - m) / s) - log_mass[k]
                            }
                        };
                    }
                }
                (_, Kernels::Categorical { weights }) => {
                    for (k, lp) in per_component.iter_mut().enumerate() {
                        *lp += weights[k][v as usize].ln();
                    }
                }
                _ => unreachable!("kernels are built per axis kind"),
            }
        }
        let max = per_component.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if max == f64::NEG_INFINITY {
            return max;
        }
        max + per_component.iter().map(|lp| (lp - max).exp()).sum::<f64>().ln()
    }
}

/// Optuna's kernel widths: the larger gap to a sorted neighbour (the range's ends count as neighbours,
/// except that the outermost points take their inner gap), clipped to [range / min(100, n + 2), range].
fn neighbour_sigmas(mu: &[f64], low: f64, high: f64) -> Vec<f64> {
    let n = mu.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| mu[a].total_cmp(&mu[b]));
    let mut ends = Vec::with_capacity(n + 2);
    ends.push(low);
    ends.extend(order.iter().map(|&i| mu[i]));
    ends.push(high);
    let mut sorted: Vec<f64> = (1..=n).map(|i| (ends[i] - ends[i - 1]).max(ends[i + 1] - ends[i])).collect();
    if n >= 2 {
        sorted[0] = ends[2] - ends[1];
        sorted[n - 1] = ends[n] - ends[n - 1];
    }
    let min_sigma = (high - low) / (100f64).min(1.0 + (n + 1) as f64);
    let mut sigma = vec![0.0; n];
    for (rank, &i) in order.iter().enumerate() {
        sigma[i] = sorted[rank].clamp(min_sigma, high - low);
    }
    sigma
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_ramp_old_trials_as_optuna_does() {
        assert_eq!(default_weights(3), [1.0, 1.0, 1.0]);
        let w = default_weights(35);
        // np.linspace(1/35, 1, 10) then 25 ones.
        assert_eq!(w.len(), 35);
        assert!((w[0] - 1.0 / 35.0).abs() < 1e-15 && (w[9] - 1.0).abs() < 1e-15 && w[10..].iter().all(|&x| x == 1.0));
    }

    #[test]
    fn log_density_matches_optunas_parzen_estimator() {
        // optuna 5.0.0: _ParzenEstimator(observations, space, _ParzenEstimatorParameters(1.0, True, False,
        // default_weights, True)).log_pdf(x) for a float, a log float, a log int, an int and a categorical:
        // [-7.22922265, -8.26738808].
        let axes = [
            Axis::Numeric { low: 0.0, high: 2.0, log: false, step: None },
            Axis::Numeric { low: 1e-4, high: 1e-1, log: true, step: None },
            Axis::Numeric { low: 2.0, high: 40.0, log: true, step: Some(1.0) },
            Axis::Numeric { low: 1.0, high: 6.0, log: false, step: Some(1.0) },
            Axis::Categorical(3),
        ];
        let observations = [
            vec![0.3, 1e-3, 3.0, 1.0, 0.0],
            vec![1.7, 5e-2, 30.0, 6.0, 2.0],
            vec![1.1, 2e-4, 10.0, 3.0, 2.0],
            vec![0.2, 1e-2, 2.0, 4.0, 1.0],
        ];
        let pe = ParzenEstimator::new(&observations, &axes);
        for (x, optuna) in [([0.5, 3e-3, 4.0, 2.0, 1.0], -7.229_222_65), ([1.9, 9e-2, 37.0, 6.0, 2.0], -8.267_388_08)] {
            let ours = pe.log_pdf(&x);
            assert!((ours - optuna).abs() < 1e-7, "{x:?}: {ours} vs optuna {optuna}");
        }
    }

    #[test]
    fn widths_follow_neighbours_and_clip() {
        // Points 2, 3, 7 in [0, 10]: gaps 2|1|4|3; inner points take the larger gap, the outermost their
        // inner gap; the clip floor is 10 / min(100, 5) = 2.
        assert_eq!(neighbour_sigmas(&[7.0, 2.0, 3.0], 0.0, 10.0), [4.0, 2.0, 4.0]);
        // One point: the larger distance to an end.
        assert_eq!(neighbour_sigmas(&[2.0], 0.0, 10.0), [8.0]);
    }

    #[test]
    fn mixture_of_prior_only_is_uniformish_and_normalized() {
        let axes = [Axis::Numeric { low: 0.0, high: 1.0, log: false, step: None }, Axis::Categorical(4)];
        let pe = ParzenEstimator::new(&[], &axes);
        // The prior: N(0.5, 1) truncated to [0, 1] times a uniform choice of 4.
        let at_mid = pe.log_pdf(&[0.5, 2.0]);
        let expected = -0.918_938_533_204_672_8 - log_gauss_mass(-0.5, 0.5) - 4f64.ln();
        assert!((at_mid - expected).abs() < 1e-12, "{at_mid} vs {expected}");
        // Integer masses of a range sum to 1.
        let ints = [Axis::Numeric { low: 1.0, high: 6.0, log: true, step: Some(1.0) }];
        let pe = ParzenEstimator::new(&[vec![2.0], vec![5.0]], &ints);
        let total: f64 = (1..=6).map(|v| pe.log_pdf(&[f64::from(v)]).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
    }
}
