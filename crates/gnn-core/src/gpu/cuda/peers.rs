//! A worker's device joined to the other workers' devices by NCCL (feature `nccl`, one worker
//! per GPU): its gradient sum runs on the GPUs ([`Device::sum_on_peers`]), and the messages of
//! its exchange calls on the device's rows go GPU to GPU ([`crate::gpu::DeviceRows`] as a
//! store that sends its own messages), each kept in device memory from its encoding to its
//! decoding: an outbox and an inbox of one message per peer, sent and received by one group of
//! NCCL sends and receives on the communicator's own stream (forked from the device's), and
//! ordered against the device's stream by cudarc's events on each buffer.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};

use cache_quant::Encoding;
use cache_quant::codec::bucket;
use comm_hierarchy::Communicator;
use comm_hierarchy::nccl::{Incoming, NcclComm, Outgoing};
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};

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
    /// 0's NCCL id broadcast under `nccl-init`) that makes an NCCL communicator, one worker per
    /// GPU.
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
    /// `incoming[p] = Some((bytes, encoding))`, its message of `bytes` bytes by `encoding` into
    /// the inbox, by one NCCL group on the communicator's stream; returns before the messages
    /// arrive (a decode on the device's stream waits for its buffers' arrival). A bucket
    /// message goes as its bounds and packed ids, in that order; its width is the receiver's
    /// encoding's, the one every worker's codec holds.
    pub(super) fn post(&mut self, phase: &str, incoming: &[Option<(usize, &Encoding)>]) -> Result<(), GpuError> {
        self.inbox.clear();
        let stream = self.comm.stream();
        for (peer, &(bytes, encoding)) in incoming.iter().enumerate().filter_map(|(p, i)| Some((p, i.as_ref()?))) {
            let message = match encoding {
                _ if bytes == 0 => Message::Empty,
                Encoding::Exact => Message::Values(receive_buffer(&stream, bytes / std::mem::size_of::<f32>())?),
                Encoding::Bucket { bits } => Message::Bucket {
                    bits: *bits,
                    lo: receive_buffer(&stream, 1)?,
                    hi: receive_buffer(&stream, 1)?,
                    packed: receive_buffer(&stream, bytes.saturating_sub(bucket::HEADER_BYTES))?,
                },
                Encoding::Linear { .. } | Encoding::Stochastic { .. } => {
                    Message::Bytes(receive_buffer(&stream, bytes)?)
                }
            };
            self.inbox.insert(peer, message);
        }
        // Freed after the call, in the streams' order: after the sends have read them.
        let outbox: Vec<(usize, Message)> = self.outbox.drain().collect();
        let mut sends = Vec::with_capacity(outbox.len());
        for (peer, message) in &outbox {
            match message {
                Message::Values(v) => sends.push((*peer, Outgoing::Values(v.as_view()))),
                Message::Bytes(b) => sends.push((*peer, Outgoing::Bytes(b.as_view()))),
                Message::Bucket { lo, hi, packed, .. } => sends.extend([
                    (*peer, Outgoing::Values(lo.as_view())),
                    (*peer, Outgoing::Values(hi.as_view())),
                    (*peer, Outgoing::Bytes(packed.as_view())),
                ]),
                // An empty message is still a send of no bytes to its peer, as the host's
                // all-to-all posts one (the ledger counts it).
                Message::Empty => sends.push((*peer, Outgoing::Nothing)),
            }
        }
        let mut receives = Vec::with_capacity(self.inbox.len());
        for (&peer, message) in self.inbox.iter_mut() {
            match message {
                Message::Values(v) => receives.push((peer, Incoming::Values(v.as_view_mut()))),
                Message::Bytes(b) => receives.push((peer, Incoming::Bytes(b.as_view_mut()))),
                Message::Bucket { lo, hi, packed, .. } => receives.extend([
                    (peer, Incoming::Values(lo.as_view_mut())),
                    (peer, Incoming::Values(hi.as_view_mut())),
                    (peer, Incoming::Bytes(packed.as_view_mut())),
                ]),
                Message::Empty => {}
            }
        }
        Ok(self.comm.send_recv(phase, sends, receives)?)
    }
}

/// A buffer of `len` elements on `stream` for a receive that [`Peers::post`] queues there next,
/// which writes every element.
fn receive_buffer<T: DeviceRepr>(stream: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<T>, GpuError> {
    // SAFETY: the receive queued on this stream right after writes every element before any
    // later use of the buffer on any stream (cudarc records the write and makes a decoding
    // stream wait for it).
    Ok(unsafe { stream.alloc::<T>(len) }?)
}
