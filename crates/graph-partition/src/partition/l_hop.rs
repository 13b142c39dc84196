//! ADGraph's l-hop expansion: each part keeps, besides its own vertices, the l-hop
//! in-neighbourhood of its training vertices, so that l-layer sampling needs no other part.

use rayon::prelude::*;

use super::{PartitionError, check_ids, check_len, check_parts};
use crate::Csr;

/// For each part: its owned vertices plus every vertex within `hops` in-edges (the direction
/// messages flow in) of a training vertex it owns, ascending.
pub fn expand_l_hop(
    graph: &Csr,
    parts: usize,
    owner: &[u32],
    train_ids: &[u32],
    hops: usize,
) -> Result<Vec<Vec<u32>>, PartitionError> {
    let n = graph.num_nodes();
    check_parts(parts, n)?;
    check_len("owner", owner.len(), n)?;
    check_ids("owner", owner, parts)?;
    if let Some(&id) = train_ids.iter().find(|&&t| t as usize >= n) {
        return Err(PartitionError::TrainId { id, nodes: n });
    }
    Ok((0..parts as u32)
        .into_par_iter()
        .map(|p| {
            let mut seen = vec![false; n];
            let mut frontier: Vec<u32> = train_ids.iter().copied().filter(|&t| owner[t as usize] == p).collect();
            frontier.iter().for_each(|&t| seen[t as usize] = true);
            for _ in 0..hops {
                let mut next = Vec::new();
                for &v in &frontier {
                    for &u in graph.neighbors(v as usize) {
                        if !std::mem::replace(&mut seen[u as usize], true) {
                            next.push(u);
                        }
                    }
                }
                frontier = next;
            }
            (0..n as u32).filter(|&v| owner[v as usize] == p || seen[v as usize]).collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    #[test]
    fn keeps_owned_plus_hops_around_training_nodes() {
        // Path 0-1-2-3-4-5-6-7; part 0 owns 0..4, part 1 owns 4..8; training nodes 2 and 7.
        let edges: Vec<(u32, u32)> = (1..8).map(|v| (v - 1, v)).collect();
        let g = Csr::from_edges(8, &edges, EdgeListOptions::default()).unwrap();
        let owner = [0, 0, 0, 0, 1, 1, 1, 1];
        let sets = expand_l_hop(&g, 2, &owner, &[2, 7], 2).unwrap();
        assert_eq!(sets[0], [0, 1, 2, 3, 4]);
        assert_eq!(sets[1], [4, 5, 6, 7]);
        let sets = expand_l_hop(&g, 2, &owner, &[3], 3).unwrap();
        assert_eq!(sets[0], [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(expand_l_hop(&g, 2, &owner, &[8], 1), Err(PartitionError::TrainId { id: 8, nodes: 8 }));
        // The expansion walks through owned vertices too: from 0, two hops reach 2 via 1.
        let owner = [0, 0, 1, 1, 1, 1, 1, 1];
        assert_eq!(expand_l_hop(&g, 2, &owner, &[0], 2).unwrap()[0], [0, 1, 2]);
    }
}
