//! Device-resident state of an [`crate::EnvBatch`]: the market data shared by all trials, and per trial group
//! (one stream each) its parameters, env states, replay ring and reward statistics.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};
use gpu_kernels::batch::{BatchArgs, SampleArgs};
use gpu_kernels::{Bar, EnvState, Moments, Transition, TrialParams};

use super::buffers::{Dev, EnvBuffers, PolicyView, SampleBuffers, ensure, sample_buffers, zeros};
use super::launch;
use super::runtime::CudaRuntime;
use crate::types::{EnvConfig, SampleBatch, SimLayout};
use crate::{HostError, MarketData};

#[derive(Debug)]
struct TrialGroup {
    stream: Arc<CudaStream>,
    trials: Range<usize>,
    envs: Range<usize>,
    params: CudaSlice<Dev<TrialParams>>,
    states: CudaSlice<Dev<EnvState>>,
    ring: CudaSlice<Dev<Transition>>,
    moments: CudaSlice<Dev<Moments>>,
    chunks: Option<CudaSlice<Dev<Moments>>>,
    after_step: Option<CudaSlice<Dev<Moments>>>,
    actions: Option<CudaSlice<u8>>,
}

#[derive(Debug)]
pub(crate) struct CudaEnv {
    rt: Arc<CudaRuntime>,
    samples: Option<SampleBuffers>,
    bars: CudaSlice<Dev<Bar>>,
    features: CudaSlice<f32>,
    n_feature_values: usize,
    capacity: usize,
    groups: Vec<TrialGroup>,
}

impl TrialGroup {
    /// This group's part of a launch's arguments.
    fn args(&self, args: &BatchArgs) -> BatchArgs {
        BatchArgs { n_trials: self.trials.len() as u32, ..*args }
    }
}

