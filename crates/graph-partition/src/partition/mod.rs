//! Partitioners. Three shapes of split, one [`Partition`] value:
//!
//! - **edge-cut**: every vertex gets one owner part ([`hash`], [`random`], [`metis()`], [`bdg`]);
//!   a part stores the in-edges of the vertices it owns, and reads the rows of remote
//!   in-neighbours (its *halo*) from their owners;
//! - **vertex-cut**: every stored edge (CSR entry) goes to one part and vertices are replicated
//!   where their edges went ([`random_vertex_cut`], [`ebv`]); one replica of each vertex is its
//!   *master* ([`place_masters`]), the others are *mirrors*;
//! - **feature-cut**: every worker keeps the whole graph, feature columns are split
//!   ([`feature_cut`]).
//!
//! [`partition_graph`] runs any graph partitioner from a [`PartitionConfig`]. Everything is
//! deterministic for a given seed.

mod bdg;
mod ebv;
mod edge_cut;
mod feature_cut;
mod hosts;
mod l_hop;
mod masters;
mod metis_kway;
mod replicas;
mod undirected;
mod units;
mod vertex_cut;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Csr;

pub use bdg::{BdgOptions, bdg};
pub use ebv::{EbvWeights, ebv};
pub use edge_cut::{hash, random};
pub use feature_cut::feature_cut;
pub use hosts::HostLayout;
pub use l_hop::expand_l_hop;
pub use masters::{MasterRule, place_masters};
pub use metis_kway::metis;
pub use vertex_cut::random_vertex_cut;

/// The result of a partitioner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Partition {
    /// `owner[v]` is the part that owns vertex `v`.
    EdgeCut { parts: usize, owner: Vec<u32> },
    /// `edge_part[k]` is the part of CSR entry `k` (an index into [`Csr::indices`]);
    /// `master[v]` is the part holding vertex `v`'s master replica.
    VertexCut { parts: usize, edge_part: Vec<u32>, master: Vec<u32> },
    /// Worker `i` keeps feature columns `columns[i]` of every vertex and the whole graph.
    FeatureCut { columns: Vec<Range<usize>> },
}

impl Partition {
    /// Number of parts (workers) the partition is for.
    pub fn parts(&self) -> usize {
        match self {
            Self::EdgeCut { parts, .. } | Self::VertexCut { parts, .. } => *parts,
            Self::FeatureCut { columns } => columns.len(),
        }
    }

    /// Checks the partition against `graph`: array lengths, part ids in range, and (vertex-cut)
    /// that every master sits on a part holding a replica of its vertex.
    pub fn validate(&self, graph: &Csr) -> Result<(), PartitionError> {
        match self {
            Self::EdgeCut { parts, owner } => {
                check_parts(*parts, graph.num_nodes().max(1))?;
                check_len("owner", owner.len(), graph.num_nodes())?;
                check_ids("owner", owner, *parts)
            }
            Self::VertexCut { parts, edge_part, master } => {
                check_parts(*parts, graph.num_nodes().max(1))?;
                check_len("edge_part", edge_part.len(), graph.num_edges())?;
                check_len("master", master.len(), graph.num_nodes())?;
                check_ids("edge_part", edge_part, *parts)?;
                check_ids("master", master, *parts)?;
                masters::check_masters_hold_replicas(graph, *parts, edge_part, master)
            }
            Self::FeatureCut { columns } => feature_cut::check_columns(columns),
        }
    }
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), PartitionError> {
    if got == expected { Ok(()) } else { Err(PartitionError::Length { what, got, expected }) }
}

fn check_ids(what: &'static str, ids: &[u32], parts: usize) -> Result<(), PartitionError> {
    match ids.iter().position(|&p| p as usize >= parts) {
        None => Ok(()),
        Some(index) => Err(PartitionError::PartId { what, index, part: ids[index], parts }),
    }
}

/// `parts` must be between 1 and the number of vertices.
pub(crate) fn check_parts(parts: usize, nodes: usize) -> Result<(), PartitionError> {
    if parts == 0 || parts > nodes || parts > u32::MAX as usize {
        return Err(PartitionError::Parts { parts, nodes });
    }
    Ok(())
}

