//! The vector env on the device: its state and outputs stay in device memory; each step is two launches
//! (the action check only for device actions) and one wait for the stream. With host copies on, the
//! outputs are copied back after every step (the numpy path); with them off, nothing is copied and the
//! outputs are read in place ([`DeviceOutputs`], the DLPack path).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use gpu_kernels::vector::{ACTIONS_OK, ActionKind, VectorArgs};
use gpu_kernels::{Bar, EnvState, TrialParams};

use super::buffers::{Dev, VectorBuffers, VectorDevice, zeros};
use super::launch;
use super::launch::env::VectorActions;
use super::runtime::CudaRuntime;
use crate::types::{DeviceOutputs, VectorOutputs};
use crate::{HostError, MarketData};

#[derive(Debug)]
pub(crate) struct CudaVector {
    rt: Arc<CudaRuntime>,
    stream: Arc<CudaStream>,
    params: CudaSlice<Dev<TrialParams>>,
    states: CudaSlice<Dev<EnvState>>,
    episodes: CudaSlice<u64>,
    bars: CudaSlice<Dev<Bar>>,
    features: CudaSlice<f32>,
    dev: VectorDevice,
    codes: CudaSlice<u8>,
    status: CudaSlice<u32>,
    /// The host copies of the outputs (refreshed after each step while `host_copies`).
    pub(crate) out: VectorOutputs,
    pub(crate) host_copies: bool,
}

impl CudaVector {
    pub(crate) fn new(
        rt: &Arc<CudaRuntime>,
        market: &MarketData,
        params: &[TrialParams],
        args: &VectorArgs,
    ) -> Result<Self, HostError> {
        let n = args.n_envs as usize;
        let d = args.n_features as usize + 3;
        let bytes = size_of_val(market.bars())
            + size_of_val(market.features())
            + size_of_val(params)
            + n * (size_of::<EnvState>() + 8 + 2 * d * 4 + 4 + 3 + 8 + 1);
        rt.ensure_fits(&format!("the vector env of {n} envs"), bytes)?;
        let stream = rt.new_stream()?;
        let up = |what: &'static str| HostError::driver(what);
        let bars: Vec<_> = market.bars().iter().copied().map(Dev).collect();
        let features = if market.features().is_empty() {
            zeros(&stream, 1)?
        } else {
            stream.clone_htod(market.features()).map_err(up("uploading features"))?
        };
        let host_params: Vec<_> = params.iter().copied().map(Dev).collect();
        Ok(Self {
            params: stream.clone_htod(&host_params).map_err(up("uploading trial parameters"))?,
            states: zeros(&stream, n)?,
            episodes: zeros(&stream, n)?,
            bars: stream.clone_htod(&bars).map_err(up("uploading bars"))?,
            features,
            dev: VectorDevice {
                obs: zeros(&stream, n * d)?,
                final_obs: zeros(&stream, n * d)?,
                rewards: zeros(&stream, n)?,
                terminated: zeros(&stream, n)?,
                truncated: zeros(&stream, n)?,
                final_mask: zeros(&stream, n)?,
                equity: zeros(&stream, n)?,
            },
            codes: zeros(&stream, n)?,
            status: stream.clone_htod(&[ACTIONS_OK]).map_err(up("uploading the action status"))?,
            out: VectorOutputs::new(n, d),
            host_copies: true,
            rt: rt.clone(),
            stream,
        })
    }

    /// The kernels' buffers, the runtime, the stream, the uploaded codes and the status word, borrowed apart.
    #[allow(clippy::type_complexity, reason = "disjoint borrows of the fields")]
    fn parts(&mut self) -> (VectorBuffers<'_>, &CudaRuntime, &CudaStream, &CudaSlice<u8>, &mut CudaSlice<u32>) {
        let Self { rt, stream, params, states, episodes, bars, features, dev, codes, status, .. } = self;
        (VectorBuffers { params, states, episodes, bars, features, out: dev }, rt, stream, codes, status)
    }

    /// Without host copies, other streams' work (a consumer still reading the last outputs) is waited for
    /// before they are overwritten: the whole device when the actions come from the host.
    fn wait_for_readers(&self) -> Result<(), HostError> {
        if self.host_copies { Ok(()) } else { self.rt.synchronize() }
    }

    pub(crate) fn reset(&mut self, args: &VectorArgs, restart: bool) -> Result<(), HostError> {
        self.wait_for_readers()?;
        if restart {
            self.stream.memset_zeros(&mut self.episodes).map_err(HostError::driver("zeroing episode counters"))?;
        }
        let (buf, rt, stream, _, _) = self.parts();
        launch::env::vector_reset(rt, stream, buf, args)?;
        self.finish()
    }

