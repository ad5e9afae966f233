//! `tradesim._native`: the Python bindings (PyO3, abi3). Everything here converts between Python and the
//! `tradesim` library and calls it; no rule of the simulation, the backtest or the search lives here. The
//! Python package (`pysrc/tradesim/`) wraps these functions in pandas.
//!
//! This file registers the module. `convert` holds what its parts share: the exceptions and the conversion
//! of library errors to them, and the parsing of device and money parameters; `data` holds `Bars` and its
//! loaders, `jobs` the backtest, the search and the device query, `vector` the vector env and the split
//! walk, `universe` the portfolio env over a universe, `dlpack` the DLPack exchange of the env's buffers and actions.

mod convert;
mod data;
mod dlpack;
mod jobs;
mod universe;
mod vector;

use pyo3::prelude::*;

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The default costs of every entry point (the Python signatures repeat them; a test holds them equal).
    m.add("DEFAULT_SPREAD", tradesim::DEFAULT_SPREAD)?;
    m.add("DEFAULT_COMMISSION", tradesim::DEFAULT_COMMISSION)?;
    m.add_class::<data::Bars>()?;
    m.add_class::<vector::NativeVectorEnv>()?;
    m.add_class::<vector::NativeSplitWalk>()?;
    m.add_class::<universe::NativePortfolioEnv>()?;
    m.add_class::<dlpack::DlpackArray>()?;
    m.add_function(wrap_pyfunction!(data::load_columns, m)?)?;
    m.add_function(wrap_pyfunction!(data::load_file, m)?)?;
    m.add_function(wrap_pyfunction!(data::embedded, m)?)?;
    m.add_function(wrap_pyfunction!(data::synthetic, m)?)?;
    m.add_function(wrap_pyfunction!(data::bars_from_state, m)?)?;
    m.add_function(wrap_pyfunction!(jobs::device_info, m)?)?;
    m.add_function(wrap_pyfunction!(jobs::hyperparameters, m)?)?;
    m.add_function(wrap_pyfunction!(jobs::backtest, m)?)?;
    m.add_function(wrap_pyfunction!(jobs::hyperopt, m)?)?;
    m.add_function(wrap_pyfunction!(vector::market_feature_names, m)?)?;
    m.add_function(wrap_pyfunction!(universe::universe_feature_names, m)?)?;
    Ok(())
}
