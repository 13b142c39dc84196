//! The model over mini-batch blocks: gradients against finite differences, equality with the
//! full graph when nothing is dropped, and layer-wise inference against a full-graph pass.

use graph_partition::Csr;
use graph_partition::rng::SplitMix64;
use graph_partition::sample::{MiniBatch, NeighborSampler, StepKey};
use ndarray::{Array2, s};

use crate::activation::Activation;
use crate::block::{BlockGraphs, GcnNorm};
use crate::exchange::NoExchange;
use crate::graph::GraphDegrees;
use crate::layers::ForwardCtx;
use crate::loss::softmax_cross_entropy;
use crate::model::{ConvKind, LayerOrder, Model, ModelConfig, ModelError};
use crate::testkit::{check_gradient, random_array, random_graph};

const KINDS: [(ConvKind, GcnNorm); 4] = [
    (ConvKind::Gcn, GcnNorm::Global),
    (ConvKind::Gcn, GcnNorm::Sampled),
    (ConvKind::Sage, GcnNorm::Global),
    (ConvKind::Gat, GcnNorm::Global),
];

/// `wide`: hidden layers wider than the output, so the last layer exchanges transformed rows
/// and back-propagates through them (narrow: every layer after the first aggregates inputs).
fn config(kind: ConvKind, layer_norm: bool, wide: bool) -> ModelConfig {
    ModelConfig {
        kind,
        in_dim: 4,
        hidden: if wide { 5 } else { 3 },
        out_dim: 3,
        layers: 3,
        heads: 2,
        out_heads: if wide { 1 } else { 2 },
        dropout: 0.3,
        input_dropout: 0.2,
        attn_dropout: 0.25,
        layer_norm,
        // Smooth at 0 (alpha 1), so finite differences never straddle a kink.
        activation: Activation::Elu { alpha: 1.0 },
        // The LayerNorm case also covers AdaQP's order (dropout before LayerNorm).
        layer_order: if layer_norm { LayerOrder::DropoutFirst } else { LayerOrder::DropoutLast },
        seed: 5,
    }
}

fn whole_graph() -> Csr {
    random_graph(30, 110, 8).fwd().clone()
}

fn sample(csr: &Csr, fanouts: &str, seeds: &[u32]) -> MiniBatch {
    let sampler = NeighborSampler::new(csr, fanouts.parse().unwrap(), 21).unwrap();
    sampler.sample(StepKey { epoch: 2, step: 3 }, seeds).unwrap()
}

fn labels(n: usize) -> Vec<u32> {
    (0..n as u32).map(|v| (v * 7) % 3).collect()
}

/// The loss of the outputs of `blocks` (rows `0..outputs`) against the labels of their vertices.
fn batch_loss(model: &mut Model, blocks: &BlockGraphs, x: &Array2<f32>, ctx: ForwardCtx) -> (f64, Array2<f32>) {
    let all = labels(x.nrows());
    let local: Vec<u32> = blocks.layers().last().unwrap().global_ids().iter().map(|&g| all[g as usize]).collect();
    let rows: Vec<u32> = (0..blocks.output_ids().len() as u32).collect();
    let logits = model.forward_blocks(blocks, x, &mut NoExchange, ctx).unwrap();
    softmax_cross_entropy(logits, &local, &rows).unwrap()
}

