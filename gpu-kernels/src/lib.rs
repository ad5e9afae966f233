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

pub mod account;
pub mod backtest;
pub mod backward;
pub mod barrier;
pub mod batch;
pub mod chain;
pub mod dqn;
pub mod env;
pub mod equity;
pub mod layout;
pub mod mlp;
pub mod net;
pub mod portfolio;
pub mod ppo;
pub mod registry;
pub mod reward;
pub mod rng;
pub mod tile;
pub mod types;
pub mod vector;

#[cfg(target_arch = "nvptx64")]
mod act;
#[cfg(target_arch = "nvptx64")]
pub mod entries;
#[cfg(target_arch = "nvptx64")]
pub mod walk;

/// LLVM intrinsics of the nvptx build.
#[cfg(target_arch = "nvptx64")]
pub(crate) mod nvptx_ops {
    unsafe extern "C" {
        #[link_name = "llvm.fma.f32"]
        fn llvm_fma_f32(a: f32, b: f32, c: f32) -> f32;
    }

    /// Programmatic dependent launch: the first statement of every kernel, or in the kernels of
    /// [`crate::registry::EARLY_READS`] the first after their early reads. In a module built for sm_90 or
    /// later (`griddepcontrol`), waits until the grid launched before this one on the stream has completed
    /// and its writes are visible, then lets the grid after this one be launched (its blocks wait here in
    /// turn). The host launches kernels with programmatic stream serialization on such a module, so a
    /// kernel's launch and block dispatch overlap its predecessor's last blocks instead of following its
    /// end. Every grid completes only after its own wait returned, so when a kernel's blocks start, every
    /// grid but the one just before it has completed (by induction): early reads may read what those wrote,
    /// nothing the one just before may write. Launched without the attribute, the wait returns at once.
    /// Modules for older GPUs: nothing.
    #[inline(always)]
    pub(crate) fn follow_previous() {
        #[cfg(target_feature = "sm_90")]
        // SAFETY: both instructions only order this grid against its neighbours on the stream; the asm block
        // keeps its default memory clobber, so no load is moved above the wait.
        unsafe {
            core::arch::asm!("griddepcontrol.wait;", "griddepcontrol.launch_dependents;")
        };
    }

