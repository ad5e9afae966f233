//! Fused forward passes: the three layers of one trial's network on a tile of [`CHAIN_ROWS`] rows in one
//! block (`mlp_chain`), instead of one `gemm_tiles` launch per layer.
//!
//! A [`Chain`] is exactly the three [`crate::net::dense`] products [`Chain::layers`] returns: the same
//! operands, sizes and epilogues, and the same order per element (`acc = 0; acc = fma(x_k, w_k, acc)` for k
//! ascending, then the bias and the activation), so its outputs are the products' bits and the CPU, which runs
//! the products one by one ([`crate::tile`]), needs no change. What changes is where the operands live:
//! the block stages its rows once and keeps the hidden activations in shared memory between the layers,
//! and each layer's weights (padded rows, [`crate::net::walk_row_stride`]) once per block, so a layer costs
//! a barrier, not a launch, and the three layers of all trials are one launch.
//!
//! Shape of the work: 128 threads; warp `w` owns rows `8 w .. 8 w + 8` of the tile, lane `l` the units
//! `l, l + 32, l + 64, l + 96` of each 128-unit chunk of the hidden width: an 8 x 4 patch of accumulators
//! fed by twelve 16-byte shared loads per four inputs (the 8 row loads are broadcasts, one wavefront each;
//! the 4 weight loads fall in distinct banks because the padded row stride is 4 more than a multiple of 8,
//! four wavefronts each): 24 shared wavefronts per 128 FMA instructions a warp, so the FMAs, not the shared
//! memory pipe, bound a layer (a 4 x 4 patch took 20 wavefronts per 64 FMAs: the shared pipe bound it).
//! The output layer (3 or 4 units) takes a thread per row, its outputs' chains interleaved
//! ([`crate::net::dots_aligned`]).
//!
//! Training chains run in wide tiles where their buffers fit (`mlp_chain_wide`, [`WIDE_ROWS`]): 16 warps of
//! the same 8 x 4 patches, one 512-thread block a multiprocessor, so each layer's weights are staged once for
//! 128 rows and a scheduler has 4 warps to pick from instead of 2. At 128 registers a thread the patch's
//! operands are loaded once per step instead of a step ahead (the other warps hide the loads).
//!
//! Staging is `cp.async` ([`ChainShared`] says where): the input rows, W1 and W3 first; the rows of W2 that
//! lie below W1 in shared memory are copied while layer 1 computes, the rest after it.
//!
//! The files: [`Chain`] and the tile sizes here; the shared-memory layouts of a chain block and of a
//! `gpu_rows` block (`layout`); what a chain block does around its layers (`ends`); the staging copies and
//! the patch of accumulators both bodies use (`stage`, nvptx only); the chain body (`body`, nvptx only); the
//! row-tile body of the backward products (`rows`); the planner ([`chain_plan`]).

#[cfg(target_arch = "nvptx64")]
mod body;
mod ends;
mod layout;
mod plan;
mod rows;
#[cfg(target_arch = "nvptx64")]
mod stage;

#[cfg(target_arch = "nvptx64")]
pub use body::gpu_chain;
pub use ends::{ChainEnds, EARLY_INPUT, EARLY_WEIGHTS, Staged};
pub use layout::{ChainShared, RowsShared};
pub use plan::chain_plan;
#[cfg(target_arch = "nvptx64")]
pub use rows::gpu_rows;
pub use rows::rows_suit;

use crate::mlp::Layout;
use crate::net::{NetArgs, dense};
use crate::tile::{Gemm, Operand};

