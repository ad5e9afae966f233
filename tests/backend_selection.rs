//! Backend selection on any machine: never a panic; without a driver `auto` is the CPU and `cuda` an error
//! that says why; with a GPU `cuda` works. The CLI is checked the same way.

mod common;

use std::process::Command;

use tradesim::{CudaAvailability, DeviceRequest, HostError};

fn tradesim(args: &[&str]) -> (bool, String, String) {
    tradesim_with(args, &[])
}

/// [`tradesim`] with `envs` set.
fn tradesim_with(args: &[&str], envs: &[(&str, &str)]) -> (bool, String, String) {
    // TRADESIM_BIN: the staged binary when the suite runs on a GPU host (scripts/gpu-run.sh).
    let bin = std::env::var("TRADESIM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tradesim").to_owned());
    let out = Command::new(bin).args(args).envs(envs.iter().copied()).output().expect("run tradesim");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cpu_is_always_available() {
    let backend = tradesim::select_backend(DeviceRequest::Cpu).unwrap();
    assert!(!backend.is_cuda());
    assert_eq!(backend.info().backend, "cpu");
}

#[test]
fn auto_and_cuda_follow_detection() {
    let availability = tradesim::detect();
    let auto = tradesim::select_backend(DeviceRequest::Auto).unwrap();
    let cuda = tradesim::select_backend(DeviceRequest::Cuda);
    match availability {
        CudaAvailability::Available { devices } => {
            assert!(devices >= 1);
            assert!(auto.is_cuda(), "auto must pick CUDA when a device is present");
            assert!(cuda.unwrap().is_cuda());
        }
        other => {
            assert!(!common::gpu_required(), "REQUIRE_GPU=1 but detection says: {other}");
            assert!(!auto.is_cuda());
            match cuda {
                Err(HostError::CudaUnavailable { reason }) => assert_eq!(reason, other.to_string()),
                Err(e) => panic!("expected CudaUnavailable, got {e}"),
                Ok(_) => panic!("--device cuda succeeded although detection says: {other}"),
            }
        }
    }
}

