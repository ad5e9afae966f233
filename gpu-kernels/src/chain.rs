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

use crate::mlp::Layout;
use crate::net::{NetArgs, dense, walk_row_stride};
#[cfg(target_arch = "nvptx64")]
use crate::tile::unrolled;
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

/// Where a chain block keeps its operands in shared memory (float offsets from a 16-byte aligned base).
///
/// The weights region holds one wide layer's staged weights at a time: W1 at its end (`w1`), then W2 from
/// its start, so the first [`ChainShared::ahead`] rows of W2, which lie below W1, are copied while layer 1
/// runs. W3 (3 or 4 rows) has a region of its own, copied with W1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainShared {
    /// Row stride of the staged layer-1 weights and of the input rows ([`walk_row_stride`] of D).
    pub s1: usize,
    /// Row stride of the staged layer-2 and layer-3 weights and of the activations.
    pub s2: usize,
    /// Row stride of buffer `a` (the input rows, then the second activation).
    pub sa: usize,
    /// The staged weights of one wide layer, `H x max(s1, s2)`: W2 from here.
    pub weights: usize,
    /// The staged W1 (`H x s1`), at the end of the weights region.
    pub w1: usize,
    /// Rows of W2 that lie below `w1` (copied during layer 1).
    pub ahead: usize,
    /// The staged W3 (`O x s2`).
    pub w3: usize,
    /// Buffer `a`: `rows x sa`.
    pub a: usize,
    /// Buffer `b` (the first activation): `rows x s2`.
    pub b: usize,
    /// Floats in all.
    pub len: usize,
}

impl ChainShared {
    /// The layout for `net`'s sizes and tiles of [`CHAIN_ROWS`] (acting and narrow training chains).
    pub fn of(net: &NetArgs) -> Self {
        Self::with_rows(net, CHAIN_ROWS)
    }

    /// The layout for `net`'s sizes and tiles of `rows`.
    pub fn with_rows(net: &NetArgs, rows: usize) -> Self {
        Self::laid_out(net, rows, false)
    }

    /// The layout for `net` and tiles of `rows` with W2 and W1 apart (W2, then W1): every row of W2 is
    /// copied while layer 1 runs ([`Self::ahead`] is the hidden width), none waited for after it.
    pub fn apart(net: &NetArgs, rows: usize) -> Self {
        Self::laid_out(net, rows, true)
    }

    /// The weights region (W1 at its end over W2's last rows, or with `apart` after all of W2), W3, then
    /// the two row buffers.
    fn laid_out(net: &NetArgs, rows: usize, apart: bool) -> Self {
        let (d, hs, o) = (net.input as usize, net.hidden as usize, net.outputs as usize);
        let (s1, s2) = (walk_row_stride(d), walk_row_stride(hs));
        let sa = s1.max(s2);
        let weights = 0;
        let end = weights + if apart { hs * (s2 + s1) } else { hs * s1.max(s2) };
        let w1 = end - hs * s1;
        let w3 = end;
        let a = w3 + o * s2;
        let b = a + rows * sa;
        Self { s1, s2, sa, weights, w1, ahead: (w1 - weights) / s2, w3, a, b, len: b + rows * s2 }
    }

    /// The acting chains' layout: [`Self::apart`] for [`ACT_ROWS`] where it takes at most
    /// [`ACT_SHARED_APART`] bytes, else [`Self::with_rows`].
    pub fn acting(net: &NetArgs) -> Self {
        let apart = Self::apart(net, ACT_ROWS);
        if apart.bytes() <= ACT_SHARED_APART { apart } else { Self::with_rows(net, ACT_ROWS) }
    }

    /// Bytes of dynamic shared memory a chain block needs.
    pub fn bytes(&self) -> usize {
        4 * self.len
    }
}

/// Starts copying rows `0..rows` (`k` floats each, row `r` at `src + r * src_stride`) to `dst + r *
/// dst_stride` with `cp.async` (no registers, no wait: the caller commits and waits, then a barrier):
/// warp `w` of the block's `warps` takes rows `w, w + warps, ..`, lane `l` columns `l, l + 32, ..`. (Loads
/// into registers and stores from them cost ten instructions an element and held 64 registers; this, two or
/// three.)
///
/// # Safety
/// The ranges are valid, the source unwritten during the kernel; `thread < 32 warps`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn stage_rows(
    src: *const f32,
    src_stride: usize,
    dst: *mut f32,
    dst_stride: usize,
    rows: usize,
    k: usize,
    (thread, warps): (usize, usize),
) {
    use crate::nvptx_ops::{cp_async4, shared_addr};
    let warps = warps as u32;
    // u32 indices (64-bit compares and adds doubled the loop): a staged layer and its source rows lie inside
    // one buffer, whose offsets [`Chain`]'s products already keep below 2^32.
    let (rows, k, ss, ds) = (rows as u32, k as u32, src_stride as u32, dst_stride as u32);
    let (lane, warp, db) = (thread as u32 % 32, thread as u32 / 32, shared_addr(dst));
    let mut j0 = lane;
    // SAFETY: the caller's contract; every copied element has `r < rows`, `j < k`.
    unsafe {
        while j0 < k {
            // Columns j0 + 32 c of every row of the warp: pointers stepped per row, the columns as offsets.
            let live: [bool; 4] = core::array::from_fn(|c| j0 + 32 * (c as u32) < k);
            let (mut r, mut s, mut d) = (warp, src.add((warp * ss + j0) as usize), db + 4 * (warp * ds + j0));
            while r < rows {
                unrolled!(c in [0, 1, 2, 3] {
                    if live[c] {
                        cp_async4(d + 128 * c as u32, s.add(32 * c));
                    }
                });
                (r, s, d) = (r + warps, s.add((warps * ss) as usize), d + 4 * warps * ds);
            }
            j0 += 128;
        }
    }
}