/// Rows of a chain block's tile.
pub const CHAIN_ROWS: usize = 32;
/// Threads of a chain block (4 warps of 8 rows each).
pub const CHAIN_THREADS: u32 = 128;
/// Rows of the tile each warp computes (training chains and `mlp_rows`).
pub const ROWS_PER_WARP: usize = CHAIN_ROWS / (CHAIN_THREADS as usize / 32);
/// Rows of an acting chain's tile (8 warps of 5 rows). An acting launch is a single wave: 5 trials x 1,024
/// envs are 130 tiles of 40 rows for 132 multiprocessors, a block of [`ACT_THREADS`] each, which stages the
/// weights once for its 40 rows and keeps all of them at once ([`ChainShared::apart`]: no copy of W2 waited
/// for between the layers). Two 4-warp blocks of 20 rows on a multiprocessor (until 2026-12) staged every
/// weight twice, the rows of W2 below W1 after layer 1.
pub const ACT_ROWS: usize = 40;
/// Threads of an acting block.
pub const ACT_THREADS: u32 = 256;
const _: () = assert!(ACT_ROWS.is_multiple_of(ACT_THREADS as usize / 32));
/// The most shared memory an acting block takes with its weights apart ([`ChainShared::apart`]: the H100's
/// and H200's 227 KB a block); past it the weights region is shared by W1 and W2 as in the training chains.
pub const ACT_SHARED_APART: usize = 227 * 1024;
/// Rows of a wide training chain block's tile (`mlp_chain_wide`: 16 warps of [`ROWS_PER_WARP`]). One block a
/// multiprocessor stages each layer's weights once for 128 rows and keeps 4 warps a scheduler (two 4-warp
/// blocks of 32 rows keep 2): a DQN step's forward passes (15 chains of 1,024 rows) are 120 blocks, one wave.
pub const WIDE_ROWS: usize = 128;
/// Threads of a wide training chain block.
pub const WIDE_THREADS: u32 = 512;
const _: () = assert!(WIDE_ROWS == ROWS_PER_WARP * (WIDE_THREADS as usize / 32));
/// Hidden units per chunk of a chain layer (a warp's 32 lanes x 4).
pub const CHAIN_UNITS: usize = 128;

/// Three dense layers of trial `trial`'s network (weights in buffer `net`) on `m` active rows of `x`
/// (`m_pad` written): `out[0] = act(x W1^T + b1)`, `out[1] = act(out[0] W2^T + b2)`, `out[2] = out[1]
/// W3^T + b3`, hidden width `h` active.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Chain {
    /// Input rows (row-major, `D` wide).
    pub x: Operand,
    /// The two activations and the outputs (row-major).
    pub out: [Operand; 3],
    /// Buffer of the weights.
    pub net: u32,
    /// Trial whose parameters the layers use.
    pub trial: u32,
    /// Active rows.
    pub m: u32,
    /// Rows written.
    pub m_pad: u32,
    /// Active hidden width.
    pub h: u32,
    /// Rows of a block's tile: [`CHAIN_ROWS`], [`WIDE_ROWS`] or [`ACT_ROWS`].
    pub rows: u32,
    /// Keeps the size a multiple of 16.
    pub _pad: [u32; 2],
}

const _: () = assert!(core::mem::size_of::<Chain>() == 96);

impl Chain {
    /// The three products this chain computes, in layer order.
    pub fn layers(&self, l: &Layout) -> [Gemm; 3] {
        let (t, h, m, m_pad) = (self.trial as usize, self.h as usize, self.m as usize, self.m_pad as usize);
        let input = [self.x, self.out[0], self.out[1]];
        core::array::from_fn(|layer| dense(l, self.net, t, layer, h, input[layer], self.out[layer], m, m_pad))
    }

    /// Row tiles of the launch.
    pub fn tiles(&self) -> usize {
        (self.m_pad as usize).div_ceil(self.tile_rows())
    }

    /// Rows of a block's tile: [`ACT_ROWS`] or [`WIDE_ROWS`] when [`Chain::rows`] says so, else [`CHAIN_ROWS`].
    pub fn tile_rows(&self) -> usize {
        match self.rows as usize {
            ACT_ROWS => ACT_ROWS,
            WIDE_ROWS => WIDE_ROWS,
            _ => CHAIN_ROWS,
        }
    }

    /// Threads of a block: [`WIDE_THREADS`] for wide tiles, [`ACT_THREADS`] for acting ones, else
    /// [`CHAIN_THREADS`].
    pub fn threads(&self) -> u32 {
        match self.tile_rows() {
            WIDE_ROWS => WIDE_THREADS,
            ACT_ROWS => ACT_THREADS,
            _ => CHAIN_THREADS,
        }
    }

    /// The block's shared layout for `net`: buffers of the tile's rows ([`CHAIN_ROWS`] for narrow training
    /// tiles), and for acting tiles the weights apart where they fit ([`ChainShared::acting`]).
    pub fn shared(&self, net: &NetArgs) -> ChainShared {
        match self.tile_rows() {
            WIDE_ROWS => ChainShared::with_rows(net, WIDE_ROWS),
            ACT_ROWS => ChainShared::acting(net),
            _ => ChainShared::with_rows(net, CHAIN_ROWS),
        }
    }

    /// Whether its operands suit the kernel: row-major rows (unit column stride).
    pub fn row_major(&self) -> bool {
        self.x.col == 1 && self.out.iter().all(|o| o.col == 1)
    }
}
