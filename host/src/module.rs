//! The kernels' modules the CUDA backend may load and which one a device gets: the cubin built for its
//! architecture at build time where there is one (machine code: the driver loads it without compiling), else
//! the newest PTX it runs (the driver JIT-compiles it at the first load and keeps the result in its own
//! cache). What was loaded, and how long it took, is a [`ModuleLoad`].

use std::fmt;

use gpu_kernels::registry::sm_number;

/// Machine code for one architecture, compiled by ptxas from the PTX module of the same target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cubin<'a> {
    /// The architecture (`sm_90`).
    pub arch: &'a str,
    /// The cubin (an ELF image).
    pub image: &'a [u8],
}

impl Cubin<'_> {
    /// Whether a device of compute capability `(major, minor)` runs it: the same major version and a minor
    /// version at least the cubin's (`sm_90a`: exactly 9.0).
    pub fn runs_on(&self, (major, minor): (i32, i32)) -> bool {
        let Some(sm) = sm_number(self.arch).and_then(|n| i32::try_from(n).ok()) else { return false };
        let specific = self.arch.ends_with(|c: char| c.is_ascii_alphabetic());
        major == sm / 10 && if specific { minor == sm % 10 } else { minor >= sm % 10 }
    }
}

/// The modules the CUDA backend may load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modules<'a> {
    /// PTX modules, newest target first.
    pub ptx: &'a [&'a str],
    /// Cubins built beside them (none where the build had no ptxas).
    pub cubins: &'a [Cubin<'a>],
}

/// What a device gets ([`Modules::choose`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice<'a> {
    /// The cubin to load first, if one runs on the device.
    pub cubin: Option<Cubin<'a>>,
    /// The PTX to load without a cubin or where the cubin fails to load: the first (newest) module whose
    /// target the device runs, else the last (its load error names its target).
    pub ptx: &'a str,
}

impl<'a> Modules<'a> {
    /// PTX modules alone, newest target first.
    pub fn ptx(ptx: &'a [&'a str]) -> Self {
        Self { ptx, cubins: &[] }
    }

    /// The cubin and the PTX for a device of compute capability `cc`; `None` without any PTX.
    pub fn choose(&self, cc: (i32, i32)) -> Option<Choice<'a>> {
        let device_sm = u32::try_from(cc.0 * 10 + cc.1).unwrap_or(0);
        let ptx = *self.ptx.iter().find(|p| ptx_sm(p).is_some_and(|sm| sm <= device_sm)).or(self.ptx.last())?;
        Some(Choice { cubin: self.cubins.iter().find(|c| c.runs_on(cc)).copied(), ptx })
    }

    /// Why a device of compute capability `cc` gets none of the cubins (none runs on it); `None` where there
    /// are none or one runs.
    pub fn no_cubin_reason(&self, (major, minor): (i32, i32)) -> Option<String> {
        if self.cubins.is_empty() || self.cubins.iter().any(|c| c.runs_on((major, minor))) {
            return None;
        }
        let built: Vec<&str> = self.cubins.iter().map(|c| c.arch).collect();
        Some(format!("no cubin for compute capability {major}.{minor}: built for {}", built.join(", ")))
    }
}

/// The number of a PTX module's `sm_NN` target (80 for `sm_80`, 90 for `sm_90a`).
fn ptx_sm(ptx: &str) -> Option<u32> {
    ptx_target(ptx).and_then(sm_number)
}

/// The `.target` line of a PTX module (e.g. `sm_80`).
pub(crate) fn ptx_target(ptx: &str) -> Option<&str> {
    ptx.lines().find_map(|l| l.trim().strip_prefix(".target ")).map(str::trim)
}

/// How the module in use was obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// The cubin built for `arch` at build time: no compilation at load.
    Cubin {
        /// Its architecture (`sm_90`).
        arch: String,
    },
    /// The PTX for `target`, compiled by the driver at load (or taken from the driver's own cache of an
    /// earlier compilation).
    Ptx {
        /// Its `.target` (`sm_90`).
        target: String,
    },
}

impl ModuleSource {
    /// The cubin's architecture or the PTX's target: the PTX module the kernels were compiled from.
    pub fn arch(&self) -> &str {
        match self {
            Self::Cubin { arch } => arch,
            Self::Ptx { target } => target,
        }
    }
}

/// The module a runtime loaded: how it was obtained, how long loading it and resolving its kernels took, and
/// why the PTX was used where there were cubins.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleLoad {
    /// Cubin or PTX.
    pub source: ModuleSource,
    /// Wall seconds of the load and of resolving every kernel (the driver's compilation included).
    pub seconds: f64,
    /// Why no cubin was loaded where the build made some: none for the device, or the driver refused it.
    pub no_cubin: Option<String>,
}