/// Why a partition could not be computed or is inconsistent with its graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PartitionError {
    #[error("parts must be between 1 and the number of nodes ({nodes}), got {parts}")]
    Parts { parts: usize, nodes: usize },
    #[error("a host layout needs between 1 and 2^32 - 1 parts, got {0}")]
    LayoutParts(usize),
    #[error("hosts must be at least 1 and divide parts evenly, got hosts = {hosts} for parts = {parts}")]
    Hosts { hosts: usize, parts: usize },
    #[error("gamma must be in [0, 1], got {0}")]
    Gamma(f64),
    #[error("{name} must be a finite number >= 0, got {value}")]
    Weight { name: &'static str, value: f64 },
    #[error("{what} has {got} entries, expected {expected}")]
    Length { what: &'static str, got: usize, expected: usize },
    #[error("{what}[{index}] = {part} is not a part id below {parts}")]
    PartId { what: &'static str, index: usize, part: u32, parts: usize },
    #[error("vertex {vertex} has its master on part {master}, which holds no replica of it")]
    MasterNotReplica { vertex: usize, master: u32 },
    #[error("cannot split {features} feature columns into {parts} non-empty ranges")]
    FeatureParts { features: usize, parts: usize },
    #[error("feature column ranges must be contiguous and non-empty from 0; range {index} is {start}..{end}")]
    FeatureColumns { index: usize, start: usize, end: usize },
    #[error("training node id {id} is not below the number of nodes {nodes}")]
    TrainId { id: u32, nodes: usize },
    #[error("METIS failed: {0}")]
    Metis(String),
}

/// The graph partitioners [`partition_graph`] can run, by their command-line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Algorithm {
    Hash,
    Random,
    Metis,
    Bdg,
    RandomVertexCut,
    Ebv,
}

impl Algorithm {
    /// Every algorithm, in the order the command line lists them.
    pub const ALL: [Self; 6] = [Self::Hash, Self::Random, Self::Metis, Self::Bdg, Self::RandomVertexCut, Self::Ebv];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::Random => "random",
            Self::Metis => "metis",
            Self::Bdg => "bdg",
            Self::RandomVertexCut => "random-vertex-cut",
            Self::Ebv => "ebv",
        }
    }

    /// True for the partitioners that assign edges (and replicate vertices).
    pub fn is_vertex_cut(self) -> bool {
        matches!(self, Self::RandomVertexCut | Self::Ebv)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown partitioner name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown partition algorithm {0:?}; expected one of hash, random, metis, bdg, random-vertex-cut, ebv")]
pub struct UnknownAlgorithm(pub String);

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| UnknownAlgorithm(s.to_string()))
    }
}

/// Everything a graph partitioner may need; fields an algorithm does not use are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionConfig {
    pub algorithm: Algorithm,
    pub parts: usize,
    /// Hosts the parts are spread over (EBV's hierarchical term, host-aware masters, metrics).
    pub hosts: usize,
    /// EBV's balance and hierarchy weights.
    pub ebv: EbvWeights,
    /// Where vertex-cut masters go.
    pub master: MasterRule,
    pub seed: u64,
}

impl PartitionConfig {
    /// Defaults for everything but the algorithm and the number of parts: one host,
    /// the paper's EBV weights, host-aware masters, seed 0.
    pub fn new(algorithm: Algorithm, parts: usize) -> Self {
        Self { algorithm, parts, hosts: 1, ebv: EbvWeights::default(), master: MasterRule::HostAware, seed: 0 }
    }

    /// The host layout the configuration describes (checked).
    pub fn layout(&self) -> Result<HostLayout, PartitionError> {
        HostLayout::new(self.parts, self.hosts)
    }

    /// Checks the parameters against a graph of `num_nodes` vertices without partitioning:
    /// parts in `1..=num_nodes`, hosts dividing parts, EBV weights in range. Callers that
    /// start workers before they hold the graph can run it on the node count alone, so that a
    /// bad `parts` fails once, up front, rather than once per worker.
    pub fn check(&self, num_nodes: usize) -> Result<HostLayout, PartitionError> {
        check_parts(self.parts, num_nodes)?;
        let layout = self.layout()?;
        self.ebv.check()?;
        Ok(layout)
    }
}

