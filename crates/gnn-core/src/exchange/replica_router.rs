//! Moves vertex rows between a vertex's primary (edge-cut owner, vertex-cut master) and its
//! copies (halo vertices, mirrors) on other workers, through codecs, one `all_to_all_v` per
//! call. Both distributed exchanges are built from its two routes:
//!
//! - [`Route::ToCopies`]: primaries -> copies, overwriting the copies (edge-cut `pull_halo`,
//!   the second half of a vertex-cut sync);
//! - [`Route::ToPrimary`]: copies -> primaries, combined into the primary's row (edge-cut
//!   `push_halo_grad`, the first half of a vertex-cut sync).
//!
//! The partition book pairs the lists so that `send(q)` on part `p` and `recv(p)` on part `q`
//! name the same vertices in the same order; a message therefore carries rows only, no ids.
//! A call is either blocking ([`ReplicaRouter::route`]) or split into a start, which encodes
//! and posts the messages, and a finish, which waits, decodes and lands them; both run the same
//! code in the same order, so they give the same bits.
//!
//! Evaluation passes go through the identity codec, so codec state is training-only unless
//! `lossy_eval`. Message buffers are reused. Under a [`MessageCap`] a blocking call of exact rows
//! runs in rounds of bounded messages, round `k` of `r` carrying the rows whose global id is `k`
//! mod `r`, so every combined row still takes its sources in peer order and the bits equal one
//! round's. A `CommWatch` is told of every call, split starts and waits included.
//!
//! A training call whose codecs are [`cache_quant::KernelCodec`]s can run on a
//! [`super::row_store::RowStore`] instead of a host block (`on_store`: `route_on_store`,
//! `start_on_store`, `finish_on_store`), its messages through the host or store to store.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cache_quant::{
    Codec, CodecBank, CodecError, CodecFactory, CodecStats, Direction, Encoding, IdentityCodec, Knob, Mode, Pass,
    Route, Side, StateError, StatsKey, StatsTable, StreamId,
};
use comm_hierarchy::{Communicator, LinkClass, PendingAllToAll};
use graph_partition::book::LocalGraph;
use ndarray::Array2;

use super::landing::{Apply, Landing, gather_rows};
use super::{ExchangeError, Put, Tag};

mod on_store;

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

/// The local ids a part exchanges with one peer ([`LocalGraph::send`] or [`LocalGraph::recv`]).
type RowList = fn(&LocalGraph, usize) -> &[u32];

/// The outgoing and incoming row lists of a route.
fn lists(route: Route) -> (RowList, RowList) {
    match route {
        Route::ToPrimary => (LocalGraph::recv, LocalGraph::send),
        Route::ToCopies => (LocalGraph::send, LocalGraph::recv),
    }
}

/// The global ids of the rows stream `id` of `part` carries: the outgoing list of its route
/// on the encode side, the incoming one on the decode side (as on first use).
pub(crate) fn stream_rows(part: &LocalGraph, id: StreamId) -> Result<Arc<[u32]>, StateError> {
    if id.peer >= part.num_parts() || id.peer == part.part() {
        let detail = format!("a stream with peer {} in part {} of {} parts", id.peer, part.part(), part.num_parts());
        return Err(StateError(format!("the saved exchange state names {detail}")));
    }
    let (outgoing, incoming) = lists(id.route);
    let list = match id.side {
        Side::Encode => outgoing(part, id.peer),
        Side::Decode => incoming(part, id.peer),
    };
    Ok(globals(part, list))
}

/// The rows a part's routes touch (local ids, ascending, each once): the primaries some peer
/// holds copies of, the copies, and both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowSets {
    pub(crate) send: Vec<u32>,
    pub(crate) recv: Vec<u32>,
    pub(crate) both: Vec<u32>,
}

impl RowSets {
    fn of(part: &LocalGraph) -> Self {
        let union = |list: RowList| {
            let mut rows: Vec<u32> = (0..part.num_parts()).flat_map(|q| list(part, q).iter().copied()).collect();
            rows.sort_unstable();
            rows.dedup();
            rows
        };
        let (send, recv) = (union(LocalGraph::send), union(LocalGraph::recv));
        let mut both: Vec<u32> = send.iter().chain(&recv).copied().collect();
        both.sort_unstable();
        both.dedup();
        Self { send, recv, both }
    }
}

