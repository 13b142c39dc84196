//! Vertex-cut replica sync (CDFGNN, Alg. 1): every replica of a vertex aggregates over the edges
//! its worker stores; mirrors send their partial rows to the master, which combines them with
//! its own and scatters the result back, so every replica continues with the full value. With
//! [`ExchangeOptions::replica_cache`] the sum goes through CDFGNN's adaptive cache (Alg. 2,
//! `cached_sync`) instead, except the forward syncs it leaves uncached
//! ([`ReplicaCacheOptions::uncached_forward_layers`]).

use comm_hierarchy::Communicator;
use graph_partition::book::LocalGraph;
use ndarray::Array2;

use std::sync::Arc;

use cache_quant::state::{put_bytes, put_optional, restore_optional};
use cache_quant::{IdentityCodec, Pass, Route, StateError, StateReader, StatsTable, Stream};

use super::cached_sync::CachedSync;
use super::landing::Apply;
use super::replica_router::{ExchangeOptions, ReplicaCacheOptions, ReplicaRouter, SetupError};
use super::row_store::{BusBytes, RowStore};
use super::{Call, Exchange, ExchangeError, Footprint, Half, OnStore, Put, Tag};

/// The [`Exchange`] of a vertex-cut worker: `sum_replicas` and `max_replicas` are a gather to
/// the masters and a scatter back, two `all_to_all_v`s, each row through the codec. The master
/// adds its mirrors' rows in ascending rank order, so the sum is deterministic.
///
/// `pull_halo` and `push_halo_grad` do nothing: replicas hold identical rows after every sync,
/// and each replica's gradient share stays where it was produced until the next sync sums it.
pub struct VertexCutExchange<'a> {
    router: ReplicaRouter<'a>,
    /// The cache and which sums go through it.
    cache: Option<(CachedSync, ReplicaCacheOptions)>,
}

impl<'a> VertexCutExchange<'a> {
    /// The exchange of the worker holding `part` (a vertex-cut book's part for this rank).
    pub fn new(
        part: &'a LocalGraph,
        comm: &'a dyn Communicator,
        options: ExchangeOptions<'a>,
    ) -> Result<Self, SetupError> {
        let (cache, codecs) = (options.replica_cache.clone(), options.codecs.clone());
        let router = ReplicaRouter::new(part, comm, options)?;
        let cache = cache.map(|cache| {
            let codecs = codecs.unwrap_or_else(|| Arc::new(|_: &Stream| Box::new(IdentityCodec)));
            (CachedSync::new(part, &router.rows().send, codecs, cache.threshold.clone()), cache)
        });
        Ok(Self { router, cache })
    }

    fn sync(&mut self, tag: Tag, x: &mut Array2<f32>, combine: Apply) -> Result<(), ExchangeError> {
        self.router.route(tag, Route::ToPrimary, x, combine)?;
        self.router.route(tag, Route::ToCopies, x, Apply::Overwrite)
    }
}

impl Exchange for VertexCutExchange<'_> {
    fn begin(&mut self, pass: Pass) {
        self.router.begin(pass);
    }

    fn take_stats(&mut self) -> StatsTable {
        self.router.take_stats()
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        let mut section = Vec::new();
        self.router.save_state(&mut section)?;
        put_bytes(out, &section);
        put_optional(out, self.cache.as_ref(), |(cache, _), out| cache.save_state(out))?;
        Ok(())
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new("the vertex-cut exchange", bytes);
        self.router.restore_state(r.bytes("the router's codecs")?)?;
        let cache = r.optional("the replica cache")?;
        r.finish()?;
        let part = self.router.part();
        let mine = self.cache.as_mut().map(|(mine, _)| mine);
        restore_optional("the replica cache", mine, cache, |mine, saved| mine.restore_state(part, saved))
    }

    fn codec_name(&self) -> String {
        match &self.cache {
            Some((cache, _)) => cache.codec_name(),
            None => self.router.codec_name(),
        }
    }

    /// A sync reads every replicated row (masters with mirrors, and mirrors) and overwrites
    /// them all with the combined rows.
    fn footprint(&self, call: Call) -> Footprint<'_> {
        let both = &self.router.rows().both;
        match call {
            Call::Sum | Call::Max => Footprint { reads: both, writes: both, put: Put::Overwrite, zeroes_from: None },
            Call::Pull | Call::Push => Footprint::NONE,
        }
    }

    /// A sum outside the replica cache; maxima stay on host rows.
    fn on_store(&mut self) -> Option<&mut dyn OnStore> {
        Some(self)
    }

    fn pull_halo(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn push_halo_grad(&mut self, _tag: Tag, _g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn sum_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        match &mut self.cache {
            Some((cache, options)) if options.caches(tag) && !self.router.exact() => {
                cache.sum(&mut self.router, tag, x)
            }
            _ => self.sync(tag, x, Apply::Add),
        }
    }

    fn max_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.sync(tag, x, Apply::Max)
    }
}

