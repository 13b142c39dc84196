//! One worker's mini-batch training over a whole graph it holds: an epoch of sampled steps and
//! the layer-wise evaluation.
//!
//! An epoch: the `BatchPlan` shuffle, the worker's `Share` of each global batch sampled one step
//! ahead, its aggregation blocks built on the sampling thread too (`Prefetch::finishing`: the
//! training thread only computes), forward and backward over the blocks, the gradient sync and the update on
//! every step, empty shares included. `StepHooks` give a step's input rows (or the dataset's
//! features) and its gradient sync, may ask for a second forward-backward of the same batch on
//! other rows (`second_inputs` / `second_gradient`, the step's gradients put back after it), and
//! read the parameters after the update (`after_step`). Each step's learning rate comes from
//! `crate::minibatch::lr_schedule`.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use gnn_core::{BlockGraphs, ForwardCtx, GraphDegrees, Model, Optim, Optimizer};
use graph_partition::Dataset;
use graph_partition::sample::{
    BatchPlan, MiniBatch, NeighborSampler, PlanError, Prefetch, PrefetchOptions, Remainder, Share, Step, StepKey,
};
use ndarray::Array2;

use super::compute::{BatchModel, BatchPass, Columns, Inputs, OnBlocks};
use super::full_graph::FullGraph;
use super::lr_schedule::LrSchedule;
use super::stats::EpochTotals;
use crate::checkpoint::WorkerState;
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::harness::GradSum;
use crate::method::Sampling;
use crate::report::{DeviceEpoch, TrainedModel};
use crate::train_loop::EvalStats;
use gnn_core::objective::Objective;

/// What a worker does around the computation of every step.
pub(crate) trait StepHooks {
    /// The input rows of `batch`, one per `batch.input_ids()` in order, or `None` to read them
    /// from the dataset's features. Called on every step of every worker, also where its share
    /// is empty, so it may run collectives.
    fn inputs(&mut self, _epoch: usize, _step: usize, _batch: &MiniBatch) -> Result<Option<StepRows<'_>>, TrainError> {
        Ok(None)
    }

    /// Runs on the gradients before the update (nothing for one process, the all-reduce for
    /// data-parallel workers); `loss` is this worker's part of the global batch's mean loss.
    /// Returns the seconds it spent.
    fn sync(&mut self, grads: &mut [f32], loss: f64) -> Result<f64, TrainError>;

    /// Whether [`StepHooks::sync`] reads the gradients (a device model brings them down for
    /// it); one process's hooks ([`NoSync`]) do not, so its gradients stay on the device.
    fn reads_grads(&self) -> bool {
        true
    }

    /// The gradient all-reduce [`StepHooks::sync`] makes, where that is all it does: a model
    /// whose GPUs are joined by NCCL makes it there instead
    /// ([`BatchModel::sum_grads_on_gpus`]). `None` (the default): the sync always runs.
    fn grad_sum(&mut self) -> Option<GradSum<'_>> {
        None
    }

    /// Input rows of a second forward-backward of the same batch, after the first and before
    /// the sync, whose gradient goes to [`StepHooks::second_gradient`]; `None` (the default):
    /// none. Called on every step of every worker, also where its share is empty.
    fn second_inputs(&mut self, _batch: &MiniBatch) -> Result<Option<StepRows<'_>>, TrainError> {
        Ok(None)
    }

    /// This worker's gradient of the second forward-backward (zero where its share is empty);
    /// the step's own gradients are put back after it. May run collectives; returns the
    /// seconds it spent in them.
    fn second_gradient(&mut self, _grads: &[f32]) -> Result<f64, TrainError> {
        Ok(0.0)
    }

    /// Whether [`StepHooks::after_step`] reads the parameters (a device model brings them
    /// down for it).
    fn reads_params(&self) -> bool {
        false
    }

    /// The parameters after the step's update, where [`StepHooks::reads_params`].
    fn after_step(&mut self, _params: &[f32]) {}

    /// Whether [`StepHooks::inputs`] reads the rows of the worker's feature matrix (`None`);
    /// hooks that assemble the rows say no, so a device model takes no input rows ahead.
    fn holds_inputs(&self) -> bool {
        true
    }
}

/// Input rows a step's hooks assembled, one per input, and what of them are the worker's own
/// feature columns, where it holds those resident (featpart).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepRows<'r> {
    pub values: &'r Array2<f32>,
    pub own: Option<OwnColumns>,
}