/// What a communicator call is, for a [`CommWatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A call that returns when it is done.
    Blocking,
    /// The start of a split call: it posts its messages and returns.
    Start,
    /// The wait for the split call started last; the compute since that start overlapped it.
    Wait,
}

/// Told before and after every communicator call an exchange makes, so that a trainer can tell
/// local compute from waiting on other workers, credit the compute that overlapped a split call,
/// and (in benchmarks) hand the machine to another in-process worker while this one waits.
pub trait CommWatch {
    /// A communicator call is about to start.
    fn call_started(&self, kind: CallKind);
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
    /// Split the halo calls so that layers compute while they are in flight.
    pub overlap: bool,
    /// Evaluation passes go through the codecs too (advancing their state) instead of exactly.
    pub lossy_eval: bool,
    /// Vertex-cut: sum replicas through CDFGNN's adaptive cache of deltas; the codecs encode
    /// the deltas. Edge-cut exchanges ignore it.
    pub replica_cache: Option<ReplicaCacheOptions>,
    /// Splits a blocking call of exact rows into rounds of bounded messages.
    pub message_cap: Option<MessageCap>,
}

/// CDFGNN's adaptive replica cache ([`ExchangeOptions::replica_cache`]).
#[derive(Clone)]
pub struct ReplicaCacheOptions {
    /// The relative threshold: a mirror sends when its partial moved by more than `eps` times
    /// the cached one, in the max norm.
    pub threshold: Knob<f32>,
    /// The forward syncs of the layers below this one go around the cache: every replicated
    /// row every pass, through the codecs, as without the cache. The first layer's partials
    /// read the input features, which input dropout masks anew every epoch (a mask per source
    /// row, which does not commute with the sum over sources), so caching them skips nothing
    /// and only adds error.
    pub uncached_forward_layers: usize,
    /// Once set, every sum goes around the cache, as the forward syncs below
    /// `uncached_forward_layers` do. Set between steps, identically on every worker, and never
    /// cleared: the cache's state is stale from then on and is not read again.
    pub bypass: Knob<bool>,
}

impl ReplicaCacheOptions {
    /// Every sync through the cache, at threshold `threshold`.
    pub fn every_layer(threshold: Knob<f32>) -> Self {
        Self { threshold, uncached_forward_layers: 0, bypass: Knob::default() }
    }

    /// Whether the sum of `tag` goes through the cache.
    pub fn caches(&self, tag: Tag) -> bool {
        !self.bypass.get() && (tag.dir != Direction::Forward || tag.layer >= self.uncached_forward_layers)
    }
}

/// A bound on the messages of a blocking call whose rows travel exactly (the identity codec,
/// or an exact evaluation pass): such a call runs in as many rounds as its largest message
/// needs, so a worker holds one round's messages instead of the whole call's. Round `k` of
/// `r` carries the listed rows whose global id is `k` modulo `r`: every row a call combines
/// from several peers arrives in one round, from peers in ascending order, so the result has
/// the same bits as one round's. Coded calls keep one message per peer: a codec's state
/// follows the stream of whole messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageCap {
    /// The most bytes a message should carry.
    pub bytes: usize,
    /// The most rows any worker exchanges with any one peer, the same on every worker (agreed
    /// on by a collective): every worker derives the same number of rounds from it.
    pub pair_rows: usize,
}

impl MessageCap {
    /// The rounds of a call of `width`-wide rows of 4-byte values.
    pub fn rounds(&self, width: usize) -> usize {
        (self.pair_rows * width * 4).div_ceil(self.bytes.max(1)).max(1)
    }
}

/// Which rows of each list a round carries: all of them in a call of one round, else those
/// whose global id is `index` modulo `count` ([`MessageCap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Round {
    index: usize,
    count: usize,
}

impl Round {
    const WHOLE: Round = Round { index: 0, count: 1 };
}

/// A split call between its start and its finish.
struct InFlight<'a> {
    tag: Tag,
    route: Route,
    pending: Pending<'a>,
}

/// How a split call's messages travel.
enum Pending<'a> {
    /// Through the communicator.
    Host(PendingAllToAll<'a>),
    /// Store to store, already posted.
    Kept(Messages),
}

