//! The epoch loop shared by every training method: step, evaluate, time, track the best
//! validation epoch, stop early, tell an observer.
//!
//! A method plugs in as a [`Strategy`]: the single-process one runs the model on the whole graph;
//! a distributed one runs it on its part and all-reduces gradients, losses and correct counts
//! inside `train_step`/`evaluate`, so the loop itself never changes.
//!
//! The loop keeps a copy of the model at each new best epoch (`Strategy::snapshot`: by default of
//! `Strategy::model`; the device strategy downloads its parameters), which ends up in
//! `Report::trained` (a `TrainedModel`, not serialised). [`train_loop_with`] also writes
//! checkpoints and starts from one, through `Strategy::checkpoint_state` / `restore_state`; an
//! [`EpochObserver`] sees every epoch (the CLI's progress display, which hands each epoch to its report keeper).

use std::collections::BTreeMap;
use std::time::Instant;

use gnn_core::Model;
use graph_partition::Splits;
use ndarray::Array2;

use crate::checkpoint::{Checkpoints, WorkerState};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::error::{CheckpointError, Stopped};
use crate::report::{Best, DeviceEpoch, EpochRecord, FinalRecord, GRAD_SYNC_PHASES, TrainedModel, is_exchange_phase};
use gnn_core::objective::{Hits, Objective};

/// Communication of one training step (all zero for single-process runs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommStats {
    /// Bytes sent between workers on the same host.
    pub bytes_intra: u64,
    /// Bytes sent between hosts.
    pub bytes_inter: u64,
    /// Messages sent.
    pub messages: u64,
    /// Communication time under the link cost model.
    pub modeled_comm_s: f64,
    /// Measured seconds the step spent in communication (subtracted from `wall_s` to give `compute_s`).
    pub waited_s: f64,
    /// Bytes per ledger phase.
    pub bytes_by_phase: BTreeMap<String, u64>,
    /// The step on the modeled cluster; `None`: no communication, the step's compute time.
    pub modeled_epoch_s: Option<f64>,
}

/// What one training step reports back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepStats {
    /// Training loss averaged over the global training set.
    pub loss: f64,
    /// Traffic of the step.
    pub comm: CommStats,
    /// Method-specific fields for the epoch record.
    pub method: Option<serde_json::Value>,
}

/// Accuracies (fractions in [0, 1]) over the global train/valid/test sets.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EvalStats {
    /// On the training nodes.
    pub train_acc: f64,
    /// On the validation nodes.
    pub val_acc: f64,
    /// On the test nodes.
    pub test_acc: f64,
}

impl EvalStats {
    /// The accuracies of the train, validation and test splits' `hits`, in that order.
    pub fn of(hits: &[Hits]) -> Self {
        let acc = |i: usize| hits.get(i).copied().unwrap_or_default().fraction();
        Self { train_acc: acc(0), val_acc: acc(1), test_acc: acc(2) }
    }
}

/// One training method, seen by the loop as "a step" and "an evaluation".
pub trait Strategy {
    /// The error a step can fail with.
    type Error;
    /// Runs one full-batch training step (forward, loss, backward, update) of the 1-based `epoch`.
    fn train_step(&mut self, epoch: usize) -> Result<StepStats, Self::Error>;
    /// Evaluates the current parameters in inference mode (no dropout).
    fn evaluate(&mut self) -> Result<EvalStats, Self::Error>;
    /// Method-specific summary fields for the final record.
    fn final_method(&mut self) -> Option<serde_json::Value> {
        None
    }
    /// A strategy on a GPU: the GPU time per phase and host-device traffic of the epoch whose
    /// step and evaluation just ran (asked once per epoch, after the evaluation).
    fn device_epoch(&mut self) -> Result<Option<DeviceEpoch>, Self::Error> {
        Ok(None)
    }
    /// The model being trained, whole on this worker (every worker holds the same parameters);
    /// the loop keeps a copy of it at the best validation epoch for `--save-model`.
    fn model(&self) -> Option<&Model> {
        None
    }
    /// The parameters after the 1-based `epoch`, which the loop asks for at every new best
    /// validation epoch (and only then) to keep for `--save-model`: a copy of
    /// [`Strategy::model`]'s by default; a strategy whose parameters live elsewhere (on a
    /// device) fetches them here.
    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, Self::Error> {
        Ok(self.model().map(|m| TrainedModel::of_host(m, epoch)))
    }
    /// This worker's state for a checkpoint: parameters, optimizer and the method's own state
    /// (its controller's settings, caches, ...); an error says why the strategy cannot be
    /// checkpointed (yet), and a run that asks for checkpoints is refused before its first epoch.
    fn checkpoint_state(&self) -> Result<WorkerState, String> {
        Err("its training strategy does not expose its state".to_string())
    }
    /// Puts back a state [`Strategy::checkpoint_state`] returned; the error says what does
    /// not fit.
    fn restore_state(&mut self, _state: WorkerState) -> Result<(), String> {
        Err("this training strategy keeps no checkpoint state".to_string())
    }
}

