//! Experience collection: reward normalization, step mode == scan mode, observations, the replay ring and
//! the sampler, epoch segments — each on the CPU and the GPU.

mod common;

use common::{Bits, assert_bitwise, bars};
use gpu_kernels::rng::draw_below;
use tradesim::data::synthetic::{normal, random_walk};
use tradesim::{Backend, EnvBatch, EnvConfig, MarketData, SimLayout, Transition, TrialParams};

const LONG: u8 = 1;
const SHORT: u8 = 2;

/// Normalization after two steps, one trial of two envs: env 0 goes long, env 1 short, on bars closing at
/// 100, 110, 121. Raw rewards: step 1: ln(1.1) and ln(900 / 1,000); step 2: ln(1.1) and ln(790 / 900) (the
/// short of 10 units holds 2,000 - 10 x close). The running moments after step 1 hold 2 values, after step 2 hold 4; each
/// step's rewards are normalized with the moments after that step: (r - mean) / (std + 1e-8), population std.
fn normalization_after_two_steps(backend: &Backend) {
    let b = bars(&[(100.0, 100.0, 100.0, 100.0), (100.0, 110.0, 100.0, 110.0), (110.0, 121.0, 110.0, 121.0)], 0.0);
    let market = MarketData::from_bars(b, Vec::new(), 0).unwrap();
    let p = TrialParams { normalize_reward: 1, ..TrialParams::frictionless(1_000.0) };
    let cfg = EnvConfig { segment_len: 2, ring_capacity: 8, ..EnvConfig::default() };
    let mut envs = EnvBatch::new(backend, &market, &[p], SimLayout::new(1, 2).unwrap(), cfg).unwrap();
    envs.reset_segments(&[(0, 2), (0, 2)]).unwrap();
    envs.step(&[LONG, SHORT]).unwrap();
    envs.step(&[LONG, SHORT]).unwrap();
    let raw = [(1.1f64).ln() as f32, (0.9f64).ln() as f32, (1.1f64).ln() as f32, (790.0f64 / 900.0).ln() as f32];
    let moments = |xs: &[f32]| {
        let n = xs.len() as f64;
        let mean = xs.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = xs.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    };
    let (m1, s1) = moments(&raw[..2]);
    let (m2, s2) = moments(&raw);
    let want = [
        (f64::from(raw[0]) - m1) / (s1 + 1e-8),
        (f64::from(raw[1]) - m1) / (s1 + 1e-8),
        (f64::from(raw[2]) - m2) / (s2 + 1e-8),
        (f64::from(raw[3]) - m2) / (s2 + 1e-8),
    ];
    let ring = envs.transitions().unwrap();
    for (i, w) in want.iter().enumerate() {
        assert!((f64::from(ring[i].reward) - w).abs() < 1e-5, "slot {i}: {} vs {w}", ring[i].reward);
    }
    let m = envs.reward_moments().unwrap()[0];
    assert_eq!(m.count, 4.0);
    assert!((m.mean - m2).abs() < 1e-12 && (m.m2 / 4.0 - s2 * s2).abs() < 1e-12, "{m:?}");
}
test_device!(normalization_after_two_steps);

/// 3 trials x 300 envs on random bars and actions: F = 5 features, ring capacity 3,000 per trial (so the
/// ring wraps), barriers and normalization on.
fn workload() -> (MarketData, Vec<TrialParams>, SimLayout, EnvConfig, Vec<u8>, usize) {
    let prices = random_walk(400, 0.02, 5);
    let features: Vec<f32> = (0..400 * 5).map(|i| normal(5, 7, i) as f32).collect();
    let market = MarketData::new(&prices, 20, features, 5).unwrap();
    let params: Vec<_> = (0..3)
        .map(|k| TrialParams {
            spread: 0.001,
            take_profit_mult: 2.0,
            stop_loss_mult: 1.0,
            max_hold_bars: 10,
            normalize_reward: u32::from(k != 1),
            whole_units: u32::from(k == 2),
            ..TrialParams::frictionless(10_000.0)
        })
        .collect();
    let layout = SimLayout::new(3, 300).unwrap();
    let cfg = EnvConfig { segment_len: 50, ring_capacity: 3_000, seed: 11, trial_groups: 1 };
    let steps = 50;
    let actions = (0..(steps * layout.n_envs()) as u64).map(|i| draw_below(3, 3, i, 3) as u8).collect();
    (market, params, layout, cfg, actions, steps)
}