/// A call's messages between their encoding and their landing.
enum Messages {
    /// On the host, one per peer (empty for this rank).
    Host(Vec<Vec<u8>>),
    /// In the stores: the bytes sent to each peer, and the rows and encoding of each peer's
    /// message here (`None` for this rank).
    Kept { sent: Vec<usize>, receiving: Vec<Option<(usize, Encoding)>> },
}

/// Routes rows of one worker's local blocks to and from its peers.
pub(crate) struct ReplicaRouter<'a> {
    part: &'a LocalGraph,
    rows: RowSets,
    comm: &'a dyn Communicator,
    watch: Option<&'a dyn CommWatch>,
    codecs: CodecBank,
    lossy_eval: bool,
    /// The pass of the calls.
    pass: Pass,
    stats: StatsTable,
    in_flight: Option<InFlight<'a>>,
    /// Rows gathered for one outgoing message.
    packed: Vec<f32>,
    /// Rows decoded from one incoming message (the largest a peer sends this worker).
    unpacked: Vec<f32>,
    /// Received message buffers, reused for the next outgoing messages: a call moves the same
    /// volume every epoch, and fresh buffers of that size would be zeroed by the kernel each time.
    spare: Vec<Vec<u8>>,
    /// Per [`Route`], where incoming rows land (built on first use).
    landings: [Option<Landing>; 2],
    /// The codecs are identities: training calls may run in rounds too.
    identity: bool,
    message_cap: Option<MessageCap>,
    /// The rows of one list a round carries.
    picked: Vec<u32>,
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
        Ok(Self {
            part,
            rows: RowSets::of(part),
            comm,
            watch: options.watch,
            identity: options.codecs.is_none(),
            message_cap: options.message_cap,
            picked: Vec::new(),
            codecs: options.codecs.map_or_else(CodecBank::identity, CodecBank::new),
            lossy_eval: options.lossy_eval,
            pass: Pass::train(0, 0),
            stats: StatsTable::default(),
            in_flight: None,
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

    /// The rows the routes touch.
    pub(crate) fn rows(&self) -> &RowSets {
        &self.rows
    }

    /// Sets the pass of the following calls.
    pub(crate) fn begin(&mut self, pass: Pass) {
        self.pass = pass;
    }

    /// The codec stack's name.
    pub(crate) fn codec_name(&self) -> String {
        self.codecs.codec_name()
    }

    /// Appends the state of every stream's codec.
    pub(crate) fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        self.codecs.save_state(out)
    }

    /// Restores what [`ReplicaRouter::save_state`] saved.
    pub(crate) fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let part = self.part;
        self.codecs.restore_state(bytes, |id| stream_rows(part, id))
    }

    /// Drains the codec stats of the training calls so far.
    pub(crate) fn take_stats(&mut self) -> StatsTable {
        std::mem::take(&mut self.stats)
    }

    /// Sends the rows of `x` along `route` and lands what arrives with `apply`, peers in
    /// ascending rank order (so sums are deterministic), in rounds under a [`MessageCap`].
    /// Rows this worker sends are not changed.
    pub(crate) fn route(
        &mut self,
        tag: Tag,
        route: Route,
        x: &mut Array2<f32>,
        apply: Apply,
    ) -> Result<(), ExchangeError> {
        let count = self.rounds(x.ncols());
        for index in 0..count {
            let round = Round { index, count };
            let messages = self.encode(tag, route, x, round)?;
            let received = self.post(tag, messages)?;
            self.land(tag, route, x, apply, received, round)?;
        }
        Ok(())
    }

    /// The rounds of a blocking call of `width`-wide rows: several only for exact rows under a
    /// [`MessageCap`].
    fn rounds(&self, width: usize) -> usize {
        match self.message_cap {
            Some(cap) if self.identity || self.exact() => cap.rounds(width),
            _ => 1,
        }
    }

    /// One blocking `all_to_all_v` of `messages` (one per peer, empty for this rank) under the
    /// ledger phase of `tag`, told to the watch.
    pub(crate) fn post(&self, tag: Tag, messages: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ExchangeError> {
        self.watch.inspect(|w| w.call_started(CallKind::Blocking));
        let received = self.comm.all_to_all_v(&tag.phase(), messages);
        self.watch.inspect(|w| w.call_finished());
        received.map_err(|source| ExchangeError::Comm { tag, source: Box::new(source) })
    }

    /// The pass of the current calls.
    pub(crate) fn pass(&self) -> Pass {
        self.pass
    }

    /// Adds a training message's counts and its codec's stats to the table
    /// [`ReplicaRouter::take_stats`] drains: `rows` rows of `width` values sent to `peer` in
    /// `bytes` bytes (those of messages to another host counted apart too).
    pub(crate) fn record_sent(
        &mut self,
        key: StatsKey,
        peer: usize,
        rows: usize,
        width: usize,
        bytes: usize,
        mut stats: CodecStats,
    ) {
        let exact = (rows * width * 4) as u64;
        stats.rows += rows as u64;
        stats.bytes += bytes as u64;
        stats.exact_bytes += exact;
        if self.comm.topology().link_class(self.comm.rank(), peer) == Some(LinkClass::Inter) {
            stats.inter_bytes += bytes as u64;
            stats.inter_exact_bytes += exact;
        }
        self.stats.add(key, &stats);
    }

    /// Adds the seconds a training call spent in its codecs beyond its messages' encoding (their
    /// decoding, a cache's bookkeeping) to the table.
    pub(crate) fn record_spent(&mut self, key: StatsKey, spent: Duration) {
        add_spent(&mut self.stats, key, spent);
    }

    /// Encodes and posts the rows of `x` along `route`; [`ReplicaRouter::finish`] lands them.
    pub(crate) fn start(&mut self, tag: Tag, route: Route, x: &Array2<f32>) -> Result<(), ExchangeError> {
        self.check_idle(tag)?;
        let messages = self.encode(tag, route, x, Round::WHOLE)?;
        self.post_split(tag, route, messages)
    }

    /// Waits for the call [`ReplicaRouter::start`] posted for `tag` and lands its rows in `x`.
    pub(crate) fn finish(&mut self, tag: Tag, x: &mut Array2<f32>, apply: Apply) -> Result<(), ExchangeError> {
        let (route, Messages::Host(received)) = self.wait_split(tag)? else {
            let message = "finished on host rows, started on a store that sends its own messages".to_string();
            return Err(ExchangeError::Protocol { tag, message });
        };
        self.land(tag, route, x, apply, received, Round::WHOLE)
    }

    /// An error while a split call is in flight.
    fn check_idle(&self, tag: Tag) -> Result<(), ExchangeError> {
        match &self.in_flight {
            Some(open) => {
                let message = format!("started while {} is still in flight", open.tag);
                Err(ExchangeError::Protocol { tag, message })
            }
            None => Ok(()),
        }
    }

    /// Posts the messages of a split call's first half, told to the watch.
    fn post_split(&mut self, tag: Tag, route: Route, messages: Vec<Vec<u8>>) -> Result<(), ExchangeError> {
        self.watch.inspect(|w| w.call_started(CallKind::Start));
        let pending = self.comm.start_all_to_all_v(&tag.phase(), messages);
        self.watch.inspect(|w| w.call_finished());
        let pending = pending.map_err(|source| ExchangeError::Comm { tag, source: Box::new(source) })?;
        self.in_flight = Some(InFlight { tag, route, pending: Pending::Host(pending) });
        Ok(())
    }

    /// Waits for the split call posted for `tag`: its route and the messages that arrived (a
    /// call sent store to store has nothing to wait for on the host: its store orders the
    /// landing after the arrival).
    fn wait_split(&mut self, tag: Tag) -> Result<(Route, Messages), ExchangeError> {
        let Some(open) = self.in_flight.take_if(|open| open.tag == tag) else {
            return Err(ExchangeError::Protocol { tag, message: "finished without a matching start".to_string() });
        };
        self.watch.inspect(|w| w.call_started(CallKind::Wait));
        let arrived = match open.pending {
            Pending::Host(pending) => pending.wait().map(Messages::Host),
            Pending::Kept(kept) => Ok(kept),
        };
        self.watch.inspect(|w| w.call_finished());
        let arrived = arrived.map_err(|source| ExchangeError::Comm { tag, source: Box::new(source) })?;
        Ok((open.route, arrived))
    }

    /// An error unless a block of `rows` rows is this worker's.
    fn check_rows(&self, tag: Tag, rows: usize, cols: usize) -> Result<(), ExchangeError> {
        let expected_rows = self.part.num_local();
        if rows != expected_rows {
            return Err(ExchangeError::Shape { tag, expected_rows, expected_cols: cols, rows, cols });
        }
        Ok(())
    }

    /// Whether this call's rows skip the codecs: evaluation is exact unless asked otherwise.
    pub(crate) fn exact(&self) -> bool {
        self.pass.mode == Mode::Eval && !self.lossy_eval
    }

    /// The codec of one stream, or the identity for exact calls.
    fn codec<'s>(
        codecs: &'s mut CodecBank,
        exact: &'s mut IdentityCodec,
        use_exact: bool,
        part: &LocalGraph,
        id: StreamId,
        list: &[u32],
    ) -> &'s mut dyn Codec {
        if use_exact {
            return exact;
        }
        codecs.get(id, || globals(part, list))
    }

    /// One message per peer (empty for this rank), each the outgoing rows of `route` that
    /// `round` carries, encoded.
    fn encode(&mut self, tag: Tag, route: Route, x: &Array2<f32>, round: Round) -> Result<Vec<Vec<u8>>, ExchangeError> {
        self.check_rows(tag, x.nrows(), x.ncols())?;
        let (width, part, exact) = (x.ncols(), self.part, self.exact());
        let (outgoing, _) = lists(route);
        let standard = x.as_standard_layout();
        let data = standard.as_slice().expect("a standard-layout array is one row-major slice");
        let mut identity = IdentityCodec;
        self.messages(|router, peer, bytes| {
            let list = outgoing(part, peer);
            let rows = pick(part, list, round, &mut router.picked);
            let count = rows.len();
            // A peer's rows are often consecutive local ids: read that block in place.
            let block_rows = match consecutive(rows) {
                Some(range) => &data[range.start * width..range.end * width],
                None => gather_rows(data, rows, width, &mut router.packed),
            };
            let id = StreamId { tag, route, peer, side: Side::Encode };
            let codec = Self::codec(&mut router.codecs, &mut identity, exact, part, id, list);
            let start = Instant::now();
            codec
                .encode(router.pass, block_rows, width, bytes)
                .map_err(|e| protocol(tag, "encoding rows for", peer, &e))?;
            if !exact {
                let stats = CodecStats { codec_s: start.elapsed().as_secs_f64(), ..codec.take_stats() };
                router.record_sent(stats_key(tag, route), peer, count, width, bytes.len(), stats);
            }
            Ok(())
        })
    }

    /// One message per peer (empty for this rank), each written by `write` into a buffer
    /// reused from an earlier call.
    fn messages(
        &mut self,
        mut write: impl FnMut(&mut Self, usize, &mut Vec<u8>) -> Result<(), ExchangeError>,
    ) -> Result<Vec<Vec<u8>>, ExchangeError> {
        let (me, size) = (self.comm.rank(), self.comm.size());
        let mut messages = Vec::with_capacity(size);
        for peer in 0..size {
            let mut bytes = Vec::new();
            if peer != me {
                bytes = self.spare.pop().unwrap_or_default();
                bytes.clear();
                write(self, peer, &mut bytes)?;
            }
            messages.push(bytes);
        }
        Ok(messages)
    }

    /// Decodes the messages of one round of a call and lands their rows in `x` with `apply`.
    #[allow(clippy::too_many_arguments)] // the call, its block, its messages and its round.
    fn land(
        &mut self,
        tag: Tag,
        route: Route,
        x: &mut Array2<f32>,
        apply: Apply,
        received: Vec<Vec<u8>>,
        round: Round,
    ) -> Result<(), ExchangeError> {
        let (me, width, part, exact) = (self.comm.rank(), x.ncols(), self.part, self.exact());
        let (_, incoming) = lists(route);
        let data = row_major(x);
        let block = |rows: &[u32]| consecutive(rows).map(|r| r.start * width..r.end * width);
        let mut identity = IdentityCodec;
        // One message at a time, decoded and landed before the next, peers ascending: every row
        // still combines its sources in ascending peer order (the same bits as landing them all
        // at once), and the scratch holds one peer's rows, not the whole call's.
        for (peer, bytes) in received.iter().enumerate().filter(|(peer, _)| *peer != me) {
            let list = incoming(part, peer);
            let rows = pick(part, list, round, &mut self.picked);
            let id = StreamId { tag, route, peer, side: Side::Decode };
            let codec = Self::codec(&mut self.codecs, &mut identity, exact, part, id, list);
            let decode_error = |e: CodecError| protocol(tag, "decoding rows from", peer, &e);
            let start = Instant::now();
            if let (Apply::Overwrite, Some(range)) = (apply, block(rows)) {
                codec.decode(self.pass, bytes, width, &mut data[range]).map_err(decode_error)?;
                if !exact {
                    add_spent(&mut self.stats, stats_key(tag, route), start.elapsed());
                }
                continue;
            }
            let len = rows.len() * width;
            // Grown, never shrunk: decoding overwrites it, so it needs no clearing.
            if self.unpacked.len() < len {
                self.unpacked.resize(len, 0.0);
            }
            codec.decode(self.pass, bytes, width, &mut self.unpacked[..len]).map_err(decode_error)?;
            if !exact {
                add_spent(&mut self.stats, stats_key(tag, route), start.elapsed());
            }
            if round.count > 1 {
                // A round's rows are a subset of the lists the landing index was built for
                // (a call of several rounds has rows, so `width > 0`).
                for (&r, src) in rows.iter().zip(self.unpacked[..len].chunks_exact(width)) {
                    apply.combine(&mut data[r as usize * width..][..width], src);
                }
                continue;
            }
            let landing = self.landings[route as usize].get_or_insert_with(|| {
                let lists: Vec<&[u32]> = (0..part.num_parts()).map(|peer| incoming(part, peer)).collect();
                Landing::new(part.num_local(), &lists)
            });
            let mut only = vec![None; received.len()];
            only[peer] = Some(&self.unpacked[..len]);
            landing.land(data, width, &only, apply);
        }
        self.spare.extend(received.into_iter().filter(|b| b.capacity() > 0));
        Ok(())
    }
}

