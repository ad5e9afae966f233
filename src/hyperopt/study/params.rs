//! Parameters and values in Optuna's columns: distributions as Optuna's JSON, floats with their type
//! (FINITE, INF_POS, INF_NEG, NAN).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::Error;
use crate::hyperopt::config::{Dimension, is_integer};

pub(super) fn nan_to_null(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Optuna's value and type columns for a float: FINITE with the value, INF_POS / INF_NEG / NAN without.
pub(super) fn typed(x: f64) -> (Option<f64>, &'static str) {
    if x.is_finite() {
        (Some(x), "FINITE")
    } else if x.is_nan() {
        (None, "NAN")
    } else if x > 0.0 {
        (None, "INF_POS")
    } else {
        (None, "INF_NEG")
    }
}

pub(super) fn from_typed(value: Option<f64>, kind: &str) -> f64 {
    match kind {
        "FINITE" => value.unwrap_or(f64::NAN),
        "INF_POS" => f64::INFINITY,
        "INF_NEG" => f64::NEG_INFINITY,
        _ => f64::NAN,
    }
}

/// A number as JSON: an integer when `integer` and whole (Optuna's int parameters and choices).
pub(super) fn number(x: f64, integer: bool) -> Value {
    if integer && x.fract() == 0.0 && x.abs() < 9.0e15 { json!(x as i64) } else { json!(x) }
}

/// Optuna's distribution of parameter `name` and the stored value of `value` under it: a range is a
/// FloatDistribution (IntDistribution for integer parameters), choices a CategoricalDistribution (the
/// value is the index of the choice), a fixed value a CategoricalDistribution of one choice.
pub(super) fn distribution(space: &BTreeMap<String, Dimension>, name: &str, value: f64) -> (f64, Value) {
    let int = is_integer(name);
    let categorical = |choices: &[f64]| {
        let index = choices.iter().position(|c| *c == value).unwrap_or(0);
        let choices: Vec<Value> = choices.iter().map(|&c| number(c, int)).collect();
        (index as f64, json!({"name": "CategoricalDistribution", "attributes": {"choices": choices}}))
    };
    match space.get(name) {
        Some(Dimension::Range { low, high, log }) if int => (
            value,
            json!({"name": "IntDistribution", "attributes": {"log": log, "step": 1, "low": number(*low, true), "high": number(*high, true)}}),
        ),
        Some(Dimension::Range { low, high, log }) => (
            value,
            json!({"name": "FloatDistribution", "attributes": {"step": null, "low": low, "high": high, "log": log}}),
        ),
        Some(Dimension::Choice { choices }) if choices.contains(&value) => categorical(choices),
        _ => categorical(&[value]),
    }
}

/// The parameter value stored under a distribution `d` (parsed from `distribution`: the choice at the index
/// for a categorical); the error
/// says what tradesim cannot read (the caller names the trial and the parameter).
pub(super) fn param_value(stored: f64, d: &Value, distribution: &str) -> Result<f64, Error> {
    let bad = |why: String| Error::Study(why);
    match d["name"].as_str() {
        Some("CategoricalDistribution") => {
            let choices =
                d["attributes"]["choices"].as_array().ok_or_else(|| bad("categorical without choices".to_owned()))?;
            let choice =
                choices.get(stored as usize).ok_or_else(|| bad(format!("choice index {stored} out of range")))?;
            choice.as_f64().ok_or_else(|| bad(format!("choice {choice} is not a number")))
        }
        Some("FloatDistribution" | "IntDistribution") => Ok(stored),
        _ => Err(bad(format!("unknown distribution {distribution}"))),
    }
}

/// A parameter's distribution JSON (Optuna's `distribution_json`), parsed for [`param_value`].
pub(super) fn parse_distribution(distribution: &str) -> Result<Value, Error> {
    serde_json::from_str(distribution).map_err(|e| Error::Study(format!("distribution JSON: {e}")))
}
