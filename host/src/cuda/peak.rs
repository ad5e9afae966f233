//! The FP32 FMA throughput of the device, the reference the benchmarks' utilization figures divide by.

use super::launch;
use super::runtime::CudaRuntime;
use crate::HostError;

impl CudaRuntime {
    /// The FP32 FMA throughput of this device in FLOP/s (2 per FMA), measured by `fma_peak`: 8 independent
    /// FMA chains per thread, enough blocks to fill every multiprocessor, timed with CUDA events.
    pub fn fma_peak(&self) -> Result<f64, HostError> {
        let stream = self.new_stream()?;
        let blocks = (self.multiprocessors.max(1) * 16) as u32;
        let threads = blocks as usize * 256;
        let iters: u32 = 1 << 14;
        let mut out = stream.alloc_zeros::<f32>(threads).map_err(HostError::driver("allocating the FMA output"))?;
        let cfg =
            cudarc::driver::LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let start = stream.record_event(timing).map_err(HostError::driver("recording an event"))?;
            launch::net::fma_peak(self, &stream, &mut out, iters, cfg)?;
            let end = stream.record_event(timing).map_err(HostError::driver("recording an event"))?;
            end.synchronize().map_err(HostError::driver("waiting for fma_peak"))?;
            best = best.min(f64::from(start.elapsed_ms(&end).map_err(HostError::driver("reading event times"))?));
        }
        Ok((threads as f64 * f64::from(iters) * 8.0 * 2.0) / (best * 1e-3))
    }
}
