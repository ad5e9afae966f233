//! GPU == CPU, bit for bit, on the full experience pipeline: K=5 trials x E=4,096 envs x L=2,048 steps of
//! random actions on random bars with F=51 random features; long/short, spread and commission, whole and
//! fractional units, barriers with and without exits, the drawdown breaker and reward normalization on
//! some trials. The first 1,000 steps run in step mode (one launch per step), the rest in scan mode.
//! Compared: env states after 1,000 steps and at the end, the whole replay ring, the reward moments, the
//! observations and a sampled minibatch. Two GPU runs must also give identical bits.

mod common;

use common::assert_bitwise;
use gpu_kernels::rng::draw_below;
use tradesim::data::synthetic::{normal, random_walk};
use tradesim::{
    Backend, EnvBatch, EnvConfig, EnvState, EnvStatus, MarketData, Moments, SampleBatch, SimLayout, Transition,
    TrialParams,
};

const TRIALS: usize = 5;
const ENVS: usize = 4_096;
const STEPS: usize = 2_048;
const STEP_MODE_STEPS: usize = 1_000;
const FEATURES: usize = 51;
const SEED: u64 = 20_261_130;

fn trial(k: usize) -> TrialParams {
    TrialParams {
        spread: 0.0004 * (k + 1) as f64,
        commission: 0.0002 * (k + 1) as f64,
        cash_reserve_pct: 0.02 * k as f64,
        max_drawdown: if k % 2 == 1 { 0.3 } else { 0.0 },
        take_profit_mult: 1.0 + k as f64,
        stop_loss_mult: if k == 4 { 0.0 } else { 1.5 },
        max_hold_bars: 2 * k as u32,
        barrier_exits: u32::from(k != 2),
        normalize_reward: u32::from(k >= 3),
        w_cost: 1.0,
        w_drawdown: 0.5,
        w_barrier: 0.1,
        allow_short: 1,
        whole_units: u32::from(k.is_multiple_of(2)),
        ..TrialParams::frictionless(100_000.0)
    }
}

struct Run {
    states_step_mode: Vec<EnvState>,
    states: Vec<EnvState>,
    ring: Vec<Transition>,
    moments: Vec<Moments>,
    observations: Vec<f32>,
    sample: SampleBatch,
}

fn simulate(backend: &Backend) -> Run {
    let layout = SimLayout::new(TRIALS, ENVS).unwrap();
    let n = layout.n_envs();
    let prices = random_walk(3 * STEPS, 0.02, SEED);
    let features: Vec<f32> = (0..(prices.len() * FEATURES) as u64).map(|i| normal(SEED, 9, i) as f32).collect();
    let market = MarketData::new(&prices, 100, features, FEATURES).unwrap();
    let params: Vec<_> = (0..TRIALS).map(trial).collect();
    let cfg = EnvConfig { segment_len: STEPS as u32, ring_capacity: ENVS * 64, seed: SEED, trial_groups: 1 };
    let mut envs = EnvBatch::new(backend, &market, &params, layout, cfg).unwrap();
    let actions: Vec<u8> = (0..(STEPS * n) as u64).map(|i| draw_below(SEED, 2, i, 3) as u8).collect();
    let (first, rest) = actions.split_at(STEP_MODE_STEPS * n);
    envs.step_many(first, STEP_MODE_STEPS).unwrap();
    let states_step_mode = envs.states().unwrap();
    envs.scan(rest, STEPS - STEP_MODE_STEPS).unwrap();
    Run {
        states_step_mode,
        states: envs.states().unwrap(),
        ring: envs.transitions().unwrap(),
        moments: envs.reward_moments().unwrap(),
        observations: envs.observations().unwrap(),
        sample: envs.sample(1_024).unwrap(),
    }
}

fn assert_runs_equal(a: &Run, b: &Run) {
    assert_bitwise("states after 1,000 steps (step mode)", &a.states_step_mode, &b.states_step_mode);
    assert_bitwise("states after 2,048 steps", &a.states, &b.states);
    assert_bitwise("replay ring", &a.ring, &b.ring);
    assert_bitwise("reward moments", &a.moments, &b.moments);
    assert_bitwise("observations", &a.observations, &b.observations);
    assert_bitwise("sampled obs", &a.sample.obs, &b.sample.obs);
    assert_bitwise("sampled next obs", &a.sample.next_obs, &b.sample.next_obs);
    assert_bitwise("sampled actions", &a.sample.actions, &b.sample.actions);
    assert_bitwise("sampled rewards", &a.sample.rewards, &b.sample.rewards);
    assert_bitwise("sampled dones", &a.sample.dones, &b.sample.dones);
    assert_bitwise("sampled weights", &a.sample.weights, &b.sample.weights);
}

#[test]
fn gpu_matches_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else {
        return;
    };
    let cpu_run = simulate(&Backend::Cpu);
    let gpu_run = simulate(&gpu);
    assert_runs_equal(&cpu_run, &gpu_run);
    let count = |st: EnvStatus| cpu_run.states.iter().filter(|s| s.status() == st).count();
    let labels = |l: u8| cpu_run.ring.iter().filter(|t| t.valid == 1 && t.label == l).count();
    println!(
        "parity: {} envs x {STEPS} steps bitwise equal; end: segment {} bankrupt {} halted {}; \
         labels in the ring: tp {} sl {} time {}; ring valid {} of {}",
        cpu_run.states.len(),
        count(EnvStatus::SegmentEnd),
        count(EnvStatus::Bankrupt),
        count(EnvStatus::Halted),
        labels(1),
        labels(2),
        labels(3),
        cpu_run.ring.iter().filter(|t| t.valid == 1).count(),
        cpu_run.ring.len()
    );
    assert!(cpu_run.states.iter().all(|s| s.status().is_done()), "every env ends its segment");
    assert!(count(EnvStatus::Halted) > 0, "the workload should trip the drawdown breaker");
    assert!(labels(1) > 0 && labels(2) > 0 && labels(3) > 0, "every barrier kind should resolve");
    assert!(cpu_run.moments[3].count > 0.0 && cpu_run.moments[0].count > 0.0);
}

#[test]
fn gpu_runs_are_repeatable() {
    let Some(gpu) = common::gpu_backend() else {
        return;
    };
    assert_runs_equal(&simulate(&gpu), &simulate(&gpu));
}
