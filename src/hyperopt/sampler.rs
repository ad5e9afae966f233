//! Parameter sampling: uniform start-up trials, then TPE (the `tpe` crate, one estimator per dimension:
//! Parzen on ranges, on the log scale for log ranges; histogram on choices), fitted to every finished trial.
//! A trial's draw depends only on the seed, its number and the finished trials before it, so a resumed
//! study samples as the uninterrupted one would.

use std::collections::BTreeMap;

use gpu_kernels::rng::{draw_u64, mix64};
use rand::SeedableRng;

use super::config::Dimension;

/// A trial's parameters by name.
pub type Params = BTreeMap<String, f64>;

fn uniform(seed: u64, number: u64, dim: u64) -> f64 {
    ((draw_u64(seed, 0x7e_0000 + number, dim) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// TPE minimizes; higher metrics are better, and an undefined metric counts as very bad.
fn loss(metric: f64) -> f64 {
    if metric.is_finite() { -metric } else { 1e3 }
}

/// Samples trial `number`'s parameters; `history` holds finished trials' parameters and metrics.
pub fn sample(
    space: &BTreeMap<String, Dimension>,
    history: &[(Params, f64)],
    startup: usize,
    seed: u64,
    number: u64,
) -> Result<Params, String> {
    let mut out = Params::new();
    for (d, (name, dim)) in space.iter().enumerate() {
        let u = uniform(seed, number, d as u64);
        let value = match dim {
            Dimension::Fixed(x) => *x,
            _ if history.len() < startup => match dim {
                Dimension::Range { low, high, log: true } => (low.ln() + u * (high.ln() - low.ln())).exp(),
                Dimension::Range { low, high, .. } => low + u * (high - low),
                Dimension::Choice { choices } => choices[((u * choices.len() as f64) as usize).min(choices.len() - 1)],
                Dimension::Fixed(x) => *x,
            },
            Dimension::Range { low, high, log } => {
                let t = |x: f64| if *log { x.ln() } else { x };
                let range = tpe::range(t(*low), t(*high)).map_err(|e| format!("space.{name}: {e}"))?;
                let mut optim = tpe::TpeOptimizer::new(tpe::parzen_estimator(), range);
                for (p, metric) in history {
                    if let Some(&x) = p.get(name) {
                        optim
                            .tell(t(x).clamp(t(*low), t(*high) - 1e-12), loss(*metric))
                            .map_err(|e| format!("space.{name}: {e}"))?;
                    }
                }
                let mut rng = rand::rngs::StdRng::seed_from_u64(mix64(seed ^ mix64(number) ^ (d as u64 + 1)));
                let x = optim.ask(&mut rng).map_err(|e| format!("space.{name}: {e}"))?;
                if *log { x.exp() } else { x }
            }
            Dimension::Choice { choices } => {
                let range = tpe::categorical_range(choices.len()).map_err(|e| format!("space.{name}: {e}"))?;
                let mut optim = tpe::TpeOptimizer::new(tpe::histogram_estimator(), range);
                for (p, metric) in history {
                    if let Some(i) = p.get(name).and_then(|x| choices.iter().position(|c| c == x)) {
                        optim.tell(i as f64, loss(*metric)).map_err(|e| format!("space.{name}: {e}"))?;
                    }
                }
                let mut rng = rand::rngs::StdRng::seed_from_u64(mix64(seed ^ mix64(number) ^ (d as u64 + 1)));
                let i = optim.ask(&mut rng).map_err(|e| format!("space.{name}: {e}"))?;
                choices[(i as usize).min(choices.len() - 1)]
            }
        };
        out.insert(name.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyperopt::config::default_space;

    #[test]
    fn samples_stay_in_their_dimensions_and_repeat_for_a_seed() {
        let space = default_space();
        let mut history = Vec::new();
        for n in 0..12 {
            let p = sample(&space, &history, 5, 3, n).unwrap();
            assert_eq!(p, sample(&space, &history, 5, 3, n).unwrap());
            assert!((1e-4..=3e-3).contains(&p["lr"]), "{p:?}");
            assert!([32.0, 64.0, 128.0].contains(&p["hidden"]));
            assert_eq!(p["w_barrier"], 0.0);
            let metric = -(p["lr"].ln() - (1e-3f64).ln()).abs();
            history.push((p, metric));
        }
        let late: Vec<f64> = history[8..].iter().map(|(p, _)| p["lr"]).collect();
        assert!(late.iter().any(|lr| (3e-4..3e-3).contains(lr)), "TPE should search near the optimum: {late:?}");
    }
}
