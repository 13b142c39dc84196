//! The layer of Halo that moves bytes between workers and accounts for every one of them.
//!
//! - [`Topology`]: `hosts x devices_per_host` workers, intra- and inter-host links (defaults:
//!   CDFGNN's measured PCIe 22.70 GB/s and InfiniBand 8.27 GB/s peer-to-peer bandwidths).
//! - [`Communicator`]: all-to-all (blocking and split start/wait, AdaQP ring order),
//!   deterministic all-reduce, broadcast, gather, scatter, barrier, point-to-point, all
//!   labelled by phase.
//! - Backends: [`LocalCluster`] (one thread per worker, the embedded default) and, with the
//!   `mpi` feature, `mpi_backend` (one process per rank). Both are an [`Endpoint`] over a
//!   [`Transport`]. With the `nccl` feature, `nccl::NcclComm` runs all-to-all and all-reduce
//!   on GPU buffers through NCCL, bootstrapped over either backend and counted in the same ledger.
//! - [`LedgerSnapshot`]: bytes and messages per (src, dst, link class, phase), and
//!   [`cost::model`], which turns a merged ledger into modeled seconds per call.
//!
//! Four workers on two hosts all-reduce a vector; the ledger counts the bytes by link class
//! (`examples/ledger.rs` adds an all-to-all and the cost model):
//! ```
//! use comm_hierarchy::{Communicator, LocalCluster, Preset, Topology};
//!
//! let topology = Topology::for_workers(4, 2, Preset::Cdfgnn.links())?;
//! let sums = LocalCluster::run(&topology, |comm| {
//!     let mut v = vec![1.0f32; 8];
//!     comm.all_reduce_sum_f32("grads", &mut v)?;
//!     let totals = comm.ledger().totals();
//!     Ok::<_, comm_hierarchy::CommError>((v[0], totals.bytes_intra + totals.bytes_inter))
//! })?;
//! assert!(sums.iter().all(|&(sum, bytes)| sum == 4.0 && bytes > 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Architecture invariant: this crate moves bytes and counts them; it never interprets them.

pub mod communicator;
pub mod cost;
pub mod endpoint;
pub mod error;
pub mod fault;
pub mod ledger;
pub mod local;
pub mod local_rank;
#[cfg(feature = "mpi")]
pub mod mpi_backend;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod point;
pub mod preset;
pub mod probe;
pub mod topology;
pub mod transport;
#[cfg(feature = "mpi")]
pub mod waiting;
pub mod wire;

pub use communicator::{Communicator, DeviceLedger, PendingAllToAll};
pub use cost::{LinearFit, ModeledTime, fit_linear, model};
pub use endpoint::Endpoint;
pub use error::{ClusterError, CommError, FailureKind, WorkerFailure};
pub use ledger::{CollectiveKind, LedgerMark, LedgerSnapshot, Totals};
pub use local::{ClusterOptions, LocalCluster, LocalCommunicator};
pub use local_rank::{LOCAL_RANK_VARIABLES, LocalRankError, launcher_local_rank};
pub use preset::{Preset, UnknownPreset};
pub use probe::{LinkFitError, LinkReport, PairFit, measured_links, parse_link_fits, probe_links};
pub use topology::{LinkClass, LinkModel, LinkSpec, Topology, TopologyError};
pub use transport::Transport;
