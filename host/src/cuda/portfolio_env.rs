//! The portfolio env on the device: parameters, universe, accounts, units and the orders' scratch stay in
//! device memory; a scan uploads its actions, launches `portfolio_env_scan` once and downloads its outputs.
//! The universe learners step the same buffers without a transfer ([`CudaPortfolioEnv::observe_rows`],
//! [`CudaPortfolioEnv::step_rows`]) on their rows' stream, so every host access here waits for the device
//! first.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use gpu_kernels::account::AccountState;
use gpu_kernels::account::env::{PortfolioEnvArgs, PortfolioStep};
use gpu_kernels::batch::BatchArgs;
use gpu_kernels::{Bar, Transition, TrialParams};

use super::buffers::{Dev, PolicyView, PortfolioEnvBuffers, zeros};
use super::env::CudaEnv;
use super::launch;
use super::runtime::CudaRuntime;
use crate::types::PortfolioScan;
use crate::{HostError, UniverseMarket};

#[derive(Debug)]
pub(crate) struct CudaPortfolioEnv {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    host_params: Vec<TrialParams>,
    params: CudaSlice<Dev<TrialParams>>,
    accounts: CudaSlice<Dev<AccountState>>,
    units: CudaSlice<f64>,
    order_value: CudaSlice<f64>,
    order_units: CudaSlice<f64>,
    order_symbol: CudaSlice<u32>,
    /// The universe learners' scratch: each env's units before its step.
    units_before: CudaSlice<f64>,
    bars: CudaSlice<Dev<Bar>>,
    tradable: CudaSlice<u8>,
    envs_per_trial: usize,
    cells: usize,
}

