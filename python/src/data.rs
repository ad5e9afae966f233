//! `Bars`, validated bars (one series per symbol) for a backtest or a search, and its loaders: typed
//! in-memory columns (the pandas loader's DataFrame), a CSV or Parquet file, the embedded data and seeded
//! synthetic bars, each validated as the CLI's `--data` is.

use std::path::PathBuf;

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyList;

use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::data::time::{TimeUnit, integer_time, integer_time_refusal};
use tradesim::data::{CleanPolicy, ColumnData, Dataset, Finding, IssueClass, LoadReport, Severity};

use crate::convert::{config_error, data_error, findings_list};

/// Validated bars (one series per symbol), ready for a backtest or a search.
#[derive(Debug)]
#[pyclass(frozen, module = "tradesim._native")]
pub struct Bars {
    pub(crate) dataset: Dataset,
    report: Option<LoadReport>,
}

#[pymethods]
impl Bars {
    /// Where the data came from (`DataFrame`, a path, `embedded:NAME`, `synthetic:...`).
    #[getter]
    fn source(&self) -> String {
        self.dataset.source.clone()
    }

    /// True for generated data.
    #[getter]
    fn synthetic(&self) -> bool {
        self.dataset.synthetic
    }

    /// The symbols, in order of first appearance.
    #[getter]
    fn symbols(&self) -> Vec<String> {
        self.dataset.series.iter().map(|s| s.symbol.clone()).collect()
    }

    /// Bars over all symbols.
    #[getter]
    fn n_bars(&self) -> usize {
        self.dataset.n_bars()
    }

    /// Warnings and handled findings of the load (dropped or repaired rows), as dicts.
    #[getter]
    fn findings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let findings: &[Finding] = self.report.as_ref().map_or(&[], |r| r.findings.as_slice());
        findings_list(py, findings)
    }

    /// How the columns were read where that was a choice.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.report.as_ref().map_or_else(Vec::new, |r| r.notes.clone())
    }

    fn __len__(&self) -> usize {
        self.dataset.n_bars()
    }

    /// The bars of `symbol` alone (the Python layer checks that the data holds it).
    fn _select(&self, symbol: &str) -> PyResult<Bars> {
        let series = self.dataset.select(Some(symbol)).map_err(|e| config_error(e.to_string()))?.clone();
        let dataset = Dataset { series: vec![series], ..self.dataset.clone() };
        Ok(Bars {
            dataset,
            report: self.report.as_ref().map(|r| LoadReport { notes: r.notes.clone(), ..LoadReport::default() }),
        })
    }

    /// Pickling: the bars as text (exact decimals, RFC 3339 times with their offsets), rebuilt by
    /// `bars_from_state`; the load's findings are not kept.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let rebuild = py.import("tradesim._native")?.getattr("bars_from_state")?;
        Ok((rebuild, (bars_state(&self.dataset).to_string(),)))
    }

    fn __repr__(&self) -> String {
        format!(
            "Bars({}, {} bars, symbols [{}])",
            self.dataset.label(),
            self.dataset.n_bars(),
            self.symbols().join(", ")
        )
    }
}

/// `dataset` as JSON: source, synthetic, and per series its symbol and its columns as text.
fn bars_state(dataset: &Dataset) -> serde_json::Value {
    let series: Vec<serde_json::Value> = dataset
        .series
        .iter()
        .map(|s| {
            let column =
                |f: &dyn Fn(&tradesim::data::MarketBar) -> String| -> Vec<String> { s.bars.iter().map(f).collect() };
            serde_json::json!({
                "symbol": s.symbol,
                "time": column(&|b| b.time.to_rfc3339()),
                "open": column(&|b| b.open.to_string()),
                "high": column(&|b| b.high.to_string()),
                "low": column(&|b| b.low.to_string()),
                "close": column(&|b| b.close.to_string()),
                "volume": column(&|b| b.volume.to_string()),
            })
        })
        .collect();
    serde_json::json!({"source": dataset.source, "synthetic": dataset.synthetic, "series": series})
}

