//! DQN: forward, gradients and an Adam step against candle's CPU autograd; GPU == CPU over 100 training
//! steps; learning on a planted pattern; safetensors weights that candle loads and that give the same
//! Q-values.

mod common;

use candle_core::{D, DType, Device, Tensor};
use candle_nn::{Module, Optimizer, VarBuilder};
use common::assert_bitwise;
use common::candle_ref::{active, assert_inactive_untouched, assert_steps_match, max_rel_err, mlp, vars};
use gpu_kernels::dqn::{DqnArgs, DqnParams};
use gpu_kernels::mlp::{ACTIONS, Layout, forward};
use tradesim::data::synthetic::normal;
use tradesim::train::{evaluate, greedy_actions, save_weights};
use tradesim::{Backend, DqnAgent, EnvBatch, EnvConfig, SimLayout, TrialParams};
use tradesim_host::dqn::train_on_batch;

const D_IN: usize = 7;
const STRIDE: usize = 24;
const H: usize = 16;
const B: usize = 32;

fn params() -> DqnParams {
    DqnParams { hidden: H as u32, batch: B as u32, gamma: 0.9, huber_delta: 0.5, lr: 1e-3, ..DqnParams::default() }
}

fn args() -> DqnArgs {
    DqnArgs {
        n_trials: 1,
        envs_per_trial: 1,
        input: D_IN as u32,
        hidden: STRIDE as u32,
        batch: B as u32,
        step: 1,
        ..Default::default()
    }
}

/// A random batch: obs, next_obs, actions, rewards, dones, weights (two samples masked).
#[allow(clippy::type_complexity, reason = "the six columns of a minibatch")]
fn batch() -> (Vec<f32>, Vec<f32>, Vec<u32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let f = |stream: u64, n: usize| (0..n as u64).map(|i| normal(3, stream, i) as f32).collect::<Vec<f32>>();
    let actions = (0..B as u64).map(|i| (i % 3) as u32).collect();
    let dones = (0..B).map(|i| if i % 7 == 0 { 1.0 } else { 0.0 }).collect();
    let weights = (0..B).map(|i| if i == 5 || i == 11 { 0.0 } else { 1.0 }).collect();
    (f(1, B * D_IN), f(2, B * D_IN), actions, f(3, B), dones, weights)
}

