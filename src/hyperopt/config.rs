//! The search configuration: a TOML file (every key optional; unknown keys are errors naming the key) or the
//! defaults below, then command-line overrides.
//!
//! ```toml
//! [study]
//! algo = "dqn"          # dqn | ppo (PPO's space: lr, gamma, lambda, clip, ent_coef, hidden, ppo_epochs,
//!                       # minibatches = 32, max_grad_norm = 0.5, clip_vloss = 1, anneal_lr = 1,
//!                       # adam_eps = 1e-5, orthogonal_init = 1, norm_adv = 1 (per-minibatch advantage
//!                       # normalization), activation = 1 (1 tanh, 0 relu; fixed only) (CleanRL's
//!                       # defaults but minibatches, CleanRL's 4, and rollout_steps, CleanRL's 128; `batch`
//!                       # only with minibatches = 0), and the reward and barrier keys below)
//! trials = 10           # trials in the study
//! parallel = 5          # trials trained at once in the same launches (K; the budget's)
//! epochs = 4            # epochs per trial (the budget's)
//! n_startup_trials = 10 # uniform trials before TPE (Optuna's name; `startup_trials` is accepted too)
//! n_ei_candidates = 24  # TPE: candidates drawn from the good trials' density per sample
//! gamma = 25            # TPE: the good set is the min(ceil(0.1 n), gamma) best finished trials
//! multivariate = true   # TPE: one joint density over the dimensions (false: one per dimension)
//! constant_liar = true  # TPE: running and claimed trials count as bad, so a batch spreads out
//!                       # (docs/SAMPLER.md; Optuna 5.0's TPESampler defaults)
//! prune = "median"      # median | none: Optuna's MedianPruner: from epoch `prune_warmup_epochs` on,
//!                       # once `prune_startup_trials` trials are complete, a trial whose best validation
//!                       # metric so far is below the median of the complete trials' metrics at the same
//!                       # epoch is pruned (all-NaN so far: pruned; no complete trial has the epoch: kept)
//! prune_startup_trials = 5
//! prune_warmup_epochs = 0
//! budget = "auto"       # auto | cpu | gpu: the defaults of envs, segment_len, epochs, parallel and
//!                       # grad_steps (Budget): cpu 64 x 128 x 4 epochs, 5 at a time, 1 gradient step;
//!                       # gpu 1,024 x 256 x 4 epochs, 10 at a time, 2 gradient steps; auto: the device the
//!                       # study is created on. Values given here or as flags win.
//! envs = 64             # envs per trial (the budget's)
//! segment_len = 128     # steps per env and epoch (the budget's)
//! heartbeat_seconds = 10 # a worker's heartbeat for its running trials (Optuna's trial_heartbeats)
//! stale_seconds = 60    # a running trial without a heartbeat this long (or whose worker process on this
//!                       # host is gone) is re-run by another worker under its number and parameters
//! max_runs = 3          # a trial whose worker stopped (died or went silent) in each of this many runs
//!                       # becomes FAIL, its reason in the user attribute `fail_reason`, instead of running again
//! rollout_steps = 64    # PPO: steps per env and rollout (CleanRL's num_steps, 128 there): ceil(segment_len /
//!                       # rollout_steps) rollouts per epoch, each followed by its updates; 0: one per epoch
//! grad_steps = 1        # DQN: gradient steps after every env step of the batch (each env of every trial
//!                       # stepped once; the budget's)
//! placebo = 0           # placebo searches on surrogate bars (docs/EVIDENCE.md); >= 19 can show p <= 0.05
//! walk_forward = 0      # anchored walk-forward folds of the best configuration (0: none)
//! walk_forward_search = 0 # walk-forward optimisation: the whole search again on each of K anchored folds'
//!                       # past, its winner tested on the fold (0: none)
//! # artifacts = "DIR"   # an Optuna artifact store (FileSystemArtifactStore's layout) for every finished
//! #                     # trial's checkpoint and test ledger; a relative path is each worker's own
//!
//! [env]                 # environment settings shared by all trials (Decimal strings for money)
//! capital = "100000"
//! spread = "0.0002"
//! commission = "0.0001"
//! allow_short = true
//! whole_units = false
//! sigma_span = 100       # EWMA span (bars) of the volatility that sets barrier widths
//! stop_slippage = 0.15   # a stop touched inside a bar fills this share of the bar's range beyond its level
//! barrier_floor = 1.0    # barriers narrower than this many typical bar ranges are widened to it (0: off)
//!
//! [space]               # each entry: { low, high, log = bool } | { choices = [...] } | a fixed number
//! lr = { low = 1e-4, high = 3e-3, log = true }
//! gamma = { low = 0.8, high = 0.99 }
//! hidden = { choices = [32, 64, 128] }
//! batch = { choices = [64, 128] }
//! eps_decay = { low = 0.2, high = 0.8 }       # fraction of a trial's env steps
//! target_every = { choices = [50, 100, 200] }
//! w_cost = { low = 0.0, high = 2.0 }
//! w_drawdown = { low = 0.0, high = 1.0 }
//! w_barrier = 0.0
//! barriers = { choices = [0, 1] }              # 0: no take-profit, no stop-loss, no holding limit (a
//!                                               # position is held until the policy changes it); 1: the
//!                                               # three barriers below
//! take_profit_mult = { low = 1.0, high = 5.0 }  # 0 (fixed) disables the barrier
//! stop_loss_mult = { low = 1.0, high = 5.0 }
//! max_hold_bars = { choices = [0, 24, 96] }
//! ```

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

