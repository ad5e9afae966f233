//! [`PpoAgent`]: the actor-critics of every trial, collecting rollouts for every env and updating every
//! trial in the same launches (CUDA) or parallel loops (CPU), with identical bits on both.

use gpu_kernels::mlp::{Layout, adam, param_gradient};
use gpu_kernels::ppo::{PpoArgs, PpoParams, PpoSample, act_env, gae_env, gather_obs, minibatch_index, train_sample};
use rayon::prelude::*;

use crate::dqn::{NetState, init_weights};
use crate::env_batch::Inner;
use crate::{Backend, EnvBatch, HostError};

/// The rollout buffers and networks on the CPU.
#[derive(Debug, Default)]
struct CpuPpo {
    nets: NetState,
    act_scratch: Vec<f32>,
    logps: Vec<f32>,
    values: Vec<f32>,
    bootstrap: Vec<f32>,
    advantages: Vec<f32>,
    returns: Vec<f32>,
    obs: Vec<f32>,
    train_scratch: Vec<f32>,
    losses: Vec<f32>,
}

#[derive(Debug)]
enum PpoInner {
    Cpu(Box<CpuPpo>),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaPpo>),
}

/// The actor-critics of K trials.
#[derive(Debug)]
pub struct PpoAgent {
    params: Vec<PpoParams>,
    args: PpoArgs,
    updates: u64,
    rollouts: u64,
    inner: PpoInner,
}

