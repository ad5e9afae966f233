//! [`DqnAgent`]: the Q-networks of every trial, acting for every env and trained for every trial in the
//! same launches (CUDA) or the same parallel loops (CPU), with identical bits on both.

use gpu_kernels::batch::observe_env;
use gpu_kernels::dqn::{DqnArgs, DqnParams, choose, td_sample, update_param};
use gpu_kernels::mlp::{ACTIONS, Layout};
use gpu_kernels::net::{ActWork, BACKWARD, FORWARD, GRAD_CHUNK, Stage, Work, buffers};
use gpu_kernels::rng::draw_u64;
use rayon::prelude::*;

use crate::env_batch::Inner;
use crate::{Backend, EnvBatch, HostError};

/// RNG stream of the weight initialization.
const INIT_STREAM: u64 = 0x1417_0000;

/// The initial parameters of one trial: PyTorch's default for linear layers, U(-1/sqrt(fan_in),
/// 1/sqrt(fan_in)) for weights and biases, over the active width; zero beyond it.
pub fn init_weights(l: &Layout, hidden: usize, seed: u64, key: u64) -> Vec<f32> {
    let mut w = vec![0.0f32; l.params()];
    let mut counter = 0;
    let mut draw = |fan_in: usize| {
        counter += 1;
        let u = gpu_kernels::rng::unit_open(draw_u64(seed, gpu_kernels::rng::keyed(INIT_STREAM, key), counter));
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

/// The initial parameters of one actor-critic trial as CleanRL's PPO sets them: orthogonal weights
/// (PyTorch's `orthogonal_`: the rows, or the columns when there are more rows than columns, of each matrix
/// orthonormal, from the Gram-Schmidt QR of a Gaussian matrix with the signs of R's diagonal made
/// positive) scaled by sqrt(2) for the hidden layers, 0.01 for the three policy logits and 1 for the value
/// row; biases 0. Over the active width; zero beyond it. Computed in f64 on the host, identical for every
/// backend.
pub fn init_orthogonal(l: &Layout, hidden: usize, seed: u64, key: u64) -> Vec<f32> {
    let mut w = vec![0.0f32; l.params()];
    let mut counter = 0u64;
    let stream = gpu_kernels::rng::keyed(INIT_STREAM ^ 0x0f0f, key);
    let mut gauss = || {
        counter += 2;
        let u1 = ((draw_u64(seed, stream, counter) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let u2 = ((draw_u64(seed, stream, counter + 1) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    // Writes an orthogonal `rows x cols` block (row stride `stride`) at `at`, scaled by `gain`.
    let mut block = |w: &mut [f32], at: usize, rows: usize, cols: usize, stride: usize, gain: f64| {
        let (small, large) = (rows.min(cols), rows.max(cols));
        let mut q: Vec<Vec<f64>> = Vec::with_capacity(small);
        for _ in 0..small {
            let mut v: Vec<f64> = (0..large).map(|_| gauss()).collect();
            for u in &q {
                let dot: f64 = u.iter().zip(&v).map(|(a, b)| a * b).sum();
                v.iter_mut().zip(u).for_each(|(x, u)| *x -= dot * u);
            }
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            q.push(v);
        }
        for r in 0..rows {
            for c in 0..cols {
                let x = if rows <= cols { q[r][c] } else { q[c][r] };
                w[at + r * stride + c] = (gain * x) as f32;
            }
        }
    };
    let root2 = std::f64::consts::SQRT_2;
    block(&mut w, l.w1(), hidden, l.input, l.input, root2);
    block(&mut w, l.w2(), hidden, hidden, l.hidden, root2);
    block(&mut w, l.w3(), ACTIONS, hidden, l.hidden, 0.01);
    block(&mut w, l.w3() + ACTIONS * l.hidden, l.outputs - ACTIONS, hidden, l.hidden, 1.0);
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
    /// FLOPs of the products of acting with the construction env's layout, and of one training step.
    step_flops: (u64, u64),
    /// FLOPs of the products run so far (acting with that layout, and training).
    flops: u64,
    inner: AgentInner,
}

#[derive(Debug)]
enum AgentInner {
    Cpu {
        nets: NetState,
        /// Acting buffer ([`ActWork`]).
        act: Vec<f32>,
        /// Training buffer ([`Work`]).
        work: Vec<f32>,
        /// Per-chunk weight gradients.
        partial: Vec<f32>,
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
        if u32::try_from(hidden).is_err() || u32::try_from(batch).is_err() {
            return Err(HostError::Config(format!("hidden {hidden} and batch {batch} must fit in 32 bits")));
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
        // Each trial's random streams are keyed by its env's key, not by its position in the batch.
        let params: Vec<DqnParams> =
            params.iter().zip(env.params()).map(|(p, e)| DqnParams { key: e.key, ..*p }).collect();
        let params = params.as_slice();
        let l = args.layout();
        let online: Vec<f32> = params.iter().flat_map(|p| init_weights(&l, p.hidden as usize, seed, p.key)).collect();
        let nets = NetState { target: online.clone(), m: vec![0.0; online.len()], v: vec![0.0; online.len()], online };
        let inner = match backend {
            Backend::Cpu => AgentInner::Cpu {
                nets,
                act: Vec::new(),
                work: vec![0.0; trials * Work::of(&args.net()).per_trial()],
                partial: vec![0.0; partial_len(&args)],
                losses: vec![0.0; trials * batch],
            },
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => AgentInner::Cuda(Box::new(crate::cuda::CudaDqn::new(rt, &nets, params, &args)?)),
        };
        let step_flops = crate::tile::step_flops(&args.net(), &trials_of(params));
        Ok(Self { params: params.to_vec(), args, grad_steps: 0, step_flops, flops: 0, inner })
    }

    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        self.args.layout()
    }

    /// Gradient steps taken.
    pub fn gradient_steps(&self) -> u64 {
        self.grad_steps
    }

    /// Floating-point operations of the matrix products this agent ran for acting (on envs laid out like
    /// the ones it was made for) and training: 2 per multiply-add of the trials' active sizes.
    pub fn product_flops(&self) -> u64 {
        self.flops
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
        if env.layout().envs_per_trial() == self.args.envs_per_trial as usize {
            self.flops += self.step_flops.0;
        }
        let args = DqnArgs {
            step,
            greedy: u32::from(greedy),
            envs_per_trial: env.layout().envs_per_trial() as u32,
            n_bars: env.n_bars() as u32,
            ..self.args
        };
        #[cfg(feature = "cuda")]
        let env_args = env.args(1);
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu { nets, act, .. }, Inner::Cpu(cpu)) => {
                let crate::cpu::PolicyView { params: env_params, states, bars, features, actions } = cpu.policy_view();
                let (ept, d) = (args.envs_per_trial as usize, args.input as usize);
                let aw = ActWork::of(&args.net());
                act.resize(aw.len(), 0.0);
                act[..aw.h1()].par_chunks_mut(d).zip(states.par_iter()).enumerate().for_each(|(i, (row, state))| {
                    observe_env(&env_params[i / ept], state, bars, features, d - 3, row);
                });
                for layer in 0..3 {
                    let table = crate::tile::stage_plan(&args.net(), &trials_of(&self.params), Stage::Act(layer));
                    let mut bufs: [&mut [f32]; buffers::COUNT] =
                        [&mut nets.online, &mut [], &mut [], &mut [], &mut [], &mut [], act, &mut []];
                    crate::tile::run(&table, &mut bufs)?;
                }
                let q = &act[aw.q()..];
                let params = &self.params;
                actions.par_iter_mut().enumerate().for_each(|(i, action)| {
                    *action = choose(i, &args, &params[i / ept], &q[i * ACTIONS..(i + 1) * ACTIONS]);
                });
            }
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(cuda)) => dqn.act(&mut cuda.policy_view()?, &args, &env_args)?,
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
        self.flops += self.step_flops.1;
        let args = DqnArgs { step: self.grad_steps, ..self.args };
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu { nets, work, partial, losses, .. }, Inner::Cpu(cpu)) => {
                let s = cpu.sample(&sample_args)?;
                cpu_train_step(&args, &self.params, nets, work, partial, losses, s)?;
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

    /// The greedy actions of `env`'s single env per trial over `steps` bars from its current states
    /// (`trials x steps`, trial-major), walked in one piece per trial: on the GPU one launch with a block per
    /// trial, on the CPU a thread per trial. `None` for a network too wide for the GPU walk's shared memory,
    /// or envs on another backend than the agent (the caller then steps the envs bar by bar: the same bits).
    pub fn greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<Option<Vec<u8>>, HostError> {
        let args = DqnArgs { envs_per_trial: 1, n_bars: env.n_bars() as u32, greedy: 1, ..self.args };
        if env.layout().envs_per_trial() != 1 || env.layout().trials() != args.n_trials as usize {
            return Err(HostError::Config("a greedy walk needs one env per trial of the agent".to_owned()));
        }
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu { nets, .. }, Inner::Cpu(cpu)) => {
                let hiddens: Vec<usize> = self.params.iter().map(|p| p.hidden as usize).collect();
                Ok(Some(crate::tile::walk_all(&args.net(), &hiddens, &nets.online, &cpu.policy_view(), steps)))
            }
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(cuda)) => {
                let net = args.net();
                dqn.greedy_walk(&cuda.policy_view()?, &net, steps)
            }
            #[cfg(feature = "cuda")]
            _ => Ok(None), // agent and envs on different backends: the caller steps a CPU copy
        }
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

/// Floats of the per-chunk weight gradients: `chunks x K x P`.
fn partial_len(args: &DqnArgs) -> usize {
    (args.batch as usize).div_ceil(GRAD_CHUNK) * args.n_trials as usize * args.layout().params()
}

/// The per-trial sizes of `params`.
fn trials_of(params: &[DqnParams]) -> Vec<gpu_kernels::net::NetTrial> {
    params.iter().map(DqnParams::net).collect()
}

/// What [`train_on_batch`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchStep {
    /// Weighted loss of every sample (`K x B`).
    pub losses: Vec<f32>,
    /// The gradient of every parameter (`K x P`) that the Adam step used.
    pub gradients: Vec<f32>,
}

/// One gradient step of every trial of `args` on the CPU from a given minibatch (`K x B` samples laid out
/// as the sampler writes them): the stages, products and per-element rules of [`DqnAgent::train_step`], for
/// tests and for users who bring their own minibatches. `args.step` is the Adam step (>= 1).
pub fn train_on_batch(
    args: &DqnArgs,
    params: &[DqnParams],
    nets: &mut NetState,
    batch: &crate::SampleBatch,
) -> Result<BatchStep, HostError> {
    let n = args.n_trials as usize * args.batch as usize;
    let d = args.input as usize;
    if params.len() != args.n_trials as usize || batch.actions.len() != n || batch.obs.len() != n * d {
        return Err(HostError::Shape {
            what: "minibatch samples (trials x batch)".to_owned(),
            expected: n,
            got: batch.actions.len(),
        });
    }
    let mut work = vec![0.0; args.n_trials as usize * Work::of(&args.net()).per_trial()];
    let mut partial = vec![0.0; partial_len(args)];
    let mut losses = vec![0.0; n];
    let gradients = cpu_train_step(args, params, nets, &mut work, &mut partial, &mut losses, batch.clone())?;
    Ok(BatchStep { losses, gradients })
}

/// One gradient step of every trial on the CPU from the sampled minibatch `s`: the same stages, products
/// and per-element rules as the CUDA launches. Returns the gradients.
fn cpu_train_step(
    args: &DqnArgs,
    params: &[DqnParams],
    nets: &mut NetState,
    work: &mut [f32],
    partial: &mut [f32],
    losses: &mut [f32],
    mut s: crate::SampleBatch,
) -> Result<Vec<f32>, HostError> {
    let b = args.batch as usize;
    let (net, trials) = (args.net(), trials_of(params));
    let run = |stage: Stage, nets: &mut NetState, s: &mut crate::SampleBatch, work: &mut [f32], partial: &mut [f32]| {
        let table = crate::tile::stage_plan(&net, &trials, stage);
        let mut ones = [1.0f32; GRAD_CHUNK];
        let mut bufs: [&mut [f32]; buffers::COUNT] =
            [&mut nets.online, &mut nets.target, &mut s.obs, &mut s.next_obs, work, partial, &mut [], &mut ones];
        crate::tile::run(&table, &mut bufs)
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
    crate::tile::store_outputs(&w, work, losses, td);
    for stage in BACKWARD {
        run(stage, nets, &mut s, work, partial)?;
    }
    let n_params = args.layout().params();
    let gradients = crate::tile::gradients(&net, partial);
    let NetState { online, target, m, v } = nets;
    online
        .par_iter_mut()
        .zip(target.par_iter_mut())
        .zip(m.par_iter_mut().zip(v.par_iter_mut()))
        .enumerate()
        .for_each(|(i, ((w, t), (m, v)))| update_param(args, &params[i / n_params], gradients[i], w, t, m, v));
    Ok(gradients)
}
