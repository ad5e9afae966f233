//! Device-resident buffers of a [`crate::PortfolioSim`]: prices shared by all, and per trial group its
//! parameters, env states and actions on its own stream.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use gpu_kernels::{EnvState, TrialParams};

use super::launch::{self, Dev};
use crate::{CudaRuntime, HostError, PriceSeries, SimLayout};

#[derive(Debug)]
struct TrialGroup {
    stream: Arc<CudaStream>,
    envs: Range<usize>,
    params: CudaSlice<Dev<TrialParams>>,
    states: CudaSlice<Dev<EnvState>>,
    actions: Option<CudaSlice<u8>>,
}

#[derive(Debug)]
pub(crate) struct CudaSim {
    rt: Arc<CudaRuntime>,
    open: CudaSlice<f64>,
    close: CudaSlice<f64>,
    groups: Vec<TrialGroup>,
    envs_per_trial: usize,
}

impl CudaSim {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        prices: &PriceSeries,
        params: &[TrialParams],
        states: &[EnvState],
        layout: SimLayout,
    ) -> Result<Self, HostError> {
        let streams = rt.streams();
        let upload_stream = &streams[0];
        let open = upload_stream
            .clone_htod(prices.open())
            .map_err(HostError::driver("uploading opens"))?;
        let close = upload_stream
            .clone_htod(prices.close())
            .map_err(HostError::driver("uploading closes"))?;
        let n_groups = streams.len().min(layout.trials());
        let trials_per_group = layout.trials().div_ceil(n_groups);
        let ept = layout.envs_per_trial();
        let groups = params
            .chunks(trials_per_group)
            .enumerate()
            .map(|(g, group_params)| {
                let stream = streams[g % streams.len()].clone();
                let first = g * trials_per_group * ept;
                let envs = first..first + group_params.len() * ept;
                let params: Vec<_> = group_params.iter().copied().map(Dev).collect();
                let group_states: Vec<_> = states[envs.clone()].iter().copied().map(Dev).collect();
                Ok(TrialGroup {
                    params: stream
                        .clone_htod(&params)
                        .map_err(HostError::driver("uploading trial parameters"))?,
                    states: stream
                        .clone_htod(&group_states)
                        .map_err(HostError::driver("uploading env states"))?,
                    stream,
                    envs,
                    actions: None,
                })
            })
            .collect::<Result<Vec<_>, HostError>>()?;
        upload_stream
            .synchronize()
            .map_err(HostError::driver("uploading prices"))?;
        Ok(Self {
            rt: rt.clone(),
            open,
            close,
            groups,
            envs_per_trial: ept,
        })
    }

    /// Uploads each group's actions once, then launches one step per group per bar; groups overlap on their
    /// streams.
    pub(crate) fn run(&mut self, actions: &[u8], steps: usize) -> Result<(), HostError> {
        let n_envs = actions.len() / steps.max(1);
        for group in &mut self.groups {
            let width = group.envs.len();
            let mut host = Vec::with_capacity(steps * width);
            for s in 0..steps {
                host.extend_from_slice(
                    &actions[s * n_envs + group.envs.start..s * n_envs + group.envs.end],
                );
            }
            group.actions = Some(
                group
                    .stream
                    .clone_htod(&host)
                    .map_err(HostError::driver("uploading actions"))?,
            );
        }
        for s in 0..steps {
            for group in &mut self.groups {
                let width = group.envs.len();
                let Some(actions) = group.actions.as_ref() else {
                    continue;
                };
                launch::portfolio_step(
                    &self.rt,
                    &group.stream,
                    &group.params,
                    &mut group.states,
                    &actions.slice(s * width..(s + 1) * width),
                    &self.open,
                    &self.close,
                    self.envs_per_trial,
                )?;
            }
        }
        Ok(())
    }

    pub(crate) fn states(&self) -> Result<Vec<EnvState>, HostError> {
        let mut out = Vec::with_capacity(self.groups.last().map_or(0, |g| g.envs.end));
        for group in &self.groups {
            let states = group
                .stream
                .clone_dtoh(&group.states)
                .map_err(HostError::driver("downloading env states"))?;
            out.extend(states.into_iter().map(|d| d.0));
        }
        Ok(out)
    }
}
