//! W11 `tradesim bench portfolio` (issue 55, item 7): the portfolio env ([`crate::PortfolioEnvBatch`]) at
//! N = 10 and N = 100 symbols x 4,096 envs (4 trials x 1,024), one scan of 256 steps of seeded random
//! action codes over a seeded synthetic universe, on the CPU and the GPU; each GPU row checked bit for bit
//! against the CPU on a sample of its envs in the same run. With `--finrl PYTHON`, FinRL's
//! `PortfolioOptimizationEnv` steps the same bars on the CPU (`benches/peers/finrl_portfolio.py`). Then the
//! universe learners' training epochs on the same universes' kind ([`super::universe`], rows `W11u`).

use std::path::Path;
use std::time::Instant;

use super::end_to_end::Scratch;
use super::learners::profiled;
use super::report::Row;
use super::universe::UniverseLearnerSizes;
use crate::data::synthetic::{GeneratorConfig, generate};
use crate::{
    AccountState, Backend, Error, PortfolioEnvBatch, PortfolioScan, PortfolioStep, TrialParams, UniverseMarket,
};

const SCRIPT: &str = include_str!("../../benches/peers/finrl_portfolio.py");

/// Sizes of W11.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortfolioSizes {
    /// The universes' symbol counts.
    pub symbols: [usize; 2],
    /// Trials and envs per trial.
    pub trials: usize,
    /// Envs per trial.
    pub envs_per_trial: usize,
    /// Steps of the timed scan.
    pub steps: usize,
    /// Envs of the GPU rows checked against the CPU (spread over the batch, the first and last among them).
    pub checked: usize,
    /// Episodes of `steps` steps the FinRL peer runs per universe.
    pub peer_episodes: usize,
}

impl PortfolioSizes {
    /// The full run: 4 trials x 1,024 envs, 256 steps.
    pub const FULL: Self =
        Self { symbols: [10, 100], trials: 4, envs_per_trial: 1_024, steps: 256, checked: 64, peer_episodes: 2 };
    /// A smoke test for CI: 2 trials x 16 envs, 32 steps.
    pub const QUICK: Self =
        Self { symbols: [10, 100], trials: 2, envs_per_trial: 16, steps: 32, checked: 8, peer_episodes: 1 };
}

/// Times beyond the scan's steps: each env starts at its own time among the first `SLACK`.
const SLACK: usize = 64;

/// Trial `k`: the demo's costs, shorts and whole units ([`super::demo_params`]), no barriers (the portfolio
/// env has none).
fn trial(k: usize) -> TrialParams {
    TrialParams { take_profit_mult: 0.0, stop_loss_mult: 0.0, max_hold_bars: 0, ..super::demo_params(k) }
}

/// The seeded synthetic universe of `n` symbols over `times` hourly times (every symbol has every bar).
fn universe(n: usize, times: usize) -> Result<UniverseMarket, Error> {
    let dataset = generate(&GeneratorConfig { bars: times, symbols: n, seed: 42, bar_seconds: 3_600 });
    let universe = crate::data::universe::Universe::new(dataset, None)?;
    crate::data::device::universe_market(&universe)
}

/// Env `e`'s segment: `steps` steps from its own start.
fn segment(e: usize, steps: usize) -> (usize, usize) {
    let start = (e * 7) % SLACK;
    (start, start + steps)
}

/// What one backend's row measured, kept for the check.
struct Measured {
    seconds: f64,
    kernel_ms: Option<f64>,
    scan: PortfolioScan,
    accounts: Vec<AccountState>,
    units: Vec<f64>,
}

/// A warm-up scan, the timed scan (the actions' upload, the launch, the outputs' download), and on a GPU
/// the same scan again with its launch bracketed by CUDA events.
fn measure(
    backend: &Backend,
    market: &UniverseMarket,
    params: &[TrialParams],
    sizes: &PortfolioSizes,
    actions: &[u8],
) -> Result<Measured, Error> {
    let mut env = PortfolioEnvBatch::new(backend, market, params, sizes.envs_per_trial)?;
    let segments: Vec<_> = (0..env.n_envs()).map(|e| segment(e, sizes.steps)).collect();
    env.reset(&segments)?;
    env.scan(actions, sizes.steps)?;
    env.reset(&segments)?;
    let started = Instant::now();
    let scan = env.scan(actions, sizes.steps)?;
    let seconds = started.elapsed().as_secs_f64();
    let (accounts, units) = (env.accounts()?, env.units()?);
    let profile = profiled(backend, || {
        env.reset(&segments)?;
        env.scan(actions, sizes.steps)?;
        Ok(())
    })?;
    let kernel_ms = profile.map(|p| p.kernels.iter().map(|k| k.2).sum());
    Ok(Measured { seconds, kernel_ms, scan, accounts, units })
}

/// The envs a GPU row is checked on: `count` spread over `n_envs`, the first and the last among them.
fn check_sample(n_envs: usize, count: usize) -> Vec<usize> {
    let count = count.clamp(1, n_envs);
    let mut sample: Vec<usize> = (0..count).map(|i| i * (n_envs - 1) / (count - 1).max(1)).collect();
    sample.dedup();
    sample
}