#[test]
fn info_reports_the_backend_and_kernels() {
    let (ok, stdout, stderr) = tradesim(&["info"]);
    assert!(ok, "tradesim info failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for kernel in gpu_kernels::registry::ALL {
        assert!(stdout.contains(kernel), "kernel {kernel} missing from:\n{stdout}");
    }
    match tradesim::detect() {
        CudaAvailability::Available { .. } => {
            assert!(stdout.contains("backend:     cuda"), "{stdout}");
            assert!(stdout.contains("compute capability"), "{stdout}");
        }
        CudaAvailability::NoDriver => {
            assert!(stdout.contains("no CUDA driver was found"), "{stdout}");
            assert!(stdout.contains("backend:     cpu (CUDA not used: no CUDA driver"), "{stdout}");
            // `auto` asked for nothing in particular: the fallback reason must not say CUDA was requested.
            assert!(!stdout.contains("was requested"), "{stdout}");
        }
        _ => assert!(stdout.contains("backend:     cpu"), "{stdout}"),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn a_gpu_that_runs_the_newer_module_loads_it_and_launches_dependently() {
    // The suite's GPU parity tests then run with programmatic dependent launch on such a GPU (the default).
    let Some(backend) = common::gpu_backend() else { return };
    let info = backend.info();
    let (major, minor) = info.compute_capability.expect("a CUDA backend has a compute capability");
    let target = info.ptx_target.expect("a CUDA backend has a module");
    let dependent = gpu_kernels::registry::sm_number(gpu_kernels::registry::DEPENDENT_LAUNCH_ARCH);
    let runs_newer = tradesim::ptx::NEWER.is_some() && dependent.is_some_and(|d| (major * 10 + minor) as u32 >= d);
    if runs_newer {
        assert_eq!(target, gpu_kernels::registry::DEPENDENT_LAUNCH_ARCH, "cc {major}.{minor}: the newer module");
        assert!(info.dependent_launch, "dependent launch on cc {major}.{minor}");
    } else {
        assert_eq!(target, tradesim::ptx::ARCH);
        assert!(!info.dependent_launch, "dependent launch with the {target} module");
    }
}

#[cfg(feature = "cuda")]
#[test]
fn info_names_the_cubins_the_build_embedded_or_why_there_are_none() {
    let (ok, stdout, stderr) = tradesim(&["info", "--device", "cpu"]);
    assert!(ok, "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("cubin:")).unwrap_or_else(|| panic!("no cubin line:\n{stdout}"));
    match tradesim::ptx::CUBINS {
        [] => assert_eq!(
            line,
            "cubin:       none (the build had no ptxas: the driver compiles the PTX at its first load; docs/BUILD.md)"
        ),
        cubins => {
            for (arch, image) in cubins {
                assert!(line.contains(&format!("{arch}: {} bytes", image.len())), "{line}");
            }
            let ptxas = tradesim::ptx::PTXAS.expect("cubins name their ptxas");
            assert!(line.contains(&format!("(ptxas {ptxas}, built at cargo build")), "{line}");
            let (_, stdout, _) = tradesim_with(&["info", "--device", "cpu"], &[("TRADESIM_MODULE", "ptx")]);
            assert!(stdout.contains("not used: TRADESIM_MODULE=ptx"), "{stdout}");
        }
    }
    // The CPU loads no module.
    assert!(!stdout.contains("module:"), "{stdout}");
    let (ok, _, stderr) = tradesim_with(&["info", "--device", "cpu"], &[("TRADESIM_MODULE", "sass")]);
    assert!(!ok && stderr.contains("TRADESIM_MODULE=sass: expected `auto` or `ptx`"), "{stderr}");
}

#[cfg(feature = "cuda")]
#[test]
fn a_gpu_of_a_cubins_architecture_loads_the_cubin_and_says_so() {
    let Some(backend) = common::gpu_backend() else { return };
    let info = backend.info();
    let load = info.module_load.expect("a CUDA backend loaded a module");
    let cc = info.compute_capability.expect("a CUDA backend has a compute capability");
    let forced_ptx = std::env::var("TRADESIM_MODULE").is_ok_and(|v| v == "ptx");
    let cubin =
        tradesim::ptx::CUBINS.iter().find(|(arch, image)| !forced_ptx && tradesim::Cubin { arch, image }.runs_on(cc));
    match cubin {
        Some((arch, _)) => {
            assert_eq!(load.source, tradesim::ModuleSource::Cubin { arch: (*arch).to_owned() }, "{load}");
            assert_eq!(load.no_cubin, None);
        }
        None => assert!(matches!(load.source, tradesim::ModuleSource::Ptx { .. }), "{load}"),
    }
    assert_eq!(Some(load.source.arch()), info.ptx_target.as_deref());
    assert!(load.seconds > 0.0 && load.seconds < 600.0, "{load}");
    // The CLI says the same, and TRADESIM_MODULE=ptx makes the driver compile the PTX instead.
    let (ok, stdout, stderr) = tradesim(&["info", "--device", "cuda"]);
    assert!(ok, "{stderr}");
    let expected = if cubin.is_some() { "module:      cubin for " } else { "module:      PTX for " };
    assert!(stdout.contains(expected) && stdout.contains(" s"), "{stdout}");
    let (ok, stdout, stderr) = tradesim_with(&["info", "--device", "cuda"], &[("TRADESIM_MODULE", "ptx")]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("module:      PTX for ") && stdout.contains("JIT-compiled by the driver"), "{stdout}");
}

#[test]
fn cli_device_cuda_without_gpu_fails_with_the_reason() {
    let availability = tradesim::detect();
    let (ok, _, stderr) = tradesim(&["info", "--device", "cuda"]);
    assert!(!stderr.contains("panicked"), "{stderr}");
    if matches!(availability, CudaAvailability::Available { .. }) {
        assert!(ok, "{stderr}");
    } else {
        assert!(!ok, "--device cuda must fail without a GPU");
        assert!(stderr.contains("cannot be used") && stderr.contains(&availability.to_string()), "{stderr}");
    }
}

#[test]
fn cli_simulate_runs_on_the_embedded_data_by_default() {
    let (ok, stdout, stderr) =
        tradesim(&["simulate", "--device", "cpu", "--trials", "2", "--envs", "64", "--steps", "50"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("embedded:eurusd-1h-ask-2017.csv"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.trim_start().starts_with(['0', '1'])).count(), 2, "{stdout}");
    let (ok, stdout, stderr) =
        tradesim(&["simulate", "--device", "cpu", "--synthetic", "1000", "--envs", "8", "--steps", "20"]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("SYNTHETIC"), "generated data must say so:\n{stdout}");
}

#[test]
fn cli_data_check_reports_and_refuses() {
    let dir = std::env::temp_dir().join(format!("tradesim-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "date,open,high,low,close,volume\n2020-01-01,3,2,1,1.5,1\n2020-01-02,1,2,1,1.5,1\n").unwrap();
    let (ok, stdout, stderr) = tradesim(&["data", "check", bad.to_str().unwrap()]);
    assert!(!ok, "an unusable file must exit non-zero");
    assert!(stdout.contains("bad.csv:2:open: error[open-outside-range]"), "{stdout}");
    assert!(stderr.contains("unusable"), "{stderr}");
    let (ok, stdout, _) = tradesim(&["data", "check", bad.to_str().unwrap(), "--drop", "open-outside-range"]);
    assert!(ok && stdout.contains("1 dropped"), "{stdout}");
    let (ok, stdout, _) = tradesim(&["data", "check"]);
    assert!(ok && stdout.contains("6225 bars"), "{stdout}");
    let (ok, stdout, stderr) = tradesim(&["data", "features", "--synthetic", "3000"]);
    assert!(ok && stdout.contains("SYNTHETIC") && stdout.contains("3000 rows x 51 features"), "{stdout}{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cli_rejects_an_unknown_device() {
    let (ok, _, stderr) = tradesim(&["info", "--device", "tpu"]);
    assert!(!ok);
    assert!(stderr.contains("unknown device `tpu`"), "{stderr}");
}

/// `tradesim bench all --quick` (the CI smoke test of the benchmark suite): every workload runs, the table
/// and the JSON hold every row. No timing is asserted.
#[test]
fn cli_bench_all_quick_writes_json() {
    let dir = std::env::temp_dir().join(format!("tradesim-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bench.json");
    let (ok, stdout, stderr) =
        tradesim(&["bench", "all", "--quick", "--device", "cpu", "--json", path.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("SYNTHETIC") && stdout.contains("slowest stage:"), "{stdout}");
    for variant in ["| a | seed loop", "| b | seed loop", "| c | our CPU path", "| d | our CPU path"] {
        assert!(stdout.contains(variant), "{variant} missing:\n{stdout}");
    }
    let json = std::fs::read_to_string(&path).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    // W0 CSV and Parquet, W1 a-d, W2, W2e (100- and 1,000-column grids, without vectorbt here), W3, W4, W5,
    // W6 (the seed DQN and PPO searches and scripts/run.sh's job; the refill search and W3 at 1,024 trials
    // run on a GPU only), W7
    // (PBO by CSCV), W8 (the sampler: one row per function and batch size of the quick grid) and W9 (DQN and
    // PPO default searches on four patterns: a trend, a random walk, AR(1) and regimes).
    let rows = parsed["rows"].as_array().unwrap();
    let count = |w: &str| rows.iter().filter(|r| r["workload"] == w).count();
    for (workload, n) in
        [("W0", 2), ("W1", 4), ("W2", 1), ("W2e", 2), ("W3", 1), ("W4", 1), ("W5", 1), ("W6", 3), ("W7", 1), ("W9", 8)]
    {
        assert_eq!(count(workload), n, "{workload}: {json}");
    }
    assert!(count("W8") >= 3, "W8: {json}");
    assert_eq!(json.matches("\"workload\"").count(), rows.len(), "{json}");
    for config in ["seed-dqn", "seed-ppo"] {
        let row = parsed["rows"].as_array().unwrap().iter().find(|r| r["workload"] == "W6" && r["variant"] == config);
        let note = row.map(|r| r["note"].as_str().unwrap_or_default()).unwrap_or_default();
        assert!(note.contains("training") && note.contains("best trial"), "W6 {config}: {json}");
    }
    assert!(stdout.contains("W6 search") && stdout.contains("| seed-ppo | cpu | 2 |"), "{stdout}");
    // run.sh's job (placebo searches and walk-forward, shrunk) ends with its verdict.
    let job = rows.iter().find(|r| r["workload"] == "W6" && r["variant"] == "run-sh");
    let note = job.map(|r| r["note"].as_str().unwrap_or_default()).unwrap_or_default();
    assert!(note.starts_with("verdict: ") && note.contains("walk-forward"), "W6 run-sh: {json}");
    // W9: each row names the oracle, buy-and-hold and flat, and carries its pattern's target's outcome.
    let w9: Vec<&serde_json::Value> = rows.iter().filter(|r| r["workload"] == "W9").collect();
    assert!(w9.iter().all(|r| {
        r["note"].as_str().is_some_and(|n| n.contains("oracle") && n.contains("buy-and-hold") && n.contains("flat"))
    }));
    let checked =
        w9.iter().filter(|r| r["check"].as_str().is_some_and(|c| c.starts_with("met") || c.starts_with("missed")));
    assert_eq!(checked.count(), 8, "{json}");
    assert!(stdout.contains("W9 learning"), "{stdout}");
    assert!(stdout.contains("W0 market data in") && stdout.contains("| Parquet |"), "{stdout}");
    assert!(stdout.contains("W2e backtest end to end") && stdout.contains("| tradesim (cpu) |"), "{stdout}");
    assert!(json.contains("\"flops_per_s\": ") && !json.contains("\"flops_per_s\": 0,"), "{json}");
    assert!(stdout.contains("W4 PPO") && stdout.contains("| cpu |"), "{stdout}");
    assert!(json.contains("\"ratio_to_a\": 1,") || json.contains("\"ratio_to_a\": 1.0"), "{json}");
    let (ok, _, stderr) = tradesim(&["bench", "nonsense", "--quick"]);
    assert!(
        !ok && stderr.contains("invalid value 'nonsense'") && stderr.contains("possible values: load, experience"),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cli_backtest_ranks_and_writes_every_column() {
    let dir = std::env::temp_dir().join(format!("tradesim-backtest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, csv) = (dir.join("bt.json"), dir.join("bt.csv"));
    let args =
        ["backtest", "--device", "cpu", "--fast", "5:15:5", "--slow", "20:40:10", "--top", "2", "--spread", "0.0001"];
    let (ok, stdout, stderr) =
        tradesim(&[&args[..], &["--json", json.to_str().unwrap(), "--csv", csv.to_str().unwrap()]].concat());
    assert!(ok, "{stderr}");
    assert!(stdout.contains("embedded:eurusd-1h-ask-2017.csv") && stdout.contains("9 columns"), "{stdout}");
    assert!(stdout.contains("Decimal audit"), "{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.trim_start().starts_with(['1', '2']) && l.contains('.')).count(),
        2,
        "{stdout}"
    );
    let parsed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let columns = parsed["columns"].as_array().unwrap();
    assert_eq!(columns.len(), 9);
    assert!(columns.iter().all(|c| c["fast"].is_u64() && c["rank"].is_u64() && c.get("sharpe").is_some()), "{parsed}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 10);
    let (ok, _, stderr) = tradesim(&["backtest", "--device", "cpu", "--spread", "1%"]);
    assert!(!ok && stderr.contains("--spread: `1%` is not a number"), "{stderr}");
    let (ok, _, stderr) = tradesim(&["backtest", "--device", "cpu", "--fast", "9:3"]);
    assert!(!ok && stderr.contains("need 1 <= A <= B"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn cli_train_writes_weights_and_report() {
    let dir = std::env::temp_dir().join(format!("tradesim-train-{}", std::process::id()));
    let (ok, stdout, stderr) = tradesim(&[
        "train",
        "--device",
        "cpu",
        "--epochs",
        "2",
        "--trials",
        "2",
        "--envs",
        "16",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("embedded:eurusd-1h-ask-2017.csv") && stdout.contains("gradient steps per trial"),
        "{stdout}"
    );
    for file in ["trial-0.safetensors", "trial-1.safetensors", "report.json"] {
        assert!(dir.join(file).is_file(), "{file} missing; stdout:\n{stdout}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["epochs"].as_array().map(Vec::len), Some(2), "{report}");
    assert_eq!(report["test_total_return"].as_array().map(Vec::len), Some(2), "{report}");
    let (ok, _, stderr) = tradesim(&["train", "--algo", "a2c", "--device", "cpu"]);
    assert!(
        !ok && stderr.contains("invalid value 'a2c' for '--algo <ALGO>'")
            && stderr.contains("possible values: dqn, ppo"),
        "{stderr}"
    );
    let ppo_dir = dir.join("ppo");
    let (ok, stdout, stderr) = tradesim(&[
        "train",
        "--algo",
        "ppo",
        "--device",
        "cpu",
        "--epochs",
        "1",
        "--trials",
        "2",
        "--envs",
        "8",
        "--out",
        ppo_dir.to_str().unwrap(),
    ]);
    assert!(ok && stdout.contains("train:    PPO"), "{stdout}{stderr}");
    assert!(ppo_dir.join("trial-1.safetensors").is_file());
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--equity` and `--trades` round-trip: for each selected column (top 2 by Sharpe), the equity file's last
/// value is the column's final equity in the JSON, and its trades' PnL sums to final equity minus capital;
/// times come from the data; the same as Parquet; a `FAST/SLOW` outside the grid and another extension are
/// refused by name.
#[test]
fn cli_backtest_exports_equity_and_trades() {
    let dir = std::env::temp_dir().join(format!("tradesim-exports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, equity, trades) = (dir.join("bt.json"), dir.join("eq.csv"), dir.join("tr.csv"));
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let base = ["backtest", "--device", "cpu", "--fast", "5:15:5", "--slow", "20:40:10", "--capital", "100000"];
    let (ok, stdout, stderr) = tradesim(
        &[
            &base[..],
            &["--columns", "top:2", "--json", &path(&json), "--equity", &path(&equity), "--trades", &path(&trades)],
        ]
        .concat(),
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("equity:") && stdout.contains("trades:"), "{stdout}");
    let parsed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let final_of = |name: &str| {
        let (f, s) = name.trim_start_matches("sma_").split_once('_').unwrap();
        let (f, s): (u64, u64) = (f.parse().unwrap(), s.parse().unwrap());
        let col = parsed["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["fast"].as_u64() == Some(f) && c["slow"].as_u64() == Some(s))
            .unwrap();
        assert!(col["rank"].as_u64().unwrap() <= 2, "{name} is not in the top 2");
        col["final_equity"].as_f64().unwrap()
    };
    let eq = std::fs::read_to_string(&equity).unwrap();
    let header: Vec<&str> = eq.lines().next().unwrap().split(',').collect();
    assert_eq!(&header[..2], &["time", "bar"]);
    assert_eq!(header.len(), 4, "two strategy columns: {header:?}");
    let last: Vec<&str> = eq.lines().last().unwrap().split(',').collect();
    assert!(last[0].starts_with("2017-"), "times come from the data: {}", last[0]);
    let tr = std::fs::read_to_string(&trades).unwrap();
    let pnl_at = tr.lines().next().unwrap().split(',').position(|h| h == "pnl").unwrap();
    for (k, name) in header[2..].iter().enumerate() {
        let final_equity = final_of(name);
        let curve_end: f64 = last[2 + k].parse().unwrap();
        assert_eq!(curve_end, final_equity, "{name}: the curve ends at the final equity");
        let pnl: f64 = tr
            .lines()
            .skip(1)
            .filter(|l| l.starts_with(&format!("{name},")))
            .map(|l| l.split(',').nth(pnl_at).unwrap().parse::<f64>().unwrap())
            .sum();
        assert!(
            ((final_equity - 100_000.0) - pnl).abs() <= 1e-9 * 100_000.0,
            "{name}: PnL {pnl} vs {}",
            final_equity - 100_000.0
        );
    }
    let (ok, _, stderr) = tradesim(&[&base[..], &["--columns", "7/99", "--trades", &path(&trades)]].concat());
    assert!(!ok && stderr.contains("7/99 is not in the grid"), "{stderr}");
    // The same exports as Parquet: the equity column of the best column ends at its final equity, and the
    // trades file holds as many rows as the CSV's trades of that column.
    let (pq_eq, pq_tr) = (dir.join("eq.parquet"), dir.join("tr.parquet"));
    let (ok, _, stderr) = tradesim(
        &[&base[..], &["--columns", header[2], "--equity", &path(&pq_eq), "--trades", &path(&pq_tr)]].concat(),
    );
    assert!(ok, "{stderr}");
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::RowAccessor;
    let rows = |p: &std::path::Path| {
        let reader = SerializedFileReader::new(std::fs::File::open(p).unwrap()).unwrap();
        reader.get_row_iter(None).unwrap().map(|r| r.unwrap()).collect::<Vec<_>>()
    };
    let eq_rows = rows(&pq_eq);
    assert_eq!(eq_rows.len(), eq.lines().count() - 1);
    let last_value = eq_rows.last().unwrap().get_double(2).unwrap();
    assert_eq!(last_value, final_of(header[2]));
    let csv_trades = tr.lines().filter(|l| l.starts_with(&format!("{},", header[2]))).count();
    assert_eq!(rows(&pq_tr).len(), csv_trades);
    let (ok, _, stderr) = tradesim(&[&base[..], &["--equity", &path(&dir.join("eq.txt"))]].concat());
    assert!(!ok && stderr.contains("must end in .csv or .parquet"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `bench backtest --vectorbt PYTHON`: the Python's JSON becomes a vectorbt row and the ratio beside
/// tradesim's row of the same width; a run that reports another column count (or fails) leaves a note on
/// tradesim's row instead of failing the bench. A stand-in script plays vectorbt (it reports 10 columns:
/// right for the quick 10-column grid, wrong for the 20-column one).
#[test]
fn cli_bench_backtest_sets_vectorbt_beside_tradesim() {
    let dir = std::env::temp_dir().join(format!("tradesim-fake-vbt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let python = dir.join("python");
    let json = r#"{"seconds": 2.5, "first_call_seconds": 9.0, "columns": 10, "version": "fake"}"#;
    common::script::write_script(&python, &format!("echo '{json}'"));
    let out = dir.join("bench.json");
    let (ok, stdout, stderr) = tradesim(&[
        "bench",
        "backtest",
        "--quick",
        "--device",
        "cpu",
        "--vectorbt",
        python.to_str().unwrap(),
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("| vectorbt | 10 | 2001 | 2.500 |"), "{stdout}");
    assert!(stdout.contains("no vectorbt figure: it ran 10 columns"), "{stdout}");
    let parsed: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let rows = parsed["rows"].as_array().unwrap();
    let ours = rows.iter().find(|r| r["workload"] == "W2e" && r["backend"] == "cpu" && r["width"] == 10).unwrap();
    let ratio = ours["ratio_to_vectorbt"].as_f64().unwrap();
    assert!((ratio - 2.5 / ours["seconds"].as_f64().unwrap()).abs() <= 1e-9 * ratio, "{ours}");
    assert_eq!(rows.iter().filter(|r| r["backend"] == "vectorbt").count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bench_variants_are_refused_when_unknown_or_without_a_gpu() {
    let (ok, _, stderr) = tradesim(&["bench", "load", "--quick", "--device", "cpu", "--variant", "split-stored"]);
    assert!(!ok && stderr.contains("--variant") && stderr.contains("narrow-chains"), "{stderr}");
    let (ok, _, stderr) = tradesim(&["bench", "load", "--quick", "--device", "cpu", "--variant", "unfused"]);
    assert!(!ok && stderr.contains("--variant: unfused chooses GPU kernels"), "{stderr}");
}
