//! Full-graph layers over sampled in-edges (EC-Graph's sampled mode): every destination keeps
//! a uniform subset of its in-edges, drawn anew per epoch and layer, while every vertex stays in
//! the graph. Draws are the mini-batch sampler's ([`super::draw`]), keyed by (seed, epoch, layer,
//! global id of the destination) with step 0, over the row ordered by global id: a vertex
//! therefore keeps the same in-neighbours whichever part holds it, however that part numbers
//! its vertices, so partitioned training on sampled edges can equal single-process training on
//! them.

use super::Fanout;
use super::draw::{LayerKey, RowSampler};
use super::neighbor::{SampleError, for_row_chunks, for_rows};
use crate::csr::Csr;

/// Graphs with fewer rows are sampled serially.
const PARALLEL_MIN_ROWS: usize = 1024;

/// `graph` (row `v` lists the sources of the edges into `v`) with the rows `0..rows` keeping
/// `fanout.limit(degree)` of their in-edges and the rows past them none, same vertex ids.
/// `keys[v]` is the global id of vertex `v`: it keys `v`'s draw and orders its candidates.
pub fn sample_in_edges(
    graph: &Csr,
    rows: usize,
    keys: &[u32],
    fanout: Fanout,
    seed: u64,
    epoch: u64,
    layer: usize,
) -> Result<Csr, SampleError> {
    let n = graph.num_rows();
    if graph.num_cols() != n {
        return Err(SampleError::NotSquare { rows: n, cols: graph.num_cols() });
    }
    if keys.len() != n {
        return Err(SampleError::KeyCount { keys: keys.len(), num_nodes: n });
    }
    let rows = rows.min(n);
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0u64);
    let mut nnz = 0u64;
    for v in 0..n {
        if v < rows {
            nnz += fanout.limit(graph.degree(v)) as u64;
        }
        indptr.push(nnz);
    }
    let mut cols = vec![0u32; nnz as usize];
    let key = LayerKey::new(seed, epoch, 0, layer);
    for_row_chunks(&indptr, &mut cols, n >= PARALLEL_MIN_ROWS, |chunk, out| {
        let (mut sampler, mut by_key, mut candidates, mut picked) =
            (RowSampler::default(), Vec::new(), Vec::new(), Vec::new());
        for_rows(&indptr, chunk, out, |v, row_out| {
            if row_out.is_empty() {
                return;
            }
            // Candidates in global-id order, the order the whole graph's row has.
            by_key.clear();
            by_key.extend(graph.neighbors(v).iter().map(|&u| (keys[u as usize], u)));
            by_key.sort_unstable();
            candidates.clear();
            candidates.extend(by_key.iter().map(|&(k, _)| k));
            picked.resize(row_out.len(), 0);
            sampler.draw(key, keys[v], &candidates, fanout, &mut picked);
            for (slot, k) in row_out.iter_mut().zip(&picked) {
                let at = by_key.binary_search_by_key(k, |&(key, _)| key).expect("a drawn key is a candidate's");
                *slot = by_key[at].1;
            }
            row_out.sort_unstable();
        });
    });
    Ok(Csr::try_new(n, n, indptr, cols).expect("sampled rows are sorted, distinct subsets of valid rows"))
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use proptest::prelude::*;

    use super::*;
    use crate::csr::EdgeListOptions;

    fn take(k: u32) -> Fanout {
        Fanout::Take(NonZeroU32::new(k).unwrap())
    }

    fn random_graph(n: usize, edges: &[(u32, u32)]) -> Csr {
        let edges: Vec<(u32, u32)> = edges.iter().map(|&(a, b)| (a % n as u32, b % n as u32)).collect();
        Csr::from_edges(n, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap()
    }

    /// The sampled rows of `graph` as sets of global ids, per global destination.
    fn global_rows(graph: &Csr, keys: &[u32], rows: usize) -> Vec<(u32, Vec<u32>)> {
        let mut out: Vec<(u32, Vec<u32>)> = (0..rows)
            .map(|v| {
                let mut row: Vec<u32> = graph.neighbors(v).iter().map(|&u| keys[u as usize]).collect();
                row.sort_unstable();
                (keys[v], row)
            })
            .collect();
        out.sort_unstable();
        out
    }

    proptest! {
        /// Every sampled row is a subset of its row of the size the fanout allows, rows past
        /// `rows` are empty, and relabelling the vertices (as a part numbers them) changes no
        /// vertex's sample.
        #[test]
        fn samples_are_bounded_subsets_keyed_by_global_id(
            n in 2usize..40,
            edges in proptest::collection::vec((0u32..40, 0u32..40), 0..300),
            k in 1u32..6,
            rows_cut in 0usize..40,
            seed in 0u64..4,
            epoch in 0u64..3,
            perm_seed in any::<u64>(),
        ) {
            let graph = random_graph(n, &edges);
            let rows = rows_cut.min(n);
            let identity: Vec<u32> = (0..n as u32).collect();
            let sampled = sample_in_edges(&graph, rows, &identity, take(k), seed, epoch, 1).unwrap();
            for v in 0..n {
                let row = sampled.neighbors(v);
                if v < rows {
                    prop_assert_eq!(row.len(), graph.degree(v).min(k as usize));
                    prop_assert!(row.iter().all(|u| graph.neighbors(v).binary_search(u).is_ok()));
                } else {
                    prop_assert!(row.is_empty());
                }
            }
            // Relabel: local id `i` is global vertex `order[i]`, with the first `rows` local ids
            // the same destinations as above (a part's primaries), in another order.
            let mut order = identity.clone();
            let mut state = perm_seed | 1;
            for i in (1..n).rev() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let j = (state >> 33) as usize % (i + 1);
                let (lo, hi) = if i < rows || j >= rows { (i, j) } else { (i, i) };
                order.swap(lo, hi);
            }
            let mut local_of = vec![0u32; n];
            for (i, &g) in order.iter().enumerate() {
                local_of[g as usize] = i as u32;
            }
            let relabelled: Vec<(u32, u32)> = (0..n)
                .flat_map(|v| graph.neighbors(v).iter().map(move |&u| (u, v as u32)).collect::<Vec<_>>())
                .map(|(u, v)| (local_of[u as usize], local_of[v as usize]))
                .collect();
            let local = random_graph(n, &relabelled);
            let local_sampled = sample_in_edges(&local, rows, &order, take(k), seed, epoch, 1).unwrap();
            prop_assert_eq!(global_rows(&local_sampled, &order, rows), global_rows(&sampled, &identity, rows));
        }
    }

    #[test]
    fn every_edge_is_kept_when_the_fanout_covers_the_degree() {
        let edges: Vec<(u32, u32)> = (0..200u32).map(|i| (i % 30, (i / 30 + 1 + i * i) % 30)).collect();
        let graph = random_graph(30, &edges);
        assert!(graph.num_edges() > 90, "the graph needs rows longer than the fanout");
        let keys: Vec<u32> = (0..30).collect();
        for fanout in [Fanout::All, take(1000)] {
            assert_eq!(sample_in_edges(&graph, 30, &keys, fanout, 1, 2, 0).unwrap(), graph);
        }
        let fewer = sample_in_edges(&graph, 30, &keys, take(2), 1, 2, 0).unwrap();
        assert!(fewer.num_edges() < graph.num_edges());
        // Another epoch or layer draws again.
        assert_ne!(sample_in_edges(&graph, 30, &keys, take(2), 1, 3, 0).unwrap(), fewer);
        assert_ne!(sample_in_edges(&graph, 30, &keys, take(2), 1, 2, 1).unwrap(), fewer);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let graph = random_graph(4, &[(0, 1), (1, 2)]);
        let err = sample_in_edges(&graph, 4, &[0, 1, 2], Fanout::All, 0, 0, 0).unwrap_err();
        assert_eq!(err, SampleError::KeyCount { keys: 3, num_nodes: 4 });
        let rect = Csr::try_new(2, 3, vec![0, 0, 1], vec![2]).unwrap();
        let err = sample_in_edges(&rect, 2, &[0, 1], Fanout::All, 0, 0, 0).unwrap_err();
        assert_eq!(err, SampleError::NotSquare { rows: 2, cols: 3 });
    }
}
