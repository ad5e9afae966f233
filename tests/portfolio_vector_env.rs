//! The portfolio vector env (issue 55, item 6): the portfolio env over a universe in Gymnasium's shape, on
//! hand-checkable numbers (a buy with the whole account, a long/short rebalance to half each, a hold, the
//! truncation that keeps the ended episode's equity, units and time and restarts the env flat); the
//! observation's account columns; the same bits from the same seed; a restart of one env leaving the others
//! as they are (CPU and GPU); the refusals; the CUDA backend against the CPU, bit for bit (skipped without a
//! GPU, failed under `REQUIRE_GPU=1`).

mod common;

use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::data::universe::Universe;
use tradesim::data::{CleanPolicy, load_bytes};
use tradesim::portfolio::env::{OBS_PER_SYMBOL, PortfolioVectorEnv};
use tradesim::{Backend, Error, PortfolioEnvBatch, TrialParams, UniverseMarket};

/// A: opens 10, 10, 12, 12, closes 10, 11, 12, 13; B: opens 20, 20, 18, 18, closes 20, 19, 18, 17.
fn two_symbols() -> Universe {
    let mut csv = String::from("time,symbol,open,high,low,close\n");
    let a = [(10, 10), (10, 11), (12, 12), (12, 13)];
    let b = [(20, 20), (20, 19), (18, 18), (18, 17)];
    for (sym, rows) in [("A", a), ("B", b)] {
        for (t, (o, c)) in rows.iter().enumerate() {
            let (hi, lo) = (o.max(c), o.min(c));
            csv.push_str(&format!("2024-01-0{}T00:00:00Z,{sym},{o},{hi},{lo},{c}\n", t + 1));
        }
    }
    let (data, _) = load_bytes("two.csv", csv.as_bytes(), "X", &CleanPolicy::default()).unwrap();
    Universe::new(data, None).unwrap()
}

#[track_caller]
fn close_to(what: &str, a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-9 * b.abs().max(1.0), "{what}: {a} vs {b}");
}

/// The account columns (position, weight, equity return) of symbol `s` in env 0's observation.
fn account_columns(obs: &[f32], s: usize) -> [f32; 3] {
    let row = &obs[s * OBS_PER_SYMBOL..(s + 1) * OBS_PER_SYMBOL];
    [row[OBS_PER_SYMBOL - 3], row[OBS_PER_SYMBOL - 2], row[OBS_PER_SYMBOL - 1]]
}

/// 1,000 of cash without costs, episodes of 3 steps over 4 times (they all start at time 0). Step 0 (A
/// long): 100 units of A at 10, equity 1,100 at A's close 11. Step 1 (A long, B short): valued 1,200 at the
/// opens, half each: A sells 50 at 12, B is sold short 600 / 18 units; equity 1,200 at the closes. Step 2 (the
/// same): a hold, marked at 13 and 17: 1,200 + 50 + 33.33, the segment's end (truncated); the env restarts
/// flat at time 0 with the ended episode's equity, units and time kept.
#[test]
fn a_buy_a_rebalance_and_a_hold_by_hand() {
    let u = two_symbols();
    let mut env = PortfolioVectorEnv::new(&Backend::Cpu, &u, &[TrialParams::frictionless(1_000.0)], 1, 3, 7).unwrap();
    assert_eq!((env.n_envs(), env.n_symbols(), env.time()[0], env.equity()[0]), (1, 2, 0, 1_000.0));
    assert_eq!(env.observations().len(), 2 * OBS_PER_SYMBOL);
    env.step(&[1, 0]).unwrap();
    close_to("equity after step 0", env.equity()[0], 1_100.0);
    assert_eq!(env.rewards()[0], 1.1f64.ln() as f32, "rewards are the account's f64 reward as f32");
    assert_eq!((env.units()[0], env.units()[1], env.time()[0], env.costs()[0]), (100.0, 0.0, 1, 0.0));
    assert_eq!(account_columns(env.observations(), 0), [1.0, 1.0, 0.1f32]);
    assert_eq!(account_columns(env.observations(), 1), [0.0, 0.0, 0.1f32]);
    env.step(&[1, 2]).unwrap();
    let short_b = 600.0 / 18.0;
    close_to("equity after step 1", env.equity()[0], 1_200.0);
    close_to("A's units", env.units()[0], 50.0);
    close_to("B's units", env.units()[1], -short_b);
    let [side_b, weight_b, _] = account_columns(env.observations(), 1);
    assert_eq!((side_b, (weight_b * 1e4).round()), (-1.0, -5_000.0));
    assert!(!env.final_mask()[0] && !env.truncated()[0]);
    env.step(&[1, 2]).unwrap();
    let ended = 1_200.0 + 50.0 + short_b;
    assert!(env.final_mask()[0] && env.truncated()[0] && !env.terminated()[0]);
    close_to("final equity", env.final_equity()[0], ended);
    assert!((f64::from(env.rewards()[0]) - (ended / 1_200.0).ln()).abs() < 1e-7, "{}", env.rewards()[0]);
    close_to("final units of B", env.final_units()[1], -short_b);
    assert_eq!((env.final_time()[0], env.time()[0], env.equity()[0], env.units()), (3, 0, 1_000.0, &[0.0, 0.0][..]));
    assert_eq!(account_columns(env.final_observations(), 0)[0], 1.0);
    assert_eq!(account_columns(env.observations(), 0), [0.0, 0.0, 0.0]);
}

