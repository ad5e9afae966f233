//! [`PpoAgent`]: the actor-critics of every trial, collecting rollouts for every env and updating every
//! trial in the same launches (CUDA) or parallel loops (CPU), with identical bits on both.

use gpu_kernels::batch::observe_env;
use gpu_kernels::mlp::{ACTOR_CRITIC, Layout};
use gpu_kernels::net::{ActWork, BACKWARD, FORWARD, GRAD_CHUNK, NetTrial, Stage, Work, buffers};
use gpu_kernels::ppo::{
    NORM_LANES, PpoArgs, PpoParams, adam_step, choose, clip_scale, gae_env, gather_entry, loss_sample,
    minibatch_sample, norm_lane,
};
use rayon::prelude::*;

use crate::dqn::{NetState, init_orthogonal, init_weights};
use crate::env_batch::Inner;
use crate::{Backend, EnvBatch, HostError};

/// The rollout buffers and networks on the CPU.
#[derive(Debug, Default)]
struct CpuPpo {
    nets: NetState,
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
    losses: Vec<f32>,
}

impl CpuPpo {
    /// Networks `nets` with every rollout and step buffer sized for `args` (rollouts of `steps` steps of
    /// `envs_per_trial` envs, minibatches of `batch`).
    fn sized(nets: NetState, args: &PpoArgs) -> Self {
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
            partial: vec![0.0; batch.div_ceil(GRAD_CHUNK) * trials * l.params()],
            losses: vec![0.0; trials * batch],
            act: Vec::new(),
        }
    }
}

/// The per-trial sizes of `params`.
fn trials_of(params: &[PpoParams]) -> Vec<NetTrial> {
    params.iter().map(PpoParams::net).collect()
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
    /// Rollouts whose updates are done (each trial's update numbers continue from them).
    trained: u64,
    /// FLOPs of the products of acting with the construction env's layout, and of one minibatch update.
    step_flops: (u64, u64),
    /// FLOPs of the products run so far (rollouts and updates).
    flops: u64,
    inner: PpoInner,
}

