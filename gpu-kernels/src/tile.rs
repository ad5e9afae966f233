//! Batched, masked matrix products: the arithmetic of every network layer, backward pass and gradient.
//!
//! A launch runs a list of [`Gemm`] problems (a stage's plan: one per trial, network and layer), each
//! `C = epilogue(A x B)` with its own active sizes inside padded extents. Operands are addressed as
//! `(buffer, offset, row stride, column stride)` into a short array of buffer addresses, so one kernel serves the
//! forward pass (`X W^T`), the backward pass (`Delta W`) and the weight gradient (`Delta^T X`) without copies.
//!
//! **The summation order is the contract**: element `(m, n)` is `acc = 0; for k in 0..K: acc = fma(A(m, k),
//! B(k, n), acc)` with a correctly rounded fused multiply-add, then [`finish`]. The GPU tiles (64 x 64
//! outputs per block, K in steps of [`TILE_K`], operands staged in shared memory) and the CPU loops
//! (`f32::mul_add`, packed rows) run exactly that sequence per element, so both give the same bits whatever
//! the tiling. Padded `k` (beyond the active K) contributes `fma(0, 0, acc) = acc`.
//!
//! Narrow products (the 3 Q-values, the output layer's gradient written transposed, the bias gradients)
//! take their own tile shape (a row per thread), so a 64 x 64 tile is not spent on 3 columns.

/// Outputs per block side on the GPU.
pub const TILE: usize = 64;
/// K step of the GPU tiles.
pub const TILE_K: usize = 16;
/// Threads per GEMM block (16 x 16, each 4 x 4 outputs).
pub const GEMM_THREADS: u32 = 256;

/// No buffer (an absent bias or auxiliary operand).
pub const NO_BUFFER: u32 = u32::MAX;

/// `C = acc`.
pub const EPI_NONE: u32 = 0;
/// `C = acc + bias[n]`.
pub const EPI_BIAS: u32 = 1;
/// `C = relu(acc + bias[n])`.
pub const EPI_BIAS_RELU: u32 = 2;
/// `C = acc` where `aux(m, n) > 0`, else 0 (the backward pass through a ReLU, `aux` = its output).
pub const EPI_RELU_MASK: u32 = 3;
/// `C = tanh(acc + bias[n])`.
pub const EPI_BIAS_TANH: u32 = 4;
/// `C = acc x (1 - aux(m, n)^2)` (the backward pass through a Tanh, `aux` = its output).
pub const EPI_TANH_GRAD: u32 = 5;

/// Whether epilogue `e` reads the bias.
#[inline]
pub fn reads_bias(e: u32) -> bool {
    matches!(e, EPI_BIAS | EPI_BIAS_RELU | EPI_BIAS_TANH)
}

/// Whether epilogue `e` reads the auxiliary operand (the activation's output of a backward pass).
#[inline]
pub fn reads_aux(e: u32) -> bool {
    matches!(e, EPI_RELU_MASK | EPI_TANH_GRAD)
}

/// The epilogue of a hidden layer's forward product under activation `act` ([`crate::mlp::ACT_RELU`] or
/// [`crate::mlp::ACT_TANH`]).
#[inline]
pub fn forward_epilogue(act: u32) -> u32 {
    if act == crate::mlp::ACT_TANH { EPI_BIAS_TANH } else { EPI_BIAS_RELU }
}

/// The epilogue of the product that carries a gradient back through a hidden layer's activation `act`.
#[inline]
pub fn backward_epilogue(act: u32) -> u32 {
    if act == crate::mlp::ACT_TANH { EPI_TANH_GRAD } else { EPI_RELU_MASK }
}

/// The activation code of a hidden layer's forward epilogue `e`.
#[inline]
pub fn epilogue_activation(e: u32) -> u32 {
    if matches!(e, EPI_BIAS_TANH | EPI_TANH_GRAD) { crate::mlp::ACT_TANH } else { crate::mlp::ACT_RELU }
}

