//! `tradesim._native`: the Python bindings (PyO3, abi3). Everything here converts between Python and the
//! `tradesim` library and calls it; no rule of the simulation, the backtest or the search lives here. The
//! Python package (`pysrc/tradesim/`) wraps these functions in pandas.

mod dlpack;

use std::path::PathBuf;

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::import_exception;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict, PyFloat, PyInt, PyList, PyString};
use rust_decimal::Decimal;

use tradesim::audit::parse_decimal;
use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::data::time::{TimeUnit, integer_time, integer_time_refusal};
use tradesim::data::{CleanPolicy, ColumnData, Dataset, Finding, IssueClass, LoadReport, Severity};
use tradesim::grid::{GridRequest, SignalRule, run_grid};
use tradesim::hyperopt::job::{Job, JobArgs};
use tradesim::table::Column;
use tradesim::train::DEFAULT_SPLIT;
use tradesim::vector::{Part, SplitWalk, VectorEnv};
use tradesim::{DeviceRequest, Error};

// The exceptions are Python classes (`tradesim/_errors.py`), so that they are `tradesim.DataError` etc.
// wherever they are raised and pickle by name.
import_exception!(tradesim._errors, DataError);
import_exception!(tradesim._errors, ConfigError);
import_exception!(tradesim._errors, TradesimError);

/// A parameter tradesim refuses, as `ConfigError` (a `ValueError`).
fn config_error(message: String) -> PyErr {
    ConfigError::new_err(message)
}

/// Validated bars (one series per symbol), ready for a backtest or a search.
#[derive(Debug)]
#[pyclass(frozen, module = "tradesim._native")]
pub struct Bars {
    dataset: Dataset,
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

    fn __repr__(&self) -> String {
        format!(
            "Bars({}, {} bars, symbols [{}])",
            self.dataset.label(),
            self.dataset.n_bars(),
            self.symbols().join(", ")
        )
    }
}

/// The findings as a list of dicts (`index`, the DataFrame's label of the row, is filled in by the Python
/// loader).
fn findings_list<'py>(py: Python<'py>, findings: &[Finding]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for f in findings {
        let d = PyDict::new(py);
        d.set_item("file", &f.file)?;
        // A finding about the whole table (a missing column, no rows) names no row: in-memory tables have
        // no header line for it to point at.
        let whole_table = matches!(f.class, IssueClass::MissingColumn | IssueClass::EmptyFile);
        d.set_item("row", if whole_table { None } else { f.row })?;
        d.set_item("index", py.None())?;
        d.set_item("column", &f.column)?;
        d.set_item("class", f.class.name())?;
        d.set_item("severity", format!("{:?}", f.severity).to_lowercase())?;
        d.set_item("message", &f.message)?;
        list.append(d)?;
    }
    Ok(list)
}

