//! `tradesim info`: backend, device, PTX target, cubins, kernels and how the module in use was loaded.

use crate::{DeviceRequest, Error};

pub(super) fn run(device: DeviceRequest) -> Result<(), Error> {
    println!("tradesim {}", env!("CARGO_PKG_VERSION"));
    println!("CUDA:        {}", tradesim_host::detect());
    let (backend, fallback) = crate::select_backend_with_reason(device)?;
    let info = backend.info();
    match fallback {
        Some(reason) => println!("backend:     cpu (CUDA not used: {reason})"),
        None => println!("backend:     {}", info.backend),
    }
    if let Some(name) = &info.device_name {
        let (major, minor) = info.compute_capability.unwrap_or_default();
        let gib = info.total_memory.unwrap_or_default() as f64 / f64::from(1u32 << 30);
        println!("device:      {name} (compute capability {major}.{minor}, {gib:.1} GiB)");
        println!("multiprocessors: {}", info.parallelism);
    } else {
        println!("CPU threads: {}", info.parallelism);
    }
    #[cfg(feature = "cuda")]
    {
        println!("PTX arch:    {} ({} bytes, built at cargo build)", crate::ptx::ARCH, crate::ptx::PTX.len());
        if let Some((arch, ptx)) = crate::ptx::NEWER {
            println!("PTX newer:   {arch} ({} bytes: loaded on GPUs that run it, dependent launch)", ptx.len());
        }
        println!("cubin:       {}", cubins());
        println!("kernels:     {}", crate::ptx::ENTRIES.join(", "));
        if let Some(target) = &info.ptx_target {
            let dependent = if info.dependent_launch { "on" } else { "off" };
            println!("PTX in use:  {target} (programmatic dependent launch {dependent})");
        }
        if let Some(load) = &info.module_load {
            println!("module:      {load}");
        }
        if let Some(path) = std::env::var_os("TRADESIM_DEV_PTX") {
            println!("PTX loaded:  {} (TRADESIM_DEV_PTX)", path.to_string_lossy());
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        println!("PTX arch:    none (built with --no-default-features: CPU path only)");
        println!("kernels:     {} (CPU)", gpu_kernels::registry::ALL.join(", "));
    }
    Ok(())
}

/// The cubins the build embedded, or why there are none.
#[cfg(feature = "cuda")]
fn cubins() -> String {
    let built: Vec<String> =
        crate::ptx::CUBINS.iter().map(|(arch, image)| format!("{arch}: {} bytes", image.len())).collect();
    if built.is_empty() {
        return "none (the build had no ptxas: the driver compiles the PTX at its first load; docs/BUILD.md)"
            .to_owned();
    }
    let unused =
        if std::env::var("TRADESIM_MODULE").is_ok_and(|v| v == "ptx") { "; not used: TRADESIM_MODULE=ptx" } else { "" };
    format!(
        "{} (ptxas {}, built at cargo build: loaded instead of the PTX on devices of that architecture{unused})",
        built.join(", "),
        crate::ptx::PTXAS.unwrap_or("unknown")
    )
}
