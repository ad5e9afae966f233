//! Buffer indices into a learner's buffer addresses ([`crate::tile::Operand::buf`]).

/// Online parameters, `K x P`.
pub const ONLINE: u32 = 0;
/// Target parameters, `K x P`.
pub const TARGET: u32 = 1;
/// Sampled observations, `K x B x D`.
pub const OBS: u32 = 2;
/// Sampled next observations, `K x B x D`.
pub const NEXT_OBS: u32 = 3;
/// Training activations and gradients ([`super::Work`]).
pub const WORK: u32 = 4;
/// Per-chunk weight gradients, `chunks x K x P`.
pub const PARTIAL: u32 = 5;
/// Acting: observations, activations and Q-values of every env ([`super::ActWork`]).
pub const ACT: u32 = 6;
/// [`super::MAX_GRAD_CHUNK`] ones: the input of the bias gradients.
pub const ONES: u32 = 7;
/// Buffers (the length of the addresses).
pub const COUNT: usize = 8;