/// A refused load as `DataError(message)` with its `findings`.
fn data_error(py: Python<'_>, report: &LoadReport) -> PyErr {
    let message = Error::DataRefused { report: Box::new(report.clone()) }.to_string();
    let err = DataError::new_err(message);
    match findings_list(py, &report.findings) {
        Ok(list) => match err.value(py).setattr("findings", list) {
            Ok(()) => err,
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// A library error as a Python exception: data and configuration problems are `ValueError`s
/// (`DataError` for refused data, `ConfigError` for the rest), other failures `TradesimError`.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match &e {
        Error::DataRefused { report } => data_error(py, report),
        Error::Data(_) | Error::Config { .. } => config_error(e.to_string()),
        Error::Host(h) if e.exit_code() == 2 => config_error(h.to_string()),
        _ => TradesimError::new_err(e.to_string()),
    }
}

fn policy(drop: &[String], repair: &[String]) -> PyResult<CleanPolicy> {
    CleanPolicy::parse(drop, repair).map_err(|e| config_error(e.to_string()))
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
fn load_columns(
    py: Python<'_>,
    name: &str,
    headers: Vec<String>,
    columns: Vec<(String, Bound<'_, PyAny>)>,
    default_symbol: &str,
    drop: Vec<String>,
    repair: Vec<String>,
    time_unit: Option<String>,
) -> PyResult<Bars> {
    let policy = policy(&drop, &repair)?;
    let unit =
        time_unit.map(|u| u.parse::<TimeUnit>().map_err(|e| config_error(format!("time_unit: {e}")))).transpose()?;
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

/// Loads a CSV or Parquet file as the CLI's `--data` does (`time_unit`: its `--time-unit`).
#[pyfunction]
#[pyo3(signature = (path, drop, repair, time_unit=None))]
fn load_file(
    py: Python<'_>,
    path: PathBuf,
    drop: Vec<String>,
    repair: Vec<String>,
    time_unit: Option<String>,
) -> PyResult<Bars> {
    let policy = policy(&drop, &repair)?;
    let unit =
        time_unit.map(|u| u.parse::<TimeUnit>().map_err(|e| config_error(format!("time_unit: {e}")))).transpose()?;
    let result = py.detach(|| tradesim::data::load_file(&path, (&policy, unit)));
    loaded(py, result)
}

/// The embedded default data.
#[pyfunction]
fn embedded(py: Python<'_>) -> PyResult<Bars> {
    loaded(py, tradesim::data::embedded().map(|d| (d, LoadReport::default())))
}

/// Seeded synthetic bars (`--synthetic N`; `seed` None: the CLI's).
#[pyfunction]
#[pyo3(signature = (bars, symbols=1, seed=None))]
fn synthetic(py: Python<'_>, bars: usize, symbols: usize, seed: Option<u64>) -> PyResult<Bars> {
    if bars < 2 {
        return Err(config_error(format!("n_bars: {bars} bars; at least 2")));
    }
    let defaults = GeneratorConfig::default();
    let cfg = GeneratorConfig { bars, symbols: symbols.max(1), seed: seed.unwrap_or(defaults.seed), ..defaults };
    Ok(Bars { dataset: py.detach(|| generate(&cfg)), report: None })
}

fn device(name: &str) -> PyResult<DeviceRequest> {
    name.parse::<DeviceRequest>().map_err(|e| config_error(format!("device: {e}")))
}

/// The backend `device` selects.
#[pyfunction]
fn device_info<'py>(py: Python<'py>, device: &str) -> PyResult<Bound<'py, PyDict>> {
    let request = self::device(device)?;
    let (backend, reason) = tradesim::select_backend_with_reason(request).map_err(|e| to_py(py, Error::Host(e)))?;
    let d = PyDict::new(py);
    let info = backend.info();
    d.set_item("backend", info.backend.to_string())?;
    d.set_item("device", info.device_name.clone())?;
    d.set_item("total_memory", info.total_memory)?;
    d.set_item("fallback_reason", reason)?;
    Ok(d)
}

/// A money parameter: a Python int or float (its shortest decimal), or decimal text.
fn money(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Decimal> {
    let bad = |why: String| config_error(format!("{name}: {why}"));
    if value.is_instance_of::<PyFloat>() {
        let x: f64 = value.extract()?;
        return tradesim::data::float_decimal(x).ok_or_else(|| bad(format!("{x} is not a finite decimal")));
    }
    if value.is_instance_of::<PyInt>() {
        let n: i64 = value.extract()?;
        return Ok(Decimal::from(n));
    }
    if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        return parse_decimal(name, &text).map_err(|e| bad(e.to_string()));
    }
    Err(bad(format!("expected a number or decimal text, got {}", value.get_type().name()?)))
}

/// Table columns as a list of (name, numpy array or list of str).
fn columns_list<'py>(py: Python<'py>, columns: Vec<(String, Column)>) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (name, column) in columns {
        let values: Bound<'py, PyAny> = match column {
            Column::Float(v) => PyArray1::from_vec(py, v).into_any(),
            Column::Int(v) => PyArray1::from_vec(py, v).into_any(),
            Column::Text(v) => PyList::new(py, v)?.into_any(),
        };
        list.append((name, values))?;
    }
    Ok(list)
}

/// An SMA-crossover grid, as `tradesim backtest` runs it.
#[pyfunction]
#[pyo3(signature = (bars, symbol, fast, slow, signal, allow_short, spread, commission, capital, whole_units,
    bars_per_year, columns, trades, equity, device))]
