//! A worker's device joined to the other workers' devices by NCCL (feature `nccl`, one worker
//! per GPU): its gradient sum runs on the GPUs ([`Device::sum_on_peers`]), and the messages of
//! its exchange calls on the device's rows go GPU to GPU ([`crate::gpu::DeviceRows`] as a
//! store that sends its own messages), each kept in device memory from its encoding to its
//! decoding: an outbox and an inbox of one message per peer, sent and received by one group of
//! NCCL sends and receives on the communicator's own stream (forked from the device's), and
//! ordered against the device's stream by cudarc's events on each buffer.

use std::collections::HashMap;
use std::sync::MutexGuard;

use comm_hierarchy::Communicator;
use comm_hierarchy::nccl::{Incoming, NcclComm, Outgoing};
use cudarc::driver::CudaSlice;

use super::rows::Message;
use super::{Device, GpuError};

/// The NCCL communicator of a joined device, with its messages in flight.
pub(super) struct Peers {
    comm: NcclComm,
    pub(super) outbox: HashMap<usize, Message>,
    pub(super) inbox: HashMap<usize, Message>,
}

impl Device {
    /// Joins this device to the other workers' devices: a collective over `bootstrap` (rank
    /// 0's NCCL id broadcast under `nccl-init`) that makes an NCCL communicator on this
    /// device's stream, one worker per GPU.
    pub fn join_peers(&self, bootstrap: &dyn Communicator) -> Result<(), GpuError> {
        // NCCL runs on a stream of its own, so a split call's messages are in flight while the
        // device's stream computes (AdaQP's central rows); cudarc's events order every buffer's
        // uses across the two streams (a send after its encoding, a decode after its arrival).
        let comm = NcclComm::new(bootstrap, self.stream.fork()?)?;
        *self.peers() = Some(Peers { comm, outbox: HashMap::new(), inbox: HashMap::new() });
        Ok(())
    }

    /// Whether [`Device::join_peers`] joined this device.
    pub fn joined(&self) -> bool {
        self.peers().is_some()
    }

    /// Sums `data` over the joined devices in place, by NCCL, under `phase`.
    pub fn sum_on_peers(&self, phase: &str, data: &mut CudaSlice<f32>) -> Result<(), GpuError> {
        let peers = self.peers();
        let peers = peers.as_ref().ok_or(GpuError::NotJoined)?;
        Ok(peers.comm.all_reduce_sum_f32(phase, data)?)
    }

    pub(super) fn peers(&self) -> MutexGuard<'_, Option<Peers>> {
        self.peers.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Peers {
    /// Sends every outbox message to its peer and receives, from each peer `p` with
    /// `incoming[p] = Some((bytes, values))`, its message of `bytes` bytes (as values where
    /// `values`) into the inbox, by one NCCL group on the communicator's stream; returns before
    /// the messages arrive (a decode on the device's stream waits for its buffer's arrival).
    pub(super) fn post(&mut self, phase: &str, incoming: &[Option<(usize, bool)>]) -> Result<(), GpuError> {
        self.inbox.clear();
        let stream = self.comm.stream();
        for (peer, &(bytes, values)) in incoming.iter().enumerate().filter_map(|(p, i)| Some((p, i.as_ref()?))) {
            let message = match (bytes, values) {
                (0, _) => Message::Empty,
                // SAFETY: allocated on the communicator's stream, whose receive queued below
                // writes every element before any later use of the buffer on any stream (cudarc
                // records the write and makes the decoding stream wait for it).
                (_, true) => Message::Values(unsafe { stream.alloc::<f32>(bytes / std::mem::size_of::<f32>()) }?),
                // SAFETY: as above.
                (_, false) => Message::Bytes(unsafe { stream.alloc::<u8>(bytes) }?),
            };
            self.inbox.insert(peer, message);
        }
        // Freed after the call, in the stream's order: after the sends have read them.
        let outbox: Vec<(usize, Message)> = self.outbox.drain().collect();
        // An empty message is still a send of no bytes to its peer, as the host's all-to-all
        // posts one (the ledger counts it).
        let sends = outbox
            .iter()
            .map(|(peer, message)| {
                let out = match message {
                    Message::Values(v) => Outgoing::Values(v.as_view()),
                    Message::Bytes(b) => Outgoing::Bytes(b.as_view()),
                    Message::Empty => Outgoing::Nothing,
                };
                (*peer, out)
            })
            .collect();
        let receives = self
            .inbox
            .iter_mut()
            .filter_map(|(&peer, message)| match message {
                Message::Values(v) => Some((peer, Incoming::Values(v.as_view_mut()))),
                Message::Bytes(b) => Some((peer, Incoming::Bytes(b.as_view_mut()))),
                Message::Empty => None,
            })
            .collect();
        Ok(self.comm.send_recv(phase, sends, receives)?)
    }
}