#[test]
fn forward_gradients_and_adam_match_candle() {
    let l = Layout::q_net(D_IN, STRIDE);
    let online = tradesim_host_init(&l, 1);
    let target = tradesim_host_init(&l, 2);
    let (obs, next_obs, actions, rewards, dones, weights) = batch();
    let dev = Device::Cpu;
    let (vo, vt) = (vars(&l, &online, H), vars(&l, &target, H));
    let x = Tensor::from_slice(&obs, (B, D_IN), &dev).unwrap();
    let nx = Tensor::from_slice(&next_obs, (B, D_IN), &dev).unwrap();
    // Forward.
    let q_candle = mlp(&vo, &x).flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let mut q_ours = Vec::new();
    let (mut a1, mut a2) = (vec![0.0; STRIDE], vec![0.0; STRIDE]);
    for j in 0..B {
        let mut q = [0.0; ACTIONS];
        forward(&l, &online, H, &obs[j * D_IN..(j + 1) * D_IN], &mut a1, &mut a2, &mut q);
        q_ours.extend(q);
    }
    assert!(max_rel_err(&q_ours, &q_candle) <= 1e-5, "forward: {}", max_rel_err(&q_ours, &q_candle));
    // Loss: Huber(q(s, a) - y), y = r + gamma (1 - done) Q_target(s', argmax_a' Q_online(s', a')), mean over B.
    let p = params();
    let a_star = mlp(&vo, &nx).argmax_keepdim(D::Minus1).unwrap();
    let q_next = mlp(&vt, &nx).gather(&a_star, 1).unwrap().squeeze(1).unwrap().detach();
    let r = Tensor::from_slice(&rewards, B, &dev).unwrap();
    let not_done = Tensor::from_slice(&dones, B, &dev).unwrap().affine(-1.0, 1.0).unwrap();
    let y = (r + (q_next * not_done).unwrap().affine(f64::from(p.gamma), 0.0).unwrap()).unwrap().detach();
    let acts = Tensor::from_slice(&actions, (B, 1), &dev).unwrap();
    let q_sa = mlp(&vo, &x).gather(&acts, 1).unwrap().squeeze(1).unwrap();
    let diff = (q_sa - y).unwrap();
    let abs = diff.abs().unwrap();
    let m = abs.clamp(0.0, f64::from(p.huber_delta)).unwrap();
    let per = ((m.sqr().unwrap() * 0.5).unwrap() + ((abs - &m).unwrap() * f64::from(p.huber_delta)).unwrap()).unwrap();
    let w = Tensor::from_slice(&weights, B, &dev).unwrap();
    let loss = ((per * w).unwrap().sum_all().unwrap() / B as f64).unwrap();
    let grads = loss.backward().unwrap();
    // Ours: one CPU step of the tiled path on this minibatch (its gradients, then its Adam step).
    let a = args();
    let mut nets = tradesim::NetState {
        online: online.clone(),
        target: target.clone(),
        m: vec![0.0; l.params()],
        v: vec![0.0; l.params()],
    };
    let minibatch = tradesim::SampleBatch {
        obs: obs.clone(),
        next_obs: next_obs.clone(),
        actions: actions.clone(),
        rewards: rewards.clone(),
        dones: dones.clone(),
        weights: weights.clone(),
    };
    let step = train_on_batch(&a, &[p], &mut nets, &minibatch).unwrap();
    let our_loss: f32 = step.losses.iter().sum();
    let candle_loss = loss.to_scalar::<f32>().unwrap();
    assert!(
        (our_loss / B as f32 - candle_loss).abs() <= 1e-5 * candle_loss.abs().max(1e-3),
        "{our_loss} vs {candle_loss}"
    );
    let g_ours = step.gradients;
    let ours = active(&l, &g_ours, H);
    for (i, v) in vo.iter().enumerate() {
        let theirs = grads.get(v).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let err = max_rel_err(&ours[i], &theirs);
        assert!(err <= 1e-5, "gradient of tensor {i}: relative error {err}");
    }
    assert_inactive_untouched(&l, H, &g_ours, &online, &nets.online);
    // One Adam step.
    let mut opt = candle_nn::AdamW::new(
        vo.clone(),
        candle_nn::ParamsAdamW { lr: f64::from(p.lr), beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 },
    )
    .unwrap();
    opt.backward_step(&loss).unwrap();
    assert_steps_match(&l, H, &vo, &online, &nets.online, 1e-4);
}

fn tradesim_host_init(l: &Layout, trial: u64) -> Vec<f32> {
    tradesim_host::init::init_weights(l, H, 9, trial)
}

fn sanity_params() -> (TrialParams, DqnParams) {
    let env = TrialParams { w_pnl: 100.0, ..TrialParams::frictionless(10_000.0) };
    let dqn = DqnParams {
        lr: 2e-3,
        gamma: 0.5,
        hidden: 16,
        batch: 64,
        eps_decay_steps: 300.0,
        target_every: 50,
        ..DqnParams::default()
    };
    (env, dqn)
}

/// After training on the planted pattern, the greedy policy beats buy-and-hold and a random policy on
/// held-out bars by a wide margin.
fn learns_a_planted_pattern(backend: &Backend) {
    let (env_p, dqn_p) = sanity_params();
    let train = common::planted_market(2_000, 1);
    let held_out = common::planted_market(600, 2);
    let cfg = EnvConfig { segment_len: 50, ring_capacity: 16 * 400, seed: 4, trial_groups: 1 };
    let mut env = EnvBatch::new(backend, &train, &[env_p], SimLayout::new(1, 16).unwrap(), cfg).unwrap();
    let mut agent = DqnAgent::new(backend, &env, &[dqn_p], 16, 64, 4).unwrap();
    let mut step = 0;
    for epoch in 0..12 {
        env.reset_epoch(epoch).unwrap();
        for _ in 0..50 {
            agent.act_and_step(&mut env, step, false).unwrap();
            step += 1;
            if step >= 4 {
                agent.train_step(&mut env).unwrap();
            }
        }
    }
    let policy = evaluate(backend, &mut agent, &held_out, &[env_p], 252.0, 4).unwrap()[0];
    common::assert_beats_baselines("DQN", backend, &held_out, env_p, policy.total_return);
}
test_device!(learns_a_planted_pattern);

