//! Context, module and streams of one device.

use std::sync::Arc;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;
use gpu_kernels::registry;

use super::profile::{KernelProfile, Label, ProfileLog};
use crate::HostError;
use crate::module::{Choice, ModuleLoad, ModuleSource, Modules, ptx_target};
use crate::options::KernelOptions;

/// A kernel of the module: its function and its name (launch errors and profiles name it).
#[derive(Debug)]
pub(crate) struct Kernel {
    pub(crate) function: CudaFunction,
    pub(crate) name: &'static str,
}

impl Kernel {
    fn load(module: &Arc<CudaModule>, name: &'static str) -> Result<Self, HostError> {
        let function = module.load_function(name).map_err(|_| HostError::MissingKernel { name })?;
        Ok(Self { function, name })
    }

    /// The kernel's launch label: its name alone.
    pub(crate) fn label(&self) -> Label {
        Label { kernel: self.name, stage: None }
    }

    /// The kernel's launch label for `stage`, where one kernel runs several stages.
    pub(crate) fn at(&self, stage: &'static str) -> Label {
        Label { kernel: self.name, stage: Some(stage) }
    }
}

/// [`Kernels`] from the list of [`gpu_kernels::for_each_kernel`].
macro_rules! kernels_struct {
    ($($(#[$doc:meta])* $shim:ident $name:ident;)*) => {
        /// Every kernel of the module, resolved once when the runtime starts.
        #[derive(Debug)]
        pub(crate) struct Kernels {
            $(
                #[doc = concat!("`", stringify!($shim), "` (`gpu_kernels::registry::", stringify!($name), "`).")]
                pub(crate) $shim: Kernel,
            )*
        }

        impl Kernels {
            /// Resolves every kernel in `module`.
            fn load(module: &Arc<CudaModule>) -> Result<Self, HostError> {
                Ok(Self { $($shim: Kernel::load(module, registry::$name)?,)* })
            }
        }
    };
}
gpu_kernels::for_each_kernel!(kernels_struct);

/// A CUDA device with the PTX module loaded.
#[derive(Debug)]
pub struct CudaRuntime {
    ctx: Arc<CudaContext>,
    _module: Arc<CudaModule>,
    pub(crate) kernels: Kernels,
    name: String,
    /// Launches bracketed by timing events while profiling.
    profile: Mutex<Option<ProfileLog>>,
    /// The last kernel launched on each stream ([`Self::last_kernel`]).
    last_kernels: Mutex<Vec<(usize, &'static str)>>,
    pub(crate) multiprocessors: usize,
    /// Bytes of shared memory a block may use (the opt-in maximum, set on the kernels that size it at launch).
    shared_per_block: usize,
    compute_capability: (i32, i32),
    total_memory: usize,
    /// The kernels chosen where several give the same bits ([`Self::options`]).
    options: KernelOptions,
    /// [`Self::dependent_launch`].
    dependent_launch: bool,
    /// [`Self::ptx_target`].
    ptx_target: String,
    /// [`Self::module_load`].
    module_load: ModuleLoad,
    /// Per open mark ([`Self::mark_memory`]): its id and the lowest free device memory any
    /// [`Self::ensure_fits`] foresaw since it was made.
    marks: Mutex<Vec<(u64, usize)>>,
    /// The next mark's id.
    next_mark: AtomicU64,
}

impl CudaRuntime {
    /// [`Self::with_options`] with the default kernels ([`KernelOptions::default`]).
    pub fn new(ordinal: usize, modules: Modules<'_>) -> Result<Self, HostError> {
        Self::with_options(ordinal, modules, KernelOptions::default())
    }

    /// Opens device `ordinal`, loads the module [`Modules::choose`] picks for it (the cubin for its
    /// architecture where `modules` has one, else, or where the driver refuses the cubin, the first PTX
    /// whose target the device can run, or the last: its load error names the target) and resolves every
    /// kernel the host launches (build.rs has already checked that the PTX has an entry for each name in
    /// `registry::ALL`); `options` chooses among kernels that give the same bits and how they are
    /// launched. Kernels of a module built for sm_90 or later are launched with programmatic stream
    /// serialization unless `options` says otherwise ([`Self::dependent_launch`]).
    pub fn with_options(ordinal: usize, modules: Modules<'_>, options: KernelOptions) -> Result<Self, HostError> {
        let ctx = CudaContext::new(ordinal).map_err(HostError::driver(format!("opening device {ordinal}")))?;
        if !options.event_tracking {
            // SAFETY: every buffer is created before any use on another stream is queued (each upload or
            // allocation used elsewhere is followed by a synchronize: the learners' `new`, the plans,
            // the acting buffers, the envs' market data), its uses on other streams are ordered by explicit
            // events (a walk's weight copy, `walk_weights`) or by a synchronize, and no buffer is freed while
            // another stream may use it (the learners and walks synchronize when dropped). cudarc's tracking
            // would record and wait on an event per buffer argument of every launch.
            unsafe { ctx.disable_event_tracking() };
        }
        let name = ctx.name().map_err(HostError::driver("reading the device name"))?;
        let compute_capability =
            ctx.compute_capability().map_err(HostError::driver("reading the compute capability"))?;
        let total_memory = ctx.total_mem().map_err(HostError::driver("reading the device memory size"))?;
        let shared_per_block = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(HostError::driver("reading the shared memory per block"))?;
        let (module, kernels, module_load) = load_kernels(&ctx, modules, compute_capability, shared_per_block)?;
        // A cubin is compiled from the PTX module of its own target: the same kernels, the same launches.
        let dependent = registry::sm_number(registry::DEPENDENT_LAUNCH_ARCH);
        let dependent_launch = registry::sm_number(module_load.source.arch())
            .is_some_and(|sm| dependent.is_some_and(|d| sm >= d))
            && options.dependent_launch;
        let multiprocessors = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(HostError::driver("reading the multiprocessor count"))?;
        Ok(Self {
            ctx,
            _module: module,
            kernels,
            name,
            profile: Mutex::new(None),
            last_kernels: Mutex::new(Vec::new()),
            multiprocessors: usize::try_from(multiprocessors).unwrap_or(0),
            shared_per_block: usize::try_from(shared_per_block).unwrap_or(0),
            compute_capability,
            total_memory,
            options,
            dependent_launch,
            ptx_target: module_load.source.arch().to_owned(),
            module_load,
            marks: Mutex::new(Vec::new()),
            next_mark: AtomicU64::new(0),
        })
    }

    /// Device name as the driver reports it.
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// Compute capability (major, minor).
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// Device memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.total_memory
    }

    /// Streaming multiprocessors of the device.
    pub fn multiprocessors(&self) -> usize {
        self.multiprocessors
    }

    /// Bytes of shared memory one block may use (the opt-in maximum).
    pub fn shared_per_block(&self) -> usize {
        self.shared_per_block
    }

    /// The kernels chosen where several give the same bits, as given to [`Self::with_options`].
    pub fn options(&self) -> KernelOptions {
        self.options
    }

    /// Whether the learners run a network's layers fused ([`gpu_kernels::chain`], the default) or one launch
    /// per layer ([`KernelOptions::fused`]; the same bits).
    pub fn fused(&self) -> bool {
        self.options.fused
    }

    /// Whether the training forward passes and the staged products run in tiles of 32 rows (`mlp_chain`,
    /// `mlp_rows`) where tiles of 128 (`mlp_chain_wide`, `mlp_rows_wide`, the default) fit a block's shared
    /// memory ([`KernelOptions::narrow_chains`]). The same bits either way.
    pub fn narrow_chains(&self) -> bool {
        self.options.narrow_chains
    }

    /// How a backward pass whose fused blocks would take more than one wave runs ([`MultiwaveBackward`],
    /// [`KernelOptions::multiwave_fused`]). The same bits either way.
    pub(crate) fn multiwave_backward(&self) -> MultiwaveBackward {
        if self.options.multiwave_fused { MultiwaveBackward::Fused } else { MultiwaveBackward::Split }
    }

    /// The `.target` of the PTX module loaded, or of the PTX the loaded cubin was compiled from (e.g. `sm_90`).
    pub fn ptx_target(&self) -> &str {
        &self.ptx_target
    }

    /// How the module was obtained (a cubin built at build time, or PTX the driver compiled) and how long
    /// loading it took.
    pub fn module_load(&self) -> &ModuleLoad {
        &self.module_load
    }

    /// Whether kernels are launched with programmatic stream serialization (programmatic dependent launch):
    /// where the loaded module was built for sm_90 or later (on such GPUs, `build.rs` builds one beside the
    /// sm_80 module), unless the options turn it off ([`KernelOptions::dependent_launch`]).
    /// Every kernel waits for the kernel before it to complete before it reads anything that one may write
    /// (`gpu_kernels::registry::EARLY_READS`), so the bits are the same either way; what overlaps is a
    /// launch, its blocks' dispatch and their early reads with the end of the kernel before.
    pub fn dependent_launch(&self) -> bool {
        self.dependent_launch
    }

    /// A new stream (each trial group runs on its own).
    pub fn new_stream(&self) -> Result<Arc<CudaStream>, HostError> {
        self.ctx.new_stream().map_err(HostError::driver("creating a stream"))
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<(), HostError> {
        self.ctx.synchronize().map_err(HostError::driver("synchronizing the device"))
    }
}

/// The module [`Modules::choose`] picks for compute capability `cc` and its kernels, those that size their
/// shared memory at launch allowed `shared_per_block` bytes; with how the module was obtained and how long
/// loading it, resolving its kernels and setting their attributes took (the driver may defer work to the
/// first use of a kernel: the attributes are the first).
fn load_kernels(
    ctx: &Arc<CudaContext>,
    modules: Modules<'_>,
    cc: (i32, i32),
    shared_per_block: i32,
) -> Result<(Arc<CudaModule>, Kernels, ModuleLoad), HostError> {
    let choice = modules
        .choose(cc)
        .ok_or_else(|| HostError::Load { arch: "none".to_owned(), reason: "no PTX module was given".to_owned() })?;
    let started = Instant::now();
    let (module, source, refused) = load_module(ctx, choice)?;
    let kernels = Kernels::load(&module)?;
    for kernel in [
        &kernels.greedy_walk,
        &kernels.greedy_walk_regs,
        &kernels.mlp_chain,
        &kernels.mlp_chain_wide,
        &kernels.dqn_act,
        &kernels.ppo_act,
        &kernels.mlp_rows,
        &kernels.mlp_rows_wide,
        &kernels.mlp_backward,
        &kernels.mlp_gradients,
    ] {
        kernel
            .function
            .set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared_per_block,
            )
            .map_err(HostError::driver(format!("allowing {} its shared memory", kernel.name)))?;
    }
    let no_cubin = refused.or_else(|| modules.no_cubin_reason(cc));
    Ok((module, kernels, ModuleLoad { source, seconds: started.elapsed().as_secs_f64(), no_cubin }))
}

/// Loads `choice`'s cubin, or its PTX where it has none or the driver refuses the cubin: the module, how it
/// was obtained and why a cubin given was not used.
fn load_module(
    ctx: &Arc<CudaContext>,
    choice: Choice<'_>,
) -> Result<(Arc<CudaModule>, ModuleSource, Option<String>), HostError> {
    let mut refused = None;
    if let Some(cubin) = choice.cubin {
        match ctx.load_module(Ptx::from_binary(cubin.image.to_vec())) {
            Ok(module) => return Ok((module, ModuleSource::Cubin { arch: cubin.arch.to_owned() }, None)),
            Err(e) => refused = Some(format!("the {} cubin did not load: {e}", cubin.arch)),
        }
    }
    let target = ptx_target(choice.ptx).unwrap_or("unknown").to_owned();
    let module = ctx
        .load_module(Ptx::from_src(choice.ptx))
        .map_err(|e| HostError::Load { arch: target.clone(), reason: e.to_string() })?;
    Ok((module, ModuleSource::Ptx { target }, refused))
}

impl CudaRuntime {
    /// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written), timed with CUDA events over
    /// `reps` copies of a `bytes` buffer after one warm-up copy.
    pub fn copy_bandwidth(&self, bytes: usize, reps: usize) -> Result<f64, HostError> {
        let stream = self.new_stream()?;
        let n = bytes / 4;
        let src = stream.alloc_zeros::<f32>(n).map_err(HostError::driver("allocating the copy source"))?;
        let mut dst = stream.alloc_zeros::<f32>(n).map_err(HostError::driver("allocating the copy target"))?;
        stream.memcpy_dtod(&src, &mut dst).map_err(HostError::driver("copying"))?;
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = stream.record_event(timing).map_err(HostError::driver("recording an event"))?;
        for _ in 0..reps {
            stream.memcpy_dtod(&src, &mut dst).map_err(HostError::driver("copying"))?;
        }
        let end = stream.record_event(timing).map_err(HostError::driver("recording an event"))?;
        end.synchronize().map_err(HostError::driver("waiting for the copies"))?;
        let ms = start.elapsed_ms(&end).map_err(HostError::driver("reading event times"))?;
        Ok((2 * n * 4 * reps) as f64 / (f64::from(ms) * 1e-3) / 1e9)
    }

    /// Starts recording a timing-event pair around every launch (until [`Self::stop_profile`]), replacing a
    /// profile already running; fails only where the profile's reader thread cannot start.
    pub fn start_profile(&self) -> Result<(), HostError> {
        let log = ProfileLog::start(&self.ctx)?;
        *self.profile.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(log);
        Ok(())
    }

    /// Two timing events for a launch while profiling (from the profile's pool), `None` otherwise.
    pub(crate) fn profile_events(&self) -> Result<Option<(CudaEvent, CudaEvent)>, HostError> {
        match self.profile.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
            Some(log) => log.events(),
            None => Ok(None),
        }
    }

    /// Notes `kernel` as the last kernel launched on `stream`.
    pub(crate) fn launched(&self, stream: &CudaStream, kernel: &'static str) {
        let key = stream.cu_stream() as usize;
        let mut last = self.last_kernels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match last.iter_mut().find(|(s, _)| *s == key) {
            Some(entry) => entry.1 = kernel,
            None => last.push((key, kernel)),
        }
    }

    /// The name of the kernel launched last on `stream`, if any: what a kernel launched next may overlap
    /// under programmatic dependent launch (only a kernel just before it, never a copy).
    pub(crate) fn last_kernel(&self, stream: &CudaStream) -> Option<&'static str> {
        let key = stream.cu_stream() as usize;
        let last = self.last_kernels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        last.iter().find(|(s, _)| *s == key).map(|(_, k)| *k)
    }

    /// Adds a launch's timing events to the profile, if one runs (a read-back error surfaces at
    /// [`Self::stop_profile`], not at this launch).
    pub(crate) fn record_launch(&self, label: Label, start: CudaEvent, end: CudaEvent) {
        if let Some(p) = self.profile.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            p.push(label, start, end);
        }
    }

    /// Stops profiling; waits for the device and returns each launch label's launches and summed device
    /// milliseconds, and the time the device ran any profiled kernel ([`KernelProfile`]).
    pub fn stop_profile(&self) -> Result<KernelProfile, HostError> {
        let log = self.profile.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        self.synchronize()?;
        log.map_or_else(|| Ok(KernelProfile::default()), ProfileLog::finish)
    }

    /// Free and total device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), HostError> {
        self.ctx.mem_get_info().map_err(HostError::driver("reading device memory"))
    }

    /// Refuses `what` before it allocates when its `needed` bytes (plus a 5% margin for the driver and
    /// small buffers) exceed the free device memory.
    pub fn ensure_fits(&self, what: &str, needed: usize) -> Result<(), HostError> {
        let (free, _) = self.memory()?;
        if needed + needed / 20 > free {
            return Err(HostError::OutOfDeviceMemory { what: what.to_owned(), needed, free });
        }
        let left = free - needed;
        for mark in self.marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter_mut() {
            mark.1 = mark.1.min(left);
        }
        Ok(())
    }

    /// Opens a low-water mark of device memory: its id and the free bytes now, from which
    /// [`Self::close_mark`] measures what the work after it took at its largest. Marks of work on several
    /// threads are kept apart (each sees every allocation check while it is open, its own and others').
    pub fn mark_memory(&self) -> Result<(u64, usize), HostError> {
        let (free, _) = self.memory()?;
        let id = self.next_mark.fetch_add(1, Ordering::SeqCst);
        self.marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((id, free));
        Ok((id, free))
    }

    /// Closes mark `(id, marked)` ([`Self::mark_memory`]) and returns the most device memory held at once
    /// since it opened, as the [`Self::ensure_fits`] checks foresaw it: `marked` less the lowest free memory
    /// any of them left. Buffers allocated without that check (a walk's few kilobytes) are not counted.
    pub fn close_mark(&self, (id, marked): (u64, usize)) -> usize {
        let mut marks = self.marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let low = marks.iter().position(|m| m.0 == id).map_or(marked, |i| marks.swap_remove(i).1);
        marked.saturating_sub(low.min(marked))
    }
}

/// How the backward pass after the loss runs where `mlp_backward`'s blocks would take more than one wave
/// (PPO's quarter-rollout minibatches, batches of many trials). Each gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MultiwaveBackward {
    /// The default: `mlp_rows` stores the hidden gradient of layer 1, then `mlp_gradients` sums the weight
    /// and bias gradients (each block reads only its own columns); `mlp_rows` computes the hidden gradient
    /// of layer 2 from the output gradient (and stores it for `mlp_gradients`) where the products pair, so
    /// the loss kernel stores none.
    Split,
    /// `mlp_backward` in as many waves as it takes (every layer-1 block reads its chunk's `D2` rows).
    Fused,
}
