//! W9: whether the learners learn. The seed searches (`benches/configs/seed-dqn.toml` and `seed-ppo.toml`:
//! 5 trials x 4 epochs, the default search space and defaults, search seed 3) on two planted patterns of
//! [`generate_path`] (40,000 hourly bars, data seed 1): autocorrelated returns (phi 0.4) and regime switches.
//! Each row gives every trial's greedy test Sharpe beside an oracle's and buy-and-hold's on the same test
//! split with the same costs: the oracle knows each bar's planted drift ([`generate_path_with_drifts`]) and
//! holds its sign (long when positive, short when negative, flat when shorts are off), no barriers;
//! buy-and-hold is long throughout. The check: the search's answer (the best trial by validation) reaches
//! half the oracle's test Sharpe. `--quick`: 10,000 bars and the TOMLs shrunk as W6 shrinks them.

use std::time::Instant;

use super::report::Row;
use crate::data::synthetic::{
    DEFAULT_PHI, DEFAULT_REGIME_DRIFT, DEFAULT_SWITCH_PROBABILITY, PathConfig, PathKind, generate_path_with_drifts,
};
use crate::hyperopt::config::EnvSettings;
use crate::hyperopt::job::{Job, JobArgs};
use crate::hyperopt::search::EnvDecimals;
use crate::{Action, Backend, BacktestSpec, Error, Signals, backtest};

/// The TOMLs W9 runs (algorithm, text).
const CONFIGS: [(&str, &str); 2] = [
    ("dqn", include_str!("../../benches/configs/seed-dqn.toml")),
    ("ppo", include_str!("../../benches/configs/seed-ppo.toml")),
];

/// The search seed (docs/PERFORMANCE.md's `--seed 3`) and the data seed.
const SEARCH_SEED: u64 = 3;
const DATA_SEED: u64 = 1;

