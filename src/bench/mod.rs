//! `tradesim bench`: the project's claims measured side by side in one run on one machine, as a markdown
//! table and a JSON document. All workloads use seeded synthetic bars with F = 51 and are labelled so.
//!
//! - W0 market data in: the bars as a CSV and as a Parquet file, each loaded and validated (median of 7).
//! - W1 experience, 5 trials x all bars (the same transitions in every variant): (a) the seed's loop with
//!   string conversions, (b) the same with `ToPrimitive`, (c) our CPU path with one env per trial, (d) our
//!   CPU path env-parallel, (e) the GPU in the seed's design (one env per trial, one stream per trial),
//!   (f) the GPU env-parallel (E = 1,024, 16,384, 65,536; scan and step mode).
//! - W2 backtest: an SMA grid of 10,000 parameter sets over all bars, CPU vs GPU; then, on a GPU, 100,000
//!   columns (metrics and trade counts) with the demo trial's drawdown breaker and without it.
//! - W4 PPO: one epoch (a rollout of every env, GAE, 4 update epochs of minibatches), CPU vs GPU.
//! - W3 DQN: gradient steps per second and one epoch (collect + train, 5 trials x all bars), CPU vs GPU,
//!   with the GPU's utilization sampled through NVML.
//! - W7 evidence: PBO by CSCV over 1,024 trials x 45,000 bars of noise returns, 16 blocks (12,870 splits),
//!   on the CPU.
//! - W8 sampler: the search's TPE against random search on Hartmann6, Branin and a 10-dimensional mixed
//!   space, 40 seeds with batches K = 1, 5, 64, and 8 seeds with K = 1,024 (docs/SAMPLER.md).

mod report;
mod search;
mod seed;

use crate::Error;
use std::time::Instant;

use report::Profile;

mod end_to_end;
mod evidence;
mod learning;
mod load;
mod peers;
mod sampler;

use gpu_kernels::kernel_names::KernelOptions;
use gpu_kernels::rng::draw_below;

pub use report::{BenchReport, GpuFacts, Machine, Row};
pub use seed::{Conversion, seed_experience};

use crate::data::device::Prepared;
use crate::data::synthetic::{GeneratorConfig, generate};
use crate::{Backend, BacktestSpec, DeviceRequest, EnvBatch, EnvConfig, MarketData, Signals, SimLayout, SmaCross};

/// Trial `k` of the demo: costs rise with k, shorts and whole units alternate.
pub fn demo_params(k: usize) -> crate::TrialParams {
    crate::TrialParams {
        spread: 0.0002 * (k + 1) as f64,
        commission: 0.0005,
        cash_reserve_pct: 0.05,
        max_drawdown: 0.5,
        take_profit_mult: 2.0,
        stop_loss_mult: 1.0 + 0.5 * k as f64,
        max_hold_bars: 50,
        w_cost: 1.0,
        allow_short: u32::from(k.is_multiple_of(2)),
        whole_units: u32::from(k % 3 == 1),
        key: k as u64,
        ..crate::TrialParams::frictionless(100_000.0)
    }
}

/// Trials of every workload.
pub const TRIALS: usize = 5;
/// Features per bar.
pub const FEATURES: usize = 51;

/// Sizes of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// Bars of the synthetic series.
    pub bars: usize,
    /// Env counts of variant (f).
    pub wide_envs: [usize; 3],
    /// Envs per trial of variant (d).
    pub cpu_envs: usize,
    /// SMA fast and slow window counts of W2 (their product is the number of columns).
    pub sma_grid: (u32, u32),
    /// The same for W2's GPU-only wide grid (metrics and trade counts, no ledger), checked against the CPU
    /// on a sample of about 1,000 columns.
    pub sma_wide: (u32, u32),
    /// DQN: envs per trial, minibatch per trial, timed gradient steps.
    pub dqn: (usize, usize, usize),
    /// Trials of the learner workloads (W3, W4).
    pub trials: usize,
    /// Bars of the greedy-walk row of W3 (0: none).
    pub walk_bars: usize,
    /// Trials and bars of W7's CSCV.
    pub cscv: (usize, usize),
}

