//! The CPU backend of [`gpu_kernels::tile`]: every element of every product of a plan in the contract's
//! order (`acc = fma(A(m, k), B(k, n), acc)` for k ascending, then the epilogue), so the bits equal the GPU
//! tiles' (NaN payloads aside). A product runs in register blocks of 6 rows x 16 columns (AVX2 + FMA) or x 32
//! (AVX-512, for products of more than 16 columns), the columns in SIMD lanes and k sequential
//! (`f32::mul_add` where the CPU has neither: all correctly rounded); `A` is read where it lies, `B` packed
//! once per product, and a launch's products (and a large product's row blocks) run in parallel. The
//! epilogue's loops run in AVX-512 or AVX2 instances where the CPU has them (`epilogue`: the same bits).

use gpu_kernels::batch::observe_env;
use gpu_kernels::mlp::Layout;
use gpu_kernels::mlp::{ACT_TANH, activate, activate_grad};
use gpu_kernels::net::{NetArgs, Work, gradient};
use gpu_kernels::tile::{
    EPI_BIAS, EPI_BIAS_RELU, EPI_BIAS_TANH, EPI_RELU_MASK, EPI_TANH_GRAD, Gemm, finish, reads_aux, reads_bias,
};
use rayon::prelude::*;

use super::env::PolicyView;
use crate::HostError;

/// Rows of a register block. Its columns are 16 (12 AVX2 registers of accumulators, 2 for `B`'s row and 1
/// for the broadcast `A` element: 15 of 16) or, where the CPU has AVX-512 and the product more than 16
/// columns, 32 (12 of the 32 AVX-512 registers: twice the lanes per instruction).
const MR: usize = 6;
/// The narrow block's columns.
const NR: usize = 16;
/// The wide block's columns (AVX-512).
const NR_WIDE: usize = 32;

/// Whether this CPU runs the wide (AVX-512) blocks.
fn wide_blocks() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One launch's buffers as raw parts, shared by the threads that run its products. Every product reads and
/// writes through them, never through references: a product's output region lies in a buffer whose other
/// regions other products read. Sound because a launch's products write disjoint regions that no product of
/// the launch reads (the contract the GPU launch relies on too; checked in debug builds by [`disjoint`]), and
/// every index is inside its buffer ([`crate::plan::check`]).
struct RawBuffers {
    parts: Vec<(*mut f32, usize)>,
}

// SAFETY: the pointers are the launch's buffers, borrowed mutably by `run` for the `RawBuffers`' lifetime;
// the threads touch disjoint elements when they write (see `RawBuffers`).
unsafe impl Send for RawBuffers {}
// SAFETY: as for `Send`.
unsafe impl Sync for RawBuffers {}

impl RawBuffers {
    /// Element `i` of buffer `buf`.
    ///
    /// # Safety
    /// `i` is inside the buffer and no product of the launch writes it.
    #[inline]
    unsafe fn read(&self, buf: u32, i: usize) -> f32 {
        let (p, len) = self.parts[buf as usize];
        debug_assert!(i < len);
        // SAFETY: in bounds and not written concurrently (the caller's contract).
        unsafe { *p.add(i) }
    }

    /// Stores `x` at element `i` of buffer `buf`.
    ///
    /// # Safety
    /// `i` is inside the buffer, in the output region of the one product that calls this.
    #[inline]
    unsafe fn write(&self, buf: u32, i: usize, x: f32) {
        let (p, len) = self.parts[buf as usize];
        debug_assert!(i < len);
        // SAFETY: in bounds; only this product's thread touches the element (the caller's contract).
        unsafe { *p.add(i) = x };
    }
}

/// Where a row block's `A` lies: element `(i, kk)` of the block at `a + rows[i] + kk * col` of a buffer of
/// `len` floats (rows past the product's last repeat its last row, so every read is inside the product's
/// operand).
struct RowBlock {
    a: *const f32,
    len: usize,
    rows: [usize; MR],
    col: usize,
}

