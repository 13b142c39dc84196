//! One checked plan per run: the configuration validated with the method's rules, device and
//! backend ([`TrainConfig::validate`]), the method's parts checked against each other, the
//! runner they need, the backend its workers run on and how their compute is measured, all
//! resolved once before any work. The runners take what the plan resolved and check nothing
//! again.
//!
//! Each refusal is written once: a key's range, a method's batches, cut and learning-rate
//! scaling, the device and the backend in the configuration's validation (with the method's own
//! settings in its folder's `settings.rs`); parts that no runner implements here. The command
//! line adds only what a configuration cannot say: flags given that the run would ignore, and
//! features the binary was built without.
//!
//! The built-in methods' definitions are looked up here ([`lookup`]), from the registry's list.
//! Every method that cuts its traffic gets its exchange's stack judged here
//! ([`method::compress`]), unless `compress = "always"`.

use graph_partition::book::CutKind;

use crate::config::{Backend, Compress, Method, TrainConfig, methods};
use crate::data::Source;
use crate::error::TrainError;
use crate::harness::{Cluster, LocalOptions, backend_of};
use crate::measure::{self, ComputeMeasure};
use crate::method::{self, BatchSource, DataPlan, GradSync, HaloFeatures, MethodDef, OwnRunner, Parts, Sampling};

/// Makes [`lookup`] from the registry's list: each method's folder's `Def`.
macro_rules! define_lookup {
    ($( $(#[$doc:meta])* $variant:ident($name:literal) => $folder:ident $(: $settings:ident)?, )*) => {
        /// The built-in definition of `method`.
        pub fn lookup(method: Method) -> &'static dyn MethodDef {
            match method {
                $( Method::$variant => &method::$folder::Def, )*
            }
        }
    };
}
methods!(define_lookup);

/// Whether `config`'s method trains in one process on the whole graph (its data plan is
/// [`DataPlan::Whole`]): distributed settings mean nothing to it.
pub fn in_one_process(config: &TrainConfig) -> bool {
    lookup(config.method.name).parts(config).data == DataPlan::Whole
}

/// The `[distributed]` keys of the graph's partition that `config`'s method reads, by its data
/// plan: a cut graph reads all three, a method's own plan those it names, and a whole or
/// replicated graph none.
pub fn partition_keys(config: &TrainConfig) -> &'static [&'static str] {
    match lookup(config.method.name).parts(config).data {
        DataPlan::Cut(_) => &["cut", "partitioner", "partition-book"],
        DataPlan::Own(own) => own.partition_keys,
        DataPlan::Whole | DataPlan::Replicated => &[],
    }
}

/// The runner that trains a plan, chosen from its data plan and batch source, never from the
/// method's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Runner {
    /// The whole graph in one process, full-batch (on every edge or on sampled in-edges).
    WholeGraph,
    /// The whole graph in one process, on sampled mini-batches.
    MiniBatch(Sampling),
    /// A partitioned graph, full-batch.
    CutGraph(CutKind),
    /// The whole graph on every worker, data-parallel mini-batches.
    Replicated(Sampling),
    /// The method's own runner, on sampled mini-batches.
    Own(OwnRunner, Sampling),
}

impl Runner {
    /// Whether the runner's workers form a cluster (they report how their compute was measured).
    pub(crate) fn has_workers(&self) -> bool {
        !matches!(self, Runner::WholeGraph | Runner::MiniBatch(_))
    }
}

/// A run of one method, checked ([`Plan::new`]).
pub(crate) struct Plan<'a> {
    /// The method's name in the report.
    pub(crate) method: &'a str,
    /// The configuration, validated, its cut the method's own.
    pub(crate) config: TrainConfig,
    /// The method's parts, their gradient sync as `[distributed] param-sync` says.
    pub(crate) parts: Parts,
    pub(crate) runner: Runner,
    /// Where the dataset comes from.
    pub(crate) source: Source<'a>,
    /// Where the workers run: an in-memory dataset's on in-process workers.
    pub(crate) backend: Backend,
    /// How the workers' compute is measured.
    pub(crate) measure: ComputeMeasure,
}