    /// One step with checked action codes from the host.
    pub(crate) fn step(&mut self, args: &VectorArgs, actions: &[u8]) -> Result<(), HostError> {
        self.wait_for_readers()?;
        self.stream.memcpy_htod(actions, &mut self.codes).map_err(HostError::driver("uploading actions"))?;
        let args = VectorArgs { action_kind: ActionKind::U8.code(), ..*args };
        let (buf, rt, stream, codes, status) = self.parts();
        // SAFETY: uploaded codes are no raw address.
        unsafe { launch::env::vector_step(rt, stream, buf, VectorActions::Codes(codes), status, &args) }?;
        self.finish()
    }

    /// One step with `n_envs` actions of `args.action_kind` at device address `actions`, checked on the
    /// device first: an invalid one fails the step before any env moves.
    ///
    /// # Safety
    /// `actions` holds `n_envs` aligned elements of the kind in this device's memory, ready on this env's
    /// stream (the DLPack exchange makes the producer's stream wait, see [`DeviceOutputs::stream`]) and valid
    /// until this call returns.
    pub(crate) unsafe fn step_device(&mut self, args: &VectorArgs, actions: u64) -> Result<(), HostError> {
        let (buf, rt, stream, _, status) = self.parts();
        // SAFETY: as the caller guarantees.
        unsafe {
            launch::env::vector_check(rt, stream, actions, status, args)?;
            launch::env::vector_step(rt, stream, buf, VectorActions::Raw(actions), status, args)?;
        }
        let mut status = [ACTIONS_OK];
        self.stream.memcpy_dtoh(&self.status, &mut status).map_err(HostError::driver("reading the action status"))?;
        self.stream.synchronize().map_err(HostError::driver("waiting for the step"))?;
        if status[0] != ACTIONS_OK {
            let env = status[0] as usize;
            let kind = ActionKind::from_code(args.action_kind);
            let mut bytes = [0u8; 8];
            let at = actions + (env as u64) * u64::from(kind.bytes);
            // SAFETY: the element lies in the caller's buffer (env < n_envs); the stream has finished.
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut bytes[..kind.bytes as usize], at) }
                .map_err(HostError::driver("reading an invalid action"))?;
            self.stream
                .memcpy_htod(&[ACTIONS_OK], &mut self.status)
                .map_err(HostError::driver("resetting the action status"))?;
            return Err(HostError::InvalidAction { step: 0, env, code: integer(&bytes, kind) });
        }
        self.finish()
    }

    /// Waits for the stream; copies the outputs back when host copies are on.
    fn finish(&mut self) -> Result<(), HostError> {
        if self.host_copies {
            let s = &self.stream;
            let down = |what| HostError::driver(what);
            let (d, o) = (&self.dev, &mut self.out);
            s.memcpy_dtoh(&d.obs, &mut o.obs).map_err(down("downloading observations"))?;
            s.memcpy_dtoh(&d.final_obs, &mut o.final_obs).map_err(down("downloading final observations"))?;
            s.memcpy_dtoh(&d.rewards, &mut o.rewards).map_err(down("downloading rewards"))?;
            s.memcpy_dtoh(&d.terminated, &mut o.terminated).map_err(down("downloading flags"))?;
            s.memcpy_dtoh(&d.truncated, &mut o.truncated).map_err(down("downloading flags"))?;
            s.memcpy_dtoh(&d.final_mask, &mut o.final_mask).map_err(down("downloading flags"))?;
            s.memcpy_dtoh(&d.equity, &mut o.equity).map_err(down("downloading equity"))?;
        }
        self.stream.synchronize().map_err(HostError::driver("waiting for the step"))
    }

    pub(crate) fn outputs(&self) -> DeviceOutputs {
        let s = &*self.stream;
        let ptr = |p: (u64, _)| p.0;
        let d = &self.dev;
        DeviceOutputs {
            ordinal: self.stream.context().ordinal(),
            stream: s.cu_stream() as u64,
            obs: ptr(d.obs.device_ptr(s)),
            final_obs: ptr(d.final_obs.device_ptr(s)),
            rewards: ptr(d.rewards.device_ptr(s)),
            terminated: ptr(d.terminated.device_ptr(s)),
            truncated: ptr(d.truncated.device_ptr(s)),
            final_mask: ptr(d.final_mask.device_ptr(s)),
            equity: ptr(d.equity.device_ptr(s)),
        }
    }
}

/// The integer in the first `kind.bytes` little-endian bytes.
fn integer(bytes: &[u8; 8], kind: ActionKind) -> i128 {
    let n = kind.bytes as usize;
    let unsigned = u64::from_le_bytes(*bytes) & if n == 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
    let sign_bit = 1u64 << (8 * n - 1);
    if kind.signed && unsigned & sign_bit != 0 {
        i128::from(unsigned) - (1i128 << (8 * n))
    } else {
        i128::from(unsigned)
    }
}