#[allow(clippy::too_many_arguments, reason = "the Python signature")]
fn backtest<'py>(
    py: Python<'py>,
    bars: &Bars,
    symbol: Option<String>,
    fast: Vec<u32>,
    slow: Vec<u32>,
    signal: &str,
    allow_short: bool,
    spread: &Bound<'py, PyAny>,
    commission: &Bound<'py, PyAny>,
    capital: &Bound<'py, PyAny>,
    whole_units: bool,
    bars_per_year: Option<f64>,
    columns: String,
    trades: bool,
    equity: bool,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let signal = match signal {
        "cross" => SignalRule::Cross,
        "state" => SignalRule::State,
        other => return Err(config_error(format!("signal: `{other}` (cross or state)"))),
    };
    let request = GridRequest {
        fast,
        slow,
        signal,
        allow_short,
        capital: money("capital", capital)?,
        spread: money("spread", spread)?,
        commission: money("commission", commission)?,
        whole_units,
        bars_per_year,
    };
    let device = self::device(device)?;
    let dataset = &bars.dataset;
    let outcome = py.detach(|| -> Result<_, Error> {
        let backend = tradesim::select_backend(device)?;
        let series = dataset.select(symbol.as_deref())?;
        let run = run_grid(&backend, series, &request)?;
        let exports = if trades || equity {
            let chosen = run.select_columns(&columns)?;
            Some(run.exports(&backend, &chosen, equity)?)
        } else {
            None
        };
        let audit = run.audit_best(series).map_or_else(|e| format!("no Decimal audit: {e}"), |a| a.to_string());
        let backend_name = backend.info().backend.to_string();
        Ok((run.metric_columns(), exports, audit, backend_name, run.seconds, run.bars_per_year, series.symbol.clone()))
    });
    let (metrics, exports, audit, backend_name, seconds, bars_per_year, symbol) = outcome.map_err(|e| to_py(py, e))?;
    let out = PyDict::new(py);
    out.set_item("metrics", columns_list(py, metrics)?)?;
    let (trade_cols, equity_cols) = match exports {
        Some(x) => (trades.then_some(x.trades), x.equity),
        None => (None, None),
    };
    out.set_item("trades", trade_cols.map(|c| columns_list(py, c)).transpose()?)?;
    out.set_item("equity", equity_cols.map(|c| columns_list(py, c)).transpose()?)?;
    out.set_item("device", backend_name)?;
    out.set_item("seconds", seconds)?;
    out.set_item("bars_per_year", bars_per_year)?;
    out.set_item("symbol", symbol)?;
    out.set_item("data", dataset.label())?;
    out.set_item("audit", audit)?;
    Ok(out)
}

/// The search `tradesim hyperopt` runs; returns its leaderboard columns and where the study is.
#[pyfunction]
#[pyo3(signature = (bars, symbol, config_toml, overrides, study, storage, study_name, resume, load_if_exists,
    report, device, config_name="config".to_owned(), artifacts=None))]
