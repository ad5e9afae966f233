//! GPU == CPU bit for bit at the benchmark's full sizes (issue 47): DQN with hidden 128, 54 inputs, batch
//! 1,024 and 1,024 envs over 300K bars (292 steps); PPO with the same net and envs, CleanRL's 4 minibatches
//! of 74,752 transitions per trial taken in gradient chunks of 1,024. Each runs the bench's own workload
//! (`tradesim::bench::dqn` / `ppo`, 2 trials) on both backends; the workload compares every trial's
//! networks, Adam state and loss after the timed epoch and fails on the first differing word. Without a GPU
//! there is nothing to compare and the tests skip (fail under `REQUIRE_GPU=1`).
mod common;

use tradesim::Backend;
use tradesim::bench::Sizes;

/// The bench's full sizes with 2 trials, the timed gradient steps cut to 2 and no greedy walk.
fn sizes() -> Sizes {
    let full = Sizes::FULL;
    Sizes { trials: 2, dqn: (full.dqn.0, full.dqn.1, 2), walk_bars: 0, ..full }
}

#[test]
fn dqn_at_the_bench_sizes_matches_the_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let rows = tradesim::bench::dqn(&[Backend::Cpu, gpu], &sizes(), || None).unwrap();
    let checked = rows.iter().find(|r| r.backend == "cuda").expect("a GPU row");
    assert!(checked.check.contains("2 trial(s) (0, 1) bitwise equal"), "{}", checked.check);
    assert_eq!(checked.epoch_grad_steps, Some(292));
}

#[test]
fn ppo_at_the_bench_sizes_matches_the_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let rows = tradesim::bench::ppo(&[Backend::Cpu, gpu], &sizes()).unwrap();
    let checked = rows.iter().find(|r| r.backend == "cuda").expect("a GPU row");
    assert!(checked.check.contains("2 trial(s) (0, 1) bitwise equal"), "{}", checked.check);
    // 4 update epochs of 4 minibatches: 1,024 envs x 292 steps / 4 = 74,752 transitions each.
    assert_eq!(checked.epoch_grad_steps, Some(16));
}
