//! EBV vertex-cut with CDFGNN's hierarchical term (paper eq. 24).
//!
//! Edges are placed one at a time in ascending order of `deg(u) + deg(v)`, each on the part
//! `i` minimising
//!
//! ```text
//! (1 - gamma) * ([i not in parts(u)] + [i not in parts(v)])
//!   + gamma * ([host(i) not in hosts(u)] + [host(i) not in hosts(v)])
//!   + alpha * edges(i) / (|E| / p) + beta * vertices(i) / (|V| / p)
//! ```
//!
//! ties going to the lowest part id. `gamma = 0` is the original EBV. Replica sets are
//! bitsets and the balance terms running counters, so each edge costs O(p).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::replicas::ReplicaSets;
use super::units::edge_units;
use super::{HostLayout, PartitionError, check_parts};
use crate::Csr;

/// The weights of EBV's evaluation function.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EbvWeights {
    /// Edge-balance weight (paper: 1).
    pub alpha: f64,
    /// Vertex-balance weight (paper: 1).
    pub beta: f64,
    /// Share of the replication cost charged per host rather than per device, in [0, 1]
    /// (CDFGNN: 0.1).
    pub gamma: f64,
}

impl Default for EbvWeights {
    fn default() -> Self {
        Self { alpha: 1.0, beta: 1.0, gamma: 0.1 }
    }
}

impl EbvWeights {
    /// `gamma` in [0, 1]; `alpha`, `beta` finite and non-negative.
    pub fn check(&self) -> Result<(), PartitionError> {
        if !(0.0..=1.0).contains(&self.gamma) {
            return Err(PartitionError::Gamma(self.gamma));
        }
        for (name, value) in [("alpha", self.alpha), ("beta", self.beta)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(PartitionError::Weight { name, value });
            }
        }
        Ok(())
    }
}

/// Runs hierarchical EBV over `layout.parts()` parts; returns the part of every CSR entry.
/// Both stored directions of an edge are placed together and count as two edges.
pub fn ebv(graph: &Csr, layout: &HostLayout, weights: &EbvWeights) -> Result<Vec<u32>, PartitionError> {
    weights.check()?;
    let (n, parts) = (graph.num_nodes(), layout.parts());
    check_parts(parts, n)?;
    let degree: Vec<u64> =
        graph.degrees().iter().zip(graph.column_counts()).map(|(&i, o)| i as u64 + o as u64).collect();
    let mut units = edge_units(graph);
    // Stable: equal degree sums keep entry order, so the result is deterministic.
    units.par_sort_by_cached_key(|u| degree[u.src as usize] + degree[u.dst as usize]);

    // Parts at bits 0..p and hosts at bits p..p+h of one bitset per vertex: the four
    // membership tests of an edge hit the same cache lines.
    let host_bit: Vec<usize> = (0..parts).map(|p| parts + layout.host_of(p)).collect();
    let mut seen = ReplicaSets::new(n, parts + layout.hosts());
    let mut edges = vec![0u64; parts];
    let mut vertices = vec![0u64; parts];
    let edge_scale = weights.alpha * parts as f64 / graph.num_edges().max(1) as f64;
    let vertex_scale = weights.beta * parts as f64 / n as f64;
    let balance = |edges: u64, vertices: u64| edge_scale * edges as f64 + vertex_scale * vertices as f64;
    let mut load = vec![0.0f64; parts];
    let (device_w, host_w) = (1.0 - weights.gamma, weights.gamma);

    let mut edge_part = vec![0u32; graph.num_edges()];
    for unit in &units {
        let (u, v) = (unit.src as usize, unit.dst as usize);
        let mut best = (f64::INFINITY, 0usize);
        for (i, &h) in host_bit.iter().enumerate() {
            let missing_dev = u8::from(!seen.contains(u, i)) + u8::from(!seen.contains(v, i));
            let missing_host = u8::from(!seen.contains(u, h)) + u8::from(!seen.contains(v, h));
            let cost = device_w * missing_dev as f64 + host_w * missing_host as f64 + load[i];
            if cost < best.0 {
                best = (cost, i);
            }
        }
        let i = best.1;
        unit.place(&mut edge_part, i as u32);
        edges[i] += unit.entries();
        let endpoints = [u, v];
        for &x in &endpoints[..1 + usize::from(u != v)] {
            if seen.insert(x, i) {
                vertices[i] += 1;
                seen.insert(x, host_bit[i]);
            }
        }
        load[i] = balance(edges[i], vertices[i]);
    }
    Ok(edge_part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    #[test]
    fn follows_the_evaluation_function_by_hand() {
        // Path 0-1-2-3, 2 parts on one host, alpha = beta = 1, gamma = 0. Degree sums: edge
        // {0,1}: 2+4, {1,2}: 4+4, {2,3}: 4+2 (in + out). Order: {0,1}, {2,3}, {1,2}.
        // {0,1}: both parts cost 2 + 0 + 0 -> part 0 (lowest id).
        // {2,3}: part 0 costs 2 + 2/3 + 2/2 = 3.67, part 1 costs 2 -> part 1.
        // {1,2}: part 0 costs 1 + 2/3 + 1 = 2.67, part 1 costs 1 + 2/3 + 1 -> tie, part 0.
        let g = Csr::from_edges(4, &[(0, 1), (1, 2), (2, 3)], EdgeListOptions::default()).unwrap();
        let layout = HostLayout::single_host(2).unwrap();
        let w = EbvWeights { alpha: 1.0, beta: 1.0, gamma: 0.0 };
        let parts = ebv(&g, &layout, &w).unwrap();
        // Entries: row 0 [1], row 1 [0, 2], row 2 [1, 3], row 3 [2].
        assert_eq!(parts, [0, 0, 0, 0, 1, 1]);
    }

    #[test]
    fn rejects_bad_weights() {
        let g = Csr::from_edges(2, &[(0, 1)], EdgeListOptions::default()).unwrap();
        let layout = HostLayout::single_host(2).unwrap();
        let bad = EbvWeights { gamma: -0.1, ..EbvWeights::default() };
        assert_eq!(ebv(&g, &layout, &bad), Err(PartitionError::Gamma(-0.1)));
        let bad = EbvWeights { alpha: f64::NAN, ..EbvWeights::default() };
        assert!(matches!(ebv(&g, &layout, &bad), Err(PartitionError::Weight { name: "alpha", .. })));
    }
}
