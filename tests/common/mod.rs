//! Test harness shared by the integration tests: one body, two devices.
#![allow(dead_code, reason = "each test binary uses a different part of the harness")]

pub mod candle_ref;
pub mod oracle;
pub mod script;

use std::sync::OnceLock;

use tradesim::{Backend, DeviceRequest};

/// Whether `REQUIRE_GPU=1` turns a skipped GPU test into a failure.
pub fn gpu_required() -> bool {
    std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// The CUDA backend, shared by the tests of one binary; `None` (test skipped) when there is no usable GPU,
/// a panic when `REQUIRE_GPU=1`.
pub fn gpu_backend() -> Option<Backend> {
    static GPU: OnceLock<Result<Backend, String>> = OnceLock::new();
    match GPU.get_or_init(|| tradesim::select_backend(DeviceRequest::Cuda).map_err(|e| e.to_string())) {
        Ok(backend) => Some(backend.clone()),
        Err(reason) if gpu_required() => {
            panic!("REQUIRE_GPU=1 but the CUDA backend is unusable: {reason}")
        }
        Err(reason) => {
            eprintln!("no GPU, skipping: {reason}");
            None
        }
    }
}

/// What `f` returns on `backend`, with the greedy walk kernels it launched there (their profile labels,
/// in order of first launch; none on the CPU).
pub fn walk_kernels_launched<T>(backend: &Backend, f: impl FnOnce() -> T) -> (T, Vec<String>) {
    #[cfg(feature = "cuda")]
    if let Backend::Cuda(rt) = backend {
        rt.start_profile().expect("a kernel profile");
        let out = f();
        let p = rt.stop_profile().expect("the kernel profile");
        let walks = p.kernels.into_iter().map(|(label, _, _)| label).filter(|l| l.starts_with("greedy_walk"));
        return (out, walks.collect());
    }
    let _ = backend;
    (f(), Vec::new())
}

/// The CUDA backend running the kernels `options` chooses (`tradesim bench --variant`'s), a runtime of its
/// own; `None` where [`gpu_backend`] is (no usable GPU, or a build without the `cuda` feature).
pub fn gpu_backend_with(options: tradesim_host::KernelOptions) -> Option<Backend> {
    gpu_backend()?;
    #[cfg(feature = "cuda")]
    {
        let sources = tradesim::ptx::sources().expect("the embedded PTX");
        let rt =
            tradesim_host::CudaRuntime::with_options(0, sources, options).expect("a CUDA runtime with the options");
        Some(Backend::Cuda(std::sync::Arc::new(rt)))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = options;
        None
    }
}

/// Turns `fn case(backend: &Backend)` into the tests `case::cpu` and `case::gpu`.
#[macro_export]
macro_rules! test_device {
    ($case:ident) => {
        mod $case {
            #[test]
            fn cpu() {
                super::$case(&tradesim::Backend::Cpu);
            }

            #[test]
            fn gpu() {
                if let Some(backend) = $crate::common::gpu_backend() {
                    super::$case(&backend);
                }
            }
        }
    };
}

/// `|a - b| <= tol x max(1, |b|)`, with a message naming the quantity.
#[track_caller]
pub fn assert_close(what: &str, got: f64, want: f64) {
    let tol = 1e-9 * want.abs().max(1.0);
    assert!((got - want).abs() <= tol, "{what}: got {got}, want {want}");
}

/// One env of one trial walking `bars` from bar 0 with `actions`, stepped one launch at a time: its state
/// and transition after each step.
pub fn walk_bars(
    backend: &Backend,
    params: tradesim::TrialParams,
    bars: &[tradesim::Bar],
    actions: &[u8],
) -> (Vec<tradesim::EnvState>, Vec<tradesim::Transition>) {
    let market = tradesim::MarketData::from_bars(bars.to_vec(), Vec::new(), 0).unwrap();
    let layout = tradesim::SimLayout::new(1, 1).unwrap();
    let end = (bars.len() - 1) as u32;
    let cfg = tradesim::EnvConfig { segment_len: end, ring_capacity: 64, ..Default::default() };
    let mut envs = tradesim::EnvBatch::new(backend, &market, &[params], layout, cfg).unwrap();
    envs.reset_segments(&[(0, end)]).unwrap();
    let mut states = Vec::new();
    let mut transitions = Vec::new();
    for (step, &a) in actions.iter().enumerate() {
        envs.step(&[a]).unwrap();
        states.push(envs.states().unwrap()[0]);
        transitions.push(envs.transitions().unwrap()[step]);
    }
    (states, transitions)
}

/// Bars from (open, high, low, close) with a fixed sigma.
pub fn bars(ohlc: &[(f64, f64, f64, f64)], sigma: f64) -> Vec<tradesim::Bar> {
    ohlc.iter().map(|&(open, high, low, close)| tradesim::Bar { open, high, low, close, sigma }).collect()
}

/// Bit patterns of every field, so that results compare bit for bit (NaN == NaN, -0 != +0).
pub trait Bits {
    /// The fields' bits.
    fn bits(&self) -> Vec<u64>;
}

impl Bits for tradesim::EnvState {
    fn bits(&self) -> Vec<u64> {
        let f = [
            self.cash,
            self.units,
            self.equity,
            self.peak_equity,
            self.entry_price,
            self.step_costs,
            self.take_profit,
            self.stop_loss,
        ];
        let u =
            [self.bar, self.end_bar, self.position as u32, self.status, self.expiry_bar, self.barrier_live, self.label];
        f.iter().map(|x| x.to_bits()).chain(u.iter().map(|&x| u64::from(x))).collect()
    }
}

impl Bits for tradesim::Transition {
    fn bits(&self) -> Vec<u64> {
        let f = self.state.iter().chain(&self.next_state).chain([&self.reward]);
        let mut out: Vec<u64> = f.map(|x| u64::from(x.to_bits())).collect();
        out.extend([
            u64::from(self.bar),
            u64::from(self.action),
            u64::from(self.done),
            u64::from(self.label),
            u64::from(self.valid),
            u64::from(self.chosen),
        ]);
        out
    }
}

impl Bits for tradesim::Moments {
    fn bits(&self) -> Vec<u64> {
        vec![self.count.to_bits(), self.mean.to_bits(), self.m2.to_bits()]
    }
}

impl Bits for f32 {
    fn bits(&self) -> Vec<u64> {
        vec![u64::from(self.to_bits())]
    }
}

impl Bits for Vec<f32> {
    fn bits(&self) -> Vec<u64> {
        self.iter().map(|x| u64::from(x.to_bits())).collect()
    }
}

impl Bits for u32 {
    fn bits(&self) -> Vec<u64> {
        vec![u64::from(*self)]
    }
}

/// Panics with the first differing element unless `a` and `b` are equal bit for bit.
#[track_caller]
pub fn assert_bitwise<T: Bits + std::fmt::Debug>(what: &str, a: &[T], b: &[T]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    let differing: Vec<usize> = (0..a.len()).filter(|&i| a[i].bits() != b[i].bits()).collect();
    if let Some(&i) = differing.first() {
        panic!("{what}: {} of {} elements differ; first at {i}:\n  {:?}\n  {:?}", differing.len(), a.len(), a[i], b[i]);
    }
}

impl Bits for tradesim::Metrics {
    fn bits(&self) -> Vec<u64> {
        self.values().iter().map(|x| x.to_bits()).collect()
    }
}

impl Bits for tradesim::Trade {
    fn bits(&self) -> Vec<u64> {
        let t = self;
        let mut out: Vec<u64> =
            [t.entry_price, t.exit_price, t.units, t.pnl, t.ret, t.costs].iter().map(|x| x.to_bits()).collect();
        out.extend([u64::from(t.entry_bar), u64::from(t.exit_bar), t.side as u64, u64::from(t.reason)]);
        out
    }
}

impl Bits for f64 {
    fn bits(&self) -> Vec<u64> {
        vec![self.to_bits()]
    }
}

/// Bars whose next move is announced, 85% of the time, by feature 0 (the other feature is noise): the
/// decision at the close of bar t sees f0 = sign of bar t+1's open-to-close move.
pub fn planted_market(n: usize, seed: u64) -> tradesim::MarketData {
    planted_market_with(n, seed, 0)
}

/// [`planted_market`] with `noise` more features of plain noise after its two (wider network inputs).
#[allow(dead_code, reason = "not every test binary uses every helper")]
pub fn planted_market_with(n: usize, seed: u64, noise: usize) -> tradesim::MarketData {
    let mut bars = Vec::with_capacity(n);
    let mut features = Vec::with_capacity(n * (2 + noise));
    let mut close = 100.0f64;
    let moves: Vec<f64> =
        (0..n as u64).map(|t| 0.01 * tradesim::data::synthetic::normal(seed, 1, t).signum()).collect();
    for t in 0..n {
        let open = close;
        close = open * (1.0 + moves[t]);
        bars.push(tradesim::Bar { open, high: open.max(close), low: open.min(close), close, sigma: 0.01 });
        let next = moves.get(t + 1).copied().unwrap_or(0.0).signum();
        let honest = tradesim::data::synthetic::normal(seed, 2, t as u64) > -1.04; // P = 0.85
        features.push(if honest { next as f32 } else { -next as f32 });
        features.push(tradesim::data::synthetic::normal(seed, 3, t as u64) as f32);
        for f in 0..noise as u64 {
            features.push(tradesim::data::synthetic::normal(seed, 4 + f, t as u64) as f32);
        }
    }
    tradesim::MarketData::from_bars(bars, features, 2 + noise).unwrap()
}

/// Asserts that a policy's total return on `held_out` beats buy-and-hold (from the first fill) and a seeded
/// random policy by more than 100 percentage points each.
pub fn assert_beats_baselines(
    who: &str,
    backend: &Backend,
    held_out: &tradesim::MarketData,
    env: tradesim::TrialParams,
    policy: f64,
) {
    let n = held_out.n_bars();
    let buy_and_hold = held_out.bars()[n - 1].close / held_out.bars()[1].open - 1.0;
    let targets: Vec<u8> = (0..(n - 1) as u64).map(|i| gpu_kernels::rng::draw_below(8, 8, i, 3) as u8).collect();
    let spec = tradesim::BacktestSpec {
        start: 0,
        end: n - 1,
        bars_per_year: 252.0,
        risk_free: 0.0,
        ledger: false,
        equity: false,
    };
    let signals = tradesim::Signals::Targets { targets: &targets, columns: 1 };
    let random = tradesim::backtest(backend, held_out, &[env], signals, &spec).unwrap().metrics[0].total_return;
    println!("{who} planted pattern: policy {policy:.3}, buy-and-hold {buy_and_hold:.3}, random {random:.3}");
    assert!(policy > buy_and_hold + 1.0, "{who}: policy {policy} vs buy-and-hold {buy_and_hold}");
    assert!(policy > random + 1.0, "{who}: policy {policy} vs random {random}");
}

/// Trial `k`'s active parameters (its own width `hidden`, whatever the batch's stride), flattened in
/// [`tradesim::train::trial_tensors`]'s names' order, as bits.
pub fn trial_bits(l: &gpu_kernels::mlp::Layout, weights: &[f32], k: usize, hidden: usize) -> Vec<u32> {
    let block = &weights[k * l.params()..(k + 1) * l.params()];
    let tensors = tradesim::train::trial_tensors(l, block, hidden).unwrap();
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    names
        .into_iter()
        .flat_map(|n| tensors[n].flatten_all().unwrap().to_vec1::<f32>().unwrap())
        .map(f32::to_bits)
        .collect()
}

/// The `tradesim` binary under test (`TRADESIM_BIN` names another, e.g. a staged release build).
pub fn bin() -> String {
    std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned())
}

/// A fresh folder `tradesim-NAME-PID` under the system's temporary folder.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tradesim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
