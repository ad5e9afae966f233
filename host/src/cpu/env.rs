//! The envs of a batch on the CPU: gpu-kernels' per-element bodies, in parallel over envs when there are
//! enough of them.

use gpu_kernels::batch::{
    BatchArgs, SampleArgs, chunk_index, chunk_moments, merge_trial_moments, normalize_transition, observe_env,
    sample_one, scan_env,
};
use gpu_kernels::{Bar, EnvState, Moments, Transition, TrialParams};
use rayon::prelude::*;

use crate::types::SampleBatch;
use crate::{HostError, MarketData};

/// Below this many envs a step runs on one thread (rayon's hand-off would cost more than the work).
const PARALLEL_MIN_ENVS: usize = 2_048;

/// What a policy reads and writes on the CPU.
pub(crate) struct PolicyView<'a> {
    pub(crate) params: &'a [TrialParams],
    pub(crate) states: &'a [EnvState],
    pub(crate) bars: &'a [Bar],
    pub(crate) features: &'a [f32],
    pub(crate) actions: &'a mut Vec<u8>,
}

#[derive(Debug)]
pub(crate) struct CpuEnv {
    params: Vec<TrialParams>,
    states: Vec<EnvState>,
    bars: Vec<Bar>,
    features: Vec<f32>,
    ring: Vec<Transition>,
    moments: Vec<Moments>,
    actions: Vec<u8>,
    /// Per env: the ring index and transition of the current step (scattered after each step).
    pending: Vec<(usize, Transition)>,
}

impl CpuEnv {
    pub(crate) fn new(market: &MarketData, params: &[TrialParams], states: Vec<EnvState>, capacity: usize) -> Self {
        Self {
            params: params.to_vec(),
            bars: market.bars().to_vec(),
            features: market.features().to_vec(),
            ring: vec![Transition::default(); params.len() * capacity],
            moments: vec![Moments::default(); params.len()],
            actions: Vec::new(),
            pending: vec![(0, Transition::default()); states.len()],
            states,
        }
    }

    /// Trial `k`'s new parameters, with its ring slots emptied and its reward moments restarted.
    pub(crate) fn restart_trial(&mut self, k: usize, params: &TrialParams) -> Result<(), HostError> {
        let capacity = self.ring.len() / self.params.len().max(1);
        self.params[k] = *params;
        self.ring[k * capacity..(k + 1) * capacity].fill(Transition::default());
        self.moments[k] = Moments::default();
        Ok(())
    }

    pub(crate) fn set_states(&mut self, states: &[EnvState]) -> Result<(), HostError> {
        self.states.copy_from_slice(states);
        Ok(())
    }

    pub(crate) fn load_actions(&mut self, actions: &[u8]) -> Result<(), HostError> {
        self.actions.clear();
        self.actions.extend_from_slice(actions);
        Ok(())
    }

    /// Runs `args.steps` steps from step `first` of the loaded actions. With a ring, steps are taken one at
    /// a time for all envs and their transitions scattered into the ring; without, each env walks all steps.
    pub(crate) fn scan(&mut self, args: &BatchArgs, first: usize) -> Result<(), HostError> {
        let n = self.states.len();
        let ept = args.envs_per_trial as usize;
        let (params, bars) = (&self.params, &self.bars);
        let actions = &self.actions[first * n..(first + args.steps as usize) * n];
        if args.capacity == 0 {
            let walk = |(env, state): (usize, &mut EnvState)| {
                scan_env(env, args, &params[env / ept], state, actions, bars, |_, _| {});
            };
            if n >= PARALLEL_MIN_ENVS {
                self.states.par_iter_mut().enumerate().for_each(walk);
            } else {
                self.states.iter_mut().enumerate().for_each(walk);
            }
            return Ok(());
        }
        for step in 0..args.steps as usize {
            let one = BatchArgs { head: args.head + (step * ept) as u64, steps: 1, ..*args };
            let step_actions = &actions[step * n..(step + 1) * n];
            let walk = |(env, (state, out)): (usize, (&mut EnvState, &mut (usize, Transition)))| {
                scan_env(env, &one, &params[env / ept], state, step_actions, bars, |i, t| *out = (i, t));
            };
            if n >= PARALLEL_MIN_ENVS {
                self.states.par_iter_mut().zip(self.pending.par_iter_mut()).enumerate().for_each(walk);
            } else {
                self.states.iter_mut().zip(self.pending.iter_mut()).enumerate().for_each(walk);
            }
            for &(i, t) in &self.pending {
                self.ring[i] = t;
            }
        }
        Ok(())
    }

