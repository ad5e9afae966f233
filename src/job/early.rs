//! A series' splits and features computed before the job that searches it ([`EarlyFeatures`]).

use std::time::Instant;

use crate::data::{Dataset, Series};

/// A series' splits and features computed before [`Job::run`](super::Job::run) (by `tradesim hyperopt`
/// and `train` while the device opens, [`EarlyFeatures::compute`]): the job takes them for the very bars
/// they were computed from and its configuration's `env.sigma_span`, and computes its own otherwise
/// ([`Job::run_with`](super::Job::run_with)).
#[derive(Debug)]
pub(crate) struct EarlyFeatures {
    /// The address and length of the series' bars: a dataset that moved keeps its series' buffers, so
    /// these name the bars themselves, not a series of the same symbol and length elsewhere (another
    /// dataset, a copy). (A series without bars has no features, so no two series share them.)
    bars: (usize, usize),
    sigma_span: usize,
    data: crate::train::SplitData,
    seconds: f64,
}

impl EarlyFeatures {
    /// The splits and features of `dataset`'s series `symbol` (the only one when `None`) with
    /// `sigma_span`; none where the dataset is a universe or the series cannot be split (the job then
    /// reports the error when it computes them itself).
    pub(crate) fn compute(dataset: &Dataset, symbol: Option<&str>, sigma_span: usize) -> Option<Self> {
        if symbol.is_none() && dataset.series.len() != 1 {
            return None;
        }
        let series = dataset.select(symbol).ok()?;
        let started = Instant::now();
        let data = crate::train::SplitData::new(series, crate::train::DEFAULT_SPLIT, sigma_span).ok()?;
        let seconds = started.elapsed().as_secs_f64();
        Some(Self { bars: bars_of(series), sigma_span, data, seconds })
    }

    /// The splits and features and the seconds they took, where they are `series`' with `sigma_span`.
    pub(crate) fn take_for(self, series: &Series, sigma_span: usize) -> Option<(crate::train::SplitData, f64)> {
        (self.bars == bars_of(series) && self.sigma_span == sigma_span).then_some((self.data, self.seconds))
    }
}

/// The address and length of `series`' bars.
fn bars_of(series: &Series) -> (usize, usize) {
    (series.bars.as_ptr() as usize, series.bars.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::synthetic::{GeneratorConfig, generate};
    use crate::train::{DEFAULT_SPLIT, SplitData};

    /// The early features are `SplitData::new`'s for the series and span they were computed for, and are
    /// refused for another span or another series; a universe without a symbol gets none.
    #[test]
    fn early_features_are_taken_only_for_their_series_and_span() {
        let data = generate(&GeneratorConfig { bars: 4_000, symbols: 2, seed: 5, bar_seconds: 3_600 });
        let (a, b) = (&data.series[0], &data.series[1]);
        assert!(EarlyFeatures::compute(&data, None, 100).is_none(), "a universe without a symbol");
        let want = SplitData::new(a, DEFAULT_SPLIT, 100).unwrap();
        let early = || EarlyFeatures::compute(&data, Some(a.symbol.as_str()), 100).unwrap();
        let (got, seconds) = early().take_for(a, 100).unwrap();
        assert_eq!(got, want);
        assert!(seconds >= 0.0);
        assert!(early().take_for(a, 101).is_none(), "another sigma span");
        assert!(early().take_for(b, 100).is_none(), "another series");
        // Another dataset's series of the same symbol and length (another seed), or a copy: refused.
        let other = generate(&GeneratorConfig { bars: 4_000, symbols: 2, seed: 6, bar_seconds: 3_600 });
        assert_eq!((&other.series[0].symbol, other.series[0].bars.len()), (&a.symbol, a.bars.len()));
        assert!(early().take_for(&other.series[0], 100).is_none(), "another dataset's series");
        assert!(early().take_for(&a.clone(), 100).is_none(), "a copy");
        // The dataset moved (as the CLI moves it into the job): its series' bars are the same.
        let one = crate::data::Dataset { series: vec![a.clone()], ..data.clone() };
        let early_one = EarlyFeatures::compute(&one, None, 100).unwrap();
        let moved = Box::new(one);
        assert!(early_one.take_for(&moved.series[0], 100).is_some(), "the only series, moved");
    }
}
