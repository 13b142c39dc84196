//! The bottom layer of Halo: graph storage (validated CSR), datasets (OGB raw layout and
//! synthetic graphs), partitioners, partition books, partition-quality metrics and neighbour
//! sampling for mini-batch training.
//!
//! Partition a graph into 2 parts and read the book (`examples/partition.rs` does it on Cora):
//! ```
//! use graph_partition::book::PartitionBook;
//! use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};
//! use graph_partition::{Csr, EdgeListOptions};
//!
//! let graph = Csr::from_edges(6, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0)], EdgeListOptions::default())?;
//! let partition = partition_graph(&graph, &PartitionConfig::new(Algorithm::Hash, 2))?;
//! let book = PartitionBook::build(&graph, &partition)?;
//! let primaries: usize = book.parts().iter().map(|p| p.num_primary()).sum();
//! assert_eq!(primaries, 6, "every vertex has one primary");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Architecture invariant: this crate knows nothing of communication, models or CUDA.

pub mod book;
pub mod csr;
pub mod dataset;
pub mod fs;
#[cfg(test)]
mod fuzz;
pub mod metrics;
pub mod pages;
pub mod partition;
pub mod rng;
pub mod sample;
pub mod synth;

pub use csr::{Csr, CsrError, EdgeListOptions};
pub use dataset::{
    CacheMode, Dataset, DatasetError, DatasetSummary, FeatureFile, Labels, LoadOptions, LoadSource, Splits, Structure,
};
pub use synth::{SynthConfig, SynthError};