    /// Writes `transitions[env]` into ring slot `slots[env]` (one step of transitions made elsewhere).
    pub(crate) fn write_step(&mut self, slots: &[usize], transitions: &[Transition]) -> Result<(), HostError> {
        for (&slot, t) in slots.iter().zip(transitions) {
            self.ring[slot] = *t;
        }
        Ok(())
    }

    /// Chunk moments, then per-trial merges, then normalization: the three kernels' bodies in order.
    pub(crate) fn update_rewards(&mut self, args: &BatchArgs) -> Result<(), HostError> {
        let (trials, steps, n_chunks) = (args.n_trials as usize, args.steps as usize, args.n_chunks());
        let mut chunks = vec![Moments::default(); trials * steps * n_chunks];
        for trial in 0..trials {
            for step in 0..steps {
                for chunk in 0..n_chunks {
                    let at = (trial, self.params[trial].ring_origin);
                    chunks[chunk_index(args, trial, step, chunk)] = chunk_moments(args, &self.ring, at, step, chunk);
                }
            }
        }
        let mut after_step = vec![Moments::default(); trials * steps];
        for (trial, running) in self.moments.iter_mut().enumerate() {
            merge_trial_moments(args, &chunks, trial, running, |step, m| after_step[trial * steps + step] = m);
        }
        let ept = args.envs_per_trial as usize;
        for step in 0..steps {
            for env in 0..args.n_envs() {
                let trial = env / ept;
                let t = &mut self.ring[args.ring_index(env, step, self.params[trial].ring_origin)];
                normalize_transition(&self.params[trial], t, &after_step[trial * steps + step]);
            }
        }
        Ok(())
    }

    pub(crate) fn observe(&mut self, args: &BatchArgs) -> Result<Vec<f32>, HostError> {
        let width = args.n_features as usize + 3;
        let ept = args.envs_per_trial as usize;
        let mut out = vec![0.0; self.states.len() * width];
        for (env, row) in out.chunks_exact_mut(width).enumerate() {
            let state = &self.states[env];
            observe_env(&self.params[env / ept], state, &self.bars, &self.features, args.n_features as usize, row);
        }
        Ok(out)
    }

    pub(crate) fn sample(&mut self, args: &SampleArgs) -> Result<SampleBatch, HostError> {
        let (batch, width) = (args.batch as usize, args.n_features as usize + 3);
        let total = args.n_trials as usize * batch;
        let mut out = SampleBatch {
            obs: vec![0.0; total * width],
            next_obs: vec![0.0; total * width],
            actions: vec![0; total],
            rewards: vec![0.0; total],
            dones: vec![0.0; total],
            weights: vec![0.0; total],
        };
        let capacity = args.capacity as usize;
        // Each sample's draws are keyed by its index: the rows are independent, filled in parallel.
        let rows: Vec<_> = out
            .obs
            .par_chunks_mut(width)
            .zip(out.next_obs.par_chunks_mut(width))
            .enumerate()
            .map(|(i, (obs, next_obs))| {
                let trial = i / batch;
                let ring = &self.ring[trial * capacity..(trial + 1) * capacity];
                let p = &self.params[args.trial_offset as usize + trial];
                sample_one(args, p, ring, &self.features, i, obs, next_obs)
            })
            .collect();
        for (i, row) in rows.into_iter().enumerate() {
            (out.actions[i], out.rewards[i], out.dones[i], out.weights[i]) =
                (row.action, row.reward, row.done, row.weight);
        }
        Ok(out)
    }

    /// Everything a policy needs to act, with the action buffer resized to one step.
    pub(crate) fn policy_view(&mut self) -> PolicyView<'_> {
        self.actions.resize(self.states.len(), 0);
        PolicyView {
            params: &self.params,
            states: &self.states,
            bars: &self.bars,
            features: &self.features,
            actions: &mut self.actions,
        }
    }

    /// The replay ring (trial-major).
    pub(crate) fn ring(&self) -> &[Transition] {
        &self.ring
    }

    /// The feature matrix.
    pub(crate) fn features(&self) -> &[f32] {
        &self.features
    }

    pub(crate) fn states(&self) -> Result<Vec<EnvState>, HostError> {
        Ok(self.states.clone())
    }

    pub(crate) fn transitions(&self) -> Result<Vec<Transition>, HostError> {
        Ok(self.ring.clone())
    }

    pub(crate) fn moments(&self) -> Result<Vec<Moments>, HostError> {
        Ok(self.moments.clone())
    }
}
