//! Full-neighbour inference one layer at a time, as DGL's examples evaluate mini-batch models
//! (`SAGE.inference`): layer `l` runs over every vertex of the graph in batches of
//! destinations, each batch a one-layer block that takes every in-neighbour, and its outputs
//! for all vertices become layer `l + 1`'s input.
//!
//! Every vertex's representation is computed once per layer, whereas sampling `L` layers around
//! every evaluation vertex would recompute shared neighbourhoods (and grow with the fanouts);
//! memory holds two `num_nodes x width` layers and one batch. The blocks take every neighbour and
//! normalise with global degrees, so the logits equal a full-graph forward pass in evaluation
//! mode. The next batch is sampled while the current one computes ([`Prefetch`]).

use std::borrow::Cow;

use graph_partition::Csr;
use graph_partition::sample::{BatchPlan, Fanout, Fanouts, NeighborSampler, Prefetch, Remainder, Share};
use ndarray::{Array2, s};

use crate::block::GcnNorm;
use crate::dense::head;
use crate::exchange::NoExchange;
use crate::graph::{AggGraph, GraphDegrees};
use crate::layers::ForwardCtx;
use crate::model::{Model, ModelError, gather_rows};

impl Model {
    /// Logits of every vertex of `graph` (`num_nodes x out_dim`, row = global id) by layer-wise
    /// full-neighbour inference in batches of `batch_size` destinations (see the module docs).
    /// `degrees` are `graph`'s, `features` one row per vertex. Leaves no forward pass for
    /// [`Model::backward`].
    pub fn infer_layerwise(
        &mut self,
        graph: &Csr,
        degrees: &GraphDegrees,
        features: &Array2<f32>,
        batch_size: usize,
    ) -> Result<Array2<f32>, ModelError> {
        let n = graph.num_rows();
        if features.nrows() != n {
            let (rows, cols) = features.dim();
            let expected_cols = self.config().in_dim;
            return Err(ModelError::Shape { what: "input features", rows, cols, expected_rows: n, expected_cols });
        }
        let all = Fanouts::new(vec![Fanout::All]).expect("one layer");
        let sampler = NeighborSampler::new(graph, all, 0)?;
        let plan = BatchPlan::in_order((0..n as u32).collect(), batch_size, 0, Remainder::Keep)?;
        self.forget_forward();
        let mut input = Cow::Borrowed(features);
        for l in 0..self.config().layers {
            let mut output = Array2::zeros((n, self.convs().nth(l).expect("layer l exists").out_dim()));
            std::thread::scope(|scope| -> Result<(), ModelError> {
                for batch in Prefetch::spawn(scope, &sampler, plan.steps(Share::whole())) {
                    let batch = batch?;
                    let block = AggGraph::from_block(&batch.blocks()[0], degrees, GcnNorm::Global)?;
                    gather_rows(&input, block.global_ids(), input.ncols(), self.layer_input_mut(l))?;
                    self.layer_forward(l, &block, &mut NoExchange, ForwardCtx::eval())?;
                    // The plan is in vertex order, so a batch's destinations are consecutive ids.
                    let (first, len) = (batch.seeds()[0] as usize, batch.seeds().len());
                    debug_assert!(batch.seeds().iter().enumerate().all(|(i, &v)| v as usize == first + i));
                    output.slice_mut(s![first..first + len, ..]).assign(&head(self.layer_output(l), len));
                }
                Ok(())
            })?;
            input = Cow::Owned(output);
        }
        Ok(input.into_owned())
    }
}
