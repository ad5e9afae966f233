//! How the report writes numbers and text: percentages, money, ratios, parameters, escaped HTML.

/// A percentage with two decimals.
pub(super) fn pct(x: f64) -> String {
    if x.is_finite() { format!("{:.2}%", 100.0 * x) } else { "NaN".to_owned() }
}

/// Money with two decimals and thousands separators.
pub(super) fn money(x: f64) -> String {
    if !x.is_finite() {
        return "NaN".to_owned();
    }
    let text = format!("{:.2}", x.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, "00"));
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("{}{grouped}.{frac}", if x < 0.0 { "-" } else { "" })
}

/// A ratio with four decimals.
pub(super) fn num(x: f64) -> String {
    if x.is_finite() { format!("{x:.4}") } else { "NaN".to_owned() }
}

/// A parameter for the table: whole numbers as such, small values in scientific notation.
pub(super) fn param(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e9 {
        format!("{x:.0}")
    } else if x != 0.0 && x.abs() < 0.01 {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

pub(super) use crate::html::html_escape;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_percentages_are_formatted() {
        assert_eq!(money(1_234_567.891), "1,234,567.89");
        assert_eq!(money(-99.5), "-99.50");
        assert_eq!(pct(0.12345), "12.35%");
        assert_eq!(pct(f64::NAN), "NaN");
    }
}
