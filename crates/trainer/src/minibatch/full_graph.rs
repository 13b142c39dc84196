//! The whole graph a mini-batch run evaluates on: every vertex with its full neighbourhood,
//! inferred layer by layer.

use gnn_core::{GraphDegrees, Model};
use graph_partition::Dataset;

use crate::error::TrainError;
use crate::train_loop::EvalStats;
use gnn_core::objective::{Hits, Objective};

/// A whole dataset with its degrees, for evaluation.
#[derive(Debug)]
pub(crate) struct FullGraph<'a> {
    pub(crate) dataset: &'a Dataset,
    degrees: GraphDegrees,
}

impl<'a> FullGraph<'a> {
    pub(crate) fn of(dataset: &'a Dataset) -> Self {
        Self { dataset, degrees: GraphDegrees::of(&dataset.graph) }
    }

    /// Accuracies of `model` from layer-wise full-neighbour inference over every vertex.
    pub(crate) fn evaluate(&self, model: &mut Model, eval_batch_size: usize) -> Result<EvalStats, TrainError> {
        let dataset = self.dataset;
        let logits = model.infer_layerwise(&dataset.graph, &self.degrees, &dataset.features, eval_batch_size)?;
        let objective = Objective::new(&dataset.labels);
        let acc = |rows: &[u32]| objective.hits(&logits, rows).map(Hits::fraction);
        Ok(EvalStats {
            train_acc: acc(&dataset.splits.train)?,
            val_acc: acc(&dataset.splits.valid)?,
            test_acc: acc(&dataset.splits.test)?,
        })
    }
}
