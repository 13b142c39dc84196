//! The single-process strategy: one model over the whole graph, no communication.

use std::sync::Arc;

use gnn_core::{Adam, AggGraph, ForwardCtx, Model, NoExchange};
use graph_partition::sample::Fanouts;
use graph_partition::{Dataset, Splits};
use ndarray::Array2;

use comm_hierarchy::fault::{Fault, Point};

use crate::checkpoint::{Agreement, Checkpoints, RunIdentity, WorkerState};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::guard;
use crate::memory::{Limit, MemoryReport, estimate};
use crate::method::{BatchSource, sampled_layers};
use crate::objective::{Hits, Objective};
use crate::report::{GraphSize, Report, SplitSizes};
use crate::train_loop::{EpochObserver, EvalStats, LoopOptions, LoopOutcome, StepStats, Strategy, train_loop_with};

/// Full-batch training of one model on the whole graph.
#[derive(Debug)]
pub struct SingleProcess<'a> {
    model: Model,
    graph: AggGraph,
    features: &'a Array2<f32>,
    objective: Objective<'a>,
    splits: &'a Splits,
    optimizer: Adam,
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

/// Accuracies of `logits` (one row per vertex) on the three splits.
pub(crate) fn accuracies(
    objective: &Objective,
    logits: &Array2<f32>,
    splits: &Splits,
) -> Result<EvalStats, TrainError> {
    let acc = |rows: &[u32]| objective.hits(logits, rows).map(Hits::fraction);
    Ok(EvalStats { train_acc: acc(&splits.train)?, val_acc: acc(&splits.valid)?, test_acc: acc(&splits.test)? })
}

/// Trains `dataset` in this process as `config` says and returns the run's report, naming the
/// method `method`.
pub fn run(
    method: &str,
    config: &TrainConfig,
    dataset: &Dataset,
    observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    if let crate::config::Device::Cuda(ordinal) = config.device {
        return crate::device::run(method, config, dataset, ordinal, observer);
    }
    let agreement = alone(config)?;
    let memory = check_memory(config, dataset)?;
    let mut strategy = SingleProcess::new(config, dataset)?;
    let checkpoints = checkpoints_alone(method, config, dataset, agreement)?;
    let options = LoopOptions { epochs: config.epochs, patience: config.patience };
    let mut outcome = train_loop_with(&mut strategy, options, observer, checkpoints)?;
    outcome.final_.memory = Some(memory);
    Ok(report(method, config, dataset, outcome))
}

/// How a process that trains alone agrees on its checkpoints. One process has no
/// communicator: the `setup` fault fires here, and the `checkpoint` one at every checkpoint.
pub(crate) fn alone(config: &TrainConfig) -> Result<Agreement<'static>, TrainError> {
    let fault = Fault::from_env()?;
    let hang_for = config.reliability.timeout();
    if let Some(fault) = fault {
        fault.hit(0, Point::Setup, 1, hang_for).map_err(TrainError::Injected)?;
    }
    Ok(Agreement::Alone { fault, hang_for })
}

/// The checkpoints of a run of `method` in one process on the whole of `dataset`.
pub(crate) fn checkpoints_alone<'a>(
    method: &str,
    config: &TrainConfig,
    dataset: &Dataset,
    agreement: Agreement<'a>,
) -> Result<Checkpoints<'a>, TrainError> {
    let id = RunIdentity { method, config, rank: 0, world: 1, fingerprint: dataset.graph.fingerprint() };
    Ok(Checkpoints::for_run(&id, agreement)?)
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
