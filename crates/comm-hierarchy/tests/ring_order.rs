//! The all-to-all schedule is AdaQP's ring: round i sends to rank+i and receives from rank-i.
//! Checked with a recording transport, which also shows that a third-party `Transport` plugs
//! into `Endpoint`.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use comm_hierarchy::transport::{Op, Tag};
use comm_hierarchy::{CommError, Communicator, Endpoint, LinkModel, Topology, Transport};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Post(usize),
    Recv(usize),
}

#[derive(Default)]
struct Wire {
    messages: Mutex<HashMap<(usize, usize, Tag), Vec<u8>>>,
    arrived: Condvar,
}

struct Recording {
    rank: usize,
    size: usize,
    wire: Arc<Wire>,
    events: Vec<(Op, Event)>,
}

impl Transport for Recording {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn post(&mut self, dst: usize, tag: Tag, bytes: Vec<u8>, _phase: &str) -> Result<(), CommError> {
        self.events.push((tag.op, Event::Post(dst)));
        self.wire.messages.lock().unwrap().insert((self.rank, dst, tag), bytes);
        self.wire.arrived.notify_all();
        Ok(())
    }

    fn recv(&mut self, src: usize, tag: Tag, _phase: &str) -> Result<Vec<u8>, CommError> {
        self.events.push((tag.op, Event::Recv(src)));
        let mut messages = self.wire.messages.lock().unwrap();
        loop {
            if let Some(bytes) = messages.remove(&(src, self.rank, tag)) {
                return Ok(bytes);
            }
            messages = self.wire.arrived.wait(messages).unwrap();
        }
    }
}

#[test]
fn all_to_all_posts_and_receives_in_ring_order() {
    let size = 5;
    let topology = Topology::for_workers(size, 1, LinkModel::default()).unwrap();
    let wire = Arc::new(Wire::default());
    let events: Vec<Vec<(Op, Event)>> = thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let transport = Recording { rank, size, wire: Arc::clone(&wire), events: Vec::new() };
                let topology = topology.clone();
                s.spawn(move || run_one(topology, transport))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (rank, log) in events.iter().enumerate() {
        let posts: Vec<Event> = (1..size).map(|i| Event::Post((rank + i) % size)).collect();
        let recvs: Vec<Event> = (1..size).map(|i| Event::Recv((rank + size - i) % size)).collect();
        let expected: Vec<(Op, Event)> = posts.into_iter().chain(recvs).map(|e| (Op::AllToAll, e)).collect();
        assert_eq!(log, &expected, "rank {rank}");
    }
    assert!(wire.messages.lock().unwrap().is_empty(), "every message was received");
}

/// One all-to-all on one rank; returns the transport's events.
fn run_one(topology: Topology, transport: Recording) -> Vec<(Op, Event)> {
    let (rank, size) = (transport.rank, transport.size);
    let comm = Endpoint::new(topology, transport).unwrap();
    let send = (0..size).map(|d| vec![d as u8; rank + 1]).collect();
    let recv = comm.all_to_all_v("fwd/1", send).unwrap();
    for (src, bytes) in recv.iter().enumerate() {
        assert_eq!(bytes, &vec![rank as u8; src + 1], "rank {rank} got the wrong message from {src}");
    }
    let ledger_order: Vec<usize> = comm.ledger().collectives()[0].sends.iter().map(|s| s.dst).collect();
    assert_eq!(ledger_order, (1..size).map(|i| (rank + i) % size).collect::<Vec<_>>());
    comm.into_transport().events
}
