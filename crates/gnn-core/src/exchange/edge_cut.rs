//! Edge-cut halo exchange: a worker owns some vertices and stores their in-edges; the remote
//! in-neighbours it reads (its halo) are fetched from their owners before each aggregation, and
//! the gradients of those rows are sent back and summed at the owners in backward.

use comm_hierarchy::Communicator;
use graph_partition::book::LocalGraph;
use ndarray::Array2;

use cache_quant::{Pass, Route, StateError, StatsTable};

use super::landing::Apply;
use super::replica_router::{ExchangeOptions, ReplicaRouter, SetupError};
use super::row_store::{BusBytes, RowStore};
use super::{Call, Exchange, ExchangeError, Footprint, Half, OnStore, Put, Tag};
use crate::dense::release_rows_from;

/// The [`Exchange`] of an edge-cut worker: one `all_to_all_v` per `pull_halo` and per
/// `push_halo_grad`, each row through the codec; with `overlap`, both are split so that the
/// layers compute meanwhile.
///
/// `sum_replicas` and `max_replicas` do nothing: only a vertex's owner stores its in-edges, so
/// its aggregate is already complete there (halo rows aggregate nothing).
pub struct EdgeCutExchange<'a> {
    router: ReplicaRouter<'a>,
    overlap: bool,
}

impl<'a> EdgeCutExchange<'a> {
    /// The exchange of the worker holding `part` (an edge-cut book's part for this rank).
    pub fn new(
        part: &'a LocalGraph,
        comm: &'a dyn Communicator,
        options: ExchangeOptions<'a>,
    ) -> Result<Self, SetupError> {
        let overlap = options.overlap;
        Ok(Self { router: ReplicaRouter::new(part, comm, options)?, overlap })
    }
}

impl Exchange for EdgeCutExchange<'_> {
    fn begin(&mut self, pass: Pass) {
        self.router.begin(pass);
    }

    fn pull_halo(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.router.route(tag, Route::ToCopies, x, Apply::Overwrite)
    }

    fn push_halo_grad(&mut self, tag: Tag, g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.router.route(tag, Route::ToPrimary, g, Apply::Add)?;
        release_rows_from(g, self.router.part().num_primary());
        Ok(())
    }

    /// A pull reads the primaries it sends and overwrites the halo; a push reads the halo, adds
    /// into the primaries and releases the halo rows.
    fn footprint(&self, call: Call) -> Footprint<'_> {
        let rows = self.router.rows();
        match call {
            Call::Pull => Footprint { reads: &rows.send, writes: &rows.recv, put: Put::Overwrite, zeroes_from: None },
            Call::Push => Footprint {
                reads: &rows.recv,
                writes: &rows.send,
                put: Put::Add,
                zeroes_from: Some(self.router.part().num_primary()),
            },
            Call::Sum | Call::Max => Footprint::NONE,
        }
    }

    fn overlaps(&self) -> bool {
        self.overlap
    }

    fn on_store(&mut self) -> Option<&mut dyn OnStore> {
        Some(self)
    }

    fn start_pull(&mut self, tag: Tag, x: &Array2<f32>) -> Result<(), ExchangeError> {
        self.router.start(tag, Route::ToCopies, x)
    }

    fn finish_pull(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.router.finish(tag, x, Apply::Overwrite)
    }

    fn start_push(&mut self, tag: Tag, g: &Array2<f32>) -> Result<(), ExchangeError> {
        self.router.start(tag, Route::ToPrimary, g)
    }

    fn finish_push(&mut self, tag: Tag, g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.router.finish(tag, g, Apply::Add)?;
        release_rows_from(g, self.router.part().num_primary());
        Ok(())
    }

    fn take_stats(&mut self) -> StatsTable {
        self.router.take_stats()
    }

    fn save_state(&self, out: &mut Vec<u8>) -> Result<(), StateError> {
        self.router.save_state(out)
    }

    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        self.router.restore_state(bytes)
    }

    fn codec_name(&self) -> String {
        self.router.codec_name()
    }

    fn sum_replicas(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn max_replicas(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }
}

