//! The `Communicator` trait: what a worker can ask of the layer that moves bytes.
//!
//! Calls: all-to-all, blocking or split into a start and a wait (AdaQP's ring order); all-reduce,
//! deterministic, so every rank gets the same bits; broadcast, gather and scatter (whole, or
//! `scatter_with`: the root makes each buffer just before sending it, so it holds one at a time);
//! barrier. Every call takes a phase label, under which the ledger counts its bytes.

use std::fmt;

use crate::error::CommError;
use crate::ledger::{LedgerMark, LedgerSnapshot};
use crate::topology::Topology;
use crate::wire;

/// Collective and point-to-point communication among the `size()` workers of one job.
///
/// Every rank must call the same collectives in the same order (SPMD). Each call takes a
/// phase label (`fwd/1`, `bwd/2`, `params`, ...) under which the ledger counts its traffic.
/// Calls fail, instead of hanging, when another rank failed or nothing arrives within the
/// backend's timeout; the error names the rank at fault.
pub trait Communicator: Send {
    /// This worker's rank, `0..size()`.
    fn rank(&self) -> usize;

    /// Number of workers.
    fn size(&self) -> usize;

    /// The cluster shape the ranks are placed on.
    fn topology(&self) -> &Topology;

    /// Starts an all-to-all: `send[p]` goes to rank `p` (`send[rank]` stays local and is not
    /// counted by the ledger). Messages are posted in AdaQP's ring order (rank+1, rank+2, ...)
    /// and received in ring order (rank-1, rank-2, ...) by [`PendingAllToAll::wait`]; the
    /// caller may compute, or call other collectives, in between.
    fn start_all_to_all_v(&self, phase: &str, send: Vec<Vec<u8>>) -> Result<PendingAllToAll<'_>, CommError>;

