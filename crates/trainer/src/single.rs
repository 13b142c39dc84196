//! The single-process strategy: one model over the whole graph, no communication.
//!
//! A run the harness places on a CUDA device (`device = "cuda[:N]"`, full-batch on every edge)
//! goes to `crate::device` instead; with fanouts and no batch size every layer runs on in-edges
//! sampled anew each epoch.

use std::sync::Arc;

use gnn_core::{AggGraph, ForwardCtx, Model, NoExchange, Optim};
use graph_partition::sample::Fanouts;
use graph_partition::{Dataset, Splits};
use ndarray::Array2;

use crate::checkpoint::WorkerState;
use crate::config::{Device, TrainConfig};
use crate::error::TrainError;
use crate::guard;
use crate::harness::Alone;
use crate::memory::{Limit, MemoryReport, estimate};
use crate::method::{BatchSource, sampled_layers};
use crate::objective::Objective;
use crate::report::Report;
use crate::train_loop::{EpochObserver, EvalStats, StepStats, Strategy, accuracies};

/// Full-batch training of one model on the whole graph.
#[derive(Debug)]
pub struct SingleProcess<'a> {
    model: Model,
    graph: AggGraph,
    features: &'a Array2<f32>,
    objective: Objective<'a>,
    splits: &'a Splits,
    optimizer: Optim,
    lr: f32,
    seed: u64,
    /// Per-layer fanouts of training on in-edges sampled every epoch; `None`: every edge.
    fanouts: Option<Fanouts>,
}

impl<'a> SingleProcess<'a> {
    /// Builds the model and optimizer `config` describes for `dataset` (whose features are used
    /// as they are: normalise them first).
    pub fn new(config: &TrainConfig, dataset: &'a Dataset) -> Result<Self, TrainError> {
        if dataset.splits.train.is_empty() {
            return Err(TrainError::NoTrainingNodes { split: dataset.splits.name.clone() });
        }
        let model = Model::new(config.model_config(dataset.num_features(), dataset.num_classes))?;
        Ok(Self {
            model,
            graph: AggGraph::single_shared(Arc::clone(&dataset.graph))?,
            features: &dataset.features,
            objective: Objective::new(&dataset.labels),
            splits: &dataset.splits,
            optimizer: config.optimizer(),
            lr: config.lr,
            seed: config.seed,
            fanouts: BatchSource::from_config(config).edge_fanouts().cloned(),
        })
    }
}

impl Strategy for SingleProcess<'_> {
    type Error = TrainError;

    fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
        self.model.zero_grad();
        let ctx = ForwardCtx::train(self.seed, epoch as u64);
        let layers = self.model.config().layers;
        let graphs = match &self.fanouts {
            Some(fanouts) => sampled_layers(&vec![&self.graph; layers], fanouts, self.seed, ctx.epoch)?,
            None => vec![self.graph.clone(); layers],
        };
        self.model.forward_layers(&graphs, self.features, &mut NoExchange, ctx)?;
        let mut dlogits = self.model.take_logits();
        let loss_sum = self.objective.loss_sum(&mut dlogits, &self.splits.train)?;
        let layer = guard::bad_layer(loss_sum, &self.model, &self.graph);
        let terms = (self.splits.train.len() * self.objective.terms_per_row()) as f64;
        dlogits /= terms as f32;
        self.model.backward_layers(&graphs, dlogits, &mut NoExchange)?;
        guard::check_loss_and_grads(epoch, loss_sum / terms, layer, &self.model, self.lr)?;
        self.model.step(&mut self.optimizer)?;
        guard::check_params(epoch, &self.model, self.lr)?;
        Ok(StepStats { loss: loss_sum / terms, ..StepStats::default() })
    }

    fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        let logits = self.model.forward(&self.graph, self.features, &mut NoExchange, ForwardCtx::eval())?;
        accuracies(&self.objective, logits, self.splits)
    }

    fn model(&self) -> Option<&Model> {
        Some(&self.model)
    }

    fn checkpoint_state(&self) -> Result<WorkerState, String> {
        Ok(WorkerState::of(&self.model, &self.optimizer, Vec::new()))
    }

    fn restore_state(&mut self, state: WorkerState) -> Result<(), String> {
        state.restore(&mut self.model, &mut self.optimizer).map(drop)
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
    if let Device::Cuda(ordinal) = alone.device() {
        return crate::device::train(&alone, config, dataset, ordinal, observer);
    }
    let memory = check_memory(config, dataset)?;
    let mut strategy = SingleProcess::new(config, dataset)?;
    let mut outcome = alone.train(&mut strategy, observer)?;
    outcome.final_.memory = Some(memory);
    Ok(alone.report(outcome))
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
