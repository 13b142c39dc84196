//! Edge units for vertex-cut partitioners: the two stored directions `u -> v` and `v -> u`
//! of an undirected edge touch the same two vertices, so they are placed together, as one
//! decision (splitting them could only add replicas).

use rayon::prelude::*;

use crate::Csr;

/// One placement decision: the canonical entry `entry` (edge `src -> dst`, in row `dst`),
/// standing also for the opposite entry `dst -> src` when the graph stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EdgeUnit {
    entry: u64,
    /// Index of the opposite entry, or [`NO_OPPOSITE`].
    opposite: u64,
    pub src: u32,
    pub dst: u32,
}

const NO_OPPOSITE: u64 = u64::MAX;

impl EdgeUnit {
    /// Stored entries the unit places: 2 with the opposite entry, else 1.
    pub(super) fn entries(&self) -> u64 {
        1 + u64::from(self.opposite != NO_OPPOSITE)
    }

    /// Puts the unit's entries on `part`.
    pub(super) fn place(&self, edge_part: &mut [u32], part: u32) {
        edge_part[self.entry as usize] = part;
        if self.opposite != NO_OPPOSITE {
            edge_part[self.opposite as usize] = part;
        }
    }
}

/// The canonical entries in entry order; placing all of them places every entry once.
///
/// An entry `u -> v` is canonical unless `u > v` and the opposite entry `v -> u` exists (then
/// that one is). Opposite entries are found by merging each row `v` (sources of edges into
/// `v`) with row `v` of the transpose (targets of edges out of `v`): sequential scans instead
/// of a random lookup per entry.
pub(super) fn edge_units(graph: &Csr) -> Vec<EdgeUnit> {
    let (out, perm) = graph.transpose_with_perm();
    (0..graph.num_nodes())
        .into_par_iter()
        .flat_map_iter(|v| {
            let targets = out.row_range(v);
            let mut j = targets.start;
            let (out, perm) = (&out, &perm);
            graph.row_range(v).filter_map(move |k| {
                let (src, dst) = (graph.indices()[k], v as u32);
                while j < targets.end && out.indices()[j] < src {
                    j += 1;
                }
                // Transpose entry j is `dst -> src`; perm maps it back to its index here.
                let opposite = (src != dst && j < targets.end && out.indices()[j] == src).then(|| perm[j]);
                (src <= dst || opposite.is_none()).then_some(EdgeUnit {
                    entry: k as u64,
                    opposite: opposite.map_or(NO_OPPOSITE, |o| o as u64),
                    src,
                    dst,
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    #[test]
    fn opposite_entries_share_a_unit() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        // 0<->1 both ways, 2->0 one way only, 1->1 a loop.
        let g = Csr::from_edges(3, &[(0, 1), (1, 0), (2, 0), (1, 1)], opts).unwrap();
        let units = edge_units(&g);
        let pairs: Vec<(u32, u32, u64)> = units.iter().map(|u| (u.src, u.dst, u.entries())).collect();
        assert_eq!(pairs, [(2, 0, 1), (0, 1, 2), (1, 1, 1)]);
        let mut edge_part = vec![u32::MAX; g.num_edges()];
        for (i, u) in units.iter().enumerate() {
            u.place(&mut edge_part, i as u32);
        }
        // Row 0 = [1, 2]: entry 1 -> 0 is the opposite of unit (0, 1).
        assert_eq!(edge_part, [1, 0, 1, 2]);
    }
}
