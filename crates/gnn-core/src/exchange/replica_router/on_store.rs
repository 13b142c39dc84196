//! A router's calls on a [`RowStore`] (a GPU's rows): the store encodes each peer's rows and
//! decodes each arrival onto its rows, peers ascending, so the messages and the landed rows are
//! the host call's.
//!
//! The messages travel one of two ways, the same on every worker (they decide from the same
//! encodings):
//!
//! - through the host: each encoded message comes down as bytes, goes through the
//!   communicator, and goes up at its receiver;
//! - store to store, where the store sends them itself ([`RowStore::sends_direct`]: NCCL
//!   between GPUs): the messages stay in the stores ([`RowStore::encode_kept`],
//!   [`RowStore::post_kept`], [`RowStore::decode_kept`]), each receiver knows every length from
//!   its own encodings ([`Encoding::message_len`]: both sides of a stream describe the same
//!   message), and the communicator only records the all-to-all in the ledger
//!   ([`DeviceLedger::record_all_to_all_v`]), so the ledger is the host path's byte for byte.
//!   Only what a codec's bookkeeping reads of an arrival comes down
//!   ([`cache_quant::KernelCodec::reads_arrivals`]).
//!
//! [`DeviceLedger::record_all_to_all_v`]: comm_hierarchy::DeviceLedger::record_all_to_all_v

use std::time::Instant;

use cache_quant::{CodecError, CodecStats, Encoding, IdentityCodec, Measured, Route, Side, StreamId};

use super::{
    CallKind, ExchangeError, InFlight, Messages, Pending, Put, ReplicaRouter, Round, Tag, globals, lists, not_a_kernel,
    pick, protocol, stats_key,
};
use crate::exchange::landing::Apply;
use crate::exchange::row_store::{BusBytes, RowStore, StoreError};

