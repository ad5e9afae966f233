//! `tradesim bench portfolio` (W11, issue 55 item 7) at its `--quick` sizes: finite, positive throughputs on
//! the CPU at N = 10 and 100, and, when a GPU is usable, GPU rows checked bit for bit against the CPU on a
//! sample of envs (skipped without a GPU, failed under `REQUIRE_GPU=1`); the universe learners' epochs
//! (rows `W11u`), each GPU one's network state bitwise equal to the CPU's. The markdown and JSON carry the
//! rows.
mod common;

use tradesim::Backend;
use tradesim::bench::{PortfolioSizes, Row};

fn assert_measured(r: &Row) {
    assert_eq!(r.workload, "W11");
    let sizes = PortfolioSizes::QUICK;
    assert_eq!(r.width, sizes.trials * sizes.envs_per_trial);
    assert_eq!(r.work, r.width * sizes.steps);
    assert!(r.seconds.is_finite() && r.seconds > 0.0, "{r:?}");
    assert!(r.throughput.is_finite() && r.throughput > 0.0, "{r:?}");
    let n = r.symbols.expect("a W11 row names its symbols");
    assert_eq!(r.symbol_steps_per_s(), Some(r.throughput * n as f64));
}

#[test]
fn the_quick_portfolio_bench_measures_the_cpu() {
    let all = tradesim::bench::portfolio(&[Backend::Cpu], true, None).unwrap();
    let rows: Vec<&Row> = all.iter().filter(|r| r.workload == "W11").collect();
    let symbols: Vec<_> = rows.iter().map(|r| (r.backend, r.symbols)).collect();
    assert_eq!(symbols, [("cpu", Some(10)), ("cpu", Some(100))]);
    let learners: Vec<_> = all.iter().filter(|r| r.workload == "W11u").map(|r| r.variant.as_str()).collect();
    assert_eq!(learners, ["DQN N=10", "PPO N=10", "DQN N=100", "PPO N=100"]);
    for r in all.iter().filter(|r| r.workload == "W11u") {
        assert!(r.throughput.is_finite() && r.throughput > 0.0, "{r:?}");
        assert_eq!(r.symbol_steps_per_s(), Some(r.throughput * r.symbols.unwrap() as f64));
        assert!(r.check.is_empty());
    }
    for r in rows {
        assert_measured(r);
        assert!(r.per_core().is_some_and(|p| p.is_finite() && p > 0.0), "{r:?}");
        assert!(r.check.is_empty());
    }
    let report = tradesim::bench::run(
        tradesim::bench::Workload::Portfolio,
        true,
        tradesim::DeviceRequest::Cpu,
        tradesim_host::KernelOptions::default(),
        None,
        &tradesim::bench::Peers::default(),
    )
    .unwrap();
    let markdown = report.markdown();
    assert!(markdown.contains("W11 portfolio env"), "{markdown}");
    assert!(markdown.contains("| cpu | 100 | 32 | 1024 |"), "{markdown}");
    assert!(markdown.contains("W11 universe learners"), "{markdown}");
    assert!(markdown.contains("| cpu | PPO | 100 | 4 | 16 |"), "{markdown}");
    let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
    let first = &json["rows"][0];
    assert_eq!((first["workload"].as_str(), first["symbols"].as_u64()), (Some("W11"), Some(10)));
    assert!(first["symbol_steps_per_s"].as_f64().is_some_and(|x| x > 0.0), "{first}");
}

#[test]
fn the_quick_portfolio_bench_checks_the_gpu_against_the_cpu() {
    let Some(gpu) = common::gpu_backend() else { return };
    let rows = tradesim::bench::portfolio(&[Backend::Cpu, gpu], true, None).unwrap();
    let learners: Vec<&Row> = rows.iter().filter(|r| r.backend == "cuda" && r.workload == "W11u").collect();
    assert_eq!(learners.len(), 4);
    for r in learners {
        assert!(r.check.contains("bitwise equal to the CPU's after 2 epochs"), "{}", r.check);
    }
    let gpu_rows: Vec<&Row> = rows.iter().filter(|r| r.backend == "cuda" && r.workload == "W11").collect();
    assert_eq!(gpu_rows.len(), 2);
    for r in gpu_rows {
        assert_measured(r);
        assert!(r.kernel_ms.is_some_and(|ms| ms.is_finite() && ms > 0.0), "{r:?}");
        assert!(r.check.contains("8 of 32 envs bitwise equal"), "{}", r.check);
    }
}