impl PpoAgent {
    /// Networks for the trials of `env`, whose rollouts are `steps` long: `env`'s ring must hold exactly
    /// `steps x E` transitions per trial (one rollout).
    pub fn new(
        backend: &Backend,
        env: &EnvBatch,
        params: &[PpoParams],
        hidden: usize,
        batch: usize,
        seed: u64,
    ) -> Result<Self, HostError> {
        let trials = env.layout().trials();
        let ept = env.layout().envs_per_trial();
        let cfg = env.config();
        let steps = cfg.segment_len as usize;
        if cfg.ring_capacity != steps * ept {
            return Err(HostError::Config(format!(
                "PPO needs a ring of exactly segment_len x envs = {} transitions per trial (got {})",
                steps * ept,
                cfg.ring_capacity
            )));
        }
        if params.len() != trials {
            return Err(HostError::Shape {
                what: "PPO parameter sets (one per trial)".to_owned(),
                expected: trials,
                got: params.len(),
            });
        }
        for (k, p) in params.iter().enumerate() {
            let ok = p.hidden >= 1
                && p.hidden as usize <= hidden
                && p.batch >= 1
                && p.batch as usize <= batch
                && p.lr > 0.0
                && (0.0..=1.0).contains(&p.gamma)
                && (0.0..=1.0).contains(&p.lambda)
                && p.clip > 0.0
                && p.epochs >= 1;
            if !ok {
                return Err(HostError::Config(format!(
                    "trial {k}: invalid PPO parameters {p:?} (hidden <= {hidden}, batch <= {batch})"
                )));
            }
        }
        let args = PpoArgs {
            n_trials: trials as u32,
            envs_per_trial: ept as u32,
            input: (env.n_features() + 3) as u32,
            hidden: hidden as u32,
            batch: batch as u32,
            n_bars: env.n_bars() as u32,
            steps: steps as u32,
            greedy: 0,
            seed,
            counter: 0,
        };
        let l = args.layout();
        let online: Vec<f32> =
            params.iter().enumerate().flat_map(|(k, p)| init_weights(&l, p.hidden as usize, seed, k as u64)).collect();
        let nets = NetState { target: Vec::new(), m: vec![0.0; online.len()], v: vec![0.0; online.len()], online };
        let rollout = trials * steps * ept;
        let inner = match backend {
            Backend::Cpu => PpoInner::Cpu(Box::new(CpuPpo {
                nets,
                logps: vec![0.0; rollout],
                values: vec![0.0; rollout],
                bootstrap: vec![0.0; trials * ept],
                advantages: vec![0.0; rollout],
                returns: vec![0.0; rollout],
                obs: vec![0.0; trials * batch * l.input],
                train_scratch: vec![0.0; trials * batch * l.train_scratch()],
                losses: vec![0.0; trials * batch],
                act_scratch: Vec::new(),
            })),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => PpoInner::Cuda(Box::new(crate::cuda::CudaPpo::new(rt, &nets, params, &args)?)),
        };
        Ok(Self { params: params.to_vec(), args, updates: 0, rollouts: 0, inner })
    }

    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        self.args.layout()
    }

    /// The trials' PPO parameters.
    pub fn params(&self) -> &[PpoParams] {
        &self.params
    }

    /// Minibatch updates so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    fn check_env(&self, env: &EnvBatch) -> Result<(), HostError> {
        if env.layout().trials() != self.args.n_trials as usize || env.n_features() + 3 != self.args.input as usize {
            return Err(HostError::Config("the agent and the envs disagree on trials or features".to_owned()));
        }
        Ok(())
    }

    /// One action per env at rollout step `slot` (values only, into the bootstrap, when `slot >= steps`).
    fn act(&mut self, env: &mut EnvBatch, counter: u64, slot: u32, greedy: bool) -> Result<(), HostError> {
        self.check_env(env)?;
        let args = PpoArgs {
            counter,
            greedy: u32::from(greedy),
            envs_per_trial: env.layout().envs_per_trial() as u32,
            n_bars: env.n_bars() as u32,
            ..self.args
        };
        match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                let view = cpu.policy_view();
                let (ept, per, n_params) = (args.envs_per_trial as usize, args.act_scratch(), args.layout().params());
                c.act_scratch.resize(view.states.len() * per, 0.0);
                let params = &self.params;
                let weights = &c.nets.online;
                let outs: Vec<(u8, f32, f32)> = c
                    .act_scratch
                    .par_chunks_mut(per)
                    .enumerate()
                    .map(|(i, scratch)| {
                        let k = i / ept;
                        let w = &weights[k * n_params..(k + 1) * n_params];
                        act_env(
                            i,
                            &args,
                            &view.params[k],
                            &view.states[i],
                            view.bars,
                            view.features,
                            &params[k],
                            w,
                            scratch,
                        )
                    })
                    .collect();
                for (i, (action, logp, value)) in outs.into_iter().enumerate() {
                    let (k, e) = (i / ept, i % ept);
                    view.actions[i] = action;
                    if slot < args.steps {
                        let j = (k * args.steps as usize + slot as usize) * ept + e;
                        c.logps[j] = logp;
                        c.values[j] = value;
                    } else {
                        c.bootstrap[i] = value;
                    }
                }
            }
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.act(&mut cuda.policy_view()?, &args, slot)?,
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::Config("the agent and the envs live on different backends".to_owned())),
        }
        Ok(())
    }

    /// Greedy (or sampled) actions for every env, then one env step (evaluation).
    pub fn act_and_step(&mut self, env: &mut EnvBatch, step: u64, greedy: bool) -> Result<(), HostError> {
        self.act(env, step, u32::MAX, greedy)?;
        env.run_loaded(1, 1)
    }

    /// One rollout: `steps` sampled steps of every env (the ring then holds exactly the rollout), the
    /// bootstrap values and GAE.
    pub fn collect(&mut self, env: &mut EnvBatch) -> Result<(), HostError> {
        let steps = self.args.steps;
        if !env.transitions_written().is_multiple_of(u64::from(steps) * u64::from(self.args.envs_per_trial)) {
            return Err(HostError::Config("PPO rollouts must start at the ring's head".to_owned()));
        }
        for t in 0..steps {
            let counter = self.rollouts * u64::from(steps) + u64::from(t);
            self.act(env, counter, t, false)?;
            env.run_loaded(1, 1)?;
        }
        self.act(env, self.rollouts * u64::from(steps) + u64::from(steps), steps, false)?;
        self.rollouts += 1;
        let args = self.args;
        match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                let ring = cpu.ring();
                let (ept, n) = (args.envs_per_trial as usize, args.steps as usize * args.envs_per_trial as usize);
                for k in 0..args.n_trials as usize {
                    let p = &self.params[k];
                    for e in 0..ept {
                        let (adv, ret) = (&mut c.advantages[k * n..(k + 1) * n], &mut c.returns[k * n..(k + 1) * n]);
                        gae_env(
                            e,
                            ept,
                            args.steps as usize,
                            p.gamma,
                            p.lambda,
                            &ring[k * n..(k + 1) * n],
                            &c.values[k * n..(k + 1) * n],
                            c.bootstrap[k * ept + e],
                            |i, a, r| {
                                adv[i] = a;
                                ret[i] = r;
                            },
                        );
                    }
                }
            }
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.gae(cuda, &args)?,
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::Config("the agent and the envs live on different backends".to_owned())),
        }
        Ok(())
    }

    /// The updates of the last rollout: for the largest `epochs` of the trials, `ceil(steps x E / B)`
    /// minibatches of B drawn from the rollout (with replacement), each a gradient step for every trial.
    pub fn update(&mut self, env: &mut EnvBatch) -> Result<(), HostError> {
        let epochs = self.params.iter().map(|p| p.epochs).max().unwrap_or(1) as usize;
        let n = self.args.steps as usize * self.args.envs_per_trial as usize;
        let minibatches = n.div_ceil(self.args.batch as usize);
        for _ in 0..epochs * minibatches {
            self.updates += 1;
            let args = PpoArgs { counter: self.updates, ..self.args };
            match (&mut self.inner, env.inner_mut()) {
                (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                    let ring = cpu.ring();
                    let features = cpu.features();
                    let l = args.layout();
                    let (b, d, per, n_params) = (args.batch as usize, l.input, l.train_scratch(), l.params());
                    let params = &self.params;
                    let CpuPpo { nets, logps, advantages, returns, obs, train_scratch, losses, .. } = &mut **c;
                    let online = &nets.online;
                    obs.par_chunks_mut(d)
                        .zip(train_scratch.par_chunks_mut(per))
                        .zip(losses.par_iter_mut())
                        .enumerate()
                        .for_each(|(i, ((row, scratch), loss))| {
                            let (k, j) = (i / b, i % b);
                            let trial_ring = &ring[k * n..(k + 1) * n];
                            let slot = minibatch_index(trial_ring, n, args.seed, k as u64, args.counter, j as u64);
                            let sample = slot.map(|s| {
                                gather_obs(&trial_ring[s], features, d - 3, row);
                                PpoSample {
                                    action: trial_ring[s].action,
                                    logp_old: logps[k * n + s],
                                    advantage: advantages[k * n + s],
                                    ret: returns[k * n + s],
                                }
                            });
                            let w = &online[k * n_params..(k + 1) * n_params];
                            *loss = train_sample(j, &args, &params[k], w, row, sample, scratch);
                        });
                    let (scratch, obs) = (&*train_scratch, &*obs);
                    let NetState { online, m, v, .. } = nets;
                    online.par_iter_mut().zip(m.par_iter_mut().zip(v.par_iter_mut())).enumerate().for_each(
                        |(i, (w, (m, v)))| {
                            let (k, p) = (i / n_params, i % n_params);
                            let pp = &params[k];
                            let g = param_gradient(
                                &l,
                                pp.hidden as usize,
                                p,
                                pp.batch as usize,
                                &scratch[k * b * per..(k + 1) * b * per],
                                &obs[k * b * d..(k + 1) * b * d],
                            );
                            adam(w, m, v, g, pp.lr, pp.beta1, pp.beta2, pp.adam_eps, args.counter as u32);
                        },
                    );
                }
                #[cfg(feature = "cuda")]
                (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.update(cuda, &args)?,
                #[cfg(feature = "cuda")]
                _ => return Err(HostError::Config("the agent and the envs live on different backends".to_owned())),
            }
        }
        Ok(())
    }

    /// Mean loss of each trial in the last minibatch.
    pub fn last_losses(&self) -> Result<Vec<f32>, HostError> {
        let losses = match &self.inner {
            PpoInner::Cpu(c) => c.losses.clone(),
            #[cfg(feature = "cuda")]
            PpoInner::Cuda(g) => g.losses()?,
        };
        let b = self.args.batch as usize;
        Ok(losses.chunks(b).zip(&self.params).map(|(l, p)| l.iter().sum::<f32>() / p.batch as f32).collect())
    }

    /// The networks and Adam state (no target networks: `target` is empty).
    pub fn state(&self) -> Result<NetState, HostError> {
        match &self.inner {
            PpoInner::Cpu(c) => Ok(c.nets.clone()),
            #[cfg(feature = "cuda")]
            PpoInner::Cuda(g) => g.state(),
        }
    }

    /// A CPU agent with these networks, acting on `env` (sequential evaluation).
    pub fn cpu_copy(&self, env: &EnvBatch) -> Result<Self, HostError> {
        let nets = self.state()?;
        let inner =
            PpoInner::Cpu(Box::new(CpuPpo { nets, bootstrap: vec![0.0; env.layout().n_envs()], ..CpuPpo::default() }));
        let args =
            PpoArgs { envs_per_trial: env.layout().envs_per_trial() as u32, n_bars: env.n_bars() as u32, ..self.args };
        Ok(Self { params: self.params.clone(), args, updates: self.updates, rollouts: self.rollouts, inner })
    }
}
