//! The undirected simple view of a graph that structure-aware partitioners work on.
//!
//! METIS and BDG work on it row by row: METIS' 32-bit arrays are filled from it directly, and a
//! graph that is already symmetric needs no reverse edges added.

use crate::Csr;

/// The union of `graph` and its reverse, without self-loops: every row lists each
/// neighbour once, whichever way the edges point.
pub(super) fn undirected_simple(graph: &Csr) -> Csr {
    let mut indptr = Vec::with_capacity(graph.num_nodes() + 1);
    indptr.push(0u64);
    let mut indices = Vec::with_capacity(graph.num_edges());
    for_each_undirected_row(graph, |row| {
        indices.extend_from_slice(row);
        indptr.push(indices.len() as u64);
    });
    Csr::try_new(graph.num_nodes(), graph.num_nodes(), indptr, indices).expect("merging sorted rows keeps CSR valid")
}

/// Calls `row` with every vertex's row of [`undirected_simple`]'s view, in vertex order, so
/// that a caller can store it in the form it needs without a copy of the view in between. A
/// symmetric graph is its own reverse (datasets are symmetrised when loaded), so no reverse
/// is built for it.
pub(super) fn for_each_undirected_row(graph: &Csr, mut row: impl FnMut(&[u32])) {
    let rev = (!graph.is_symmetric()).then(|| graph.reverse());
    let mut merged = Vec::new();
    for v in 0..graph.num_nodes() {
        merged.clear();
        let a = graph.neighbors(v);
        let Some(rev) = &rev else {
            merged.extend(a.iter().copied().filter(|&u| u as usize != v));
            row(&merged);
            continue;
        };
        let b = rev.neighbors(v);
        let (mut i, mut j) = (0, 0);
        loop {
            let next = match (a.get(i), b.get(j)) {
                (None, None) => break,
                (Some(&x), Some(&y)) => {
                    let m = x.min(y);
                    i += usize::from(x == m);
                    j += usize::from(y == m);
                    m
                }
                (Some(&x), None) => {
                    i += 1;
                    x
                }
                (None, Some(&y)) => {
                    j += 1;
                    y
                }
            };
            if next as usize != v {
                merged.push(next);
            }
        }
        row(&merged);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    #[test]
    fn symmetrises_and_drops_loops() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        let g = Csr::from_edges(3, &[(0, 1), (1, 1), (2, 1), (1, 2)], opts).unwrap();
        let u = undirected_simple(&g);
        assert_eq!(u.neighbors(0), &[1]);
        assert_eq!(u.neighbors(1), &[0, 2]);
        assert_eq!(u.neighbors(2), &[1]);
        assert!(u.is_symmetric());
        assert!(!g.is_symmetric());
    }

    /// A symmetric graph skips the reverse; its view is the graph without self-loops.
    #[test]
    fn symmetric_graphs_lose_only_their_loops() {
        let opts = EdgeListOptions { symmetrize: true, remove_self_loops: false };
        let g = Csr::from_edges(4, &[(0, 1), (1, 1), (2, 1), (3, 0), (2, 2)], opts).unwrap();
        assert!(g.is_symmetric());
        let u = undirected_simple(&g);
        assert_eq!(u.neighbors(0), &[1, 3]);
        assert_eq!(u.neighbors(1), &[0, 2]);
        assert_eq!(u.neighbors(2), &[1]);
        assert_eq!(u.neighbors(3), &[0]);
    }
}
