//! The DQN networks on the device: the stages of [`gpu_kernels::dqn::plan`] as tables of products
//! (`gemm_tiles`), with the TD, selection and Adam kernels between them, all on the envs' stream.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use gpu_kernels::dqn::{ActWork, DqnArgs, DqnParams, GRAD_CHUNK, Stage, Work, buffers};

use super::env::PolicyView;
use super::launch::{self, Dev, DqnBuffers, GemmTable, SampleBuffers};
use crate::{CudaRuntime, HostError, NetState};

fn driver(context: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> HostError {
    HostError::driver(context)
}

#[derive(Debug)]
pub(crate) struct CudaDqn {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    nets: DqnBuffers,
    params: Vec<DqnParams>,
    /// Product tables by stage and envs per trial (acting) or 0 (training).
    tables: Vec<((Stage, u32), GemmTable)>,
    /// Device addresses of the buffers in [`buffers`] order, and their host copy.
    pointers: CudaSlice<u64>,
    host_pointers: [u64; buffers::COUNT],
    /// Lengths of the buffers the pointers name.
    lens: [usize; buffers::COUNT],
}

impl CudaDqn {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        state: &NetState,
        params: &[DqnParams],
        args: &DqnArgs,
        n_envs: usize,
    ) -> Result<Self, HostError> {
        let stream = rt.new_stream()?;
        let host_params: Vec<_> = params.iter().copied().map(Dev).collect();
        let trials = args.n_trials as usize;
        let n_samples = trials * args.batch as usize;
        let chunks = (args.batch as usize).div_ceil(GRAD_CHUNK);
        let aw = ActWork { envs: n_envs, input: args.input as usize, hidden: args.hidden as usize };
        let zeros = |n: usize| stream.alloc_zeros::<f32>(n.max(1)).map_err(driver("allocating DQN buffers"));
        let nets = DqnBuffers {
            params: stream.clone_htod(&host_params).map_err(driver("uploading DQN parameters"))?,
            online: stream.clone_htod(&state.online).map_err(driver("uploading weights"))?,
            target: stream.clone_htod(&state.target).map_err(driver("uploading weights"))?,
            m: stream.clone_htod(&state.m).map_err(driver("uploading Adam state"))?,
            v: stream.clone_htod(&state.v).map_err(driver("uploading Adam state"))?,
            work: zeros(trials * Work::of(args).per_trial())?,
            partial: zeros(chunks * trials * args.layout().params())?,
            act: zeros(aw.len())?,
            ones: stream.clone_htod(&[1.0f32; GRAD_CHUNK]).map_err(driver("uploading DQN buffers"))?,
            losses: zeros(n_samples)?,
        };
        let pointers = stream.alloc_zeros::<u64>(buffers::COUNT).map_err(driver("allocating DQN buffers"))?;
        let mut dqn = Self {
            rt: rt.clone(),
            stream,
            nets,
            params: params.to_vec(),
            tables: Vec::new(),
            pointers,
            host_pointers: [0; buffers::COUNT],
            lens: [0; buffers::COUNT],
        };
        dqn.set_pointers(None)?;
        Ok(dqn)
    }

    /// Points the buffer table at this agent's buffers and `samples` (when given); uploads it if it changed.
    fn set_pointers(&mut self, samples: Option<&SampleBuffers>) -> Result<(), HostError> {
        let s = &self.stream;
        let addr = |b: &CudaSlice<f32>| b.device_ptr(s).0;
        let n = &self.nets;
        let mut ptrs = self.host_pointers;
        let mut lens = self.lens;
        for (id, buf) in [
            (buffers::ONLINE, &n.online),
            (buffers::TARGET, &n.target),
            (buffers::WORK, &n.work),
            (buffers::PARTIAL, &n.partial),
            (buffers::ACT, &n.act),
            (buffers::ONES, &n.ones),
        ] {
            (ptrs[id as usize], lens[id as usize]) = (addr(buf), buf.len());
        }
        if let Some(samples) = samples {
            for (id, buf) in [(buffers::OBS, &samples.obs), (buffers::NEXT_OBS, &samples.next_obs)] {
                (ptrs[id as usize], lens[id as usize]) = (addr(buf), buf.len());
            }
        }
        if ptrs != self.host_pointers || lens != self.lens {
            s.memcpy_htod(&ptrs, &mut self.pointers).map_err(driver("uploading buffer addresses"))?;
            self.host_pointers = ptrs;
            self.lens = lens;
            self.tables.clear(); // checked against the old lengths
        }
        Ok(())
    }

    /// The table of `stage` (built, checked and uploaded on first use).
    fn launch_stage(&mut self, stream: &CudaStream, args: &DqnArgs, stage: Stage) -> Result<(), HostError> {
        let key = (stage, if matches!(stage, Stage::Act(_)) { args.envs_per_trial } else { 0 });
        let i = match self.tables.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let host = crate::dqn::stage_plan(args, &self.params, stage);
                crate::tile::check("gemm_tiles", &host, &self.lens)?;
                let dev_table: Vec<_> = host.iter().copied().map(Dev).collect();
                let dev = self.stream.clone_htod(&dev_table).map_err(driver("uploading product tables"))?;
                self.tables.push((key, GemmTable { host, dev }));
                self.tables.len() - 1
            }
        };
        launch::gemm(&self.rt, stream, &self.tables[i].1, &self.pointers)
    }

    pub(crate) fn act(
        &mut self,
        view: &mut PolicyView<'_>,
        args: &DqnArgs,
        env_args: &gpu_kernels::batch::BatchArgs,
    ) -> Result<(), HostError> {
        let n_envs = args.n_trials as usize * args.envs_per_trial as usize;
        let aw = ActWork { envs: n_envs, input: args.input as usize, hidden: args.hidden as usize };
        if self.nets.act.len() < aw.len() || self.lens[buffers::ACT as usize] != self.nets.act.len() {
            self.nets.act = self.stream.alloc_zeros(aw.len()).map_err(driver("allocating DQN buffers"))?;
            self.set_pointers(None)?;
        }
        let stream = view.stream.clone();
        launch::observe_view(&self.rt, view, &mut self.nets.act, env_args)?;
        for layer in 0..3 {
            self.launch_stage(&stream, args, Stage::Act(layer))?;
        }
        launch::dqn_select(&self.rt, &stream, &self.nets, view.actions, args)
    }

    pub(crate) fn train(
        &mut self,
        stream: &CudaStream,
        samples: &SampleBuffers,
        args: &DqnArgs,
    ) -> Result<(), HostError> {
        self.set_pointers(Some(samples))?;
        for layer in 0..3 {
            self.launch_stage(stream, args, Stage::Forward(layer))?;
        }
        launch::dqn_td(&self.rt, stream, samples, &mut self.nets, args)?;
        for stage in [Stage::Backward2, Stage::Backward1, Stage::Gradients] {
            self.launch_stage(stream, args, stage)?;
        }
        launch::dqn_adam(&self.rt, stream, &mut self.nets, args)
    }

    /// The greedy actions of each trial's single env over `steps` bars (`n_trials x steps`).
    pub(crate) fn greedy_walk(
        &mut self,
        view: &PolicyView<'_>,
        args: &DqnArgs,
        steps: usize,
    ) -> Result<Vec<u8>, HostError> {
        let n = args.n_trials as usize * steps;
        let mut actions = view.stream.alloc_zeros::<u8>(n.max(1)).map_err(driver("allocating walk actions"))?;
        launch::dqn_greedy_walk(&self.rt, view, &self.nets, &mut actions, args, steps)?;
        let mut out = view.stream.clone_dtoh(&actions).map_err(driver("downloading walk actions"))?;
        out.truncate(n);
        Ok(out)
    }

    pub(crate) fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.download(&self.nets.losses, "downloading losses")
    }

    /// Downloads `buf` after all device work (kernels also reach the buffers through the address table,
    /// which the driver's per-buffer tracking does not see).
    fn download(&self, buf: &CudaSlice<f32>, context: &'static str) -> Result<Vec<f32>, HostError> {
        self.rt.synchronize()?;
        self.stream.clone_dtoh(buf).map_err(driver(context))
    }

    pub(crate) fn state(&self) -> Result<NetState, HostError> {
        Ok(NetState {
            online: self.download(&self.nets.online, "downloading weights")?,
            target: self.download(&self.nets.target, "downloading weights")?,
            m: self.download(&self.nets.m, "downloading Adam state")?,
            v: self.download(&self.nets.v, "downloading Adam state")?,
        })
    }

    pub(crate) fn set_state(&mut self, state: &NetState) -> Result<(), HostError> {
        self.rt.synchronize()?;
        let s = &self.stream;
        s.memcpy_htod(&state.online, &mut self.nets.online).map_err(driver("uploading weights"))?;
        s.memcpy_htod(&state.target, &mut self.nets.target).map_err(driver("uploading weights"))?;
        s.memcpy_htod(&state.m, &mut self.nets.m).map_err(driver("uploading Adam state"))?;
        s.memcpy_htod(&state.v, &mut self.nets.v).map_err(driver("uploading Adam state"))?;
        s.synchronize().map_err(driver("uploading weights"))
    }
}
