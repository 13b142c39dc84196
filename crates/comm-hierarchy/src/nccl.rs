//! NCCL collectives on GPU buffers, one rank per GPU: all-to-all (grouped point-to-point sends
//! and receives, the standard NCCL pattern) and all-reduce (`ncclAllReduce`).
//!
//! The NCCL communicator is bootstrapped over any [`Communicator`] (MPI ranks under mpirun, or
//! the threads of a [`crate::LocalCluster`] for several GPUs of one host): rank 0 creates the
//! unique id and broadcasts it. Every call is recorded in a ledger exactly as
//! [`crate::Endpoint`] records the same collective, so reports and the cost model treat NCCL
//! runs like any other backend: an all-to-all counts `send[p]` towards rank `p`, and an
//! all-reduce counts its reduce-scatter and all-gather chunks. NCCL itself may route the
//! all-reduce along a ring or tree; the ledger counts the logical exchange, whose bytes per rank
//! equal a ring's.
//!
//! Unlike the host backends, the sum of an all-reduce follows NCCL's order, not rank order, so
//! it is not bit-identical to the serial sum.

use std::cell::RefCell;
use std::sync::Arc;

pub use cudarc::driver::CudaSlice;
use cudarc::driver::{CudaContext, CudaStream, CudaView, CudaViewMut};
use cudarc::nccl::{Comm, Id, ReduceOp};

use crate::communicator::Communicator;
use crate::endpoint::all_reduce_sends;
use crate::error::CommError;
use crate::ledger::{CollectiveKind, Ledger, LedgerSnapshot, RecordId};
use crate::topology::Topology;

const F32: usize = std::mem::size_of::<f32>();

/// A message [`NcclComm::send_recv`] sends: f32 values or bytes on this rank's GPU.
pub enum Outgoing<'a> {
    Values(CudaView<'a, f32>),
    Bytes(CudaView<'a, u8>),
    /// A message of no bytes: nothing goes over NCCL, and the ledger counts it, as the host
    /// all-to-all's empty messages.
    Nothing,
}

/// Where [`NcclComm::send_recv`] receives a message: a buffer of its exact length.
pub enum Incoming<'a> {
    Values(CudaViewMut<'a, f32>),
    Bytes(CudaViewMut<'a, u8>),
}

impl Outgoing<'_> {
    fn bytes(&self) -> usize {
        match self {
            Outgoing::Values(v) => v.len() * F32,
            Outgoing::Bytes(b) => b.len(),
            Outgoing::Nothing => 0,
        }
    }
}

/// One rank's NCCL communicator.
pub struct NcclComm {
    comm: Comm,
    topology: Topology,
    state: RefCell<State>,
}

struct State {
    ledger: Ledger,
    next_seq: u64,
}

fn nccl_err(phase: &str, e: impl std::fmt::Debug) -> CommError {
    CommError::Nccl(format!("`{phase}`: {e:?}"))
}

/// Fails, instead of letting cudarc panic, when the CUDA driver library cannot be loaded.
fn require_driver(phase: &str) -> Result<(), CommError> {
    // SAFETY: loading libcuda runs its initialisers, which need nothing from us; the probe
    // keeps no handle.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(CommError::Nccl(format!("`{phase}`: no CUDA driver (libcuda.so) on the loader path")))
    }
}

