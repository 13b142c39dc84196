//! Random vertex-cut: every edge to a part drawn from a seeded hash of its endpoints.

use super::units::edge_units;
use super::{PartitionError, check_parts};
use crate::Csr;
use crate::rng::hash_key;

const EDGE_SALT: u64 = 0x7276_6378_5f65_6467; // "rvcx_edg"

/// Random vertex-cut: edge `{u, v}` (both stored directions together) goes to part
/// `hash(seed, u, v) mod parts`. Returns the part of every CSR entry.
pub fn random_vertex_cut(graph: &Csr, parts: usize, seed: u64) -> Result<Vec<u32>, PartitionError> {
    check_parts(parts, graph.num_nodes())?;
    let mut edge_part = vec![0u32; graph.num_edges()];
    for unit in edge_units(graph) {
        let h = hash_key(&[EDGE_SALT, seed, unit.src as u64, unit.dst as u64]);
        unit.place(&mut edge_part, (h % parts as u64) as u32);
    }
    Ok(edge_part)
}
