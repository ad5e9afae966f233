//! [`PortfolioEnvBatch`]: K trials x E portfolio envs over a universe on the chosen backend, each env one cash
//! account over the universe's N symbols stepped by an action per symbol; one per-env rule for both
//! backends ([`gpu_kernels::account::env`], ENVIRONMENT.md "The portfolio env").

use gpu_kernels::TrialParams;
use gpu_kernels::account::AccountState;
use gpu_kernels::account::env::PortfolioEnvArgs;

use crate::cpu::portfolio_env::CpuPortfolioEnv;
use crate::env_batch::validate_params;
use crate::types::PortfolioScan;
use crate::{Backend, HostError, UniverseMarket};

/// The portfolio envs of a batch of trials and their state on the backend.
#[derive(Debug)]
pub struct PortfolioEnvBatch {
    args: PortfolioEnvArgs,
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Cpu(Box<CpuPortfolioEnv>),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaPortfolioEnv>),
}

/// Refuses what the portfolio env does not model: barriers (per-position barriers are not part of its
/// rule) and reward normalization (it returns raw rewards, as the vector env does).
fn check_portfolio_params(trial: usize, p: &TrialParams) -> Result<(), HostError> {
    validate_params(trial, p)?;
    let unused = [
        ("take_profit_mult", p.take_profit_mult),
        ("stop_loss_mult", p.stop_loss_mult),
        ("max_hold_bars", f64::from(p.max_hold_bars)),
        ("normalize_reward", f64::from(p.normalize_reward)),
    ];
    if let Some((field, value)) = unused.into_iter().find(|&(_, v)| v != 0.0) {
        let rule = "0 in a portfolio env (no barriers; rewards are raw)";
        return Err(HostError::InvalidParam { trial, field, value, rule });
    }
    Ok(())
}

/// Refuses env `env`'s segment unless `start <= end < times`.
fn check_segment(env: usize, (start, end): (usize, usize), times: usize) -> Result<(), HostError> {
    if start > end || end >= times {
        return Err(HostError::Config(format!(
            "env {env}: segment [{start}, {end}] must have start <= end < times ({times})"
        )));
    }
    Ok(())
}

impl PortfolioEnvBatch {
    /// `params.len()` trials of `envs_per_trial` envs each on `market`, every env flat with its trial's capital
    /// and done (a segment of no steps) until [`Self::reset`] gives it a segment.
    pub fn new(
        backend: &Backend,
        market: &UniverseMarket,
        params: &[TrialParams],
        envs_per_trial: usize,
    ) -> Result<Self, HostError> {
        if params.is_empty() || envs_per_trial == 0 {
            return Err(HostError::Config("the portfolio env needs at least one trial and one env per trial".into()));
        }
        for (trial, p) in params.iter().enumerate() {
            check_portfolio_params(trial, p)?;
        }
        let (n, times) = (market.n_symbols(), market.n_times());
        let n_envs = params.len().checked_mul(envs_per_trial).filter(|&e| e.saturating_mul(n) <= u32::MAX as usize);
        let n_envs = n_envs.ok_or_else(|| {
            HostError::Config(format!(
                "{} trials x {envs_per_trial} envs x {n} symbols: at most 2^32 - 1 env-symbol cells",
                params.len()
            ))
        })?;
        let as_u32 = |what: &str, v: usize| {
            u32::try_from(v).map_err(|_| HostError::Config(format!("{what} = {v} does not fit in u32")))
        };
        let args = PortfolioEnvArgs {
            n_times: as_u32("times", times)?,
            n_symbols: as_u32("symbols", n)?,
            n_envs: as_u32("envs", n_envs)?,
            envs_per_trial: as_u32("envs per trial", envs_per_trial)?,
            steps: 0,
            _pad: 0,
        };
        let inner = match backend {
            Backend::Cpu => Inner::Cpu(Box::new(CpuPortfolioEnv::new(market, params, &args))),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => Inner::Cuda(Box::new(crate::cuda::CudaPortfolioEnv::new(rt, market, params, &args)?)),
        };
        let mut batch = Self { args, inner };
        batch.reset(&vec![(0, 0); n_envs])?;
        Ok(batch)
    }

    /// Envs (K x E), trial-major.
    pub fn n_envs(&self) -> usize {
        self.args.n_envs()
    }

    /// Symbols (N).
    pub fn n_symbols(&self) -> usize {
        self.args.n_symbols as usize
    }

