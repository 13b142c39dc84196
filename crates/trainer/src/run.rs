//! The entry points of a training run: the method's parts checked against each other, then the
//! runner its data plan and batch source need.
//!
//! [`run`] is the command line's one entry point for every method, [`run_method`] trains any
//! `MethodDef` (built-in or not), and [`run_on`] an in-memory dataset. The runner is chosen from the
//! parts' data plan and batch source, never from the method's name: the whole graph
//! (`crate::single`, or `crate::minibatch::single`), a cut graph (`crate::distributed`), a
//! replicated graph or feature columns (`crate::minibatch::data_parallel`), or l-hop parts
//! (`crate::method::adgraph::runner`). A combination no runner implements is refused naming the method.

use graph_partition::Dataset;
use graph_partition::book::CutKind;

use crate::config::TrainConfig;
use crate::data::Source;
use crate::distributed;
use crate::error::TrainError;
use crate::harness::{Cluster, LocalOptions, Runner, backend_of};
use crate::measure;
use crate::method::{self, BatchSource, DataPlan, MethodDef};
use crate::minibatch;
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
    let method = method::lookup(config.method.name);
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
    let method = method::lookup(config.method.name);
    let report = run_method(method, config, Source::Given(dataset), options, observer)?;
    Ok(report.expect("in-process runs report on the calling thread"))
}

/// Trains `method` (a built-in one, or any other [`MethodDef`]) on `source` as `config` says.
/// `options` matter for in-process measurements only.
pub fn run_method(
    method: &dyn MethodDef,
    config: &TrainConfig,
    source: Source<'_>,
    options: LocalOptions,
    observer: &mut dyn EpochObserver,
) -> Result<Option<Report>, TrainError> {
    let config = &config.clone().with_method_cut();
    config.validate()?;
    let serialize = options.serialize_compute || config.distributed.serialize_compute;
    let measure = measure::ComputeMeasure::choose(
        config,
        backend_of(source, config),
        measure::cores(),
        measure::gpus(config),
        serialize,
    );
    let options = LocalOptions { serialize_compute: measure.serializes() };
    let mut parts = method.parts(config);
    let name = method.name();
    if let Some(servers) = config.distributed.param_servers() {
        if !(matches!(parts.data, DataPlan::Cut(_)) && parts.batches.is_full_batch()) {
            return Err(TrainError::Parts {
                method: name.to_string(),
                detail: "param-sync = \"ps\" is implemented for full-batch partitioned training".to_string(),
            });
        }
        parts.sync = method::GradSync::ParamServers { servers };
    }
    if parts.halo_features == method::HaloFeatures::Cached && parts.data != DataPlan::Cut(CutKind::EdgeCut) {
        return Err(TrainError::Parts {
            method: name.to_string(),
            detail: "the halo feature cache is for edge-cut partitioned training".to_string(),
        });
    }
    let exact_vertex_cut = parts.data == DataPlan::Cut(CutKind::VertexCut) && parts.exchange.is_none();
    if config.distributed.masters_only && !(exact_vertex_cut && parts.batches.is_full_batch()) {
        return Err(TrainError::Parts {
            method: name.to_string(),
            detail: "masters-only is for exact full-batch vertex-cut training (method vanilla, cut = \"vertex\", \
                     no codec)"
                .to_string(),
        });
    }
    let whole = parts.data == DataPlan::Whole;
    let cluster = |runner| Cluster::new(runner, name, config, source, options);
    let mut report = match (parts.data, &parts.batches) {
        (DataPlan::Whole, batches) => {
            let dataset = source.dataset(config, observer.shows_progress())?;
            match batches {
                BatchSource::FullBatch | BatchSource::SampledEdges(_) => single::run(name, config, &dataset, observer),
                BatchSource::Sampled(sampling) => minibatch::single::run(name, sampling, config, &dataset, observer),
            }
            .map(Some)
        }
        (DataPlan::Cut(cut), BatchSource::FullBatch)
        | (DataPlan::Cut(cut @ CutKind::EdgeCut), BatchSource::SampledEdges(_)) => {
            distributed::run(&cluster(Runner::CutGraph)?, &parts, cut, observer)
        }
        (DataPlan::Cut(cut), BatchSource::SampledEdges(_)) => Err(TrainError::Parts {
            method: name.to_string(),
            detail: format!(
                "sampled in-edges (fanouts without batch-size) need an edge-cut, where a vertex's in-edges are \
                 all on its owner; this run is {}",
                cut.with_article()
            ),
        }),
        (DataPlan::Replicated, BatchSource::Sampled(sampling)) => {
            let hooks = minibatch::data_parallel::Replicated;
            minibatch::data_parallel::run(&cluster(Runner::Replicated)?, sampling, observer, &hooks)
        }
        (DataPlan::LHop { hops }, BatchSource::Sampled(sampling)) => {
            method::adgraph::runner::run(&cluster(Runner::LHop)?, hops, sampling, observer)
        }
        (DataPlan::Columns(spec), BatchSource::Sampled(sampling)) => {
            let hooks = method::featpart::runner::ColumnFactory::new(spec, config);
            minibatch::data_parallel::run(&cluster(Runner::Columns)?, sampling, observer, &hooks)
        }
        (DataPlan::Columns(_), BatchSource::FullBatch | BatchSource::SampledEdges(_)) => Err(TrainError::Parts {
            method: name.to_string(),
            detail: "feature columns are fetched per sampled batch: set a batch size".to_string(),
        }),
        (DataPlan::Cut(_), BatchSource::Sampled(_)) => Err(TrainError::Parts {
            method: name.to_string(),
            detail: "mini-batches over a partitioned graph are not implemented; use data-parallel".to_string(),
        }),
        (DataPlan::Replicated | DataPlan::LHop { .. }, BatchSource::FullBatch | BatchSource::SampledEdges(_)) => {
            Err(TrainError::Parts {
                method: name.to_string(),
                detail: "replicated data needs sampled batches (full-batch on every worker repeats one step)"
                    .to_string(),
            })
        }
    }?;
    if let Some(report) = report.as_mut().filter(|_| !whole) {
        report.final_.compute_measure = Some(measure.as_str().to_string());
    }
    Ok(report)
}
