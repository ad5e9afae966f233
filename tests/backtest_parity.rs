//! GPU == CPU, bit for bit, for backtests of 4,096 columns x 20,000 bars: an SMA-crossover grid (half the
//! columns with barriers and the breaker) and 4,096 policy columns of random targets; metrics, ledger
//! offsets and every trade. Repeated GPU runs give the same bits.

mod common;

use common::assert_bitwise;
use gpu_kernels::rng::draw_below;
use tradesim::data::device::Prepared;
use tradesim::data::synthetic::{GeneratorConfig, generate};
use tradesim::{Backend, BacktestResult, BacktestSpec, MarketData, Signals, SmaCross, TrialParams, backtest};

const COLUMNS: usize = 4_096;
const BARS: usize = 20_000;

fn market() -> MarketData {
    let d = generate(&GeneratorConfig { bars: BARS, symbols: 1, seed: 77, bar_seconds: 3_600 });
    Prepared::new(&d.series[0], 0..BARS).unwrap().market_data(0..BARS).unwrap()
}

fn params() -> [TrialParams; 2] {
    let plain =
        TrialParams { spread: 0.0002, commission: 0.0001, whole_units: 1, ..TrialParams::frictionless(100_000.0) };
    let guarded =
        TrialParams { take_profit_mult: 3.0, stop_loss_mult: 2.0, max_hold_bars: 48, max_drawdown: 0.2, ..plain };
    [plain, guarded]
}

fn spec() -> BacktestSpec {
    BacktestSpec { start: 0, end: BARS - 1, bars_per_year: 252.0 * 7.0, risk_free: 0.0, ledger: true, equity: false }
}

fn sma_grid() -> Vec<SmaCross> {
    (0..COLUMNS as u32)
        .map(|i| SmaCross { fast: 2 + i % 64, slow: 70 + i / 64 * 3, allow_short: i % 2, rule: 0 })
        .collect()
}

fn run_sma(backend: &Backend, market: &MarketData) -> BacktestResult {
    backtest(backend, market, &params(), Signals::SmaCross(&sma_grid()), &spec()).unwrap()
}

fn run_targets(backend: &Backend, market: &MarketData, targets: &[u8]) -> BacktestResult {
    backtest(backend, market, &params(), Signals::Targets { targets, columns: COLUMNS }, &spec()).unwrap()
}

fn assert_same(what: &str, a: &BacktestResult, b: &BacktestResult) {
    assert_bitwise(&format!("{what}: metrics"), &a.metrics, &b.metrics);
    assert_eq!(a.offsets, b.offsets, "{what}: ledger offsets");
    assert_bitwise(&format!("{what}: trades"), &a.trades, &b.trades);
}

#[test]
fn gpu_backtests_match_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let market = market();
    let cpu_sma = run_sma(&Backend::Cpu, &market);
    let gpu_sma = run_sma(&gpu, &market);
    assert_same("sma grid", &cpu_sma, &gpu_sma);
    let targets: Vec<u8> = (0..(COLUMNS * (BARS - 1)) as u64).map(|i| draw_below(5, 6, i / 40, 3) as u8).collect();
    let cpu_t = run_targets(&Backend::Cpu, &market, &targets);
    let gpu_t = run_targets(&gpu, &market, &targets);
    assert_same("policy columns", &cpu_t, &gpu_t);
    let reasons = |r: &BacktestResult, code: u32| r.trades.iter().filter(|t| t.reason == code).count();
    println!(
        "backtest parity: {COLUMNS} SMA columns x {BARS} bars, {} trades; {COLUMNS} policy columns, {} trades \
         (tp {}, sl {}, time {}, breaker {}, end {}) bitwise equal",
        cpu_sma.trades.len(),
        cpu_t.trades.len(),
        reasons(&cpu_t, 1),
        reasons(&cpu_t, 2),
        reasons(&cpu_t, 3),
        reasons(&cpu_t, 4),
        reasons(&cpu_t, 5)
    );
    assert!(cpu_sma.trades.len() > COLUMNS && cpu_t.trades.len() > COLUMNS * 10);
    assert!((1..=5).all(|code| reasons(&cpu_t, code) > 0), "every exit reason should occur");
}

#[test]
fn gpu_backtests_are_repeatable() {
    let Some(gpu) = common::gpu_backend() else { return };
    let market = market();
    assert_same("repeat", &run_sma(&gpu, &market), &run_sma(&gpu, &market));
}

/// The equity curves a job's evidence reads (`equity: true`, no ledger), as `evidence::returns_of` asks for
/// them: 64 policy columns over every bar, each bar's equity bit for bit on both backends (a job replays small
/// ones on the CPU, large ones where it runs).
#[test]
fn gpu_equity_curves_match_cpu_bitwise() {
    let Some(gpu) = common::gpu_backend() else { return };
    let market = market();
    const COLS: usize = 64;
    let targets: Vec<u8> = (0..(COLS * (BARS - 1)) as u64).map(|i| draw_below(9, 6, i / 25, 3) as u8).collect();
    let spec =
        BacktestSpec { start: 0, end: BARS - 1, bars_per_year: 1.0, risk_free: 0.0, ledger: false, equity: true };
    let params: Vec<TrialParams> = (0..COLS).map(|c| params()[c % 2]).collect();
    let run = |backend: &Backend| {
        backtest(backend, &market, &params, Signals::Targets { targets: &targets, columns: COLS }, &spec).unwrap()
    };
    let (cpu, gpu) = (run(&Backend::Cpu), run(&gpu));
    assert_eq!(cpu.equity.len(), COLS * BARS, "an equity value a bar and column");
    assert_bitwise("equity curves", &cpu.equity, &gpu.equity);
    assert_bitwise("metrics", &cpu.metrics, &gpu.metrics);
    // The curves move: a flat curve would compare equal on any backend.
    assert!(cpu.equity.windows(2).filter(|w| w[0] != w[1]).count() > COLS * 100);
}
