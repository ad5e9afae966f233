//! The PPO networks and rollout buffers on the device: acting and the minibatch updates are the stages of
//! [`gpu_kernels::net::plan`] (`gemm_tiles`) with the selection, gather, loss and Adam kernels between them.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use gpu_kernels::net::{ActWork, MAX_GRAD_CHUNK, NetArgs, NetTrial, Work, buffers};
use gpu_kernels::ppo::{PpoArgs, PpoParams};

use super::buffers::{Dev, PolicyView, PpoBuffers};
use super::env::CudaEnv;
use super::launch;
use super::runtime::CudaRuntime;
use super::tables::ProductTables;
use crate::HostError;
use crate::types::NetState;

#[derive(Debug)]
pub(crate) struct CudaPpo {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    b: PpoBuffers,
    trials: Vec<NetTrial>,
    /// Per-trial sizes on the device (the greedy walk reads them).
    dev_trials: CudaSlice<Dev<NetTrial>>,
    tables: ProductTables,
    /// The stream of the last weight update (a walk's weight copy waits for the work queued on it; no event
    /// is recorded per update, which would stand between two kernels of the stream and keep the next one
    /// from launching before the update ends: [`CudaRuntime::dependent_launch`]).
    trained_on: Option<Arc<CudaStream>>,
    /// The last walk's weight copy, which the next update waits for.
    walk_copy: launch::net::WalkCopy,
    /// The stream of the last acting or training launches.
    last: launch::net::LastStream,
}

/// As for [`super::dqn::CudaDqn`]: the device finishes the envs' stream's uses of the buffers before they are
/// freed.
impl Drop for CudaPpo {
    fn drop(&mut self) {
        let _ = self.rt.synchronize();
    }
}

