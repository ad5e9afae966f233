//! The DQN networks on the CPU: acting, training and the greedy walk as the products of
//! [`gpu_kernels::net::plan`] ([`super::tile`]) with [`gpu_kernels::dqn`]'s per-element rules between them:
//! the stages, products and rules of the CUDA launches, so the bits are the same.

use gpu_kernels::batch::{SampleArgs, observe_env};
use gpu_kernels::dqn::{DqnArgs, DqnParams, choose, td_sample, trial_step, update_param};
use gpu_kernels::mlp::ACTIONS;
use gpu_kernels::net::{ActWork, BACKWARD, FORWARD, MAX_GRAD_CHUNK, NetTrial, Stage, Work, buffers};
use rayon::prelude::*;

use super::env::{CpuEnv, PolicyView};
use crate::HostError;
use crate::types::{NetState, SampleBatch};

/// Online, target and Adam state of every trial with the acting and training buffers.
#[derive(Debug)]
pub(crate) struct CpuDqn {
    pub(crate) nets: NetState,
    /// Acting buffer ([`ActWork`]).
    act: Vec<f32>,
    /// Training buffer ([`Work`]).
    work: Vec<f32>,
    /// Per-chunk weight gradients.
    partial: Vec<f32>,
    pub(crate) losses: Vec<f32>,
}

impl CpuDqn {
    /// Networks `nets` with buffers for `args`.
    pub(crate) fn new(nets: NetState, args: &DqnArgs) -> Self {
        let trials = args.n_trials as usize;
        Self {
            nets,
            act: Vec::new(),
            work: vec![0.0; trials * Work::of(&args.net()).per_trial()],
            partial: vec![0.0; args.net().partial_len()],
            losses: vec![0.0; trials * args.batch as usize],
        }
    }

    /// Every env's action for `args.step` into the env's action buffer.
    pub(crate) fn act(&mut self, args: &DqnArgs, params: &[DqnParams], env: &mut CpuEnv) -> Result<(), HostError> {
        let PolicyView { params: env_params, states, bars, features, actions } = env.policy_view();
        let (ept, d) = (args.envs_per_trial as usize, args.input as usize);
        self.act_on(args, params, actions, |act| {
            act.par_chunks_mut(d).zip(states.par_iter()).enumerate().for_each(|(i, (row, state))| {
                observe_env(&env_params[i / ept], state, bars, features, d - 3, row);
            });
        })
    }

    /// Every row's action for `args.step` from its observation in `obs` (`n_trials x envs_per_trial` rows of
    /// `args.input` floats): [`Self::act`] on observations made elsewhere.
    pub(crate) fn act_rows(
        &mut self,
        args: &DqnArgs,
        params: &[DqnParams],
        obs: &[f32],
        actions: &mut Vec<u8>,
    ) -> Result<(), HostError> {
        actions.resize(args.n_trials as usize * args.envs_per_trial as usize, 0);
        self.act_on(args, params, actions, |act| act.copy_from_slice(obs))
    }

    /// The acting layers and the choice, after `observe` wrote the observations.
    fn act_on(
        &mut self,
        args: &DqnArgs,
        params: &[DqnParams],
        actions: &mut [u8],
        observe: impl FnOnce(&mut [f32]),
    ) -> Result<(), HostError> {
        let ept = args.envs_per_trial as usize;
        let aw = ActWork::of(&args.net());
        let act = &mut self.act;
        act.resize(aw.len(), 0.0);
        observe(&mut act[..aw.h1()]);
        let trials: Vec<NetTrial> = params.iter().map(DqnParams::net).collect();
        for layer in 0..3 {
            let plan = crate::plan::stage_plan(&args.net(), &trials, Stage::Act(layer));
            let mut bufs: [&mut [f32]; buffers::COUNT] =
                [&mut self.nets.online, &mut [], &mut [], &mut [], &mut [], &mut [], act, &mut []];
            // SAFETY: a stage plan: no product writes what any product of it reads or writes.
            unsafe { super::tile::run(&plan, &mut bufs) }?;
        }
        let q = &act[aw.q()..];
        actions.par_iter_mut().enumerate().for_each(|(i, action)| {
            *action = choose(i, args, &params[i / ept], &q[i * ACTIONS..(i + 1) * ACTIONS]);
        });
        Ok(())
    }