/// 120 steps of 2 trials x 3 envs over five synthetic symbols with actions from a fixed stream, every
/// output as bits, and how many episodes ended.
fn trace(backend: &Backend, seed: u64) -> (Vec<u64>, usize) {
    let cfg = GeneratorConfig { bars: 300, symbols: 5, seed: 11, ..GeneratorConfig::default() };
    let u = Universe::new(generate(&cfg), None).unwrap();
    let params = [TrialParams::frictionless(10_000.0), TrialParams { spread: 0.001, ..TrialParams::frictionless(5e4) }];
    let mut env = PortfolioVectorEnv::new(backend, &u, &params, 3, 50, seed).unwrap();
    let (mut trace, mut ends) = (Vec::new(), 0);
    for i in 0..120u64 {
        let actions: Vec<u8> = (0..6 * 5).map(|k| ((i * 31 + k * 7) % 3) as u8).collect();
        env.step(&actions).unwrap();
        trace.extend(env.observations().iter().map(|x| u64::from(x.to_bits())));
        trace.extend(env.equity().iter().chain(env.units()).map(|x| x.to_bits()));
        trace.extend(env.rewards().iter().map(|x| u64::from(x.to_bits())));
        trace.extend(env.final_mask().iter().chain(env.truncated()).map(|&m| u64::from(m)));
        trace.extend(env.time().iter().map(|&t| u64::from(t)));
        ends += env.final_mask().iter().filter(|&&m| m).count();
    }
    if seed == 5 {
        // reset(seed) replays the run from its start.
        env.reset(Some(5)).unwrap();
        let first = env.observations().to_vec();
        let fresh = PortfolioVectorEnv::new(backend, &u, &params, 3, 50, 5).unwrap();
        assert_eq!(first, fresh.observations());
    }
    (trace, ends)
}

/// The same seed gives the same bits; another seed draws other start times; episodes end within the run.
#[test]
fn the_same_seed_gives_the_same_bits() {
    let first = trace(&Backend::Cpu, 5);
    assert_eq!(first, trace(&Backend::Cpu, 5));
    assert_ne!(first.0, trace(&Backend::Cpu, 6).0);
    assert!(first.1 >= 6, "every env ended an episode of 50 steps within 120: {}", first.1);
}

/// The CUDA backend steps the same bits as the CPU (its restart included).
#[test]
fn gpu_matches_cpu_bit_for_bit() {
    let Some(gpu) = common::gpu_backend() else { return };
    assert_eq!(trace(&gpu, 5), trace(&Backend::Cpu, 5));
}

