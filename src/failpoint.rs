//! Crash points for the kill/resume tests: `TRADESIM_FAILPOINT=NAME:N[,NAME:N]` aborts the process (as a
//! `kill -9` would: no destructors, nothing flushed) right after the N-th time the search passes point
//! NAME. The points: `prune` (a trial's prune is committed), `finish` (a trial's results are committed),
//! `refill` (a trial claimed for a freed slot of a running batch is committed, before it trains) and
//! `report` (the report is half written: its leaderboard files are, its charts and page are not).
//! Unset (always, outside tests), [`hit`] only counts.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// The points `TRADESIM_FAILPOINT` names, each with the pass that aborts (none when the variable is unset or
/// malformed: [`check`] refuses a malformed one before a command runs).
fn points() -> &'static HashMap<String, u64> {
    static POINTS: OnceLock<HashMap<String, u64>> = OnceLock::new();
    POINTS.get_or_init(|| parse(&std::env::var("TRADESIM_FAILPOINT").unwrap_or_default()).unwrap_or_default())
}

/// The points the search passes ([`hit`]'s names).
const POINTS: [&str; 4] = ["prune", "finish", "refill", "report"];

/// `NAME:N[,NAME:N]` (a point of [`POINTS`] once, N >= 1; empty: no point) as each point's aborting pass, or
/// a configuration error naming `TRADESIM_FAILPOINT` and the entry.
fn parse(text: &str) -> Result<HashMap<String, u64>, crate::Error> {
    let mut points = HashMap::new();
    let refuse = |why: String| crate::Error::config("TRADESIM_FAILPOINT", why);
    for entry in text.split(',').filter(|entry| !entry.trim().is_empty()) {
        let expected =
            || refuse(format!("`{entry}`: expected NAME:N with NAME one of {} and N >= 1", POINTS.join(", ")));
        let (name, n) = entry.split_once(':').ok_or_else(expected)?;
        let name = name.trim();
        let n = n.trim().parse::<u64>().ok().filter(|&n| n >= 1 && POINTS.contains(&name)).ok_or_else(expected)?;
        if points.insert(name.to_owned(), n).is_some() {
            return Err(refuse(format!("`{entry}`: point {name} named twice")));
        }
    }
    Ok(points)
}

/// Refuses a malformed `TRADESIM_FAILPOINT` (a test that sets one wrongly would otherwise run without it).
pub fn check() -> Result<(), crate::Error> {
    match std::env::var("TRADESIM_FAILPOINT") {
        Ok(text) => parse(&text).map(|_| ()),
        Err(_) => Ok(()),
    }
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

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn points_parse_and_malformed_ones_are_named() {
        let points = parse("prune:2, finish:1").unwrap();
        assert_eq!((points["prune"], points["finish"], points.len()), (2, 1, 2));
        assert!(parse("").unwrap().is_empty());
        for bad in ["prune", "prune:x", "prune:0", ":3", "prune:2,finish", "finsh:1"] {
            let why = parse(bad).unwrap_err().to_string();
            assert!(why.contains("NAME:N"), "{bad}: {why}");
        }
        assert!(parse("finish:1,finish:2").unwrap_err().to_string().contains("twice"));
    }
}