/// One `MR x W` block of accumulators: `acc[i][j] = fma(A(i, kk), bp[kk * stride + j], acc[i][j])` for kk
/// ascending from `acc = 0` (the contract's chain per element; the lanes are columns, k stays sequential).
/// `bp` is the packed `B` from the block's first column (`k` rows of `stride`). `W` is [`NR`] (AVX2 where
/// the CPU has it) or [`NR_WIDE`] (AVX-512 where it has that); `f32::mul_add` otherwise, the same bits.
///
/// # Safety
/// `a`'s buffer is not written during the launch (the [`RawBuffers`] contract).
unsafe fn block<const W: usize>(a: &RowBlock, bp: &[f32], stride: usize, k: usize) -> [[f32; W]; MR] {
    assert!(k == 0 || a.rows.iter().all(|&r| r + (k - 1) * a.col < a.len));
    assert!(k == 0 || bp.len() >= (k - 1) * stride + W);
    #[cfg(target_arch = "x86_64")]
    {
        if W == NR_WIDE && std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the feature the function is compiled for; the reads are in bounds (asserted)
            // and not written concurrently (the caller's contract).
            let acc = unsafe { block_avx512(a, bp, stride, k) };
            return std::array::from_fn(|i| std::array::from_fn(|j| acc[i][j]));
        }
        if W == NR && std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            let acc = unsafe { block_avx2(a, bp, stride, k) };
            return std::array::from_fn(|i| std::array::from_fn(|j| acc[i][j]));
        }
    }
    let mut acc = [[0.0f32; W]; MR];
    for kk in 0..k {
        let b = &bp[kk * stride..kk * stride + W];
        for (row, &r) in acc.iter_mut().zip(&a.rows) {
            // SAFETY: in bounds (asserted) and not written concurrently (the caller's contract).
            let x = unsafe { *a.a.add(r + kk * a.col) };
            for (c, bj) in row.iter_mut().zip(b) {
                *c = x.mul_add(*bj, *c);
            }
        }
    }
    acc
}

/// An `MR x W` register block for one x86 vector width (two vectors of `W / 2` floats a row): [`block`]'s
/// loop with the ISA's FMA, the same bits.
macro_rules! fma_block {
    ($name:ident, $feature:literal, $w:expr, $vec:ident, $zero:ident, $load:ident, $set1:ident, $fma:ident,
     $store:ident) => {
        /// # Safety
        #[doc = concat!("The CPU has ", $feature, "; `a.rows[i] + (k - 1) * a.col < a.len` for every `i` and")]
        #[doc = concat!("`(k - 1) * stride + ", stringify!($w), " <= bp.len()` (where `k > 0`); `a`'s buffer is not")]
        /// written during the call.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $name(a: &RowBlock, bp: &[f32], stride: usize, k: usize) -> [[f32; $w]; MR] {
            use std::arch::x86_64::{$fma, $load, $set1, $store, $vec, $zero};
            const HALF: usize = $w / 2;
            let mut c: [[$vec; 2]; MR] = [[$zero(); 2]; MR];
            let bp = bp.as_ptr();
            for kk in 0..k {
                // SAFETY: in bounds by the caller's contract; unaligned loads.
                unsafe {
                    let p = bp.add(kk * stride);
                    let (b0, b1) = ($load(p), $load(p.add(HALF)));
                    for (ci, &r) in c.iter_mut().zip(&a.rows) {
                        let x = $set1(*a.a.add(r + kk * a.col));
                        ci[0] = $fma(x, b0, ci[0]);
                        ci[1] = $fma(x, b1, ci[1]);
                    }
                }
            }
            let mut acc = [[0.0f32; $w]; MR];
            for (row, ci) in acc.iter_mut().zip(&c) {
                // SAFETY: each row holds the block's width of floats (two vectors); unaligned stores.
                unsafe {
                    $store(row.as_mut_ptr(), ci[0]);
                    $store(row.as_mut_ptr().add(HALF), ci[1]);
                }
            }
            acc
        }
    };
}

fma_block!(
    block_avx512,
    "avx512f",
    NR_WIDE,
    __m512,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_storeu_ps
);
fma_block!(
    block_avx2,
    "avx2,fma",
    NR,
    __m256,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_storeu_ps
);

/// Product `g` of `t`'s launch, its `m_pad x n_pad` outputs stored where `g.c` says: register blocks of `MR`
/// rows x 16 or 32 columns ([`block`]) reading `A` where it lies, `B` packed once (its columns padded to a
/// multiple of the block's with zeros); row blocks in parallel where the product is large.
///
/// # Safety
/// `g` is a product of `t`'s launch, checked by [`crate::plan::check`], and the launch's products write
/// disjoint regions that none of them reads (the [`RawBuffers`] contract).
unsafe fn compute(g: &Gemm, t: &RawBuffers) {
    // SAFETY: the caller's contract, passed on.
    unsafe { if g.n as usize > NR && wide_blocks() { compute_in::<NR_WIDE>(g, t) } else { compute_in::<NR>(g, t) } }
}