    /// `fma.rn.f32`: `a * b + c` rounded once.
    #[inline]
    pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
        // SAFETY: a pure arithmetic intrinsic.
        unsafe { llvm_fma_f32(a, b, c) }
    }

    /// The shared-window address of `p`, a generic address inside this block's shared memory: a 32-bit
    /// `ld.shared` address ([`lds4`]), which needs no 64-bit address arithmetic and no generic-space test.
    #[inline(always)]
    #[allow(clippy::pointers_in_nomem_asm_block, reason = "the asm converts the address; it reads no memory")]
    pub(crate) fn shared_addr(p: *const f32) -> u32 {
        let a: u64;
        // SAFETY: an address conversion, no memory access.
        unsafe {
            core::arch::asm!("cvta.to.shared.u64 {a}, {p};", a = out(reg64) a, p = in(reg64) p,
                options(pure, nomem, nostack))
        };
        a as u32
    }

    /// `ld.shared.v4.f32` of the four floats at shared address `a`.
    ///
    /// # Safety
    /// `a` is a 16-byte aligned shared address of this block, with four floats written before (a barrier
    /// between other threads' writes and this read).
    #[inline(always)]
    pub(crate) unsafe fn lds4(a: u32) -> [f32; 4] {
        let (x, y, z, w): (f32, f32, f32, f32);
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ld.shared.v4.f32 {{{x}, {y}, {z}, {w}}}, [{a}];", x = out(reg32) x, y = out(reg32) y,
                z = out(reg32) z, w = out(reg32) w, a = in(reg32) a, options(pure, readonly, nostack))
        };
        [x, y, z, w]
    }

    /// `ld.shared.f32` of the float at shared address `a`.
    ///
    /// # Safety
    /// `a` is a 4-byte aligned shared address of this block, written before (a barrier between other
    /// threads' writes and this read).
    #[inline(always)]
    pub(crate) unsafe fn lds(a: u32) -> f32 {
        let x: f32;
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("ld.shared.f32 {x}, [{a}];", x = out(reg32) x, a = in(reg32) a,
                options(pure, readonly, nostack))
        };
        x
    }

    /// `cp.async.ca.shared.global` of the float at `src` to shared address `dst`: the copy goes from the
    /// memory system to shared memory without a register, and the thread goes on at once; it is complete
    /// for this thread after [`cp_async_wait_all`] (or a [`cp_async_commit`] and a [`cp_async_wait`] that
    /// covers its group), for the block after a barrier that follows that.
    ///
    /// # Safety
    /// `src` is a valid, 4-byte aligned global address that no thread writes during this kernel; `dst` a
    /// 4-byte aligned shared address of this block that no thread reads or writes before the copy is waited
    /// for and a barrier passed.
    #[inline(always)]
    pub(crate) unsafe fn cp_async4(dst: u32, src: *const f32) {
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {s}; cp.async.ca.shared.global [{d}], [g], 4; }}",
                d = in(reg32) dst, s = in(reg64) src, options(nostack))
        };
    }

    /// `cp.async.cg.shared.global` of the 16 bytes at `src` to shared address `dst` ([`cp_async4`]'s rules;
    /// the copy bypasses L1).
    ///
    /// # Safety
    /// As [`cp_async4`], with `src` and `dst` 16-byte aligned.
    #[inline(always)]
    pub(crate) unsafe fn cp_async16(dst: u32, src: *const f32) {
        // SAFETY: the caller's contract.
        unsafe {
            core::arch::asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {s}; cp.async.cg.shared.global [{d}], [g], 16; }}",
                d = in(reg32) dst, s = in(reg64) src, options(nostack))
        };
    }

    /// `cp.async.commit_group`: closes this thread's group of [`cp_async4`] copies issued since the last.
    #[inline(always)]
    pub(crate) fn cp_async_commit() {
        // SAFETY: no operands; it only marks the copies issued so far.
        unsafe { core::arch::asm!("cp.async.commit_group;", options(nostack)) };
    }

    /// `cp.async.wait_group N`: waits until at most `N` of this thread's committed groups are in flight
    /// (`N = 0`: all of its committed copies are complete). Copies issued after the last
    /// [`cp_async_commit`] belong to no group and are **not** waited for: [`cp_async_wait_all`] is the
    /// wait for everything.
    #[inline(always)]
    pub(crate) fn cp_async_wait<const N: u32>() {
        // SAFETY: no operands; it only waits for this thread's own copies.
        unsafe { core::arch::asm!("cp.async.wait_group {n};", n = const N, options(nostack)) };
    }

    /// `cp.async.wait_all`: commits this thread's copies issued since the last [`cp_async_commit`] and waits
    /// until all of its copies are complete. (`wait_group 0` without the commit left the last copies of
    /// `mlp_chain` unwaited: a race that `compute-sanitizer --tool racecheck` found on the H200.)
    #[inline(always)]
    pub(crate) fn cp_async_wait_all() {
        // SAFETY: no operands; it only commits and waits for this thread's own copies.
        unsafe { core::arch::asm!("cp.async.wait_all;", options(nostack)) };
    }

    /// `st.shared.f32` of `v` at shared address `a`.
    ///
    /// # Safety
    /// `a` is a 4-byte aligned shared address of this block that no other thread reads or writes before
    /// the next barrier.
    #[inline(always)]
    pub(crate) unsafe fn sts(a: u32, v: f32) {
        // SAFETY: the caller's contract.
        unsafe { core::arch::asm!("st.shared.f32 [{a}], {v};", a = in(reg32) a, v = in(reg32) v, options(nostack)) };
    }

    // The dynamic shared memory of the kernels launched with `shared_mem_bytes` (the greedy walk, the chains).
    core::arch::global_asm!(".extern .shared .align 16 .b8 dyn_smem[];");

    /// Generic address of this block's dynamic shared memory.
    #[inline(always)]
    pub(crate) fn dyn_smem() -> *mut f32 {
        let p: u64;
        // SAFETY: takes the generic address of the module's dynamic shared window (no memory access).
        unsafe { core::arch::asm!("cvta.shared.u64 {p}, dyn_smem;", p = out(reg64) p) };
        p as *mut f32
    }

    /// Asks the memory system to bring the line holding `p` into L1 (a hint: no fault, no effect on results).
    #[inline(always)]
    pub(crate) fn prefetch<T>(p: *const T) {
        // SAFETY: a prefetch never faults and writes nothing.
        unsafe { core::arch::asm!("prefetch.L1 [{p}];", p = in(reg64) p) };
    }

    unsafe extern "C" {
        /// `barrier.sync id, count` (the LLVM intrinsic is convergent: the optimizer never duplicates it into
        /// paths that threads of one warp could take apart, which an `asm!` barrier does not guarantee).
        #[link_name = "llvm.nvvm.barrier.cta.sync.count"]
        pub(crate) fn barrier_sync_count(id: u32, count: u32);
    }
}

/// The square root of an f32, correctly rounded on both backends: the PTX instruction `sqrt.rn.f32` on the
/// GPU (libm's software square root there reads constants from global memory and runs a chain of dependent
/// integer steps: it would sit on the critical path of every Adam update), libm's on the host. IEEE 754 rounds a
/// square root exactly, so both give the same bits (NaN payloads aside).
#[inline]
pub fn sqrtf(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a pure arithmetic instruction.
        unsafe {
            core::arch::asm!("sqrt.rn.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::sqrtf(x)
    }
}

/// [`sqrtf`] for f64 (`sqrt.rn.f64` on the GPU, libm's on the host; the same bits).
#[inline]
pub fn sqrt(x: f64) -> f64 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f64;
        // SAFETY: a pure arithmetic instruction.
        unsafe {
            core::arch::asm!("sqrt.rn.f64 {r}, {x};", r = out(reg64) r, x = in(reg64) x, options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::sqrt(x)
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
