//! A greedy walk on either backend, prepared (the agents' `prepare_greedy_walk`: the network as it is now)
//! or under way (`start_greedy_walk`).

use crate::{EnvBatch, HostError};

/// A greedy walk under way ([`crate::DqnAgent::start_greedy_walk`], [`crate::PpoAgent::start_greedy_walk`]):
/// on a GPU it runs on the envs' stream while the caller goes on (training the next epoch, say);
/// [`WalkHandle::finish`] waits for it. On the CPU the walk is done when the handle is made.
pub struct WalkHandle(WalkInner);

impl std::fmt::Debug for WalkHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match &self.0 {
            WalkInner::Done(Some(_)) => "WalkHandle(done)",
            WalkInner::Done(None) => "WalkHandle(unavailable)",
            #[cfg(feature = "cuda")]
            WalkInner::Device(_) => "WalkHandle(running on the GPU)",
        })
    }
}

enum WalkInner {
    Done(Option<Vec<u8>>),
    #[cfg(feature = "cuda")]
    Device(crate::cuda::DeviceWalk),
}

impl WalkHandle {
    /// A walk already done: its actions, or `None` where the agent has no walk of its own for these envs.
    pub(crate) fn done(actions: Option<Vec<u8>>) -> Self {
        Self(WalkInner::Done(actions))
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn device(walk: crate::cuda::DeviceWalk) -> Self {
        Self(WalkInner::Device(walk))
    }

    /// Whether the agent had no walk of its own for these envs (the caller steps a CPU copy bar by bar).
    pub fn is_unavailable(&self) -> bool {
        matches!(self.0, WalkInner::Done(None))
    }

    /// Waits for the walk: its actions (`trials x steps`, trial-major), or `None` as
    /// [`WalkHandle::is_unavailable`] says.
    pub fn finish(self) -> Result<Option<Vec<u8>>, HostError> {
        match self.0 {
            WalkInner::Done(actions) => Ok(actions),
            #[cfg(feature = "cuda")]
            WalkInner::Device(w) => w.finish().map(Some),
        }
    }
}

/// A greedy walk prepared from an agent's network as it was at
/// [`crate::DqnAgent::prepare_greedy_walk`] ([`crate::PpoAgent::prepare_greedy_walk`]), to be launched
/// later: on a GPU a copy of the weights (the agent may train on meanwhile, and the walk still sees the
/// network it was prepared from); on the CPU the walk is done when it is prepared.
pub struct PreparedWalk(PreparedInner);

impl std::fmt::Debug for PreparedWalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            PreparedInner::Done(w) => w.fmt(f),
            #[cfg(feature = "cuda")]
            PreparedInner::Device(s) => s.fmt(f),
        }
    }
}

enum PreparedInner {
    Done(WalkHandle),
    #[cfg(feature = "cuda")]
    Device(crate::cuda::WalkSnapshot),
}

impl PreparedWalk {
    pub(crate) fn done(actions: Option<Vec<u8>>) -> Self {
        Self(PreparedInner::Done(WalkHandle::done(actions)))
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn device(snapshot: Option<crate::cuda::WalkSnapshot>) -> Self {
        match snapshot {
            Some(s) => Self(PreparedInner::Device(s)),
            None => Self::done(None),
        }
    }

    /// The actions of a walk done elsewhere (a CPU copy of the agent stepping the envs bar by bar).
    pub fn from_actions(actions: Vec<u8>) -> Self {
        Self::done(Some(actions))
    }

    /// Whether the agent has no walk of its own for these envs (the caller steps a CPU copy bar by bar).
    pub fn is_unavailable(&self) -> bool {
        matches!(&self.0, PreparedInner::Done(w) if w.is_unavailable())
    }

    /// Whether [`Self::launch`] starts work on a device (a walk the caller may launch later, beside
    /// others), rather than handing back a walk already done.
    pub fn is_deferred(&self) -> bool {
        !matches!(&self.0, PreparedInner::Done(_))
    }

    /// Starts the walk on `env`, the envs it was prepared for (one per trial, at the bar it starts from), on
    /// their stream: on a GPU after the weight copy, while the caller goes on.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    pub fn launch(self, env: &mut EnvBatch) -> Result<WalkHandle, HostError> {
        match self.0 {
            PreparedInner::Done(w) => Ok(w),
            #[cfg(feature = "cuda")]
            PreparedInner::Device(s) => match env.inner_mut() {
                crate::env_batch::Inner::Cuda(cuda) => Ok(WalkHandle::device(s.launch(&cuda.policy_view()?)?)),
                _ => Err(HostError::Config("a GPU walk launched on CPU envs".to_owned())),
            },
        }
    }
}
