//! The one place a [`Report`] is put together: what the run trained on, where its workers ran,
//! and the epoch loop's outcome.

use comm_hierarchy::Communicator;
use graph_partition::Dataset;

use super::CommClock;
use crate::config::TrainConfig;
use crate::error::DistError;
use crate::report::{DeviceEpoch, GraphSize, PartitionSummary, Report, SplitSizes, StagedBytes};
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

/// Every worker's device epoch, by one all-reduce under `phase`: the slowest worker's time per
/// phase (a step waits for it), the bus bytes summed over the workers, and their mean idle
/// share.
pub(crate) fn device_epoch_over_workers(
    comm: &dyn Communicator,
    clock: &CommClock<'_>,
    phase: &str,
    mine: DeviceEpoch,
) -> Result<DeviceEpoch, DistError> {
    const PHASES: usize = 6;
    let (size, rank) = (comm.size(), comm.rank());
    let staged = mine.exchange.unwrap_or_default();
    let mut table = vec![0.0f64; size * PHASES + 5];
    table[rank * PHASES..][..PHASES].copy_from_slice(&[
        mine.forward_s,
        mine.loss_s,
        mine.backward_s,
        mine.optimizer_s,
        mine.eval_s,
        mine.exchange_s.unwrap_or_default(),
    ]);
    table[size * PHASES..].copy_from_slice(&[
        mine.h2d_bytes as f64,
        mine.d2h_bytes as f64,
        staged.down_bytes as f64,
        staged.up_bytes as f64,
        mine.idle_share.unwrap_or_default(),
    ]);
    clock.call(|| comm.all_reduce_sum_f64(phase, &mut table))?;
    let (times, bytes) = table.split_at(size * PHASES);
    let slowest = |k: usize| times.chunks_exact(PHASES).map(|row| row[k]).fold(0.0, f64::max);
    Ok(DeviceEpoch {
        forward_s: slowest(0),
        loss_s: slowest(1),
        backward_s: slowest(2),
        optimizer_s: slowest(3),
        eval_s: slowest(4),
        exchange_s: mine.exchange_s.map(|_| slowest(5)),
        h2d_bytes: bytes[0] as u64,
        d2h_bytes: bytes[1] as u64,
        exchange: mine.exchange.map(|_| StagedBytes { down_bytes: bytes[2] as u64, up_bytes: bytes[3] as u64 }),
        idle_share: mine.idle_share.map(|_| bytes[4] / size as f64),
    })
}
