//! One worker's mini-batch training over a whole graph it holds: an epoch of sampled steps and
//! the layer-wise evaluation.

use std::time::Instant;

use gnn_core::{Adam, BlockGraphs, ForwardCtx, GraphDegrees, Model, NoExchange};
use graph_partition::Dataset;
use graph_partition::sample::{BatchPlan, MiniBatch, NeighborSampler, Prefetch, Remainder, Share};
use ndarray::Array2;

use super::stats::EpochTotals;
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::guard;
use crate::method::Sampling;
use crate::objective::{Hits, Objective};
use crate::train_loop::EvalStats;

/// What a worker does around the computation of every step.
pub(crate) trait StepHooks {
    /// The input rows of `batch`, one per `batch.input_ids()` in order, or `None` to read them
    /// from the dataset's features. Called on every step of every worker, also where its share
    /// is empty, so it may run collectives.
    fn inputs(&mut self, _epoch: usize, _step: usize, _batch: &MiniBatch) -> Result<Option<&Array2<f32>>, TrainError> {
        Ok(None)
    }

    /// Runs on the gradients before the update (nothing for one process, the all-reduce for
    /// data-parallel workers); `loss` is this worker's part of the global batch's mean loss.
    /// Returns the seconds it spent.
    fn sync(&mut self, grads: &mut [f32], loss: f64) -> Result<f64, TrainError>;
}

/// Hooks that read the dataset's features and run `F` on the gradients.
pub(crate) struct SyncOnly<F>(F);

impl<F: FnMut(&mut [f32]) -> Result<f64, TrainError>> SyncOnly<F> {
    pub(crate) fn new(sync: F) -> Self {
        Self(sync)
    }
}

impl<F: FnMut(&mut [f32]) -> Result<f64, TrainError>> StepHooks for SyncOnly<F> {
    fn sync(&mut self, grads: &mut [f32], _loss: f64) -> Result<f64, TrainError> {
        (self.0)(grads)
    }
}

