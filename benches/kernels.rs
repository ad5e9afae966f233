//! Criterion benches of the inner per-element functions on the CPU (the same code the kernels run):
//! one env step, one backtest column, one MLP forward and one DQN training sample.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpu_kernels::backtest::{BacktestArgs, SIGNAL_SMA_CROSS, SmaCross, run_column};
use gpu_kernels::dqn::{DqnArgs, DqnParams};
use gpu_kernels::env::env_step;
use gpu_kernels::mlp::{ACTIONS, Layout, forward};
use gpu_kernels::{EnvState, TrialParams};
use tradesim::bench::demo_params;
use tradesim::data::synthetic::{normal, random_walk};
use tradesim::{MarketData, backtest::tick_prefix};

fn cpu_inner(c: &mut Criterion) {
    let market = MarketData::prices_only(&random_walk(10_001, 0.01, 1)).expect("market");
    let bars = market.bars();
    let params = demo_params(0);
    let mut group = c.benchmark_group("inner");
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("cpu_env_step_x10000", |b| {
        b.iter(|| {
            let mut s = EnvState::new(&params, 0, 10_000);
            for t in 0..10_000 {
                env_step(&params, &mut s, (t % 7 % 3) as u8, &bars[t], &bars[t + 1]);
            }
            s.equity
        });
    });
    let (prefix, _) = tick_prefix(&market).unwrap();
    let sma = [SmaCross { fast: 10, slow: 50, allow_short: 1, rule: 0 }];
    let args = BacktestArgs {
        start: 0,
        end: 10_000,
        n_bars: 10_001,
        n_columns: 1,
        n_params: 1,
        signal: SIGNAL_SMA_CROSS,
        write: 0,
        narrow: u32::from(gpu_kernels::backtest::products_fit_i64(&prefix, &sma)),
        bars_per_year: 252.0,
        risk_free: 0.0,
    };
    group.bench_function("cpu_backtest_column_x10000", |b| {
        b.iter(|| {
            run_column(0, &args, &[TrialParams::frictionless(1e5)], &[], &sma, &prefix, bars, |_, _| {}, |_| {})
                .0
                .sharpe
        });
    });
    group.finish();
    let l = Layout::q_net(54, 128);
    let w: Vec<f32> = (0..l.params() as u64).map(|i| 0.05 * normal(2, 1, i) as f32).collect();
    let x: Vec<f32> = (0..54).map(|i| normal(2, 2, i) as f32).collect();
    let (mut a1, mut a2, mut q) = (vec![0.0; 128], vec![0.0; 128], [0.0; ACTIONS]);
    c.bench_function("cpu_mlp_forward_54_128_128_3", |b| {
        b.iter(|| {
            forward(&l, &w, 128, &x, &mut a1, &mut a2, &mut q);
            q[0]
        });
    });
    let batch = 256;
    let args = DqnArgs { n_trials: 1, input: 54, hidden: 128, batch, step: 1, ..Default::default() };
    let p = DqnParams { hidden: 128, batch, ..DqnParams::default() };
    let n = batch as usize;
    let obs: Vec<f32> = (0..n as u64 * 54).map(|i| normal(2, 3, i) as f32).collect();
    let minibatch = tradesim::SampleBatch {
        next_obs: obs.clone(),
        obs,
        actions: (0..n as u32).map(|i| i % 3).collect(),
        rewards: vec![0.01; n],
        dones: vec![0.0; n],
        weights: vec![1.0; n],
    };
    let mut nets =
        tradesim::NetState { online: w.clone(), target: w.clone(), m: vec![0.0; w.len()], v: vec![0.0; w.len()] };
    c.bench_function("cpu_dqn_train_on_batch_54_128_b256", |b| {
        b.iter(|| tradesim_host::dqn::train_on_batch(&args, &[p], &mut nets, &minibatch).unwrap().losses[0]);
    });
}

criterion_group!(benches, cpu_inner);
criterion_main!(benches);
