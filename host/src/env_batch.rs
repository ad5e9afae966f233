//! [`EnvBatch`]: K trials x E envs of the trading environment on the chosen backend, with a replay ring of
//! compressed transitions per trial, reward normalization and a minibatch sampler.

use gpu_kernels::batch::{BatchArgs, SampleArgs};
use gpu_kernels::layout::segment_start;
use gpu_kernels::{Action, EnvState, Moments, Transition, TrialParams};

use crate::cpu::env::CpuEnv;
pub use crate::types::{EnvConfig, SampleBatch, SimLayout};
use crate::{Backend, HostError, MarketData};

/// The environments of all trials, advanced in lock-step.
#[derive(Debug)]
pub struct EnvBatch {
    layout: SimLayout,
    cfg: EnvConfig,
    params: Vec<TrialParams>,
    n_bars: usize,
    n_features: usize,
    /// Transitions written per trial since creation (the ring head is this modulo the capacity).
    written: u64,
    /// Minibatches sampled so far.
    draws: u64,
    inner: Inner,
}

#[derive(Debug)]
pub(crate) enum Inner {
    Cpu(CpuEnv),
    #[cfg(feature = "cuda")]
    Cuda(Box<crate::cuda::CudaEnv>),
}

/// Dispatches a method call to the backend.
macro_rules! on_backend {
    ($self:expr, $env:ident => $call:expr) => {
        match $self {
            Inner::Cpu($env) => $call,
            #[cfg(feature = "cuda")]
            Inner::Cuda($env) => $call,
        }
    };
}

impl EnvBatch {
    /// Uploads the market data and parameters once and places the envs on the tiled segments of epoch 0.
    pub fn new(
        backend: &Backend,
        market: &MarketData,
        params: &[TrialParams],
        layout: SimLayout,
        cfg: EnvConfig,
    ) -> Result<Self, HostError> {
        if params.len() != layout.trials() {
            return Err(HostError::Shape {
                what: "trial parameter sets (one per trial)".to_owned(),
                expected: layout.trials(),
                got: params.len(),
            });
        }
        for (trial, p) in params.iter().enumerate() {
            validate_params(trial, p)?;
        }
        if cfg.ring_capacity > 0
            && (cfg.ring_capacity < layout.envs_per_trial() || cfg.ring_capacity > u32::MAX as usize)
        {
            return Err(HostError::Config(format!(
                "ring capacity {} per trial must be 0 or between the envs per trial ({}) and 2^32",
                cfg.ring_capacity,
                layout.envs_per_trial()
            )));
        }
        let n_bars = market.n_bars();
        if n_bars > u32::MAX as usize {
            return Err(HostError::Shape {
                what: "bars (fewer than 2^32)".to_owned(),
                expected: u32::MAX as usize,
                got: n_bars,
            });
        }
        let states = vec![EnvState::new(&params[0], 0, 0); layout.n_envs()];
        let inner = match backend {
            Backend::Cpu => Inner::Cpu(CpuEnv::new(market, params, states, cfg.ring_capacity)),
            #[cfg(feature = "cuda")]
            Backend::Cuda(rt) => {
                Inner::Cuda(Box::new(crate::cuda::CudaEnv::new(rt, market, params, &states, layout, cfg)?))
            }
        };
        let mut batch = Self {
            layout,
            cfg,
            params: params.to_vec(),
            n_bars,
            n_features: market.n_features(),
            written: 0,
            draws: 0,
            inner,
        };
        batch.reset_epoch(0)?;
        Ok(batch)
    }

    /// The layout.
    pub fn layout(&self) -> SimLayout {
        self.layout
    }

    /// The configuration.
    pub fn config(&self) -> EnvConfig {
        self.cfg
    }

    /// Fresh portfolios on epoch `epoch`'s segments of `segment_len` steps (tiling the bars when they fit,
    /// drawn from the seed otherwise; the same for every trial). The ring and reward statistics are kept.
    pub fn reset_epoch(&mut self, epoch: u64) -> Result<(), HostError> {
        self.reset_epochs(&vec![epoch; self.layout.trials()])
    }

