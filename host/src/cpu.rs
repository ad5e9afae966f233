//! The CPU backend: gpu-kernels' per-env functions, in parallel over envs.

use gpu_kernels::portfolio::step_env_on_series;
use gpu_kernels::{EnvState, TrialParams};
use rayon::prelude::*;

use crate::PriceSeries;

/// Envs per rayon task: large enough that scheduling costs nothing next to the steps.
const MIN_ENVS_PER_TASK: usize = 2_048;

#[derive(Debug)]
pub(crate) struct CpuSim {
    params: Vec<TrialParams>,
    states: Vec<EnvState>,
    open: Vec<f64>,
    close: Vec<f64>,
    envs_per_trial: usize,
}

impl CpuSim {
    pub(crate) fn new(
        prices: &PriceSeries,
        params: &[TrialParams],
        states: Vec<EnvState>,
        envs_per_trial: usize,
    ) -> Self {
        Self {
            params: params.to_vec(),
            states,
            open: prices.open().to_vec(),
            close: prices.close().to_vec(),
            envs_per_trial,
        }
    }

    pub(crate) fn run(&mut self, actions: &[u8], steps: usize) {
        let n = self.states.len();
        let (params, open, close, ept) =
            (&self.params, &self.open, &self.close, self.envs_per_trial);
        for step_actions in actions.chunks_exact(n).take(steps) {
            self.states
                .par_iter_mut()
                .zip(step_actions.par_iter())
                .enumerate()
                .with_min_len(MIN_ENVS_PER_TASK)
                .for_each(|(env, (state, &action))| {
                    step_env_on_series(&params[env / ept], state, action, open, close);
                });
        }
    }

    pub(crate) fn states(&self) -> &[EnvState] {
        &self.states
    }
}