/// The `R` x 4 patch of a thread: `acc[i][j] = sum over k of x[i][k] w[j][k]`, each a chain of FMAs in
/// ascending `k` from 0 (the product contract's order). `xa` are the shared addresses of the warp's `R` rows
/// (16-byte aligned, `k` floats each); `wload(o)` gives the four units' weights of inputs `o / 4 .. o / 4 +
/// 4` (`o` in bytes, as `[unit][input]`); `x_tail(i, kk)` and `w_tail(kk)` the inputs past the last full
/// quad. With `AHEAD`, two register sets in turn, each loaded one step ahead of its FMAs (latency hiding
/// without copying one set into the other; the loads past the last step re-read it, clamped); without, one
/// set (blocks of many warps, at most 128 registers a thread, hide the loads' latency with other warps).
///
/// # Safety
/// The addresses `wload`, `xa` and the tail closures read hold the operands; shared memory written before a
/// barrier that every thread has passed.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn accumulate<const R: usize, const AHEAD: bool>(
    xa: &[u32; R],
    k: usize,
    wload: impl Fn(u32) -> [[f32; 4]; 4],
    x_tail: impl Fn(usize, usize) -> f32,
    w_tail: impl Fn(usize) -> [f32; 4],
) -> [[f32; 4]; R] {
    use crate::nvptx_ops::lds4;
    use crate::tile::fma;
    let vecs = k / 4;
    let mut acc = [[0.0f32; 4]; R];
    // SAFETY: the caller's contract; inputs are read below `k` only.
    unsafe {
        let load = |o: u32| {
            let xs: [[f32; 4]; R] = core::array::from_fn(|i| lds4(xa[i] + o));
            (xs, wload(o))
        };
        let step = |acc: &mut [[f32; 4]; R], (xs, ws): ([[f32; 4]; R], [[f32; 4]; 4])| {
            unrolled!(u in [0, 1, 2, 3] {
                for i in 0..R {
                    unrolled!(j in [0, 1, 2, 3] {
                        acc[i][j] = fma(xs[i][u], ws[j][u], acc[i][j]);
                    });
                }
            });
        };
        if !AHEAD {
            let mut o = 0;
            while o < 16 * vecs as u32 {
                step(&mut acc, load(o));
                o += 16;
            }
        } else if vecs > 0 {
            let last = 16 * (vecs as u32 - 1);
            let mut o = 0;
            let mut a = load(0);
            loop {
                let b = load((o + 16).min(last));
                step(&mut acc, a);
                if o == last {
                    break;
                }
                a = load((o + 32).min(last));
                step(&mut acc, b);
                o += 32;
                if o > last {
                    break;
                }
            }
        }
        for kk in 4 * vecs..k {
            let ws = w_tail(kk);
            for (i, acc) in acc.iter_mut().enumerate() {
                let xv = x_tail(i, kk);
                unrolled!(j in [0, 1, 2, 3] {
                    acc[j] = fma(xv, ws[j], acc[j]);
                });
            }
        }
    }
    acc
}

