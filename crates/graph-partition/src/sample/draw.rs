//! One destination's draw: a uniform subset of its in-neighbours, without replacement, as a
//! pure function of the draw key (seed, epoch, step, layer, global id of the destination).
//!
//! Method: Robert Floyd's algorithm (Bentley and Floyd, "A sample of brilliance", CACM 1987).
//! To pick `k` of a row's `n` entries it runs, for `j` in `n-k..n`, one draw `t` uniform in
//! `0..=j` and keeps `t`, or `j` when `t` is already kept. Every `k`-subset comes out with
//! probability exactly `1 / C(n, k)` using `k` draws whatever the degree, where a partial
//! Fisher-Yates shuffle would need an `n`-entry scratch permutation per row. Draws come from a
//! SplitMix64 stream seeded by the key hash and are made unbiased by Lemire's multiply-shift
//! with rejection, so the subset distribution is exact, not merely close.
//!
//! A destination's sampled neighbours come out in draw order (the order Floyd's loop keeps
//! them), not sorted: that order is as deterministic as a sorted one, and sorting every row
//! here measured as costly as the draw itself. The block sorts rows once, after relabelling.

use std::num::NonZeroU32;

use super::Fanout;
use crate::rng::{SplitMix64, hash_extend, hash_key};

/// Separates neighbour-sampling draws from every other keyed stream ("neighbor").
const SAMPLE_DOMAIN: u64 = 0x6e65_6967_6862_6f72;

/// Up to this many picks, membership is a scan of the kept positions (a few vector compares,
/// no branch to mispredict); beyond it a bitmap over the row keeps Floyd's loop linear.
const SMALL_PICKS: usize = 32;

/// The part of the draw key shared by every destination of one block.
#[derive(Debug, Clone, Copy)]
pub(super) struct LayerKey {
    prefix: u64,
}

impl LayerKey {
    pub(super) fn new(seed: u64, epoch: u64, step: u64, layer: usize) -> Self {
        Self { prefix: hash_key(&[SAMPLE_DOMAIN, seed, epoch, step, layer as u64]) }
    }

    /// The random stream of destination `gid`: `hash_key(domain, seed, epoch, step, layer, gid)`.
    fn stream(self, gid: u32) -> SplitMix64 {
        SplitMix64::new(hash_extend(self.prefix, &[u64::from(gid)]))
    }
}

/// Uniform in `0..n` without bias (Lemire, "Fast random integer generation in an interval", 2019).
fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    let mut m = u128::from(rng.next_u64()) * u128::from(n);
    if (m as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(n);
        }
    }
    (m >> 64) as u64
}

/// Per-thread scratch for drawing rows; reused across the rows of a chunk.
#[derive(Debug, Default)]
pub(super) struct RowSampler {
    picks: Vec<u32>,
    seen: Vec<u64>,
}

impl RowSampler {
    /// Writes into `out` the sampled in-neighbours of destination `gid`, whose CSR row is `row`:
    /// all of them (in row order), or `k` drawn by Floyd's algorithm (in draw order).
    /// `out.len()` must be `fanout.limit(row.len())`.
    pub(super) fn draw(&mut self, key: LayerKey, gid: u32, row: &[u32], fanout: Fanout, out: &mut [u32]) {
        debug_assert_eq!(out.len(), fanout.limit(row.len()));
        match fanout {
            Fanout::Take(k) if (k.get() as usize) < row.len() => {
                self.floyd(&mut key.stream(gid), row.len(), k);
                for (slot, &pos) in out.iter_mut().zip(&self.picks) {
                    *slot = row[pos as usize];
                }
            }
            _ => out.copy_from_slice(row),
        }
    }