pub use super::hyperparameters::Dimension;
use super::hyperparameters::{self, ACTIVATION, BATCH, LR, MINIBATCHES};
use crate::Error;
pub use crate::train::Algo;

/// When a trial stops early (`study.prune`, `--prune`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PruneRule {
    /// Optuna's `MedianPruner` ([`crate::hyperopt::search::should_prune`]).
    #[default]
    Median,
    /// Every trial runs all its epochs.
    None,
}

impl std::fmt::Display for PruneRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Median => "median",
            Self::None => "none",
        })
    }
}

/// The machine a search's default budget is sized for (`[study] budget`, `--budget`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BudgetFor {
    /// The device the study is created on.
    #[default]
    Auto,
    /// A small CPU's ([`Budget::CPU`]).
    Cpu,
    /// A GPU's ([`Budget::GPU`]).
    Gpu,
}

impl std::fmt::Display for BudgetFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
        })
    }
}

/// What a trial trains on: envs, steps per env and epoch, epochs; and how many trials train at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Envs per trial.
    pub envs: usize,
    /// Steps per env and epoch.
    pub segment_len: usize,
    /// Epochs per trial.
    pub epochs: usize,
    /// Trials trained at once.
    pub parallel: usize,
    /// DQN: gradient steps after every env step of the batch.
    pub grad_steps: usize,
}

impl Budget {
    /// Sized for a 2-core CPU (`run.sh`'s job of 20 searches of 10 trials and 3 walk-forward folds, on 2
    /// cores: docs/PERFORMANCE.md); 32,768 env steps a trial.
    pub const CPU: Self = Self { envs: 64, segment_len: 128, epochs: 4, parallel: 5, grad_steps: 1 };
    /// Sized for one data-centre GPU: 1,048,576 env steps a trial (1,024 envs x 256 steps x 4 epochs), the
    /// ten trials of a default study trained in one batch, two DQN gradient steps after every env step of
    /// the batch (docs/CLI.md, "Budgets").
    pub const GPU: Self = Self { envs: 1024, segment_len: 256, epochs: 4, parallel: 10, grad_steps: 2 };

    /// The budget `which` names; `Auto` is the GPU's when `gpu`, else the CPU's.
    pub fn of(which: BudgetFor, gpu: bool) -> Self {
        match which {
            BudgetFor::Gpu => Self::GPU,
            BudgetFor::Cpu => Self::CPU,
            BudgetFor::Auto if gpu => Self::GPU,
            BudgetFor::Auto => Self::CPU,
        }
    }
}

/// The `[study]` keys a budget sets (and that, given explicitly, win over it).
pub const BUDGET_KEYS: [&str; 5] = ["envs", "segment_len", "epochs", "parallel", "grad_steps"];