/// The rows of `list` that `round` carries: the list itself in a call of one round, else its
/// rows whose global id is the round's index modulo the round count, in list order.
fn pick<'l>(part: &LocalGraph, list: &'l [u32], round: Round, picked: &'l mut Vec<u32>) -> &'l [u32] {
    if round.count == 1 {
        return list;
    }
    let globals = part.local_to_global();
    picked.clear();
    picked.extend(list.iter().filter(|&&l| globals[l as usize] as usize % round.count == round.index));
    picked
}

/// Where the stats of a call of `tag` along `route` are summed.
pub(crate) fn stats_key(tag: Tag, route: Route) -> StatsKey {
    StatsKey { layer: tag.layer, dir: tag.dir, route }
}

/// Adds `spent` seconds of codec time under `key` to `table`.
fn add_spent(table: &mut StatsTable, key: StatsKey, spent: Duration) {
    table.add(key, &CodecStats { codec_s: spent.as_secs_f64(), ..CodecStats::default() });
}

/// The global ids of the local rows `list` of `part`.
fn globals(part: &LocalGraph, list: &[u32]) -> Arc<[u32]> {
    list.iter().map(|&l| part.local_to_global()[l as usize]).collect()
}

/// A stream whose codec cannot run where the rows live, in a call that runs there.
fn not_a_kernel(tag: Tag, peer: usize) -> ExchangeError {
    let message = format!("the codec of the stream with rank {peer} cannot encode on a row store");
    ExchangeError::Protocol { tag, message }
}

