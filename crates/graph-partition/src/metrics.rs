//! Partition-quality metrics (names as in the partition report of docs/ARCHITECTURE.md), computed from a
//! [`PartitionBook`], plus the cost of partitioning (time, peak memory).
//!
//! With `|V_i|` the local vertices of part `i` (primaries and copies), `|E_i|` its stored
//! edges, `P` parts, `|V|` and `|E|` the graph's vertices and stored edges:
//! - `replication_factor` = `sum |V_i| / |V|`;
//! - `edge_imbalance` = `max |E_i| / (|E| / P)` (edge-cut: in-edges of owned vertices);
//! - `vertex_imbalance`: vertex-cut `max |V_i| / (sum |V_i| / P)` (CDFGNN), edge-cut
//!   `max owned_i / (|V| / P)`;
//! - `edge_cut_fraction` (edge-cut only): share of stored edges whose source is owned
//!   elsewhere;
//! - `remote_neighbor_ratio` (AdaQP Table 1): copies per primary, i.e. the average halo
//!   (edge-cut) or mirror (vertex-cut) count divided by the average primary count;
//! - `max_inner_connections` / `max_outer_connections` (CDFGNN Table 3): the most vertex
//!   messages one part sends in one synchronisation of a layer to parts on its own host /
//!   on other hosts. Edge-cut: the owned rows it supplies to peers' halos. Vertex-cut: one
//!   partial sum per mirror to its master plus one value per mirror from each master.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::book::{BookMeta, CutKind, LocalGraph, PartitionBook};
use crate::partition::HostLayout;

/// One part's share, as counted by the metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartStats {
    pub part: usize,
    pub host: usize,
    pub primaries: usize,
    pub copies: usize,
    pub edges: usize,
    /// Messages sent per synchronisation to parts on the same host.
    pub inner_connections: u64,
    /// Messages sent per synchronisation to parts on other hosts.
    pub outer_connections: u64,
}

/// The quality of a partition; see the module documentation for definitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionMetrics {
    pub parts: usize,
    pub hosts: usize,
    pub replication_factor: f64,
    pub edge_imbalance: f64,
    pub vertex_imbalance: f64,
    pub edge_cut_fraction: Option<f64>,
    pub remote_neighbor_ratio: f64,
    pub max_inner_connections: u64,
    pub max_outer_connections: u64,
    pub per_part: Vec<PartStats>,
}

/// Why metrics could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    #[error("a feature-cut does not split the graph; structure metrics do not apply")]
    FeatureCut,
    #[error("the host layout is for {layout} parts, the book has {book}")]
    Layout { layout: usize, book: usize },
}

impl PartitionMetrics {
    /// Computes every metric of an edge-cut or vertex-cut book on `layout`'s hosts.
    pub fn of(book: &PartitionBook, layout: &HostLayout) -> Result<Self, MetricsError> {
        let meta = book.meta();
        if meta.cut == CutKind::FeatureCut {
            return Err(MetricsError::FeatureCut);
        }
        if layout.parts() != meta.parts {
            return Err(MetricsError::Layout { layout: layout.parts(), book: meta.parts });
        }
        let per_part = book.parts().iter().map(|lg| part_stats(lg, meta.cut, layout)).collect();
        let cut = book.parts().iter().map(remote_in_edges).sum();
        Ok(Self::from_parts(meta, layout, per_part, cut))
    }