/// The `[study]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StudyConfig {
    /// Algorithm.
    pub algo: Algo,
    /// Trials in the study.
    pub trials: usize,
    /// Trials trained at once.
    pub parallel: usize,
    /// Epochs per trial.
    pub epochs: usize,
    /// Uniform trials before TPE (Optuna's `n_startup_trials`; the key `startup_trials` is an alias).
    #[serde(rename = "n_startup_trials", alias = "startup_trials")]
    pub startup_trials: usize,
    /// TPE's candidates per sample (Optuna's `n_ei_candidates`).
    pub n_ei_candidates: usize,
    /// The cap of TPE's good set: `min(ceil(0.1 n), gamma)` (Optuna's `default_gamma`).
    pub gamma: usize,
    /// TPE's joint density over the dimensions (Optuna's `multivariate`).
    pub multivariate: bool,
    /// Running and claimed trials count as bad for TPE (Optuna's `constant_liar`).
    pub constant_liar: bool,
    /// Pruning rule.
    pub prune: PruneRule,
    /// Median pruning starts once this many trials are complete (Optuna's `n_startup_trials`).
    pub prune_startup_trials: usize,
    /// Median pruning never acts before this epoch (Optuna's `n_warmup_steps`).
    pub prune_warmup_epochs: u64,
    /// The machine the defaults of `envs`, `segment_len`, `epochs` and `parallel` are sized for; a created
    /// study stores the one it resolved to (`cpu` or `gpu`, never `auto`).
    pub budget: BudgetFor,
    /// Where the study's budget came from (set when it is created; shown in the search's header).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub budget_from: String,
    /// Envs per trial.
    pub envs: usize,
    /// Steps per env and epoch.
    pub segment_len: usize,
    /// PPO: steps per env and rollout (CleanRL's `num_steps`); an epoch's segment is collected in
    /// `ceil(segment_len / rollout_steps)` rollouts, each followed by its updates; 0: one per epoch.
    pub rollout_steps: usize,
    /// DQN: gradient steps after every env step of the batch (every env of every trial stepped once).
    pub grad_steps: usize,
    /// Seed.
    pub seed: u64,
    /// Seconds between a worker's heartbeats for the trials it runs.
    pub heartbeat_seconds: f64,
    /// A running trial whose heartbeat is older than this (or whose worker process on this host is gone) is
    /// re-run by another worker under the same number and parameters.
    pub stale_seconds: f64,
    /// A trial whose worker stopped (died or went silent) in each of this many runs fails instead of running
    /// again (Optuna fails stale trials).
    pub max_runs: u64,
    /// Placebo searches: the same search on this many surrogate series without any predictable direction
    /// (docs/EVIDENCE.md); 19 or more can show p <= 0.05.
    pub placebo: usize,
    /// Anchored walk-forward folds of the best configuration after the search (0: none).
    pub walk_forward: usize,
    /// Walk-forward optimisation: anchored folds on each of which the whole search runs again on the fold's
    /// past and its winner is tested on the fold (0: none).
    pub walk_forward_search: usize,
    /// An Optuna artifact store (a folder, `FileSystemArtifactStore`'s layout) each finished trial's
    /// checkpoint and test ledger are uploaded to (`--artifacts` overrides it and, for a new study, is stored
    /// here as an absolute path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<String>,
}

impl Default for StudyConfig {
    fn default() -> Self {
        Self {
            algo: Algo::Dqn,
            trials: 10,
            parallel: Budget::CPU.parallel,
            epochs: Budget::CPU.epochs,
            startup_trials: 10,
            n_ei_candidates: 24,
            gamma: 25,
            multivariate: true,
            constant_liar: true,
            prune: PruneRule::Median,
            prune_startup_trials: 5,
            prune_warmup_epochs: 0,
            budget: BudgetFor::Auto,
            budget_from: String::new(),
            envs: Budget::CPU.envs,
            segment_len: Budget::CPU.segment_len,
            rollout_steps: 64,
            grad_steps: Budget::CPU.grad_steps,
            seed: 7,
            heartbeat_seconds: 10.0,
            stale_seconds: 60.0,
            max_runs: 3,
            placebo: 0,
            walk_forward: 0,
            walk_forward_search: 0,
            artifacts: None,
        }
    }
}