impl Sizes {
    /// The full run: 300K bars, 10,000 SMA sets, batch 1,024.
    pub const FULL: Self = Self {
        bars: 300_000,
        wide_envs: [1_024, 16_384, 65_536],
        cpu_envs: 16_384,
        sma_grid: (100, 100),
        sma_wide: (250, 400),
        dqn: (1_024, 1_024, 50),
        trials: TRIALS,
        walk_bars: 45_000,
        cscv: (1_024, 45_000),
    };
    /// A smoke test for CI.
    pub const QUICK: Self = Self {
        bars: 2_001,
        wide_envs: [16, 64, 250],
        cpu_envs: 64,
        sma_grid: (4, 5),
        sma_wide: (8, 10),
        dqn: (16, 32, 2),
        trials: TRIALS,
        walk_bars: 300,
        cscv: (64, 2_000),
    };
}

/// The market of every workload: `bars` synthetic bars of one symbol, their features and Decimal bars.
struct WorkloadData {
    /// The features fitted on all bars, for parts of the series.
    prepared: Prepared,
    dataset: crate::data::Dataset,
    market: MarketData,
}

fn workload(bars: usize) -> Result<WorkloadData, Error> {
    let dataset = generate(&GeneratorConfig {
        bars: bars + crate::data::features::WARMUP,
        symbols: 1,
        seed: 42,
        bar_seconds: 3_600,
    });
    let series = &dataset.series[0];
    let n = series.bars.len();
    let prepared = Prepared::new(series, crate::data::features::WARMUP..n)?;
    let market = prepared.market_data(crate::data::features::WARMUP..n)?;
    Ok(WorkloadData { prepared, dataset, market })
}

/// The backends a request names: the CPU unless only CUDA is asked for, CUDA when usable, running the
/// kernels `variant` chooses. A variant other than the default needs the CUDA backend: without it the run
/// would measure nothing of what was asked, so it is refused.
pub fn backends(request: DeviceRequest, variant: KernelOptions) -> Result<Vec<Backend>, Error> {
    let refused = |why: &str| Error::config("--variant", format!("{variant} chooses GPU kernels, but {why}"));
    let mut out = Vec::new();
    if request != DeviceRequest::Cuda {
        out.push(Backend::Cpu);
    }
    if request == DeviceRequest::Cpu && variant != KernelOptions::default() {
        return Err(refused("the run is on the CPU (--device cpu)"));
    }
    if request != DeviceRequest::Cpu {
        match cuda_backend(variant) {
            Ok(b) => out.push(b),
            Err(e) if request == DeviceRequest::Cuda => return Err(e.into()),
            Err(e) if variant != KernelOptions::default() => return Err(refused(&format!("no GPU is usable: {e}"))),
            Err(e) => eprintln!("note: GPU rows skipped: {e}"),
        }
    }
    Ok(out)
}

/// The CUDA backend (device 0) running the kernels `variant` chooses.
fn cuda_backend(variant: KernelOptions) -> Result<Backend, tradesim_host::HostError> {
    #[cfg(feature = "cuda")]
    if variant != KernelOptions::default() && crate::select_backend(DeviceRequest::Cuda).is_ok() {
        let rt = tradesim_host::CudaRuntime::with_options(0, crate::ptx::sources()?, variant)?;
        return Ok(Backend::Cuda(std::sync::Arc::new(rt)));
    }
    let _ = variant;
    crate::select_backend(DeviceRequest::Cuda)
}

fn random_actions(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64).map(|i| draw_below(seed, 2, i, 3) as u8).collect()
}

