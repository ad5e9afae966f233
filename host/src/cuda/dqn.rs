//! The DQN networks on the device.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use gpu_kernels::dqn::{DqnArgs, DqnParams};

use super::env::PolicyView;
use super::launch::{self, Dev, DqnBuffers, SampleBuffers};
use crate::{CudaRuntime, HostError, NetState};

fn driver(context: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> HostError {
    HostError::driver(context)
}

#[derive(Debug)]
pub(crate) struct CudaDqn {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    nets: DqnBuffers,
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
        let n_samples = args.n_trials as usize * args.batch as usize;
        let zeros = |n: usize| stream.alloc_zeros::<f32>(n.max(1)).map_err(driver("allocating DQN buffers"));
        let nets = DqnBuffers {
            params: stream.clone_htod(&host_params).map_err(driver("uploading DQN parameters"))?,
            online: stream.clone_htod(&state.online).map_err(driver("uploading weights"))?,
            target: stream.clone_htod(&state.target).map_err(driver("uploading weights"))?,
            m: stream.clone_htod(&state.m).map_err(driver("uploading Adam state"))?,
            v: stream.clone_htod(&state.v).map_err(driver("uploading Adam state"))?,
            act_scratch: zeros(n_envs * args.act_scratch())?,
            train_scratch: zeros(n_samples * args.train_scratch())?,
            losses: zeros(n_samples)?,
        };
        Ok(Self { rt: rt.clone(), stream, nets })
    }

    pub(crate) fn act(&mut self, view: &mut PolicyView<'_>, args: &DqnArgs) -> Result<(), HostError> {
        let needed = args.n_trials as usize * args.envs_per_trial as usize * args.act_scratch();
        if self.nets.act_scratch.len() < needed {
            self.nets.act_scratch = self.stream.alloc_zeros(needed).map_err(driver("allocating DQN buffers"))?;
        }
        launch::dqn_act(&self.rt, view, &mut self.nets, args)
    }

    pub(crate) fn train(
        &mut self,
        stream: &CudaStream,
        samples: &SampleBuffers,
        args: &DqnArgs,
    ) -> Result<(), HostError> {
        launch::dqn_train(&self.rt, stream, samples, &mut self.nets, args)
    }

    pub(crate) fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.download(&self.nets.losses, "downloading losses")
    }

    fn download(&self, buf: &CudaSlice<f32>, context: &'static str) -> Result<Vec<f32>, HostError> {
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
        let s = &self.stream;
        s.memcpy_htod(&state.online, &mut self.nets.online).map_err(driver("uploading weights"))?;
        s.memcpy_htod(&state.target, &mut self.nets.target).map_err(driver("uploading weights"))?;
        s.memcpy_htod(&state.m, &mut self.nets.m).map_err(driver("uploading Adam state"))?;
        s.memcpy_htod(&state.v, &mut self.nets.v).map_err(driver("uploading Adam state"))?;
        Ok(())
    }
}
