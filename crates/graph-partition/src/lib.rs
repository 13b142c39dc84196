//! The bottom layer of Halo: graph storage (validated CSR), datasets (OGB raw layout and
//! synthetic graphs), partitioners, partition books, partition-quality metrics and neighbour
//! sampling for mini-batch training.
//!
//! Architecture invariant: this crate knows nothing of communication, models or CUDA.

pub mod book;
pub mod csr;
pub mod dataset;
pub mod metrics;
pub mod partition;
pub mod rng;
pub mod sample;
pub mod synth;

pub use csr::{Csr, CsrError, EdgeListOptions};
pub use dataset::{CacheMode, Dataset, DatasetError, DatasetSummary, Labels, LoadOptions, LoadSource, Splits};
pub use synth::{SynthConfig, SynthError};
