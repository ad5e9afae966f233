//! The plans of a learner's stages (their products, [`gpu_kernels::net::plan`]), their FLOP counts and the
//! checks every backend applies before running one: backend-neutral, used by the CPU tiles and the CUDA
//! plans alike.

use gpu_kernels::net::{BACKWARD, FORWARD, NetArgs, NetTrial, Stage, plan};
use gpu_kernels::tile::{EPI_BIAS, EPI_BIAS_RELU, EPI_RELU_MASK, Gemm};

use crate::HostError;

/// The products of `stage` ([`gpu_kernels::net::plan`]).
pub(crate) fn stage_plan(net: &NetArgs, trials: &[NetTrial], stage: Stage) -> Vec<Gemm> {
    let mut products = Vec::new();
    plan(net, trials, stage, |g| products.push(g));
    products
}

/// Floating-point operations of `stage`'s products (2 per multiply-add of the active sizes).
pub(crate) fn stage_flops(net: &NetArgs, trials: &[NetTrial], stage: Stage) -> u64 {
    stage_plan(net, trials, stage).iter().map(|g| 2 * u64::from(g.m) * u64::from(g.n) * u64::from(g.k)).sum()
}

/// Floating-point operations of acting (the three layers) and of one training step's products.
pub(crate) fn step_flops(net: &NetArgs, trials: &[NetTrial]) -> (u64, u64) {
    let act = (0..3).map(|layer| stage_flops(net, trials, Stage::Act(layer))).sum();
    let train = FORWARD.into_iter().chain(BACKWARD).map(|stage| stage_flops(net, trials, stage)).sum();
    (act, train)
}

/// Fails unless every buffer `problems` touch is long enough, and every buffer is addressable by the
/// products' 32-bit offsets.
pub(crate) fn check(kernel: &str, problems: &[Gemm], lens: &[usize]) -> Result<(), HostError> {
    if let Some((buf, len)) = lens.iter().enumerate().find(|(_, l)| **l > u32::MAX as usize) {
        return Err(HostError::Config(format!(
            "{kernel}: buffer {buf} holds {len} floats, beyond the products' 32-bit offsets ({}): train fewer \
             trials, envs or samples per batch",
            u32::MAX
        )));
    }
    for (buf, &len) in lens.iter().enumerate() {
        let needed = problems.iter().map(|g| g.extent(buf as u32)).max().unwrap_or(0);
        if needed > len {
            return Err(HostError::Shape { what: format!("{kernel}: buffer {buf}"), expected: needed, got: len });
        }
    }
    for g in problems {
        let mut used = vec![g.a, g.b, g.c];
        if matches!(g.epilogue, EPI_BIAS | EPI_BIAS_RELU) {
            used.push(g.bias);
        }
        if g.epilogue == EPI_RELU_MASK {
            used.push(g.aux);
        }
        if let Some(o) = used.iter().find(|o| o.buf as usize >= lens.len()) {
            return Err(HostError::Config(format!(
                "{kernel}: buffer index {} beyond the {} buffers",
                o.buf,
                lens.len()
            )));
        }
    }
    Ok(())
}

/// Whether each product of `second` ([`Stage::Backward2`]'s: the hidden gradient of layer 2) computes the
/// whole `A` of the same product of `first` ([`Stage::Backward1`]'s), as `gpu_kernels::chain::gpu_rows`'
/// `from` (nvptx only) needs: it writes that `A` (`C` of `second` is `A` of `first`, the same rows and
/// columns), from row-major operands, with `k` at most [`gpu_kernels::tile::SHORT_K`] and the ReLU mask.
#[cfg(any(feature = "cuda", test))]
pub(crate) fn hidden_pairs(first: &[Gemm], second: &[Gemm]) -> bool {
    first.len() == second.len()
        && first.iter().zip(second).all(|(g, f)| {
            f.c == g.a
                && f.m == g.m
                && f.n == g.k
                && f.k as usize <= gpu_kernels::tile::SHORT_K
                && f.epilogue == EPI_RELU_MASK
                && [f.a.col, f.b.col, f.aux.col, f.c.col] == [1; 4]
        })
}

#[cfg(test)]
mod tests {
    use super::{check, hidden_pairs, stage_plan};
    use gpu_kernels::net::{NetArgs, NetTrial, Stage};

    /// The hidden gradients of real plans pair (trials of several widths and batches, below the stride), so
    /// `mlp_rows` computes layer 2's from the output gradient; a plan of another stage, a product of
    /// another trial or a missing product does not pair.
    #[test]
    fn hidden_gradients_of_a_plan_pair() {
        let net = NetArgs::new(3, 16, 43, 32, 3, 1_000, 500);
        let trials = [
            NetTrial { hidden: 32, batch: 1_000, passes: 1, _pad: 0 },
            NetTrial { hidden: 29, batch: 700, passes: 1, _pad: 0 },
            NetTrial { hidden: 17, batch: 1, passes: 1, _pad: 0 },
        ];
        let (first, second) =
            (stage_plan(&net, &trials, Stage::Backward1), stage_plan(&net, &trials, Stage::Backward2));
        assert_eq!(first.len(), 3);
        assert!(hidden_pairs(&first, &second));
        assert!(!hidden_pairs(&first, &second[..2]), "a missing product");
        assert!(!hidden_pairs(&first, &first), "layer 1's own products");
        let swapped = [second[1], second[0], second[2]];
        assert!(!hidden_pairs(&first, &swapped), "another trial's product");
        let forward = stage_plan(&net, &trials, Stage::Forward(2));
        assert!(!hidden_pairs(&first, &forward), "the output layer");
    }

    /// Buffers beyond the products' 32-bit offsets are refused before any product is checked against them.
    #[test]
    fn buffers_beyond_32_bit_offsets_are_refused() {
        let err = check("gemm_tiles", &[], &[16, u32::MAX as usize + 1]).unwrap_err();
        assert!(err.to_string().contains("buffer 1") && err.to_string().contains("32-bit"), "{err}");
        assert!(check("gemm_tiles", &[], &[16, u32::MAX as usize]).is_ok());
    }
}
