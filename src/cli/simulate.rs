//! `tradesim simulate`: a short portfolio simulation that exercises the chosen backend end to end.

use std::time::Instant;

use gpu_kernels::rng::draw_below;

use crate::bench::demo_params;
use crate::data::Series;
use crate::data::device::Prepared;
use crate::data::features::WARMUP;
use crate::{Backend, EnvBatch, EnvConfig, EnvStatus, Error, SimLayout, TrialParams};

/// Sizes of the demo run.
#[derive(Clone, Copy, Debug)]
pub struct DemoConfig {
    /// Trials (parameter sets).
    pub trials: usize,
    /// Envs per trial.
    pub envs: usize,
    /// Bars each env walks (at most the bars after the warm-up, minus one).
    pub steps: usize,
    /// Seed of segment starts and actions.
    pub seed: u64,
}

/// Runs the demo on `series` (all bars after the feature warm-up) and prints throughput and per-trial
/// outcomes. `label` names the data in the output (it says SYNTHETIC for generated data).
pub fn run_demo(backend: &Backend, series: &Series, label: &str, cfg: &DemoConfig) -> Result<(), Error> {
    let layout = SimLayout::new(cfg.trials, cfg.envs)?;
    let n_envs = layout.n_envs();
    let prepared = Prepared::new(series, 0..series.bars.len())?;
    let market = prepared.market_data(WARMUP.min(series.bars.len())..series.bars.len())?;
    let n_bars = market.n_bars();
    let steps = cfg.steps.min(n_bars - 1);
    let params: Vec<TrialParams> = (0..cfg.trials).map(demo_params).collect();
    let actions: Vec<u8> = (0..(steps * n_envs) as u64).map(|i| draw_below(cfg.seed, 2, i, 3) as u8).collect();
    println!("data:    {label}, symbol {}, {n_bars} bars after a {WARMUP}-bar feature warm-up", series.symbol);
    println!(
        "run:     {} trials x {} envs x {steps} steps, random actions, backend {}",
        cfg.trials,
        cfg.envs,
        backend.info().backend
    );
    let env_cfg = EnvConfig { segment_len: steps as u32, ring_capacity: 0, seed: cfg.seed, trial_groups: 1 };
    let mut envs = EnvBatch::new(backend, &market, &params, layout, env_cfg)?;
    let started = Instant::now();
    envs.scan(&actions, steps)?;
    let states = envs.states()?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "speed:   {:.3} s, {:.1} M env-steps/s (upload of actions and download of states included)",
        secs,
        (steps * n_envs) as f64 / secs / 1e6
    );
    println!(
        "{:>5} {:>8} {:>6} {:>6} {:>14} {:>9} {:>7}",
        "trial", "spread", "short", "whole", "mean equity", "bankrupt", "halted"
    );
    for (k, trial_states) in states.chunks(cfg.envs).enumerate() {
        let p = &params[k];
        let mean = trial_states.iter().map(|s| s.equity).sum::<f64>() / cfg.envs as f64;
        let count = |st: EnvStatus| trial_states.iter().filter(|s| s.status() == st).count();
        println!(
            "{k:>5} {:>8.4} {:>6} {:>6} {mean:>14.2} {:>9} {:>7}",
            p.spread,
            p.allow_short == 1,
            p.whole_units == 1,
            count(EnvStatus::Bankrupt),
            count(EnvStatus::Halted)
        );
    }
    Ok(())
}