/// The `[env]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvSettings {
    /// Starting cash (Decimal).
    pub capital: String,
    /// Spread fraction (Decimal).
    pub spread: String,
    /// Commission fraction (Decimal).
    pub commission: String,
    /// Shorts allowed.
    pub allow_short: bool,
    /// Whole units.
    pub whole_units: bool,
    /// EWMA span (bars) of the volatility sigma that sets barrier widths.
    pub sigma_span: usize,
    /// A stop-loss touched inside a bar fills this fraction of the bar's range beyond its level (a
    /// stop-market order; `TrialParams::stop_slippage`).
    pub stop_slippage: f64,
    /// The narrowest take-profit or stop-loss, in typical bar ranges of the training split: a trial's
    /// multiple of sigma below it is raised to it (`0` disables the floor).
    pub barrier_floor: f64,
}

/// The default `[env] stop_slippage`: the overshoot a level sees when prices are observed at about a dozen
/// points a bar (docs/ENVIRONMENT.md, "Fills a search cannot farm").
pub const DEFAULT_STOP_SLIPPAGE: f64 = 0.15;
/// The default `[env] barrier_floor`: one typical bar range.
pub const DEFAULT_BARRIER_FLOOR: f64 = 1.0;

impl Default for EnvSettings {
    fn default() -> Self {
        Self {
            capital: "100000".to_owned(),
            spread: crate::DEFAULT_SPREAD.to_owned(),
            commission: crate::DEFAULT_COMMISSION.to_owned(),
            allow_short: true,
            whole_units: false,
            sigma_span: crate::DEFAULT_SIGMA_SPAN,
            stop_slippage: DEFAULT_STOP_SLIPPAGE,
            barrier_floor: DEFAULT_BARRIER_FLOOR,
        }
    }
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// `[study]`.
    pub study: StudyConfig,
    /// `[env]`.
    pub env: EnvSettings,
    /// `[space]` (only what the file names; [`SearchConfig::from_toml`] adds the algorithm's defaults).
    #[serde(default)]
    pub space: BTreeMap<String, Dimension>,
}

/// The searchable parameters of DQN and their default dimensions.
pub fn default_space() -> BTreeMap<String, Dimension> {
    space_for(Algo::Dqn)
}

/// The searchable parameters of `algo` (dqn or ppo) and their default dimensions
/// ([`hyperparameters::space_for`]).
pub fn space_for(algo: Algo) -> BTreeMap<String, Dimension> {
    hyperparameters::space_for(algo)
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self::for_algo(Algo::Dqn)
    }
}

/// Whether parameter `name` takes whole numbers (ranges of it are sampled as integers, both ends included).
pub fn is_integer(name: &str) -> bool {
    hyperparameters::find(name).is_some_and(|p| p.integer)
}

impl StudyConfig {
    /// Env steps a trial trains on (envs x steps per epoch x epochs).
    pub fn env_steps(&self) -> usize {
        self.envs * self.segment_len * self.epochs
    }

    /// Resolves [`Self::budget`] for a study created on a GPU (`gpu`) or a CPU: the budget's envs, steps,
    /// epochs and trials at once replace every value whose `[study]` key is not in `explicit`, `budget`
    /// becomes `cpu` or `gpu`, and `budget_from` says where the values came from.
    pub fn resolve_budget(&mut self, gpu: bool, explicit: &[String]) {
        let b = Budget::of(self.budget, gpu);
        let which = if b == Budget::GPU { BudgetFor::Gpu } else { BudgetFor::Cpu };
        let given = |key: &str| explicit.iter().any(|k| k == key);
        for (key, field, value) in [
            ("envs", &mut self.envs, b.envs),
            ("segment_len", &mut self.segment_len, b.segment_len),
            ("epochs", &mut self.epochs, b.epochs),
            ("parallel", &mut self.parallel, b.parallel),
            ("grad_steps", &mut self.grad_steps, b.grad_steps),
        ] {
            if !given(key) {
                *field = value;
            }
        }
        let origin = match (self.budget, gpu) {
            (BudgetFor::Auto, true) => "the GPU's defaults (budget = auto on a GPU)".to_owned(),
            (BudgetFor::Auto, false) => "the CPU's defaults (budget = auto on the CPU)".to_owned(),
            (chosen, _) => format!("the {}'s defaults (budget = {chosen})", chosen.to_string().to_uppercase()),
        };
        let mine: Vec<&str> = BUDGET_KEYS.iter().copied().filter(|k| given(k)).collect();
        self.budget = which;
        self.budget_from = if mine.is_empty() { origin } else { format!("{origin}, {} as given", mine.join(", ")) };
    }
}