#[allow(clippy::too_many_arguments, reason = "the Python signature")]
fn hyperopt<'py>(
    py: Python<'py>,
    bars: &Bars,
    symbol: Option<String>,
    config_toml: Option<String>,
    overrides: Bound<'py, PyDict>,
    study: Option<PathBuf>,
    storage: Option<String>,
    study_name: String,
    resume: bool,
    load_if_exists: bool,
    report: Option<PathBuf>,
    device: &str,
    config_name: String,
    artifacts: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let get = |key: &str| overrides.get_item(key);
    let algo = match get("algo")? {
        Some(v) => Some(
            <tradesim::train::Algo as clap::ValueEnum>::from_str(&v.extract::<String>()?, true)
                .map_err(|e| config_error(format!("algo: {e}")))?,
        ),
        None => None,
    };
    let args = JobArgs {
        config_text: config_toml.map(|t| (config_name, t)),
        algo,
        trials: get("trials")?.map(|v| v.extract()).transpose()?,
        parallel: get("parallel")?.map(|v| v.extract()).transpose()?,
        epochs: get("epochs")?.map(|v| v.extract()).transpose()?,
        seed: get("seed")?.map(|v| v.extract()).transpose()?,
        placebo: get("placebo")?.map(|v| v.extract()).transpose()?,
        walk_forward: get("walk_forward")?.map(|v| v.extract()).transpose()?,
        study,
        storage,
        study_name,
        resume,
        load_if_exists,
        report,
        artifacts,
        ..JobArgs::default()
    };
    let device = self::device(device)?;
    let dataset = &bars.dataset;
    // Ctrl-C: Python's handler only sets a flag while the GIL is released, and only the main thread runs
    // it; this thread checks it every 50 ms while the search runs in another, which stops at its next event.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let outcome = py.detach(|| {
        std::thread::scope(|scope| {
            let search = scope.spawn(|| -> Result<_, Error> {
                let job = Job::prepare(&args)?;
                let (backends, _) = tradesim::select_backends(device)?;
                let done = job.run(&backends, dataset, symbol.as_deref(), &|_| {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) { Err(Error::Interrupted) } else { Ok(()) }
                })?;
                Ok((job, done))
            });
            while !search.is_finished() {
                std::thread::sleep(std::time::Duration::from_millis(50));
                if Python::attach(|py| py.check_signals()).is_err() {
                    stop.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            }
            search.join().unwrap_or_else(|_| Err(Error::Study("the search thread panicked".to_owned())))
        })
    });
    let (job, done) = match outcome {
        Ok(x) => x,
        Err(Error::Interrupted) => {
            return Err(PyKeyboardInterrupt::new_err("tradesim.hyperopt interrupted; resume=True continues the study"));
        }
        Err(e) => return Err(to_py(py, e)),
    };
    let out = PyDict::new(py);
    out.set_item(
        "leaderboard",
        columns_list(py, tradesim::hyperopt::report::leaderboard_columns(&done.summary.leaderboard))?,
    )?;
    out.set_item("storage", job.storage.to_string())?;
    out.set_item("study_name", &job.name)?;
    out.set_item("report", job.report_dir.display().to_string())?;
    out.set_item("checkpoints", job.paths.checkpoints.display().to_string())?;
    out.set_item("verdict", &done.evidence.verdict.line)?;
    out.set_item("evidence_json", tradesim::json::text(&tradesim::evidence::to_json(&done.evidence)))?;
    Ok(out)
}

/// K trials x E envs of the fused environment ([`tradesim::vector::VectorEnv`]). The arrays of
/// `buffers()` are numpy views of the env's own buffers (no copies): every `step` and
/// `reset` overwrites them in place.
#[pyclass(module = "tradesim._native", name = "VectorEnv")]
#[derive(Debug)]
pub struct NativeVectorEnv {
    env: VectorEnv,
    host_copies: bool,
}

/// A read-only numpy view of `data` (`shape`), kept alive by `owner`.
///
/// # Safety
/// `data` must stay allocated, unmoved and unresized for as long as `owner` lives (the env's buffers are
/// sized once in `VectorEnv::new` and only overwritten in place).
unsafe fn view<'py, T: numpy::Element>(
    owner: &Bound<'py, PyAny>,
    data: &[T],
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller guarantees `data` outlives `owner`; the shape covers exactly `data.len()` elements.
    let array = unsafe { numpy::ndarray::ArrayView::from_shape_ptr(numpy::ndarray::IxDyn(shape), data.as_ptr()) };
    // SAFETY: `owner` (the env object) owns the memory and is the array's base, so it outlives the view.
    let out = unsafe { numpy::PyArray::borrow_from_array(&array, owner.clone()) }.into_any();
    out.call_method("setflags", (), Some(&[("write", false)].into_py_dict(owner.py())?))?;
    Ok(out)
}

