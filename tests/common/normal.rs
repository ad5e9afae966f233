//! A seeded stream of standard normal draws for the evidence tests: splitmix64 and Box-Muller. Included by
//! path (`#[path = "common/normal.rs"]`) where the rest of the harness is not needed.

/// The stream; its state is the seed.
pub struct Normal(pub u64);

impl Normal {
    /// A uniform draw in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal draw.
    pub fn draw(&mut self) -> f64 {
        let (u, v) = (1.0 - self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}
