//! What a sampled mini-batch uploads: one aggregation per block.
//!
//! A block ([`BlockGraphs`]) is a part that exchanges nothing: it holds the input of all its
//! sources and computes its destinations, a prefix of them. Its aggregation is therefore a
//! part's ([`part_aggregation`]): the block's sampled in-edges with their coefficients, and GCN's
//! self term apart, zero past the destinations. GAT's is every row's self loop then its sampled
//! in-edges, as the CPU layer attends over a block (the sources past the destinations have the
//! self loop alone). The device runs a layer over every source of its block and keeps the rows
//! the next block reads; rows past the destinations carry no gradient.

use super::{PartAggregation, PlanError, edge_csr, part_aggregation};
use crate::block::BlockGraphs;
use crate::model::ConvKind;

/// The aggregation of every block of `blocks` for a model of `kind`, input layer first.
pub fn block_aggregations(blocks: &BlockGraphs, kind: ConvKind) -> Result<Vec<PartAggregation>, PlanError> {
    blocks
        .layers()
        .iter()
        .map(|graph| match kind {
            ConvKind::Gat => Ok(PartAggregation { csr: edge_csr(graph, kind, graph.num_local()), self_coeff: None }),
            ConvKind::Gcn | ConvKind::Sage => part_aggregation(graph, kind),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use graph_partition::sample::{NeighborSampler, StepKey};
    use ndarray::Array2;

    use super::*;
    use crate::block::GcnNorm;
    use crate::exchange::NoExchange;
    use crate::gpu::plan::identity_model;
    use crate::graph::GraphDegrees;
    use crate::layers::ForwardCtx;

    use crate::testkit::random_graph;

    const WIDTH: usize = 3;

    /// Every block of a sampled batch, under both GCN normalisations and GraphSAGE's mean: the
    /// plan's CSR applied to the block's inputs, plus its self term, gives the destinations'
    /// rows of the CPU layer over that block; the self coefficients are zero past them, and no
    /// CSR row holds a self loop.
    #[test]
    fn each_block_plan_gives_the_cpu_layer_over_that_block() {
        let csr = random_graph(40, 160, 3).fwd().clone();
        let degrees = GraphDegrees::of(&csr);
        let sampler = NeighborSampler::new(&csr, "3,2,4".parse().unwrap(), 9).unwrap();
        let batch = sampler.sample(StepKey { epoch: 1, step: 2 }, &[4, 17, 9, 30]).unwrap();
        for (kind, norm) in
            [(ConvKind::Gcn, GcnNorm::Global), (ConvKind::Gcn, GcnNorm::Sampled), (ConvKind::Sage, GcnNorm::Global)]
        {
            let blocks = BlockGraphs::from_batch(&batch, &degrees, norm).unwrap();
            let plans = block_aggregations(&blocks, kind).unwrap();
            assert_eq!(plans.len(), blocks.layers().len());
            for (l, (graph, plan)) in blocks.layers().iter().zip(&plans).enumerate() {
                let (n, m) = (graph.num_local(), graph.computed_rows());
                let x = Array2::from_shape_fn((n, WIDTH), |(v, c)| 0.1 * graph.global_ids()[v] as f32 - 0.3 * c as f32);
                let one = BlockGraphs::new(vec![graph.clone()]).unwrap();
                let want = identity_model(kind, WIDTH)
                    .forward_blocks_gathered(&one, &x, &mut NoExchange, ForwardCtx::eval())
                    .unwrap()
                    .clone();
                let mut got = plan.csr.apply(&x);
                if let Some(coeff) = &plan.self_coeff {
                    assert!(coeff[m..].iter().all(|&c| c == 0.0), "{kind:?} block {l}");
                    for (v, &c) in coeff.iter().enumerate() {
                        let own = x.row(v).to_owned() * c;
                        let mut row = got.row_mut(v);
                        row += &own;
                    }
                }
                for v in 0..n {
                    let row = &plan.csr.indices[plan.csr.indptr[v] as usize..plan.csr.indptr[v + 1] as usize];
                    assert!(!row.contains(&(v as u32)) && (v < m || row.is_empty()), "{kind:?} block {l} row {v}");
                }
                for v in 0..m {
                    for (a, b) in got.row(v).iter().zip(want.row(v)) {
                        assert!(
                            (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                            "{kind:?} {norm:?} block {l} row {v}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    /// GAT over each block: attention over the plan's rows (self loop first, then the block's
    /// sampled in-edges), LeakyReLU scores, a softmax per row and the weighted sum of `x W`,
    /// plus the bias (what the device's kernels compute), gives the destinations' rows of the
    /// CPU GAT layer over that block.
    #[test]
    fn each_block_gat_plan_gives_the_cpu_layer_over_that_block() {
        use crate::gpu::plan::DevicePlan;
        use crate::layers::gat::NEGATIVE_SLOPE;
        use crate::model::{Model, ModelConfig};

        let csr = random_graph(40, 160, 3).fwd().clone();
        let sampler = NeighborSampler::new(&csr, "3,2,4".parse().unwrap(), 9).unwrap();
        let batch = sampler.sample(StepKey { epoch: 1, step: 2 }, &[4, 17, 9, 30]).unwrap();
        let blocks = BlockGraphs::from_batch(&batch, &GraphDegrees::of(&csr), GcnNorm::Global).unwrap();
        let plans = block_aggregations(&blocks, ConvKind::Gat).unwrap();
        let cfg = ModelConfig { layers: 1, dropout: 0.0, input_dropout: 0.0, ..ModelConfig::gat(WIDTH, 4, 2) };
        let mut model = Model::new(cfg).unwrap();
        let plan = DevicePlan::of(&model).unwrap();
        let layer = &plan.layers[0];
        let (heads, hd) = (layer.heads, layer.head_dim);
        assert_eq!(heads, 1, "an output layer of one head: no mean to take");
        let params = model.params().to_vec();
        let tensor = |i: usize| {
            let slot = plan.tensors[i].1;
            params[slot.offset..slot.offset + slot.rows * slot.cols].to_vec()
        };
        let (w, bias) = (tensor(layer.weight), tensor(layer.bias));
        let (a_src, a_dst) = (tensor(layer.attention.unwrap().0), tensor(layer.attention.unwrap().1));
        for (l, (graph, plan)) in blocks.layers().iter().zip(&plans).enumerate() {
            let (n, m) = (graph.num_local(), graph.computed_rows());
            assert_eq!(plan.self_coeff, None);
            for v in 0..n {
                let row = &plan.csr.indices[plan.csr.indptr[v] as usize..plan.csr.indptr[v + 1] as usize];
                let want: Vec<u32> =
                    std::iter::once(v as u32).chain(graph.fwd().neighbors(v).iter().copied()).collect();
                assert_eq!(row, want.as_slice(), "block {l} row {v}: self loop, then the sampled in-edges");
            }
            let x = Array2::from_shape_fn((n, WIDTH), |(v, c)| 0.1 * graph.global_ids()[v] as f32 - 0.3 * c as f32);
            let one = BlockGraphs::new(vec![graph.clone()]).unwrap();
            let want = model.forward_blocks_gathered(&one, &x, &mut NoExchange, ForwardCtx::eval()).unwrap().clone();
            let h = x.dot(&Array2::from_shape_vec((WIDTH, heads * hd), w.clone()).unwrap()).into_raw_vec_and_offset().0;
            let score =
                |att: &[f32]| -> Vec<f32> { (0..n).map(|v| (0..hd).map(|j| h[v * hd + j] * att[j]).sum()).collect() };
            let (src, dst) = (score(&a_src), score(&a_dst));
            let leaky = |z: f32| if z > 0.0 { z } else { NEGATIVE_SLOPE * z };
            let mut logits = vec![0.0f32; plan.csr.indices.len()];
            for (v, d) in dst.iter().enumerate() {
                for k in plan.csr.indptr[v] as usize..plan.csr.indptr[v + 1] as usize {
                    logits[k] = leaky(src[plan.csr.indices[k] as usize] + d);
                }
            }
            for v in 0..m {
                let entries = plan.csr.indptr[v] as usize..plan.csr.indptr[v + 1] as usize;
                let top = entries.clone().map(|k| logits[k]).fold(f32::NEG_INFINITY, f32::max);
                let total: f32 = entries.clone().map(|k| (logits[k] - top).exp()).sum();
                for j in 0..hd {
                    let sum: f32 = entries
                        .clone()
                        .map(|k| (logits[k] - top).exp() / total * h[plan.csr.indices[k] as usize * hd + j])
                        .sum();
                    let (a, b) = (sum + bias[j], want[[v, j]]);
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "block {l} row {v} column {j}: {a} vs {b}");
                }
            }
        }
    }
}
