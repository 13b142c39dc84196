use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cache_quant::codec::BucketCodec;
use cache_quant::codec::ecgraph::{ReqEc, ResEc};
use cache_quant::{
    BitTable, Codec, CodecFactory, Encoding, Knob, LinearQuant, Measured, Pass, QuantProbe, StatsTable,
    StochasticCodec, Stream,
};
use comm_hierarchy::Communicator;
use comm_hierarchy::ledger::{CollectiveRecord, TrafficEntry};
use graph_partition::book::{LocalGraph, PartitionBook};
use graph_partition::partition::{Algorithm, Partition, PartitionConfig, partition_graph};
use ndarray::Array2;

use super::super::edge_cut::EdgeCutExchange;
use super::super::replica_router::{ExchangeOptions, MessageCap, ReplicaCacheOptions, testkit};
use super::super::row_store::StoreError;
use super::super::vertex_cut::VertexCutExchange;
use super::super::{Direction, Footprint, OnStore, Step};
use super::*;

const WIDTH: usize = 3;
/// Steps of each sequence of calls: training steps, then an evaluation (exact rows).
const STEPS: usize = 4;
/// A message cap of two rows of the test's width, over lists of at most 12 rows: exact calls
/// run in 6 rounds.
const CAP: MessageCap = MessageCap { bytes: 2 * WIDTH * 4, pair_rows: 12 };

/// The codec stacks of the methods, made fresh (same seeds) for each exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    Exact,
    /// AdaQP: stochastic quantization at 4 bits.
    Stochastic,
    /// CDFGNN's 8-bit deltas.
    Linear,
    /// EC-Graph without its compensations: 4-bit buckets over each message.
    Bucket,
    /// Stacks differing by route, as EC-Graph's do by direction: buckets to the copies, ResEC
    /// to the primaries.
    Mixed,
    /// EC-Graph: residual error compensation, and the trend-selective compressor.
    ResEc,
    ReqEc,
}

const STACKS: [Stack; 7] =
    [Stack::Exact, Stack::Stochastic, Stack::Linear, Stack::Bucket, Stack::Mixed, Stack::ResEc, Stack::ReqEc];

fn codecs(stack: Stack) -> Option<CodecFactory> {
    let factory: CodecFactory = match stack {
        Stack::Exact => return None,
        Stack::Stochastic => {
            StochasticCodec::factory(7, Knob::new(Arc::new(BitTable::uniform(4).unwrap())), QuantProbe::default())
        }
        Stack::Linear => Arc::new(|_: &Stream| Box::new(LinearQuant::new(8).unwrap()) as Box<dyn Codec>),
        Stack::Bucket => Arc::new(|_: &Stream| Box::new(BucketCodec::new(Knob::new(4))) as Box<dyn Codec>),
        Stack::Mixed => Arc::new(|stream: &Stream| -> Box<dyn Codec> {
            match stream.id.route {
                cache_quant::Route::ToCopies => Box::new(BucketCodec::new(Knob::new(4))),
                cache_quant::Route::ToPrimary => Box::new(ResEc::new(Knob::new(2))),
            }
        }),
        Stack::ResEc => Arc::new(|_: &Stream| Box::new(ResEc::new(Knob::new(2))) as Box<dyn Codec>),
        Stack::ReqEc => Arc::new(|_: &Stream| Box::new(ReqEc::new(2, Knob::new(2), true, None)) as Box<dyn Codec>),
    };
    Some(factory)
}

/// Bytes of a message of `rows` rows of the test's width, for the stacks whose codecs encode on
/// a row store ([`cache_quant::KernelCodec`]s, the identity's exact rows among them).
fn coded_message(stack: Stack, rows: usize) -> Option<u64> {
    let encoding = match stack {
        Stack::Exact => Encoding::Exact,
        Stack::Stochastic => Encoding::Stochastic { key: 0, bits: vec![4; rows], gids: (0..rows as u32).collect() },
        Stack::Linear => Encoding::Linear { bits: 8 },
        Stack::Bucket | Stack::Mixed => Encoding::Bucket { bits: 4 },
        Stack::ResEc | Stack::ReqEc => return None,
    };
    Some(encoding.message_len(rows, WIDTH) as u64)
}

