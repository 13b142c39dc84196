//! The composition point: every method is a named preset of four parts plus its own settings.
//!
//! - a **data plan**: how the dataset is split and shipped to workers ([`DataPlan`]);
//! - a **batch source**: what one training step computes on ([`BatchSource`]);
//! - an **exchange**: the cut's exchange with a stack of codecs ([`ExchangeStack`]);
//! - a **gradient sync**: how workers agree on the update ([`GradSync`]).
//!
//! A method implements [`MethodDef`]: from the validated configuration (its `[method.<name>]`
//! table among it) it returns its [`Parts`]. The trainer runs any parts through one checked plan
//! ([`crate::plan`]), so a method is its parts, never a fork of the worker. Each method is a
//! folder here, `<name>/`: its rules, settings, definition (`Def`) and, where its data plan is
//! its own, its runner ([`OwnRunner`]). Adding a method adds its folder, its line in the
//! registry (`crate::config`'s `methods!`) and its `mod` line here (`docs/ARCHITECTURE.md`,
//! "Adding a method").
//!
//! Parts in detail: a [`DataPlan`] (whole graph, a cut, replicated, or the method's own;
//! for an edge-cut, [`HaloFeatures`]: layer 0 pulls its halo rows every pass, or their input
//! features are fetched once at setup); a [`BatchSource`] (every training vertex on every edge,
//! on in-edges sampled anew every epoch, or sampled mini-batches); a [`StackFactory`] giving each worker
//! its [`ExchangeStack`] (a `CodecFactory` and an optional [`Controller`] that runs after every step
//! with the codec stats summed over all workers and sets `Knob`s identically on every rank; a
//! stack's `replica_cache` knob turns on the cached vertex-cut sync); and a [`GradSync`]. A
//! controller that needs collectives or the local graph implements `Controller::after_step_in`
//! (it gets a [`ControlCtx`]: communicator, `AggGraph`); one that follows the global accuracies
//! implements `after_eval`.
//!
//! Every method that cuts its exchange's traffic has its stack judged ([`compress`]): where its
//! codecs cost more CPU than the wire seconds they save on the modeled links, it sends exact rows
//! from then on (`[distributed] compress = "always"` keeps the codecs).

pub(crate) mod adaqp;
pub(crate) mod adgraph;
pub(crate) mod cdfgnn;
pub mod compress;
pub(crate) mod data_parallel;
pub(crate) mod ecgraph;
pub(crate) mod featpart;
pub(crate) mod single;
pub(crate) mod vanilla;

use std::num::NonZeroUsize;
use std::sync::Arc;

use cache_quant::{CodecFactory, StateError, StatsTable};
use comm_hierarchy::Communicator;
use gnn_core::exchange::{CallKind, CommWatch, ReplicaCacheOptions};
use gnn_core::{AggGraph, GcnNorm, ModelError};
use graph_partition::book::CutKind;
use graph_partition::sample::{Fanout, Fanouts, sample_in_edges};
use serde_json::Value;

use crate::config::{LrScaling, TrainConfig};
use crate::error::TrainError;
use crate::harness::Cluster;
use crate::report::Report;
use crate::train_loop::{EpochObserver, EvalStats};

/// How the dataset reaches the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPlan {
    /// One process holds the whole graph.
    Whole,
    /// The structure is partitioned (edge-cut or vertex-cut); each worker gets its part, its
    /// copies, and the features of the rows it computes.
    Cut(CutKind),
    /// Every worker holds the whole dataset (data-parallel training).
    Replicated,
    /// A plan of the method's own, which its own runner trains on sampled mini-batches
    /// (adgraph's l-hop parts, featpart's feature columns).
    Own(OwnRunner),
}

/// A method's own runner, for a data plan the shared runners do not implement; it trains on
/// sampled mini-batches. Two are the same when they hold the same.
#[derive(Clone, Copy)]
pub struct OwnRunner {
    /// What its workers hold (`l-hop parts`), as errors name it.
    pub holds: &'static str,
    /// The `[distributed]` keys of the graph's partition it reads.
    pub partition_keys: &'static [&'static str],
    /// Trains the run of `cluster` on `sampling`'s mini-batches.
    pub(crate) run: RunOwn,
}

/// How an [`OwnRunner`] trains.
pub(crate) type RunOwn = fn(&Cluster<'_>, &Sampling, &mut dyn EpochObserver) -> Result<Option<Report>, TrainError>;

impl PartialEq for OwnRunner {
    fn eq(&self, other: &Self) -> bool {
        self.holds == other.holds
    }
}

impl Eq for OwnRunner {}

impl std::fmt::Debug for OwnRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnRunner").field("holds", &self.holds).finish_non_exhaustive()
    }
}

/// Where an edge-cut worker gets the input features of its halo rows (the remote 1-hop
/// in-neighbours of its vertices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HaloFeatures {
    /// Layer 0 pulls them from their owners every pass, as every later layer pulls its input
    /// (or its transformed rows).
    #[default]
    Pulled,
    /// Fetched once at setup (ledger phase `setup/halo-features`, outside every epoch), so that
    /// layer 0 transforms its halo rows itself and exchanges nothing, forward or backward. The
    /// worker holds the extra rows for the whole run.
    Cached,
}

