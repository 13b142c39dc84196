//! Block-based Deterministic Greedy partitioning (BDG, from G-Miner; the feature-partition
//! paper's third baseline): BFS from random sources cuts the graph into small connected
//! blocks, then blocks are dealt to parts greedily, each to the part it has most edges to,
//! discounted by how full that part already is (linear deterministic greedy on blocks).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::undirected::undirected_simple;
use super::{PartitionError, check_parts};
use crate::Csr;
use crate::rng::SplitMix64;

/// BDG's knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BdgOptions {
    /// Seeds the order of BFS sources.
    pub seed: u64,
    /// Target number of blocks per part; blocks hold at most `ceil(n / (parts * blocks_per_part))`
    /// vertices. More blocks balance better, fewer cut fewer edges.
    pub blocks_per_part: usize,
    /// A part accepts a block only while it stays under `(1 + slack) * n / parts` vertices.
    pub slack: f64,
}

impl Default for BdgOptions {
    fn default() -> Self {
        Self { seed: 0, blocks_per_part: 32, slack: 0.05 }
    }
}

/// Runs BDG; see the module documentation. Edge directions are ignored.
pub fn bdg(graph: &Csr, parts: usize, opts: &BdgOptions) -> Result<Vec<u32>, PartitionError> {
    check_parts(parts, graph.num_nodes())?;
    if !(opts.slack.is_finite() && opts.slack >= 0.0) {
        return Err(PartitionError::Weight { name: "slack", value: opts.slack });
    }
    let g = undirected_simple(graph);
    let n = g.num_nodes();
    let block_cap = n.div_ceil(parts * opts.blocks_per_part.max(1)).max(1);
    let (block, sizes) = bfs_blocks(&g, block_cap, opts.seed);
    let links = block_links(&g, &block, sizes.len());
    let capacity = (1.0 + opts.slack) * n as f64 / parts as f64;
    let block_part = deal_blocks(&links, &sizes, parts, capacity);
    Ok(block.iter().map(|&b| block_part[b as usize]).collect())
}

/// Grows blocks by BFS from sources in seeded random order; a block stops at `cap` vertices
/// and its unvisited frontier is left for later sources. Returns each vertex's block and
/// the block sizes.
fn bfs_blocks(g: &Csr, cap: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let n = g.num_nodes();
    let mut sources: Vec<u32> = (0..n as u32).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        sources.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut block = vec![u32::MAX; n];
    let mut sizes = Vec::new();
    let mut queue = VecDeque::new();
    for &s in &sources {
        if block[s as usize] != u32::MAX {
            continue;
        }
        let id = sizes.len() as u32;
        let mut size = 1usize;
        block[s as usize] = id;
        queue.clear();
        queue.push_back(s);
        'grow: while let Some(v) = queue.pop_front() {
            for &u in g.neighbors(v as usize) {
                if size == cap {
                    break 'grow;
                }
                if block[u as usize] == u32::MAX {
                    block[u as usize] = id;
                    size += 1;
                    queue.push_back(u);
                }
            }
        }
        sizes.push(size as u32);
    }
    (block, sizes)
}

/// The block graph: for each block, its neighbouring blocks with the number of edges between.
fn block_links(g: &Csr, block: &[u32], num_blocks: usize) -> Vec<Vec<(u32, u32)>> {
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for v in 0..g.num_nodes() {
        let bv = block[v];
        pairs.extend(g.neighbors(v).iter().map(|&u| block[u as usize]).filter(|&bu| bu != bv).map(|bu| (bv, bu)));
    }
    pairs.sort_unstable();
    let mut links = vec![Vec::new(); num_blocks];
    for run in pairs.chunk_by(|a, b| a == b) {
        links[run[0].0 as usize].push((run[0].1, run.len() as u32));
    }
    links
}

/// Deals blocks in creation order: each goes to the part maximising
/// `edges to the part * (1 - load / capacity)` among parts it fits in (ties: lighter part,
/// then lower id); when it fits nowhere, to the lightest part.
fn deal_blocks(links: &[Vec<(u32, u32)>], sizes: &[u32], parts: usize, capacity: f64) -> Vec<u32> {
    let mut block_part = vec![u32::MAX; sizes.len()];
    let mut load = vec![0u64; parts];
    let mut conn = vec![0u64; parts];
    for (b, &size) in sizes.iter().enumerate() {
        conn.fill(0);
        for &(nb, w) in &links[b] {
            let p = block_part[nb as usize];
            if p != u32::MAX {
                conn[p as usize] += w as u64;
            }
        }
        let lightest = (0..parts).min_by_key(|&p| (load[p], p)).expect("parts >= 1");
        let best = (0..parts)
            .filter(|&p| (load[p] + size as u64) as f64 <= capacity)
            .map(|p| (conn[p] as f64 * (1.0 - load[p] as f64 / capacity), p))
            .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| (load[b.1], b.1).cmp(&(load[a.1], a.1))))
            .map_or(lightest, |(_, p)| p);
        block_part[b] = best as u32;
        load[best] += size as u64;
    }
    block_part
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    /// A ring of `k` cliques of size `s`, neighbouring cliques joined by one edge.
    fn ring_of_cliques(k: u32, s: u32) -> Csr {
        let mut edges = Vec::new();
        for c in 0..k {
            let base = c * s;
            for a in 0..s {
                for b in a + 1..s {
                    edges.push((base + a, base + b));
                }
            }
            edges.push((base + s - 1, ((c + 1) % k) * s));
        }
        Csr::from_edges((k * s) as usize, &edges, EdgeListOptions::default()).unwrap()
    }

    #[test]
    fn blocks_are_capped_and_cover_everything() {
        let g = ring_of_cliques(8, 12);
        let (block, sizes) = bfs_blocks(&g, 5, 3);
        assert!(block.iter().all(|&b| (b as usize) < sizes.len()));
        assert!(sizes.iter().all(|&s| (1..=5).contains(&s)));
        assert_eq!(sizes.iter().map(|&s| s as usize).sum::<usize>(), g.num_nodes());
    }

    #[test]
    fn balanced_and_cuts_far_fewer_edges_than_random() {
        let g = ring_of_cliques(16, 25);
        let owner = bdg(&g, 4, &BdgOptions { seed: 9, ..BdgOptions::default() }).unwrap();
        assert_eq!(owner, bdg(&g, 4, &BdgOptions { seed: 9, ..BdgOptions::default() }).unwrap());
        let mut sizes = [0usize; 4];
        owner.iter().for_each(|&p| sizes[p as usize] += 1);
        let cap = (1.05 * 400.0 / 4.0) as usize;
        assert!(sizes.iter().all(|&s| s <= cap), "{sizes:?}");
        let cut = |o: &[u32]| {
            (0..g.num_nodes())
                .flat_map(|v| g.neighbors(v).iter().map(move |&u| (u, v)))
                .filter(|&(u, v)| o[u as usize] != o[v])
                .count()
        };
        let random = super::super::random(&g, 4, 9).unwrap();
        assert!(cut(&owner) * 4 < cut(&random), "bdg {} random {}", cut(&owner), cut(&random));
    }
}
