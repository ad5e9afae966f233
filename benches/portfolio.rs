//! Portfolio step throughput: `cpu_` and `gpu_` variants of K trials x E envs, one step per iteration.
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tradesim::demo::demo_params;
use tradesim::synthetic::random_walk;
use tradesim::{DeviceRequest, PortfolioSim, SimLayout};

const TRIALS: usize = 5;
const STEPS: usize = 64;

fn bench_backend(c: &mut Criterion, name: &str, request: DeviceRequest, envs: usize) {
    let Ok(backend) = tradesim::select_backend(request) else {
        eprintln!("{name}: backend unavailable, skipped");
        return;
    };
    let layout = SimLayout::new(TRIALS, envs).expect("layout");
    let prices = random_walk(100_000, 0.01, 1);
    let params: Vec<_> = (0..TRIALS).map(demo_params).collect();
    let segments: Vec<(u32, u32)> = (0..layout.n_envs() as u32)
        .map(|i| (i % 1_000, 99_000))
        .collect();
    let actions: Vec<u8> = (0..STEPS * layout.n_envs())
        .map(|i| (i % 7 % 3) as u8)
        .collect();
    let mut group = c.benchmark_group("portfolio_step");
    group.throughput(Throughput::Elements((STEPS * layout.n_envs()) as u64));
    group.sample_size(10);
    group.bench_function(format!("{name}_{TRIALS}x{envs}"), |b| {
        b.iter_batched_ref(
            || PortfolioSim::new(&backend, &prices, &params, layout, &segments).expect("sim"),
            |sim| {
                sim.run(&actions, STEPS).expect("run");
                sim.states().expect("states")
            },
            criterion::BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn portfolio(c: &mut Criterion) {
    bench_backend(c, "cpu", DeviceRequest::Cpu, 4_096);
    bench_backend(c, "gpu", DeviceRequest::Cuda, 4_096);
    bench_backend(c, "gpu", DeviceRequest::Cuda, 65_536);
}

criterion_group!(benches, portfolio);
criterion_main!(benches);
