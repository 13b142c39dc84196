//! Node attributes of synthetic datasets: balanced groups (classes, communities), class-centred
//! Gaussian features and the random split.

use ndarray::Array2;
use rayon::prelude::*;

use super::{FEATURE_SEPARATION, SynthConfig};
use crate::partition::feature_cut;
use crate::rng::{SplitMix64, hash_key};

/// Domain-separation tags so each use of the seed draws an independent stream.
pub(super) const CLASS_TAG: u64 = 0xC1A5;
pub(super) const COMMUNITY_TAG: u64 = 0xC0DE;
pub(super) const WEIGHT_TAG: u64 = 0x3E16;
pub(super) const EDGE_TAG: u64 = 0xED6E;
const CENTROID_TAG: u64 = 0xCE27;
const FEATURE_TAG: u64 = 0xFEA7;
const SPLIT_TAG: u64 = 0x5B17;

/// A uniformly random permutation of `0..n` (Fisher-Yates).
fn permutation(n: usize, seed: u64, tag: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(hash_key(&[seed, tag]));
    let mut perm: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    perm
}

/// Assigns `n` nodes to `groups` groups of equal size (up to one), at random.
pub(super) fn balanced_groups(n: usize, groups: usize, seed: u64, tag: u64) -> Vec<u32> {
    let mut group = vec![0u32; n];
    for (i, &v) in permutation(n, seed, tag).iter().enumerate() {
        group[v as usize] = (i % groups) as u32;
    }
    group
}

/// Two independent standard normals (both halves of Box-Muller).
fn normal_pair(rng: &mut SplitMix64) -> (f64, f64) {
    let radius = (-2.0 * (1.0 - rng.next_f64()).ln()).sqrt();
    let angle = 2.0 * std::f64::consts::PI * rng.next_f64();
    (radius * angle.cos(), radius * angle.sin())
}

/// Fills `out` with standard normals.
fn fill_normal(out: &mut [f32], rng: &mut SplitMix64) {
    let mut pairs = out.chunks_exact_mut(2);
    for pair in &mut pairs {
        let (a, b) = normal_pair(rng);
        pair[0] = a as f32;
        pair[1] = b as f32;
    }
    if let [last] = pairs.into_remainder() {
        *last = normal_pair(rng).0 as f32;
    }
}

/// Row `v` = centroid of `classes[v]` + N(0, 1) noise per feature.
pub(super) fn class_features(cfg: &SynthConfig, classes: &[u32]) -> Array2<f32> {
    let width = cfg.features;
    let mut centroids = vec![0.0f32; cfg.classes * width];
    fill_normal(&mut centroids, &mut SplitMix64::new(hash_key(&[cfg.seed, CENTROID_TAG])));
    match cfg.signal_blocks {
        None => {
            // Two centroids with i.i.d. N(0, s^2) coordinates lie s * sqrt(2 * width) apart on
            // average.
            let spread = (FEATURE_SEPARATION / (2.0 * width as f64).sqrt()) as f32;
            centroids.iter_mut().for_each(|c| *c *= spread);
        }
        Some(blocks) => {
            let cut = feature_cut(width, blocks).expect("validated: 1 <= signal_blocks <= features");
            for (class, centroid) in centroids.chunks_exact_mut(width).enumerate() {
                let block = &cut[class % blocks];
                // Centroids in disjoint blocks of widths a and b lie s * sqrt(a + b) apart, in
                // one block of width a s * sqrt(2a): the block's own width keeps the separation.
                let spread = (FEATURE_SEPARATION / (2.0 * block.len() as f64).sqrt()) as f32;
                for (column, c) in centroid.iter_mut().enumerate() {
                    *c = if block.contains(&column) { *c * spread } else { 0.0 };
                }
            }
        }
    }
    let mut features = Array2::<f32>::zeros((cfg.nodes, width));
    features.as_slice_mut().expect("fresh array is contiguous").par_chunks_mut(width).enumerate().for_each(
        |(v, row)| {
            fill_normal(row, &mut SplitMix64::new(hash_key(&[cfg.seed, FEATURE_TAG, v as u64])));
            let class = classes[v] as usize;
            row.iter_mut().zip(&centroids[class * width..(class + 1) * width]).for_each(|(x, &c)| *x += c);
        },
    );
    features
}

/// A random split of `ids`: a `train` fraction, a `valid` fraction, the rest test; each list
/// sorted. The synthetic graphs' `random` split is this over every node with 0.6 and 0.2.
pub(crate) fn random_split(ids: &[u32], train: f64, valid: f64, seed: u64) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let n = ids.len();
    let perm = permutation(n, seed, SPLIT_TAG);
    let train_len = ((n as f64 * train).round() as usize).min(n);
    let valid_len = ((n as f64 * valid).round() as usize).min(n - train_len);
    let sorted = |picks: &[u32]| {
        let mut picked: Vec<u32> = picks.iter().map(|&i| ids[i as usize]).collect();
        picked.sort_unstable();
        picked
    };
    (
        sorted(&perm[..train_len]),
        sorted(&perm[train_len..train_len + valid_len]),
        sorted(&perm[train_len + valid_len..]),
    )
}