/// A strided view into one of the launch's buffers: element `(r, c)` is
/// `buffers[buf][off + r * row + c * col]`. For `A` the rows are `m` and the columns `k`; for `B` the rows
/// are `k` and the columns `n`; a bias uses `off + n * col`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Operand {
    /// Index into the launch's buffer addresses ([`NO_BUFFER`]: absent).
    pub buf: u32,
    /// First element.
    pub off: u32,
    /// Stride between rows.
    pub row: u32,
    /// Stride between columns.
    pub col: u32,
}

impl Operand {
    /// An absent operand.
    pub const NONE: Self = Self { buf: NO_BUFFER, off: 0, row: 0, col: 0 };

    /// A row-major view: rows `row` apart, columns adjacent.
    pub const fn rows(buf: u32, off: usize, row: usize) -> Self {
        Self { buf, off: off as u32, row: row as u32, col: 1 }
    }

    /// A column-major view (the transpose of a row-major matrix with rows `col` apart).
    pub const fn cols(buf: u32, off: usize, col: usize) -> Self {
        Self { buf, off: off as u32, row: 1, col: col as u32 }
    }

    /// Index of element `(r, c)` in its buffer.
    #[inline]
    pub fn at(&self, r: usize, c: usize) -> usize {
        self.off as usize + r * self.row as usize + c * self.col as usize
    }
}

/// One product of a launch: `C(m, n)` for `m < m_pad`, `n < n_pad`; zero outside the active `m x n`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Gemm {
    /// Left operand, `m x k`.
    pub a: Operand,
    /// Right operand, `k x n`.
    pub b: Operand,
    /// Bias per column `n` ([`EPI_BIAS`], [`EPI_BIAS_RELU`]).
    pub bias: Operand,
    /// The ReLU output the mask reads ([`EPI_RELU_MASK`]), shaped like `C`.
    pub aux: Operand,
    /// Output.
    pub c: Operand,
    /// Active rows.
    pub m: u32,
    /// Active columns.
    pub n: u32,
    /// Active inner length.
    pub k: u32,
    /// Rows written.
    pub m_pad: u32,
    /// Columns written.
    pub n_pad: u32,
    /// One of the `EPI_*` codes.
    pub epilogue: u32,
    /// Keeps the size a multiple of 16.
    pub _pad: [u32; 2],
}

const _: () = assert!(core::mem::size_of::<Gemm>() == 112);

impl Gemm {
    /// Output tiles of the GPU launch: (row tiles, column tiles); narrow products ([`NARROW`] columns or
    /// fewer) take [`NARROW_ROWS`] rows per tile.
    pub fn tiles(&self) -> (usize, usize) {
        if self.n_pad as usize <= NARROW {
            ((self.m_pad as usize).div_ceil(NARROW_ROWS), 1)
        } else {
            ((self.m_pad as usize).div_ceil(TILE), (self.n_pad as usize).div_ceil(TILE))
        }
    }

    /// Floats of buffer `buf` this product may touch (1 + the largest index), for length checks.
    pub fn extent(&self, buf: u32) -> usize {
        let reach = |o: &Operand, rows: u32, cols: u32| {
            if o.buf != buf || rows == 0 || cols == 0 { 0 } else { o.at(rows as usize - 1, cols as usize - 1) + 1 }
        };
        let (m, n, k) = (self.m, self.n, self.k);
        let bias = if reads_bias(self.epilogue) { reach(&self.bias, 1, n) } else { 0 };
        let aux = if reads_aux(self.epilogue) { reach(&self.aux, m, n) } else { 0 };
        reach(&self.a, m, k).max(reach(&self.b, k, n)).max(bias).max(aux).max(reach(&self.c, self.m_pad, self.n_pad))
    }
}

