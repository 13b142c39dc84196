//! The single-process strategy: one model over the whole graph, no communication, on any
//! [`Learner`] backend: the CPU [`Model`], or with `device = "cuda[:N]"` the model, its
//! gradients, Adam's moments, the graph, features and labelled rows resident on one GPU
//! (`gnn_core::gpu::DeviceModel`, initialised on the CPU from the same seed and uploaded, so a
//! run starts where the CPU's starts). With fanouts and no batch size every layer runs on
//! in-edges sampled anew each epoch (on the CPU).
//!
//! On a device each epoch carries a `device` record (GPU time per phase, bytes over the bus),
//! the memory check of `memory/device.rs` runs before any upload, `--save-model` and
//! checkpoints download the parameters and moments into the CPU model's flat layout, and the
//! CPU's non-finite guards (which read the host model) do not run. `tests/gpu_train.rs`
//! (`#[ignore]`d; `cargo xtask gpu-test`) holds the loss curves against the CPU's.

use std::sync::Arc;

use gnn_core::{AggGraph, ForwardCtx, Learner, Model, NoExchange, Optim, Phase, PhaseTimes, Views};
use graph_partition::Dataset;
use graph_partition::sample::Fanouts;

use crate::checkpoint::WorkerState;
use crate::config::{Device, TrainConfig};
use crate::error::TrainError;
use crate::guard;
use crate::harness::Alone;
use crate::memory::{Limit, MemoryReport, estimate};
use crate::method::{BatchSource, sampled_layers};
use crate::report::{DeviceEpoch, Report, TrainedModel};
use crate::train_loop::{EpochObserver, EvalStats, StepStats, Strategy};

/// Full-batch training of one model on the whole graph.
pub struct SingleProcess<'a, L: Learner = Model> {
    learner: L,
    /// The whole graph on the host (what the guard and the sampler read).
    graph: AggGraph,
    /// Its views where the model computes.
    views: L::Graph,
    features: L::Features<'a>,
    /// Train, validation and test rows with their labels.
    splits: [L::Targets<'a>; 3],
    /// The training set's loss terms (rows times terms per row).
    terms: f64,
    optimizer: Optim,
    lr: f32,
    seed: u64,
    /// Per-layer fanouts of training on in-edges sampled every epoch; `None`: every edge.
    fanouts: Option<Fanouts>,
    /// A backend that times itself (a device): the epoch's phases.
    phases: Option<PhaseTimes>,
}

impl<L: Learner> std::fmt::Debug for SingleProcess<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleProcess").field("config", self.learner.config()).finish_non_exhaustive()
    }
}

impl<'a> SingleProcess<'a, Model> {
    /// The model and optimizer `config` describes for `dataset` on the CPU (whose features are
    /// used as they are: normalise them first).
    pub fn new(config: &TrainConfig, dataset: &'a Dataset) -> Result<Self, TrainError> {
        let host = Model::new(config.model_config(dataset.num_features(), dataset.num_classes))?;
        Self::on(host, config, dataset)
    }
}

impl<'a, L: Learner> SingleProcess<'a, L> {
    /// `learner` trained as `config` describes on `dataset`.
    pub fn on(learner: L, config: &TrainConfig, dataset: &'a Dataset) -> Result<Self, TrainError> {
        let splits = &dataset.splits;
        if splits.train.is_empty() {
            return Err(TrainError::NoTrainingNodes { split: splits.name.clone() });
        }
        let graph = AggGraph::single_shared(Arc::clone(&dataset.graph))?;
        let n = graph.num_local();
        let target = |rows: &'a [u32]| learner.targets(&dataset.labels, rows, n);
        let train = target(&splits.train)?;
        let rows_terms = gnn_core::Objective::new(&dataset.labels).terms_per_row();
        Ok(Self {
            views: learner.graph(Views::Whole(&graph))?,
            features: learner.features(&dataset.features, n)?,
            splits: [train, target(&splits.valid)?, target(&splits.test)?],
            terms: (splits.train.len() * rows_terms) as f64,
            graph,
            optimizer: config.optimizer(),
            lr: config.lr,
            seed: config.seed,
            fanouts: BatchSource::from_config(config).edge_fanouts().cloned(),
            phases: None,
            learner,
        })
    }
}