/// One wide layer (`k` inputs, hidden width `hs`, `h` active units, activation `act`) of the block's rows: from
/// `x` (rows `sx` apart) and the staged weights `w` (rows `sw` apart) into `y` (rows `sy` apart) and the
/// global output `out` (rows `m0 ..`, `m_pad` written, `m` active).
///
/// # Safety
/// The shared buffers hold [`CHAIN_ROWS`] rows and `hs` weight rows; `out` and `bias` address valid
/// memory for the rows and units written; every thread of the block calls this.
#[cfg(target_arch = "nvptx64")]
#[allow(clippy::too_many_arguments, reason = "one layer's operands")]
#[inline(always)]
unsafe fn wide_layer<const R: usize, const AHEAD: bool>(
    x: *const f32,
    sx: usize,
    w: *const f32,
    sw: usize,
    k: usize,
    bias: *const f32,
    (hs, h): (usize, usize),
    y: *mut f32,
    sy: usize,
    out: *mut f32,
    out_row: usize,
    (m0, m, m_pad): (usize, usize, usize),
    act: u32,
    thread: usize,
) {
    use crate::nvptx_ops::{lds, lds4, shared_addr, sts};
    let (lane, warp) = (thread % 32, thread / 32);
    let r0 = R * warp;
    // Shared-window addresses (32-bit `ld.shared`): the generic pointers cost a 64-bit add per load.
    let (xb, wb, yb) = (shared_addr(x), shared_addr(w), shared_addr(y));
    let (sx4, sw4) = (4 * sx as u32, 4 * sw as u32);
    let xa: [u32; R] = core::array::from_fn(|i| xb + (r0 + i) as u32 * sx4);
    let mut n0 = 0;
    // SAFETY: the caller's contract; weight rows are read only below `hs` (clamped), inputs below `k`.
    unsafe {
        while n0 < hs {
            // Units of this lane in the chunk; rows past the width read row 0 (their results are dropped).
            let units: [usize; 4] = core::array::from_fn(|j| n0 + lane + 32 * j);
            let wa: [u32; 4] = core::array::from_fn(|j| wb + if units[j] < hs { units[j] as u32 * sw4 } else { 0 });
            let acc = accumulate::<R, AHEAD>(
                &xa,
                k,
                |o| core::array::from_fn(|j| lds4(wa[j] + o)),
                |i, kk| lds(xa[i] + 4 * kk as u32),
                |kk| core::array::from_fn(|j| lds(wa[j] + 4 * kk as u32)),
            );
            // The four biases before the first store (one round trip, not one per unit).
            let biases: [f32; 4] = core::array::from_fn(|j| if units[j] < h { *bias.add(units[j]) } else { 0.0 });
            unrolled!(j in [0, 1, 2, 3] {
                let n = units[j];
                if n < hs {
                    let b = biases[j];
                    for (i, acc) in acc.iter().enumerate() {
                        let (r, row) = (r0 + i, m0 + r0 + i);
                        // `finish` of the hidden epilogue: act(acc + bias) inside the active sizes, 0 outside.
                        let s = acc[j] + b;
                        let value = if row < m && n < h { crate::mlp::activate(act, s) } else { 0.0 };
                        sts(yb + 4 * (r * sy + n) as u32, value);
                        if row < m_pad {
                            *out.add(row * out_row + n) = value;
                        }
                    }
                }
            });
            n0 += CHAIN_UNITS;
        }
    }
}

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

    /// Writes rows `m0 .. m0 + rows` of the input (`d` floats each) to `a` (row stride `sa`) with plain
    /// shared stores (`Self::INPUT`), while the weights' copies are in flight. `scratch` is shared memory
    /// the layers have not used yet (the first activation's [`CHAIN_ROWS`] x `s2` floats), free until the
    /// barrier after this call; every thread of the block calls this (it may synchronize the block).
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

