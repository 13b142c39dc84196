//! The errors of a training run: [`TrainError`] and the errors it wraps from each part of a run
//! ([`DistError`], [`CheckpointError`], [`MemoryError`]), kept here, below every module that
//! returns them, so that no module reaches up for an error type.

mod checkpoint;
mod dist;
mod memory;

use gnn_core::{GraphError, LearnError, LossError, ModelError, OptimError};
use graph_partition::sample::{PlanError, SampleError};

pub use self::checkpoint::CheckpointError;
pub use self::dist::DistError;
pub use self::memory::MemoryError;
use crate::config::{ConfigError, Device};
use crate::data::DataError;

/// Why a training run failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The device path (`device = "cuda"`) failed.
    #[error("device: {0}")]
    Device(#[from] gnn_core::gpu::GpuError),
    /// `device = "cuda"` in a trainer built without its `cuda` feature (whatever gnn-core's
    /// features are: the device strategy itself is compiled out).
    #[error("device: this halo was built without CUDA support: rebuild with `--features cuda` to use a GPU")]
    NoCuda,
    /// `backend = "nccl"` in a trainer built without its `nccl` feature.
    #[error("backend: this halo was built without NCCL support: rebuild with `--features nccl` to use --backend nccl")]
    NoNccl,
    /// `backend = "nccl"` with several workers on one GPU: NCCL takes one rank per GPU.
    #[error(
        "backend: nccl needs a GPU per worker, but cuda:{ordinal} would hold {workers} workers ({visible} GPUs \
         visible); use fewer workers, or --backend local to share GPUs"
    )]
    NcclSharedGpu { ordinal: usize, workers: usize, visible: usize },
    /// A mini-batch worker's model asked for on the host while it lives on a device (a runner
    /// moves it there once, from the host).
    #[error("device: the model already lives on the device; it is moved there once, from the host")]
    NoHostModel,
    /// A device run on a machine whose driver lists no GPU.
    #[error("device: {device} asks for a GPU, and no CUDA GPU is visible here (check CUDA_VISIBLE_DEVICES)")]
    NoVisibleGpu { device: Device },
    /// The launcher's local rank, which picks a rank's GPU, is not a number.
    #[error("device: rank {rank}: {variable}={value:?} is not a local rank, so its GPU is unknown")]
    LocalRank { rank: usize, variable: &'static str, value: String },
    /// The model or data cannot go to the device yet.
    #[error("device: {0}")]
    DevicePlan(#[from] gnn_core::gpu::plan::PlanError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The dataset could not be found, loaded or generated.
    #[error(transparent)]
    Data(#[from] DataError),
    /// The split has no training nodes, so there is no loss to minimise.
    #[error("split `{split}` has no training nodes")]
    NoTrainingNodes {
        /// The split's name.
        split: String,
    },
    /// The graph cannot be aggregated over.
    #[error("graph: {0}")]
    Graph(#[from] GraphError),
    /// The model could not be built or run.
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// The labels do not fit the model's outputs.
    #[error("loss: {0}")]
    Loss(#[from] LossError),
    /// The optimizer refused a step.
    #[error("optimizer: {0}")]
    Optim(#[from] OptimError),
    /// A loss, gradient or parameter went non-finite; the run stopped there.
    #[error("epoch {epoch}: non-finite value in {site}; {hint}")]
    NonFinite {
        /// The 1-based epoch of the step.
        epoch: usize,
        /// Where the value was found.
        site: Site,
        /// What to try.
        hint: String,
    },
    /// A distributed run could not be set up or a worker failed.
    #[error(transparent)]
    Distributed(#[from] DistError),
    /// Mini-batches could not be sampled.
    #[error("sampling: {0}")]
    Sample(#[from] SampleError),
    /// An epoch could not be cut into batches.
    #[error("batches: {0}")]
    Plan(#[from] PlanError),
    /// A method's controller failed between steps.
    #[error("method controller: {0}")]
    Controller(Box<dyn std::error::Error + Send + Sync>),
    /// The estimated peak memory exceeds the ceiling.
    #[error(transparent)]
    Memory(#[from] Box<MemoryError>),
    /// A checkpoint could not be written, or the run could not resume from one.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// `HALO_FAULT` does not name a fault.
    #[error(transparent)]
    FaultSpec(#[from] comm_hierarchy::fault::FaultSpecError),
    /// `HALO_FAULT` failed this single-process run where it said.
    #[error("{0}")]
    Injected(comm_hierarchy::CommError),
    /// A method's parts do not go together (a method definition's mistake, not the user's).
    #[error("method `{method}`: {detail}")]
    Parts {
        /// The method's name.
        method: String,
        /// Which parts clash.
        detail: String,
    },
    /// The model's backend cannot run what was asked.
    #[error("model: {0}")]
    Backend(LearnError),
    /// The run's observer asked it to stop.
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

/// A run ended before its next epoch because its observer asked it to
/// (`crate::train_loop::EpochObserver::stop_requested`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stopped on request after epoch {after_epoch}")]
pub struct Stopped {
    /// The last epoch that finished.
    pub after_epoch: usize,
}

impl From<LearnError> for TrainError {
    /// Each backend failure as the error of the part that failed.
    fn from(e: LearnError) -> Self {
        match e {
            LearnError::Model(e) => Self::Model(e),
            LearnError::Loss(e) => Self::Loss(e),
            LearnError::Optim(e) => Self::Optim(e),
            LearnError::Graph(e) => Self::Graph(e),
            LearnError::Device(e) => Self::Device(e),
            e @ (LearnError::Unsupported { .. } | LearnError::State(_)) => Self::Backend(e),
        }
    }
}

/// Where a non-finite value was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// The loss; the first conv layer whose output was non-finite, if any.
    Loss { layer: Option<usize> },
    /// The gradient of a parameter (named as in the model's parameter list).
    Gradient { param: String },
    /// A parameter after the optimizer step.
    Parameter { param: String },
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Site::Loss { layer: Some(l) } => {
                write!(f, "the loss (the output of layer {l} was the first to go non-finite)")
            }
            Site::Loss { layer: None } => write!(f, "the loss (every layer's output was finite)"),
            Site::Gradient { param } => write!(f, "the gradient of {param}"),
            Site::Parameter { param } => write!(f, "parameter {param} after the update"),
        }
    }
}
