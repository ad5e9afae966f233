//! One trial plan: how a search's configuration and its trials' parameters become a training run. The
//! search's batches, walk-forward's folds and `tradesim train` all plan their runs here, so the sizes (the
//! slots' width and minibatch buffer, the replay ring, PPO's rollouts) follow one set of rules.

use rust_decimal::Decimal;

use super::config::{EnvSettings, SearchConfig, StudyConfig};
use super::hyperparameters::{BATCH, HIDDEN, Hyperparameters, MINIBATCHES};
use super::sampler::Params;
use crate::train::{Algo, TrainConfig, rollout_len, rollouts_per_epoch};
use crate::{DqnParams, Error, PpoParams, TrialParams};

/// Rewards are in percent: the log return, costs and drawdown terms are scaled by this.
pub const REWARD_SCALE: f64 = 100.0;

/// Transitions a DQN trial's replay ring holds per env.
pub const RING_PER_ENV: usize = 64;

/// The environment settings as Decimal values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnvDecimals {
    /// Starting cash.
    pub capital: Decimal,
    /// Spread.
    pub spread: Decimal,
    /// Commission.
    pub commission: Decimal,
    /// Shorts allowed.
    pub allow_short: bool,
    /// Whole units.
    pub whole_units: bool,
    /// `[env] stop_slippage`.
    pub stop_slippage: f64,
    /// The narrowest barrier multiple of sigma (`[env] barrier_floor` typical bar ranges of the training
    /// split, [`barrier_floor_mult`]); 0 without a floor.
    pub barrier_floor_mult: f64,
}

impl EnvDecimals {
    /// Parses the `[env]` table (validated before).
    pub fn parse(e: &EnvSettings) -> Result<Self, Error> {
        let d = |k: &str, t: &str| {
            t.parse::<Decimal>().map_err(|_| Error::Study(format!("env.{k}: `{t}` is not a decimal number")))
        };
        Ok(Self {
            capital: d("capital", &e.capital)?,
            spread: d("spread", &e.spread)?,
            commission: d("commission", &e.commission)?,
            allow_short: e.allow_short,
            whole_units: e.whole_units,
            stop_slippage: e.stop_slippage,
            barrier_floor_mult: 0.0,
        })
    }

    /// These settings with the barrier floor measured on `train` ([`barrier_floor_mult`]).
    pub fn with_floor(self, e: &EnvSettings, train: &crate::MarketData) -> Self {
        Self { barrier_floor_mult: barrier_floor_mult(e.barrier_floor, train.bars()), ..self }
    }

    /// The Decimal parameters of the audit.
    pub fn audit_params(&self) -> crate::audit::DecimalParams {
        crate::audit::DecimalParams::account(
            self.capital,
            self.spread,
            self.commission,
            self.whole_units,
            self.allow_short,
        )
    }
}

/// `floor` typical bar ranges in units of sigma on `bars`: the median of `(high - low) / open` over the
/// median of the positive sigmas, times `floor` (0 when either median is not positive). A barrier of this
/// multiple is as wide as `floor` typical bars' ranges.
pub fn barrier_floor_mult(floor: f64, bars: &[crate::Bar]) -> f64 {
    // The element at the middle position of the sorted values, found without sorting them all.
    let median = |mut v: Vec<f64>| {
        if v.is_empty() {
            return 0.0;
        }
        let mid = v.len() / 2;
        *v.select_nth_unstable_by(mid, f64::total_cmp).1
    };
    let range = median(bars.iter().filter(|b| b.open > 0.0).map(|b| (b.high - b.low) / b.open).collect());
    let sigma = median(bars.iter().map(|b| b.sigma).filter(|s| *s > 0.0).collect());
    if floor > 0.0 && range > 0.0 && sigma > 0.0 { floor * range / sigma } else { 0.0 }
}

