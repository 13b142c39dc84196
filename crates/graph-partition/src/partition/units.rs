//! Edge units for vertex-cut partitioners: the two stored directions `u -> v` and `v -> u`
//! of an undirected edge touch the same two vertices, so they are placed together, as one
//! decision (splitting them could only add replicas).

use rayon::prelude::*;

use crate::Csr;

/// One placement decision: the canonical entry `entry` (edge `src -> dst`, in row `dst`),
/// standing also for the opposite entry `dst -> src` when the graph stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EdgeUnit {
    pub entry: u64,
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

/// Index of the entry `src -> dst` (row `dst`, column `src`), if stored.
fn find_entry(graph: &Csr, src: u32, dst: u32) -> Option<usize> {
    let row = graph.row_range(dst as usize);
    graph.indices()[row.clone()].binary_search(&src).ok().map(|pos| row.start + pos)
}

/// The unit that entry `src -> dst` is canonical for, if any: an entry is canonical unless
/// `src > dst` and the opposite entry exists (then that opposite entry is the canonical one).
fn canonical_unit(graph: &Csr, entry: usize, src: u32, dst: u32) -> Option<EdgeUnit> {
    let opposite = if src == dst { None } else { find_entry(graph, dst, src) };
    (src <= dst || opposite.is_none()).then_some(EdgeUnit {
        entry: entry as u64,
        opposite: opposite.map_or(NO_OPPOSITE, |k| k as u64),
        src,
        dst,
    })
}

/// The canonical entries in entry order; placing all of them places every entry once.
pub(super) fn edge_units(graph: &Csr) -> Vec<EdgeUnit> {
    let t = std::time::Instant::now();
    let mut seq = Vec::new();
    for v in 0..graph.num_nodes() {
        for k in graph.row_range(v) {
            if let Some(u) = canonical_unit(graph, k, graph.indices()[k], v as u32) { seq.push(u); }
        }
    }
    eprintln!("seq units {:.2} {}", t.elapsed().as_secs_f64(), seq.len());
    let t = std::time::Instant::now();
    let mut cnt = 0usize;
    for v in 0..graph.num_nodes() {
        for k in graph.row_range(v) {
            cnt += (graph.indices()[k] < v as u32) as usize;
        }
    }
    eprintln!("scan {:.2} {}", t.elapsed().as_secs_f64(), cnt);
    let t = std::time::Instant::now();
    let r: Vec<EdgeUnit> = (0..graph.num_nodes())
        .into_par_iter()
        .flat_map_iter(|v| {
            graph.row_range(v).filter_map(move |k| canonical_unit(graph, k, graph.indices()[k], v as u32))
        })
        .collect();
    eprintln!("par units {:.2}", t.elapsed().as_secs_f64());
    r
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
