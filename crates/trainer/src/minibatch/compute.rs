//! The model a mini-batch worker computes with ([`BatchModel`]): the CPU [`Model`] here
//! ([`OnCpu`]), or a device one (`on_device.rs`). The worker's loop around it
//! (`trainer.rs`) samples the batches, runs the step hooks (inputs, gradient all-reduce) and
//! the learning-rate schedule in the same order whatever the model, so the ledger is the same.

use gnn_core::{BlockGraphs, ForwardCtx, Model, NoExchange, Optim, Optimizer};
use graph_partition::Labels;
use graph_partition::sample::StepKey;
use ndarray::Array2;

use super::full_graph::FullGraph;
use crate::checkpoint::WorkerState;
use crate::error::TrainError;
use crate::guard;
use crate::harness::GradSum;
use crate::report::{DeviceEpoch, TrainedModel};
use crate::train_loop::EvalStats;
use gnn_core::objective::Objective;

/// Where a batch's input rows come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Inputs<'b> {
    /// Rows `rows` of the worker's feature matrix (one per `BlockGraphs::input_ids`).
    Held { features: &'b Array2<f32>, rows: &'b [u32] },
    /// Rows the step's hooks assembled, one per input, in order.
    Gathered(&'b Array2<f32>),
    /// Rows of the worker's own feature columns, every other column zero (featpart's local
    /// iterations), one per id of `ids`: a model that holds those columns resident
    /// ([`BatchModel::hold_own_columns`]) reads them there instead.
    Own {
        rows: &'b Array2<f32>,
        #[cfg_attr(not(feature = "cuda"), expect(dead_code, reason = "only a device model holds the columns"))]
        ids: &'b [u32],
    },
    /// Whole rows of a fetch iteration (featpart's eq. 3), one per id of `ids`: the worker's own
    /// columns `own` beside the fetched others. A model that holds its own columns resident
    /// reads those there and takes only the others.
    Fetched {
        rows: &'b Array2<f32>,
        #[cfg_attr(not(feature = "cuda"), expect(dead_code, reason = "only a device model holds the columns"))]
        ids: &'b [u32],
        #[cfg_attr(not(feature = "cuda"), expect(dead_code, reason = "only a device model holds the columns"))]
        own: Columns,
    },
}

/// Columns `start..end` of a row of features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Columns {
    pub start: usize,
    pub end: usize,
}

impl Columns {
    #[cfg_attr(not(feature = "cuda"), expect(dead_code, reason = "only a device model holds the columns"))]
    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

/// One forward-backward over a batch's blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchPass<'b> {
    /// The step the batch is drawn for (a device model matches it with the blocks it took
    /// ahead).
    #[cfg_attr(not(any(feature = "cuda", test)), expect(dead_code, reason = "only a device model takes blocks ahead"))]
    pub key: StepKey,
    pub blocks: &'b BlockGraphs,
    pub inputs: Inputs<'b>,
    /// One label per row of the logits (the last block's sources); the seeds come first and
    /// are the rows that carry the loss.
    pub labels: &'b Labels,
    pub seeds: usize,
    /// The loss terms of the global batch: the loss's gradient is its sum over them.
    pub terms: f64,
    pub ctx: ForwardCtx,
}

/// The model a mini-batch worker trains. Every worker's model starts from the same parameters
/// (the seed's) and takes the same update, so they stay equal.
pub(crate) trait BatchModel: std::fmt::Debug {
    fn zero_grad(&mut self) -> Result<(), TrainError>;

