//! Errors of communicator calls and of whole runs.
//!
//! Failure semantics: a failed or panicking worker makes every peer's pending and later calls fail
//! with an error naming its rank within a bounded time (the `timeout` of `ClusterOptions` and
//! `MpiOptions`); a timeout names the peer, the phase and its fault point.

use std::fmt;
use std::time::Duration;

use crate::ledger::LedgerError;
use crate::topology::TopologyError;

/// Why a communicator call failed. Every variant that concerns another worker names its rank,
/// and every variant names the phase label of the call that noticed it; those about another
/// worker also name the point of the run the call is at ([`crate::point::Point::during`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommError {
    /// Another worker returned an error or panicked; this call gave up instead of waiting.
    #[error("rank {rank} failed ({reason}); rank {observer} abandoned `{phase}`{}", crate::point::point_suffix(.phase))]
    PeerFailed { rank: usize, reason: String, observer: usize, phase: String },
    /// A peer finished its work without sending what this call waits for: the workers called
    /// different sequences of collectives.
    #[error("rank {rank} exited before sending what rank {observer} waits for in `{phase}`{}", crate::point::point_suffix(.phase))]
    PeerExited { rank: usize, observer: usize, phase: String },
    /// Nothing moved for `timeout` while this rank waited for `peer`: the peer is stuck or cut
    /// off, or the workers called different collectives. `host` is the peer's host where the
    /// backend knows it (MPI's processor name), empty otherwise.
    #[error("rank {observer} timed out after {timeout:?} waiting for rank {peer}{} in `{phase}`{}", host_hint(.host), crate::point::point_suffix(.phase))]
    Timeout { observer: usize, peer: usize, host: String, phase: String, timeout: Duration },
    /// `HALO_FAULT` made this rank fail here ([`crate::fault`]).
    #[error("rank {rank}: injected fault at point {point}")]
    Injected { rank: usize, point: String },
    /// The caller passed arguments that do not fit the communicator (wrong buffer count, rank
    /// out of range, ...).
    #[error("`{phase}`: {detail}")]
    InvalidArgument { phase: String, detail: String },
    /// A message had a shape the protocol does not allow (e.g. a length that is not a whole
    /// number of elements).
    #[error("`{phase}`: malformed message from rank {peer}: {detail}")]
    Malformed { phase: String, peer: usize, detail: String },
    /// The MPI library reported an error or could not be set up.
    #[error("MPI: {0}")]
    Mpi(String),
    /// The NCCL library (or the CUDA driver under it) reported an error or could not be set up.
    #[error("NCCL: {0}")]
    Nccl(String),
    /// Ledger snapshots could not be combined.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The topology does not fit the communicator.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// What a timeout says of the peer's host: its name and what to try next.
fn host_hint(host: &str) -> String {
    if host.is_empty() {
        String::new()
    } else {
        format!(" on host {host} (check that host and its link, then resume from the last checkpoint with --resume)")
    }
}

impl CommError {
    pub(crate) fn invalid(phase: &str, detail: impl Into<String>) -> Self {
        CommError::InvalidArgument { phase: phase.to_owned(), detail: detail.into() }
    }

    pub(crate) fn malformed(phase: &str, peer: usize, detail: impl Into<String>) -> Self {
        CommError::Malformed { phase: phase.to_owned(), peer, detail: detail.into() }
    }
}

/// How a worker failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The worker's function returned `Err`.
    Error,
    /// The worker's function panicked.
    Panic,
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureKind::Error => "returned an error",
            FailureKind::Panic => "panicked",
        })
    }
}

/// One failed worker of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerFailure {
    /// The worker's rank.
    pub rank: usize,
    /// Error or panic.
    pub kind: FailureKind,
    /// The error's message, or the panic payload when it is a string.
    pub reason: String,
}

impl fmt::Display for WorkerFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {} {}: {}", self.rank, self.kind, self.reason)
    }
}

/// Why a whole run ([`crate::LocalCluster::run`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A worker failed first; the others then failed because of it (`later`, in the order they
    /// noticed).
    #[error("{first}{}", later_suffix(.later))]
    WorkerFailed { first: WorkerFailure, later: Vec<WorkerFailure> },
    /// The operating system refused a worker thread.
    #[error("cannot start the thread of rank {rank}: {message}")]
    Spawn { rank: usize, message: String },
}

impl ClusterError {
    /// Rank of the worker whose failure ended the run, if a worker failed.
    pub fn failed_rank(&self) -> Option<usize> {
        match self {
            ClusterError::WorkerFailed { first, .. } => Some(first.rank),
            ClusterError::Spawn { .. } => None,
        }
    }
}

fn later_suffix(later: &[WorkerFailure]) -> String {
    if later.is_empty() {
        String::new()
    } else {
        let ranks: Vec<String> = later.iter().map(|f| f.rank.to_string()).collect();
        format!(" (then ranks {} stopped because of it)", ranks.join(", "))
    }
}
