//! `tradesim bench experience`: env-steps per second of experience collection (portfolio, barrier, reward,
//! transition into the replay ring) for K = 5 trials, on the CPU and, when present, the GPU. Each variant's
//! envs walk `L = max(bars / E, MIN_STEPS)` steps: one pass over the bars per trial where that is at least
//! `MIN_STEPS` steps, so that wide variants measure stepping rather than launch latency.

use std::fmt::Write as _;
use std::time::Instant;

use gpu_kernels::rng::draw_below;

use crate::demo::demo_params;
use crate::synthetic::{normal, random_walk};
use crate::{Backend, DeviceRequest, EnvBatch, EnvConfig, HostError, MarketData, SimLayout, Transition};

/// Trials of every variant.
pub const TRIALS: usize = 5;
/// Features per bar (the default feature set's size).
pub const FEATURES: usize = 51;
/// Fewest steps per env of a variant.
pub const MIN_STEPS: usize = 256;

/// One measured variant.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// "cpu" or "cuda".
    pub backend: &'static str,
    /// "step" (a launch per step) or "scan" (a launch per ring chunk).
    pub mode: &'static str,
    /// Envs per trial.
    pub envs: usize,
    /// Steps per env.
    pub steps: usize,
    /// Seconds for the whole variant (actions upload and final state download included).
    pub seconds: f64,
    /// Env-steps (= transitions) per second over all trials.
    pub env_steps_per_s: f64,
    /// Device bytes of market data + env states + ring (CUDA; the same layout on the CPU).
    pub memory_bytes: usize,
}

/// The experience benchmark: `bars` synthetic bars (labelled synthetic), each `envs` in `env_counts` on
/// each backend of `request`, step and scan mode.
pub fn experience(request: DeviceRequest, bars: usize, env_counts: &[usize]) -> Result<Vec<BenchRow>, HostError> {
    if bars < 2 {
        return Err(HostError::Config(format!("the experience bench needs at least 2 bars, got {bars}")));
    }
    let prices = random_walk(bars, 0.01, 42);
    let features: Vec<f32> = (0..(bars * FEATURES) as u64).map(|i| normal(42, 5, i) as f32).collect();
    let market = MarketData::new(&prices, 100, features, FEATURES)?;
    let params: Vec<_> = (0..TRIALS).map(demo_params).collect();
    let mut rows = Vec::new();
    for backend in &backends(request)? {
        for &envs in env_counts {
            let steps = ((bars - 1) / envs).max(MIN_STEPS).min(bars - 1);
            let layout = SimLayout::new(TRIALS, envs)?;
            let actions: Vec<u8> =
                (0..(steps * layout.n_envs()) as u64).map(|i| draw_below(7, 2, i, 3) as u8).collect();
            let capacity = steps * envs;
            let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: capacity, seed: 7, trial_groups: 1 };
            for mode in ["step", "scan"] {
                let mut batch = EnvBatch::new(backend, &market, &params, layout, cfg)?;
                let started = Instant::now();
                if mode == "scan" {
                    batch.scan(&actions, steps)?;
                } else {
                    batch.step_many(&actions, steps)?;
                }
                let states = batch.states()?;
                let seconds = started.elapsed().as_secs_f64();
                let memory_bytes = market.device_bytes()
                    + size_of_val(states.as_slice())
                    + TRIALS * capacity * size_of::<Transition>();
                rows.push(BenchRow {
                    backend: backend.info().backend,
                    mode,
                    envs,
                    steps,
                    seconds,
                    env_steps_per_s: (TRIALS * envs * steps) as f64 / seconds,
                    memory_bytes,
                });
            }
        }
    }
    Ok(rows)
}

/// A markdown table of the rows, with each row's ratio to the CPU scan row of E = 1 (the sequential CPU
/// path) when there is one.
pub fn markdown(rows: &[BenchRow]) -> String {
    let base = rows.iter().find(|r| r.backend == "cpu" && r.envs == 1 && r.mode == "scan").map(|r| r.env_steps_per_s);
    let mut out = String::from(
        "| backend | mode | E | L | seconds | env-steps/s | x CPU E=1 | device MiB |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let ratio = base.map_or("-".to_owned(), |b| format!("{:.1}", r.env_steps_per_s / b));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.4} | {:.3e} | {} | {:.1} |",
            r.backend,
            r.mode,
            r.envs,
            r.steps,
            r.seconds,
            r.env_steps_per_s,
            ratio,
            r.memory_bytes as f64 / f64::from(1u32 << 20)
        );
    }
    out
}

