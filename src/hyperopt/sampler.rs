//! Parameter sampling: uniform start-up trials, then TPE (the `tpe` crate, one estimator per dimension:
//! Parzen on ranges, on the log scale for log ranges; histogram on choices), fitted to the complete and
//! pruned trials (ranked as Optuna ranks them, [`tpe_loss`]); failed trials are left out. Integer
//! parameters' ranges give integers with both ends included.
//! A trial's draw depends only on the seed, its number and the finished trials before it, so a resumed
//! study samples as the uninterrupted one would.

use crate::Error;
use std::collections::BTreeMap;

use gpu_kernels::rng::{draw_u64, mix64};
use rand::SeedableRng;

use super::config::{Dimension, is_integer};

/// A trial's parameters by name.
pub type Params = BTreeMap<String, f64>;

fn uniform(seed: u64, number: u64, dim: u64) -> f64 {
    ((draw_u64(seed, 0x7e_0000 + number, dim) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// What TPE minimizes for a finished trial, ranked as Optuna's TPE ranks them: every complete trial (by
/// its value, higher is better) before every pruned one; pruned trials by the epoch they reached (later is
/// better), then by their value there. `None` for trials TPE leaves out: failed (an undefined objective) and
/// running ones.
pub fn tpe_loss(status: &str, value: f64, pruned_at: Option<u64>, epochs: u64) -> Option<f64> {
    match status {
        "complete" if value.is_finite() => Some(-value),
        "pruned" => {
            let reached = pruned_at.unwrap_or(0).min(epochs);
            let v = if value.is_nan() { -1e5 } else { value.clamp(-1e5, 1e5) };
            Some(1e9 + 1e6 * (epochs - reached) as f64 - v)
        }
        _ => None,
    }
}

/// A range in TPE's space: the logarithm for log ranges; an integer range widened by half a unit at each
/// end (so rounding reaches both ends with their fair share, as Optuna's `suggest_int` does).
fn span(low: f64, high: f64, log: bool, integer: bool) -> (f64, f64) {
    let (lo, hi) = if integer { (low - 0.5, high + 0.5) } else { (low, high) };
    if log { (lo.max(f64::MIN_POSITIVE).ln(), hi.ln()) } else { (lo, hi) }
}

/// The parameter value of point `x` of a range's TPE space (rounded and clamped for integers).
fn from_span(x: f64, low: f64, high: f64, log: bool, integer: bool) -> f64 {
    let v = if log { x.exp() } else { x };
    if integer { v.round().clamp(low, high) } else { v.clamp(low, high) }
}

/// Samples trial `number`'s parameters; `history` holds finished trials' parameters and what TPE
/// minimizes for each ([`tpe_loss`]). Ranges of integer parameters ([`super::config::is_integer`]) give
/// integers with both ends included, on the log scale where asked.
pub fn sample(
    space: &BTreeMap<String, Dimension>,
    history: &[(Params, f64)],
    startup: usize,
    seed: u64,
    number: u64,
) -> Result<Params, Error> {
    let mut out = Params::new();
    for (d, (name, dim)) in space.iter().enumerate() {
        let u = uniform(seed, number, d as u64);
        let value = match dim {
            Dimension::Fixed(x) => *x,
            _ if history.len() < startup => match dim {
                Dimension::Range { low, high, log } => {
                    let integer = is_integer(name);
                    let (lo, hi) = span(*low, *high, *log, integer);
                    from_span(lo + u * (hi - lo), *low, *high, *log, integer)
                }
                Dimension::Choice { choices } => choices[((u * choices.len() as f64) as usize).min(choices.len() - 1)],
                Dimension::Fixed(x) => *x,
            },
            Dimension::Range { low, high, log } => {
                let integer = is_integer(name);
                let (lo, hi) = span(*low, *high, *log, integer);
                let t = |x: f64| if *log { x.ln() } else { x };
                let range = tpe::range(lo, hi).map_err(|e| Error::Study(format!("space.{name}: {e}")))?;
                let mut optim = tpe::TpeOptimizer::new(tpe::parzen_estimator(), range);
                for (p, loss) in history {
                    if let Some(&x) = p.get(name) {
                        optim
                            .tell(t(x).clamp(lo, hi - 1e-12), *loss)
                            .map_err(|e| Error::Study(format!("space.{name}: {e}")))?;
                    }
                }
                let mut rng = rand::rngs::StdRng::seed_from_u64(mix64(seed ^ mix64(number) ^ (d as u64 + 1)));
                let x = optim.ask(&mut rng).map_err(|e| Error::Study(format!("space.{name}: {e}")))?;
                from_span(x, *low, *high, *log, integer)
            }
            Dimension::Choice { choices } => {
                let range =
                    tpe::categorical_range(choices.len()).map_err(|e| Error::Study(format!("space.{name}: {e}")))?;
                let mut optim = tpe::TpeOptimizer::new(tpe::histogram_estimator(), range);
                for (p, loss) in history {
                    if let Some(i) = p.get(name).and_then(|x| choices.iter().position(|c| c == x)) {
                        optim.tell(i as f64, *loss).map_err(|e| Error::Study(format!("space.{name}: {e}")))?;
                    }
                }
                let mut rng = rand::rngs::StdRng::seed_from_u64(mix64(seed ^ mix64(number) ^ (d as u64 + 1)));
                let i = optim.ask(&mut rng).map_err(|e| Error::Study(format!("space.{name}: {e}")))?;
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
    fn integer_ranges_give_integers_with_both_ends() {
        let mut space = BTreeMap::new();
        space.insert("ppo_epochs".to_owned(), Dimension::Range { low: 1.0, high: 4.0, log: false });
        space.insert("hidden".to_owned(), Dimension::Range { low: 16.0, high: 128.0, log: true });
        let mut seen = std::collections::BTreeSet::new();
        let mut history = Vec::new();
        for n in 0..400 {
            // Random start-up for the first 200, TPE after.
            let p = sample(&space, &history, 200, 5, n).unwrap();
            for (k, v) in &p {
                assert_eq!(v.fract(), 0.0, "{k} = {v} is not a whole number");
            }
            assert!((1.0..=4.0).contains(&p["ppo_epochs"]) && (16.0..=128.0).contains(&p["hidden"]), "{p:?}");
            seen.insert(p["ppo_epochs"] as u32);
            history.push((p.clone(), tpe_loss("complete", -(p["ppo_epochs"] - 4.0).abs(), None, 4).unwrap()));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [1, 2, 3, 4], "both ends and the middle are drawn");
    }

    #[test]
    fn tpe_ranks_complete_before_pruned_and_leaves_failed_out() {
        let complete_worst = tpe_loss("complete", -50.0, None, 4).unwrap();
        let pruned_best = tpe_loss("pruned", 1e4, Some(3), 4).unwrap();
        assert!(complete_worst < pruned_best, "every complete trial ranks before every pruned one");
        // Pruned trials: a later epoch first, then the value there.
        assert!(tpe_loss("pruned", -1.0, Some(3), 4).unwrap() < tpe_loss("pruned", 5.0, Some(1), 4).unwrap());
        assert!(tpe_loss("pruned", 2.0, Some(2), 4).unwrap() < tpe_loss("pruned", 1.0, Some(2), 4).unwrap());
        assert!(tpe_loss("pruned", f64::NAN, Some(2), 4).unwrap() > tpe_loss("pruned", -9.0, Some(2), 4).unwrap());
        // Failed (undefined objective) and running trials are not told to TPE.
        assert_eq!(tpe_loss("fail", f64::NAN, None, 4), None);
        assert_eq!(tpe_loss("complete", f64::NAN, None, 4), None);
        assert_eq!(tpe_loss("running", 1.0, None, 4), None);
    }

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
            history.push((p, tpe_loss("complete", metric, None, 4).unwrap()));
        }
    }

    /// The best objective a search of `trials` trials finds on a function with a known optimum (0 at lr =
    /// 1e-3, gamma = 0.97, hidden = 64); `startup` = `trials` makes it the seeded random search.
    fn best_found(seed: u64, trials: usize, startup: usize) -> f64 {
        let mut space = BTreeMap::new();
        space.insert("lr".to_owned(), Dimension::Range { low: 1e-5, high: 1e-1, log: true });
        space.insert("gamma".to_owned(), Dimension::Range { low: 0.9, high: 0.999, log: false });
        space.insert("hidden".to_owned(), Dimension::Choice { choices: vec![16.0, 32.0, 64.0, 128.0, 256.0] });
        let objective = |p: &Params| {
            -((p["lr"].log10() + 3.0).powi(2)
                + ((p["gamma"] - 0.97) / 0.03).powi(2)
                + if p["hidden"] == 64.0 { 0.0 } else { 1.0 })
        };
        let mut history = Vec::new();
        let mut best = f64::NEG_INFINITY;
        for n in 0..trials as u64 {
            let p = sample(&space, &history, startup, seed, n).unwrap();
            let value = objective(&p);
            best = best.max(value);
            history.push((p, tpe_loss("complete", value, None, 4).unwrap()));
        }
        best
    }

    #[test]
    fn tpe_beats_seeded_random_search_on_average() {
        let (trials, seeds) = (40, 0..24u64);
        let (mut tpe, mut random, mut wins) = (0.0, 0.0, 0);
        for seed in seeds.clone() {
            let (t, r) = (best_found(seed, trials, 10), best_found(seed, trials, trials));
            tpe += t;
            random += r;
            wins += usize::from(t > r);
        }
        let n = seeds.count() as f64;
        let (tpe, random) = (tpe / n, random / n);
        // The same seeds and the same 10 start-up draws: after them TPE must find better points on average
        // (the objective is at most 0) and in most seeds.
        assert!(tpe > random, "mean best: TPE {tpe} vs random {random}");
        assert!(wins as f64 > 0.6 * n, "TPE beat random in {wins} of {n} seeds");
    }
}
