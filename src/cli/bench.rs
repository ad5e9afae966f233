//! `tradesim bench`: the benchmark workloads, printed as a table and optionally written as JSON.

use std::path::Path;

use crate::{DeviceRequest, HostError};

pub(super) fn run(
    workload: crate::bench::Workload,
    quick: bool,
    json: Option<&Path>,
    device: DeviceRequest,
    trials: Option<usize>,
) -> Result<(), HostError> {
    let report = crate::bench::run(workload, quick, device, trials)?;
    print!("{}", report.markdown());
    if let Some(path) = json {
        std::fs::write(path, report.json())
            .map_err(|e| HostError::Config(format!("writing {}: {e}", path.display())))?;
        println!("JSON: {}", path.display());
    }
    Ok(())
}
