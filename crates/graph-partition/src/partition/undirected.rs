//! The undirected simple view of a graph that structure-aware partitioners work on.

use crate::Csr;

/// The union of `graph` and its reverse, without self-loops: every row lists each
/// neighbour once, whichever way the edges point.
pub(super) fn undirected_simple(graph: &Csr) -> Csr {
    let rev = graph.reverse();
    let mut indptr = Vec::with_capacity(graph.num_nodes() + 1);
    indptr.push(0u64);
    let mut indices = Vec::with_capacity(graph.num_edges());
    for v in 0..graph.num_nodes() {
        let (a, b) = (graph.neighbors(v), rev.neighbors(v));
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
                indices.push(next);
            }
        }
        indptr.push(indices.len() as u64);
    }
    Csr::try_new(graph.num_nodes(), graph.num_nodes(), indptr, indices).expect("merging sorted rows keeps CSR valid")
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
    }
}