impl fmt::Display for ModuleLoad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            ModuleSource::Cubin { arch } => write!(f, "cubin for {arch}, built at build time")?,
            ModuleSource::Ptx { target } => {
                write!(f, "PTX for {target}, JIT-compiled by the driver (or taken from its cache)")?;
            }
        }
        write!(f, "; loaded in {:.3} s", self.seconds)?;
        if let Some(reason) = &self.no_cubin {
            write!(f, " ({reason})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX_90: &str = ".version 7.8\n.target sm_90\n.address_size 64\n";
    const PTX_80: &str = ".version 7.0\n.target sm_80\n.address_size 64\n";
    const IMAGE: &[u8] = b"\x7fELF";

    fn cubin(arch: &str) -> Cubin<'_> {
        Cubin { arch, image: IMAGE }
    }

    #[test]
    fn a_modules_target_number_is_read_from_its_target_line() {
        assert_eq!(ptx_sm(PTX_90), Some(90));
        assert_eq!(ptx_sm(".target sm_80\n"), Some(80));
        assert_eq!(ptx_sm(".target sm_90a\n"), Some(90));
        assert_eq!(ptx_sm(".target compute_90\n"), None);
        assert_eq!(ptx_sm("no target"), None);
    }

    #[test]
    fn an_sm_90_cubin_runs_on_compute_capability_9_0_alone() {
        let sm90 = cubin("sm_90");
        assert!(sm90.runs_on((9, 0)));
        // Other majors (an A100, a B200) and a lower minor never run it.
        assert!(!sm90.runs_on((8, 0)) && !sm90.runs_on((8, 9)) && !sm90.runs_on((10, 0)));
        // sm_80 code runs on 8.6 and 8.9 (the same major, a higher minor), not on 9.0.
        assert!(cubin("sm_80").runs_on((8, 6)) && cubin("sm_80").runs_on((8, 9)));
        assert!(!cubin("sm_86").runs_on((8, 0)) && !cubin("sm_80").runs_on((9, 0)));
        // Architecture-specific code: that exact device only.
        assert!(cubin("sm_90a").runs_on((9, 0)) && !cubin("sm_100a").runs_on((10, 3)));
        assert!(!cubin("compute_90").runs_on((9, 0)));
    }

    #[test]
    fn a_device_gets_its_cubin_and_the_newest_ptx_it_runs() {
        let ptx = [PTX_90, PTX_80];
        let cubins = [cubin("sm_90")];
        let built = Modules { ptx: &ptx, cubins: &cubins };
        // H100 / H200: the cubin, with the sm_90 PTX behind it.
        assert_eq!(built.choose((9, 0)), Some(Choice { cubin: Some(cubins[0]), ptx: PTX_90 }));
        // A100: no cubin, the sm_80 PTX.
        assert_eq!(built.choose((8, 0)), Some(Choice { cubin: None, ptx: PTX_80 }));
        // A newer card: no cubin, the newest PTX (the driver compiles sm_90 PTX for it).
        assert_eq!(built.choose((10, 0)), Some(Choice { cubin: None, ptx: PTX_90 }));
        // An older card runs neither PTX: the last, whose load error names its target.
        assert_eq!(built.choose((7, 5)), Some(Choice { cubin: None, ptx: PTX_80 }));
        // Without cubins (no ptxas at build, or TRADESIM_MODULE=ptx): the PTX as before.
        assert_eq!(Modules::ptx(&ptx).choose((9, 0)), Some(Choice { cubin: None, ptx: PTX_90 }));
        assert_eq!(Modules::default().choose((9, 0)), None);
    }

    #[test]
    fn the_load_says_how_the_module_was_obtained_and_how_long_it_took() {
        let loaded =
            ModuleLoad { source: ModuleSource::Cubin { arch: "sm_90".into() }, seconds: 0.0412, no_cubin: None };
        assert_eq!(loaded.to_string(), "cubin for sm_90, built at build time; loaded in 0.041 s");
        let refused = ModuleLoad {
            source: ModuleSource::Ptx { target: "sm_90".into() },
            seconds: 6.2,
            no_cubin: Some("the sm_90 cubin did not load: bad image".into()),
        };
        assert_eq!(
            refused.to_string(),
            "PTX for sm_90, JIT-compiled by the driver (or taken from its cache); loaded in 6.200 s \
             (the sm_90 cubin did not load: bad image)"
        );
        let cubins = [cubin("sm_90")];
        let built = Modules { ptx: &[PTX_90], cubins: &cubins };
        assert_eq!(
            built.no_cubin_reason((10, 0)).as_deref(),
            Some("no cubin for compute capability 10.0: built for sm_90")
        );
        assert_eq!(built.no_cubin_reason((9, 0)), None);
        assert_eq!(Modules::ptx(&[PTX_90]).no_cubin_reason((10, 0)), None);
    }
}
