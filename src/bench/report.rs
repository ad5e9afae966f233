//! Rows, machine description, markdown and JSON of a bench run.

use std::fmt::Write as _;

pub use super::utilization::{Utilization, sampled};

/// One measured line.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// "W0" to "W9".
    pub workload: &'static str,
    /// Variant letter (W1) or backend name.
    pub variant: String,
    /// What ran.
    pub label: String,
    /// "cpu" or "cuda".
    pub backend: &'static str,
    /// Envs per trial (W1), columns (W2), envs per trial (W3).
    pub width: usize,
    /// Units of work: transitions (W1, W3) or bar-columns (W2).
    pub work: usize,
    /// Wall seconds (uploads and downloads included).
    pub seconds: f64,
    /// Work per second.
    pub throughput: f64,
    /// Device milliseconds of the launches (CUDA events).
    pub kernel_ms: Option<f64>,
    /// The wall seconds of the run `kernel_ms` was measured in, where that was a run of its own (W6's
    /// profiled run of `scripts/run.sh`'s job); `None`: this row's `seconds`.
    pub kernel_wall: Option<f64>,
    /// W3: gradient steps per second.
    pub grad_steps_per_s: Option<f64>,
    /// W3: gradient steps in the epoch.
    pub epoch_grad_steps: Option<usize>,
    /// W3: GPU utilization sampled through NVML during the epoch.
    pub utilization: Option<Utilization>,
    /// W3, W4: FP32 FLOP/s of the epoch's matrix products (their FLOPs over the epoch's wall time).
    pub flops_per_s: Option<f64>,
    /// W3, W4 on a GPU: the FMA throughput measured in the same run (FLOP/s).
    pub fma_peak: Option<f64>,
    /// Anything else worth printing.
    pub note: String,
    /// W3, W4 on a GPU: what was compared bit for bit with the CPU in the same run (empty: nothing).
    pub check: String,
    /// W11: symbols of the universe (symbol-steps are env steps x this).
    pub symbols: Option<usize>,
    /// W11 on a CPU: the cores the row used (the per-core figures divide by it).
    pub cores: Option<usize>,
}

/// Kernel times of one event-bracketed epoch: per kernel name, launches and summed milliseconds; and the
/// device's FMA throughput measured in the same run.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// (kernel, launches, milliseconds).
    pub kernels: Vec<(String, usize, f64)>,
    /// FLOP/s of the FMA reference kernel.
    pub fma_peak: f64,
}

impl Row {
    /// A W1 row.
    pub fn experience(
        variant: &str,
        label: &str,
        backend: &'static str,
        envs: usize,
        transitions: usize,
        seconds: f64,
        kernel_ms: Option<f64>,
    ) -> Self {
        Self {
            workload: "W1",
            variant: variant.to_owned(),
            label: label.to_owned(),
            backend,
            width: envs,
            work: transitions,
            seconds,
            throughput: transitions as f64 / seconds,
            kernel_ms,
            grad_steps_per_s: None,
            epoch_grad_steps: None,
            utilization: None,
            flops_per_s: None,
            fma_peak: None,
            note: String::new(),
            check: String::new(),
            symbols: None,
            cores: None,
            kernel_wall: None,
        }
    }

    /// A W11 row: `envs` portfolio envs of `symbols` symbols stepped `env_steps` times in all in `seconds`
    /// (`kernel_ms` on a GPU; `cores`: the CPU threads, 0 on a GPU). `backend` "finrl" is the peer.
    pub fn portfolio(
        backend: &'static str,
        symbols: usize,
        envs: usize,
        env_steps: usize,
        seconds: f64,
        kernel_ms: Option<f64>,
        cores: usize,
    ) -> Self {
        Self {
            workload: "W11",
            variant: format!("N={symbols}"),
            label: format!("portfolio env: {envs} envs x {symbols} symbols, one scan"),
            symbols: Some(symbols),
            cores: (cores > 0).then_some(cores),
            ..Self::experience("", "", backend, envs, env_steps, seconds, kernel_ms)
        }
    }

