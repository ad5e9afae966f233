//! [`DqnAgent`]: the Q-networks of every trial, acting for every env and trained for every trial in the
//! same launches (CUDA) or the same parallel loops (CPU), with identical bits on both.

use gpu_kernels::dqn::{DqnArgs, DqnParams, act_env, param_gradient, train_sample, update_param};
use gpu_kernels::mlp::Layout;
use gpu_kernels::rng::draw_u64;
use rayon::prelude::*;

use crate::env_batch::Inner;
use crate::{Backend, EnvBatch, HostError};

/// RNG stream of the weight initialization.
const INIT_STREAM: u64 = 0x1417_0000;

/// The initial parameters of one trial: PyTorch's default for linear layers, U(-1/sqrt(fan_in),
/// 1/sqrt(fan_in)) for weights and biases, over the active width; zero beyond it.
pub fn init_weights(l: &Layout, hidden: usize, seed: u64, trial: u64) -> Vec<f32> {
    let mut w = vec![0.0f32; l.params()];
    let mut counter = 0;
    let mut draw = |fan_in: usize| {
        counter += 1;
        let u = ((draw_u64(seed, INIT_STREAM + trial, counter) >> 40) as f32 + 0.5) / (1u32 << 24) as f32;
        (2.0 * u - 1.0) / (fan_in as f32).sqrt()
    };
    let (d, stride) = (l.input, l.hidden);
    for i in 0..hidden {
        for j in 0..d {
            w[l.w1() + i * d + j] = draw(d);
        }
        w[l.b1() + i] = draw(d);
    }
    for i in 0..hidden {
        for j in 0..hidden {
            w[l.w2() + i * stride + j] = draw(hidden);
        }
        w[l.b2() + i] = draw(hidden);
    }
    for k in 0..l.outputs {
        for j in 0..hidden {
            w[l.w3() + k * stride + j] = draw(hidden);
        }
        w[l.b3() + k] = draw(hidden);
    }
    w
}

/// Online, target and Adam state of every trial (`K x params` each, trial-major).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NetState {
    /// Online network parameters.
    pub online: Vec<f32>,
    /// Target network parameters.
    pub target: Vec<f32>,
    /// Adam first moments.
    pub m: Vec<f32>,
    /// Adam second moments.
    pub v: Vec<f32>,
}

/// The Q-networks of K trials.
#[derive(Debug)]
pub struct DqnAgent {
    params: Vec<DqnParams>,
    args: DqnArgs,
    grad_steps: u64,
    inner: AgentInner,
}

#[derive(Debug)]
enum AgentInner {
    Cpu {
        nets: NetState,
        act_scratch: Vec<f32>,
        train_scratch: Vec<f32>,
        losses: Vec<f32>,
    },
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaDqn>),
}