#[pymethods]
impl NativeVectorEnv {
    #[new]
    #[pyo3(signature = (bars, symbol, trials, envs, episode_len, seed, capital, spread, commission, allow_short,
        whole_units, device, host_copies=true, split=None, w_cost=0.0))]
    #[allow(clippy::too_many_arguments, reason = "the Python signature")]
    fn new(
        py: Python<'_>,
        bars: &Bars,
        symbol: Option<String>,
        trials: usize,
        envs: usize,
        episode_len: usize,
        seed: u64,
        capital: Vec<Bound<'_, PyAny>>,
        spread: Vec<Bound<'_, PyAny>>,
        commission: Vec<Bound<'_, PyAny>>,
        allow_short: bool,
        whole_units: bool,
        device: &str,
        host_copies: bool,
        split: Option<String>,
        w_cost: f64,
    ) -> PyResult<Self> {
        let part = split.as_deref().map(Part::parse).transpose().map_err(|e| to_py(py, e))?;
        if !w_cost.is_finite() {
            return Err(config_error(format!("w_cost={w_cost}: a finite number")));
        }
        // One value for every trial, or one per trial.
        let per_trial = |name: &str, values: &[Bound<'_, PyAny>]| -> PyResult<Vec<Decimal>> {
            match values.len() {
                1 => Ok(vec![money(name, &values[0])?; trials]),
                n if n == trials => values.iter().map(|v| money(name, v)).collect(),
                n => Err(config_error(format!("{name}: {n} values for {trials} trials (give 1 or {trials})"))),
            }
        };
        let (capital, spread, commission) =
            (per_trial("capital", &capital)?, per_trial("spread", &spread)?, per_trial("commission", &commission)?);
        let device = self::device(device)?;
        let dataset = &bars.dataset;
        let made = py.detach(|| -> Result<VectorEnv, Error> {
            let params = (0..trials)
                .map(|t| {
                    let decimals = tradesim::audit::DecimalParams::account(
                        capital[t],
                        spread[t],
                        commission[t],
                        whole_units,
                        allow_short,
                    );
                    Ok(tradesim::TrialParams { key: t as u64, w_cost, ..decimals.to_params()? })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let backend = tradesim::select_backend(device)?;
            let series = dataset.select(symbol.as_deref())?;
            let mut env = match part {
                None => VectorEnv::new(&backend, series, &params, envs, episode_len, seed)?,
                Some(part) => {
                    VectorEnv::on_split(&backend, series, &params, envs, episode_len, seed, DEFAULT_SPLIT, part)?
                }
            };
            env.set_host_copies(host_copies);
            Ok(env)
        });
        Ok(Self { env: made.map_err(|e| to_py(py, e))?, host_copies })
    }

    /// Envs (trials x envs).
    #[getter]
    fn num_envs(&self) -> usize {
        self.env.n_envs()
    }

    /// Floats per observation.
    #[getter]
    fn obs_dim(&self) -> usize {
        self.env.obs_dim()
    }

    /// `cpu` or `cuda`.
    #[getter]
    fn device(&self) -> &'static str {
        self.env.backend_name()
    }

    /// Views of (observations, rewards, terminated, truncated, final observations, final mask, equity,
    /// final equity).
    fn buffers<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let owner = slf.as_any();
        let this = slf.borrow();
        let e = &this.env;
        let (n, d) = (e.n_envs(), e.obs_dim());
        // SAFETY: the env's buffers are sized in `VectorEnv::new` and only overwritten in place; `owner` is
        // the Python object that owns the env.
        let views = unsafe {
            [
                view(owner, e.observations(), &[n, d])?,
                view(owner, e.rewards(), &[n])?,
                view(owner, e.terminated(), &[n])?,
                view(owner, e.truncated(), &[n])?,
                view(owner, e.final_observations(), &[n, d])?,
                view(owner, e.final_mask(), &[n])?,
                view(owner, e.equity(), &[n])?,
                view(owner, e.final_equity(), &[n])?,
            ]
        };
        pyo3::types::PyTuple::new(slf.py(), views)
    }

    /// New episodes for every env (`seed`: the draws start over from it).
    #[pyo3(signature = (seed=None))]
    fn reset(&mut self, py: Python<'_>, seed: Option<u64>) -> PyResult<()> {
        let env = &mut self.env;
        py.detach(|| env.reset(seed)).map_err(|e| to_py(py, e))
    }

    /// (observations, rewards, terminated, truncated, final observations, final mask, equity, final equity)
    /// exported through DLPack without copies: the device buffers on CUDA, the host buffers on the CPU. On
    /// CUDA the device's equity buffer is both: an ended episode's equity where the final mask is set (the
    /// host moves it to the final equity when it copies), the current equity elsewhere.
    fn dlpack_buffers<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        use dlpack::{DEVICE_CPU, DEVICE_CUDA, DlpackArray, Element};
        let py = slf.py();
        let this = slf.borrow();
        let e = &this.env;
        let (n, d) = (e.n_envs() as i64, e.obs_dim() as i64);
        let (device, a) = match e.device_outputs() {
            Some(o) => (
                (DEVICE_CUDA, o.ordinal as i32),
                [o.obs, o.rewards, o.terminated, o.truncated, o.final_obs, o.final_mask, o.equity, o.equity],
            ),
            None => {
                let addr = |p: *const u8| p as u64;
                let h = [
                    addr(e.observations().as_ptr().cast()),
                    addr(e.rewards().as_ptr().cast()),
                    addr(e.terminated().as_ptr().cast()),
                    addr(e.truncated().as_ptr().cast()),
                    addr(e.final_observations().as_ptr().cast()),
                    addr(e.final_mask().as_ptr().cast()),
                    addr(e.equity().as_ptr().cast()),
                    addr(e.final_equity().as_ptr().cast()),
                ];
                ((DEVICE_CPU, 0), h)
            }
        };
        let shapes = [vec![n, d], vec![n], vec![n], vec![n], vec![n, d], vec![n], vec![n], vec![n]];
        let elements = [
            Element::F32,
            Element::F32,
            Element::Bool,
            Element::Bool,
            Element::F32,
            Element::Bool,
            Element::F64,
            Element::F64,
        ];
        let arrays = (0..8)
            .map(|i| {
                let owner = slf.clone().into_any().unbind();
                Py::new(py, DlpackArray::new(owner, a[i], shapes[i].clone(), elements[i], device))
            })
            .collect::<PyResult<Vec<_>>>()?;
        pyo3::types::PyTuple::new(py, arrays)
    }

    /// Whether each step copies the outputs to the host buffers of `buffers()` (always on the CPU).
    #[getter]
    fn host_copies(&self) -> bool {
        self.env.device_outputs().is_none() || self.host_copies
    }

    /// One step of every env. `actions`: one of 0, 1, 2 per env, any integer dtype: a numpy array or a
    /// sequence, or (CUDA) any DLPack array on the env's device, read there without a copy.
    fn step(&mut self, py: Python<'_>, actions: Bound<'_, PyAny>) -> PyResult<()> {
        let n = self.env.n_envs();
        if let Some((kind, id)) = dlpack::dlpack_device(&actions)?.filter(|(kind, _)| *kind != dlpack::DEVICE_CPU) {
            let Some(out) = self.env.device_outputs() else {
                return Err(config_error(format!(
                    "actions: on DLPack device ({kind}, {id}); this env runs on the cpu (pass host actions)"
                )));
            };
            let taken = dlpack::device_actions(&actions, out.ordinal as i32, out.stream, n)?;
            let (address, bits, signed, env) = (taken.address, taken.bits, taken.signed, &mut self.env);
            // SAFETY: `taken` is n aligned integers of its type on this env's device, ordered before the env's
            // stream by the producer (DLPack's stream argument), alive until `taken` drops after the step.
            let stepped = py.detach(|| unsafe { env.step_device(address, bits, signed) });
            drop(taken);
            return stepped.map_err(|e| to_py(py, e));
        }
        let codes: Vec<u8> = match actions.extract::<PyReadonlyArray1<'_, u8>>() {
            Ok(a) => a.as_array().to_vec(),
            Err(_) => actions.extract::<Vec<i64>>()?.into_iter().map(|a| u8::try_from(a).unwrap_or(u8::MAX)).collect(),
        };
        if codes.len() != n {
            return Err(config_error(format!("actions: {} for {n} envs", codes.len())));
        }
        let env = &mut self.env;
        py.detach(|| env.step(&codes)).map_err(|e| to_py(py, e))
    }
}

