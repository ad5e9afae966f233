//! The PPO networks and rollout buffers on the device.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use gpu_kernels::ppo::{PpoArgs, PpoParams};

use super::env::{CudaEnv, PolicyView};
use super::launch::{self, Dev, PpoBuffers};
use crate::{CudaRuntime, HostError, NetState};

fn driver(context: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> HostError {
    HostError::driver(context)
}

#[derive(Debug)]
pub(crate) struct CudaPpo {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    b: PpoBuffers,
}

impl CudaPpo {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        state: &NetState,
        params: &[PpoParams],
        args: &PpoArgs,
    ) -> Result<Self, HostError> {
        let stream = rt.new_stream()?;
        let l = args.layout();
        let trials = args.n_trials as usize;
        let n_envs = trials * args.envs_per_trial as usize;
        let rollout = n_envs * args.steps as usize;
        let samples = trials * args.batch as usize;
        let zeros = |n: usize| stream.alloc_zeros::<f32>(n.max(1)).map_err(driver("allocating PPO buffers"));
        let host_params: Vec<_> = params.iter().copied().map(Dev).collect();
        let b = PpoBuffers {
            params: stream.clone_htod(&host_params).map_err(driver("uploading PPO parameters"))?,
            weights: stream.clone_htod(&state.online).map_err(driver("uploading weights"))?,
            m: stream.clone_htod(&state.m).map_err(driver("uploading Adam state"))?,
            v: stream.clone_htod(&state.v).map_err(driver("uploading Adam state"))?,
            act_scratch: zeros(n_envs * args.act_scratch())?,
            logps: zeros(rollout)?,
            values: zeros(rollout)?,
            bootstrap: zeros(n_envs)?,
            advantages: zeros(rollout)?,
            returns: zeros(rollout)?,
            obs: zeros(samples * l.input)?,
            train_scratch: zeros(samples * l.train_scratch())?,
            losses: zeros(samples)?,
        };
        stream.synchronize().map_err(driver("uploading PPO state"))?;
        Ok(Self { rt: rt.clone(), stream, b })
    }

    pub(crate) fn act(&mut self, view: &mut PolicyView<'_>, args: &PpoArgs, slot: u32) -> Result<(), HostError> {
        let needed = args.n_trials as usize * args.envs_per_trial as usize;
        if self.b.act_scratch.len() < needed * args.act_scratch() || self.b.bootstrap.len() < needed {
            self.b.act_scratch =
                self.stream.alloc_zeros(needed * args.act_scratch()).map_err(driver("allocating PPO buffers"))?;
            self.b.bootstrap = self.stream.alloc_zeros(needed).map_err(driver("allocating PPO buffers"))?;
        }
        launch::ppo_act(&self.rt, view, &mut self.b, args, slot, slot >= args.steps)
    }

    pub(crate) fn gae(&mut self, env: &CudaEnv, args: &PpoArgs) -> Result<(), HostError> {
        let (stream, ring, _) = env.rollout_view()?;
        launch::ppo_gae(&self.rt, stream, ring, &mut self.b, args)
    }

    pub(crate) fn update(&mut self, env: &CudaEnv, args: &PpoArgs) -> Result<(), HostError> {
        let (stream, ring, features) = env.rollout_view()?;
        launch::ppo_update(&self.rt, stream, ring, features, &mut self.b, args)
    }

    pub(crate) fn losses(&self) -> Result<Vec<f32>, HostError> {
        self.stream.clone_dtoh(&self.b.losses).map_err(driver("downloading losses"))
    }

    pub(crate) fn state(&self) -> Result<NetState, HostError> {
        let down = |buf| self.stream.clone_dtoh(buf).map_err(driver("downloading PPO state"));
        Ok(NetState { online: down(&self.b.weights)?, target: Vec::new(), m: down(&self.b.m)?, v: down(&self.b.v)? })
    }
}
