//! PPO: GAE against a plain reference; the minibatch loss, its gradients and the clipped Adam step against
//! candle's CPU autograd; learning on the planted pattern (CPU and GPU); GPU == CPU bitwise.

mod common;

use candle_core::{D, Device, Tensor};
use candle_nn::Optimizer;
use common::assert_bitwise;
use common::candle_ref::{active, assert_inactive_untouched, assert_steps_match, max_rel_err, mlp_with, vars};
use gpu_kernels::mlp::{ACTIONS, ACTOR_CRITIC, Layout, forward};
use gpu_kernels::ppo::gae_env;
use gpu_kernels::ppo::{PpoArgs, PpoSample};
use gpu_kernels::rng::draw_below;
use tradesim::data::synthetic::normal;
use tradesim::train::{SplitData, TrainConfig, evaluate, greedy_actions, train_ppo};
use tradesim::{Backend, EnvBatch, EnvConfig, PpoAgent, PpoParams, SimLayout, Transition, TrialParams};

/// The textbook recursion, written out for one env: A_t = d_t + gamma lambda (1 - done_t) A_{t+1},
/// d_t = r_t + gamma (1 - done_t) V_{t+1} - V_t, V_T = bootstrap.
fn reference(rewards: &[f32], values: &[f32], dones: &[bool], bootstrap: f32, gamma: f32, lambda: f32) -> Vec<f32> {
    let n = rewards.len();
    let mut adv = vec![0.0f32; n];
    let mut next_adv = 0.0f32;
    for t in (0..n).rev() {
        let next_v = if t + 1 < n { values[t + 1] } else { bootstrap };
        let nd = if dones[t] { 0.0 } else { 1.0 };
        let delta = rewards[t] + gamma * next_v * nd - values[t];
        adv[t] = delta + gamma * lambda * nd * next_adv;
        next_adv = adv[t];
    }
    adv
}

#[test]
fn gae_matches_the_reference() {
    let (steps, envs) = (40, 3);
    let mut ring = vec![Transition::default(); steps * envs];
    let mut values = vec![0.0f32; steps * envs];
    for (i, t) in ring.iter_mut().enumerate() {
        t.reward = normal(1, 1, i as u64) as f32;
        t.done = u8::from(draw_below(1, 2, i as u64, 7) == 0);
        t.valid = 1;
        values[i] = normal(1, 3, i as u64) as f32;
    }
    for e in 0..envs {
        let bootstrap = 0.3 * e as f32;
        let mut got = vec![0.0f32; steps * envs];
        let mut ret = vec![0.0f32; steps * envs];
        gae_env(e, envs, steps, 0.97, 0.9, &ring, &values, bootstrap, |i, a, r| {
            got[i] = a;
            ret[i] = r;
        });
        let col = |v: &[f32]| (0..steps).map(|t| v[t * envs + e]).collect::<Vec<f32>>();
        let rewards: Vec<f32> = (0..steps).map(|t| ring[t * envs + e].reward).collect();
        let dones: Vec<bool> = (0..steps).map(|t| ring[t * envs + e].done == 1).collect();
        let want = reference(&rewards, &col(&values), &dones, bootstrap, 0.97, 0.9);
        for (t, (g, w)) in col(&got).iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "env {e} step {t}: {g} vs {w}");
            assert!((ret[t * envs + e] - (g + values[t * envs + e])).abs() < 1e-6);
        }
    }
}