/// The bytes a call on a store encodes (down) and decodes (up), one message per peer: a pull
/// sends its primaries' rows and receives the halo's, a push the other way round, a sum both
/// routes' both ways. Under [`Stack::Mixed`] only a pull's messages are all buckets.
fn coded_bytes(stack: Stack, part: &LocalGraph, call: Call) -> Option<(u64, u64)> {
    if stack == Stack::Mixed && call != Call::Pull {
        return None;
    }
    let total = |list: fn(&LocalGraph, usize) -> &[u32]| -> Option<u64> {
        (0..part.num_parts()).map(|q| coded_message(stack, list(part, q).len())).sum()
    };
    let (send, recv) = (total(LocalGraph::send)?, total(LocalGraph::recv)?);
    Some(match call {
        Call::Pull => (send, recv),
        Call::Push => (recv, send),
        Call::Sum | Call::Max => (send + recv, send + recv),
    })
}

fn edge_cut_book() -> PartitionBook {
    testkit::book(&Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3] })
}

fn vertex_cut_book() -> PartitionBook {
    let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
    testkit::book(&partition_graph(&testkit::graph(), &config).unwrap())
}

/// A block whose rows differ by worker, row, column and step (so every call moves new values);
/// the rows outside `keep` are NaN, so a call that read one would spread it.
fn block(part: &LocalGraph, step: usize, keep: &[u32]) -> Array2<f32> {
    Array2::from_shape_fn((part.num_local(), WIDTH), |(l, c)| {
        let g = part.local_to_global()[l] as f32;
        if keep.binary_search(&(l as u32)).is_ok() {
            0.37 * g - 0.11 * (part.part() as f32 + 1.0) * (c as f32 + 1.0) + 0.013 * step as f32
        } else {
            f32::NAN
        }
    })
}

/// What NCCL does between GPUs, between the in-process workers of a test: each post leaves
/// its messages here under (sender, receiver, the sender's post count) and takes the ones
/// addressed to it, refusing one whose length is not the receiver's.
#[derive(Default)]
struct PostOffice {
    slots: Mutex<HashMap<(usize, usize, u64), Vec<u8>>>,
    arrived: Condvar,
}

/// One worker's outbox and inbox, which outlive a call's store (a split call's halves each
/// make one).
#[derive(Default)]
struct Mailbox {
    outbox: HashMap<usize, Vec<u8>>,
    inbox: HashMap<usize, Vec<u8>>,
    posts: u64,
}

/// A host block as a store that sends its own messages through a [`PostOffice`], as the
/// device's rows do through NCCL: every kernel encoding goes store to store.
struct Linked<'a> {
    rows: &'a mut Array2<f32>,
    rank: usize,
    office: &'a PostOffice,
    mail: &'a mut Mailbox,
}