/// The planted patterns: name, kind, and whether the half-the-oracle target applies.
fn patterns() -> [(&'static str, PathKind, bool); 2] {
    [
        ("autocorrelated returns (phi 0.4)", PathKind::Autocorrelated { phi: DEFAULT_PHI }, true),
        (
            "regime switches (drift 5e-4, switch 1%)",
            PathKind::RegimeSwitch { drift: DEFAULT_REGIME_DRIFT, switch_probability: DEFAULT_SWITCH_PROBABILITY },
            false,
        ),
    ]
}

/// The test Sharpe of a fixed policy: `target(t)` at each decision bar `t` of the test split (decided at
/// its close, filled at the next open), with the search's costs and no barriers.
pub(super) fn policy_sharpe(
    env: &EnvSettings,
    data: &crate::train::SplitData,
    bars_per_year: f64,
    target: impl Fn(usize) -> Action,
) -> Result<f64, Error> {
    let env = EnvDecimals::parse(env)?;
    let params = env.audit_params().to_params()?;
    let steps = data.test.n_bars() - 1;
    let targets: Vec<u8> = (0..steps).map(|t| target(t) as u8).collect();
    let spec = BacktestSpec { start: 0, end: steps, bars_per_year, risk_free: 0.0, ledger: false, equity: false };
    let r = backtest(&Backend::Cpu, &data.test, &[params], Signals::Targets { targets: &targets, columns: 1 }, &spec)?;
    Ok(r.metrics[0].sharpe)
}

/// W9 on `backend`: a row per (algorithm, pattern).
pub fn learning(backend: &Backend, quick: bool) -> Result<Vec<Row>, Error> {
    let bars = if quick { 10_000 } else { 40_000 };
    let mut rows = Vec::new();
    for (pattern, kind, target_applies) in patterns() {
        let (dataset, drifts) =
            generate_path_with_drifts(&PathConfig { kind, bars, seed: DATA_SEED, ..PathConfig::default() })?;
        for (algo, text) in CONFIGS {
            let dir = std::env::temp_dir().join(format!(
                "tradesim-w9-{}-{algo}-{}-{}",
                std::process::id(),
                kind.name(),
                backend.info().backend
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let ran = one(&dir, algo, text, backend, &dataset, &drifts, quick);
            let _ = std::fs::remove_dir_all(&dir);
            let (trials, best, oracle, hold, seconds) = ran?;
            let shown = |x: f64| format!("{x:.2}");
            let list: Vec<String> = trials.iter().map(|&(n, s)| format!("{n}: {}", shown(s))).collect();
            let note = format!(
                "test Sharpe of the trials {}; the search's answer (trial {}) {}; oracle {}; buy-and-hold {}; \
                 {:.1} s",
                list.join(", "),
                best.0,
                shown(best.1),
                shown(oracle),
                shown(hold),
                seconds
            );
            let check = if target_applies {
                let met = best.1 >= oracle / 2.0;
                format!(
                    "{} ({}: test Sharpe {} against half the oracle's {})",
                    if met { "met" } else { "missed" },
                    algo,
                    shown(best.1),
                    shown(oracle / 2.0)
                )
            } else {
                String::new()
            };
            rows.push(
                Row::learning(algo, pattern, backend.info().backend, trials.len(), bars, seconds)
                    .with_note(note)
                    .with_check(check),
            );
        }
    }
    Ok(rows)
}

/// Trials (number, test Sharpe), the search's answer, the oracle's and buy-and-hold's test Sharpes, seconds.
type Outcome = (Vec<(u64, f64)>, (u64, f64), f64, f64, f64);

/// One seed search of `text` on `dataset` in `dir`, and the two fixed policies on its test split.
fn one(
    dir: &std::path::Path,
    algo: &str,
    text: &str,
    backend: &Backend,
    dataset: &crate::data::Dataset,
    drifts: &[f64],
    quick: bool,
) -> Result<Outcome, Error> {
    let text = if quick {
        text.replace("envs = 1024", "envs = 16").replace("segment_len = 256", "segment_len = 32")
    } else {
        text.to_owned()
    };
    let args = JobArgs {
        config_text: Some((format!("benches/configs/seed-{algo}.toml"), text)),
        epochs: quick.then_some(1),
        seed: Some(SEARCH_SEED),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        ..JobArgs::default()
    };
    let job = Job::prepare(&args)?;
    let started = Instant::now();
    let done = job.run(std::slice::from_ref(backend), dataset, None, &|_| Ok(()))?;
    let seconds = started.elapsed().as_secs_f64();
    let mut trials: Vec<(u64, f64)> = done.summary.leaderboard.iter().map(|t| (t.number, t.test_sharpe)).collect();
    let best = trials.first().copied().unwrap_or((0, f64::NAN));
    trials.sort_by_key(|t| t.0);
    let series = &dataset.series[0];
    let data = crate::train::SplitData::new(series, crate::train::DEFAULT_SPLIT, job.cfg.env.sigma_span)?;
    let env = &job.cfg.env;
    let oracle = policy_sharpe(env, &data, done.bars_per_year, |t| oracle(drifts, data.split.test.start, env, t, 1))?;
    let hold = policy_sharpe(env, &data, done.bars_per_year, |_| Action::Long)?;
    Ok((trials, best, oracle, hold, seconds))
}

/// The oracle's target at decision bar `t` of a split starting at bar `start` of the series: the sign of
/// the drift of bar `t + lead` (`lead` 1: the bar the position is held over, decided at bar t's close and
/// filled at the next open); flat when shorts are off and the drift is negative.
pub(super) fn oracle(drifts: &[f64], start: usize, env: &EnvSettings, t: usize, lead: usize) -> Action {
    match drifts.get(start + t + lead) {
        Some(&d) if d > 0.0 => Action::Long,
        Some(&d) if d < 0.0 && env.allow_short => Action::Short,
        _ => Action::Flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle is aligned with the fill rule: trading each bar's own drift (decided the bar before) earns
    /// far more than buy-and-hold, and the same signal one bar late (already spent) earns nothing like it.
    #[test]
    fn the_oracle_trades_the_drift_of_the_bar_it_holds() {
        let kind = PathKind::Autocorrelated { phi: DEFAULT_PHI };
        let (dataset, drifts) =
            generate_path_with_drifts(&PathConfig { kind, bars: 8_000, ..PathConfig::default() }).unwrap();
        let env = EnvSettings::default();
        let data =
            crate::train::SplitData::new(&dataset.series[0], crate::train::DEFAULT_SPLIT, env.sigma_span).unwrap();
        let start = data.split.test.start;
        let sharpe =
            |lead: usize| policy_sharpe(&env, &data, 8760.0, |t| oracle(&drifts, start, &env, t, lead)).unwrap();
        let hold = policy_sharpe(&env, &data, 8760.0, |_| Action::Long).unwrap();
        let (aligned, late) = (sharpe(1), sharpe(0));
        assert!(aligned > 5.0 && aligned > hold + 5.0, "oracle {aligned}, buy-and-hold {hold}");
        assert!(late < aligned / 2.0, "one bar late {late}, aligned {aligned}");
    }
}
