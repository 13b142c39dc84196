//! Shared helpers for the partitioning tests: test graphs and an independent recomputation
//! of the partition metrics straight from the partition arrays (not from the book).

#![allow(dead_code)] // Each test binary uses a different subset of the helpers.

use std::path::PathBuf;

use graph_partition::partition::{HostLayout, Partition};
use graph_partition::{CacheMode, Csr, Dataset, LoadOptions};

/// Cora as vendored under `datasets/cora`; fails loudly when it is missing.
pub fn cora() -> Dataset {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../datasets/cora"));
    assert!(dir.is_dir(), "Cora is missing: expected the vendored copy at {}", dir.display());
    // No cache: tests leave the source tree as they found it.
    Dataset::load(&dir, &LoadOptions { cache: CacheMode::Off, ..LoadOptions::default() })
        .unwrap_or_else(|e| panic!("cannot load Cora from {}: {e}", dir.display()))
}

/// Metrics recomputed from a partition's arrays alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub replication_factor: f64,
    pub edge_imbalance: f64,
    pub vertex_imbalance: f64,
    pub edge_cut_fraction: Option<f64>,
    pub remote_neighbor_ratio: f64,
    pub max_inner: u64,
    pub max_outer: u64,
}

/// For every vertex, the set of parts holding it, as a sorted list.
pub fn holders(graph: &Csr, partition: &Partition) -> Vec<Vec<u32>> {
    let n = graph.num_nodes();
    let mut sets: Vec<Vec<u32>> = vec![Vec::new(); n];
    match partition {
        Partition::EdgeCut { owner, .. } => {
            for v in 0..n {
                sets[v].push(owner[v]);
                for &u in graph.neighbors(v) {
                    sets[u as usize].push(owner[v]);
                }
            }
        }
        Partition::VertexCut { edge_part, master, .. } => {
            for v in 0..n {
                sets[v].push(master[v]);
                for k in graph.row_range(v) {
                    sets[v].push(edge_part[k]);
                    sets[graph.indices()[k] as usize].push(edge_part[k]);
                }
            }
        }
        Partition::FeatureCut { .. } => panic!("no structure split"),
    }
    for s in &mut sets {
        s.sort_unstable();
        s.dedup();
    }
    sets
}

pub fn expected_metrics(graph: &Csr, partition: &Partition, layout: &HostLayout) -> Expected {
    let (n, e, p) = (graph.num_nodes(), graph.num_edges(), partition.parts());
    let holders = holders(graph, partition);
    let (primary, edges, vertex_cut): (Vec<u32>, Vec<usize>, bool) = match partition {
        Partition::EdgeCut { owner, .. } => {
            let mut edges = vec![0; p];
            (0..n).for_each(|v| edges[owner[v] as usize] += graph.degree(v));
            (owner.clone(), edges, false)
        }
        Partition::VertexCut { edge_part, master, .. } => {
            let mut edges = vec![0; p];
            edge_part.iter().for_each(|&q| edges[q as usize] += 1);
            (master.clone(), edges, true)
        }
        Partition::FeatureCut { .. } => unreachable!(),
    };
    let mut local = vec![0usize; p];
    let mut owned = vec![0usize; p];
    let mut inner = vec![0u64; p];
    let mut outer = vec![0u64; p];
    let mut count = |from: u32, to: u32| {
        if layout.host_of(from as usize) == layout.host_of(to as usize) {
            inner[from as usize] += 1;
        } else {
            outer[from as usize] += 1;
        }
    };
    for v in 0..n {
        owned[primary[v] as usize] += 1;
        for &q in &holders[v] {
            local[q as usize] += 1;
            if q != primary[v] {
                // The primary supplies every copy; a vertex-cut mirror also reports back.
                count(primary[v], q);
                if vertex_cut {
                    count(q, primary[v]);
                }
            }
        }
    }
    let total_local: usize = local.iter().sum();
    let cut = (!vertex_cut).then(|| {
        let cut: usize =
            (0..n).map(|v| graph.neighbors(v).iter().filter(|&&u| primary[u as usize] != primary[v]).count()).sum();
        cut as f64 / e.max(1) as f64
    });
    let max = |v: &[usize]| *v.iter().max().unwrap() as f64;
    Expected {
        replication_factor: total_local as f64 / n as f64,
        edge_imbalance: max(&edges) / (e.max(1) as f64 / p as f64),
        vertex_imbalance: if vertex_cut {
            max(&local) / (total_local as f64 / p as f64)
        } else {
            max(&owned) / (n as f64 / p as f64)
        },
        edge_cut_fraction: cut,
        remote_neighbor_ratio: (total_local - n) as f64 / n as f64,
        max_inner: *inner.iter().max().unwrap(),
        max_outer: *outer.iter().max().unwrap(),
    }
}
