//! Counter-based random numbers: every draw is a pure function of its key, so results do
//! not depend on thread scheduling or on how a graph is split across workers.
//!
//! [`hash_key`] hashes a key of words, [`hash_extend`] extends a hashed prefix with more words, and
//! [`uniform_f32`] draws from a key; [`SplitMix64`] is the sequential generator where a stream of
//! draws hangs off one key.

/// SplitMix64's increment, 2^64 over the golden ratio.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64 finaliser: a bijective 64-bit mixer with good avalanche.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a key of several words into 64 random bits.
#[inline]
pub fn hash_key(words: &[u64]) -> u64 {
    hash_extend(0x6A09_E667_F3BC_C908, words)
}

/// Continues a key hash with more words: `hash_extend(hash_key(a), b) == hash_key(a ++ b)`.
/// Lets a caller hash a shared key prefix once and finish it per vertex.
#[inline]
pub fn hash_extend(prefix: u64, words: &[u64]) -> u64 {
    words.iter().fold(prefix, |h, &w| mix64(h ^ mix64(w)))
}

/// Uniform `f32` in `[0, 1)` from a key.
#[inline]
pub fn uniform_f32(words: &[u64]) -> f32 {
    (hash_key(words) >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
}

/// A small sequential generator (SplitMix64) for seeded, reproducible streams.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: mix64(seed) }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// Output `k` (from 0) of `SplitMix64::new(seed)`, without drawing the ones before it: a
    /// GPU thread computes its own element's draw of a stream the CPU reads in order.
    pub fn output_at(seed: u64, k: u64) -> u64 {
        mix64(mix64(seed).wrapping_add(k.wrapping_add(1).wrapping_mul(GOLDEN)))
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_computed_alone_equals_the_streams() {
        for seed in [0, 1, u64::MAX, 0xDEAD_BEEF] {
            let mut stream = SplitMix64::new(seed);
            for k in 0..100 {
                assert_eq!(SplitMix64::output_at(seed, k), stream.next_u64(), "seed {seed} output {k}");
            }
        }
    }

    #[test]
    fn uniform_in_range_and_keyed() {
        for i in 0..1000u64 {
            let u = uniform_f32(&[7, i]);
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(uniform_f32(&[1, 2, 3]), uniform_f32(&[1, 2, 3]));
        assert_ne!(hash_key(&[1, 2, 3]), hash_key(&[1, 3, 2]));
        assert_eq!(hash_extend(hash_key(&[1, 2]), &[3, 4]), hash_key(&[1, 2, 3, 4]));
    }

    #[test]
    fn stream_mean_and_below() {
        let mut r = SplitMix64::new(42);
        let mean: f64 = (0..10_000).map(|_| r.next_f64()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert!((0..1000).all(|_| r.below(7) < 7));
    }
}
