//! [`PpoAgent`]: the actor-critics of every trial, collecting rollouts for every env and updating every
//! trial in the same launches (CUDA, `cuda/`) or parallel loops (CPU, `cpu/`), with identical
//! bits on both. This file dispatches; the backends hold the code.

use gpu_kernels::mlp::Layout;
use gpu_kernels::net::NetTrial;
use gpu_kernels::net::Work;
use gpu_kernels::ppo::{PpoArgs, PpoParams, PpoSample, loss_sample};

use crate::cpu::ppo::{CpuPpo, Minibatch};
use crate::env_batch::Inner;
use crate::init::{init_orthogonal, init_weights};
pub use crate::types::BatchStep;
use crate::types::NetState;
use crate::walk::{PreparedWalk, WalkHandle};
use crate::{Backend, EnvBatch, HostError};

/// The per-trial sizes of `params`.
fn trials_of(params: &[PpoParams]) -> Vec<NetTrial> {
    params.iter().map(PpoParams::net).collect()
}

/// Trial `p`'s parameters for rollouts of `n` transitions: with a split, its minibatch is its share.
fn split_share(p: &PpoParams, n: usize) -> PpoParams {
    let batch = if p.minibatches > 0 { gpu_kernels::ppo::split_batch(n, p.minibatches) } else { p.batch };
    PpoParams { batch, ..*p }
}

/// Refuses trial `k`'s PPO parameters outside the agent's sizes (`hidden` stride, `batch` buffer, rollouts
/// of `n`) or the algorithm's ranges.
fn check_params(k: usize, p: &PpoParams, hidden: usize, batch: usize, n: usize) -> Result<(), HostError> {
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
        && p.minibatches as usize <= n
        && p.norm_adv <= 1
        && (p.activation == gpu_kernels::mlp::ACT_RELU || p.activation == gpu_kernels::mlp::ACT_TANH);
    if ok {
        return Ok(());
    }
    Err(HostError::Config(format!(
        "trial {k}: invalid PPO parameters {p:?} (hidden <= {hidden}, batch <= {batch}, the minibatch split's share \
         of a rollout of {n} included, minibatches <= {n})"
    )))
}

/// Refuses trials whose activation is not the batch's `activation`: the trials' layers are the same
/// launches.
fn same_activation(params: &[PpoParams], activation: u32) -> Result<(), HostError> {
    match params.iter().position(|p| p.activation != activation) {
        None => Ok(()),
        Some(k) => Err(HostError::Config(format!(
            "trial {k}: activation {} in a batch of {} (the trials trained at once share their activation)",
            gpu_kernels::mlp::activation_name(params[k].activation),
            gpu_kernels::mlp::activation_name(activation)
        ))),
    }
}

