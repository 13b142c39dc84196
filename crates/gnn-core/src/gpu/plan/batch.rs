//! What a sampled mini-batch uploads: one aggregation per block.
//!
//! A block ([`BlockGraphs`]) is a part that exchanges nothing: it holds the input of all its
//! sources and computes its destinations, a prefix of them. Its aggregation is therefore a
//! part's ([`part_aggregation`]): the block's sampled in-edges with their coefficients, and GCN's
//! self term apart, zero past the destinations. The device runs a layer over every source of its
//! block and keeps the rows the next block reads; rows past the destinations carry no gradient.

use super::{PartAggregation, PlanError, part_aggregation};
use crate::block::BlockGraphs;
use crate::model::ConvKind;

/// The aggregation of every block of `blocks` for a model of `kind`, input layer first. GAT on
/// blocks is refused ([`PlanError::BlockGat`]).
pub fn block_aggregations(blocks: &BlockGraphs, kind: ConvKind) -> Result<Vec<PartAggregation>, PlanError> {
    if kind == ConvKind::Gat {
        return Err(PlanError::BlockGat);
    }
    blocks.layers().iter().map(|graph| part_aggregation(graph, kind)).collect()
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

    #[test]
    fn gat_on_blocks_is_refused() {
        let csr = random_graph(20, 60, 4).fwd().clone();
        let sampler = NeighborSampler::new(&csr, "2,2".parse().unwrap(), 1).unwrap();
        let batch = sampler.sample(StepKey { epoch: 1, step: 0 }, &[1, 2]).unwrap();
        let blocks = BlockGraphs::from_batch(&batch, &GraphDegrees::of(&csr), GcnNorm::Global).unwrap();
        assert_eq!(block_aggregations(&blocks, ConvKind::Gat).unwrap_err(), PlanError::BlockGat);
        assert!(PlanError::BlockGat.to_string().contains("--device cpu"));
    }
}
