//! Where each env walks: segments of `L` bars that tile the range, re-drawn per epoch from the seed.

use crate::rng::draw_below;

/// RNG stream of segment offsets (distinct from other users of the seed).
const SEGMENT_STREAM: u64 = 0x5e9_0000;

/// First bar of env `env` (of `envs` per trial) with segments of `len` steps over `n_bars` bars in `epoch`.
///
/// When `envs x len` steps fit in the `n_bars - 1` available, the segments tile a contiguous block whose
/// offset is drawn per epoch (no overlap). Otherwise each env's start is drawn uniformly from
/// `[0, n_bars - 1 - len]` (segments overlap). Every trial gets the same segments (common random numbers
/// across hyperparameter sets). Requires `1 <= len <= n_bars - 1`.
#[inline]
pub fn segment_start(env: u32, envs: u32, len: u32, n_bars: u32, seed: u64, epoch: u64) -> u32 {
    let steps_available = n_bars - 1;
    let last_start = steps_available - len;
    let needed = u64::from(envs) * u64::from(len);
    if needed <= u64::from(steps_available) {
        let slack = steps_available - envs * len;
        let offset = draw_below(seed, SEGMENT_STREAM + epoch, 0, slack + 1);
        offset + env * len
    } else {
        draw_below(seed, SEGMENT_STREAM + epoch, 1 + u64::from(env), last_start + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_without_overlap_when_they_fit() {
        let starts: [u32; 4] = core::array::from_fn(|e| segment_start(e as u32, 4, 10, 101, 3, 0));
        for e in 1..4 {
            assert_eq!(starts[e], starts[e - 1] + 10);
        }
        assert!(starts[3] + 10 <= 100);
        let other_epoch = segment_start(0, 4, 10, 101, 3, 1);
        let same = segment_start(0, 4, 10, 101, 3, 0);
        assert_eq!(same, starts[0]);
        assert!((0..=60).contains(&other_epoch));
    }

    #[test]
    fn overlapping_segments_stay_in_range() {
        for e in 0..1_000 {
            let s = segment_start(e, 1_000, 50, 200, 9, 2);
            assert!(s + 50 <= 199, "start {s}");
        }
    }
}