/// Trial `p`'s initial network (its key's streams): orthogonal with CleanRL's gains, or PyTorch's uniform.
fn initial_weights(l: &Layout, p: &PpoParams, seed: u64) -> Vec<f32> {
    let h = p.hidden as usize;
    if p.orthogonal_init != 0 { init_orthogonal(l, h, seed, p.key) } else { init_weights(l, h, seed, p.key) }
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
        let params: Vec<PpoParams> = params.iter().map(|p| split_share(p, n)).collect();
        // The minibatch buffer holds the largest split's share.
        let batch = params.iter().filter(|p| p.minibatches > 0).map(|p| p.batch as usize).fold(batch, usize::max);
        for (k, p) in params.iter().enumerate() {
            check_params(k, p, hidden, batch, n)?;
        }
        let activation = params.first().map_or(gpu_kernels::ppo::PpoParams::default().activation, |p| p.activation);
        same_activation(&params, activation)?;
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
            activation,
            _pad: 0,
        };
        // Each trial's random streams are keyed by its env's key, not by its position in the batch.
        let params: Vec<PpoParams> =
            params.iter().zip(env.params()).map(|(p, e)| PpoParams { key: e.key, ..*p }).collect();
        let params = params.as_slice();
        let l = args.layout();
        let online: Vec<f32> = params.iter().flat_map(|p| initial_weights(&l, p, seed)).collect();
        let nets = NetState { target: Vec::new(), m: vec![0.0; online.len()], v: vec![0.0; online.len()], online };
        let inner = match backend {
            Backend::Cpu => PpoInner::Cpu(Box::new(CpuPpo::sized(nets, &args))),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => PpoInner::Cuda(Box::new(crate::cuda::CudaPpo::new(rt, &nets, params, &args)?)),
        };
        let step_flops = crate::plan::step_flops(&args.net(), &trials_of(params));
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

    /// Slot `k` takes a new trial (another trial of the batch ended), between rollouts: `params` (within
    /// the agent's hidden stride and minibatch buffer, a split's share included), fresh networks from the
    /// trial's key ([`EnvBatch::restart_trial`] set it first), zero Adam state, and its rollout, update,
    /// learning-rate and action-draw numbers counted from the rollouts collected so far
    /// ([`PpoParams::origin_rollouts`]): the trial computes what it would in a batch of its own
    /// (tests/refill.rs).
    pub fn restart_trial(&mut self, k: usize, params: PpoParams, env: &EnvBatch) -> Result<(), HostError> {
        if k >= self.params.len() || env.layout().trials() != self.params.len() {
            return Err(HostError::Config(format!("trial slot {k} of a batch of {}", self.params.len())));
        }
        if self.trained != self.rollouts {
            return Err(HostError::Config("a PPO trial restarts between rollouts, after their updates".to_owned()));
        }
        let n = self.args.steps as usize * self.args.envs_per_trial as usize;
        let p = split_share(&params, n);
        check_params(k, &p, self.args.hidden as usize, self.args.batch as usize, n)?;
        same_activation(&[p], self.args.activation)?;
        let p = PpoParams { key: env.params()[k].key, origin_rollouts: self.rollouts, ..p };
        let weights = initial_weights(&self.layout(), &p, self.args.seed);
        match &mut self.inner {
            PpoInner::Cpu(c) => c.nets.restart_trial(k, &weights),
            #[cfg(feature = "cuda")]
            PpoInner::Cuda(g) => g.restart_trial(k, &p, &weights)?,
        }
        self.params[k] = p;
        self.step_flops = crate::plan::step_flops(&self.args.net(), &trials_of(&self.params));
        Ok(())
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

    /// One action per env at rollout step `rollout_step` (values only, into the bootstrap, when `rollout_step >=
    /// steps`); with `step`, then one env step on the actions (on the GPU in the acting kernel where it is fused).
    fn act(
        &mut self,
        env: &mut EnvBatch,
        counter: u64,
        rollout_step: u32,
        greedy: bool,
        step: bool,
    ) -> Result<(), HostError> {
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
        let stepped = match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                c.act(&args, &self.params, cpu, rollout_step)?;
                false
            }
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => {
                g.act(&mut cuda.policy_view()?, &args, &env_args, rollout_step, step)?
            }
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::BackendMismatch),
        };
        match (step, stepped) {
            (false, _) => Ok(()),
            (true, true) => env.stepped_by_policy(),
            (true, false) => env.run_loaded(1, 1),
        }
    }

    /// Greedy (or sampled) actions for every env, then one env step (evaluation).
    pub fn act_and_step(&mut self, env: &mut EnvBatch, step: u64, greedy: bool) -> Result<(), HostError> {
        self.act(env, step, u32::MAX, greedy, true)
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
            self.act(env, counter, t, false, true)?;
        }
        self.flops += (u64::from(steps) + 1) * self.step_flops.0;
        self.act(env, self.rollouts * u64::from(steps) + u64::from(steps), steps, false, false)?;
        self.rollouts += 1;
        let args = self.args;
        match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => c.gae(&args, &self.params, cpu),
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.gae(cuda, &args)?,
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::BackendMismatch),
        }
        Ok(())
    }

    /// Chooses the action of every row of `obs` (`trials x rows_per_trial` observations of the agent's input
    /// width, made by the caller: the learners' rows of a portfolio env, [`crate::universe`]): at rollout
    /// step `rollout_step` of the current rollout (sampled; the log-probabilities and values kept for its
    /// GAE and updates, as [`Self::collect`]'s), or greedily with `rollout_step` `u32::MAX` (nothing kept).
    /// A rollout's rows are the ring's envs (`rows_per_trial` its envs per trial).
    pub fn act_rows(
        &mut self,
        obs: &[f32],
        rows_per_trial: usize,
        rollout_step: u32,
        greedy: bool,
    ) -> Result<Vec<u8>, HostError> {
        let (trials, d) = (self.args.n_trials as usize, self.args.input as usize);
        let rows = trials.checked_mul(rows_per_trial).filter(|&r| r > 0 && r <= u32::MAX as usize);
        let fits = rows.is_some_and(|r| r.checked_mul(d) == Some(obs.len()));
        let in_rollout = rollout_step <= self.args.steps;
        if !fits || (in_rollout && rows_per_trial != self.args.envs_per_trial as usize) {
            return Err(HostError::Shape {
                what: format!("row observations ({trials} trials x {rows_per_trial} rows x {d} inputs)"),
                expected: trials.saturating_mul(rows_per_trial).saturating_mul(d),
                got: obs.len(),
            });
        }
        let args = self.row_args(rows_per_trial, rollout_step, greedy)?;
        let mut actions = Vec::new();
        match &mut self.inner {
            PpoInner::Cpu(c) => c.act_rows(&args, &self.params, obs, &mut actions, rollout_step)?,
            #[cfg(feature = "cuda")]
            PpoInner::Cuda(g) => actions = g.act_rows(&args, obs, rollout_step)?,
        }
        if in_rollout {
            self.flops += self.step_flops.0;
        }
        Ok(actions)
    }

    /// Ends a rollout whose steps [`Self::act_rows`] chose and whose transitions `rows` holds (written with
    /// [`EnvBatch::write_step`]): the bootstrap values from `obs`, the rows' observations after the last
    /// step, then GAE, as [`Self::collect`] ends its own.
    pub fn end_row_rollout(&mut self, rows: &mut EnvBatch, obs: &[f32]) -> Result<(), HostError> {
        self.check_row_rollout(rows)?;
        self.act_rows(obs, self.args.envs_per_trial as usize, self.args.steps, false)?;
        self.finish_row_rollout(rows)
    }

    /// Refuses to end a row rollout that has not filled the ring ([`Self::end_row_rollout`]).
    pub(crate) fn check_row_rollout(&self, rows: &EnvBatch) -> Result<(), HostError> {
        self.check_env(rows)?;
        let per_rollout = u64::from(self.args.steps) * u64::from(self.args.envs_per_trial);
        if rows.transitions_written() == 0 || !rows.transitions_written().is_multiple_of(per_rollout) {
            return Err(HostError::Config("a row rollout ends after its steps fill the ring".to_owned()));
        }
        Ok(())
    }

    /// The end of a row rollout after its bootstrap values were chosen ([`Self::end_row_rollout`]): GAE.
    pub(crate) fn finish_row_rollout(&mut self, rows: &mut EnvBatch) -> Result<(), HostError> {
        self.rollouts += 1;
        let args = self.args;
        match (&mut self.inner, rows.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => c.gae(&args, &self.params, cpu),
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(cuda)) => g.gae(cuda, &args)?,
            #[cfg(feature = "cuda")]
            _ => return Err(HostError::BackendMismatch),
        }
        Ok(())
    }

    /// [`Self::act_rows`] with no transfer (the CUDA backend): `observe` writes the rows' observations into
    /// the acting buffer on `stream`, and the codes go to `actions` there.
    #[cfg(feature = "cuda")]
    pub(crate) fn act_rows_device(
        &mut self,
        rows_per_trial: usize,
        (rollout_step, greedy): (u32, bool),
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        observe: &mut dyn FnMut(&mut cudarc::driver::CudaSlice<f32>) -> Result<(), HostError>,
        actions: &mut cudarc::driver::CudaSlice<u8>,
    ) -> Result<(), HostError> {
        let args = self.row_args(rows_per_trial, rollout_step, greedy)?;
        match &mut self.inner {
            PpoInner::Cuda(g) => g.act_rows_device(&args, stream, observe, actions, rollout_step)?,
            PpoInner::Cpu(_) => return Err(HostError::BackendMismatch),
        }
        if rollout_step <= self.args.steps {
            self.flops += self.step_flops.0;
        }
        Ok(())
    }

    /// The acting arguments of `rows_per_trial` rows per trial at rollout step `rollout_step` ([`Self::act_rows`]):
    /// a rollout's rows are the ring's envs.
    fn row_args(&self, rows_per_trial: usize, rollout_step: u32, greedy: bool) -> Result<PpoArgs, HostError> {
        let trials = self.args.n_trials as usize;
        let rows = trials.checked_mul(rows_per_trial).filter(|&r| r > 0 && r <= u32::MAX as usize);
        if rows.is_none() || (rollout_step <= self.args.steps && rows_per_trial != self.args.envs_per_trial as usize) {
            return Err(HostError::Config(format!(
                "{rows_per_trial} rows per trial for a rollout of {} envs per trial",
                self.args.envs_per_trial
            )));
        }
        let counter = self.rollouts * u64::from(self.args.steps) + u64::from(rollout_step.min(self.args.steps));
        Ok(PpoArgs { counter, greedy: u32::from(greedy), envs_per_trial: rows_per_trial as u32, ..self.args })
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
                (PpoInner::Cpu(c), Inner::Cpu(cpu)) => c.update(&args, &self.params, cpu)?,
                #[cfg(feature = "cuda")]
                (PpoInner::Cuda(g), Inner::Cuda(cuda)) => {
                    g.update(cuda, &args, self.params.iter().any(|p| p.norm_adv != 0))?
                }
                #[cfg(feature = "cuda")]
                _ => return Err(HostError::BackendMismatch),
            }
        }
        self.trained += 1;
        Ok(())
    }

    /// The greedy actions (argmax of the logits) of `env`'s single env per trial over `steps` bars
    /// (`trials x steps`), walked in one piece per trial as [`crate::DqnAgent::greedy_walk`] does.
    pub fn greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<Option<Vec<u8>>, HostError> {
        self.start_greedy_walk(env, steps)?.finish()
    }

    /// [`PpoAgent::greedy_walk`] without waiting, as [`crate::DqnAgent::start_greedy_walk`].
    pub fn start_greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<WalkHandle, HostError> {
        self.prepare_greedy_walk(env, steps)?.launch(env)
    }

    /// [`PpoAgent::start_greedy_walk`] in two steps, as [`crate::DqnAgent::prepare_greedy_walk`].
    pub fn prepare_greedy_walk(&mut self, env: &mut EnvBatch, steps: usize) -> Result<PreparedWalk, HostError> {
        let net = PpoArgs { envs_per_trial: 1, n_bars: env.n_bars() as u32, ..self.args }.net();
        if env.layout().envs_per_trial() != 1 || env.layout().trials() != net.n_trials as usize {
            return Err(HostError::Config("a greedy walk needs one env per trial of the agent".to_owned()));
        }
        match (&mut self.inner, env.inner_mut()) {
            (PpoInner::Cpu(c), Inner::Cpu(cpu)) => {
                Ok(PreparedWalk::done(Some(c.greedy_walk(&net, &self.params, cpu, steps))))
            }
            #[cfg(feature = "cuda")]
            (PpoInner::Cuda(g), Inner::Cuda(_)) => Ok(PreparedWalk::device(g.snapshot_walk(&net, steps)?)),
            #[cfg(feature = "cuda")]
            _ => Ok(PreparedWalk::done(None)),
        }
    }

    /// Mean loss of each trial in the last minibatch.
    pub fn last_losses(&self) -> Result<Vec<f32>, HostError> {
        let losses = match &self.inner {
            PpoInner::Cpu(c) => c.losses.clone(),
            #[cfg(feature = "cuda")]
            PpoInner::Cuda(g) => g.losses()?,
        };
        Ok(crate::types::mean_losses(&losses, self.args.batch as usize, self.params.iter().map(|p| p.batch)))
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

/// One minibatch update of every trial of `args` on the CPU from given samples (`K x B`, trial-major):
/// `obs` their observations (`K x B x D`), `samples` their training inputs (`None`: a zero-weight sample).
/// The stages, products and per-element rules of [`PpoAgent::update`] (forward, clipped-surrogate, value
/// and entropy loss, backward, gradient-norm clip, Adam at the trial's update `args.rollout x` updates per
/// rollout `+ args.counter`), for tests and for users who bring their own minibatches.
pub fn train_on_batch(
    args: &PpoArgs,
    params: &[PpoParams],
    nets: &mut NetState,
    obs: &[f32],
    samples: &[Option<PpoSample>],
) -> Result<BatchStep, HostError> {
    let (k, b) = (args.n_trials as usize, args.batch as usize);
    let l = args.layout();
    let shape = |what: &str, expected: usize, got: usize| HostError::Shape { what: what.to_owned(), expected, got };
    if params.len() != k {
        return Err(shape("PPO trial parameters", k, params.len()));
    }
    if samples.len() != k * b {
        return Err(shape("minibatch samples (trials x batch)", k * b, samples.len()));
    }
    if obs.len() != k * b * l.input {
        return Err(shape("minibatch observations (trials x batch x input)", k * b * l.input, obs.len()));
    }
    for (what, buf) in
        [("online weights", &nets.online), ("Adam first moments", &nets.m), ("Adam second moments", &nets.v)]
    {
        if buf.len() != k * l.params() {
            return Err(shape(&format!("{what} (trials x parameters)"), k * l.params(), buf.len()));
        }
    }
    let mut obs = obs.to_vec();
    let mut work = vec![0.0; k * Work::of(&args.net()).per_trial()];
    let mut partial = vec![0.0; args.net().partial_len()];
    let mut losses = vec![0.0; k * b];
    let step = Minibatch { args, params, obs: &mut obs, work: &mut work, partial: &mut partial, losses: &mut losses };
    let gradients = step.run(nets, |i, out, dout| {
        let p = &params[i / b];
        let loss = loss_sample(i % b, p, out, samples[i], dout);
        gpu_kernels::ppo::trial_update(p, args).map(|_| loss)
    })?;
    Ok(BatchStep { losses, gradients })
}
