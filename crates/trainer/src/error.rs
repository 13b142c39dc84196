//! The error of a training run.

use gnn_core::{GraphError, LossError, ModelError, OptimError};
use graph_partition::sample::{PlanError, SampleError};

use crate::config::ConfigError;
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
        site: crate::guard::Site,
        /// What to try.
        hint: String,
    },
    /// A distributed run could not be set up or a worker failed.
    #[error(transparent)]
    Distributed(#[from] crate::distributed::DistError),
    /// Mini-batches could not be sampled.
    #[error("sampling: {0}")]
    Sample(#[from] SampleError),
    /// An epoch could not be cut into batches.
    #[error("batches: {0}")]
    Plan(#[from] PlanError),
    /// A method's controller failed between steps.
    #[error("method controller: {0}")]
    Controller(Box<dyn std::error::Error + Send + Sync>),
    /// A checkpoint could not be written, or the run could not resume from one.
    #[error(transparent)]
    Memory(#[from] Box<crate::memory::MemoryError>),

    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
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
}
