//! The structure-blind edge-cut partitioners: hash and seeded random.

use super::{PartitionError, check_parts};
use crate::Csr;
use crate::rng::{SplitMix64, hash_key};

/// Domain separation for the vertex hash, so that it is independent of other hashes of ids.
const HASH_SALT: u64 = 0x6861_7368_5f70_6172; // "hash_par"

/// Hash partition: vertex `v` goes to part `hash(v) mod parts`. Needs no seed and no
/// structure; parts are balanced in expectation only.
pub fn hash(graph: &Csr, parts: usize) -> Result<Vec<u32>, PartitionError> {
    check_parts(parts, graph.num_nodes())?;
    Ok((0..graph.num_nodes() as u64).map(|v| (hash_key(&[HASH_SALT, v]) % parts as u64) as u32).collect())
}

/// Random partition: a seeded shuffle of the vertices dealt round-robin, so part sizes
/// differ by at most one.
pub fn random(graph: &Csr, parts: usize, seed: u64) -> Result<Vec<u32>, PartitionError> {
    check_parts(parts, graph.num_nodes())?;
    let n = graph.num_nodes();
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut owner = vec![0u32; n];
    for (i, &v) in order.iter().enumerate() {
        owner[v as usize] = (i % parts) as u32;
    }
    Ok(owner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    fn path(n: u32) -> Csr {
        let edges: Vec<(u32, u32)> = (1..n).map(|v| (v - 1, v)).collect();
        Csr::from_edges(n as usize, &edges, EdgeListOptions::default()).unwrap()
    }

    fn sizes(owner: &[u32], parts: usize) -> Vec<usize> {
        let mut s = vec![0; parts];
        owner.iter().for_each(|&p| s[p as usize] += 1);
        s
    }

    #[test]
    fn random_is_balanced_seeded_and_deterministic() {
        let g = path(1003);
        let a = random(&g, 4, 7).unwrap();
        assert_eq!(sizes(&a, 4), [251, 251, 251, 250]);
        assert_eq!(a, random(&g, 4, 7).unwrap());
        assert_ne!(a, random(&g, 4, 8).unwrap());
    }

    #[test]
    fn hash_spreads_vertices() {
        let g = path(4000);
        let s = sizes(&hash(&g, 4).unwrap(), 4);
        assert!(s.iter().all(|&c| (900..1100).contains(&c)), "{s:?}");
        assert_eq!(hash(&g, 0), Err(PartitionError::Parts { parts: 0, nodes: 4000 }));
    }
}
