//! Parameter sampling, Optuna 5.0's `TPESampler` with its defaults: `n_startup_trials` uniform trials, then
//! the tree-structured Parzen estimator. The finished trials (complete, then pruned, ranked by [`tpe_loss`];
//! failed ones left out) are split into the `gamma(n) = min(ceil(0.1 n), gamma)` best ("below") and the
//! rest ("above"); with `constant_liar` the running trials join the above set, so that trials sampled
//! before others finish are pushed away from them. Each set is fitted with a mixture of kernels, one per
//! trial plus a prior over the whole range (Optuna's `prior_weight` 1, centred mid-range, as wide as the
//! range), older trials weighted down (Optuna's `default_weights`); `n_ei_candidates` points drawn from the
//! below mixture are ranked by the ratio of the two densities and the best is taken. `multivariate` fits one
//! joint mixture over all dimensions (the space is fixed per study, so Optuna's `group` decomposition never
//! applies); otherwise each dimension is sampled on its own. Log ranges are searched on the log scale,
//! integer ranges with step 1 (both ends included), choices with Optuna's categorical kernel.
//!
//! A trial's draw depends only on the seed, its number and the trials it is given (finished and, with the
//! constant liar, running), so a batch is reproducible and a resumed study samples as the uninterrupted
//! one would.

mod parzen;
mod truncnorm;

use crate::Error;
use std::collections::BTreeMap;

use gpu_kernels::rng::draw_u64;

use super::config::{Dimension, StudyConfig, is_integer};
use parzen::{Axis, ParzenEstimator};

pub use super::hyperparameters::Params;

/// The sampler's settings (Optuna's `TPESampler` arguments), from the `[study]` table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TpeOptions {
    /// Uniform trials before TPE (counted over complete and pruned trials).
    pub n_startup_trials: usize,
    /// Candidates drawn from the below mixture per sample.
    pub n_ei_candidates: usize,
    /// The cap of the below set: `min(ceil(0.1 n), gamma)`.
    pub gamma: usize,
    /// One joint mixture over all dimensions.
    pub multivariate: bool,
    /// Running trials count as above (bad).
    pub constant_liar: bool,
}

impl Default for TpeOptions {
    /// Optuna 5.0's defaults.
    fn default() -> Self {
        Self { n_startup_trials: 10, n_ei_candidates: 24, gamma: 25, multivariate: true, constant_liar: true }
    }
}

impl From<&StudyConfig> for TpeOptions {
    fn from(s: &StudyConfig) -> Self {
        Self {
            n_startup_trials: s.startup_trials,
            n_ei_candidates: s.n_ei_candidates,
            gamma: s.gamma,
            multivariate: s.multivariate,
            constant_liar: s.constant_liar,
        }
    }
}

/// A trial the sampler learns from: its number, parameters and what TPE minimizes ([`tpe_loss`]); `loss`
/// `None` for a running (or claimed) trial, which only the constant liar uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Trial number.
    pub number: u64,
    /// Its parameters.
    pub params: Params,
    /// What TPE minimizes; `None` while it runs.
    pub loss: Option<f64>,
}

/// The most finished trials outside the below set that TPE fits: a claim's fit (two Parzen mixtures, each
/// candidate's density under both) costs as many kernels as trials it is given, so in a large study TPE
/// fits the below set of every finished trial and the newest `ABOVE_WINDOW` others (at least ten times the
/// below set, so that the set given splits into the same below set), plus the running trials (constant
/// liar). A study with no more finished trials than that samples exactly as with all of them.
pub const ABOVE_WINDOW: usize = 250;

/// Of `n` finished trials with a loss, the size of TPE's below set and how many of the newest others it fits
/// beside it ([`ABOVE_WINDOW`]); `None` when it fits all of them.
pub fn fit_window(n: usize, opts: &TpeOptions) -> Option<(usize, usize)> {
    let n_below = n.div_ceil(10).min(opts.gamma).min(n);
    let window = ABOVE_WINDOW.max(10 * n_below);
    (n > n_below + window).then_some((n_below, window))
}

