//! W7: the probability of backtest overfitting by CSCV ([`crate::evidence::stats::pbo_cscv`]) over a matrix
//! of seeded noise returns, on the CPU: 1,024 trials x 45,000 bars in 16 blocks (C(16, 8) = 12,870 splits),
//! the size issue 41 sets for its cost.

use std::time::Instant;

use gpu_kernels::rng::draw_u64;
use rayon::prelude::*;

use super::report::Row;
use crate::Error;
use crate::evidence::stats::pbo_cscv;

/// Blocks of W7's CSCV.
const BLOCKS: usize = 16;

/// `trials x bars` returns, trial-major: uniform in [-0.005, 0.005), keyed by index (the same on any thread
/// count).
fn noise(trials: usize, bars: usize) -> Vec<f64> {
    (0..trials * bars)
        .into_par_iter()
        .map(|i| ((draw_u64(7, 41, i as u64) >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.01)
        .collect()
}

/// W7: one timed CSCV (block sums, every split, PBO) of `trials x bars` noise returns on the CPU.
pub fn cscv((trials, bars): (usize, usize)) -> Result<Vec<Row>, Error> {
    let matrix = noise(trials, bars);
    let started = Instant::now();
    let r = pbo_cscv(&matrix, trials, bars, BLOCKS)?;
    let seconds = started.elapsed().as_secs_f64();
    let splits = r.logits.len();
    Ok(vec![Row::evidence(trials, bars, splits, seconds).with_note(format!(
        "PBO {:.3} on noise, {} threads",
        r.pbo,
        rayon::current_num_threads()
    ))])
}
