//! W8 sampler: the search's sampler ([`crate::hyperopt::sampler`], Optuna 5.0's default TPE) against seeded
//! random search on standard functions, every one maximized: Hartmann6 (maximum 3.32237), Branin (negated,
//! maximum -0.397887) and `mixed10`, a 10-dimensional space shaped like tradesim's (log ranges, integers on
//! a log and a linear scale, choices; maximum 0). A batch of K is sampled from the same history (the earlier
//! trials of the batch running, which the constant liar sees), then all K are evaluated. The mean best value
//! over seeds and its standard error; `benches/peers/sampler_optuna.py` runs the real optuna on the same
//! functions.

use crate::hyperopt::hyperparameters::{
    BATCH, GAMMA, HIDDEN, LR, MAX_HOLD_BARS, PPO_EPOCHS, STOP_LOSS_MULT, TAKE_PROFIT_MULT, TARGET_EVERY, W_COST,
};
use std::collections::BTreeMap;
use std::time::Instant;

use rayon::prelude::*;

use super::report::Row;
use crate::Error;
use crate::hyperopt::config::Dimension;
use crate::hyperopt::sampler::{Observed, Params, TpeOptions, sample, tpe_loss};

/// A benchmark function: its name, space and objective (maximized).
pub struct Function {
    /// Name in the table.
    pub name: &'static str,
    /// The searched space.
    pub space: BTreeMap<String, Dimension>,
    /// The objective.
    pub objective: fn(&Params) -> f64,
}