/// [`compute`] in blocks of `W` columns.
///
/// # Safety
/// As [`compute`].
unsafe fn compute_in<const W: usize>(g: &Gemm, t: &RawBuffers) {
    let (m_pad, n_pad) = (g.m_pad as usize, g.n_pad as usize);
    if m_pad == 0 || n_pad == 0 {
        return;
    }
    // Outputs past the written region are never stored (as on the GPU), so rows and columns are clamped.
    let (m, n, k) = ((g.m as usize).min(m_pad), (g.n as usize).min(n_pad), g.k as usize);
    // Stores `xs` at row `r`, columns `j0 ..` of the output.
    let store = |r: usize, j0: usize, xs: &[f32]| {
        if g.c.col == 1 {
            let (p, len) = t.parts[g.c.buf as usize];
            let at = g.c.at(r, j0);
            assert!(at + xs.len() <= len);
            // SAFETY: in bounds (asserted), this product's output region.
            unsafe { std::ptr::copy_nonoverlapping(xs.as_ptr(), p.add(at), xs.len()) };
        } else {
            for (jj, &x) in xs.iter().enumerate() {
                // SAFETY: this product's output region, inside its buffer (checked).
                unsafe { t.write(g.c.buf, g.c.at(r, j0 + jj), x) };
            }
        }
    };
    let zeros = vec![0.0f32; n_pad];
    // Rows past the active ones are 0 (`finish`).
    for r in m.min(m_pad)..m_pad {
        store(r, 0, &zeros);
    }
    if m == 0 || n == 0 {
        for r in 0..m.min(m_pad) {
            store(r, 0, &zeros);
        }
        return;
    }
    let stride = n.div_ceil(W) * W;
    let mut packed = vec![0.0f32; k * stride];
    for (kk, row) in packed.chunks_mut(stride).enumerate() {
        for (j, x) in row[..n].iter_mut().enumerate() {
            // SAFETY: `B` inside its buffer (checked), not written during the launch.
            *x = unsafe { t.read(g.b.buf, g.b.at(kk, j)) };
        }
    }
    let bias: Vec<f32> = if reads_bias(g.epilogue) {
        // SAFETY: the bias inside its buffer (checked), not written during the launch.
        (0..n).map(|j| unsafe { t.read(g.bias.buf, g.bias.at(0, j)) }).collect()
    } else {
        vec![0.0; n]
    };
    let rows = |blk: usize| {
        let (a, a_len) = t.parts[g.a.buf as usize];
        let r0 = blk * MR;
        let mr = MR.min(m - r0);
        let rows = std::array::from_fn(|i| g.a.at(r0 + i.min(mr - 1), 0));
        let ab = RowBlock { a, len: a_len, rows, col: g.a.col as usize };
        for j0 in (0..n).step_by(W) {
            // SAFETY: `A` is read-only during the launch (the function's contract).
            let acc = unsafe { block::<W>(&ab, packed.get(j0..).unwrap_or(&[]), stride, k) };
            let cols = W.min(n - j0);
            for (i, acc_row) in acc.iter().enumerate().take(mr) {
                let (r, bias) = (r0 + i, &bias[j0..j0 + cols]);
                if g.c.col == 1 {
                    // A row-major output: the epilogue writes the row's columns in place.
                    let (p, len) = t.parts[g.c.buf as usize];
                    let at = g.c.at(r, j0);
                    assert!(at + cols <= len);
                    // SAFETY: in bounds (asserted) and this product's own output region, which no other
                    // thread touches during the launch (this function's contract).
                    let out = unsafe { std::slice::from_raw_parts_mut(p.add(at), cols) };
                    // SAFETY: `g` is checked and its `aux` not written during the launch (as above).
                    unsafe { epilogue(g, t, r, j0, &acc_row[..cols], bias, out) };
                } else {
                    let mut out = [0.0f32; W];
                    // SAFETY: `g` is checked and its `aux` not written during the launch (as above).
                    unsafe { epilogue(g, t, r, j0, &acc_row[..cols], bias, &mut out[..cols]) };
                    store(r, j0, &out[..cols]);
                }
            }
        }
        for i in 0..mr {
            store(r0 + i, n, &zeros[n..]);
        }
    };
    // Row blocks in parallel only where a product is large: a launch's products already run in parallel.
    if m * n * k >= 1 << 20 {
        (0..m.div_ceil(MR)).into_par_iter().for_each(rows);
    } else {
        (0..m.div_ceil(MR)).for_each(rows);
    }
}

