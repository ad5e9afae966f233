//! A trial's parameters as the environment and the learners take them (costs and stops in Decimal, then
//! the kernels' floats), the objective, and the median pruning rule.

use rust_decimal::Decimal;

use crate::hyperopt::config::EnvSettings;
use crate::hyperopt::sampler::Params;
use crate::hyperopt::study::{EpochRecord, TrialRecord};
use crate::{DqnParams, Error, PpoParams, TrialParams};

/// Rewards are in percent: the log return, costs and drawdown terms are scaled by this.
pub const REWARD_SCALE: f64 = 100.0;

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

fn get(p: &Params, k: &str) -> Result<f64, Error> {
    p.get(k).copied().ok_or_else(|| Error::Study(format!("trial parameters lack `{k}`")))
}

/// `floor` typical bar ranges in units of sigma on `bars`: the median of `(high - low) / open` over the
/// median of the positive sigmas, times `floor` (0 when either median is not positive). A barrier of this
/// multiple is as wide as `floor` typical bars' ranges.
pub fn barrier_floor_mult(floor: f64, bars: &[crate::Bar]) -> f64 {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() { 0.0 } else { v[v.len() / 2] }
    };
    let range = median(bars.iter().filter(|b| b.open > 0.0).map(|b| (b.high - b.low) / b.open).collect());
    let sigma = median(bars.iter().map(|b| b.sigma).filter(|s| *s > 0.0).collect());
    if floor > 0.0 && range > 0.0 && sigma > 0.0 { floor * range / sigma } else { 0.0 }
}

/// A trial's environment parameters (rewards in percent, see [`REWARD_SCALE`]); a take-profit or stop-loss
/// multiple below the floor ([`EnvDecimals::barrier_floor_mult`]) is raised to it (0 stays 0: disabled).
/// With `barriers = 0` every barrier is off (take-profit, stop-loss and holding limit), whatever the
/// multiples; a trial stored before `barriers` existed had them on.
pub fn env_params(p: &Params, env: &EnvDecimals) -> Result<TrialParams, Error> {
    let base = env.audit_params().to_params()?;
    let on = p.get("barriers").copied().unwrap_or(1.0) != 0.0;
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
        w_cost: REWARD_SCALE * get(p, "w_cost")?,
        w_drawdown: REWARD_SCALE * get(p, "w_drawdown")?,
        w_barrier: get(p, "w_barrier")?,
        take_profit_mult: floored(get(p, "take_profit_mult")?),
        stop_loss_mult: floored(get(p, "stop_loss_mult")?),
        stop_slippage: env.stop_slippage,
        max_hold_bars: if on { get(p, "max_hold_bars")? as u32 } else { 0 },
        ..base
    })
}

/// A trial's DQN parameters; epsilon decays over `eps_decay` of its `steps_per_trial` env steps.
pub fn dqn_params(p: &Params, steps_per_trial: f64) -> Result<DqnParams, Error> {
    Ok(DqnParams {
        lr: get(p, "lr")? as f32,
        gamma: get(p, "gamma")? as f32,
        hidden: get(p, "hidden")? as u32,
        batch: get(p, "batch")? as u32,
        eps_decay_steps: (get(p, "eps_decay")? * steps_per_trial) as f32,
        target_every: get(p, "target_every")? as u32,
        ..DqnParams::default()
    })
}

/// A trial's PPO parameters; with `anneal_lr`, the learning rate falls to 0 over the run's `rollouts`.
pub fn ppo_params(p: &Params, rollouts: usize) -> Result<PpoParams, Error> {
    Ok(PpoParams {
        lr: get(p, "lr")? as f32,
        gamma: get(p, "gamma")? as f32,
        lambda: get(p, "lambda")? as f32,
        clip: get(p, "clip")? as f32,
        ent_coef: get(p, "ent_coef")? as f32,
        hidden: get(p, "hidden")? as u32,
        batch: p.get("batch").copied().unwrap_or(1.0) as u32,
        epochs: get(p, "ppo_epochs")? as u32,
        minibatches: get(p, "minibatches")? as u32,
        max_grad_norm: get(p, "max_grad_norm")? as f32,
        clip_vloss: get(p, "clip_vloss")? as u32,
        anneal_rollouts: if get(p, "anneal_lr")? != 0.0 { rollouts as u32 } else { 0 },
        adam_eps: get(p, "adam_eps")? as f32,
        orthogonal_init: get(p, "orthogonal_init")? as u32,
        // A trial stored before these parameters existed trained without normalization, with ReLU.
        norm_adv: p.get("norm_adv").copied().unwrap_or(0.0) as u32,
        activation: p.get("activation").copied().unwrap_or(f64::from(gpu_kernels::mlp::ACT_RELU)) as u32,
        ..PpoParams::default()
    })
}

/// The z of [`objective`]'s one-sided 95% confidence bound.
pub const OBJECTIVE_Z: f64 = 1.645;

