//! `tradesim bench`: the benchmark workloads, printed as a table and optionally written as JSON.

use std::path::Path;

use crate::{DeviceRequest, Error};

pub(super) fn run(
    workload: crate::bench::Workload,
    quick: bool,
    json: Option<&Path>,
    device: DeviceRequest,
    variant: gpu_kernels::kernel_names::KernelOptions,
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