impl<L: Learner> Strategy for SingleProcess<'_, L> {
    type Error = TrainError;

    fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
        let learner = &mut self.learner;
        learner.begin()?;
        learner.zero_grad()?;
        let ctx = ForwardCtx::train(self.seed, epoch as u64);
        let mut sampled = match &self.fanouts {
            Some(fanouts) => {
                let layers =
                    sampled_layers(&vec![&self.graph; learner.config().layers], fanouts, self.seed, ctx.epoch)?;
                Some(learner.graph(Views::Layers(&layers))?)
            }
            None => None,
        };
        let views = sampled.as_mut().unwrap_or(&mut self.views);
        learner.forward(views, &self.features, &mut NoExchange, ctx)?;
        learner.mark(Phase::Forward)?;
        let (loss_sum, grad) = learner.loss(&mut self.splits[0], self.terms)?;
        learner.mark(Phase::Loss)?;
        let layer = learner.host().and_then(|model| guard::bad_layer(loss_sum, model, &self.graph));
        learner.backward(views, grad, &mut NoExchange)?;
        learner.mark(Phase::Backward)?;
        let loss = loss_sum / self.terms;
        if let Some(model) = learner.host() {
            guard::check_loss_and_grads(epoch, loss, layer, model, self.lr)?;
        }
        learner.step(&mut self.optimizer)?;
        learner.mark(Phase::Optimizer)?;
        if let Some(model) = learner.host() {
            guard::check_params(epoch, model, self.lr)?;
        }
        self.phases = learner.read_phases()?;
        Ok(StepStats { loss, ..StepStats::default() })
    }

    fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        let learner = &mut self.learner;
        learner.begin()?;
        learner.forward(&mut self.views, &self.features, &mut NoExchange, ForwardCtx::eval())?;
        let hits = learner.hits(&mut self.splits)?;
        learner.mark(Phase::Eval)?;
        if let (Some(phases), Some(read)) = (self.phases.as_mut(), learner.read_phases()?) {
            phases.eval_s = read.eval_s;
        }
        Ok(EvalStats::of(&hits))
    }

    fn device_epoch(&mut self) -> Result<Option<DeviceEpoch>, TrainError> {
        let Some(phases) = self.phases else { return Ok(None) };
        let Some(moved) = self.learner.traffic(Some(&mut self.views)) else { return Ok(None) };
        Ok(Some(DeviceEpoch::of(&phases, &moved)))
    }

    fn model(&self) -> Option<&Model> {
        self.learner.host()
    }

    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
        Ok(Some(TrainedModel::of(&self.learner, epoch)?))
    }

    fn checkpoint_state(&self) -> Result<WorkerState, String> {
        WorkerState::of(&self.learner, &self.optimizer, Vec::new())
    }

    fn restore_state(&mut self, state: WorkerState) -> Result<(), String> {
        state.restore(&mut self.learner, &mut self.optimizer).map(drop)
    }
}

/// Trains `dataset` in this process as `config` says and returns the run's report, naming the
/// method `method`.
pub fn run(
    method: &str,
    config: &TrainConfig,
    dataset: &Dataset,
    observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    let alone = Alone::start(method, config, dataset)?;
    let host = Model::new(config.model_config(dataset.num_features(), dataset.num_classes))?;
    match alone.device() {
        Device::Cpu => {
            let memory = check_memory(config, dataset)?;
            let mut strategy = SingleProcess::on(host, config, dataset)?;
            let mut outcome = alone.train(&mut strategy, observer)?;
            outcome.final_.memory = Some(memory);
            Ok(alone.report(outcome))
        }
        Device::Cuda(ordinal) => on_gpu(&alone, host, config, dataset, ordinal, observer),
    }
}

/// Trains `host`'s parameters on GPU `ordinal`, after the device memory check.
#[cfg(feature = "cuda")]
fn on_gpu(
    alone: &Alone<'_>,
    host: Model,
    config: &TrainConfig,
    dataset: &Dataset,
    ordinal: usize,
    observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    let gpu = crate::harness::gpu::Gpu::alone(ordinal, crate::memory::device::estimate(config, dataset)?)?;
    let learner = gnn_core::gpu::DeviceModel::from_model(&gpu.dev, &host)?;
    let mut strategy = SingleProcess::on(learner, config, dataset)?;
    let mut outcome = alone.train(&mut strategy, observer)?;
    outcome.final_.device = Some(gpu.summary()?);
    Ok(alone.report(outcome))
}

/// Without the `cuda` feature the device path is not in this build.
#[cfg(not(feature = "cuda"))]
fn on_gpu(
    _alone: &Alone<'_>,
    _host: Model,
    _config: &TrainConfig,
    _dataset: &Dataset,
    _ordinal: usize,
    _observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    Err(TrainError::NoCuda)
}

/// Estimates the run's peak, logs the breakdown and checks it against the ceiling.
fn check_memory(config: &TrainConfig, dataset: &Dataset) -> Result<MemoryReport, TrainError> {
    let estimate = estimate::single(config, dataset)?;
    let breakdown = estimate.breakdown();
    tracing::info!("estimated peak memory:\n{breakdown}");
    let limit = Limit::of(&config.memory);
    if let Some(limit) = limit {
        let suggestion = "lower --hidden or --layers, or train a distributed method (e.g. --method vanilla) on \
                          MPI ranks spread over more machines";
        limit.check(estimate.total(), "before training", &breakdown, suggestion)?;
    }
    Ok(MemoryReport::single(estimate, limit))
}