/// Step mode (a launch per step) and scan mode (a launch per ring-capacity chunk) give the same bits, and
/// so do one and three trial groups.
fn step_mode_equals_scan_mode(backend: &Backend) {
    let (market, params, layout, cfg, actions, steps) = workload();
    let run = |groups: usize, scan: bool| {
        let cfg = EnvConfig { trial_groups: groups, ..cfg };
        let mut envs = EnvBatch::new(backend, &market, &params, layout, cfg).unwrap();
        if scan {
            envs.scan(&actions, steps).unwrap();
        } else {
            envs.step_many(&actions, steps).unwrap();
        }
        (
            envs.states().unwrap(),
            envs.transitions().unwrap(),
            envs.reward_moments().unwrap(),
            envs.transitions_written(),
        )
    };
    let step = run(1, false);
    let scan = run(1, true);
    let grouped = run(3, true);
    assert_eq!(step.3, (steps * 300) as u64);
    for other in [&scan, &grouped] {
        assert_bitwise("states", &step.0, &other.0);
        assert_bitwise("ring", &step.1, &other.1);
        assert_bitwise("moments", &step.2, &other.2);
    }
    // The ring wrapped: 15,000 transitions per trial into 3,000 slots, all slots written by the last steps.
    assert!(step.1.iter().all(|t| t.bar >= 30), "slots hold the last 10 steps only");
}
test_device!(step_mode_equals_scan_mode);

/// Observations are the bar's features followed by the portfolio floats; a sample rebuilds both states of
/// its transition from the features at `bar` and `bar + 1`.
fn observations_and_samples_rebuild_states(backend: &Backend) {
    let (market, params, layout, cfg, actions, steps) = workload();
    let mut envs = EnvBatch::new(backend, &market, &params, layout, cfg).unwrap();
    envs.scan(&actions[..10 * layout.n_envs()], 10).unwrap();
    let obs = envs.observations().unwrap();
    let states = envs.states().unwrap();
    let width = 5 + 3;
    for (env, s) in states.iter().enumerate().step_by(97) {
        let row = &obs[env * width..(env + 1) * width];
        assert_eq!(&row[..5], &market.features()[s.bar as usize * 5..s.bar as usize * 5 + 5]);
        assert_eq!(row[5], s.position as f32);
        assert_eq!(row[7], (s.equity / 10_000.0 - 1.0) as f32);
    }
    envs.scan(&actions[10 * layout.n_envs()..], steps - 10).unwrap();
    let ring = envs.transitions().unwrap();
    let batch = envs.sample(64).unwrap();
    assert_eq!((batch.obs.len(), batch.actions.len()), (3 * 64 * width, 3 * 64));
    assert!(batch.weights.iter().all(|&w| w == 1.0));
    for i in 0..3 * 64 {
        let (o, no) = (&batch.obs[i * width..(i + 1) * width], &batch.next_obs[i * width..(i + 1) * width]);
        let trial = i / 64;
        let t = ring[trial * 3_000..(trial + 1) * 3_000]
            .iter()
            .find(|t| {
                let bar = t.bar as usize;
                t.valid == 1
                    && t.state[..] == o[5..]
                    && t.next_state[..] == no[5..]
                    && t.reward == batch.rewards[i]
                    && o[..5] == market.features()[bar * 5..bar * 5 + 5]
                    && no[..5] == market.features()[(bar + 1) * 5..(bar + 2) * 5]
                    && batch.actions[i] == u32::from(t.action)
                    && batch.dones[i] == f32::from(u8::from(t.done == tradesim::TERMINATED))
            })
            .unwrap_or_else(|| panic!("sample {i} matches no transition of trial {trial}"));
        assert!(t.bar as usize + 1 < 400);
    }
    let again = envs.sample(64).unwrap();
    assert_ne!(again.rewards.bits(), batch.rewards.bits(), "the sampler advances its draws");
}
test_device!(observations_and_samples_rebuild_states);

