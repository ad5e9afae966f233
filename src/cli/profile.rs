//! `tradesim hyperopt --profile-kernels`: every launch between CUDA events, and at the end the device's kernel
//! time over the wall time and the kernels that took longest.

use crate::{Backend, Error};

/// Kernels listed at the end, longest first.
#[cfg(feature = "cuda")]
const SHOWN: usize = 12;

/// Starts profiling each of `backends` (the CUDA ones of the search).
pub fn start(backends: &[Backend]) -> Result<(), Error> {
    #[cfg(feature = "cuda")]
    for b in backends {
        if let Backend::Cuda(rt) = b {
            rt.start_profile()?;
        }
    }
    #[cfg(not(feature = "cuda"))]
    let _ = backends;
    Ok(())
}

/// Stops profiling `backends` and prints, per device, the time it ran any kernel over `wall` seconds and the
/// longest kernels.
pub fn stop(backends: &[Backend], wall: f64) -> Result<(), Error> {
    #[cfg(feature = "cuda")]
    for (d, b) in backends.iter().enumerate() {
        if let Backend::Cuda(rt) = b {
            let p = rt.stop_profile()?;
            println!(
                "kernels (device {d}): busy {:.3} s of {wall:.3} s wall ({:.0}%), {} launches; {}",
                p.busy_ms / 1e3,
                p.busy_ms / (10.0 * wall),
                p.launches(),
                tradesim_host::KernelProfile::BUSY_BOUND
            );
            let mut kernels = p.kernels;
            kernels.sort_by(|a, b| b.2.total_cmp(&a.2));
            println!("{:>10} {:>9} {:>9}  kernel", "ms", "launches", "us each");
            for (name, n, ms) in kernels.iter().take(SHOWN) {
                println!("{ms:>10.1} {n:>9} {:>9.1}  {name}", 1e3 * ms / *n as f64);
            }
        }
    }
    #[cfg(not(feature = "cuda"))]
    let _ = (backends, wall);
    Ok(())
}
