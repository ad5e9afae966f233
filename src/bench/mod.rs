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
//! - W11 portfolio (`tradesim bench portfolio`): the portfolio env at N = 10 and 100 symbols x 4,096 envs, one
//!   scan of 256 steps of random action codes, CPU vs GPU (each GPU row checked bit for bit on a sample of
//!   envs), beside FinRL's `PortfolioOptimizationEnv` on the same bars with `--finrl PYTHON`; then one
//!   training epoch of the universe DQN and PPO at N = 10 and 100 (rows `W11u`, each GPU row's network state
//!   checked bit for bit against the CPU's).
//! - W10 power (`tradesim bench power`, not in `all`): the verdict's share of `evidence` on seeded families of
//!   synthetic bars, null and planted, with 19 placebo searches and a walk-forward each (docs/EVIDENCE.md).

mod report;
mod search;
mod seed;

use crate::Error;
use std::time::Instant;

mod end_to_end;
mod evidence;
mod learners;
mod learning;
mod load;
mod peers;
mod portfolio;
pub mod power;
mod sampler;
mod universe;
mod utilization;

use gpu_kernels::rng::draw_below;
use tradesim_host::KernelOptions;

pub use learners::{dqn, ppo};
use learners::{profiled, wide};
pub use portfolio::{PortfolioSizes, portfolio, portfolio_sized};
pub use report::{BenchReport, GpuFacts, Machine, Row};
pub use seed::{Conversion, seed_experience};
pub use universe::{UniverseLearnerSizes, universe_learners};

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
    /// W10: the verdict's size and power over seeded families of synthetic bars (not part of `all`: on the
    /// GPU it takes tens of minutes; `--families`, `--null-seeds`, `--signal-seeds`, `--bars` size it).
    Power,
    /// W11: the portfolio env at N = 10 and 100 symbols x 4,096 envs (one scan of 256 steps), CPU vs GPU, each
    /// GPU row checked against the CPU on a sample of envs; FinRL's `PortfolioOptimizationEnv` beside it with
    /// `--finrl PYTHON`; then a training epoch of the universe DQN and PPO at N = 10 and 100, CPU vs GPU.
    Portfolio,
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
    /// FinRL, for W11 (`benches/peers/finrl_portfolio.py`; the throwaway virtualenv of
    /// scripts/setup-finrl.sh): its `PortfolioOptimizationEnv` on the same bars, on one CPU core.
    pub finrl: Option<std::path::PathBuf>,
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
        Workload::All => &[
            "load",
            "experience",
            "backtest",
            "dqn",
            "ppo",
            "wide",
            "search",
            "evidence",
            "sampler",
            "learning",
            "portfolio",
        ],
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
        Workload::Portfolio => &["portfolio"],
        Workload::Power => {
            return Err(Error::config("workload", "W10 runs through `tradesim bench power` (bench::power)"));
        }
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
            "search" => search::search(&backends, quick, || monitor.sample())?,
            "evidence" => evidence::cscv(sizes.cscv)?,
            "sampler" => sampler::sampler(quick)?,
            "learning" => learning::learning(&backends, quick)?,
            "portfolio" => portfolio::portfolio(&backends, quick, peers.finrl.as_deref())?,
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
