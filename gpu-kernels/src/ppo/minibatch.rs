//! Which rollout index each minibatch sample reads ([`rollout_index`]): a keyed shuffle per update epoch with a
//! split ([`shuffled`]), draws with replacement without ([`draw_rollout_index`]); the rollout buffers a sample
//! reads ([`Rollout`]). A sample's rollout index is its transition's position in its trial's rollout
//! (`step x E + env`), the index of the rollout buffers.

use super::params::{PpoArgs, PpoParams, trial_update, updates_per_rollout};
use crate::rng::draw_u64;
use crate::types::Transition;

const MINIBATCH_STREAM: u64 = 0x9_8000;
const SHUFFLE_STREAM: u64 = 0x9_c000;

/// Position `q` (< `n`) of a keyed pseudo-random permutation of `0..n`: a 4-round Feistel network on the
/// smallest even-bit power of two >= n, walked until it lands below `n` (cycle walking: a bijection of
/// `0..n`, a few rounds on average). `keys` are the rounds' keys. Stateless, so every GPU thread computes
/// its own sample and the CPU the same.
#[inline]
pub fn permute(q: u64, n: u64, keys: &[u64; 4]) -> u64 {
    let mut half = 1u32;
    while (1u64 << (2 * half)) < n {
        half += 1;
    }
    let mask = (1u64 << half) - 1;
    let mut x = q;
    loop {
        let (mut l, mut r) = (x >> half, x & mask);
        for k in keys {
            let f = crate::rng::mix64(r ^ k) & mask;
            (l, r) = (r, l ^ f);
        }
        x = (l << half) | r;
        if x < n {
            return x;
        }
    }
}

/// The rollout index at position `q` of the trial's shuffle for update epoch `epoch` of rollout `rollout`
/// (the trial keyed `key`).
#[inline]
pub fn shuffled(q: u64, n: u64, seed: u64, key: u64, rollout: u64, epoch: u64) -> u64 {
    let stream = crate::rng::keyed(SHUFFLE_STREAM, key);
    let base = rollout.wrapping_mul(1 << 16).wrapping_add(epoch).wrapping_mul(4);
    let keys = [0, 1, 2, 3].map(|i| draw_u64(seed, stream, base + i));
    permute(q, n, &keys)
}

/// The rollout index (of the trial's `n`) of minibatch sample `j` of the trial's update `update`
/// (the trial keyed `key`): uniform over the valid transitions ([`crate::batch::draw_valid`]); `None` (a
/// zero-weight sample) when none was found.
#[inline]
pub fn draw_rollout_index(ring: &[Transition], n: usize, seed: u64, key: u64, update: u64, j: u64) -> Option<usize> {
    let stream = crate::rng::keyed(MINIBATCH_STREAM, key);
    crate::batch::draw_valid(ring, n, seed, stream, update.wrapping_mul(1 << 20).wrapping_add(j))
}

/// The rollout index of minibatch sample `j` of trial `p` at update `args.counter` (`ring`: the trial's `n`
/// transitions): with a split, position `m x batch + j` of the update epoch's shuffle (`m` the minibatch),
/// else a draw with replacement ([`draw_rollout_index`]); `None` (a zero-weight sample) past the rollout or
/// the batch, without a valid transition, or when the trial sits this update out ([`trial_update`]).
#[inline]
pub fn rollout_index(args: &PpoArgs, p: &PpoParams, j: usize, ring: &[Transition]) -> Option<usize> {
    let n = ring.len();
    let update = trial_update(p, args)?;
    if j >= p.batch as usize {
        return None;
    }
    if p.minibatches == 0 {
        return draw_rollout_index(ring, n, args.seed, p.key, update, j as u64);
    }
    let per = updates_per_rollout(p, n);
    let (rollout, c) = (update / per, update % per);
    let (epoch, m) = (c / u64::from(p.minibatches), c % u64::from(p.minibatches));
    let q = m * u64::from(p.batch) + j as u64;
    if q >= n as u64 {
        return None;
    }
    let s = shuffled(q, n as u64, args.seed, p.key, rollout, epoch) as usize;
    (ring[s].valid != 0).then_some(s)
}

/// The rollout buffers of one trial that a minibatch sample reads (each `n` long, by rollout index).
#[derive(Clone, Copy, Debug)]
pub struct Rollout<'a> {
    /// The transitions.
    pub ring: &'a [Transition],
    /// Log-probability of each action when it was taken.
    pub logps: &'a [f32],
    /// Value predicted at each step.
    pub values: &'a [f32],
    /// GAE advantages.
    pub advantages: &'a [f32],
    /// Returns (value targets).
    pub returns: &'a [f32],
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::ppo::split_batch;
    use crate::ppo::tests::ring;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn permute_is_a_bijection_of_any_size() {
        for n in [1u64, 2, 3, 5, 16, 17, 100, 1_000, 4_097] {
            let keys = [n, 7, 11, 13];
            let mut seen = vec![false; n as usize];
            for q in 0..n {
                let s = permute(q, n, &keys) as usize;
                assert!(!seen[s], "n {n}: {s} twice");
                seen[s] = true;
            }
        }
        // Different epochs shuffle differently.
        let a: Vec<u64> = (0..100).map(|q| shuffled(q, 100, 1, 2, 0, 0)).collect();
        let b: Vec<u64> = (0..100).map(|q| shuffled(q, 100, 1, 2, 0, 1)).collect();
        assert_ne!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<u64>>(), "not the identity");
    }

    /// With a split, each update epoch uses every valid transition exactly once over its minibatches; the
    /// last minibatch is short when the split does not divide the rollout; positions of invalid transitions
    /// are zero-weight samples.
    #[test]
    fn a_split_epoch_uses_every_transition_once() {
        let (steps, envs) = (10u32, 7u32);
        let n = (steps * envs) as usize;
        let ring = ring(n, &[3, 40]);
        let p = PpoParams { minibatches: 4, epochs: 2, batch: split_batch(n, 4), key: 5, ..PpoParams::default() };
        assert_eq!((p.batch, updates_per_rollout(&p, n)), (18, 8));
        for rollout in 0..2u64 {
            for epoch in 0..2u64 {
                let mut count = vec![0u32; n];
                let mut empty = 0;
                for m in 0..4u64 {
                    let args = PpoArgs {
                        steps,
                        envs_per_trial: envs,
                        seed: 9,
                        counter: epoch * 4 + m,
                        rollout,
                        ..PpoArgs::default()
                    };
                    for j in 0..p.batch as usize + 3 {
                        match rollout_index(&args, &p, j, &ring) {
                            Some(s) => count[s] += 1,
                            None => empty += 1,
                        }
                    }
                }
                let want: Vec<u32> = (0..n).map(|i| u32::from(i != 3 && i != 40)).collect();
                assert_eq!(count, want, "rollout {rollout} epoch {epoch}");
                // 4 x 18 = 72 positions for 70 transitions, 2 of them invalid, and 3 past the batch per minibatch.
                assert_eq!(empty, 2 + 2 + 4 * 3);
            }
        }
        // After its 8 updates the trial sits out.
        let args = PpoArgs { steps, envs_per_trial: envs, counter: 8, ..PpoArgs::default() };
        assert_eq!(rollout_index(&args, &p, 0, &ring), None);
    }
}