/// 3 trials (widths and batches that are not multiples of anything, Double DQN on and off, hard and Polyak
/// targets) after 100 steps of acting and training.
fn hundred_steps_agent(backend: &Backend) -> (DqnAgent, [TrialParams; 3]) {
    hundred_steps_of(backend, 16, [16, 11, 13], 100)
}

/// [`hundred_steps_agent`] with hidden row stride `stride`, the trials' widths `widths`, `steps` steps.
fn hundred_steps_of(backend: &Backend, stride: usize, widths: [u32; 3], steps: u64) -> (DqnAgent, [TrialParams; 3]) {
    hundred_steps_on(backend, &common::planted_market(1_000, 5), stride, widths, steps)
}

/// [`hundred_steps_of`] on `market`.
fn hundred_steps_on(
    backend: &Backend,
    market: &tradesim::MarketData,
    stride: usize,
    widths: [u32; 3],
    steps: u64,
) -> (DqnAgent, [TrialParams; 3]) {
    let (env_p, dqn_p) = sanity_params();
    let cfg = EnvConfig { segment_len: 100, ring_capacity: 64 * 100, seed: 6, trial_groups: 1 };
    let trials = [env_p, TrialParams { spread: 0.001, ..env_p }, env_p];
    let dqn = [
        DqnParams { hidden: widths[0], ..dqn_p },
        DqnParams { hidden: widths[1], batch: 45, double_dqn: 0, tau: 0.01, ..dqn_p },
        DqnParams { lr: 1e-2, hidden: widths[2], ..dqn_p },
    ];
    let mut env = EnvBatch::new(backend, market, &trials, SimLayout::new(3, 64).unwrap(), cfg).unwrap();
    let mut agent = DqnAgent::new(backend, &env, &dqn, stride, 64, 6).unwrap();
    for step in 0..steps {
        agent.act_and_step(&mut env, step, false).unwrap();
        agent.train_step(&mut env).unwrap();
    }
    (agent, trials)
}

fn hundred_steps(backend: &Backend) -> (tradesim::NetState, Vec<f32>) {
    let (agent, _) = hundred_steps_agent(backend);
    (agent.state().unwrap(), agent.last_losses().unwrap())
}

/// The CPU greedy walk (a thread per trial, each layer's FMA chains in SIMD lanes) chooses the actions of stepping the envs
/// bar by bar through the acting stages' products, bit for bit.
#[test]
fn cpu_greedy_walk_matches_stepping() {
    let (agent, trials) = hundred_steps_agent(&Backend::Cpu);
    let market = common::planted_market(400, 9);
    let steps = market.n_bars() - 1;
    let env = |capacity: usize| {
        let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: capacity, seed: 6, trial_groups: 1 };
        let mut env = EnvBatch::new(&Backend::Cpu, &market, &trials, SimLayout::new(3, 1).unwrap(), cfg).unwrap();
        env.reset_segments(&[(0, steps as u32); 3]).unwrap();
        env
    };
    let mut walker = agent.cpu_copy(&env(0)).unwrap();
    let walked = walker.greedy_walk(&mut env(0), steps).unwrap().expect("a CPU agent walks");
    let mut stepping = env(steps);
    let mut stepper = agent.cpu_copy(&stepping).unwrap();
    for step in 0..steps as u64 {
        stepper.act_and_step(&mut stepping, step, true).unwrap();
    }
    let stepped: Vec<u8> = stepping.transitions().unwrap().iter().map(|t| t.action).collect();
    assert_eq!(walked.len(), 3 * steps);
    assert_eq!(walked, stepped, "the walk and the stepping choose different actions");
    let distinct: std::collections::BTreeSet<u8> = walked.iter().copied().collect();
    assert!(distinct.len() > 1, "a walk that never changes its action checks little: {distinct:?}");
}

