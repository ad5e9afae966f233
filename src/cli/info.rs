//! `tradesim info`: backend, device, PTX target and kernels.

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
        println!("kernels:     {}", crate::ptx::ENTRIES.join(", "));
        if let Some(target) = &info.ptx_target {
            let dependent = if info.dependent_launch { "on" } else { "off" };
            println!("PTX in use:  {target} (programmatic dependent launch {dependent})");
        }
        if let Some(path) = std::env::var_os("TRADESIM_DEV_PTX") {
            println!("PTX loaded:  {} (TRADESIM_DEV_PTX)", path.to_string_lossy());
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        println!("PTX arch:    none (built with --no-default-features: CPU path only)");
        println!("kernels:     {} (CPU)", gpu_kernels::kernel_names::ALL.join(", "));
    }
    Ok(())
}