/// A trial's objective from its greedy validation metrics over `returns` per-bar returns (annualized with
/// `bars_per_year`): the lower end of the one-sided 95% confidence interval of its Sharpe ratio,
/// `(SR - z sqrt((1 + SR^2 / 2) / T)) x sqrt(bars per year)` with the per-bar Sharpe SR, T returns and
/// z = [`OBJECTIVE_Z`] (the standard error of Lo 2002 for independent normal returns). A policy that made no
/// trade scores exactly 0: it keeps its cash, which is certain (its Sharpe ratio is undefined, NaN in the
/// metrics, and would otherwise turn the trial into a FAIL that TPE learns nothing from). So a trading
/// policy ranks above staying flat only when its validation returns show, at 95%, that it beats flat: the
/// luckiest of many skill-less policies is not the search's answer on bars without anything to learn, while
/// a real edge of a validation Sharpe well above the bound's width still is (docs/EVIDENCE.md).
pub fn objective(m: &crate::Metrics, returns: usize, bars_per_year: f64) -> f64 {
    if m.trades == 0.0 && m.sharpe.is_nan() {
        return 0.0;
    }
    if !m.sharpe.is_finite() || returns == 0 || bars_per_year <= 0.0 {
        return m.sharpe;
    }
    let annual = bars_per_year.sqrt();
    let sr = m.sharpe / annual;
    (sr - OBJECTIVE_Z * ((1.0 + 0.5 * sr * sr) / returns as f64).sqrt()) * annual
}

/// The median rule of Optuna's `MedianPruner` (maximizing): prune at `epoch` when the trial's best value so
/// far (`own`: its values at epochs 0..=epoch; NaN ignored) is below the median of the complete trials'
/// values at `epoch` (`complete`: their epoch records; NaN ignored; the mean of the two middle values for
/// an even count). Never before `warmup` epochs, nor before `startup` trials (at least one) are complete,
/// nor when no complete trial has a value at `epoch`. A trial whose values so far are all NaN is pruned.
pub fn should_prune(
    own: &[f64],
    epoch: u64,
    complete: &[EpochRecord],
    n_complete: usize,
    startup: usize,
    warmup: u64,
) -> bool {
    if n_complete == 0 || n_complete < startup || epoch < warmup {
        return false;
    }
    let best = own.iter().copied().filter(|x| !x.is_nan()).fold(f64::NAN, f64::max);
    if best.is_nan() {
        return true;
    }
    let mut at: Vec<f64> =
        complete.iter().filter(|e| e.epoch == epoch && !e.valid_sharpe.is_nan()).map(|e| e.valid_sharpe).collect();
    if at.is_empty() {
        return false;
    }
    at.sort_by(f64::total_cmp);
    let n = at.len();
    let median = if n % 2 == 1 { at[n / 2] } else { 0.5 * (at[n / 2 - 1] + at[n / 2]) };
    best < median
}

/// The median rule's reference for a trial with `history`: the epochs of the complete trials among the
/// trials it saw (not of trials finished since), and how many they are. So a trial re-run on resume is
/// pruned where it was the first time.
pub fn pruning_reference(trials: &[TrialRecord], epochs: &[EpochRecord], history: &[u64]) -> (Vec<EpochRecord>, usize) {
    let seen: Vec<u64> = trials
        .iter()
        .filter(|t| t.finished() && t.status == "complete" && history.binary_search(&t.number).is_ok())
        .map(|t| t.number)
        .collect();
    let at = epochs.iter().filter(|e| seen.binary_search(&e.trial).is_ok()).cloned().collect();
    (at, seen.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(barriers: Option<f64>) -> Params {
        let mut p: Params = [
            ("w_cost", 1.0),
            ("w_drawdown", 0.5),
            ("w_barrier", 0.0),
            ("take_profit_mult", 0.5),
            ("stop_loss_mult", 3.0),
            ("max_hold_bars", 24.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(b) = barriers {
            p.insert("barriers".to_owned(), b);
        }
        p
    }

    /// `barriers = 0` turns every barrier off whatever the multiples; `1` (and a trial stored before the
    /// parameter existed) keeps them, the floor raising a narrow one.
    #[test]
    fn barriers_off_disables_take_profit_stop_loss_and_holding_limit() {
        let env = EnvDecimals { barrier_floor_mult: 1.2, ..EnvDecimals::parse(&EnvSettings::default()).unwrap() };
        let off = env_params(&params(Some(0.0)), &env).unwrap();
        assert_eq!((off.take_profit_mult, off.stop_loss_mult, off.max_hold_bars), (0.0, 0.0, 0));
        for on in [params(Some(1.0)), params(None)] {
            let p = env_params(&on, &env).unwrap();
            assert_eq!((p.take_profit_mult, p.stop_loss_mult, p.max_hold_bars), (1.2, 3.0, 24));
        }
    }
}
