//! W6: the search itself, as `tradesim hyperopt --config benches/configs/X.toml --synthetic 300000 --seed 3`
//! runs it, on each backend (a fresh study in a temporary folder each): the seed TOMLs of the learner-speed
//! issue (DQN and PPO, CPU vs GPU) and, on a GPU, the slot-refill TOML. `--quick`: the same TOMLs shrunk to
//! 2 trials of 1 epoch on 16 envs x 32 steps over 20,000 bars (a smoke test).
//!
//! Then `scripts/run.sh`'s job: `tradesim hyperopt --placebo 19 --walk-forward 3` on the embedded default
//! data with the budget of the backend it runs on, timed from the data's load to the verdict, with NVML
//! sampled; on a GPU run again with one side search at a time (the gain of running them at once), then a
//! third time with every launch bracketed by CUDA events, for the time the device ran any kernel
//! (overlapping launches on several streams count once) over that run's own wall time.

use std::time::Instant;

use super::report::{self, Row};
use crate::data::synthetic::{GeneratorConfig, generate};
use crate::job::{Job, JobArgs, SearchClock};
use crate::{Backend, Error};

/// The TOMLs W6 runs (name, text), GPU-only ones last.
const CONFIGS: [(&str, &str, bool); 3] = [
    ("seed-dqn", include_str!("../../benches/configs/seed-dqn.toml"), false),
    ("seed-ppo", include_str!("../../benches/configs/seed-ppo.toml"), false),
    ("refill-dqn", include_str!("../../benches/configs/refill-dqn.toml"), true),
];

/// The search seed of docs/PERFORMANCE.md's figures (`--seed 3`).
const SEED: u64 = 3;

/// One search of `text` on `backend` over `bars` synthetic bars: its row (seconds, the breakdown and the
/// best trial in the note) and its leaderboard (trial numbers and the bits of their validation Sharpes, best
/// first: NaN for a trial without one).
fn one(name: &str, text: &str, backend: &Backend, bars: usize, quick: bool) -> Result<(Row, Vec<(u64, u64)>), Error> {
    let dir =
        std::env::temp_dir().join(format!("tradesim-w6-{}-{name}-{}", std::process::id(), backend.info().backend));
    // A folder left by an earlier run of this process id is replaced (the study must be new).
    let _ = std::fs::remove_dir_all(&dir);
    let ran = search_in(&dir, name, text, backend, bars, quick);
    let _ = std::fs::remove_dir_all(&dir);
    ran
}