/// The number of CUDA devices on this host.
pub fn device_count() -> Result<usize, CommError> {
    const PHASE: &str = "nccl-devices";
    require_driver(PHASE)?;
    let n = CudaContext::device_count().map_err(|e| nccl_err(PHASE, e))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

impl NcclComm {
    /// [`NcclComm::new`] on a new stream of GPU `ordinal` of this host.
    pub fn on_device(bootstrap: &dyn Communicator, ordinal: usize) -> Result<Self, CommError> {
        const PHASE: &str = "nccl-init";
        require_driver(PHASE)?;
        let stream = CudaContext::new(ordinal).and_then(|ctx| ctx.new_stream()).map_err(|e| nccl_err(PHASE, e))?;
        Self::new(bootstrap, stream)
    }

    /// The stream this communicator's work runs on.
    pub fn stream(&self) -> Arc<CudaStream> {
        self.comm.stream()
    }

    /// A zero-filled f32 buffer on this rank's GPU.
    pub fn zeros(&self, len: usize) -> Result<CudaSlice<f32>, CommError> {
        self.comm.stream().alloc_zeros(len).map_err(|e| nccl_err("nccl-alloc", e))
    }

    /// Collective over `bootstrap`: joins every rank into one NCCL communicator whose work runs
    /// on `stream` (this rank's GPU). The id's broadcast is recorded in `bootstrap`'s ledger
    /// under the phase `nccl-init`.
    pub fn new(bootstrap: &dyn Communicator, stream: Arc<CudaStream>) -> Result<Self, CommError> {
        const PHASE: &str = "nccl-init";
        let (rank, size) = (bootstrap.rank(), bootstrap.size());
        let mut id_bytes = if rank == 0 {
            let id = Id::new().map_err(|e| nccl_err(PHASE, e))?;
            id.internal().iter().map(|&c| c as u8).collect()
        } else {
            Vec::new()
        };
        bootstrap.broadcast(PHASE, 0, &mut id_bytes)?;
        let internal: [std::ffi::c_char; 128] =
            id_bytes.iter().map(|&b| b as std::ffi::c_char).collect::<Vec<_>>().try_into().map_err(|v: Vec<_>| {
                CommError::malformed(PHASE, 0, format!("NCCL id of {} bytes, expected 128", v.len()))
            })?;
        let comm = Comm::from_rank(stream, rank, size, Id::uninit(internal)).map_err(|e| nccl_err(PHASE, e))?;
        Ok(Self {
            comm,
            topology: bootstrap.topology().clone(),
            state: RefCell::new(State { ledger: Ledger::new(rank), next_seq: 0 }),
        })
    }

    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    pub fn size(&self) -> usize {
        self.comm.world_size()
    }

    /// This rank's ledger so far.
    pub fn ledger(&self) -> LedgerSnapshot {
        self.state.borrow().ledger.snapshot()
    }

    fn open(&self, phase: &str, kind: CollectiveKind, payload_bytes: usize) -> RecordId {
        let mut st = self.state.borrow_mut();
        let seq = st.next_seq;
        st.next_seq += 1;
        st.ledger.open(Some(seq), kind, phase, payload_bytes as u64)
    }

    fn record(&self, id: RecordId, dst: usize, bytes: usize) {
        if let Some(link) = self.topology.link_class(self.rank(), dst) {
            self.state.borrow_mut().ledger.record_send(id, dst, link, bytes as u64);
        }
    }

    fn check_per_rank(&self, phase: &str, what: &str, n: usize) -> Result<(), CommError> {
        if n == self.size() {
            Ok(())
        } else {
            Err(CommError::invalid(phase, format!("expected one {what} buffer per rank ({}), got {n}", self.size())))
        }
    }

    /// All-to-all of f32 buffers: `send[p]` goes to rank `p` and `recv[p]` receives from rank
    /// `p`, whose length must equal what `p` sends here (callers know their exchange plans).
    /// `send[rank]` is copied to `recv[rank]` on the device and not counted.
    pub fn all_to_all_f32(
        &self,
        phase: &str,
        send: &[CudaSlice<f32>],
        recv: &mut [CudaSlice<f32>],
    ) -> Result<(), CommError> {
        self.check_per_rank(phase, "send", send.len())?;
        self.check_per_rank(phase, "receive", recv.len())?;
        let me = self.rank();
        if send[me].len() != recv[me].len() {
            return Err(CommError::invalid(
                phase,
                format!("this rank sends itself {} values but receives {}", send[me].len(), recv[me].len()),
            ));
        }
        let payload = send.iter().enumerate().filter(|(p, _)| *p != me).map(|(_, s)| s.len() * F32).sum();
        let id = self.open(phase, CollectiveKind::AllToAll, payload);
        let stream = self.comm.stream();
        {
            let mut group = self.comm.group();
            for (p, (s, r)) in send.iter().zip(recv.iter_mut()).enumerate() {
                if p == me {
                    continue;
                }
                let peer = p as i32;
                if !s.is_empty() {
                    group.send(s.as_view(), peer).map_err(|e| nccl_err(phase, e))?;
                }
                if !r.is_empty() {
                    group.recv(r.as_view_mut(), peer).map_err(|e| nccl_err(phase, e))?;
                }
            }
        }
        stream.memcpy_dtod(&send[me], &mut recv[me]).map_err(|e| nccl_err(phase, e))?;
        stream.synchronize().map_err(|e| nccl_err(phase, e))?;
        for (p, s) in send.iter().enumerate() {
            if p != me {
                self.record(id, p, s.len() * F32);
            }
        }
        Ok(())
    }

    /// One round of grouped sends and receives between this rank and its peers, `(peer,
    /// message)` each (no message to this rank itself), queued on this communicator's stream
    /// and not waited for: the stream's later work (a decode of what arrived) runs after it.
    /// Every receive buffer must have the exact length its peer sends (NCCL does not carry
    /// lengths); the callers derive them from the same plan on both sides. The ledger records
    /// it as an all-to-all of one message per peer sent to, the bytes of its pieces summed.
    pub fn send_recv(
        &self,
        phase: &str,
        sends: Vec<(usize, Outgoing<'_>)>,
        receives: Vec<(usize, Incoming<'_>)>,
    ) -> Result<(), CommError> {
        let me = self.rank();
        let peers = sends.iter().map(|(p, _)| *p).chain(receives.iter().map(|(p, _)| *p));
        if let Some(peer) = peers.into_iter().find(|&p| p == me || p >= self.size()) {
            let detail = format!("rank {me} of {} cannot exchange a message with rank {peer}", self.size());
            return Err(CommError::invalid(phase, detail));
        }
        // One logical message per peer, whatever the pieces it was sent in.
        let mut sent = vec![None; self.size()];
        for (peer, message) in &sends {
            *sent[*peer].get_or_insert(0) += message.bytes();
        }
        let id = self.open(phase, CollectiveKind::AllToAll, sent.iter().flatten().sum());
        {
            let mut group = self.comm.group();
            for (peer, message) in sends {
                let peer = peer as i32;
                match message {
                    Outgoing::Values(v) if !v.is_empty() => group.send(v, peer),
                    Outgoing::Bytes(b) if !b.is_empty() => group.send(b, peer),
                    Outgoing::Values(_) | Outgoing::Bytes(_) | Outgoing::Nothing => Ok(()),
                }
                .map_err(|e| nccl_err(phase, e))?;
            }
            for (peer, landing) in receives {
                let peer = peer as i32;
                match landing {
                    Incoming::Values(v) if !v.is_empty() => group.recv(v, peer).map(drop),
                    Incoming::Bytes(b) if !b.is_empty() => group.recv(b, peer).map(drop),
                    Incoming::Values(_) | Incoming::Bytes(_) => Ok(()),
                }
                .map_err(|e| nccl_err(phase, e))?;
            }
        }
        for (peer, bytes) in sent.into_iter().enumerate().filter_map(|(p, b)| Some((p, b?))) {
            self.record(id, peer, bytes);
        }
        Ok(())
    }

    /// Element-wise sum over ranks, in place; every rank ends with the same values.
    pub fn all_reduce_sum_f32(&self, phase: &str, data: &mut CudaSlice<f32>) -> Result<(), CommError> {
        let id = self.open(phase, CollectiveKind::AllReduce, data.len() * F32);
        if self.size() == 1 {
            return Ok(());
        }
        self.comm.all_reduce_in_place(data, &ReduceOp::Sum).map_err(|e| nccl_err(phase, e))?;
        self.comm.stream().synchronize().map_err(|e| nccl_err(phase, e))?;
        for (dst, bytes) in all_reduce_sends(self.rank(), self.size(), data.len()) {
            self.record(id, dst, bytes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinkModel, LocalCluster};

    /// Without a driver (CI) the device count is an error, never a panic.
    #[test]
    fn device_count_fails_cleanly_without_a_driver() {
        match device_count() {
            Ok(n) => assert!(n < 4096),
            Err(e) => assert!(e.to_string().contains("libcuda"), "{e}"),
        }
    }

    /// The NCCL all-reduce's ledger records must be the host backend's, message for message.
    #[test]
    fn all_reduce_accounting_matches_the_endpoint() {
        let topology = Topology::new(2, 2, LinkModel::default()).unwrap();
        let len = 10;
        let ledgers = LocalCluster::run(&topology, |comm| {
            let mut data = vec![1.0f32; len];
            comm.all_reduce_sum_f32("grads", &mut data).map(|()| comm.ledger())
        })
        .unwrap();
        for (rank, ledger) in ledgers.iter().enumerate() {
            let mut expected = Ledger::new(rank);
            let id = expected.open(Some(0), CollectiveKind::AllReduce, "grads", (len * F32) as u64);
            for (dst, bytes) in all_reduce_sends(rank, 4, len) {
                expected.record_send(id, dst, topology.link_class(rank, dst).unwrap(), bytes as u64);
            }
            assert_eq!(ledger.traffic(), expected.snapshot().traffic(), "rank {rank}");
            assert_eq!(ledger.collectives(), expected.snapshot().collectives(), "rank {rank}");
        }
    }
}
