//! [`PortfolioSim`]: K trials x E envs stepping the portfolio rules on the chosen backend.

use gpu_kernels::{Action, EnvState, TrialParams};

use crate::cpu::CpuSim;
use crate::{Backend, HostError, PriceSeries};

/// How many trials and envs per trial a simulation holds. Envs are numbered trial-major: env `i` belongs to
/// trial `i / envs_per_trial`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimLayout {
    trials: usize,
    envs_per_trial: usize,
}

impl SimLayout {
    /// A layout of `trials` x `envs_per_trial` (both at least 1, at most 2^32 envs in all).
    pub fn new(trials: usize, envs_per_trial: usize) -> Result<Self, HostError> {
        let n = trials.saturating_mul(envs_per_trial);
        if trials == 0 || envs_per_trial == 0 || n > u32::MAX as usize {
            return Err(HostError::InvalidLayout {
                trials,
                envs_per_trial,
            });
        }
        Ok(Self {
            trials,
            envs_per_trial,
        })
    }

    /// Number of trials.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Envs per trial.
    pub fn envs_per_trial(&self) -> usize {
        self.envs_per_trial
    }

    /// Envs in all.
    pub fn n_envs(&self) -> usize {
        self.trials * self.envs_per_trial
    }
}

/// The portfolio state of every env, advanced one bar per step on the CPU or a GPU.
#[derive(Debug)]
pub struct PortfolioSim {
    layout: SimLayout,
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Cpu(CpuSim),
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaSim),
}

impl PortfolioSim {
    /// Uploads prices and parameters once and places env `i` on bars `segments[i] = (start, end)`.
    pub fn new(
        backend: &Backend,
        prices: &PriceSeries,
        params: &[TrialParams],
        layout: SimLayout,
        segments: &[(u32, u32)],
    ) -> Result<Self, HostError> {
        if params.len() != layout.trials() {
            return Err(HostError::Shape {
                what: "trial parameter sets (one per trial)".to_owned(),
                expected: layout.trials(),
                got: params.len(),
            });
        }
        if segments.len() != layout.n_envs() {
            return Err(HostError::Shape {
                what: "env segments (one per env)".to_owned(),
                expected: layout.n_envs(),
                got: segments.len(),
            });
        }
        for (trial, p) in params.iter().enumerate() {
            validate_params(trial, p)?;
        }
        let states = segments
            .iter()
            .enumerate()
            .map(|(env, &(start, end))| {
                if start > end || end as usize >= prices.len() {
                    return Err(HostError::InvalidSegment {
                        env,
                        start,
                        end,
                        n_bars: prices.len(),
                    });
                }
                Ok(EnvState::new(
                    &params[env / layout.envs_per_trial()],
                    start,
                    end,
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let inner = match backend {
            Backend::Cpu => {
                Inner::Cpu(CpuSim::new(prices, params, states, layout.envs_per_trial()))
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => Inner::Cuda(crate::cuda::CudaSim::new(
                rt, prices, params, &states, layout,
            )?),
        };
        Ok(Self { layout, inner })
    }

    /// The layout.
    pub fn layout(&self) -> SimLayout {
        self.layout
    }

    /// Advances every env by one bar; `actions[i]` is env `i`'s action code (see [`Action`]).
    pub fn step(&mut self, actions: &[u8]) -> Result<(), HostError> {
        self.run(actions, 1)
    }

    /// Advances every env by `steps` bars; `actions` is step-major (`steps x n_envs`), uploaded once.
    pub fn run(&mut self, actions: &[u8], steps: usize) -> Result<(), HostError> {
        let n_envs = self.layout.n_envs();
        if actions.len() != steps * n_envs {
            return Err(HostError::Shape {
                what: format!("actions ({steps} steps x {n_envs} envs)"),
                expected: steps * n_envs,
                got: actions.len(),
            });
        }
        if let Some(i) = actions.iter().position(|&a| a >= Action::COUNT) {
            return Err(HostError::InvalidAction {
                step: i / n_envs,
                env: i % n_envs,
                code: actions[i],
            });
        }
        match &mut self.inner {
            Inner::Cpu(sim) => {
                sim.run(actions, steps);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Inner::Cuda(sim) => sim.run(actions, steps),
        }
    }

    /// Every env's state (trial-major), copied back from the device when on CUDA.
    pub fn states(&self) -> Result<Vec<EnvState>, HostError> {
        match &self.inner {
            Inner::Cpu(sim) => Ok(sim.states().to_vec()),
            #[cfg(feature = "cuda")]
            Inner::Cuda(sim) => sim.states(),
        }
    }
}

fn validate_params(trial: usize, p: &TrialParams) -> Result<(), HostError> {
    let checks: [(&'static str, f64, bool, &'static str); 5] = [
        (
            "initial_capital",
            p.initial_capital,
            p.initial_capital > 0.0,
            "finite and > 0",
        ),
        (
            "spread",
            p.spread,
            (0.0..2.0).contains(&p.spread),
            "in [0, 2)",
        ),
        (
            "commission",
            p.commission,
            (0.0..1.0).contains(&p.commission),
            "in [0, 1)",
        ),
        (
            "cash_reserve_pct",
            p.cash_reserve_pct,
            (0.0..1.0).contains(&p.cash_reserve_pct),
            "in [0, 1)",
        ),
        (
            "max_drawdown",
            p.max_drawdown,
            (0.0..1.0).contains(&p.max_drawdown),
            "in [0, 1), 0 disables",
        ),
    ];
    for (field, value, ok, rule) in checks {
        if !(ok && value.is_finite()) {
            return Err(HostError::InvalidParam {
                trial,
                field,
                value,
                rule,
            });
        }
    }
    for (field, flag) in [
        ("allow_short", p.allow_short),
        ("whole_units", p.whole_units),
    ] {
        if flag > 1 {
            return Err(HostError::InvalidParam {
                trial,
                field,
                value: f64::from(flag),
                rule: "0 or 1",
            });
        }
    }
    Ok(())
}
