//! The PPO networks and rollout buffers on the device: acting and the minibatch updates are the stages of
//! [`gpu_kernels::net::plan`] (`gemm_tiles`) with the selection, gather, loss and Adam kernels between them.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use gpu_kernels::net::{ActWork, MAX_GRAD_CHUNK, NetArgs, Work, buffers};
use gpu_kernels::ppo::{PpoArgs, PpoParams};

use super::buffers::{Dev, PolicyView, PpoBuffers};
use super::env::CudaEnv;
use super::launch;
use super::learner::{CudaLearner, WalkSnapshot};
use super::runtime::CudaRuntime;
use crate::HostError;
use crate::types::NetState;

#[derive(Debug)]
pub(crate) struct CudaPpo {
    /// Declared first: it drops first, waiting for the device before the buffers below are freed.
    core: CudaLearner,
    b: PpoBuffers,
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
        let k = args.n_trials as usize;
        let n_envs = k * args.envs_per_trial as usize;
        let rollout = n_envs * args.steps as usize;
        let samples = k * args.batch as usize;
        let floats = 3 * k * l.params()
            + ActWork::of(&net).len()
            + 4 * rollout
            + n_envs
            + samples * (l.input + 2)
            + k * Work::of(&net).per_trial()
            + net.partial_len()
            + k * (l.params() + gpu_kernels::ppo::NORM_LANES);
        rt.ensure_fits(&format!("the PPO networks, rollout and step buffers of {k} trials"), 4 * floats)?;
        let core = CudaLearner::new(rt, params.iter().map(PpoParams::net).collect(), "uploading PPO parameters")?;
        let stream = &core.stream;
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
            gathered_advantages: zeros(samples)?,
            adv_moments: zeros(2 * k)?,
            ones: stream.clone_htod(&[1.0f32; MAX_GRAD_CHUNK]).map_err(HostError::driver("uploading PPO buffers"))?,
            losses: zeros(samples)?,
        };
        let mut ppo = Self { core, b };
        ppo.point()?;
        ppo.core.stream.synchronize().map_err(HostError::driver("uploading PPO state"))?;
        Ok(ppo)
    }

    /// Points the buffer addresses at this agent's buffers.
    fn point(&mut self) -> Result<(), HostError> {
        let b = &self.b;
        self.core.plans.point(&[
            (buffers::ONLINE, &b.weights),
            (buffers::OBS, &b.obs),
            (buffers::WORK, &b.work),
            (buffers::PARTIAL, &b.partial),
            (buffers::ACT, &b.act),
            (buffers::ONES, &b.ones),
        ])
    }

    /// Every env's action at rollout step `rollout_step`; with `step`, where the fused acting kernel runs, also every
    /// env's step on it. Whether the envs were stepped (else the caller steps them).
    pub(crate) fn act(
        &mut self,
        view: &mut PolicyView<'_>,
        args: &PpoArgs,
        env_args: &gpu_kernels::batch::BatchArgs,
        rollout_step: u32,
        step: bool,
    ) -> Result<bool, HostError> {
        let net = args.net();
        self.core.last.switch_to(view.stream)?;
        let n_envs = net.n_trials as usize * net.envs_per_trial as usize;
        let aw = ActWork::of(&net);
        if self.b.act.len() < aw.len() || self.b.bootstrap.len() < n_envs {
            // Launches still queued on the envs' stream read the old buffer: they finish before it is freed.
            self.core.rt.synchronize()?;
            self.b.act = self.core.stream.alloc_zeros(aw.len()).map_err(HostError::driver("allocating PPO buffers"))?;
            self.b.bootstrap =
                self.core.stream.alloc_zeros(n_envs).map_err(HostError::driver("allocating PPO buffers"))?;
            self.core.stream.synchronize().map_err(HostError::driver("allocating PPO buffers"))?;
            self.point()?;
        }
        if let Some((chains, pointers)) = self.core.plans.act_chains(&net, &self.core.trials)? {
            launch::ppo::ppo_act(
                &self.core.rt,
                view,
                chains,
                pointers,
                &net,
                env_args,
                &mut self.b,
                args,
                rollout_step,
                step,
            )?;
            return Ok(step);
        }
        let stream = view.stream.clone();
        launch::net::observe_view(&self.core.rt, view, &mut self.b.act, env_args)?;
        self.core.plans.launch_all(&stream, &net, &self.core.trials, &gpu_kernels::net::ACTING)?;
        launch::ppo::ppo_select(&self.core.rt, &stream, &mut self.b, view.actions, args, rollout_step)?;
        Ok(false)
    }

    /// The actions of the rows whose observations are `obs` (`args`' envs are the rows) at rollout step
    /// `rollout_step`: the observations uploaded into the acting buffer, the acting layers and `ppo_select`
    /// on the learner's stream.
    pub(crate) fn act_rows(&mut self, args: &PpoArgs, obs: &[f32], rollout_step: u32) -> Result<Vec<u8>, HostError> {
        let net = args.net();
        let stream = self.core.stream.clone();
        self.core.last.switch_to(&stream)?;
        let aw = ActWork::of(&net);
        if self.b.act.len() < aw.len() || self.b.bootstrap.len() < aw.envs {
            self.core.rt.synchronize()?;
            self.b.act = stream.alloc_zeros(aw.len()).map_err(HostError::driver("allocating PPO buffers"))?;
            self.b.bootstrap = stream.alloc_zeros(aw.envs).map_err(HostError::driver("allocating PPO buffers"))?;
            stream.synchronize().map_err(HostError::driver("allocating PPO buffers"))?;
            self.point()?;
        }
        let fail = HostError::driver("acting on rows");
        stream.memcpy_htod(obs, &mut self.b.act.slice_mut(0..aw.h1())).map_err(fail)?;
        self.core.plans.launch_all(&stream, &net, &self.core.trials, &gpu_kernels::net::ACTING)?;
        let mut actions = stream.alloc_zeros::<u8>(aw.envs).map_err(HostError::driver("acting on rows"))?;
        launch::ppo::ppo_select(&self.core.rt, &stream, &mut self.b, &mut actions, args, rollout_step)?;
        stream.clone_dtoh(&actions).map_err(HostError::driver("acting on rows"))
    }

    /// The actions of the rows into `actions` at rollout step `rollout_step` with no transfer, on `stream`
    /// (the rows' stream): `observe` writes the rows' observations into the acting buffer there, then the
    /// acting layers and `ppo_select`.
    pub(crate) fn act_rows_device(
        &mut self,
        args: &PpoArgs,
        stream: &Arc<CudaStream>,
        observe: &mut dyn FnMut(&mut CudaSlice<f32>) -> Result<(), HostError>,
        actions: &mut CudaSlice<u8>,
        rollout_step: u32,
    ) -> Result<(), HostError> {
        let net = args.net();
        self.core.last.switch_to(stream)?;
        let aw = ActWork::of(&net);
        if self.b.act.len() < aw.len() || self.b.bootstrap.len() < aw.envs {
            // Launches still queued on the rows' stream read the old buffers: they finish before they are freed.
            self.core.rt.synchronize()?;
            let core = &self.core.stream;
            self.b.act = core.alloc_zeros(aw.len()).map_err(HostError::driver("allocating PPO buffers"))?;
            self.b.bootstrap = core.alloc_zeros(aw.envs).map_err(HostError::driver("allocating PPO buffers"))?;
            core.synchronize().map_err(HostError::driver("allocating PPO buffers"))?;
            self.point()?;
        }
        observe(&mut self.b.act)?;
        self.core.plans.launch_all(stream, &net, &self.core.trials, &gpu_kernels::net::ACTING)?;
        launch::ppo::ppo_select(&self.core.rt, stream, &mut self.b, actions, args, rollout_step)
    }

    pub(crate) fn gae(&mut self, env: &CudaEnv, args: &PpoArgs) -> Result<(), HostError> {
        let (stream, ring, _) = env.rollout_view()?;
        self.core.last.switch_to(stream)?;
        launch::ppo::ppo_gae(&self.core.rt, stream, ring, &mut self.b, args)
    }

    /// One minibatch update: gather (observations and advantages), the advantage moments from the gathered
    /// advantages (`normalizes`: a trial normalizes its advantages), forward, loss, backward, gradients, Adam.
    pub(crate) fn update(&mut self, env: &CudaEnv, args: &PpoArgs, normalizes: bool) -> Result<(), HostError> {
        let (stream, ring, features) = env.rollout_view()?;
        self.core.last.switch_to(stream)?;
        self.core.walk_copy.order(stream)?;
        let net = args.net();
        let kernels = self.core.plans.backward_kernels(&net, &self.core.trials)?;
        launch::ppo::ppo_gather(&self.core.rt, stream, ring, features, &mut self.b, args)?;
        if normalizes {
            launch::ppo::ppo_adv(&self.core.rt, stream, &mut self.b, args)?;
        }
        self.core.plans.launch_layers(stream, &net, &self.core.trials)?;
        launch::ppo::ppo_loss(&self.core.rt, stream, ring, &mut self.b, args, kernels.loss_stores_hidden())?;
        self.core.plans.launch_backward(stream, &net, &self.core.trials, &self.core.dev_trials, kernels)?;
        launch::ppo::ppo_adam(&self.core.rt, stream, &mut self.b, args)?;
        self.core.trained_on = Some(stream.clone());
        Ok(())
    }

    /// [`CudaLearner::snapshot_walk`] of the online network.
    pub(crate) fn snapshot_walk(&mut self, net: &NetArgs, steps: usize) -> Result<Option<WalkSnapshot>, HostError> {
        self.core.snapshot_walk(&self.b.weights, net, steps)
    }

    /// Slot `k` takes a new trial: its parameters and sizes, `weights` as its network, zero Adam moments
    /// (after all queued work; the device is synchronized).
    pub(crate) fn restart_trial(&mut self, k: usize, p: &PpoParams, weights: &[f32]) -> Result<(), HostError> {
        self.core.rt.synchronize()?;
        let s = &self.core.stream;
        let n = weights.len();
        let b = &mut self.b;
        const WHAT: &str = "restarting a trial's networks";
        let fail = || HostError::driver(WHAT);
        s.memcpy_htod(&[Dev(*p)], &mut b.params.slice_mut(k..k + 1)).map_err(fail())?;
        s.memcpy_htod(weights, &mut b.weights.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memset_zeros(&mut b.m.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memset_zeros(&mut b.v.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        self.core.set_trial(k, p.net(), WHAT)?;
        self.core.stream.synchronize().map_err(fail())
    }

    pub(crate) fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.core.download(&self.b.losses, "downloading losses")
    }

    pub(crate) fn state(&self) -> Result<NetState, HostError> {
        Ok(NetState {
            online: self.core.download(&self.b.weights, "downloading PPO state")?,
            target: Vec::new(),
            m: self.core.download(&self.b.m, "downloading PPO state")?,
            v: self.core.download(&self.b.v, "downloading PPO state")?,
        })
    }
}
