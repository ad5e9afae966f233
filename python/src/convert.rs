//! What the binding's parts share: the exceptions (Python classes of `tradesim/_errors.py`), the conversion of
//! library errors and load reports to them, and the parsing of device and money parameters.

use pyo3::import_exception;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString};
use rust_decimal::Decimal;

use tradesim::audit::parse_decimal;
use tradesim::data::{Finding, IssueClass, LoadReport};
use tradesim::{DeviceRequest, Error};

// The exceptions are Python classes (`tradesim/_errors.py`), so that they are `tradesim.DataError` etc.
// wherever they are raised and pickle by name.
import_exception!(tradesim._errors, DataError);
import_exception!(tradesim._errors, ConfigError);
import_exception!(tradesim._errors, TradesimError);

/// A parameter tradesim refuses, as `ConfigError` (a `ValueError`).
pub(crate) fn config_error(message: String) -> PyErr {
    ConfigError::new_err(message)
}

/// The findings as a list of dicts (`index`, the DataFrame's label of the row, is filled in by the Python
/// loader).
pub(crate) fn findings_list<'py>(py: Python<'py>, findings: &[Finding]) -> PyResult<Bound<'py, PyList>> {
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
        d.set_item("symbol", &f.symbol)?;
        d.set_item("class", f.class.name())?;
        d.set_item("severity", format!("{:?}", f.severity).to_lowercase())?;
        d.set_item("message", &f.message)?;
        list.append(d)?;
    }
    Ok(list)
}

/// A refused load as `DataError(message)` with its `findings`.
pub(crate) fn data_error(py: Python<'_>, report: &LoadReport) -> PyErr {
    // Python's words: the exception's `findings` and the loaders' `drop=`/`repair=`, not the CLI's command.
    let message = format!(
        "the data is unusable ({} blocking finding(s); the exception's `findings` list them, and load()'s \
         drop=/repair= name the finding classes to drop or repair):\n{report}",
        report.blocking().count()
    );
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
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match &e {
        Error::DataRefused { report } => data_error(py, report),
        Error::Data(_) | Error::Config { .. } => config_error(e.to_string()),
        Error::Host(h) if e.exit_code() == 2 => config_error(h.to_string()),
        _ => TradesimError::new_err(e.to_string()),
    }
}

/// The `device` parameter as a backend request.
pub(crate) fn device(name: &str) -> PyResult<DeviceRequest> {
    name.parse::<DeviceRequest>().map_err(|e| config_error(format!("device: {e}")))
}

/// A money parameter: a Python int or float (its shortest decimal), or decimal text.
pub(crate) fn money(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Decimal> {
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
