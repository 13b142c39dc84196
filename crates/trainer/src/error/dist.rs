//! The error of a distributed run's setup and workers.

use comm_hierarchy::{ClusterError, CommError, TopologyError};
use graph_partition::partition::{Algorithm, PartitionError};

/// Why a distributed run could not be set up or failed.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// The partitioner refused the graph or the settings.
    #[error("partitioning with {algorithm}: {source}")]
    Partition {
        algorithm: Algorithm,
        #[source]
        source: PartitionError,
    },
    /// `--partition-book` names a book that does not load or does not fit the dataset and workers.
    #[error("--partition-book {}: {source}", dir.display())]
    Book {
        dir: std::path::PathBuf,
        #[source]
        source: graph_partition::book::BookError,
    },
    /// A rank's part of a part folder does not load or does not fit the run.
    #[error("--partition-book {} (rank {rank}): {source}", dir.display())]
    Part {
        dir: std::path::PathBuf,
        rank: usize,
        #[source]
        source: graph_partition::book::BookError,
    },
    /// `--partition-book` names a book of the other cut.
    #[error("--partition-book {}: {detail}", dir.display())]
    BookCut { dir: std::path::PathBuf, detail: String },
    /// The partition's quality could not be measured.
    #[error("partition metrics: {0}")]
    Metrics(#[from] graph_partition::metrics::MetricsError),
    /// The workers and hosts do not make a cluster.
    #[error("cluster of workers and hosts: {0}")]
    Topology(#[from] TopologyError),
    /// A worker's share could not be encoded, sent or decoded.
    #[error("rank {rank}: setting up its share: {detail}")]
    Setup { rank: usize, detail: String },
    /// A part does not fit its rank's communicator.
    #[error("exchange: {0}")]
    Exchange(#[from] gnn_core::exchange::SetupError),
    /// A communicator call failed (a peer failed, timed out or sent garbage).
    #[error("communication: {0}")]
    Comm(#[from] CommError),
    /// A parameter server's message holds another number of values than its slice.
    #[error("{phase}: rank {rank} sent {got} values, expected {expected}")]
    ParamSlice { phase: &'static str, rank: usize, got: usize, expected: usize },
    /// A worker failed; the run stopped.
    #[error("distributed run failed: {0}")]
    Worker(#[from] ClusterError),
    /// `--backend mpi` in a build without MPI support.
    #[error("--backend mpi needs halo built with the `mpi` feature (cargo install --path crates/cli --features mpi)")]
    NoMpi,
}