/// Finite differences through three sampled blocks (dropout, LayerNorm and every conv).
#[test]
fn block_backward_matches_finite_differences() {
    let csr = whole_graph();
    let degrees = GraphDegrees::of(&csr);
    let x = random_array(30, 4, 1.0, 3);
    let batch = sample(&csr, "3,2,-1", &[4, 17, 9, 22]);
    assert!(batch.blocks()[0].num_src() > batch.blocks()[0].num_dst(), "sources beyond the destinations");
    let ctx = ForwardCtx::train_step(11, 2, 3);
    for ((kind, norm), wide) in KINDS.into_iter().flat_map(|k| [(k, false), (k, true)]) {
        let blocks = BlockGraphs::from_batch(&batch, &degrees, norm).unwrap();
        // LayerNorm over 3 features curves too sharply for finite differences at this step.
        let mut model = Model::new(config(kind, wide, wide)).unwrap();
        let (_, d) = batch_loss(&mut model, &blocks, &x, ctx);
        model.zero_grad();
        model.backward_blocks(&blocks, d, &mut NoExchange).unwrap();
        let grads = model.grads().to_vec();
        assert!(grads.iter().any(|&g| g != 0.0));
        let mut params = model.params().to_vec();
        check_gradient(&format!("{kind:?} {norm} blocks"), &mut params, &grads, 1e-3, 1e-2, |p| {
            model.set_params(p).unwrap();
            batch_loss(&mut model, &blocks, &x, ctx).0
        });
    }
}

/// With every neighbour taken and global degrees, a batch's outputs and gradients are the
/// full graph's at its seeds, dropout included (masks are keyed by global id and round).
#[test]
fn full_fanout_blocks_equal_the_full_graph() {
    let csr = whole_graph();
    let degrees = GraphDegrees::of(&csr);
    let whole = crate::AggGraph::single(&csr).unwrap();
    let x = random_array(30, 4, 1.0, 3);
    let all = labels(30);
    let mut shuffled: Vec<u32> = (0..30).collect();
    let mut rng = SplitMix64::new(4);
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let ctx = ForwardCtx::train_step(11, 6, 0);
    for seeds in [&shuffled[..], &shuffled[..11]] {
        let batch = sample(&csr, "-1,-1,-1", seeds);
        let global = KINDS.into_iter().filter(|&(_, norm)| norm == GcnNorm::Global);
        for ((kind, _), wide) in global.flat_map(|k| [(k, false), (k, true)]) {
            let blocks = BlockGraphs::from_batch(&batch, &degrees, GcnNorm::Global).unwrap();
            let mut model = Model::new(config(kind, true, wide)).unwrap();
            let full = model.forward(&whole, &x, &mut NoExchange, ForwardCtx::train(11, 6)).unwrap().clone();
            let (_, d_full) = softmax_cross_entropy(&full, &all, seeds).unwrap();
            model.zero_grad();
            model.backward(&whole, d_full, &mut NoExchange).unwrap();
            let grads_full = model.grads().to_vec();

            let logits = model.forward_blocks(&blocks, &x, &mut NoExchange, ctx).unwrap().clone();
            for (i, &v) in seeds.iter().enumerate() {
                for (a, b) in logits.row(i).iter().zip(full.row(v as usize)) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{kind:?} vertex {v}: {a} vs {b}");
                }
            }
            let (_, d) = batch_loss(&mut model, &blocks, &x, ctx);
            model.zero_grad();
            model.backward_blocks(&blocks, d, &mut NoExchange).unwrap();
            for (a, b) in model.grads().iter().zip(&grads_full) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{kind:?} gradient: {a} vs {b}");
            }
        }
    }
}

#[test]
fn layerwise_inference_equals_a_full_graph_pass() {
    let csr = whole_graph();
    let degrees = GraphDegrees::of(&csr);
    let whole = crate::AggGraph::single(&csr).unwrap();
    let x = random_array(30, 4, 1.0, 3);
    for (kind, _) in KINDS {
        for (layer_norm, wide) in [(false, false), (true, true)] {
            let mut model = Model::new(config(kind, layer_norm, wide)).unwrap();
            let full = model.forward(&whole, &x, &mut NoExchange, ForwardCtx::eval()).unwrap().clone();
            for batch_size in [1, 7, 30, 64] {
                let logits = model.infer_layerwise(&csr, &degrees, &x, batch_size).unwrap();
                assert_eq!(logits.dim(), full.dim());
                for (a, b) in logits.iter().zip(&full) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{kind:?} batch {batch_size}: {a} vs {b}");
                }
            }
            assert!(matches!(
                model.backward(&whole, Array2::zeros(full.dim()), &mut NoExchange),
                Err(ModelError::NoForward)
            ));
        }
    }
    let mut model = Model::new(config(ConvKind::Sage, false, false)).unwrap();
    let err = model.infer_layerwise(&csr, &degrees, &x.slice(s![..29, ..]).to_owned(), 8).unwrap_err();
    assert!(matches!(err, ModelError::Shape { rows: 29, expected_rows: 30, .. }), "{err}");
    assert!(matches!(model.infer_layerwise(&csr, &degrees, &x, 0), Err(ModelError::Plan(_))));
}

