//! Time-based splits over a series' bars: train / validation / test in time order, and walk-forward folds.
//! No bar is in two parts of one split, and every training bar precedes every evaluation bar.

use std::ops::Range;

/// Train, validation and test ranges of bar indices, in time order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// Training bars (normalization statistics are fitted here only).
    pub train: Range<usize>,
    /// Validation bars.
    pub valid: Range<usize>,
    /// Test bars.
    pub test: Range<usize>,
}

/// Splits bars `[start, n)` by the fractions `train` and `valid` (the test part takes the rest).
pub fn time_split(start: usize, n: usize, train: f64, valid: f64) -> Result<Split, crate::Error> {
    if !(train > 0.0 && valid >= 0.0 && train + valid < 1.0) {
        return Err(crate::Error::config(
            "split",
            format!("fractions train {train}, validation {valid} must be > 0, >= 0 and sum below 1"),
        ));
    }
    let len = n.saturating_sub(start);
    let n_train = (len as f64 * train).floor() as usize;
    let n_valid = (len as f64 * valid).floor() as usize;
    if n_train < 2 || len - n_train - n_valid < 2 {
        return Err(crate::Error::Data(format!("{len} bars are too few for a {train}/{valid} split")));
    }
    let (a, b) = (start + n_train, start + n_train + n_valid);
    Ok(Split { train: start..a, valid: a..b, test: b..n })
}

/// Walk-forward folds over bars `[start, n)`: fold k trains on `train_len` bars and tests on the next
/// `test_len`; each fold starts `test_len` bars after the previous one.
pub fn walk_forward(start: usize, n: usize, train_len: usize, test_len: usize) -> Vec<(Range<usize>, Range<usize>)> {
    let mut folds = Vec::new();
    if train_len == 0 || test_len == 0 {
        return folds;
    }
    let mut from = start;
    while from + train_len + test_len <= n {
        folds.push((from..from + train_len, from + train_len..from + train_len + test_len));
        from += test_len;
    }
    folds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_ordered_and_disjoint() {
        let s = time_split(200, 1_200, 0.7, 0.15).unwrap();
        assert_eq!((s.train.clone(), s.valid.clone(), s.test.clone()), (200..900, 900..1_050, 1_050..1_200));
        assert!(time_split(0, 10, 0.9, 0.2).is_err());
        assert!(time_split(0, 3, 0.5, 0.1).is_err());
    }

    #[test]
    fn folds_roll_forward_without_overlap_of_test_parts() {
        let f = walk_forward(0, 100, 50, 10);
        assert_eq!(f.len(), 5);
        assert_eq!(f[0], (0..50, 50..60));
        assert_eq!(f[4], (40..90, 90..100));
        for (train, test) in &f {
            assert_eq!(train.end, test.start);
        }
    }
}
