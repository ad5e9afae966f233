//! The DQN networks on the device: the products of each stage's plan ([`gpu_kernels::net::plan`],
//! `gemm_tiles`), with the TD, selection and Adam kernels between them, all on the envs' stream.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use gpu_kernels::dqn::{DqnArgs, DqnParams};
use gpu_kernels::net::{ActWork, MAX_GRAD_CHUNK, NetArgs, Work, buffers};

use super::buffers::{Dev, DqnBuffers, PolicyView, SampleBuffers};
use super::launch;
use super::learner::{CudaLearner, WalkSnapshot};
use super::runtime::CudaRuntime;
use crate::HostError;
use crate::types::NetState;

#[derive(Debug)]
pub(crate) struct CudaDqn {
    /// Declared first: it drops first, waiting for the device before the buffers below are freed.
    core: CudaLearner,
    nets: DqnBuffers,
    net: NetArgs,
}

impl CudaDqn {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        state: &NetState,
        params: &[DqnParams],
        args: &DqnArgs,
    ) -> Result<Self, HostError> {
        let net = args.net();
        let k = args.n_trials as usize;
        let floats = 4 * k * args.layout().params()
            + k * Work::of(&net).per_trial()
            + net.partial_len()
            + ActWork::of(&net).len()
            + k * args.batch as usize;
        rt.ensure_fits(&format!("the DQN networks and step buffers of {k} trials"), 4 * floats)?;
        let host_params: Vec<_> = params.iter().copied().map(Dev).collect();
        let core = CudaLearner::new(rt, params.iter().map(DqnParams::net).collect(), "uploading DQN parameters")?;
        let stream = &core.stream;
        let zeros = |n: usize| stream.alloc_zeros::<f32>(n.max(1)).map_err(HostError::driver("allocating DQN buffers"));
        let nets = DqnBuffers {
            params: stream.clone_htod(&host_params).map_err(HostError::driver("uploading DQN parameters"))?,
            online: stream.clone_htod(&state.online).map_err(HostError::driver("uploading weights"))?,
            target: stream.clone_htod(&state.target).map_err(HostError::driver("uploading weights"))?,
            m: stream.clone_htod(&state.m).map_err(HostError::driver("uploading Adam state"))?,
            v: stream.clone_htod(&state.v).map_err(HostError::driver("uploading Adam state"))?,
            work: zeros(k * Work::of(&net).per_trial())?,
            partial: zeros(net.partial_len())?,
            act: zeros(ActWork::of(&net).len())?,
            ones: stream.clone_htod(&[1.0f32; MAX_GRAD_CHUNK]).map_err(HostError::driver("uploading DQN buffers"))?,
            losses: zeros(k * args.batch as usize)?,
        };
        let mut dqn = Self { core, nets, net };
        dqn.point(None)?;
        dqn.core.stream.synchronize().map_err(HostError::driver("uploading DQN state"))?;
        Ok(dqn)
    }

    /// Points the buffer addresses at this agent's buffers and `samples` (when given).
    fn point(&mut self, samples: Option<&SampleBuffers>) -> Result<(), HostError> {
        let n = &self.nets;
        let mut bufs = vec![
            (buffers::ONLINE, &n.online),
            (buffers::TARGET, &n.target),
            (buffers::WORK, &n.work),
            (buffers::PARTIAL, &n.partial),
            (buffers::ACT, &n.act),
            (buffers::ONES, &n.ones),
        ];
        if let Some(s) = samples {
            bufs.extend([(buffers::OBS, &s.obs), (buffers::NEXT_OBS, &s.next_obs)]);
        }
        self.core.plans.point(&bufs)
    }

    /// Every env's action; with `step`, where the fused acting kernel runs, also every env's step on it.
    /// Whether the envs were stepped (else the caller steps them).
    pub(crate) fn act(
        &mut self,
        view: &mut PolicyView<'_>,
        args: &DqnArgs,
        env_args: &gpu_kernels::batch::BatchArgs,
        step: bool,
    ) -> Result<bool, HostError> {
        let net = args.net();
        self.core.last.switch_to(view.stream)?;
        let aw = ActWork::of(&net);
        if self.nets.act.len() < aw.len() {
            // Launches still queued on the envs' stream read the old buffer: they finish before it is freed.
            self.core.rt.synchronize()?;
            self.nets.act =
                self.core.stream.alloc_zeros(aw.len()).map_err(HostError::driver("allocating DQN buffers"))?;
            self.core.stream.synchronize().map_err(HostError::driver("allocating DQN buffers"))?;
            self.point(None)?;
        }
        if let Some((chains, pointers)) = self.core.plans.act_chains(&net, &self.core.trials)? {
            launch::dqn::dqn_act(&self.core.rt, view, chains, pointers, &net, env_args, &self.nets, args, step)?;
            return Ok(step);
        }
        let stream = view.stream.clone();
        launch::net::observe_view(&self.core.rt, view, &mut self.nets.act, env_args)?;
        self.core.plans.launch_all(&stream, &net, &self.core.trials, &gpu_kernels::net::ACTING)?;
        launch::dqn::dqn_select(&self.core.rt, &stream, &self.nets, view.actions, args)?;
        Ok(false)
    }

    /// The actions of the rows whose observations are `obs` (`args`' envs are the rows): the observations
    /// uploaded into the acting buffer, the acting layers and `dqn_select` on the learner's stream.
    pub(crate) fn act_rows(&mut self, args: &DqnArgs, obs: &[f32]) -> Result<Vec<u8>, HostError> {
        let net = args.net();
        let stream = self.core.stream.clone();
        self.core.last.switch_to(&stream)?;
        let aw = ActWork::of(&net);
        if self.nets.act.len() < aw.len() {
            self.core.rt.synchronize()?;
            self.nets.act = stream.alloc_zeros(aw.len()).map_err(HostError::driver("allocating DQN buffers"))?;
            stream.synchronize().map_err(HostError::driver("allocating DQN buffers"))?;
            self.point(None)?;
        }
        let fail = HostError::driver("acting on rows");
        stream.memcpy_htod(obs, &mut self.nets.act.slice_mut(0..aw.h1())).map_err(fail)?;
        self.core.plans.launch_all(&stream, &net, &self.core.trials, &gpu_kernels::net::ACTING)?;
        let mut actions = stream.alloc_zeros::<u8>(aw.envs).map_err(HostError::driver("acting on rows"))?;
        launch::dqn::dqn_select(&self.core.rt, &stream, &self.nets, &mut actions, args)?;
        stream.clone_dtoh(&actions).map_err(HostError::driver("acting on rows"))
    }

    /// The actions of the rows into `actions` with no transfer, on `stream` (the rows' stream): `observe`
    /// writes the rows' observations into the acting buffer there, then the acting layers and `dqn_select`.
    pub(crate) fn act_rows_device(
        &mut self,
        args: &DqnArgs,
        stream: &Arc<CudaStream>,
        observe: &mut dyn FnMut(&mut CudaSlice<f32>) -> Result<(), HostError>,
        actions: &mut CudaSlice<u8>,
    ) -> Result<(), HostError> {
        let net = args.net();
        self.core.last.switch_to(stream)?;
        let aw = ActWork::of(&net);
        if self.nets.act.len() < aw.len() {
            // Launches still queued on the rows' stream read the old buffer: they finish before it is freed.
            self.core.rt.synchronize()?;
            self.nets.act =
                self.core.stream.alloc_zeros(aw.len()).map_err(HostError::driver("allocating DQN buffers"))?;
            self.core.stream.synchronize().map_err(HostError::driver("allocating DQN buffers"))?;
            self.point(None)?;
        }
        observe(&mut self.nets.act)?;
        self.core.plans.launch_all(stream, &net, &self.core.trials, &gpu_kernels::net::ACTING)?;
        launch::dqn::dqn_select(&self.core.rt, stream, &self.nets, actions, args)
    }

    pub(crate) fn train(
        &mut self,
        stream: &Arc<CudaStream>,
        samples: &SampleBuffers,
        args: &DqnArgs,
    ) -> Result<(), HostError> {
        self.core.last.switch_to(stream)?;
        self.point(Some(samples))?;
        self.core.walk_copy.order(stream)?;
        let net = self.net;
        let kernels = self.core.plans.backward_kernels(&net, &self.core.trials)?;
        self.core.plans.launch_layers(stream, &net, &self.core.trials)?;
        launch::dqn::dqn_td(&self.core.rt, stream, samples, &mut self.nets, args, kernels.loss_stores_hidden())?;
        self.core.plans.launch_backward(stream, &net, &self.core.trials, &self.core.dev_trials, kernels)?;
        launch::dqn::dqn_adam(&self.core.rt, stream, &mut self.nets, args)?;
        self.core.trained_on = Some(stream.clone());
        Ok(())
    }

    /// [`CudaLearner::snapshot_walk`] of the online network.
    pub(crate) fn snapshot_walk(&mut self, net: &NetArgs, steps: usize) -> Result<Option<WalkSnapshot>, HostError> {
        self.core.snapshot_walk(&self.nets.online, net, steps)
    }

    pub(crate) fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.core.download(&self.nets.losses, "downloading losses")
    }

    pub(crate) fn state(&self) -> Result<NetState, HostError> {
        Ok(NetState {
            online: self.core.download(&self.nets.online, "downloading weights")?,
            target: self.core.download(&self.nets.target, "downloading weights")?,
            m: self.core.download(&self.nets.m, "downloading Adam state")?,
            v: self.core.download(&self.nets.v, "downloading Adam state")?,
        })
    }

    /// Slot `k` takes a new trial: its parameters and sizes, `weights` as its online and target networks,
    /// zero Adam moments (after all queued work; the device is synchronized).
    pub(crate) fn restart_trial(&mut self, k: usize, p: &DqnParams, weights: &[f32]) -> Result<(), HostError> {
        self.core.rt.synchronize()?;
        let s = &self.core.stream;
        let n = weights.len();
        let nets = &mut self.nets;
        const WHAT: &str = "restarting a trial's networks";
        let fail = || HostError::driver(WHAT);
        s.memcpy_htod(&[Dev(*p)], &mut nets.params.slice_mut(k..k + 1)).map_err(fail())?;
        s.memcpy_htod(weights, &mut nets.online.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memcpy_htod(weights, &mut nets.target.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memset_zeros(&mut nets.m.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        s.memset_zeros(&mut nets.v.slice_mut(k * n..(k + 1) * n)).map_err(fail())?;
        self.core.set_trial(k, p.net(), WHAT)?;
        self.core.stream.synchronize().map_err(fail())
    }

    pub(crate) fn set_state(&mut self, state: &NetState) -> Result<(), HostError> {
        self.core.rt.synchronize()?;
        let s = &self.core.stream;
        s.memcpy_htod(&state.online, &mut self.nets.online).map_err(HostError::driver("uploading weights"))?;
        s.memcpy_htod(&state.target, &mut self.nets.target).map_err(HostError::driver("uploading weights"))?;
        s.memcpy_htod(&state.m, &mut self.nets.m).map_err(HostError::driver("uploading Adam state"))?;
        s.memcpy_htod(&state.v, &mut self.nets.v).map_err(HostError::driver("uploading Adam state"))?;
        s.synchronize().map_err(HostError::driver("uploading weights"))
    }
}
