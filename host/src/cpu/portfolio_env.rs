//! The portfolio env on the CPU: [`scan_portfolio_env`] for every env, in parallel over envs (rayon), each
//! env's outputs gathered into the step-major buffers afterwards; the universe learners' rows observed and
//! stepped by the bodies of the `universe_observe` and `universe_step` kernels.

use gpu_kernels::account::env::{PortfolioEnvArgs, PortfolioStep, ScanInputs, scan_portfolio_env};
use gpu_kernels::account::rows::{UniverseEnv, observe_universe_row, step_universe_env};
use gpu_kernels::account::{AccountState, Orders};
use gpu_kernels::{Bar, Transition, TrialParams};
use rayon::prelude::*;

use crate::UniverseMarket;
use crate::types::PortfolioScan;

#[derive(Debug)]
pub(crate) struct CpuPortfolioEnv {
    params: Vec<TrialParams>,
    pub(crate) accounts: Vec<AccountState>,
    /// `n_envs x n_symbols`.
    pub(crate) units: Vec<f64>,
    bars: Vec<Bar>,
    tradable: Vec<u8>,
    envs_per_trial: usize,
    n_symbols: usize,
}

impl CpuPortfolioEnv {
    pub(crate) fn new(market: &UniverseMarket, params: &[TrialParams], args: &PortfolioEnvArgs) -> Self {
        let (n_envs, n) = (args.n_envs(), args.n_symbols as usize);
        Self {
            params: params.to_vec(),
            accounts: vec![AccountState::new(&params[0], 0, 0); n_envs],
            units: vec![0.0; n_envs * n],
            bars: market.bars().to_vec(),
            tradable: market.tradable().to_vec(),
            envs_per_trial: args.envs_per_trial as usize,
            n_symbols: n,
        }
    }

    /// Every env flat with its trial's capital on its segment (checked by the caller).
    pub(crate) fn reset(&mut self, segments: &[(u32, u32)]) {
        let ept = self.envs_per_trial;
        for (env, (account, &(start, end))) in self.accounts.iter_mut().zip(segments).enumerate() {
            *account = AccountState::new(&self.params[env / ept], start, end);
        }
        self.units.fill(0.0);
    }

    /// The envs of `restarts` flat with their trial's capital on their segments (checked by the caller).
    pub(crate) fn restart(&mut self, restarts: &[(usize, (u32, u32))]) {
        let (ept, n) = (self.envs_per_trial, self.n_symbols);
        for &(env, (start, end)) in restarts {
            self.accounts[env] = AccountState::new(&self.params[env / ept], start, end);
            self.units[env * n..(env + 1) * n].fill(0.0);
        }
    }

    /// `args.steps` steps of every env with checked `actions`.
    pub(crate) fn scan(&mut self, args: &PortfolioEnvArgs, actions: &[u8]) -> PortfolioScan {
        let (n, steps, n_envs, ept) = (self.n_symbols, args.steps as usize, args.n_envs(), self.envs_per_trial);
        let input = ScanInputs { bars: &self.bars, tradable: &self.tradable, actions };
        let params = &self.params;
        let per_env: Vec<(Vec<PortfolioStep>, Vec<u8>)> = (&mut self.accounts, self.units.par_chunks_mut(n))
            .into_par_iter()
            .enumerate()
            .map(|(env, (account, units))| {
                let (mut value, mut order_units, mut symbol) = (vec![0.0; n], vec![0.0; n], vec![0u32; n]);
                let mut orders = Orders { value: &mut value, units: &mut order_units, symbol: &mut symbol };
                let (mut outcomes, mut sides) = (vec![PortfolioStep::default(); steps], vec![0u8; steps * n]);
                scan_portfolio_env(
                    env,
                    args,
                    &params[env / ept],
                    account,
                    units,
                    &mut orders,
                    input,
                    |step, outcome| outcomes[step] = outcome,
                    |step, s, code| sides[step * n + s] = code,
                );
                (outcomes, sides)
            })
            .collect();
        let mut out =
            PortfolioScan { steps: vec![PortfolioStep::default(); steps * n_envs], sides: vec![0; steps * n_envs * n] };
        for (env, (outcomes, sides)) in per_env.into_iter().enumerate() {
            for step in 0..steps {
                out.steps[step * n_envs + env] = outcomes[step];
                let at = (step * n_envs + env) * n;
                out.sides[at..at + n].copy_from_slice(&sides[step * n..(step + 1) * n]);
            }
        }
        out
    }

    /// Every row's observation (`n_envs x n_symbols` rows of `n_features + 3` floats) from the rows'
    /// symbol-major `features` ([`observe_universe_row`] per row, in parallel over envs).
    pub(crate) fn observe_rows(&self, args: &PortfolioEnvArgs, features: &[f32], n_features: usize) -> Vec<f32> {
        let (n, ept, width) = (self.n_symbols, self.envs_per_trial, n_features + 3);
        let mut obs = vec![0.0; self.accounts.len() * n * width];
        obs.par_chunks_mut(n * width).enumerate().for_each(|(env, rows)| {
            let (params, account) = (&self.params[env / ept], &self.accounts[env]);
            for (s, row) in rows.chunks_exact_mut(width).enumerate() {
                observe_universe_row(args, params, account, self.units[env * n + s], &self.bars, features, s, row);
            }
        });
        obs
    }

    /// One step of every env with the rows' checked codes `actions` (`n_envs x n_symbols`), returning the rows'
    /// transitions (`n_envs x n_symbols`; [`step_universe_env`] per env, in parallel over envs).
    pub(crate) fn step_rows(&mut self, args: &PortfolioEnvArgs, actions: &[u8]) -> Vec<Transition> {
        let (n, ept) = (self.n_symbols, self.envs_per_trial);
        let input = ScanInputs { bars: &self.bars, tradable: &self.tradable, actions };
        let params = &self.params;
        let mut out = vec![Transition::default(); self.accounts.len() * n];
        (&mut self.accounts, self.units.par_chunks_mut(n), out.par_chunks_mut(n)).into_par_iter().enumerate().for_each(
            |(env, (account, units, rows))| {
                let (mut before, mut value, mut order_units, mut symbol) =
                    (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0u32; n]);
                let state = UniverseEnv {
                    account,
                    units,
                    units_before: &mut before,
                    orders: Orders { value: &mut value, units: &mut order_units, symbol: &mut symbol },
                };
                step_universe_env(env, args, &params[env / ept], state, input, |k, t| rows[k] = t);
            },
        );
        out
    }
}