/// One EnvBatch variant of W1: `envs` per trial over one pass of the bars, scan or step mode.
fn env_variant(
    backend: &Backend,
    market: &MarketData,
    envs: usize,
    groups: usize,
    step_mode: bool,
) -> Result<(usize, f64, Option<f64>), Error> {
    let steps = (market.n_bars() - 1) / envs;
    let layout = SimLayout::new(TRIALS, envs)?;
    let params: Vec<_> = (0..TRIALS).map(demo_params).collect();
    let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: steps * envs, seed: 7, trial_groups: groups };
    let mut env = EnvBatch::new(backend, market, &params, layout, cfg)?;
    let actions = random_actions(steps * layout.n_envs(), 7);
    // Timed: the actions' upload, the launches and the wait for them (run_timed synchronizes on the GPU).
    let started = Instant::now();
    let kernel_ms = env.run_timed(&actions, steps, step_mode)?;
    Ok((TRIALS * envs * steps, started.elapsed().as_secs_f64(), kernel_ms))
}

/// W1: the experience variants (a) to (f).
pub fn experience(backends: &[Backend], sizes: &Sizes) -> Result<Vec<Row>, Error> {
    let w = workload(sizes.bars)?;
    let series = &w.dataset.series[0].bars[crate::data::features::WARMUP..];
    let n = w.market.n_bars();
    let actions = random_actions(TRIALS * (n - 1), 7);
    let mut rows = Vec::new();
    for (variant, how) in [("a", Conversion::ViaString), ("b", Conversion::ToPrimitive)] {
        let started = Instant::now();
        let (made, checksum) = seed_experience(series, w.market.features(), FEATURES, &actions, TRIALS, how);
        let seconds = started.elapsed().as_secs_f64();
        let label = match how {
            Conversion::ViaString => "seed loop, Decimal, to_string().parse::<f32>()",
            Conversion::ToPrimitive => "seed loop, Decimal, ToPrimitive",
        };
        rows.push(
            Row::experience(variant, label, "cpu", 1, made, seconds, None)
                .with_note(format!("reward checksum {checksum:.3}")),
        );
    }
    for backend in backends {
        let name = backend.info().backend;
        if backend.is_cuda() {
            let (made, s, k) = env_variant(backend, &w.market, 1, TRIALS, false)?;
            rows.push(Row::experience(
                "e",
                "GPU, seed design: 1 env per trial, 1 stream per trial",
                name,
                1,
                made,
                s,
                k,
            ));
            for &envs in &sizes.wide_envs {
                for step_mode in [false, true] {
                    let (made, s, k) = env_variant(backend, &w.market, envs, 1, step_mode)?;
                    let mode = if step_mode { "step mode" } else { "scan mode" };
                    rows.push(Row::experience("f", &format!("GPU env-parallel, {mode}"), name, envs, made, s, k));
                }
            }
        } else {
            let (made, s, _) = env_variant(backend, &w.market, 1, 1, false)?;
            rows.push(Row::experience("c", "our CPU path, 1 env per trial", name, 1, made, s, None));
            let (made, s, _) = env_variant(backend, &w.market, sizes.cpu_envs, 1, false)?;
            let label = format!("our CPU path, env-parallel on {} threads", backend.info().parallelism);
            rows.push(Row::experience("d", &label, name, sizes.cpu_envs, made, s, None));
        }
    }
    Ok(rows)
}

/// The SMA columns of an `nf x ns` grid: fast 2.., slow above every fast, the default crossover rule.
fn sma_columns((nf, ns): (u32, u32)) -> Vec<SmaCross> {
    (0..nf)
        .flat_map(|f| {
            (0..ns).map(move |s| SmaCross {
                fast: 2 + f,
                slow: 2 + nf + s,
                allow_short: 1,
                rule: gpu_kernels::backtest::RULE_CROSS,
            })
        })
        .collect()
}

