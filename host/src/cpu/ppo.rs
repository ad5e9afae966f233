//! The PPO networks and rollout buffers on the CPU: acting, GAE and the minibatch updates as the
//! products of [`gpu_kernels::net::plan`] ([`super::tile`]) with [`gpu_kernels::ppo`]'s per-element rules
//! (the same functions the PTX shims call) between them, so the bits equal the CUDA launches'.

use gpu_kernels::batch::observe_env;
use gpu_kernels::mlp::ACTOR_CRITIC;
use gpu_kernels::net::{ActWork, BACKWARD, FORWARD, MAX_GRAD_CHUNK, NetArgs, NetTrial, Stage, Work, buffers};
use gpu_kernels::ppo::{
    ActOutput, NORM_LANES, PpoArgs, PpoParams, Rollout, act_env, gae_env, gather_row, gathered_moments,
    minibatch_advantage, norm_lane, rollout_index, sample_loss_at, update_weight,
};
use rayon::prelude::*;

use super::env::{CpuEnv, PolicyView};
use crate::HostError;
use crate::types::NetState;

/// The per-trial sizes of `params`.
fn trials_of(params: &[PpoParams]) -> Vec<NetTrial> {
    params.iter().map(PpoParams::net).collect()
}

/// The rollout buffers and networks on the CPU.
#[derive(Debug, Default)]
pub(crate) struct CpuPpo {
    pub(crate) nets: NetState,
    /// Acting buffer ([`ActWork`]).
    act: Vec<f32>,
    logps: Vec<f32>,
    values: Vec<f32>,
    bootstrap: Vec<f32>,
    advantages: Vec<f32>,
    returns: Vec<f32>,
    /// Minibatch observations, `K x B x D`.
    obs: Vec<f32>,
    /// Training buffer ([`Work`]).
    work: Vec<f32>,
    /// Per-chunk gradients.
    partial: Vec<f32>,
    pub(crate) losses: Vec<f32>,
}

impl CpuPpo {
    /// Networks `nets` with every rollout and step buffer sized for `args` (rollouts of `steps` steps of
    /// `envs_per_trial` envs, minibatches of `batch`).
    pub(crate) fn sized(nets: NetState, args: &PpoArgs) -> Self {
        let (trials, ept, batch) = (args.n_trials as usize, args.envs_per_trial as usize, args.batch as usize);
        let rollout = trials * args.steps as usize * ept;
        let l = args.layout();
        Self {
            nets,
            logps: vec![0.0; rollout],
            values: vec![0.0; rollout],
            bootstrap: vec![0.0; trials * ept],
            advantages: vec![0.0; rollout],
            returns: vec![0.0; rollout],
            obs: vec![0.0; trials * batch * l.input],
            work: vec![0.0; trials * Work::of(&args.net()).per_trial()],
            partial: vec![0.0; args.net().partial_len()],
            losses: vec![0.0; trials * batch],
            act: Vec::new(),
        }
    }
    /// One action per env at rollout step `rollout_step` ([`act_env`]; values only, into the bootstrap, when
    /// `rollout_step >= steps`).
    pub(crate) fn act(
        &mut self,
        args: &PpoArgs,
        params: &[PpoParams],
        env: &mut CpuEnv,
        rollout_step: u32,
    ) -> Result<(), HostError> {
        let PolicyView { params: env_params, states, bars, features, actions } = env.policy_view();
        let (ept, d) = (args.envs_per_trial as usize, args.input as usize);
        self.act_on(args, params, actions, rollout_step, |act| {
            act.par_chunks_mut(d)
                .zip(states.par_iter())
                .enumerate()
                .for_each(|(i, (row, state))| observe_env(&env_params[i / ept], state, bars, features, d - 3, row));
        })
    }

    /// [`Self::act`] on observations made elsewhere: `obs` holds `n_trials x envs_per_trial` rows of
    /// `args.input` floats; the actions go to `actions`.
    pub(crate) fn act_rows(
        &mut self,
        args: &PpoArgs,
        params: &[PpoParams],
        obs: &[f32],
        actions: &mut Vec<u8>,
        rollout_step: u32,
    ) -> Result<(), HostError> {
        let rows = args.n_trials as usize * args.envs_per_trial as usize;
        actions.resize(rows, 0);
        // Rows outside a rollout (a greedy walk's) may outnumber the rollout's envs: their values go to the
        // bootstrap buffer, which the next rollout's end overwrites.
        if self.bootstrap.len() < rows {
            self.bootstrap.resize(rows, 0.0);
        }
        self.act_on(args, params, actions, rollout_step, |act| act.copy_from_slice(obs))
    }