/// The `Bars` a pickled state ([`bars_state`]) holds.
#[pyfunction]
pub(crate) fn bars_from_state(state: &str) -> PyResult<Bars> {
    let bad = |why: String| config_error(format!("a pickled Bars: {why}"));
    let v: serde_json::Value = serde_json::from_str(state).map_err(|e| bad(e.to_string()))?;
    let text = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_str).map(str::to_owned);
    let mut series = Vec::new();
    for s in v.get("series").and_then(serde_json::Value::as_array).ok_or_else(|| bad("no series".to_owned()))? {
        let symbol = text(s, "symbol").ok_or_else(|| bad("a series without a symbol".to_owned()))?;
        let column = |k: &str| -> PyResult<Vec<String>> {
            s.get(k)
                .and_then(serde_json::Value::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
                .ok_or_else(|| bad(format!("{symbol}: no `{k}` column")))
        };
        let (time, open, high, low, close, volume) =
            (column("time")?, column("open")?, column("high")?, column("low")?, column("close")?, column("volume")?);
        let decimal = |t: &str| t.parse::<rust_decimal::Decimal>().map_err(|e| bad(format!("{symbol}: `{t}`: {e}")));
        let mut bars = Vec::with_capacity(time.len());
        for (i, at_time) in time.iter().enumerate() {
            let at =
                |c: &[String]| c.get(i).cloned().ok_or_else(|| bad(format!("{symbol}: columns of unequal length")));
            bars.push(tradesim::data::MarketBar {
                time: chrono::DateTime::parse_from_rfc3339(at_time)
                    .map_err(|e| bad(format!("{symbol}: `{at_time}`: {e}")))?,
                open: decimal(&at(&open)?)?,
                high: decimal(&at(&high)?)?,
                low: decimal(&at(&low)?)?,
                close: decimal(&at(&close)?)?,
                volume: decimal(&at(&volume)?)?,
            });
        }
        series.push(tradesim::data::Series { symbol, bars });
    }
    let dataset = Dataset {
        source: text(&v, "source").unwrap_or_default(),
        synthetic: v.get("synthetic").and_then(serde_json::Value::as_bool).unwrap_or(false),
        series,
    };
    Ok(Bars { dataset, report: None })
}

fn policy(drop: &[String], repair: &[String]) -> PyResult<CleanPolicy> {
    CleanPolicy::parse(drop, repair).map_err(|e| config_error(e.to_string()))
}

/// The cleaning policy and the integer time unit of a load (`time_unit`: the CLI's `--time-unit`).
fn load_options(
    drop: &[String],
    repair: &[String],
    time_unit: Option<String>,
) -> PyResult<(CleanPolicy, Option<TimeUnit>)> {
    let policy = policy(drop, repair)?;
    let unit =
        time_unit.map(|u| u.parse::<TimeUnit>().map_err(|e| config_error(format!("time_unit: {e}")))).transpose()?;
    Ok((policy, unit))
}

fn loaded(py: Python<'_>, r: Result<(Dataset, LoadReport), LoadReport>) -> PyResult<Bars> {
    match r {
        Ok((dataset, report)) => Ok(Bars { dataset, report: Some(report) }),
        Err(report) => Err(data_error(py, &report)),
    }
}

/// A refusal about one column of an in-memory table (no row: it is about every row).
fn column_refusal(name: &str, column: &str, message: String) -> LoadReport {
    let finding = Finding {
        file: name.to_owned(),
        row: None,
        column: Some(column.to_owned()),
        symbol: None,
        class: IssueClass::BadTime,
        severity: Severity::Error,
        message,
    };
    LoadReport { file: name.to_owned(), findings: vec![finding], ..LoadReport::default() }
}

/// An integer time column read with `unit` ([`integer_time`]): refused without a unit, each value that is
/// not a time in that unit a finding on its row.
fn integer_times(name: &str, header: &str, values: &[i64], unit: Option<TimeUnit>) -> Result<ColumnData, LoadReport> {
    let Some(unit) = unit else {
        return Err(column_refusal(name, header, integer_time_refusal(header, values.first().copied().unwrap_or(0))));
    };
    let mut findings = Vec::new();
    let mut times = Vec::with_capacity(values.len());
    for (row, &n) in values.iter().enumerate() {
        let ns = integer_time(n, unit).and_then(|t| {
            t.timestamp_nanos_opt().ok_or_else(|| format!("{n} {} is outside the years 1677 to 2262", unit.name()))
        });
        match ns {
            Ok(ns) => times.push(Some(ns)),
            Err(why) => {
                findings.push(Finding {
                    file: name.to_owned(),
                    row: Some(row),
                    column: Some(header.to_owned()),
                    symbol: None,
                    class: IssueClass::BadTime,
                    severity: Severity::Error,
                    message: format!("{why} (time_unit={})", unit.name()),
                });
                times.push(None);
            }
        }
    }
    if findings.is_empty() {
        Ok(ColumnData::TimeNs(times))
    } else {
        Err(LoadReport { file: name.to_owned(), rows: values.len(), findings, ..LoadReport::default() })
    }
}