/// One env, a rollout of 4 steps (Pardo et al., 2018): when the last transition is a truncation (the
/// segment's end), its advantage bootstraps from the value after it, so a different bootstrap value changes
/// the advantages of the last step and, through the recursion, the earlier ones; a terminated last step does
/// not depend on it. A truncation inside the rollout (the env's segment ended early) bootstraps from the
/// same value: the state a done env keeps.
#[test]
fn truncation_bootstraps_and_termination_does_not() {
    let ring_with = |last: u8| -> Vec<Transition> {
        (0..4)
            .map(|t| Transition {
                reward: 0.1 * t as f32,
                valid: 1,
                done: if t == 3 { last } else { 0 },
                ..Transition::default()
            })
            .collect()
    };
    let values = [0.5f32, 0.4, 0.3, 0.2];
    let advantages = |ring: &[Transition], bootstrap: f32| {
        let mut adv = [0.0f32; 4];
        gae_env(0, 1, 4, 0.9, 0.8, ring, &values, bootstrap, |i, a, _| adv[i] = a);
        adv
    };
    let truncated = ring_with(tradesim::TRUNCATED);
    let (low, high) = (advantages(&truncated, 0.0), advantages(&truncated, 1.0));
    assert_eq!(low[3], 0.3 - 0.2);
    assert!((high[3] - (0.3 + 0.9 * 1.0 - 0.2)).abs() < 1e-6, "{}", high[3]);
    assert!((0..4).all(|t| high[t] > low[t]), "every advantage feels the bootstrap: {low:?} {high:?}");
    let terminated = ring_with(tradesim::TERMINATED);
    assert_eq!(advantages(&terminated, 0.0), advantages(&terminated, 1.0));
    assert_eq!(advantages(&terminated, 1.0)[3], 0.3 - 0.2);
    // Truncated at step 1, padding after it: step 1 bootstraps from the env's final value.
    let mut early = ring_with(0);
    early[1].done = tradesim::TRUNCATED;
    early[2].valid = 0;
    early[3].valid = 0;
    let (a0, a1) = (advantages(&early, 0.0), advantages(&early, 2.0));
    assert!((a1[1] - a0[1] - 0.9 * 2.0).abs() < 1e-6, "{a0:?} {a1:?}");
    assert_eq!((a1[2], a1[3]), (0.0, 0.0));
}

/// One minibatch of a trial 16 wide in a block 24 wide: the per-sample losses, the gradients of the clipped
/// surrogate + clipped value loss - entropy bonus, and the Adam step after the global-norm clip, against the
/// same loss written with candle ops and differentiated by candle's autograd (AdamW without decay for the
/// step). The batch is drawn so that the ratio clip, the value clip and the gradient clip all bite, and two
/// samples are empty (zero weight). Parameters outside the active width have exactly zero gradient and do
/// not move.
#[test]
fn minibatch_loss_gradients_and_adam_match_candle() {
    loss_gradients_and_adam_match_candle(gpu_kernels::mlp::ACT_RELU);
}

/// The same with Tanh hidden layers (CleanRL's `ppo.py`; the backward pass through `1 - y^2`).
#[test]
fn tanh_loss_gradients_and_adam_match_candle() {
    loss_gradients_and_adam_match_candle(gpu_kernels::mlp::ACT_TANH);
}

