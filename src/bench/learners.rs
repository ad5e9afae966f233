//! W3 and W4: a DQN epoch and a PPO epoch of every trial on each backend, with their compute, their
//! profile on a GPU, and the self-check of a GPU row against the CPU's bits; and W3 again at many trials.

use std::time::Instant;

use super::report::{self, Profile, Row};
use super::{Sizes, WorkloadData, demo_params, workload};
use crate::{Backend, EnvBatch, EnvConfig, Error, SimLayout};

/// W3: DQN gradient steps and one epoch, CPU vs GPU; `sampler` is called from a thread of its own every 2 ms
/// during the GPU epoch. Each GPU row is checked against the CPU bit for bit (its networks, Adam state and losses after the timed epoch; see [`report::Row::check`]).
pub fn dqn(
    backends: &[Backend],
    sizes: &Sizes,
    mut sampler: impl FnMut() -> Option<report::Utilization> + Send,
) -> Result<Vec<Row>, Error> {
    let w = workload(sizes.bars)?;
    let trials: Vec<usize> = (0..sizes.trials).collect();
    let (envs, _, timed) = sizes.dqn;
    let mut cpu_bits = None;
    let mut rows = Vec::new();
    for backend in backends {
        let (mut env, mut agent, steps) = dqn_setup(backend, &w, sizes, &trials)?;
        let grad_steps_per_s = dqn_warm_up(&mut agent, &mut env, timed)?;
        env.reset_epoch(1)?;
        let flops_before = agent.product_flops();
        // NVML is sampled from a thread of its own while the GPU epoch runs (a sample costs host time that
        // a training loop does not spend; taken inline every 8 steps it was part of the epoch's wall time).
        let ((ran, seconds), utilization) = report::sampled(backend.is_cuda(), &mut sampler, || {
            let started = Instant::now();
            let ran = dqn_epoch(&mut agent, &mut env, steps, 8);
            (ran, started.elapsed().as_secs_f64())
        });
        ran?;
        let flops = agent.product_flops() - flops_before;
        let bits = trial_bits(&agent.state()?, &agent.last_losses()?, agent.layout().params());
        let check = cpu_check("W3", backend, bits, &mut cpu_bits, sizes.trials, |sample| {
            let (mut env, mut agent, steps) = dqn_setup(&Backend::Cpu, &w, sizes, sample)?;
            dqn_warm_up(&mut agent, &mut env, timed)?;
            env.reset_epoch(1)?;
            dqn_epoch(&mut agent, &mut env, steps, 8)?;
            Ok(trial_bits(&agent.state()?, &agent.last_losses()?, agent.layout().params()))
        })?;
        let mut row = Row::dqn(backend.info().backend, sizes.trials * envs * steps, seconds, grad_steps_per_s, steps);
        if utilization.samples > 0 {
            row = row.with_utilization(utilization);
        }
        // The same epoch again with every launch bracketed by CUDA events: kernel time per kernel.
        let profile = profiled(backend, || {
            env.reset_epoch(2)?;
            dqn_epoch(&mut agent, &mut env, steps, 8 + steps as u64)
        })?;
        rows.push(row.with_compute(flops, profile, steps).with_check(check));
        if sizes.walk_bars > 0 {
            // The greedy evaluation walk: one env per trial over the first `walk_bars` bars.
            let env_params: Vec<_> = trials.iter().map(|&k| demo_params(k)).collect();
            let first = crate::data::features::WARMUP;
            let part = w.prepared.market_data(first..first + sizes.walk_bars.min(w.market.n_bars()))?;
            let started = Instant::now();
            let (_, actions) = crate::train::greedy_actions(backend, &mut agent, &part, &env_params, 252.0, 3)?;
            let seconds = started.elapsed().as_secs_f64();
            let mut row = Row::walk(backend.info().backend, sizes.trials, actions.len(), seconds);
            // Again with the launches bracketed by events: the walk kernel's share of the wall time.
            let profile = profiled(backend, || {
                Ok(crate::train::greedy_actions(backend, &mut agent, &part, &env_params, 252.0, 3).map(|_| ())?)
            })?;
            if let Some(p) = profile {
                use gpu_kernels::registry::{GREEDY_WALK, GREEDY_WALK_REGS};
                let walk = |k: &&(String, usize, f64)| k.0 == GREEDY_WALK || k.0 == GREEDY_WALK_REGS;
                let ms: f64 = p.kernels.iter().filter(walk).map(|k| k.2).sum();
                let bars = actions.len() / sizes.trials.max(1);
                row = row.with_note(format!(
                    "walk kernel {ms:.1} ms of {:.1} ms ({:.2} us per bar)",
                    1e3 * seconds,
                    1e3 * ms / bars.max(1) as f64
                ));
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// W3's env batch and agent for the demo trials `trials` (indices of [`demo_params`]; each trial's draws are
/// keyed by its index, so a subset reproduces those trials of the whole batch), and the epoch's steps.
pub(super) fn dqn_setup(
    backend: &Backend,
    w: &WorkloadData,
    sizes: &Sizes,
    trials: &[usize],
) -> Result<(EnvBatch, crate::DqnAgent, usize), Error> {
    let (envs, batch, _) = sizes.dqn;
    let hidden = 128;
    let env_params: Vec<_> = trials.iter().map(|&k| demo_params(k)).collect();
    let dqn = gpu_kernels::dqn::DqnParams { hidden: hidden as u32, batch: batch as u32, ..Default::default() };
    let steps = ((w.market.n_bars() - 1) / envs).max(1);
    let layout = SimLayout::new(trials.len(), envs)?;
    let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: envs * steps.max(8), seed: 3, trial_groups: 1 };
    let env = EnvBatch::new(backend, &w.market, &env_params, layout, cfg)?;
    let agent = crate::DqnAgent::new(backend, &env, &vec![dqn; trials.len()], hidden, batch, 3)?;
    Ok((env, agent, steps))
}

/// Fills the replay rings (8 steps), then times `timed` gradient steps: gradient steps per second.
pub(super) fn dqn_warm_up(agent: &mut crate::DqnAgent, env: &mut EnvBatch, timed: usize) -> Result<f64, Error> {
    for step in 0..8 {
        agent.act_and_step(env, step, false)?;
    }
    agent.train_step(env)?;
    agent.last_losses()?;
    let started = Instant::now();
    for _ in 0..timed {
        agent.train_step(env)?;
    }
    agent.last_losses()?;
    Ok(timed as f64 / started.elapsed().as_secs_f64())
}

/// One DQN epoch: `steps` times acting (env steps numbered from `first`) and one gradient step, then the
/// losses read back (the device has finished).
pub(super) fn dqn_epoch(
    agent: &mut crate::DqnAgent,
    env: &mut EnvBatch,
    steps: usize,
    first: u64,
) -> Result<(), Error> {
    for step in 0..steps as u64 {
        agent.act_and_step(env, first + step, false)?;
        agent.train_step(env)?;
    }
    agent.last_losses()?;
    Ok(())
}

/// Every trial's networks and Adam state (online, target, first and second moments) and last mean loss, as
/// bits: what W3 and W4 compare between the GPU and the CPU after the timed epoch.
pub(super) fn trial_bits(state: &crate::NetState, losses: &[f32], per_trial: usize) -> Vec<Vec<u32>> {
    (0..losses.len())
        .map(|k| {
            let part = |v: &[f32]| v.get(k * per_trial..(k + 1) * per_trial).unwrap_or(&[]).to_vec();
            [part(&state.online), part(&state.target), part(&state.m), part(&state.v), vec![losses[k]]]
                .concat()
                .into_iter()
                .map(f32::to_bits)
                .collect()
        })
        .collect()
}

/// Compares `got` (every trial of the batch) with `expected` (trials `sample`, in order) word by word: an
/// error names the first trial and word that differ.
pub(super) fn compare_bits(
    workload: &str,
    sample: &[usize],
    expected: &[Vec<u32>],
    got: &[Vec<u32>],
) -> Result<(), Error> {
    for (&k, want) in sample.iter().zip(expected) {
        let got = &got[k];
        if let Some(i) = (0..want.len().max(got.len())).find(|&i| want.get(i) != got.get(i)) {
            return Err(Error::Output(format!(
                "{workload}: the GPU differs from the CPU in trial {k} at word {i} of {} (networks, Adam state, \
                 loss): {:?} vs {:?}",
                want.len(),
                got.get(i).map(|b| f32::from_bits(*b)),
                want.get(i).map(|b| f32::from_bits(*b))
            )));
        }
    }
    Ok(())
}

/// The trials a GPU row is checked on when the CPU did not run the whole batch in the same run: the first
/// and the last.
pub(super) fn check_sample(trials: usize) -> Vec<usize> {
    let mut sample = vec![0, trials.saturating_sub(1)];
    sample.dedup();
    sample
}

/// The self-check of a learner workload: on the CPU, keeps `bits` as the reference of later rows; on a GPU,
/// compares `bits` bit for bit with the CPU's trials of this run, or, where the CPU did not run them, with
/// `reference` run on the CPU for [`check_sample`]'s trials. A difference is an error naming the trial and
/// the first differing word; agreement is the note the row carries.
pub(super) fn cpu_check(
    workload: &str,
    backend: &Backend,
    bits: Vec<Vec<u32>>,
    cpu_bits: &mut Option<Vec<Vec<u32>>>,
    trials: usize,
    reference: impl FnOnce(&[usize]) -> Result<Vec<Vec<u32>>, Error>,
) -> Result<String, Error> {
    if !backend.is_cuda() {
        *cpu_bits = Some(bits);
        return Ok(String::new());
    }
    let (sample, expected, source) = match cpu_bits {
        Some(all) => ((0..trials).collect::<Vec<_>>(), all.clone(), "the CPU rows of this run"),
        None => {
            let sample = check_sample(trials);
            let expected = reference(&sample)?;
            (sample, expected, "a CPU run of those trials")
        }
    };
    compare_bits(workload, &sample, &expected, &bits)?;
    let words: usize = expected.iter().map(Vec::len).sum();
    Ok(format!(
        "{} trial(s) ({}) bitwise equal to {source} after the timed epoch: {words} words of weights, Adam state \
         and losses",
        sample.len(),
        sample.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    ))
}

/// W3 at width on the GPUs only: one DQN epoch of 1,024 trials x 1,024 envs over all bars (64 trials with
/// `--quick`), as `tradesim bench dqn --trials 1024` runs it (without the walk); nothing on a CPU-only host.
pub(super) fn wide(
    backends: &[Backend],
    sizes: &Sizes,
    quick: bool,
    sample: impl FnMut() -> Option<report::Utilization> + Send,
) -> Result<Vec<Row>, Error> {
    let gpus: Vec<Backend> = backends.iter().filter(|b| b.is_cuda()).cloned().collect();
    if gpus.is_empty() {
        return Ok(Vec::new());
    }
    let trials = if quick { 64 } else { 1_024 };
    let rows = dqn(&gpus, &Sizes { trials, walk_bars: 0, ..*sizes }, sample)?;
    Ok(rows.into_iter().map(|r| Row { variant: format!("{trials} trials"), ..r }).collect())
}

/// Runs `epoch` with every launch bracketed by CUDA events on a GPU backend and returns the per-kernel
/// profile with the device's measured FMA peak; on the CPU runs nothing and returns `None`.
pub(super) fn profiled(backend: &Backend, epoch: impl FnOnce() -> Result<(), Error>) -> Result<Option<Profile>, Error> {
    #[cfg(feature = "cuda")]
    if let Backend::Cuda(rt) = backend {
        let fma_peak = rt.fma_peak()?;
        rt.start_profile()?;
        let ran = epoch();
        let kernels = rt.stop_profile()?.kernels;
        ran?;
        return Ok(Some(Profile { kernels, fma_peak }));
    }
    let _ = (backend, epoch);
    Ok(None)
}

/// W4: one PPO epoch (a rollout of every env over the bars, GAE, 4 update epochs of 4 minibatches each,
/// CleanRL's defaults: per-minibatch advantage normalization, Tanh, gradient and value clipping, the
/// learning rate annealed), CPU vs GPU, each GPU row checked against the CPU
/// bit for bit (see [`report::Row::check`]).
pub fn ppo(backends: &[Backend], sizes: &Sizes) -> Result<Vec<Row>, Error> {
    let w = workload(sizes.bars)?;
    let trials: Vec<usize> = (0..sizes.trials).collect();
    let envs = sizes.dqn.0;
    let mut cpu_bits = None;
    let mut rows = Vec::new();
    for backend in backends {
        let (mut env, mut agent, steps) = ppo_setup(backend, &w, sizes, &trials)?;
        env.reset_epoch(0)?;
        ppo_epoch(&mut agent, &mut env)?; // warm-up: plans and buffers
        let (before, flops_before) = (agent.updates(), agent.product_flops());
        env.reset_epoch(1)?;
        let started = Instant::now();
        ppo_epoch(&mut agent, &mut env)?;
        let seconds = started.elapsed().as_secs_f64();
        let updates = (agent.updates() - before) as usize;
        let flops = agent.product_flops() - flops_before;
        let bits = trial_bits(&agent.state()?, &agent.last_losses()?, agent.layout().params());
        let check = cpu_check("W4", backend, bits, &mut cpu_bits, sizes.trials, |sample| {
            let (mut env, mut agent, _) = ppo_setup(&Backend::Cpu, &w, sizes, sample)?;
            for n in 0..2 {
                env.reset_epoch(n)?;
                ppo_epoch(&mut agent, &mut env)?;
            }
            Ok(trial_bits(&agent.state()?, &agent.last_losses()?, agent.layout().params()))
        })?;
        let row =
            Row::ppo(backend.info().backend, sizes.trials * envs * steps, seconds, updates as f64 / seconds, updates);
        let profile = profiled(backend, || {
            env.reset_epoch(2)?;
            ppo_epoch(&mut agent, &mut env)
        })?;
        rows.push(row.with_compute(flops, profile, steps).with_check(check));
    }
    Ok(rows)
}

/// The rollouts of a W4 run (warm-up, timed, profiled): the learning rate anneals over them.
const W4_ROLLOUTS: u32 = 3;

/// W4's env batch and agent for the demo trials `trials` (as [`dqn_setup`]), and the rollout's steps.
pub(super) fn ppo_setup(
    backend: &Backend,
    w: &WorkloadData,
    sizes: &Sizes,
    trials: &[usize],
) -> Result<(EnvBatch, crate::PpoAgent, usize), Error> {
    let (envs, batch, _) = sizes.dqn;
    let hidden = 128;
    let env_params: Vec<_> = trials.iter().map(|&k| demo_params(k)).collect();
    // CleanRL's defaults as the search runs them: the learning rate annealed to 0 over the run's rollouts
    // (the warm-up, the timed and the profiled epoch).
    let ppo = gpu_kernels::ppo::PpoParams {
        hidden: hidden as u32,
        batch: batch as u32,
        epochs: 4,
        anneal_rollouts: W4_ROLLOUTS,
        ..Default::default()
    };
    let steps = ((w.market.n_bars() - 1) / envs).max(1);
    let layout = SimLayout::new(trials.len(), envs)?;
    let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: envs * steps, seed: 3, trial_groups: 1 };
    let env = EnvBatch::new(backend, &w.market, &env_params, layout, cfg)?;
    let agent = crate::PpoAgent::new(backend, &env, &vec![ppo; trials.len()], hidden, batch, 3)?;
    Ok((env, agent, steps))
}

/// One PPO epoch of envs already reset: a rollout, the update, the losses read back.
pub(super) fn ppo_epoch(agent: &mut crate::PpoAgent, env: &mut EnvBatch) -> Result<(), Error> {
    agent.collect(env)?;
    agent.update(env)?;
    agent.last_losses()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The premise of the sampled self-check: trials 0 and 4 run alone give the bits they have in the batch
    /// of 5 (their draws are keyed by the trial, not by its place in the batch).
    #[test]
    fn a_subset_of_the_trials_reproduces_them() {
        let sizes = Sizes::QUICK;
        let w = workload(sizes.bars).unwrap();
        let dqn_bits = |trials: &[usize]| {
            let (mut env, mut agent, steps) = dqn_setup(&Backend::Cpu, &w, &sizes, trials).unwrap();
            dqn_warm_up(&mut agent, &mut env, 2).unwrap();
            env.reset_epoch(1).unwrap();
            dqn_epoch(&mut agent, &mut env, steps, 8).unwrap();
            trial_bits(&agent.state().unwrap(), &agent.last_losses().unwrap(), agent.layout().params())
        };
        let ppo_bits = |trials: &[usize]| {
            let (mut env, mut agent, _) = ppo_setup(&Backend::Cpu, &w, &sizes, trials).unwrap();
            for n in 0..2 {
                env.reset_epoch(n).unwrap();
                ppo_epoch(&mut agent, &mut env).unwrap();
            }
            trial_bits(&agent.state().unwrap(), &agent.last_losses().unwrap(), agent.layout().params())
        };
        for bits in [&dqn_bits as &dyn Fn(&[usize]) -> Vec<Vec<u32>>, &ppo_bits] {
            let all = bits(&[0, 1, 2, 3, 4]);
            let sample = check_sample(5);
            assert_eq!(sample, [0, 4]);
            let alone = bits(&sample);
            assert_eq!(alone[0], all[0]);
            assert_eq!(alone[1], all[4]);
            assert_ne!(all[0], all[4], "distinct trials must differ for the check to mean anything");
        }
    }

    /// The check passes on equal bits, names the trial and word of a difference, and keeps the CPU's bits.
    #[test]
    fn the_self_check_names_the_first_difference() {
        let bits = vec![vec![1, 2, 3], vec![4, 5, 6]];
        let mut cpu = None;
        let kept = cpu_check("W3", &Backend::Cpu, bits.clone(), &mut cpu, 2, |_| unreachable!()).unwrap();
        assert!(kept.is_empty());
        assert_eq!(cpu.as_ref(), Some(&bits));
        // A GPU row is compared with a CPU reference; the backend's kind is all `cpu_check` reads of it, so
        // the comparison itself is exercised through `compare_bits`.
        let mut flipped = bits.clone();
        flipped[1][2] ^= 1;
        let err = compare_bits("W4", &[0, 1], &bits, &flipped).unwrap_err().to_string();
        assert!(err.contains("trial 1 at word 2"), "{err}");
        assert!(compare_bits("W4", &[0, 1], &bits, &bits).is_ok());
        let short = vec![vec![1, 2, 3], vec![4, 5]];
        assert!(compare_bits("W4", &[0, 1], &bits, &short).is_err());
    }
}
