//! Validation of loaded rows: every problem becomes a [`Finding`] naming file, row, column and symbol; a file
//! with an unhandled error is refused with the full list. [`CleanPolicy`] may drop or repair named classes.

use std::collections::BTreeSet;

use rust_decimal::Decimal;

use super::MarketBar;
pub use crate::findings::{Finding, IssueClass, LoadReport, Severity};

/// What the loader may do instead of refusing a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanPolicy {
    /// Rows with a finding of these classes are dropped.
    pub drop: BTreeSet<IssueClass>,
    /// Rows with a finding of these classes are repaired: high < low swaps them; an open or close outside
    /// [low, high] widens the range to include it.
    pub repair: BTreeSet<IssueClass>,
}

impl CleanPolicy {
    /// Parses `--drop` and `--repair` lists (comma-separated class names).
    pub fn parse(drop: &[String], repair: &[String]) -> Result<Self, crate::Error> {
        let mut policy = Self::default();
        for name in drop.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
            let class: IssueClass = name.parse().map_err(|e| crate::Error::config("--drop", e))?;
            if class.is_file_level() {
                return Err(crate::Error::config(
                    "--drop",
                    format!("`{}` concerns the whole file and cannot be dropped", class.name()),
                ));
            }
            policy.drop.insert(class);
        }
        for name in repair.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
            let class: IssueClass = name.parse().map_err(|e| crate::Error::config("--repair", e))?;
            if !class.is_repairable() {
                return Err(crate::Error::config(
                    "--repair",
                    format!(
                        "`{}` cannot be repaired (repairable: high-below-low, open-outside-range, \
                         close-outside-range)",
                        class.name()
                    ),
                ));
            }
            policy.repair.insert(class);
        }
        Ok(policy)
    }
}

/// Checks one bar's values; returns the findings as (class, column, message).
pub(crate) fn check_bar(bar: &MarketBar) -> Vec<(IssueClass, &'static str, String)> {
    let mut out = Vec::new();
    for (name, v) in [("open", bar.open), ("high", bar.high), ("low", bar.low), ("close", bar.close)] {
        if v <= Decimal::ZERO {
            out.push((IssueClass::NonPositivePrice, name, format!("{name} = {v} is not positive")));
        }
    }
    if bar.volume < Decimal::ZERO {
        out.push((IssueClass::NegativeVolume, "volume", format!("volume = {} is negative", bar.volume)));
    }
    if bar.high < bar.low {
        out.push((IssueClass::HighBelowLow, "high", format!("high {} < low {}", bar.high, bar.low)));
    }
    let (lo, hi) = (bar.low.min(bar.high), bar.high.max(bar.low));
    if bar.open < lo || bar.open > hi {
        out.push((
            IssueClass::OpenOutsideRange,
            "open",
            format!("open {} outside [low {}, high {}]", bar.open, bar.low, bar.high),
        ));
    }
    if bar.close < lo || bar.close > hi {
        out.push((
            IssueClass::CloseOutsideRange,
            "close",
            format!("close {} outside [low {}, high {}]", bar.close, bar.low, bar.high),
        ));
    }
    if bar.volume == Decimal::ZERO {
        out.push((IssueClass::ZeroVolume, "volume", "volume is 0".to_owned()));
    }
    out
}

/// Whether [`check_bar`] would find nothing, decided on the mantissas brought to one scale (a tenth of
/// `check_bar`'s time): positive prices, low <= open, close <= high, a positive volume. `false` means
/// "ask `check_bar`", not "invalid".
pub(crate) fn plainly_valid(bar: &MarketBar) -> bool {
    let prices = [bar.open, bar.high, bar.low, bar.close];
    let scale = prices.iter().map(Decimal::scale).max().unwrap_or(0);
    let at_scale = |d: &Decimal| 10i128.checked_pow(scale - d.scale()).and_then(|p| d.mantissa().checked_mul(p));
    let [Some(o), Some(h), Some(l), Some(c)] = prices.each_ref().map(at_scale) else { return false };
    l > 0 && l <= o && o <= h && l <= c && c <= h && bar.volume.is_sign_positive() && !bar.volume.is_zero()
}

/// Repairs `bar` for `class` (see [`CleanPolicy::repair`]).
pub(crate) fn repair(bar: &mut MarketBar, class: IssueClass) {
    match class {
        IssueClass::HighBelowLow if bar.high < bar.low => std::mem::swap(&mut bar.high, &mut bar.low),
        IssueClass::OpenOutsideRange | IssueClass::CloseOutsideRange => {
            let v = if class == IssueClass::OpenOutsideRange { bar.open } else { bar.close };
            bar.high = bar.high.max(v);
            bar.low = bar.low.min(v);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;
    use rand::{RngExt, SeedableRng};

    /// The quick check never passes a bar that `check_bar` faults, over prices of mixed scales around each
    /// other (equal, crossing, zero, negative) and volumes of every sign; and it passes most clean bars.
    #[test]
    fn plainly_valid_bars_are_the_ones_check_bar_passes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let price = |rng: &mut rand::rngs::StdRng| {
            let scale = rng.random_range(0..=6);
            Decimal::new(rng.random_range(-2..40i64) * 10i64.pow(scale) / 10 + rng.random_range(0..3), scale)
        };
        let (mut clean, mut passed) = (0, 0);
        for _ in 0..200_000 {
            let bar = MarketBar {
                time: DateTime::UNIX_EPOCH.fixed_offset(),
                open: price(&mut rng),
                high: price(&mut rng),
                low: price(&mut rng),
                close: price(&mut rng),
                volume: Decimal::new(rng.random_range(-1..3), rng.random_range(0..3)),
            };
            let faults = check_bar(&bar);
            if plainly_valid(&bar) {
                assert!(faults.is_empty(), "{bar:?}: {faults:?}");
                passed += 1;
            }
            clean += usize::from(faults.is_empty());
        }
        assert!(clean > 1_000 && passed == clean, "{passed} passed of {clean} clean bars");
    }
}
