//! Cells as `Decimal`s: text through a fast reading of plain numbers (else `Decimal`'s parsers), floats as
//! the shortest decimal that reads back as them.

use std::str::FromStr;

use num_traits::FromPrimitive;
use rust_decimal::Decimal;

use super::Cell;
use crate::data::validate::IssueClass;

/// A price or volume cell as a Decimal.
pub(super) fn decimal(cell: &Cell<'_>) -> Result<Decimal, (IssueClass, String)> {
    match cell {
        Cell::Decimal(d) => Ok(*d),
        Cell::Int(i) => Ok(Decimal::from(*i)),
        Cell::Float(x) if !x.is_finite() => Err((IssueClass::NonFinite, format!("{x} is not finite"))),
        Cell::Float(x) => {
            float_decimal(*x).ok_or_else(|| (IssueClass::BadNumber, format!("{x} does not fit a Decimal")))
        }
        Cell::Text(s) => {
            if let Some(d) = plain_decimal(s) {
                return Ok(d);
            }
            let t = s.trim();
            Decimal::from_str(t).or_else(|_| Decimal::from_scientific(t)).map_err(|_| {
                let non_finite = ["nan", "inf", "+inf", "-inf", "infinity", "-infinity", "+infinity"];
                if non_finite.iter().any(|w| w.eq_ignore_ascii_case(t)) {
                    (IssueClass::NonFinite, format!("`{t}` is not finite"))
                } else {
                    (IssueClass::BadNumber, format!("`{t}` is not a number"))
                }
            })
        }
        Cell::Time(_) | Cell::Null => Err((IssueClass::BadNumber, "empty or not a number".to_owned())),
    }
}

/// `[-]DIGITS[.DIGITS]` of at most 18 digits (how prices and volumes are written) read straight into a
/// mantissa and a scale: the value and scale `Decimal::from_str` gives. `None` for anything else (signs,
/// exponents, underscores, a negative zero, longer numbers), which takes the general parser.
fn plain_decimal(text: &str) -> Option<Decimal> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    // At most 18 digits and a point (10^18 - 1 fits a u64).
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let (mut mantissa, mut point) = (0u64, None);
    for (i, &b) in digits.iter().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d < 10 {
            mantissa = mantissa * 10 + u64::from(d);
        } else if b == b'.' && point.is_none() && i > 0 && i + 1 < digits.len() {
            point = Some(i);
        } else {
            return None;
        }
    }
    if (point.is_none() && digits.len() > 18) || (negative && mantissa == 0) {
        return None;
    }
    let scale = point.map_or(0, |p| digits.len() - p - 1) as u32;
    // Exact: the mantissa is below 2^64 and the scale below 19.
    Some(Decimal::from_parts(mantissa as u32, (mantissa >> 32) as u32, 0, negative, scale))
}

