//! [`DqnAgent`]: the Q-networks of every trial, acting for every env and trained for every trial in the
//! same launches (CUDA, `cuda/`) or the same parallel loops (CPU, `cpu/`), with identical
//! bits on both. This file dispatches; the backends hold the code.

use gpu_kernels::dqn::{DqnArgs, DqnParams};
use gpu_kernels::mlp::Layout;
use gpu_kernels::net::Work;

use crate::cpu::dqn::{CpuDqn, train_step};
use crate::env_batch::Inner;
use crate::init::init_weights;
use crate::types::SampleBatch;
pub use crate::types::{BatchStep, NetState};
use crate::walk::{PreparedWalk, WalkHandle};
use crate::{Backend, EnvBatch, HostError};

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
    Cpu(Box<CpuDqn>),
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
            check_params(k, p, hidden, batch)?;
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
            Backend::Cpu => AgentInner::Cpu(Box::new(CpuDqn::new(nets, &args))),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => AgentInner::Cuda(Box::new(crate::cuda::CudaDqn::new(rt, &nets, params, &args)?)),
        };
        let step_flops = crate::plan::step_flops(&args.net(), &trials_of(params));
        Ok(Self { params: params.to_vec(), args, grad_steps: 0, step_flops, flops: 0, inner })
    }

    /// The parameter layout.
    pub fn layout(&self) -> Layout {
        self.args.layout()
    }

    /// Slot `k` takes a new trial (another trial of the batch ended): `params` (within the agent's hidden
    /// stride and minibatch buffer), fresh networks from the trial's key ([`EnvBatch::restart_trial`] set it
    /// first), zero Adam state, and clocks that start here: its exploration schedule and draws from env
    /// step `origin_steps` (the env steps taken so far), its Adam step and target updates from the agent's
    /// gradient step `origin_grads` (the agent's steps before the trial's first: [`Self::gradient_steps`]
    /// now, plus those its batch-mates take while it warms up; it sits those out). With both set so, the
    /// trial computes what it would in a batch of its own (tests/refill.rs).
    pub fn restart_trial(
        &mut self,
        k: usize,
        params: DqnParams,
        env: &EnvBatch,
        origin_steps: u64,
        origin_grads: u64,
    ) -> Result<(), HostError> {
        if k >= self.params.len() || env.layout().trials() != self.params.len() {
            return Err(HostError::Config(format!("trial slot {k} of a batch of {}", self.params.len())));
        }
        check_params(k, &params, self.args.hidden as usize, self.args.batch as usize)?;
        let p = DqnParams { key: env.params()[k].key, origin_steps, origin_grads, ..params };
        let l = self.layout();
        let weights = init_weights(&l, p.hidden as usize, self.args.seed, p.key);
        match &mut self.inner {
            AgentInner::Cpu(c) => c.nets.restart_trial(k, &weights),
            #[cfg(feature = "cuda")]
            AgentInner::Cuda(dqn) => dqn.restart_trial(k, &p, &weights)?,
        }
        self.params[k] = p;
        self.step_flops = crate::plan::step_flops(&self.args.net(), &trials_of(&self.params));
        Ok(())
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
        let stepped = match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu(c), Inner::Cpu(cpu)) => {
                c.act(&args, &self.params, cpu)?;
                false
            }
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(cuda)) => dqn.act(&mut cuda.policy_view()?, &args, &env_args, true)?,
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::BackendMismatch),
        };
        if stepped { env.stepped_by_policy() } else { env.run_loaded(1, 1) }
    }

    /// Chooses the action of every row of `obs` for env step `step` (epsilon-greedy, or greedy): `obs` holds
    /// `trials x rows_per_trial` observations of the agent's input width, trial-major, made by the caller
    /// (the learners' rows of a portfolio env, [`crate::universe`]); a row's exploration draws are keyed
    /// by its index within its trial, as an env's. Returns `trials x rows_per_trial` codes.
    pub fn act_rows(
        &mut self,
        obs: &[f32],
        rows_per_trial: usize,
        step: u64,
        greedy: bool,
    ) -> Result<Vec<u8>, HostError> {
        let (trials, d) = (self.args.n_trials as usize, self.args.input as usize);
        let rows = trials.checked_mul(rows_per_trial).filter(|&r| r > 0 && r <= u32::MAX as usize);
        let Some(rows) = rows.filter(|&r| r.checked_mul(d) == Some(obs.len())) else {
            return Err(HostError::Shape {
                what: format!("row observations ({trials} trials x {rows_per_trial} rows x {d} inputs)"),
                expected: trials.saturating_mul(rows_per_trial).saturating_mul(d),
                got: obs.len(),
            });
        };
        let args = DqnArgs { step, greedy: u32::from(greedy), envs_per_trial: rows_per_trial as u32, ..self.args };
        let mut actions = Vec::with_capacity(rows);
        match &mut self.inner {
            AgentInner::Cpu(c) => c.act_rows(&args, &self.params, obs, &mut actions)?,
            #[cfg(feature = "cuda")]
            AgentInner::Cuda(dqn) => actions = dqn.act_rows(&args, obs)?,
        }
        Ok(actions)
    }

    /// [`Self::act_rows`] with no transfer (the CUDA backend): `observe` writes the rows' observations into
    /// the acting buffer on `stream`, and the codes go to `actions` there.
    #[cfg(feature = "cuda")]
    pub(crate) fn act_rows_device(
        &mut self,
        rows_per_trial: usize,
        (step, greedy): (u64, bool),
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        observe: &mut dyn FnMut(&mut cudarc::driver::CudaSlice<f32>) -> Result<(), HostError>,
        actions: &mut cudarc::driver::CudaSlice<u8>,
    ) -> Result<(), HostError> {
        let args = DqnArgs { step, greedy: u32::from(greedy), envs_per_trial: rows_per_trial as u32, ..self.args };
        match &mut self.inner {
            AgentInner::Cuda(dqn) => dqn.act_rows_device(&args, stream, observe, actions),
            AgentInner::Cpu(_) => Err(HostError::BackendMismatch),
        }
    }

    /// One gradient step for every trial: a minibatch of `self.batch` per trial from `env`'s ring, TD
    /// targets, Huber loss, backward, Adam, target update.
    pub fn train_step(&mut self, env: &mut EnvBatch) -> Result<(), HostError> {
        let sample_args = env.sample_args(self.args.batch as usize)?;
        self.grad_steps += 1;
        self.flops += self.step_flops.1;
        let args = DqnArgs { step: self.grad_steps, ..self.args };
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu(c), Inner::Cpu(cpu)) => c.train(&args, &self.params, cpu, &sample_args)?,
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(cuda)) => {
                let (stream, samples) = cuda.sample_device(&sample_args)?;
                dqn.train(stream, samples, &args)?;
            }
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::BackendMismatch),
        }
        Ok(())
    }

    /// The greedy actions of `env`'s single env per trial over `steps` bars from its current states
    /// (`trials x steps`, trial-major), walked in one piece per trial: on the GPU one launch with a block per
    /// trial, on the CPU a thread per trial. `None` for a network too wide for the GPU walk's shared memory,
    /// or envs on another backend than the agent (the caller then steps the envs bar by bar: the same bits).
    pub fn greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<Option<Vec<u8>>, HostError> {
        self.start_greedy_walk(env, steps)?.finish()
    }

    /// [`DqnAgent::greedy_walk`] without waiting: on the GPU the walk reads a copy of the current weights on
    /// the envs' stream, so the agent may train on while it runs.
    pub fn start_greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<WalkHandle, HostError> {
        self.prepare_greedy_walk(env, steps)?.launch(env)
    }

    /// [`DqnAgent::start_greedy_walk`] in two steps: the network as it is now (on the GPU a copy of the
    /// weights), and the launch on `env` whenever the caller chooses ([`PreparedWalk::launch`]), the
    /// agent training on meanwhile. On the CPU the walk is done here.
    pub fn prepare_greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<PreparedWalk, HostError> {
        let args = DqnArgs { envs_per_trial: 1, n_bars: env.n_bars() as u32, greedy: 1, ..self.args };
        if env.layout().envs_per_trial() != 1 || env.layout().trials() != args.n_trials as usize {
            return Err(HostError::Config("a greedy walk needs one env per trial of the agent".to_owned()));
        }
        match (&mut self.inner, env.inner_mut()) {
            (AgentInner::Cpu(c), Inner::Cpu(cpu)) => {
                Ok(PreparedWalk::done(Some(c.greedy_walk(&args, &self.params, cpu, steps))))
            }
            #[cfg(feature = "cuda")]
            (AgentInner::Cuda(dqn), Inner::Cuda(_)) => Ok(PreparedWalk::device(dqn.snapshot_walk(&args.net(), steps)?)),
            #[cfg(feature = "cuda")]
            _ => Ok(PreparedWalk::done(None)), // agent and envs on different backends: the caller steps a CPU copy
        }
    }

    /// Mean loss of each trial in the last gradient step.
    pub fn last_losses(&self) -> Result<Vec<f32>, HostError> {
        let losses = match &self.inner {
            AgentInner::Cpu(c) => c.losses.clone(),
            #[cfg(feature = "cuda")]
            AgentInner::Cuda(dqn) => dqn.losses()?,
        };
        Ok(crate::types::mean_losses(&losses, self.args.batch as usize, self.params.iter().map(|p| p.batch)))
    }

    /// Online, target and Adam state of every trial.
    pub fn state(&self) -> Result<NetState, HostError> {
        match &self.inner {
            AgentInner::Cpu(c) => Ok(c.nets.clone()),
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
            AgentInner::Cpu(c) => c.nets = state.clone(),
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

/// Refuses trial `k`'s DQN parameters outside the agent's sizes or the optimizer's ranges.
fn check_params(k: usize, p: &DqnParams, hidden: usize, batch: usize) -> Result<(), HostError> {
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
    if !(p.huber_delta > 0.0 && (0.0..1.0).contains(&p.beta1) && (0.0..1.0).contains(&p.beta2) && p.adam_eps > 0.0) {
        return bad("huber_delta and adam_eps must be positive, betas in [0, 1)");
    }
    Ok(())
}

/// The per-trial sizes of `params`.
fn trials_of(params: &[DqnParams]) -> Vec<gpu_kernels::net::NetTrial> {
    params.iter().map(DqnParams::net).collect()
}

/// One gradient step of every trial of `args` on the CPU from a given minibatch (`K x B` samples laid out
/// as the sampler writes them): the stages, products and per-element rules of [`DqnAgent::train_step`], for
/// tests and for users who bring their own minibatches. `args.step` is the Adam step (>= 1).
pub fn train_on_batch(
    args: &DqnArgs,
    params: &[DqnParams],
    nets: &mut NetState,
    batch: &SampleBatch,
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
    let mut partial = vec![0.0; args.net().partial_len()];
    let mut losses = vec![0.0; n];
    let gradients = train_step(args, params, nets, &mut work, &mut partial, &mut losses, batch.clone())?;
    Ok(BatchStep { losses, gradients })
}