/// The local ids `rows` as one range, when they are consecutive and ascending.
fn consecutive(rows: &[u32]) -> Option<Range<usize>> {
    let start = *rows.first()? as usize;
    rows.iter().enumerate().all(|(i, &r)| r as usize == start + i).then(|| start..start + rows.len())
}

/// The elements of `x` in row-major order (copied into that layout first if needed).
pub(crate) fn row_major(x: &mut Array2<f32>) -> &mut [f32] {
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
    use cache_quant::{Direction, Route, Step};
    use comm_hierarchy::Communicator;
    use graph_partition::partition::Partition;
    use ndarray::Array2;

    use super::{Apply, ExchangeOptions, MessageCap, ReplicaRouter, Tag, consecutive, testkit};

    /// A call's messages land one peer at a time: the decode scratch holds the largest peer's
    /// rows, not the call's, and the sums are the owners' own row plus every copy's.
    #[test]
    fn messages_land_one_peer_at_a_time() {
        let partition = Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3] };
        let book = testkit::book(&partition);
        const WIDTH: usize = 5;
        let several = testkit::run(&book, |part, comm| {
            let mut router = ReplicaRouter::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            let mut g = Array2::from_elem((part.num_local(), WIDTH), 1.0f32);
            let tag = Tag::new(0, Direction::Backward, Step::Halo);
            router.route(tag, Route::ToPrimary, &mut g, Apply::Add).map_err(|e| e.to_string())?;
            let largest = (0..4).map(|q| part.send(q).len()).max().unwrap();
            let total: usize = (0..4).map(|q| part.send(q).len()).sum();
            assert_eq!(router.unpacked.len(), largest * WIDTH, "part {}", part.part());
            for l in 0..part.num_primary() {
                let expected = 1.0 + part.copies_of(l).len() as f32;
                assert!(g.row(l).iter().all(|&v| v == expected), "part {} row {l}", part.part());
            }
            Ok(largest < total)
        });
        assert!(several.contains(&true), "some part must receive rows from several peers");
    }

    /// Under a message cap an exact call runs in rounds with the bits and bytes of one round,
    /// sums included (every row's sources still arrive in ascending peer order); a coded call
    /// keeps one message per peer.
    #[test]
    fn a_capped_call_runs_in_rounds_with_the_bits_and_bytes_of_one() {
        let partition = Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3] };
        let book = testkit::book(&partition);
        const WIDTH: usize = 3;
        let pair_rows =
            book.parts().iter().flat_map(|p| (0..4).flat_map(move |q| [p.send(q).len(), p.recv(q).len()])).max();
        // One row per message at most.
        let cap = MessageCap { bytes: WIDTH * 4, pair_rows: pair_rows.unwrap() };
        let rounds = cap.rounds(WIDTH);
        assert!(rounds > 1, "the test graph must need several rounds");
        testkit::run(&book, |part, comm| {
            // Sums of these depend on their order.
            let start = |l: usize, c: usize| 0.1 * (l + 1) as f32 + 0.37 * (part.part() + 1) as f32 + 1e-3 * c as f32;
            let tag = Tag::new(0, Direction::Backward, Step::Halo);
            for (route, apply) in [(Route::ToCopies, Apply::Overwrite), (Route::ToPrimary, Apply::Add)] {
                let mut calls = Vec::new();
                for (options, capped) in [
                    (ExchangeOptions::default(), false),
                    (ExchangeOptions { message_cap: Some(cap), ..ExchangeOptions::default() }, true),
                    (
                        ExchangeOptions {
                            message_cap: Some(cap),
                            codecs: Some(std::sync::Arc::new(|_: &cache_quant::Stream| {
                                Box::new(cache_quant::IdentityCodec) as Box<dyn cache_quant::Codec>
                            })),
                            ..ExchangeOptions::default()
                        },
                        false,
                    ),
                ] {
                    let mut router = ReplicaRouter::new(part, comm, options).map_err(|e| e.to_string())?;
                    let mut x = Array2::from_shape_fn((part.num_local(), WIDTH), |(l, c)| start(l, c));
                    let mark = comm.ledger_mark();
                    router.route(tag, route, &mut x, apply).map_err(|e| e.to_string())?;
                    calls.push((x, comm.ledger_since(mark).totals(), capped));
                }
                let (whole, whole_ledger, _) = &calls[0];
                for (x, ledger, capped) in &calls[1..] {
                    assert_eq!(x.mapv(f32::to_bits), whole.mapv(f32::to_bits), "part {} {route:?}", part.part());
                    assert_eq!(ledger.bytes(), whole_ledger.bytes(), "part {} {route:?}", part.part());
                    let per_call = if *capped { rounds as u64 } else { 1 };
                    assert_eq!(ledger.messages(), whole_ledger.messages() * per_call, "part {}", part.part());
                }
            }
            Ok(())
        });
    }

    #[test]
    fn only_ascending_runs_are_blocks() {
        assert_eq!(consecutive(&[4, 5, 6]), Some(4..7));
        assert_eq!(consecutive(&[9]), Some(9..10));
        assert_eq!(consecutive(&[4, 6]), None);
        assert_eq!(consecutive(&[5, 4]), None);
        assert_eq!(consecutive(&[]), None);
    }
}