    /// Adds the gradients of `pass` and returns its loss sum over the seeds.
    fn add_gradient(&mut self, pass: BatchPass<'_>) -> Result<f64, TrainError>;

    /// The gradients, on the host (a device model brings them down; the next update takes
    /// them back up as they are then).
    fn grads(&mut self) -> Result<&mut [f32], TrainError>;

    /// Sums the gradients over the workers on their GPUs through `sum`, where this model's
    /// device takes part in an NCCL communicator (`backend = "nccl"`); `false` (the default):
    /// it does not, and the hooks sum the host gradients.
    fn sum_grads_on_gpus(&mut self, _sum: &mut GradSum<'_>) -> Result<bool, TrainError> {
        Ok(false)
    }

    /// The guarded update of the 1-based `epoch` at learning rate `lr`: the gradients are
    /// global (after the sync), so every worker stops at the same step.
    fn step(&mut self, optimizer: &mut Optim, epoch: usize, lr: f32) -> Result<(), TrainError>;

    /// The parameters, on the host.
    fn params(&mut self) -> Result<&[f32], TrainError>;

    /// Replaces the parameters (the optimizer's state stays).
    fn set_params(&mut self, params: &[f32]) -> Result<(), TrainError>;

    /// The model on the host, where it lives there.
    fn model(&self) -> Option<&Model>;

    /// Accuracies of full-neighbour inference over every vertex of `graph`.
    fn evaluate(&mut self, graph: &FullGraph<'_>, eval_batch_size: usize) -> Result<EvalStats, TrainError>;

    /// The parameters after `epoch`, for `--save-model`.
    fn snapshot(&mut self, epoch: usize) -> Result<TrainedModel, TrainError>;

    /// The parameters and `optimizer`'s state, with the method's state `method`.
    fn state(&self, optimizer: &Optim, method: Vec<u8>) -> Result<WorkerState, String>;

    /// Puts back what [`BatchModel::state`] saved; returns the method's blob.
    fn restore(&mut self, state: WorkerState, optimizer: &mut Optim) -> Result<Vec<u8>, String>;

    /// An epoch's steps begin (the sampler starts).
    fn begin_epoch(&mut self) {}

    /// The worker's own feature columns of every vertex, every other column zero (a row per
    /// vertex of the worker's graph), for [`Inputs::Own`]; a model on the host reads the rows
    /// it is given instead.
    fn hold_own_columns(&mut self, _columns: Array2<f32>) -> Result<(), TrainError> {
        Ok(())
    }

    /// Whether it takes the next step's blocks ahead ([`BatchModel::prepare`]); the loop
    /// waits for the next batch only then.
    fn prepares(&self) -> bool {
        false
    }

    /// The blocks of step `key` and the rows of the worker's features their inputs read (`None`
    /// where the step's hooks assemble them), once the step before it has queued its passes and
    /// before its gradients are read: a device model uploads them meanwhile, and its
    /// [`BatchModel::add_gradient`] for `key` takes them.
    fn prepare(&mut self, _key: StepKey, _blocks: &BlockGraphs, _rows: Option<&[u32]>) -> Result<(), TrainError> {
        Ok(())
    }

    /// A model on a device: the GPU time and bus traffic of the epoch whose steps and
    /// evaluation just ran.
    fn device_epoch(&mut self) -> Option<DeviceEpoch> {
        None
    }
}

/// The CPU [`Model`].
#[derive(Debug)]
pub(crate) struct OnCpu(pub Model);

impl BatchModel for OnCpu {
    fn zero_grad(&mut self) -> Result<(), TrainError> {
        self.0.zero_grad();
        Ok(())
    }

    fn add_gradient(&mut self, pass: BatchPass<'_>) -> Result<f64, TrainError> {
        let BatchPass { blocks, inputs, labels, seeds, terms, ctx, .. } = pass;
        let model = &mut self.0;
        match inputs {
            Inputs::Gathered(rows) | Inputs::Own { rows, .. } | Inputs::Fetched { rows, .. } => {
                model.forward_blocks_gathered(blocks, rows, &mut NoExchange, ctx)?
            }
            Inputs::Held { features, rows } => {
                model.forward_blocks_rows(blocks, features, rows, &mut NoExchange, ctx)?
            }
        };
        let mut dlogits = model.take_logits();
        let rows: Vec<u32> = (0..seeds as u32).collect();
        let loss_sum = Objective::new(labels).loss_sum(&mut dlogits, &rows)?;
        dlogits /= terms as f32;
        model.backward_blocks(blocks, dlogits, &mut NoExchange)?;
        Ok(loss_sum)
    }

    fn grads(&mut self) -> Result<&mut [f32], TrainError> {
        Ok(self.0.grads_mut())
    }

    fn step(&mut self, optimizer: &mut Optim, epoch: usize, lr: f32) -> Result<(), TrainError> {
        optimizer.set_learning_rate(lr);
        guard::check_grads(epoch, &self.0, lr)?;
        self.0.step(optimizer)?;
        guard::check_params(epoch, &self.0, lr)
    }

    fn params(&mut self) -> Result<&[f32], TrainError> {
        Ok(self.0.params())
    }

    fn set_params(&mut self, params: &[f32]) -> Result<(), TrainError> {
        Ok(self.0.set_params(params)?)
    }

    fn model(&self) -> Option<&Model> {
        Some(&self.0)
    }

    fn evaluate(&mut self, graph: &FullGraph<'_>, eval_batch_size: usize) -> Result<EvalStats, TrainError> {
        graph.evaluate(&mut self.0, eval_batch_size)
    }

    fn snapshot(&mut self, epoch: usize) -> Result<TrainedModel, TrainError> {
        Ok(TrainedModel::of_host(&self.0, epoch))
    }

    fn state(&self, optimizer: &Optim, method: Vec<u8>) -> Result<WorkerState, String> {
        WorkerState::of(&self.0, optimizer, method)
    }

    fn restore(&mut self, state: WorkerState, optimizer: &mut Optim) -> Result<Vec<u8>, String> {
        state.restore(&mut self.0, optimizer)
    }
}