/// The greedy walk on the GPU (a block per trial, one launch of the register walk, as its kernel profile
/// says) chooses the CPU walk's actions, bit for bit.
#[test]
fn gpu_greedy_walk_matches_cpu_walk() {
    // A runtime of its own, so that its profile sees only this test's launches.
    let Some(gpu) = common::gpu_backend_with(tradesim_host::KernelOptions::default()) else { return };
    let (mut agent, trials) = hundred_steps_agent(&gpu);
    let market = common::planted_market(700, 8);
    let ((gpu_metrics, gpu_actions), launched) =
        common::walk_kernels_launched(&gpu, || greedy_actions(&gpu, &mut agent, &market, &trials, 252.0, 6).unwrap());
    assert_eq!(launched, ["greedy_walk_regs"], "the walk kernels launched");
    let (cpu_metrics, cpu_actions) = greedy_actions(&Backend::Cpu, &mut agent, &market, &trials, 252.0, 6).unwrap();
    assert_eq!(gpu_actions.len(), 3 * 699);
    assert_eq!(gpu_actions, cpu_actions, "greedy actions differ between the GPU and the CPU walk");
    let distinct: std::collections::BTreeSet<u8> = gpu_actions.iter().copied().collect();
    assert!(distinct.len() > 1, "a walk that never changes its action checks little: {distinct:?}");
    for (g, c) in gpu_metrics.iter().zip(&cpu_metrics) {
        assert_eq!(g.total_return.to_bits(), c.total_return.to_bits());
    }
}

/// Walks whose env stops part way (a drawdown breaker of 0.5% and 2%, so the trials halt at different bars;
/// the third has none). On the CPU: the breaker does stop the first trial (its walk leaves the unlimited
/// walk's actions part way). On the GPU, whose walk steps a copy of the env per action and keeps the argmax's
/// (a done env's copies all stay on its bar): the CPU walk's actions and returns, bit for bit (the agents
/// trained on either backend hold the same bits, `gpu_training_matches_cpu_bitwise`).
#[test]
fn greedy_walks_match_when_envs_stop() {
    let market = common::planted_market(700, 9);
    let walk = |backend: &Backend, limits: [f64; 3]| {
        let (mut agent, trials) = hundred_steps_agent(backend);
        let trials: Vec<TrialParams> =
            trials.iter().zip(limits).map(|(t, max_drawdown)| TrialParams { max_drawdown, ..*t }).collect();
        greedy_actions(backend, &mut agent, &market, &trials, 252.0, 6).unwrap()
    };
    let limits = [0.005, 0.02, 0.0];
    let (cpu_metrics, cpu_actions) = walk(&Backend::Cpu, limits);
    let (_, unlimited) = walk(&Backend::Cpu, [0.0; 3]);
    let steps = 699;
    let parted = (0..steps).find(|&i| cpu_actions[i] != unlimited[i]);
    assert!(parted.is_some_and(|i| i < 600), "the 0.5% breaker never changed the first walk: {parted:?}");
    assert_eq!(cpu_actions[2 * steps..], unlimited[2 * steps..], "the third trial has no breaker");
    let Some(gpu) = common::gpu_backend() else { return };
    let (gpu_metrics, gpu_actions) = walk(&gpu, limits);
    assert_eq!(gpu_actions, cpu_actions, "greedy actions differ between the GPU and the CPU walk");
    for (k, (g, c)) in gpu_metrics.iter().zip(&cpu_metrics).enumerate() {
        assert_eq!(g.total_return.to_bits(), c.total_return.to_bits(), "trial {k}");
    }
}