/// One block of chain `c`: row tile `tile` (`4 R` rows, [`Chain::tile_rows`]) through the three layers, `R`
/// rows a warp, its input rows and what follows the outputs as `ends` says ([`ChainEnds`]).
///
/// # Safety
/// `buffers` holds a valid device pointer for every buffer `c` names, long enough for the products of
/// [`Chain::layers`] ([`Gemm::extent`]); `c` is row-major ([`Chain::row_major`]); `smem` is this block's
/// dynamic shared memory of [`ChainShared::of`]`(net).len` floats, 16-byte aligned; every thread of the
/// block calls this (it synchronizes the block); `ends`' contracts hold.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn gpu_chain<const R: usize, const W: usize, const AHEAD: bool, E: ChainEnds>(
    c: &Chain,
    net: &NetArgs,
    tile: usize,
    buffers: *const u64,
    smem: *mut f32,
    thread: usize,
    ends: &E,
) {
    use crate::nvptx_ops::{cp_async_commit, cp_async_wait, cp_async_wait_all};
    use core::arch::nvptx::_syncthreads;
    if tile >= c.tiles() {
        return; // uniform over the block
    }
    let l = net.layout();
    let sh = c.shared(net);
    let (d, hs, o) = (l.input, l.hidden, l.outputs);
    let (h, m, m_pad) = (c.h as usize, c.m as usize, c.m_pad as usize);
    let tile_rows = R * W;
    let m0 = tile * tile_rows;
    // SAFETY: the caller's contract; staged reads stay inside the active rows and units, and the shared
    // offsets inside `sh.len` floats; barriers separate every buffer's writers from its readers.
    unsafe {
        let buf = |b: u32| *buffers.add(b as usize) as *mut f32;
        let params = buf(c.net).add(c.trial as usize * l.params());
        let (ws, a, b) = (smem.add(sh.weights), smem.add(sh.a), smem.add(sh.b));
        let rows = m.saturating_sub(m0).min(tile_rows);
        // W1 and W3 into their regions; the tile's input rows into `a`; then the rows of W2 below W1. What
        // the kernel launched just before this one does not write is read before the grid-dependency wait
        // (`EARLY_READS`): a training chain's weights (the sampler or PPO's gather ran before it), an acting
        // chain's weights or observations as `ends.early()` says. The copies' groups are W1 and W3, the input
        // rows (training), W2, in every order of the calls, so `wait_group 1` leaves W2 alone in flight.
        let early = ends.early();
        let stage_w13 = || {
            stage_rows(params.add(l.w1()), d, smem.add(sh.w1), sh.s1, h, d, (thread, W));
            stage_rows(params.add(l.w3()), hs, smem.add(sh.w3), sh.s2, o, h, (thread, W));
            cp_async_commit();
        };
        if early & EARLY_WEIGHTS != 0 {
            stage_w13();
        }
        if E::INPUT && early & EARLY_INPUT != 0 {
            ends.input(a, sh.sa, b, (m0, rows), d, thread);
        }
        crate::nvptx_ops::follow_previous();
        if early & EARLY_WEIGHTS == 0 {
            stage_w13();
        }
        if !E::INPUT {
            let x = buf(c.x.buf).add(c.x.off as usize + m0 * c.x.row as usize);
            stage_rows(x, c.x.row as usize, a, sh.sa, rows, d, (thread, W));
            cp_async_commit();
        }
        let ahead = h.min(sh.ahead);
        stage_rows(params.add(l.w2()), hs, ws, sh.s2, ahead, h, (thread, W));
        cp_async_commit();
        if E::INPUT && early & EARLY_INPUT == 0 {
            ends.input(a, sh.sa, b, (m0, rows), d, thread);
        }
        cp_async_wait::<1>();
        _syncthreads();
        let out = |i: usize| buf(c.out[i].buf).add(c.out[i].off as usize);
        let rows_of = |i: usize| c.out[i].row as usize;
        wide_layer::<R, AHEAD>(
            a,
            sh.sa,
            smem.add(sh.w1),
            sh.s1,
            d,
            params.add(l.b1()),
            (hs, h),
            b,
            sh.s2,
            out(0),
            rows_of(0),
            (m0, m, m_pad),
            l.activation,
            thread,
        );
        _syncthreads();
        // Layer 2: from `b` into `a`; the rest of W2 over W1, which every thread has left (barrier).
        let rest = (ahead * hs, ahead * sh.s2);
        stage_rows(params.add(l.w2() + rest.0), hs, ws.add(rest.1), sh.s2, h - ahead, h, (thread, W));
        // These copies are in no committed group yet: `wait_all` commits and waits for them (a bare
        // `wait_group 0` did not, and layer 2 read rows of W2 that had not landed).
        cp_async_wait_all();
        _syncthreads();
        wide_layer::<R, AHEAD>(
            b,
            sh.s2,
            ws,
            sh.s2,
            h,
            params.add(l.b2()),
            (hs, h),
            a,
            sh.sa,
            out(1),
            rows_of(1),
            (m0, m, m_pad),
            l.activation,
            thread,
        );
        _syncthreads();
        // Layer 3: a thread per row, its 3 or 4 outputs' dot products interleaved (`dots_aligned`: each is
        // `dense_unit`'s, the same order; the row's inputs loaded once for all of them).
        let w3 = smem.add(sh.w3) as *const f32;
        let mut r = thread;
        while r < tile_rows {
            let row = m0 + r;
            if row < m_pad {
                let x = a.add(r * sh.sa);
                let mut values = [0.0f32; 4];
                if row < m {
                    let bias = |n: usize| *params.add(l.b3() + n);
                    match o {
                        3 => {
                            let d =
                                crate::net::dots_aligned(x, core::array::from_fn::<_, 3, _>(|n| w3.add(n * sh.s2)), h);
                            unrolled!(n in [0, 1, 2] { values[n] = d[n] + bias(n); });
                        }
                        4 => {
                            let d =
                                crate::net::dots_aligned(x, core::array::from_fn::<_, 4, _>(|n| w3.add(n * sh.s2)), h);
                            unrolled!(n in [0, 1, 2, 3] { values[n] = d[n] + bias(n); });
                        }
                        _ => {
                            let view = crate::net::LayerView { base: w3, unit: sh.s2, step: 1, k: h, aligned: true };
                            unrolled!(n in [0, 1, 2, 3] {
                                if n < o {
                                    values[n] = crate::net::dense_unit(&view, bias(n), None, n, x);
                                }
                            });
                        }
                    }
                }
                unrolled!(n in [0, 1, 2, 3] {
                    if n < o {
                        *out(2).add(row * rows_of(2) + n) = values[n];
                    }
                });
            }
            r += 32 * W;
        }
        if E::OUTPUT {
            // The barrier orders the block's output stores before the reads (global memory, one block).
            _syncthreads();
            if thread < rows {
                let row = m0 + thread;
                ends.output(row, core::slice::from_raw_parts(out(2).add(row * rows_of(2)), o));
            }
        }
    }
}

/// Where a `gpu_rows` (nvptx only) block keeps its operands in shared memory (float offsets from a 16-byte aligned
/// base): its tile of `A` ([`CHAIN_ROWS`] or [`WIDE_ROWS`] rows of `k`), all of `B` (`k` rows of `n_pad`) and
/// room for the tile's output gradients ([`crate::tile::SHORT_K`] a row), which a block whose tile of `A` is
/// computed from them (`gpu_rows`' `from`, nvptx only) stages (2 KB at 128 rows, in every layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsShared {
    /// Row stride of the staged `A` rows ([`walk_row_stride`] of `k`).
    pub sa: usize,
    /// Row stride of the staged `B` rows ([`walk_row_stride`] of `n_pad`).
    pub sb: usize,
    /// The staged `B`.
    pub b: usize,
    /// The tile's output gradients ([`crate::tile::SHORT_K`] floats a row, 16-byte aligned).
    pub out: usize,
    /// Floats in all.
    pub len: usize,
}

impl RowsShared {
    /// The layout for a product of `k` and `n_pad` on tiles of `rows` rows.
    pub fn of(k: usize, n_pad: usize, rows: usize) -> Self {
        let (sa, sb) = (walk_row_stride(k), walk_row_stride(n_pad));
        let b = rows * sa;
        let out = b + k * sb;
        Self { sa, sb, b, out, len: out + rows * crate::tile::SHORT_K }
    }