/// The worker's own feature columns in a step's rows ([`StepRows::own`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OwnColumns {
    /// Those alone, every other column zero: a local iteration ([`Inputs::Own`]).
    Only,
    /// These columns beside the fetched others: a fetch iteration ([`Inputs::Fetched`]).
    Beside(Columns),
}

/// One process's hooks: the dataset's features, and no sync.
pub(crate) struct NoSync;

impl StepHooks for NoSync {
    fn sync(&mut self, _grads: &mut [f32], _loss: f64) -> Result<f64, TrainError> {
        Ok(0.0)
    }

    fn reads_grads(&self) -> bool {
        false
    }
}

/// Hooks that read the dataset's features and run `F` on the gradients (tests' own syncs).
#[cfg(test)]
pub(crate) struct SyncOnly<F>(F);

#[cfg(test)]
impl<F: FnMut(&mut [f32]) -> Result<f64, TrainError>> SyncOnly<F> {
    pub(crate) fn new(sync: F) -> Self {
        Self(sync)
    }
}

#[cfg(test)]
impl<F: FnMut(&mut [f32]) -> Result<f64, TrainError>> StepHooks for SyncOnly<F> {
    fn sync(&mut self, grads: &mut [f32], _loss: f64) -> Result<f64, TrainError> {
        (self.0)(grads)
    }
}

/// The model, its optimizer and the sampling settings of one worker (see the module docs).
///
/// The graph it samples is `dataset`'s: the whole graph, or a worker's subgraph whose vertex
/// `v` is global vertex `keys[v]` (ADGraph's extended part). Draws are keyed by global ids
/// either way, so a subgraph that holds a batch's whole neighbourhood gives the batch the
/// whole graph would.
#[derive(Debug)]
pub(crate) struct BatchTrainer<'a> {
    dataset: &'a Dataset,
    keys: Option<&'a [u32]>,
    /// Shared with the sampling threads, which build each batch's blocks.
    degrees: Arc<GraphDegrees>,
    objective: Objective<'a>,
    model: Box<dyn BatchModel + 'a>,
    optimizer: Optim,
    lr: LrSchedule,
    sampling: Sampling,
    seed: u64,
}

/// A subgraph a worker trains on: `dataset` in subgraph ids, the global id of each of its
/// vertices, and their degrees in the whole graph (GCN's global normalisation reads them).
#[derive(Debug)]
pub(crate) struct Subgraph<'a> {
    pub dataset: &'a Dataset,
    pub keys: &'a [u32],
    pub degrees: GraphDegrees,
}

/// One step of a worker's epoch: its seeds (ids of the graph it samples) and the size of the
/// step's global batch over all workers (the loss is a mean over it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepSeeds {
    pub seeds: Vec<u32>,
    pub global_rows: usize,
}

impl<'a> BatchTrainer<'a> {
    /// The model and optimizer of `config` for `dataset` (features as they are: normalise them
    /// first), the learning rate scaled for `workers` data-parallel workers as `sampling` says.
    /// Every worker builds the same model from the seed.
    pub(crate) fn new(
        config: &TrainConfig,
        sampling: &Sampling,
        dataset: &'a Dataset,
        workers: usize,
    ) -> Result<Self, TrainError> {
        if dataset.splits.train.is_empty() {
            return Err(TrainError::NoTrainingNodes { split: dataset.splits.name.clone() });
        }
        Self::build(config, sampling, dataset, None, GraphDegrees::of(&dataset.graph), workers)
    }

    /// As [`BatchTrainer::new`] on a worker's subgraph.
    pub(crate) fn on_subgraph(
        config: &TrainConfig,
        sampling: &Sampling,
        subgraph: Subgraph<'a>,
        workers: usize,
    ) -> Result<Self, TrainError> {
        Self::build(config, sampling, subgraph.dataset, Some(subgraph.keys), subgraph.degrees, workers)
    }

    fn build(
        config: &TrainConfig,
        sampling: &Sampling,
        dataset: &'a Dataset,
        keys: Option<&'a [u32]>,
        degrees: GraphDegrees,
        workers: usize,
    ) -> Result<Self, TrainError> {
        let optimizer = config.optimizer();
        let given = optimizer.learning_rate();
        let lr = LrSchedule::new(given, given * sampling.lr_scaling.factor(workers), sampling.lr_warmup_epochs);
        Ok(Self {
            dataset,
            keys,
            degrees: Arc::new(degrees),
            objective: Objective::new(&dataset.labels),
            model: Box::new(OnBlocks::new(
                Model::new(config.model_config(dataset.num_features(), dataset.num_classes))?,
                None,
                &dataset.features,
            )),
            optimizer,
            lr,
            sampling: sampling.clone(),
            seed: config.seed,
        })
    }

