//! GPU == CPU, bit for bit: K=5 trials x E=4,096 envs x 1,000 steps of random actions with long/short,
//! spread and commission on, whole and fractional units, and the drawdown breaker on some trials.

mod common;

use gpu_kernels::rng::draw_below;
use tradesim::synthetic::random_walk;
use tradesim::{Backend, EnvState, EnvStatus, PortfolioSim, SimLayout, TrialParams};

const TRIALS: usize = 5;
const ENVS: usize = 4_096;
const STEPS: usize = 1_000;
const SEED: u64 = 20_261_130;

fn trial(k: usize) -> TrialParams {
    TrialParams {
        initial_capital: 100_000.0,
        spread: 0.0004 * (k + 1) as f64,
        commission: 0.0002 * (k + 1) as f64,
        cash_reserve_pct: 0.02 * k as f64,
        max_drawdown: if k % 2 == 1 { 0.3 } else { 0.0 },
        allow_short: 1,
        whole_units: u32::from(k.is_multiple_of(2)),
    }
}

/// Runs the workload in 4 calls of 250 steps and returns the states after each call.
fn simulate(backend: &Backend) -> Vec<Vec<EnvState>> {
    let layout = SimLayout::new(TRIALS, ENVS).unwrap();
    let n = layout.n_envs();
    let prices = random_walk(3 * STEPS, 0.03, SEED);
    let params: Vec<_> = (0..TRIALS).map(trial).collect();
    let segments: Vec<(u32, u32)> = (0..n as u64)
        .map(|e| {
            let start = draw_below(SEED, 1, e, STEPS as u32);
            (start, start + STEPS as u32)
        })
        .collect();
    let actions: Vec<u8> = (0..(STEPS * n) as u64)
        .map(|i| draw_below(SEED, 2, i, 3) as u8)
        .collect();
    let mut sim = PortfolioSim::new(backend, &prices, &params, layout, &segments).unwrap();
    actions
        .chunks(250 * n)
        .map(|chunk| {
            sim.run(chunk, 250).unwrap();
            sim.states().unwrap()
        })
        .collect()
}

fn bits(states: &[EnvState]) -> Vec<[u64; 10]> {
    states
        .iter()
        .map(|s| {
            [
                s.cash.to_bits(),
                s.units.to_bits(),
                s.equity.to_bits(),
                s.peak_equity.to_bits(),
                s.entry_price.to_bits(),
                s.step_costs.to_bits(),
                u64::from(s.bar),
                u64::from(s.end_bar),
                s.position as u64,
                u64::from(s.status),
            ]
        })
        .collect()
}

#[test]
fn gpu_matches_cpu_bitwise_after_1000_steps() {
    let Some(gpu) = common::gpu_backend() else {
        return;
    };
    let cpu_run = simulate(&Backend::Cpu);
    let gpu_run = simulate(&gpu);
    for (call, (c, g)) in cpu_run.iter().zip(&gpu_run).enumerate() {
        let (cb, gb) = (bits(c), bits(g));
        let mismatches: Vec<usize> = (0..cb.len()).filter(|&i| cb[i] != gb[i]).collect();
        if let Some(&first) = mismatches.first() {
            panic!(
                "after call {call}: {} of {} envs differ; first env {first}:\n cpu {:?}\n gpu {:?}",
                mismatches.len(),
                cb.len(),
                c[first],
                g[first]
            );
        }
    }
    let last = cpu_run.last().unwrap();
    let count = |st: EnvStatus| last.iter().filter(|s| s.status() == st).count();
    let (ended, bankrupt, halted) = (
        count(EnvStatus::SegmentEnd),
        count(EnvStatus::Bankrupt),
        count(EnvStatus::Halted),
    );
    println!(
        "parity: {} envs x {STEPS} steps bitwise equal (segment end {ended}, bankrupt {bankrupt}, halted {halted})",
        last.len()
    );
    assert_eq!(
        ended + bankrupt + halted,
        last.len(),
        "every env is done after its 1,000-bar segment"
    );
    assert!(
        halted > 0,
        "the workload should trip the drawdown breaker somewhere"
    );
}

#[test]
fn gpu_runs_are_repeatable() {
    let Some(gpu) = common::gpu_backend() else {
        return;
    };
    let a = simulate(&gpu);
    let b = simulate(&gpu);
    assert_eq!(bits(a.last().unwrap()), bits(b.last().unwrap()));
}