    /// All-to-all with variable bytes per peer: returns `recv` with `recv[p]` from rank `p`.
    fn all_to_all_v(&self, phase: &str, send: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, CommError> {
        self.start_all_to_all_v(phase, send)?.wait()
    }

    /// Element-wise sum over ranks, in place. Every rank ends with bit-identical values equal
    /// to the serial sum `((x_0 + x_1) + x_2) + ...` in rank order; all ranks must pass slices
    /// of the same length.
    fn all_reduce_sum_f32(&self, phase: &str, data: &mut [f32]) -> Result<(), CommError>;

    /// [`Communicator::all_reduce_sum_f32`] over f64 (loss sums, exact counters).
    fn all_reduce_sum_f64(&self, phase: &str, data: &mut [f64]) -> Result<(), CommError>;

    /// This communicator's records of the collectives a device makes (NCCL sends between the
    /// workers' GPUs): the device backend's extension. An error (the default) where it keeps
    /// none; `phase` names the call that asked.
    fn device_ledger(&self, phase: &str) -> Result<&dyn DeviceLedger, CommError> {
        Err(CommError::InvalidArgument {
            phase: phase.to_owned(),
            detail: "this communicator records no device collectives".to_owned(),
        })
    }

    /// Copies `root`'s `data` into `data` on every rank.
    fn broadcast(&self, phase: &str, root: usize, data: &mut Vec<u8>) -> Result<(), CommError>;

    /// Collects every rank's `data` at `root`: `Some(v)` with `v[p]` from rank `p` on the root,
    /// `None` elsewhere.
    fn gather(&self, phase: &str, root: usize, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, CommError>;

    /// Hands `data[p]` of the root to rank `p`. The root passes `Some` with one buffer per
    /// rank; the argument of other ranks is ignored.
    fn scatter(&self, phase: &str, root: usize, data: Option<Vec<Vec<u8>>>) -> Result<Vec<u8>, CommError>;

    /// [`Communicator::scatter`] with the root's buffers made one at a time: the root passes
    /// `Some(next)`, and `next(p)` makes rank `p`'s buffer just before it is sent (the root's
    /// own last), so the root never holds more than one outgoing buffer. An error of `next`
    /// ends the call on the root. The ledger records it as one scatter, as `scatter` does.
    fn scatter_with(
        &self,
        phase: &str,
        root: usize,
        next: Option<&mut dyn FnMut(usize) -> Result<Vec<u8>, CommError>>,
    ) -> Result<Vec<u8>, CommError>;

    /// Returns once every rank has entered the barrier.
    fn barrier(&self, phase: &str) -> Result<(), CommError>;

    /// Sends one message to `dst`. Messages between a pair arrive in the order they were sent.
    fn send(&self, phase: &str, dst: usize, data: Vec<u8>) -> Result<(), CommError>;

    /// Receives the next message from `src`.
    fn recv(&self, phase: &str, src: usize) -> Result<Vec<u8>, CommError>;

    /// This rank's ledger so far.
    fn ledger(&self) -> LedgerSnapshot;

    /// The current position in this rank's ledger, for [`Communicator::ledger_since`].
    fn ledger_mark(&self) -> LedgerMark;

    /// What this rank recorded after `mark`: equal to `ledger().delta_since(&at_mark)`, but
    /// copying only the new records, so per-epoch accounting stays cheap in long runs.
    fn ledger_since(&self, mark: LedgerMark) -> LedgerSnapshot;

    /// Collective: merges every rank's `snapshot` (usually [`Communicator::ledger`] or a delta
    /// of it) at `root`, which gets `Some(merged)`. This bookkeeping traffic is not recorded.
    fn gather_ledger(&self, root: usize, snapshot: &LedgerSnapshot) -> Result<Option<LedgerSnapshot>, CommError>;

    /// All-to-all of f32 rows: `send[p]` is a row-major block for rank `p`, sent as
    /// little-endian bytes; returns the blocks received from each rank.
    fn all_to_all_rows(&self, phase: &str, send: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, CommError> {
        let bytes = send.iter().map(|rows| wire::encode(rows)).collect();
        let received = self.all_to_all_v(phase, bytes)?;
        received
            .iter()
            .enumerate()
            .map(|(src, b)| wire::decode(b).map_err(|e| CommError::malformed(phase, src, e.to_string())))
            .collect()
    }

    /// Broadcast of f32 values (e.g. initial parameters) from `root`.
    fn broadcast_f32(&self, phase: &str, root: usize, data: &mut Vec<f32>) -> Result<(), CommError> {
        let mut bytes = if self.rank() == root { wire::encode(data) } else { Vec::new() };
        self.broadcast(phase, root, &mut bytes)?;
        *data = wire::decode(&bytes).map_err(|e| CommError::malformed(phase, root, e.to_string()))?;
        Ok(())
    }
}

/// An all-to-all whose messages are in flight; [`PendingAllToAll::wait`] receives them.
/// Dropping it without waiting leaves the peers' messages unreceived.
#[must_use = "call wait() to receive the peers' messages"]
pub struct PendingAllToAll<'a> {
    finish: Box<dyn FnOnce() -> Result<Vec<Vec<u8>>, CommError> + 'a>,
}

impl<'a> PendingAllToAll<'a> {
    /// Wraps the receiving half of an all-to-all (for backends).
    pub fn new(finish: impl FnOnce() -> Result<Vec<Vec<u8>>, CommError> + 'a) -> Self {
        Self { finish: Box::new(finish) }
    }

    /// Blocks until every peer's message arrived; `recv[p]` is from rank `p`.
    pub fn wait(self) -> Result<Vec<Vec<u8>>, CommError> {
        (self.finish)()
    }
}

impl fmt::Debug for PendingAllToAll<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingAllToAll")
    }
}

/// Ledger records of the collectives a device makes, so a run whose messages go between GPUs
/// keeps the host backends' ledger ([`Communicator::device_ledger`]).
pub trait DeviceLedger {
    /// Records in this rank's ledger the sum all-reduce of `len` f32 values that a device
    /// collective (NCCL: `nccl::NcclComm`, feature `nccl`) makes, exactly as
    /// [`Communicator::all_reduce_sum_f32`] records one of that length, and moves nothing.
    /// Every rank calls it where it makes the device collective, in the same order as its other
    /// calls, so a run whose gradients go through NCCL keeps the host backends' ledger.
    fn record_all_reduce_f32(&self, phase: &str, len: usize) -> Result<(), CommError>;

    /// Records in this rank's ledger the all-to-all a device collective makes (NCCL sends
    /// between the workers' GPUs), `sent[p]` bytes towards rank `p` (`sent[rank]` is not
    /// counted), exactly as [`Communicator::all_to_all_v`] records messages of those lengths,
    /// and moves nothing. As with [`DeviceLedger::record_all_reduce_f32`], every rank calls it
    /// where it makes the device collective.
    fn record_all_to_all_v(&self, phase: &str, sent: &[usize]) -> Result<(), CommError>;
}