const HARTMANN_A: [[f64; 6]; 4] = [
    [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
    [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
    [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
    [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
];
const HARTMANN_P: [[f64; 6]; 4] = [
    [0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
    [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
    [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
    [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381],
];
const HARTMANN_ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];

fn hartmann6(p: &Params) -> f64 {
    (0..4)
        .map(|i| {
            let r: f64 = (0..6).map(|j| HARTMANN_A[i][j] * (p[&format!("x{j}")] - HARTMANN_P[i][j]).powi(2)).sum();
            HARTMANN_ALPHA[i] * (-r).exp()
        })
        .sum()
}

fn branin(p: &Params) -> f64 {
    use std::f64::consts::PI;
    let (x1, x2) = (p["x1"], p["x2"]);
    let (b, c) = (5.1 / (4.0 * PI * PI), 5.0 / PI);
    -((x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - 1.0 / (8.0 * PI)) * x1.cos() + 10.0)
}

/// Best at lr = 1e-3 * batch / 64, gamma 0.97, hidden 128, target_every 100, ppo_epochs 4, w_cost 0.5,
/// stop_loss_mult 1.5, take_profit_mult 3 (twice the stop), max_hold_bars 24: value 0.
fn mixed10(p: &Params) -> f64 {
    -((p[LR.name].log10() - (1e-3 * p[BATCH.name] / 64.0).log10()).powi(2)
        + ((p[GAMMA.name] - 0.97) / 0.05).powi(2)
        + 0.5 * (p[HIDDEN.name] / 128.0).log2().abs()
        + (p[TARGET_EVERY.name].log10() - 2.0).powi(2)
        + ((p[PPO_EPOCHS.name] - 4.0) / 3.0).powi(2)
        + (p[W_COST.name] - 0.5).powi(2)
        + ((p[TAKE_PROFIT_MULT.name] - 2.0 * p[STOP_LOSS_MULT.name]) / 2.0).powi(2)
        + ((p[STOP_LOSS_MULT.name] - 1.5) / 2.0).powi(2)
        + if p[MAX_HOLD_BARS.name] == 24.0 { 0.0 } else { 0.5 })
}

fn range(low: f64, high: f64, log: bool) -> Dimension {
    Dimension::Range { low, high, log }
}

/// The three functions of the benchmark.
pub fn functions() -> Vec<Function> {
    let hartmann = (0..6).map(|j| (format!("x{j}"), range(0.0, 1.0, false))).collect();
    let branin_space = [("x1".to_owned(), range(-5.0, 10.0, false)), ("x2".to_owned(), range(0.0, 15.0, false))].into();
    let choice = |c: &[f64]| Dimension::Choice { choices: c.to_vec() };
    let mixed = [
        (LR.name, range(1e-5, 1e-1, true)),
        (BATCH.name, choice(&[32.0, 64.0, 128.0, 256.0])),
        (GAMMA.name, range(0.8, 0.999, false)),
        (HIDDEN.name, choice(&[32.0, 64.0, 128.0, 256.0])),
        (TARGET_EVERY.name, range(10.0, 1000.0, true)),
        (PPO_EPOCHS.name, range(1.0, 10.0, false)),
        (W_COST.name, range(0.0, 2.0, false)),
        (TAKE_PROFIT_MULT.name, range(1.0, 5.0, false)),
        (STOP_LOSS_MULT.name, range(1.0, 5.0, false)),
        (MAX_HOLD_BARS.name, choice(&[0.0, 24.0, 96.0])),
    ]
    .into_iter()
    .map(|(k, d)| (k.to_owned(), d))
    .collect();
    vec![
        Function { name: "hartmann6", space: hartmann, objective: hartmann6 },
        Function { name: "branin", space: branin_space, objective: branin },
        Function { name: "mixed10", space: mixed, objective: mixed10 },
    ]
}

/// The best value one seeded search finds: `trials` trials in batches of `batch`, sampled with `opts`
/// (`n_startup_trials` >= `trials` makes it the seeded random search).
pub fn best_found(f: &Function, opts: &TpeOptions, trials: usize, batch: usize, seed: u64) -> Result<f64, Error> {
    let mut observed: Vec<Observed> = Vec::with_capacity(trials);
    let mut best = f64::NEG_INFINITY;
    while observed.len() < trials {
        let first = observed.len();
        for number in first as u64..(first + batch).min(trials) as u64 {
            let params = sample(&f.space, &observed, opts, seed, number)?;
            observed.push(Observed { number, params, loss: None });
        }
        for t in &mut observed[first..] {
            let value = (f.objective)(&t.params);
            best = best.max(value);
            t.loss = tpe_loss("complete", value, None, 1);
        }
    }
    Ok(best)
}

/// Mean and standard error of the mean.
pub fn mean_se(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 { xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, (var / n).sqrt())
}

/// One cell of the grid: (trials, batch, seeds).
type Cell = (usize, usize, usize);

/// The full grid: 40 seeds at 60 and 200 trials, K = 1, 5, 64; K = 1,024 over 4,096 trials with 8 seeds
/// (each of its TPE searches fits mixtures of thousands of trials 4,096 times).
const FULL: &[Cell] =
    &[(60, 1, 40), (60, 5, 40), (60, 64, 40), (200, 1, 40), (200, 5, 40), (200, 64, 40), (4_096, 1_024, 8)];
/// The CI size.
const QUICK: &[Cell] = &[(30, 1, 4), (30, 5, 4), (64, 32, 2)];

/// W8: TPE (Optuna 5.0's defaults) and random search on each function and cell of the grid, seeds in
/// parallel.
pub fn sampler(quick: bool) -> Result<Vec<Row>, Error> {
    let grid = if quick { QUICK } else { FULL };
    let mut rows = Vec::new();
    println!("W8 sampler (mean best ± standard error over seeds; every function maximized)\n");
    println!("| function | trials | K | seeds | TPE (Optuna 5.0 defaults) | random | seconds |");
    println!("|---|---|---|---|---|---|---|");
    for f in functions() {
        for &(trials, batch, seeds) in grid {
            let started = Instant::now();
            let run = |opts: TpeOptions| -> Result<Vec<f64>, Error> {
                (0..seeds as u64).into_par_iter().map(|s| best_found(&f, &opts, trials, batch, s)).collect()
            };
            let tpe = mean_se(&run(TpeOptions::default())?);
            let random = mean_se(&run(TpeOptions { n_startup_trials: usize::MAX, ..TpeOptions::default() })?);
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "| {} | {trials} | {batch} | {seeds} | {:.4} ± {:.4} | {:.4} ± {:.4} | {seconds:.1} |",
                f.name, tpe.0, tpe.1, random.0, random.1
            );
            let label = format!("{}: {trials} trials, K = {batch}", f.name);
            let row = Row {
                workload: "W8",
                ..Row::experience("TPE", &label, "cpu", batch, 2 * seeds * trials, seconds, None)
            };
            rows.push(row.with_note(format!(
                "TPE {:.4} ± {:.4}, random {:.4} ± {:.4} (mean best ± s.e., {seeds} seeds)",
                tpe.0, tpe.1, random.0, random.1
            )));
        }
    }
    Ok(rows)
}