impl ReplicaRouter<'_> {
    /// Whether the call of `tag` along `route` in this pass may run on a store: a training pass
    /// (or lossy evaluation) whose every stream, both sides, has a [`cache_quant::KernelCodec`]
    /// (a method's stacks may differ by layer, direction and route). Makes the call's codecs
    /// as the call itself would.
    pub(crate) fn codes_on_store(&mut self, tag: Tag, route: Route) -> bool {
        // Exact rows (an evaluation, or no codecs) are the identity codec's, a kernel codec.
        if self.exact() || self.identity {
            return true;
        }
        let (me, part) = (self.comm.rank(), self.part);
        let (outgoing, incoming) = lists(route);
        for peer in (0..self.comm.size()).filter(|&peer| peer != me) {
            for (side, list) in [(Side::Encode, outgoing(part, peer)), (Side::Decode, incoming(part, peer))] {
                let id = StreamId { tag, route, peer, side };
                if self.codecs.get(id, || globals(part, list)).kernel().is_none() {
                    return false;
                }
            }
        }
        true
    }

    /// [`ReplicaRouter::route`] on `store`'s rows (a call [`ReplicaRouter::codes_on_store`]
    /// allows); returns the encoded bytes that crossed between the store and the host.
    pub(crate) fn route_on_store(
        &mut self,
        tag: Tag,
        route: Route,
        store: &mut dyn RowStore,
        apply: Apply,
    ) -> Result<BusBytes, ExchangeError> {
        let mut bus = BusBytes::default();
        let count = self.rounds(store.dim().1);
        for index in 0..count {
            let round = Round { index, count };
            let arrived = match self.encode_on_store(tag, route, store, round, &mut bus)? {
                Messages::Host(messages) => Messages::Host(self.post(tag, messages)?),
                kept => {
                    self.post_kept(tag, CallKind::Blocking, &kept, store)?;
                    kept
                }
            };
            self.land_on_store(tag, route, store, apply, arrived, round, &mut bus)?;
        }
        Ok(bus)
    }

    /// [`ReplicaRouter::start`] on `store`'s rows.
    pub(crate) fn start_on_store(
        &mut self,
        tag: Tag,
        route: Route,
        store: &mut dyn RowStore,
    ) -> Result<BusBytes, ExchangeError> {
        self.check_idle(tag)?;
        let mut bus = BusBytes::default();
        match self.encode_on_store(tag, route, store, Round::WHOLE, &mut bus)? {
            Messages::Host(messages) => self.post_split(tag, route, messages)?,
            kept => {
                self.post_kept(tag, CallKind::Start, &kept, store)?;
                self.in_flight = Some(InFlight { tag, route, pending: Pending::Kept(kept) });
            }
        }
        Ok(bus)
    }

    /// [`ReplicaRouter::finish`] on `store`'s rows.
    pub(crate) fn finish_on_store(
        &mut self,
        tag: Tag,
        store: &mut dyn RowStore,
        apply: Apply,
    ) -> Result<BusBytes, ExchangeError> {
        let (route, arrived) = self.wait_split(tag)?;
        let mut bus = BusBytes::default();
        self.land_on_store(tag, route, store, apply, arrived, Round::WHOLE, &mut bus)?;
        Ok(bus)
    }

    /// Each peer's encoding of the messages of `round` that `side` of the call's streams
    /// handles (`None` for this rank).
    fn encodings(
        &mut self,
        tag: Tag,
        route: Route,
        side: Side,
        round: Round,
    ) -> Result<Vec<Option<Encoding>>, ExchangeError> {
        let (me, part, pass, exact) = (self.comm.rank(), self.part, self.pass, self.exact());
        let (outgoing, incoming) = lists(route);
        let (list_of, what) = match side {
            Side::Encode => (outgoing, "encoding rows for"),
            Side::Decode => (incoming, "decoding rows from"),
        };
        let mut identity = IdentityCodec;
        let mut encodings = Vec::with_capacity(self.comm.size());
        for peer in 0..self.comm.size() {
            if peer == me {
                encodings.push(None);
                continue;
            }
            let list = list_of(part, peer);
            let count = pick(part, list, round, &mut self.picked).len();
            let id = StreamId { tag, route, peer, side };
            let codec = Self::codec(&mut self.codecs, &mut identity, exact, part, id, list);
            let kernel = codec.kernel().ok_or_else(|| not_a_kernel(tag, peer))?;
            encodings.push(Some(kernel.encoding(pass, count).map_err(|e| protocol(tag, what, peer, &e))?));
        }
        Ok(encodings)
    }

    /// [`ReplicaRouter::encode`] by the store: each peer's rows of `round` encoded where they
    /// live, into host bytes or, where every message of the call goes store to store, into the
    /// store's outbox.
    fn encode_on_store(
        &mut self,
        tag: Tag,
        route: Route,
        store: &mut dyn RowStore,
        round: Round,
        bus: &mut BusBytes,
    ) -> Result<Messages, ExchangeError> {
        let (rows, width) = store.dim();
        self.check_rows(tag, rows, width)?;
        let sending = self.encodings(tag, route, Side::Encode, round)?;
        let mut sent = sending.iter().flatten().peekable();
        // The receiving side's encodings only where the sending side's all go store to store.
        let receiving = match sent.peek().is_some() && sent.all(|e| store.sends_direct(e)) {
            true => Some(self.encodings(tag, route, Side::Decode, round)?),
            false => None,
        };
        let receiving = receiving.filter(|r| r.iter().flatten().all(|e| store.sends_direct(e)));
        let direct = receiving.is_some();
        // A store holds one call's messages at a time.
        if let Some(open) = self.in_flight.as_ref().filter(|open| direct && matches!(open.pending, Pending::Kept(_))) {
            let message = format!("sent while the store's messages of {} are still in flight", open.tag);
            return Err(ExchangeError::Protocol { tag, message });
        }
        let (me, part) = (self.comm.rank(), self.part);
        let (_, incoming) = lists(route);
        if !direct {
            let messages = self.messages(|router, peer, bytes| {
                let encoding = sending[peer].as_ref().ok_or_else(|| not_a_kernel(tag, peer))?;
                let len = router.encode_one(tag, route, peer, round, width, encoding, |rows| {
                    let measured = store.encode_rows(rows, encoding, bytes)?;
                    Ok((bytes.len(), measured))
                })?;
                bus.down += len as u64;
                Ok(())
            });
            return messages.map(Messages::Host);
        }
        let mut sent = vec![0; self.comm.size()];
        let mut arriving = vec![None; self.comm.size()];
        for (peer, encoding) in receiving.into_iter().flatten().enumerate() {
            let rows = pick(part, incoming(part, peer), round, &mut self.picked).len();
            arriving[peer] = encoding.map(|e| (rows, e));
        }
        for peer in (0..self.comm.size()).filter(|&peer| peer != me) {
            let encoding = sending[peer].as_ref().ok_or_else(|| not_a_kernel(tag, peer))?;
            let write = |rows: &[u32]| store.encode_kept(peer, rows, encoding);
            sent[peer] = self.encode_one(tag, route, peer, round, width, encoding, write)?;
        }
        Ok(Messages::Kept { sent, receiving: arriving })
    }

    /// Encodes the message of `round` for `peer` by `write` (the store's encoding of the rows it
    /// is given by `encoding`: its length and what it measured) and accounts it in the stream's
    /// codec, with the time it took, and in the call's stats; returns its length.
    #[allow(clippy::too_many_arguments)] // the call, its peer and round, and the message.
    fn encode_one(
        &mut self,
        tag: Tag,
        route: Route,
        peer: usize,
        round: Round,
        width: usize,
        encoding: &Encoding,
        write: impl FnOnce(&[u32]) -> Result<(usize, Measured), StoreError>,
    ) -> Result<usize, ExchangeError> {
        let (part, exact) = (self.part, self.exact());
        let (outgoing, _) = lists(route);
        let list = outgoing(part, peer);
        let rows = pick(part, list, round, &mut self.picked);
        let count = rows.len();
        let id = StreamId { tag, route, peer, side: Side::Encode };
        let mut identity = IdentityCodec;
        let codec = Self::codec(&mut self.codecs, &mut identity, exact, part, id, list);
        let start = Instant::now();
        let kernel = codec.kernel().ok_or_else(|| not_a_kernel(tag, peer))?;
        let (len, measured) = write(rows).map_err(|source| ExchangeError::Store { tag, source })?;
        let spent = start.elapsed();
        kernel.sent(encoding, count, measured, spent);
        if !exact {
            let stats = CodecStats { codec_s: spent.as_secs_f64(), ..codec.take_stats() };
            self.record_sent(stats_key(tag, route), peer, count, width, len, stats);
        }
        Ok(len)
    }

    /// Sends the messages in `kept` store to store, told to the watch as a call of `kind`: the
    /// all-to-all is recorded in the ledger first (where an injected fault fires, before any
    /// byte moves), then the store posts them.
    fn post_kept(
        &self,
        tag: Tag,
        kind: CallKind,
        kept: &Messages,
        store: &mut dyn RowStore,
    ) -> Result<(), ExchangeError> {
        let Messages::Kept { sent, receiving } = kept else {
            let message = "host messages posted as kept ones".to_string();
            return Err(ExchangeError::Protocol { tag, message });
        };
        let phase = tag.phase();
        self.watch.inspect(|w| w.call_started(kind));
        let posted = self
            .comm
            .device_ledger(&phase)
            .and_then(|ledger| ledger.record_all_to_all_v(&phase, sent))
            .map_err(|source| ExchangeError::Comm { tag, source: Box::new(source) })
            .and_then(|()| {
                let incoming: Vec<_> = receiving.iter().map(|r| r.as_ref().map(|(rows, e)| (*rows, e))).collect();
                store.post_kept(&phase, &incoming).map_err(|source| ExchangeError::Store { tag, source })
            });
        self.watch.inspect(|w| w.call_finished());
        posted
    }

    /// [`ReplicaRouter::land`] by the store: each peer's message of `round` decoded onto its
    /// rows, peers ascending (the order the host's landing combines them in).
    #[allow(clippy::too_many_arguments)] // `land`'s, and the bytes that crossed.
    fn land_on_store(
        &mut self,
        tag: Tag,
        route: Route,
        store: &mut dyn RowStore,
        apply: Apply,
        arrived: Messages,
        round: Round,
        bus: &mut BusBytes,
    ) -> Result<(), ExchangeError> {
        let put = match apply {
            Apply::Overwrite => Put::Overwrite,
            Apply::Add => Put::Add,
            Apply::Max => {
                let message = "a maximum over replicas does not land on a row store".to_string();
                return Err(ExchangeError::Protocol { tag, message });
            }
        };
        let (me, width, part, pass, exact) = (self.comm.rank(), store.dim().1, self.part, self.pass, self.exact());
        let (_, incoming) = lists(route);
        let store_error = |source| ExchangeError::Store { tag, source };
        let mut identity = IdentityCodec;
        for peer in (0..self.comm.size()).filter(|&peer| peer != me) {
            let list = incoming(part, peer);
            let rows = pick(part, list, round, &mut self.picked);
            let id = StreamId { tag, route, peer, side: Side::Decode };
            let codec = Self::codec(&mut self.codecs, &mut identity, exact, part, id, list);
            let start = Instant::now();
            let kernel = codec.kernel().ok_or_else(|| not_a_kernel(tag, peer))?;
            match &arrived {
                Messages::Host(received) => {
                    let bytes = &received[peer];
                    let decode_error = |e: CodecError| protocol(tag, "decoding rows from", peer, &e);
                    let encoding = kernel.encoding(pass, rows.len()).map_err(decode_error)?;
                    // Checked here, so that a malformed message is the codec's error before a
                    // kernel reads it.
                    encoding.check(bytes, rows.len(), width).map_err(decode_error)?;
                    store.decode_rows(rows, &encoding, bytes, put).map_err(store_error)?;
                    kernel.received(pass, &encoding, bytes, width, start.elapsed());
                    bus.up += bytes.len() as u64;
                }
                Messages::Kept { receiving, .. } => {
                    let (_, encoding) = receiving[peer].as_ref().ok_or_else(|| not_a_kernel(tag, peer))?;
                    let mut bytes = Vec::new();
                    let copy = kernel.reads_arrivals(pass).then_some(&mut bytes);
                    store.decode_kept(peer, rows, encoding, put, copy).map_err(store_error)?;
                    kernel.received(pass, encoding, &bytes, width, start.elapsed());
                    bus.down += bytes.len() as u64;
                }
            }
            if !exact {
                self.record_spent(stats_key(tag, route), start.elapsed());
            }
        }
        if let Messages::Host(received) = arrived {
            self.spare.extend(received.into_iter().filter(|b| b.capacity() > 0));
        }
        Ok(())
    }
}
