//! W9: whether the learners learn what a market offers and stay out where it offers nothing. The default
//! search of each algorithm (its default space, 10 trials, search seed 3, and the budget of the device it
//! runs on: docs/CLI.md, "Budgets") on four patterns of [`generate_path`] (40,000 hourly bars, data seed 1):
//! a trend (drift 1.5e-4 a bar), a null (a random walk), autocorrelated returns (phi 0.4) and regime
//! switches. Each row gives every trial's greedy test Sharpe and the search's answer's (the best trial by
//! its validation score) with its trades, beside buy-and-hold's, flat's (no trade: 0) and an oracle's on the
//! same test split with the same costs: the oracle knows each bar's planted drift
//! ([`generate_path_with_drifts`]) and holds its sign (long when positive, short when negative, flat when
//! shorts are off), no barriers. The checks (docs/PERFORMANCE.md, "A search that learns what the market
//! offers"): on the trend the answer reaches half buy-and-hold's test Sharpe; on the null it trades at most
//! one round trip per 200 test bars or its test Sharpe is within [-1, 1]; on the autocorrelated returns it
//! reaches half the oracle's; on the regimes it reaches buy-and-hold's. With a GPU and the CPU both in the
//! run, the GPU also runs each CPU row's search (the CPU's budget) and the two leaderboards must agree bit
//! for bit. `--quick`: 10,000 bars, 2 trials of 1 epoch on 16 envs x 32 steps (a smoke test: the targets'
//! outcomes are shown, and at that size say nothing about the learners).

use std::time::Instant;

use super::report::Row;
use crate::data::synthetic::{
    DEFAULT_PHI, DEFAULT_REGIME_DRIFT, DEFAULT_SWITCH_PROBABILITY, PathConfig, PathKind, generate_path_with_drifts,
};
use crate::hyperopt::config::{BudgetFor, EnvSettings};
use crate::hyperopt::plan::EnvDecimals;
use crate::job::{Job, JobArgs};
use crate::{Action, Backend, BacktestSpec, Error, Signals, backtest};

/// The algorithms W9 searches with.
const ALGOS: [crate::train::Algo; 2] = [crate::train::Algo::Dqn, crate::train::Algo::Ppo];

/// The search seed (docs/PERFORMANCE.md's `--seed 3`) and the data seed.
const SEARCH_SEED: u64 = 3;
const DATA_SEED: u64 = 1;

/// The trend's drift per bar (docs/SYNTHETIC.md, "Trend": a per-bar Sharpe of 0.075 at the default sigma).
pub const TREND_DRIFT: f64 = 1.5e-4;

/// What a pattern's answer must reach.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    /// Half buy-and-hold's test Sharpe.
    HalfHold,
    /// At most one round trip per 200 test bars, or a test Sharpe within [-1, 1].
    Flat,
    /// Half the oracle's test Sharpe.
    HalfOracle,
    /// Buy-and-hold's test Sharpe.
    Hold,
}