    /// [`EnvBatch::reset_epoch`] with each trial on its own epoch's segments (`epochs[k]` for trial k: a
    /// trial started in a freed slot counts its epochs from its start).
    pub fn reset_epochs(&mut self, epochs: &[u64]) -> Result<(), HostError> {
        if epochs.len() != self.layout.trials() {
            return Err(HostError::Shape {
                what: "epochs (one per trial)".to_owned(),
                expected: self.layout.trials(),
                got: epochs.len(),
            });
        }
        let len = self.cfg.segment_len;
        if len == 0 || len as usize >= self.n_bars {
            return Err(HostError::Config(format!(
                "segment length {len} must be between 1 and bars - 1 = {}",
                self.n_bars - 1
            )));
        }
        let ept = self.layout.envs_per_trial() as u32;
        let segments: Vec<(u32, u32)> = (0..self.layout.n_envs() as u32)
            .map(|i| {
                let epoch = epochs[(i / ept) as usize];
                let start = segment_start(i % ept, ept, len, self.n_bars as u32, self.cfg.seed, epoch);
                (start, start + len)
            })
            .collect();
        self.reset_segments(&segments)
    }

    /// Starts a new trial in slot `k` (a trial of the batch ended and another takes its place): its
    /// parameters become `params`, its replay ring is emptied and its reward statistics restart, and its
    /// clocks start here: its ring positions and sample counts from the transitions written so far
    /// ([`TrialParams::ring_origin`]) and its minibatch draws from draw number `first_draw` (the batch's
    /// minibatch number of the trial's first draw: [`EnvBatch::draws`] now, or later when its batch-mates
    /// draw while it warms up; [`TrialParams::draw_origin`]). Its envs keep their states until the next
    /// reset ([`EnvBatch::reset_epochs`]). So the trial samples what it would in a batch of its own.
    pub fn restart_trial(&mut self, k: usize, params: TrialParams, first_draw: u64) -> Result<(), HostError> {
        if k >= self.layout.trials() {
            return Err(HostError::Config(format!("trial slot {k} of a batch of {}", self.layout.trials())));
        }
        validate_params(k, &params)?;
        let p = TrialParams { ring_origin: self.written, draw_origin: first_draw, ..params };
        on_backend!(&mut self.inner, env => env.restart_trial(k, &p))?;
        self.params[k] = p;
        Ok(())
    }

    /// Minibatches sampled so far (the next one's draw number).
    pub fn draws(&self) -> u64 {
        self.draws
    }

    /// Fresh portfolios with env `i` on bars `segments[i] = (start, end)`.
    pub fn reset_segments(&mut self, segments: &[(u32, u32)]) -> Result<(), HostError> {
        if segments.len() != self.layout.n_envs() {
            return Err(HostError::Shape {
                what: "env segments (one per env)".to_owned(),
                expected: self.layout.n_envs(),
                got: segments.len(),
            });
        }
        let ept = self.layout.envs_per_trial();
        let states = segments
            .iter()
            .enumerate()
            .map(|(env, &(start, end))| {
                if start > end || end as usize >= self.n_bars {
                    return Err(HostError::InvalidSegment { env, start, end, n_bars: self.n_bars });
                }
                Ok(EnvState::new(&self.params[env / ept], start, end))
            })
            .collect::<Result<Vec<_>, _>>()?;
        on_backend!(&mut self.inner, env => env.set_states(&states))
    }

    /// Fresh portfolios for some envs only: `(env, start, end)` each; the others keep their states (an
    /// autoreset of the envs whose episode ended).
    pub fn reset_envs(&mut self, resets: &[(usize, u32, u32)]) -> Result<(), HostError> {
        if resets.is_empty() {
            return Ok(());
        }
        let ept = self.layout.envs_per_trial();
        let mut states = self.states()?;
        for &(env, start, end) in resets {
            if env >= states.len() || start > end || end as usize >= self.n_bars {
                return Err(HostError::InvalidSegment { env, start, end, n_bars: self.n_bars });
            }
            states[env] = EnvState::new(&self.params[env / ept], start, end);
        }
        on_backend!(&mut self.inner, env => env.set_states(&states))
    }