/// The value stored at `(m, n)` from the accumulated product `acc`, the column's bias and the
/// auxiliary value (each 0 where the epilogue does not read it); 0 outside the active sizes.
#[inline]
pub fn finish(g: &Gemm, m: usize, n: usize, acc: f32, bias: f32, aux: f32) -> f32 {
    if m >= g.m as usize || n >= g.n as usize {
        return 0.0;
    }
    match g.epilogue {
        EPI_BIAS => acc + bias,
        EPI_BIAS_RELU => crate::mlp::activate(crate::mlp::ACT_RELU, acc + bias),
        EPI_BIAS_TANH => crate::mlp::activate(crate::mlp::ACT_TANH, acc + bias),
        EPI_RELU_MASK => crate::mlp::activate_grad(crate::mlp::ACT_RELU, acc, aux),
        EPI_TANH_GRAD => crate::mlp::activate_grad(crate::mlp::ACT_TANH, acc, aux),
        _ => acc,
    }
}

/// `fma(a, b, c)`, correctly rounded: the PTX `fma.rn.f32` on the GPU, `libm::fmaf` on the host (the
/// host backend uses `f32::mul_add` in its hot loops: the same correctly rounded result).
#[inline]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::nvptx_ops::fma_f32(a, b, c)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::fmaf(a, b, c)
    }
}

/// The reference of one product, element by element in the contract's order (slow; for tests and for tiny
/// products). `read(buf, index)` reads buffer `buf`; `write(index, value)` stores into `C`'s buffer.
pub fn reference(g: &Gemm, read: impl Fn(u32, usize) -> f32, mut write: impl FnMut(usize, f32)) {
    for m in 0..g.m_pad as usize {
        for n in 0..g.n_pad as usize {
            let active = m < g.m as usize && n < g.n as usize;
            let mut acc = 0.0f32;
            let (mut bias, mut aux) = (0.0, 0.0);
            if active {
                for k in 0..g.k as usize {
                    acc = fma(read(g.a.buf, g.a.at(m, k)), read(g.b.buf, g.b.at(k, n)), acc);
                }
                if reads_bias(g.epilogue) {
                    bias = read(g.bias.buf, g.bias.at(0, n));
                }
                if reads_aux(g.epilogue) {
                    aux = read(g.aux.buf, g.aux.at(m, n));
                }
            }
            write(g.c.at(m, n), finish(g, m, n, acc, bias, aux));
        }
    }
}

/// Columns up to which a product takes the narrow tiles ([`NARROW_ROWS`] x `NARROW` outputs per block).
pub const NARROW: usize = 4;
/// Rows of a narrow tile (256 threads: one output each).
pub const NARROW_ROWS: usize = 256 / NARROW;
/// Floats between two `k` rows of a wide tile's staged operands: [`TILE`] plus 4, so that the transposing
/// stores of a row-major operand (16 consecutive `k` of one row per half warp) fall into 8 banks, each hit
/// twice, instead of one bank hit 16 times; a multiple of 4 keeps the 16-byte vector reads aligned.
pub const TILE_ROW: usize = TILE + 4;
/// Floats of shared memory a GEMM block uses (the larger of the two tile shapes; the wide one keeps two
/// stages of its operands).
pub const GEMM_SHARED: usize = 2 * 2 * TILE_K * TILE_ROW;

/// Four floats, 16-byte aligned (one vector load): the tiles', the chains' and the walk units' operands.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
#[cfg_attr(target_arch = "nvptx64", allow(dead_code, reason = "the GPU loads vectors with `ld.shared.v4`"))]
pub(crate) struct F4(pub(crate) [f32; 4]);

/// One GPU block's tile of problem `g` (`tile` counts row-major over [`Gemm::tiles`]): wide products get
/// 64 x 64 outputs per block (256 threads, each a 4 x 4 patch), narrow ones ([`NARROW`] columns or fewer)
/// 64 x 4 (an output per thread). `A` and `B` are staged through `smem` in steps of [`TILE_K`], the next step's
/// elements loaded into registers while the current step is computed.
///
/// # Safety
/// `buffers` holds a valid device pointer for every buffer index `g` names, each long enough for
/// [`Gemm::extent`]; `smem` is this block's shared memory of [`GEMM_SHARED`] floats, 16-byte aligned; every
/// thread of the block calls this (it synchronizes the block).
#[cfg(target_arch = "nvptx64")]
#[inline]
pub unsafe fn gpu_tile(g: &Gemm, tile: usize, buffers: *const u64, smem: *mut f32, thread: usize) {
    let (tiles_m, tiles_n) = g.tiles();
    if tile >= tiles_m * tiles_n {
        return; // uniform over the block: no thread reaches a barrier
    }
    // SAFETY: the caller's contract.
    unsafe {
        if (g.n_pad as usize) <= NARROW {
            narrow_tile(g, tile, buffers, smem, thread);
        } else {
            wide_tile(g, tile / tiles_n * TILE, tile % tiles_n * TILE, buffers, smem, thread);
        }
    }
}