/// W2: an SMA grid over all bars, CPU vs GPU with the ledger; then, on a GPU, the wide grid with metrics and
/// trade counts only, its kernel time, and a bitwise check of a column sample against the CPU.
pub fn backtest_grid(backends: &[Backend], sizes: &Sizes) -> Result<Vec<Row>, Error> {
    let w = workload(sizes.bars)?;
    let grid = sma_columns(sizes.sma_grid);
    let params = [demo_params(0)];
    let n = w.market.n_bars();
    let spec =
        BacktestSpec { start: 0, end: n - 1, bars_per_year: 252.0 * 7.0, risk_free: 0.0, ledger: true, equity: false };
    let mut rows = Vec::new();
    for backend in backends {
        let started = Instant::now();
        let r = crate::backtest(backend, &w.market, &params, Signals::SmaCross(&grid), &spec)?;
        let seconds = started.elapsed().as_secs_f64();
        let trades = r.trades.len();
        rows.push(
            Row::backtest(backend.info().backend, grid.len(), n - 1, seconds, true)
                .with_note(format!("{trades} trades in the ledger")),
        );
    }
    let Some(gpu) = backends.iter().find(|b| b.is_cuda()) else { return Ok(rows) };
    let wide = sma_columns(sizes.sma_wide);
    let counts_only = BacktestSpec { ledger: false, ..spec };
    // A first launch loads the module and warms the caches; the figures are the later ones.
    crate::backtest(gpu, &w.market, &params, Signals::SmaCross(&wide[..wide.len().min(1_024)]), &counts_only)?;
    // The demo trial's breaker ends an env at a 50% drawdown (an ended env's bars skip the signal and the
    // account step); the same grid without it shows the rate of envs that trade to the last bar.
    let no_breaker = [crate::TrialParams { max_drawdown: 0.0, ..params[0] }];
    for (params, which) in [(&params, "breaker at 50% drawdown"), (&no_breaker, "breaker off")] {
        rows.push(wide_grid(gpu, &w.market, params, &wide, &counts_only, which)?);
    }
    Ok(rows)
}

