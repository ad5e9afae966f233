//! JSON output: every file tradesim writes as JSON is built as a `serde_json::Value` and serialized by
//! serde_json (valid escaping of any text, such as a data label with control characters).

use crate::Error;
use std::path::Path;

use serde_json::Value;

/// A JSON number, or `null` for NaN and the infinities (JSON has neither).
pub fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// [`number`] of an optional value (`null` when absent).
pub fn opt(x: Option<f64>) -> Value {
    x.map_or(Value::Null, number)
}

/// `value`, pretty-printed, with a final newline.
pub fn text(value: &Value) -> String {
    let mut out = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned());
    out.push('\n');
    out
}

/// Writes `value` to `path` ([`text`]).
pub fn write(path: &Path, value: &Value) -> Result<(), Error> {
    std::fs::write(path, text(value)).map_err(|e| Error::Output(format!("writing {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_and_non_finite_numbers_stay_valid_json() {
        let v = serde_json::json!({"label": "a\u{1}b\"c\n", "x": number(f64::NAN), "y": number(1.5), "z": opt(None)});
        let back: Value = serde_json::from_str(&text(&v)).unwrap();
        assert_eq!(back["label"], "a\u{1}b\"c\n");
        assert!(back["x"].is_null() && back["z"].is_null());
        assert_eq!(back["y"], 1.5);
    }
}