    /// The layout of product `g` on tiles of `rows` rows ([`CHAIN_ROWS`]: `mlp_rows`; [`WIDE_ROWS`]:
    /// `mlp_rows_wide`).
    pub fn of_product(g: &Gemm, rows: usize) -> Self {
        Self::of(g.k as usize, g.n_pad as usize, rows)
    }

    /// Bytes of dynamic shared memory a block needs.
    pub fn bytes(&self) -> usize {
        4 * self.len
    }
}

/// Whether `gpu_rows` (nvptx only) can compute `g`: `A` and `B` row-major (unit column stride).
pub fn rows_suit(g: &Gemm) -> bool {
    g.a.col == 1 && g.b.col == 1
}

/// Row tile `tile` (`8 W` rows: [`CHAIN_ROWS`] or [`WIDE_ROWS`]) of product `g` with `B` staged whole, as a
/// chain layer (`W` warps, operands a step ahead or not: `AHEAD`, as [`gpu_chain`]): warp `w` owns rows
/// `8 w ..`, lane `l` the columns `4 l .. 4 l + 4` of each 128-column chunk (an 8 x 4 patch,
/// [`accumulate`]: `B`'s rows are the inputs, so a lane reads its four columns of four `B` rows with four
/// 16-byte loads, and the row loads are broadcasts). Each element is [`crate::tile::reference`]'s: the same
/// order, epilogue and padding. Used for the hidden gradient of layer 1 (`D2 W2` masked by the ReLU of
/// `A1`), where `gemm_tiles` ran 160 blocks of 64 x 64 at 15% of the warps.
///
/// With `from`, the product whose output is `g`'s `A` (the hidden gradient of layer 2: `D2 = (DOUT W3)`
/// masked by the ReLU of `A2`, `k` at most [`crate::tile::SHORT_K`]), the tile of `A` is computed instead of
/// read: the block stages `from`'s `aux` rows (`A2`) where `A`'s rows go and its `A` rows (`DOUT`) beside
/// them, and turns each staged element into `from`'s element in place: `fma` over `from`'s `k` ascending from
/// 0 and [`crate::tile::finish`], the bits `crate::tile::gpu_short_rows` (nvptx only) stores, and stores
/// them for the gradients (`mlp_gradients`). So the loss kernel need not store `D2`, nor read `A2` for it
/// (a PPO update's `A2` and `D2` are 191 MB each).
///
/// # Safety
/// `buffers` holds a valid device pointer for every buffer `g` (and `from`) names, long enough for it
/// ([`Gemm::extent`]); [`rows_suit`]`(g)`; with `from`: `from.c` is `g.a`, `from.m` is `g.m`, `from.n` is
/// `g.k`, `from.k <= SHORT_K`, its operands row-major; `smem` is this block's dynamic shared memory of
/// [`RowsShared::of_product`]`(g, 8 W).len` floats, 16-byte aligned; every thread of the block calls this.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn gpu_rows<const W: usize, const AHEAD: bool>(
    g: &Gemm,
    tile: usize,
    buffers: *const u64,
    smem: *mut f32,
    thread: usize,
    from: Option<&Gemm>,
) {
    use crate::nvptx_ops::{cp_async_wait_all, cp_async4, lds4, shared_addr};
    use crate::tile::{SHORT_K, finish, reads_aux, reads_bias};
    use core::arch::nvptx::_syncthreads;
    let (m, n_act, k, m_pad, n_pad) = (g.m as usize, g.n as usize, g.k as usize, g.m_pad as usize, g.n_pad as usize);
    let tile_rows = ROWS_PER_WARP * W;
    let m0 = tile * tile_rows;
    if m0 >= m_pad {
        return; // uniform over the block
    }
    let sh = RowsShared::of_product(g, tile_rows);
    let (lane, warp) = (thread % 32, thread / 32);
    let r0 = ROWS_PER_WARP * warp;
    // SAFETY: the caller's contract; staged reads stay inside the active rows and columns, shared offsets
    // inside `sh.len` floats, and the barrier orders the copies before the reads.
    unsafe {
        let buf = |b: u32| *buffers.add(b as usize) as *mut f32;
        let (a, b) = (smem, smem.add(sh.b));
        let rows = m.saturating_sub(m0).min(tile_rows);
        // `A`'s rows, or (`from`) the rows of `A2` and of the output gradient they are computed from.
        let (src, stride) = match from {
            Some(f) => (buf(f.aux.buf).add(f.aux.at(m0, 0)), f.aux.row),
            None => (buf(g.a.buf).add(g.a.at(m0, 0)), g.a.row),
        };
        stage_rows(src, stride as usize, a, sh.sa, rows, k, (thread, W));
        if let Some(f) = from {
            let (ko, dout) = (f.k as usize, buf(f.a.buf).add(f.a.at(m0, 0)));
            let mut i = thread;
            while i < rows * ko {
                let (r, kk) = (i / ko, i % ko);
                cp_async4(shared_addr(smem.add(sh.out + r * SHORT_K + kk)), dout.add(r * f.a.row as usize + kk));
                i += 32 * W;
            }
        }
        stage_rows(buf(g.b.buf).add(g.b.at(0, 0)), g.b.row as usize, b, sh.sb, k, n_act, (thread, W));
        // `from`'s `B` of the thread's first column, loaded while the copies land.
        let w_first = from.map(|f| from_weights(f, buffers, thread % CHAIN_UNITS, k));
        cp_async_wait_all();
        _syncthreads();
        if let (Some(f), Some(w)) = (from, w_first) {
            hidden_from_out::<W>(f, buffers, (a, sh.sa, smem.add(sh.out)), (m0, rows, k), thread, w);
            _syncthreads();
        }
        let (ab, bb, sa4, sb4) = (shared_addr(a), shared_addr(b), 4 * sh.sa as u32, 4 * sh.sb as u32);
        let xa: [u32; ROWS_PER_WARP] = core::array::from_fn(|i| ab + (r0 + i) as u32 * sa4);
        let (with_bias, with_aux) = (reads_bias(g.epilogue), reads_aux(g.epilogue));
        // An operand the epilogue does not read names no buffer (`Operand::NONE`): its table entry is not read.
        let c = buf(g.c.buf);
        let bias = if with_bias { buf(g.bias.buf) } else { core::ptr::null_mut() };
        let aux = if with_aux { buf(g.aux.buf) } else { core::ptr::null_mut() };
        let mut n0 = 0;
        while n0 < n_pad {
            // The lane's four columns; past the padded width it reads column 0 (its results are not stored).
            let col = n0 + 4 * lane;
            let cb = if col < n_pad { 4 * col as u32 } else { 0 };
            let acc = accumulate::<ROWS_PER_WARP, AHEAD>(
                &xa,
                k,
                |o| {
                    // Rows o / 4 .. o / 4 + 4 of B (o = 4 kk bytes: row kk starts kk * sb4 = o * sb bytes in).
                    let rows: [[f32; 4]; 4] =
                        core::array::from_fn(|u| lds4(bb + o * sh.sb as u32 + u as u32 * sb4 + cb));
                    core::array::from_fn(|j| core::array::from_fn(|u| rows[u][j]))
                },
                |i, kk| *a.add((r0 + i) * sh.sa + kk),
                |kk| core::array::from_fn(|j| *b.add(kk * sh.sb + cb as usize / 4 + j)),
            );
            // The epilogue's inputs before the first store (a store may alias them).
            let biases: [f32; 4] =
                core::array::from_fn(
                    |j| if with_bias && col + j < n_act { *bias.add(g.bias.at(0, col + j)) } else { 0.0 },
                );
            let mut auxes = [[0.0f32; 4]; ROWS_PER_WARP];
            if with_aux {
                unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                    unrolled!(j in [0, 1, 2, 3] {
                        let (row, n) = (m0 + r0 + i, col + j);
                        if row < m && n < n_act {
                            auxes[i][j] = *aux.add(g.aux.at(row, n));
                        }
                    });
                });
            }
            unrolled!(i in [0, 1, 2, 3, 4, 5, 6, 7] {
                unrolled!(j in [0, 1, 2, 3] {
                    let (row, n) = (m0 + r0 + i, col + j);
                    if row < m_pad && n < n_pad {
                        *c.add(g.c.at(row, n)) = finish(g, row, n, acc[i][j], biases[j], auxes[i][j]);
                    }
                });
            });
            n0 += CHAIN_UNITS;
        }
    }
}

