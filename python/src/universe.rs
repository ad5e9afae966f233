//! The portfolio env over a universe: `PortfolioEnv`, K trials x E envs of
//! [`tradesim::portfolio::env::PortfolioVectorEnv`] (an action per symbol, one account per env), its
//! buffers as read-only numpy views, its actions from a numpy array or a sequence; and the names of its
//! observations' columns.

use numpy::PyReadonlyArrayDyn;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use tradesim::Error;
use tradesim::data::universe::Universe;
use tradesim::portfolio::env::{ACCOUNT_NAMES, PortfolioVectorEnv};

use crate::convert::{config_error, to_py};
use crate::data::Bars;
use crate::vector::{TrialMoney, view};

/// K trials x E portfolio envs over a universe ([`PortfolioVectorEnv`]). The arrays of `buffers()` are
/// numpy views of the env's own buffers (no copies): every `step` and `reset` overwrites them in place.
#[pyclass(module = "tradesim._native", name = "PortfolioEnv")]
#[derive(Debug)]
pub struct NativePortfolioEnv {
    env: PortfolioVectorEnv,
    symbols: Vec<String>,
    /// The calendar, nanoseconds since 1970 UTC.
    times: Vec<i64>,
}

#[pymethods]
impl NativePortfolioEnv {
    #[new]
    #[pyo3(signature = (bars, symbols, trials, envs, episode_len, seed, capital, spread, commission, allow_short,
        whole_units, device, w_cost=0.0))]
    #[allow(clippy::too_many_arguments, reason = "the Python signature")]
    fn new(
        py: Python<'_>,
        bars: &Bars,
        symbols: Option<Vec<String>>,
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
        w_cost: f64,
    ) -> PyResult<Self> {
        if !w_cost.is_finite() {
            return Err(config_error(format!("w_cost={w_cost}: a finite number")));
        }
        let money = TrialMoney::new(trials, &capital, &spread, &commission)?;
        let device = crate::convert::device(device)?;
        let dataset = bars.dataset.clone();
        let made = py.detach(|| -> Result<Self, Error> {
            let params = money.params(allow_short, whole_units, w_cost)?;
            let backend = tradesim::select_backend(device)?;
            let universe = Universe::new(dataset, symbols.as_deref())?;
            let times = universe
                .times
                .iter()
                .map(|t| {
                    t.timestamp_nanos_opt().ok_or_else(|| {
                        Error::Data(format!("time {t}: outside the years 1677 to 2262 that pandas' times hold"))
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let env = PortfolioVectorEnv::new(&backend, &universe, &params, envs, episode_len, seed)?;
            let symbols = universe.symbols().into_iter().map(str::to_owned).collect();
            Ok(Self { env, symbols, times })
        });
        made.map_err(|e| to_py(py, e))
    }

    /// Envs (trials x envs).
    #[getter]
    fn num_envs(&self) -> usize {
        self.env.n_envs()
    }

    /// Floats per symbol of an observation.
    #[getter]
    fn obs_per_symbol(&self) -> usize {
        self.env.obs_per_symbol()
    }

    /// The universe's symbols, in the observations' and actions' order.
    #[getter]
    fn symbols(&self) -> Vec<String> {
        self.symbols.clone()
    }

    /// The universe's calendar, nanoseconds since 1970 UTC.
    #[getter]
    fn times(&self) -> Vec<i64> {
        self.times.clone()
    }

    /// `cpu` or `cuda`.
    #[getter]
    fn device(&self) -> &'static str {
        self.env.backend_name()
    }

    /// Views of the env's outputs by name: `obs`, `final_obs` (envs x symbols x floats), `rewards`,
    /// `terminated`, `truncated`, `final_mask`, `equity`, `final_equity`, `costs`, `time`, `final_time`
    /// (envs), `units`, `final_units` (envs x symbols).
    fn buffers<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let owner = slf.as_any();
        let this = slf.borrow();
        let e = &this.env;
        let (n, s, f) = (e.n_envs(), e.n_symbols(), e.obs_per_symbol());
        let out = PyDict::new(slf.py());
        // SAFETY: the env's buffers are sized in `PortfolioVectorEnv::new` and only overwritten in place;
        // `owner` is the Python object that owns the env.
        unsafe {
            out.set_item("obs", view(owner, e.observations(), &[n, s, f])?)?;
            out.set_item("final_obs", view(owner, e.final_observations(), &[n, s, f])?)?;
            out.set_item("rewards", view(owner, e.rewards(), &[n])?)?;
            out.set_item("terminated", view(owner, e.terminated(), &[n])?)?;
            out.set_item("truncated", view(owner, e.truncated(), &[n])?)?;
            out.set_item("final_mask", view(owner, e.final_mask(), &[n])?)?;
            out.set_item("equity", view(owner, e.equity(), &[n])?)?;
            out.set_item("final_equity", view(owner, e.final_equity(), &[n])?)?;
            out.set_item("costs", view(owner, e.costs(), &[n])?)?;
            out.set_item("time", view(owner, e.time(), &[n])?)?;
            out.set_item("final_time", view(owner, e.final_time(), &[n])?)?;
            out.set_item("units", view(owner, e.units(), &[n, s])?)?;
            out.set_item("final_units", view(owner, e.final_units(), &[n, s])?)?;
        }
        Ok(out)
    }

    /// New episodes for every env (`seed`: the draws start over from it).
    #[pyo3(signature = (seed=None))]
    fn reset(&mut self, py: Python<'_>, seed: Option<u64>) -> PyResult<()> {
        let env = &mut self.env;
        py.detach(|| env.reset(seed)).map_err(|e| to_py(py, e))
    }

    /// One step of every env. `actions`: envs x symbols codes as uint8 (0 flat, 1 long, 2 short), a numpy
    /// array of any shape holding that many, env-major.
    fn step(&mut self, py: Python<'_>, actions: PyReadonlyArrayDyn<'_, u8>) -> PyResult<()> {
        let codes = actions.as_slice().map_or_else(|_| actions.as_array().iter().copied().collect(), <[u8]>::to_vec);
        let want = self.env.n_envs() * self.env.n_symbols();
        if codes.len() != want {
            return Err(config_error(format!(
                "actions: {} codes for {} envs x {} symbols",
                codes.len(),
                self.env.n_envs(),
                self.env.n_symbols()
            )));
        }
        let env = &mut self.env;
        py.detach(|| env.step(&codes)).map_err(|e| to_py(py, e))
    }
}

/// The names of the columns of each symbol's row of a portfolio env's observation: the market features,
/// the cross-sectional ones, then the account's.
#[pyfunction]
pub(crate) fn universe_feature_names() -> Vec<&'static str> {
    let market = tradesim::data::features::NAMES.iter();
    let cross = tradesim::data::cross_section::CROSS_NAMES.iter();
    market.chain(cross).chain(ACCOUNT_NAMES.iter()).copied().collect()
}