fn loss_gradients_and_adam_match_candle(act: u32) {
    const D_IN: usize = 7;
    const STRIDE: usize = 24;
    const H: usize = 16;
    const B: usize = 32;
    let l = Layout::actor_critic(D_IN, STRIDE).with_activation(act);
    let online = tradesim_host::init::init_weights(&l, H, 9, 1);
    let p = PpoParams {
        lr: 1e-3,
        hidden: H as u32,
        batch: B as u32,
        epochs: 1,
        minibatches: 1,
        max_grad_norm: 0.05,
        clip_vloss: 1,
        activation: act,
        ..PpoParams::default()
    };
    let args = PpoArgs {
        n_trials: 1,
        envs_per_trial: 1,
        input: D_IN as u32,
        hidden: STRIDE as u32,
        batch: B as u32,
        steps: B as u32,
        activation: act,
        ..PpoArgs::default()
    };
    let draw = |stream: u64, n: usize| (0..n as u64).map(|i| normal(11, stream, i) as f32).collect::<Vec<f32>>();
    let obs = draw(1, B * D_IN);
    let (noise_logp, noise_value, advantages, returns) = (draw(2, B), draw(3, B), draw(4, B), draw(5, B));
    // The samples: old log-probabilities and values near the network's own, so some ratios and values
    // fall inside the clip ranges and some outside.
    let samples: Vec<Option<PpoSample>> = (0..B)
        .map(|j| {
            let (mut a1, mut a2, mut out) = ([0.0; STRIDE], [0.0; STRIDE], [0.0; ACTOR_CRITIC]);
            forward(&l, &online, H, &obs[j * D_IN..(j + 1) * D_IN], &mut a1, &mut a2, &mut out);
            let action = (j % ACTIONS) as u8;
            let logp = gpu_kernels::ppo::log_softmax(&out)[action as usize];
            (j != 5 && j != 11).then(|| PpoSample {
                action,
                logp_old: logp + 0.3 * noise_logp[j],
                advantage: advantages[j],
                ret: out[ACTIONS] + returns[j],
                value_old: out[ACTIONS] + 0.3 * noise_value[j],
            })
        })
        .collect();
    let mut nets = tradesim::NetState {
        online: online.clone(),
        target: Vec::new(),
        m: vec![0.0; l.params()],
        v: vec![0.0; l.params()],
    };
    let step = tradesim_host::ppo::train_on_batch(&args, &[p], &mut nets, &obs, &samples).unwrap();

    // The same loss in candle.
    let dev = Device::Cpu;
    let column = |f: &dyn Fn(&PpoSample) -> f32| {
        let v: Vec<f32> = samples.iter().map(|s| s.as_ref().map_or(0.0, f)).collect();
        Tensor::from_vec(v, B, &dev).unwrap()
    };
    let weight = Tensor::from_vec(samples.iter().map(|s| f32::from(u8::from(s.is_some()))).collect(), B, &dev).unwrap();
    let acts: Vec<u32> = samples.iter().map(|s| s.map_or(0, |s| u32::from(s.action))).collect();
    let acts = Tensor::from_vec(acts, (B, 1), &dev).unwrap();
    let (logp_old, adv, ret, value_old) =
        (column(&|s| s.logp_old), column(&|s| s.advantage), column(&|s| s.ret), column(&|s| s.value_old));
    let vo = vars(&l, &online, H);
    let out = mlp_with(&vo, &Tensor::from_slice(&obs, (B, D_IN), &dev).unwrap(), act);
    let logits = out.narrow(1, 0, ACTIONS).unwrap();
    let value = out.narrow(1, ACTIONS, 1).unwrap().squeeze(1).unwrap();
    let logp = candle_nn::ops::log_softmax(&logits, D::Minus1).unwrap();
    let logp_a = logp.gather(&acts, 1).unwrap().squeeze(1).unwrap();
    let ratio = (logp_a - &logp_old).unwrap().exp().unwrap();
    let clip = f64::from(p.clip);
    let clipped = ratio.clamp(1.0 - clip, 1.0 + clip).unwrap();
    let surrogate = (&ratio * &adv).unwrap().minimum(&(&clipped * &adv).unwrap()).unwrap();
    let entropy = (logp.exp().unwrap() * &logp).unwrap().sum(1).unwrap().neg().unwrap();
    let v_err = (&value - &ret).unwrap();
    let v_clipped = ((&value - &value_old).unwrap().clamp(-clip, clip).unwrap() + &value_old).unwrap();
    let c_err = (&v_clipped - &ret).unwrap();
    let v_sq = v_err.sqr().unwrap().maximum(&c_err.sqr().unwrap()).unwrap();
    let per = ((surrogate.neg().unwrap() + (v_sq * f64::from(p.vf_coef * 0.5)).unwrap()).unwrap()
        - (entropy * f64::from(p.ent_coef)).unwrap())
    .unwrap();
    let loss = ((per * &weight).unwrap().sum_all().unwrap() / B as f64).unwrap();

    // The batch exercises every branch of the loss.
    let r: Vec<f32> = ratio.to_vec1().unwrap();
    let live = |j: usize| samples[j].is_some();
    let ratio_clipped = (0..B).filter(|&j| live(j) && (r[j] < 1.0 - p.clip || r[j] > 1.0 + p.clip)).count();
    let (vc, ve): (Vec<f32>, Vec<f32>) =
        (c_err.sqr().unwrap().to_vec1().unwrap(), v_err.sqr().unwrap().to_vec1().unwrap());
    let value_clipped = (0..B).filter(|&j| live(j) && vc[j] > ve[j]).count();
    assert!(ratio_clipped > 2 && ratio_clipped < B - 4, "{ratio_clipped} clipped ratios");
    assert!(value_clipped > 2, "{value_clipped} clipped values");
    assert_eq!(step.losses[5], 0.0);
    assert_eq!(step.losses[11], 0.0);

    let candle_loss = loss.to_scalar::<f32>().unwrap();
    let our_loss = step.losses.iter().sum::<f32>() / B as f32;
    assert!((our_loss - candle_loss).abs() <= 1e-5 * candle_loss.abs().max(1e-3), "loss {our_loss} vs {candle_loss}");
    let grads = loss.backward().unwrap();
    let ours = active(&l, &step.gradients, H);
    let mut sq = 0.0f64;
    for (i, v) in vo.iter().enumerate() {
        let theirs = grads.get(v).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let err = max_rel_err(&ours[i], &theirs);
        assert!(err <= 1e-5, "gradient of tensor {i}: relative error {err}");
        sq += theirs.iter().map(|g| f64::from(*g) * f64::from(*g)).sum::<f64>();
    }
    assert_inactive_untouched(&l, H, &step.gradients, &online, &nets.online);

    // Adam on the clipped gradient: candle's AdamW (no decay) on candle's gradients times the clip factor.
    let scale = (f64::from(p.max_grad_norm) / (sq.sqrt() + 1e-6)).min(1.0);
    assert!(scale < 0.5, "the gradient clip must bite: factor {scale}");
    let mut clipped_grads = grads;
    for v in &vo {
        let g = (clipped_grads.get(v).unwrap() * scale).unwrap();
        clipped_grads.insert(v, g);
    }
    let adam = candle_nn::ParamsAdamW {
        lr: f64::from(p.lr),
        beta1: f64::from(p.beta1),
        beta2: f64::from(p.beta2),
        eps: f64::from(p.adam_eps),
        weight_decay: 0.0,
    };
    let mut opt = candle_nn::AdamW::new(vo.clone(), adam).unwrap();
    opt.step(&clipped_grads).unwrap();
    assert_steps_match(&l, H, &vo, &online, &nets.online, 1e-4);
}

