//! The vertex-cut `sum_replicas` through CDFGNN's adaptive cache (Alg. 2): mirrors send the
//! deltas of the partials that moved past the threshold, masters fold them and their own into
//! the cached sums and send back the deltas of the sums that changed. The state and wire format
//! are [`cache_quant::ReplicaCache`]; this module moves its messages: one `all_to_all_v`
//! mirror -> master and one back, like the exact sync, each message through the stack's codecs.
//!
//! Training passes only: evaluation passes sync exactly (unless `lossy_eval`), leaving the
//! cache alone. Only replicated vertices are cached; a vertex with no mirror keeps its exact
//! partial, since caching it would save no message.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use cache_quant::state::{put_bytes, put_tag};
use cache_quant::{
    CodecBank, CodecError, CodecFactory, CodecStats, Knob, ReplicaCache, Route, Side, StateError, StateReader, StreamId,
};
use graph_partition::book::LocalGraph;
use ndarray::Array2;

use super::replica_router::{ReplicaRouter, row_major, stats_key, stream_rows};
use super::{ExchangeError, Tag};

/// The cache of every sync point of one worker.
pub(crate) struct CachedSync {
    threshold: Knob<f32>,
    codecs: CodecBank,
    /// Per encoding stream, the receiver's decoder run on our own payload.
    shadows: CodecBank,
    caches: HashMap<Tag, ReplicaCache>,
    /// Local ids of the masters that have mirrors.
    masters: Vec<u32>,
    /// Those and the mirrors: every row the sync overwrites with its cached value.
    replicated: Vec<u32>,
}

impl CachedSync {
    /// The cache of the worker holding `part`, whose masters with mirrors are `masters` (the
    /// router's `RowSets::send`).
    pub(crate) fn new(part: &LocalGraph, masters: &[u32], codecs: CodecFactory, threshold: Knob<f32>) -> Self {
        let masters = masters.to_vec();
        let mirrors = part.num_primary() as u32..part.num_local() as u32;
        let replicated = masters.iter().copied().chain(mirrors).collect();
        Self {
            threshold,
            codecs: CodecBank::new(Arc::clone(&codecs)),
            shadows: CodecBank::new(codecs),
            caches: HashMap::new(),
            masters,
            replicated,
        }
    }

    pub(crate) fn codec_name(&self) -> String {
        format!("replica-cache({})", self.codecs.codec_name())
    }

