//! A greedy walk under way, on either backend: what the agents' `start_greedy_walk` returns.

use crate::HostError;

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

    /// The actions of a walk done elsewhere (a CPU copy of the agent stepping the envs bar by bar).
    pub fn from_actions(actions: Vec<u8>) -> Self {
        Self::done(Some(actions))
    }

    #[cfg(feature = "cuda")]
    pub(crate) fn device(walk: Option<crate::cuda::DeviceWalk>) -> Self {
        match walk {
            Some(w) => Self(WalkInner::Device(w)),
            None => Self::done(None),
        }
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