/// The model, its optimizer and the sampling settings of one worker (see the module docs).
#[derive(Debug)]
pub(crate) struct BatchTrainer<'a> {
    dataset: &'a Dataset,
    degrees: GraphDegrees,
    objective: Objective<'a>,
    model: Model,
    optimizer: Adam,
    sampling: Sampling,
    seed: u64,
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
        let mut optimizer = config.optimizer();
        optimizer.lr *= sampling.lr_scaling.factor(workers);
        Ok(Self {
            dataset,
            degrees: GraphDegrees::of(&dataset.graph),
            objective: Objective::new(&dataset.labels),
            model: Model::new(config.model_config(dataset.num_features(), dataset.num_classes))?,
            optimizer,
            sampling: sampling.clone(),
            seed: config.seed,
        })
    }

    /// The learning rate in use (after scaling).
    pub(crate) fn lr(&self) -> f32 {
        self.optimizer.lr
    }

    pub(crate) fn model(&self) -> &Model {
        &self.model
    }

    pub(crate) fn model_mut(&mut self) -> &mut Model {
        &mut self.model
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

    /// Trains the 1-based `epoch`: the training vertices shuffled by (seed, epoch) and cut into
    /// global batches of `share.workers() x batch_size` seeds, of which this worker takes
    /// `share`'s part, sampled one step ahead on a background thread. Every step reads its
    /// inputs through `hooks` and ends with their sync on the gradients and the optimizer step,
    /// also where this worker's share is empty, so every worker takes every step. The loss of
    /// a step is a mean over its global batch.
    pub(crate) fn train_epoch(
        &mut self,
        epoch: usize,
        share: Share,
        hooks: &mut dyn StepHooks,
    ) -> Result<EpochTotals, TrainError> {
        let dataset = self.dataset;
        let global_batch = self.sampling.batch_size * share.workers();
        let plan = BatchPlan::shuffled(&dataset.splits.train, global_batch, self.seed, epoch as u64, Remainder::Keep)?;
        let sampler = NeighborSampler::new(&dataset.graph, self.sampling.fanouts.clone(), self.seed)?;
        let mut totals = EpochTotals::new(self.sampling.fanouts.num_layers());
        std::thread::scope(|scope| -> Result<(), TrainError> {
            let mut batches = Prefetch::spawn(scope, &sampler, plan.steps(share));
            for (step, batch) in batches.by_ref().enumerate() {
                let batch = batch?;
                let start = Instant::now();
                let global_rows = plan.batch(step).map_or(0, <[u32]>::len);
                let inputs = hooks.inputs(epoch, step, &batch)?;
                self.model.zero_grad();
                let mut loss = 0.0;
                if !batch.seeds().is_empty() {
                    loss = self.train_batch(epoch, step, &batch, inputs, global_rows, &mut totals)?;
                }
                let sync_s = hooks.sync(self.model.grads_mut(), loss)?;
                // The gradients are global after the sync, so every worker stops at one step.
                let lr = self.optimizer.lr;
                guard::check_grads(epoch, &self.model, lr)?;
                self.model.step(&mut self.optimizer)?;
                guard::check_params(epoch, &self.model, lr)?;
                totals.steps += 1;
                totals.sync_s += sync_s;
                totals.compute_s += start.elapsed().as_secs_f64() - sync_s;
            }
            totals.sampling_s = batches.sampling_time().as_secs_f64();
            totals.sampling_wait_s = batches.waiting_time().as_secs_f64();
            Ok(())
        })?;
        Ok(totals)
    }

    /// Forward and backward of one batch whose global batch has `global_rows` seeds; adds the
    /// gradients, counts the batch and returns its part of the global batch's mean loss.
    fn train_batch(
        &mut self,
        epoch: usize,
        step: usize,
        batch: &MiniBatch,
        inputs: Option<&Array2<f32>>,
        global_rows: usize,
        totals: &mut EpochTotals,
    ) -> Result<f64, TrainError> {
        let (labels, loss_sum, terms) = self.add_gradient(epoch, step, batch, inputs, global_rows)?;
        totals.add_batch(batch, &labels, loss_sum, terms);
        Ok(loss_sum / (global_rows as f64 * (terms / batch.seeds().len() as f64)))
    }

    /// Adds to the gradients those of `batch` (keyed by `epoch` and `step`, inputs as in
    /// [`StepHooks::inputs`]), its loss divided by the `global_rows` seeds of its global batch.
    /// Returns the labels of the logits' rows, the loss sum and its number of terms.
    pub(crate) fn add_gradient(
        &mut self,
        epoch: usize,
        step: usize,
        batch: &MiniBatch,
        inputs: Option<&Array2<f32>>,
        global_rows: usize,
    ) -> Result<(graph_partition::Labels, f64, f64), TrainError> {
        let blocks = BlockGraphs::from_batch(batch, &self.degrees, self.sampling.gcn_norm)?;
        // One label per row of the logits (the last block's sources); the seeds come first.
        let output = &blocks.layers()[blocks.layers().len() - 1];
        let labels = self.objective.select(output.global_ids());
        let objective = Objective::new(&labels);
        let rows: Vec<u32> = (0..batch.seeds().len() as u32).collect();
        let ctx = ForwardCtx::train_step(self.seed, epoch as u64, step as u64);
        let logits = match inputs {
            Some(inputs) => self.model.forward_blocks_gathered(&blocks, inputs, &mut NoExchange, ctx)?,
            None => self.model.forward_blocks(&blocks, &self.dataset.features, &mut NoExchange, ctx)?,
        };
        let (loss_sum, mut dlogits) = objective.loss_sum(logits, &rows)?;
        let terms_per_row = objective.terms_per_row() as f64;
        dlogits /= (global_rows as f64 * terms_per_row) as f32;
        self.model.backward_blocks(&blocks, dlogits, &mut NoExchange)?;
        Ok((labels, loss_sum, rows.len() as f64 * terms_per_row))
    }

    /// Accuracies from layer-wise full-neighbour inference over every vertex.
    pub(crate) fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        let dataset = self.dataset;
        let logits = self.model.infer_layerwise(
            &dataset.graph,
            &self.degrees,
            &dataset.features,
            self.sampling.eval_batch_size,
        )?;
        let acc = |rows: &[u32]| self.objective.hits(&logits, rows).map(Hits::fraction);
        Ok(EvalStats {
            train_acc: acc(&dataset.splits.train)?,
            val_acc: acc(&dataset.splits.valid)?,
            test_acc: acc(&dataset.splits.test)?,
        })
    }
}