/// [`finish`] of the active outputs `(r, j0 ..)` of one block row `acc`, the epilogue chosen once per row
/// rather than per element so the loops are branch-free selects (ReLU signs are unpredictable).
///
/// # Safety
/// `g` is a checked product of `t`'s launch whose `aux` no product of the launch writes.
unsafe fn epilogue(g: &Gemm, t: &RawBuffers, r: usize, j0: usize, acc: &[f32], bias: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the feature; the caller's contract.
            return unsafe { epilogue_avx512(g, t, r, j0, acc, bias, out) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { epilogue_avx2(g, t, r, j0, acc, bias, out) };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { epilogue_rows(g, t, r, j0, acc, bias, out) }
}

/// [`epilogue_rows`] in AVX-512 lanes (tanh's polynomial and division sixteen at a time): the same IEEE
/// operations in the same order, so the same bits (Rust fuses no multiply and add on its own).
///
/// # Safety
/// The CPU has AVX-512F; [`epilogue`]'s contract.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_avx512(g: &Gemm, t: &RawBuffers, r: usize, j0: usize, acc: &[f32], bias: &[f32], out: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { epilogue_rows(g, t, r, j0, acc, bias, out) }
}

/// [`epilogue_rows`] in AVX2 lanes, as [`epilogue_avx512`].
///
/// # Safety
/// The CPU has AVX2; [`epilogue`]'s contract.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn epilogue_avx2(g: &Gemm, t: &RawBuffers, r: usize, j0: usize, acc: &[f32], bias: &[f32], out: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { epilogue_rows(g, t, r, j0, acc, bias, out) }
}

/// The loops of [`epilogue`], inlined into each of its instruction-set instances.
///
/// # Safety
/// [`epilogue`]'s contract.
#[inline(always)]
unsafe fn epilogue_rows(g: &Gemm, t: &RawBuffers, r: usize, j0: usize, acc: &[f32], bias: &[f32], out: &mut [f32]) {
    // SAFETY: the caller's contract.
    let aux = |jj: usize| unsafe { t.read(g.aux.buf, g.aux.at(r, j0 + jj)) };
    match g.epilogue {
        EPI_BIAS => {
            for ((o, &x), &b) in out.iter_mut().zip(acc).zip(bias) {
                *o = x + b;
            }
        }
        EPI_BIAS_RELU => {
            for ((o, &x), &b) in out.iter_mut().zip(acc).zip(bias) {
                let s = x + b;
                *o = if s > 0.0 { s } else { 0.0 };
            }
        }
        EPI_RELU_MASK => {
            for (jj, (o, &x)) in out.iter_mut().zip(acc).enumerate() {
                *o = if aux(jj) > 0.0 { x } else { 0.0 };
            }
        }
        EPI_BIAS_TANH => {
            for ((o, &x), &b) in out.iter_mut().zip(acc).zip(bias) {
                *o = activate(ACT_TANH, x + b);
            }
        }
        EPI_TANH_GRAD => {
            for (jj, (o, &x)) in out.iter_mut().zip(acc).enumerate() {
                *o = activate_grad(ACT_TANH, x, aux(jj));
            }
        }
        _ => out.copy_from_slice(acc),
    }
    debug_assert!(out.iter().enumerate().all(|(jj, o)| {
        let x = if reads_aux(g.epilogue) { aux(jj) } else { 0.0 };
        o.to_bits() == finish(g, r, j0 + jj, acc[jj], bias[jj], x).to_bits()
    }));
}

/// Stores each sample's output gradient (`per_sample[i].0`, sample `i` trial-major) in region `DOUT` of
/// the training buffer `work` laid out as `w`, and its loss in `losses[i]`: the CPU side of a learner's
/// loss kernel.
pub(crate) fn store_outputs<const O: usize>(
    w: &Work,
    work: &mut [f32],
    losses: &mut [f32],
    per_sample: Vec<([f32; O], f32)>,
) {
    for (i, (dout, loss)) in per_sample.into_iter().enumerate() {
        let at = w.at(Work::DOUT, i / w.batch) + (i % w.batch) * O;
        work[at..at + O].copy_from_slice(&dout);
        losses[i] = loss;
    }
}