fn params() -> (TrialParams, PpoParams) {
    let env = TrialParams { w_pnl: 100.0, ..TrialParams::frictionless(10_000.0) };
    let ppo = PpoParams {
        lr: 3e-3,
        gamma: 0.5,
        lambda: 0.9,
        hidden: 16,
        batch: 64,
        epochs: 4,
        ent_coef: 0.01,
        ..PpoParams::default()
    };
    (env, ppo)
}

fn learns_a_planted_pattern(backend: &Backend) {
    let (env_p, ppo) = params();
    let train = common::planted_market(2_000, 1);
    let held_out = common::planted_market(600, 2);
    let (steps, envs) = (50, 16);
    let cfg = EnvConfig { segment_len: steps, ring_capacity: steps as usize * envs, seed: 4, trial_groups: 1 };
    let mut env = EnvBatch::new(backend, &train, &[env_p], SimLayout::new(1, envs).unwrap(), cfg).unwrap();
    let mut agent = PpoAgent::new(backend, &env, &[ppo], 16, 64, 4).unwrap();
    for epoch in 0..15 {
        env.reset_epoch(epoch).unwrap();
        agent.collect(&mut env).unwrap();
        agent.update(&mut env).unwrap();
    }
    let policy = evaluate(backend, &mut agent, &held_out, &[env_p], 252.0, 4).unwrap()[0];
    common::assert_beats_baselines("PPO", backend, &held_out, env_p, policy.total_return);
}
test_device!(learns_a_planted_pattern);

/// The old fixed-batch mode: minibatches of `batch` drawn with replacement, no gradient clipping, no value
/// clipping, PyTorch's default initialization.
fn fixed_batch(p: PpoParams, batch: u32) -> PpoParams {
    PpoParams { minibatches: 0, batch, max_grad_norm: 0.0, clip_vloss: 0, orthogonal_init: 0, adam_eps: 1e-8, ..p }
}

/// 3 trials (widths and batches that are not multiples of anything, different learning rates and epochs;
/// CleanRL's defaults, the fixed-batch mode, and a split into 3 with annealing and a tight gradient clip)
/// after three rollouts and their updates.
fn updated_agent(backend: &Backend) -> (PpoAgent, [TrialParams; 3]) {
    updated_agent_with(backend, PpoParams::default().activation)
}

/// [`updated_agent`] with the hidden activation `act`; trial 1 does not normalize its advantages.
fn updated_agent_with(backend: &Backend, act: u32) -> (PpoAgent, [TrialParams; 3]) {
    let (env_p, ppo) = params();
    let ppo = PpoParams { activation: act, ..ppo };
    let market = common::planted_market(1_000, 5);
    let cfg = EnvConfig { segment_len: 40, ring_capacity: 40 * 32, seed: 6, trial_groups: 1 };
    let trials = [env_p, TrialParams { spread: 0.001, ..env_p }, env_p];
    let ppos = [
        ppo,
        fixed_batch(PpoParams { hidden: 11, norm_adv: 0, ..ppo }, 37),
        PpoParams { lr: 1e-2, epochs: 2, hidden: 13, minibatches: 3, anneal_rollouts: 3, max_grad_norm: 0.05, ..ppo },
    ];
    let mut env = EnvBatch::new(backend, &market, &trials, SimLayout::new(3, 32).unwrap(), cfg).unwrap();
    let mut agent = PpoAgent::new(backend, &env, &ppos, 16, 64, 6).unwrap();
    for epoch in 0..3 {
        env.reset_epoch(epoch).unwrap();
        agent.collect(&mut env).unwrap();
        agent.update(&mut env).unwrap();
    }
    (agent, trials)
}

