//! METIS k-way partitioning (the real METIS, through the `metis` crate).

use super::undirected::for_each_undirected_row;
use super::{PartitionError, check_parts};
use crate::Csr;

/// k-way METIS: minimises the edge cut with vertex counts balanced (METIS' default
/// tolerance, 3%). METIS needs an undirected graph without self-loops, so directed edges are
/// symmetrised and self-loops dropped first. METIS gets no vertex or edge weights (unit
/// weights are its default), and its input arrays are freed before this returns. `seed` seeds METIS' own generator.
pub fn metis(graph: &Csr, parts: usize, seed: u64) -> Result<Vec<u32>, PartitionError> {
    check_parts(parts, graph.num_nodes())?;
    if parts == 1 {
        return Ok(vec![0; graph.num_nodes()]);
    }
    // METIS' arrays are filled straight from the undirected rows: no undirected CSR (u64
    // offsets, u32 ids) is built first to be converted, so its input is the only extra copy.
    let n = graph.num_nodes();
    let too_large = |what: String| PartitionError::Metis(format!("{what} do not fit METIS' 32-bit indices"));
    if metis::Idx::try_from(n).is_err() {
        return Err(too_large(format!("{n} vertices")));
    }
    let mut xadj: Vec<metis::Idx> = Vec::with_capacity(n + 1);
    xadj.push(0);
    let mut adjncy: Vec<metis::Idx> = Vec::with_capacity(graph.num_edges());
    let mut fits = true;
    for_each_undirected_row(graph, |row| {
        if fits {
            // Vertex ids are below `n`, which fits.
            adjncy.extend(row.iter().map(|&u| u as metis::Idx));
            match metis::Idx::try_from(adjncy.len()) {
                Ok(end) => xadj.push(end),
                Err(_) => fits = false,
            }
        }
    });
    if !fits {
        return Err(too_large(format!("more than {} undirected edges", metis::Idx::MAX)));
    }
    let mut part = vec![0 as metis::Idx; n];
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