/// Every parameter's gradient (`K x P`) from the chunk partials: [`gpu_kernels::net::gradient`]'s sums
/// (each parameter's partials added to 0.0 in chunk order), taken chunk by chunk over runs of parameters so
/// the additions run in SIMD lanes.
pub(crate) fn gradients(net: &NetArgs, partial: &[f32]) -> Vec<f32> {
    let stride = net.n_trials as usize * net.layout().params();
    let chunks = gpu_kernels::net::grad_chunks(net.batch as usize);
    assert!(partial.len() >= chunks * stride, "{} partials for {chunks} chunks of {stride}", partial.len());
    let mut out = vec![0.0f32; stride];
    out.par_chunks_mut(ELEMENT_CHUNK).enumerate().for_each(|(run, sums)| {
        let first = run * ELEMENT_CHUNK;
        for c in 0..chunks {
            let part = &partial[c * stride + first..c * stride + first + sums.len()];
            for (g, x) in sums.iter_mut().zip(part) {
                *g += x;
            }
        }
    });
    debug_assert!(out.iter().enumerate().all(|(i, g)| {
        let n_params = net.layout().params();
        g.to_bits() == gradient(net, i / n_params, i % n_params, partial).to_bits()
    }));
    out
}

/// Elements a thread takes at a time in per-parameter loops (gradients, Adam): enough that a task's loop
/// outweighs handing it out.
pub(crate) const ELEMENT_CHUNK: usize = 4_096;

/// Runs every product of `problems` (one launch's plan) on `bufs`, in parallel; each product's operands
/// are checked to lie inside their buffers first.
///
/// # Safety
/// No product may write an element that another product, or the product itself, reads or writes (the
/// contract of a launch's plan, which the GPU relies on too). [`crate::plan::stage_plan`]'s plans keep
/// it for every stage (`tests::stage_plans_write_what_no_product_reads`); debug builds check each launch.
pub(crate) unsafe fn run(problems: &[Gemm], bufs: &mut [&mut [f32]]) -> Result<(), HostError> {
    let lens: Vec<usize> = bufs.iter().map(|b| b.len()).collect();
    crate::plan::check("tile products", problems, &lens)?;
    debug_assert!(disjoint(problems), "a product of the launch writes what another reads or writes");
    let raw = RawBuffers { parts: bufs.iter_mut().map(|b| (b.as_mut_ptr(), b.len())).collect() };
    // SAFETY: the products are checked against the buffers, which `bufs` borrows mutably for the launch;
    // they write disjoint regions none of them reads (the caller's contract).
    problems.par_iter().for_each(|g| unsafe { compute(g, &raw) });
    Ok(())
}

/// Whether no product of a launch writes an element that another product reads or writes, judged by each
/// operand's span (its first to its last element) in its buffer, which can only overstate an overlap.
fn disjoint(problems: &[Gemm]) -> bool {
    let span = |o: &gpu_kernels::tile::Operand, rows: u32, cols: u32| {
        (rows > 0 && cols > 0).then(|| (o.buf, o.off as usize, o.at(rows as usize - 1, cols as usize - 1)))
    };
    let reads = |g: &Gemm| {
        let bias = reads_bias(g.epilogue).then(|| span(&g.bias, 1, g.n)).flatten();
        let aux = reads_aux(g.epilogue).then(|| span(&g.aux, g.m, g.n)).flatten();
        [span(&g.a, g.m, g.k), span(&g.b, g.k, g.n), bias, aux]
    };
    let meet = |x: (u32, usize, usize), y: (u32, usize, usize)| x.0 == y.0 && x.1 <= y.2 && y.1 <= x.2;
    problems.iter().enumerate().all(|(i, g)| {
        let Some(w) = span(&g.c, g.m_pad, g.n_pad) else { return true };
        problems.iter().enumerate().all(|(j, h)| {
            let writes = if i == j { None } else { span(&h.c, h.m_pad, h.n_pad) };
            !writes.into_iter().chain(reads(h).into_iter().flatten()).any(|x| meet(w, x))
        })
    })
}

/// The greedy walks of every trial's single env in `view` over `steps` bars from their current states
/// (`trials x steps`, trial-major), a thread per trial; `hiddens` are the trials' widths and `online` their
/// parameters.
pub(crate) fn walk_all(
    net: &NetArgs,
    hiddens: &[usize],
    online: &[f32],
    view: &PolicyView<'_>,
    steps: usize,
) -> Vec<u8> {
    let l = net.layout();
    let walks: Vec<Vec<u8>> = (0..hiddens.len())
        .into_par_iter()
        .map(|t| {
            let w = &online[t * l.params()..(t + 1) * l.params()];
            let mut state = view.states[t];
            walk_one(&l, w, hiddens[t], &view.params[t], &mut state, view.bars, view.features, steps)
        })
        .collect();
    walks.concat()
}

