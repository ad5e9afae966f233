//! W2e: the backtest end to end on the CPU, as a user runs it (a CSV file in, every column's metrics and
//! ledger out), beside vectorbt on the same file when the bench is given a Python that has it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rust_decimal::Decimal;

use super::{Row, Sizes};
use crate::data::CleanPolicy;
use crate::data::synthetic::{GeneratorConfig, generate};
use crate::grid::{GridRequest, SignalRule, run_grid};
use crate::{Backend, Error};

/// vectorbt's side (python/bench/vbt_grid.py), run from a copy beside the data.
const VBT_SCRIPT: &str = include_str!("../../python/bench/vbt_grid.py");

/// Timed runs of each side; the figure is the best.
const RUNS: usize = 3;

/// vectorbt's timed runs: [`RUNS`] for the small grid, one for the large (a run of 1,000 columns over 300K
/// bars takes minutes).
fn vbt_runs(fast: &[u32], slow: &[u32]) -> usize {
    if fast.len() * slow.len() > 100 { 1 } else { RUNS }
}

/// Columns vectorbt simulates at once: all 1,000 of the large grid at once (300K bars) needed more than
/// the 24 GB of the 2-core machine and was killed.
const VBT_CHUNK: usize = 100;

/// A directory removed when dropped.
pub(super) struct Scratch(pub(super) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The grids: (fast windows, slow windows), 100 and 1,000 columns (every slow exceeds every fast).
fn grids(quick: bool) -> [(Vec<u32>, Vec<u32>); 2] {
    let (small, large) = if quick { ((2, 5), (4, 5)) } else { ((10, 10), (25, 40)) };
    [small, large].map(|(nf, ns): (u32, u32)| ((2..2 + nf).collect(), (nf + 20..nf + 20 + ns).collect()))
}

fn list(windows: &[u32]) -> String {
    windows.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// Writes `bars` seeded synthetic hourly bars as a CSV (the header pandas users write).
pub(super) fn write_csv(path: &Path, bars: usize) -> Result<(), Error> {
    let data = generate(&GeneratorConfig { bars, symbols: 1, seed: 42, bar_seconds: 3_600 });
    let mut out = String::with_capacity(bars * 64);
    out.push_str("time,open,high,low,close,volume\n");
    for b in &data.series[0].bars {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            b.time.format("%Y-%m-%d %H:%M:%S"),
            b.open,
            b.high,
            b.low,
            b.close,
            b.volume
        );
    }
    std::fs::write(path, out).map_err(Error::io(path))
}

/// tradesim's end to end: load and validate the file, then the grid with its ledger and metrics (what
/// `tradesim backtest --data FILE --fast .. --slow ..` does); best of [`RUNS`], with that run's load time.
fn tradesim_side(csv: &Path, fast: &[u32], slow: &[u32]) -> Result<(f64, f64, usize), Error> {
    let request = GridRequest {
        fast: fast.to_vec(),
        slow: slow.to_vec(),
        signal: SignalRule::Cross,
        allow_short: false,
        capital: Decimal::from(100_000),
        spread: Decimal::new(2, 4),
        commission: Decimal::new(1, 4),
        whole_units: false,
        bars_per_year: None,
    };
    let mut best: Option<(f64, f64, usize)> = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let (data, _) = crate::data::load_file(csv, &CleanPolicy::default())?;
        let load = started.elapsed().as_secs_f64();
        let run = run_grid(&Backend::Cpu, &data.series[0], &request)?;
        let seconds = started.elapsed().as_secs_f64();
        if best.is_none_or(|b| seconds < b.0) {
            best = Some((seconds, load, run.grid.len()));
        }
    }
    best.ok_or_else(|| Error::Output("no timed run".to_owned()))
}

/// vectorbt's figures on the same file: (best seconds, first call seconds, version, columns).
fn vectorbt_side(python: &Path, script: &Path, csv: &Path, fast: &[u32], slow: &[u32]) -> Result<VbtRun, Error> {
    let out = Command::new(python)
        .arg(script)
        .arg(csv)
        .args(["--fast", &list(fast), "--slow", &list(slow), "--runs", &vbt_runs(fast, slow).to_string()])
        .args(["--chunk", &VBT_CHUNK.to_string()])
        .output()
        .map_err(|e| Error::Output(format!("could not run {}: {e}", python.display())))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.lines().last().unwrap_or("killed without a message (out of memory?)");
        return Err(Error::Output(format!("the vectorbt run failed ({}): {why}", out.status)));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::Output(format!("the vectorbt run printed no JSON object: {e}")))?;
    let number = |k: &str| v[k].as_f64().ok_or_else(|| Error::Output(format!("the vectorbt run has no `{k}`")));
    Ok(VbtRun {
        seconds: number("seconds")?,
        first_call: number("first_call_seconds")?,
        columns: number("columns")? as usize,
        version: v["version"].as_str().unwrap_or("?").to_owned(),
    })
}

struct VbtRun {
    seconds: f64,
    first_call: f64,
    columns: usize,
    version: String,
}

/// W2e rows: tradesim on the CPU for 100 and 1,000 columns and, with `vectorbt` (a Python with vectorbt
/// installed), vectorbt on the same file, each row's note holding the command that reproduces it.
pub fn end_to_end(sizes: &Sizes, quick: bool, vectorbt: Option<&Path>) -> Result<Vec<Row>, Error> {
    let dir = std::env::temp_dir().join(format!("tradesim-w2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    let scratch = Scratch(dir);
    let csv = scratch.0.join("bars.csv");
    write_csv(&csv, sizes.bars)?;
    let script = scratch.0.join("vbt_grid.py");
    std::fs::write(&script, VBT_SCRIPT).map_err(Error::io(&script))?;
    let mut rows = Vec::new();
    for (fast, slow) in grids(quick) {
        let (seconds, load, columns) = tradesim_side(&csv, &fast, &slow)?;
        let command = format!(
            "tradesim backtest --data FILE --fast {} --slow {} --spread 0.0002 --commission 0.0001 --capital 100000",
            list(&fast),
            list(&slow)
        );
        rows.push(
            Row::end_to_end("cpu", columns, sizes.bars, seconds)
                .with_note(format!("CSV load and validation {load:.3} s; as `{command}` (long only)")),
        );
        let Some(python) = vectorbt else { continue };
        // A failed vectorbt run (e.g. killed for memory) is reported beside tradesim's figure, not fatal.
        match vectorbt_side(python, &script, &csv, &fast, &slow) {
            Ok(v) if v.columns == columns => {
                rows.push(Row::end_to_end("vectorbt", columns, sizes.bars, v.seconds).with_note(format!(
                    "vectorbt {}, {VBT_CHUNK} columns at a time, best of {} runs; numba's compile call {:.2} s; \
                     `{} python/bench/vbt_grid.py FILE --fast {} --slow {} --chunk {VBT_CHUNK}`",
                    v.version,
                    vbt_runs(&fast, &slow),
                    v.first_call,
                    python.display(),
                    list(&fast),
                    list(&slow)
                )))
            }
            outcome => {
                let why = outcome.map_or_else(|e| e.to_string(), |v| format!("it ran {} columns", v.columns));
                eprintln!("W2e: no vectorbt figure for {columns} columns: {why}");
                if let Some(row) = rows.last_mut() {
                    row.note += &format!("; no vectorbt figure: {why}");
                }
            }
        }
    }
    Ok(rows)
}