    /// A W11 universe learner row: one training epoch of the universe `algo` ("DQN" or "PPO") over `envs`
    /// accounts of `symbols` symbols, `env_steps` env steps in all, in `seconds` (on a CPU of `cores` cores).
    pub fn universe_learner(
        backend: &'static str,
        algo: &str,
        symbols: usize,
        envs: usize,
        env_steps: usize,
        seconds: f64,
        cores: usize,
    ) -> Self {
        Self {
            workload: "W11u",
            variant: format!("{algo} N={symbols}"),
            label: format!("universe {algo}: one training epoch, {envs} envs x {symbols} symbols"),
            ..Self::portfolio(backend, symbols, envs, env_steps, seconds, None, cores)
        }
    }

    /// W11: symbol-steps per second (env steps x symbols).
    pub fn symbol_steps_per_s(&self) -> Option<f64> {
        self.symbols.map(|n| self.throughput * n as f64)
    }

    /// W11 on a CPU: env steps per second per core.
    pub fn per_core(&self) -> Option<f64> {
        self.cores.map(|c| self.throughput / c as f64)
    }

    /// A W2e row: a backtest end to end (file to metrics) by `tool` ("cpu": tradesim; or "vectorbt").
    pub fn end_to_end(tool: &'static str, columns: usize, bars: usize, seconds: f64) -> Self {
        Self {
            workload: "W2e",
            label: format!("{columns} SMA columns x {bars} bars from a CSV file, end to end"),
            ..Self::backtest(tool, columns, bars, seconds, true)
        }
    }

    /// A W0 row: a file of `bars` bars in `format` loaded and validated on the CPU.
    pub fn load(format: &'static str, bars: usize, seconds: f64) -> Self {
        Self {
            workload: "W0",
            variant: format.to_owned(),
            label: format!("{bars} bars of a {format} file loaded and validated into Decimal bars"),
            ..Self::experience("", "", "cpu", bars, bars, seconds, None)
        }
    }

    /// A W2 row.
    pub fn backtest(backend: &'static str, columns: usize, bars: usize, seconds: f64, ledger: bool) -> Self {
        let what = if ledger { "ledger on" } else { "metrics and trade counts" };
        Self {
            workload: "W2",
            label: format!("{columns} SMA columns x {bars} bars, {what}"),
            width: columns,
            work: columns * bars,
            throughput: (columns * bars) as f64 / seconds,
            ..Self::experience(backend, "", backend, 0, 0, seconds, None)
        }
    }

    /// A W3 row.
    pub fn dqn(
        backend: &'static str,
        transitions: usize,
        seconds: f64,
        grad_steps_per_s: f64,
        epoch_grad_steps: usize,
    ) -> Self {
        Self {
            workload: "W3",
            label: "DQN epoch: act + one gradient step per env step".to_owned(),
            grad_steps_per_s: Some(grad_steps_per_s),
            epoch_grad_steps: Some(epoch_grad_steps),
            ..Self::experience(backend, "", backend, 0, transitions, seconds, None)
        }
    }

    /// A W4 row (PPO).
    pub fn ppo(
        backend: &'static str,
        transitions: usize,
        seconds: f64,
        updates_per_s: f64,
        epoch_updates: usize,
    ) -> Self {
        Self {
            workload: "W4",
            label: "PPO epoch: a rollout of every env, GAE, 4 update epochs of minibatches".to_owned(),
            ..Self::dqn(backend, transitions, seconds, updates_per_s, epoch_updates)
        }
    }

    /// A W6 row: a search of `trials` trials with the TOML `config` over `bars` synthetic bars.
    pub fn search(config: &str, backend: &'static str, trials: usize, bars: usize, seconds: f64) -> Self {
        Self {
            workload: "W6",
            variant: config.to_owned(),
            label: format!("tradesim hyperopt --config benches/configs/{config}.toml, {bars} synthetic bars"),
            width: trials,
            ..Self::experience(backend, "", backend, trials, trials, seconds, None)
        }
    }