/// One trial's greedy walk on the CPU: observation, the three layers ([`WalkLayer`]), argmax of the first 3
/// outputs, env step, bar after bar; the GPU walk's sequence (`gpu_kernels::walk::greedy_walk`).
#[allow(clippy::too_many_arguments, reason = "one trial's network and env")]
fn walk_one(
    l: &Layout,
    w: &[f32],
    h: usize,
    params: &gpu_kernels::TrialParams,
    state: &mut gpu_kernels::EnvState,
    bars: &[gpu_kernels::Bar],
    features: &[f32],
    steps: usize,
) -> Vec<u8> {
    let layers: [WalkLayer; 3] = std::array::from_fn(|layer| WalkLayer::of(l, w, layer, h));
    let (mut obs, mut h1, mut h2, mut q) = (vec![0.0; l.input], vec![0.0; h], vec![0.0; h], vec![0.0; l.outputs]);
    let mut actions = Vec::with_capacity(steps);
    for _ in 0..steps {
        observe_env(params, state, bars, features, l.input - 3, &mut obs);
        layers[0].apply(&obs, &mut h1);
        layers[1].apply(&h1, &mut h2);
        layers[2].apply(&h2, &mut q);
        let a = gpu_kernels::mlp::argmax(&q) as u8;
        actions.push(a);
        gpu_kernels::env::walk_step_on_series(params, state, a, bars);
    }
    actions
}

/// Outputs of a [`WalkLayer`] accumulated together: 8 AVX2 registers of chains.
const WALK_COLS: usize = 64;

/// One layer of a trial's network packed for the walk: `W` transposed (`k` rows of the `n` outputs, padded
/// to a multiple of [`WALK_COLS`] with zeros), its bias and the activation that follows (`None`: the outputs).
struct WalkLayer {
    wt: Vec<f32>,
    stride: usize,
    k: usize,
    bias: Vec<f32>,
    act: Option<u32>,
}

impl WalkLayer {
    /// Layer `layer` of the network `w` (layout `l`) at hidden width `h`.
    fn of(l: &Layout, w: &[f32], layer: usize, h: usize) -> Self {
        let (wo, bo, k, row, n, act) = match layer {
            0 => (l.w1(), l.b1(), l.input, l.input, h, Some(l.activation)),
            1 => (l.w2(), l.b2(), h, l.hidden, h, Some(l.activation)),
            _ => (l.w3(), l.b3(), h, l.hidden, l.outputs, None),
        };
        let stride = n.div_ceil(WALK_COLS) * WALK_COLS;
        let mut wt = vec![0.0; k * stride];
        for (kk, wrow) in wt.chunks_mut(stride).enumerate() {
            for (j, x) in wrow[..n].iter_mut().enumerate() {
                *x = w[wo + j * row + kk];
            }
        }
        Self { wt, stride, k, bias: w[bo..bo + n].to_vec(), act }
    }

