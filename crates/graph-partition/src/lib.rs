//! The bottom layer of Halo: graph storage (validated CSR), datasets (OGB raw layout and
//! synthetic graphs), partitioners, partition books and partition-quality metrics.
//!
//! Architecture invariant: this crate knows nothing of communication, models or CUDA.

pub mod csr;
pub mod rng;

pub use csr::{Csr, CsrError, EdgeListOptions};
