//! The entry points of a training run: its checked plan (`crate::plan::Plan`), then the
//! runner the plan chose.
//!
//! [`run`] is the command line's one entry point for every method, [`run_method`] trains any
//! `MethodDef` (built-in or not), and [`run_on`] an in-memory dataset. The runner follows the
//! parts' data plan and batch source, never the method's name: the whole graph
//! (`crate::single`, or `crate::minibatch::single`), a cut graph (`crate::distributed`), a
//! replicated graph (`crate::minibatch::data_parallel`), or the method's own runner.

use graph_partition::Dataset;

use crate::config::TrainConfig;
use crate::data::Source;
use crate::distributed;
use crate::error::TrainError;
use crate::harness::LocalOptions;
use crate::method::MethodDef;
use crate::minibatch;
use crate::plan::{self, Plan, Runner};
use crate::report::Report;
use crate::single;
use crate::train_loop::EpochObserver;

/// Trains as `config` says with the built-in method it names, on the dataset of `source`.
/// Returns the report, or `None` on MPI ranks other than 0 (rank 0 reports for all).
/// `observer` sees every epoch as it finishes.
pub fn run(
    config: &TrainConfig,
    source: Source<'_>,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let method = plan::lookup(config.method.name);
    run_method(method, config, source, LocalOptions::default(), observer)
}

/// Trains as `config` says on an in-memory `dataset` (prepared as the configuration says), with
/// in-process workers for distributed methods.
pub fn run_on(
    config: &TrainConfig,
    dataset: &Dataset,
    options: LocalOptions,
    observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    let method = plan::lookup(config.method.name);
    let report = run_method(method, config, Source::Given(dataset), options, observer)?;
    Ok(report.expect("in-process runs report on the calling thread"))
}

/// Trains `method` (a built-in one, or any other [`MethodDef`]) on `source` as `config` says,
/// by its checked plan (`crate::plan::Plan`). `options` matter for in-process measurements
/// only.
pub fn run_method(
    method: &dyn MethodDef,
    config: &TrainConfig,
    source: Source<'_>,
    options: LocalOptions,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let plan = Plan::new(method, config, source, options)?;
    let (name, config) = (plan.method, &plan.config);
    let mut report = match &plan.runner {
        Runner::WholeGraph => {
            let dataset = plan.source.dataset(config, observer.shows_progress())?;
            single::run(name, config, &dataset, observer).map(Some)
        }
        Runner::MiniBatch(sampling) => {
            let dataset = plan.source.dataset(config, observer.shows_progress())?;
            minibatch::single::run(name, sampling, config, &dataset, observer).map(Some)
        }
        Runner::CutGraph(cut) => distributed::run(&plan.cluster(), &plan.parts, *cut, observer),
        Runner::Replicated(sampling) => {
            let hooks = minibatch::data_parallel::Replicated;
            minibatch::data_parallel::run(&plan.cluster(), sampling, observer, &hooks)
        }
        Runner::Own(own, sampling) => (own.run)(&plan.cluster(), sampling, observer),
    }?;
    if let Some(report) = report.as_mut().filter(|_| plan.runner.has_workers()) {
        report.final_.compute_measure = Some(plan.measure.as_str().to_string());
    }
    Ok(report)
}
