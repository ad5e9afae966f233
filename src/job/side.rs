//! Side work several at once: the placebo searches, the walk-forward folds of the best configuration and
//! the walk-forward optimisation's fold searches.
//! Each is a study (or a fold) of its own, with its own data, seed and streams: on one device, which of them
//! run together, and in what order they finish, changes no bit of any of them (`tests/side_searches.rs`;
//! with several devices a search's own workers already make its sampling depend on timing). On a GPU a
//! search's greedy walks use a few multiprocessors and its small launches leave gaps, so searches side by
//! side fill the device; on the CPU every search already spreads over the cores, so one at a time is the
//! default there.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::evidence::walk_forward::FoldBars;
use crate::hyperopt::Study;
use crate::{Backend, Error};

/// Side searches at once when `--side-searches` is not given: on a GPU.
pub const GPU_SIDE_SEARCHES: usize = 8;

/// Runs the study's own `search` on `backend` and returns the side searches to run at once after it:
/// `wanted`, fewer where the device's free memory (with a tenth of it spare) holds fewer searches of twice
/// the most the search held at once ([`Backend::measure_memory`]); at least one ([`cap`]).
pub fn search_then_count(
    backend: &Backend,
    wanted: usize,
    search: impl FnOnce() -> Result<(), Error>,
) -> Result<usize, Error> {
    let (searched, used) = backend.measure_memory(search)?;
    searched?;
    Ok(cap(wanted, used, backend.free_memory()?))
}

/// [`search_then_count`]'s count from the device's `free` bytes (`None`: the CPU, no cap). Each side search counts twice the
/// real search's peak: it samples other trials, whose networks (and a first batch sized for the whole
/// space where the real search's last batch was sized for its own trials) may be larger. A real search
/// that allocated nothing on the device (a resumed study whose trials were all finished) says nothing of a
/// side search's size: then one at a time, which cannot ask for more than the real search would.
pub fn cap(wanted: usize, used: Option<usize>, free: Option<usize>) -> usize {
    let fit = match (used, free) {
        (_, None) => usize::MAX,
        (Some(used @ 1..), Some(free)) => (free - free / 10) / used.saturating_mul(2),
        (_, Some(_)) => 1,
    };
    wanted.min(fit).max(1)
}

/// Side tasks of `evidence`: its placebo searches, walk-forward folds and fold searches.
fn side_tasks(evidence: &crate::evidence::Evidence) -> (usize, usize, usize) {
    let placebo = evidence.placebo.as_ref().map_or(0, |p| p.searches.len());
    (placebo, evidence.walk_forward.len(), evidence.walk_forward_search.len())
}

/// Whether two or more of `evidence`'s side tasks ran at once (`at_once` at most), so that parts of the
/// job's time overlapped.
pub fn overlapped(evidence: &crate::evidence::Evidence, at_once: usize) -> bool {
    let (placebo, folds, searches) = side_tasks(evidence);
    at_once > 1 && placebo + folds + searches > 1
}

/// What a search's summary says of its side work (`None` where it had none): the placebo searches, the
/// walk-forward folds and fold searches that ran (from `evidence`), and at most how many at once.
pub fn line(evidence: &crate::evidence::Evidence, at_once: usize) -> Option<String> {
    let (placebo, folds, searches) = side_tasks(evidence);
    let all = placebo + folds + searches;
    (all > 0).then(|| {
        format!(
            "side:     {placebo} placebo searches, {folds} walk-forward folds, {searches} fold searches; up to {} \
             at once (--side-searches)",
            at_once.min(all)
        )
    })
}

/// What one piece of a job's side work gives.
#[derive(Debug)]
pub enum Side {
    /// A placebo search's summary.
    Placebo(crate::evidence::PlaceboSearch),
    /// A walk-forward fold of the best configuration.
    Fold(crate::evidence::Fold),
    /// A walk-forward optimisation fold (its search and its winner's test).
    SearchFold(crate::evidence::SearchFold),
}

/// One piece of a job's side work: independent of every other, so any number run side by side.
pub type Task<'a> = Box<dyn Fn() -> Result<Side, Error> + Sync + 'a>;

/// What a job's side work gave, each kind in the order its tasks were listed.
#[derive(Debug, Default)]
pub struct SideDone {
    /// The placebo searches.
    pub placebo: Vec<crate::evidence::PlaceboSearch>,
    /// The walk-forward folds.
    pub folds: Vec<crate::evidence::Fold>,
    /// The walk-forward optimisation folds.
    pub search_folds: Vec<crate::evidence::SearchFold>,
}