impl OnStore for VertexCutExchange<'_> {
    fn codes_on_store(&mut self, call: Call, tag: Tag) -> bool {
        let cached = self.cache.as_ref().is_some_and(|(_, options)| options.caches(tag));
        call == Call::Sum
            && !cached
            && self.router.codes_on_store(tag, Route::ToPrimary)
            && self.router.codes_on_store(tag, Route::ToCopies)
    }

    /// The sum's gather to the masters and scatter back, each message encoded and landed by
    /// the store.
    fn call_on_store(
        &mut self,
        call: Call,
        half: Half,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<BusBytes, ExchangeError> {
        if (call, half) != (Call::Sum, Half::Whole) {
            let message = format!("{call:?} ({half:?}) does not run on a row store");
            return Err(ExchangeError::Protocol { tag, message });
        }
        let mut bus = self.router.route_on_store(tag, Route::ToPrimary, store, Apply::Add)?;
        bus += self.router.route_on_store(tag, Route::ToCopies, store, Apply::Overwrite)?;
        Ok(bus)
    }
}

#[cfg(test)]
mod tests {
    use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};

    use super::super::replica_router::testkit;
    use super::*;
    use crate::exchange::{Direction, Step};

    const WIDTH: usize = 2;

    fn book() -> graph_partition::book::PartitionBook {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        testkit::book(&partition_graph(&testkit::graph(), &config).unwrap())
    }

    /// What replica `part` of vertex `global` contributes in column `col`.
    fn share(part: usize, global: u32, col: usize) -> f32 {
        ((part + 1) * (global as usize + 1)) as f32 + 0.25 * col as f32
    }

    /// Every replica's share of every vertex, and which parts hold each vertex.
    fn holders(book: &graph_partition::book::PartitionBook) -> Vec<Vec<usize>> {
        let mut holders = vec![Vec::new(); 12];
        for p in book.parts() {
            p.local_to_global().iter().for_each(|&g| holders[g as usize].push(p.part()));
        }
        holders
    }

    fn shares(part: &LocalGraph) -> Array2<f32> {
        Array2::from_shape_fn((part.num_local(), WIDTH), |(l, c)| share(part.part(), part.local_to_global()[l], c))
    }

    #[test]
    fn sum_and_max_give_every_replica_the_combined_row() {
        let book = book();
        let holders = holders(&book);
        assert!(holders.iter().any(|h| h.len() > 1), "the test cut must replicate some vertex");
        testkit::run(&book, |part, comm| {
            let mut ex = VertexCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            let mut sum = shares(part);
            ex.sum_replicas(Tag::new(0, Direction::Forward, Step::Aggregate), &mut sum).map_err(|e| e.to_string())?;
            let mut max = shares(part);
            ex.max_replicas(Tag::new(0, Direction::Forward, Step::AttentionMax), &mut max)
                .map_err(|e| e.to_string())?;
            for (l, &g) in part.local_to_global().iter().enumerate() {
                for c in 0..WIDTH {
                    let all = holders[g as usize].iter().map(|&p| share(p, g, c));
                    assert_eq!(sum[[l, c]], all.clone().sum::<f32>(), "part {} vertex {g}", part.part());
                    assert_eq!(max[[l, c]], all.fold(f32::MIN, f32::max), "part {} vertex {g}", part.part());
                }
            }
            // Replicas are consistent after a sync, so halo pulls and pushes have nothing to do.
            let before = sum.clone();
            ex.pull_halo(Tag::new(1, Direction::Forward, Step::Halo), &mut sum).map_err(|e| e.to_string())?;
            ex.push_halo_grad(Tag::new(1, Direction::Backward, Step::Halo), &mut sum).map_err(|e| e.to_string())?;
            assert_eq!(sum, before);
            Ok(())
        });
    }

    #[test]
    fn a_sync_is_a_gather_and_a_scatter_over_the_mirror_lists() {
        let book = book();
        let ledgers = testkit::run(&book, |part, comm| {
            let mut ex = VertexCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            ex.sum_replicas(Tag::new(2, Direction::Backward, Step::Aggregate), &mut shares(part))
                .map_err(|e| e.to_string())?;
            Ok(comm.ledger())
        });
        let merged = comm_hierarchy::LedgerSnapshot::merge_all(&ledgers).unwrap();
        for p in book.parts() {
            for q in 0..4 {
                // p's mirrors mastered on q go to q, and p's masters mirrored on q come back to q.
                let rows = p.recv(q).len() + p.send(q).len();
                assert_eq!(merged.bytes_between(p.part(), q), (rows * WIDTH * 4) as u64, "{} -> {q}", p.part());
            }
        }
        assert_eq!(merged.phases().into_iter().collect::<Vec<_>>(), vec!["bwd/2"]);
        assert_eq!(merged.phase_totals("bwd/2").messages(), 2 * 4 * 3);
    }
}