/// A trial's result depends on its own parameters, key and the seed only: trained alone (K = 1), or at slot
/// 1 of three beside mates with other widths, batches and keys (so the batch's stride and buffer differ),
/// it ends with the same weights, bit for bit.
fn a_trial_alone_equals_the_trial_in_a_batch(backend: &Backend) {
    let (env_p, dqn_p) = sanity_params();
    let market = common::planted_market(1_000, 5);
    let cfg = EnvConfig { segment_len: 100, ring_capacity: 64 * 100, seed: 6, trial_groups: 1 };
    let me = (TrialParams { key: 42, ..env_p }, DqnParams { hidden: 12, batch: 40, ..dqn_p });
    let run = |trials: &[(TrialParams, DqnParams)], hidden: usize, batch: usize| {
        let envs: Vec<TrialParams> = trials.iter().map(|t| t.0).collect();
        let dqns: Vec<DqnParams> = trials.iter().map(|t| t.1).collect();
        let layout = SimLayout::new(trials.len(), 64).unwrap();
        let mut env = EnvBatch::new(backend, &market, &envs, layout, cfg).unwrap();
        let mut agent = DqnAgent::new(backend, &env, &dqns, hidden, batch, 6).unwrap();
        for step in 0..60 {
            agent.act_and_step(&mut env, step, false).unwrap();
            agent.train_step(&mut env).unwrap();
        }
        (agent.layout(), agent.state().unwrap())
    };
    let (l1, alone) = run(&[me], 12, 40);
    let mates = [
        (TrialParams { key: 7, spread: 0.001, ..env_p }, DqnParams { hidden: 16, batch: 64, ..dqn_p }),
        me,
        (TrialParams { key: 99, ..env_p }, DqnParams { hidden: 9, batch: 20, double_dqn: 0, ..dqn_p }),
    ];
    let (l3, batched) = run(&mates, 16, 64);
    assert_eq!(common::trial_bits(&l1, &alone.online, 0, 12), common::trial_bits(&l3, &batched.online, 1, 12));
    assert_eq!(common::trial_bits(&l1, &alone.m, 0, 12), common::trial_bits(&l3, &batched.m, 1, 12));
    assert_ne!(
        common::trial_bits(&l3, &batched.online, 0, 12)[..50],
        common::trial_bits(&l3, &batched.online, 1, 12)[..50],
        "mates with other keys draw other numbers"
    );
}
test_device!(a_trial_alone_equals_the_trial_in_a_batch);

/// The replay row of a truncated transition (the segment's end) keeps the bootstrap: `done` 0, so the TD
/// target is `r + gamma x Q(s')`; a terminated one (bankruptcy, the breaker) has `done` 1 and the target `r`.
#[test]
fn truncated_transitions_bootstrap_in_the_td_target() {
    use gpu_kernels::batch::sample_row;
    let ring = [
        tradesim::Transition { reward: 1.0, valid: 1, done: tradesim::TRUNCATED, ..Default::default() },
        tradesim::Transition { reward: 1.0, valid: 1, done: tradesim::TERMINATED, ..Default::default() },
    ];
    let (truncated, terminated) = (sample_row(&ring, Some(0)), sample_row(&ring, Some(1)));
    assert_eq!((truncated.done, terminated.done), (0.0, 1.0));
    let dqn = DqnParams { gamma: 0.5, batch: 1, double_dqn: 0, huber_delta: 1e9, ..DqnParams::default() };
    let (q, q_next) = ([0.0f32; 3], [4.0f32, 2.0, 1.0]);
    let mut dout = [0.0f32; 3];
    let target = |row: &gpu_kernels::batch::SampleRow, dout: &mut [f32; 3]| {
        gpu_kernels::dqn::td_sample(0, &dqn, &q, &q_next, &q_next, 0, row.reward, row.done, 1.0, dout);
        -dout[0] // Huber gradient of q - y in its linear-free range: y - q = y
    };
    assert_eq!(target(&truncated, &mut dout), 1.0 + 0.5 * 4.0);
    assert_eq!(target(&terminated, &mut dout), 1.0);
}