/// `from`'s `B` of column `c` (`W3`: one weight an output, zero past `from.k` and for `c >= k`).
///
/// # Safety
/// As [`gpu_rows`] with `from`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn from_weights(from: &Gemm, buffers: *const u64, c: usize, k: usize) -> [f32; crate::tile::SHORT_K] {
    let mut wv = [0.0f32; crate::tile::SHORT_K];
    // SAFETY: the caller's contract: `(kk, c)` is inside `from`'s active `k x n` (`from.n` is `k`).
    unsafe {
        let wb = *buffers.add(from.b.buf as usize) as *const f32;
        unrolled!(kk in [0, 1, 2, 3] {
            if kk < from.k as usize && c < k {
                wv[kk] = *wb.add(from.b.at(kk, c));
            }
        });
    }
    wv
}

/// Turns the staged tile of `from`'s `aux` rows (`A2`: `rows` rows of `k` at `a`, row stride `sa`) into
/// `from`'s elements of those rows (rows `m0 ..` of the product) and stores them in `from`'s `C` as well
/// (every column to `from.n_pad`, zero past `k`: the row as `crate::tile::gpu_short_rows` writes it), reading
/// the staged output gradients (`out`: [`crate::tile::SHORT_K`] a row) and `from`'s `B` (`W3`) from global
/// memory: thread `i` takes column `i % 128` of each 128-column chunk, rows `i / 128` apart by `W / 4`; each
/// element is `fma` over `from.k` ascending from 0, then [`crate::tile::finish`] ([`gpu_rows`]).
///
/// # Safety
/// As [`gpu_rows`] with `from`; the staged rows are complete (a barrier) and no thread reads them until
/// the next barrier; no other block writes these rows of `from`'s `C`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn hidden_from_out<const W: usize>(
    from: &Gemm,
    buffers: *const u64,
    (a, sa, out): (*mut f32, usize, *const f32),
    (m0, rows, k): (usize, usize, usize),
    thread: usize,
    w_first: [f32; crate::tile::SHORT_K],
) {
    use crate::nvptx_ops::{lds, lds4, shared_addr, sts};
    use crate::tile::{finish, fma};
    const { assert!(W.is_multiple_of(4), "whole 128-thread groups") };
    let (col, step) = (thread % CHAIN_UNITS, W / 4);
    let (ko, n_pad) = (from.k as usize, from.n_pad as usize);
    // SAFETY: the caller's contract: every shared offset is inside the staged tile, every global read of
    // `B` inside `from`'s active `k x n`, every store inside `from`'s `C`.
    unsafe {
        let c_out = *buffers.add(from.c.buf as usize) as *mut f32;
        let (ab, ob) = (shared_addr(a), shared_addr(out));
        let mut c = col;
        while c < n_pad {
            let wv = if c == col { w_first } else { from_weights(from, buffers, c, k) };
            let mut r = thread / CHAIN_UNITS;
            while r < rows {
                let (mut acc, mut x) = (0.0f32, 0.0f32);
                if c < k {
                    let dv = lds4(ob + 16 * r as u32);
                    x = lds(ab + 4 * (r * sa + c) as u32);
                    unrolled!(kk in [0, 1, 2, 3] {
                        if kk < ko {
                            acc = fma(dv[kk], wv[kk], acc);
                        }
                    });
                }
                let v = finish(from, m0 + r, c, acc, 0.0, x);
                if c < k {
                    sts(ab + 4 * (r * sa + c) as u32, v);
                }
                *c_out.add(from.c.at(m0 + r, c)) = v;
                r += step;
            }
            c += CHAIN_UNITS;
        }
    }
}