/// A PPO trial's updates are its own: `epochs x minibatches` of its share of the rollout whatever its mates
/// ask for (a fixed batch, another split, more epochs), with its key's draws and its own gradient norm; alone or at slot 1 of three (mates with bigger batches, more epochs, other
/// widths and keys), it ends with the same weights, bit for bit.
fn a_trial_alone_equals_the_trial_in_a_batch(backend: &Backend) {
    let (env_p, ppo) = params();
    let market = common::planted_market(1_000, 5);
    let cfg = EnvConfig { segment_len: 40, ring_capacity: 40 * 32, seed: 6, trial_groups: 1 };
    let me = (
        TrialParams { key: 42, ..env_p },
        PpoParams { hidden: 11, epochs: 2, minibatches: 3, anneal_rollouts: 2, max_grad_norm: 0.1, ..ppo },
    );
    let run = |trials: &[(TrialParams, PpoParams)], hidden: usize, batch: usize| {
        let envs: Vec<TrialParams> = trials.iter().map(|t| t.0).collect();
        let ppos: Vec<PpoParams> = trials.iter().map(|t| t.1).collect();
        let mut env = EnvBatch::new(backend, &market, &envs, SimLayout::new(trials.len(), 32).unwrap(), cfg).unwrap();
        let mut agent = PpoAgent::new(backend, &env, &ppos, hidden, batch, 6).unwrap();
        for epoch in 0..2 {
            env.reset_epoch(epoch).unwrap();
            agent.collect(&mut env).unwrap();
            agent.update(&mut env).unwrap();
        }
        (agent.layout(), agent.state().unwrap(), agent.last_losses().unwrap())
    };
    let (l1, alone, alone_losses) = run(&[me], 11, 1);
    let mates = [
        (TrialParams { key: 7, ..env_p }, fixed_batch(PpoParams { hidden: 16, epochs: 4, ..ppo }, 64)),
        me,
        (TrialParams { key: 99, spread: 0.001, ..env_p }, PpoParams { hidden: 13, epochs: 1, ..ppo }),
    ];
    let (l3, batched, batched_losses) = run(&mates, 16, 64);
    assert_eq!(common::trial_bits(&l1, &alone.online, 0, 11), common::trial_bits(&l3, &batched.online, 1, 11));
    assert_eq!(common::trial_bits(&l1, &alone.v, 0, 11), common::trial_bits(&l3, &batched.v, 1, 11));
    assert_bitwise("the trial's last mean loss", &alone_losses[..1], &batched_losses[1..2]);
}
test_device!(a_trial_alone_equals_the_trial_in_a_batch);

fn updates(backend: &Backend, act: u32) -> (tradesim::NetState, Vec<f32>) {
    let (agent, _) = updated_agent_with(backend, act);
    (agent.state().unwrap(), agent.last_losses().unwrap())
}

/// The greedy walks (GPU: a block per trial; CPU: a thread per trial) choose the actions of stepping a CPU
/// copy bar by bar through the acting stages' products, bit for bit.
#[test]
fn greedy_walks_match_stepping() {
    let market = common::planted_market(500, 8);
    let mut backends = vec![Backend::Cpu];
    backends.extend(common::gpu_backend());
    for backend in &backends {
        let (mut agent, trials) = updated_agent(backend);
        let (walk_metrics, walked) = greedy_actions(backend, &mut agent, &market, &trials, 252.0, 6).unwrap();
        let steps = market.n_bars() - 1;
        let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: steps, seed: 6, trial_groups: 1 };
        let mut env = EnvBatch::new(&Backend::Cpu, &market, &trials, SimLayout::new(3, 1).unwrap(), cfg).unwrap();
        env.reset_segments(&[(0, steps as u32); 3]).unwrap();
        let mut copy = agent.cpu_copy(&env).unwrap();
        for step in 0..steps as u64 {
            copy.act_and_step(&mut env, step, true).unwrap();
        }
        let stepped: Vec<u8> = env.transitions().unwrap().iter().map(|t| t.action).collect();
        assert_eq!(walked.len(), 3 * steps);
        assert_eq!(walked, stepped, "{}: the walk and the stepping choose different actions", backend.info().backend);
        let distinct: std::collections::BTreeSet<u8> = walked.iter().copied().collect();
        assert!(distinct.len() > 1, "a walk that never changes its action checks little: {distinct:?}");
        assert!(walk_metrics.iter().all(|m| m.total_return.is_finite()));
    }
}