/// One timed launch of W2's wide grid on the GPU (metrics and trade counts) and a bitwise check of about
/// 1,000 of its columns against the CPU.
fn wide_grid(
    gpu: &Backend,
    market: &MarketData,
    params: &[crate::TrialParams],
    wide: &[SmaCross],
    spec: &BacktestSpec,
    which: &str,
) -> Result<Row, Error> {
    let n = market.n_bars();
    let mut result = None;
    let started = Instant::now();
    let profile = profiled(gpu, || {
        result = Some(crate::backtest(gpu, market, params, Signals::SmaCross(wide), spec)?);
        Ok(())
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let r = result.ok_or_else(|| Error::Output("W2: the wide grid returned nothing".to_owned()))?;
    if std::env::var_os("TRADESIM_DEV_PTX").is_some() {
        // A kernel variant under development may give other bits than this binary's CPU path (a changed
        // summation): its time is still worth seeing before the check below refuses it.
        let rate = (wide.len() * (n - 1)) as f64 / seconds;
        eprintln!(
            "TRADESIM_DEV_PTX grid ({which}): {} columns in {seconds:.4} s, {rate:.3e} bar-columns/s",
            wide.len()
        );
    }
    let stride = wide.len().div_ceil(1_000).max(1);
    let sample: Vec<SmaCross> = wide.iter().copied().step_by(stride).collect();
    let cpu = crate::backtest(&Backend::Cpu, market, params, Signals::SmaCross(&sample), spec)?;
    let same = cpu.metrics.iter().enumerate().all(|(i, m)| {
        let g = &r.metrics[i * stride];
        m.values().iter().zip(g.values()).all(|(a, b)| a.to_bits() == b.to_bits())
            && cpu.offsets[i + 1] - cpu.offsets[i] == r.offsets[i * stride + 1] - r.offsets[i * stride]
    });
    if !same {
        return Err(Error::Output(format!(
            "W2 ({which}): the GPU's wide grid differs from the CPU on a sampled column (stride {stride})"
        )));
    }
    let trades = r.offsets[wide.len()];
    let mut row = Row::backtest(gpu.info().backend, wide.len(), n - 1, seconds, false);
    row.label = format!("{}, {which}", row.label);
    row.kernel_ms = profile.map(|p| p.kernels.iter().map(|k| k.2).sum());
    Ok(row.with_note(format!(
        "{which}; {trades} trades counted; {} sampled columns bitwise equal to the CPU",
        sample.len()
    )))
}

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
        let sampling = std::sync::atomic::AtomicBool::new(backend.is_cuda());
        let (seconds, utilization) = std::thread::scope(|scope| {
            let monitor = scope.spawn(|| {
                let mut utilization = report::Utilization::default();
                while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Some(u) = sampler() {
                        utilization.add(&u);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                utilization
            });
            let started = Instant::now();
            let ran = dqn_epoch(&mut agent, &mut env, steps, 8);
            let seconds = started.elapsed().as_secs_f64();
            sampling.store(false, std::sync::atomic::Ordering::Relaxed);
            let utilization = monitor.join().unwrap_or_default();
            ran.map(|()| (seconds, utilization))
        })?;
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
                use gpu_kernels::kernel_names::{GREEDY_WALK, GREEDY_WALK_REGS};
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
fn dqn_setup(
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
fn dqn_warm_up(agent: &mut crate::DqnAgent, env: &mut EnvBatch, timed: usize) -> Result<f64, Error> {
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
fn dqn_epoch(agent: &mut crate::DqnAgent, env: &mut EnvBatch, steps: usize, first: u64) -> Result<(), Error> {
    for step in 0..steps as u64 {
        agent.act_and_step(env, first + step, false)?;
        agent.train_step(env)?;
    }
    agent.last_losses()?;
    Ok(())
}

/// Every trial's networks and Adam state (online, target, first and second moments) and last mean loss, as
/// bits: what W3 and W4 compare between the GPU and the CPU after the timed epoch.
fn trial_bits(state: &crate::NetState, losses: &[f32], per_trial: usize) -> Vec<Vec<u32>> {
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
fn compare_bits(workload: &str, sample: &[usize], expected: &[Vec<u32>], got: &[Vec<u32>]) -> Result<(), Error> {
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
fn check_sample(trials: usize) -> Vec<usize> {
    let mut sample = vec![0, trials.saturating_sub(1)];
    sample.dedup();
    sample
}

/// The self-check of a learner workload: on the CPU, keeps `bits` as the reference of later rows; on a GPU,
/// compares `bits` bit for bit with the CPU's trials of this run, or, where the CPU did not run them, with
/// `reference` run on the CPU for [`check_sample`]'s trials. A difference is an error naming the trial and
/// the first differing word; agreement is the note the row carries.
fn cpu_check(
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
fn wide(
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
fn profiled(backend: &Backend, epoch: impl FnOnce() -> Result<(), Error>) -> Result<Option<Profile>, Error> {
    #[cfg(feature = "cuda")]
    if let Backend::Cuda(rt) = backend {
        let fma_peak = rt.fma_peak()?;
        rt.start_profile();
        let ran = epoch();
        let kernels = rt.stop_profile()?;
        ran?;
        return Ok(Some(Profile { kernels, fma_peak }));
    }
    let _ = (backend, epoch);
    Ok(None)
}

/// W4: one PPO epoch (a rollout of every env over the bars, GAE, 4 update epochs of 4 minibatches each,
/// CleanRL's defaults: gradient clipping, value clipping), CPU vs GPU, each GPU row checked against the CPU
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
        ppo_epoch(&mut agent, &mut env)?; // warm-up: tables and buffers
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

/// W4's env batch and agent for the demo trials `trials` (as [`dqn_setup`]), and the rollout's steps.
fn ppo_setup(
    backend: &Backend,
    w: &WorkloadData,
    sizes: &Sizes,
    trials: &[usize],
) -> Result<(EnvBatch, crate::PpoAgent, usize), Error> {
    let (envs, batch, _) = sizes.dqn;
    let hidden = 128;
    let env_params: Vec<_> = trials.iter().map(|&k| demo_params(k)).collect();
    let ppo =
        gpu_kernels::ppo::PpoParams { hidden: hidden as u32, batch: batch as u32, epochs: 4, ..Default::default() };
    let steps = ((w.market.n_bars() - 1) / envs).max(1);
    let layout = SimLayout::new(trials.len(), envs)?;
    let cfg = EnvConfig { segment_len: steps as u32, ring_capacity: envs * steps, seed: 3, trial_groups: 1 };
    let env = EnvBatch::new(backend, &w.market, &env_params, layout, cfg)?;
    let agent = crate::PpoAgent::new(backend, &env, &vec![ppo; trials.len()], hidden, batch, 3)?;
    Ok((env, agent, steps))
}

/// One PPO epoch of envs already reset: a rollout, the update, the losses read back.
fn ppo_epoch(agent: &mut crate::PpoAgent, env: &mut EnvBatch) -> Result<(), Error> {
    agent.collect(env)?;
    agent.update(env)?;
    agent.last_losses()?;
    Ok(())
}

/// The GPU facts: copy bandwidth and device memory.
pub fn gpu_facts(request: DeviceRequest) -> Option<GpuFacts> {
    #[cfg(feature = "cuda")]
    {
        if request == DeviceRequest::Cpu {
            return None;
        }
        let Ok(Backend::Cuda(rt)) = crate::select_backend(DeviceRequest::Cuda) else { return None };
        let copy_gbs = rt.copy_bandwidth(1 << 30, 10).ok()?;
        let (free, total) = rt.memory().ok()?;
        Some(GpuFacts { copy_gbs, total_memory: total, used_memory_at_end: total - free, peak_used_memory: None })
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = request;
        None
    }
}

/// NVML, loaded at run time (no NVML, no samples).
pub struct GpuMonitor {
    #[cfg(feature = "cuda")]
    nvml: Option<nvml_wrapper::Nvml>,
    peak: Option<u64>,
}

impl std::fmt::Debug for GpuMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMonitor").field("peak", &self.peak).finish()
    }
}

impl GpuMonitor {
    /// Opens NVML when a GPU run is asked for.
    pub fn open(request: DeviceRequest) -> Self {
        #[cfg(feature = "cuda")]
        {
            let nvml = if request == DeviceRequest::Cpu { None } else { nvml_wrapper::Nvml::init().ok() };
            Self { nvml, peak: None }
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = request;
            Self { peak: None }
        }
    }

    /// One sample of device 0: busy percentage and memory in use.
    pub fn sample(&mut self) -> Option<report::Utilization> {
        #[cfg(feature = "cuda")]
        {
            let device = self.nvml.as_ref()?.device_by_index(0).ok()?;
            let busy = f64::from(device.utilization_rates().ok()?.gpu);
            let used = device.memory_info().ok()?.used;
            self.peak = Some(self.peak.unwrap_or(0).max(used));
            Some(report::Utilization { samples: 1, sum_gpu: busy, max_gpu: busy, max_used_memory: used })
        }
        #[cfg(not(feature = "cuda"))]
        {
            None
        }
    }

    /// The largest memory use sampled.
    pub fn peak(&self) -> Option<u64> {
        self.peak
    }
}

/// What `tradesim bench` runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// W0: loading a CSV and a Parquet file of the bars.
    Load,
    /// W1: the fused environment (scan and step modes).
    Experience,
    /// W2: the SMA backtest grid.
    Backtest,
    /// W3: a DQN epoch.
    Dqn,
    /// W4: a PPO epoch.
    Ppo,
    /// W3 and W4.
    Learners,
    /// W6: the seed searches (`tradesim hyperopt` with the TOMLs of `benches/configs`), CPU vs GPU.
    Search,
    /// W7: PBO by CSCV over 1,024 trials x 45,000 bars (12,870 splits) on the CPU.
    Evidence,
    /// W8: the sampler (TPE vs random search) on standard functions, K = 1 to 1,024.
    Sampler,
    /// W9: the seed searches on planted patterns, each trial's test Sharpe beside an oracle's and
    /// buy-and-hold's.
    Learning,
    /// Every workload.
    #[default]
    All,
}

/// The other tools a run measures beside tradesim, each a Python that has it installed.
#[derive(Clone, Debug, Default)]
pub struct Peers {
    /// vectorbt, for W2e (e.g. the throwaway virtualenv of scripts/bench-vectorbt.sh).
    pub vectorbt: Option<std::path::PathBuf>,
    /// PyTorch, for W3 and W4 (`benches/peers/torch_learners.py`): on the GPU beside a GPU row, on the CPU
    /// (eager, the run's threads) beside a CPU row; with `--quick`, its small shapes.
    pub torch: Option<std::path::PathBuf>,
}

impl Peers {
    /// The PyTorch peer rows of `workload` for each device the run measures (the GPU where a GPU row ran, the
    /// CPU where a CPU row ran), when a Python with torch was given; none otherwise. A `--quick` run's GPU
    /// peer runs only where the GPU does.
    fn torch_rows(&self, workload: &str, backends: &[Backend], quick: bool) -> Result<Vec<Row>, Error> {
        let Some(python) = &self.torch else { return Ok(Vec::new()) };
        let mut rows = Vec::new();
        if backends.iter().any(|b| !b.is_cuda()) {
            let threads = rayon::current_num_threads();
            rows.extend(peers::torch(python, workload, quick, peers::PeerDevice::Cpu(threads))?);
        }
        if backends.iter().any(Backend::is_cuda) {
            rows.extend(peers::torch(python, workload, quick, peers::PeerDevice::Cuda)?);
        }
        Ok(rows)
    }
}

/// Runs `workload` with the GPU kernels `variant` chooses; `trials` overrides the learner workloads' trial
/// count (5).
pub fn run(
    workload: Workload,
    quick: bool,
    request: DeviceRequest,
    variant: KernelOptions,
    trials: Option<usize>,
    peers: &Peers,
) -> Result<BenchReport, Error> {
    let names: &[&str] = match workload {
        Workload::All => {
            &["load", "experience", "backtest", "dqn", "ppo", "wide", "search", "evidence", "sampler", "learning"]
        }
        Workload::Load => &["load"],
        Workload::Experience => &["experience"],
        Workload::Backtest => &["backtest"],
        Workload::Dqn => &["dqn"],
        Workload::Ppo => &["ppo"],
        Workload::Learners => &["dqn", "ppo"],
        Workload::Search => &["search"],
        Workload::Evidence => &["evidence"],
        Workload::Sampler => &["sampler"],
        Workload::Learning => &["learning"],
    };
    let mut sizes = if quick { Sizes::QUICK } else { Sizes::FULL };
    if let Some(k) = trials {
        sizes.trials = k.max(1);
    }
    let started = Instant::now();
    let mut monitor = GpuMonitor::open(request);
    let backends = backends(request, variant)?;
    let mut rows = Vec::new();
    for name in names {
        rows.extend(match *name {
            "load" => load::load(&sizes)?,
            "experience" => experience(&backends, &sizes)?,
            "backtest" => {
                let mut rows = backtest_grid(&backends, &sizes)?;
                if backends.iter().any(|b| !b.is_cuda()) {
                    rows.extend(end_to_end::end_to_end(&sizes, quick, peers.vectorbt.as_deref())?);
                }
                rows
            }
            "ppo" => {
                let mut rows = ppo(&backends, &sizes)?;
                rows.extend(peers.torch_rows("W4", &backends, quick)?);
                rows
            }
            "search" => search::search(&backends, quick)?,
            "evidence" => evidence::cscv(sizes.cscv)?,
            "sampler" => sampler::sampler(quick)?,
            "learning" => {
                let mut rows = Vec::new();
                for backend in &backends {
                    rows.extend(learning::learning(backend, quick)?);
                }
                rows
            }
            "wide" => wide(&backends, &sizes, quick, || monitor.sample())?,
            _ => {
                let mut rows = dqn(&backends, &sizes, || monitor.sample())?;
                rows.extend(peers.torch_rows("W3", &backends, quick)?);
                rows
            }
        });
        monitor.sample();
    }
    let gpu_backend = backends.iter().find(|b| b.is_cuda());
    let gpu = gpu_backend.and_then(|_| gpu_facts(request)).map(|g| GpuFacts { peak_used_memory: monitor.peak(), ..g });
    Ok(BenchReport {
        machine: Machine::describe(gpu_backend),
        quick,
        variant,
        bars: sizes.bars,
        rows,
        gpu,
        seconds: started.elapsed().as_secs_f64(),
    })
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
