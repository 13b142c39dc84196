//! The partition book: each worker's [`LocalGraph`], how the parts' vertices correspond, and
//! (for ADGraph) each part's l-hop vertex set. Saved as `book.json` plus one bincode file per
//! part, validated when loaded.
//!
//! A [`LocalGraph`] numbers its vertices locally: the owned vertices (edge-cut) or masters
//! (vertex-cut) first, then halo vertices or mirrors grouped by home part. It holds its local CSR,
//! the global ids and degrees, and per-peer send and receive lists paired across parts, so that a
//! message carries rows and no ids. `PartitionBook::load_for` also checks a saved book against the
//! graph (vertex and edge counts, `Csr::fingerprint`) and the worker count.

mod build;
mod folder;
mod io;
mod local;
mod rows;
#[cfg(test)]
mod rows_tests;
#[cfg(test)]
mod tests;
mod validate;

use std::ops::Range;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::Csr;
use crate::partition::{Partition, PartitionError};

pub use folder::{FolderError, WrittenFolder, write_part_folder};
pub use io::part_path;
pub use local::LocalGraph;
pub use rows::{MANIFEST, PartRows, PartsManifest, ROWS_VERSION, rows_path, split_rows, write_part_rows};
pub use validate::InvalidBook;

/// Which kind of split a book describes. Named `edge`, `vertex` and `feature` on the command
/// line, in configs, reports and `book.json` (which also accepts the older `edge-cut` spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CutKind {
    /// Primaries are owned vertices, copies are halo vertices.
    #[serde(rename = "edge", alias = "edge-cut")]
    EdgeCut,
    /// Primaries are masters, copies are mirrors.
    #[serde(rename = "vertex", alias = "vertex-cut")]
    VertexCut,
    /// No structure split: every worker keeps the whole graph and a range of feature columns.
    #[serde(rename = "feature", alias = "feature-cut")]
    FeatureCut,
}

impl CutKind {
    /// Every kind, in declaration order.
    pub const ALL: [CutKind; 3] = [CutKind::EdgeCut, CutKind::VertexCut, CutKind::FeatureCut];

    /// The name on the command line, in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CutKind::EdgeCut => "edge",
            CutKind::VertexCut => "vertex",
            CutKind::FeatureCut => "feature",
        }
    }

    /// The cut with its article, as messages say it: `an edge-cut`, `a vertex-cut`.
    pub fn with_article(self) -> &'static str {
        match self {
            CutKind::EdgeCut => "an edge-cut",
            CutKind::VertexCut => "a vertex-cut",
            CutKind::FeatureCut => "a feature-cut",
        }
    }
}

impl std::fmt::Display for CutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cut name that is none of `edge`, `vertex`, `feature`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cut `{0}`; expected edge, vertex or feature")]
pub struct UnknownCut(pub String);

impl std::str::FromStr for CutKind {
    type Err = UnknownCut;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| UnknownCut(s.to_string()))
    }
}

/// Facts about the whole book.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookMeta {
    pub cut: CutKind,
    /// Vertices of the partitioned graph.
    pub num_nodes: usize,
    /// Stored edges (CSR entries) of the partitioned graph.
    pub num_edges: usize,
    /// [`Csr::fingerprint`] of the partitioned graph.
    pub graph_fingerprint: u64,
    pub parts: usize,
    /// Feature-cut only: worker `i` keeps columns `feature_columns[i]`.
    pub feature_columns: Vec<Range<usize>>,
}

/// ADGraph's extra vertices: per part, its owned vertices plus the `hops`-hop in-neighbourhood
/// of its training vertices, ascending global ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LHopSets {
    pub hops: usize,
    pub nodes: Vec<Vec<u32>>,
}

/// Every part's local graph and how they fit together; see [`LocalGraph`] for the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionBook {
    meta: BookMeta,
    parts: Vec<LocalGraph>,
    l_hop: Option<LHopSets>,
}

impl PartitionBook {
    /// Builds the book of `partition` over `graph` (after validating the partition). A
    /// feature-cut book holds no local graphs, only the column ranges.
    pub fn build(graph: &Csr, partition: &Partition) -> Result<Self, PartitionError> {
        partition.validate(graph)?;
        let mut meta = BookMeta {
            cut: CutKind::FeatureCut,
            num_nodes: graph.num_nodes(),
            num_edges: graph.num_edges(),
            graph_fingerprint: graph.fingerprint(),
            parts: partition.parts(),
            feature_columns: Vec::new(),
        };
        let parts = match partition {
            Partition::EdgeCut { parts, owner } => {
                meta.cut = CutKind::EdgeCut;
                build::Plan::new(graph, build::Cut::Edge, build::Homes::new(*parts, owner.clone())).all_parts()
            }
            Partition::VertexCut { parts, edge_part, master } => {
                meta.cut = CutKind::VertexCut;
                let homes = build::Homes::new(*parts, master.clone());
                build::Plan::new(graph, build::Cut::Vertex { edge_part }, homes).all_parts()
            }
            Partition::FeatureCut { columns } => {
                meta.feature_columns = columns.clone();
                Vec::new()
            }
        };
        Ok(Self { meta, parts, l_hop: None })
    }

    /// Attaches ADGraph's l-hop vertex sets (from [`crate::partition::expand_l_hop`]) to an
    /// edge-cut book; each set must be ascending and contain its part's owned vertices.
    pub fn with_l_hop(mut self, l_hop: LHopSets) -> Result<Self, InvalidBook> {
        validate::check_l_hop(&self, &l_hop)?;
        self.l_hop = Some(l_hop);
        Ok(self)
    }

    pub fn meta(&self) -> &BookMeta {
        &self.meta
    }

    /// The local graphs, indexed by part (empty for a feature-cut).
    pub fn parts(&self) -> &[LocalGraph] {
        &self.parts
    }

    /// One part's local graph.
    pub fn part(&self, part: usize) -> Option<&LocalGraph> {
        self.parts.get(part)
    }

    pub fn l_hop(&self) -> Option<&LHopSets> {
        self.l_hop.as_ref()
    }

    /// Hands the local graphs out, e.g. one per worker thread.
    pub fn into_parts(self) -> Vec<LocalGraph> {
        self.parts
    }

    /// Checks every part's structure and the cross-part consistency of the exchange lists.
    pub fn validate(&self) -> Result<(), InvalidBook> {
        validate::check_book(self)
    }
}

/// Why a book could not be saved or loaded; every variant names the file at fault and quotes
/// the underlying error in its message (none is chained as a `source()`, so it prints once).
#[derive(Debug, thiserror::Error)]
pub enum BookError {
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: invalid book metadata: {error}")]
    Json { path: PathBuf, error: serde_json::Error },
    #[error("{path}: cannot encode part: {error}")]
    Encode { path: PathBuf, error: bincode::error::EncodeError },
    #[error("{path}: cannot decode part: {error}")]
    Decode { path: PathBuf, error: bincode::error::DecodeError },
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("{path}: {error}")]
    Invalid { path: PathBuf, error: InvalidBook },
    #[error("{path}: the partition book does not fit this run: {reason}")]
    Mismatch { path: PathBuf, reason: String },
    /// The dataset a part folder's rows are read from (it names its file).
    #[error("{0}")]
    Dataset(crate::DatasetError),
}
