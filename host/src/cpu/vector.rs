//! The vector env on the CPU: [`gpu_kernels::vector`]'s per-env bodies over host buffers, in parallel over
//! envs when there are enough of them. These buffers are the env's outputs (the Python package's numpy
//! arrays are views of them).

use gpu_kernels::vector::{VectorArgs, VectorMarket, VectorRow, reset_env, step_env};
use gpu_kernels::{Bar, EnvState, TrialParams};
use rayon::prelude::*;

use crate::MarketData;
use crate::types::VectorOutputs;

/// Below this many envs a step runs on one thread.
const PARALLEL_MIN_ENVS: usize = 2_048;

#[derive(Debug)]
pub(crate) struct CpuVector {
    params: Vec<TrialParams>,
    states: Vec<EnvState>,
    episodes: Vec<u64>,
    bars: Vec<Bar>,
    features: Vec<f32>,
    pub(crate) out: VectorOutputs,
}

impl CpuVector {
    pub(crate) fn new(market: &MarketData, params: &[TrialParams], args: &VectorArgs) -> Self {
        let n = args.n_envs as usize;
        Self {
            params: params.to_vec(),
            states: vec![EnvState::new(&params[0], 0, 0); n],
            episodes: vec![0; n],
            bars: market.bars().to_vec(),
            features: market.features().to_vec(),
            out: VectorOutputs::new(n, args.n_features as usize + 3),
        }
    }

    /// Runs `body(env, params, state, episodes, market, row)` for every env.
    fn each(
        &mut self,
        args: &VectorArgs,
        body: impl Fn(usize, &TrialParams, &mut EnvState, &mut u64, VectorMarket<'_>, VectorRow<'_>) + Sync,
    ) {
        let d = args.n_features as usize + 3;
        let ept = args.envs_per_trial as usize;
        let market = VectorMarket { bars: &self.bars, features: &self.features };
        let params = &self.params;
        let o = &mut self.out;
        let min_len = if self.states.len() >= PARALLEL_MIN_ENVS { 256 } else { usize::MAX };
        (
            &mut self.states,
            &mut self.episodes,
            o.obs.par_chunks_mut(d),
            o.final_obs.par_chunks_mut(d),
            &mut o.rewards,
            &mut o.terminated,
            &mut o.truncated,
            &mut o.final_mask,
            &mut o.equity,
        )
            .into_par_iter()
            .with_min_len(min_len)
            .enumerate()
            .for_each(
                |(env, (state, episodes, obs, final_obs, reward, terminated, truncated, final_mask, equity))| {
                    let row = VectorRow { obs, final_obs, reward, terminated, truncated, final_mask, equity };
                    body(env, &params[env / ept], state, episodes, market, row);
                },
            );
    }

    pub(crate) fn reset(&mut self, args: &VectorArgs, restart: bool) {
        if restart {
            self.episodes.fill(0);
        }
        self.each(args, |env, params, state, episodes, market, row| {
            reset_env(args, env, params, state, episodes, market, row);
        });
    }

    /// One step with `actions` (checked codes, one per env).
    pub(crate) fn step(&mut self, args: &VectorArgs, actions: &[u8]) {
        self.each(args, |env, params, state, episodes, market, row| {
            step_env(args, env, params, state, episodes, actions[env], market, row);
        });
    }
}
