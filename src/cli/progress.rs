//! What the search commands print alike: progress bar styles, counts, a study's budget.

use indicatif::ProgressStyle;

/// A progress bar style from `template` (the default style when it does not parse).
pub(super) fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// `n` with a comma between thousands.
pub(super) fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Where a study's budget came from: what its creator resolved, or (a study stored before budgets were
/// recorded) its values as stored.
pub(super) fn budget_origin(s: &crate::hyperopt::config::StudyConfig) -> String {
    if s.budget_from.is_empty() { "as the study stores it".to_owned() } else { s.budget_from.clone() }
}