/// Two trials of widths `hidden` trained 30 steps on the GPU, then walked on the GPU and on the CPU: the
/// same actions, bit for bit, and more than one of them.
fn gpu_walk_of_widths_matches_cpu_walk(hidden: [u32; 2], market_seed: u64) {
    let Some(gpu) = common::gpu_backend() else { return };
    let (env_p, dqn_p) = sanity_params();
    let market = common::planted_market(600, market_seed);
    let cfg = EnvConfig { segment_len: 50, ring_capacity: 8 * 50, seed: 6, trial_groups: 1 };
    let trials = [env_p, TrialParams { spread: 0.001, ..env_p }];
    let dqn = [DqnParams { hidden: hidden[0], ..dqn_p }, DqnParams { hidden: hidden[1], double_dqn: 0, ..dqn_p }];
    let mut env = EnvBatch::new(&gpu, &market, &trials, SimLayout::new(2, 8).unwrap(), cfg).unwrap();
    let mut agent = DqnAgent::new(&gpu, &env, &dqn, hidden[0].max(hidden[1]) as usize, 64, 6).unwrap();
    for step in 0..30 {
        agent.act_and_step(&mut env, step, false).unwrap();
        agent.train_step(&mut env).unwrap();
    }
    let (_, gpu_actions) = greedy_actions(&gpu, &mut agent, &market, &trials, 252.0, 6).unwrap();
    let (_, cpu_actions) = greedy_actions(&Backend::Cpu, &mut agent, &market, &trials, 252.0, 6).unwrap();
    assert_eq!(gpu_actions.len(), 2 * 599);
    assert_eq!(gpu_actions, cpu_actions, "greedy actions differ between the GPU and the CPU walk");
    let distinct: std::collections::BTreeSet<u8> = gpu_actions.iter().copied().collect();
    assert!(distinct.len() > 1, "a walk that never changes its action checks little: {distinct:?}");
}

/// Networks wider than the register walk's 128 units but narrow enough to stage (hidden 160 and 137) are
/// walked by `greedy_walk` with the weights in shared memory (the register walk, `greedy_walk_regs`, takes
/// the networks of the other walk tests).
#[test]
fn gpu_staged_greedy_walk_matches_cpu_walk() {
    gpu_walk_of_widths_matches_cpu_walk([160, 137], 7);
}

/// Networks too wide for a block's shared memory (hidden 240 and 233 on 54 inputs: ~290 KB transposed) are
/// walked with the weights read in place.
#[test]
fn gpu_wide_greedy_walk_matches_cpu_walk() {
    gpu_walk_of_widths_matches_cpu_walk([240, 233], 5);
}

/// 100 steps of acting and training for 3 trials (different widths, batches, Double DQN on and off, hard
/// and Polyak targets): the GPU gives the CPU's bits.
#[test]
fn gpu_training_matches_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let (cpu_state, cpu_losses) = hundred_steps(&Backend::Cpu);
    let (gpu_state, gpu_losses) = hundred_steps(&gpu);
    assert_bitwise("online weights", &cpu_state.online, &gpu_state.online);
    assert_bitwise("target weights", &cpu_state.target, &gpu_state.target);
    assert_bitwise("adam m", &cpu_state.m, &gpu_state.m);
    assert_bitwise("adam v", &cpu_state.v, &gpu_state.v);
    assert_bitwise("losses", &cpu_losses, &gpu_losses);
    assert!(cpu_losses.iter().all(|l| l.is_finite() && *l > 0.0));
}

/// As [`gpu_training_matches_cpu_bitwise`] with widths past one 128-unit chunk of the fused layers
/// (`mlp_chain`), a stride and widths that are not multiples of 4: the GPU gives the CPU's bits.
#[test]
fn gpu_wide_training_matches_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let run = |backend: &Backend| {
        let (agent, _) = hundred_steps_of(backend, 150, [150, 131, 37], 30);
        (agent.state().unwrap(), agent.last_losses().unwrap())
    };
    let ((cpu_state, cpu_losses), (gpu_state, gpu_losses)) = (run(&Backend::Cpu), run(&gpu));
    assert_bitwise("online weights", &cpu_state.online, &gpu_state.online);
    assert_bitwise("target weights", &cpu_state.target, &gpu_state.target);
    assert_bitwise("losses", &cpu_losses, &gpu_losses);
    assert!(cpu_losses.iter().all(|l| l.is_finite() && *l > 0.0));
}