    /// Step mode, one step: one launch advances every env by one bar with `actions[i]` for env `i`.
    pub fn step(&mut self, actions: &[u8]) -> Result<(), HostError> {
        self.advance(actions, 1, 1)
    }

    /// Step mode, `steps` steps: actions (`steps x n_envs`, step-major) are uploaded once, then one launch
    /// per step (plus the reward-statistics launches when a trial normalizes).
    pub fn step_many(&mut self, actions: &[u8], steps: usize) -> Result<(), HostError> {
        self.advance(actions, steps, 1)
    }

    /// Scan mode: each env walks `steps` bars in one launch (split only where the ring would wrap onto
    /// itself within a launch). Same results as [`Self::step_many`], bit for bit.
    pub fn scan(&mut self, actions: &[u8], steps: usize) -> Result<(), HostError> {
        let per_launch = match self.cfg.ring_capacity {
            0 => steps.max(1),
            capacity => (capacity / self.layout.envs_per_trial()).max(1),
        };
        self.advance(actions, steps, per_launch)
    }

    /// [`Self::scan`] (or [`Self::step_many`] with `step_mode`), also returning the device time of the
    /// launches measured with CUDA events (the longest of the trial groups' streams; `None` on the CPU).
    pub fn run_timed(&mut self, actions: &[u8], steps: usize, step_mode: bool) -> Result<Option<f64>, HostError> {
        let per_launch = if step_mode {
            1
        } else {
            match self.cfg.ring_capacity {
                0 => steps.max(1),
                capacity => (capacity / self.layout.envs_per_trial()).max(1),
            }
        };
        self.check_actions(actions, steps)?;
        #[cfg(feature = "cuda")]
        if let Inner::Cuda(env) = &mut self.inner {
            env.load_actions(actions)?;
            let start = env.record_events()?;
            self.run_loaded(steps, per_launch)?;
            return self.elapsed_since(&start).map(Some);
        }
        on_backend!(&mut self.inner, env => env.load_actions(actions))?;
        self.run_loaded(steps, per_launch).map(|()| None)
    }

    /// Milliseconds from `start` (one event per trial group) to now on the slowest group's stream.
    #[cfg(feature = "cuda")]
    fn elapsed_since(&self, start: &[cudarc::driver::CudaEvent]) -> Result<f64, HostError> {
        let Inner::Cuda(env) = &self.inner else {
            return Err(HostError::Config("device timing needs the CUDA backend".to_owned()));
        };
        let end = env.record_events()?;
        let mut longest = 0.0f64;
        for (s, e) in start.iter().zip(&end) {
            e.synchronize().map_err(HostError::driver("waiting for the launches"))?;
            longest = longest.max(f64::from(s.elapsed_ms(e).map_err(HostError::driver("reading event times"))?));
        }
        Ok(longest)
    }

    fn check_actions(&self, actions: &[u8], steps: usize) -> Result<(), HostError> {
        let n_envs = self.layout.n_envs();
        if actions.len() != steps * n_envs {
            return Err(HostError::Shape {
                what: format!("actions ({steps} steps x {n_envs} envs)"),
                expected: steps * n_envs,
                got: actions.len(),
            });
        }
        if let Some(i) = actions.iter().position(|&a| a >= Action::COUNT) {
            return Err(HostError::InvalidAction { step: i / n_envs, env: i % n_envs, code: actions[i].into() });
        }
        Ok(())
    }

    fn advance(&mut self, actions: &[u8], steps: usize, per_launch: usize) -> Result<(), HostError> {
        self.check_actions(actions, steps)?;
        on_backend!(&mut self.inner, env => env.load_actions(actions))?;
        self.run_loaded(steps, per_launch)
    }

