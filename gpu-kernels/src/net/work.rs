//! The regions of a learner's training buffer ([`Work`]) and acting buffer ([`ActWork`]).

use super::{NetArgs, buffers};
use crate::tile::Operand;

/// Regions of the training buffer, per trial (`B x H` floats for activations and hidden gradients, `B x O`
/// for outputs and output gradients): pass 0, online on the observations (`A1`, `A2`, `Q`); pass 1, target
/// on the next observations (`T1`, `T2`, `QT`); pass 2, online on the next observations (`U1`, `U2`, `QO`:
/// Double DQN); the output gradient `DOUT` and the hidden gradients `D1`, `D2`. PPO runs pass 0 alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// Minibatch buffer B.
    pub batch: usize,
    /// Row stride H.
    pub hidden: usize,
    /// Outputs O.
    pub outputs: usize,
}

impl Work {
    /// Hidden-width regions.
    pub const A1: usize = 0;
    /// See [`Work`].
    pub const A2: usize = 1;
    /// See [`Work`].
    pub const T1: usize = 2;
    /// See [`Work`].
    pub const T2: usize = 3;
    /// See [`Work`].
    pub const U1: usize = 4;
    /// See [`Work`].
    pub const U2: usize = 5;
    /// See [`Work`].
    pub const D1: usize = 6;
    /// See [`Work`].
    pub const D2: usize = 7;
    /// Output-width regions (numbered after the 8 hidden ones).
    pub const Q: usize = 8;
    /// See [`Work`].
    pub const QT: usize = 9;
    /// See [`Work`].
    pub const QO: usize = 10;
    /// See [`Work`].
    pub const DOUT: usize = 11;

    /// The training buffer of `net`.
    pub fn of(net: &NetArgs) -> Self {
        Self { batch: net.batch as usize, hidden: net.hidden as usize, outputs: net.outputs as usize }
    }
    /// Floats per trial.
    pub fn per_trial(&self) -> usize {
        self.batch * (8 * self.hidden + 4 * self.outputs)
    }
    /// Row stride of region `r`.
    pub fn stride(&self, r: usize) -> usize {
        if r < Self::Q { self.hidden } else { self.outputs }
    }
    /// First float of region `r` of trial `t`.
    pub fn at(&self, r: usize, t: usize) -> usize {
        let region = if r < Self::Q { r * self.hidden } else { 8 * self.hidden + (r - Self::Q) * self.outputs };
        t * self.per_trial() + self.batch * region
    }
    /// Region `r` of trial `t` as a row-major operand of the training buffer.
    pub fn operand(&self, r: usize, t: usize) -> Operand {
        Operand::rows(buffers::WORK, self.at(r, t), self.stride(r))
    }
}

/// The acting buffer of `n` envs with input width D, row stride H and O outputs: observations `n x D`, then
/// the two activations `n x H` each, then the outputs `n x O`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActWork {
    /// Envs.
    pub envs: usize,
    /// Input width D.
    pub input: usize,
    /// Row stride H.
    pub hidden: usize,
    /// Outputs O.
    pub outputs: usize,
}

impl ActWork {
    /// The acting buffer of `net`'s envs.
    pub fn of(net: &NetArgs) -> Self {
        Self {
            envs: net.n_trials as usize * net.envs_per_trial as usize,
            input: net.input as usize,
            hidden: net.hidden as usize,
            outputs: net.outputs as usize,
        }
    }
    /// Floats in all.
    pub fn len(&self) -> usize {
        self.envs * (self.input + 2 * self.hidden + self.outputs)
    }
    /// Always false (a buffer of at least one env).
    pub fn is_empty(&self) -> bool {
        self.envs == 0
    }
    /// Observations.
    pub fn obs(&self) -> usize {
        0
    }
    /// First activation.
    pub fn h1(&self) -> usize {
        self.envs * self.input
    }
    /// Second activation.
    pub fn h2(&self) -> usize {
        self.h1() + self.envs * self.hidden
    }
    /// Outputs (Q-values, or logits and value).
    pub fn q(&self) -> usize {
        self.h2() + self.envs * self.hidden
    }
    /// Trial `t`'s rows (`e` envs a trial) of the observations, the two activations and the outputs, as
    /// row-major operands: acting's layer `l` reads entry `l` and writes entry `l + 1`.
    pub fn trial_rows(&self, t: usize, e: usize) -> [Operand; 4] {
        let (d, hs, o) = (self.input, self.hidden, self.outputs);
        [
            Operand::rows(buffers::ACT, self.obs() + t * e * d, d),
            Operand::rows(buffers::ACT, self.h1() + t * e * hs, hs),
            Operand::rows(buffers::ACT, self.h2() + t * e * hs, hs),
            Operand::rows(buffers::ACT, self.q() + t * e * o, o),
        ]
    }
}