/// A trial's environment parameters (rewards in percent, see [`REWARD_SCALE`]); a take-profit or stop-loss
/// multiple below the floor ([`EnvDecimals::barrier_floor_mult`]) is raised to it (0 stays 0: disabled).
/// With `barriers` off every barrier is off (take-profit, stop-loss and holding limit), whatever the
/// multiples.
pub fn env_params(h: &Hyperparameters, env: &EnvDecimals) -> Result<TrialParams, Error> {
    let base = env.audit_params().to_params()?;
    let on = h.barriers;
    let floored = |m: f64| {
        if !on {
            0.0
        } else if m > 0.0 {
            m.max(env.barrier_floor_mult)
        } else {
            m
        }
    };
    Ok(TrialParams {
        w_pnl: REWARD_SCALE,
        w_cost: REWARD_SCALE * h.w_cost,
        w_drawdown: REWARD_SCALE * h.w_drawdown,
        w_barrier: h.w_barrier,
        take_profit_mult: floored(h.take_profit_mult),
        stop_loss_mult: floored(h.stop_loss_mult),
        stop_slippage: env.stop_slippage,
        max_hold_bars: if on { h.max_hold_bars } else { 0 },
        ..base
    })
}

/// A trial's DQN parameters; epsilon decays over `eps_decay` of its `steps_per_trial` env steps.
pub fn dqn_params(h: &Hyperparameters, steps_per_trial: f64) -> DqnParams {
    DqnParams {
        lr: h.lr,
        gamma: h.gamma,
        hidden: h.hidden,
        batch: h.batch,
        eps_decay_steps: (h.eps_decay * steps_per_trial) as f32,
        target_every: h.target_every,
        ..DqnParams::default()
    }
}

/// A trial's PPO parameters; with `anneal_lr`, the learning rate falls to 0 over the run's `rollouts`.
pub fn ppo_params(h: &Hyperparameters, rollouts: usize) -> PpoParams {
    PpoParams {
        lr: h.lr,
        gamma: h.gamma,
        lambda: h.lambda,
        clip: h.clip,
        ent_coef: h.ent_coef,
        hidden: h.hidden,
        batch: h.batch,
        epochs: h.ppo_epochs,
        minibatches: h.minibatches,
        max_grad_norm: h.max_grad_norm,
        clip_vloss: h.clip_vloss,
        anneal_rollouts: if h.anneal_lr { rollouts as u32 } else { 0 },
        adam_eps: h.adam_eps,
        orthogonal_init: h.orthogonal_init,
        norm_adv: h.norm_adv,
        activation: h.activation,
        ..PpoParams::default()
    }
}

/// One trial's learner parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LearnerParam {
    /// A DQN trial's.
    Dqn(DqnParams),
    /// A PPO trial's.
    Ppo(PpoParams),
}

/// The learner parameters of a run's trials, one per slot.
#[derive(Clone, Debug, PartialEq)]
pub enum LearnerParams {
    /// DQN trials.
    Dqn(Vec<DqnParams>),
    /// PPO trials.
    Ppo(Vec<PpoParams>),
}

/// What a training run needs: the run's shape and environments, and its learners' parameters.
#[derive(Clone, Debug)]
pub struct TrialPlan {
    /// Sizes, schedule and each slot's environment.
    pub train: TrainConfig,
    /// Each slot's learner parameters.
    pub learner: LearnerParams,
}

impl TrialPlan {
    /// The replay ring (DQN) or rollout buffer (PPO) per slot for segments of `segment_len` steps.
    pub fn ring_capacity(&self, segment_len: usize) -> usize {
        match self.learner {
            LearnerParams::Dqn(_) => self.train.ring_capacity,
            LearnerParams::Ppo(_) => rollout_len(&self.train, segment_len) * self.train.envs,
        }
    }
}

/// The sizes a run's slots are built for: every trial they may hold fits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlotSizes {
    /// The widest hidden layer.
    pub hidden: usize,
    /// The largest minibatch (DQN; PPO's fixed batch).
    pub batch: usize,
    /// PPO: the fewest positive minibatches a rollout is cut into (its share sizes the buffer).
    pub fewest_minibatches: Option<usize>,
}

impl SlotSizes {
    /// For any trial of `cfg`'s space (a slot that may take any of them).
    pub fn of_space(cfg: &SearchConfig) -> Self {
        let batch_default = if cfg.study.algo == Algo::Ppo { 1.0 } else { 64.0 };
        Self {
            hidden: cfg.space_max(HIDDEN.name, 64.0) as usize,
            batch: cfg.space_max(BATCH.name, batch_default) as usize,
            fewest_minibatches: cfg.space_min_positive(MINIBATCHES.name).map(|m| m as usize),
        }
    }

