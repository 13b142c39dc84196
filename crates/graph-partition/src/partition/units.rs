//! Edge units for vertex-cut partitioners: the two stored directions `u -> v` and `v -> u`
//! of an undirected edge touch the same two vertices, so they are placed together, as one
//! decision (splitting them could only add replicas).

use rayon::prelude::*;

use crate::Csr;

/// One placement decision: the canonical entry `entry` (edge `src -> dst`, in row `dst`),
/// standing also for the opposite entry `dst -> src` when the graph stores it (`paired`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EdgeUnit {
    pub entry: u64,
    pub src: u32,
    pub dst: u32,
    pub paired: bool,
}

impl EdgeUnit {
    /// Stored entries the unit places: 2 with the opposite entry, else 1.
    pub(super) fn entries(&self) -> u64 {
        1 + u64::from(self.paired)
    }
}

/// Index of the entry `src -> dst` (row `dst`, column `src`), if stored.
fn find_entry(graph: &Csr, src: u32, dst: u32) -> Option<usize> {
    let row = graph.row_range(dst as usize);
    graph.indices()[row.clone()].binary_search(&src).ok().map(|pos| row.start + pos)
}

/// The unit that entry `src -> dst` is canonical for, if any: an entry is canonical unless
/// `src > dst` and the opposite entry exists (then that opposite entry is the canonical one).
fn canonical_unit(graph: &Csr, entry: usize, src: u32, dst: u32) -> Option<EdgeUnit> {
    let opposite = src != dst && find_entry(graph, dst, src).is_some();
    (src <= dst || !opposite).then_some(EdgeUnit { entry: entry as u64, src, dst, paired: opposite })
}

/// The canonical entries in entry order.
pub(super) fn edge_units(graph: &Csr) -> Vec<EdgeUnit> {
    (0..graph.num_nodes())
        .into_par_iter()
        .flat_map_iter(|v| {
            graph.row_range(v).filter_map(move |k| canonical_unit(graph, k, graph.indices()[k], v as u32))
        })
        .collect()
}

/// Gives every non-canonical entry the part of its canonical opposite entry.
pub(super) fn copy_to_opposite_entries(graph: &Csr, edge_part: &mut [u32]) {
    let fill: Vec<(usize, u32)> = (0..graph.num_nodes())
        .into_par_iter()
        .flat_map_iter(|v| {
            let edge_part = &*edge_part;
            graph.row_range(v).filter_map(move |k| {
                let (src, dst) = (graph.indices()[k], v as u32);
                if src <= dst {
                    return None;
                }
                find_entry(graph, dst, src).map(|opposite| (k, edge_part[opposite]))
            })
        })
        .collect();
    for (k, p) in fill {
        edge_part[k] = p;
    }
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
            edge_part[u.entry as usize] = i as u32;
        }
        copy_to_opposite_entries(&g, &mut edge_part);
        // Row 0 = [1, 2]: entry 1 -> 0 is the opposite of unit (0, 1).
        assert_eq!(edge_part, [1, 0, 1, 2]);
    }
}