impl OnStore for EdgeCutExchange<'_> {
    fn codes_on_store(&mut self, call: Call, tag: Tag) -> bool {
        match call {
            Call::Pull => self.router.codes_on_store(tag, Route::ToCopies),
            Call::Push => self.router.codes_on_store(tag, Route::ToPrimary),
            Call::Sum | Call::Max => false,
        }
    }

    /// A pull's messages encoded from the primaries and landed over the halo rows; a push's
    /// encoded from the halo rows and added into the primaries, whose halo rows it then zeroes.
    fn call_on_store(
        &mut self,
        call: Call,
        half: Half,
        tag: Tag,
        store: &mut dyn RowStore,
    ) -> Result<BusBytes, ExchangeError> {
        let (route, apply) = match call {
            Call::Pull => (Route::ToCopies, Apply::Overwrite),
            Call::Push => (Route::ToPrimary, Apply::Add),
            Call::Sum | Call::Max => return Ok(BusBytes::default()),
        };
        let bus = match half {
            Half::Whole => self.router.route_on_store(tag, route, store, apply)?,
            Half::Start => return self.router.start_on_store(tag, route, store),
            Half::Finish => self.router.finish_on_store(tag, store, apply)?,
        };
        if call == Call::Push {
            let from = self.router.part().num_primary();
            store.zero_rows_from(from).map_err(|source| ExchangeError::Store { tag, source })?;
        }
        Ok(bus)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cache_quant::{Codec, CodecError, IdentityCodec, Stream};
    use comm_hierarchy::{Communicator, LinkClass, LinkModel, LocalCluster, Topology};
    use graph_partition::partition::Partition;

    use super::super::replica_router::testkit;
    use super::*;
    use crate::exchange::{Direction, Step};

    const WIDTH: usize = 3;

    fn partition() -> Partition {
        Partition::EdgeCut { parts: 4, owner: vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3] }
    }

    fn value(global: u32, col: usize) -> f32 {
        global as f32 * 10.0 + col as f32
    }

    fn tag(dir: Direction) -> Tag {
        Tag::new(1, dir, Step::Halo)
    }

    #[test]
    fn pull_fills_halo_rows_with_owner_rows_and_counts_exact_bytes() {
        let book = testkit::book(&partition());
        let runs = testkit::run(&book, |part, comm| {
            let mut x = Array2::from_elem((part.num_local(), WIDTH), f32::NAN);
            for l in 0..part.num_primary() {
                x.row_mut(l).iter_mut().enumerate().for_each(|(c, v)| *v = value(part.local_to_global()[l], c));
            }
            let mut ex = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            ex.pull_halo(tag(Direction::Forward), &mut x).map_err(|e| e.to_string())?;
            for (l, &g) in part.local_to_global().iter().enumerate() {
                for c in 0..WIDTH {
                    assert_eq!(x[[l, c]], value(g, c), "part {} local {l}", part.part());
                }
            }
            Ok((comm.ledger(), ex.take_stats().total()))
        });
        let (ledgers, stats): (Vec<_>, Vec<_>) = runs.into_iter().unzip();
        let merged = comm_hierarchy::LedgerSnapshot::merge_all(&ledgers).unwrap();
        let topology = Topology::for_workers(4, 2, LinkModel::default()).unwrap();
        let (mut intra, mut inter) = (0, 0);
        for p in book.parts() {
            for q in 0..4 {
                let bytes = (p.send(q).len() * WIDTH * 4) as u64;
                assert_eq!(merged.bytes_between(p.part(), q), bytes);
                match topology.link_class(p.part(), q) {
                    Some(LinkClass::Inter) => inter += bytes,
                    Some(LinkClass::Intra) => intra += bytes,
                    None => {}
                }
            }
        }
        let totals = merged.phase_totals("fwd/1");
        assert!(inter > 0, "the test graph must cross hosts");
        assert_eq!((totals.bytes_intra, totals.bytes_inter), (intra, inter));
        assert_eq!(totals.messages(), 4 * 3, "one message per ordered pair, empty ones included");
        // The codec stats split the bytes by link class as the ledger does, and time the calls.
        let mut sum = cache_quant::CodecStats::default();
        stats.iter().for_each(|s| sum.add(s));
        assert_eq!((sum.bytes, sum.exact_bytes), (intra + inter, intra + inter));
        assert_eq!((sum.inter_bytes, sum.inter_exact_bytes), (inter, inter));
        assert!(stats.iter().all(|s| s.codec_s > 0.0), "every worker encoded and decoded");
    }

    #[test]
    fn column_major_blocks_are_exchanged_like_row_major_ones() {
        use ndarray::ShapeBuilder;
        let book = testkit::book(&partition());
        testkit::run(&book, |part, comm| {
            let mut x = Array2::from_elem((part.num_local(), WIDTH).f(), -1.0f32);
            for l in 0..part.num_primary() {
                x.row_mut(l).iter_mut().enumerate().for_each(|(c, v)| *v = value(part.local_to_global()[l], c));
            }
            let mut ex = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            ex.pull_halo(tag(Direction::Forward), &mut x).map_err(|e| e.to_string())?;
            let expected = Array2::from_shape_fn(x.dim(), |(l, c)| value(part.local_to_global()[l], c));
            assert_eq!(x, expected, "part {}", part.part());
            Ok(())
        });
    }

    #[test]
    fn push_sums_halo_gradients_at_owners_and_zeroes_halo_rows() {
        let book = testkit::book(&partition());
        testkit::run(&book, |part, comm| {
            let mut g = Array2::from_elem((part.num_local(), WIDTH), 1.0f32);
            let mut ex = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            ex.push_halo_grad(tag(Direction::Backward), &mut g).map_err(|e| e.to_string())?;
            for l in 0..part.num_local() {
                let expected = if part.is_primary(l) { 1.0 + part.copies_of(l).len() as f32 } else { 0.0 };
                assert!(g.row(l).iter().all(|&v| v == expected), "part {} local {l}: {:?}", part.part(), g.row(l));
            }
            // Replica syncs are no-ops under an edge-cut.
            let before = g.clone();
            ex.sum_replicas(tag(Direction::Forward), &mut g).map_err(|e| e.to_string())?;
            ex.max_replicas(tag(Direction::Forward), &mut g).map_err(|e| e.to_string())?;
            assert_eq!(g, before);
            Ok(())
        });
    }

    #[test]
    fn wrong_row_count_is_a_shape_error_before_any_traffic() {
        let book = testkit::book(&partition());
        testkit::run(&book, |part, comm| {
            let mut ex = EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
            let mut x = Array2::zeros((part.num_local() + 1, 2));
            let err = ex.pull_halo(tag(Direction::Forward), &mut x).unwrap_err();
            assert!(matches!(err, ExchangeError::Shape { rows, .. } if rows == part.num_local() + 1), "{err}");
            assert!(comm.ledger().totals().messages() == 0);
            Ok(())
        });
    }

    #[test]
    fn a_part_on_the_wrong_rank_is_refused() {
        let book = testkit::book(&partition());
        let topology = Topology::for_workers(4, 2, LinkModel::default()).unwrap();
        LocalCluster::run(&topology, |comm| {
            let other = &book.parts()[(comm.rank() + 1) % 4];
            let err =
                EdgeCutExchange::new(other, comm, ExchangeOptions::default()).err().expect("mismatch must be refused");
            assert_eq!(err.rank, comm.rank());
            assert!(err.to_string().contains(&format!("rank {}", comm.rank())), "{err}");
            Ok::<_, String>(())
        })
        .unwrap();
    }

    /// Drops the last byte of every message it encodes.
    struct Truncating;

    impl Codec for Truncating {
        fn name(&self) -> String {
            "truncating".into()
        }
        fn encode(&mut self, pass: Pass, rows: &[f32], width: usize, out: &mut Vec<u8>) -> Result<(), CodecError> {
            IdentityCodec.encode(pass, rows, width, out)?;
            out.pop();
            Ok(())
        }
        fn decode(&mut self, pass: Pass, bytes: &[u8], width: usize, out: &mut [f32]) -> Result<(), CodecError> {
            IdentityCodec.decode(pass, bytes, width, out)
        }
    }

    #[test]
    fn a_malformed_message_is_a_protocol_error_naming_the_peer() {
        let book = testkit::book(&partition());
        testkit::run(&book, |part, comm| {
            let mut ex = EdgeCutExchange::new(
                part,
                comm,
                ExchangeOptions {
                    codecs: Some(Arc::new(|_: &Stream| Box::new(Truncating))),
                    ..ExchangeOptions::default()
                },
            )
            .map_err(|e| e.to_string())?;
            let mut x = Array2::zeros((part.num_local(), 2));
            match ex.pull_halo(tag(Direction::Forward), &mut x) {
                Ok(()) => assert!((0..4).all(|p| part.recv(p).is_empty()), "part {} has halo rows", part.part()),
                Err(err) => {
                    let msg = err.to_string();
                    assert!(msg.contains("fwd/1/halo") && msg.contains("decoding rows from rank"), "{msg}");
                }
            }
            Ok(())
        });
    }
}