/// The bits of a step outcome.
fn step_bits(s: &PortfolioStep) -> [u64; 5] {
    let flags = u64::from(s.done) | u64::from(s.valid) << 8 | u64::from(s.rebalanced) << 16 | u64::from(s._pad) << 24;
    [s.reward.to_bits(), s.equity.to_bits(), s.costs.to_bits(), u64::from(s.bar), flags]
}

/// Runs the envs `sample` of the batch alone on the CPU (each its own trial of one env, with its trial's
/// parameters, segment and actions: an env's run reads nothing of the others) and compares every step
/// outcome, side, final account and unit with `got` bit for bit. Agreement is the row's check note.
fn cpu_check(
    market: &UniverseMarket,
    params: &[TrialParams],
    sizes: &PortfolioSizes,
    actions: &[u8],
    got: &Measured,
) -> Result<String, Error> {
    let n = market.n_symbols();
    let n_envs = params.len() * sizes.envs_per_trial;
    let sample = check_sample(n_envs, sizes.checked);
    let own: Vec<TrialParams> = sample.iter().map(|&e| params[e / sizes.envs_per_trial]).collect();
    let mut cpu = PortfolioEnvBatch::new(&Backend::Cpu, market, &own, 1)?;
    cpu.reset(&sample.iter().map(|&e| segment(e, sizes.steps)).collect::<Vec<_>>())?;
    let mut picked = Vec::with_capacity(sizes.steps * sample.len() * n);
    for step in 0..sizes.steps {
        for &e in &sample {
            let at = (step * n_envs + e) * n;
            picked.extend_from_slice(&actions[at..at + n]);
        }
    }
    let want = cpu.scan(&picked, sizes.steps)?;
    let (accounts, units) = (cpu.accounts()?, cpu.units()?);
    let differ = |what: &str, env: usize, step: Option<usize>| {
        let at = step.map_or(String::new(), |s| format!(" at step {s}"));
        Err(Error::Output(format!("W11: the GPU differs from the CPU in env {env}{at} of {n_envs} ({what}, N = {n})")))
    };
    for (i, &e) in sample.iter().enumerate() {
        for step in 0..sizes.steps {
            let (w, g) = (&want.steps[step * sample.len() + i], &got.scan.steps[step * n_envs + e]);
            if step_bits(w) != step_bits(g) {
                return differ("step outcome", e, Some(step));
            }
            let (w, g) = ((step * sample.len() + i) * n, (step * n_envs + e) * n);
            if want.sides[w..w + n] != got.scan.sides[g..g + n] {
                return differ("sides", e, Some(step));
            }
        }
        if format!("{:?}", accounts[i]) != format!("{:?}", got.accounts[e]) {
            return differ("final account", e, None);
        }
        let bits = |u: &[f64]| u.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        if bits(&units[i * n..(i + 1) * n]) != bits(&got.units[e * n..(e + 1) * n]) {
            return differ("final units", e, None);
        }
    }
    Ok(format!(
        "{} of {n_envs} envs bitwise equal to a CPU run of them: every step's outcome and sides ({} steps), the \
         final accounts and units",
        sample.len(),
        sizes.steps
    ))
}

/// W11: each universe on each backend, then the FinRL peer on each universe when `finrl` is given.
pub fn portfolio(backends: &[Backend], quick: bool, finrl: Option<&Path>) -> Result<Vec<Row>, Error> {
    let mut rows = portfolio_sized(backends, &if quick { PortfolioSizes::QUICK } else { PortfolioSizes::FULL }, finrl)?;
    let sizes = if quick { UniverseLearnerSizes::QUICK } else { UniverseLearnerSizes::FULL };
    rows.extend(super::universe::universe_learners(backends, &sizes, universe, trial)?);
    Ok(rows)
}

/// W11 at `sizes`.
pub fn portfolio_sized(backends: &[Backend], sizes: &PortfolioSizes, finrl: Option<&Path>) -> Result<Vec<Row>, Error> {
    let params: Vec<TrialParams> = (0..sizes.trials).map(trial).collect();
    let n_envs = sizes.trials * sizes.envs_per_trial;
    let mut rows = Vec::new();
    for &n in &sizes.symbols {
        let market = universe(n, sizes.steps + 1 + SLACK)?;
        // Drawn once up front, outside the timing; each timed scan uploads them (on the GPU) in its wall time.
        let actions = super::random_actions(sizes.steps * n_envs * n, 11);
        for backend in backends {
            let m = measure(backend, &market, &params, sizes, &actions)?;
            let check =
                if backend.is_cuda() { cpu_check(&market, &params, sizes, &actions, &m)? } else { String::new() };
            let threads = if backend.is_cuda() { 0 } else { backend.info().parallelism };
            let steps = n_envs * sizes.steps;
            rows.push(
                Row::portfolio(backend.info().backend, n, n_envs, steps, m.seconds, m.kernel_ms, threads)
                    .with_check(check),
            );
        }
        if let Some(python) = finrl {
            rows.push(finrl_row(python, &market, sizes, &actions, n_envs)?);
        }
    }
    Ok(rows)
}