/// [`one`] with its study and report in `dir`.
fn search_in(
    dir: &std::path::Path,
    name: &str,
    text: &str,
    backend: &Backend,
    bars: usize,
    quick: bool,
) -> Result<(Row, Vec<(u64, u64)>), Error> {
    let text = if quick {
        // The TOMLs' sizes, shrunk; a TOML without these lines would run at full size in CI's smoke test.
        let full = ["envs = 1024", "segment_len = 256"];
        if !full.iter().all(|line| text.contains(line)) {
            return Err(Error::Output(format!("W6 --quick: benches/configs/{name}.toml no longer sets {full:?}")));
        }
        text.replace(full[0], "envs = 16").replace(full[1], "segment_len = 32")
    } else {
        text.to_owned()
    };
    let args = JobArgs {
        config_text: Some((format!("benches/configs/{name}.toml"), text)),
        trials: quick.then_some(2),
        parallel: quick.then_some(2),
        epochs: quick.then_some(1),
        seed: Some(SEED),
        gpu: backend.is_cuda(),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        ..JobArgs::default()
    };
    let job = Job::prepare(&args)?;
    let dataset = generate(&GeneratorConfig { bars, symbols: 1, ..GeneratorConfig::default() });
    let clock = SearchClock::default();
    let started = Instant::now();
    let done = job.run(std::slice::from_ref(backend), &dataset, None, &|p| {
        clock.record(p);
        Ok(())
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let times = clock.times(done.split_seconds);
    let board: Vec<(u64, u64)> = done.summary.leaderboard.iter().map(|t| (t.number, t.value.to_bits())).collect();
    let mut note = format!(
        "search {seconds:.1} s: {}; after the search: {}",
        times.breakdown(seconds, crate::job::side::overlapped(&done.evidence, done.side_at_once)),
        done.after.line()
    );
    if times.slots > 0 {
        note += &format!("; {} of {} slot-epochs trained a live trial", times.live, times.slots);
    }
    if let Some(best) = done.summary.leaderboard.first() {
        note += &format!("; best trial {} (validation Sharpe {:.3})", best.number, best.value);
    }
    let trials = job.cfg.study.trials;
    let row = Row::search(name, backend.info().backend, trials, bars, seconds).with_note(note);
    Ok((row, board))
}

/// `scripts/run.sh`'s job (`--quick`: 2 trials of 1 epoch on 16 envs x 32 steps, 1 placebo, 1 fold) in `dir`,
/// `side` side searches at once (`None`: the default): its wall seconds from the data's load to the verdict,
/// its trials, the verdict's line and the side searches it ran at once.
fn run_sh_job(
    dir: &std::path::Path,
    backend: &Backend,
    quick: bool,
    side: Option<usize>,
) -> Result<(f64, usize, String, usize), Error> {
    let _ = std::fs::remove_dir_all(dir);
    let args = JobArgs {
        side_searches: side,
        placebo: Some(if quick { 1 } else { 19 }),
        walk_forward: Some(if quick { 1 } else { 3 }),
        trials: quick.then_some(2),
        parallel: quick.then_some(2),
        epochs: quick.then_some(1),
        envs: quick.then_some(16),
        segment_len: quick.then_some(32),
        gpu: backend.is_cuda(),
        study: Some(dir.join("study.sqlite")),
        report: Some(dir.join("report")),
        ..JobArgs::default()
    };
    let started = Instant::now();
    let dataset = crate::data::embedded()?;
    let job = Job::prepare(&args)?;
    let done = job.run(std::slice::from_ref(backend), &dataset, None, &|_| Ok(()))?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(dir);
    Ok((seconds, job.cfg.study.trials, done.evidence.verdict.line, done.side_at_once))
}

/// W6's row of `scripts/run.sh`'s job on `backend`: its wall time and, on a GPU, NVML's busy share of it, the
/// wall of a run with one side search at a time, and the kernel time of a profiled run (the union of every
/// launch's interval) over that run's wall.
fn run_sh_row(
    backend: &Backend,
    quick: bool,
    sampler: &mut (impl FnMut() -> Option<report::Utilization> + Send),
) -> Result<Row, Error> {
    let dir =
        std::env::temp_dir().join(format!("tradesim-w6-{}-run-sh-{}", std::process::id(), backend.info().backend));
    let (ran, utilization) = report::sampled(backend.is_cuda(), sampler, || run_sh_job(&dir, backend, quick, None));
    let (seconds, trials, verdict, at_once) = ran?;
    let mut row = Row::search("run-sh", backend.info().backend, trials, 0, seconds);
    row.label = "scripts/run.sh's job: tradesim hyperopt --placebo 19 --walk-forward 3 on the embedded data".to_owned()
        + if quick { " (--quick: shrunk)" } else { "" };
    let mut note = format!("verdict: {verdict}; {at_once} side searches at once");
    if utilization.samples > 0 {
        note += &format!(
            "; NVML during the run: GPU busy {:.0}% mean, {:.0}% max ({} samples)",
            utilization.mean_gpu(),
            utilization.max_gpu,
            utilization.samples
        );
        row = row.with_utilization(utilization);
    }
    #[cfg(feature = "cuda")]
    if let Backend::Cuda(rt) = backend {
        // The side searches one at a time, for the gain of running them at once (the same verdict).
        let (alone, _, again, _) = run_sh_job(&dir, backend, quick, Some(1))?;
        let same = if again == verdict { "the same verdict" } else { "a different verdict" };
        note += &format!("; one at a time: {alone:.2} s ({same}), {:.2}x the time", alone / seconds);
        rt.start_profile()?;
        let started = Instant::now();
        let ran = run_sh_job(&dir, backend, quick, None);
        let profiled = started.elapsed().as_secs_f64();
        let p = rt.stop_profile()?;
        let again = ran?.2;
        // Against the profiled run's own wall: its events slow the host's launches (more so with side searches
        // on several threads), so the kernel time of that run over the plain run's shorter wall would mean
        // nothing.
        (row.kernel_ms, row.kernel_wall) = (Some(p.busy_ms), Some(profiled));
        let same = if again == verdict { "the same verdict" } else { "a different verdict" };
        note += &format!(
            "; profiled run ({same}): {profiled:.2} s wall, {} launches, kernels busy {:.3} s ({:.0}% of that \
             wall; {:.3} s summed over streams), first launch to last end {:.3} s; {}: an upper bound",
            p.launches(),
            p.busy_ms / 1e3,
            p.busy_ms / (10.0 * profiled),
            p.summed_ms() / 1e3,
            p.span_ms / 1e3,
            tradesim_host::KernelProfile::BUSY_BOUND
        );
    }
    Ok(row.with_note(note))
}

/// W6 on every backend: a row per (TOML, backend); a GPU row's note gives its speed-up over the CPU row of
/// the same TOML and whether the two leaderboards agree (trial numbers and validation Sharpes).
pub fn search(
    backends: &[Backend],
    quick: bool,
    mut sampler: impl FnMut() -> Option<report::Utilization> + Send,
) -> Result<Vec<Row>, Error> {
    let bars = if quick { 20_000 } else { 300_000 };
    let mut rows = Vec::new();
    for (name, text, gpu_only) in CONFIGS {
        let mut cpu: Option<(f64, Vec<(u64, u64)>)> = None;
        for backend in backends.iter().filter(|b| b.is_cuda() || !gpu_only) {
            let (mut row, board) = one(name, text, backend, bars, quick)?;
            match (&cpu, backend.is_cuda()) {
                (Some((seconds, cpu_board)), true) => {
                    let same = match cpu_board.iter().zip(&board).position(|(c, g)| c != g) {
                        None if cpu_board.len() == board.len() => "the same leaderboard".to_owned(),
                        None => format!("a leaderboard of {} trials against {}", board.len(), cpu_board.len()),
                        Some(i) => {
                            let show = |(n, v): (u64, u64)| format!("trial {n} at {}", f64::from_bits(v));
                            format!(
                                "leaderboards differ from rank {}: {} against {}",
                                i + 1,
                                show(board[i]),
                                show(cpu_board[i])
                            )
                        }
                    };
                    row.note = format!("{:.1}x the CPU, {same}; {}", seconds / row.seconds, row.note);
                }
                (None, false) => cpu = Some((row.seconds, board)),
                _ => {}
            }
            rows.push(row);
        }
    }
    for backend in backends {
        rows.push(run_sh_row(backend, quick, &mut sampler)?);
    }
    Ok(rows)
}