    /// Every output for the input row `x`: each the element [`gpu_kernels::net::dense_unit`] computes, in its
    /// order (`acc = fma(x[k], W(n, k), acc)`, k ascending, then bias and ReLU), [`WALK_COLS`] outputs'
    /// chains in SIMD lanes.
    fn apply(&self, x: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has the features the function is compiled for.
            unsafe { self.apply_avx2(x, out) };
            return;
        }
        self.apply_plain(x, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn apply_avx2(&self, x: &[f32], out: &mut [f32]) {
        self.apply_plain(x, out);
    }

    #[inline(always)]
    fn apply_plain(&self, x: &[f32], out: &mut [f32]) {
        let n = out.len();
        for n0 in (0..n).step_by(WALK_COLS) {
            let mut acc = [0.0f32; WALK_COLS];
            for (kk, &xk) in x[..self.k].iter().enumerate() {
                let wrow = &self.wt[kk * self.stride + n0..kk * self.stride + n0 + WALK_COLS];
                for (a, &wj) in acc.iter_mut().zip(wrow) {
                    *a = xk.mul_add(wj, *a);
                }
            }
            for ((o, a), b) in out[n0..].iter_mut().zip(&acc).zip(&self.bias[n0..]) {
                let s = a + b;
                // The activation as `dense_unit` applies it (ReLU: 0 unless the sum is above 0, NaN included).
                *o = match self.act {
                    Some(act) => activate(act, s),
                    None => s,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_kernels::tile::{
        EPI_BIAS_RELU, EPI_BIAS_TANH, EPI_NONE, EPI_RELU_MASK, EPI_TANH_GRAD, Gemm, Operand, reference,
    };

    use super::run;

    fn noise(seed: u32, n: usize) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let x = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)).wrapping_mul(2_246_822_519);
                (x >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect()
    }

    /// Products of odd sizes (not multiples of anything), strided and transposed operands and every
    /// epilogue: the packed, parallel CPU path gives the element-by-element reference's bits.
    #[test]
    fn cpu_products_equal_the_reference_bitwise() {
        // Sequential row blocks (the first two sizes) and parallel ones (m * n * k >= 2^20), in the narrow
        // blocks (n <= 16) and the wide ones (where the CPU has AVX-512); each ends in partial register
        // blocks of rows and of columns.
        // k = 0 (a gradient chunk past a trial's own batch) gives the epilogue of zeros.
        for (m, n, k) in [(37, 29, 53), (41, 13, 60), (131, 71, 120), (700, 13, 120), (9, 70, 0)] {
            products_equal_the_reference(m, n, k);
        }
    }

    fn products_equal_the_reference(m: usize, n: usize, k: usize) {
        let cases = [
            // X W^T + b, ReLU (a forward layer).
            Gemm {
                a: Operand::rows(0, 3, k + 2),
                b: Operand::cols(1, 5, k),
                bias: Operand::rows(1, 2, 0),
                c: Operand::rows(2, 1, n + 4),
                epilogue: EPI_BIAS_RELU,
                ..Gemm::default()
            },
            // Delta^T X (a weight gradient).
            Gemm {
                a: Operand::cols(0, 0, m + 1),
                b: Operand::rows(1, 7, n),
                c: Operand::rows(2, 0, n + 3),
                epilogue: EPI_NONE,
                ..Gemm::default()
            },
            // Delta W masked by a ReLU output (a backward pass).
            Gemm {
                a: Operand::rows(0, 0, k),
                b: Operand::rows(1, 0, n),
                aux: Operand::rows(1, 11, n + 1),
                c: Operand::rows(2, 0, n + 1),
                epilogue: EPI_RELU_MASK,
                ..Gemm::default()
            },
            // X W^T + b, Tanh.
            Gemm {
                a: Operand::rows(0, 3, k + 2),
                b: Operand::cols(1, 5, k),
                bias: Operand::rows(1, 2, 0),
                c: Operand::rows(2, 1, n + 4),
                epilogue: EPI_BIAS_TANH,
                ..Gemm::default()
            },
            // Delta W through a Tanh output.
            Gemm {
                a: Operand::rows(0, 0, k),
                b: Operand::rows(1, 0, n),
                aux: Operand::rows(1, 11, n + 1),
                c: Operand::rows(2, 0, n + 1),
                epilogue: EPI_TANH_GRAD,
                ..Gemm::default()
            },
        ];
        for (i, g) in cases.into_iter().enumerate() {
            let g = Gemm { m: m as u32, n: n as u32, k: k as u32, m_pad: m as u32 + 5, n_pad: n as u32 + 1, ..g };
            let a = noise(1 + i as u32, 100_000);
            let b = noise(7 + i as u32, 100_000);
            let mut want = vec![f32::NAN; 20_000];
            reference(&g, |buf, idx| if buf == 0 { a[idx] } else { b[idx] }, |idx, x| want[idx] = x);
            let (mut a2, mut b2, mut got) = (a.clone(), b.clone(), vec![f32::NAN; 20_000]);
            // SAFETY: one product, writing buffer 2, which it does not read.
            unsafe { run(&[g], &mut [&mut a2, &mut b2, &mut got]) }.unwrap();
            let differ = want.iter().zip(&got).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            assert_eq!(differ, 0, "case {i} ({m} x {n} x {k}): {differ} outputs differ from the reference");
            let written = got.iter().filter(|x| !x.is_nan()).count();
            assert_eq!(written, (m + 5) * (n + 1), "case {i}: every padded output is written once");
            assert!(k == 0 || got.iter().any(|x| *x != 0.0 && !x.is_nan()), "case {i}: all zero");
        }
    }

    /// Every instruction-set instance of the epilogue gives the bits of the plain loops, for every epilogue,
    /// over sums that reach both of tanh's branches and its tails (this CPU's instances only; the row of 37
    /// columns ends in a partial vector at 16 and at 8 lanes).
    #[test]
    fn epilogue_instances_agree_bitwise() {
        use super::{EPI_BIAS, RawBuffers, epilogue_rows};
        let n = 37;
        let acc: Vec<f32> = (0..n).map(|i| -12.0 + 24.0 * i as f32 / (n - 1) as f32).collect();
        let bias: Vec<f32> = noise(4, n).iter().map(|x| x * 0.2).collect();
        let mut aux: Vec<f32> = noise(5, n).iter().map(|x| 2.0 * x).collect();
        let t = RawBuffers { parts: vec![(aux.as_mut_ptr(), aux.len())] };
        for epi in [EPI_NONE, EPI_BIAS, EPI_BIAS_RELU, EPI_RELU_MASK, EPI_BIAS_TANH, EPI_TANH_GRAD] {
            let g = Gemm { m: 1, n: n as u32, aux: Operand::rows(0, 0, n), epilogue: epi, ..Gemm::default() };
            let mut want = vec![0.0f32; n];
            // SAFETY: `aux` holds the row's `n` elements and nothing writes it.
            unsafe { epilogue_rows(&g, &t, 0, 0, &acc, &bias, &mut want) };
            #[cfg(target_arch = "x86_64")]
            {
                let mut got = vec![0.0f32; n];
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has the feature; as above.
                    unsafe { super::epilogue_avx2(&g, &t, 0, 0, &acc, &bias, &mut got) };
                    assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "AVX2, epilogue {epi}");
                }
                if std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: as above.
                    unsafe { super::epilogue_avx512(&g, &t, 0, 0, &acc, &bias, &mut got) };
                    assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "AVX-512, epilogue {epi}");
                }
            }
            if epi == EPI_BIAS_TANH {
                assert!(want.iter().any(|&y| y.abs() < 0.5) && want.iter().any(|&y| y.abs() == 1.0), "both tails");
            }
        }
    }

    /// A product that reaches past its buffer is refused with the lengths, not run.
    #[test]
    fn short_buffers_are_refused() {
        let g = Gemm {
            a: Operand::rows(0, 0, 4),
            b: Operand::rows(1, 0, 4),
            c: Operand::rows(2, 0, 4),
            m: 4,
            n: 4,
            k: 4,
            m_pad: 4,
            n_pad: 4,
            ..Gemm::default()
        };
        let (mut a, mut b, mut c) = (vec![0.0; 16], vec![0.0; 15], vec![0.0; 16]);
        // SAFETY: refused before any product runs.
        let err = unsafe { run(&[g], &mut [&mut a, &mut b, &mut c]) }.unwrap_err();
        assert!(matches!(err, crate::HostError::Shape { expected: 16, got: 15, .. }), "{err}");
    }

    /// `run`'s contract holds for the stages' plans: for DQN (2 and 3 passes) and PPO networks, trials
    /// of equal and of mixed widths and batches (a batch of 64 beside 1,024), every stage's products write
    /// regions that no product of the stage reads or writes.
    #[test]
    fn stage_plans_write_what_no_product_reads() {
        use gpu_kernels::net::{NetArgs, NetTrial, Stage};
        let stages = [
            Stage::Act(0),
            Stage::Act(1),
            Stage::Act(2),
            Stage::Forward(0),
            Stage::Forward(1),
            Stage::Forward(2),
            Stage::Backward2,
            Stage::Backward1,
            Stage::Gradients,
        ];
        let trial = |hidden: u32, batch: u32, passes: u32| NetTrial { hidden, batch, passes, _pad: 0 };
        for (outputs, passes) in [(3usize, 2u32), (3, 3), (4, 1)] {
            for trials in [
                vec![trial(128, 1024, passes); 3],
                vec![trial(32, 64, passes), trial(128, 1024, passes), trial(7, 33, passes), trial(64, 1024, passes)],
            ] {
                let net = NetArgs::new(trials.len() as u32, 8, 54, 128, outputs, 1024, 500);
                for stage in stages {
                    let plan = crate::plan::stage_plan(&net, &trials, stage);
                    assert!(!plan.is_empty(), "{stage:?}");
                    assert!(super::disjoint(&plan), "{stage:?}, {outputs} outputs, {passes} passes, {trials:?}");
                }
            }
        }
        // The check sees an overlap: a product reading what another writes, and one writing its own input.
        let g =
            Gemm { a: Operand::rows(0, 0, 4), b: Operand::rows(1, 0, 4), c: Operand::rows(2, 0, 4), ..Gemm::default() };
        let g = Gemm { m: 4, n: 4, k: 4, m_pad: 4, n_pad: 4, ..g };
        let reads_output = Gemm { a: Operand::rows(2, 8, 4), ..g };
        assert!(super::disjoint(&[g]) && !super::disjoint(&[g, reads_output]));
        assert!(!super::disjoint(&[Gemm { c: Operand::rows(0, 0, 4), ..g }]));
    }
}
