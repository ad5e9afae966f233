//! Environment step throughput: `cpu_` and `gpu_` variants of K trials x E envs with a replay ring, in step
//! mode (a launch per step) and scan mode (one launch for all steps).
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use tradesim::bench::demo_params;
use tradesim::data::synthetic::random_walk;
use tradesim::{DeviceRequest, EnvBatch, EnvConfig, MarketData, SimLayout};

const TRIALS: usize = 5;
const STEPS: usize = 64;

fn bench_backend(c: &mut Criterion, name: &str, request: DeviceRequest, envs: usize) {
    let Ok(backend) = tradesim::select_backend(request) else {
        eprintln!("{name}: backend unavailable, skipped");
        return;
    };
    let layout = SimLayout::new(TRIALS, envs).expect("layout");
    let market = MarketData::prices_only(&random_walk(100_000, 0.01, 1)).expect("market");
    let params: Vec<_> = (0..TRIALS).map(demo_params).collect();
    let cfg = EnvConfig { segment_len: 1_000, ring_capacity: envs * STEPS, seed: 1, trial_groups: 1 };
    let actions: Vec<u8> = (0..STEPS * layout.n_envs()).map(|i| (i % 7 % 3) as u8).collect();
    let mut group = c.benchmark_group("env_step");
    group.throughput(Throughput::Elements((STEPS * layout.n_envs()) as u64));
    group.sample_size(10);
    for scan in [false, true] {
        let mode = if scan { "scan" } else { "step" };
        group.bench_function(format!("{name}_{mode}_{TRIALS}x{envs}"), |b| {
            b.iter_batched_ref(
                || EnvBatch::new(&backend, &market, &params, layout, cfg).expect("envs"),
                |envs| {
                    if scan {
                        envs.scan(&actions, STEPS).expect("scan");
                    } else {
                        envs.step_many(&actions, STEPS).expect("steps");
                    }
                    envs.states().expect("states")
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

fn env_step(c: &mut Criterion) {
    bench_backend(c, "cpu", DeviceRequest::Cpu, 4_096);
    bench_backend(c, "gpu", DeviceRequest::Cuda, 4_096);
    bench_backend(c, "gpu", DeviceRequest::Cuda, 65_536);
}

criterion_group!(benches, env_step);
criterion_main!(benches);
