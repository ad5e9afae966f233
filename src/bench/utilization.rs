//! GPU utilization samples (NVML), taken beside a measured run.

/// GPU utilization samples (NVML).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Utilization {
    /// Number of samples.
    pub samples: usize,
    /// Sum of the GPU busy percentages.
    pub sum_gpu: f64,
    /// Largest busy percentage.
    pub max_gpu: f64,
    /// Largest device memory in use, bytes.
    pub max_used_memory: u64,
}

/// Runs `run`, sampling NVML by `sampler` every 2 ms from a thread of its own while it runs (when `on`):
/// its result and the samples (a sample costs host time that the measured code does not spend).
pub fn sampled<T>(
    on: bool,
    sampler: &mut (impl FnMut() -> Option<Utilization> + Send),
    run: impl FnOnce() -> T,
) -> (T, Utilization) {
    /// Stops the sampling thread when dropped: also when `run` panics (the scope would wait for it).
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let sampling = std::sync::atomic::AtomicBool::new(on);
    std::thread::scope(|scope| {
        let monitor = scope.spawn(|| {
            let mut utilization = Utilization::default();
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                if let Some(u) = sampler() {
                    utilization.add(&u);
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            utilization
        });
        let out = {
            let _stop = Stop(&sampling);
            run()
        };
        (out, monitor.join().unwrap_or_default())
    })
}

impl Utilization {
    /// Adds a sample.
    pub fn add(&mut self, u: &Self) {
        self.samples += u.samples;
        self.sum_gpu += u.sum_gpu;
        self.max_gpu = self.max_gpu.max(u.max_gpu);
        self.max_used_memory = self.max_used_memory.max(u.max_used_memory);
    }

    /// Mean busy percentage.
    pub fn mean_gpu(&self) -> f64 {
        if self.samples == 0 { f64::NAN } else { self.sum_gpu / self.samples as f64 }
    }
}
