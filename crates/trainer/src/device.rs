//! `device = "cuda[:N]"`: single-process full-batch training with the model, its gradients, Adam
//! moments and activations resident on one GPU (`gnn_core::gpu::DeviceModel`). The parameters
//! are initialised on the CPU from the same seed and uploaded, so a run starts where the CPU
//! path starts. At each new best validation epoch the parameters come back to the host (into
//! the CPU model's flat layout), so `--save-model` writes the same file as a CPU run. The loss
//! is the CPU's objective for the dataset's labels: softmax cross-entropy of classes, or
//! sigmoid binary cross-entropy of multi-label targets (accuracy over label columns).

use graph_partition::Dataset;

use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::report::Report;
use crate::train_loop::EpochObserver;

#[cfg(feature = "cuda")]
pub use cuda::run;

/// Without the `cuda` feature: the device path is not in this build.
#[cfg(not(feature = "cuda"))]
pub fn run(
    _method: &str,
    _config: &TrainConfig,
    _dataset: &Dataset,
    _ordinal: usize,
    _observer: &mut dyn EpochObserver,
) -> Result<Report, TrainError> {
    Err(TrainError::NoCuda)
}

#[cfg(feature = "cuda")]
mod cuda {
    use gnn_core::gpu::{CudaSlice, Device, DeviceGraph, DeviceLabels, DeviceModel};
    use gnn_core::{Adam, ForwardCtx, Model, ModelConfig};
    use graph_partition::Splits;

    use super::*;
    use crate::export::TrainedModel;
    use crate::objective::Hits;
    use crate::train_loop::{EvalStats, LoopOptions, StepStats, Strategy, train_loop};

    /// The device twin of [`crate::single::SingleProcess`].
    struct OnDevice<'d> {
        model: DeviceModel<'d>,
        /// The CPU model's configuration, which the saved weights carry.
        config: ModelConfig,
        graph: DeviceGraph,
        features: CudaSlice<f32>,
        /// Train, validation and test rows with their labels.
        splits: [DeviceLabels; 3],
        optimizer: Adam,
        seed: u64,
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
            let n = graph.num_local();
            let Splits { train, valid, test, .. } = &dataset.splits;
            let upload = |rows: &[u32]| DeviceLabels::upload(dev, &dataset.labels, rows, n, classes);
            let model = DeviceModel::from_model(dev, &cpu)?;
            Ok(Self {
                graph: model.upload_graph(&graph)?,
                model,
                config: cpu.config().clone(),
                features: dev.upload(dataset.features.as_standard_layout().as_slice().unwrap_or_default())?,
                splits: [upload(train)?, upload(valid)?, upload(test)?],
                optimizer: config.optimizer(),
                seed: config.seed,
            })
        }
    }

    impl Strategy for OnDevice<'_> {
        type Error = TrainError;

        fn train_step(&mut self, epoch: usize) -> Result<StepStats, TrainError> {
            self.model.zero_grad()?;
            self.model.forward(&self.graph, &self.features, ForwardCtx::train(self.seed, epoch as u64))?;
            let train = &self.splits[0];
            // The mean over every loss term, as the CPU's `Objective::terms_per_row` counts them.
            let terms = train.len() * train.terms_per_row();
            let out = self.model.loss(train, terms)?;
            self.model.backward(&self.graph)?;
            self.model.step(&self.optimizer)?;
            Ok(StepStats { loss: out.loss_sum / terms as f64, ..StepStats::default() })
        }

        fn evaluate(&mut self) -> Result<EvalStats, TrainError> {
            self.model.forward(&self.graph, &self.features, ForwardCtx::eval())?;
            let mut acc = [0.0; 3];
            for (a, split) in acc.iter_mut().zip(&self.splits) {
                let out = self.model.loss(split, split.len())?;
                let total = split.len() * split.terms_per_row();
                *a = Hits { correct: out.correct as u64, total: total as u64 }.fraction();
            }
            Ok(EvalStats { train_acc: acc[0], val_acc: acc[1], test_acc: acc[2] })
        }

        /// Downloads the parameters, joined into the CPU model's flat layout (`DevicePlan::join`).
        fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
            Ok(Some(TrainedModel { config: self.config.clone(), params: self.model.params()?, epoch }))
        }
    }

    /// Trains `dataset` on GPU `ordinal` as `config` says.
    pub fn run(
        method: &str,
        config: &TrainConfig,
        dataset: &Dataset,
        ordinal: usize,
        observer: &mut dyn EpochObserver,
    ) -> Result<Report, TrainError> {
        let dev = Device::new(ordinal)?;
        let mut strategy = OnDevice::new(&dev, config, dataset)?;
        let outcome =
            train_loop(&mut strategy, LoopOptions { epochs: config.epochs, patience: config.patience }, observer)?;
        Ok(crate::single::report(method, config, dataset, outcome))
    }
}
