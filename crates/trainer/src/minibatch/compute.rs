//! The model a mini-batch worker computes with ([`BatchModel`]): [`OnBlocks`], written once
//! over any [`Learner`] backend (the CPU [`Model`], or a device model placed by `on_device.rs`).
//! The worker's loop around it (`trainer.rs`) samples the batches, runs the step hooks (inputs,
//! gradient all-reduce) and the learning-rate schedule in the same order whatever the backend,
//! so the ledger is the same.
//!
//! On a device the worker's feature matrix is resident from the first batch that reads it, and
//! a batch's input rows are gathered there by index; rows the hooks assemble on the host go up,
//! except the worker's own columns (featpart), held resident ([`BatchModel::hold_own_columns`]):
//! only the fetched other columns go up. While a step computes, the loop hands the next step's
//! blocks to [`BatchModel::prepare`], which places them on the device's copy stream. The
//! gradients come down once a step for the hooks' sync and go back up before the update.
//! Evaluation is the CPU's layer-wise full-neighbour inference, or on a device one whole-graph
//! forward (equal: its blocks take every neighbour with global degrees). Each epoch's `device`
//! record sums the steps' phases, counts both streams' bus bytes, and gives the GPU's idle
//! share of the steps.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use gnn_core::{BatchInput, BlockGraphs, ForwardCtx, Learner, Model, Optim, Optimizer, Phase, PhaseTimes};
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
    Own { rows: &'b Array2<f32>, ids: &'b [u32] },
    /// Whole rows of a fetch iteration (featpart's eq. 3), one per id of `ids`: the worker's own
    /// columns `own` beside the fetched others. A model that holds its own columns resident
    /// reads those there and takes only the others.
    Fetched { rows: &'b Array2<f32>, ids: &'b [u32], own: Columns },
}

/// Columns `start..end` of a row of features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Columns {
    pub start: usize,
    pub end: usize,
}

impl Columns {
    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

/// One forward-backward over a batch's blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchPass<'b> {
    /// The step the batch is drawn for (a device model matches it with the blocks it took
    /// ahead).
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
    fn params(&mut self) -> Result<Cow<'_, [f32]>, TrainError>;

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

/// A step's blocks as the backend placed them.
struct Placed<B> {
    key: StepKey,
    /// Whether the resident feature rows the inputs read were placed with them.
    rows: bool,
    blocks: B,
}

/// A mini-batch worker's model on its backend `L`.
pub(crate) struct OnBlocks<'d, L: Learner> {
    learner: L,
    /// Where the learner is not the host model: a host copy, whose layout names the parameter
    /// the guard finds at fault.
    names: Option<Model>,
    /// The worker's feature matrix, and where the backend keeps one, its resident copy (made
    /// by the first batch that reads it).
    host_features: &'d Array2<f32>,
    features: Option<Option<L::Resident>>,
    /// The worker's own feature columns of every vertex, every other column zero, where the
    /// backend keeps them ([`BatchModel::hold_own_columns`]).
    own_columns: Option<L::Resident>,
    ahead: Option<Placed<L::Blocks>>,
    /// The blocks of the step in progress.
    current: Option<Placed<L::Blocks>>,
    /// The graph the worker evaluates on, placed at its first evaluation.
    whole: Option<L::Whole>,
    /// A backend that times itself: the epoch's phases so far.
    phases: PhaseTimes,
    /// Where the epoch's steps' wall time runs from: the start of its steps, then the end of its
    /// last update (so waiting for a batch counts).
    steps_from: Option<Instant>,
    steps_wall: Duration,
}

impl<L: Learner> std::fmt::Debug for OnBlocks<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnBlocks").field("config", self.learner.config()).finish_non_exhaustive()
    }
}