/// Receives every epoch as it finishes (e.g. to draw a progress bar).
pub trait EpochObserver {
    /// Called after the evaluation of each epoch.
    fn on_epoch(&mut self, record: &EpochRecord, best: &Best);

    /// Whether the work before the first epoch (loading a dataset) shows progress bars too.
    fn shows_progress(&self) -> bool {
        false
    }

    /// Whether the run should end before its next epoch. [`train_loop_with`] asks after every
    /// epoch and then fails with [`Stopped`]; the epochs so far are the ones this observer saw.
    fn stop_requested(&self) -> bool {
        false
    }
}

/// An observer that ignores everything.
impl EpochObserver for () {
    fn on_epoch(&mut self, _record: &EpochRecord, _best: &Best) {}
}

/// How long to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopOptions {
    /// Maximum number of epochs.
    pub epochs: usize,
    /// Stop after this many consecutive evaluations without a validation improvement.
    pub patience: Option<usize>,
    /// Evaluate every this many epochs, and after the last.
    pub eval_every: usize,
}

impl LoopOptions {
    /// The epochs, patience and evaluation period `config` asks for.
    pub fn of(config: &TrainConfig) -> Self {
        Self { epochs: config.epochs, patience: config.patience, eval_every: config.eval_every }
    }

    /// Whether the 1-based `epoch` ends with an evaluation.
    fn evaluates(&self, epoch: usize) -> bool {
        epoch.is_multiple_of(self.eval_every.max(1)) || epoch == self.epochs
    }
}

/// The result of the loop: every epoch run, and the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopOutcome {
    /// One record per epoch run.
    pub epochs: Vec<EpochRecord>,
    /// Summary; `peak_rss_bytes` is filled in here at the end of training.
    pub final_: FinalRecord,
    /// Whether patience ran out before `epochs`.
    pub stopped_early: bool,
    /// The model at the best validation epoch, where the strategy exposes it.
    pub trained: Option<TrainedModel>,
}

/// Runs up to `opts.epochs` epochs of `strategy`.
pub fn train_loop<S: Strategy>(
    strategy: &mut S,
    opts: LoopOptions,
    observer: &mut dyn EpochObserver,
) -> Result<LoopOutcome, S::Error> {
    run_epochs(strategy, opts, observer, Start::default(), None, |_, _, _, _, _| Ok(()))
}

/// [`train_loop`] that starts from `checkpoints.resume` when there is one, writes a checkpoint
/// through `checkpoints.writer` after every epoch it is due, and ends with [`Stopped`] when the
/// observer asks for it ([`EpochObserver::stop_requested`]).
pub fn train_loop_with<S: Strategy>(
    strategy: &mut S,
    opts: LoopOptions,
    observer: &mut dyn EpochObserver,
    checkpoints: Checkpoints<'_>,
) -> Result<LoopOutcome, S::Error>
where
    S::Error: From<CheckpointError> + From<Stopped>,
{
    let Checkpoints { writer, resume } = checkpoints;
    if let Some(writer) = &writer
        && let Err(why) = strategy.checkpoint_state()
    {
        return Err(writer.unsupported(&why).into());
    }
    let mut start = Start::default();
    if let Some(resume) = resume {
        let corrupt = |detail: String| CheckpointError::Corrupt { path: resume.shard.clone(), detail };
        strategy.restore_state(resume.state).map_err(corrupt)?;
        start.trained = match (resume.best, resume.best_params, strategy.model()) {
            (Some(best), Some(params), Some(model)) => {
                Some(TrainedModel { config: model.config().clone(), params, epoch: best.epoch })
            }
            _ => None,
        };
        start.epochs = resume.epochs;
        start.best = resume.best;
    }
    let stop = |after_epoch| Stopped { after_epoch }.into();
    run_epochs(strategy, opts, observer, start, Some(&stop), |strategy, epoch, epochs, best, trained| {
        let Some(writer) = writer.as_ref().filter(|w| w.due(epoch)) else {
            return Ok(());
        };
        let state = strategy.checkpoint_state().map_err(|why| writer.unsupported(&why))?;
        let best_params = trained.map(|t| t.params.clone());
        Ok(writer.save(epoch, state, best_params, epochs, Some(best))?)
    })
}