    /// The learning rate after scaling (and after any warm-up).
    pub(crate) fn lr(&self) -> f32 {
        self.lr.scaled()
    }

    /// The model on the host, or an error where it lives on a device.
    pub(crate) fn host_model(&self) -> Result<&Model, TrainError> {
        self.model.model().ok_or(TrainError::NoHostModel)
    }

    pub(crate) fn zero_grad(&mut self) -> Result<(), TrainError> {
        self.model.zero_grad()
    }

    /// The gradients, on the host.
    pub(crate) fn grads(&mut self) -> Result<&mut [f32], TrainError> {
        self.model.grads()
    }

    /// The parameters, on the host.
    pub(crate) fn params(&mut self) -> Result<Cow<'_, [f32]>, TrainError> {
        self.model.params()
    }

    /// Replaces the parameters (the optimizer's state stays).
    pub(crate) fn set_params(&mut self, params: &[f32]) -> Result<(), TrainError> {
        self.model.set_params(params)
    }

    /// Moves the model to the one `place` makes of a host copy of it (a device's).
    pub(crate) fn place_model(
        &mut self,
        place: impl FnOnce(Model) -> Result<Box<dyn BatchModel + 'a>, TrainError>,
    ) -> Result<(), TrainError> {
        let current = self.host_model()?;
        let mut copy = Model::new(current.config().clone())?;
        copy.set_params(current.params())?;
        self.model = place(copy)?;
        Ok(())
    }

    /// The dataset and the sampling settings trained on.
    pub(crate) fn dataset(&self) -> &'a Dataset {
        self.dataset
    }

    pub(crate) fn sampling(&self) -> &Sampling {
        &self.sampling
    }

    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    /// Layers of the model (one block each).
    pub(crate) fn layers(&self) -> usize {
        self.sampling.fanouts.num_layers()
    }

    /// Trains the 1-based `epoch` on the data-parallel batches of `share` (see [`shared_steps`]).
    pub(crate) fn train_epoch(
        &mut self,
        epoch: usize,
        share: Share,
        hooks: &mut dyn StepHooks,
    ) -> Result<EpochTotals, TrainError> {
        let steps = shared_steps(&self.dataset.splits.train, self.sampling.batch_size, share, self.seed, epoch)?;
        self.train_steps(epoch, &steps, hooks)
    }

    /// Trains the 1-based `epoch` on `steps`, sampled one step ahead on a background thread.
    /// Every step reads its inputs through `hooks` and ends with their sync on the gradients and
    /// the optimizer step, also where this worker's seeds are empty, so every worker takes every
    /// step. The loss of a step is a mean over its global batch.
    pub(crate) fn train_steps(
        &mut self,
        epoch: usize,
        steps: &[StepSeeds],
        hooks: &mut dyn StepHooks,
    ) -> Result<EpochTotals, TrainError> {
        let dataset = self.dataset;
        let mut sampler = NeighborSampler::new(&dataset.graph, self.sampling.fanouts.clone(), self.seed)?;
        if let Some(keys) = self.keys {
            sampler = sampler.with_keys(keys)?;
        }
        let keyed = steps
            .iter()
            .enumerate()
            .map(|(step, s)| Step { key: StepKey { epoch: epoch as u64, step: step as u64 }, seeds: &s.seeds });
        let mut totals = EpochTotals::new(self.sampling.fanouts.num_layers());
        self.model.begin_epoch();
        let (degrees, norm, keys) = (Arc::clone(&self.degrees), self.sampling.gcn_norm, self.keys);
        let build = move |batch: MiniBatch| -> Result<(MiniBatch, BlockGraphs), TrainError> {
            let blocks = BlockGraphs::from_batch_keyed(&batch, &degrees, norm, keys)?;
            Ok((batch, blocks))
        };
        std::thread::scope(|scope| -> Result<(), TrainError> {
            let options = PrefetchOptions { threads: self.sampling.sampler_threads, ..PrefetchOptions::default() };
            let mut prefetch = Prefetch::finishing(scope, &sampler, keyed, options, &build);
            let mut batches = prefetch.by_ref().enumerate().peekable();
            while let Some((step, built)) = batches.next() {
                let (batch, blocks) = built?;
                let start = Instant::now();
                let inputs = hooks.inputs(epoch, step, &batch)?;
                self.model.zero_grad()?;
                let mut loss = 0.0;
                if !batch.seeds().is_empty() {
                    let global_rows = steps[step].global_rows;
                    loss = self.train_batch(epoch, step, &batch, &blocks, inputs, global_rows, &mut totals)?;
                }
                // Only a model that takes blocks ahead waits here for the next batch.
                if self.model.prepares()
                    && let Some((_, Ok((next, next_blocks)))) = batches.peek()
                    && !next.seeds().is_empty()
                {
                    let key = StepKey { epoch: epoch as u64, step: step as u64 + 1 };
                    let rows = hooks.holds_inputs().then(|| next.input_ids());
                    self.model.prepare(key, next_blocks, rows)?;
                }
                let mut sync_s = 0.0;
                if let Some(rows) = hooks.second_inputs(&batch)? {
                    let first = self.model.grads()?.to_vec();
                    self.model.zero_grad()?;
                    if !batch.seeds().is_empty() {
                        self.add_gradient(epoch, step, &batch, &blocks, Some(rows), steps[step].global_rows)?;
                    }
                    sync_s += hooks.second_gradient(self.model.grads()?)?;
                    self.model.grads()?.copy_from_slice(&first);
                }
                // On GPUs joined by NCCL the all-reduce runs there; elsewhere the hooks sync.
                let on_gpus_from = Instant::now();
                let on_gpus = match hooks.grad_sum() {
                    Some(mut sum) => self.model.sum_grads_on_gpus(&mut sum)?,
                    None => false,
                };
                sync_s += match on_gpus {
                    true => on_gpus_from.elapsed().as_secs_f64(),
                    false if hooks.reads_grads() => hooks.sync(self.model.grads()?, loss)?,
                    false => 0.0,
                };
                let lr = self.lr.at(epoch, step, steps.len());
                self.model.step(&mut self.optimizer, epoch, lr)?;
                if hooks.reads_params() {
                    hooks.after_step(&self.model.params()?);
                }
                totals.steps += 1;
                totals.sync_s += sync_s;
                totals.compute_s += start.elapsed().as_secs_f64() - sync_s;
            }
            totals.sampling_s = prefetch.sampling_time().as_secs_f64();
            totals.sampling_wait_s = prefetch.waiting_time().as_secs_f64();
            Ok(())
        })?;
        Ok(totals)
    }

    /// Forward and backward of one batch whose global batch has `global_rows` seeds; adds the
    /// gradients, counts the batch and returns its part of the global batch's mean loss.
    #[allow(clippy::too_many_arguments)] // `add_gradient`'s, and the epoch's totals.
    fn train_batch(
        &mut self,
        epoch: usize,
        step: usize,
        batch: &MiniBatch,
        blocks: &BlockGraphs,
        inputs: Option<StepRows<'_>>,
        global_rows: usize,
        totals: &mut EpochTotals,
    ) -> Result<f64, TrainError> {
        let (labels, loss_sum, terms) = self.add_gradient(epoch, step, batch, blocks, inputs, global_rows)?;
        totals.add_batch(batch, &labels, loss_sum, terms);
        Ok(loss_sum / (global_rows as f64 * (terms / batch.seeds().len() as f64)))
    }

    /// Adds to the gradients those of `batch` over its `blocks` ([`BatchTrainer::blocks`];
    /// keyed by `epoch` and `step`, inputs as in [`StepHooks::inputs`]), its loss divided by
    /// the `global_rows` seeds of its global batch. Returns the labels of the logits' rows, the
    /// loss sum and its number of terms.
    pub(crate) fn add_gradient(
        &mut self,
        epoch: usize,
        step: usize,
        batch: &MiniBatch,
        blocks: &BlockGraphs,
        inputs: Option<StepRows<'_>>,
        global_rows: usize,
    ) -> Result<(graph_partition::Labels, f64, f64), TrainError> {
        let key = StepKey { epoch: epoch as u64, step: step as u64 };
        // One label per row of the logits (the last block's sources); the seeds come first.
        let output = &batch.blocks()[batch.blocks().len() - 1];
        let labels = self.objective.select(output.src_ids());
        let terms_per_row = self.objective.terms_per_row() as f64;
        let inputs = match inputs {
            Some(StepRows { values, own: Some(OwnColumns::Only) }) => {
                Inputs::Own { rows: values, ids: batch.input_ids() }
            }
            Some(StepRows { values, own: Some(OwnColumns::Beside(own)) }) => {
                Inputs::Fetched { rows: values, ids: batch.input_ids(), own }
            }
            Some(StepRows { values, own: None }) => Inputs::Gathered(values),
            None => Inputs::Held { features: &self.dataset.features, rows: batch.input_ids() },
        };
        let seeds = batch.seeds().len();
        let loss_sum = self.model.add_gradient(BatchPass {
            key,
            blocks,
            inputs,
            labels: &labels,
            seeds,
            terms: global_rows as f64 * terms_per_row,
            ctx: ForwardCtx::train_step(self.seed, epoch as u64, step as u64),
        })?;
        Ok((labels, loss_sum, seeds as f64 * terms_per_row))
    }

    /// Gives the model the worker's own feature columns, for the steps whose rows hold only
    /// those ([`BatchModel::hold_own_columns`]).
    pub(crate) fn hold_own_columns(&mut self, columns: Array2<f32>) -> Result<(), TrainError> {
        self.model.hold_own_columns(columns)
    }

    /// The aggregation graphs of `batch`'s blocks (what the sampling threads build for an
    /// epoch's steps).
    pub(crate) fn blocks(&self, batch: &MiniBatch) -> Result<BlockGraphs, TrainError> {
        Ok(BlockGraphs::from_batch_keyed(batch, &self.degrees, self.sampling.gcn_norm, self.keys)?)
    }

    /// The model being trained, where it lives on the host.
    pub(crate) fn model(&self) -> Option<&Model> {
        self.model.model()
    }

    /// The parameters after `epoch`, for `--save-model`.
    pub(crate) fn snapshot(&mut self, epoch: usize) -> Result<TrainedModel, TrainError> {
        self.model.snapshot(epoch)
    }

    /// A model on a device: the GPU time and bus traffic of the epoch just run.
    pub(crate) fn device_epoch(&mut self) -> Option<DeviceEpoch> {
        self.model.device_epoch()
    }

    /// The parameters and the optimizer's state for a checkpoint, with the method's `method` blob.
    /// Nothing else of the trainer outlives an epoch: the sampler, the shuffle and the dropout
    /// masks are drawn by (seed, epoch, step), and the learning rate of a step is a function of
    /// them ([`LrSchedule::at`]).
    pub(crate) fn checkpoint_state(&self, method: Vec<u8>) -> Result<WorkerState, String> {
        self.model.state(&self.optimizer, method)
    }

    /// Puts back what [`BatchTrainer::checkpoint_state`] saved; returns the method's blob.
    pub(crate) fn restore_state(&mut self, state: WorkerState) -> Result<Vec<u8>, String> {
        self.model.restore(state, &mut self.optimizer)
    }

    /// Accuracies from layer-wise full-neighbour inference over every vertex of the graph this
    /// worker holds whole.
    pub(crate) fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        self.model.evaluate(&FullGraph::of(self.dataset), self.sampling.eval_batch_size)
    }

    /// Accuracies of this worker's model over `graph` (a worker that trains on a subgraph).
    pub(crate) fn evaluate_on(&mut self, graph: &FullGraph<'_>) -> Result<EvalStats, TrainError> {
        self.model.evaluate(graph, self.sampling.eval_batch_size)
    }
}

/// The steps of the 1-based `epoch` for `share`: `train` shuffled by (seed, epoch), cut into
/// global batches of `share.workers() x batch_size` seeds, of which this worker takes `share`'s
/// part.
pub(crate) fn shared_steps(
    train: &[u32],
    batch_size: usize,
    share: Share,
    seed: u64,
    epoch: usize,
) -> Result<Vec<StepSeeds>, PlanError> {
    let plan = BatchPlan::shuffled(train, batch_size * share.workers(), seed, epoch as u64, Remainder::Keep)?;
    Ok((0..plan.num_steps())
        .map(|step| {
            let batch = plan.batch(step).expect("step < num_steps");
            StepSeeds { seeds: share.of(batch).to_vec(), global_rows: batch.len() }
        })
        .collect())
}