/// The CPU's and the GPU's weights, Adam moments and losses after the same steps are the same bits, and the
/// losses are finite and positive.
fn assert_same_training(cpu: (tradesim::NetState, Vec<f32>), gpu: (tradesim::NetState, Vec<f32>)) {
    let ((cpu_state, cpu_losses), (gpu_state, gpu_losses)) = (cpu, gpu);
    assert_bitwise("online weights", &cpu_state.online, &gpu_state.online);
    assert_bitwise("adam m", &cpu_state.m, &gpu_state.m);
    assert_bitwise("adam v", &cpu_state.v, &gpu_state.v);
    assert_bitwise("losses", &cpu_losses, &gpu_losses);
    assert!(cpu_losses.iter().all(|l| l.is_finite() && *l > 0.0));
}

/// The fused backward pass (`mlp_backward`, `gpu_kernels::backward`) at the edges of its lanes and unit
/// groups: a stride of 100 (four groups of 32 units, the last mostly past the width; warps whose rows lie
/// past it), widths 100, 97 and 37, and 43 inputs (a lane's second input, past 32): the GPU gives the
/// CPU's bits.
#[test]
fn gpu_fused_backward_edges_match_cpu_bitwise() {
    use gpu_kernels::backward::backward_suit;
    use gpu_kernels::net::NetArgs;
    let Some(gpu) = common::gpu_backend() else { return };
    let market = common::planted_market_with(1_000, 5, 38);
    assert!(
        backward_suit(&NetArgs::new(3, 64, 43, 100, 3, 64, 1_000)),
        "the sizes no longer take the fused backward pass"
    );
    let run = |backend: &Backend| {
        let (agent, _) = hundred_steps_on(backend, &market, 100, [100, 97, 37], 30);
        (agent.state().unwrap(), agent.last_losses().unwrap())
    };
    assert_same_training(run(&Backend::Cpu), run(&gpu));
}

/// A step whose fused backward blocks would take more than one wave on the H200 (40 trials x 8 gradient
/// chunks x 2 unit groups = 640 blocks against 2 a multiprocessor x 132): the host stores the hidden gradient
/// of layer 1 (`mlp_rows_wide`) and sums the gradients from it (`mlp_gradients`). Widths below the stride
/// and a short batch: the GPU gives the CPU's bits.
#[test]
fn gpu_split_backward_matches_cpu_bitwise() {
    use gpu_kernels::backward::{backward_blocks, backward_suit};
    use gpu_kernels::net::NetArgs;
    let Some(gpu) = common::gpu_backend() else { return };
    let (trials, envs, batch, stride) = (40usize, 16usize, 1_024usize, 32usize);
    let market = common::planted_market(1_000, 5);
    let net = NetArgs::new(trials as u32, envs as u32, 43, stride as u32, 3, batch as u32, 1_000);
    let (x, y) = backward_blocks(&net);
    assert!(backward_suit(&net) && x * y > 2 * 132, "the sizes no longer take more than one wave on the H200");
    let run = |backend: &Backend| {
        let (env_p, dqn_p) = sanity_params();
        let cfg = EnvConfig { segment_len: 100, ring_capacity: envs * 100, seed: 9, trial_groups: 1 };
        let env_params: Vec<_> =
            (0..trials).map(|t| TrialParams { spread: 0.0005 * (t % 3) as f64, ..env_p }).collect();
        let dqn: Vec<_> = (0..trials)
            .map(|t| match t % 3 {
                0 => DqnParams { hidden: 32, batch: batch as u32, ..dqn_p },
                1 => DqnParams { hidden: 29, batch: 1_000, double_dqn: 0, ..dqn_p },
                _ => DqnParams { hidden: 17, batch: 700, tau: 0.01, ..dqn_p },
            })
            .collect();
        let layout = SimLayout::new(trials, envs).unwrap();
        let mut env = EnvBatch::new(backend, &market, &env_params, layout, cfg).unwrap();
        let mut agent = DqnAgent::new(backend, &env, &dqn, stride, batch, 6).unwrap();
        for step in 0..6 {
            agent.act_and_step(&mut env, step, false).unwrap();
            agent.train_step(&mut env).unwrap();
        }
        (agent.state().unwrap(), agent.last_losses().unwrap())
    };
    assert_same_training(run(&Backend::Cpu), run(&gpu));
}

