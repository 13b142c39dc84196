//! The whole graph a mini-batch run evaluates on: every vertex with its full neighbourhood
//! (`gnn_core::Learner::infer`).

use gnn_core::GraphDegrees;
use graph_partition::Dataset;

/// A whole dataset with its degrees, for evaluation.
#[derive(Debug)]
pub(crate) struct FullGraph<'a> {
    pub(crate) dataset: &'a Dataset,
    pub(crate) degrees: GraphDegrees,
}

impl<'a> FullGraph<'a> {
    pub(crate) fn of(dataset: &'a Dataset) -> Self {
        Self { dataset, degrees: GraphDegrees::of(&dataset.graph) }
    }
}
