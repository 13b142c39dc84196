//! The collectives, written once over a [`Transport`]: every backend is an `Endpoint` over its
//! own transport, so all of them share the ring schedule, the deterministic all-reduce and the
//! ledger.

use std::cell::RefCell;
use std::ops::Range;

use crate::communicator::{Communicator, DeviceLedger, PendingAllToAll};
use crate::error::CommError;
use crate::fault::{Armed, Fault};
use crate::ledger::{CollectiveKind, Ledger, LedgerMark, LedgerSnapshot, RecordId};
use crate::topology::{Topology, TopologyError};
use crate::transport::{Op, Tag, Transport};
use crate::wire::{self, Element};

/// A [`Communicator`] over a [`Transport`].
pub struct Endpoint<T: Transport> {
    rank: usize,
    size: usize,
    topology: Topology,
    state: RefCell<State<T>>,
    /// `HALO_FAULT`'s fault, when it names this rank ([`crate::fault`]).
    fault: Option<Armed>,
}

/// Mutable per-rank state. Calls take `&self` (so a pending all-to-all can coexist with other
/// calls) and borrow this only for one post or receive at a time.
struct State<T> {
    transport: T,
    next_seq: u64,
    p2p_sent: Vec<u64>,
    p2p_received: Vec<u64>,
    ledger: Ledger,
}

/// One call in progress: the sequence number its messages are tagged with and, when it is
/// accounted, its ledger record.
struct Call {
    phase: String,
    seq: u64,
    record: Option<RecordId>,
}

impl<T: Transport> Endpoint<T> {
    /// Wraps `transport`; `topology` must have one worker per rank of the transport.
    pub fn new(topology: Topology, transport: T) -> Result<Self, CommError> {
        let (rank, size) = (transport.rank(), transport.size());
        if topology.workers() != size || rank >= size {
            return Err(TopologyError::RankCount { workers: topology.workers(), ranks: size }.into());
        }
        let state = State {
            transport,
            next_seq: 0,
            p2p_sent: vec![0; size],
            p2p_received: vec![0; size],
            ledger: Ledger::new(rank),
        };
        Ok(Self { rank, size, topology, state: RefCell::new(state), fault: None })
    }

    /// Arms `fault` on this endpoint: its rank fails at its point as its kind says.
    pub fn with_fault(mut self, fault: Option<Fault>) -> Self {
        self.fault = fault.filter(|f| f.rank == self.rank).map(Armed::new);
        self
    }

    /// Gives the transport back (e.g. to shut a backend down in order).
    pub fn into_transport(self) -> T {
        self.state.into_inner().transport
    }

    /// Opens a numbered collective call; `accounted` calls get a ledger record. An armed fault
    /// whose point this call reaches fires here.
    fn open(
        &self,
        phase: &str,
        kind: CollectiveKind,
        payload_bytes: usize,
        accounted: bool,
    ) -> Result<Call, CommError> {
        if let Some(armed) = &self.fault {
            armed.reach(self.rank, self.size, phase, || self.hang(phase))?;
        }
        let mut st = self.state.borrow_mut();
        let seq = st.next_seq;
        st.next_seq += 1;
        let record = accounted.then(|| st.ledger.open(Some(seq), kind, phase, payload_bytes as u64));
        Ok(Call { phase: phase.to_owned(), seq, record })
    }

    /// An injected hang: waits for a message no peer sends until a peer gives up on this rank,
    /// and returns the error that ended the wait.
    fn hang(&self, phase: &str) -> CommError {
        let peer = (self.rank + 1) % self.size;
        let never = Tag { op: Op::PointToPoint, seq: u64::MAX };
        loop {
            match self.state.borrow_mut().transport.recv(peer, never, phase) {
                // This rank's own wait ran out first: keep hanging until a peer's does.
                Ok(_) | Err(CommError::Timeout { .. }) => continue,
                Err(e) => return e,
            }
        }
    }

    fn post(&self, call: &Call, op: Op, dst: usize, bytes: Vec<u8>) -> Result<(), CommError> {
        let mut st = self.state.borrow_mut();
        let len = bytes.len() as u64;
        st.transport.post(dst, Tag { op, seq: call.seq }, bytes, &call.phase)?;
        if let (Some(id), Some(link)) = (call.record, self.topology.link_class(self.rank, dst)) {
            st.ledger.record_send(id, dst, link, len);
        }
        Ok(())
    }

