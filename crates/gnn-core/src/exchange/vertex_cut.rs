//! Vertex-cut replica sync (CDFGNN, Alg. 1): every replica of a vertex aggregates over the edges
//! its worker stores; mirrors send their partial rows to the master, which combines them with
//! its own and scatters the result back, so every replica continues with the full value.

use comm_hierarchy::Communicator;
use graph_partition::book::LocalGraph;
use ndarray::Array2;

use cache_quant::{Pass, Route, StatsTable};

use super::replica_router::{Apply, ExchangeOptions, ReplicaRouter, SetupError};
use super::{Exchange, ExchangeError, Tag};

/// The [`Exchange`] of a vertex-cut worker: `sum_replicas` and `max_replicas` are a gather to
/// the masters and a scatter back, two `all_to_all_v`s, each row through the codec. The master
/// adds its mirrors' rows in ascending rank order, so the sum is deterministic.
///
/// `pull_halo` and `push_halo_grad` do nothing: replicas hold identical rows after every sync,
/// and each replica's gradient share stays where it was produced until the next sync sums it.
pub struct VertexCutExchange<'a> {
    router: ReplicaRouter<'a>,
}

impl<'a> VertexCutExchange<'a> {
    /// The exchange of the worker holding `part` (a vertex-cut book's part for this rank).
    pub fn new(
        part: &'a LocalGraph,
        comm: &'a dyn Communicator,
        options: ExchangeOptions<'a>,
    ) -> Result<Self, SetupError> {
        Ok(Self { router: ReplicaRouter::new(part, comm, options)? })
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

    fn codec_name(&self) -> String {
        self.router.codec_name()
    }

    fn pull_halo(&mut self, _tag: Tag, _x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn push_halo_grad(&mut self, _tag: Tag, _g: &mut Array2<f32>) -> Result<(), ExchangeError> {
        Ok(())
    }

    fn sum_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.sync(tag, x, Apply::Add)
    }

    fn max_replicas(&mut self, tag: Tag, x: &mut Array2<f32>) -> Result<(), ExchangeError> {
        self.sync(tag, x, Apply::Max)
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
