//! Per-vertex sets of parts (or hosts) as fixed-stride bitsets: one `u64` per vertex for up
//! to 64 parts, so membership tests in the partitioners' inner loops are a shift and a mask.

use crate::Csr;

/// For each vertex, a set of ids below `width`.
#[derive(Debug, Clone)]
pub(super) struct ReplicaSets {
    words: usize,
    bits: Vec<u64>,
}

impl ReplicaSets {
    pub(super) fn new(num_vertices: usize, width: usize) -> Self {
        let words = width.div_ceil(64).max(1);
        Self { words, bits: vec![0; num_vertices * words] }
    }

    /// The replica sets that a vertex-cut implies: each entry's part holds both endpoints.
    pub(super) fn from_edge_parts(graph: &Csr, parts: usize, edge_part: &[u32]) -> Self {
        let mut sets = Self::new(graph.num_nodes(), parts);
        for v in 0..graph.num_nodes() {
            for k in graph.row_range(v) {
                let p = edge_part[k] as usize;
                sets.insert(v, p);
                sets.insert(graph.indices()[k] as usize, p);
            }
        }
        sets
    }

    #[inline]
    pub(super) fn contains(&self, v: usize, id: usize) -> bool {
        self.bits[v * self.words + id / 64] >> (id % 64) & 1 == 1
    }

    /// Adds `id` to `v`'s set; true when it was not there yet.
    #[inline]
    pub(super) fn insert(&mut self, v: usize, id: usize) -> bool {
        let word = &mut self.bits[v * self.words + id / 64];
        let mask = 1u64 << (id % 64);
        let fresh = *word & mask == 0;
        *word |= mask;
        fresh
    }

    /// The ids in `v`'s set, ascending.
    pub(super) fn iter(&self, v: usize) -> impl Iterator<Item = usize> + '_ {
        self.bits[v * self.words..(v + 1) * self.words].iter().enumerate().flat_map(|(w, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    w * 64 + bit
                })
            })
        })
    }

    pub(super) fn is_empty(&self, v: usize) -> bool {
        self.bits[v * self.words..(v + 1) * self.words].iter().all(|&w| w == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_beyond_one_word() {
        let mut s = ReplicaSets::new(3, 130);
        assert!(s.insert(1, 129));
        assert!(!s.insert(1, 129));
        assert!(s.insert(1, 3));
        assert!(s.insert(1, 64));
        assert!(s.contains(1, 64) && !s.contains(0, 64) && !s.contains(2, 3));
        assert_eq!(s.iter(1).collect::<Vec<_>>(), [3, 64, 129]);
        assert!(s.is_empty(0) && !s.is_empty(1));
    }
}
