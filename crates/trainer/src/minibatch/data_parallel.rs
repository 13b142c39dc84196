//! Data-parallel mini-batch training: `K` workers, each holding the whole dataset, take one
//! global batch of `K x batch_size` seeds per step, each its [`Share`]. Every worker builds the
//! same batch plan from (seed, epoch), so they agree on the batches without communicating; the
//! gradients (each worker's loss divided by the global batch size) are all-reduced under the
//! `grads` ledger phase every step, so every worker applies the same update. With every draw
//! keyed by global ids, a vertex's sample is the one a single process would draw, and `K`
//! workers equal one process training on the global batches.
//!
//! In-process workers share one copy of the dataset; MPI ranks load their own. Rank 0
//! evaluates (layer-wise inference) and shares its accuracies; the other workers wait for them.
//!
//! The runner sits on the harness's `Cluster`. A `HooksFactory` gives each worker its
//! `WorkerHooks`: step hooks, work before the first epoch (skipped on resume), epoch and final
//! report fields, and the state a checkpoint carries (stateless by default); featpart plugs in
//! this way. Its `Worker` also runs ADGraph's extended parts.

use std::time::Instant;

use cache_quant::StateError;
use comm_hierarchy::{Communicator, cost};
use gnn_core::Model;
use graph_partition::Dataset;
use graph_partition::sample::Share;
use ndarray::Array2;
use serde_json::{Value, json};

use super::full_graph::FullGraph;
use super::on_device;
use super::stats::{EpochTotals, epoch_json, mean_loss};
use super::trainer::{BatchTrainer, StepHooks, StepSeeds, shared_steps};
use crate::checkpoint::WorkerState;
use crate::error::{DistError, TrainError};
use crate::harness::report::device_epoch_over_workers;
use crate::harness::{Cluster, CommClock, Described, GradSum, Rank, RankData};
use crate::method::Sampling;
use crate::report::{DeviceEpoch, EpochRecord, Report, TrainedModel};
use crate::train_loop::{
    CommStats, EpochObserver, EvalStats, LoopOptions, LoopOutcome, StepStats, Strategy, train_loop_with,
};

/// Ledger phases: the gradient all-reduce (every step: the only traffic an epoch counts), the
/// epoch's statistics and the evaluation results (after the epoch, outside its counts).
pub(crate) const GRADS: &str = "grads";
const STATS: &str = "stats";
const EVAL: &str = "eval";

/// What a method adds to data-parallel training on every worker: the step hooks (inputs and
/// gradient sync), work before the first epoch, and report fields.
pub(crate) trait WorkerHooks: StepHooks {
    /// Runs once on every worker before the first epoch; not again when the run resumes from
    /// a checkpoint, whose [`WorkerHooks::restore_state`] puts back what it found.
    fn before_training(&mut self, _trainer: &mut BatchTrainer<'_>) -> Result<(), TrainError> {
        Ok(())
    }

    /// Appends what the hooks carry from one epoch to the next (and what
    /// [`WorkerHooks::before_training`] found) for a checkpoint; stateless hooks append nothing.
    fn save_state(&self, _out: &mut Vec<u8>) -> Result<(), StateError> {
        Ok(())
    }

    /// Puts back a state [`WorkerHooks::save_state`] wrote, into hooks freshly made for the
    /// same run; the error says what does not fit.
    fn restore_state(&mut self, bytes: &[u8]) -> Result<(), StateError> {
        cache_quant::state::expect_empty("the method's hooks", bytes)
    }

    /// Fields added to the epoch record's `method` (identical on every rank).
    fn epoch_fields(&mut self) -> Option<Value> {
        None
    }

    /// Fields added to `final.method` (rank 0), given the epoch records.
    fn final_fields(&mut self, _epochs: &[EpochRecord]) -> Option<Value> {
        None
    }

    /// The worker's own feature columns of every vertex, every other column zero, where its
    /// step rows hold only those on some iterations (`StepRows::own`): a device worker
    /// holds them resident.
    fn resident_columns(&self) -> Option<Array2<f32>> {
        None
    }
}

/// Builds one worker's [`WorkerHooks`] over its communicator, clock and dataset.
pub(crate) trait HooksFactory: Sync {
    /// The report's `cut`.
    fn cut(&self) -> &'static str;

    fn make<'a>(
        &self,
        comm: &'a dyn Communicator,
        clock: &'a CommClock<'a>,
        dataset: &'a Dataset,
    ) -> Result<Box<dyn WorkerHooks + 'a>, TrainError>;

    /// Whether the hooks it makes have [`WorkerHooks::resident_columns`] (a device worker's
    /// memory check counts them before the hooks exist).
    fn holds_columns(&self) -> bool {
        false
    }
}

/// Plain data-parallel training: the dataset's features, the gradients all-reduced.
pub(crate) struct Replicated;

impl HooksFactory for Replicated {
    fn cut(&self) -> &'static str {
        "none"
    }

    fn make<'a>(
        &self,
        comm: &'a dyn Communicator,
        clock: &'a CommClock<'a>,
        _dataset: &'a Dataset,
    ) -> Result<Box<dyn WorkerHooks + 'a>, TrainError> {
        Ok(Box::new(AllReduce { comm, clock }))
    }
}

