//! The vector env keeps the equity each ended episode ended with (issue 46): written by the step rule
//! before the restart, on the CPU and the GPU alike, while `equity()` already holds the next episode's
//! capital.

mod common;

use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::vector::VectorEnv;
use tradesim::{Backend, TrialParams};

const EPISODE: usize = 12;

/// Two frictionless trials (capital 10,000 and 5,000) of 4 envs each; env 0 and env 4 stay flat.
fn make(backend: &Backend) -> VectorEnv {
    let data = generate(&GeneratorConfig { bars: 2_000, ..GeneratorConfig::default() });
    let params = [TrialParams::frictionless(10_000.0), TrialParams { key: 1, ..TrialParams::frictionless(5_000.0) }];
    VectorEnv::new(backend, &data.series[0], &params, 4, EPISODE, 3).unwrap()
}

fn actions(step: usize) -> Vec<u8> {
    (0..8).map(|i| if i % 4 == 0 { 0 } else { ((i + step) % 3) as u8 }).collect()
}

/// Steps one whole episode: the equity before the last step, then the env after it.
fn one_episode(backend: &Backend) -> (Vec<f64>, VectorEnv) {
    let mut env = make(backend);
    let mut before = Vec::new();
    for step in 0..EPISODE {
        before = env.equity().to_vec();
        env.step(&actions(step)).unwrap();
    }
    (before, env)
}

fn ended_episodes_keep_their_equity(backend: &Backend) {
    let (before, env) = one_episode(backend);
    let capital = |i: usize| if i < 4 { 10_000.0 } else { 5_000.0 };
    assert!(env.final_mask().iter().all(|m| *m), "every episode ends at its 12th bar");
    for (i, equity_before) in before.iter().enumerate() {
        let ended = env.final_equity()[i];
        // Frictionless, the last reward is ln(ended / equity before the last step).
        let log_return = (ended / equity_before).ln() as f32;
        assert!((env.rewards()[i] - log_return).abs() <= 1e-6, "env {i}: {ended} after {equity_before}");
        assert_eq!(env.equity()[i], capital(i), "env {i}: the next episode starts at the capital");
        if i % 4 == 0 {
            assert_eq!(ended, capital(i), "env {i} stayed flat");
        } else {
            assert_ne!(ended, capital(i), "env {i} traded for 12 bars");
        }
    }
}
test_device!(ended_episodes_keep_their_equity);

#[test]
fn gpu_final_equity_matches_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let (_, c) = one_episode(&Backend::Cpu);
    let (_, g) = one_episode(&gpu);
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(c.final_equity()), bits(g.final_equity()));
    assert_eq!(bits(c.equity()), bits(g.equity()));
}
