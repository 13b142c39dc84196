//! `device = "cuda[:N]"`: single-process full-batch training with the model, its gradients, Adam
//! moments and activations resident on one GPU (`gnn_core::gpu::DeviceModel`). The parameters
//! are initialised on the CPU from the same seed and uploaded, so a run starts where the CPU
//! path starts. At each new best validation epoch the parameters come back to the host (into
//! the CPU model's flat layout), so `--save-model` writes the same file as a CPU run. The loss
//! is the CPU's objective for the dataset's labels: softmax cross-entropy of classes, or
//! sigmoid binary cross-entropy of multi-label targets (accuracy over label columns).
//!
//! Each epoch carries a `device` record (GPU time per phase, bytes over the bus). The memory check
//! of `memory/device.rs` runs before any upload. Checkpoints hold what a CPU run's hold (the
//! parameters and Adam's moments, downloaded). Without the `cuda` feature a run stops with an error
//! naming the build. `tests/gpu_train.rs` (`#[ignore]`d; `cargo xtask gpu-test`) holds the loss
//! curves against the CPU's and evaluates the saved best-epoch weights on the CPU.

use graph_partition::Dataset;

use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::harness::Alone;
use crate::report::Report;
use crate::train_loop::EpochObserver;

#[cfg(feature = "cuda")]
pub(crate) use cuda::{accuracies, train, upload_splits};

/// Without the `cuda` feature: the device path is not in this build.
#[cfg(not(feature = "cuda"))]
pub(crate) fn train(
    _alone: &Alone<'_>,
    _config: &TrainConfig,
    _dataset: &Dataset,
    _ordinal: usize,
    _observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    Err(TrainError::NoCuda)
}

#[cfg(feature = "cuda")]
mod cuda {
    use gnn_core::gpu::{CudaSlice, Device, DeviceGraph, DeviceLabels, DeviceModel, Transfers};
    use gnn_core::{ForwardCtx, Model, ModelConfig, Optim};

    use graph_partition::Splits;

    use super::*;
    use crate::checkpoint::WorkerState;
    use crate::harness::gpu::Gpu;
    use crate::objective::Hits;
    use crate::report::{DeviceEpoch, TrainedModel, phase_s as phase};
    use crate::train_loop::{EvalStats, StepStats, Strategy};