    /// Advances `steps` steps with the actions already in the backend's action buffer (uploaded by
    /// [`Self::advance`], or written on the device by a policy).
    pub(crate) fn run_loaded(&mut self, steps: usize, per_launch: usize) -> Result<(), HostError> {
        let mut done = 0;
        while done < steps {
            let chunk = per_launch.min(steps - done);
            let args = self.args(chunk);
            on_backend!(&mut self.inner, env => env.scan(&args, done))?;
            self.scanned(&args)?;
            done += chunk;
        }
        Ok(())
    }

    /// One step of transitions made by another env (the learners' rows of a portfolio env,
    /// [`crate::universe`]): `transitions[env]` for every env of the layout goes where this batch's own step
    /// would write it, then the reward statistics and the ring's clock move as after that step. The batch's
    /// own envs do not move.
    pub fn write_step(&mut self, transitions: &[gpu_kernels::Transition]) -> Result<(), HostError> {
        if transitions.len() != self.layout.n_envs() {
            return Err(HostError::Shape {
                what: "transitions (one per env)".to_owned(),
                expected: self.layout.n_envs(),
                got: transitions.len(),
            });
        }
        if self.cfg.ring_capacity == 0 {
            return Err(HostError::Config("writing transitions needs a replay ring (ring_capacity > 0)".to_owned()));
        }
        let args = self.args(1);
        let ept = self.layout.envs_per_trial();
        let slots: Vec<usize> =
            (0..transitions.len()).map(|env| args.ring_index(env, 0, self.params[env / ept].ring_origin)).collect();
        on_backend!(&mut self.inner, env => env.write_step(&slots, transitions))?;
        self.scanned(&args)
    }

    /// What follows one step that a device policy took itself (its acting kernel stepped every env on the
    /// actions it chose: `env_scan`'s work with [`Self::args`]`(1)`): [`Self::run_loaded`]'s `(1, 1)` without
    /// its scan.
    pub(crate) fn stepped_by_policy(&mut self) -> Result<(), HostError> {
        let args = self.args(1);
        self.scanned(&args)
    }

    /// The reward statistics and the ring's clock after a scan with `args`.
    fn scanned(&mut self, args: &BatchArgs) -> Result<(), HostError> {
        if self.cfg.ring_capacity > 0 && self.params.iter().any(|p| p.normalize_reward != 0) {
            on_backend!(&mut self.inner, env => env.update_rewards(args))?;
        }
        if self.cfg.ring_capacity > 0 {
            self.written += (args.steps as usize * self.layout.envs_per_trial()) as u64;
        }
        Ok(())
    }