/// Where a block's epilogue reads and writes: the output, bias and auxiliary buffers of its product, their
/// addresses read once (read per output, each store, which might alias the addresses, would make the
/// next output's reads wait for it).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct Epilogue {
    c: *mut f32,
    bias: *const f32,
    aux: *const f32,
}

#[cfg(target_arch = "nvptx64")]
impl Epilogue {
    /// The buffers of `g` (null where its epilogue reads none).
    ///
    /// # Safety
    /// As [`gpu_tile`].
    #[inline]
    unsafe fn of(g: &Gemm, buffers: *const u64) -> Self {
        // SAFETY: the caller's contract: every buffer index `g` uses is in the addresses.
        unsafe {
            let ptr = |o: &Operand, used: bool| {
                if used { *buffers.add(o.buf as usize) as *const f32 } else { core::ptr::null() }
            };
            Self {
                c: *buffers.add(g.c.buf as usize) as *mut f32,
                bias: ptr(&g.bias, reads_bias(g.epilogue)),
                aux: ptr(&g.aux, reads_aux(g.epilogue)),
            }
        }
    }

    /// The bias and the auxiliary value that output `(m, n)`'s epilogue reads (0 where it reads none, and
    /// outside the active sizes).
    ///
    /// # Safety
    /// As [`gpu_tile`].
    #[inline]
    unsafe fn inputs(&self, g: &Gemm, m: usize, n: usize) -> (f32, f32) {
        let active = m < g.m as usize && n < g.n as usize;
        // SAFETY: the caller's contract; the bias and aux indices are inside their extents for active outputs.
        unsafe {
            let bias = if active && !self.bias.is_null() { *self.bias.add(g.bias.at(0, n)) } else { 0.0 };
            let aux = if active && !self.aux.is_null() { *self.aux.add(g.aux.at(m, n)) } else { 0.0 };
            (bias, aux)
        }
    }

    /// Stores output `(m, n)` from its accumulator and its [`Self::inputs`].
    ///
    /// # Safety
    /// As [`gpu_tile`].
    #[inline]
    unsafe fn store(&self, g: &Gemm, m: usize, n: usize, acc: f32, (bias, aux): (f32, f32)) {
        // SAFETY: the caller's contract.
        unsafe { *self.c.add(g.c.at(m, n)) = finish(g, m, n, acc, bias, aux) };
    }
}

/// Repeats `$body` with `$i` bound to each literal of the list: an unrolled loop whose indices are constants,
/// so arrays indexed by them stay in registers (a loop LLVM declines to unroll indexes them in local memory).
macro_rules! unrolled {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $( { let $i: usize = $n; $body } )*
    };
}
pub(crate) use unrolled;

/// The most `k` of a `gpu_short_rows` (nvptx only) product.
pub const SHORT_K: usize = 4;
/// Rows of a `gpu_short_rows` (nvptx only) call: the rows' inputs a thread loads ahead (8 x 5 floats; with
/// 16 rows `dqn_td` took 194 registers, two blocks a multiprocessor, and its 320 blocks two waves).
pub const SHORT_ROWS: usize = 8;