#[test]
fn mismatched_blocks_are_errors() {
    let csr = whole_graph();
    let degrees = GraphDegrees::of(&csr);
    let x = random_array(30, 4, 1.0, 3);
    let mut model = Model::new(config(ConvKind::Sage, false, false)).unwrap();
    let two = BlockGraphs::from_batch(&sample(&csr, "2,2", &[1, 2]), &degrees, GcnNorm::Global).unwrap();
    let err = model.forward_blocks(&two, &x, &mut NoExchange, ForwardCtx::eval()).unwrap_err();
    assert!(matches!(err, ModelError::Blocks { got: 2, expected: 3 }), "{err}");
    let three = BlockGraphs::from_batch(&sample(&csr, "2,2,2", &[1, 2]), &degrees, GcnNorm::Global).unwrap();
    let other = BlockGraphs::from_batch(&sample(&csr, "-1,-1,-1", &[1, 2, 3]), &degrees, GcnNorm::Global).unwrap();
    let logits = model.forward_blocks(&three, &x, &mut NoExchange, ForwardCtx::eval()).unwrap();
    let d = Array2::zeros(logits.dim());
    assert!(matches!(model.backward_blocks(&other, d, &mut NoExchange), Err(ModelError::NoForward)));
    let narrow = x.slice(s![.., ..3]).to_owned();
    let err = model.forward_blocks(&three, &narrow, &mut NoExchange, ForwardCtx::eval()).unwrap_err();
    assert!(matches!(err, ModelError::Shape { cols: 3, expected_cols: 4, .. }), "{err}");
    let short = x.slice(s![..2, ..]).to_owned();
    let err = model.forward_blocks(&three, &short, &mut NoExchange, ForwardCtx::eval()).unwrap_err();
    assert!(matches!(err, ModelError::UnknownVertex { rows: 2, .. }), "{err}");
}

/// Rows gathered by the caller give the logits `forward_blocks` gathers itself; a wrong shape
/// is an error.
#[test]
fn gathered_inputs_equal_the_matrix_read_by_id() {
    let csr = whole_graph();
    let degrees = GraphDegrees::of(&csr);
    let x = random_array(30, 4, 1.0, 3);
    let blocks = BlockGraphs::from_batch(&sample(&csr, "2,3,-1", &[4, 9, 1]), &degrees, GcnNorm::Global).unwrap();
    let rows = Array2::from_shape_fn((blocks.input_ids().len(), 4), |(i, j)| x[[blocks.input_ids()[i] as usize, j]]);
    for kind in [ConvKind::Sage, ConvKind::Gat] {
        let mut model = Model::new(config(kind, false, true)).unwrap();
        let ctx = ForwardCtx::train_step(7, 1, 2);
        let by_id = model.forward_blocks(&blocks, &x, &mut NoExchange, ctx).unwrap().clone();
        let gathered = model.forward_blocks_gathered(&blocks, &rows, &mut NoExchange, ctx).unwrap();
        assert_eq!(gathered, &by_id, "{kind:?}");
        let short = rows.slice(s![1.., ..]).to_owned();
        let err = model.forward_blocks_gathered(&blocks, &short, &mut NoExchange, ctx).unwrap_err();
        assert!(matches!(err, ModelError::Shape { what: "gathered input rows", .. }), "{err}");
    }
}