    /// The acting layers, the choice and the routing of log-probabilities and values, after `observe` wrote
    /// the observations.
    fn act_on(
        &mut self,
        args: &PpoArgs,
        params: &[PpoParams],
        actions: &mut [u8],
        rollout_step: u32,
        observe: impl FnOnce(&mut [f32]),
    ) -> Result<(), HostError> {
        let ept = args.envs_per_trial as usize;
        let net = args.net();
        let aw = ActWork::of(&net);
        self.act.resize(aw.len(), 0.0);
        observe(&mut self.act[..aw.h1()]);
        let trials = trials_of(params);
        for layer in 0..3 {
            let plan = crate::plan::stage_plan(&net, &trials, Stage::Act(layer));
            let mut bufs: [&mut [f32]; buffers::COUNT] =
                [&mut self.nets.online, &mut [], &mut [], &mut [], &mut [], &mut [], &mut self.act, &mut []];
            // SAFETY: a stage plan: no product writes what any product of it reads or writes.
            unsafe { super::tile::run(&plan, &mut bufs) }?;
        }
        let out = &self.act[aw.q()..];
        let outs: Vec<ActOutput> = (0..actions.len())
            .into_par_iter()
            .map(|i| act_env(i, args, &params[i / ept], &out[i * ACTOR_CRITIC..(i + 1) * ACTOR_CRITIC], rollout_step))
            .collect();
        for (i, a) in outs.into_iter().enumerate() {
            actions[i] = a.action;
            match a.rollout {
                Some(j) => {
                    self.logps[j] = a.logp;
                    self.values[j] = a.value;
                }
                None => self.bootstrap[i] = a.value,
            }
        }
        Ok(())
    }

    /// GAE over every env's rollout in `env`'s ring ([`gae_env`]).
    pub(crate) fn gae(&mut self, args: &PpoArgs, params: &[PpoParams], env: &CpuEnv) {
        let ring = env.ring();
        let (ept, n) = (args.envs_per_trial as usize, args.steps as usize * args.envs_per_trial as usize);
        for (k, p) in params.iter().enumerate() {
            for e in 0..ept {
                let (adv, ret) = (&mut self.advantages[k * n..(k + 1) * n], &mut self.returns[k * n..(k + 1) * n]);
                gae_env(
                    e,
                    ept,
                    args.steps as usize,
                    p.gamma,
                    p.lambda,
                    &ring[k * n..(k + 1) * n],
                    &self.values[k * n..(k + 1) * n],
                    self.bootstrap[k * ept + e],
                    |i, a, r| {
                        adv[i] = a;
                        ret[i] = r;
                    },
                );
            }
        }
    }

    /// The greedy walks of `env`'s single env per trial ([`super::tile::walk_all`]).
    pub(crate) fn greedy_walk(&self, net: &NetArgs, params: &[PpoParams], env: &mut CpuEnv, steps: usize) -> Vec<u8> {
        let hiddens: Vec<usize> = params.iter().map(|p| p.hidden as usize).collect();
        super::tile::walk_all(net, &hiddens, &self.nets.online, &env.policy_view(), steps)
    }

    /// One minibatch update of every trial: the stages, products and per-element rules of the CUDA
    /// launches (gather, forward, loss, backward, gradients, clipped Adam).
    pub(crate) fn update(&mut self, args: &PpoArgs, params: &[PpoParams], env: &CpuEnv) -> Result<(), HostError> {
        let (ring, features) = (env.ring(), env.features());
        let (b, d, n) = (args.batch as usize, args.input as usize, args.steps as usize * args.envs_per_trial as usize);
        let Self { nets, logps, values, advantages, returns, obs, work, partial, losses, .. } = self;
        let rollout = |t: usize| {
            let tr = t * n..(t + 1) * n;
            Rollout {
                ring: &ring[tr.clone()],
                logps: &logps[tr.clone()],
                values: &values[tr.clone()],
                advantages: &advantages[tr.clone()],
                returns: &returns[tr],
            }
        };
        // Each sample's rollout index, found once for the gather, the moments and the loss (a keyed shuffle
        // each: the GPU's kernels find it where they need it).
        let indices: Vec<Option<usize>> = (0..params.len() * b)
            .into_par_iter()
            .map(|i| rollout_index(args, &params[i / b], i % b, rollout(i / b).ring))
            .collect();
        obs.par_chunks_mut(d).enumerate().for_each(|(i, row)| {
            gather_row(rollout(i / b).ring, features, d - 3, indices[i], row);
        });
        // The `ppo_gather` launch's advantages in minibatch order, then the `ppo_adv` launch: each normalizing
        // trial's minibatch advantage moments from them.
        let gathered: Vec<f32> =
            indices.par_iter().enumerate().map(|(i, &s)| minibatch_advantage(s, rollout(i / b).advantages)).collect();
        let moments: Vec<[f32; 2]> = (0..params.len())
            .into_par_iter()
            .map(|t| {
                let p = &params[t];
                let gathered = &gathered[t * b..(t + 1) * b];
                if p.norm_adv != 0 { gathered_moments(p.batch as usize, gathered) } else { [0.0; 2] }
            })
            .collect();
        let step = Minibatch { args, params, obs, work, partial, losses };
        step.run(nets, |i, out, dout| {
            let (t, j) = (i / b, i % b);
            sample_loss_at(args, &params[t], (j, indices[i]), &rollout(t), moments[t], (out, dout))
        })?;
        Ok(())
    }
}