/// Epoch segments: the same for every trial, drawn again for a new epoch, within the bars.
fn epochs_redraw_segments(backend: &Backend) {
    let (market, params, layout, cfg, _, _) = workload();
    let mut envs = EnvBatch::new(backend, &market, &params, layout, cfg).unwrap();
    let starts = |envs: &EnvBatch| envs.states().unwrap().iter().map(|s| s.bar).collect::<Vec<_>>();
    let epoch0 = starts(&envs);
    assert_eq!(epoch0[..300], epoch0[300..600], "trials share segments");
    assert!(epoch0.iter().all(|&s| s as usize + 50 < 400));
    envs.reset_epoch(1).unwrap();
    let epoch1 = starts(&envs);
    assert_ne!(epoch0, epoch1);
    envs.reset_epoch(0).unwrap();
    assert_eq!(starts(&envs), epoch0, "an epoch's segments depend on the seed and epoch only");
}
test_device!(epochs_redraw_segments);

/// Chi-square statistic of `counts` against a uniform expectation.
fn chi_square(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    let expected = total as f64 / counts.len() as f64;
    counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum()
}

/// The replay sampler and PPO's minibatch draw are uniform over the valid transitions of a ring with holes
/// (a run of 300 invalid slots and every 7th slot invalid): a chi-square test over 300,000 draws, and no
/// draw on an invalid slot. Moving a draw to the next valid slot (the old rule) made the slot after the run
/// ~300 times as likely, far outside this bound.
#[test]
fn replay_and_minibatch_draws_are_uniform_over_valid_slots() {
    let n = 1_000;
    let ring: Vec<Transition> = (0..n)
        .map(|i| Transition { valid: u8::from(!((400..700).contains(&i) || i % 7 == 0)), ..Transition::default() })
        .collect();
    let valid: Vec<usize> = (0..n).filter(|&i| ring[i].valid != 0).collect();
    let draws = 300_000u64;
    let replay = |d: u64| gpu_kernels::batch::sample_slot(&ring, n as u32, 11, 2, d);
    let minibatch = |d: u64| gpu_kernels::ppo::draw_rollout_index(&ring, n, 11, 2, d / 1000, d % 1000);
    type Draw<'a> = &'a dyn Fn(u64) -> Option<usize>;
    let samplers: [(&str, Draw); 2] = [("replay", &replay), ("minibatch", &minibatch)];
    for (name, draw) in samplers {
        let mut counts = vec![0u64; n];
        let mut dropped = 0;
        for d in 0..draws {
            match draw(d) {
                Some(slot) => counts[slot] += 1,
                None => dropped += 1,
            }
        }
        assert!(counts.iter().zip(&ring).all(|(&c, t)| t.valid != 0 || c == 0), "{name}: drew an invalid slot");
        assert_eq!(dropped, 0, "{name}: with 60% valid slots no sample should exhaust its draws");
        let kept: Vec<u64> = valid.iter().map(|&i| counts[i]).collect();
        let (stat, df) = (chi_square(&kept), (kept.len() - 1) as f64);
        assert!(
            (stat - df).abs() < 5.0 * (2.0 * df).sqrt(),
            "{name}: chi-square {stat:.0} with {df} degrees of freedom"
        );
    }
}