/// The gradient all-reduce under [`GRADS`].
pub(crate) struct AllReduce<'a> {
    pub(crate) comm: &'a dyn Communicator,
    pub(crate) clock: &'a CommClock<'a>,
}

impl AllReduce<'_> {
    /// The all-reduce under [`GRADS`].
    fn sum(&self) -> GradSum<'_> {
        GradSum::new(self.comm, self.clock, GRADS)
    }

    /// Sums `grads` over the workers; returns the seconds it took.
    pub(crate) fn grads(&self, grads: &mut [f32]) -> Result<f64, TrainError> {
        let start = Instant::now();
        self.sum().on_host(grads)?;
        Ok(start.elapsed().as_secs_f64())
    }
}

impl StepHooks for AllReduce<'_> {
    fn sync(&mut self, grads: &mut [f32], _loss: f64) -> Result<f64, TrainError> {
        self.grads(grads)
    }

    fn grad_sum(&mut self) -> Option<GradSum<'_>> {
        Some(self.sum())
    }
}

impl WorkerHooks for AllReduce<'_> {}

/// Trains data-parallel on `cluster` on `sampling`'s batches, with each worker's hooks from
/// `hooks`. Returns the report on rank 0, `None` on the other ranks of an MPI job.
pub(crate) fn run(
    cluster: &Cluster<'_>,
    sampling: &Sampling,
    observer: &mut dyn EpochObserver,
    hooks: &dyn HooksFactory,
) -> Result<Option<Report>, TrainError> {
    let data = RankData::shared(cluster, observer.shows_progress())?;
    cluster.run(observer, |rank, observer| {
        let (comm, clock, config) = (rank.comm, &rank.clock, rank.config());
        let dataset = data.get(comm.rank() == 0 && observer.shows_progress())?;
        let dataset: &Dataset = &dataset;
        let share = Share::new(comm.rank(), comm.size())?;
        let gpu = on_device::open(rank, dataset, None, hooks.holds_columns())?;
        let mut trainer = BatchTrainer::new(config, sampling, dataset, comm.size())?;
        on_device::place(gpu.as_ref(), &mut trainer)?;
        let (train, batch_size, seed) = (&dataset.splits.train, sampling.batch_size, config.seed);
        let steps = Box::new(move |epoch| Ok(shared_steps(train, batch_size, share, seed, epoch)?));
        let eval = (comm.rank() == 0).then(|| FullGraph::of(dataset));
        let extra = json!({ "global_batch_size": batch_size * comm.size() });
        let hooks_of_worker = hooks.make(comm, clock, dataset)?;
        if let (Some(_), Some(columns)) = (&gpu, hooks_of_worker.resident_columns()) {
            trainer.hold_own_columns(columns)?;
        }
        let mut worker = Worker::new(comm, clock, trainer, steps, eval, extra, hooks_of_worker);
        let mut outcome = worker.train(rank, dataset.graph.fingerprint(), observer)?;
        if comm.rank() != 0 {
            return Ok(None);
        }
        if let Some(gpu) = &gpu {
            outcome.final_.device = Some(gpu.summary()?);
        }
        if let (Some(Value::Object(fields)), Some(Value::Object(extra))) =
            (&mut outcome.final_.method, worker.hooks.final_fields(&outcome.epochs))
        {
            fields.extend(extra);
        }
        Ok(Some(rank.report(Described::of(dataset, hooks.cut(), None), outcome)))
    })
}

/// A worker's steps of a 1-based epoch.
pub(crate) type StepsFn<'a> = Box<dyn Fn(usize) -> Result<Vec<StepSeeds>, TrainError> + 'a>;

/// One worker of a data-parallel run (replicated data, or ADGraph's extended parts), as the
/// epoch loop sees it.
pub(crate) struct Worker<'a> {
    comm: &'a dyn Communicator,
    clock: &'a CommClock<'a>,
    trainer: BatchTrainer<'a>,
    steps: StepsFn<'a>,
    /// The method's part of every step (inputs, gradient sync) and of the report.
    hooks: Box<dyn WorkerHooks + 'a>,
    layers: usize,
    /// The whole graph, on the rank that evaluates (rank 0).
    eval: Option<FullGraph<'a>>,
    /// Fields added to `final.method`.
    extra: Value,
}

impl<'a> Worker<'a> {
    pub(crate) fn new(
        comm: &'a dyn Communicator,
        clock: &'a CommClock<'a>,
        trainer: BatchTrainer<'a>,
        steps: StepsFn<'a>,
        eval: Option<FullGraph<'a>>,
        extra: Value,
        hooks: Box<dyn WorkerHooks + 'a>,
    ) -> Self {
        let layers = trainer.layers();
        Self { comm, clock, trainer, steps, hooks, layers, eval, extra }
    }