    /// A W9 row: the `algo` default search (`budget`: where its budget came from) on `pattern` of `bars`
    /// bars (its figures in the note, the pattern's target in the check).
    pub fn learning(
        algo: &str,
        pattern: &str,
        budget: &str,
        backend: &'static str,
        trials: usize,
        bars: usize,
        seconds: f64,
    ) -> Self {
        Self {
            workload: "W9",
            variant: algo.to_owned(),
            label: format!(
                "{} default search ({budget}) on {pattern}, {bars} bars: test Sharpe vs buy-and-hold, flat, oracle",
                algo.to_uppercase()
            ),
            width: trials,
            ..Self::experience(backend, "", backend, trials, trials, seconds, None)
        }
    }

    /// A W5 row (the greedy evaluation walk).
    pub fn walk(backend: &'static str, trials: usize, bar_steps: usize, seconds: f64) -> Self {
        Self {
            workload: "W5",
            label: "greedy walk: one env per trial, bar by bar, forward pass each bar".to_owned(),
            width: trials,
            ..Self::experience(backend, "", backend, trials, bar_steps, seconds, None)
        }
    }

    /// A W7 row: PBO by CSCV of `trials x bars` returns, `splits` splits, on the CPU.
    pub fn evidence(trials: usize, bars: usize, splits: usize, seconds: f64) -> Self {
        Self {
            workload: "W7",
            label: format!("PBO by CSCV: {trials} trials x {bars} bars, {splits} splits"),
            width: trials,
            work: splits,
            ..Self::experience("", "", "cpu", trials, splits, seconds, None)
        }
    }

    /// With a note.
    pub fn with_note(mut self, note: String) -> Self {
        self.note = note;
        self
    }

    /// With the self-check's outcome (W3, W4).
    pub fn with_check(mut self, check: String) -> Self {
        self.check = check;
        self
    }

    /// With the epoch's product FLOPs and, on a GPU, the kernel profile of a second, event-bracketed epoch:
    /// `kernel_ms` becomes that epoch's summed kernel time, the note the per-step time of each kernel.
    pub fn with_compute(mut self, flops: u64, profile: Option<Profile>, steps: usize) -> Self {
        self.flops_per_s = Some(flops as f64 / self.seconds);
        if let Some(p) = profile {
            self.kernel_ms = Some(p.kernels.iter().map(|k| k.2).sum());
            self.fma_peak = Some(p.fma_peak);
            let per_step: Vec<String> = p
                .kernels
                .iter()
                .map(|(name, launches, ms)| {
                    format!(
                        "{name} {:.1} us ({:.1} launches)",
                        1e3 * ms / steps as f64,
                        *launches as f64 / steps as f64
                    )
                })
                .collect();
            self.note = format!("per env step: {}", per_step.join(", "));
        }
        self
    }

    /// Kernel time over wall time: the event-bracketed epoch's kernel time over the plain epoch's wall, or
    /// over the wall of the run it was measured in ([`Self::kernel_wall`]).
    pub fn kernel_fraction(&self) -> Option<f64> {
        self.kernel_ms.map(|ms| ms / (1e3 * self.kernel_wall.unwrap_or(self.seconds)))
    }

    /// With NVML samples.
    pub fn with_utilization(mut self, u: Utilization) -> Self {
        self.utilization = Some(u);
        self
    }
}

/// The machine the run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Worker threads.
    pub threads: usize,
    /// GPU name, compute capability and memory, when used.
    pub gpu: Option<String>,
}

impl Machine {
    /// Reads /proc/cpuinfo and the CUDA backend (when `gpu` is given).
    pub fn describe(gpu: Option<&crate::Backend>) -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let gpu = gpu.map(|b| b.info()).and_then(|i| {
            let (major, minor) = i.compute_capability?;
            let dependent = if i.dependent_launch { "on" } else { "off" };
            Some(format!(
                "{} (cc {major}.{minor}, {:.1} GiB; PTX {}, dependent launch {dependent})",
                i.device_name?,
                i.total_memory? as f64 / f64::from(1u32 << 30),
                i.ptx_target.as_deref().unwrap_or("unknown")
            ))
        });
        Self { cpu, threads: crate::Backend::Cpu.info().parallelism, gpu }
    }
}

