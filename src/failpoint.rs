//! Crash points for the kill/resume tests: `TRADESIM_FAILPOINT=NAME:N[,NAME:N]` aborts the process (as a
//! `kill -9` would: no destructors, nothing flushed) right after the N-th time the search passes point
//! NAME. The points: `prune` (a trial's prune is committed), `finish` (a trial's results are committed),
//! `refill` (a trial claimed for a freed slot of a running batch is committed, before it trains) and
//! `report` (the report is half written: its leaderboard files are, its charts and page are not).
//! Unset (always, outside tests), [`hit`] only counts.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The points `TRADESIM_FAILPOINT` names, each with the pass that aborts.
fn points() -> &'static HashMap<String, u64> {
    static POINTS: OnceLock<HashMap<String, u64>> = OnceLock::new();
    POINTS.get_or_init(|| {
        std::env::var("TRADESIM_FAILPOINT")
            .unwrap_or_default()
            .split(',')
            .filter_map(|p| p.split_once(':'))
            .filter_map(|(name, n)| Some((name.trim().to_owned(), n.trim().parse().ok()?)))
            .collect()
    })
}

/// Passes point `name`; aborts the process at the pass `TRADESIM_FAILPOINT` names for it.
pub fn hit(name: &str) {
    let Some(&at) = points().get(name) else { return };
    static COUNTS: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());
    let mut counts = COUNTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let count = match counts.iter_mut().find(|c| c.0 == name) {
        Some(c) => &mut c.1,
        None => {
            counts.push((name.to_owned(), 0));
            &mut counts.last_mut().expect("just pushed").1
        }
    };
    *count += 1;
    if *count == at {
        eprintln!("failpoint {name}:{at}: aborting");
        std::process::abort();
    }
}