    /// For these trials only.
    pub fn of_trials(trials: &[Hyperparameters]) -> Self {
        Self {
            hidden: trials.iter().map(|h| h.hidden as usize).fold(1, usize::max),
            batch: trials.iter().map(|h| h.batch as usize).fold(1, usize::max),
            fewest_minibatches: trials.iter().map(|h| h.minibatches as usize).filter(|m| *m > 0).min(),
        }
    }
}

/// Plans the runs of one search configuration on one training split.
#[derive(Clone, Debug)]
pub struct TrialPlanner {
    algo: Algo,
    env: EnvDecimals,
    /// The run's shape without trials (sizes to be set per run).
    base: TrainConfig,
    /// PPO: the run's rollouts (an annealed learning rate reaches 0 at the last).
    rollouts: usize,
    /// Env steps a trial trains on per env (epochs x steps per epoch).
    steps_per_trial: f64,
    /// Transitions of one rollout of all envs (PPO).
    rollout_transitions: usize,
}

impl TrialPlanner {
    /// The planner of `study`'s runs with environment `env` on a training split of `train_bars` bars,
    /// annualizing with `bars_per_year`.
    pub fn new(study: &StudyConfig, env: EnvDecimals, bars_per_year: f64, train_bars: usize) -> Self {
        let mut base = TrainConfig::default_for(0, study.epochs, study.seed);
        base.envs = study.envs;
        base.segment_len = study.segment_len;
        base.ring_capacity = study.envs * RING_PER_ENV;
        base.grad_steps = study.grad_steps;
        base.bars_per_year = bars_per_year;
        if study.algo == Algo::Ppo {
            base.rollout_steps = study.rollout_steps;
        }
        // An epoch's segment is capped at the training bars (the first bar has no previous close).
        let segment = base.segment_len.min(train_bars.saturating_sub(1)).max(1);
        let rollouts = study.epochs * rollouts_per_epoch(&base, segment);
        let rollout_transitions = rollout_len(&base, segment) * base.envs;
        let steps_per_trial = (study.epochs * segment) as f64;
        Self { algo: study.algo, env, base, rollouts, steps_per_trial, rollout_transitions }
    }

    /// The planner of `cfg`'s search on `train` (the barrier floor measured there).
    pub fn for_search(cfg: &SearchConfig, bars_per_year: f64, train: &crate::MarketData) -> Result<Self, Error> {
        let env = EnvDecimals::parse(&cfg.env)?.with_floor(&cfg.env, train);
        Ok(Self::new(&cfg.study, env, bars_per_year, train.n_bars()))
    }

    /// The run's shape without trials: envs, segments, the replay's warm-up, gradient rounds and steps.
    pub fn train_base(&self) -> &TrainConfig {
        &self.base
    }

    /// The environment settings.
    pub fn env(&self) -> &EnvDecimals {
        &self.env
    }

    /// Trial parameters `p`, typed.
    pub fn read(&self, p: &Params) -> Result<Hyperparameters, Error> {
        Hyperparameters::read(p, self.algo)
    }

    /// A trial's environment, its random streams keyed by `key`.
    pub fn trial_env(&self, h: &Hyperparameters, key: u64) -> Result<TrialParams, Error> {
        Ok(TrialParams { key, ..env_params(h, &self.env)? })
    }

    /// A trial's DQN parameters.
    pub fn dqn(&self, h: &Hyperparameters) -> DqnParams {
        dqn_params(h, self.steps_per_trial)
    }

    /// A trial's PPO parameters.
    pub fn ppo(&self, h: &Hyperparameters) -> PpoParams {
        ppo_params(h, self.rollouts)
    }

    /// A trial's learner parameters.
    pub fn learner(&self, h: &Hyperparameters) -> LearnerParam {
        match self.algo {
            Algo::Dqn => LearnerParam::Dqn(self.dqn(h)),
            Algo::Ppo => LearnerParam::Ppo(self.ppo(h)),
        }
    }

    /// PPO: the run's rollouts.
    pub fn rollouts(&self) -> usize {
        self.rollouts
    }