    fn recv_from(&self, call: &Call, op: Op, src: usize) -> Result<Vec<u8>, CommError> {
        self.state.borrow_mut().transport.recv(src, Tag { op, seq: call.seq }, &call.phase)
    }

    fn check_rank(&self, phase: &str, what: &str, rank: usize) -> Result<(), CommError> {
        if rank < self.size {
            Ok(())
        } else {
            Err(CommError::invalid(phase, format!("{what} {rank} is out of range for {} ranks", self.size)))
        }
    }

    fn check_peer(&self, phase: &str, peer: usize) -> Result<(), CommError> {
        self.check_rank(phase, "peer rank", peer)?;
        if peer == self.rank {
            return Err(CommError::invalid(
                phase,
                format!("rank {peer} cannot send a point-to-point message to itself"),
            ));
        }
        Ok(())
    }

    fn check_per_rank(&self, phase: &str, buffers: usize) -> Result<(), CommError> {
        if buffers == self.size {
            Ok(())
        } else {
            Err(CommError::invalid(phase, format!("expected one buffer per rank ({}), got {buffers}", self.size)))
        }
    }

    /// Posts `send[p]` to every other rank in ring order (rank+1, rank+2, ...) and returns
    /// `send[rank]`, which stays here.
    fn post_ring(&self, call: &Call, op: Op, mut send: Vec<Vec<u8>>) -> Result<Vec<u8>, CommError> {
        for round in 1..self.size {
            let dst = (self.rank + round) % self.size;
            self.post(call, op, dst, std::mem::take(&mut send[dst]))?;
        }
        Ok(std::mem::take(&mut send[self.rank]))
    }

    /// Receives one message from every other rank in ring order (rank-1, rank-2, ...).
    fn recv_ring(&self, call: &Call, op: Op, own: Vec<u8>) -> Result<Vec<Vec<u8>>, CommError> {
        let mut received = vec![Vec::new(); self.size];
        received[self.rank] = own;
        for round in 1..self.size {
            let src = (self.rank + self.size - round) % self.size;
            received[src] = self.recv_from(call, op, src)?;
        }
        Ok(received)
    }

    fn exchange(&self, call: &Call, op: Op, send: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, CommError> {
        let own = self.post_ring(call, op, send)?;
        self.recv_ring(call, op, own)
    }

    /// Reduce-scatter then all-gather, both as direct exchanges: rank `p` owns chunk `p`, sums
    /// the ranks' contributions to it in rank order 0, 1, ..., P-1 and sends the sum to all.
    /// Each rank moves `2 (P - 1)` chunks, as a ring all-reduce does, and the result is the
    /// serial rank-order sum on every rank, bit for bit.
    fn all_reduce_sum<E: Element>(&self, phase: &str, data: &mut [E]) -> Result<(), CommError> {
        let call = self.open(phase, CollectiveKind::AllReduce, std::mem::size_of_val(data), true)?;
        if self.size == 1 {
            return Ok(());
        }
        let chunks = chunk_ranges(data.len(), self.size);
        let mine = chunks[self.rank].clone();
        let send = chunks
            .iter()
            .enumerate()
            .map(|(p, range)| if p == self.rank { Vec::new() } else { wire::encode(&data[range.clone()]) })
            .collect();
        let parts = self.exchange(&call, Op::ReduceScatter, send)?;

        let mut sum = vec![E::default(); mine.len()];
        let mut incoming = vec![E::default(); mine.len()];
        for (src, bytes) in parts.iter().enumerate() {
            let contribution: &[E] = if src == self.rank {
                &data[mine.clone()]
            } else {
                wire::decode_into(bytes, &mut incoming).map_err(|e| length_mismatch(phase, src, e))?;
                &incoming
            };
            if src == 0 {
                sum.copy_from_slice(contribution);
            } else {
                sum.iter_mut().zip(contribution).for_each(|(acc, &x)| *acc = *acc + x);
            }
        }
        data[mine].copy_from_slice(&sum);

        let reduced = wire::encode(&sum);
        let send = (0..self.size).map(|p| if p == self.rank { Vec::new() } else { reduced.clone() }).collect();
        let gathered = self.exchange(&call, Op::AllGather, send)?;
        for (src, bytes) in gathered.iter().enumerate().filter(|&(src, _)| src != self.rank) {
            wire::decode_into(bytes, &mut data[chunks[src].clone()]).map_err(|e| length_mismatch(phase, src, e))?;
        }
        Ok(())
    }

    fn gather_impl(
        &self,
        phase: &str,
        root: usize,
        data: Vec<u8>,
        accounted: bool,
    ) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        self.check_rank(phase, "root", root)?;
        let call = self.open(phase, CollectiveKind::Gather, data.len(), accounted)?;
        if self.rank != root {
            self.post(&call, Op::Gather, root, data)?;
            return Ok(None);
        }
        let mut all = vec![Vec::new(); self.size];
        all[root] = data;
        for round in 1..self.size {
            let src = (root + round) % self.size;
            all[src] = self.recv_from(&call, Op::Gather, src)?;
        }
        Ok(Some(all))
    }
}