/// Powers of ten that are exact doubles, by exponent.
const POWERS: [f64; 16] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// The decimal a float (a cell, a money parameter from Python) stands for: the shortest decimal that reads back as `x` when one of at most
/// 15 significant digits exists (every number written with at most 15 digits and parsed into a double,
/// as pandas or Parquet writers do); others, with `Decimal::from_f64`. Found without text: the first scale
/// `k <= 15` at which `m = round(x 10^k)` (below 2^50) satisfies `m / 10^k == x` in f64 (`m` and `10^k`
/// are exact and the division is correctly rounded, so this is exactly "m at scale k reads back as x";
/// below 2^50 the rounding of `x 10^k` cannot pick the wrong `m`).
///
/// A column's values usually share a scale, so the scale that worked last on this thread is tried first:
/// when `m` at that scale reads back as `x` and has at most 15 digits, `m` without its trailing zeros is
/// the answer of the search (a smaller scale reading back as `x` would be another decimal of at most 15
/// significant digits rounding to the same double, which the 15.95 digits of a double rule out).
pub fn float_decimal(x: f64) -> Option<Decimal> {
    thread_local!(static LAST_SCALE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
    // The thread's last reading (the answer depends on `x` alone): a bar's open is often the last close,
    // and its high or low its open or close.
    thread_local!(static LAST_READ: std::cell::Cell<(u64, Decimal)> = const { std::cell::Cell::new((0, Decimal::ZERO)) });
    if !x.is_finite() || x == 0.0 {
        return Decimal::from_f64(x);
    }
    let (bits, last) = LAST_READ.get();
    if bits == x.to_bits() {
        return Some(last);
    }
    let hint = LAST_SCALE.get();
    // Rounded by adding a half and truncating (`round` is a library call here): a nearest integer off by
    // one in the rare cases this misrounds fails the read-back test and takes the search, and any `m` that
    // passes the test is the answer (above), however it was found.
    let y = x * POWERS[hint];
    let m = if y.abs() < 1e15 { (y + 0.5f64.copysign(y)) as i64 } else { i64::MAX };
    if m.unsigned_abs() < 1_000_000_000_000_000 && m as f64 / POWERS[hint] == x {
        let (mut m, mut k) = (m, hint as u32);
        while k > 0 && m % 10 == 0 {
            (m, k) = (m / 10, k - 1);
        }
        let d = Decimal::new(m, k);
        LAST_READ.set((x.to_bits(), d));
        return Some(d);
    }
    let found = searched_decimal(x);
    if let Some(d) = found {
        LAST_SCALE.set(d.scale() as usize);
        LAST_READ.set((x.to_bits(), d));
    }
    found.or_else(|| Decimal::from_f64(x))
}

/// The search of [`float_decimal`] from scale 0 (`None`: no decimal of at most 15 digits reads back as `x`).
fn searched_decimal(x: f64) -> Option<Decimal> {
    const LIMIT: f64 = (1u64 << 50) as f64;
    for (k, p) in POWERS.iter().enumerate() {
        let m = (x * p).round();
        if m.abs() >= LIMIT {
            break;
        }
        if m / p == x {
            return Some(Decimal::new(m as i64, k as u32));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A float cell is the decimal that was written, for every decimal of at most 15 significant digits
    /// (where `Decimal::from_f64` can add a digit of noise), and reads back as the same double always.
    #[test]
    fn float_cells_are_the_decimals_written() {
        use num_traits::ToPrimitive;
        use rand::{RngExt, SeedableRng};
        let x = 4_255_223.196f64;
        assert_eq!(
            Decimal::from_f64(x).map(|d| d.to_string()).as_deref(),
            Some("4255223.196000001"),
            "from_f64's noise"
        );
        assert_eq!(float_decimal(x).map(|d| d.to_string()).as_deref(), Some("4255223.196"));
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..300_000 {
            let digits = rng.random_range(1..=15u32);
            let m: i64 = rng.random_range(0..10i64.pow(digits));
            let scale = rng.random_range(0..=digits.min(15));
            let written = Decimal::new(if rng.random::<bool>() { m } else { -m }, scale).normalize();
            let x = written.to_f64().expect("finite");
            let read = float_decimal(x).expect("finite");
            assert_eq!((read, read.scale()), (written, written.scale()), "{written} read as {read}");
            let bits = f64::from_bits(rng.random::<u64>());
            // Any double: the fast reading reads back as it; the others are from_f64's.
            if let Some(d) = float_decimal(bits) {
                assert!(d.to_f64() == Some(bits) || Decimal::from_f64(bits) == Some(d), "{bits:e} read as {d}");
            }
        }
        for x in [0.1, 0.3, 0.1 + 0.2, 1.1, 1e-7, 123_456.789_01, 1e14 + 0.5, 2.5e-12, 1e300, -1e-300] {
            let d = float_decimal(x);
            assert!(d.is_some() || Decimal::from_f64(x).is_none(), "{x:e}");
        }
        assert_eq!(float_decimal(0.1 + 0.2), Decimal::from_f64(0.1 + 0.2), "17 digits: from_f64's reading");
        assert_eq!(float_decimal(-0.0), Decimal::from_f64(-0.0));
    }

    /// The scale tried first (the last one found on the thread) gives what the search from scale 0 gives,
    /// value and scale, whatever scale came before: written decimals of every scale, with trailing zeros,
    /// large and tiny ones, and random doubles.
    #[test]
    fn the_scale_tried_first_finds_the_searched_decimal() {
        use num_traits::ToPrimitive;
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut compared = 0;
        for _ in 0..300_000 {
            // Prime the thread's scale with a decimal of a random scale, then read another.
            let prime = Decimal::new(rng.random_range(1..10i64.pow(9)), rng.random_range(0..=15));
            float_decimal(prime.to_f64().expect("finite"));
            let digits = rng.random_range(1..=16u32);
            let m: i64 = rng.random_range(1..10i64.pow(digits));
            let x = if rng.random_range(0..4) == 0 {
                f64::from_bits(rng.random::<u64>())
            } else {
                Decimal::new(m * 10i64.pow(rng.random_range(0..3)), rng.random_range(0..=18)).to_f64().expect("finite")
            };
            let Some(searched) = searched_decimal(x) else { continue };
            let read = float_decimal(x).expect("finite");
            assert_eq!((read, read.scale()), (searched, searched.scale()), "{x:e}");
            compared += 1;
        }
        assert!(compared > 150_000, "{compared} readings compared");
    }

    /// The fast reading of plain numbers is `Decimal::from_str`'s (value and scale) wherever it answers,
    /// and it answers for every plain number of up to 18 digits but a negative zero (left to `from_str`).
    #[test]
    fn plain_numbers_read_as_from_str_reads_them() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let alphabet = b"0123456789.-+e_ ";
        for case in 0..200_000 {
            let text: String = if case % 2 == 0 {
                let len = rng.random_range(0..22);
                (0..len).map(|_| char::from(alphabet[rng.random_range(0..alphabet.len())])).collect()
            } else {
                let digits = rng.random_range(1..=18usize);
                let mut t: String = (0..digits).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect();
                if digits > 1 && rng.random::<bool>() {
                    t.insert(rng.random_range(1..digits), '.');
                }
                if rng.random::<bool>() { format!("-{t}") } else { t }
            };
            let fast = plain_decimal(&text);
            let general = Decimal::from_str(&text).ok();
            if let Some(d) = fast {
                let g = general.unwrap_or_else(|| panic!("`{text}`: fast {d}, from_str refuses"));
                assert_eq!((d, d.scale(), d.is_sign_negative()), (g, g.scale(), g.is_sign_negative()), "`{text}`");
            } else if case % 2 == 1 && !(text.starts_with('-') && text.chars().all(|c| matches!(c, '-' | '0' | '.'))) {
                panic!("`{text}` is plain but was not read");
            }
        }
    }
}