/// Rows `m0 .. m0 + SHORT_ROWS` (those below `m_pad`) of product `g`, whose `k` is at most [`SHORT_K`] (an
/// output layer's gradient times its weights), by `threads` threads of a block: thread `thread` takes
/// columns `thread, thread + threads, ..`. Each element is [`reference`]'s (the same reads, order and
/// epilogue). A thread loads its column's `B` values and its rows' `A`, bias and aux values before its
/// first store (the stores may alias the inputs' buffers, so loads after one would wait for it). `a`, `b`,
/// `bias`, `aux`, `c` are the addresses of the buffers `g` names.
///
/// # Safety
/// The buffers hold every element `g` reads and writes for these rows; `g.k <= SHORT_K`; writes made to `A`
/// by other threads of the block are ordered before this call (a barrier).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub unsafe fn gpu_short_rows(
    g: &Gemm,
    [a, b, bias, aux]: [*const f32; 4],
    c: *mut f32,
    m0: usize,
    thread: usize,
    threads: usize,
) {
    let (m, n_act, k) = (g.m as usize, g.n as usize, g.k as usize);
    let (with_bias, with_aux) = (reads_bias(g.epilogue), reads_aux(g.epilogue));
    let mut n = thread;
    // SAFETY: the caller's contract; every read is of an active element, every write below the padded sizes.
    unsafe {
        while n < g.n_pad as usize {
            let col = n < n_act;
            let mut bk = [0.0f32; SHORT_K];
            unrolled!(kk in [0, 1, 2, 3] {
                if col && kk < k {
                    bk[kk] = *b.add(g.b.at(kk, n));
                }
            });
            let bn = if col && with_bias { *bias.add(g.bias.at(0, n)) } else { 0.0 };
            let mut av = [[0.0f32; SHORT_K]; SHORT_ROWS];
            let mut xv = [0.0f32; SHORT_ROWS];
            unrolled!(r in [0, 1, 2, 3, 4, 5, 6, 7] {
                if m0 + r < m && col {
                    unrolled!(kk in [0, 1, 2, 3] {
                        if kk < k {
                            av[r][kk] = *a.add(g.a.at(m0 + r, kk));
                        }
                    });
                    if with_aux {
                        xv[r] = *aux.add(g.aux.at(m0 + r, n));
                    }
                }
            });
            unrolled!(r in [0, 1, 2, 3, 4, 5, 6, 7] {
                let row = m0 + r;
                if row < g.m_pad as usize {
                    let mut acc = 0.0f32;
                    if row < m && col {
                        unrolled!(kk in [0, 1, 2, 3] {
                            if kk < k {
                                acc = fma(av[r][kk], bk[kk], acc);
                            }
                        });
                    }
                    *c.add(g.c.at(row, n)) = finish(g, row, n, acc, bn, xv[r]);
                }
            });
            n += threads;
        }
    }
}

