//! The study's trials as a claim reads them: by number, with what a claim asks of them kept up to date as
//! trials are added or change (the unfinished ones, how many are tradesim's, the finished numbers, and the
//! finished trials' TPE losses by number and by rank), so that a claim never passes over every trial of
//! the study: in a study of 100,000 trials one pass over the records reads tens of megabytes.

use std::collections::BTreeSet;
use std::ops::Deref;

use super::TrialRecord;
use crate::hyperopt::sampler::{TpeOptions, fit_window, tpe_loss};

/// Trials by number, with their aggregates ([`TrialSet::upsert`] keeps them).
#[derive(Clone, Debug, Default)]
pub struct TrialSet {
    /// The records, ascending by number.
    trials: Vec<TrialRecord>,
    /// Numbers of the unfinished trials.
    unfinished: BTreeSet<u64>,
    /// How many trials are tradesim's ([`TrialRecord::ours`]).
    ours: usize,
    /// Numbers of the finished trials, ascending.
    finished: Vec<u64>,
    /// The finished trials that have a TPE loss ([`tpe_loss`]): `(number, loss)`, ascending by number.
    told: Vec<(u64, f64)>,
    /// The same by loss (in `f64::total_cmp`'s order, as a sortable key), then number.
    ranked: BTreeSet<(i64, u64)>,
    /// The study's epochs per trial (a pruned trial's loss counts the epochs it missed).
    epochs: u64,
}

/// `x` as an integer whose order is `f64::total_cmp`'s.
fn total_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

impl Deref for TrialSet {
    type Target = [TrialRecord];

    fn deref(&self) -> &[TrialRecord] {
        &self.trials
    }
}

impl TrialSet {
    /// No trials, of a study of `epochs` epochs per trial.
    pub fn new(epochs: u64) -> Self {
        Self { epochs, ..Self::default() }
    }

    /// `records` (in any order) as a set.
    pub fn of(records: impl IntoIterator<Item = TrialRecord>, epochs: u64) -> Self {
        let mut set = Self::new(epochs);
        for r in records {
            set.upsert(r);
        }
        set
    }

    /// Adds `record`, or replaces the trial of its number.
    pub fn upsert(&mut self, record: TrialRecord) {
        let i = match self.trials.binary_search_by_key(&record.number, |t| t.number) {
            Ok(i) => {
                let old = std::mem::replace(&mut self.trials[i], record);
                self.forget(&old);
                i
            }
            Err(i) => {
                self.trials.insert(i, record);
                i
            }
        };
        let t = &self.trials[i];
        self.ours += usize::from(t.ours);
        if !t.finished() {
            self.unfinished.insert(t.number);
            return;
        }
        let at = self.finished.partition_point(|&n| n < t.number);
        self.finished.insert(at, t.number);
        if let Some(loss) = tpe_loss(&t.status, t.value, t.pruned_at, self.epochs) {
            let at = self.told.partition_point(|&(n, _)| n < t.number);
            self.told.insert(at, (t.number, loss));
            self.ranked.insert((total_key(loss), t.number));
        }
    }

    /// Removes what `old`, a record being replaced, added to the aggregates.
    fn forget(&mut self, old: &TrialRecord) {
        self.ours -= usize::from(old.ours);
        if !old.finished() {
            self.unfinished.remove(&old.number);
            return;
        }
        if let Ok(at) = self.finished.binary_search(&old.number) {
            self.finished.remove(at);
        }
        if let Ok(at) = self.told.binary_search_by_key(&old.number, |&(n, _)| n) {
            let (_, loss) = self.told.remove(at);
            self.ranked.remove(&(total_key(loss), old.number));
        }
    }

    /// The epochs per trial its losses count with.
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Trial `number`.
    pub fn get(&self, number: u64) -> Option<&TrialRecord> {
        self.trials.binary_search_by_key(&number, |t| t.number).ok().map(|i| &self.trials[i])
    }

    /// The trials numbered `first` or above.
    pub fn from_number(&self, first: u64) -> &[TrialRecord] {
        &self.trials[self.trials.partition_point(|t| t.number < first)..]
    }

    /// The unfinished trials, by number.
    pub fn unfinished(&self) -> impl Iterator<Item = &TrialRecord> {
        self.unfinished.iter().filter_map(|&n| self.get(n))
    }