/// What one training step computes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchSource {
    /// Every training vertex, every step (one step per epoch).
    FullBatch,
    /// Every training vertex, every step, each layer over in-edges sampled with its fanout,
    /// drawn anew every epoch and keyed by global id (`graph_partition::sample::sample_in_edges`),
    /// so that partitioned training equals single-process training on the same draws;
    /// evaluation uses every edge. EC-Graph's sampled mode (EC-Graph-S).
    SampledEdges(Fanouts),
    /// Sampled mini-batches of training vertices, many steps per epoch.
    Sampled(Sampling),
}

impl BatchSource {
    /// Mini-batches when `config` sets a batch size, else the full batch: on sampled in-edges
    /// when it sets fanouts.
    pub fn from_config(config: &TrainConfig) -> Self {
        match (Sampling::from_config(config), &config.minibatch.fanouts) {
            (Some(sampling), _) => BatchSource::Sampled(sampling),
            (None, Some(fanouts)) => BatchSource::SampledEdges(fanouts.clone()),
            (None, None) => BatchSource::FullBatch,
        }
    }

    /// Every training vertex every step (on every edge or on sampled in-edges).
    pub fn is_full_batch(&self) -> bool {
        matches!(self, BatchSource::FullBatch | BatchSource::SampledEdges(_))
    }

    /// The per-layer fanouts of full-batch training on sampled in-edges.
    pub fn edge_fanouts(&self) -> Option<&Fanouts> {
        match self {
            BatchSource::SampledEdges(fanouts) => Some(fanouts),
            _ => None,
        }
    }
}

/// The graphs of one step of [`BatchSource::SampledEdges`]: layer `l` runs on its view
/// `base[l]` keeping, for each computed row, the in-edges `fanouts[l]` draws at `epoch`.
pub(crate) fn sampled_layers(
    base: &[&AggGraph],
    fanouts: &Fanouts,
    seed: u64,
    epoch: u64,
) -> Result<Vec<AggGraph>, ModelError> {
    base.iter()
        .zip(fanouts.as_slice())
        .enumerate()
        .map(|(layer, (graph, &fanout))| {
            let keys = graph.global_ids();
            let edges = sample_in_edges(graph.fwd(), graph.computed_rows(), keys, fanout, seed, epoch, layer)?;
            Ok(graph.with_sampled_in_edges(edges)?)
        })
        .collect()
}

/// How mini-batches are drawn, trained on and evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampling {
    /// Seed vertices per step and worker: a global batch is `workers x batch_size` vertices.
    pub batch_size: usize,
    /// Per-layer fanouts, input layer first.
    pub fanouts: Fanouts,
    /// Degrees GCN normalises a sampled block with.
    pub gcn_norm: GcnNorm,
    /// Destinations per batch of layer-wise evaluation.
    pub eval_batch_size: usize,
    /// How the learning rate follows the number of workers (the global batch).
    pub lr_scaling: LrScaling,
    /// Epochs of linear warm-up from the rate as given to the scaled rate.
    pub lr_warmup_epochs: usize,
    /// Threads sampling ahead of training ([`graph_partition::sample::PrefetchOptions`]).
    pub sampler_threads: NonZeroUsize,
}

impl Sampling {
    /// The `[minibatch]` settings of `config` (every neighbour per layer where no fanouts are
    /// given), with the learning-rate scaling of [`TrainConfig::lr_scaling`]; `None` without a
    /// batch size.
    pub fn from_config(config: &TrainConfig) -> Option<Self> {
        let mb = &config.minibatch;
        let all = || Fanouts::new(vec![Fanout::All; config.layers]).expect("validated: at least one layer");
        Some(Self {
            batch_size: mb.batch_size?,
            fanouts: mb.fanouts.clone().unwrap_or_else(all),
            gcn_norm: mb.gcn_norm,
            eval_batch_size: mb.eval_batch_size,
            lr_scaling: config.lr_scaling(),
            lr_warmup_epochs: mb.lr_warmup_epochs,
            sampler_threads: mb
                .sampler_threads
                .and_then(NonZeroUsize::new)
                .unwrap_or_else(|| default_sampler_threads(config)),
        })
    }
}

/// The machine's cores shared among the workers of this process (one under MPI), at least one.
fn default_sampler_threads(config: &TrainConfig) -> NonZeroUsize {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let here = match config.distributed.backend.in_process() {
        true => config.distributed.workers.max(1),
        false => 1,
    };
    NonZeroUsize::new(cores / here).unwrap_or(NonZeroUsize::MIN)
}

/// How workers agree on the parameter update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradSync {
    /// Gradients summed by a deterministic all-reduce; every worker applies the same step.
    AllReduce,
    /// Gradients pushed to this many parameter servers holding contiguous slices of the
    /// parameters, which apply the step and serve the slices back (`[distributed] param-sync =
    /// "ps"`; full-batch partitioned training).
    ParamServers { servers: usize },
}