impl CudaPortfolioEnv {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        market: &UniverseMarket,
        params: &[TrialParams],
        args: &PortfolioEnvArgs,
    ) -> Result<Self, HostError> {
        let cells = args.n_envs() * args.n_symbols as usize;
        let bytes = size_of_val(market.bars())
            + market.tradable().len()
            + size_of_val(params)
            + args.n_envs() * size_of::<AccountState>()
            + cells * (8 + 8 + 8 + 8 + 4);
        rt.ensure_fits(&format!("the portfolio env of {} envs x {} symbols", args.n_envs, args.n_symbols), bytes)?;
        let stream = rt.new_stream()?;
        let up = |what: &'static str| HostError::driver(what);
        let bars: Vec<_> = market.bars().iter().copied().map(Dev).collect();
        let dev_params: Vec<_> = params.iter().copied().map(Dev).collect();
        Ok(Self {
            params: stream.clone_htod(&dev_params).map_err(up("uploading trial parameters"))?,
            accounts: zeros(&stream, args.n_envs())?,
            units: zeros(&stream, cells)?,
            order_value: zeros(&stream, cells)?,
            order_units: zeros(&stream, cells)?,
            order_symbol: zeros(&stream, cells)?,
            units_before: zeros(&stream, cells)?,
            bars: stream.clone_htod(&bars).map_err(up("uploading universe bars"))?,
            tradable: stream.clone_htod(market.tradable()).map_err(up("uploading universe flags"))?,
            host_params: params.to_vec(),
            envs_per_trial: args.envs_per_trial as usize,
            cells,
            rt: rt.clone(),
            stream,
        })
    }

    /// Every env flat with its trial's capital on its segment (checked by the caller).
    pub(crate) fn reset(&mut self, segments: &[(u32, u32)]) -> Result<(), HostError> {
        self.rt.synchronize()?;
        let accounts: Vec<_> = segments
            .iter()
            .enumerate()
            .map(|(env, &(start, end))| {
                Dev(AccountState::new(&self.host_params[env / self.envs_per_trial], start, end))
            })
            .collect();
        let up = |what: &'static str| HostError::driver(what);
        self.stream.memcpy_htod(&accounts, &mut self.accounts).map_err(up("uploading accounts"))?;
        self.stream.memset_zeros(&mut self.units).map_err(up("zeroing units"))?;
        self.stream.synchronize().map_err(up("waiting for the reset"))
    }

    /// The envs of `restarts` flat with their trial's capital on their segments (checked by the caller):
    /// each one's account uploaded and its units zeroed in place.
    pub(crate) fn restart(&mut self, restarts: &[(usize, (u32, u32))]) -> Result<(), HostError> {
        self.rt.synchronize()?;
        let n = self.cells / self.accounts.len().max(1);
        let up = |what: &'static str| HostError::driver(what);
        for &(env, (start, end)) in restarts {
            let account = [Dev(AccountState::new(&self.host_params[env / self.envs_per_trial], start, end))];
            let mut slot = self.accounts.slice_mut(env..env + 1);
            self.stream.memcpy_htod(&account, &mut slot).map_err(up("uploading an account"))?;
            let mut units = self.units.slice_mut(env * n..(env + 1) * n);
            self.stream.memset_zeros(&mut units).map_err(up("zeroing units"))?;
        }
        self.stream.synchronize().map_err(up("waiting for the restart"))
    }

    /// `args.steps` steps of every env with checked `actions`: one launch.
    pub(crate) fn scan(&mut self, args: &PortfolioEnvArgs, actions: &[u8]) -> Result<PortfolioScan, HostError> {
        self.rt.synchronize()?;
        let outcomes = args.steps as usize * args.n_envs();
        let actions = self.stream.clone_htod(actions).map_err(HostError::driver("uploading actions"))?;
        let mut steps_out = zeros::<Dev<PortfolioStep>>(&self.stream, outcomes)?;
        let mut sides = zeros::<u8>(&self.stream, outcomes * args.n_symbols as usize)?;
        let buf = PortfolioEnvBuffers {
            params: &self.params,
            accounts: &mut self.accounts,
            units: &mut self.units,
            order_value: &mut self.order_value,
            order_units: &mut self.order_units,
            order_symbol: &mut self.order_symbol,
            bars: &self.bars,
            tradable: &self.tradable,
        };
        launch::env::portfolio_env_scan(&self.rt, &self.stream, buf, &actions, &mut steps_out, &mut sides, args)?;
        let down = |what: &'static str| HostError::driver(what);
        let steps = self.stream.clone_dtoh(&steps_out.slice(0..outcomes)).map_err(down("downloading step outcomes"))?;
        let sides = self
            .stream
            .clone_dtoh(&sides.slice(0..outcomes * args.n_symbols as usize))
            .map_err(down("downloading sides"))?;
        self.stream.synchronize().map_err(down("waiting for the scan"))?;
        Ok(PortfolioScan { steps: steps.into_iter().map(|d| d.0).collect(), sides })
    }

    /// The accounts, downloaded.
    pub(crate) fn accounts(&self) -> Result<Vec<AccountState>, HostError> {
        self.rt.synchronize()?;
        let host = self.stream.clone_dtoh(&self.accounts).map_err(HostError::driver("downloading accounts"))?;
        self.stream.synchronize().map_err(HostError::driver("waiting for the accounts"))?;
        Ok(host.into_iter().map(|d| d.0).collect())
    }

    /// The units, downloaded.
    pub(crate) fn units(&self) -> Result<Vec<f64>, HostError> {
        self.rt.synchronize()?;
        let host =
            self.stream.clone_dtoh(&self.units.slice(0..self.cells)).map_err(HostError::driver("downloading units"))?;
        self.stream.synchronize().map_err(HostError::driver("waiting for the units"))?;
        Ok(host)
    }

    /// Every row's observation (`n_envs x n_symbols` rows of `n_features + 3` floats) into `out` on
    /// `stream`, from the rows' symbol-major `features` (`universe_observe`).
    pub(crate) fn observe_rows(
        &mut self,
        stream: &CudaStream,
        features: &CudaSlice<f32>,
        n_features: usize,
        out: &mut CudaSlice<f32>,
        args: &PortfolioEnvArgs,
    ) -> Result<(), HostError> {
        let rt = self.rt.clone();
        let buf = self.buffers();
        launch::env::universe_observe(&rt, stream, &buf, features, out, args, n_features)
    }

    /// One step of every env on `stream` with the rows' codes `actions`, each row's transition into the rows'
    /// `ring` (`universe_step`; `ring_args` the rows' batch for one step, `row_params` its trials').
    pub(crate) fn step_rows(
        &mut self,
        stream: &CudaStream,
        actions: &CudaSlice<u8>,
        (row_params, ring): (&CudaSlice<Dev<TrialParams>>, &mut CudaSlice<Dev<Transition>>),
        args: &PortfolioEnvArgs,
        ring_args: &BatchArgs,
    ) -> Result<(), HostError> {
        let rt = self.rt.clone();
        let units_before = &mut self.units_before;
        let buf = PortfolioEnvBuffers {
            params: &self.params,
            accounts: &mut self.accounts,
            units: &mut self.units,
            order_value: &mut self.order_value,
            order_units: &mut self.order_units,
            order_symbol: &mut self.order_symbol,
            bars: &self.bars,
            tradable: &self.tradable,
        };
        launch::env::universe_step(&rt, stream, buf, units_before, actions, row_params, ring, args, ring_args)
    }

    fn buffers(&mut self) -> PortfolioEnvBuffers<'_> {
        PortfolioEnvBuffers {
            params: &self.params,
            accounts: &mut self.accounts,
            units: &mut self.units,
            order_value: &mut self.order_value,
            order_units: &mut self.order_units,
            order_symbol: &mut self.order_symbol,
            bars: &self.bars,
            tradable: &self.tradable,
        }
    }
}

/// The universe learners' acting step with no transfer, all on the rows' stream: every row's observation
/// into the learner's acting buffer (`universe_observe`, through the `observe` that `act` is handed), `act`'s
/// codes for them into the rows' action buffer, then with `step` every env's portfolio step with its rows'
/// transitions into the rows' ring (`universe_step`; `ring_args` the rows' batch for one step).
#[allow(clippy::type_complexity, reason = "the learner's acting, handed the observation launch and the codes")]
pub(crate) fn universe_act(
    env: &mut CudaPortfolioEnv,
    rows: &mut CudaEnv,
    (args, ring_args, n_features): (&PortfolioEnvArgs, &BatchArgs, usize),
    step: bool,
    act: impl FnOnce(
        &Arc<CudaStream>,
        &mut dyn FnMut(&mut CudaSlice<f32>) -> Result<(), HostError>,
        &mut CudaSlice<u8>,
    ) -> Result<(), HostError>,
) -> Result<(), HostError> {
    let PolicyView { stream, params, features, actions, ring, .. } = rows.policy_view()?;
    let stream = stream.clone();
    act(&stream, &mut |out| env.observe_rows(&stream, features, n_features, out, args), actions)?;
    if step {
        env.step_rows(&stream, actions, (params, ring), args, ring_args)?;
    }
    Ok(())
}

/// The universe learners queue kernels on these buffers on another stream, which the frees (on this one)
/// would not wait for: the device finishes first.
impl Drop for CudaPortfolioEnv {
    fn drop(&mut self) {
        let _ = self.rt.synchronize();
    }
}
