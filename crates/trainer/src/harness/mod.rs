//! The harness under every runner: what a run needs besides its method's training.
//!
//! - [`cluster`]: a run on workers, in-process threads or MPI ranks: where they run (the
//!   backend), the [`ComputeGate`] they share, spawning them, and what each is handed ([`Rank`]:
//!   its communicator, clock, checkpoints and report).
//! - [`dataset`]: how each rank gets the dataset (one copy shared in process, or loaded per MPI
//!   rank, or handed to rank 0 alone).
//! - [`alone`]: a process that trains alone (the whole graph, one model): its checkpoints'
//!   agreement and its report.
//! - [`clock`]: a worker's compute told from its waits on the others; [`timeline`]: the modeled
//!   step those measurements give; [`grads`]: the gradient all-reduce, on the host or on the
//!   GPUs (NCCL).
//! - [`placement`]: which GPU a worker of a device run computes on.
//! - [`report`]: the one place a [`crate::report::Report`] is put together, from what the run
//!   trained on and the epoch loop's outcome.

pub(crate) mod alone;
pub(crate) mod clock;
pub(crate) mod cluster;
pub(crate) mod dataset;
pub(crate) mod gpu;
pub(crate) mod grads;
pub(crate) mod placement;
pub(crate) mod report;
pub(crate) mod timeline;

pub(crate) use alone::Alone;
pub(crate) use clock::CommClock;
pub use cluster::LocalOptions;
pub(crate) use cluster::{Cluster, Rank, backend_of};
pub(crate) use dataset::RankData;
pub(crate) use grads::GradSum;
pub(crate) use report::Described;
