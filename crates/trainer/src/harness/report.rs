//! The one place a [`Report`] is put together: what the run trained on, where its workers ran,
//! and the epoch loop's outcome.

use graph_partition::Dataset;

use crate::config::TrainConfig;
use crate::report::{GraphSize, PartitionSummary, Report, SplitSizes};
use crate::train_loop::LoopOutcome;

/// What a report says of the data a run trained on: the dataset, how it was cut and
/// partitioned. Rank 0 of a partitioned run knows it after partitioning and keeps it after
/// the dataset is dropped.
#[derive(Debug)]
pub(crate) struct Described {
    pub dataset: String,
    /// The report's `cut`: `none` where the run cuts nothing.
    pub cut: &'static str,
    pub partition: Option<PartitionSummary>,
    pub split_sizes: SplitSizes,
    pub graph: GraphSize,
}

impl Described {
    /// The whole of `dataset`, cut as `cut` says into `partition`.
    pub(crate) fn of(dataset: &Dataset, cut: &'static str, partition: Option<PartitionSummary>) -> Self {
        Self {
            dataset: dataset.name.clone(),
            cut,
            partition,
            split_sizes: SplitSizes::of(&dataset.splits),
            graph: GraphSize::of(&dataset.graph),
        }
    }
}

/// Where a run's workers ran.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Workers {
    pub count: usize,
    pub hosts: usize,
}

/// The report of a run of `method` as `config` says on `data`, on `workers`, that ended with
/// `outcome`.
pub(crate) fn build(
    method: &str,
    config: &TrainConfig,
    data: Described,
    workers: Workers,
    outcome: LoopOutcome,
) -> Report {
    Report {
        dataset: data.dataset,
        model: config.model.as_str().to_string(),
        method: method.to_string(),
        cut: data.cut.to_string(),
        workers: workers.count,
        hosts: workers.hosts,
        seed: config.seed,
        config: config.clone(),
        split_sizes: data.split_sizes,
        graph: data.graph,
        partition: data.partition,
        epochs: outcome.epochs,
        final_: outcome.final_,
        trained: outcome.trained,
    }
}