    /// Leaves in `self.picks` `k` distinct positions of `0..n` in the order Floyd's loop keeps
    /// them (`k < n`).
    fn floyd(&mut self, rng: &mut SplitMix64, n: usize, k: NonZeroU32) {
        let k = k.get() as usize;
        self.picks.clear();
        let small = k <= SMALL_PICKS;
        if !small {
            self.seen.resize(self.seen.len().max(n.div_ceil(64)), 0);
        }
        for j in n - k..n {
            let t = below(rng, j as u64 + 1) as u32;
            let taken = if small { self.picks.contains(&t) } else { self.seen[t as usize / 64] >> (t % 64) & 1 == 1 };
            let keep = if taken { j as u32 } else { t };
            if !small {
                self.seen[keep as usize / 64] |= 1 << (keep % 64);
            }
            self.picks.push(keep);
        }
        if !small {
            for &p in &self.picks {
                self.seen[p as usize / 64] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(k: u32) -> Fanout {
        Fanout::Take(NonZeroU32::new(k).unwrap())
    }

    /// The draw, sorted (the tests look at the subset; the order is checked as keyed).
    fn sample(key: LayerKey, gid: u32, row: &[u32], fanout: Fanout) -> Vec<u32> {
        let mut out = vec![0; fanout.limit(row.len())];
        RowSampler::default().draw(key, gid, row, fanout, &mut out);
        out.sort_unstable();
        out
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = SplitMix64::new(3);
        for n in [1u64, 2, 3, 7, 1000, u64::MAX / 3 + 1] {
            assert!((0..100).all(|_| below(&mut rng, n) < n));
        }
    }

    #[test]
    fn picks_are_distinct_and_keyed() {
        let row: Vec<u32> = (0..200).map(|i| i * 3).collect();
        for k in [1, 5, 32, 33, 150, 199] {
            let key = LayerKey::new(7, 1, 2, 0);
            let picked = sample(key, 11, &row, take(k));
            assert_eq!(picked.len(), k as usize);
            assert!(picked.windows(2).all(|w| w[0] < w[1]), "k = {k}: {picked:?}");
            assert!(picked.iter().all(|p| row.binary_search(p).is_ok()));
            // One scratch for several rows, as a chunk of the sampler uses it: same draws.
            let mut scratch = RowSampler::default();
            let mut first = vec![0; k as usize];
            let mut again = first.clone();
            scratch.draw(key, 11, &row, take(k), &mut first);
            scratch.draw(key, 12, &row, take(k), &mut again);
            scratch.draw(key, 11, &row, take(k), &mut again);
            assert_eq!(first, again);
        }
        let key = LayerKey::new(7, 1, 2, 0);
        assert_ne!(sample(key, 11, &row, take(10)), sample(key, 12, &row, take(10)));
        assert_ne!(sample(key, 11, &row, take(10)), sample(LayerKey::new(7, 1, 2, 1), 11, &row, take(10)));
        assert_eq!(sample(key, 11, &row[..5], take(10)), &row[..5]);
        assert_eq!(sample(key, 11, &row, Fanout::All), row);
    }

    /// Every 2-subset of 5 should come out with probability 1/10, whichever membership test
    /// Floyd's loop uses (the bitmap path is forced through a 40-of-41 draw: its complement,
    /// the single left-out entry, must be uniform over the 41).
    #[test]
    fn subsets_are_uniform() {
        let trials = 20_000u64;
        let row: Vec<u32> = (0..5).collect();
        let mut pairs = std::collections::HashMap::new();
        for step in 0..trials {
            *pairs.entry(sample(LayerKey::new(1, 0, step, 0), 9, &row, take(2))).or_insert(0u64) += 1;
        }
        assert_eq!(pairs.len(), 10);
        let expected = trials as f64 / 10.0;
        // Chi-square with 9 degrees of freedom: 27.9 is its 0.999 quantile.
        let chi2: f64 = pairs.values().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        assert!(chi2 < 27.9, "pair counts {pairs:?}, chi2 {chi2}");

        let row: Vec<u32> = (0..41).collect();
        let mut left_out = vec![0u64; 41];
        for step in 0..trials {
            let picked = sample(LayerKey::new(2, 0, step, 0), 9, &row, take(40));
            let missing = row.iter().position(|v| picked.binary_search(v).is_err()).unwrap();
            left_out[missing] += 1;
        }
        let expected = trials as f64 / 41.0;
        // Chi-square with 40 degrees of freedom: 73.4 is its 0.999 quantile.
        let chi2: f64 = left_out.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        assert!(chi2 < 73.4, "left-out counts {left_out:?}, chi2 {chi2}");
    }
}