impl CudaPpo {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        state: &NetState,
        params: &[PpoParams],
        args: &PpoArgs,
    ) -> Result<Self, HostError> {
        let l = args.layout();
        let net = args.net();
        let trials: Vec<NetTrial> = params.iter().map(PpoParams::net).collect();
        let k = args.n_trials as usize;
        let n_envs = k * args.envs_per_trial as usize;
        let rollout = n_envs * args.steps as usize;
        let samples = k * args.batch as usize;
        let floats = 3 * k * l.params()
            + ActWork::of(&net).len()
            + 4 * rollout
            + n_envs
            + samples * (l.input + 1)
            + k * Work::of(&net).per_trial()
            + net.partial_len()
            + k * (l.params() + gpu_kernels::ppo::NORM_LANES);
        rt.ensure_fits(&format!("the PPO networks, rollout and step buffers of {k} trials"), 4 * floats)?;
        let stream = rt.new_stream()?;
        let zeros = |n: usize| stream.alloc_zeros::<f32>(n.max(1)).map_err(HostError::driver("allocating PPO buffers"));
        let host_params: Vec<_> = params.iter().copied().map(Dev).collect();
        let b = PpoBuffers {
            params: stream.clone_htod(&host_params).map_err(HostError::driver("uploading PPO parameters"))?,
            weights: stream.clone_htod(&state.online).map_err(HostError::driver("uploading weights"))?,
            m: stream.clone_htod(&state.m).map_err(HostError::driver("uploading Adam state"))?,
            v: stream.clone_htod(&state.v).map_err(HostError::driver("uploading Adam state"))?,
            act: zeros(ActWork::of(&net).len())?,
            logps: zeros(rollout)?,
            values: zeros(rollout)?,
            bootstrap: zeros(n_envs)?,
            advantages: zeros(rollout)?,
            returns: zeros(rollout)?,
            obs: zeros(samples * l.input)?,
            work: zeros(k * Work::of(&net).per_trial())?,
            partial: zeros(net.partial_len())?,
            grads: zeros(k * l.params())?,
            norm_lanes: zeros(k * gpu_kernels::ppo::NORM_LANES)?,
            ones: stream.clone_htod(&[1.0f32; MAX_GRAD_CHUNK]).map_err(HostError::driver("uploading PPO buffers"))?,
            losses: zeros(samples)?,
        };
        let dev_trials: Vec<_> = trials.iter().copied().map(Dev).collect();
        let dev_trials = stream.clone_htod(&dev_trials).map_err(HostError::driver("uploading PPO parameters"))?;
        let tables = ProductTables::new(rt, &stream)?;
        let mut ppo = Self {
            rt: rt.clone(),
            stream,
            b,
            trials,
            dev_trials,
            tables,
            trained_on: None,
            walk_copy: Default::default(),
            last: Default::default(),
        };
        ppo.point()?;
        ppo.stream.synchronize().map_err(HostError::driver("uploading PPO state"))?;
        Ok(ppo)
    }

    /// Points the buffer table at this agent's buffers.
    fn point(&mut self) -> Result<(), HostError> {
        let b = &self.b;
        self.tables.point(&[
            (buffers::ONLINE, &b.weights),
            (buffers::OBS, &b.obs),
            (buffers::WORK, &b.work),
            (buffers::PARTIAL, &b.partial),
            (buffers::ACT, &b.act),
            (buffers::ONES, &b.ones),
        ])
    }

    /// Every env's action at rollout step `slot`; with `step`, where the fused acting kernel runs, also every
    /// env's step on it. Whether the envs were stepped (else the caller steps them).
    pub(crate) fn act(
        &mut self,
        view: &mut PolicyView<'_>,
        args: &PpoArgs,
        env_args: &gpu_kernels::batch::BatchArgs,
        slot: u32,
        step: bool,
    ) -> Result<bool, HostError> {
        let net = args.net();
        self.last.switch_to(view.stream)?;
        let n_envs = net.n_trials as usize * net.envs_per_trial as usize;
        let aw = ActWork::of(&net);
        if self.b.act.len() < aw.len() || self.b.bootstrap.len() < n_envs {
            self.b.act = self.stream.alloc_zeros(aw.len()).map_err(HostError::driver("allocating PPO buffers"))?;
            self.b.bootstrap = self.stream.alloc_zeros(n_envs).map_err(HostError::driver("allocating PPO buffers"))?;
            self.stream.synchronize().map_err(HostError::driver("allocating PPO buffers"))?;
            self.point()?;
        }
        if let Some((chains, pointers)) = self.tables.act_chains(&net, &self.trials)? {
            launch::ppo::ppo_act(&self.rt, view, chains, pointers, &net, env_args, &mut self.b, args, slot, step)?;
            return Ok(step);
        }
        let stream = view.stream.clone();
        launch::net::observe_view(&self.rt, view, &mut self.b.act, env_args)?;
        self.tables.launch_all(&stream, &net, &self.trials, &gpu_kernels::net::ACTING)?;
        launch::ppo::ppo_select(&self.rt, &stream, &mut self.b, view.actions, args, slot)?;
        Ok(false)
    }

    pub(crate) fn gae(&mut self, env: &CudaEnv, args: &PpoArgs) -> Result<(), HostError> {
        let (stream, ring, _) = env.rollout_view()?;
        self.last.switch_to(stream)?;
        launch::ppo::ppo_gae(&self.rt, stream, ring, &mut self.b, args)
    }

    /// One minibatch update: gather, forward, loss, backward, gradients, Adam.
    pub(crate) fn update(&mut self, env: &CudaEnv, args: &PpoArgs) -> Result<(), HostError> {
        let (stream, ring, features) = env.rollout_view()?;
        self.last.switch_to(stream)?;
        self.walk_copy.order(stream)?;
        let net = args.net();
        let plan = self.tables.backward_plan(&net, &self.trials)?;
        launch::ppo::ppo_gather(&self.rt, stream, ring, features, &mut self.b, args)?;
        self.tables.launch_layers(stream, &net, &self.trials)?;
        launch::ppo::ppo_loss(&self.rt, stream, ring, &mut self.b, args, plan.loss_stores_hidden())?;
        self.tables.launch_backward(stream, &net, &self.trials, &self.dev_trials, plan)?;
        launch::ppo::ppo_adam(&self.rt, stream, &mut self.b, args)?;
        self.trained_on = Some(stream.clone());
        Ok(())
    }

    /// Launches the greedy walk of each trial's single env over `steps` bars on the env's stream; `None` when
    /// the walk does not fit in a block's shared memory. The walk reads a copy of the weights taken after the
    /// last update, so training may go on (on its own stream) while the walk runs.
    pub(crate) fn greedy_walk(
        &mut self,
        view: &PolicyView<'_>,
        net: &NetArgs,
        steps: usize,
    ) -> Result<Option<launch::net::DeviceWalk>, HostError> {
        let (weights, copy) =
            launch::net::walk_weights(&self.stream, self.trained_on.as_deref(), &self.b.weights, view.stream)?;
        self.walk_copy = copy;
        launch::net::greedy_walk(&self.rt, view, &self.dev_trials, weights, net, steps)
    }

    /// Downloads `buf` after all device work (kernels also reach the buffers through the address table).
    fn download(&self, buf: &CudaSlice<f32>, context: &'static str) -> Result<Vec<f32>, HostError> {
        self.rt.synchronize()?;
        self.stream.clone_dtoh(buf).map_err(HostError::driver(context))
    }

    /// Slot `k` takes a new trial: its parameters and sizes, `weights` as its network, zero Adam moments
    /// (after all queued work; the device is synchronized).
    pub(crate) fn restart_trial(&mut self, k: usize, p: &PpoParams, weights: &[f32]) -> Result<(), HostError> {
        self.rt.synchronize()?;
        let s = &self.stream;
        let n = weights.len();
        let b = &mut self.b;
        const WHAT: &str = "restarting a trial's networks";
        let fail = || HostError::driver(WHAT);
        s.memcpy_htod(&[Dev(*p)], &mut b.params.slice_mut(k..k + 1)).map_err(fail())?;
        s.memcpy_htod(weights, &mut b.weights.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memset_zeros(&mut b.m.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memset_zeros(&mut b.v.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        self.trials[k] = p.net();
        s.memcpy_htod(&[Dev(p.net())], &mut self.dev_trials.slice_mut(k..k + 1)).map_err(fail())?;
        self.tables.forget();
        s.synchronize().map_err(fail())
    }

    pub(crate) fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.download(&self.b.losses, "downloading losses")
    }

    pub(crate) fn state(&self) -> Result<NetState, HostError> {
        Ok(NetState {
            online: self.download(&self.b.weights, "downloading PPO state")?,
            target: Vec::new(),
            m: self.download(&self.b.m, "downloading PPO state")?,
            v: self.download(&self.b.v, "downloading PPO state")?,
        })
    }
}
