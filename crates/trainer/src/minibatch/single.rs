//! Single-process mini-batch training: one `BatchTrainer` takes every step of every epoch.

use gnn_core::Model;
use graph_partition::Dataset;
use graph_partition::sample::Share;
use serde_json::json;

use super::on_device;
use super::stats::{epoch_json, mean_loss};
use super::trainer::{BatchTrainer, NoSync};
use crate::checkpoint::WorkerState;
use crate::config::{Device, TrainConfig};
use crate::error::TrainError;
use crate::harness::Alone;
use crate::harness::gpu::Gpu;
use crate::method::Sampling;
use crate::report::{DeviceEpoch, Report, TrainedModel};
use crate::train_loop::{EpochObserver, EvalStats, StepStats, Strategy};

/// The loop's view of single-process mini-batch training: a "step" is an epoch of batches.
#[derive(Debug)]
pub struct SingleMiniBatch<'a> {
    trainer: BatchTrainer<'a>,
}

impl<'a> SingleMiniBatch<'a> {
    /// The model and optimizer `config` describes for `dataset` (features used as they are:
    /// normalise them first), trained on `sampling`'s batches.
    pub fn new(config: &TrainConfig, sampling: &Sampling, dataset: &'a Dataset) -> Result<Self, TrainError> {
        Ok(Self { trainer: BatchTrainer::new(config, sampling, dataset, 1)? })
    }
}

impl Strategy for SingleMiniBatch<'_> {
    type Error = TrainError;

    fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
        let totals = self.trainer.train_epoch(epoch, Share::whole(), &mut NoSync)?;
        let totals = [totals];
        Ok(StepStats { loss: mean_loss(&totals), method: Some(epoch_json(&totals)), ..StepStats::default() })
    }

    fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
        self.trainer.evaluate()
    }

    fn final_method(&mut self) -> Option<serde_json::Value> {
        Some(json!({ "lr": self.trainer.lr() }))
    }

    fn model(&self) -> Option<&Model> {
        self.trainer.model()
    }

    fn device_epoch(&mut self) -> Result<Option<DeviceEpoch>, TrainError> {
        Ok(self.trainer.device_epoch())
    }

    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
        self.trainer.snapshot(epoch).map(Some)
    }

    fn checkpoint_state(&self) -> Result<WorkerState, String> {
        self.trainer.checkpoint_state(Vec::new())
    }

    fn restore_state(&mut self, state: WorkerState) -> Result<(), String> {
        let method = self.trainer.restore_state(state)?;
        cache_quant::state::expect_empty("the method", &method).map_err(|e| e.to_string())
    }
}

/// Trains `dataset` in this process on `sampling`'s mini-batches and returns the report of
/// `method`.
pub fn run(
    method: &str,
    sampling: &Sampling,
    config: &TrainConfig,
    dataset: &Dataset,
    observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    let alone = Alone::start(method, config, dataset)?;
    let gpu = match alone.device() {
        Device::Cpu => None,
        Device::Cuda(ordinal) => Some(Gpu::alone(ordinal, on_device::footprint(config, dataset, None, false)?)?),
    };
    let mut strategy = SingleMiniBatch::new(config, sampling, dataset)?;
    on_device::place(gpu.as_ref(), &mut strategy.trainer)?;
    let mut outcome = alone.train(&mut strategy, observer)?;
    if let Some(gpu) = &gpu {
        outcome.final_.device = Some(gpu.summary()?);
    }
    Ok(alone.report(outcome))
}
