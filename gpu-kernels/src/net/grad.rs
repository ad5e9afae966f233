//! The chunks of the split gradient sums ([`grad_chunk`]), a parameter's gradient from its chunk partials
//! ([`gradient`]) and the in-order fold both use on the GPU ([`fold_ahead`]).

use super::NetArgs;

/// The fewest samples per chunk of the split gradient sums: each chunk's products are summed in sample
/// order, then the chunks in chunk order ([`grad_chunk`] sizes them).
pub const GRAD_CHUNK: usize = 128;

/// The most samples per chunk of the split gradient sums (and the length of the bias gradients' ones).
pub const MAX_GRAD_CHUNK: usize = 1_024;

/// Samples per chunk of the split gradient sums of a minibatch buffer of `batch` samples: [`GRAD_CHUNK`],
/// doubled (up to [`MAX_GRAD_CHUNK`]) while 64 chunks or more of the doubled size would remain. A chunk is
/// one K-run of the gradient products: small minibatches (DQN's) keep many chunks to spread over the GPU,
/// large ones (PPO's quarter rollouts) take long runs, fewer partial sums to store and add. Both backends
/// use it, so it fixes the summation order (the bits) of a given `batch`.
pub const fn grad_chunk(batch: usize) -> usize {
    let mut chunk = GRAD_CHUNK;
    while chunk < MAX_GRAD_CHUNK && batch / (2 * chunk) >= 64 {
        chunk *= 2;
    }
    chunk
}

/// Chunks of the split gradient sums of a minibatch buffer of `batch` samples ([`grad_chunk`]).
pub const fn grad_chunks(batch: usize) -> usize {
    batch.div_ceil(grad_chunk(batch))
}

/// The gradient of parameter `p` of trial `t`: the sum of its chunk partials (`partial`, `chunks x K x P`,
/// [`Stage::Gradients`](super::Stage::Gradients)) in chunk order (0 outside the active width, where every partial is
/// 0).
#[inline]
pub fn gradient(args: &NetArgs, t: usize, p: usize, partial: &[f32]) -> f32 {
    let (n_params, trials) = (args.layout().params(), args.n_trials as usize);
    debug_assert!(partial.len() >= args.partial_len());
    fold_ahead(grad_chunks(args.batch as usize), |c| partial[(c * trials + t) * n_params + p], 0.0, |g, x| g + x)
}

/// Values [`fold_ahead`] loads before it folds them.
pub const FOLD_AHEAD: usize = 8;

/// `step` folded over `load(0), load(1), .., load(n - 1)` in that order from `init`, loading
/// [`FOLD_AHEAD`] values before folding them. A GPU thread issues its instructions in order, so the plain
/// loop (`acc = step(acc, load(i))`) waits a memory round trip for every value; this waits one per
/// [`FOLD_AHEAD`] values. The fold's order is the plain loop's: the same bits on both backends.
#[inline(always)]
pub fn fold_ahead(n: usize, load: impl Fn(usize) -> f32, init: f32, step: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = init;
    let mut i0 = 0;
    while i0 < n {
        let vals: [f32; FOLD_AHEAD] = core::array::from_fn(|j| if i0 + j < n { load(i0 + j) } else { 0.0 });
        for (j, &x) in vals.iter().enumerate() {
            if i0 + j < n {
                acc = step(acc, x);
            }
        }
        i0 += FOLD_AHEAD;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::{FOLD_AHEAD, GRAD_CHUNK, MAX_GRAD_CHUNK, fold_ahead, grad_chunk, grad_chunks};

    /// `fold_ahead` is the plain in-order fold, bit for bit, for counts below, at and past multiples of its
    /// batch (an order-sensitive fold: sums of terms of very different magnitudes, and a sum of squares
    /// by FMA).
    #[test]
    fn fold_ahead_is_the_plain_fold() {
        let term = |i: usize| ((i * 7919 % 1013) as f32 - 500.0) * if i.is_multiple_of(3) { 1e7 } else { 1e-3 };
        for n in [0, 1, 7, FOLD_AHEAD, FOLD_AHEAD + 1, 3 * FOLD_AHEAD - 1, 100, 1_000] {
            let plain = (0..n).fold(0.5f32, |a, i| a + term(i));
            assert_eq!(fold_ahead(n, term, 0.5, |a, x| a + x).to_bits(), plain.to_bits(), "sum of {n}");
            let squares = (0..n).fold(0.0f32, |a, i| term(i).mul_add(term(i), a));
            let ahead = fold_ahead(n, term, 0.0, |a, x| x.mul_add(x, a));
            assert_eq!(ahead.to_bits(), squares.to_bits(), "squares of {n}");
        }
        // The order matters for these terms: a reversed fold differs, so the checks above can fail.
        let reversed = (0..100).rev().fold(0.5f32, |a, i| a + term(i));
        assert_ne!(reversed.to_bits(), (0..100).fold(0.5f32, |a, i| a + term(i)).to_bits());
    }

    /// Chunks stay at the smallest size until 64 chunks of twice it fit, never exceed the largest, and
    /// cover the batch.
    #[test]
    fn gradient_chunks_grow_with_large_batches() {
        for batch in (1..300_000).step_by(97).chain([16_383, 16_384, 32_767, 32_768, 1 << 20]) {
            let chunk = grad_chunk(batch);
            assert!(chunk.is_power_of_two() && (GRAD_CHUNK..=MAX_GRAD_CHUNK).contains(&chunk), "{batch}: {chunk}");
            if chunk > GRAD_CHUNK {
                assert!(batch / chunk >= 64, "{batch}: {chunk} leaves fewer than 64 chunks");
            }
            if chunk < MAX_GRAD_CHUNK {
                assert!(batch / (2 * chunk) < 64, "{batch}: {chunk} could double");
            }
            assert!(grad_chunks(batch) * chunk >= batch && (grad_chunks(batch) - 1) * chunk < batch);
        }
        assert_eq!(grad_chunk(1_024), GRAD_CHUNK, "DQN's minibatches keep the smallest chunks");
    }
}