/// The rows as a JSON document (with the workload description).
pub fn json(rows: &[BenchRow], bars: usize) -> String {
    let mut out = format!(
        "{{\n  \"workload\": {{\"name\": \"experience\", \"trials\": {TRIALS}, \"bars\": {bars}, \"features\": {FEATURES}, \
         \"data\": \"synthetic\", \"bytes_per_transition\": {}}},\n  \"rows\": [\n",
        size_of::<Transition>()
    );
    for (i, r) in rows.iter().enumerate() {
        let _ = writeln!(
            out,
            "    {{\"backend\": \"{}\", \"mode\": \"{}\", \"envs\": {}, \"steps\": {}, \"seconds\": {}, \
             \"env_steps_per_s\": {}, \"memory_bytes\": {}}}{}",
            r.backend,
            r.mode,
            r.envs,
            r.steps,
            r.seconds,
            r.env_steps_per_s,
            r.memory_bytes,
            if i + 1 < rows.len() { "," } else { "" }
        );
    }
    out + "  ]\n}\n"
}

/// One backend's DQN figures.
#[derive(Clone, Debug)]
pub struct DqnBenchRow {
    /// "cpu" or "cuda".
    pub backend: &'static str,
    /// Gradient steps per second (each step trains every trial on its minibatch).
    pub grad_steps_per_s: f64,
    /// Seconds of one epoch: every trial covers all bars once (E x L = bars), acting and training each step.
    pub epoch_seconds: f64,
    /// Env steps (transitions) per second during that epoch, all trials.
    pub env_steps_per_s: f64,
    /// Gradient steps in the epoch.
    pub epoch_grad_steps: u64,
}

/// DQN workload: K = 5 trials, minibatch `batch` per trial, hidden `hidden`, `envs` envs per trial over
/// `bars` synthetic bars with F = 51; `grad_steps` timed gradient steps, then one epoch.
pub fn dqn(
    request: DeviceRequest,
    bars: usize,
    envs: usize,
    batch: usize,
    hidden: usize,
    grad_steps: usize,
) -> Result<Vec<DqnBenchRow>, HostError> {
    let prices = random_walk(bars, 0.01, 43);
    let features: Vec<f32> = (0..(bars * FEATURES) as u64).map(|i| normal(43, 5, i) as f32).collect();
    let market = MarketData::new(&prices, 100, features, FEATURES)?;
    let env_params: Vec<_> = (0..TRIALS).map(demo_params).collect();
    let dqn = gpu_kernels::dqn::DqnParams { hidden: hidden as u32, batch: batch as u32, ..Default::default() };
    let steps = ((bars - 1) / envs).max(1);
    let mut rows = Vec::new();
    for backend in backends(request)? {
        let layout = SimLayout::new(TRIALS, envs)?;
        let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: envs * steps.max(8), seed: 3, trial_groups: 1 };
        let mut env = EnvBatch::new(&backend, &market, &env_params, layout, cfg)?;
        let mut agent = crate::DqnAgent::new(&backend, &env, &vec![dqn; TRIALS], hidden, batch, 3)?;
        for step in 0..8 {
            agent.act_and_step(&mut env, step, false)?;
        }
        agent.train_step(&mut env)?;
        agent.last_losses()?;
        let started = Instant::now();
        for _ in 0..grad_steps {
            agent.train_step(&mut env)?;
        }
        agent.last_losses()?;
        let grad_steps_per_s = grad_steps as f64 / started.elapsed().as_secs_f64();
        env.reset_epoch(1)?;
        let before = agent.gradient_steps();
        let started = Instant::now();
        for step in 0..steps as u64 {
            agent.act_and_step(&mut env, 8 + step, false)?;
            agent.train_step(&mut env)?;
        }
        agent.last_losses()?;
        let epoch_seconds = started.elapsed().as_secs_f64();
        rows.push(DqnBenchRow {
            backend: backend.info().backend,
            grad_steps_per_s,
            epoch_seconds,
            env_steps_per_s: (TRIALS * envs * steps) as f64 / epoch_seconds,
            epoch_grad_steps: agent.gradient_steps() - before,
        });
    }
    Ok(rows)
}

/// The backends a bench request names: the CPU unless only CUDA is asked for, CUDA when usable.
fn backends(request: DeviceRequest) -> Result<Vec<Backend>, HostError> {
    let mut out = Vec::new();
    if request != DeviceRequest::Cuda {
        out.push(Backend::Cpu);
    }
    if request != DeviceRequest::Cpu {
        match crate::select_backend(DeviceRequest::Cuda) {
            Ok(b) => out.push(b),
            Err(e) if request == DeviceRequest::Cuda => return Err(e),
            Err(e) => eprintln!("note: GPU rows skipped: {e}"),
        }
    }
    Ok(out)
}
