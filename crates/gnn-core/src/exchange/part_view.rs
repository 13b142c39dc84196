//! A worker's aggregation view of its partition-book part.

use graph_partition::book::{CutKind, LocalGraph};

use crate::graph::{AggGraph, GraphError};

/// The [`AggGraph`] of one part of a `cut` book: its local edges, its primaries (owned vertices
/// or masters) as the owned rows, and the *global* degrees, so that normalisation does not depend
/// on the split. Under edge-cut the copies are halo rows pulled from their owners
/// ([`AggGraph::with_pulled_halo`]); vertex-cut mirrors are computed like their masters.
pub fn agg_graph_of(part: &LocalGraph, cut: CutKind) -> Result<AggGraph, GraphError> {
    let degrees = |d: &[u32]| d.iter().map(|&d| d as f32).collect();
    let graph = AggGraph::new(
        part.csr().clone(),
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
    use crate::model::{Model, ModelConfig};

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

    fn distributed_pass(book: &PartitionBook, config: &ModelConfig, vertex_cut: bool, overlap: bool) -> Outcome {
        testkit::run(book, |part, comm| {
            let cut = if vertex_cut { CutKind::VertexCut } else { CutKind::EdgeCut };
            let graph = agg_graph_of(part, cut).map_err(|e| e.to_string())?;
            let watch = Counter::default();
            let options = ExchangeOptions { watch: Some(&watch), overlap, ..ExchangeOptions::default() };
            let mut exchange: Box<dyn Exchange> = if vertex_cut {
                Box::new(VertexCutExchange::new(part, comm, options).map_err(|e| e.to_string())?)
            } else {
                Box::new(EdgeCutExchange::new(part, comm, options).map_err(|e| e.to_string())?)
            };
            assert_eq!(exchange.overlaps(), overlap && !vertex_cut, "only edge-cut splits its calls");
            let mut model = Model::new(config.clone()).map_err(|e| e.to_string())?;
            let (local_logits, mut local_grads) = pass(&mut model, &graph, exchange.as_mut());
            comm.all_reduce_sum_f32("grads", &mut local_grads).map_err(|e| e.to_string())?;
            let primaries: Vec<(u32, Vec<f32>)> =
                (0..graph.num_primary()).map(|l| (graph.global_ids()[l], local_logits.row(l).to_vec())).collect();
            Ok((primaries, local_grads, watch.calls.get()))
        })
    }

    fn check_matches_single_process(partition: &Partition, vertex_cut: bool) {
        let book = testkit::book(partition);
        for config in configs() {
            let mut single = Model::new(config.clone()).unwrap();
            let whole = AggGraph::single(&testkit::graph()).unwrap();
            let (logits, grads) = pass(&mut single, &whole, &mut NoExchange);
            let outcomes = distributed_pass(&book, &config, vertex_cut, false);
            let name = format!("{:?} {}", config.kind, if vertex_cut { "vertex-cut" } else { "edge-cut" });
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
            let split = distributed_pass(&book, &config, vertex_cut, true);
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
            false,
        );
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
        check_matches_single_process(&partition, false);
    }

    /// After a training pass under edge-cut, no array the model keeps holds a written halo
    /// row: pulled rows are zeroed (their pages released) once aggregated, pushed ones once
    /// sent. GAT's backward reads its pulled rows, so it keeps them and is not checked.
    #[test]
    fn edge_cut_gcn_and_sage_keep_no_halo_row() {
        let book = testkit::book(&Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0] });
        // Hidden width 8 pulls the layer input, 4 the transformed rows.
        for hidden in [4, 8] {
            for config in [ModelConfig::gcn(IN, hidden, CLASSES), ModelConfig::sage(IN, hidden, CLASSES)] {
                testkit::run(&book, |part, comm| {
                    let graph = agg_graph_of(part, CutKind::EdgeCut).map_err(|e| e.to_string())?;
                    let mut exchange =
                        EdgeCutExchange::new(part, comm, ExchangeOptions::default()).map_err(|e| e.to_string())?;
                    let mut model = Model::new(config.clone()).map_err(|e| e.to_string())?;
                    pass(&mut model, &graph, &mut exchange);
                    let m = graph.computed_rows();
                    assert!(m < graph.num_local(), "part {} needs halo rows", part.part());
                    for (i, kept) in model.kept_arrays().enumerate() {
                        let halo = kept.rows().into_iter().skip(m).flatten();
                        assert!(
                            halo.into_iter().all(|&v| v == 0.0),
                            "{:?} part {} array {i}",
                            config.kind,
                            part.part()
                        );
                    }
                    Ok(())
                });
            }
        }
    }

    #[test]
    fn vertex_cut_training_pass_equals_single_process() {
        let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
        check_matches_single_process(&partition_graph(&testkit::graph(), &config).unwrap(), true);
    }
}