impl<'d, L: Learner> OnBlocks<'d, L> {
    /// `learner` for a worker that holds `features`; `names` is the host model where the
    /// learner is not (for the guard's names).
    pub(crate) fn new(learner: L, names: Option<Model>, features: &'d Array2<f32>) -> Self {
        Self {
            learner,
            names,
            host_features: features,
            features: None,
            own_columns: None,
            ahead: None,
            current: None,
            whole: None,
            phases: PhaseTimes::default(),
            steps_from: None,
            steps_wall: Duration::ZERO,
        }
    }

    /// Places the worker's feature matrix where the backend keeps one, the first time.
    fn resident_features(&mut self) -> Result<(), TrainError> {
        if self.features.is_none() {
            self.features = Some(self.learner.resident(self.host_features)?);
        }
        Ok(())
    }

    /// Adds the phases read since the last reading to the epoch's.
    fn read_phases(&mut self) -> Result<(), TrainError> {
        if let Some(read) = self.learner.read_phases()? {
            self.phases += read;
        }
        Ok(())
    }
}

impl<L: Learner> BatchModel for OnBlocks<'_, L> {
    fn zero_grad(&mut self) -> Result<(), TrainError> {
        Ok(self.learner.zero_grad()?)
    }

    fn add_gradient(&mut self, pass: BatchPass<'_>) -> Result<f64, TrainError> {
        let BatchPass { key, blocks, inputs, labels, seeds, terms, ctx } = pass;
        // Held rows index the worker's feature matrix, which the backend may hold.
        let held = match inputs {
            Inputs::Held { rows, .. } => Some(rows),
            Inputs::Gathered(_) | Inputs::Own { .. } | Inputs::Fetched { .. } => None,
        };
        // This step's blocks from an earlier pass over them (a second forward-backward of the
        // same batch), or placed ahead, or now.
        let fits = |p: &mut Placed<L::Blocks>| p.key == key && p.rows == held.is_some();
        let placed = match (self.current.take_if(fits), self.ahead.take_if(fits)) {
            (Some(placed), _) | (None, Some(placed)) => placed,
            (None, None) => Placed {
                key,
                rows: held.is_some(),
                blocks: self.learner.blocks(blocks, held, self.host_features.nrows())?,
            },
        };
        if held.is_some() {
            self.resident_features()?;
        }
        let resident = self.features.as_ref().and_then(Option::as_ref);
        let input = match (inputs, &self.own_columns) {
            (Inputs::Own { ids, .. }, Some(own)) => BatchInput::Resident { resident: own, ids },
            (Inputs::Fetched { rows, ids, own: columns }, Some(own)) => {
                BatchInput::Around { rows, resident: own, ids, keep: columns.range() }
            }
            (Inputs::Gathered(rows) | Inputs::Own { rows, .. } | Inputs::Fetched { rows, .. }, _) => {
                BatchInput::Rows(rows)
            }
            (Inputs::Held { features, rows }, _) => BatchInput::Held { host: features, resident, ids: rows },
        };
        let learner = &mut self.learner;
        let first: Vec<u32> = (0..seeds as u32).collect();
        let logit_rows = blocks.layers().last().map_or(0, |g| g.num_local());
        let mut targets = learner.targets(labels, &first, logit_rows)?;
        learner.begin()?;
        learner.forward_blocks(&placed.blocks, blocks, input, ctx)?;
        learner.mark(Phase::Forward)?;
        let (loss_sum, grad) = learner.loss(&mut targets, terms)?;
        learner.mark(Phase::Loss)?;
        learner.backward_blocks(&placed.blocks, blocks, grad)?;
        learner.mark(Phase::Backward)?;
        self.current = Some(placed);
        Ok(loss_sum)
    }

    /// Under NCCL: the gradients summed between the GPUs.
    fn sum_grads_on_gpus(&mut self, sum: &mut GradSum<'_>) -> Result<bool, TrainError> {
        if !self.learner.joined() {
            return Ok(false);
        }
        let learner = &mut self.learner;
        sum.on_device(|phase| Ok(learner.sum_grads_on_peers(phase)?))?;
        Ok(true)
    }

    fn grads(&mut self) -> Result<&mut [f32], TrainError> {
        Ok(self.learner.grads_mut()?)
    }

    /// The guard first: a gradient that is not finite stops the run, naming its parameter.
    fn step(&mut self, optimizer: &mut Optim, epoch: usize, lr: f32) -> Result<(), TrainError> {
        optimizer.set_learning_rate(lr);
        if !self.learner.grads_finite()? {
            let grads = self.learner.grads_mut()?.to_vec();
            if let Some(model) = self.learner.host().or(self.names.as_ref()) {
                guard::check_grad_values(epoch, model, &grads, lr)?;
            }
        }
        self.learner.begin()?;
        self.learner.step(optimizer)?;
        self.learner.mark(Phase::Optimizer)?;
        self.read_phases()?;
        if let Some(model) = self.learner.host() {
            guard::check_params(epoch, model, lr)?;
        }
        if let Some(start) = self.steps_from.replace(Instant::now()) {
            self.steps_wall += start.elapsed();
        }
        Ok(())
    }

    fn params(&mut self) -> Result<Cow<'_, [f32]>, TrainError> {
        Ok(self.learner.params()?)
    }

    fn set_params(&mut self, params: &[f32]) -> Result<(), TrainError> {
        Ok(self.learner.set_params(params)?)
    }

    fn model(&self) -> Option<&Model> {
        self.learner.host()
    }

    fn evaluate(&mut self, graph: &FullGraph<'_>, eval_batch_size: usize) -> Result<EvalStats, TrainError> {
        let dataset = graph.dataset;
        // A worker evaluating on its own dataset reads the matrix it holds.
        let own = std::ptr::eq(&dataset.features, self.host_features);
        let mut whole = match self.whole.take() {
            Some(whole) => whole,
            None => self.learner.whole(dataset, !own)?,
        };
        if own {
            self.resident_features()?;
        }
        let x = self.features.as_ref().and_then(Option::as_ref).filter(|_| own);
        let learner = &mut self.learner;
        learner.begin()?;
        let hits = learner.infer(&mut whole, dataset, &graph.degrees, x, eval_batch_size)?;
        learner.mark(Phase::Eval)?;
        self.whole = Some(whole);
        self.read_phases()?;
        Ok(EvalStats::of(&hits))
    }

    fn snapshot(&mut self, epoch: usize) -> Result<TrainedModel, TrainError> {
        Ok(TrainedModel::of(&self.learner, epoch)?)
    }

    fn state(&self, optimizer: &Optim, method: Vec<u8>) -> Result<WorkerState, String> {
        WorkerState::of(&self.learner, optimizer, method)
    }

    fn restore(&mut self, state: WorkerState, optimizer: &mut Optim) -> Result<Vec<u8>, String> {
        state.restore(&mut self.learner, optimizer)
    }

    fn hold_own_columns(&mut self, columns: Array2<f32>) -> Result<(), TrainError> {
        self.own_columns = self.learner.resident(&columns)?;
        Ok(())
    }

    fn begin_epoch(&mut self) {
        self.steps_from = Some(Instant::now());
    }

    fn prepares(&self) -> bool {
        self.learner.places_ahead()
    }

    fn prepare(&mut self, key: StepKey, blocks: &BlockGraphs, rows: Option<&[u32]>) -> Result<(), TrainError> {
        let blocks = self.learner.blocks(blocks, rows, self.host_features.nrows())?;
        self.ahead = Some(Placed { key, rows: rows.is_some(), blocks });
        Ok(())
    }

    fn device_epoch(&mut self) -> Option<DeviceEpoch> {
        let moved = self.learner.traffic(None)?;
        let e = std::mem::take(&mut self.phases);
        let busy = e.forward_s + e.loss_s + e.backward_s + e.optimizer_s;
        let wall = std::mem::take(&mut self.steps_wall).as_secs_f64();
        Some(DeviceEpoch {
            idle_share: (wall > 0.0).then(|| (1.0 - busy / wall).max(0.0)),
            ..DeviceEpoch::of(&e, &moved)
        })
    }
}
