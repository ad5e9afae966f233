//! What both learners keep on the device beside their own buffers: the runtime and the learner's stream,
//! each trial's sizes (on the host and on the device), the stages' plans ([`DevicePlans`]), and the ordering
//! of the greedy walks' weight copies against the updates. `CudaDqn` and `CudaPpo` embed one.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use gpu_kernels::net::{NetArgs, NetTrial};

use super::buffers::{Dev, PolicyView};
use super::launch;
use super::plans::DevicePlans;
use super::runtime::CudaRuntime;
use crate::HostError;

#[derive(Debug)]
pub(crate) struct CudaLearner {
    pub(crate) rt: Arc<CudaRuntime>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) trials: Vec<NetTrial>,
    /// Per-trial sizes on the device (the greedy walk reads them).
    pub(crate) dev_trials: CudaSlice<Dev<NetTrial>>,
    pub(crate) plans: DevicePlans,
    /// The stream of the last weight update (a walk's weight copy waits for the work queued on it; no event
    /// is recorded per update, which would stand between two kernels of the stream and keep the next one
    /// from launching before the update ends: [`CudaRuntime::dependent_launch`]).
    pub(crate) trained_on: Option<Arc<CudaStream>>,
    /// The last walk's weight copy, which the next update waits for.
    pub(crate) walk_copy: launch::net::WalkCopy,
    /// The stream of the last acting or training launches.
    pub(crate) last: launch::net::LastStream,
}

/// A learner's buffers are freed on its stream, but the envs' stream uses them: wait for the device first
/// (cudarc's per-buffer events, which would order the frees, are off: [`CudaRuntime::new`]). The learners
/// declare this field first, so it drops (and waits) before their buffers.
impl Drop for CudaLearner {
    fn drop(&mut self) {
        let _ = self.rt.synchronize();
    }
}

impl CudaLearner {
    /// The shared state of a learner of `trials` on a new stream of `rt`; `what` names the learner in errors.
    pub(crate) fn new(rt: &Arc<CudaRuntime>, trials: Vec<NetTrial>, what: &'static str) -> Result<Self, HostError> {
        let stream = rt.new_stream()?;
        let dev: Vec<_> = trials.iter().copied().map(Dev).collect();
        let dev_trials = stream.clone_htod(&dev).map_err(HostError::driver(what))?;
        let plans = DevicePlans::new(rt, &stream)?;
        Ok(Self {
            rt: rt.clone(),
            stream,
            trials,
            dev_trials,
            plans,
            trained_on: None,
            walk_copy: Default::default(),
            last: Default::default(),
        })
    }

    /// Downloads `buf` after all device work (kernels also reach the buffers through the buffer addresses,
    /// which the driver's per-buffer tracking does not see).
    pub(crate) fn download(&self, buf: &CudaSlice<f32>, context: &'static str) -> Result<Vec<f32>, HostError> {
        self.rt.synchronize()?;
        self.stream.clone_dtoh(buf).map_err(HostError::driver(context))
    }

    /// A copy of the network `weights` and the trial sizes as they are after the last update, for a greedy
    /// walk of `net` over `steps` bars launched now or later ([`WalkSnapshot::launch`]): training may go on
    /// (on its own stream) meanwhile. `None` when the walk does not fit in a block's shared memory.
    pub(crate) fn snapshot_walk(
        &mut self,
        weights: &CudaSlice<f32>,
        net: &NetArgs,
        steps: usize,
    ) -> Result<Option<WalkSnapshot>, HostError> {
        let Some(plan) = launch::net::walk_plan(&self.rt, net) else { return Ok(None) };
        let (weights, trials) =
            launch::net::walk_weights(&self.stream, self.trained_on.as_deref(), weights, &self.dev_trials)?;
        // Two events of the same point: the walk's stream waits for one, the next update for the other.
        let copied = launch::net::copied(&self.stream)?;
        self.walk_copy = launch::net::WalkCopy::new(launch::net::copied(&self.stream)?);
        Ok(Some(WalkSnapshot { rt: self.rt.clone(), weights, trials, copied, net: *net, plan, steps }))
    }

    /// Slot `k`'s new sizes, on the host and on the device (the plans are rebuilt on next use). The caller
    /// has synchronized the device.
    pub(crate) fn set_trial(&mut self, k: usize, net: NetTrial, what: &'static str) -> Result<(), HostError> {
        self.trials[k] = net;
        self.stream
            .memcpy_htod(&[Dev(net)], &mut self.dev_trials.slice_mut(k..k + 1))
            .map_err(HostError::driver(what))?;
        self.plans.forget();
        Ok(())
    }
}

/// A learner's network as it was at [`CudaLearner::snapshot_walk`], for a greedy walk not yet launched.
pub(crate) struct WalkSnapshot {
    rt: Arc<CudaRuntime>,
    weights: CudaSlice<f32>,
    trials: CudaSlice<Dev<NetTrial>>,
    /// Recorded on the learner's stream after the copies.
    copied: CudaEvent,
    net: NetArgs,
    plan: launch::net::WalkPlan,
    steps: usize,
}

impl std::fmt::Debug for WalkSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WalkSnapshot({} trials, {} steps)", self.net.n_trials, self.steps)
    }
}

impl WalkSnapshot {
    /// Launches the walk on the envs of `view` (one per trial, at the bar the walk starts from) on their
    /// stream, once the copies are done.
    pub(crate) fn launch(self, view: &PolicyView<'_>) -> Result<launch::net::DeviceWalk, HostError> {
        view.stream.wait(&self.copied).map_err(HostError::driver("ordering a walk after its weights"))?;
        launch::net::greedy_walk(&self.rt, view, self.trials, self.weights, &self.net, self.plan, self.steps)
    }
}
