//! W11's universe learner rows (`tradesim bench portfolio`, issue 55 item 3): one training epoch of the
//! universe DQN and PPO (a shared per-symbol network over `envs x N` rows of a portfolio env,
//! [`tradesim_host::universe`]) at N = 10 and 100 on each backend. The epoch is DQN's `dqn_steps` env steps
//! with a gradient step after each (past a warm-up), and one PPO rollout of `ppo_steps` steps with its
//! updates; each row times the second of two epochs of a fresh learner (the first pays for the plans, the
//! buffers and the module's first launches). On the GPU a step keeps its observations, codes and
//! transitions on the device. Every GPU row is checked against the CPU's run of the same learner in the same
//! call: the whole network state (weights, target, Adam moments) bit for bit.

use std::time::Instant;

use gpu_kernels::dqn::DqnParams;
use gpu_kernels::ppo::PpoParams;
use tradesim_host::universe::{UniverseConfig, UniverseData, UniverseDqn, UniversePpo};

use super::report::Row;
use crate::{Backend, Error, NetState, TrialParams, UniverseMarket};

/// Sizes of the universe learner rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniverseLearnerSizes {
    /// The universes' symbol counts.
    pub symbols: [usize; 2],
    /// Trials.
    pub trials: usize,
    /// Accounts (envs) per trial.
    pub envs_per_trial: usize,
    /// DQN's env steps per epoch.
    pub dqn_steps: usize,
    /// PPO's rollout steps (one rollout per epoch).
    pub ppo_steps: usize,
    /// Hidden units of the networks.
    pub hidden: usize,
}

impl UniverseLearnerSizes {
    /// The full run: 4 trials x 32 accounts (12,800 rows at N = 100), DQN 128 steps, PPO 64.
    pub const FULL: Self =
        Self { symbols: [10, 100], trials: 4, envs_per_trial: 32, dqn_steps: 128, ppo_steps: 64, hidden: 64 };
    /// A smoke test: 2 trials x 2 accounts, DQN 8 steps, PPO 4.
    pub const QUICK: Self =
        Self { symbols: [10, 100], trials: 2, envs_per_trial: 2, dqn_steps: 8, ppo_steps: 4, hidden: 16 };
}

/// Features per symbol: the bar's log return and its log range, in percent.
const FEATURES: usize = 2;

/// `market` with its features ([`FEATURES`], time-major).
fn universe_data(market: UniverseMarket) -> Result<UniverseData, Error> {
    let features = market
        .bars()
        .iter()
        .flat_map(|b| [(100.0 * (b.close / b.open).ln()) as f32, (100.0 * (b.high / b.low).ln()) as f32])
        .collect();
    Ok(UniverseData::new(market, features, FEATURES)?)
}

/// The learners' configuration at `sizes` for an epoch of `steps` env steps (the ring holds a PPO rollout
/// or 4 DQN epochs of rows).
fn config(sizes: &UniverseLearnerSizes, n: usize, times: usize, steps: usize, ppo: bool) -> UniverseConfig {
    let rows = sizes.envs_per_trial * n;
    UniverseConfig {
        envs_per_trial: sizes.envs_per_trial,
        segment_len: steps,
        train_start: 0,
        train_end: times - 1,
        ring_capacity: if ppo { steps * rows } else { 4 * steps * rows },
        warmup_steps: (steps / 4) as u64,
        train_every: 1,
        grad_steps: 1,
        seed: 7,
    }
}

/// One learner's timed epoch (the second of two) and its network state after it.
fn epoch(
    backend: &Backend,
    data: &UniverseData,
    params: &[TrialParams],
    sizes: &UniverseLearnerSizes,
    ppo: bool,
) -> Result<(f64, NetState), Error> {
    let (n, times) = (data.market().n_symbols(), data.market().n_times());
    let hidden = sizes.hidden;
    if ppo {
        let cfg = config(sizes, n, times, sizes.ppo_steps, true);
        // Each update a quarter of the rollout (PPO's minibatch split).
        let batch = gpu_kernels::ppo::split_batch(sizes.ppo_steps * sizes.envs_per_trial * n, 4);
        let p = PpoParams { hidden: hidden as u32, batch, epochs: 2, minibatches: 4, ..Default::default() };
        let batch = batch as usize;
        let mut learner = UniversePpo::new(backend, data, params, &vec![p; params.len()], (hidden, batch), cfg)?;
        learner.train(1)?;
        let started = Instant::now();
        learner.train(1)?;
        let state = learner.agent().state()?;
        Ok((started.elapsed().as_secs_f64(), state))
    } else {
        let cfg = config(sizes, n, times, sizes.dqn_steps, false);
        let p = DqnParams { hidden: hidden as u32, batch: 128, ..Default::default() };
        let mut learner = UniverseDqn::new(backend, data, params, &vec![p; params.len()], (hidden, 128), cfg)?;
        learner.train(sizes.dqn_steps as u64)?;
        let started = Instant::now();
        learner.train(sizes.dqn_steps as u64)?;
        let state = learner.agent().state()?;
        Ok((started.elapsed().as_secs_f64(), state))
    }
}

/// The bits of a network state.
fn state_bits(s: &NetState) -> Vec<u32> {
    [&s.online, &s.target, &s.m, &s.v].into_iter().flatten().map(|x| x.to_bits()).collect()
}

/// The universe learner rows: for each N, DQN then PPO on each backend (a CPU run for the check when the
/// backends have no CPU).
pub fn universe_learners(
    backends: &[Backend],
    sizes: &UniverseLearnerSizes,
    universe: impl Fn(usize, usize) -> Result<UniverseMarket, Error>,
    trial: impl Fn(usize) -> TrialParams,
) -> Result<Vec<Row>, Error> {
    let params: Vec<TrialParams> = (0..sizes.trials).map(trial).collect();
    let envs = sizes.trials * sizes.envs_per_trial;
    let mut rows = Vec::new();
    for &n in &sizes.symbols {
        let times = 2 * sizes.dqn_steps.max(sizes.ppo_steps) + 2;
        let data = universe_data(universe(n, times)?)?;
        for (ppo, algo, steps) in [(false, "DQN", sizes.dqn_steps), (true, "PPO", sizes.ppo_steps)] {
            let mut cpu: Option<NetState> = None;
            for backend in backends {
                let (seconds, state) = epoch(backend, &data, &params, sizes, ppo)?;
                let threads = if backend.is_cuda() { 0 } else { backend.info().parallelism };
                let mut row =
                    Row::universe_learner(backend.info().backend, algo, n, envs, envs * steps, seconds, threads);
                if backend.is_cuda() {
                    let want = match &cpu {
                        Some(s) => state_bits(s),
                        None => state_bits(&epoch(&Backend::Cpu, &data, &params, sizes, ppo)?.1),
                    };
                    if want != state_bits(&state) {
                        return Err(Error::Output(format!(
                            "W11: the GPU's universe {algo} differs from the CPU's after 2 epochs (N = {n})"
                        )));
                    }
                    row = row.with_check(format!(
                        "network state of {} trials (weights, target, Adam moments) bitwise equal to the CPU's after 2 \
                         epochs",
                        sizes.trials
                    ));
                } else {
                    cpu = Some(state);
                }
                rows.push(row);
            }
        }
    }
    Ok(rows)
}