impl RowStore for Linked<'_> {
    fn dim(&self) -> (usize, usize) {
        self.rows.dim()
    }

    fn read_rows(&mut self, rows: &[u32], out: &mut [f32]) -> Result<(), StoreError> {
        self.rows.read_rows(rows, out)
    }

    fn write_rows(&mut self, rows: &[u32], values: &[f32], put: Put) -> Result<(), StoreError> {
        self.rows.write_rows(rows, values, put)
    }

    fn zero_rows_from(&mut self, from: usize) -> Result<(), StoreError> {
        self.rows.zero_rows_from(from)
    }

    fn encode_rows(&mut self, rows: &[u32], encoding: &Encoding, out: &mut Vec<u8>) -> Result<Measured, StoreError> {
        self.rows.encode_rows(rows, encoding, out)
    }

    fn decode_rows(&mut self, rows: &[u32], encoding: &Encoding, bytes: &[u8], put: Put) -> Result<(), StoreError> {
        self.rows.decode_rows(rows, encoding, bytes, put)
    }

    fn sends_direct(&self, _encoding: &Encoding) -> bool {
        true
    }

    fn encode_kept(&mut self, peer: usize, rows: &[u32], encoding: &Encoding) -> Result<(usize, Measured), StoreError> {
        let out = self.mail.outbox.entry(peer).or_default();
        out.clear();
        let measured = self.rows.encode_rows(rows, encoding, out)?;
        Ok((out.len(), measured))
    }

    fn post_kept(&mut self, phase: &str, incoming: &[Option<(usize, &Encoding)>]) -> Result<(), StoreError> {
        let (me, post) = (self.rank, self.mail.posts);
        self.mail.posts += 1;
        let mut slots = self.office.slots.lock().unwrap();
        for (&peer, message) in &self.mail.outbox {
            slots.insert((me, peer, post), message.clone());
        }
        self.office.arrived.notify_all();
        let width = self.rows.ncols();
        for (peer, &(rows, encoding)) in incoming.iter().enumerate().filter_map(|(p, i)| Some((p, i.as_ref()?))) {
            let expected = encoding.message_len(rows, width);
            let message = loop {
                if let Some(message) = slots.remove(&(peer, me, post)) {
                    break message;
                }
                let (next, wait) = self.office.arrived.wait_timeout(slots, Duration::from_secs(30)).unwrap();
                if wait.timed_out() {
                    return Err(format!("{phase}: rank {me} got nothing from rank {peer}").into());
                }
                slots = next;
            };
            if message.len() != expected {
                return Err(format!(
                    "{phase}: rank {peer} sent {} bytes, rank {me} expected {expected}",
                    message.len()
                )
                .into());
            }
            self.mail.inbox.insert(peer, message);
        }
        Ok(())
    }

    fn decode_kept(
        &mut self,
        peer: usize,
        rows: &[u32],
        encoding: &Encoding,
        put: Put,
        copy: Option<&mut Vec<u8>>,
    ) -> Result<(), StoreError> {
        let bytes = self.mail.inbox.remove(&peer).ok_or_else(|| format!("nothing arrived from rank {peer}"))?;
        encoding.check(&bytes, rows.len(), self.rows.ncols())?;
        self.rows.decode_rows(rows, encoding, &bytes, put)?;
        if let Some(copy) = copy {
            copy.extend_from_slice(&bytes);
        }
        Ok(())
    }
}

/// Where a sequence of calls runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// On host blocks, no store.
    Host,
    /// Staged through an array store, its messages through the communicator.
    Staged,
    /// Staged through a [`Linked`] store.
    Linked,
}

/// How one staged or direct sequence of calls ended: each call's block, the exchange's saved
/// state, the network's bytes and messages (a call of several rounds sends more), and the bus
/// bytes per call (staged only).
struct Outcome {
    blocks: Vec<Array2<f32>>,
    state: Vec<u8>,
    network: (u64, u64),
    /// Every collective (its sequence number left out), and the traffic by phase and peer.
    ledger: (Vec<CollectiveRecord>, Vec<TrafficEntry>),
    bus: Vec<BusBytes>,
    /// Whether each call ran on the store.
    on_store: Vec<bool>,
    stats: StatsTable,
}