/// The `[study]` keys a TOML text sets (none when it has no `[study]` table or does not parse).
pub fn study_keys(text: &str) -> Vec<String> {
    let table: Result<toml::Table, _> = toml::from_str(text);
    match table.ok().and_then(|t| t.get("study").cloned()) {
        Some(toml::Value::Table(study)) => study.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

impl SearchConfig {
    /// The largest value parameter `name` can take in the space (rounded up), or `default` when the space
    /// does not name it: the slots of a batch are sized for any trial the search may start in them.
    pub fn space_max(&self, name: &str, default: f64) -> f64 {
        match self.space.get(name) {
            Some(Dimension::Fixed(v)) => *v,
            Some(Dimension::Range { high, .. }) => high.ceil(),
            Some(Dimension::Choice { choices }) => choices.iter().copied().fold(f64::NAN, f64::max),
            None => default,
        }
    }

    /// The smallest positive value parameter `name` can take in the space (rounded down, at least 1), or
    /// `None` when it takes none (or the space does not name it).
    pub fn space_min_positive(&self, name: &str) -> Option<f64> {
        let positive = |v: f64| (v > 0.0).then_some(v);
        match self.space.get(name)? {
            Dimension::Fixed(v) => positive(*v),
            Dimension::Range { low, high, .. } => (*high >= 1.0).then(|| low.floor().max(1.0)),
            Dimension::Choice { choices } => choices.iter().copied().filter(|v| *v > 0.0).reduce(f64::min),
        }
    }

    /// The defaults for `algo`.
    pub fn for_algo(algo: Algo) -> Self {
        Self {
            study: StudyConfig { algo, ..StudyConfig::default() },
            env: EnvSettings::default(),
            space: space_for(algo),
        }
    }

    /// Parses a TOML file's text; the `[space]` table overrides the default dimensions (of `study.algo`) it
    /// names.
    pub fn from_toml(text: &str) -> Result<Self, Error> {
        // The TOML error names the key and the line (e.g. an unknown `study.algo` variant).
        let mut cfg: SearchConfig = toml::from_str(text).map_err(|e| Error::config("config", e.to_string()))?;
        let mut space = space_for(cfg.study.algo);
        space.extend(std::mem::take(&mut cfg.space));
        cfg.space = space;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks every key and value, naming the key at fault.
    pub fn validate(&self) -> Result<(), Error> {
        let s = &self.study;
        for (key, v) in [
            ("study.trials", s.trials),
            ("study.parallel", s.parallel),
            ("study.epochs", s.epochs),
            ("study.n_ei_candidates", s.n_ei_candidates),
            ("study.gamma", s.gamma),
            ("study.grad_steps", s.grad_steps),
        ] {
            if v == 0 {
                return Err(Error::config(key, "must be at least 1"));
            }
        }
        if s.max_runs == 0 {
            return Err(Error::config("study.max_runs", "must be at least 1"));
        }
        for (key, v) in
            [("study.envs", s.envs), ("study.segment_len", s.segment_len), ("env.sigma_span", self.env.sigma_span)]
        {
            if v == 0 {
                return Err(Error::config(key, "must be at least 1"));
            }
        }
        if !(0.0..=1.0).contains(&self.env.stop_slippage) {
            return Err(Error::config("env.stop_slippage", format!("{} must be in [0, 1]", self.env.stop_slippage)));
        }
        if !(0.0..=100.0).contains(&self.env.barrier_floor) {
            return Err(Error::config("env.barrier_floor", format!("{} must be in [0, 100]", self.env.barrier_floor)));
        }
        if !(s.heartbeat_seconds > 0.0 && s.stale_seconds > s.heartbeat_seconds) {
            return Err(Error::config(
                "study.stale_seconds",
                format!(
                    "{} must exceed study.heartbeat_seconds ({}), which must be positive",
                    s.stale_seconds, s.heartbeat_seconds
                ),
            ));
        }
        for (key, text) in [
            ("env.capital", &self.env.capital),
            ("env.spread", &self.env.spread),
            ("env.commission", &self.env.commission),
        ] {
            let d: Decimal =
                text.parse().map_err(|_| Error::config(key, format!("`{text}` is not a decimal number")))?;
            if d < Decimal::ZERO || (key == "env.capital" && d == Decimal::ZERO) {
                return Err(Error::config(key, format!("{text} must be positive")));
            }
        }
        if s.algo == Algo::Ppo {
            let split = self.space.get(MINIBATCHES.name) != Some(&Dimension::Fixed(0.0));
            match (self.space.get(BATCH.name), split) {
                (Some(_), true) => {
                    return Err(Error::config(
                        format!("space.{}", BATCH.name),
                        "PPO splits each rollout into `minibatches` (default 32); a fixed batch needs minibatches = 0",
                    ));
                }
                (None, false) => {
                    return Err(Error::config(
                        format!("space.{}", MINIBATCHES.name),
                        format!("0 (a fixed batch) needs space.{}", BATCH.name),
                    ));
                }
                _ => {}
            }
            let zero_among = match self.space.get(MINIBATCHES.name) {
                Some(Dimension::Range { low, .. }) => *low < 1.0,
                Some(Dimension::Choice { choices }) => choices.contains(&0.0),
                _ => false,
            };
            if zero_among {
                return Err(Error::config(
                    format!("space.{}", MINIBATCHES.name),
                    "searched values must be at least 1 (0, a fixed batch, only as a fixed value)",
                ));
            }
        }
        if matches!(self.space.get(ACTIVATION.name), Some(Dimension::Range { .. } | Dimension::Choice { .. })) {
            return Err(Error::config(
                format!("space.{}", ACTIVATION.name),
                "must be a fixed value (1 tanh, 0 relu): the trials trained at once share their layers' launches",
            ));
        }
        for (name, dim) in &self.space {
            let Some(param) = hyperparameters::find(name).filter(|p| p.known(s.algo)) else {
                let names: Vec<&str> =
                    hyperparameters::ALL.iter().filter(|p| p.known(s.algo)).map(|p| p.name).collect();
                return Err(Error::config(
                    format!("space.{name}"),
                    format!("unknown parameter for {} (known: {})", s.algo, names.join(", ")),
                ));
            };
            let (min, max, integer) = (param.min, param.max, param.integer);
            let key = format!("space.{name}");
            let check = |x: f64| -> Result<(), Error> {
                if !x.is_finite() || x < min || x > max {
                    let what = if name == LR.name && x <= 0.0 {
                        "the learning rate must be positive".to_owned()
                    } else {
                        format!("must be in [{min}, {max}]")
                    };
                    return Err(Error::config(&key, format!("{x} is invalid: {what}")));
                }
                if integer && x.fract() != 0.0 {
                    return Err(Error::config(&key, format!("{x} must be a whole number")));
                }
                Ok(())
            };
            match dim {
                Dimension::Fixed(x) => check(*x)?,
                Dimension::Range { low, high, log } => {
                    check(*low)?;
                    check(*high)?;
                    if low >= high {
                        return Err(Error::config(
                            key,
                            format!("empty range [{low}, {high}] (low must be below high)"),
                        ));
                    }
                    if *log && *low <= 0.0 {
                        return Err(Error::config(key, "a log range needs low > 0"));
                    }
                }
                Dimension::Choice { choices } => {
                    if choices.is_empty() {
                        return Err(Error::config(key, "empty choices"));
                    }
                    choices.iter().try_for_each(|&c| check(c))?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The search, `tradesim train` and the CLI's backtest flags share one set of default costs.
    #[test]
    fn every_default_cost_is_the_crates() {
        let env = EnvSettings::default();
        assert_eq!((env.spread.as_str(), env.commission.as_str()), (crate::DEFAULT_SPREAD, crate::DEFAULT_COMMISSION));
        let p = crate::train::TrainConfig::default_for(1, 1, 0).env_params[0];
        assert_eq!((p.spread, p.commission), (0.0002, 0.0001));
    }

    #[test]
    fn ppo_files_get_the_ppo_space() {
        let cfg = SearchConfig::from_toml("[study]\nalgo = \"ppo\"\n[space]\nclip = 0.25\n").unwrap();
        assert_eq!(cfg.space["clip"], Dimension::Fixed(0.25));
        assert!(cfg.space.contains_key("lambda") && !cfg.space.contains_key("eps_decay"), "{:?}", cfg.space.keys());
    }

    /// The text of the configuration error `text` gives; any other kind of error fails the test.
    fn config_error(text: &str) -> String {
        match SearchConfig::from_toml(text).unwrap_err() {
            e @ Error::Config { .. } => e.to_string(),
            other => panic!("not a configuration error: {other:?}"),
        }
    }

    #[test]
    fn ppo_splits_rollouts_unless_asked_for_a_fixed_batch() {
        let err = |text: &str| config_error(&format!("[study]\nalgo = \"ppo\"\n[space]\n{text}"));
        assert!(err("batch = 64\n").contains("space.batch: PPO splits each rollout"));
        assert!(err("minibatches = 0\n").contains("needs space.batch"));
        assert!(err("minibatches = { choices = [0, 4] }\n").contains("at least 1"));
        let cfg = SearchConfig::from_toml("[study]\nalgo = \"ppo\"\n[space]\nminibatches = 0\nbatch = 64\n").unwrap();
        assert_eq!(cfg.space["batch"], Dimension::Fixed(64.0));
        let cfg = SearchConfig::from_toml("[study]\nalgo = \"ppo\"\n").unwrap();
        assert_eq!(cfg.space["minibatches"], Dimension::Fixed(32.0));
        assert_eq!(cfg.space["max_grad_norm"], Dimension::Fixed(0.5));
    }

    #[test]
    fn defaults_validate_and_files_override_them() {
        SearchConfig::default().validate().unwrap();
        let cfg = SearchConfig::from_toml("[study]\ntrials = 3\n[space]\nlr = 0.001\n").unwrap();
        assert_eq!(cfg.study.trials, 3);
        assert_eq!(cfg.space["lr"], Dimension::Fixed(0.001));
        assert_eq!(cfg.space["gamma"], default_space()["gamma"]);
    }

    /// `auto` takes the device's budget; values given in the file or as flags win; the resolved study
    /// says which budget and what was given.
    #[test]
    fn the_budget_fits_the_device_and_explicit_values_win() {
        let mut gpu = SearchConfig::default().study;
        gpu.resolve_budget(true, &[]);
        assert_eq!((gpu.envs, gpu.segment_len, gpu.epochs, gpu.parallel, gpu.grad_steps), (1024, 256, 4, 10, 2));
        assert!(gpu.env_steps() >= 1_000_000 && gpu.budget == BudgetFor::Gpu, "{gpu:?}");
        assert!(gpu.budget_from.contains("GPU's defaults"), "{}", gpu.budget_from);
        let text = "[study]\nenvs = 32\nbudget = \"gpu\"\n";
        let mut cfg = SearchConfig::from_toml(text).unwrap().study;
        cfg.resolve_budget(false, &study_keys(text));
        assert_eq!((cfg.envs, cfg.segment_len, cfg.epochs, cfg.parallel), (32, 256, 4, 10));
        assert!(cfg.budget_from.ends_with("(budget = gpu), envs as given"), "{}", cfg.budget_from);
        let mut cpu = SearchConfig::default().study;
        cpu.resolve_budget(false, &["epochs".to_owned()]);
        assert_eq!((cpu.envs, cpu.segment_len, cpu.parallel, cpu.budget), (64, 128, 5, BudgetFor::Cpu));
        assert!(config_error("[study]\nbudget = \"tpu\"\n").contains("budget"));
    }

    #[test]
    fn bad_configs_name_the_key() {
        let err = config_error;
        assert!(err("[study]\ntrails = 3\n").contains("trails"));
        assert!(err("[space]\nlearning_rate = 0.1\n").contains("space.learning_rate"));
        assert!(err("[space]\nlr = { low = 0.01, high = 0.001 }\n").contains("space.lr: empty range"));
        assert!(err("[space]\nlr = -0.1\n").contains("space.lr: -0.1 is invalid: the learning rate must be positive"));
        assert!(err("[space]\nhidden = { choices = [] }\n").contains("space.hidden: empty choices"));
        assert!(err("[space]\nhidden = 12.5\n").contains("whole number"));
        assert!(err("[study]\nparallel = 0\n").contains("study.parallel"));
        assert!(err("[env]\nspread = \"a lot\"\n").contains("env.spread"));
        assert!(err("[space]\nlr = { low = 0.0, high = 0.1, log = true }\n").contains("space.lr"));
    }
}