/// The chains of acting (`act`: every env of each trial, `args.envs_per_trial` rows) or of the training
/// forward passes (each trial's [`crate::net::NetTrial::passes`]), in the order of [`crate::net::plan`]'s
/// products: chain `i`'s layers are the `i`-th product of each of the stage's three layers. Training chains
/// have tiles of `train_rows` ([`CHAIN_ROWS`] or [`WIDE_ROWS`]); acting chains of [`ACT_ROWS`].
pub fn chain_plan(
    args: &NetArgs,
    trials: &[crate::net::NetTrial],
    act: bool,
    train_rows: usize,
    mut push: impl FnMut(Chain),
) {
    use crate::net::buffers::ONLINE;
    use crate::net::{ActWork, Work};
    let (d, b) = (args.input as usize, args.batch as usize);
    let w = Work::of(args);
    for (t, p) in trials.iter().enumerate() {
        let (h, bt, trial) = (p.hidden, p.batch, t as u32);
        if act {
            let e = args.envs_per_trial as usize;
            let rows = ActWork::of(args).trial_rows(t, e);
            push(Chain {
                x: rows[0],
                out: [rows[1], rows[2], rows[3]],
                net: ONLINE,
                trial,
                m: e as u32,
                m_pad: e as u32,
                h,
                rows: ACT_ROWS as u32,
                _pad: [0; 2],
            });
            continue;
        }
        for &(net, input, regions) in &crate::net::PASSES[..(p.passes as usize).min(3)] {
            push(Chain {
                x: Operand::rows(input, t * b * d, d),
                out: regions.map(|r| w.operand(r, t)),
                net,
                trial,
                m: bt,
                m_pad: b as u32,
                h,
                rows: train_rows as u32,
                _pad: [0; 2],
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{
        ACT_ROWS, ACT_SHARED_APART, ACT_THREADS, CHAIN_ROWS, CHAIN_THREADS, Chain, ChainShared, ROWS_PER_WARP,
        WIDE_ROWS, WIDE_THREADS, chain_plan,
    };
    use crate::net::{ACTING, FORWARD, NetArgs, NetTrial, plan};

    /// Chain `i`'s three layers are the `i`-th products of the three per-layer stages they replace, for
    /// acting and for training (one, two and three passes; widths and batches below the strides).
    #[test]
    fn chains_are_the_products_of_the_stages_they_fuse() {
        let net = NetArgs::new(3, 70, 57, 150, 3, 45, 1_000);
        let trials = [
            NetTrial { hidden: 150, batch: 45, passes: 2, _pad: 0 },
            NetTrial { hidden: 11, batch: 33, passes: 3, _pad: 0 },
            NetTrial { hidden: 130, batch: 1, passes: 1, _pad: 0 },
        ];
        for (act, train_rows) in [(true, CHAIN_ROWS), (false, CHAIN_ROWS), (false, WIDE_ROWS)] {
            let mut chains = [Chain::default(); 8];
            let mut n = 0;
            chain_plan(&net, &trials, act, train_rows, |c| {
                chains[n] = c;
                n += 1;
            });
            assert_eq!(n, if act { 3 } else { 6 });
            let stages = if act { ACTING } else { FORWARD };
            for (layer, stage) in stages.into_iter().enumerate() {
                let mut i = 0;
                plan(&net, &trials, stage, |g| {
                    assert_eq!(chains[i].layers(&net.layout())[layer], g, "chain {i}, layer {layer}, act {act}");
                    assert!(chains[i].row_major());
                    let rows = if act { ACT_ROWS } else { train_rows };
                    assert_eq!(chains[i].tile_rows(), rows);
                    let threads = match rows {
                        WIDE_ROWS => WIDE_THREADS,
                        ACT_ROWS => ACT_THREADS,
                        _ => CHAIN_THREADS,
                    };
                    assert_eq!(chains[i].threads(), threads);
                    let per_warp = if act { ACT_ROWS / (ACT_THREADS as usize / 32) } else { ROWS_PER_WARP };
                    assert_eq!(chains[i].threads() as usize / 32 * per_warp, rows);
                    assert_eq!(chains[i].tiles(), (chains[i].m_pad as usize).div_ceil(rows));
                    i += 1;
                });
                assert_eq!(i, n);
            }
        }
        assert_eq!(chains_tiles(70), 3);
    }

    fn chains_tiles(m_pad: u32) -> usize {
        Chain { m_pad, ..Chain::default() }.tiles()
    }

    /// The shared layout: rows 16-byte aligned and padded so that eight consecutive rows fall in distinct
    /// bank quads; the buffers do not overlap; D = 54, H = 128 fits two blocks per H200 multiprocessor.
    #[test]
    fn shared_layout_is_aligned_and_fits_two_blocks() {
        let sh = ChainShared::of(&NetArgs::new(5, 1024, 54, 128, 3, 1024, 300_000));
        for s in [sh.s1, sh.s2, sh.sa] {
            assert_eq!(s % 4, 0);
            assert_eq!((s / 4) % 2, 1, "stride {s}: odd in quads");
        }
        assert!(sh.a >= 128 * sh.s1.max(sh.s2) && sh.b == sh.a + CHAIN_ROWS * sh.sa);
        assert!(2 * (sh.bytes() + 1024) <= 228 * 1024, "{} bytes", sh.bytes());
        // W1 ends where W3 begins; the W2 rows copied during layer 1 end at or below W1's start.
        assert_eq!(sh.w1 + 128 * sh.s1, sh.w3);
        assert_eq!(sh.ahead, sh.w1 / sh.s2);
        assert!(sh.ahead > 0 && sh.weights + sh.ahead * sh.s2 <= sh.w1);
        assert_eq!(sh.a, sh.w3 + 3 * sh.s2);
        // Narrow hidden widths: W1 fills the region, so no W2 row is copied ahead, and W2 still fits.
        let narrow = ChainShared::of(&NetArgs::new(2, 64, 57, 11, 4, 64, 1_000));
        assert_eq!((narrow.w1, narrow.ahead), (0, 0));
        assert!(11 * narrow.s2 <= narrow.w3 && narrow.a == narrow.w3 + 4 * narrow.s2);
        // Wide tiles: the same weights' layout, buffers of 128 rows; D = 54, H = 128 fits one block in an H200
        // multiprocessor's 227 KB a block (its layers' weights once for 128 rows).
        let net = NetArgs::new(5, 1024, 54, 128, 3, 1024, 300_000);
        let wide = ChainShared::with_rows(&net, WIDE_ROWS);
        assert_eq!((wide.w1, wide.w3, wide.a, wide.ahead), (sh.w1, sh.w3, sh.a, sh.ahead));
        assert_eq!(wide.b, wide.a + WIDE_ROWS * wide.sa);
        assert_eq!(wide.len, wide.b + WIDE_ROWS * wide.s2);
        assert!(wide.bytes() <= 227 * 1024, "{} bytes", wide.bytes());
        let c = Chain { rows: WIDE_ROWS as u32, ..Chain::default() };
        assert_eq!(c.shared(&net), wide);
        assert_eq!(Chain { rows: CHAIN_ROWS as u32, ..c }.shared(&net), sh);
    }

    /// The acting layout keeps W2 and W1 apart (every row of W2 ahead) where it takes at most
    /// `ACT_SHARED_APART` bytes: D = 54, H = 128 does, one block of 40 rows a multiprocessor; wider hidden
    /// layers fall back to the shared weights region.
    #[test]
    fn acting_layout_keeps_the_weights_apart_where_they_fit() {
        let net = NetArgs::new(5, 1024, 54, 128, 3, 1024, 300_000);
        let act = ChainShared::acting(&net);
        assert_eq!(act, ChainShared::apart(&net, ACT_ROWS));
        assert_eq!(Chain { rows: ACT_ROWS as u32, ..Chain::default() }.shared(&net), act);
        assert_eq!((act.weights, act.ahead, act.w1), (0, 128, 128 * act.s2));
        assert_eq!(act.w3, act.w1 + 128 * act.s1);
        assert_eq!((act.a, act.b), (act.w3 + 3 * act.s2, act.w3 + 3 * act.s2 + ACT_ROWS * act.sa));
        assert_eq!(act.len, act.b + ACT_ROWS * act.s2);
        assert!(act.bytes() <= ACT_SHARED_APART, "{} bytes", act.bytes());
        let wide = NetArgs::new(5, 1024, 54, 192, 3, 1024, 300_000);
        assert!(ChainShared::apart(&wide, ACT_ROWS).bytes() > ACT_SHARED_APART);
        assert_eq!(ChainShared::acting(&wide), ChainShared::with_rows(&wide, ACT_ROWS));
    }
}