impl<'a> Plan<'a> {
    /// Validates `config`, takes `method`'s parts for it and the runner they need; the error
    /// names what no runner implements. `options` matter for in-process measurements only.
    pub(crate) fn new(
        method: &'a dyn MethodDef,
        config: &TrainConfig,
        source: Source<'a>,
        options: LocalOptions,
    ) -> Result<Self, TrainError> {
        let config = config.clone().with_method_cut();
        config.validate()?;
        let backend = backend_of(source, &config);
        let serialize = options.serialize_compute || config.distributed.serialize_compute;
        let measure = ComputeMeasure::choose(&config, backend, measure::cores(), measure::gpus(&config), serialize);
        let name = method.name();
        let refuse = |detail: String| TrainError::Parts { method: name.to_string(), detail };
        let mut parts = method.parts(&config);
        if config.distributed.compress == Compress::Auto && config.method.name.rules().cuts_traffic {
            parts.exchange = parts.exchange.map(method::compress::judged);
        }
        if let Some(servers) = config.distributed.param_servers() {
            if !(matches!(parts.data, DataPlan::Cut(_)) && parts.batches.is_full_batch()) {
                return Err(refuse(
                    "param-sync = \"ps\" is implemented for full-batch partitioned training".to_string(),
                ));
            }
            parts.sync = GradSync::ParamServers { servers };
        }
        if parts.halo_features == HaloFeatures::Cached && parts.data != DataPlan::Cut(CutKind::EdgeCut) {
            return Err(refuse("the halo feature cache is for edge-cut partitioned training".to_string()));
        }
        let exact_vertex_cut = parts.data == DataPlan::Cut(CutKind::VertexCut) && parts.exchange.is_none();
        if config.distributed.masters_only && !(exact_vertex_cut && parts.batches.is_full_batch()) {
            return Err(refuse(
                "masters-only is for exact full-batch vertex-cut training (method vanilla, cut = \"vertex\", no codec)"
                    .to_string(),
            ));
        }
        let runner = runner_of(&parts).map_err(refuse)?;
        Ok(Self { method: name, config, parts, runner, source, backend, measure })
    }

    /// The cluster of a runner with workers, on the plan's backend.
    pub(crate) fn cluster(&self) -> Cluster<'_> {
        Cluster::new(self.method, &self.config, self.source, self.backend, self.measure.serializes())
    }
}

/// The runner of `parts`; the error says why none implements them.
fn runner_of(parts: &Parts) -> Result<Runner, String> {
    match (parts.data, &parts.batches) {
        (DataPlan::Whole, BatchSource::FullBatch | BatchSource::SampledEdges(_)) => Ok(Runner::WholeGraph),
        (DataPlan::Whole, BatchSource::Sampled(sampling)) => Ok(Runner::MiniBatch(sampling.clone())),
        (DataPlan::Cut(cut), BatchSource::FullBatch)
        | (DataPlan::Cut(cut @ CutKind::EdgeCut), BatchSource::SampledEdges(_)) => Ok(Runner::CutGraph(cut)),
        (DataPlan::Cut(cut), BatchSource::SampledEdges(_)) => Err(format!(
            "sampled in-edges (fanouts without batch-size) need an edge-cut, where a vertex's in-edges are all on its \
             owner; this run is {}",
            cut.with_article()
        )),
        (DataPlan::Replicated, BatchSource::Sampled(sampling)) => Ok(Runner::Replicated(sampling.clone())),
        (DataPlan::Own(own), BatchSource::Sampled(sampling)) => Ok(Runner::Own(own, sampling.clone())),
        (DataPlan::Own(own), BatchSource::FullBatch | BatchSource::SampledEdges(_)) => {
            Err(format!("{} train on sampled batches: set a batch size", own.holds))
        }
        (DataPlan::Cut(_), BatchSource::Sampled(_)) => {
            Err("mini-batches over a partitioned graph are not implemented; use data-parallel".to_string())
        }
        (DataPlan::Replicated, BatchSource::FullBatch | BatchSource::SampledEdges(_)) => {
            Err("replicated data needs sampled batches (full-batch on every worker repeats one step)".to_string())
        }
    }
}
