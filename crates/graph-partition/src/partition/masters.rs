//! Master placement for vertex-cuts (the CDFGNN paper leaves it open).
//!
//! A master must sit on a part holding a replica of its vertex; every mirror then exchanges
//! one message with its master per synchronisation. `HostAware` puts the master on the host
//! holding most replicas, so the fewest master<->mirror messages cross hosts. Vertices with
//! no edges get a master by hash, so every vertex (and its label) lives somewhere.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::replicas::ReplicaSets;
use super::{HostLayout, PartitionError, check_ids, check_len};
use crate::Csr;
use crate::rng::hash_key;

const CHOICE_SALT: u64 = 0x6d61_7374_6572_5f63; // "master_c"
const HOST_SALT: u64 = 0x6d61_7374_6572_5f68; // "master_h"

/// How a vertex's master replica is chosen among its replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MasterRule {
    /// A replica picked by a hash of the vertex id.
    Hash,
    /// A replica on the host holding most replicas (ties between hosts and the device
    /// within the host picked by a hash of the vertex id).
    HostAware,
}

impl MasterRule {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::HostAware => "host-aware",
        }
    }
}

impl fmt::Display for MasterRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown master-placement name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown master placement {0:?}; expected hash or host-aware")]
pub struct UnknownMasterRule(pub String);

impl FromStr for MasterRule {
    type Err = UnknownMasterRule;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Hash, Self::HostAware].into_iter().find(|r| r.name() == s).ok_or_else(|| UnknownMasterRule(s.into()))
    }
}

/// Chooses the master part of every vertex of a vertex-cut given by `edge_part` (one part
/// per CSR entry).
pub fn place_masters(
    graph: &Csr,
    layout: &HostLayout,
    edge_part: &[u32],
    rule: MasterRule,
) -> Result<Vec<u32>, PartitionError> {
    let parts = layout.parts();
    check_len("edge_part", edge_part.len(), graph.num_edges())?;
    check_ids("edge_part", edge_part, parts)?;
    let replicas = ReplicaSets::from_edge_parts(graph, parts, edge_part);
    Ok((0..graph.num_nodes())
        .into_par_iter()
        .map(|v| {
            let pick = |n: usize, salt: u64| (hash_key(&[salt, v as u64]) % n as u64) as usize;
            if replicas.is_empty(v) {
                return pick(parts, CHOICE_SALT) as u32;
            }
            let on: Vec<usize> = replicas.iter(v).collect();
            let candidates: Vec<usize> = match rule {
                MasterRule::Hash => on,
                MasterRule::HostAware => {
                    let mut per_host = vec![0u32; layout.hosts()];
                    on.iter().for_each(|&p| per_host[layout.host_of(p)] += 1);
                    let most = *per_host.iter().max().expect("hosts >= 1");
                    let tied: Vec<usize> = (0..layout.hosts()).filter(|&h| per_host[h] == most).collect();
                    let host = tied[pick(tied.len(), HOST_SALT)];
                    on.into_iter().filter(|&p| layout.host_of(p) == host).collect()
                }
            };
            candidates[pick(candidates.len(), CHOICE_SALT)] as u32
        })
        .collect())
}

/// Every vertex with edges must have its master on a part holding one of them.
pub(super) fn check_masters_hold_replicas(
    graph: &Csr,
    parts: usize,
    edge_part: &[u32],
    master: &[u32],
) -> Result<(), PartitionError> {
    let replicas = ReplicaSets::from_edge_parts(graph, parts, edge_part);
    match (0..graph.num_nodes()).find(|&v| !replicas.is_empty(v) && !replicas.contains(v, master[v] as usize)) {
        None => Ok(()),
        Some(vertex) => Err(PartitionError::MasterNotReplica { vertex, master: master[vertex] }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;
    use crate::partition::Partition;

    #[test]
    fn host_aware_follows_the_majority_host() {
        // Star around 0 with 5 leaves; 4 parts on 2 hosts (parts 0,1 | 2,3).
        let edges: Vec<(u32, u32)> = (1..6).map(|v| (0, v)).collect();
        let g = Csr::from_edges(7, &edges, EdgeListOptions::default()).unwrap();
        // Place leaf 1 on part 0, leaves 2..5 on parts 2, 3, 3, 2: host 1 holds most of 0's replicas.
        let leaf_part = [u32::MAX, 0, 2, 3, 3, 2];
        let mut edge_part = vec![0u32; g.num_edges()];
        for v in 0..g.num_nodes() {
            for k in g.row_range(v) {
                let leaf = if v == 0 { g.indices()[k] as usize } else { v };
                edge_part[k] = leaf_part[leaf];
            }
        }
        let layout = HostLayout::new(4, 2).unwrap();
        for _ in 0..2 {
            let m = place_masters(&g, &layout, &edge_part, MasterRule::HostAware).unwrap();
            assert!(m[0] == 2 || m[0] == 3, "master of the hub on host 1, got part {}", m[0]);
            for leaf in 1..6 {
                assert_eq!(m[leaf], leaf_part[leaf], "a leaf has one replica");
            }
            assert!((m[6] as usize) < 4, "the isolated vertex gets a master anyway");
        }
        let m = place_masters(&g, &layout, &edge_part, MasterRule::Hash).unwrap();
        assert!([0, 2, 3].contains(&m[0]));
        Partition::VertexCut { parts: 4, edge_part, master: m }.validate(&g).unwrap();
    }

    #[test]
    fn rule_names_parse() {
        assert_eq!("host-aware".parse::<MasterRule>().unwrap(), MasterRule::HostAware);
        assert_eq!("hash".parse::<MasterRule>().unwrap(), MasterRule::Hash);
        assert!("nearest".parse::<MasterRule>().unwrap_err().to_string().contains("host-aware"));
    }
}