/// 64 x 64 outputs from `(m0, n0)`: thread `(tx, ty)` owns rows `m0 + 4 ty ..` and columns `n0 + 4 tx ..`.
/// Two stages of shared memory, [`TILE_K`] steps of `k` each: while step `s` is computed from one, step
/// `s + 1` (loaded from global memory into registers during the previous step) is stored into the other, so
/// one barrier per step suffices. Shared memory is read and written through its 32-bit window addresses.
#[cfg(target_arch = "nvptx64")]
#[inline]
unsafe fn wide_tile(g: &Gemm, m0: usize, n0: usize, buffers: *const u64, smem: *mut f32, thread: usize) {
    use crate::nvptx_ops::{lds4, shared_addr, sts};
    use core::arch::nvptx::_syncthreads;
    const STAGE: u32 = (2 * TILE_K * TILE_ROW) as u32;
    const PER_THREAD: usize = TILE * TILE_K / GEMM_THREADS as usize;
    const _: () = assert!(PER_THREAD == 4, "the unrolled loops below are written for 4 elements a thread");
    let (tx, ty) = (thread % 16, thread / 16);
    let (m_act, n_act, k_act) = (g.m as usize, g.n as usize, g.k as usize);
    let base = shared_addr(smem);
    // SAFETY: the caller's contract; every global index is checked against the active sizes, every shared
    // address stays inside the 2 stages x 2 x TILE_K x TILE_ROW floats of this path, and the vector reads
    // are 16-byte aligned (4-float offsets from an aligned base).
    unsafe {
        let buf = |o: &Operand| *buffers.add(o.buf as usize) as *const f32;
        let (a_base, b_base) = (buf(&g.a), buf(&g.b));
        // Staging slot of this thread's q-th element: A(m, k) goes to a_s[kk * TILE_ROW + r], B(k, n) to
        // b_s[kk * TILE_ROW + c] (b_s = a_s + TILE_K * TILE_ROW); consecutive threads walk each operand's
        // unit stride.
        let a_slot = |q: usize| {
            let idx = thread + GEMM_THREADS as usize * q;
            if g.a.col == 1 { (idx / TILE_K, idx % TILE_K) } else { (idx % TILE, idx / TILE) }
        };
        let b_slot = |q: usize| {
            let idx = thread + GEMM_THREADS as usize * q;
            if g.b.col == 1 { (idx % TILE, idx / TILE) } else { (idx / TILE_K, idx % TILE_K) }
        };
        let fetch = |k0: usize| {
            let (mut av, mut bv) = ([0.0f32; PER_THREAD], [0.0f32; PER_THREAD]);
            unrolled!(q in [0, 1, 2, 3] {
                let (r, kk) = a_slot(q);
                if m0 + r < m_act && k0 + kk < k_act {
                    av[q] = *a_base.add(g.a.at(m0 + r, k0 + kk));
                }
                let (c, kk) = b_slot(q);
                if n0 + c < n_act && k0 + kk < k_act {
                    bv[q] = *b_base.add(g.b.at(k0 + kk, n0 + c));
                }
            });
            (av, bv)
        };
        let put = |stage: u32, (av, bv): ([f32; PER_THREAD], [f32; PER_THREAD])| {
            unrolled!(q in [0, 1, 2, 3] {
                let (r, kk) = a_slot(q);
                sts(stage + 4 * (kk * TILE_ROW + r) as u32, av[q]);
                let (c, kk) = b_slot(q);
                sts(stage + 4 * ((TILE_K + kk) * TILE_ROW + c) as u32, bv[q]);
            });
        };
        let mut acc = [[0.0f32; 4]; 4];
        let mut k0 = 0;
        let mut stage = 0;
        put(base, fetch(0));
        _syncthreads();
        let (a_t, b_t) = (4 * (4 * ty) as u32, 4 * (TILE_K * TILE_ROW + 4 * tx) as u32);
        while k0 < k_act {
            let more = k0 + TILE_K < k_act;
            let next = if more { fetch(k0 + TILE_K) } else { ([0.0; PER_THREAD], [0.0; PER_THREAD]) };
            let s = base + stage * 4 * STAGE;
            let load =
                |kk: usize| (lds4(s + a_t + (4 * kk * TILE_ROW) as u32), lds4(s + b_t + (4 * kk * TILE_ROW) as u32));
            // Step kk's operands are read before step kk - 1's products: the loads' latency hides behind FMAs.
            let mut cur = load(0);
            unrolled!(kk in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
                let ahead = if kk + 1 < TILE_K { load(kk + 1) } else { cur };
                let (av, bv) = cur;
                unrolled!(i in [0, 1, 2, 3] {
                    unrolled!(j in [0, 1, 2, 3] {
                        acc[i][j] = fma(av[i], bv[j], acc[i][j]);
                    });
                });
                cur = ahead;
            });
            if more {
                // The other stage was last read in the previous step, which every thread has left (barrier).
                put(base + (1 - stage) * 4 * STAGE, next);
            }
            _syncthreads();
            stage = 1 - stage;
            k0 += TILE_K;
        }
        // Every epilogue input of the patch is loaded before the first store (a thread issues in order, and
        // a store may alias a later load: one load and store at a time waited a round trip per output).
        let out = Epilogue::of(g, buffers);
        let mut inputs = [[(0.0f32, 0.0f32); 4]; 4];
        let stored = |i: usize, j: usize| (m0 + 4 * ty + i < g.m_pad as usize) && (n0 + 4 * tx + j < g.n_pad as usize);
        unrolled!(i in [0, 1, 2, 3] {
            unrolled!(j in [0, 1, 2, 3] {
                if stored(i, j) {
                    inputs[i][j] = out.inputs(g, m0 + 4 * ty + i, n0 + 4 * tx + j);
                }
            });
        });
        unrolled!(i in [0, 1, 2, 3] {
            unrolled!(j in [0, 1, 2, 3] {
                if stored(i, j) {
                    out.store(g, m0 + 4 * ty + i, n0 + 4 * tx + j, acc[i][j], inputs[i][j]);
                }
            });
        });
    }
}