/// Device facts measured by the run.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuFacts {
    /// Device-to-device copy bandwidth (read + write), GB/s.
    pub copy_gbs: f64,
    /// Device memory, bytes.
    pub total_memory: usize,
    /// In use at the end of the run, bytes.
    pub used_memory_at_end: usize,
    /// Largest use NVML saw, bytes.
    pub peak_used_memory: Option<u64>,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// Where it ran.
    pub machine: Machine,
    /// Whether the sizes were the CI smoke test's.
    pub quick: bool,
    /// The GPU kernels the run chose (`--variant`; the default unless a comparison asked otherwise).
    pub variant: tradesim_host::KernelOptions,
    /// Bars of the synthetic series.
    pub bars: usize,
    /// Every row.
    pub rows: Vec<Row>,
    /// GPU facts, when a GPU was used.
    pub gpu: Option<GpuFacts>,
    /// Wall seconds of the run.
    pub seconds: f64,
}

/// Bytes an env step moves through device memory at least: its transition (40 B), its action (1 B) and two
/// bars (2 x 40 B, mostly cache hits); the env state stays in registers during a scan.
pub const BYTES_PER_ENV_STEP: f64 = 40.0 + 1.0 + 80.0;

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

impl BenchReport {
    fn throughput_of(&self, variant: &str) -> Option<f64> {
        self.rows.iter().find(|r| r.workload == "W1" && r.variant == variant).map(|r| r.throughput)
    }

    /// The slowest stage: the W1-W3 row of the GPU (or the CPU without one) with the longest wall time.
    pub fn slowest(&self) -> Option<&Row> {
        let backend = if self.gpu.is_some() { "cuda" } else { "cpu" };
        self.rows.iter().filter(|r| r.backend == backend).max_by(|a, b| a.seconds.total_cmp(&b.seconds))
    }

    /// vectorbt's seconds over tradesim's for a W2e row of tradesim with a vectorbt row of its width.
    pub fn vectorbt_ratio(&self, r: &Row) -> Option<f64> {
        let theirs = self.rows.iter().find(|v| v.workload == "W2e" && v.backend == "vectorbt" && v.width == r.width);
        theirs.filter(|_| r.workload == "W2e" && r.backend == "cpu").map(|v| v.seconds / r.seconds)
    }

    /// W3, W4: the fastest PyTorch peer's epoch seconds over this row's, the peer on the row's device (GPU
    /// rows: the 5-trial ones, not the wide one), and that peer's variant.
    pub fn pytorch_ratio(&self, r: &Row) -> Option<(f64, &str)> {
        // The plain GPU epoch's row is named after its backend (`Row::dqn`, `Row::ppo`); the 1,024-trial
        // row ("N trials") has no peer.
        let peer = match r.backend {
            "cuda" if r.variant.is_empty() || r.variant == r.backend => "pytorch",
            "cpu" => "pytorch-cpu",
            _ => return None,
        };
        if !(r.workload == "W3" || r.workload == "W4") {
            return None;
        }
        let peers = self.rows.iter().filter(|p| p.workload == r.workload && p.backend == peer);
        let best = peers.min_by(|a, b| a.seconds.total_cmp(&b.seconds))?;
        Some((best.seconds / r.seconds, best.variant.as_str()))
    }

    /// W11: a CPU row's env steps per second per core over the FinRL peer's at the same N.
    pub fn finrl_ratio(&self, r: &Row) -> Option<f64> {
        if r.workload != "W11" || r.backend != "cpu" {
            return None;
        }
        let peer = self.rows.iter().find(|p| p.workload == "W11" && p.backend == "finrl" && p.symbols == r.symbols)?;
        Some(r.per_core()? / peer.per_core()?)
    }

