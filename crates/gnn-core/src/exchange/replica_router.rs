//! Moves vertex rows between a vertex's primary (edge-cut owner, vertex-cut master) and its
//! copies (halo vertices, mirrors) on other workers, through a codec, one `all_to_all_v` per
//! call. Both distributed exchanges are built from its two routes:
//!
//! - **scatter**: primaries -> copies, overwriting the copies (edge-cut `pull_halo`, the second
//!   half of a vertex-cut sync);
//! - **gather**: copies -> primaries, combined into the primary's row (edge-cut
//!   `push_halo_grad`, the first half of a vertex-cut sync).
//!
//! The partition book pairs the lists so that `send(q)` on part `p` and `recv(p)` on part `q`
//! name the same vertices in the same order; a message therefore carries rows only, no ids.

use std::ops::Range;
use std::sync::Arc;

use cache_quant::{CodecBank, CodecError, CodecFactory, IdentityCodec};
use comm_hierarchy::Communicator;
use graph_partition::book::LocalGraph;
use ndarray::Array2;

use super::landing::{Landing, gather_rows};
use super::{ExchangeError, Tag};

/// Why an exchange could not be set up for a worker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("partition part {part} of a {parts}-part book cannot run on rank {rank} of a {size}-rank communicator")]
pub struct SetupError {
    /// The part the local graph belongs to.
    pub part: usize,
    /// Parts in its book.
    pub parts: usize,
    /// The communicator's rank.
    pub rank: usize,
    /// The communicator's size.
    pub size: usize,
}

/// Which way rows travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Route {
    /// Copies -> primaries.
    Gather,
    /// Primaries -> copies.
    Scatter,
}

/// How received rows land in the local block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Apply {
    Overwrite,
    Add,
    Max,
}

/// The local ids a part exchanges with one peer ([`LocalGraph::send`] or [`LocalGraph::recv`]).
type RowList = fn(&LocalGraph, usize) -> &[u32];

/// One codec stream: a stateful codec sees exactly the messages of its stream, and the decoder
/// on the receiving side sees the same messages in the same order as the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StreamKey {
    tag: Tag,
    route: Route,
    peer: usize,
    encode: bool,
}

/// Told before and after every communicator call an exchange makes, so that a trainer can tell
/// local compute from waiting on other workers (and, in benchmarks, hand the machine to another
/// in-process worker while this one waits).
pub trait CommWatch {
    /// A communicator call is about to start.
    fn call_started(&self);
    /// The call returned (successfully or not).
    fn call_finished(&self);
}

/// Settings shared by the distributed exchanges.
#[derive(Clone, Default)]
pub struct ExchangeOptions<'a> {
    /// Makes one codec per message stream; `None` sends rows losslessly ([`IdentityCodec`]).
    pub codecs: Option<CodecFactory>,
    /// Brackets every communicator call.
    pub watch: Option<&'a dyn CommWatch>,
}

/// Routes rows of one worker's local blocks to and from its peers.
pub(crate) struct ReplicaRouter<'a> {
    part: &'a LocalGraph,
    comm: &'a dyn Communicator,
    watch: Option<&'a dyn CommWatch>,
    codecs: CodecBank<StreamKey>,
    /// Rows gathered for one outgoing message.
    packed: Vec<f32>,
    /// Rows decoded from one incoming message.
    unpacked: Vec<f32>,
    /// Received message buffers, reused for the next outgoing messages: a call moves the same
    /// volume every epoch, and fresh buffers of that size would be zeroed by the kernel each time.
    spare: Vec<Vec<u8>>,
    /// Per [`Route`], where incoming rows land (built on first use).
    landings: [Option<Landing>; 2],
}

impl<'a> ReplicaRouter<'a> {
    /// Checks that `part` belongs to this rank of `comm`.
    pub(crate) fn new(
        part: &'a LocalGraph,
        comm: &'a dyn Communicator,
        options: ExchangeOptions<'a>,
    ) -> Result<Self, SetupError> {
        if part.num_parts() != comm.size() || part.part() != comm.rank() {
            return Err(SetupError {
                part: part.part(),
                parts: part.num_parts(),
                rank: comm.rank(),
                size: comm.size(),
            });
        }
        let factory = options.codecs.unwrap_or_else(|| Arc::new(|| Box::new(IdentityCodec)));
        Ok(Self {
            part,
            comm,
            watch: options.watch,
            codecs: CodecBank::new(factory),
            packed: Vec::new(),
            unpacked: Vec::new(),
            spare: Vec::new(),
            landings: [None, None],
        })
    }