impl CudaEnv {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        market: &MarketData,
        params: &[TrialParams],
        states: &[EnvState],
        layout: SimLayout,
        cfg: EnvConfig,
    ) -> Result<Self, HostError> {
        let n_envs = layout.n_envs();
        let bytes = size_of_val(market.bars())
            + size_of_val(market.features())
            + layout.trials() * (size_of::<TrialParams>() + cfg.ring_capacity * size_of::<Transition>())
            + n_envs * (size_of::<EnvState>() + 1);
        rt.ensure_fits(
            &format!("the envs of {} trials x {} (ring, states, bars)", layout.trials(), layout.envs_per_trial()),
            bytes,
        )?;
        let upload = &rt.new_stream()?;
        let bars: Vec<_> = market.bars().iter().copied().map(Dev).collect();
        let bars = upload.clone_htod(&bars).map_err(HostError::driver("uploading bars"))?;
        let features = if market.features().is_empty() {
            zeros(upload, 1)?
        } else {
            upload.clone_htod(market.features()).map_err(HostError::driver("uploading features"))?
        };
        let n_groups = cfg.trial_groups.clamp(1, layout.trials());
        let per_group = layout.trials().div_ceil(n_groups);
        let ept = layout.envs_per_trial();
        let groups = params
            .chunks(per_group)
            .enumerate()
            .map(|(g, group_params)| {
                let stream = if g == 0 { upload.clone() } else { rt.new_stream()? };
                let trials = g * per_group..g * per_group + group_params.len();
                let envs = trials.start * ept..trials.end * ept;
                let host_params: Vec<_> = group_params.iter().copied().map(Dev).collect();
                let host_states: Vec<_> = states[envs.clone()].iter().copied().map(Dev).collect();
                Ok(TrialGroup {
                    params: stream.clone_htod(&host_params).map_err(HostError::driver("uploading trial parameters"))?,
                    states: stream.clone_htod(&host_states).map_err(HostError::driver("uploading env states"))?,
                    ring: zeros(&stream, trials.len() * cfg.ring_capacity)?,
                    moments: zeros(&stream, trials.len())?,
                    chunks: None,
                    after_step: None,
                    actions: None,
                    stream,
                    trials,
                    envs,
                })
            })
            .collect::<Result<Vec<_>, HostError>>()?;
        upload.synchronize().map_err(HostError::driver("uploading market data"))?;
        Ok(Self {
            rt: rt.clone(),
            samples: None,
            bars,
            features,
            n_feature_values: market.features().len(),
            capacity: cfg.ring_capacity,
            groups,
        })
    }

    /// Trial `k`'s new parameters, with its ring slots emptied and its reward moments restarted (on its
    /// group's stream, after the work queued there).
    pub(crate) fn restart_trial(&mut self, k: usize, params: &TrialParams) -> Result<(), HostError> {
        let capacity = self.capacity;
        let g =
            self.groups.iter_mut().find(|g| g.trials.contains(&k)).ok_or(HostError::Config(format!("trial {k}")))?;
        let i = k - g.trials.start;
        let s = &g.stream;
        s.memcpy_htod(&[Dev(*params)], &mut g.params.slice_mut(i..i + 1))
            .map_err(HostError::driver("uploading trial parameters"))?;
        if capacity > 0 {
            s.memset_zeros(&mut g.ring.slice_mut(i * capacity..(i + 1) * capacity))
                .map_err(HostError::driver("emptying a trial's ring"))?;
        }
        s.memset_zeros(&mut g.moments.slice_mut(i..i + 1)).map_err(HostError::driver("restarting reward moments"))?;
        Ok(())
    }

    pub(crate) fn set_states(&mut self, states: &[EnvState]) -> Result<(), HostError> {
        for g in &mut self.groups {
            let host: Vec<_> = states[g.envs.clone()].iter().copied().map(Dev).collect();
            g.stream.memcpy_htod(&host, &mut g.states).map_err(HostError::driver("uploading env states"))?;
        }
        Ok(())
    }

    /// Uploads each group's columns of the step-major `actions`.
    pub(crate) fn load_actions(&mut self, actions: &[u8]) -> Result<(), HostError> {
        let n_envs = self.groups.last().map_or(0, |g| g.envs.end);
        let steps = actions.len() / n_envs.max(1);
        let single = self.groups.len() == 1;
        for g in &mut self.groups {
            let uploaded = if single {
                g.stream.clone_htod(actions)
            } else {
                let columns = (0..steps).flat_map(|s| &actions[s * n_envs + g.envs.start..s * n_envs + g.envs.end]);
                g.stream.clone_htod(&columns.copied().collect::<Vec<u8>>())
            };
            g.actions = Some(uploaded.map_err(HostError::driver("uploading actions"))?);
        }
        Ok(())
    }

    pub(crate) fn scan(&mut self, args: &BatchArgs, first: usize) -> Result<(), HostError> {
        for g in &mut self.groups {
            let args = g.args(args);
            let width = g.envs.len();
            let Some(actions) = g.actions.as_ref() else {
                return Err(HostError::Config("scan before any actions were loaded".to_owned()));
            };
            let view = actions.slice(first * width..(first + args.steps as usize) * width);
            let buf = EnvBuffers { params: &g.params, states: &mut g.states, bars: &self.bars, ring: &mut g.ring };
            launch::env::env_scan(&self.rt, &g.stream, buf, &view, &args)?;
        }
        Ok(())
    }

    /// Writes `transitions[env]` into ring slot `slots[env]` (global, trial-major), one upload per run of
    /// consecutive slots on the env's group stream (a trial's envs fill consecutive slots but where its ring
    /// wraps).
    pub(crate) fn write_step(&mut self, slots: &[usize], transitions: &[Transition]) -> Result<(), HostError> {
        let capacity = self.capacity;
        for g in &mut self.groups {
            let base = g.trials.start * capacity;
            let mut first = g.envs.start;
            while first < g.envs.end {
                let mut end = first + 1;
                while end < g.envs.end && slots[end] == slots[end - 1] + 1 {
                    end += 1;
                }
                let host: Vec<_> = transitions[first..end].iter().copied().map(Dev).collect();
                let at = slots[first] - base;
                g.stream
                    .memcpy_htod(&host, &mut g.ring.slice_mut(at..at + host.len()))
                    .map_err(HostError::driver("uploading transitions"))?;
                first = end;
            }
        }
        Ok(())
    }

    /// Records a timing event on every group's stream.
    pub(crate) fn record_events(&self) -> Result<Vec<cudarc::driver::CudaEvent>, HostError> {
        let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        self.groups
            .iter()
            .map(|g| g.stream.record_event(timing).map_err(HostError::driver("recording an event")))
            .collect()
    }

    pub(crate) fn update_rewards(&mut self, args: &BatchArgs) -> Result<(), HostError> {
        for g in &mut self.groups {
            let args = g.args(args);
            let (trials, steps) = (args.n_trials as usize, args.steps as usize);
            let chunks = ensure(&g.stream, &mut g.chunks, trials * steps * args.n_chunks())?;
            let after_step = ensure(&g.stream, &mut g.after_step, trials * steps)?;
            launch::env::update_rewards(
                &self.rt,
                &g.stream,
                &g.params,
                &mut g.ring,
                &mut g.moments,
                chunks,
                after_step,
                &args,
            )?;
        }
        Ok(())
    }

    pub(crate) fn observe(&mut self, args: &BatchArgs) -> Result<Vec<f32>, HostError> {
        let width = args.n_features as usize + 3;
        let mut out = Vec::new();
        for g in &mut self.groups {
            let args = g.args(args);
            let mut dev = zeros::<f32>(&g.stream, g.envs.len() * width)?;
            let buf = EnvBuffers { params: &g.params, states: &mut g.states, bars: &self.bars, ring: &mut g.ring };
            launch::env::observe(&self.rt, &g.stream, buf, &self.features, &mut dev, &args)?;
            out.extend(
                g.stream
                    .clone_dtoh(&dev.slice(0..g.envs.len() * width))
                    .map_err(HostError::driver("downloading observations"))?,
            );
        }
        Ok(out)
    }

    pub(crate) fn sample(&mut self, args: &SampleArgs) -> Result<SampleBatch, HostError> {
        let mut batch = SampleBatch::default();
        for g in &self.groups {
            let args = SampleArgs { n_trials: g.trials.len() as u32, trial_offset: g.trials.start as u32, ..*args };
            let samples = args.n_trials as usize * args.batch as usize;
            let width = args.n_features as usize + 3;
            let mut out = sample_buffers(&g.stream, samples, width)?;
            launch::env::sample_transitions(
                &self.rt,
                &g.stream,
                &g.params,
                &g.ring,
                &self.features,
                self.n_feature_values,
                &mut out,
                &args,
            )?;
            let down = |d: &CudaSlice<f32>, n: usize| {
                g.stream.clone_dtoh(&d.slice(0..n)).map_err(HostError::driver("downloading samples"))
            };
            batch.obs.extend(down(&out.obs, samples * width)?);
            batch.next_obs.extend(down(&out.next_obs, samples * width)?);
            batch.rewards.extend(down(&out.rewards, samples)?);
            batch.dones.extend(down(&out.dones, samples)?);
            batch.weights.extend(down(&out.weights, samples)?);
            batch.actions.extend(
                g.stream
                    .clone_dtoh(&out.actions.slice(0..samples))
                    .map_err(HostError::driver("downloading samples"))?,
            );
        }
        Ok(batch)
    }

    /// The single trial group's buffers for a device policy, with an action buffer of one step.
    pub(crate) fn policy_view(&mut self) -> Result<PolicyView<'_>, HostError> {
        let [g] = self.groups.as_mut_slice() else {
            return Err(HostError::Config("device policies need trial_groups = 1".to_owned()));
        };
        if g.actions.as_ref().is_none_or(|a| a.len() < g.envs.len()) {
            g.actions = Some(zeros(&g.stream, g.envs.len())?);
        }
        Ok(PolicyView {
            stream: &g.stream,
            params: &g.params,
            states: &mut g.states,
            bars: &self.bars,
            features: &self.features,
            actions: g.actions.as_mut().expect("allocated above"),
            ring: &mut g.ring,
        })
    }

    /// The single trial group's stream, ring and the features (for a device learner reading rollouts).
    #[allow(clippy::type_complexity, reason = "three borrowed device buffers")]
    pub(crate) fn rollout_view(
        &self,
    ) -> Result<(&Arc<CudaStream>, &CudaSlice<Dev<Transition>>, &CudaSlice<f32>), HostError> {
        let [g] = self.groups.as_slice() else {
            return Err(HostError::Config("device learners need trial_groups = 1".to_owned()));
        };
        Ok((&g.stream, &g.ring, &self.features))
    }

    /// Samples a minibatch into device buffers kept for the next call (a single trial group).
    pub(crate) fn sample_device(&mut self, args: &SampleArgs) -> Result<(&Arc<CudaStream>, &SampleBuffers), HostError> {
        let [g] = self.groups.as_slice() else {
            return Err(HostError::Config("device sampling needs trial_groups = 1".to_owned()));
        };
        let samples = args.n_trials as usize * args.batch as usize;
        let width = args.n_features as usize + 3;
        if self.samples.as_ref().is_none_or(|s| s.actions.len() < samples) {
            self.samples = Some(sample_buffers(&g.stream, samples, width)?);
        }
        let out = self.samples.as_mut().expect("allocated above");
        launch::env::sample_transitions(
            &self.rt,
            &g.stream,
            &g.params,
            &g.ring,
            &self.features,
            self.n_feature_values,
            out,
            args,
        )?;
        Ok((&g.stream, out))
    }

    pub(crate) fn states(&self) -> Result<Vec<EnvState>, HostError> {
        self.download(|g| &g.states, |g| g.envs.len(), "downloading env states")
    }

    pub(crate) fn transitions(&self) -> Result<Vec<Transition>, HostError> {
        let capacity = self.capacity;
        self.download(|g| &g.ring, |g| g.trials.len() * capacity, "downloading transitions")
    }

    pub(crate) fn moments(&self) -> Result<Vec<Moments>, HostError> {
        self.download(|g| &g.moments, |g| g.trials.len(), "downloading reward moments")
    }

    /// Concatenates the first `len(group)` elements of a per-group buffer.
    fn download<T: Copy>(
        &self,
        buffer: impl Fn(&TrialGroup) -> &CudaSlice<Dev<T>>,
        len: impl Fn(&TrialGroup) -> usize,
        context: &'static str,
    ) -> Result<Vec<T>, HostError>
    where
        Dev<T>: DeviceRepr,
    {
        let mut out = Vec::new();
        for g in &self.groups {
            let n = len(g);
            if n > 0 {
                let part = g.stream.clone_dtoh(&buffer(g).slice(0..n)).map_err(HostError::driver(context))?;
                out.extend(part.into_iter().map(|d| d.0));
            }
        }
        Ok(out)
    }
}
