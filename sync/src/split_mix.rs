//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! 2014): the one seeded generator behind the reproducible modes, the CPU executor's lane
//! orders (`SYMMEM_EXEC_SEED`) and weak ordering's delivery delays
//! (`SYMMEM_ORDERING_SEED`). Small and fast; good enough to pick interleavings, not for
//! anything secret.

/// A SplitMix64 stream: the same seed gives the same numbers.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next number in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        self.next_u64() % (max + 1)
    }
}