    /// One gradient step of every trial on a minibatch sampled from `env`'s ring.
    pub(crate) fn train(
        &mut self,
        args: &DqnArgs,
        params: &[DqnParams],
        env: &mut CpuEnv,
        sample_args: &SampleArgs,
    ) -> Result<(), HostError> {
        let s = env.sample(sample_args)?;
        train_step(args, params, &mut self.nets, &mut self.work, &mut self.partial, &mut self.losses, s)?;
        Ok(())
    }

    /// The greedy walks of `env`'s single env per trial ([`super::tile::walk_all`]).
    pub(crate) fn greedy_walk(&self, args: &DqnArgs, params: &[DqnParams], env: &mut CpuEnv, steps: usize) -> Vec<u8> {
        let hiddens: Vec<usize> = params.iter().map(|p| p.hidden as usize).collect();
        super::tile::walk_all(&args.net(), &hiddens, &self.nets.online, &env.policy_view(), steps)
    }
}

/// One gradient step of every trial on the CPU from the sampled minibatch `s`: the same stages, products
/// and per-element rules as the CUDA launches. Returns the gradients.
pub(crate) fn train_step(
    args: &DqnArgs,
    params: &[DqnParams],
    nets: &mut NetState,
    work: &mut [f32],
    partial: &mut [f32],
    losses: &mut [f32],
    mut s: SampleBatch,
) -> Result<Vec<f32>, HostError> {
    let b = args.batch as usize;
    let (net, trials) = (args.net(), params.iter().map(DqnParams::net).collect::<Vec<_>>());
    let run = |stage: Stage, nets: &mut NetState, s: &mut SampleBatch, work: &mut [f32], partial: &mut [f32]| {
        let plan = crate::plan::stage_plan(&net, &trials, stage);
        let mut ones = [1.0f32; MAX_GRAD_CHUNK];
        let mut bufs: [&mut [f32]; buffers::COUNT] =
            [&mut nets.online, &mut nets.target, &mut s.obs, &mut s.next_obs, work, partial, &mut [], &mut ones];
        // SAFETY: a stage plan: no product writes what any product of it reads or writes.
        unsafe { super::tile::run(&plan, &mut bufs) }
    };
    for stage in FORWARD {
        run(stage, nets, &mut s, work, partial)?;
    }
    let w = Work::of(&net);
    let td: Vec<([f32; ACTIONS], f32)> = (0..losses.len())
        .into_par_iter()
        .map(|i| {
            let (t, j) = (i / b, i % b);
            let row = |r: usize| &work[w.at(r, t) + j * ACTIONS..w.at(r, t) + (j + 1) * ACTIONS];
            let mut dout = [0.0; ACTIONS];
            let loss = td_sample(
                j,
                &params[t],
                row(Work::Q),
                row(Work::QT),
                row(Work::QO),
                s.actions[i],
                s.rewards[i],
                s.dones[i],
                s.weights[i],
                &mut dout,
            );
            (dout, loss)
        })
        .collect();
    super::tile::store_outputs(&w, work, losses, td);
    for stage in BACKWARD {
        run(stage, nets, &mut s, work, partial)?;
    }
    let n_params = args.layout().params();
    let gradients = super::tile::gradients(&net, partial);
    let NetState { online, target, m, v } = nets;
    // As the kernel: each trial's step and bias corrections once, then each of its parameters.
    let steps: Vec<_> = params.iter().map(|dqn| trial_step(args, dqn)).collect();
    // Trials in parallel, each trial's parameters in chunks: the per-trial rules hoisted out of the loop.
    let trials = online.par_chunks_mut(n_params).zip(target.par_chunks_mut(n_params));
    trials.zip(m.par_chunks_mut(n_params).zip(v.par_chunks_mut(n_params))).enumerate().for_each(
        |(trial, ((w, t), (m, v)))| {
            let Some(s) = &steps[trial] else { return };
            let (p, g) = (&params[trial], &gradients[trial * n_params..(trial + 1) * n_params]);
            let chunk = super::tile::ELEMENT_CHUNK;
            let chunks = w.par_chunks_mut(chunk).zip(t.par_chunks_mut(chunk));
            chunks.zip(m.par_chunks_mut(chunk).zip(v.par_chunks_mut(chunk))).zip(g.par_chunks(chunk)).for_each(
                |(((w, t), (m, v)), g)| {
                    for ((w, t), ((m, v), g)) in w.iter_mut().zip(t).zip(m.iter_mut().zip(v).zip(g)) {
                        update_param(p, s, *g, w, t, m, v);
                    }
                },
            );
        },
    );
    Ok(gradients)
}