    /// Every env starts over flat with its trial's capital on its segment `(start, end)` of times: it takes
    /// `end - start` steps, deciding at the closes of `start..end` (`start <= end < times`; `start == end`
    /// is done at once).
    pub fn reset(&mut self, segments: &[(usize, usize)]) -> Result<(), HostError> {
        let (n_envs, times) = (self.n_envs(), self.args.n_times as usize);
        if segments.len() != n_envs {
            return Err(HostError::Shape {
                what: "segments (one per env)".into(),
                expected: n_envs,
                got: segments.len(),
            });
        }
        for (env, &segment) in segments.iter().enumerate() {
            check_segment(env, segment, times)?;
        }
        let segments: Vec<(u32, u32)> = segments.iter().map(|&(s, e)| (s as u32, e as u32)).collect();
        match &mut self.inner {
            Inner::Cpu(c) => {
                c.reset(&segments);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.reset(&segments),
        }
    }

    /// The envs of `restarts` (`(env, (start, end))`) start over flat with their trial's capital on their
    /// segments, as [`Self::reset`] starts every env; the other envs keep their accounts and positions. A
    /// vector env's autoreset: the envs whose episode ended take their next one.
    pub fn restart(&mut self, restarts: &[(usize, (usize, usize))]) -> Result<(), HostError> {
        let (n_envs, times) = (self.n_envs(), self.args.n_times as usize);
        for &(env, segment) in restarts {
            if env >= n_envs {
                return Err(HostError::Config(format!("restart of env {env}: the batch has {n_envs} envs")));
            }
            check_segment(env, segment, times)?;
        }
        let restarts: Vec<(usize, (u32, u32))> =
            restarts.iter().map(|&(e, (s, t))| (e, (s as u32, t as u32))).collect();
        match &mut self.inner {
            Inner::Cpu(c) => {
                c.restart(&restarts);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.restart(&restarts),
        }
    }

    /// Every env walks `steps` steps with `actions` (`steps x n_envs x n_symbols`, step-major: the codes env
    /// e decides at its i-th step are `actions[(i x n_envs + e) x n_symbols..][..n_symbols]`, each 0 flat,
    /// 1 long or 2 short). An invalid code fails the call before any env moves.
    pub fn scan(&mut self, actions: &[u8], steps: usize) -> Result<PortfolioScan, HostError> {
        let per_step = self.n_envs() * self.n_symbols();
        if steps == 0 || u32::try_from(steps).is_err() {
            return Err(HostError::Config(format!("a portfolio env scan takes 1 to 2^32 - 1 steps, not {steps}")));
        }
        if steps.checked_mul(per_step) != Some(actions.len()) {
            return Err(HostError::Shape {
                what: format!(
                    "portfolio actions ({steps} steps x {} envs x {} symbols)",
                    self.n_envs(),
                    self.n_symbols()
                ),
                expected: steps.saturating_mul(per_step),
                got: actions.len(),
            });
        }
        if let Some(i) = actions.iter().position(|&a| a > 2) {
            let (step, env, symbol) = (i / per_step, i % per_step / self.n_symbols(), i % self.n_symbols());
            return Err(HostError::InvalidSymbolAction { step, env, symbol, code: actions[i] });
        }
        let args = PortfolioEnvArgs { steps: steps as u32, ..self.args };
        match &mut self.inner {
            Inner::Cpu(c) => Ok(c.scan(&args, actions)),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.scan(&args, actions),
        }
    }

    /// The batch's sizes (`steps` 0).
    pub(crate) fn args(&self) -> PortfolioEnvArgs {
        self.args
    }

    /// The CPU backend's state (`None` on the device).
    pub(crate) fn cpu_mut(&mut self) -> Option<&mut CpuPortfolioEnv> {
        match &mut self.inner {
            Inner::Cpu(c) => Some(c),
            #[cfg(feature = "cuda")]
            Inner::Cuda(_) => None,
        }
    }

    /// The CUDA backend's state (`None` on the CPU).
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_mut(&mut self) -> Option<&mut crate::cuda::CudaPortfolioEnv> {
        match &mut self.inner {
            Inner::Cpu(_) => None,
            Inner::Cuda(c) => Some(c),
        }
    }

    /// Each env's account after the last step.
    pub fn accounts(&self) -> Result<Vec<AccountState>, HostError> {
        match &self.inner {
            Inner::Cpu(c) => Ok(c.accounts.clone()),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.accounts(),
        }
    }

    /// Each env's units of each symbol, `n_envs x n_symbols` (positive long, negative short).
    pub fn units(&self) -> Result<Vec<f64>, HostError> {
        match &self.inner {
            Inner::Cpu(c) => Ok(c.units.clone()),
            #[cfg(feature = "cuda")]
            Inner::Cuda(c) => c.units(),
        }
    }
}