    /// Appends both banks' codec states and every sync point's cache, in key order.
    pub(crate) fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        let mut section = Vec::new();
        for bank in [&self.codecs, &self.shadows] {
            section.clear();
            bank.save_state(&mut section)?;
            put_bytes(out, &section);
        }
        let mut tags: Vec<&Tag> = self.caches.keys().collect();
        tags.sort();
        out.extend((tags.len() as u64).to_le_bytes());
        for tag in tags {
            put_tag(out, *tag);
            section.clear();
            self.caches[tag].save_state(&mut section);
            put_bytes(out, &section);
        }
        Ok(())
    }

    /// Restores what [`CachedSync::save_state`] saved for the worker of `part`.
    pub(crate) fn restore_state(&mut self, part: &LocalGraph, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the replica cache sync", bytes);
        self.codecs.restore_state(r.bytes("the codecs")?, |id| stream_rows(part, id))?;
        // A shadow is the receiver's decoder run on the rows this end encodes.
        let encoded = |id: StreamId| stream_rows(part, StreamId { side: Side::Encode, ..id });
        self.shadows.restore_state(r.bytes("the shadow decoders")?, encoded)?;
        let count = r.u64("the sync point count")?;
        let mut caches = HashMap::new();
        for _ in 0..count {
            let tag = r.tag()?;
            let cache = ReplicaCache::restored(part.num_local(), r.bytes("a replica cache")?)
                .map_err(|e| e.context(format_args!("sync point {tag}")))?;
            caches.insert(tag, cache);
        }
        r.finish()?;
        self.caches = caches;
        Ok(())
    }

    /// Every replica of a vertex ends with the cached sum of all replicas' rows of `x`.
    pub(crate) fn sum(
        &mut self,
        router: &mut ReplicaRouter,
        tag: Tag,
        x: &mut Array2<f32>,
    ) -> Result<(), ExchangeError> {
        let (part, pass, eps, width) = (router.part(), router.pass(), self.threshold.get(), x.ncols());
        let data = row_major(x);
        let Self { codecs, shadows, caches, masters, replicated, .. } = self;
        let cache = caches.entry(tag).or_insert_with(|| ReplicaCache::new(part.num_local(), width));
        let fail = |what: &str, peer: Option<usize>, e: CodecError| {
            let at = peer.map_or(String::new(), |p| format!(" rank {p}"));
            ExchangeError::Protocol { tag, message: format!("{what}{at}: {e}") }
        };
        cache.check(data).map_err(|e| fail("the replica cache", None, e))?;
        let me = part.part();
        let peers = || (0..part.num_parts()).filter(move |&p| p != me);
        let globals = |rows: &[u32]| rows.iter().map(|&l| part.local_to_global()[l as usize]).collect::<Arc<[u32]>>();
        let id = |route, peer, side| StreamId { tag, route, peer, side };

        // Each message's encoding and the landing of each route's arrivals count as the codec
        // time of their route (the cache's bookkeeping with its codecs' calls), the posts not.
        let (to_primary, to_copies) = (stats_key(tag, Route::ToPrimary), stats_key(tag, Route::ToCopies));

        // Mirrors -> masters: the deltas of the partials that moved.
        let mut messages = vec![Vec::new(); part.num_parts()];
        for peer in peers() {
            let (rows, start) = (part.recv(peer), Instant::now());
            let codec = codecs.get(id(Route::ToPrimary, peer, Side::Encode), || globals(rows));
            let shadow = shadows.get(id(Route::ToPrimary, peer, Side::Decode), || globals(rows));
            let stats = cache
                .send_deltas(pass, eps, rows, data, codec, shadow, &mut messages[peer])
                .map_err(|e| fail("encoding deltas for", Some(peer), e))?;
            let stats = CodecStats { codec_s: start.elapsed().as_secs_f64(), ..stats };
            router.record_sent(to_primary, peer, rows.len(), width, messages[peer].len(), stats);
        }
        let received = router.post(tag, messages)?;
        let start = Instant::now();
        for peer in peers() {
            let rows = part.send(peer);
            let codec = codecs.get(id(Route::ToPrimary, peer, Side::Decode), || globals(rows));
            cache
                .absorb_deltas(pass, rows, &received[peer], codec)
                .map_err(|e| fail("decoding deltas from", Some(peer), e))?;
        }
        cache.absorb_own(eps, masters, data).map_err(|e| fail("the replica cache", None, e))?;
        router.record_spent(to_primary, start.elapsed());

        // Masters -> mirrors: the deltas of the cached sums that changed.
        let mut messages = vec![Vec::new(); part.num_parts()];
        for peer in peers() {
            let (rows, start) = (part.send(peer), Instant::now());
            let codec = codecs.get(id(Route::ToCopies, peer, Side::Encode), || globals(rows));
            let shadow = shadows.get(id(Route::ToCopies, peer, Side::Decode), || globals(rows));
            let stats = cache
                .send_sums(pass, rows, codec, shadow, &mut messages[peer])
                .map_err(|e| fail("encoding sums for", Some(peer), e))?;
            let stats = CodecStats { codec_s: start.elapsed().as_secs_f64(), ..stats };
            router.record_sent(to_copies, peer, rows.len(), width, messages[peer].len(), stats);
        }
        cache.commit_sums();
        let received = router.post(tag, messages)?;
        let start = Instant::now();
        for peer in peers() {
            let rows = part.recv(peer);
            let codec = codecs.get(id(Route::ToCopies, peer, Side::Decode), || globals(rows));
            cache
                .land_sums(pass, rows, &received[peer], codec)
                .map_err(|e| fail("decoding sums from", Some(peer), e))?;
        }
        cache.write_held(replicated, data).map_err(|e| fail("the replica cache", None, e))?;
        router.record_spent(to_copies, start.elapsed());
        Ok(())
    }
}
