//! Counter-based random numbers: the value is a pure function of (seed, stream, counter), so any thread on
//! any backend draws the same number without carrying generator state.

/// SplitMix64's finalizer: a bijective 64-bit mix with good avalanche.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `counter`-th 64-bit draw of stream `stream` under `seed`.
#[inline]
pub fn draw_u64(seed: u64, stream: u64, counter: u64) -> u64 {
    mix64(mix64(seed ^ mix64(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))).wrapping_add(counter))
}

/// The stream `base` of the trial keyed `key` (`base` < 2^32: the key fills the high half, so the streams of
/// different keys and bases never meet).
#[inline]
pub fn keyed(base: u64, key: u64) -> u64 {
    base ^ (key << 32)
}

/// A draw in `[0, n)` (`n > 0`), by Lemire's multiply-shift (bias below 2^-32 for n < 2^32).
#[inline]
pub fn draw_below(seed: u64, stream: u64, counter: u64, n: u32) -> u32 {
    let x = draw_u64(seed, stream, counter) >> 32;
    ((x * u64::from(n)) >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_by_stream_and_counter() {
        let a = draw_u64(7, 0, 0);
        assert_ne!(a, draw_u64(7, 1, 0));
        assert_ne!(a, draw_u64(7, 0, 1));
        assert_ne!(a, draw_u64(8, 0, 0));
        assert_eq!(a, draw_u64(7, 0, 0));
    }

    #[test]
    fn draw_below_stays_in_range_and_covers_it() {
        let mut seen = [0u32; 3];
        for c in 0..3_000 {
            let v = draw_below(1, 2, c, 3);
            assert!(v < 3);
            seen[v as usize] += 1;
        }
        for count in seen {
            assert!((800..1_200).contains(&count), "uneven draws: {seen:?}");
        }
    }
}

/// A uniform f32 in the open interval (0, 1) from a 64-bit draw: the top 23 bits plus one half, over 2^23.
/// Every step is exact in f32 (at most 24 significant bits), so the result is never 0 and never 1 (the
/// largest is 1 - 2^-24).
#[inline]
pub fn unit_open(bits: u64) -> f32 {
    ((bits >> 41) as f32 + 0.5) / (1u32 << 23) as f32
}

/// A uniform f32 in [0, 1) from a 64-bit draw: the top 24 bits over 2^24 (exact; the largest is
/// 1 - 2^-24).
#[inline]
pub fn unit(bits: u64) -> f32 {
    (bits >> 40) as f32 / (1u32 << 24) as f32
}

#[cfg(test)]
mod unit_tests {
    use super::{unit, unit_open};

    #[test]
    fn uniforms_stay_inside_their_intervals() {
        for bits in [0, 1 << 40, 1 << 41, (1 << 63) - 1, 1 << 63, u64::MAX - (1 << 41), u64::MAX] {
            let u = unit_open(bits);
            assert!(u > 0.0 && u < 1.0, "unit_open({bits:#x}) = {u}");
            let v = unit(bits);
            assert!((0.0..1.0).contains(&v), "unit({bits:#x}) = {v}");
        }
        assert_eq!(unit_open(u64::MAX), 1.0 - f32::EPSILON / 2.0);
        // Every value of the top bits maps to a distinct f32 (no rounding merges neighbours).
        let top = (1u64 << 23) - 1;
        assert!(unit_open(top << 41) > unit_open((top - 1) << 41));
    }
}