    /// The local graph rows are routed for.
    pub(crate) fn part(&self) -> &'a LocalGraph {
        self.part
    }

    /// Sends the rows of `x` along `route` and lands what arrives with `apply`, peers in
    /// ascending rank order (so sums are deterministic). Rows this worker sends are not changed.
    pub(crate) fn route(
        &mut self,
        tag: Tag,
        route: Route,
        x: &mut Array2<f32>,
        apply: Apply,
    ) -> Result<(), ExchangeError> {
        let num_local = self.part.num_local();
        if x.nrows() != num_local {
            return Err(ExchangeError::Shape {
                tag,
                expected_rows: num_local,
                expected_cols: x.ncols(),
                rows: x.nrows(),
                cols: x.ncols(),
            });
        }
        let (me, width) = (self.comm.rank(), x.ncols());
        let part = self.part;
        let (outgoing, incoming): (RowList, RowList) = match route {
            Route::Gather => (LocalGraph::recv, LocalGraph::send),
            Route::Scatter => (LocalGraph::send, LocalGraph::recv),
        };

        let data = row_major(x);
        // A peer's copies are consecutive local ids: those blocks are read and written in
        // place; other row lists go through a buffer, gathered and landed in parallel.
        let block = |rows: &[u32]| consecutive(rows).map(|r| r.start * width..r.end * width);

        let mut messages = Vec::with_capacity(self.comm.size());
        for peer in 0..self.comm.size() {
            let mut bytes = Vec::new();
            if peer != me {
                bytes = self.spare.pop().unwrap_or_default();
                bytes.clear();
                let rows = outgoing(part, peer);
                let block_rows = match block(rows) {
                    Some(range) => &data[range],
                    None => gather_rows(data, rows, width, &mut self.packed),
                };
                let codec = self.codecs.get(StreamKey { tag, route, peer, encode: true });
                codec
                    .encode_rows(block_rows, width, &mut bytes)
                    .map_err(|e| protocol(tag, "encoding rows for", peer, &e))?;
            }
            messages.push(bytes);
        }

        self.watch.inspect(|w| w.call_started());
        let received = self.comm.all_to_all_v(&tag.phase(), messages);
        self.watch.inspect(|w| w.call_finished());
        let received = received.map_err(|source| ExchangeError::Comm { tag, source: Box::new(source) })?;

        // Decode every buffered message first (into consecutive sections of `unpacked`), then
        // land them all in one parallel pass.
        let mut sections = vec![None; received.len()];
        let mut total = 0;
        for (peer, bytes) in received.iter().enumerate().filter(|(peer, _)| *peer != me) {
            let rows = incoming(part, peer);
            let codec = self.codecs.get(StreamKey { tag, route, peer, encode: false });
            let decode_error = |e: CodecError| protocol(tag, "decoding rows from", peer, &e);
            if let (Apply::Overwrite, Some(range)) = (apply, block(rows)) {
                codec.decode_rows(bytes, width, &mut data[range]).map_err(decode_error)?;
                continue;
            }
            let section = total..total + rows.len() * width;
            total = section.end;
            // Grown, never shrunk: decoding overwrites it, so it needs no clearing.
            if self.unpacked.len() < total {
                self.unpacked.resize(total, 0.0);
            }
            codec.decode_rows(bytes, width, &mut self.unpacked[section.clone()]).map_err(decode_error)?;
            sections[peer] = Some(section);
        }
        if total > 0 {
            let landing = self.landings[route as usize].get_or_insert_with(|| {
                let lists: Vec<&[u32]> = (0..part.num_parts()).map(|peer| incoming(part, peer)).collect();
                Landing::new(num_local, &lists)
            });
            let unpacked = &self.unpacked;
            let buffered: Vec<Option<&[f32]>> = sections.into_iter().map(|s| s.map(|r| &unpacked[r])).collect();
            landing.land(data, width, &buffered, apply);
        }
        self.spare.extend(received.into_iter().filter(|b| b.capacity() > 0));
        Ok(())
    }
}

/// The local ids `rows` as one range, when they are consecutive and ascending.
fn consecutive(rows: &[u32]) -> Option<Range<usize>> {
    let start = *rows.first()? as usize;
    rows.iter().enumerate().all(|(i, &r)| r as usize == start + i).then(|| start..start + rows.len())
}

/// The elements of `x` in row-major order (copied into that layout first if needed).
fn row_major(x: &mut Array2<f32>) -> &mut [f32] {
    if !x.is_standard_layout() {
        *x = x.as_standard_layout().into_owned();
    }
    x.as_slice_mut().expect("a standard-layout array is one row-major slice")
}

fn protocol(tag: Tag, what: &str, peer: usize, err: &dyn std::error::Error) -> ExchangeError {
    ExchangeError::Protocol { tag, message: format!("{what} rank {peer}: {err}") }
}

/// Runs a job of one worker per part of a book on a 2-host local cluster.
#[cfg(test)]
pub(crate) mod testkit {
    use comm_hierarchy::{Communicator, LinkModel, LocalCluster, LocalCommunicator, Topology};
    use graph_partition::book::{LocalGraph, PartitionBook};
    use graph_partition::partition::Partition;
    use graph_partition::{Csr, EdgeListOptions};

    /// A directed 12-vertex graph with hubs, chains and an isolated vertex.
    pub(crate) fn graph() -> Csr {
        let edges: Vec<(u32, u32)> = vec![
            (0, 1),
            (1, 2),
            (2, 3),
            (3, 0),
            (4, 0),
            (5, 0),
            (6, 0),
            (0, 7),
            (7, 8),
            (8, 9),
            (9, 4),
            (2, 10),
            (10, 5),
            (6, 9),
            (3, 8),
            (1, 6),
        ];
        Csr::from_edges(12, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap()
    }

    /// The book of `partition` over [`graph`].
    pub(crate) fn book(partition: &Partition) -> PartitionBook {
        let book = PartitionBook::build(&graph(), partition).unwrap();
        book.validate().unwrap();
        book
    }

    /// Runs `work` on every part of `book`, 2 hosts; returns the results in rank order.
    pub(crate) fn run<T: Send>(
        book: &PartitionBook,
        work: impl Fn(&LocalGraph, &LocalCommunicator) -> Result<T, String> + Sync,
    ) -> Vec<T> {
        let topology = Topology::for_workers(book.parts().len(), 2, LinkModel::default()).unwrap();
        LocalCluster::run(&topology, |comm| work(&book.parts()[comm.rank()], comm)).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::consecutive;

    #[test]
    fn only_ascending_runs_are_blocks() {
        assert_eq!(consecutive(&[4, 5, 6]), Some(4..7));
        assert_eq!(consecutive(&[9]), Some(9..10));
        assert_eq!(consecutive(&[4, 6]), None);
        assert_eq!(consecutive(&[5, 4]), None);
        assert_eq!(consecutive(&[]), None);
    }
}