/// Three rollouts and their updates for 3 trials (different widths, batches, learning rates): the GPU gives
/// the CPU's bits.
/// With Tanh (the default) and with ReLU, advantages normalized per minibatch (trials 0 and 2) and not
/// (trial 1).
#[test]
fn gpu_ppo_matches_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    for act in [gpu_kernels::mlp::ACT_TANH, gpu_kernels::mlp::ACT_RELU] {
        let (c, cl) = updates(&Backend::Cpu, act);
        let (g, gl) = updates(&gpu, act);
        assert_bitwise("weights", &c.online, &g.online);
        assert_bitwise("adam m", &c.m, &g.m);
        assert_bitwise("adam v", &c.v, &g.v);
        assert_bitwise("losses", &cl, &gl);
    }
}

/// The options change the update: normalizing the advantages, or Tanh for ReLU, gives other weights (so
/// the bitwise comparisons above compare the paths they name); a batch mixing activations is refused.
#[test]
fn the_ppo_options_are_applied() {
    let (tanh, _) = updates(&Backend::Cpu, gpu_kernels::mlp::ACT_TANH);
    let (relu, _) = updates(&Backend::Cpu, gpu_kernels::mlp::ACT_RELU);
    assert_ne!(tanh.online, relu.online);
    let (env_p, ppo) = params();
    let market = common::planted_market(1_000, 5);
    let cfg = EnvConfig { segment_len: 40, ring_capacity: 40 * 32, seed: 6, trial_groups: 1 };
    let run = |ppos: &[PpoParams]| {
        let mut env = EnvBatch::new(&Backend::Cpu, &market, &[env_p; 2], SimLayout::new(2, 32).unwrap(), cfg).unwrap();
        let mut agent = PpoAgent::new(&Backend::Cpu, &env, ppos, 16, 64, 6)?;
        rollouts_and_updates(&mut agent, &mut env, 2);
        Ok::<_, tradesim::HostError>(agent.state().unwrap().online)
    };
    let normed = run(&[ppo, PpoParams { norm_adv: 0, ..ppo }]).unwrap();
    let per = normed.len() / 2;
    // Trial 1 alone, without normalization, equals trial 1 of the batch; trial 0 (normalized) differs.
    let plain = run(&[PpoParams { norm_adv: 0, ..ppo }; 2]).unwrap();
    assert_eq!(normed[per..], plain[per..]);
    assert_ne!(normed[..per], plain[..per]);
    let mixed = run(&[ppo, PpoParams { activation: gpu_kernels::mlp::ACT_RELU, ..ppo }]).unwrap_err();
    assert!(mixed.to_string().contains("share their activation"), "{mixed}");
}

/// `epochs` rollouts (epochs `0 ..`) and their updates: the agent's state and last losses after them.
fn rollouts_and_updates(agent: &mut PpoAgent, env: &mut EnvBatch, epochs: u64) -> (tradesim::NetState, Vec<f32>) {
    for epoch in 0..epochs {
        env.reset_epoch(epoch).unwrap();
        agent.collect(env).unwrap();
        agent.update(env).unwrap();
    }
    (agent.state().unwrap(), agent.last_losses().unwrap())
}