    /// Runs the epochs the configuration asks for on `rank`, whose data hashes to
    /// `fingerprint`, resuming from and writing checkpoints as it says; the hooks'
    /// [`WorkerHooks::before_training`] runs first unless the run resumes.
    pub(crate) fn train(
        &mut self,
        rank: &Rank<'a>,
        fingerprint: u64,
        observer: &mut dyn EpochObserver,
    ) -> Result<LoopOutcome, TrainError> {
        let checkpoints = rank.checkpoints(fingerprint)?;
        if checkpoints.resume.is_none() {
            self.hooks.before_training(&mut self.trainer)?;
        }
        train_loop_with(self, LoopOptions::of(rank.config()), observer, checkpoints)
    }

    /// Every worker's totals and time outside communicator calls (identical on every rank).
    fn gather_totals(&self, totals: &EpochTotals, busy_s: f64) -> Result<(Vec<EpochTotals>, Vec<f64>), DistError> {
        let row = EpochTotals::row_len(self.layers) + 1;
        let mut table = vec![0.0f64; self.comm.size() * row];
        let mine = &mut table[self.comm.rank() * row..][..row];
        mine[..row - 1].copy_from_slice(&totals.to_row());
        mine[row - 1] = busy_s;
        self.clock.call(|| self.comm.all_reduce_sum_f64(STATS, &mut table))?;
        let workers = table.chunks_exact(row).map(|r| EpochTotals::from_row(&r[..row - 1])).collect();
        let busy = table.chunks_exact(row).map(|r| r[row - 1]).collect();
        Ok((workers, busy))
    }
}

impl Strategy for Worker<'_> {
    type Error = TrainError;

    fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
        let (comm, clock) = (self.comm, self.clock);
        let mark = comm.ledger_mark();
        let waited_before = clock.waited();
        let start = Instant::now();
        let steps = (self.steps)(epoch)?;
        let totals = self.trainer.train_steps(epoch, &steps, &mut *self.hooks)?;
        let busy_s = start.elapsed().saturating_sub(clock.waited() - waited_before).as_secs_f64();
        let delta = comm.ledger_since(mark);
        let (workers, busy) = self.gather_totals(&totals, busy_s)?;
        let slowest = busy.iter().copied().fold(0.0, f64::max);
        let mut stats = CommStats::default();
        if let Some(merged) = clock.call(|| comm.gather_ledger(0, &delta)).map_err(DistError::from)? {
            let totals = merged.totals();
            stats.bytes_intra = totals.bytes_intra;
            stats.bytes_inter = totals.bytes_inter;
            stats.messages = totals.messages();
            stats.modeled_comm_s = cost::model(comm.topology(), &merged).total_s;
            // The all-reduces block: the modeled epoch is compute, then communication.
            stats.modeled_epoch_s = Some(slowest + stats.modeled_comm_s);
            for phase in merged.phases() {
                stats.bytes_by_phase.insert(phase.to_string(), merged.phase_totals(phase).bytes());
            }
        }
        // So that the loop's `compute_s` (wall time minus this) is the slowest worker's.
        stats.waited_s = start.elapsed().as_secs_f64() - slowest;
        let mut method = epoch_json(&workers);
        method["busy_s_per_worker"] = json!(busy);
        if let Some(Value::Object(extra)) = self.hooks.epoch_fields() {
            method.as_object_mut().expect("epoch_json is an object").extend(extra);
        }
        Ok(StepStats { loss: mean_loss(&workers), comm: stats, method: Some(method) })
    }

    fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        let mut accs = [0.0f64; 3];
        if let Some(graph) = &self.eval {
            let eval = self.trainer.evaluate_on(graph)?;
            accs = [eval.train_acc, eval.val_acc, eval.test_acc];
        }
        self.clock.call(|| self.comm.all_reduce_sum_f64(EVAL, &mut accs)).map_err(DistError::from)?;
        Ok(EvalStats { train_acc: accs[0], val_acc: accs[1], test_acc: accs[2] })
    }

    fn final_method(&mut self) -> Option<Value> {
        let mut fields = json!({ "lr": self.trainer.lr() });
        if let (Value::Object(fields), Value::Object(extra)) = (&mut fields, &self.extra) {
            fields.extend(extra.clone());
        }
        Some(fields)
    }

    fn model(&self) -> Option<&Model> {
        self.trainer.model()
    }

    /// Every worker's device epoch: the slowest worker's phases, the bus bytes summed.
    fn device_epoch(&mut self) -> Result<Option<DeviceEpoch>, TrainError> {
        match self.trainer.device_epoch() {
            Some(mine) => Ok(Some(device_epoch_over_workers(self.comm, self.clock, STATS, mine)?)),
            None => Ok(None),
        }
    }

    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
        self.trainer.snapshot(epoch).map(Some)
    }

    fn checkpoint_state(&self) -> Result<WorkerState, String> {
        let mut method = Vec::new();
        self.hooks.save_state(&mut method).map_err(|e| e.context("the method's hooks").to_string())?;
        self.trainer.checkpoint_state(method)
    }

    fn restore_state(&mut self, state: WorkerState) -> Result<(), String> {
        let method = self.trainer.restore_state(state)?;
        self.hooks.restore_state(&method).map_err(|e| e.context("the method's hooks").to_string())
    }
}