    /// The backend state (for policies that act on the device).
    pub(crate) fn inner_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }

    /// The sampler's arguments for a minibatch of `batch` per trial; advances the draw counter.
    pub(crate) fn sample_args(&mut self, batch: usize) -> Result<SampleArgs, HostError> {
        if self.cfg.ring_capacity == 0 || batch == 0 || batch > 1 << 20 {
            return Err(HostError::Config(format!(
                "sampling {batch} transitions needs a replay ring (ring_capacity > 0) and 1 <= batch <= 2^20"
            )));
        }
        let args = SampleArgs {
            seed: self.cfg.seed,
            draw: self.draws,
            written: self.written,
            batch: batch as u32,
            n_trials: self.layout.trials() as u32,
            capacity: self.cfg.ring_capacity as u32,
            n_features: self.n_features as u32,
            trial_offset: 0,
            _pad: 0,
        };
        self.draws += 1;
        Ok(args)
    }

    /// Bars in the price block.
    pub fn n_bars(&self) -> usize {
        self.n_bars
    }

    /// Features per bar.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// The trials' environment parameters.
    pub fn params(&self) -> &[TrialParams] {
        &self.params
    }

    pub(crate) fn args(&self, steps: usize) -> BatchArgs {
        let capacity = self.cfg.ring_capacity as u64;
        BatchArgs {
            head: if capacity > 0 { self.written % capacity } else { 0 },
            n_bars: self.n_bars as u32,
            n_trials: self.layout.trials() as u32,
            envs_per_trial: self.layout.envs_per_trial() as u32,
            steps: steps as u32,
            capacity: capacity as u32,
            n_features: self.n_features as u32,
        }
    }

    /// Every env's observation (`n_envs x (F + 3)`): its bar's features and its portfolio floats.
    pub fn observations(&mut self) -> Result<Vec<f32>, HostError> {
        let args = self.args(0);
        on_backend!(&mut self.inner, env => env.observe(&args))
    }

    /// Samples `batch` transitions per trial (uniform over the valid ones written) and rebuilds their states.
    pub fn sample(&mut self, batch: usize) -> Result<SampleBatch, HostError> {
        let args = self.sample_args(batch)?;
        on_backend!(&mut self.inner, env => env.sample(&args))
    }

    /// Every env's state (trial-major), copied back from the device when on CUDA.
    pub fn states(&self) -> Result<Vec<EnvState>, HostError> {
        on_backend!(&self.inner, env => env.states())
    }

    /// The whole replay ring, trial-major (`K x capacity`; slots not yet written are zeroed, `valid == 0`).
    pub fn transitions(&self) -> Result<Vec<Transition>, HostError> {
        on_backend!(&self.inner, env => env.transitions())
    }

    /// Each trial's running reward moments (updated when some trial normalizes).
    pub fn reward_moments(&self) -> Result<Vec<Moments>, HostError> {
        on_backend!(&self.inner, env => env.moments())
    }

    /// Transitions written per trial so far.
    pub fn transitions_written(&self) -> u64 {
        self.written
    }
}

/// Checks one trial's parameters (the env and the backtest refuse the same values, naming the field).
pub(crate) fn validate_params(trial: usize, p: &TrialParams) -> Result<(), HostError> {
    let checks: [(&'static str, f64, bool, &'static str); 12] = [
        ("initial_capital", p.initial_capital, p.initial_capital > 0.0, "finite and > 0"),
        ("spread", p.spread, (0.0..2.0).contains(&p.spread), "in [0, 2)"),
        ("commission", p.commission, (0.0..1.0).contains(&p.commission), "in [0, 1)"),
        ("cash_reserve_pct", p.cash_reserve_pct, (0.0..1.0).contains(&p.cash_reserve_pct), "in [0, 1)"),
        ("max_drawdown", p.max_drawdown, (0.0..1.0).contains(&p.max_drawdown), "in [0, 1), 0 disables"),
        ("take_profit_mult", p.take_profit_mult, p.take_profit_mult >= 0.0, ">= 0, 0 disables"),
        ("stop_loss_mult", p.stop_loss_mult, p.stop_loss_mult >= 0.0, ">= 0, 0 disables"),
        ("stop_slippage", p.stop_slippage, (0.0..=1.0).contains(&p.stop_slippage), "in [0, 1]"),
        ("w_pnl", p.w_pnl, true, "finite"),
        ("w_cost", p.w_cost, true, "finite"),
        ("w_drawdown", p.w_drawdown, true, "finite"),
        ("w_barrier", p.w_barrier, true, "finite"),
    ];
    for (field, value, ok, rule) in checks {
        if !(ok && value.is_finite()) {
            return Err(HostError::InvalidParam { trial, field, value, rule });
        }
    }
    let flags = [
        ("allow_short", p.allow_short),
        ("whole_units", p.whole_units),
        ("barrier_exits", p.barrier_exits),
        ("normalize_reward", p.normalize_reward),
    ];
    for (field, flag) in flags {
        if flag > 1 {
            return Err(HostError::InvalidParam { trial, field, value: f64::from(flag), rule: "0 or 1" });
        }
    }
    Ok(())
}
