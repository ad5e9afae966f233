//! The claim loop of `scripts/scale-postgres.sh --claims` (`examples/claims.rs`): a search worker's claims
//! and finishes with no training, so that the study's side of a search is what is timed. Each trial is
//! claimed alone (`parallel = 1`, as Optuna's `ask`) and finished at once with a value computed from its
//! parameters; each claim's times go to the caller.

use std::collections::HashSet;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::claims::next_batch;
use super::worker_id;
use crate::Error;
use crate::hyperopt::config::SearchConfig;
use crate::hyperopt::storage::StorageUrl;
use crate::hyperopt::study::{Open, Study};

/// One claim as timed: when it ended (Unix seconds), the seconds this worker spent in the study since its
/// previous trial ran (finishing that trial and claiming this one, Optuna's `tell` and `ask`), and the
/// trial claimed.
#[derive(Clone, Copy, Debug)]
pub struct ClaimTime {
    /// When the claim returned (Unix seconds).
    pub at: f64,
    /// Seconds from the end of the previous trial's run to this claim's return.
    pub seconds: f64,
    /// The trial claimed.
    pub number: u64,
}

/// Claims and finishes trials of study `name` in `storage` (created with `cfg`, or joined) until none is
/// left, calling `each` with every claim's times.
pub fn claim_loop(
    storage: &StorageUrl,
    name: &str,
    cfg: &SearchConfig,
    mut each: impl FnMut(ClaimTime),
) -> Result<(), Error> {
    let json = serde_json::to_string(cfg).map_err(|e| Error::Study(format!("configuration: {e}")))?;
    drop(Study::open_with(storage, name, Open::LoadIfExists, &json)?);
    let study = Study::reopen(storage, name)?;
    let me = worker_id();
    let mut claimed = HashSet::new();
    let mut previous: Option<u64> = None;
    let mut since = Instant::now();
    loop {
        if let Some(n) = previous.take() {
            study.finish(n, (n % 97) as f64 / 97.0, 0.0, 0.0, &[], "-")?;
        }
        let c = next_batch(&study, cfg, &mut claimed, &me)?;
        let Some(run) = c.batch.runs.first() else {
            if c.elsewhere.is_empty() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        let at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        each(ClaimTime { at, seconds: since.elapsed().as_secs_f64(), number: run.0.0 });
        previous = Some(run.0.0);
        since = Instant::now();
    }
}