/// Saved weights load into a candle model through `VarBuilder` and give the agent's Q-values.
#[test]
fn safetensors_round_trip_into_candle() {
    let (env_p, dqn_p) = sanity_params();
    let market = common::planted_market(300, 7);
    let cfg = EnvConfig { segment_len: 50, ring_capacity: 400, seed: 1, trial_groups: 1 };
    let env = EnvBatch::new(&Backend::Cpu, &market, &[env_p, env_p], SimLayout::new(2, 4).unwrap(), cfg).unwrap();
    let agent = DqnAgent::new(&Backend::Cpu, &env, &[dqn_p, DqnParams { hidden: 8, ..dqn_p }], 16, 64, 3).unwrap();
    let dir = std::env::temp_dir().join(format!("tradesim-weights-{}", std::process::id()));
    let paths = save_weights(&agent, &dir).unwrap();
    assert_eq!(paths.len(), 2);
    let state = agent.state().unwrap();
    let l = agent.layout();
    for (k, (path, hidden)) in paths.iter().zip([16usize, 8]).enumerate() {
        // SAFETY: the file was just written by this test and is not modified while mapped.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, &Device::Cpu) }.unwrap();
        let l1 = candle_nn::linear(l.input, hidden, vb.pp("l1")).unwrap();
        let l2 = candle_nn::linear(hidden, hidden, vb.pp("l2")).unwrap();
        let l3 = candle_nn::linear(hidden, ACTIONS, vb.pp("l3")).unwrap();
        let x: Vec<f32> = (0..5 * l.input as u64).map(|i| normal(11, 1, i) as f32).collect();
        let xt = Tensor::from_slice(&x, (5, l.input), &Device::Cpu).unwrap();
        let q = l3.forward(&l2.forward(&l1.forward(&xt).unwrap().relu().unwrap()).unwrap().relu().unwrap()).unwrap();
        let theirs = q.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let w = &state.online[k * l.params()..(k + 1) * l.params()];
        let mut ours = Vec::new();
        let (mut a1, mut a2) = (vec![0.0; l.hidden], vec![0.0; l.hidden]);
        for j in 0..5 {
            let mut q = [0.0; ACTIONS];
            forward(&l, w, hidden, &x[j * l.input..(j + 1) * l.input], &mut a1, &mut a2, &mut q);
            ours.extend(q);
        }
        assert!(max_rel_err(&ours, &theirs) <= 1e-5, "trial {k}: {:?} vs {:?}", ours, theirs);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A job that would not fit in device memory is refused before it allocates, with the bytes needed and
/// free: envs whose rings need ~144 PB, then an agent whose minibatch buffers need ~5 TB.
#[test]
fn jobs_larger_than_device_memory_are_refused() {
    let Some(gpu) = common::gpu_backend() else { return };
    let (env_p, dqn_p) = sanity_params();
    let market = common::planted_market(300, 3);
    let huge_ring = EnvConfig { segment_len: 50, ring_capacity: 4_000_000_000, seed: 1, trial_groups: 1 };
    let err = EnvBatch::new(&gpu, &market, &[env_p; 1000], SimLayout::new(1000, 1).unwrap(), huge_ring).unwrap_err();
    match err {
        tradesim::HostError::OutOfDeviceMemory { needed, free, .. } => {
            assert!(needed > 100_000_000_000_000 && free < needed, "{needed} {free}");
        }
        other => panic!("expected OutOfDeviceMemory, got {other}"),
    }
    let cfg = EnvConfig { segment_len: 50, ring_capacity: 400, seed: 1, trial_groups: 1 };
    let env = EnvBatch::new(&gpu, &market, &[env_p; 4], SimLayout::new(4, 1).unwrap(), cfg).unwrap();
    let wide = DqnParams { hidden: 16, batch: 64, ..dqn_p };
    let err = DqnAgent::new(&gpu, &env, &[wide; 4], 16, 1 << 31, 1).unwrap_err();
    assert!(matches!(err, tradesim::HostError::OutOfDeviceMemory { .. }), "{err}");
    assert!(err.to_string().contains("bytes free") || err.to_string().contains("are free"), "{err}");
}