/// The universe as the long CSV FinRL reads: `date,tic,open,high,low,close`, times in order, symbols in
/// order within a time (the f64 prices every backend steps).
fn write_csv(market: &UniverseMarket, path: &Path) -> Result<(), Error> {
    use std::fmt::Write as _;
    let n = market.n_symbols();
    let mut text = String::from("date,tic,open,high,low,close\n");
    for t in 0..market.n_times() {
        let date = chrono::DateTime::from_timestamp(1_577_836_800 + 3_600 * t as i64, 0).unwrap_or_default();
        for (s, b) in market.bars()[t * n..(t + 1) * n].iter().enumerate() {
            let _ = writeln!(
                text,
                "{},SYN{s},{:?},{:?},{:?},{:?}",
                date.format("%Y-%m-%d %H:%M:%S"),
                b.open,
                b.high,
                b.low,
                b.close
            );
        }
    }
    std::fs::write(path, text).map_err(Error::io(path))
}

/// The FinRL peer on `market`: `peer_episodes` episodes of `steps` steps of one env each (FinRL's env is one
/// account stepped by Python), the actions of envs 0, 1, ... of the batch as weights (long: an equal share;
/// flat and short: none; none long: all cash; the env has no shorts).
fn finrl_row(
    python: &Path,
    market: &UniverseMarket,
    sizes: &PortfolioSizes,
    actions: &[u8],
    n_envs: usize,
) -> Result<Row, Error> {
    let n = market.n_symbols();
    let dir = std::env::temp_dir().join(format!("tradesim-finrl-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let scratch = Scratch(dir);
    let (script, csv, codes) =
        (scratch.0.join("finrl_portfolio.py"), scratch.0.join("universe.csv"), scratch.0.join("actions.u8"));
    std::fs::write(&script, SCRIPT).map_err(Error::io(&script))?;
    write_csv(market, &csv)?;
    // Episode k's codes, step-major: env k's N codes at each step.
    let episodes = sizes.peer_episodes.min(n_envs);
    let mut picked = Vec::with_capacity(episodes * sizes.steps * n);
    for k in 0..episodes {
        for step in 0..sizes.steps {
            let at = (step * n_envs + k) * n;
            picked.extend_from_slice(&actions[at..at + n]);
        }
    }
    std::fs::write(&codes, &picked).map_err(Error::io(&codes))?;
    let args = [
        "--csv".to_owned(),
        csv.display().to_string(),
        "--actions".to_owned(),
        codes.display().to_string(),
        "--symbols".to_owned(),
        n.to_string(),
        "--steps".to_owned(),
        sizes.steps.to_string(),
        "--episodes".to_owned(),
        episodes.to_string(),
        "--commission".to_owned(),
        format!("{:?}", trial(0).commission),
        "--workdir".to_owned(),
        scratch.0.display().to_string(),
    ];
    let out = std::process::Command::new(python)
        .arg(&script)
        .args(&args)
        .output()
        .map_err(|e| Error::Output(format!("could not run {}: {e}", python.display())))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.lines().last().unwrap_or("killed without a message");
        return Err(Error::Output(format!("the FinRL peer failed ({}): {why}", out.status)));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .ok_or_else(|| Error::Output("the FinRL peer printed no JSON line".to_owned()))?;
    let v: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| Error::Output(format!("the FinRL peer printed a line that is not JSON ({e}): {line}")))?;
    let number =
        |k: &str| v[k].as_f64().ok_or_else(|| Error::Output(format!("the FinRL peer's JSON line has no `{k}`")));
    let (seconds, steps, setup, cpu) = (number("seconds")?, number("env_steps")?, number("setup_s")?, number("cpu_s")?);
    let row = Row::portfolio("finrl", n, 1, steps as usize, seconds, None, 1);
    Ok(Row {
        label: format!(
            "FinRL {} PortfolioOptimizationEnv, 1 env stepped by Python",
            v["finrl"].as_str().unwrap_or("?")
        ),
        ..row
    }
    .with_note(format!(
        "{episodes} episode(s) of {} steps, 1 core, {cpu:.2} s of process CPU time in {seconds:.2} s of wall time; \
             env construction and resets {setup:.2} s not counted; `{} \
             benches/peers/finrl_portfolio.py {}`",
        sizes.steps,
        python.display(),
        args.join(" ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_spans_the_batch() {
        assert_eq!(check_sample(4_096, 64).first(), Some(&0));
        assert_eq!(check_sample(4_096, 64).last(), Some(&4_095));
        assert_eq!(check_sample(4_096, 64).len(), 64);
        assert_eq!(check_sample(3, 8), [0, 1, 2]);
        assert_eq!(check_sample(1, 8), [0]);
    }
}
