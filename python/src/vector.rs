//! The environment classes: `VectorEnv`, K trials x E envs of the fused environment (its buffers as
//! read-only numpy views or DLPack arrays, its actions from numpy, a sequence or a CUDA DLPack array), and
//! `SplitWalk`, a greedy walk over a part of the time split scored by the backtest engine; and the names
//! of the observations' market features.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict};
use rust_decimal::Decimal;

use tradesim::Error;
use tradesim::train::DEFAULT_SPLIT;
use tradesim::vector::{Part, SplitWalk, VectorEnv};

use crate::convert::{config_error, money, to_py};
use crate::data::Bars;
use crate::dlpack;

/// Each trial's capital, spread and commission: one value for every trial, or one per trial.
pub(crate) struct TrialMoney {
    capital: Vec<Decimal>,
    spread: Vec<Decimal>,
    commission: Vec<Decimal>,
}

impl TrialMoney {
    /// Reads the three parameters for `trials` trials, naming the one refused.
    pub(crate) fn new(
        trials: usize,
        capital: &[Bound<'_, PyAny>],
        spread: &[Bound<'_, PyAny>],
        commission: &[Bound<'_, PyAny>],
    ) -> PyResult<Self> {
        let per_trial = |name: &str, values: &[Bound<'_, PyAny>]| -> PyResult<Vec<Decimal>> {
            match values.len() {
                1 => Ok(vec![money(name, &values[0])?; trials]),
                n if n == trials => values.iter().map(|v| money(name, v)).collect(),
                n => Err(config_error(format!("{name}: {n} values for {trials} trials (give 1 or {trials})"))),
            }
        };
        Ok(Self {
            capital: per_trial("capital", capital)?,
            spread: per_trial("spread", spread)?,
            commission: per_trial("commission", commission)?,
        })
    }

    /// Each trial's parameters (its key the trial's index, `w_cost` the reward's cost weight).
    pub(crate) fn params(
        &self,
        allow_short: bool,
        whole_units: bool,
        w_cost: f64,
    ) -> Result<Vec<tradesim::TrialParams>, Error> {
        (0..self.capital.len())
            .map(|t| {
                let (capital, spread, commission) = (self.capital[t], self.spread[t], self.commission[t]);
                let decimals =
                    tradesim::audit::DecimalParams::account(capital, spread, commission, whole_units, allow_short);
                Ok(tradesim::TrialParams { key: t as u64, w_cost, ..decimals.to_params()? })
            })
            .collect()
    }
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
pub(crate) unsafe fn view<'py, T: numpy::Element>(
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
        let money = TrialMoney::new(trials, &capital, &spread, &commission)?;
        let device = crate::convert::device(device)?;
        let dataset = &bars.dataset;
        let made = py.detach(|| -> Result<VectorEnv, Error> {
            let params = money.params(allow_short, whole_units, w_cost)?;
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
pub(crate) fn market_feature_names() -> Vec<&'static str> {
    tradesim::data::features::NAMES.to_vec()
}
