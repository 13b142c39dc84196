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

    mod props {
        use std::collections::BTreeSet;

        use proptest::prelude::*;

        use super::*;
        use crate::sample::{Fanouts, NeighborSampler, StepKey};

        /// A graph, an owner per vertex over `parts` parts, training vertices and hop count.
        fn case() -> impl Strategy<Value = (Csr, usize, Vec<u32>, Vec<u32>, usize)> {
            (4usize..40, 1usize..4).prop_flat_map(|(n, parts)| {
                let edges = prop::collection::vec((0..n as u32, 0..n as u32), 0..n * 4);
                let owner = prop::collection::vec(0..parts as u32, n);
                let train = prop::collection::btree_set(0..n as u32, 1..=n);
                (edges, Just(parts), owner, train, 0usize..4, any::<bool>()).prop_map(
                    move |(edges, parts, owner, train, hops, symmetrize)| {
                        let opts = EdgeListOptions { symmetrize, remove_self_loops: true };
                        let graph = Csr::from_edges(n, &edges, opts).unwrap();
                        (graph, parts, owner, train.into_iter().collect(), hops)
                    },
                )
            })
        }

        /// Vertices within `hops` in-edges of `from`.
        fn within(graph: &Csr, from: &[u32], hops: usize) -> BTreeSet<u32> {
            let mut reached: BTreeSet<u32> = from.iter().copied().collect();
            let mut frontier = reached.clone();
            for _ in 0..hops {
                frontier = frontier.iter().flat_map(|&v| graph.neighbors(v as usize).iter().copied()).collect();
                frontier.retain(|v| !reached.contains(v));
                reached.extend(&frontier);
            }
            reached
        }

        proptest! {
            /// A part is its owned vertices plus exactly the vertices within `hops` of its
            /// training vertices, ascending; every sample of up to `hops` layers around its
            /// training vertices stays inside it and, drawn inside the part with global keys,
            /// equals the whole graph's sample.
            #[test]
            fn parts_hold_the_l_hop_neighbourhood_and_local_samples_equal_global_ones(
                (graph, parts, owner, train, hops) in case(),
                fanout in prop_oneof![Just(-1i64), 1i64..4],
                seed in any::<u64>(),
            ) {
                let sets = expand_l_hop(&graph, parts, &owner, &train, hops).unwrap();
                prop_assert_eq!(sets.len(), parts);
                for (p, set) in sets.iter().enumerate() {
                    prop_assert!(set.windows(2).all(|w| w[0] < w[1]));
                    let mine: Vec<u32> = train.iter().copied().filter(|&t| owner[t as usize] == p as u32).collect();
                    let mut expected = within(&graph, &mine, hops);
                    expected.extend((0..graph.num_nodes() as u32).filter(|&v| owner[v as usize] == p as u32));
                    prop_assert_eq!(set.iter().copied().collect::<BTreeSet<_>>(), expected);
                    if hops == 0 || mine.is_empty() {
                        continue;
                    }
                    let fanouts = Fanouts::from_ints(&vec![fanout; hops]).unwrap();
                    let key = StepKey { epoch: 1, step: 2 };
                    let global = NeighborSampler::new(&graph, fanouts.clone(), seed).unwrap().sample(key, &mine).unwrap();
                    for block in global.blocks() {
                        prop_assert!(block.src_ids().iter().all(|g| set.binary_search(g).is_ok()));
                    }
                    let sub = graph.induced_subgraph(set);
                    let local_seeds: Vec<u32> = mine.iter().map(|g| set.binary_search(g).unwrap() as u32).collect();
                    let sampler = NeighborSampler::new(&sub, fanouts, seed).unwrap().with_keys(set).unwrap();
                    let local = sampler.sample(key, &local_seeds).unwrap();
                    for (l, g) in local.blocks().iter().zip(global.blocks()) {
                        let mapped: Vec<u32> = l.src_ids().iter().map(|&v| set[v as usize]).collect();
                        prop_assert_eq!(&mapped[..], g.src_ids());
                        prop_assert_eq!(l.adj(), g.adj());
                    }
                }
            }
        }
    }
}
