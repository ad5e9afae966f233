//! Side work several at once: the placebo searches, the walk-forward folds of the best configuration and
//! the walk-forward optimisation's fold searches.
//! Each is a study of its own, with its own data, seed and streams, and one worker: which of them run
//! together, and in what order they finish, changes no bit of any of them (`tests/side_searches.rs`). On a
//! GPU a search's greedy walks use a few multiprocessors and its small launches leave gaps, so searches
//! side by side fill the device; on the CPU every search already spreads over the cores, so one at a time is
//! the default there.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::{Backend, Error};

/// Side searches at once when `--side-searches` is not given: on a GPU.
pub const GPU_SIDE_SEARCHES: usize = 4;

/// The side searches to run at once: `wanted`, fewer where the device's free memory holds fewer searches of
/// `used` bytes (the most the real search held at once, [`Backend::measure_memory`]) with a tenth of it
/// spare; at least one.
pub fn at_once(backend: &Backend, wanted: usize, used: Option<usize>) -> Result<usize, Error> {
    let fit = match (used, backend.free_memory()?) {
        (Some(used @ 1..), Some(free)) => (free - free / 10) / used,
        _ => usize::MAX,
    };
    Ok(wanted.min(fit).max(1))
}

/// What a search's summary says of its side work (`None` where it had none): the placebo searches, the
/// walk-forward folds and fold searches, and how many of each ran at once.
pub fn line(study: &crate::hyperopt::config::StudyConfig, at_once: usize) -> Option<String> {
    let (placebo, folds, searches) = (study.placebo, study.walk_forward, study.walk_forward_search);
    let most = placebo.max(folds).max(searches);
    (most > 0).then(|| {
        format!(
            "side:     {placebo} placebo searches, {folds} walk-forward folds, {searches} fold searches; up to {} \
             at once (--side-searches)",
            at_once.min(most)
        )
    })
}

/// `search(i)` for i in `0..n` on up to `at_once` threads, each taking the next index as it frees up; the
/// results in index order. After an error no further index starts, and the first error by index is
/// returned. With `at_once` 1 the searches run one after the other on this thread.
pub fn run_at_once<T: Send>(
    n: usize,
    at_once: usize,
    search: impl Fn(usize) -> Result<T, Error> + Sync,
) -> Result<Vec<T>, Error> {
    if at_once <= 1 || n <= 1 {
        return (0..n).map(search).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<T, Error>>>> = Mutex::new((0..n).map(|_| None).collect());
    let panicked = std::thread::scope(|scope| {
        let work = || {
            while !failed.load(Ordering::SeqCst) {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let result = search(i);
                if result.is_err() {
                    failed.store(true, Ordering::SeqCst);
                }
                results.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(result);
            }
        };
        let handles: Vec<_> = (0..at_once.min(n)).map(|_| scope.spawn(work)).collect();
        handles.into_iter().map(|h| h.join().is_err()).fold(false, |a, b| a | b)
    });
    if panicked {
        return Err(Error::Study("a side search panicked".to_owned()));
    }
    let results = results.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    // The first error by index; an index never started (after an error) has one before or after it.
    let mut out = Vec::with_capacity(n);
    let mut missing = false;
    for result in results {
        match result {
            Some(Ok(t)) => out.push(t),
            Some(Err(e)) => return Err(e),
            None => missing = true,
        }
    }
    if missing {
        return Err(Error::Study("a side search did not run".to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_index_order_whatever_the_threads() {
        for at_once in [1, 2, 3, 8] {
            let out = run_at_once(7, at_once, |i| {
                // Later indices finish first.
                std::thread::sleep(std::time::Duration::from_millis((7 - i as u64) * 3));
                Ok(i * 10)
            })
            .unwrap();
            assert_eq!(out, vec![0, 10, 20, 30, 40, 50, 60], "at_once {at_once}");
        }
    }

    #[test]
    fn the_first_error_by_index_is_returned_and_no_search_starts_after_it() {
        let started = AtomicUsize::new(0);
        let err = run_at_once(50, 2, |i| {
            started.fetch_add(1, Ordering::SeqCst);
            if i == 3 || i == 4 { Err(Error::Study(format!("search {i} failed"))) } else { Ok(i) }
        })
        .unwrap_err();
        assert_eq!(err.to_string(), Error::Study("search 3 failed".to_owned()).to_string());
        // Index 3 fails while at most one other search is running: a few more may start, not all 50.
        assert!(started.load(Ordering::SeqCst) < 10, "{} searches started", started.load(Ordering::SeqCst));
        // One at a time: nothing after the failure starts.
        let started = AtomicUsize::new(0);
        let err = run_at_once(10, 1, |i| {
            started.fetch_add(1, Ordering::SeqCst);
            if i == 2 { Err(Error::Study("two".to_owned())) } else { Ok(i) }
        });
        assert!(err.is_err());
        assert_eq!(started.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn the_cpu_takes_what_was_asked() {
        assert_eq!(at_once(&Backend::Cpu, 3, None).unwrap(), 3);
        assert_eq!(at_once(&Backend::Cpu, 0, None).unwrap(), 1);
    }
}