/// The buffers of one minibatch step of every trial ([`Minibatch::run`]).
pub(crate) struct Minibatch<'a> {
    pub(crate) args: &'a PpoArgs,
    pub(crate) params: &'a [PpoParams],
    /// The gathered observations, `K x B x D`.
    pub(crate) obs: &'a mut [f32],
    /// Training buffer ([`Work`]).
    pub(crate) work: &'a mut [f32],
    /// Per-chunk gradients.
    pub(crate) partial: &'a mut [f32],
    /// Every sample's loss (`K x B`).
    pub(crate) losses: &'a mut [f32],
}

impl Minibatch<'_> {
    /// Forward, the per-sample loss `loss_of(i, out, dout)` of sample `i` (`t x B + j`) from its outputs
    /// `out`, writing the output gradient `dout` (`None`: the trial sits this update out and keeps its last
    /// loss), backward, gradients, clipped Adam on `nets`. Returns the gradients (`K x P`).
    pub(crate) fn run(
        self,
        nets: &mut NetState,
        loss_of: impl Fn(usize, &[f32], &mut [f32]) -> Option<f32> + Sync,
    ) -> Result<Vec<f32>, HostError> {
        let Self { args, params, obs, work, partial, losses } = self;
        let (net, trials) = (args.net(), trials_of(params));
        let mut ones = [1.0f32; MAX_GRAD_CHUNK];
        let mut run = |stage: Stage, online: &mut [f32], obs: &mut [f32], work: &mut [f32], partial: &mut [f32]| {
            let plan = crate::plan::stage_plan(&net, &trials, stage);
            let mut bufs: [&mut [f32]; buffers::COUNT] =
                [online, &mut [], obs, &mut [], work, partial, &mut [], &mut ones];
            // SAFETY: a stage plan: no product writes what any product of it reads or writes.
            unsafe { super::tile::run(&plan, &mut bufs) }
        };
        for stage in FORWARD {
            run(stage, &mut nets.online, obs, work, partial)?;
        }
        let w = Work::of(&net);
        let b = args.batch as usize;
        let per_sample: Vec<([f32; ACTOR_CRITIC], f32)> = (0..losses.len())
            .into_par_iter()
            .map(|i| {
                let (t, j) = (i / b, i % b);
                let out = &work[w.at(Work::Q, t) + j * ACTOR_CRITIC..w.at(Work::Q, t) + (j + 1) * ACTOR_CRITIC];
                let mut dout = [0.0; ACTOR_CRITIC];
                // A trial that sits the update out keeps the losses of its last one.
                let loss = loss_of(i, out, &mut dout).unwrap_or(losses[i]);
                (dout, loss)
            })
            .collect();
        super::tile::store_outputs(&w, work, losses, per_sample);
        for stage in BACKWARD {
            run(stage, &mut nets.online, obs, work, partial)?;
        }
        let l = args.layout();
        let n_params = l.params();
        let gradients = super::tile::gradients(&net, partial);
        let lanes: Vec<[f32; NORM_LANES]> = gradients
            .chunks(n_params)
            .zip(params)
            .map(|(g, p)| std::array::from_fn(|lane| norm_lane(lane, &l, p, |i| g[i])))
            .collect();
        let NetState { online, m, v, .. } = nets;
        // Trials in parallel, each trial's parameters in chunks: the per-trial rules hoisted out of the loop.
        let trials = online.par_chunks_mut(n_params).zip(m.par_chunks_mut(n_params).zip(v.par_chunks_mut(n_params)));
        trials.enumerate().for_each(|(t, (w, (m, v)))| {
            let (p, lanes, g) = (&params[t], &lanes[t], &gradients[t * n_params..(t + 1) * n_params]);
            let chunk = super::tile::ELEMENT_CHUNK;
            let chunks = w.par_chunks_mut(chunk).zip(m.par_chunks_mut(chunk).zip(v.par_chunks_mut(chunk)));
            chunks.zip(g.par_chunks(chunk)).for_each(|((w, (m, v)), g)| {
                for (w, ((m, v), g)) in w.iter_mut().zip(m.iter_mut().zip(v).zip(g)) {
                    update_weight(args, p, lanes, *g, w, m, v);
                }
            });
        });
        Ok(gradients)
    }
}
