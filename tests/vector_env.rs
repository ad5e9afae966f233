//! The vector env (Gymnasium's shape): rewards are the env's log returns, episodes end after
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
    assert!(env.step(&[3; 16]).is_err_and(|e| e.to_string().contains("action code 3")));
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

/// The vector env's rules written out over an [`EnvBatch`] (a ring of one step per env, the start bars
/// drawn on the host, autoreset through `reset_envs`): the bits [`run`] must give.
fn reference_run(backend: &Backend, seed: u64, steps: usize) -> (Vec<f32>, Vec<f32>, Vec<bool>) {
    use gpu_kernels::rng::draw_below;
    use gpu_kernels::vector::EPISODE_STREAM;
    use tradesim::data::device::Prepared;
    use tradesim::{EnvBatch, EnvConfig, SimLayout};

    let data = generate(&GeneratorConfig { bars: 3_000, ..GeneratorConfig::default() });
    let series = &data.series[0];
    let params = [TrialParams::frictionless(10_000.0), TrialParams { key: 1, ..TrialParams::frictionless(5_000.0) }];
    let n_bars = series.bars.len();
    let market = Prepared::new(series, 0..n_bars).unwrap().market_data(0..n_bars).unwrap();
    let ept = 8;
    let cfg = EnvConfig { segment_len: EPISODE as u32, ring_capacity: ept, seed, trial_groups: 1 };
    let mut env = EnvBatch::new(backend, &market, &params, SimLayout::new(2, ept).unwrap(), cfg).unwrap();
    let n = 2 * ept;
    let mut episodes = vec![0u64; n];
    let mut next = |i: usize| {
        let last_start = (n_bars - 1 - EPISODE) as u32;
        let start = draw_below(seed, EPISODE_STREAM ^ i as u64, episodes[i], last_start + 1);
        episodes[i] += 1;
        (start, start + EPISODE as u32)
    };
    let segments: Vec<_> = (0..n).map(&mut next).collect();
    env.reset_segments(&segments).unwrap();
    let (mut obs, mut rewards, mut done) = (Vec::new(), Vec::new(), Vec::new());
    for step in 0..steps {
        env.step(&actions(n, step)).unwrap();
        let ring = env.transitions().unwrap();
        let head = env.transitions_written().wrapping_sub(ept as u64) % ept as u64;
        let mut resets = Vec::new();
        for i in 0..n {
            let t = &ring[(i / ept) * ept + ((head + (i % ept) as u64) % ept as u64) as usize];
            rewards.push(if t.valid != 0 { t.reward } else { 0.0 });
            done.push(t.done != 0);
            if t.done != 0 {
                let (start, end) = next(i);
                resets.push((i, start, end));
            }
        }
        env.reset_envs(&resets).unwrap();
        obs.extend(env.observations().unwrap());
    }
    (obs, rewards, done)
}

fn matches_the_env_batch_rules(backend: &Backend) {
    let (v, r) = (run(backend, 9, 65), reference_run(backend, 9, 65));
    common::assert_bitwise("observations", &v.0, &r.0);
    common::assert_bitwise("rewards", &v.1, &r.1);
    assert_eq!(v.2, r.2);
    assert!(v.2.iter().filter(|d| **d).count() >= 3 * 16, "episodes ended and restarted");
}
test_device!(matches_the_env_batch_rules);

/// Actions read from device memory (what DLPack hands over: here i64, as PyTorch's argmax gives) step the
/// envs exactly as host actions do; an invalid one fails the step naming the env and the value, and no env
/// moves.
#[test]
fn device_actions_match_host_actions() {
    let Some(gpu) = common::gpu_backend() else { return };
    let (mut host, mut dev) = (make(&gpu, 3), make(&gpu, 3));
    let n = host.n_envs();
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    for step in 0..30 {
        let codes = actions(n, step);
        let wide: Vec<i64> = codes.iter().map(|&a| i64::from(a)).collect();
        let on_device = stream.clone_htod(&wide).unwrap();
        stream.synchronize().unwrap();
        let (address, _sync) = cudarc::driver::DevicePtr::device_ptr(&on_device, &stream);
        host.step(&codes).unwrap();
        // SAFETY: n i64s in this device's memory, written and synchronized above, alive until the call ends.
        unsafe { dev.step_device(address, 64, true) }.unwrap();
        common::assert_bitwise("observations", dev.observations(), host.observations());
        common::assert_bitwise("rewards", dev.rewards(), host.rewards());
        assert_eq!(dev.final_mask(), host.final_mask());
    }
    let before = dev.observations().to_vec();
    let mut bad: Vec<i32> = actions(n, 0).iter().map(|&a| i32::from(a)).collect();
    bad[11] = -4;
    bad[13] = 7;
    let on_device = stream.clone_htod(&bad).unwrap();
    stream.synchronize().unwrap();
    let (address, _sync) = cudarc::driver::DevicePtr::device_ptr(&on_device, &stream);
    // SAFETY: as above (n i32s).
    let err = unsafe { dev.step_device(address, 32, true) }.unwrap_err().to_string();
    assert!(err.contains("env 11") && err.contains("code -4"), "{err}");
    assert_eq!(dev.observations(), before, "no env moved");
    // The next good step continues both envs alike.
    let codes = actions(n, 30);
    let wide: Vec<u8> = codes.clone();
    let on_device = stream.clone_htod(&wide).unwrap();
    stream.synchronize().unwrap();
    let (address, _sync) = cudarc::driver::DevicePtr::device_ptr(&on_device, &stream);
    host.step(&codes).unwrap();
    // SAFETY: as above (n u8s).
    unsafe { dev.step_device(address, 8, false) }.unwrap();
    common::assert_bitwise("observations", dev.observations(), host.observations());
    // Without host copies the device outputs hold the same values.
    dev.set_host_copies(false);
    host.step(&actions(n, 31)).unwrap();
    dev.step(&actions(n, 31)).unwrap();
    let out = dev.device_outputs().expect("a CUDA env");
    let mut obs = vec![0f32; n * dev.obs_dim()];
    // SAFETY: the observations are n x obs_dim f32s at that address; the step has finished.
    unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut obs, out.obs) }.unwrap();
    common::assert_bitwise("device observations", &obs, host.observations());
    assert_ne!(dev.observations(), host.observations(), "the host copies kept the previous step");
    assert!(make(&tradesim::Backend::Cpu, 3).device_outputs().is_none());
}

#[test]
fn bad_parameters_and_actions_are_refused() {
    let data = generate(&GeneratorConfig { bars: 500, ..GeneratorConfig::default() });
    let normalized = [TrialParams { normalize_reward: 1, ..TrialParams::frictionless(1_000.0) }];
    let err = VectorEnv::new(&Backend::Cpu, &data.series[0], &normalized, 2, 10, 0).unwrap_err().to_string();
    assert!(err.contains("normalize_reward"), "{err}");
    let mut env = make(&Backend::Cpu, 1);
    // SAFETY: never dereferenced: the CPU backend refuses device actions first.
    let err = unsafe { env.step_device(8, 8, false) }.unwrap_err().to_string();
    assert!(err.contains("CUDA"), "{err}");
    assert!(env.step(&[0; 3]).is_err_and(|e| e.to_string().contains("expected 16, got 3")));
}