/// Minibatches long enough for gradient chunks above the smallest ([`gpu_kernels::net::grad_chunk`]: 256
/// samples here, the last chunk short) beside a trial whose active batch is half the buffer: the GPU gives
/// the CPU's bits.
#[test]
fn long_gradient_chunks_match_cpu_bitwise() {
    use gpu_kernels::net::{GRAD_CHUNK, grad_chunk};
    let Some(gpu) = common::gpu_backend() else { return };
    let (envs, steps) = (200, 101u32);
    let n = envs * steps as usize;
    assert!(grad_chunk(n) > GRAD_CHUNK && !n.is_multiple_of(grad_chunk(n)), "the sizes no longer test long chunks");
    let run = |backend: &Backend| {
        let (env_p, ppo) = params();
        let market = common::planted_market(1_000, 5);
        let cfg = EnvConfig { segment_len: steps, ring_capacity: n, seed: 6, trial_groups: 1 };
        let trials = [env_p, TrialParams { spread: 0.001, ..env_p }];
        let ppos = [
            PpoParams { minibatches: 1, batch: n as u32, epochs: 2, ..ppo },
            PpoParams { minibatches: 2, batch: (n / 2) as u32, hidden: 13, epochs: 1, ..ppo },
        ];
        let mut env = EnvBatch::new(backend, &market, &trials, SimLayout::new(2, envs).unwrap(), cfg).unwrap();
        let mut agent = PpoAgent::new(backend, &env, &ppos, 16, n, 6).unwrap();
        rollouts_and_updates(&mut agent, &mut env, 2)
    };
    let ((c, cl), (g, gl)) = (run(&Backend::Cpu), run(&gpu));
    assert_bitwise("weights", &c.online, &g.online);
    assert_bitwise("adam v", &c.v, &g.v);
    assert_bitwise("losses", &cl, &gl);
}

/// Updates whose fused backward blocks would take more than one wave on the H200 (6 trials x 125 gradient
/// chunks x 2 unit groups): the host stores the hidden gradient of layer 1 (`mlp_rows_wide`), sums the
/// gradients from it (`mlp_gradients`), and `mlp_rows_wide` computes (and stores) the hidden gradient of
/// layer 2 from the output gradient (`ppo_loss` stores none). Widths below the stride, a trial whose minibatch
/// is half the buffer (empty chunks), another with a tight gradient clip: the GPU gives the CPU's bits.
#[test]
fn gpu_split_backward_matches_cpu_bitwise() {
    use gpu_kernels::backward::{BackwardShared, backward_blocks, backward_suit};
    use gpu_kernels::net::NetArgs;
    let Some(gpu) = common::gpu_backend() else { return };
    let (trials, envs, steps, stride) = (6usize, 64usize, 250u32, 32usize);
    let n = envs * steps as usize;
    let market = common::planted_market(1_000, 5);
    let run = |backend: &Backend| {
        let (env_p, ppo) = params();
        let cfg = EnvConfig { segment_len: steps, ring_capacity: n, seed: 6, trial_groups: 1 };
        let env_params: Vec<_> =
            (0..trials).map(|t| TrialParams { spread: 0.0005 * (t % 3) as f64, ..env_p }).collect();
        let ppos: Vec<_> = (0..trials)
            .map(|t| match t % 3 {
                0 => PpoParams { minibatches: 1, batch: n as u32, hidden: 32, epochs: 2, ..ppo },
                1 => PpoParams { minibatches: 2, batch: (n / 2) as u32, hidden: 29, epochs: 1, ..ppo },
                _ => PpoParams { minibatches: 1, batch: n as u32, hidden: 17, max_grad_norm: 0.05, ..ppo },
            })
            .collect();
        let layout = SimLayout::new(trials, envs).unwrap();
        let mut env = EnvBatch::new(backend, &market, &env_params, layout, cfg).unwrap();
        let mut agent = PpoAgent::new(backend, &env, &ppos, stride, n, 6).unwrap();
        let l = agent.layout();
        let net = NetArgs::new(trials as u32, envs as u32, l.input as u32, stride as u32, l.outputs, n as u32, 1);
        let ((x, y), bytes) = (backward_blocks(&net), BackwardShared::of(&net).bytes() + 1_024);
        // Blocks a multiprocessor by shared memory (228 KB on the H200, as the host counts them).
        let per_sm = (228 * 1_024) / bytes;
        assert!(backward_suit(&net) && x * y > per_sm * 132, "the sizes no longer take more than one wave");
        rollouts_and_updates(&mut agent, &mut env, 2)
    };
    let ((c, cl), (g, gl)) = (run(&Backend::Cpu), run(&gpu));
    assert_bitwise("weights", &c.online, &g.online);
    assert_bitwise("adam m", &c.m, &g.m);
    assert_bitwise("adam v", &c.v, &g.v);
    assert_bitwise("losses", &cl, &gl);
}

