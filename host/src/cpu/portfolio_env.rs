//! The portfolio env on the CPU: [`scan_portfolio_env`] for every env, in parallel over envs (rayon), each
//! env's outputs gathered into the step-major buffers afterwards.

use gpu_kernels::account::env::{PortfolioEnvArgs, PortfolioStep, ScanInputs, scan_portfolio_env};
use gpu_kernels::account::{AccountState, Orders};
use gpu_kernels::{Bar, TrialParams};
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
}