/// Runs the configured partitioner on `graph`. Parameters are checked first
/// ([`PartitionConfig::check`]).
pub fn partition_graph(graph: &Csr, config: &PartitionConfig) -> Result<Partition, PartitionError> {
    let layout = config.check(graph.num_nodes())?;
    let parts = config.parts;
    let owner = match config.algorithm {
        Algorithm::Hash => hash(graph, parts)?,
        Algorithm::Random => random(graph, parts, config.seed)?,
        Algorithm::Metis => metis(graph, parts, config.seed)?,
        Algorithm::Bdg => bdg(graph, parts, &BdgOptions { seed: config.seed, ..BdgOptions::default() })?,
        Algorithm::RandomVertexCut | Algorithm::Ebv => {
            let edge_part = if config.algorithm == Algorithm::Ebv {
                ebv(graph, &layout, &config.ebv)?
            } else {
                random_vertex_cut(graph, parts, config.seed)?
            };
            let master = place_masters(graph, &layout, &edge_part, config.master)?;
            return Ok(Partition::VertexCut { parts, edge_part, master });
        }
    };
    Ok(Partition::EdgeCut { parts, owner })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EdgeListOptions;

    #[test]
    fn algorithm_names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
        }
        let err = "kl".parse::<Algorithm>().unwrap_err();
        assert!(err.to_string().contains("\"kl\""), "{err}");
    }

    #[test]
    fn bad_parameters_are_rejected_before_work() {
        let g = Csr::from_edges(4, &[(0, 1), (1, 2), (2, 3)], EdgeListOptions::default()).unwrap();
        let mut cfg = PartitionConfig::new(Algorithm::Ebv, 0);
        assert_eq!(partition_graph(&g, &cfg), Err(PartitionError::Parts { parts: 0, nodes: 4 }));
        cfg.parts = 5;
        assert_eq!(partition_graph(&g, &cfg), Err(PartitionError::Parts { parts: 5, nodes: 4 }));
        cfg.parts = 4;
        cfg.hosts = 3;
        assert_eq!(partition_graph(&g, &cfg), Err(PartitionError::Hosts { hosts: 3, parts: 4 }));
        cfg.hosts = 2;
        cfg.ebv.gamma = 1.5;
        assert_eq!(partition_graph(&g, &cfg), Err(PartitionError::Gamma(1.5)));
        cfg.ebv.gamma = 0.1;
        assert!(partition_graph(&g, &cfg).is_ok());
    }

    #[test]
    fn more_parts_than_vertices_is_a_short_error_for_every_algorithm() {
        // Cora's size with the 3000 workers.
        let edges: Vec<(u32, u32)> = (1..2708).map(|v| (v - 1, v)).collect();
        let g = Csr::from_edges(2708, &edges, EdgeListOptions::default()).unwrap();
        for algorithm in Algorithm::ALL {
            let cfg = PartitionConfig::new(algorithm, 3000);
            let err = partition_graph(&g, &cfg).unwrap_err();
            assert_eq!(err, PartitionError::Parts { parts: 3000, nodes: 2708 }, "{algorithm}");
            assert_eq!(cfg.check(g.num_nodes()).unwrap_err(), err);
            assert!(err.to_string().len() < 100, "{err}");
        }
    }

    #[test]
    fn validate_catches_inconsistent_partitions() {
        let g = Csr::from_edges(3, &[(0, 1), (1, 2)], EdgeListOptions::default()).unwrap();
        let p = Partition::EdgeCut { parts: 2, owner: vec![0, 1] };
        assert!(matches!(p.validate(&g), Err(PartitionError::Length { what: "owner", .. })));
        let p = Partition::EdgeCut { parts: 2, owner: vec![0, 1, 2] };
        assert!(matches!(p.validate(&g), Err(PartitionError::PartId { index: 2, .. })));
        // Entries: row 0 = [1], row 1 = [0, 2], row 2 = [1]; all on part 0, so part 1 holds nothing.
        let p = Partition::VertexCut { parts: 2, edge_part: vec![0; 4], master: vec![0, 1, 0] };
        assert_eq!(p.validate(&g), Err(PartitionError::MasterNotReplica { vertex: 1, master: 1 }));
    }
}