/// A greedy walk over a part of `tradesim train`'s time split, scored by the backtest engine as the trainer
/// scores its own policies each epoch (`tradesim::vector::SplitWalk`).
#[pyclass(module = "tradesim._native", name = "SplitWalk")]
#[derive(Debug)]
pub struct NativeSplitWalk {
    walk: SplitWalk,
}

#[pymethods]
impl NativeSplitWalk {
    #[new]
    #[pyo3(signature = (bars, symbol, split, capital, spread, commission, allow_short, whole_units))]
    #[allow(clippy::too_many_arguments, reason = "the Python signature")]
    fn new(
        py: Python<'_>,
        bars: &Bars,
        symbol: Option<String>,
        split: &str,
        capital: Bound<'_, PyAny>,
        spread: Bound<'_, PyAny>,
        commission: Bound<'_, PyAny>,
        allow_short: bool,
        whole_units: bool,
    ) -> PyResult<Self> {
        let part = Part::parse(split).map_err(|e| to_py(py, e))?;
        let (capital, spread, commission) =
            (money("capital", &capital)?, money("spread", &spread)?, money("commission", &commission)?);
        let dataset = &bars.dataset;
        let made = py.detach(|| -> Result<SplitWalk, Error> {
            let decimals =
                tradesim::audit::DecimalParams::account(capital, spread, commission, whole_units, allow_short);
            SplitWalk::new(dataset.select(symbol.as_deref())?, decimals.to_params()?, DEFAULT_SPLIT, part)
        });
        Ok(Self { walk: made.map_err(|e| to_py(py, e))? })
    }