    /// The metrics of a book whose parts were counted one at a time ([`PartStats::of`],
    /// [`remote_in_edges`]), as [`PartitionMetrics::of`] computes them from the whole book:
    /// `cut` is the sum of the parts' remote in-edges (edge-cut).
    pub(crate) fn from_parts(meta: &BookMeta, layout: &HostLayout, per_part: Vec<PartStats>, cut: usize) -> Self {
        let p = meta.parts as f64;
        let (n, e) = (meta.num_nodes.max(1) as f64, meta.num_edges.max(1) as f64);
        let local: Vec<usize> = per_part.iter().map(|s| s.primaries + s.copies).collect();
        let total_local: usize = local.iter().sum();
        let total_copies: usize = per_part.iter().map(|s| s.copies).sum();
        let max_of = |f: fn(&PartStats) -> usize| per_part.iter().map(f).max().unwrap_or(0) as f64;
        let vertex_imbalance = match meta.cut {
            CutKind::VertexCut => max_of(|s| s.primaries + s.copies) / (total_local as f64 / p),
            _ => max_of(|s| s.primaries) / (n / p),
        };
        let edge_cut_fraction = (meta.cut == CutKind::EdgeCut).then(|| cut as f64 / e);
        Self {
            parts: meta.parts,
            hosts: layout.hosts(),
            replication_factor: total_local as f64 / n,
            edge_imbalance: max_of(|s| s.edges) / (e / p),
            vertex_imbalance,
            edge_cut_fraction,
            remote_neighbor_ratio: total_copies as f64 / n,
            max_inner_connections: per_part.iter().map(|s| s.inner_connections).max().unwrap_or(0),
            max_outer_connections: per_part.iter().map(|s| s.outer_connections).max().unwrap_or(0),
            per_part,
        }
    }
}

impl PartStats {
    /// Part `lg`'s counts in a book of `cut` on `layout`'s hosts.
    pub(crate) fn of(lg: &LocalGraph, cut: CutKind, layout: &HostLayout) -> Self {
        part_stats(lg, cut, layout)
    }
}

fn part_stats(lg: &LocalGraph, cut: CutKind, layout: &HostLayout) -> PartStats {
    let me = lg.part();
    let (mut inner, mut outer) = (0u64, 0u64);
    for peer in (0..lg.num_parts()).filter(|&p| p != me) {
        let mut messages = lg.send(peer).len() as u64;
        if cut == CutKind::VertexCut {
            messages += lg.recv(peer).len() as u64;
        }
        if layout.host_of(peer) == layout.host_of(me) {
            inner += messages;
        } else {
            outer += messages;
        }
    }
    PartStats {
        part: me,
        host: layout.host_of(me),
        primaries: lg.num_primary(),
        copies: lg.num_copies(),
        edges: lg.num_edges(),
        inner_connections: inner,
        outer_connections: outer,
    }
}

/// Stored edges of a part whose source is a copy.
/// Stored edges of `lg` whose source is a copy.
pub(crate) fn remote_in_edges(lg: &LocalGraph) -> usize {
    lg.csr().indices().iter().filter(|&&u| !lg.is_primary(u as usize)).count()
}

/// What partitioning cost: wall time, and the process's peak resident memory up to its end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartitionCost {
    pub time_s: f64,
    /// The process's peak resident set size in bytes when partitioning returned, where the OS
    /// reports it (Linux): everything before it, such as loading the dataset, is included.
    pub peak_rss_bytes: Option<u64>,
}

/// Runs `f` and measures it. The process's peak-RSS mark is read, never reset: resetting it
/// (`/proc/self/clear_refs`) would isolate `f` but hide the process's true peak from tools
/// that read the same mark, such as `/usr/bin/time`.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, PartitionCost) {
    let start = Instant::now();
    let out = f();
    let time_s = start.elapsed().as_secs_f64();
    (out, PartitionCost { time_s, peak_rss_bytes: peak_rss_bytes() })
}

/// The process's peak resident set size (`VmHWM`), where the OS reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measure_leaves_the_peak_memory_mark_alone() {
        // `/usr/bin/time` and the like read the same high-water mark after the process ends.
        if !cfg!(target_os = "linux") {
            return;
        }
        let big = vec![1u8; 64 << 20];
        assert_eq!(big.iter().map(|&b| b as u64).sum::<u64>(), 64 << 20);
        drop(big);
        let before = peak_rss_bytes().unwrap();
        let (_, cost) = measure(|| 1 + 1);
        let after = peak_rss_bytes().unwrap();
        assert!(after >= before, "the peak fell from {before} to {after}");
        assert!(cost.peak_rss_bytes.unwrap() >= before, "{cost:?} vs {before}");
    }

    #[test]
    fn measure_reports_time_and_memory() {
        let (v, cost) = measure(|| vec![1u8; 32 << 20].iter().map(|&b| b as u64).sum::<u64>());
        assert_eq!(v, 32 << 20);
        assert!(cost.time_s >= 0.0);
        if cfg!(target_os = "linux") {
            assert!(cost.peak_rss_bytes.unwrap() >= 32 << 20, "{cost:?}");
        }
    }
}