/// `restart` starts over the envs it names and leaves the others' accounts and units as they were.
fn a_restart_leaves_the_other_envs_alone(backend: &Backend) {
    let bar =
        |open: f64, close: f64| tradesim::Bar { open, high: close.max(open), low: close.min(open), close, sigma: 0.0 };
    let bars = vec![bar(10.0, 10.0), bar(10.0, 12.0), bar(12.0, 13.0), bar(13.0, 13.0)];
    let market = UniverseMarket::new(bars, vec![1; 4], 1).unwrap();
    let mut batch = PortfolioEnvBatch::new(backend, &market, &[TrialParams::frictionless(1_000.0)], 2).unwrap();
    batch.reset(&[(0, 3), (0, 3)]).unwrap();
    batch.scan(&[1, 1], 1).unwrap();
    batch.restart(&[(1, (1, 3))]).unwrap();
    let (accounts, units) = (batch.accounts().unwrap(), batch.units().unwrap());
    assert_eq!((units[0], accounts[0].equity, accounts[0].bar), (100.0, 1_200.0, 1));
    assert_eq!((units[1], accounts[1].equity, accounts[1].bar), (0.0, 1_000.0, 1));
    assert!(batch.restart(&[(2, (0, 3))]).is_err() && batch.restart(&[(0, (2, 4))]).is_err());
}
test_device!(a_restart_leaves_the_other_envs_alone);

/// Episodes that do not fit, an action code of 3 and a wrong number of actions are refused, naming what is
/// wrong; a refused step moves no env.
#[test]
fn refusals_name_what_is_wrong() {
    let u = two_symbols();
    let p = [TrialParams::frictionless(1_000.0)];
    for len in [0, 4] {
        let err = PortfolioVectorEnv::new(&Backend::Cpu, &u, &p, 1, len, 0).unwrap_err();
        assert!(matches!(&err, Error::Config { key, .. } if key == "episode_len"), "{err}");
    }
    let mut env = PortfolioVectorEnv::new(&Backend::Cpu, &u, &p, 2, 3, 0).unwrap();
    let err = env.step(&[1, 0, 3, 0]).unwrap_err();
    assert!(err.to_string().contains("env 1") && err.to_string().contains("symbol 0"), "{err}");
    let err = env.step(&[1, 0, 1]).unwrap_err();
    assert!(err.to_string().contains("actions"), "{err}");
    assert_eq!((env.time(), env.equity()), (&[0, 0][..], &[1_000.0, 1_000.0][..]));
}

/// A kernel profile of more launches than it keeps as events (it reads the older ones back as it goes):
/// every step's launches counted, the busy time within the span and at most the kernels' summed time.
#[test]
#[cfg(feature = "cuda")]
fn a_long_kernel_profile_counts_every_launch() {
    let Some(gpu) = common::gpu_backend() else { return };
    let Backend::Cuda(rt) = &gpu else { unreachable!("the GPU backend is CUDA") };
    const STEPS: usize = 17_000;
    let cfg = GeneratorConfig { bars: 300, symbols: 5, seed: 11, ..GeneratorConfig::default() };
    let u = Universe::new(generate(&cfg), None).unwrap();
    let mut env = PortfolioVectorEnv::new(&gpu, &u, &[TrialParams::frictionless(1e4)], 3, 50, 5).unwrap();
    let actions: Vec<u8> = (0..3 * 5).map(|k| (k % 3) as u8).collect();
    rt.start_profile().unwrap();
    for _ in 0..STEPS {
        env.step(&actions).unwrap();
    }
    let p = rt.stop_profile().unwrap();
    let (launches, summed) = (p.launches(), p.summed_ms());
    assert!(launches >= STEPS, "{launches} launches for {STEPS} steps: {:?}", p.kernels);
    assert!(p.busy_ms > 0.0 && p.busy_ms <= p.span_ms * (1.0 + 1e-9), "{p:?}");
    assert!(p.busy_ms <= summed * (1.0 + 1e-9), "busy {} ms, summed {summed} ms", p.busy_ms);
    // A profile stopped with nothing launched since is empty.
    rt.start_profile().unwrap();
    assert_eq!(rt.stop_profile().unwrap(), tradesim::KernelProfile::default());
}