/// [`NARROW_ROWS`] x [`NARROW`] outputs from row `tile x NARROW_ROWS`: thread t owns output
/// `(t / NARROW, t % NARROW)`; all 256 threads stage the operands.
#[cfg(target_arch = "nvptx64")]
#[inline]
unsafe fn narrow_tile(g: &Gemm, tile: usize, buffers: *const u64, smem: *mut f32, thread: usize) {
    use core::arch::nvptx::_syncthreads;
    const A_ROW: usize = TILE_K + 1; // padded rows: threads of different rows read different banks
    const A_PER_THREAD: usize = NARROW_ROWS * TILE_K / 256;
    let m0 = tile * NARROW_ROWS;
    let (row, col) = (thread / NARROW, thread % NARROW);
    let (m_act, n_act, k_act) = (g.m as usize, g.n as usize, g.k as usize);
    // SAFETY: the caller's contract; every global index is checked against the active sizes and every shared
    // index stays inside GEMM_SHARED floats.
    unsafe {
        let buf = |o: &Operand| *buffers.add(o.buf as usize) as *const f32;
        let (a_base, b_base) = (buf(&g.a), buf(&g.b));
        let (a_s, b_s) = (smem, smem.add(NARROW_ROWS * A_ROW));
        let a_slot = |q: usize| {
            let idx = thread + 256 * q;
            if g.a.col == 1 { (idx / TILE_K, idx % TILE_K) } else { (idx % NARROW_ROWS, idx / NARROW_ROWS) }
        };
        // B: TILE_K x NARROW elements, one per thread below 64.
        let (b_k, b_c) = (thread / NARROW, thread % NARROW);
        let fetch = |k0: usize| {
            let mut av = [0.0f32; A_PER_THREAD];
            for (q, a) in av.iter_mut().enumerate() {
                let (r, kk) = a_slot(q);
                if m0 + r < m_act && k0 + kk < k_act {
                    *a = *a_base.add(g.a.at(m0 + r, k0 + kk));
                }
            }
            let b = if thread < TILE_K * NARROW && b_c < n_act && k0 + b_k < k_act {
                *b_base.add(g.b.at(k0 + b_k, b_c))
            } else {
                0.0
            };
            (av, b)
        };
        let mut acc = 0.0f32;
        let mut k0 = 0;
        let (mut a_next, mut b_next) = fetch(0);
        while k0 < k_act {
            for (q, &a) in a_next.iter().enumerate() {
                let (r, kk) = a_slot(q);
                *a_s.add(r * A_ROW + kk) = a;
            }
            if thread < TILE_K * NARROW {
                *b_s.add(thread) = b_next;
            }
            _syncthreads();
            if k0 + TILE_K < k_act {
                (a_next, b_next) = fetch(k0 + TILE_K);
            }
            for kk in 0..TILE_K {
                acc = fma(*a_s.add(row * A_ROW + kk), *b_s.add(kk * NARROW + col), acc);
            }
            _syncthreads();
            k0 += TILE_K;
        }
        let m = m0 + row;
        if m < g.m_pad as usize && col < g.n_pad as usize {
            let out = Epilogue::of(g, buffers);
            out.store(g, m, col, acc, out.inputs(g, m, col));
        }
    }
}
