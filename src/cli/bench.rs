//! `tradesim bench`: the benchmark workloads, printed as a table and optionally written as JSON.

use std::path::Path;

use crate::{DeviceRequest, Error};

pub(super) fn run(
    workload: crate::bench::Workload,
    quick: bool,
    json: Option<&Path>,
    device: DeviceRequest,
    variant: tradesim_host::KernelOptions,
    trials: Option<usize>,
    peers: &crate::bench::Peers,
) -> Result<(), Error> {
    let report = crate::bench::run(workload, quick, device, variant, trials, peers)?;
    print!("{}", report.markdown());
    if let Some(path) = json {
        std::fs::write(path, report.json()).map_err(Error::io(path))?;
        println!("JSON: {}", path.display());
    }
    Ok(())
}

/// `tradesim bench power` (W10): runs the families on the device `device` picks (CUDA when usable with
/// `auto`), prints the table (and every run to stderr as it ends), and writes the runs as JSON after each.
pub(super) fn power(
    args: &crate::bench::power::PowerArgs,
    quick: bool,
    json: Option<&Path>,
    device: DeviceRequest,
) -> Result<(), Error> {
    if !args.merge.is_empty() {
        let runs = crate::bench::power::read_runs(&args.merge)?;
        print!("{}", crate::bench::power::table(&runs, "as recorded in the JSON files", quick));
        return Ok(());
    }
    let (backends, reason) = crate::select_backends(device)?;
    if let Some(reason) = reason {
        eprintln!("note: using the CPU backend: {reason}");
    }
    let backend = backends.first().ok_or_else(|| Error::config("--device", "no backend is available"))?;
    let started = std::time::Instant::now();
    let name = backend.info().backend;
    // The JSON is rewritten after every run: a call stopped by a time limit keeps the runs it finished.
    let write = |runs: &[crate::bench::power::Run]| -> Result<(), Error> {
        let Some(path) = json else { return Ok(()) };
        let text = serde_json::to_string_pretty(&serde_json::json!({ "backend": name, "quick": quick, "runs": runs }))
            .map_err(|e| Error::Output(format!("W10 as JSON: {e}")))?;
        std::fs::write(path, text).map_err(Error::io(path))
    };
    let runs = crate::bench::power::power(args, quick, backend, write)?;
    print!("{}", crate::bench::power::table(&runs, name, quick));
    println!("W10 took {:.0} s", started.elapsed().as_secs_f64());
    if let Some(path) = json {
        println!("JSON: {}", path.display());
    }
    Ok(())
}
