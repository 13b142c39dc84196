//! A worker's aggregation view of its partition-book part.

use graph_partition::book::{CutKind, LocalGraph};

use crate::graph::{AggGraph, GraphError};

/// The [`AggGraph`] of one part of a `cut` book: its local edges, its primaries (owned vertices
/// or masters) as the owned rows, and the *global* degrees, so that normalisation does not depend
/// on the split. Under edge-cut the copies are halo rows pulled from their owners
/// ([`AggGraph::with_pulled_halo`]); vertex-cut mirrors are computed like their masters.
pub fn agg_graph_of(part: &LocalGraph, cut: CutKind) -> Result<AggGraph, GraphError> {
    let degrees = |d: &[u32]| d.iter().map(|&d| d as f32).collect();
    // The part's adjacency is shared, not copied: a worker holds its edges once.
    let graph = AggGraph::new_shared(
        part.shared_csr(),
        part.num_primary(),
        part.local_to_global().to_vec(),
        degrees(part.global_in_degree()),
        degrees(part.global_out_degree()),
    )?;
    match cut {
        CutKind::EdgeCut => graph.with_pulled_halo(),
        CutKind::VertexCut | CutKind::FeatureCut => Ok(graph),
    }
}

/// The contract of the module docs of [`crate::exchange`], end to end: a model run on every part
/// with the distributed exchanges computes what it computes on the whole graph.
#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use comm_hierarchy::Communicator;
    use graph_partition::book::PartitionBook;
    use graph_partition::partition::{Algorithm, Partition, PartitionConfig, partition_graph};
    use ndarray::Array2;

    use super::super::replica_router::testkit;
    use super::*;
    use crate::exchange::edge_cut::EdgeCutExchange;
    use crate::exchange::vertex_cut::VertexCutExchange;
    use crate::exchange::{CallKind, CommWatch, Exchange, ExchangeOptions, NoExchange};
    use crate::layers::ForwardCtx;
    use crate::model::{ConvKind, Model, ModelConfig};

    const IN: usize = 5;
    const CLASSES: usize = 3;

    fn features(global: u32, col: usize) -> f32 {
        ((global as usize * 7 + col * 3) % 11) as f32 / 11.0 - 0.4
    }

    fn configs() -> Vec<ModelConfig> {
        let gat = ModelConfig { heads: 2, ..ModelConfig::gat(IN, 4, CLASSES) };
        vec![ModelConfig::gcn(IN, 4, CLASSES), ModelConfig::sage(IN, 4, CLASSES), gat]
    }

    /// Logits of every vertex and the parameter gradient of a summed loss (gradient 1 on every
    /// logit of the listed vertices) from one training pass.
    fn pass(model: &mut Model, graph: &AggGraph, exchange: &mut dyn Exchange) -> (Array2<f32>, Vec<f32>) {
        let x = Array2::from_shape_fn((graph.num_local(), IN), |(l, c)| features(graph.global_ids()[l], c));
        model.zero_grad();
        let logits = model.forward(graph, &x, exchange, ForwardCtx::train(9, 2)).unwrap().clone();
        let mut dlogits = Array2::zeros(logits.dim());
        for (l, &g) in graph.global_ids().iter().enumerate().take(graph.num_primary()) {
            dlogits.row_mut(l).fill(if g % 2 == 0 { 1.0 } else { -0.5 });
        }
        model.backward(graph, dlogits, exchange).unwrap();
        (logits, model.grads().to_vec())
    }

    /// Counts calls and checks they are bracketed.
    #[derive(Default)]
    struct Counter {
        open: Cell<bool>,
        calls: Cell<usize>,
    }

    impl CommWatch for Counter {
        fn call_started(&self, _kind: CallKind) {
            assert!(!self.open.replace(true), "nested call");
        }
        fn call_finished(&self) {
            assert!(self.open.replace(false), "finished without start");
            self.calls.set(self.calls.get() + 1);
        }
    }

    /// Every primary's logits and every worker's all-reduced gradients, in rank order.
    type Outcome = Vec<(Vec<(u32, Vec<f32>)>, Vec<f32>, usize)>;

    /// How a worker runs its part.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Run {
        EdgeCut,
        /// Every replica computes; replica syncs.
        VertexCut,
        /// Vertex-cut, masters alone compute ([`AggGraph::with_primaries_computing`]).
        MastersOnly,
    }

    fn distributed_pass(book: &PartitionBook, config: &ModelConfig, run: Run, overlap: bool) -> Outcome {
        testkit::run(book, |part, comm| {
            let cut = if run == Run::EdgeCut { CutKind::EdgeCut } else { CutKind::VertexCut };
            let mut graph = agg_graph_of(part, cut).map_err(|e| e.to_string())?;
            let watch = Counter::default();
            let options = ExchangeOptions { watch: Some(&watch), overlap, ..ExchangeOptions::default() };
            let mut exchange: Box<dyn Exchange> = if run == Run::VertexCut {
                Box::new(VertexCutExchange::new(part, comm, options).map_err(|e| e.to_string())?)
            } else {
                Box::new(EdgeCutExchange::new(part, comm, options).map_err(|e| e.to_string())?)
            };
            if run == Run::MastersOnly {
                graph = graph.with_primaries_computing();
            }
            assert_eq!(exchange.overlaps(), overlap && run != Run::VertexCut, "vertex-cut syncs do not split");
            let mut model = Model::new(config.clone()).map_err(|e| e.to_string())?;
            let (local_logits, mut local_grads) = pass(&mut model, &graph, exchange.as_mut());
            comm.all_reduce_sum_f32("grads", &mut local_grads).map_err(|e| e.to_string())?;
            let primaries: Vec<(u32, Vec<f32>)> =
                (0..graph.num_primary()).map(|l| (graph.global_ids()[l], local_logits.row(l).to_vec())).collect();
            Ok((primaries, local_grads, watch.calls.get()))
        })
    }

    fn check_matches_single_process(partition: &Partition, run: Run) {
        let book = testkit::book(partition);
        // GAT normalises over every replica's scores: it runs on every replica.
        let configs = configs().into_iter().filter(|c| run != Run::MastersOnly || c.kind != ConvKind::Gat);
        // Wider hidden rows than inputs: the layers pull their input instead of `x W`.
        let wide = [ModelConfig::gcn(IN, 8, CLASSES), ModelConfig::sage(IN, 8, CLASSES)];
        for config in configs.chain(wide) {
            let mut single = Model::new(config.clone()).unwrap();
            let whole = AggGraph::single(&testkit::graph()).unwrap();
            let (logits, grads) = pass(&mut single, &whole, &mut NoExchange);
            let outcomes = distributed_pass(&book, &config, run, false);
            let name = format!("{:?} {run:?}", config.kind);
            let mut seen = 0;
            for (primaries, dist_grads, calls) in &outcomes {
                assert!(*calls > 0, "{name}: the watch saw no calls");
                for (g, row) in primaries {
                    seen += 1;
                    for (a, b) in row.iter().zip(logits.row(*g as usize)) {
                        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{name}: logit of vertex {g}: {a} vs {b}");
                    }
                }
                for (i, (a, b)) in dist_grads.iter().zip(&grads).enumerate() {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{name}: gradient {i}: {a} vs {b}");
                }
            }
            assert_eq!(seen, 12, "{name}: every vertex has exactly one primary");
            // The split calls give the blocking calls' results bit for bit (f32 == compares
            // values; equal bits follow as no NaN appears).
            let split = distributed_pass(&book, &config, run, true);
            for ((a, ga, _), (b, gb, _)) in outcomes.iter().zip(&split) {
                assert_eq!(a, b, "{name}: split logits differ from blocking ones");
                assert!(ga.iter().zip(gb).all(|(x, y)| x.to_bits() == y.to_bits()), "{name}: split gradients differ");
            }
        }
    }

    #[test]
    fn edge_cut_training_pass_equals_single_process() {
        check_matches_single_process(
            &Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0] },
            Run::EdgeCut,
        );
    }

    /// A worker's view holds its part's adjacency, not a copy of it.
    #[test]
    fn the_view_shares_the_parts_edges() {
        let partition = Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0] };
        let book = testkit::book(&partition);
        for part in book.parts() {
            for cut in [CutKind::EdgeCut, CutKind::VertexCut] {
                let graph = agg_graph_of(part, cut).unwrap();
                assert!(std::ptr::eq(graph.fwd(), part.csr()), "part {} holds its edges twice", part.part());
            }
        }
    }

    #[test]
    fn edge_cut_with_central_rows_splits_bit_for_bit() {
        // Vertex 0 and all its in-neighbours (3, 4, 5, 6) share part 0, so its row is central.
        let partition = Partition::EdgeCut { parts: 4, owner: vec![0, 1, 1, 0, 0, 0, 0, 2, 2, 3, 3, 3] };
        let book = testkit::book(&partition);
        let graphs: Vec<_> = book.parts().iter().map(|p| agg_graph_of(p, CutKind::EdgeCut).unwrap()).collect();
        assert!(graphs.iter().map(AggGraph::central_rows).sum::<usize>() > 0, "the test needs central rows");
        // A central row after a marginal one: the split must not stop at the leading run.
        let interleaved = |g: &AggGraph| {
            let c = &g.is_central()[..g.computed_rows()];
            c.iter().enumerate().any(|(v, &central)| central && c[..v].contains(&false))
        };
        assert!(graphs.iter().any(interleaved), "the test needs a central row after a marginal one");
        check_matches_single_process(&partition, Run::EdgeCut);
    }

    /// After a training pass under edge-cut, or a vertex-cut whose masters alone compute, no
    /// array the model keeps holds a written copy row: pulled rows are zeroed (their pages
    /// released) once aggregated, pushed ones once sent. GAT's backward reads its pulled rows,
    /// so it keeps them and is not checked.
    #[test]
    fn gcn_and_sage_keep_no_copy_row() {
        let edge_cut = Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0] };
        let vertex_cut = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        let vertex_cut = partition_graph(&testkit::graph(), &vertex_cut).unwrap();
        for (partition, cut) in [(edge_cut, CutKind::EdgeCut), (vertex_cut, CutKind::VertexCut)] {
            let book = testkit::book(&partition);
            // Hidden width 8 pulls the layer input, 4 the transformed rows.
            for hidden in [4, 8] {
                for config in [ModelConfig::gcn(IN, hidden, CLASSES), ModelConfig::sage(IN, hidden, CLASSES)] {
                    testkit::run(&book, |part, comm| {
                        let mut graph = agg_graph_of(part, cut).map_err(|e| e.to_string())?;
                        if cut == CutKind::VertexCut {
                            graph = graph.with_primaries_computing();
                        }
                        let mut exchange =
                            EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
                        let mut model = Model::new(config.clone()).map_err(|e| e.to_string())?;
                        pass(&mut model, &graph, &mut exchange);
                        let m = graph.computed_rows();
                        for (i, kept) in model.kept_arrays().enumerate() {
                            let copies = kept.rows().into_iter().skip(m).flatten();
                            let name = format!("{:?} {cut} part {} array {i}", config.kind, part.part());
                            assert!(copies.into_iter().all(|&v| v == 0.0), "{name}");
                        }
                        Ok(())
                    });
                }
            }
        }
    }

    #[test]
    fn vertex_cut_training_pass_equals_single_process() {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        check_matches_single_process(&partition_graph(&testkit::graph(), &config).unwrap(), Run::VertexCut);
    }

    #[test]
    fn vertex_cut_with_masters_alone_computing_equals_single_process() {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        check_matches_single_process(&partition_graph(&testkit::graph(), &config).unwrap(), Run::MastersOnly);
    }

    /// GAT's softmax needs every replica's scores: a graph whose masters alone compute is refused.
    #[test]
    fn gat_refuses_a_graph_whose_masters_alone_compute() {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        let book = testkit::book(&partition_graph(&testkit::graph(), &config).unwrap());
        let part = &book.parts()[0];
        let graph = agg_graph_of(part, CutKind::VertexCut).unwrap().with_primaries_computing();
        let gat = configs().into_iter().find(|c| c.kind == ConvKind::Gat).unwrap();
        let x = Array2::zeros((graph.num_local(), IN));
        let err = Model::new(gat).unwrap().forward(&graph, &x, &mut NoExchange, ForwardCtx::eval()).unwrap_err();
        assert!(err.to_string().contains("gat") && err.to_string().contains("every replica"), "{err}");
    }
}