/// Runs `tasks`, `at_once` at a time in one queue (placebo searches, folds and fold searches mixed, so the
/// last round is not one kind's remainder alone), and sorts what they gave by kind.
pub fn run_tasks(tasks: &[Task<'_>], at_once: usize) -> Result<SideDone, Error> {
    let mut done = SideDone::default();
    for side in run_at_once(tasks.len(), at_once, |i| tasks[i]())? {
        match side {
            Side::Placebo(p) => done.placebo.push(p),
            Side::Fold(f) => done.folds.push(f),
            Side::SearchFold(f) => done.search_folds.push(f),
        }
    }
    Ok(done)
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
                // A panic is this search's error (its message kept), and stops the queue as an error does.
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| search(i))).unwrap_or_else(|panic| {
                        Err(Error::Study(format!("side search {} panicked: {}", i + 1, message(&*panic))))
                    });
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

/// A panic's message, where it has one.
fn message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("?")
}

/// How a job runs each piece of its side work (`Job::side_work`, in `side_work.rs`).
pub(crate) struct SideWork<'a> {
    /// Placebo search `index` as study `NAME.SUFFIX` with its attributes: its name and study.
    #[allow(clippy::type_complexity, reason = "a callback's signature, named once")]
    pub(crate) placebo: &'a (dyn Fn(u64, &str, &[(&str, String)]) -> Result<(String, Study), Error> + Sync),
    /// Walk-forward fold `fold` (from 1) of the best trial's configuration on its bars.
    pub(crate) fold: &'a (
            dyn Fn(&crate::hyperopt::study::TrialRecord, usize, &FoldBars) -> Result<crate::evidence::Fold, Error>
                + Sync
        ),
    /// The K anchored folds after the validation split (`folds(K)`: walk-forward's and its optimisation's).
    pub(crate) folds: &'a (dyn Fn(usize) -> Result<Vec<FoldBars>, Error> + Sync),
    /// Walk-forward optimisation's fold `fold` (from 1) on its bars.
    pub(crate) search_fold: &'a (dyn Fn(usize, &FoldBars) -> Result<crate::evidence::SearchFold, Error> + Sync),
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
    fn a_panicking_search_is_an_error_that_names_it_and_stops_the_queue() {
        let started = AtomicUsize::new(0);
        let err = run_at_once(100, 2, |i| {
            started.fetch_add(1, Ordering::SeqCst);
            if i == 1 {
                panic!("the fold has no bars");
            }
            // A search takes a while (the panic's report may take some milliseconds).
            std::thread::sleep(std::time::Duration::from_millis(5));
            Ok(i)
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("side search 2 panicked: the fold has no bars"), "{err}");
        assert!(started.load(Ordering::SeqCst) < 50, "{} searches started", started.load(Ordering::SeqCst));
    }

    #[test]
    fn the_cpu_takes_what_was_asked() {
        assert_eq!(search_then_count(&Backend::Cpu, 3, || Ok(())).unwrap(), 3);
        assert_eq!(search_then_count(&Backend::Cpu, 0, || Ok(())).unwrap(), 1);
        // The search's own error is the job's.
        let err = search_then_count(&Backend::Cpu, 3, || Err(Error::Study("lost".to_owned()))).unwrap_err();
        assert_eq!(err.to_string(), Error::Study("lost".to_owned()).to_string());
    }

    #[test]
    fn device_memory_caps_the_searches_at_once() {
        const GB: usize = 1 << 30;
        // 80 GB free, 1 GB the real search (2 GB counted a side search): 36 fit (a tenth kept spare).
        assert_eq!(cap(8, Some(GB), Some(80 * GB)), 8);
        // 20 GB free, 3 GB the real search: 18 GB usable, 3 side searches of 6 GB.
        assert_eq!(cap(8, Some(3 * GB), Some(20 * GB)), 3);
        // Not even one fits: one at a time (its allocations refuse it with the bytes needed and free).
        assert_eq!(cap(8, Some(20 * GB), Some(10 * GB)), 1);
        // The real search allocated nothing on the device: its size is unknown, so one at a time.
        assert_eq!(cap(8, Some(0), Some(80 * GB)), 1);
        assert_eq!(cap(8, None, Some(80 * GB)), 1);
    }
}