impl PpoAgent {
    /// Networks for the trials of `env`, whose rollouts are `steps` long: `env`'s ring holds exactly `steps
    /// x E` transitions per trial (one rollout; `steps` at most the env's segment, which a run collects in
    /// several rollouts when longer; an env keeps its state from one rollout to the next). `batch` is the minibatch buffer per trial: at least
    /// every unsplit trial's `batch`; it grows to the largest split's share (`ceil(n / minibatches)`, which
    /// becomes that trial's `batch`). Each trial's initial weights follow its `orthogonal_init`.
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
        // A rollout fills the ring: `ring_capacity / E` steps of every env (the segment, or a part of it).
        let steps = cfg.ring_capacity / ept.max(1);
        if steps == 0 || cfg.ring_capacity != steps * ept || steps > cfg.segment_len as usize {
            return Err(HostError::Config(format!(
                "PPO needs a ring of rollout steps x envs transitions per trial, at most a segment (ring {}, {ept} \
                 envs, segment {})",
                cfg.ring_capacity, cfg.segment_len
            )));
        }
        if params.len() != trials {
            return Err(HostError::Shape {
                what: "PPO parameter sets (one per trial)".to_owned(),
                expected: trials,
                got: params.len(),
            });
        }
        // With a split, a trial's minibatch is its share of the rollout.
        let n = steps * ept;
        let params: Vec<PpoParams> = params
            .iter()
            .map(|p| {
                let batch = if p.minibatches > 0 { gpu_kernels::ppo::split_batch(n, p.minibatches) } else { p.batch };
                PpoParams { batch, ..*p }
            })
            .collect();
        // The minibatch buffer holds the largest split's share.
        let batch = params.iter().filter(|p| p.minibatches > 0).map(|p| p.batch as usize).fold(batch, usize::max);
        for (k, p) in params.iter().enumerate() {
            let ok = p.hidden >= 1
                && p.hidden as usize <= hidden
                && p.batch >= 1
                && p.batch as usize <= batch
                && p.lr > 0.0
                && (0.0..=1.0).contains(&p.gamma)
                && (0.0..=1.0).contains(&p.lambda)
                && p.clip > 0.0
                && p.epochs >= 1
                && p.max_grad_norm >= 0.0
                && p.minibatches as usize <= n;
            if !ok {
                return Err(HostError::Config(format!(
                    "trial {k}: invalid PPO parameters {p:?} (hidden <= {hidden}, batch <= {batch}, the minibatch \
                     split's share of a rollout of {n} included, minibatches <= {n})"
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
            rollout: 0,
        };
        // Each trial's random streams are keyed by its env's key, not by its position in the batch.
        let params: Vec<PpoParams> =
            params.iter().zip(env.params()).map(|(p, e)| PpoParams { key: e.key, ..*p }).collect();
        let params = params.as_slice();
        let l = args.layout();
        let online: Vec<f32> = params
            .iter()
            .flat_map(|p| {
                let h = p.hidden as usize;
                if p.orthogonal_init != 0 {
                    init_orthogonal(&l, h, seed, p.key)
                } else {
                    init_weights(&l, h, seed, p.key)
                }
            })
            .collect();
        let nets = NetState { target: Vec::new(), m: vec![0.0; online.len()], v: vec![0.0; online.len()], online };
        let inner = match backend {
            Backend::Cpu => PpoInner::Cpu(Box::new(CpuPpo::sized(nets, &args))),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => PpoInner::Cuda(Box::new(crate::cuda::CudaPpo::new(rt, &nets, params, &args)?)),
        };
        let step_flops = crate::tile::step_flops(&args.net(), &trials_of(params));
        Ok(Self { params: params.to_vec(), args, updates: 0, rollouts: 0, trained: 0, step_flops, flops: 0, inner })
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

    /// Floating-point operations of the matrix products of the rollouts and updates so far (2 per
    /// multiply-add of the trials' active sizes).
    pub fn product_flops(&self) -> u64 {
        self.flops
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
        #[cfg(feature = "cuda")]
        let env_args = env.args(1);
        match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                let view = cpu.policy_view();
                let (ept, d) = (args.envs_per_trial as usize, args.input as usize);
                let net = args.net();
                let aw = ActWork::of(&net);
                c.act.resize(aw.len(), 0.0);
                c.act[..aw.h1()].par_chunks_mut(d).zip(view.states.par_iter()).enumerate().for_each(
                    |(i, (row, state))| observe_env(&view.params[i / ept], state, view.bars, view.features, d - 3, row),
                );
                let trials = trials_of(&self.params);
                for layer in 0..3 {
                    let table = crate::tile::stage_plan(&net, &trials, Stage::Act(layer));
                    let mut bufs: [&mut [f32]; buffers::COUNT] =
                        [&mut c.nets.online, &mut [], &mut [], &mut [], &mut [], &mut [], &mut c.act, &mut []];
                    crate::tile::run(&table, &mut bufs)?;
                }
                let out = &c.act[aw.q()..];
                let params = &self.params;
                let outs: Vec<(u8, f32, f32)> = (0..view.states.len())
                    .into_par_iter()
                    .map(|i| choose(i, &args, params[i / ept].key, &out[i * ACTOR_CRITIC..(i + 1) * ACTOR_CRITIC]))
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
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.act(&mut cuda.policy_view()?, &args, &env_args, slot)?,
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
        self.flops += (u64::from(steps) + 1) * self.step_flops.0;
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

    /// The updates of the last rollout: trial k makes `epochs_k x minibatches_k` updates, each epoch a fresh
    /// shuffle of the rollout cut into `minibatches_k` minibatches (or, without a split, `epochs_k x
    /// ceil(steps x E / batch_k)` minibatches of its batch drawn with replacement;
    /// [`gpu_kernels::ppo::updates_per_rollout`]), each a gradient clipped to the trial's norm and an Adam
    /// step at its learning rate of this rollout; the launches run until the trial with the most is done,
    /// the others sitting out (no gradient, no Adam step), so a trial's updates do not depend on its
    /// batch-mates.
    pub fn update(&mut self, env: &mut EnvBatch) -> Result<(), HostError> {
        let n = self.args.steps as usize * self.args.envs_per_trial as usize;
        let total = self.params.iter().map(|p| gpu_kernels::ppo::updates_per_rollout(p, n)).max().unwrap_or(0);
        for u in 0..total {
            self.updates += 1;
            self.flops += self.step_flops.1;
            let args = PpoArgs { counter: u, rollout: self.trained, ..self.args };
            match (&mut self.inner, env.inner_mut()) {
                (PpoInner::Cpu(c), Inner::Cpu(cpu)) => cpu_update(&args, &self.params, c, cpu.ring(), cpu.features())?,
                #[cfg(feature = "cuda")]
                (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.update(cuda, &args)?,
                #[cfg(feature = "cuda")]
                _ => return Err(HostError::Config("the agent and the envs live on different backends".to_owned())),
            }
        }
        self.trained += 1;
        Ok(())
    }

    /// The greedy actions (argmax of the logits) of `env`'s single env per trial over `steps` bars
    /// (`trials x steps`), walked in one piece per trial as [`crate::DqnAgent::greedy_walk`] does.
    pub fn greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<Option<Vec<u8>>, HostError> {
        let net = PpoArgs { envs_per_trial: 1, n_bars: env.n_bars() as u32, ..self.args }.net();
        if env.layout().envs_per_trial() != 1 || env.layout().trials() != net.n_trials as usize {
            return Err(HostError::Config("a greedy walk needs one env per trial of the agent".to_owned()));
        }
        let hiddens: Vec<usize> = self.params.iter().map(|p| p.hidden as usize).collect();
        match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                Ok(Some(crate::tile::walk_all(&net, &hiddens, &c.nets.online, &cpu.policy_view(), steps)))
            }
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.greedy_walk(&cuda.policy_view()?, &net, steps),
            #[cfg(feature = "cuda")]
            _ => Ok(None),
        }
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
        let args =
            PpoArgs { envs_per_trial: env.layout().envs_per_trial() as u32, n_bars: env.n_bars() as u32, ..self.args };
        let inner = PpoInner::Cpu(Box::new(CpuPpo::sized(self.state()?, &args)));
        Ok(Self {
            params: self.params.clone(),
            args,
            updates: self.updates,
            rollouts: self.rollouts,
            trained: self.trained,
            step_flops: self.step_flops,
            flops: self.flops,
            inner,
        })
    }
}

/// One minibatch update of every trial on the CPU: the stages, products and per-element rules of the CUDA
/// launches (gather, forward, loss, backward, gradients, Adam).
fn cpu_update(
    args: &PpoArgs,
    params: &[PpoParams],
    c: &mut CpuPpo,
    ring: &[gpu_kernels::Transition],
    features: &[f32],
) -> Result<(), HostError> {
    let (net, trials) = (args.net(), trials_of(params));
    let l = args.layout();
    let (b, d, n) = (args.batch as usize, l.input, args.steps as usize * args.envs_per_trial as usize);
    let CpuPpo { nets, logps, values, advantages, returns, obs, work, partial, losses, .. } = c;
    obs.par_chunks_mut(d).enumerate().for_each(|(i, row)| {
        let (t, j) = (i / b, i % b);
        let trial_ring = &ring[t * n..(t + 1) * n];
        let slot = gpu_kernels::ppo::minibatch_slot(args, &params[t], j, trial_ring);
        for (col, x) in row.iter_mut().enumerate() {
            *x = gather_entry(trial_ring, features, d - 3, slot, col);
        }
    });
    let mut ones = [1.0f32; GRAD_CHUNK];
    let mut run = |stage: Stage, online: &mut [f32], obs: &mut [f32], work: &mut [f32], partial: &mut [f32]| {
        let table = crate::tile::stage_plan(&net, &trials, stage);
        let mut bufs: [&mut [f32]; buffers::COUNT] = [online, &mut [], obs, &mut [], work, partial, &mut [], &mut ones];
        crate::tile::run(&table, &mut bufs)
    };
    for stage in FORWARD {
        run(stage, &mut nets.online, obs, work, partial)?;
    }
    let w = Work::of(&net);
    let per_sample: Vec<([f32; ACTOR_CRITIC], f32)> = (0..losses.len())
        .into_par_iter()
        .map(|i| {
            let (t, j) = (i / b, i % b);
            let trial = t * n..(t + 1) * n;
            let sample = minibatch_sample(
                args,
                &params[t],
                j,
                &ring[trial.clone()],
                &logps[trial.clone()],
                &values[trial.clone()],
                &advantages[trial.clone()],
                &returns[trial],
            )
            .map(|(_, s)| s);
            let out = &work[w.at(Work::Q, t) + j * ACTOR_CRITIC..w.at(Work::Q, t) + (j + 1) * ACTOR_CRITIC];
            let mut dout = [0.0; ACTOR_CRITIC];
            let loss = loss_sample(j, &params[t], out, sample, &mut dout);
            // A trial that sits the update out keeps the losses of its last one.
            (dout, if gpu_kernels::ppo::trial_update(&params[t], args).is_some() { loss } else { losses[i] })
        })
        .collect();
    crate::tile::store_outputs(&w, work, losses, per_sample);
    for stage in BACKWARD {
        run(stage, &mut nets.online, obs, work, partial)?;
    }
    let n_params = l.params();
    let gradients = crate::tile::gradients(&net, partial);
    let scales: Vec<f32> = gradients
        .chunks(n_params)
        .zip(params)
        .map(|(g, p)| {
            let lanes: Vec<f32> = (0..NORM_LANES).map(|lane| norm_lane(lane, &l, p, |i| g[i])).collect();
            clip_scale(p, &lanes)
        })
        .collect();
    let NetState { online, m, v, .. } = nets;
    online.par_iter_mut().zip(m.par_iter_mut().zip(v.par_iter_mut())).enumerate().for_each(|(i, (w, (m, v)))| {
        let (t, p) = (i / n_params, &params[i / n_params]);
        if let Some(u) = gpu_kernels::ppo::trial_update(p, args) {
            adam_step(p, gradients[i] * scales[t], w, m, v, u, args.rollout);
        }
    });
    Ok(())
}