/// Which of `finished` (trial number and [`tpe_loss`], by number) TPE fits ([`ABOVE_WINDOW`]): indices into
/// `finished`, ascending; every index when they are few enough.
pub fn fitted(finished: &[(u64, f64)], opts: &TpeOptions) -> Vec<usize> {
    let n = finished.len();
    let Some((n_below, window)) = fit_window(n, opts) else { return (0..n).collect() };
    // The below set as `split` ranks it (a stable sort by loss keeps the earlier trial on ties).
    let mut order: Vec<usize> = (0..n).collect();
    if n_below > 0 {
        order.select_nth_unstable_by(n_below - 1, |&a, &b| finished[a].1.total_cmp(&finished[b].1).then(a.cmp(&b)));
    }
    let mut below: Vec<usize> = order[..n_below].to_vec();
    below.sort_unstable();
    let mut out = below.clone();
    out.extend((0..n).rev().filter(|i| below.binary_search(i).is_err()).take(window));
    out.sort_unstable();
    out
}

fn uniform(seed: u64, number: u64, dim: u64) -> f64 {
    ((draw_u64(seed, 0x7e_0000 + number, dim) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// The stream of TPE's draws for a trial: counters `group << 32 | i` (group: the dimension sampled alone,
/// or 0 for the joint draw).
fn tpe_uniform(seed: u64, number: u64, group: u64, i: u64) -> f64 {
    ((draw_u64(seed, 0x7f_0000_0000 + number, (group << 32) | i) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
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

/// A searched dimension: its name, its axis and its choices (for categorical axes).
struct Searched<'a> {
    name: &'a str,
    axis: Axis,
    choices: &'a [f64],
}

/// The dimensions TPE searches: ranges and choices of more than one value (Optuna skips `single()` ones).
fn searched(space: &BTreeMap<String, Dimension>) -> Vec<Searched<'_>> {
    space
        .iter()
        .filter_map(|(name, dim)| match dim {
            Dimension::Range { low, high, log } if high > low => Some(Searched {
                name,
                axis: Axis::Numeric { low: *low, high: *high, log: *log, step: is_integer(name).then_some(1.0) },
                choices: &[],
            }),
            Dimension::Choice { choices } if choices.len() > 1 => {
                Some(Searched { name, axis: Axis::Categorical(choices.len()), choices })
            }
            _ => None,
        })
        .collect()
}

/// A trial's values on `dims` (a choice by its index), or `None` when it lacks one or holds a value
/// outside the space (Optuna leaves such trials out of the estimators).
fn internal(params: &Params, dims: &[&Searched]) -> Option<Vec<f64>> {
    dims.iter()
        .map(|d| {
            let v = *params.get(d.name)?;
            match d.axis {
                Axis::Categorical(_) => d.choices.iter().position(|c| *c == v).map(|i| i as f64),
                Axis::Numeric { low, high, .. } => (low..=high).contains(&v).then_some(v),
            }
        })
        .collect()
}

/// The below and above sets of `trials` (each in trial-number order), Optuna's `_split_trials`: the
/// `gamma(n)` lowest losses below, the other finished trials and (with the constant liar) the running ones
/// above.
fn split<'a>(trials: &'a [Observed], opts: &TpeOptions) -> (Vec<&'a Observed>, Vec<&'a Observed>) {
    let mut finished: Vec<&Observed> = trials.iter().filter(|t| t.loss.is_some()).collect();
    let n_below = finished.len().div_ceil(10).min(opts.gamma).min(finished.len());
    finished.sort_by(|a, b| a.loss.unwrap_or(f64::INFINITY).total_cmp(&b.loss.unwrap_or(f64::INFINITY)));
    let mut below = finished[..n_below].to_vec();
    let mut above = finished[n_below..].to_vec();
    if opts.constant_liar {
        above.extend(trials.iter().filter(|t| t.loss.is_none()));
    }
    below.sort_by_key(|t| t.number);
    above.sort_by_key(|t| t.number);
    (below, above)
}

/// One TPE draw over `dims` jointly: `n_ei_candidates` points from the below mixture, the one with the
/// highest `log l(x) - log g(x)` (the first on ties, as `np.argmax`).
fn draw(
    dims: &[&Searched],
    below: &[&Observed],
    above: &[&Observed],
    opts: &TpeOptions,
    u: impl Fn(u64) -> f64,
) -> Vec<f64> {
    let axes: Vec<Axis> = dims.iter().map(|d| d.axis).collect();
    let rows = |set: &[&Observed]| -> Vec<Vec<f64>> { set.iter().filter_map(|t| internal(&t.params, dims)).collect() };
    let l = ParzenEstimator::new(&rows(below), &axes);
    let g = ParzenEstimator::new(&rows(above), &axes);
    let candidates = l.sample(opts.n_ei_candidates.max(1), u);
    let mut best = (f64::NEG_INFINITY, 0);
    for (i, x) in candidates.iter().enumerate() {
        let score = l.log_pdf(x) - g.log_pdf(x);
        if score > best.0 || (i == 0 && score.is_nan()) {
            best = (score, i);
        }
    }
    candidates[best.1].clone()
}

/// Samples trial `number`'s parameters from `trials` (finished ones with their [`tpe_loss`], running ones
/// without): uniform while fewer than `n_startup_trials` are finished, TPE after. Ranges of integer
/// parameters ([`super::config::is_integer`]) give integers with both ends included, on the log scale where
/// asked.
pub fn sample(
    space: &BTreeMap<String, Dimension>,
    trials: &[Observed],
    opts: &TpeOptions,
    seed: u64,
    number: u64,
) -> Result<Params, Error> {
    let mut out = Params::new();
    let finished = trials.iter().filter(|t| t.loss.is_some()).count();
    if finished < opts.n_startup_trials {
        for (d, (name, dim)) in space.iter().enumerate() {
            let u = uniform(seed, number, d as u64);
            let value = match dim {
                Dimension::Fixed(x) => *x,
                Dimension::Range { low, high, log } => {
                    let integer = is_integer(name);
                    let (lo, hi) = span(*low, *high, *log, integer);
                    from_span(lo + u * (hi - lo), *low, *high, *log, integer)
                }
                Dimension::Choice { choices } => choices[((u * choices.len() as f64) as usize).min(choices.len() - 1)],
            };
            out.insert(name.clone(), value);
        }
        return Ok(out);
    }
    for (name, dim) in space {
        match dim {
            Dimension::Fixed(x) => out.insert(name.clone(), *x),
            Dimension::Range { low, .. } => out.insert(name.clone(), *low),
            Dimension::Choice { choices } => out.insert(name.clone(), choices[0]),
        };
    }
    let dims = searched(space);
    let (below, above) = split(trials, opts);
    let groups: Vec<Vec<&Searched>> =
        if opts.multivariate { vec![dims.iter().collect()] } else { dims.iter().map(|d| vec![d]).collect() };
    for (g, group) in groups.iter().enumerate() {
        let x = draw(group, &below, &above, opts, |i| tpe_uniform(seed, number, g as u64, i));
        for (d, v) in group.iter().zip(x) {
            let value = match d.axis {
                Axis::Categorical(_) => d.choices[v as usize],
                Axis::Numeric { .. } => v,
            };
            if !value.is_finite() {
                return Err(Error::Study(format!("space.{}: TPE drew {value}", d.name)));
            }
            out.insert(d.name.to_owned(), value);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyperopt::config::default_space;

    fn opts(startup: usize) -> TpeOptions {
        TpeOptions { n_startup_trials: startup, ..TpeOptions::default() }
    }

    fn done(number: u64, params: Params, loss: f64) -> Observed {
        Observed { number, params, loss: Some(loss) }
    }

    #[test]
    fn integer_ranges_give_integers_with_both_ends() {
        let mut space = BTreeMap::new();
        space.insert("ppo_epochs".to_owned(), Dimension::Range { low: 1.0, high: 4.0, log: false });
        space.insert("hidden".to_owned(), Dimension::Range { low: 16.0, high: 128.0, log: true });
        let mut seen = std::collections::BTreeSet::new();
        let mut history = Vec::new();
        for n in 0..400 {
            // Random start-up for the first 200, TPE after.
            let p = sample(&space, &history, &opts(200), 5, n).unwrap();
            for (k, v) in &p {
                assert_eq!(v.fract(), 0.0, "{k} = {v} is not a whole number");
            }
            assert!((1.0..=4.0).contains(&p["ppo_epochs"]) && (16.0..=128.0).contains(&p["hidden"]), "{p:?}");
            seen.insert(p["ppo_epochs"] as u32);
            history.push(done(n, p.clone(), tpe_loss("complete", -(p["ppo_epochs"] - 4.0).abs(), None, 4).unwrap()));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [1, 2, 3, 4], "both ends and the middle are drawn");
    }

    #[test]
    fn the_good_set_is_capped_at_gamma_and_running_trials_join_the_bad_set() {
        let trial = |number: u64, loss: Option<f64>| Observed { number, params: Params::new(), loss };
        // 300 finished (loss = number) and 3 running: min(ceil(30), 25) = 25 below, the rest above.
        let mut trials: Vec<Observed> = (0..300).rev().map(|n| trial(n, Some(n as f64))).collect();
        trials.extend((300..303).map(|n| trial(n, None)));
        let (below, above) = split(&trials, &TpeOptions::default());
        assert_eq!(below.iter().map(|t| t.number).collect::<Vec<_>>(), (0..25).collect::<Vec<_>>());
        assert_eq!(above.len(), 278);
        assert!(above.windows(2).all(|w| w[0].number < w[1].number), "above in trial-number order");
        let (_, above) = split(&trials, &TpeOptions { constant_liar: false, ..TpeOptions::default() });
        assert_eq!(above.len(), 275, "without the liar, running trials are left out");
        // 7 finished: ceil(0.7) = 1 below.
        let (below, above) = split(&trials[293..300], &TpeOptions::default());
        assert_eq!((below.len(), above.len(), below[0].number), (1, 6, 0));
    }

    /// In a large study TPE fits the below set of every finished trial and the newest `ABOVE_WINDOW` others:
    /// the subset splits into the same below set as all of them; a small study is fitted whole.
    #[test]
    fn a_large_study_fits_its_below_set_and_a_window_of_the_rest() {
        let opts = TpeOptions::default();
        let loss = |n: u64| ((n * 7919) % 1013) as f64 / 7.0;
        let small: Vec<(u64, f64)> = (0..275).map(|n| (n, loss(n))).collect();
        assert_eq!(fitted(&small, &opts), (0..275).collect::<Vec<_>>());
        let large: Vec<(u64, f64)> = (0..5000).map(|n| (n, loss(n))).collect();
        let kept = fitted(&large, &opts);
        assert_eq!(kept.len(), 25 + ABOVE_WINDOW);
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "ascending");
        let as_observed = |set: &[(u64, f64)]| -> Vec<Observed> {
            set.iter().map(|&(number, l)| Observed { number, params: Params::new(), loss: Some(l) }).collect()
        };
        let subset: Vec<(u64, f64)> = kept.iter().map(|&i| large[i]).collect();
        let all = as_observed(&large);
        let some = as_observed(&subset);
        let below = |t: &[Observed]| split(t, &opts).0.iter().map(|o| o.number).collect::<Vec<_>>();
        assert_eq!(below(&some), below(&all), "the same below set");
        let newest: Vec<u64> = (0..5000).rev().filter(|n| !below(&all).contains(n)).take(ABOVE_WINDOW).collect();
        let above: Vec<u64> = split(&some, &opts).1.iter().map(|o| o.number).collect();
        assert_eq!(above, newest.into_iter().rev().collect::<Vec<_>>(), "the newest others");
        // A larger gamma widens the window to ten times the below set.
        let wide = TpeOptions { gamma: 200, ..opts };
        assert_eq!(fitted(&large, &wide).len(), 200 + 2000);
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
            let p = sample(&space, &history, &opts(5), 3, n).unwrap();
            assert_eq!(p, sample(&space, &history, &opts(5), 3, n).unwrap());
            assert!((1e-4..=3e-3).contains(&p["lr"]), "{p:?}");
            assert!([32.0, 64.0, 128.0].contains(&p["hidden"]));
            assert_eq!(p["w_barrier"], 0.0);
            let metric = -(p["lr"].ln() - (1e-3f64).ln()).abs();
            history.push(done(n, p, tpe_loss("complete", metric, None, 4).unwrap()));
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
            let p = sample(&space, &history, &opts(startup), seed, n).unwrap();
            let value = objective(&p);
            best = best.max(value);
            history.push(done(n, p, tpe_loss("complete", value, None, 4).unwrap()));
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
