//! A process that trains alone (the whole graph, one model; on the CPU or a device, full-batch or
//! sampled): how it agrees on its checkpoints, its checkpoints and its report.
//!
//! Its users are `single`, the device strategy and the single-process mini-batch runner. The
//! `setup` and `checkpoint` faults (`HALO_FAULT`) fire in its checkpoint agreement.

use comm_hierarchy::fault::{Fault, Point};
use graph_partition::Dataset;

use crate::checkpoint::{Agreement, Checkpoints, RunIdentity};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::report::{GraphSize, Report, SplitSizes};
use crate::train_loop::LoopOutcome;

/// How a process that trains alone agrees on its checkpoints. One process has no
/// communicator: the `setup` fault fires here, and the `checkpoint` one at every checkpoint.
pub(crate) fn agreement(config: &TrainConfig) -> Result<Agreement<'static>, TrainError> {
    let fault = Fault::from_env()?;
    let hang_for = config.reliability.timeout();
    if let Some(fault) = fault {
        fault.hit(0, Point::Setup, 1, hang_for).map_err(TrainError::Injected)?;
    }
    Ok(Agreement::Alone { fault, hang_for })
}

/// The checkpoints of a run of `method` in one process on the whole of `dataset`.
pub(crate) fn checkpoints<'a>(
    method: &str,
    config: &TrainConfig,
    dataset: &Dataset,
    agreement: Agreement<'a>,
) -> Result<Checkpoints<'a>, TrainError> {
    let id = RunIdentity { method, config, rank: 0, world: 1, fingerprint: dataset.graph.fingerprint() };
    Ok(Checkpoints::for_run(&id, agreement)?)
}

/// The report of a single-process run of `method` that ended with `outcome`.
pub(crate) fn report(method: &str, config: &TrainConfig, dataset: &Dataset, outcome: LoopOutcome) -> Report {
    Report {
        dataset: dataset.name.clone(),
        model: config.model.as_str().to_string(),
        method: method.to_string(),
        cut: "none".to_string(),
        workers: 1,
        hosts: 1,
        seed: config.seed,
        config: config.clone(),
        split_sizes: SplitSizes::of(&dataset.splits),
        graph: GraphSize::of(&dataset.graph),
        partition: None,
        epochs: outcome.epochs,
        final_: outcome.final_,
        trained: outcome.trained,
    }
}