/// Where a loop starts: nothing run yet, or the state of a checkpoint.
#[derive(Default)]
struct Start {
    epochs: Vec<EpochRecord>,
    best: Option<Best>,
    trained: Option<TrainedModel>,
}

/// The loop itself; `after_epoch` runs once each epoch is recorded (the checkpoint hook), and
/// `stop` gives the error that ends the run when the observer asks (`None`: it is not asked).
fn run_epochs<S, H>(
    strategy: &mut S,
    opts: LoopOptions,
    observer: &mut dyn EpochObserver,
    start: Start,
    stop: Option<&dyn Fn(usize) -> S::Error>,
    mut after_epoch: H,
) -> Result<LoopOutcome, S::Error>
where
    S: Strategy,
    H: FnMut(&mut S, usize, &[EpochRecord], Best, Option<&TrainedModel>) -> Result<(), S::Error>,
{
    let Start { mut epochs, mut best, mut trained } = start;
    let first = epochs.len() + 1;
    // The last evaluation: the epochs between evaluations report it.
    let mut last = epochs
        .iter()
        .rev()
        .find(|e| e.eval_epoch.is_none())
        .map(|e| (EvalStats { train_acc: e.train_acc, val_acc: e.val_acc, test_acc: e.test_acc }, e.epoch));
    epochs.reserve(opts.epochs.saturating_sub(epochs.len()));
    let mut stopped_early = false;
    for epoch in first..=opts.epochs {
        if let Some(stop) = stop.filter(|_| observer.stop_requested()) {
            return Err(stop(epoch - 1));
        }
        let start = Instant::now();
        let step = strategy.train_step(epoch)?;
        let wall_s = start.elapsed().as_secs_f64();
        let evaluates = opts.evaluates(epoch);
        let start = Instant::now();
        let (eval, eval_epoch) = match (evaluates, last) {
            (true, _) => (strategy.evaluate()?, None),
            (false, Some((eval, at))) => (eval, Some(at)),
            (false, None) => (EvalStats { train_acc: 0.0, val_acc: 0.0, test_acc: 0.0 }, Some(0)),
        };
        let eval_s = start.elapsed().as_secs_f64();
        let compute_s = (wall_s - step.comm.waited_s).max(0.0);
        let current = match (evaluates, best) {
            (false, Some(b)) => b,
            (false, None) => Best { val_acc: 0.0, test_acc: 0.0, epoch: 0 },
            (true, Some(b)) if eval.val_acc <= b.val_acc => b,
            (true, _) => Best { val_acc: eval.val_acc, test_acc: eval.test_acc, epoch },
        };
        if evaluates {
            last = Some((eval, epoch));
            best = Some(current);
        }
        if evaluates && current.epoch == epoch {
            trained = strategy.snapshot(epoch)?;
        }
        let record = EpochRecord {
            epoch,
            loss: step.loss,
            train_acc: eval.train_acc,
            val_acc: eval.val_acc,
            test_acc: eval.test_acc,
            wall_s,
            eval_s,
            eval_epoch,
            compute_s,
            bytes_intra: step.comm.bytes_intra,
            bytes_inter: step.comm.bytes_inter,
            messages: step.comm.messages,
            modeled_comm_s: step.comm.modeled_comm_s,
            modeled_epoch_s: step.comm.modeled_epoch_s.unwrap_or(compute_s),
            bytes_by_phase: step.comm.bytes_by_phase,
            method: step.method,
            // After the snapshot, so the epoch's device traffic includes its download.
            device: strategy.device_epoch()?,
        };
        observer.on_epoch(&record, &current);
        epochs.push(record);
        after_epoch(strategy, epoch, &epochs, current, trained.as_ref())?;
        // Patience counts evaluations.
        if evaluates
            && opts.patience.is_some_and(|p| (epoch - current.epoch) / opts.eval_every.max(1) >= p)
            && epoch < opts.epochs
        {
            stopped_early = true;
            break;
        }
    }
    let best = best.unwrap_or(Best { val_acc: 0.0, test_acc: 0.0, epoch: 0 });
    let phase_bytes = |keep: &dyn Fn(&str) -> bool| -> u64 {
        epochs.iter().flat_map(|e| &e.bytes_by_phase).filter(|(p, _)| keep(p)).map(|(_, b)| b).sum()
    };
    let final_ = FinalRecord {
        best_val_acc: best.val_acc,
        test_acc_at_best_val: best.test_acc,
        best_epoch: best.epoch,
        train_wall_s: epochs.iter().map(|e| e.wall_s).sum(),
        bytes_total: epochs.iter().map(|e| e.bytes_intra + e.bytes_inter).sum(),
        modeled_comm_s_total: epochs.iter().map(|e| e.modeled_comm_s).sum(),
        bytes_exchange: phase_bytes(&is_exchange_phase),
        bytes_grad_sync: phase_bytes(&|p| GRAD_SYNC_PHASES.contains(&p)),
        modeled_train_s: epochs.iter().map(|e| e.modeled_epoch_s).sum(),
        compute_measure: None,
        peak_rss_bytes: crate::memory::peak_rss_bytes(),
        memory: None,
        method: strategy.final_method(),
        device: None,
    };
    Ok(LoopOutcome { epochs, final_, stopped_early, trained })
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
#[cfg(test)]
mod tests {
    use super::*;

    /// Replays a fixed validation curve; the loss counts steps.
    struct Scripted {
        val: Vec<f64>,
        steps: usize,
    }

    impl Strategy for Scripted {
        type Error = String;
        fn train_step(&mut self, epoch: usize) -> Result<StepStats, String> {
            self.steps += 1;
            let bytes_by_phase =
                BTreeMap::from([("fwd/0".to_string(), 9), ("grads".to_string(), 4), ("loss".to_string(), 2)]);
            let comm = CommStats {
                bytes_intra: 10,
                bytes_inter: 5,
                messages: 2,
                modeled_comm_s: 0.5,
                waited_s: 0.0,
                bytes_by_phase,
                modeled_epoch_s: Some(1.5),
            };
            Ok(StepStats { loss: epoch as f64, comm, method: None })
        }
        fn evaluate(&mut self) -> Result<EvalStats, String> {
            let v = self.val[self.steps - 1];
            Ok(EvalStats { train_acc: v, val_acc: v, test_acc: v / 2.0 })
        }
    }

    struct Recorder(Vec<(usize, usize)>);
    impl EpochObserver for Recorder {
        fn on_epoch(&mut self, record: &EpochRecord, best: &Best) {
            self.0.push((record.epoch, best.epoch));
        }
    }

    #[test]
    fn tracks_best_with_ties_keeping_the_earlier_epoch() {
        let mut s = Scripted { val: vec![0.2, 0.5, 0.5, 0.4, 0.6, 0.6], steps: 0 };
        let mut rec = Recorder(Vec::new());
        let out = train_loop(&mut s, LoopOptions { epochs: 6, patience: None, eval_every: 1 }, &mut rec).unwrap();
        assert_eq!(rec.0, vec![(1, 1), (2, 2), (3, 2), (4, 2), (5, 5), (6, 5)]);
        assert_eq!(out.final_.best_epoch, 5);
        assert_eq!(out.final_.best_val_acc, 0.6);
        assert_eq!(out.final_.test_acc_at_best_val, 0.3);
        assert_eq!(out.epochs.iter().map(|e| e.epoch).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(out.final_.bytes_total, 6 * 15);
        assert_eq!(out.final_.modeled_comm_s_total, 3.0);
        assert_eq!((out.final_.bytes_exchange, out.final_.bytes_grad_sync), (6 * 9, 6 * 4));
        assert_eq!(out.final_.modeled_train_s, 9.0);
        assert!(!out.stopped_early);
    }

    /// `eval_every = 2` over 7 epochs evaluates after epochs 2, 4, 6 and 7; the epochs between
    /// carry the last evaluation with its epoch, and patience counts evaluations.
    #[test]
    fn evaluations_every_n_epochs_and_after_the_last() {
        struct Counted(Scripted, Vec<usize>);
        impl Strategy for Counted {
            type Error = String;
            fn train_step(&mut self, epoch: usize) -> Result<StepStats, String> {
                self.0.train_step(epoch)
            }
            fn evaluate(&mut self) -> Result<EvalStats, String> {
                self.1.push(self.0.steps);
                self.0.evaluate()
            }
        }
        let val = vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7];
        let mut s = Counted(Scripted { val: val.clone(), steps: 0 }, Vec::new());
        let out = train_loop(&mut s, LoopOptions { epochs: 7, patience: None, eval_every: 2 }, &mut ()).unwrap();
        assert_eq!(s.1, [2, 4, 6, 7]);
        let seen: Vec<(Option<usize>, f64)> = out.epochs.iter().map(|e| (e.eval_epoch, e.val_acc)).collect();
        assert_eq!(
            seen,
            [(Some(0), 0.0), (None, 0.2), (Some(2), 0.2), (None, 0.4), (Some(4), 0.4), (None, 0.6), (None, 0.7)]
        );
        assert_eq!((out.final_.best_epoch, out.final_.best_val_acc), (7, 0.7));
        // No improvement after epoch 2: with patience 2 (evaluations) the run stops at epoch 6.
        let flat = vec![0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6];
        let mut s = Scripted { val: flat, steps: 0 };
        let out = train_loop(&mut s, LoopOptions { epochs: 8, patience: Some(2), eval_every: 2 }, &mut ()).unwrap();
        assert!(out.stopped_early);
        assert_eq!((out.epochs.len(), out.final_.best_epoch), (6, 2));
    }

    /// A strategy whose parameters the loop cannot borrow is asked for them at each new best
    /// epoch only, and the run keeps the last of them.
    #[test]
    fn snapshots_are_taken_at_new_best_epochs_only() {
        struct Fetched {
            scripted: Scripted,
            asked: Vec<usize>,
        }
        impl Strategy for Fetched {
            type Error = String;
            fn train_step(&mut self, epoch: usize) -> Result<StepStats, String> {
                self.scripted.train_step(epoch)
            }
            fn evaluate(&mut self) -> Result<EvalStats, String> {
                self.scripted.evaluate()
            }
            fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, String> {
                self.asked.push(epoch);
                let config = gnn_core::ModelConfig::gcn(2, 2, 2);
                Ok(Some(TrainedModel { config, params: vec![epoch as f32], epoch }))
            }
        }
        let scripted = Scripted { val: vec![0.2, 0.5, 0.5, 0.4, 0.6, 0.6], steps: 0 };
        let mut s = Fetched { scripted, asked: Vec::new() };
        let out = train_loop(&mut s, LoopOptions { epochs: 6, patience: None, eval_every: 1 }, &mut ()).unwrap();
        assert_eq!(s.asked, [1, 2, 5]);
        let trained = out.trained.expect("the best epoch's snapshot");
        assert_eq!((trained.epoch, trained.params), (5, vec![5.0]));
        assert!(
            train_loop(
                &mut Scripted { val: vec![0.3], steps: 0 },
                LoopOptions { epochs: 1, patience: None, eval_every: 1 },
                &mut ()
            )
            .unwrap()
            .trained
            .is_none()
        );
    }

    #[test]
    fn patience_stops_after_that_many_epochs_without_improvement() {
        let mut s = Scripted { val: vec![0.2, 0.5, 0.5, 0.4, 0.6, 0.7], steps: 0 };
        let out = train_loop(&mut s, LoopOptions { epochs: 6, patience: Some(2), eval_every: 1 }, &mut ()).unwrap();
        assert_eq!(out.epochs.len(), 4);
        assert!(out.stopped_early);
        assert_eq!(out.final_.best_epoch, 2);
    }

    #[test]
    fn patience_reaching_the_last_epoch_is_not_an_early_stop() {
        let mut s = Scripted { val: vec![0.5, 0.4, 0.4], steps: 0 };
        let out = train_loop(&mut s, LoopOptions { epochs: 3, patience: Some(2), eval_every: 1 }, &mut ()).unwrap();
        assert_eq!(out.epochs.len(), 3);
        assert!(!out.stopped_early);
    }

    #[test]
    fn step_errors_stop_the_loop() {
        struct Failing;
        impl Strategy for Failing {
            type Error = &'static str;
            fn train_step(&mut self, _: usize) -> Result<StepStats, &'static str> {
                Err("diverged")
            }
            fn evaluate(&mut self) -> Result<EvalStats, &'static str> {
                unreachable!("no step succeeded")
            }
        }
        let opts = LoopOptions { epochs: 3, patience: None, eval_every: 1 };
        assert_eq!(train_loop(&mut Failing, opts, &mut ()).unwrap_err(), "diverged");
    }
}
