//! The CPU backend of [`gpu_kernels::tile`]: every product of a table, element by element in the contract's
//! order (`acc = fma(A(m, k), B(k, n), acc)` for k ascending, then the epilogue), so the bits equal the GPU
//! tiles'. Rows run in parallel; `B` is packed once per product so the inner loop is a contiguous
//! multiply-add over the row's outputs (AVX2 + FMA where the CPU has them, `f32::mul_add` elsewhere: both
//! correctly rounded).

use gpu_kernels::tile::{EPI_BIAS, EPI_BIAS_RELU, EPI_RELU_MASK, Gemm, finish};
use rayon::prelude::*;

use crate::HostError;

/// `y[i] = fma(a, x[i], y[i])`.
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        unsafe { axpy_avx2(a, x, y) };
        return;
    }
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi = a.mul_add(*xi, *yi);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn axpy_avx2(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi = a.mul_add(*xi, *yi);
    }
}

/// The `m_pad x n_pad` outputs of `g` (row-major) from the buffer table.
fn compute(g: &Gemm, bufs: &[&[f32]]) -> Vec<f32> {
    let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
    let n_pad = g.n_pad as usize;
    let mut out = vec![0.0f32; g.m_pad as usize * n_pad];
    if m == 0 || n == 0 {
        return out;
    }
    let a = bufs[g.a.buf as usize];
    let b = bufs[g.b.buf as usize];
    let packed: Vec<f32> = (0..k).flat_map(|kk| (0..n).map(move |j| b[g.b.at(kk, j)])).collect();
    let bias: Vec<f32> = if matches!(g.epilogue, EPI_BIAS | EPI_BIAS_RELU) {
        (0..n).map(|j| bufs[g.bias.buf as usize][g.bias.at(0, j)]).collect()
    } else {
        vec![0.0; n]
    };
    let row = |(r, row): (usize, &mut [f32])| {
        let acc = &mut row[..n];
        for kk in 0..k {
            axpy(a[g.a.at(r, kk)], &packed[kk * n..(kk + 1) * n], acc);
        }
        for j in 0..n {
            let aux = if g.epilogue == EPI_RELU_MASK { bufs[g.aux.buf as usize][g.aux.at(r, j)] } else { 0.0 };
            row[j] = finish(g, r, j, row[j], bias[j], aux);
        }
    };
    if m * n * k >= 1 << 16 {
        out.par_chunks_mut(n_pad).take(m).enumerate().for_each(row);
    } else {
        out.chunks_mut(n_pad).take(m).enumerate().for_each(row);
    }
    out
}

/// Fails unless every buffer `problems` touch is long enough.
pub(crate) fn check(kernel: &str, problems: &[Gemm], lens: &[usize]) -> Result<(), HostError> {
    for (buf, &len) in lens.iter().enumerate() {
        let needed = problems.iter().map(|g| g.extent(buf as u32)).max().unwrap_or(0);
        if needed > len {
            return Err(HostError::Shape { what: format!("{kernel}: buffer {buf}"), expected: needed, got: len });
        }
    }
    for g in problems {
        for o in [g.a, g.b, g.c] {
            if o.buf as usize >= lens.len() {
                return Err(HostError::Config(format!("{kernel}: buffer index {} out of the table", o.buf)));
            }
        }
    }
    Ok(())
}

/// Runs every product of `problems` (one launch's table: no product reads what another writes).
pub(crate) fn run(problems: &[Gemm], bufs: &mut [&mut [f32]]) -> Result<(), HostError> {
    let lens: Vec<usize> = bufs.iter().map(|b| b.len()).collect();
    check("tile products", problems, &lens)?;
    let outputs: Vec<Vec<f32>> = {
        let read: Vec<&[f32]> = bufs.iter().map(|b| &**b).collect();
        problems.par_iter().map(|g| compute(g, &read)).collect()
    };
    for (g, out) in problems.iter().zip(outputs) {
        let c = &mut *bufs[g.c.buf as usize];
        let n_pad = g.n_pad as usize;
        for (r, row) in out.chunks(n_pad.max(1)).enumerate() {
            for (j, &x) in row.iter().enumerate() {
                c[g.c.at(r, j)] = x;
            }
        }
    }
    Ok(())
}