#[test]
fn train_ppo_runs_on_real_data() {
    let d = tradesim::data::embedded().unwrap();
    let mut cfg = TrainConfig::default_for(2, 2, 3);
    cfg.envs = 8;
    cfg.segment_len = 32;
    cfg.hidden = 16;
    cfg.batch = 32;
    // Segments of 32 steps collected in two rollouts of 16 (CleanRL's num_steps), each followed by its
    // 2 update epochs x 4 minibatches.
    cfg.rollout_steps = 16;
    let ppo = [PpoParams { hidden: 16, batch: 32, epochs: 2, ..PpoParams::default() }; 2];
    let data = SplitData::new(&d.series[0], cfg.split, tradesim::DEFAULT_SIGMA_SPAN).unwrap();
    let trained = train_ppo(&Backend::Cpu, &data, &cfg, &ppo, |_| Ok(())).unwrap();
    assert_eq!(trained.epochs.len(), 2);
    assert_eq!(trained.epochs.iter().map(|e| e.grad_steps).collect::<Vec<_>>(), [16, 32]);
    assert_eq!(trained.epochs[1].env_steps, 64);
    assert_eq!(trained.test_actions.len(), 2 * (trained.split.test.len() - 1));
    assert!(trained.epochs[1].losses.iter().all(|l| l.is_finite()));
}

/// A CPU copy of an agent keeps learning: its rollout and update buffers are sized for the env it is
/// copied for (a copy used to panic on `collect`).
#[test]
fn a_cpu_copy_collects_and_updates() {
    let (agent, trials) = updated_agent(&Backend::Cpu);
    let market = common::planted_market(1_000, 5);
    let cfg = EnvConfig { segment_len: 40, ring_capacity: 40 * 32, seed: 6, trial_groups: 1 };
    let mut env = EnvBatch::new(&Backend::Cpu, &market, &trials, SimLayout::new(3, 32).unwrap(), cfg).unwrap();
    let mut copy = agent.cpu_copy(&env).unwrap();
    let before = copy.state().unwrap().online;
    env.reset_epoch(7).unwrap();
    copy.collect(&mut env).unwrap();
    copy.update(&mut env).unwrap();
    assert!(copy.updates() > agent.updates());
    assert!(copy.last_losses().unwrap().iter().all(|l| l.is_finite()));
    assert_ne!(copy.state().unwrap().online, before, "the copy's update changed nothing");
}

/// CleanRL's initialization: orthogonal hidden layers with gain sqrt(2), policy rows with gain 0.01, the
/// value row with gain 1, zero biases (over the active width; zero beyond).
#[test]
fn ppo_starts_from_orthogonal_weights() {
    let l = gpu_kernels::mlp::Layout::actor_critic(20, 16);
    let h = 12;
    let w = tradesim_host::init::init_orthogonal(&l, h, 3, 4);
    let row = |at: usize, stride: usize, r: usize, cols: usize| w[at + r * stride..at + r * stride + cols].to_vec();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum::<f64>();
    // W1 (12 x 20): rows orthogonal, each of norm sqrt(2).
    for i in 0..h {
        for j in 0..h {
            let want = if i == j { 2.0 } else { 0.0 };
            let got = dot(&row(l.w1(), l.input, i, l.input), &row(l.w1(), l.input, j, l.input));
            assert!((got - want).abs() < 1e-5, "W1 rows {i}, {j}: {got}");
        }
    }
    // W2 (12 x 12 of a 16-wide row): square, so orthogonal rows of norm sqrt(2); zero past the width.
    for i in 0..h {
        let r = row(l.w2(), l.hidden, i, l.hidden);
        assert!((dot(&r, &r) - 2.0).abs() < 1e-5);
        assert!(r[h..].iter().all(|&x| x == 0.0));
        assert!((dot(&r, &row(l.w2(), l.hidden, (i + 1) % h, l.hidden))).abs() < 1e-5);
    }
    // Head: three policy rows of norm 0.01, orthogonal; the value row of norm 1.
    for k in 0..3 {
        let r = row(l.w3(), l.hidden, k, h);
        assert!((dot(&r, &r).sqrt() - 0.01).abs() < 1e-7);
        assert!(dot(&r, &row(l.w3(), l.hidden, (k + 1) % 3, h)).abs() < 1e-9);
    }
    let v = row(l.w3(), l.hidden, 3, h);
    assert!((dot(&v, &v).sqrt() - 1.0).abs() < 1e-6);
    let biases = [l.b1()..l.b1() + l.hidden, l.b2()..l.b2() + l.hidden, l.b3()..l.b3() + 4];
    assert!(biases.into_iter().all(|r| w[r].iter().all(|&b| b == 0.0)));
    assert_ne!(w, tradesim_host::init::init_orthogonal(&l, h, 3, 5), "another key, other weights");
}
