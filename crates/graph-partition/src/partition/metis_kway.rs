//! METIS k-way partitioning (the real METIS, through the `metis` crate).

use super::undirected::undirected_simple;
use super::{PartitionError, check_parts};
use crate::Csr;

/// k-way METIS: minimises the edge cut with vertex counts balanced (METIS' default
/// tolerance, 3%). METIS needs an undirected graph without self-loops, so directed edges are
/// symmetrised and self-loops dropped first. `seed` seeds METIS' own generator.
pub fn metis(graph: &Csr, parts: usize, seed: u64) -> Result<Vec<u32>, PartitionError> {
    check_parts(parts, graph.num_nodes())?;
    if parts == 1 {
        return Ok(vec![0; graph.num_nodes()]);
    }
    let g = undirected_simple(graph);
    let too_large = || PartitionError::Metis(format!("{} edges do not fit METIS' 32-bit indices", g.num_edges()));
    let xadj =
        g.indptr().iter().map(|&x| metis::Idx::try_from(x).map_err(|_| too_large())).collect::<Result<Vec<_>, _>>()?;
    let adjncy =
        g.indices().iter().map(|&x| metis::Idx::try_from(x).map_err(|_| too_large())).collect::<Result<Vec<_>, _>>()?;
    let mut part = vec![0 as metis::Idx; g.num_nodes()];
    // METIS takes a C int seed; fold the 64-bit seed into its non-negative range.
    let metis_seed = ((seed ^ (seed >> 31)) & 0x7fff_ffff) as metis::Idx;
    // GKlib keeps METIS' random generator in process-wide statics: concurrent calls would race
    // on it and lose determinism, so one METIS call runs at a time.
    static METIS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = METIS_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    metis::Graph::new(1, parts as metis::Idx, &xadj, &adjncy)
        .map_err(|e| PartitionError::Metis(e.to_string()))?
        .set_option(metis::option::Seed(metis_seed))
        .part_kway(&mut part)
        .map_err(|e| PartitionError::Metis(format!("{e:?}")))?;
    Ok(part.into_iter().map(|p| p as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    /// Two 10-cliques joined by one edge: METIS must cut exactly that edge.
    #[test]
    fn splits_two_cliques_at_the_bridge() {
        let mut edges = Vec::new();
        for base in [0u32, 10] {
            for a in 0..10 {
                for b in a + 1..10 {
                    edges.push((base + a, base + b));
                }
            }
        }
        edges.push((9, 10));
        let g = Csr::from_edges(20, &edges, EdgeListOptions::default()).unwrap();
        let owner = metis(&g, 2, 1).unwrap();
        assert!(owner[..10].iter().all(|&p| p == owner[0]));
        assert!(owner[10..].iter().all(|&p| p == owner[10]));
        assert_ne!(owner[0], owner[10]);
        assert_eq!(metis(&g, 1, 1).unwrap(), vec![0; 20]);
    }
}