#[cfg(test)]
mod cache_tests {
    use std::collections::HashMap;

    use cache_quant::{CodecStats, Knob, LinearQuant};
    use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};

    use super::super::replica_router::testkit;
    use super::*;
    use crate::exchange::{Direction, Step};

    const WIDTH: usize = 5;

    fn shares(part: &LocalGraph, scale: f32) -> Array2<f32> {
        Array2::from_shape_fn((part.num_local(), WIDTH), |(l, c)| {
            let g = part.local_to_global()[l] as f32;
            scale * ((part.part() as f32 + 1.0) * (g + 1.0) + 0.3 * c as f32 * c as f32)
        })
    }

    /// What the ledger counted over both syncs, and the row masks one sync sends.
    struct Bytes {
        ledger: u64,
        masks: u64,
    }

    /// Two cached syncs of every part's shares (the second scaled by `second`) with `bits`
    /// (0: exact deltas); per part: (global id, first row, second row) and each sync's stats.
    #[allow(clippy::type_complexity)]
    fn two_syncs(
        bits: u8,
        eps: f32,
        second: f32,
    ) -> (Vec<(usize, u32, Vec<f32>, Vec<f32>)>, CodecStats, CodecStats, Bytes) {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        let book = testkit::book(&partition_graph(&testkit::graph(), &config).unwrap());
        let results = testkit::run(&book, |part, comm| {
            let codecs: cache_quant::CodecFactory = Arc::new(move |_: &Stream| match bits {
                0 => Box::new(IdentityCodec),
                b => Box::new(LinearQuant::new(b).unwrap()),
            });
            let replica_cache = Some(ReplicaCacheOptions::every_layer(Knob::new(eps)));
            let options = ExchangeOptions { codecs: Some(codecs), replica_cache, ..Default::default() };
            let mut ex = VertexCutExchange::new(part, comm, options).map_err(|e| e.to_string())?;
            ex.begin(Pass::train(1, 0));
            let tag = Tag::new(0, Direction::Forward, Step::Aggregate);
            let mut first = shares(part, 1.0);
            ex.sum_replicas(tag, &mut first).map_err(|e| e.to_string())?;
            let s1 = ex.take_stats().total();
            let mut again = shares(part, second);
            ex.sum_replicas(tag, &mut again).map_err(|e| e.to_string())?;
            let s2 = ex.take_stats().total();
            let rows = part
                .local_to_global()
                .iter()
                .enumerate()
                .map(|(l, &g)| (part.part(), g, first.row(l).to_vec(), again.row(l).to_vec()))
                .collect::<Vec<_>>();
            Ok((rows, s1, s2, comm.ledger()))
        });
        let (mut rows, mut s1, mut s2, mut ledgers) =
            (Vec::new(), CodecStats::default(), CodecStats::default(), Vec::new());
        for (r, a, b, l) in results {
            rows.extend(r);
            s1.add(&a);
            s2.add(&b);
            ledgers.push(l);
        }
        let ledger = comm_hierarchy::LedgerSnapshot::merge_all(&ledgers).unwrap().totals();
        // Each message starts with one bit per row of its list, both ways.
        let masks = book
            .parts()
            .iter()
            .flat_map(|p| (0..4).map(move |q| (p.send(q).len().div_ceil(8) + p.recv(q).len().div_ceil(8)) as u64))
            .sum();
        (rows, s1, s2, Bytes { ledger: ledger.bytes(), masks })
    }

    /// Per vertex, the parts holding it (from the rows of a run, one per replica).
    fn holders(rows: &[(usize, u32, Vec<f32>, Vec<f32>)]) -> HashMap<u32, Vec<usize>> {
        let mut holders: HashMap<u32, Vec<usize>> = HashMap::new();
        rows.iter().for_each(|(p, g, _, _)| holders.entry(*g).or_default().push(*p));
        holders
    }

    #[test]
    fn at_eps_zero_exact_deltas_sum_like_the_exact_sync_and_unmoved_rows_stay_home() {
        let (rows, s1, s2, bytes) = two_syncs(0, 0.0, 1.0);
        // The ledger's count is the analytic one: masks, then 4 bytes per value of a sent row.
        let sent = s1.rows - s1.rows_skipped + s2.rows - s2.rows_skipped;
        assert_eq!(bytes.ledger, 2 * bytes.masks + sent * (WIDTH as u64) * 4);
        assert_eq!(bytes.ledger, s1.bytes + s2.bytes);
        let holders = holders(&rows);
        assert!(holders.values().any(|h| h.len() > 1), "the test cut must replicate some vertex");
        for (_, g, first, again) in &rows {
            for (c, (&got, &twice)) in first.iter().zip(again).enumerate() {
                let share = |p: usize| (p as f32 + 1.0) * (*g as f32 + 1.0) + 0.3 * (c * c) as f32;
                let want: f32 = holders[g].iter().map(|&p| share(p)).sum();
                assert!((got - want).abs() <= 1e-5 * want.abs(), "vertex {g}: {got} vs {want}");
                assert_eq!(got.to_bits(), twice.to_bits(), "vertex {g}: an unmoved row keeps its cached sum");
            }
        }
        assert_eq!((s1.rows_skipped, s1.rows > 0), (0, true));
        assert_eq!(s2.rows_skipped, s2.rows, "nothing moved, so nothing is sent");
        // Only the row masks travel: one bit per row.
        assert!(s2.bytes < s1.bytes / 20, "{} vs {}", s2.bytes, s1.bytes);
    }

    /// With the first layer's forward sync left uncached, that sync is the exact one (the same
    /// bits, every row every call, the same bytes: no row masks), while deeper layers and the
    /// first layer's backward sync still skip the rows that did not move.
    #[test]
    fn an_uncached_first_layer_syncs_exactly_while_the_rest_is_cached() {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        let book = testkit::book(&partition_graph(&testkit::graph(), &config).unwrap());
        let counts = testkit::run(&book, |part, comm| {
            let cache =
                ReplicaCacheOptions { uncached_forward_layers: 1, ..ReplicaCacheOptions::every_layer(Knob::new(0.5)) };
            let options = ExchangeOptions { replica_cache: Some(cache), ..Default::default() };
            let mut cached = VertexCutExchange::new(part, comm, options).map_err(|e| e.to_string())?;
            let mut exact =
                VertexCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            cached.begin(Pass::train(1, 0));
            exact.begin(Pass::train(1, 0));
            let first = Tag::new(0, Direction::Forward, Step::Aggregate);
            // A 10% move is under the 0.5 threshold: a cached sync would send nothing the second time.
            for scale in [1.0, 1.1] {
                let (mut a, mut b) = (shares(part, scale), shares(part, scale));
                cached.sum_replicas(first, &mut a).map_err(|e| e.to_string())?;
                exact.sum_replicas(first, &mut b).map_err(|e| e.to_string())?;
                let bits = |x: &Array2<f32>| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "part {} scale {scale}", part.part());
            }
            let (mine, vanilla) =
                (cached.take_stats().without_times().total(), exact.take_stats().without_times().total());
            assert_eq!(mine, vanilla, "the uncached sync sends what the exact one sends");
            assert_eq!(mine.rows_skipped, 0);
            let mut skipped = Vec::new();
            for tag in
                [Tag::new(1, Direction::Forward, Step::Aggregate), Tag::new(0, Direction::Backward, Step::Aggregate)]
            {
                for scale in [1.0, 1.1] {
                    cached.sum_replicas(tag, &mut shares(part, scale)).map_err(|e| e.to_string())?;
                }
                let stats = cached.take_stats().total();
                skipped.push((stats.rows, stats.rows_skipped));
            }
            Ok(skipped)
        });
        let (mut rows, mut skipped) = (0, 0);
        for (r, s) in counts.into_iter().flatten() {
            rows += r;
            skipped += s;
        }
        // Each cached sync point sends every row once (the cache starts empty), then none.
        assert!(rows > 0);
        assert_eq!(2 * skipped, rows, "{skipped} of {rows}");
    }

    #[test]
    fn quantized_deltas_leave_every_replica_bit_identical() {
        for bits in [2, 8] {
            let (rows, s1, s2, bytes) = two_syncs(bits, 0.05, 1.5);
            // Masks, then per sent row its minimum and maximum and WIDTH values of `bits` bits.
            let sent = s1.rows - s1.rows_skipped + s2.rows - s2.rows_skipped;
            let row_bytes = 8 + (WIDTH * usize::from(bits)).div_ceil(8) as u64;
            assert_eq!(bytes.ledger, 2 * bytes.masks + sent * row_bytes);
            for (_, g, first, again) in &rows {
                for (_, h, f, a) in &rows {
                    if h == g {
                        assert_eq!(
                            f.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            first.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                        );
                        assert_eq!(
                            a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                            again.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                        );
                    }
                }
            }
            assert_eq!(s1.bits[usize::from(bits)], s1.rows - s1.rows_skipped);
            assert!(s2.rows_skipped < s2.rows, "a 50% move passes a 5% threshold");
        }
    }

    /// Once the cache is bypassed (and the codecs send exact rows), every sum is the exact
    /// sync's, bit for bit and byte for byte, whatever the cache held before.
    #[test]
    fn a_bypassed_cache_syncs_like_the_exact_sync() {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        let book = testkit::book(&partition_graph(&testkit::graph(), &config).unwrap());
        testkit::run(&book, |part, comm| {
            let exact_rows = Knob::new(false);
            let quantized: cache_quant::CodecFactory = Arc::new(|_: &Stream| Box::new(LinearQuant::new(4).unwrap()));
            let codecs = cache_quant::PaysOrExact::over(quantized, exact_rows.clone());
            let cache = ReplicaCacheOptions::every_layer(Knob::new(0.05));
            let bypass = cache.bypass.clone();
            let options = ExchangeOptions { codecs: Some(codecs), replica_cache: Some(cache), ..Default::default() };
            let mut cached = VertexCutExchange::new(part, comm, options).map_err(|e| e.to_string())?;
            let mut exact =
                VertexCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            cached.begin(Pass::train(1, 0));
            exact.begin(Pass::train(1, 0));
            let tag = Tag::new(1, Direction::Forward, Step::Aggregate);
            cached.sum_replicas(tag, &mut shares(part, 1.0)).map_err(|e| e.to_string())?;
            let through = cached.take_stats().total();
            assert!(through.rows > 0 && through.bytes < through.exact_bytes, "the cache's quantized deltas");
            bypass.set(true);
            exact_rows.set(true);
            let bits = |x: &Array2<f32>| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            for scale in [1.01, 1.3] {
                let (mut a, mut b) = (shares(part, scale), shares(part, scale));
                cached.sum_replicas(tag, &mut a).map_err(|e| e.to_string())?;
                exact.sum_replicas(tag, &mut b).map_err(|e| e.to_string())?;
                assert_eq!(bits(&a), bits(&b), "part {} scale {scale}", part.part());
            }
            assert_eq!(cached.take_stats().without_times(), exact.take_stats().without_times());
            Ok(())
        });
    }
}
