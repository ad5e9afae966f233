//! Which of the kernels that give the same bits the CUDA backend runs, and how it launches them
//! ([`KernelOptions`]): read by the CUDA runtime, named by `tradesim bench --variant`. Outside the `cuda`
//! feature, so that a CPU-only build still reads and writes the variants' names.

#[cfg(doc)]
use gpu_kernels::registry::{
    DEPENDENT_LAUNCH_ARCH, GEMM_TILES, GREEDY_WALK, GREEDY_WALK_REGS, MLP_BACKWARD, MLP_CHAIN, MLP_CHAIN_WIDE,
    MLP_GRADIENTS, MLP_ROWS, MLP_ROWS_WIDE,
};

/// Which of the kernels that give the same bits the CUDA backend runs, and how it launches them: one value
/// given to the runtime when it starts (`tradesim bench --variant` names the alternatives to compare).
/// [`Default`] is the production choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelOptions {
    /// A network's layers fused ([`MLP_CHAIN`], the acting kernels, [`MLP_BACKWARD`], [`GREEDY_WALK_REGS`]);
    /// `false` (`unfused`): one [`GEMM_TILES`] launch per layer and the plain [`GREEDY_WALK`].
    pub fused: bool,
    /// Training chains and staged products in tiles of 32 rows ([`MLP_CHAIN`], [`MLP_ROWS`], `narrow-chains`)
    /// even where tiles of 128 ([`MLP_CHAIN_WIDE`], [`MLP_ROWS_WIDE`]) fit a block's shared memory.
    pub narrow_chains: bool,
    /// A backward pass whose fused blocks take more than one wave runs [`MLP_BACKWARD`] in as many waves
    /// (`multiwave-fused`), not [`MLP_ROWS`] then [`MLP_GRADIENTS`].
    pub multiwave_fused: bool,
    /// Programmatic dependent launch on modules built for [`DEPENDENT_LAUNCH_ARCH`] or later; `false`
    /// (`classic-launch`): every launch waits for the one before it to end.
    pub dependent_launch: bool,
    /// cudarc's per-buffer event tracking (`event-tracking`): an event recorded and waited on per buffer
    /// argument of every launch, which the backend's own stream ordering makes unnecessary.
    pub event_tracking: bool,
}

impl Default for KernelOptions {
    fn default() -> Self {
        Self {
            fused: true,
            narrow_chains: false,
            multiwave_fused: false,
            dependent_launch: true,
            event_tracking: false,
        }
    }
}

impl KernelOptions {
    /// The names of the variants, each a departure from [`Default`], in the order [`std::fmt::Display`]
    /// writes them.
    pub const VARIANTS: [&str; 5] = ["unfused", "narrow-chains", "multiwave-fused", "classic-launch", "event-tracking"];

    /// Whether variant `VARIANTS[i]` is chosen.
    fn has(&self, i: usize) -> bool {
        [!self.fused, self.narrow_chains, self.multiwave_fused, !self.dependent_launch, self.event_tracking][i]
    }
}

impl std::str::FromStr for KernelOptions {
    type Err = &'static str;

    /// `default`, or a comma-separated list of [`Self::VARIANTS`] (each at most once).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const EXPECTED: &str = "expected `default` or a comma-separated list of unfused, narrow-chains, \
                                multiwave-fused, classic-launch, event-tracking (each at most once)";
        let mut o = Self::default();
        if s == "default" {
            return Ok(o);
        }
        for word in s.split(',') {
            let i = Self::VARIANTS.iter().position(|v| *v == word).ok_or(EXPECTED)?;
            if o.has(i) {
                return Err(EXPECTED);
            }
            match i {
                0 => o.fused = false,
                1 => o.narrow_chains = true,
                2 => o.multiwave_fused = true,
                3 => o.dependent_launch = false,
                _ => o.event_tracking = true,
            }
        }
        Ok(o)
    }
}

impl std::fmt::Display for KernelOptions {
    /// The form [`std::str::FromStr`] reads: `default`, or the variants chosen joined by commas.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut any = false;
        for (i, name) in Self::VARIANTS.iter().enumerate() {
            if self.has(i) {
                if any {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                any = true;
            }
        }
        if !any {
            f.write_str("default")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::KernelOptions;

    #[test]
    fn kernel_options_read_what_they_write_and_refuse_the_rest() {
        let o: KernelOptions = "classic-launch,unfused".parse().unwrap();
        assert!(!o.fused && !o.dependent_launch && !o.narrow_chains && !o.multiwave_fused && !o.event_tracking);
        assert_eq!(o.to_string(), "unfused,classic-launch");
        assert_eq!(o.to_string().parse::<KernelOptions>(), Ok(o));
        assert_eq!("default".parse::<KernelOptions>(), Ok(KernelOptions::default()));
        assert_eq!(KernelOptions::default().to_string(), "default");
        let all: KernelOptions = KernelOptions::VARIANTS.join(",").parse().unwrap();
        assert!(!all.fused && all.narrow_chains && all.multiwave_fused && !all.dependent_launch && all.event_tracking);
        for bad in ["", "1", "unfused,", "Unfused", "unfused,unfused", "default,unfused", "split-stored", "products"] {
            assert!(bad.parse::<KernelOptions>().is_err(), "{bad:?} was accepted");
        }
    }
}