/// The patterns: name, kind, target.
fn patterns() -> [(&'static str, PathKind, Target); 4] {
    [
        ("a trend (drift 1.5e-4 a bar)", PathKind::Trend { drift: TREND_DRIFT }, Target::HalfHold),
        ("a random walk (nothing to learn)", PathKind::RandomWalk, Target::Flat),
        ("autocorrelated returns (phi 0.4)", PathKind::Autocorrelated { phi: DEFAULT_PHI }, Target::HalfOracle),
        (
            "regime switches (drift 5e-4, switch 1%)",
            PathKind::RegimeSwitch { drift: DEFAULT_REGIME_DRIFT, switch_probability: DEFAULT_SWITCH_PROBABILITY },
            Target::Hold,
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
    // A policy that never trades keeps its cash: 0, as the search scores it.
    let m = &r.metrics[0];
    Ok(if m.trades == 0.0 && m.sharpe.is_nan() { 0.0 } else { m.sharpe })
}

/// A search's outcome: every trial's (number, test Sharpe), the answer's number, test Sharpe and trades, the
/// leaderboard's bits (number, value, test Sharpe), the budget's origin, seconds.
struct Searched {
    trials: Vec<(u64, f64)>,
    best: (u64, f64, f64),
    bits: Vec<(u64, u64, u64)>,
    budget: String,
    seconds: f64,
}

/// W9 on `backends`: a row per (algorithm, pattern, backend).
pub fn learning(backends: &[Backend], quick: bool) -> Result<Vec<Row>, Error> {
    let bars = if quick { 10_000 } else { 40_000 };
    let gpu = backends.iter().find(|b| b.is_cuda());
    let mut rows = Vec::new();
    for (pattern, kind, target) in patterns() {
        let (dataset, drifts) =
            generate_path_with_drifts(&PathConfig { kind, bars, seed: DATA_SEED, ..PathConfig::default() })?;
        let series = &dataset.series[0];
        let env = EnvSettings::default();
        let data = crate::train::SplitData::new(series, crate::train::DEFAULT_SPLIT, env.sigma_span)?;
        let year = crate::data::time::infer_bars_per_year(&series.bars.iter().map(|b| b.time).collect::<Vec<_>>());
        let start = data.split.test.start;
        let oracle = policy_sharpe(&env, &data, year, |t| oracle(&drifts, start, &env, t, 1))?;
        let hold = policy_sharpe(&env, &data, year, |_| Action::Long)?;
        let test_bars = data.test.n_bars().saturating_sub(1);
        for algo in ALGOS {
            for backend in backends {
                let s = search(algo, backend, &dataset, kind, quick, None)?;
                let shown = |x: f64| format!("{x:.2}");
                let list: Vec<String> = s.trials.iter().map(|&(n, x)| format!("{n}: {}", shown(x))).collect();
                let (number, sharpe, trades) = s.best;
                let note = format!(
                    "test Sharpe of the trials {}; the answer (trial {number}) {} with {trades} trades; buy-and-hold \
                     {}; flat 0; oracle {}; {:.1} s",
                    list.join(", "),
                    shown(sharpe),
                    shown(hold),
                    shown(oracle),
                    s.seconds
                );
                let mut check = judge(target, sharpe, trades, test_bars, hold, oracle);
                // The GPU runs the CPU row's search too: the same bits.
                if let (false, Some(g)) = (backend.is_cuda(), gpu) {
                    let twin = search(algo, g, &dataset, kind, quick, Some(BudgetFor::Cpu))?;
                    let same = if twin.bits == s.bits {
                        "the GPU's run of it bit for bit the same"
                    } else {
                        "DIFFERS from the GPU's run of it"
                    };
                    check = if check.is_empty() { same.to_owned() } else { format!("{check}; {same}") };
                }
                rows.push(
                    Row::learning(
                        &algo.to_string(),
                        pattern,
                        &s.budget,
                        backend.info().backend,
                        s.trials.len(),
                        bars,
                        s.seconds,
                    )
                    .with_note(note)
                    .with_check(check),
                );
            }
        }
    }
    Ok(rows)
}

/// Whether the answer's test Sharpe (`trades` trades over `test_bars` bars) reaches `target`.
fn judge(target: Target, sharpe: f64, trades: f64, test_bars: usize, hold: f64, oracle: f64) -> String {
    let met = |ok: bool| if ok { "met" } else { "missed" };
    // An answer that never traded has no Sharpe ratio; it kept its cash: 0.
    let sharpe = if sharpe.is_nan() && trades == 0.0 { 0.0 } else { sharpe };
    match target {
        Target::HalfHold => {
            format!("{}: {sharpe:.2} against half buy-and-hold's {:.2}", met(sharpe >= hold / 2.0), hold / 2.0)
        }
        Target::HalfOracle => {
            format!("{}: {sharpe:.2} against half the oracle's {:.2}", met(sharpe >= oracle / 2.0), oracle / 2.0)
        }
        Target::Hold => format!("{}: {sharpe:.2} against buy-and-hold's {hold:.2}", met(sharpe >= hold)),
        Target::Flat => {
            // A trade is a round trip in the metrics (a position opened and closed).
            let allowed = test_bars as f64 / 200.0;
            let rare = trades <= allowed;
            let small = (-1.0..=1.0).contains(&sharpe);
            format!(
                "{}: {trades} trades (at most {allowed:.0} allowed) or a test Sharpe of {sharpe:.2} within [-1, 1]",
                met(rare || small)
            )
        }
    }
}

/// The default search of `algo` on `dataset` in a fresh folder, with the device's budget or `budget`.
fn search(
    algo: crate::train::Algo,
    backend: &Backend,
    dataset: &crate::data::Dataset,
    kind: PathKind,
    quick: bool,
    budget: Option<BudgetFor>,
) -> Result<Searched, Error> {
    let dir = std::env::temp_dir().join(format!(
        "tradesim-w9-{}-{algo}-{}-{}-{}",
        std::process::id(),
        kind.name(),
        backend.info().backend,
        budget.map_or("auto".to_owned(), |b| b.to_string())
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let args = JobArgs {
        algo: Some(algo),
        budget,
        trials: quick.then_some(2),
        parallel: quick.then_some(2),
        epochs: quick.then_some(1),
        envs: quick.then_some(16),
        segment_len: quick.then_some(32),
        seed: Some(SEARCH_SEED),
        gpu: backend.is_cuda(),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        ..JobArgs::default()
    };
    let ran = (|| {
        let job = Job::prepare(&args)?;
        let started = Instant::now();
        let done = job.run(std::slice::from_ref(backend), dataset, None, &|_| Ok(()))?;
        Ok::<_, Error>((job.cfg.study.budget_from.clone(), done, started.elapsed().as_secs_f64()))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (budget, done, seconds) = ran?;
    let board = &done.summary.leaderboard;
    let bits = board.iter().map(|t| (t.number, t.value.to_bits(), t.test_sharpe.to_bits())).collect();
    let answer = board.first().map_or((0, f64::NAN), |t| (t.number, t.test_sharpe));
    let trades = done.summary.best_test.as_ref().map_or(f64::NAN, |m| m.trades);
    let mut trials: Vec<(u64, f64)> = board.iter().map(|t| (t.number, t.test_sharpe)).collect();
    trials.sort_by_key(|t| t.0);
    Ok(Searched { trials, best: (answer.0, answer.1, trades), bits, budget, seconds })
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