    /// How many trials are tradesim's.
    pub fn ours(&self) -> usize {
        self.ours
    }

    /// The numbers of the finished trials, ascending.
    pub fn finished(&self) -> &[u64] {
        &self.finished
    }

    /// The numbers of the finished trials TPE fits, ascending: those [`crate::hyperopt::sampler::fitted`]
    /// picks from the finished trials with a loss (the below set of all of them and the newest
    /// [`crate::hyperopt::sampler::ABOVE_WINDOW`] others), found without passing over them all.
    pub fn fitted(&self, opts: &TpeOptions) -> Vec<u64> {
        let Some((n_below, window)) = fit_window(self.told.len(), opts) else {
            return self.told.iter().map(|&(number, _)| number).collect();
        };
        // The below set: the lowest losses, the lower number first on ties (`fitted`'s stable ranking).
        let mut below: Vec<u64> = self.ranked.iter().take(n_below).map(|&(_, number)| number).collect();
        below.sort_unstable();
        let mut out = below.clone();
        out.extend(
            self.told.iter().rev().map(|&(number, _)| number).filter(|n| below.binary_search(n).is_err()).take(window),
        );
        out.sort_unstable();
        out
    }

    /// The TPE loss of finished trial `number`, if it has one.
    pub fn loss(&self, number: u64) -> Option<f64> {
        self.told.binary_search_by_key(&number, |&(n, _)| n).ok().map(|i| self.told[i].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyperopt::sampler::fitted;

    fn record(number: u64, status: &str, value: f64, ours: bool) -> TrialRecord {
        TrialRecord { value, ours, pruned_at: (status == "pruned").then_some(1), ..TrialRecord::ours(number, status) }
    }

    /// A set kept up to date through additions and changes holds what a set built at once from the final
    /// records holds, and its aggregates are what passes over every record give: the unfinished trials,
    /// tradesim's count, the finished numbers, and the trials TPE fits as `sampler::fitted` picks them.
    #[test]
    fn kept_aggregates_are_those_of_every_record() {
        let opts = TpeOptions::default();
        let mut kept = TrialSet::new(4);
        let mut last = Vec::new();
        for n in 0..900u64 {
            kept.upsert(record(n, "running", f64::NAN, n % 7 != 3));
            if n >= 5 {
                // Trials finish out of order, some as ties, pruned or failed.
                let m = n - 5 + (n % 3);
                let status = ["complete", "pruned", "fail", "complete"][(m % 4) as usize];
                let value = ((m * 37) % 101) as f64 / 10.0;
                if kept.get(m).is_some_and(|t| !t.finished()) {
                    kept.upsert(record(m, status, value, m % 7 != 3));
                }
            }
            if n % 150 == 149 {
                last = kept.to_vec();
                let whole = TrialSet::of(last.iter().rev().cloned(), 4);
                assert_eq!(format!("{:?}", &*whole), format!("{:?}", &*kept));
                let unfinished: Vec<u64> = last.iter().filter(|t| !t.finished()).map(|t| t.number).collect();
                assert_eq!(kept.unfinished().map(|t| t.number).collect::<Vec<_>>(), unfinished);
                assert_eq!(kept.ours(), last.iter().filter(|t| t.ours).count());
                let finished: Vec<u64> = last.iter().filter(|t| t.finished()).map(|t| t.number).collect();
                assert_eq!(kept.finished(), finished);
                let told: Vec<(u64, f64)> = last
                    .iter()
                    .filter_map(|t| tpe_loss(&t.status, t.value, t.pruned_at, 4).map(|l| (t.number, l)))
                    .collect();
                let picked: Vec<u64> = fitted(&told, &opts).into_iter().map(|i| told[i].0).collect();
                assert_eq!(kept.fitted(&opts), picked, "after trial {n}");
                assert_eq!(whole.fitted(&opts), picked);
            }
        }
        assert!(last.len() > 600 && kept.fitted(&opts).len() < kept.finished().len(), "the window was exercised");
        assert_eq!(kept.from_number(890).len(), 10);
        assert_eq!(kept.loss(0), tpe_loss(&kept[0].status, kept[0].value, kept[0].pruned_at, 4));
    }
}
