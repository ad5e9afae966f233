//! The library's jobs as Python functions: the SMA-crossover grid of `tradesim backtest`, the search of
//! `tradesim hyperopt` (stopped by Ctrl-C), and the backend a device name selects. Tables come back as
//! lists of (name, numpy array or list of str) columns.

use std::path::PathBuf;

use numpy::PyArray1;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use tradesim::Error;
use tradesim::grid::{GridRequest, SignalRule, run_grid};
use tradesim::job::{Job, JobArgs};
use tradesim::table::Column;

use crate::convert::{config_error, money, to_py};
use crate::data::Bars;

/// The backend `device` selects.
#[pyfunction]
pub(crate) fn device_info<'py>(py: Python<'py>, device: &str) -> PyResult<Bound<'py, PyDict>> {
    let request = crate::convert::device(device)?;
    let (backend, reason) = tradesim::select_backend_with_reason(request).map_err(|e| to_py(py, Error::Host(e)))?;
    let d = PyDict::new(py);
    let info = backend.info();
    d.set_item("backend", info.backend.to_string())?;
    d.set_item("device", info.device_name.clone())?;
    d.set_item("total_memory", info.total_memory)?;
    d.set_item("fallback_reason", reason)?;
    Ok(d)
}

/// The searchable hyperparameters as declared (`tradesim::hyperopt::hyperparameters::ALL`): one dict each with
/// `name`, `integer`, `min`, `max`, `dqn` and `ppo` (each learner's default: a dict with `kind` and its
/// values), `stored` (a stored trial's value without it, or None) and `about`.
#[pyfunction]
pub(crate) fn hyperparameters<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
    use tradesim::hyperopt::hyperparameters::{ALL, LearnerDefault};
    let default = |d: LearnerDefault| -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        match d {
            LearnerDefault::Range(low, high, log) => {
                out.set_item("kind", "range")?;
                out.set_item("low", low)?;
                out.set_item("high", high)?;
                out.set_item("log", log)?;
            }
            LearnerDefault::Choice(c) => {
                out.set_item("kind", "choice")?;
                out.set_item("choices", c.to_vec())?;
            }
            LearnerDefault::Fixed(x) => {
                out.set_item("kind", "fixed")?;
                out.set_item("value", x)?;
            }
            LearnerDefault::Unsearched(x) => {
                out.set_item("kind", "unsearched")?;
                out.set_item("value", x)?;
            }
            LearnerDefault::No => out.set_item("kind", "none")?,
        }
        Ok(out)
    };
    let list = PyList::empty(py);
    for p in ALL {
        let d = PyDict::new(py);
        d.set_item("name", p.name)?;
        d.set_item("integer", p.integer)?;
        d.set_item("min", p.min)?;
        d.set_item("max", p.max)?;
        d.set_item("dqn", default(p.dqn)?)?;
        d.set_item("ppo", default(p.ppo)?)?;
        d.set_item("stored", p.stored)?;
        d.set_item("about", p.about.split_whitespace().collect::<Vec<_>>().join(" "))?;
        list.append(d)?;
    }
    Ok(list)
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
pub(crate) fn backtest<'py>(
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
    let device = crate::convert::device(device)?;
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
    report, device, config_name="config".to_owned(), artifacts=None, symbols=None))]
#[allow(clippy::too_many_arguments, reason = "the Python signature")]
pub(crate) fn hyperopt<'py>(
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
    symbols: Option<Vec<String>>,
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
        envs: get("envs")?.map(|v| v.extract()).transpose()?,
        segment_len: get("segment_len")?.map(|v| v.extract()).transpose()?,
        budget: match get("budget")? {
            Some(v) => Some(
                <tradesim::hyperopt::config::BudgetFor as clap::ValueEnum>::from_str(&v.extract::<String>()?, true)
                    .map_err(|e| config_error(format!("budget: {e}")))?,
            ),
            None => None,
        },
        seed: get("seed")?.map(|v| v.extract()).transpose()?,
        placebo: get("placebo")?.map(|v| v.extract()).transpose()?,
        walk_forward: get("walk_forward")?.map(|v| v.extract()).transpose()?,
        walk_forward_search: get("walk_forward_search")?.map(|v| v.extract()).transpose()?,
        side_searches: get("side_searches")?.map(|v| v.extract()).transpose()?,
        study,
        storage,
        study_name,
        resume,
        load_if_exists,
        report,
        artifacts,
        ..JobArgs::default()
    };
    let device = crate::convert::device(device)?;
    let dataset = &bars.dataset;
    // Ctrl-C: Python's handler only sets a flag while the GIL is released, and only the main thread runs
    // it; this thread checks it every 50 ms while the search runs in another, which stops at its next event.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let outcome = py.detach(|| {
        std::thread::scope(|scope| {
            let search = scope.spawn(|| -> Result<_, Error> {
                let (backends, _) = tradesim::select_backends(device)?;
                // `budget = auto` sizes a new study for the device the search runs on.
                let gpu = backends.first().is_some_and(tradesim::Backend::is_cuda);
                let job = Job::prepare(&JobArgs { gpu, ..args.clone() })?;
                let progress = |_: &tradesim::hyperopt::Progress| {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) { Err(Error::Interrupted) } else { Ok(()) }
                };
                // A universe (docs/CLI.md, "A universe"): `symbols`, or several symbols and no `symbol`.
                if symbols.is_some() || (symbol.is_none() && dataset.series.len() > 1) {
                    let backend =
                        backends.first().cloned().ok_or_else(|| Error::config("device", "no backend is available"))?;
                    let universe = tradesim::data::universe::Universe::new(dataset.clone(), symbols.as_deref())?;
                    let done = job.run_universe(&backend, &universe, &progress)?;
                    let names = universe.symbols().into_iter().map(str::to_owned).collect();
                    return Ok((job, Searched::Universe(Box::new(done), names)));
                }
                let done = job.run(&backends, dataset, symbol.as_deref(), &progress)?;
                Ok((job, Searched::Series(Box::new(done))))
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
    let (board, evidence, names) = match &done {
        Searched::Series(d) => (&d.summary.leaderboard, &d.evidence, None),
        Searched::Universe(d, names) => (&d.leaderboard, &d.evidence, Some(names)),
    };
    let out = PyDict::new(py);
    out.set_item("leaderboard", columns_list(py, tradesim::job::report::leaderboard_columns(board))?)?;
    out.set_item("symbols", names)?;
    out.set_item("storage", job.storage.to_string())?;
    out.set_item("study_name", &job.name)?;
    out.set_item("report", job.report_dir.display().to_string())?;
    out.set_item("checkpoints", job.paths.checkpoints.display().to_string())?;
    out.set_item("verdict", &evidence.verdict.line)?;
    out.set_item("notes", &job.notes)?;
    let integer: Vec<&str> = board
        .iter()
        .flat_map(|t| t.params.keys())
        .map(String::as_str)
        .filter(|n| tradesim::hyperopt::config::is_integer(n))
        .collect();
    out.set_item("integer_params", integer)?;
    out.set_item("evidence_json", tradesim::json::text(&tradesim::evidence::to_json(evidence)))?;
    Ok(out)
}

/// What [`hyperopt`] ran: the search on one series, or on a universe (with its symbols).
enum Searched {
    Series(Box<tradesim::job::JobDone>),
    Universe(Box<tradesim::job::universe::UniverseDone>, Vec<String>),
}