    /// The markdown tables.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "machine: {} ({} threads){}",
            self.machine.cpu,
            self.machine.threads,
            self.machine.gpu.as_ref().map_or(String::new(), |g| format!("; GPU {g}"))
        );
        let _ = writeln!(
            out,
            "data: SYNTHETIC, {} bars, F = 51, 5 trials{}\n",
            self.bars,
            if self.quick { " (--quick sizes)" } else { "" }
        );
        self.data_tables(&mut out);
        self.learner_tables(&mut out);
        self.search_tables(&mut out);
        self.portfolio_table(&mut out);
        if let Some(g) = &self.gpu {
            let peak =
                g.peak_used_memory.map_or("-".to_owned(), |p| format!("{:.2} GiB", p as f64 / f64::from(1u32 << 30)));
            let _ = writeln!(
                out,
                "\nGPU: device-to-device copy {:.0} GB/s; memory {:.1} GiB, in use at the end {:.2} GiB, peak seen by NVML {peak}",
                g.copy_gbs,
                g.total_memory as f64 / f64::from(1u32 << 30),
                g.used_memory_at_end as f64 / f64::from(1u32 << 30)
            );
        }
        if let Some(r) = self.slowest() {
            let _ = writeln!(out, "slowest stage: {} {} ({}), {:.2} s", r.workload, r.label, r.backend, r.seconds);
        }
        let _ = writeln!(out, "total: {:.1} s", self.seconds);
        out
    }

    /// W0 to W2e: market data in, experience, the backtest grid, the backtest end to end.
    fn data_tables(&self, out: &mut String) {
        let (a, c) = (self.throughput_of("a"), self.throughput_of("c"));
        let copy = self.gpu.as_ref().map(|g| g.copy_gbs);
        if self.rows.iter().any(|r| r.workload == "W0") {
            *out += "W0 market data in\n\n| format | bars | seconds | bars/s | note |\n|---|---|---|---|---|\n";
            for r in self.rows.iter().filter(|r| r.workload == "W0") {
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.3} | {:.3e} | {} |",
                    r.variant, r.work, r.seconds, r.throughput, r.note
                );
            }
            *out += "\n";
        }
        *out += "W1 experience (same transitions per variant)\n\n| var | what | backend | E | transitions | seconds | env-steps/s | x (a) | x (c) | kernel ms | GB/s (% of copy) |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
        for r in self.rows.iter().filter(|r| r.workload == "W1") {
            let bandwidth = r.kernel_ms.map(|ms| BYTES_PER_ENV_STEP * r.work as f64 / (ms * 1e-3) / 1e9);
            let share = bandwidth.zip(copy).map_or(String::new(), |(b, c)| format!(" ({:.0}%)", 100.0 * b / c));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.4} | {:.3e} | {} | {} | {} | {}{share} |",
                r.variant,
                r.label,
                r.backend,
                r.width,
                r.work,
                r.seconds,
                r.throughput,
                opt(a.map(|a| r.throughput / a), 2),
                opt(c.map(|c| r.throughput / c), 2),
                opt(r.kernel_ms, 3),
                opt(bandwidth, 1),
            );
        }
        *out += "\nW2 backtest\n\n| backend | columns | bar-columns | seconds | bar-columns/s | note |\n|---|---|---|---|---|---|\n";
        for r in self.rows.iter().filter(|r| r.workload == "W2") {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.3e} | {} |",
                r.backend, r.width, r.work, r.seconds, r.throughput, r.note
            );
        }
        if self.rows.iter().any(|r| r.workload == "W2e") {
            *out += "\nW2e backtest end to end on the CPU (CSV file -> SMA, signals, simulation, ledger, metrics), beside vectorbt on the same file\n\n| tool | columns | bars | seconds | x vectorbt | note |\n|---|---|---|---|---|---|\n";
            for r in self.rows.iter().filter(|r| r.workload == "W2e") {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.3} | {} | {} |",
                    if r.backend == "cpu" { "tradesim (cpu)" } else { r.backend },
                    r.width,
                    r.work / r.width.max(1),
                    r.seconds,
                    opt(self.vectorbt_ratio(r), 1),
                    r.note
                );
            }
        }
    }

    /// W3 to W5: the learners' epochs and the greedy walk.
    fn learner_tables(&self, out: &mut String) {
        for (workload, title, steps) in [
            ("W3", "W3 DQN (batch per trial, hidden 128)", "gradient steps"),
            ("W4", "W4 PPO (minibatch per trial, hidden 128, 4 update epochs)", "updates"),
        ] {
            let _ = write!(
                out,
                "\n{title}\n\n| backend | {steps}/s | epoch seconds | env-steps/s | {steps} per epoch | kernel time / wall | \
                 FP32 TFLOP/s (% of FMA peak) | GPU busy (NVML) mean / max % |\n|---|---|---|---|---|---|---|---|\n"
            );
            for r in self.rows.iter().filter(|r| r.workload == workload) {
                let u = r.utilization.map_or("-".to_owned(), |u| format!("{:.0} / {:.0}", u.mean_gpu(), u.max_gpu));
                let kernel = r.kernel_fraction().map_or("-".to_owned(), |f| format!("{:.0}%", 100.0 * f));
                let flops = match (r.flops_per_s, r.fma_peak) {
                    (Some(f), Some(p)) => format!("{:.2} ({:.1}% of {:.1})", f / 1e12, 100.0 * f / p, p / 1e12),
                    (Some(f), None) => format!("{:.3}", f / 1e12),
                    _ => "-".to_owned(),
                };
                let backend =
                    if r.variant.is_empty() { r.backend.to_owned() } else { format!("{} ({})", r.backend, r.variant) };
                let _ = writeln!(
                    out,
                    "| {backend} | {} | {:.3} | {:.3e} | {} | {kernel} | {flops} | {u} |",
                    opt(r.grad_steps_per_s, 1),
                    r.seconds,
                    r.throughput,
                    r.epoch_grad_steps.unwrap_or(0)
                );
            }
            for r in self.rows.iter().filter(|r| r.workload == workload && !r.note.is_empty()) {
                let _ = writeln!(out, "\n{} {}: {}", r.backend, workload, r.note);
            }
            for r in self.rows.iter().filter(|r| r.workload == workload && !r.check.is_empty()) {
                let _ = writeln!(out, "\n{} {} checked: {}", r.backend, workload, r.check);
            }
            for r in self.rows.iter().filter(|r| r.workload == workload) {
                if let Some((ratio, variant)) = self.pytorch_ratio(r) {
                    let _ = writeln!(
                        out,
                        "\n{workload}: the fastest PyTorch peer on the {} ({variant}) takes {ratio:.2}x the time of \
                         tradesim's epoch",
                        if r.backend == "cpu" { "CPU" } else { "GPU" }
                    );
                }
            }
        }
        *out += "\nW5 greedy evaluation walk (one env per trial, hidden 128; env setup, walk and backtest)\n\n| backend | trials | bar-steps | seconds | bar-steps/s |\n|---|---|---|---|---|\n";
        for r in self.rows.iter().filter(|r| r.workload == "W5") {
            let _ =
                writeln!(out, "| {} | {} | {} | {:.3} | {:.3e} |", r.backend, r.width, r.work, r.seconds, r.throughput);
        }
        for r in self.rows.iter().filter(|r| r.workload == "W5" && !r.note.is_empty()) {
            let _ = writeln!(out, "\n{} W5: {}", r.backend, r.note);
        }
    }

    /// W6, W7 and W9: the searches, PBO by CSCV, and whether the learners learn.
    fn search_tables(&self, out: &mut String) {
        if self.rows.iter().any(|r| r.workload == "W6") {
            *out += "\nW6 search (the seed TOMLs, `--seed 3`, a new study each; run-sh: scripts/run.sh's job)\n\n| TOML | backend | trials | seconds | kernel time / wall (CUDA events, the profiled run) | GPU busy (NVML) mean % |\n|---|---|---|---|---|---|\n";
            for r in self.rows.iter().filter(|r| r.workload == "W6") {
                let fraction = r.kernel_fraction().map_or("-".to_owned(), |f| format!("{:.0}%", 100.0 * f));
                let busy = r.utilization.map_or("-".to_owned(), |u| format!("{:.0}", u.mean_gpu()));
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.1} | {fraction} | {busy} |",
                    r.variant, r.backend, r.width, r.seconds
                );
            }
            for r in self.rows.iter().filter(|r| r.workload == "W6") {
                let _ = writeln!(out, "\n{} {} W6: {}", r.backend, r.variant, r.note);
            }
        }
        if self.rows.iter().any(|r| r.workload == "W7") {
            *out += "\nW7 PBO by CSCV (16 blocks, noise returns)\n\n| backend | trials | splits | seconds | splits/s | note |\n|---|---|---|---|---|---|\n";
            for r in self.rows.iter().filter(|r| r.workload == "W7") {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.3} | {:.3e} | {}; {} |",
                    r.backend, r.width, r.work, r.seconds, r.throughput, r.label, r.note
                );
            }
        }
        if self.rows.iter().any(|r| r.workload == "W9") {
            *out += "\nW9 learning (the seed searches on planted patterns; test Sharpe against an oracle that knows the drift)\n\n| algorithm | backend | trials | seconds | pattern |\n|---|---|---|---|---|\n";
            for r in self.rows.iter().filter(|r| r.workload == "W9") {
                let _ =
                    writeln!(out, "| {} | {} | {} | {:.1} | {} |", r.variant, r.backend, r.width, r.seconds, r.label);
            }
            for r in self.rows.iter().filter(|r| r.workload == "W9") {
                let _ = writeln!(out, "\n{} {} W9: {}", r.backend, r.variant, r.note);
                if !r.check.is_empty() {
                    let _ = writeln!(out, "{} {} W9 target: {}", r.backend, r.variant, r.check);
                }
            }
        }
    }

    /// W11: the portfolio env and the FinRL peer.
    fn portfolio_table(&self, out: &mut String) {
        if !self.rows.iter().any(|r| r.workload == "W11") {
            return;
        }
        *out += "\nW11 portfolio env (synthetic universe, random action codes, one scan; wall time with the actions' upload and the outputs' download)\n\n| backend | N | envs | env steps | seconds | env-steps/s | symbol-steps/s | cores | env-steps/s per core | x FinRL per core | kernel ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
        for r in self.rows.iter().filter(|r| r.workload == "W11") {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.4} | {:.3e} | {:.3e} | {} | {} | {} | {} |",
                r.backend,
                r.symbols.unwrap_or(0),
                r.width,
                r.work,
                r.seconds,
                r.throughput,
                r.symbol_steps_per_s().unwrap_or(f64::NAN),
                r.cores.map_or("-".to_owned(), |c| c.to_string()),
                r.per_core().map_or("-".to_owned(), |p| format!("{p:.3e}")),
                opt(self.finrl_ratio(r), 1),
                opt(r.kernel_ms, 3),
            );
        }
        for r in self.rows.iter().filter(|r| r.workload == "W11" && !r.check.is_empty()) {
            let _ = writeln!(out, "\n{} W11 {} checked: {}", r.backend, r.variant, r.check);
        }
        for r in self.rows.iter().filter(|r| r.workload == "W11" && !r.note.is_empty()) {
            let _ = writeln!(out, "\n{} W11 {}: {}", r.backend, r.variant, r.note);
        }
        self.universe_learner_table(out);
    }

    /// W11's universe learner rows: a training epoch of the universe DQN and PPO.
    fn universe_learner_table(&self, out: &mut String) {
        if !self.rows.iter().any(|r| r.workload == "W11u") {
            return;
        }
        *out += "\nW11 universe learners (one training epoch of a shared per-symbol network over envs x N rows, the second of two; DQN: env steps with a gradient step each past the warm-up; PPO: one rollout and its updates)\n\n| backend | learner | N | envs | env steps | seconds | env-steps/s | symbol-steps/s | cores |\n|---|---|---|---|---|---|---|---|---|\n";
        for r in self.rows.iter().filter(|r| r.workload == "W11u") {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {:.4} | {:.3e} | {:.3e} | {} |",
                r.backend,
                r.variant.split(' ').next().unwrap_or(""),
                r.symbols.unwrap_or(0),
                r.width,
                r.work,
                r.seconds,
                r.throughput,
                r.symbol_steps_per_s().unwrap_or(f64::NAN),
                r.cores.map_or("-".to_owned(), |c| c.to_string()),
            );
        }
        for r in self.rows.iter().filter(|r| r.workload == "W11u" && !r.check.is_empty()) {
            let _ = writeln!(out, "\n{} W11 universe {} checked: {}", r.backend, r.variant, r.check);
        }
    }

    /// The JSON document (every figure, the machine, the sizes).
    pub fn json(&self) -> String {
        use serde_json::json;
        let (a, c) = (self.throughput_of("a"), self.throughput_of("c"));
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                let u = r.utilization.map_or(serde_json::Value::Null, |u| {
                    json!({
                        "samples": u.samples,
                        "mean_gpu": crate::json::number(u.mean_gpu()),
                        "max_gpu": crate::json::number(u.max_gpu),
                        "max_used_memory": u.max_used_memory,
                    })
                });
                json!({
                    "workload": r.workload,
                    "variant": r.variant,
                    "label": r.label,
                    "backend": r.backend,
                    "width": r.width,
                    "work": r.work,
                    "seconds": crate::json::number(r.seconds),
                    "throughput": crate::json::number(r.throughput),
                    "ratio_to_a": crate::json::opt(a.filter(|_| r.workload == "W1").map(|a| r.throughput / a)),
                    "ratio_to_c": crate::json::opt(c.filter(|_| r.workload == "W1").map(|c| r.throughput / c)),
                    "kernel_ms": crate::json::opt(r.kernel_ms),
                    "kernel_wall_seconds": crate::json::opt(r.kernel_wall),
                    "grad_steps_per_s": crate::json::opt(r.grad_steps_per_s),
                    "epoch_grad_steps": r.epoch_grad_steps,
                    "utilization": u,
                    "flops_per_s": crate::json::opt(r.flops_per_s),
                    "fma_peak_flops": crate::json::opt(r.fma_peak),
                    "ratio_to_vectorbt": crate::json::opt(self.vectorbt_ratio(r)),
                    "ratio_to_pytorch": crate::json::opt(self.pytorch_ratio(r).map(|p| p.0)),
                    "symbols": r.symbols,
                    "symbol_steps_per_s": crate::json::opt(r.symbol_steps_per_s()),
                    "cores": r.cores,
                    "env_steps_per_s_per_core": crate::json::opt(r.per_core()),
                    "ratio_to_finrl_per_core": crate::json::opt(self.finrl_ratio(r)),
                    "note": r.note,
                    "check": r.check,
                })
            })
            .collect();
        let gpu = self.gpu.as_ref().map_or(serde_json::Value::Null, |g| {
            json!({
                "copy_gbs": crate::json::number(g.copy_gbs),
                "total_memory": g.total_memory,
                "used_memory_at_end": g.used_memory_at_end,
                "peak_used_memory": g.peak_used_memory,
            })
        });
        crate::json::text(&json!({
            "machine": {"cpu": self.machine.cpu, "threads": self.machine.threads, "gpu": self.machine.gpu},
            "data": "synthetic",
            "bars": self.bars,
            "quick": self.quick,
            "variant": self.variant.to_string(),
            "kernel_options": {
                "fused": self.variant.fused,
                "narrow_chains": self.variant.narrow_chains,
                "multiwave_fused": self.variant.multiwave_fused,
                "dependent_launch": self.variant.dependent_launch,
                "event_tracking": self.variant.event_tracking,
            },
            "commit": option_env!("TRADESIM_COMMIT").filter(|c| !c.is_empty()),
            "seconds": crate::json::number(self.seconds),
            "gpu_facts": gpu,
            "rows": rows,
        }))
    }
}
