//! Training runs: the composition point that turns a method's parts (data plan, batch source,
//! exchange, gradient sync) into a training run over the layers below, and the JSON report.
//!
//! - [`config`]: every setting of `halo train`, TOML loading and validation, once, into a typed
//!   value.
//! - [`method`]: the parts, the [`method::MethodDef`] of every method and the registry.
//! - [`train_loop`]: the epoch loop shared by all methods, generic over a [`train_loop::Strategy`].
//! - [`single`]: the single-process strategy; [`distributed`]: the runner of every method
//!   that splits the graph across workers; [`minibatch`]: the runners of sampled mini-batches
//!   (one process, or data-parallel workers that each hold the whole graph).
//! - [`objective`]: loss and accuracy as sums and counts (they add up across workers).
//! - [`report`]: the report contract of `docs/ARCHITECTURE.md`.
//! - [`data`], [`features`], [`memory`]: dataset lookup, feature preprocessing, peak memory;
//!   [`measure`]: how workers' compute is measured.
//!
//! [`run`] is the whole of `halo train` but the command line, for every method
//! (`examples/method.rs` runs single-process and vanilla training on Cora):
//! ```
//! use trainer::{LocalOptions, TrainConfig};
//!
//! // Vanilla training on the built-in synthetic graph with 2 in-process workers.
//! let mut config = TrainConfig::from_toml_str("method = \"vanilla\"\nepochs = 2\n", "example")?;
//! config.distributed.workers = 2;
//! let dataset = trainer::data::prepare_dataset(&config, std::path::Path::new("datasets"), &Default::default())?;
//! let report = trainer::run_on(&config, &dataset, LocalOptions::default(), &mut ())?;
//! assert_eq!((report.workers, report.epochs.len()), (2, 2));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod checkpoint;
pub mod config;
pub mod data;
pub mod device;
pub mod distributed;
pub mod error;
pub mod experiment;
pub mod export;
pub mod features;
pub mod guard;
pub mod measure;
pub mod memory;
pub mod method;
pub mod minibatch;
pub mod objective;
pub mod report;
pub mod single;
pub mod train_loop;

use std::borrow::Cow;
use std::path::Path;

pub use config::TrainConfig;
pub use distributed::LocalOptions;
pub use error::TrainError;
use graph_partition::book::CutKind;
use graph_partition::{Dataset, LoadOptions};
use method::{BatchSource, DataPlan, MethodDef};
pub use report::Report;
pub use train_loop::EpochObserver;

/// Where a run gets its dataset.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Load (or generate) it as the configuration says, reading files with these options (their
    /// split is the configuration's); a bare dataset name is looked up under the directory.
    Load(&'a Path, &'a LoadOptions),
    /// Already in memory (normalised as the configuration says); distributed runs use
    /// in-process workers.
    Given(&'a Dataset),
}

impl<'a> Source<'a> {
    /// The dataset, loaded if need be; `progress` shows progress bars while large files load.
    fn dataset(self, config: &TrainConfig, progress: bool) -> Result<Cow<'a, Dataset>, TrainError> {
        Ok(match self {
            Source::Load(root, load) => {
                let load = LoadOptions { progress, ..load.clone() };
                Cow::Owned(data::prepare_dataset(config, root, &load)?)
            }
            Source::Given(dataset) => Cow::Borrowed(dataset),
        })
    }
}

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
    let measure =
        measure::ComputeMeasure::choose(config, distributed::backend_of(source, config), measure::cores(), serialize);
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
            distributed::run(name, &parts, cut, config, source, options, observer)
        }
        (DataPlan::Cut(cut), BatchSource::SampledEdges(_)) => Err(TrainError::Parts {
            method: name.to_string(),
            detail: format!(
                "sampled in-edges (fanouts without batch-size) need an edge-cut, where a vertex's in-edges are \
                 all on its owner; this run is a {cut}-cut"
            ),
        }),
        (DataPlan::Replicated, BatchSource::Sampled(sampling)) => {
            minibatch::data_parallel::run(name, sampling, config, source, options, observer)
        }
        (DataPlan::LHop { hops }, BatchSource::Sampled(sampling)) => {
            minibatch::adgraph::run(name, hops, sampling, config, source, options, observer)
        }
        (DataPlan::Columns(spec), BatchSource::Sampled(sampling)) => {
            let hooks = method::featpart::ColumnFactory::new(spec, config);
            minibatch::data_parallel::run_with(name, sampling, config, source, options, observer, &hooks)
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