/// Loads typed columns (`("float" | "int" | "int_time" | "time_ns" | "text", values)`) through the CLI's
/// validation; `int_time` is an integer time column, read with `time_unit` ([`integer_time`]).
#[pyfunction]
#[pyo3(signature = (name, headers, columns, default_symbol, drop, repair, time_unit=None))]
#[allow(clippy::too_many_arguments, reason = "the Python signature")]
pub(crate) fn load_columns(
    py: Python<'_>,
    name: &str,
    headers: Vec<String>,
    columns: Vec<(String, Bound<'_, PyAny>)>,
    default_symbol: &str,
    drop: Vec<String>,
    repair: Vec<String>,
    time_unit: Option<String>,
) -> PyResult<Bars> {
    let (policy, unit) = load_options(&drop, &repair, time_unit)?;
    let mut data = Vec::with_capacity(columns.len());
    for ((kind, values), header) in columns.iter().zip(&headers) {
        let column = match kind.as_str() {
            "float" => ColumnData::Float(values.extract::<PyReadonlyArray1<'_, f64>>()?.as_array().to_vec()),
            "int" => ColumnData::Int(values.extract::<PyReadonlyArray1<'_, i64>>()?.as_array().to_vec()),
            "int_time" => {
                let ints = values.extract::<PyReadonlyArray1<'_, i64>>()?;
                match integer_times(name, header, ints.as_slice()?, unit) {
                    Ok(column) => column,
                    Err(report) => return Err(data_error(py, &report)),
                }
            }
            // pandas writes NaT as the smallest i64.
            "time_ns" => ColumnData::TimeNs(
                values
                    .extract::<PyReadonlyArray1<'_, i64>>()?
                    .as_array()
                    .iter()
                    .map(|&t| (t != i64::MIN).then_some(t))
                    .collect(),
            ),
            "text" => ColumnData::Text(values.extract::<Vec<Option<String>>>()?),
            other => return Err(config_error(format!("column `{header}`: unknown kind `{other}`"))),
        };
        data.push(column);
    }
    let result = py.detach(|| tradesim::data::load_columns(name, &headers, data, default_symbol, (&policy, unit)));
    loaded(py, result)
}

/// Loads a CSV or Parquet file as the CLI's `--data` does (`time_unit`: its `--time-unit`; `symbol`: its
/// `--symbol`, the only symbol whose rows are read and checked).
#[pyfunction]
#[pyo3(signature = (path, drop, repair, time_unit=None, symbol=None))]
pub(crate) fn load_file(
    py: Python<'_>,
    path: PathBuf,
    drop: Vec<String>,
    repair: Vec<String>,
    time_unit: Option<String>,
    symbol: Option<String>,
) -> PyResult<Bars> {
    let (policy, unit) = load_options(&drop, &repair, time_unit)?;
    let result = py.detach(|| tradesim::data::load_file(&path, (&policy, unit, symbol.as_deref())));
    loaded(py, result)
}

/// The embedded default data.
#[pyfunction]
pub(crate) fn embedded(py: Python<'_>) -> PyResult<Bars> {
    loaded(py, tradesim::data::embedded().map(|d| (d, LoadReport::default())))
}

/// Seeded synthetic bars (`--synthetic N`; `seed` None: the CLI's).
#[pyfunction]
#[pyo3(signature = (bars, symbols=1, seed=None))]
pub(crate) fn synthetic(py: Python<'_>, bars: usize, symbols: usize, seed: Option<u64>) -> PyResult<Bars> {
    if bars < 2 {
        return Err(config_error(format!("n_bars: {bars} bars; at least 2")));
    }
    let defaults = GeneratorConfig::default();
    let cfg = GeneratorConfig { bars, symbols: symbols.max(1), seed: seed.unwrap_or(defaults.seed), ..defaults };
    Ok(Bars { dataset: py.detach(|| generate(&cfg)), report: None })
}