    /// The run of `trials` (one per slot: its environment and learner parameters) in slots of `sizes`:
    /// the networks' stride is the widest hidden layer; the minibatch buffer holds the largest batch and,
    /// for PPO, the largest split's share of a rollout; DQN's replay ring holds [`RING_PER_ENV`]
    /// transitions per env; every trial's own width and batch stay its own (padding never changes a
    /// trial's bits), but DQN's stand-ins take the slot sizes.
    pub fn plan(&self, trials: Vec<(TrialParams, LearnerParam)>, sizes: SlotSizes) -> Result<TrialPlan, Error> {
        let mut train = self.base.clone();
        train.hidden = sizes.hidden;
        train.batch = sizes.batch;
        if let (Algo::Ppo, Some(fewest)) = (self.algo, sizes.fewest_minibatches) {
            train.batch = train.batch.max(self.rollout_transitions.div_ceil(fewest));
        }
        train.env_params = trials.iter().map(|t| t.0).collect();
        let mismatch = || Error::Study(format!("a {} plan given another learner's parameters", self.algo));
        let learner = match self.algo {
            Algo::Dqn => LearnerParams::Dqn(
                trials
                    .iter()
                    .map(|t| if let LearnerParam::Dqn(d) = t.1 { Ok(d) } else { Err(mismatch()) })
                    .collect::<Result<_, _>>()?,
            ),
            Algo::Ppo => LearnerParams::Ppo(
                trials
                    .iter()
                    .map(|t| if let LearnerParam::Ppo(p) = t.1 { Ok(p) } else { Err(mismatch()) })
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(TrialPlan { train, learner })
    }

    /// The run of a batch of `slots` slots of `sizes`, each holding trial `first` (keyed by its slot) until
    /// its own trial is placed: the stand-ins take the slots' width (and DQN's batch).
    pub fn plan_batch(&self, slots: usize, first: &Hyperparameters, sizes: SlotSizes) -> Result<TrialPlan, Error> {
        let hidden = sizes.hidden as u32;
        let learner = match self.learner(first) {
            LearnerParam::Dqn(d) => LearnerParam::Dqn(DqnParams { hidden, batch: sizes.batch as u32, ..d }),
            LearnerParam::Ppo(p) => LearnerParam::Ppo(PpoParams { hidden, ..p }),
        };
        let trials =
            (0..slots as u64).map(|k| Ok((self.trial_env(first, k)?, learner))).collect::<Result<_, Error>>()?;
        self.plan(trials, sizes)
    }

    /// The run of one trial `h` alone, keyed by `key`.
    pub fn plan_one(&self, h: &Hyperparameters, key: u64) -> Result<TrialPlan, Error> {
        self.plan(vec![(self.trial_env(h, key)?, self.learner(h))], SlotSizes::of_trials(std::slice::from_ref(h)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hyperopt::hyperparameters::{self, BARRIERS};

    fn trial(barriers: Option<f64>) -> Hyperparameters {
        let mut p: Params = hyperparameters::space_for(Algo::Dqn)
            .into_iter()
            .map(|(k, d)| {
                let v = match d {
                    crate::hyperopt::config::Dimension::Fixed(x) => x,
                    crate::hyperopt::config::Dimension::Range { low, .. } => low,
                    crate::hyperopt::config::Dimension::Choice { choices } => choices[choices.len() - 1],
                };
                (k, v)
            })
            .collect();
        p.insert(hyperparameters::TAKE_PROFIT_MULT.name.to_owned(), 0.5);
        p.insert(hyperparameters::STOP_LOSS_MULT.name.to_owned(), 3.0);
        p.insert(hyperparameters::MAX_HOLD_BARS.name.to_owned(), 24.0);
        p.remove(BARRIERS.name);
        if let Some(b) = barriers {
            p.insert(BARRIERS.name.to_owned(), b);
        }
        Hyperparameters::read(&p, Algo::Dqn).unwrap()
    }

    /// The floor's medians are the sorted values' middle elements (odd and even counts, zero and negative
    /// sigmas left out, a zero open's range left out), and a non-positive median or floor gives 0.
    #[test]
    fn the_barrier_floor_is_the_ratio_of_the_sorted_medians() {
        let bar = |i: u64| {
            let open = if i.is_multiple_of(17) { 0.0 } else { 1.0 + (crate::data::synthetic::normal(3, 1, i) * 0.01) };
            let range = 0.002 + 0.001 * crate::data::synthetic::normal(3, 2, i).abs();
            let sigma = if i.is_multiple_of(13) { 0.0 } else { 0.001 * crate::data::synthetic::normal(3, 3, i) };
            crate::Bar { open, high: open + range, low: open, close: open, sigma }
        };
        let sorted_median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        for n in [1usize, 2, 7, 50, 51] {
            let bars: Vec<crate::Bar> = (0..n as u64).map(|i| bar(i + 1)).collect();
            let range =
                sorted_median(bars.iter().filter(|b| b.open > 0.0).map(|b| (b.high - b.low) / b.open).collect());
            let sigmas: Vec<f64> = bars.iter().map(|b| b.sigma).filter(|s| *s > 0.0).collect();
            let want = if sigmas.is_empty() { 0.0 } else { 2.5 * range / sorted_median(sigmas) };
            assert_eq!(barrier_floor_mult(2.5, &bars).to_bits(), want.to_bits(), "{n} bars");
        }
        let bars: Vec<crate::Bar> = (1..40).map(bar).collect();
        assert_eq!(barrier_floor_mult(0.0, &bars), 0.0);
        assert_eq!(barrier_floor_mult(2.5, &[]), 0.0);
    }

    /// `barriers = 0` turns every barrier off whatever the multiples; `1` (and a trial stored before the
    /// parameter existed) keeps them, the floor raising a narrow one.
    #[test]
    fn barriers_off_disables_take_profit_stop_loss_and_holding_limit() {
        let env = EnvDecimals { barrier_floor_mult: 1.2, ..EnvDecimals::parse(&EnvSettings::default()).unwrap() };
        let off = env_params(&trial(Some(0.0)), &env).unwrap();
        assert_eq!((off.take_profit_mult, off.stop_loss_mult, off.max_hold_bars), (0.0, 0.0, 0));
        for on in [trial(Some(1.0)), trial(None)] {
            let p = env_params(&on, &env).unwrap();
            assert_eq!((p.take_profit_mult, p.stop_loss_mult, p.max_hold_bars), (1.2, 3.0, 24));
        }
    }

    /// A batch's slots are sized for the space while a trial alone is sized for itself; PPO's buffer holds
    /// the fewest minibatches' share of a rollout; DQN's ring holds 64 transitions an env.
    #[test]
    fn a_plan_sizes_its_slots_by_one_rule() {
        let env = EnvDecimals::parse(&EnvSettings::default()).unwrap();
        let dqn = SearchConfig::for_algo(Algo::Dqn);
        let planner = TrialPlanner::new(&dqn.study, env, 252.0, 10_000);
        let h = trial(None);
        let batch = planner.plan_batch(3, &h, SlotSizes::of_space(&dqn)).unwrap();
        assert_eq!((batch.train.hidden, batch.train.batch, batch.train.env_params.len()), (128, 128, 3));
        assert_eq!(batch.ring_capacity(dqn.study.segment_len), dqn.study.envs * RING_PER_ENV);
        let LearnerParams::Dqn(d) = &batch.learner else { panic!("a DQN plan") };
        assert!(d.iter().all(|d| d.hidden == 128 && d.batch == 128));
        assert_eq!(batch.train.env_params.iter().map(|e| e.key).collect::<Vec<_>>(), vec![0, 1, 2]);
        let one = planner.plan_one(&h, 7).unwrap();
        assert_eq!((one.train.hidden, one.train.batch, one.train.env_params[0].key), (128, 128, 7));

        let ppo = SearchConfig::for_algo(Algo::Ppo);
        let planner = TrialPlanner::new(&ppo.study, env, 252.0, 10_000);
        let p = planner
            .read(
                &hyperparameters::space_for(Algo::Ppo)
                    .into_iter()
                    .map(|(k, d)| {
                        let v = match d {
                            crate::hyperopt::config::Dimension::Fixed(x) => x,
                            crate::hyperopt::config::Dimension::Range { low, .. } => low,
                            crate::hyperopt::config::Dimension::Choice { choices } => choices[0],
                        };
                        (k, v)
                    })
                    .collect(),
            )
            .unwrap();
        let plan = planner.plan_one(&p, 0).unwrap();
        let n = ppo.study.rollout_steps.min(ppo.study.segment_len) * ppo.study.envs;
        assert_eq!(plan.train.batch, n.div_ceil(32));
        assert_eq!(plan.ring_capacity(ppo.study.segment_len), n);
        let LearnerParams::Ppo(q) = &plan.learner else { panic!("a PPO plan") };
        assert_eq!(q[0].anneal_rollouts as usize, planner.rollouts());
        assert!(
            planner
                .plan(
                    vec![(plan.train.env_params[0], LearnerParam::Dqn(DqnParams::default()))],
                    SlotSizes::of_trials(&[p])
                )
                .is_err()
        );
    }
}
