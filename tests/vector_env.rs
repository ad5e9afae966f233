//! The vectorized environment (Gymnasium's shape): rewards are the env's log returns, episodes end after
//! their bars and reset in the same step with the last observation kept, runs repeat bit for bit, and the
//! GPU gives the CPU's bits.

mod common;

use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::vector::VectorEnv;
use tradesim::{Backend, TrialParams};

const EPISODE: usize = 20;

fn make(backend: &Backend, seed: u64) -> VectorEnv {
    let data = generate(&GeneratorConfig { bars: 3_000, ..GeneratorConfig::default() });
    let params = [TrialParams::frictionless(10_000.0), TrialParams { key: 1, ..TrialParams::frictionless(5_000.0) }];
    VectorEnv::new(backend, &data.series[0], &params, 8, EPISODE, seed).unwrap()
}

/// Actions that change over envs and steps (all three).
fn actions(n: usize, step: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 7 + step * 3) % 3) as u8).collect()
}

fn episodes_reset_in_the_same_step(backend: &Backend) {
    let mut env = make(backend, 5);
    let (n, d) = (env.n_envs(), env.obs_dim());
    assert_eq!((n, d), (16, 54));
    let capital = |i: usize| if i < 8 { 10_000.0 } else { 5_000.0 };
    assert!(env.equity().iter().enumerate().all(|(i, e)| *e == capital(i)));
    for step in 0..EPISODE {
        let before = env.equity().to_vec();
        env.step(&actions(n, step)).unwrap();
        let last = step + 1 == EPISODE;
        for (i, equity_before) in before.iter().enumerate() {
            // Frictionless, reward = ln(equity_{t+1} / equity_t); the episode's end truncates it.
            assert_eq!(env.truncated()[i], last, "env {i} step {step}");
            assert!(!env.terminated()[i]);
            assert_eq!(env.final_mask()[i], last);
            if !last {
                let want = (env.equity()[i] / equity_before).ln() as f32;
                assert!((env.rewards()[i] - want).abs() <= 1e-6, "env {i} step {step}: {} vs {want}", env.rewards()[i]);
            }
        }
    }
    // Every env started a new episode: capital again, and the observation is not the ended episode's last.
    for i in 0..n {
        assert_eq!(env.equity()[i], capital(i));
        let (now, last) = (&env.observations()[i * d..(i + 1) * d], &env.final_observations()[i * d..(i + 1) * d]);
        assert_ne!(now, last, "env {i}");
        assert_eq!(now[d - 3..], [0.0, 0.0, 0.0], "a fresh episode is flat with no equity change");
    }
    env.step(&actions(n, 0)).unwrap();
    assert!(env.final_mask().iter().all(|m| !m) && env.truncated().iter().all(|t| !t));
    assert!(env.step(&[3; 16]).is_err_and(|e| e.to_string().contains("action 3")));
}
test_device!(episodes_reset_in_the_same_step);

/// The bits of `steps` steps from seed `seed`: observations, rewards and flags.
fn run(backend: &Backend, seed: u64, steps: usize) -> (Vec<f32>, Vec<f32>, Vec<bool>) {
    let mut env = make(backend, seed);
    let (mut obs, mut rewards, mut done) = (Vec::new(), Vec::new(), Vec::new());
    for step in 0..steps {
        env.step(&actions(env.n_envs(), step)).unwrap();
        obs.extend_from_slice(env.observations());
        rewards.extend_from_slice(env.rewards());
        done.extend_from_slice(env.final_mask());
    }
    (obs, rewards, done)
}

#[test]
fn runs_repeat_and_seeds_differ() {
    let a = run(&Backend::Cpu, 5, 45);
    let b = run(&Backend::Cpu, 5, 45);
    common::assert_bitwise("observations", &a.0, &b.0);
    common::assert_bitwise("rewards", &a.1, &b.1);
    assert_eq!(a.2, b.2);
    assert_ne!(a.0, run(&Backend::Cpu, 6, 45).0, "another seed starts elsewhere");
    let mut env = make(&Backend::Cpu, 5);
    let first = env.observations().to_vec();
    env.step(&actions(16, 0)).unwrap();
    env.reset(Some(5)).unwrap();
    assert_eq!(env.observations(), first, "reset(seed) starts the draws over");
}

#[test]
fn gpu_vector_env_matches_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let (c, g) = (run(&Backend::Cpu, 7, 45), run(&gpu, 7, 45));
    common::assert_bitwise("observations", &c.0, &g.0);
    common::assert_bitwise("rewards", &c.1, &g.1);
    assert_eq!(c.2, g.2);
}

#[test]
fn bad_episode_lengths_are_refused() {
    let data = generate(&GeneratorConfig { bars: 100, ..GeneratorConfig::default() });
    let params = [TrialParams::frictionless(1_000.0)];
    for len in [0, 99, 500] {
        let err = VectorEnv::new(&Backend::Cpu, &data.series[0], &params, 2, len, 0).unwrap_err();
        assert!(matches!(err, tradesim::Error::Config { .. }), "{err:?}");
    }
}