/// One worker's codec stack: the codecs its exchange sends rows through (one per stream) and
/// the controller that changes their settings between steps. A worker's codecs and its
/// controller share [`cache_quant::Knob`]s; another worker's are its own.
pub struct ExchangeStack {
    pub codecs: CodecFactory,
    pub controller: Option<Box<dyn Controller>>,
    /// Vertex-cut: sum replicas through the adaptive cache of deltas
    /// ([`gnn_core::exchange::ExchangeOptions::replica_cache`]); `None`: the exact sync.
    pub replica_cache: Option<ReplicaCacheOptions>,
}

/// Makes one [`ExchangeStack`] per worker.
pub type StackFactory = Arc<dyn Fn() -> ExchangeStack + Send + Sync>;

/// Runs on every worker after every training step, between steps: a method's controller.
///
/// It sees the codec stats summed over all workers, identical on every rank, so the settings
/// it derives from them and sets through [`cache_quant::Knob`]s are identical on every rank.
pub trait Controller: Send {
    /// Called after the step of `epoch`; returns fields for the epoch record's
    /// `method.controller`.
    fn after_step(&mut self, _epoch: usize, _stats: &StatsTable) -> Option<Value> {
        None
    }

    /// What the worker calls: [`Controller::after_step`] unless the controller needs its
    /// worker's [`ControlCtx`] (collectives of its own, the local graph).
    fn after_step_in(
        &mut self,
        epoch: usize,
        stats: &StatsTable,
        _ctx: &ControlCtx<'_>,
    ) -> Result<Option<Value>, TrainError> {
        Ok(self.after_step(epoch, stats))
    }

    /// Called after the evaluation that follows each step, with its accuracies (global, so
    /// identical on every rank): a controller that follows accuracy sets its knobs here for
    /// the next step.
    fn after_eval(&mut self, _eval: &EvalStats) {}

    /// Fields for `final.method.controller` after the last epoch (run totals).
    fn final_fields(&mut self) -> Option<Value> {
        None
    }

    /// The training steps after which the settings it gives the codecs are, as far as their cost
    /// goes, those of the rest of the run (AdaQP's: up to its first bit-width assignment); the
    /// judge of compression's cost ([`compress`]) weighs the steps after them.
    fn settled_after(&self) -> usize {
        0
    }

    /// Appends what the controller carries from one epoch to the next (its settings, moving
    /// averages, tables) for a checkpoint; a stateless controller appends nothing.
    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), StateError> {
        Ok(())
    }

    /// Puts back a state [`Controller::save_state`] wrote, into a controller freshly made for
    /// the same run, setting its knobs to match; the error says what does not fit.
    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        cache_quant::state::expect_empty("the method's controller", bytes)
    }
}

/// A worker's view a controller may act on between steps: its communicator (every rank calls
/// the same collectives in the same order; the traffic counts in no epoch's bytes, like the
/// worker's own statistics) and the local graph its exchange runs on.
pub struct ControlCtx<'a> {
    pub comm: &'a dyn Communicator,
    pub graph: &'a AggGraph,
    /// Told around each of the controller's communicator calls ([`ControlCtx::call`]): the
    /// worker's clock, which tells compute from waiting and, with `serialize-compute`, hands
    /// the machine to another worker meanwhile.
    pub watch: Option<&'a dyn CommWatch>,
}

impl ControlCtx<'_> {
    /// Runs `call` (communicator calls, and what rank 0 decides while the others wait) as
    /// waiting, not compute.
    pub fn call<T>(&self, call: impl FnOnce() -> T) -> T {
        self.watch.inspect(|w| w.call_started(CallKind::Blocking));
        let out = call();
        self.watch.inspect(|w| w.call_finished());
        out
    }
}

/// What a method is made of.
#[derive(Clone)]
pub struct Parts {
    pub data: DataPlan,
    pub batches: BatchSource,
    /// The exchange's codec stack per worker; `None`: rows travel exactly.
    pub exchange: Option<StackFactory>,
    pub sync: GradSync,
    /// Edge-cut data plans: how the halo rows' input features reach the worker.
    pub halo_features: HaloFeatures,
}

impl Parts {
    /// Exact full-batch training on `data` with gradients all-reduced.
    pub fn exact(data: DataPlan) -> Self {
        Self {
            data,
            batches: BatchSource::FullBatch,
            exchange: None,
            sync: GradSync::AllReduce,
            halo_features: HaloFeatures::Pulled,
        }
    }

    /// A method that trains on sampled batches with its own `runner`, no exchange and
    /// gradients all-reduced.
    pub(crate) fn own_sampled(config: &TrainConfig, runner: OwnRunner) -> Self {
        let sampling = Sampling::from_config(config).expect("validated: a method with its own runner has a batch size");
        Self { batches: BatchSource::Sampled(sampling), ..Self::exact(DataPlan::Own(runner)) }
    }
}

/// A training method: a name and the parts it composes.
pub trait MethodDef: Send + Sync {
    /// The name in reports.
    fn name(&self) -> &str;

    /// The parts for `config` (already validated, so its settings are in range).
    fn parts(&self, config: &TrainConfig) -> Parts;
}