/// Runs three training steps of `calls` (each on a fresh block) through `exchange`: directly,
/// or staged through a store.
fn run(
    exchange: &mut dyn Exchange,
    part: &LocalGraph,
    comm: &dyn Communicator,
    calls: &[(Call, bool)],
    via: Via,
    office: &PostOffice,
) -> Result<Outcome, String> {
    let mut stager = Stager::new(part.num_local());
    let mut mail = Mailbox::default();
    let mark = comm.ledger_mark();
    let mut out = Outcome {
        blocks: Vec::new(),
        state: Vec::new(),
        network: (0, 0),
        ledger: (Vec::new(), Vec::new()),
        bus: Vec::new(),
        on_store: Vec::new(),
        stats: StatsTable::default(),
    };
    for step in 0..STEPS {
        exchange.begin(if step < STEPS - 1 { Pass::train(0, step as u64) } else { Pass::eval() });
        for (layer, &(call, split)) in calls.iter().enumerate() {
            let footprint = exchange.footprint(call);
            let tag = Tag::new(layer, Direction::Forward, Step::Halo);
            let mut x = block(part, step, footprint.reads);
            if footprint.put == Put::Add {
                // What an add lands on: the rows' own values, not NaN.
                footprint.writes.iter().for_each(|&r| x.row_mut(r as usize).fill(1.5));
            }
            let e = |e: &dyn std::fmt::Display| format!("part {} {call:?}: {e}", part.part());
            let rank = part.part();
            match (via, split) {
                (Via::Staged, false) => stager.call(exchange, call, tag, &mut x).map_err(|x| e(&x))?,
                (Via::Staged, true) => {
                    stager.start(exchange, call, tag, &mut x).map_err(|x| e(&x))?;
                    stager.finish(exchange, call, tag, &mut x).map_err(|x| e(&x))?;
                }
                (Via::Linked, false) => stager
                    .call(exchange, call, tag, &mut Linked { rows: &mut x, rank, office, mail: &mut mail })
                    .map_err(|x| e(&x))?,
                (Via::Linked, true) => {
                    stager
                        .start(exchange, call, tag, &mut Linked { rows: &mut x, rank, office, mail: &mut mail })
                        .map_err(|x| e(&x))?;
                    stager
                        .finish(exchange, call, tag, &mut Linked { rows: &mut x, rank, office, mail: &mut mail })
                        .map_err(|x| e(&x))?;
                }
                (Via::Host, false) => match call {
                    Call::Pull => exchange.pull_halo(tag, &mut x),
                    Call::Push => exchange.push_halo_grad(tag, &mut x),
                    Call::Sum => exchange.sum_replicas(tag, &mut x),
                    Call::Max => exchange.max_replicas(tag, &mut x),
                }
                .map_err(|x| e(&x))?,
                (Via::Host, true) => {
                    match call {
                        Call::Pull => exchange.start_pull(tag, &x),
                        _ => exchange.start_push(tag, &x),
                    }
                    .map_err(|x| e(&x))?;
                    match call {
                        Call::Pull => exchange.finish_pull(tag, &mut x),
                        _ => exchange.finish_push(tag, &mut x),
                    }
                    .map_err(|x| e(&x))?;
                }
            }
            out.bus.push(stager.take_bytes());
            out.on_store.push(exchange.on_store().is_some_and(|calls| calls.codes_on_store(call, tag)));
            out.blocks.push(x);
        }
    }
    out.stats = exchange.take_stats();
    let ledger = comm.ledger_since(mark);
    let totals = ledger.totals();
    out.network = (totals.bytes(), totals.messages());
    let calls = ledger.collectives().iter().map(|c| CollectiveRecord { seq: None, ..c.clone() });
    out.ledger = (calls.collect(), ledger.traffic().to_vec());
    exchange.save_state(&mut out.state).map_err(|e| e.to_string())?;
    Ok(out)
}

/// The rows a staged call must leave as the direct call does: those it writes and reads.
fn touched(footprint: &Footprint) -> Vec<u32> {
    let mut rows: Vec<u32> = footprint.reads.iter().chain(footprint.writes).copied().collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// Makes one worker's exchange.
type Make = for<'p> fn(&'p LocalGraph, &'p dyn Communicator, ExchangeOptions<'p>) -> Box<dyn Exchange + 'p>;

fn edge_cut<'p>(
    part: &'p LocalGraph,
    comm: &'p dyn Communicator,
    options: ExchangeOptions<'p>,
) -> Box<dyn Exchange + 'p> {
    Box::new(EdgeCutExchange::new(part, comm, options).unwrap())
}

fn vertex_cut<'p>(
    part: &'p LocalGraph,
    comm: &'p dyn Communicator,
    options: ExchangeOptions<'p>,
) -> Box<dyn Exchange + 'p> {
    Box::new(VertexCutExchange::new(part, comm, options).unwrap())
}

