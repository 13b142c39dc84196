//! The point-to-point layer a backend provides. Every collective of [`crate::Endpoint`] is
//! built from `post` and `recv`, so all backends share one implementation of the collectives
//! (and of the ledger); a backend only moves tagged byte messages between ranks.

use crate::error::CommError;

/// Which part of which call a message belongs to. Together with the sender's rank it
/// identifies a message uniquely, so calls in flight at the same time never mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag {
    /// The message's role.
    pub op: Op,
    /// Collective sequence number (equal on all ranks for the same call), or for
    /// point-to-point messages the number of earlier messages between the same pair.
    pub seq: u64,
}

/// The role of a message; part of its [`Tag`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    AllToAll,
    /// First half of an all-reduce: chunk `p` of every rank goes to rank `p`.
    ReduceScatter,
    /// Second half of an all-reduce: every rank's reduced chunk goes to everyone.
    AllGather,
    Broadcast,
    Gather,
    Scatter,
    Barrier,
    PointToPoint,
}

impl Op {
    /// Distinct small code per op, for backends with integer tags.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Moves tagged byte messages between the ranks of one job.
///
/// Contract: `post` never waits for the receiver (the message is buffered or in flight when it
/// returns); `recv` returns the message from `src` with exactly `tag`, waiting at most the
/// backend's timeout, and fails early with [`CommError::PeerFailed`] when the backend learns
/// that a peer failed. `phase` is only for error messages.
pub trait Transport: Send {
    /// This rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Sends `bytes` to `dst` (never this rank) without waiting for it to be received.
    fn post(&mut self, dst: usize, tag: Tag, bytes: Vec<u8>, phase: &str) -> Result<(), CommError>;
    /// Receives the message `tag` from `src` (never this rank).
    fn recv(&mut self, src: usize, tag: Tag, phase: &str) -> Result<Vec<u8>, CommError>;
}
