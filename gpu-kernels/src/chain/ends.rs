//! What a chain block does around its three layers ([`ChainEnds`]) and what it reads before its
//! grid-dependency wait.

/// [`ChainEnds::early`]: the layers' weights are copied before the grid-dependency wait.
pub const EARLY_WEIGHTS: u32 = 1;
/// [`ChainEnds::early`]: [`ChainEnds::input`] runs before the grid-dependency wait.
pub const EARLY_INPUT: u32 = 2;

/// What a chain block does around its three layers (nvptx only): where its input rows come from and what
/// follows its outputs. The training chains take the defaults (rows staged from `c.x`, nothing after); the
/// acting kernels (`dqn_act`, `ppo_act`) compute each env's observation straight into shared memory and
/// choose each env's action from its outputs, in place of the `observe` and select launches around
/// `mlp_chain` (the same functions, so the same bits).
pub trait ChainEnds {
    /// Whether [`ChainEnds::input`] writes the input rows (else they are staged from `c.x`).
    const INPUT: bool = false;
    /// Whether [`ChainEnds::output`] runs (a barrier, then a thread per row).
    const OUTPUT: bool = false;

    /// Writes rows `m0 .. m0 + rows` of the input (`d` floats each) to `a` (row stride `sa`) with plain shared stores
    /// (`Self::INPUT`), while the weights' copies are in flight. `scratch` is shared memory the layers have not used
    /// yet (the first activation's [`CHAIN_ROWS`](super::CHAIN_ROWS) x `s2` floats), free until the barrier after this
    /// call; every thread of the block calls this (it may synchronize the block).
    ///
    /// # Safety
    /// `a` holds `rows` rows of `sa >= d` floats; `thread < CHAIN_THREADS`.
    #[inline(always)]
    unsafe fn input(
        &self,
        _a: *mut f32,
        _sa: usize,
        _scratch: *mut f32,
        _rows: (usize, usize),
        _d: usize,
        _thread: usize,
    ) {
    }

    /// What the chain reads before its grid-dependency wait ([`EARLY_WEIGHTS`], [`EARLY_INPUT`]): a
    /// training chain (its input a buffer) always copies its weights early; an input-writing chain (acting)
    /// as the host says for the kernel launched just before it.
    #[inline(always)]
    fn early(&self) -> u32 {
        if Self::INPUT { 0 } else { EARLY_WEIGHTS }
    }

    /// Row `row`'s outputs, once the block has written them (`Self::OUTPUT`).
    ///
    /// # Safety
    /// As the implementor documents; one thread per row.
    #[inline(always)]
    unsafe fn output(&self, _row: usize, _out: &[f32]) {}
}

/// The training chains' ends: rows staged from the chain's input operand, nothing after the outputs.
#[derive(Clone, Copy, Debug)]
pub struct Staged;

impl ChainEnds for Staged {}