impl DqnAgent {
    /// Networks for the trials of `env` (one [`DqnParams`] each) with row stride `hidden` (>= every trial's
    /// active width) and minibatches of `batch` per trial (>= every trial's active batch).
    pub fn new(
        backend: &Backend,
        env: &EnvBatch,
        params: &[DqnParams],
        hidden: usize,
        batch: usize,
        seed: u64,
    ) -> Result<Self, HostError> {
        let trials = env.layout().trials();
        if params.len() != trials {
            return Err(HostError::Shape {
                what: "DQN parameter sets (one per trial)".to_owned(),
                expected: trials,
                got: params.len(),
            });
        }
        for (k, p) in params.iter().enumerate() {
            let bad = |what: &str| Err(HostError::Config(format!("trial {k}: {what} ({p:?})")));
            if p.hidden == 0 || p.hidden as usize > hidden {
                return bad(&format!("hidden width must be in 1..={hidden}"));
            }
            if p.batch == 0 || p.batch as usize > batch {
                return bad(&format!("batch must be in 1..={batch}"));
            }
            if !(p.lr > 0.0 && p.lr.is_finite()) {
                return bad("learning rate must be positive");
            }
            if !(0.0..=1.0).contains(&p.gamma) || !(0.0..=1.0).contains(&p.tau) {
                return bad("gamma and tau must be in [0, 1]");
            }
            if !(p.huber_delta > 0.0
                && (0.0..1.0).contains(&p.beta1)
                && (0.0..1.0).contains(&p.beta2)
                && p.adam_eps > 0.0)
            {
                return bad("huber_delta and adam_eps must be positive, betas in [0, 1)");
            }
        }
        let args = DqnArgs {
            n_trials: trials as u32,
            envs_per_trial: env.layout().envs_per_trial() as u32,
            input: (env.n_features() + 3) as u32,
            hidden: hidden as u32,
            batch: batch as u32,
            n_bars: env.n_bars() as u32,
            step: 0,
            seed,
            greedy: 0,
            _pad: 0,
        };
        let l = args.layout();
        let online: Vec<f32> =
            params.iter().enumerate().flat_map(|(k, p)| init_weights(&l, p.hidden as usize, seed, k as u64)).collect();
        let nets = NetState { target: online.clone(), m: vec![0.0; online.len()], v: vec![0.0; online.len()], online };
        let inner = match backend {
            Backend::Cpu => AgentInner::Cpu {
                nets,
                act_scratch: vec![0.0; env.layout().n_envs() * args.act_scratch()],
                train_scratch: vec![0.0; trials * batch * args.train_scratch()],
                losses: vec![0.0; trials * batch],
            },
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => {
                AgentInner::Cuda(Box::new(crate::cuda::CudaDqn::new(rt, &nets, params, &args, env.layout().n_envs())?))
            }
        };
        Ok(Self { params: params.to_vec(), args, grad_steps: 0, inner })
    }

    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        self.args.layout()
    }

    /// Gradient steps taken.
    pub fn gradient_steps(&self) -> u64 {
        self.grad_steps
    }

    /// Chooses every env's action for env step `step` (epsilon-greedy, or greedy) and advances `env` one
    /// step with them; the actions never leave the device.
    pub fn act_and_step(&mut self, env: &mut EnvBatch, step: u64, greedy: bool) -> Result<(), HostError> {
        if env.layout().trials() != self.args.n_trials as usize || env.n_features() + 3 != self.args.input as usize {
            return Err(HostError::Config(format!(
                "the agent has {} trials and {} inputs; the envs have {} trials and {} features + 3",
                self.args.n_trials,
                self.args.input,
                env.layout().trials(),
                env.n_features()
            )));
        }
        let args = DqnArgs {
            step,
            greedy: u32::from(greedy),
            envs_per_trial: env.layout().envs_per_trial() as u32,
            n_bars: env.n_bars() as u32,
            ..self.args
        };
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu { nets, act_scratch, .. }, Inner::Cpu(cpu)) => {
                let crate::cpu::PolicyView { params: env_params, states, bars, features, actions } = cpu.policy_view();
                act_scratch.resize(states.len() * args.act_scratch(), 0.0);
                let (ept, per, n_params) = (args.envs_per_trial as usize, args.act_scratch(), args.layout().params());
                let params = &self.params;
                let act = |(i, (action, scratch)): (usize, (&mut u8, &mut [f32]))| {
                    let k = i / ept;
                    let weights = &nets.online[k * n_params..(k + 1) * n_params];
                    *action =
                        act_env(i, &args, &env_params[k], &states[i], bars, features, &params[k], weights, scratch);
                };
                actions.par_iter_mut().zip(act_scratch.par_chunks_mut(per)).enumerate().for_each(act);
            }
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(cuda)) => dqn.act(&mut cuda.policy_view()?, &args)?,
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::Config("the agent and the envs live on different backends".to_owned())),
        }
        env.run_loaded(1, 1)
    }

    /// One gradient step for every trial: a minibatch of `self.batch` per trial from `env`'s ring, TD
    /// targets, Huber loss, backward, Adam, target update.
    pub fn train_step(&mut self, env: &mut EnvBatch) -> Result<(), HostError> {
        let sample_args = env.sample_args(self.args.batch as usize)?;
        self.grad_steps += 1;
        let args = DqnArgs { step: self.grad_steps, ..self.args };
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu { nets, train_scratch, losses, .. }, Inner::Cpu(cpu)) => {
                let s = cpu.sample(&sample_args)?;
                let (b, d, per, n_params) =
                    (args.batch as usize, args.input as usize, args.train_scratch(), args.layout().params());
                let params = &self.params;
                let online = &nets.online;
                let target = &nets.target;
                train_scratch.par_chunks_mut(per).zip(losses.par_iter_mut()).enumerate().for_each(
                    |(i, (scratch, loss))| {
                        let k = i / b;
                        let w = &online[k * n_params..(k + 1) * n_params];
                        let t = &target[k * n_params..(k + 1) * n_params];
                        *loss = train_sample(
                            i % b,
                            &args,
                            &params[k],
                            w,
                            t,
                            &s.obs[i * d..(i + 1) * d],
                            &s.next_obs[i * d..(i + 1) * d],
                            s.actions[i],
                            s.rewards[i],
                            s.dones[i],
                            s.weights[i],
                            scratch,
                        );
                    },
                );
                let scratch = &*train_scratch;
                let NetState { online, target, m, v } = nets;
                online
                    .par_iter_mut()
                    .zip(target.par_iter_mut())
                    .zip(m.par_iter_mut().zip(v.par_iter_mut()))
                    .enumerate()
                    .for_each(|(i, ((w, t), (m, v)))| {
                        let (k, p) = (i / n_params, i % n_params);
                        let trial_scratch = &scratch[k * b * per..(k + 1) * b * per];
                        let g = param_gradient(p, &args, &params[k], trial_scratch, &s.obs[k * b * d..(k + 1) * b * d]);
                        update_param(&args, &params[k], g, w, t, m, v);
                    });
            }
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(cuda)) => {
                let (stream, samples) = cuda.sample_device(&sample_args)?;
                dqn.train(stream, samples, &args)?;
            }
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::Config("the agent and the envs live on different backends".to_owned())),
        }
        Ok(())
    }

    /// Mean loss of each trial in the last gradient step.
    pub fn last_losses(&self) -> Result<Vec<f32>, HostError> {
        let losses = match &self.inner {
            AgentInner::Cpu { losses, .. } => losses.clone(),
            #[cfg(feature = "cuda")]
            AgentInner::Cuda(dqn) => dqn.losses()?,
        };
        let b = self.args.batch as usize;
        Ok(losses.chunks(b).zip(&self.params).map(|(l, p)| l.iter().sum::<f32>() / p.batch as f32).collect())
    }

    /// Online, target and Adam state of every trial.
    pub fn state(&self) -> Result<NetState, HostError> {
        match &self.inner {
            AgentInner::Cpu { nets, .. } => Ok(nets.clone()),
            #[cfg(feature = "cuda")]
            AgentInner::Cuda(dqn) => dqn.state(),
        }
    }

    /// Replaces the networks (e.g. loaded weights); lengths must match.
    pub fn set_state(&mut self, state: &NetState) -> Result<(), HostError> {
        let n = self.args.n_trials as usize * self.layout().params();
        for (what, len) in
            [("online", state.online.len()), ("target", state.target.len()), ("m", state.m.len()), ("v", state.v.len())]
        {
            if len != n {
                return Err(HostError::Shape {
                    what: format!("{what} parameters (trials x params)"),
                    expected: n,
                    got: len,
                });
            }
        }
        match &mut self.inner {
            AgentInner::Cpu { nets, .. } => *nets = state.clone(),
            #[cfg(feature = "cuda")]
            AgentInner::Cuda(dqn) => dqn.set_state(state)?,
        }
        Ok(())
    }

    /// A CPU agent with this agent's parameters and networks, acting on `env` (e.g. for a sequential
    /// evaluation that would be launch-bound on a GPU).
    pub fn cpu_copy(&self, env: &EnvBatch) -> Result<Self, HostError> {
        let mut copy = Self::new(
            &Backend::Cpu,
            env,
            &self.params,
            self.args.hidden as usize,
            self.args.batch as usize,
            self.args.seed,
        )?;
        copy.set_state(&self.state()?)?;
        copy.grad_steps = self.grad_steps;
        Ok(copy)
    }

    /// The trials' DQN parameters.
    pub fn params(&self) -> &[DqnParams] {
        &self.params
    }
}