fn length_mismatch(phase: &str, src: usize, err: wire::WireError) -> CommError {
    CommError::malformed(phase, src, format!("{err}: the ranks reduce buffers of different lengths"))
}

/// The messages rank `rank` of `size` sends in the sum all-reduce of `len` f32 values, in
/// order, as `(destination, bytes)`: its reduce-scatter (chunk `p` to rank `p`) then its
/// all-gather (its own chunk to every other rank), both around the ring from `rank + 1`.
pub(crate) fn all_reduce_sends(rank: usize, size: usize, len: usize) -> Vec<(usize, usize)> {
    const F32: usize = std::mem::size_of::<f32>();
    let chunks = chunk_ranges(len, size);
    let ring = || (1..size).map(move |round| (rank + round) % size);
    let scatter = ring().map(|p| (p, chunks[p].len() * F32));
    let gather = ring().map(|p| (p, chunks[rank].len() * F32));
    scatter.chain(gather).collect()
}

/// Splits `0..len` into `parts` contiguous ranges whose lengths differ by at most one.
pub(crate) fn chunk_ranges(len: usize, parts: usize) -> Vec<Range<usize>> {
    let (base, extra) = (len / parts, len % parts);
    let mut start = 0;
    (0..parts)
        .map(|p| {
            let end = start + base + usize::from(p < extra);
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

impl<T: Transport> Communicator for Endpoint<T> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn start_all_to_all_v(&self, phase: &str, send: Vec<Vec<u8>>) -> Result<PendingAllToAll<'_>, CommError> {
        self.check_per_rank(phase, send.len())?;
        let payload = send.iter().enumerate().filter(|&(p, _)| p != self.rank).map(|(_, b)| b.len()).sum();
        let call = self.open(phase, CollectiveKind::AllToAll, payload, true)?;
        let own = self.post_ring(&call, Op::AllToAll, send)?;
        Ok(PendingAllToAll::new(move || self.recv_ring(&call, Op::AllToAll, own)))
    }

    fn all_reduce_sum_f32(&self, phase: &str, data: &mut [f32]) -> Result<(), CommError> {
        self.all_reduce_sum(phase, data)
    }

    fn all_reduce_sum_f64(&self, phase: &str, data: &mut [f64]) -> Result<(), CommError> {
        self.all_reduce_sum(phase, data)
    }

    fn device_ledger(&self, _phase: &str) -> Result<&dyn DeviceLedger, CommError> {
        Ok(self)
    }

    fn broadcast(&self, phase: &str, root: usize, data: &mut Vec<u8>) -> Result<(), CommError> {
        self.check_rank(phase, "root", root)?;
        let payload = if self.rank == root { data.len() } else { 0 };
        let call = self.open(phase, CollectiveKind::Broadcast, payload, true)?;
        if self.rank == root {
            for round in 1..self.size {
                self.post(&call, Op::Broadcast, (root + round) % self.size, data.clone())?;
            }
        } else {
            *data = self.recv_from(&call, Op::Broadcast, root)?;
        }
        Ok(())
    }

    fn gather(&self, phase: &str, root: usize, data: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>, CommError> {
        self.gather_impl(phase, root, data, true)
    }

    fn scatter(&self, phase: &str, root: usize, data: Option<Vec<Vec<u8>>>) -> Result<Vec<u8>, CommError> {
        match data {
            Some(mut parts) if self.rank == root => {
                self.check_per_rank(phase, parts.len())?;
                self.scatter_with(phase, root, Some(&mut |p| Ok(std::mem::take(&mut parts[p]))))
            }
            _ => self.scatter_with(phase, root, None),
        }
    }

    fn scatter_with(
        &self,
        phase: &str,
        root: usize,
        next: Option<&mut dyn FnMut(usize) -> Result<Vec<u8>, CommError>>,
    ) -> Result<Vec<u8>, CommError> {
        self.check_rank(phase, "root", root)?;
        if self.rank != root {
            let call = self.open(phase, CollectiveKind::Scatter, 0, true)?;
            return self.recv_from(&call, Op::Scatter, root);
        }
        let Some(next) = next else {
            return Err(CommError::invalid(phase, format!("the root (rank {root}) must pass one buffer per rank")));
        };
        // The payload grows as the buffers are made; it ends as the bytes handed to the others.
        let call = self.open(phase, CollectiveKind::Scatter, 0, true)?;
        for round in 1..self.size {
            let dst = (root + round) % self.size;
            let bytes = next(dst)?;
            if let Some(id) = call.record {
                self.state.borrow_mut().ledger.add_payload(id, bytes.len() as u64);
            }
            self.post(&call, Op::Scatter, dst, bytes)?;
        }
        next(root)
    }

    fn barrier(&self, phase: &str) -> Result<(), CommError> {
        let call = self.open(phase, CollectiveKind::Barrier, 0, true)?;
        self.exchange(&call, Op::Barrier, vec![Vec::new(); self.size]).map(drop)
    }

    fn send(&self, phase: &str, dst: usize, data: Vec<u8>) -> Result<(), CommError> {
        self.check_peer(phase, dst)?;
        let call = {
            let mut st = self.state.borrow_mut();
            let seq = st.p2p_sent[dst];
            st.p2p_sent[dst] += 1;
            let record = st.ledger.open(None, CollectiveKind::PointToPoint, phase, data.len() as u64);
            Call { phase: phase.to_owned(), seq, record: Some(record) }
        };
        self.post(&call, Op::PointToPoint, dst, data)
    }

    fn recv(&self, phase: &str, src: usize) -> Result<Vec<u8>, CommError> {
        self.check_peer(phase, src)?;
        let seq = {
            let mut st = self.state.borrow_mut();
            st.p2p_received[src] += 1;
            st.p2p_received[src] - 1
        };
        let call = Call { phase: phase.to_owned(), seq, record: None };
        self.recv_from(&call, Op::PointToPoint, src)
    }

    fn ledger(&self) -> LedgerSnapshot {
        self.state.borrow().ledger.snapshot()
    }

    fn ledger_mark(&self) -> LedgerMark {
        self.state.borrow().ledger.mark()
    }

    fn ledger_since(&self, mark: LedgerMark) -> LedgerSnapshot {
        self.state.borrow().ledger.snapshot_since(mark)
    }

    fn gather_ledger(&self, root: usize, snapshot: &LedgerSnapshot) -> Result<Option<LedgerSnapshot>, CommError> {
        const PHASE: &str = "ledger";
        let bytes = serde_json::to_vec(snapshot)
            .map_err(|e| CommError::invalid(PHASE, format!("cannot encode the ledger snapshot: {e}")))?;
        let Some(all) = self.gather_impl(PHASE, root, bytes, false)? else {
            return Ok(None);
        };
        let mut merged = LedgerSnapshot::default();
        for (src, bytes) in all.iter().enumerate() {
            let part: LedgerSnapshot = serde_json::from_slice(bytes)
                .map_err(|e| CommError::malformed(PHASE, src, format!("not a ledger snapshot: {e}")))?;
            merged.merge(&part)?;
        }
        Ok(Some(merged))
    }
}

impl<T: Transport> DeviceLedger for Endpoint<T> {
    fn record_all_reduce_f32(&self, phase: &str, len: usize) -> Result<(), CommError> {
        let call = self.open(phase, CollectiveKind::AllReduce, len * std::mem::size_of::<f32>(), true)?;
        let Some(id) = call.record else { return Ok(()) };
        let mut st = self.state.borrow_mut();
        for (dst, bytes) in all_reduce_sends(self.rank, self.size, len) {
            if let Some(link) = self.topology.link_class(self.rank, dst) {
                st.ledger.record_send(id, dst, link, bytes as u64);
            }
        }
        Ok(())
    }

    fn record_all_to_all_v(&self, phase: &str, sent: &[usize]) -> Result<(), CommError> {
        self.check_per_rank(phase, sent.len())?;
        let payload = sent.iter().enumerate().filter(|&(p, _)| p != self.rank).map(|(_, &b)| b).sum();
        let call = self.open(phase, CollectiveKind::AllToAll, payload, true)?;
        let Some(id) = call.record else { return Ok(()) };
        let mut st = self.state.borrow_mut();
        // `post_ring`'s order: rank+1, rank+2, ...
        for round in 1..self.size {
            let dst = (self.rank + round) % self.size;
            if let Some(link) = self.topology.link_class(self.rank, dst) {
                st.ledger.record_send(id, dst, link, sent[dst] as u64);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_range_evenly() {
        assert_eq!(chunk_ranges(10, 4), vec![0..3, 3..6, 6..8, 8..10]);
        assert_eq!(chunk_ranges(2, 4), vec![0..1, 1..2, 2..2, 2..2]);
        assert_eq!(chunk_ranges(0, 3), vec![0..0, 0..0, 0..0]);
    }

    /// A recorded all-reduce (a device collective's) leaves the ledger a real one of the same
    /// length leaves: the same traffic per link and the same call records, message for message,
    /// fewer values than ranks and one rank included; the calls after it keep their sequence.
    #[test]
    fn a_recorded_all_reduce_is_accounted_as_a_real_one() {
        use crate::{LinkModel, LocalCluster, Topology};
        for (ranks, hosts) in [(1, 1), (2, 2), (4, 2), (3, 1)] {
            let topology = Topology::new(ranks, hosts, LinkModel::default()).unwrap();
            for len in [0, 1, 3, 10, 17] {
                let ledgers = LocalCluster::run(&topology, |comm| {
                    let mut data = vec![1.0f32; len];
                    let mark = comm.ledger_mark();
                    comm.all_reduce_sum_f32("grads", &mut data)?;
                    comm.barrier("between")?;
                    let real = comm.ledger_since(mark);
                    let mark = comm.ledger_mark();
                    comm.record_all_reduce_f32("grads", len)?;
                    comm.barrier("between")?;
                    Ok::<_, CommError>((real, comm.ledger_since(mark)))
                })
                .unwrap();
                for (rank, (real, recorded)) in ledgers.iter().enumerate() {
                    let name = format!("{ranks} ranks, {len} values, rank {rank}");
                    assert_eq!(real.traffic(), recorded.traffic(), "{name}");
                    let calls = |l: &LedgerSnapshot| {
                        l.collectives()
                            .iter()
                            .map(|c| (c.kind, c.phase.clone(), c.payload_bytes, c.sends.clone()))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(calls(real), calls(recorded), "{name}");
                }
            }
        }
    }

    /// A recorded all-to-all (NCCL's sends between GPUs) leaves the ledger the real one of
    /// the same message lengths leaves, empty messages and one rank included; a list of the
    /// wrong length is refused before anything is recorded.
    #[test]
    fn a_recorded_all_to_all_is_accounted_as_a_real_one() {
        use crate::{LinkModel, LocalCluster, Topology};
        let calls = |l: &LedgerSnapshot| {
            l.collectives()
                .iter()
                .map(|c| (c.kind, c.phase.clone(), c.payload_bytes, c.sends.clone()))
                .collect::<Vec<_>>()
        };
        for (ranks, hosts) in [(1, 1), (2, 2), (4, 2), (3, 1)] {
            let topology = Topology::new(ranks, hosts, LinkModel::default()).unwrap();
            let ledgers = LocalCluster::run(&topology, |comm| {
                // Rank r sends (r + 2p) % 5 bytes to rank p: some messages empty.
                let lens: Vec<usize> = (0..comm.size()).map(|p| (comm.rank() + 2 * p) % 5).collect();
                let mark = comm.ledger_mark();
                comm.all_to_all_v("fwd/0/halo", lens.iter().map(|&n| vec![7u8; n]).collect())?;
                comm.barrier("between")?;
                let real = comm.ledger_since(mark);
                let mark = comm.ledger_mark();
                comm.record_all_to_all_v("fwd/0/halo", &lens)?;
                let err = comm.record_all_to_all_v("fwd/0/halo", &lens[1..]).unwrap_err();
                assert!(err.to_string().contains("one buffer per rank"), "{err}");
                comm.barrier("between")?;
                let recorded = comm.ledger_since(mark);
                Ok::<_, CommError>((real, recorded))
            })
            .unwrap();
            for (rank, (real, recorded)) in ledgers.iter().enumerate() {
                let name = format!("{ranks} ranks, rank {rank}");
                assert_eq!(real.traffic(), recorded.traffic(), "{name}");
                assert_eq!(calls(real), calls(recorded), "{name}");
            }
        }
    }
}