    /// The device twin of [`crate::single::SingleProcess`].
    struct OnDevice<'d> {
        dev: &'d Device,
        model: DeviceModel<'d>,
        /// The CPU model's configuration, which the saved weights carry.
        config: ModelConfig,
        graph: DeviceGraph,
        features: CudaSlice<f32>,
        /// Train, validation and test rows with their labels.
        splits: [DeviceLabels; 3],
        optimizer: Optim,
        seed: u64,
        /// The epoch being measured: its phases so far and the transfers before it.
        epoch: DeviceEpoch,
        transfers: Transfers,
    }

    impl<'d> OnDevice<'d> {
        fn new(dev: &'d Device, config: &TrainConfig, dataset: &Dataset) -> Result<Self, TrainError> {
            if dataset.splits.train.is_empty() {
                return Err(TrainError::NoTrainingNodes { split: dataset.splits.name.clone() });
            }
            // Classes, or label columns of a multi-label dataset: the width of the logits.
            let classes = dataset.num_classes;
            let cpu = Model::new(config.model_config(dataset.num_features(), classes))?;
            let graph = gnn_core::AggGraph::single_shared(std::sync::Arc::clone(&dataset.graph))?;
            let model = DeviceModel::from_model(dev, &cpu)?;
            Ok(Self {
                dev,
                graph: model.upload_graph(&graph)?,
                model,
                config: cpu.config().clone(),
                features: dev.upload(dataset.features.as_standard_layout().as_slice().unwrap_or_default())?,
                splits: upload_splits(dev, dataset)?,
                optimizer: config.optimizer(),
                seed: config.seed,
                epoch: DeviceEpoch::default(),
                transfers: dev.transfers(),
            })
        }
    }

    impl Strategy for OnDevice<'_> {
        type Error = TrainError;

        fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
            let mut clock = self.dev.clock()?;
            self.model.zero_grad()?;
            self.model.forward(&self.graph, &self.features, ForwardCtx::train(self.seed, epoch as u64))?;
            clock.mark("forward")?;
            let train = &mut self.splits[0];
            // The mean over every loss term, as the CPU's `Objective::terms_per_row` counts them.
            let terms = train.len() * train.terms_per_row();
            let out = self.model.loss(train, terms)?;
            clock.mark("loss")?;
            self.model.backward(&self.graph)?;
            clock.mark("backward")?;
            self.model.step(&self.optimizer)?;
            clock.mark("optimizer")?;
            let phases = clock.read()?;
            self.epoch = DeviceEpoch {
                forward_s: phase(&phases, "forward"),
                loss_s: phase(&phases, "loss"),
                backward_s: phase(&phases, "backward"),
                optimizer_s: phase(&phases, "optimizer"),
                ..DeviceEpoch::default()
            };
            Ok(StepStats { loss: out.loss_sum / terms as f64, ..StepStats::default() })
        }

        fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
            let mut clock = self.dev.clock()?;
            self.model.forward(&self.graph, &self.features, ForwardCtx::eval())?;
            let eval = accuracies(&self.model, &mut self.splits)?;
            clock.mark("eval")?;
            self.epoch.eval_s = phase(&clock.read()?, "eval");
            Ok(eval)
        }

        fn device_epoch(&mut self) -> Result<Option<DeviceEpoch>, TrainError> {
            let now = self.dev.transfers();
            let moved = now.since(self.transfers);
            self.transfers = now;
            Ok(Some(DeviceEpoch { h2d_bytes: moved.host_to_device, d2h_bytes: moved.device_to_host, ..self.epoch }))
        }

        /// Downloads the parameters, joined into the CPU model's flat layout (`DevicePlan::join`).
        fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
            Ok(Some(TrainedModel { config: self.config.clone(), params: self.model.params()?, epoch }))
        }

        /// Parameters and the optimizer's state downloaded in the CPU model's flat layout, so a
        /// device checkpoint holds what a CPU one holds.
        fn checkpoint_state(&self) -> Result<WorkerState, String> {
            WorkerState::of_device(&self.model, &self.optimizer, Vec::new())
        }

        fn restore_state(&mut self, state: WorkerState) -> Result<(), String> {
            state.restore_device(&mut self.model).map(drop)
        }
    }

    /// `dataset`'s train, validation and test rows with their labels, for logits of a row per
    /// vertex.
    pub(crate) fn upload_splits(dev: &Device, dataset: &Dataset) -> Result<[DeviceLabels; 3], TrainError> {
        let (n, classes) = (dataset.graph.num_rows(), dataset.num_classes);
        let Splits { train, valid, test, .. } = &dataset.splits;
        let upload = |rows: &[u32]| DeviceLabels::upload(dev, &dataset.labels, rows, n, classes);
        Ok([upload(train)?, upload(valid)?, upload(test)?])
    }

    /// The accuracies of `model`'s last forward pass (in evaluation) over `splits`.
    pub(crate) fn accuracies(model: &DeviceModel<'_>, splits: &mut [DeviceLabels; 3]) -> Result<EvalStats, TrainError> {
        let totals = model.evaluate(splits)?;
        let mut acc = [0.0; 3];
        for ((a, split), out) in acc.iter_mut().zip(splits.iter()).zip(totals) {
            let total = split.len() * split.terms_per_row();
            *a = Hits { correct: out.correct as u64, total: total as u64 }.fraction();
        }
        Ok(EvalStats { train_acc: acc[0], val_acc: acc[1], test_acc: acc[2] })
    }

    /// Trains the run `alone` of `config` on `dataset` on GPU `ordinal`.
    pub(crate) fn train(
        alone: &Alone<'_>,
        config: &TrainConfig,
        dataset: &Dataset,
        ordinal: usize,
        observer: &mut dyn EpochObserver,
    ) -> Result<Report, TrainError> {
        let gpu = Gpu::alone(ordinal, crate::memory::device::estimate(config, dataset)?)?;
        let mut strategy = OnDevice::new(&gpu.dev, config, dataset)?;
        let mut outcome = alone.train(&mut strategy, observer)?;
        outcome.final_.device = Some(gpu.summary()?);
        Ok(alone.report(outcome))
    }
}