    /// Steps of the walk (the split's bars - 1).
    #[getter]
    fn steps(&self) -> usize {
        self.walk.steps()
    }

    /// Steps taken so far.
    #[getter]
    fn taken(&self) -> usize {
        self.walk.taken()
    }

    /// Bars per year of the metrics (inferred from the whole series' times, as `tradesim train` does).
    #[getter]
    fn bars_per_year(&self) -> f64 {
        self.walk.bars_per_year()
    }

    /// Floats per observation.
    #[getter]
    fn obs_dim(&self) -> usize {
        self.walk.obs_dim()
    }

    /// The observation now (a new float32 array).
    fn observation<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let obs = self.walk.observation().map_err(|e| to_py(py, e))?;
        Ok(PyArray1::from_vec(py, obs))
    }

    /// One step with `action` (0 flat, 1 long, 2 short).
    fn step(&mut self, py: Python<'_>, action: u8) -> PyResult<()> {
        self.walk.step(action).map_err(|e| to_py(py, e))
    }

    /// (metrics as a dict, the actions that took effect as uint8), once every step is taken.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyArray1<u8>>)> {
        let (metrics, actions) = self.walk.finish().map_err(|e| to_py(py, e))?;
        let dict = PyDict::new(py);
        for (name, value) in tradesim::Metrics::NAMES.iter().zip(metrics.values()) {
            dict.set_item(*name, value)?;
        }
        Ok((dict, PyArray1::from_vec(py, actions)))
    }
}

/// The names of the market features of each observation, in order ([`tradesim::data::features::NAMES`]).
#[pyfunction]
fn market_feature_names() -> Vec<&'static str> {
    tradesim::data::features::NAMES.to_vec()
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The default costs of every entry point (the Python signatures repeat them; a test holds them equal).
    m.add("DEFAULT_SPREAD", tradesim::DEFAULT_SPREAD)?;
    m.add("DEFAULT_COMMISSION", tradesim::DEFAULT_COMMISSION)?;
    m.add_class::<Bars>()?;
    m.add_class::<NativeVectorEnv>()?;
    m.add_class::<NativeSplitWalk>()?;
    m.add_class::<dlpack::DlpackArray>()?;
    m.add_function(wrap_pyfunction!(load_columns, m)?)?;
    m.add_function(wrap_pyfunction!(load_file, m)?)?;
    m.add_function(wrap_pyfunction!(embedded, m)?)?;
    m.add_function(wrap_pyfunction!(synthetic, m)?)?;
    m.add_function(wrap_pyfunction!(device_info, m)?)?;
    m.add_function(wrap_pyfunction!(backtest, m)?)?;
    m.add_function(wrap_pyfunction!(hyperopt, m)?)?;
    m.add_function(wrap_pyfunction!(market_feature_names, m)?)?;
    Ok(())
}