/// Staged and direct calls of one exchange, checked against each other on every worker, staged
/// through the host and store to store; `caches_sums`: the exchange sums through the replica
/// cache when it is asked to.
fn staged_equals_direct(book: &PartitionBook, make: Make, calls: &[(Call, bool)], caches_sums: bool) {
    for stack in STACKS {
        // The replica cache sends a different subset of rows every call, which only stateless
        // codecs follow: CDFGNN pairs it with 8-bit linear quantization.
        let caches: &[bool] = match stack {
            Stack::Exact | Stack::Linear => &[false, true],
            Stack::Stochastic | Stack::Bucket | Stack::Mixed | Stack::ResEc | Stack::ReqEc => &[false],
        };
        for (&cached, capped) in caches.iter().flat_map(|c| [(c, false), (c, true)]) {
            let replica_cache = cached.then(|| ReplicaCacheOptions::every_layer(Knob::new(0.05)));
            let office = PostOffice::default();
            testkit::run(book, |part, comm| {
                let options = || ExchangeOptions {
                    codecs: codecs(stack),
                    replica_cache: replica_cache.clone(),
                    message_cap: capped.then_some(CAP),
                    ..ExchangeOptions::default()
                };
                let direct = run(make(part, comm, options()).as_mut(), part, comm, calls, Via::Host, &office)?;
                for via in [Via::Staged, Via::Linked] {
                    let mut exchange = make(part, comm, options());
                    let staged = run(exchange.as_mut(), part, comm, calls, via, &office)?;
                    let name = format!("{stack:?} cached {cached} capped {capped} {via:?} part {}", part.part());
                    let at = |i: usize| format!("{name} call {i}");
                    for (i, (d, s)) in direct.blocks.iter().zip(&staged.blocks).enumerate() {
                        let (call, _) = calls[i % calls.len()];
                        let footprint = exchange.footprint(call);
                        for &r in &touched(&footprint) {
                            let (d, s) = (d.row(r as usize), s.row(r as usize));
                            assert!(
                                d.iter().all(|v| v.is_finite()),
                                "{}: row {r} read a row outside the footprint",
                                at(i)
                            );
                            // An add sums in another order when staged; everything else is bit for bit.
                            let close = d.iter().zip(s).all(|(a, b)| match footprint.put {
                                Put::Add => (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                                Put::Overwrite => a.to_bits() == b.to_bits(),
                            });
                            assert!(close, "{}: row {r}: direct {d} staged {s}", at(i));
                        }
                        if let Some(from) = footprint.zeroes_from {
                            assert!(s.rows().into_iter().skip(from).all(|r| r.iter().all(|&v| v == 0.0)), "{}", at(i));
                        }
                        // The evaluation's rows are exact, whatever the stack.
                        let evaluates = i / calls.len() == STEPS - 1;
                        let coded = if evaluates { Stack::Exact } else { stack };
                        let on_store = coded_bytes(coded, part, call)
                            .filter(|_| call != Call::Max && !(cached && caches_sums && call == Call::Sum));
                        assert_eq!(staged.on_store[i], on_store.is_some(), "{}", at(i));
                        let bus = staged.bus[i];
                        assert_eq!(bus, expected_bus(coded, on_store, via, &footprint), "{}", at(i));
                        let sent: usize = (0..part.num_parts()).map(|q| part.send(q).len() + part.recv(q).len()).sum();
                        assert!(bus.total() <= 2 * sent as u64 * (WIDTH * 4) as u64, "{}", at(i));
                    }
                    assert_eq!(direct.state, staged.state, "{name}: codec state");
                    assert_eq!(direct.network, staged.network, "{name}: network");
                    assert_eq!(direct.ledger, staged.ledger, "{name}: ledger");
                    assert_eq!(direct.stats.without_times(), staged.stats.without_times(), "{name}: codec stats");
                }
                Ok(())
            });
        }
    }
}

/// The bytes a staged call moves between its store and the host: on a store, each message
/// encoded, both ways (`coded`: down, up), or nothing where it goes store to store but what
/// the stochastic codec's probe reads of a training arrival; else the rows read go down and
/// the rows written come up, no more.
fn expected_bus(stack: Stack, coded: Option<(u64, u64)>, via: Via, footprint: &Footprint) -> BusBytes {
    let row_bytes = (WIDTH * 4) as u64;
    match coded {
        Some((_, up)) if via == Via::Linked => {
            BusBytes { down: if stack == Stack::Stochastic { up } else { 0 }, up: 0 }
        }
        Some((down, up)) => BusBytes { down, up },
        None => {
            BusBytes { down: footprint.reads.len() as u64 * row_bytes, up: footprint.writes.len() as u64 * row_bytes }
        }
    }
}

#[test]
fn staged_edge_cut_calls_equal_direct_ones() {
    let calls = [(Call::Pull, false), (Call::Push, false), (Call::Pull, true), (Call::Push, true)];
    staged_equals_direct(&edge_cut_book(), edge_cut, &calls, false);
}

#[test]
fn staged_vertex_cut_calls_equal_direct_ones() {
    let calls = [(Call::Sum, false), (Call::Max, false), (Call::Sum, false)];
    staged_equals_direct(&vertex_cut_book(), vertex_cut, &calls, true);
}

/// A vertex-cut book whose masters alone compute moves rows as an edge-cut does.
#[test]
fn staged_masters_only_calls_equal_direct_ones() {
    staged_equals_direct(&vertex_cut_book(), edge_cut, &[(Call::Push, false), (Call::Pull, false)], false);
}

#[test]
fn footprints_name_the_route_lists() {
    let book = edge_cut_book();
    testkit::run(&book, |part, comm| {
        let ex = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
        let union = |list: fn(&LocalGraph, usize) -> &[u32]| {
            let mut rows: Vec<u32> = (0..part.num_parts()).flat_map(|q| list(part, q).to_vec()).collect();
            rows.sort_unstable();
            rows.dedup();
            rows
        };
        let pull = ex.footprint(Call::Pull);
        assert_eq!((pull.reads, pull.writes), (&union(LocalGraph::send)[..], &union(LocalGraph::recv)[..]));
        assert!(pull.reads.iter().all(|&r| (r as usize) < part.num_primary()));
        assert!(pull.writes.iter().all(|&r| (r as usize) >= part.num_primary()));
        let push = ex.footprint(Call::Push);
        assert_eq!((push.reads, push.writes, push.put), (pull.writes, pull.reads, Put::Add));
        assert_eq!(push.zeroes_from, Some(part.num_primary()));
        assert_eq!(ex.footprint(Call::Sum), Footprint::NONE);
        Ok(())
    });
}

/// A block of no columns moves nothing, whatever the codecs: its calls stage, as the direct
/// calls do nothing.
#[test]
fn a_block_of_no_columns_moves_nothing_under_kernel_codecs() {
    let book = edge_cut_book();
    testkit::run(&book, |part, comm| {
        let options = ExchangeOptions { codecs: codecs(Stack::Stochastic), ..ExchangeOptions::default() };
        let mut exchange = EdgeCutExchange::new(part, comm, options).map_err(|e| e.to_string())?;
        exchange.begin(Pass::train(1, 0));
        let mut stager = Stager::new(part.num_local());
        for call in [Call::Pull, Call::Push] {
            let mut x = Array2::<f32>::zeros((part.num_local(), 0));
            let tag = Tag::new(0, Direction::Forward, Step::Halo);
            stager.call(&mut exchange, call, tag, &mut x).map_err(|e| e.to_string())?;
            assert_eq!(stager.take_bytes(), BusBytes::default());
        }
        Ok(())
    });
}

/// A message that does not fit the receiver's encoding (here: sent at 4 bits, read at 2) is the
/// codec's error naming the sending rank, before any kernel would read it; no panic.
#[test]
fn a_message_the_store_cannot_decode_is_an_error_naming_the_peer() {
    let book = edge_cut_book();
    testkit::run(&book, |part, comm| {
        let (wide, narrow) =
            (Knob::new(Arc::new(BitTable::uniform(4).unwrap())), Knob::new(Arc::new(BitTable::uniform(2).unwrap())));
        let factory: CodecFactory = Arc::new(move |stream: &Stream| -> Box<dyn Codec> {
            let bits = if stream.id.side == cache_quant::Side::Encode { wide.clone() } else { narrow.clone() };
            Box::new(StochasticCodec::new(7, stream, bits, QuantProbe::default()))
        });
        let options = ExchangeOptions { codecs: Some(factory), ..ExchangeOptions::default() };
        let mut exchange = EdgeCutExchange::new(part, comm, options).map_err(|e| e.to_string())?;
        exchange.begin(Pass::train(1, 0));
        let tag = Tag::new(0, Direction::Forward, Step::Halo);
        let mut x = Array2::<f32>::ones((part.num_local(), WIDTH));
        assert!(exchange.codes_on_store(Call::Pull, tag));
        let receives = (0..part.num_parts()).any(|q| !part.recv(q).is_empty());
        match Stager::new(part.num_local()).call(&mut exchange, Call::Pull, tag, &mut x) {
            Ok(()) => assert!(!receives, "part {} decoded a message of the wrong width", part.part()),
            Err(err) => {
                let msg = err.to_string();
                assert!(msg.contains("fwd/0/halo") && msg.contains("decoding rows from rank"), "{msg}");
                assert!(msg.contains("stochastic"), "{msg}");
            }
        }
        Ok(())
    });
}

/// A store that sends its own messages holds one call's at a time: a call that would send
/// while a split call's are in flight is refused before it encodes anything, and the split
/// call still finishes as the direct one does.
#[test]
fn a_store_sends_no_message_while_a_split_calls_are_in_flight() {
    let book = edge_cut_book();
    let office = PostOffice::default();
    testkit::run(&book, |part, comm| {
        let mut exchange = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
        exchange.begin(Pass::train(1, 0));
        let (mut stager, mut mail, rank) = (Stager::new(part.num_local()), Mailbox::default(), part.part());
        let (pull, next) = (Tag::new(0, Direction::Forward, Step::Halo), Tag::new(1, Direction::Forward, Step::Halo));
        let mut x = block(part, 0, exchange.footprint(Call::Pull).reads);
        let mut store = Linked { rows: &mut x, rank, office: &office, mail: &mut mail };
        stager.start(&mut exchange, Call::Pull, pull, &mut store).map_err(|e| e.to_string())?;
        let err = stager.call(&mut exchange, Call::Pull, next, &mut store).unwrap_err().to_string();
        assert!(err.contains("fwd/1/halo") && err.contains("still in flight") && err.contains("fwd/0/halo"), "{err}");
        stager.finish(&mut exchange, Call::Pull, pull, &mut store).map_err(|e| e.to_string())?;
        let mut direct = block(part, 0, exchange.footprint(Call::Pull).reads);
        let mut reference = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
        reference.begin(Pass::train(1, 0));
        reference.pull_halo(pull, &mut direct).map_err(|e| e.to_string())?;
        for &r in exchange.footprint(Call::Pull).writes {
            assert_eq!(x.row(r as usize), direct.row(r as usize), "part {rank} row {r}");
        }
        Ok(())
    });
}

#[test]
fn a_store_of_another_worker_is_refused() {
    let mut stager = Stager::new(5);
    let mut x = Array2::<f32>::zeros((4, 2));
    let tag = Tag::new(0, Direction::Forward, Step::Halo);
    let err = stager.call(&mut crate::NoExchange, Call::Pull, tag, &mut x).unwrap_err();
    assert!(matches!(err, StageError::Rows { rows: 4, expected: 5, .. }), "{err}");
    let err = stager.start(&mut crate::NoExchange, Call::Sum, tag, &mut Array2::zeros((5, 2))).unwrap_err();
    assert!(matches!(err, StageError::Unsplit { call: Call::Sum, .. }), "{err}");
}

#[test]
fn the_array_store_reads_puts_and_zeroes_rows() {
    let mut x = Array2::from_shape_fn((4, 2), |(r, c)| (r * 2 + c) as f32);
    let mut out = vec![0.0; 4];
    x.read_rows(&[3, 1], &mut out).unwrap();
    assert_eq!(out, [6.0, 7.0, 2.0, 3.0]);
    x.write_rows(&[0], &[10.0, 20.0], Put::Add).unwrap();
    x.write_rows(&[2], &[-1.0, -2.0], Put::Overwrite).unwrap();
    x.zero_rows_from(3).unwrap();
    assert_eq!(x, ndarray::array![[10.0, 21.0], [2.0, 3.0], [-1.0, -2.0], [0.0, 0.0]]);
}
