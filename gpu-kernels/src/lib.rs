//! tradesim's kernel logic.
//!
//! Every rule of the trading environment is a plain `pub fn` here. The host links this crate as the CPU
//! backend; `build.rs` compiles the same source for `nvptx64-nvidia-cuda` into the PTX module, where the thin
//! `extern "ptx-kernel"` shims in `entries` (nvptx only) index threads and call these functions. One source, two
//! targets: results agree bit for bit because both sides run the same IEEE operations (no FMA
//! contraction; an FMA only where it is written explicitly, [`tile::fma`], which is correctly rounded on
//! both sides; math from `libm`).
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, link_llvm_intrinsics),
    allow(
        internal_features,
        reason = "llvm.fma.f32 through link_llvm_intrinsics (an explicit, correctly rounded FMA)"
    )
)]

pub mod backtest;
pub mod barrier;
pub mod batch;
pub mod chain;
pub mod dqn;
pub mod env;
pub mod kernel_names;
pub mod layout;
pub mod mlp;
pub mod net;
pub mod portfolio;
pub mod ppo;
pub mod reward;
pub mod rng;
pub mod tile;
pub mod types;
pub mod vector;

#[cfg(target_arch = "nvptx64")]
pub mod entries;

/// LLVM intrinsics of the nvptx build.
#[cfg(target_arch = "nvptx64")]
pub(crate) mod nvptx_ops {
    unsafe extern "C" {
        #[link_name = "llvm.fma.f32"]
        fn llvm_fma_f32(a: f32, b: f32, c: f32) -> f32;
    }

    /// `fma.rn.f32`: `a * b + c` rounded once.
    #[inline]
    pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
        // SAFETY: a pure arithmetic intrinsic.
        unsafe { llvm_fma_f32(a, b, c) }
    }
}

pub use types::{
    Action, Bar, BarrierLabel, EnvState, EnvStatus, Moments, TERMINATED, TRUNCATED, Transition, TrialParams,
};

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; there is nothing left to keep consistent.
    unsafe { core::arch::nvptx::trap() }
}
