//! The GPU memory of a `--device cuda` run ([`gnn_core::gpu::footprint`]), estimated from the
//! dataset's shapes and checked against the GPU's free memory before anything is uploaded, so
//! a run that cannot fit stops with both numbers instead of failing inside a kernel.

use gnn_core::Model;
use gnn_core::gpu::footprint::{Footprint, Shapes};
use gnn_core::gpu::plan::DevicePlan;
use graph_partition::Dataset;

use super::{Limit, format_bytes};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::objective::Objective;

/// The device memory `config` needs to train on the whole of `dataset` on one GPU.
pub fn estimate(config: &TrainConfig, dataset: &Dataset) -> Result<Footprint, TrainError> {
    let model = Model::new(config.model_config(dataset.num_features(), dataset.num_classes))?;
    let plan = DevicePlan::of(&model)?;
    let splits = &dataset.splits;
    let shapes = Shapes {
        nodes: dataset.graph.num_rows(),
        edges: dataset.graph.num_edges(),
        split_rows: [splits.train.len(), splits.valid.len(), splits.test.len()],
        targets_per_row: Objective::new(&dataset.labels).terms_per_row(),
    };
    Ok(Footprint::of(&plan, model.config(), &shapes))
}

/// Fails, naming the estimate, the free memory of GPU `ordinal` and what to change, when
/// `footprint` does not fit in `free` bytes.
pub fn check(ordinal: usize, footprint: Footprint, free: u64) -> Result<(), TrainError> {
    let limit = Limit { bytes: free, source: "the GPU's free memory" };
    let breakdown = format!(
        "  cuda:{ordinal}: resident (parameters with gradients and Adam moments, features, graph, splits) {}\n  \
         cuda:{ordinal}: a training step's activations and temporaries {}",
        format_bytes(footprint.resident),
        format_bytes(footprint.step)
    );
    let suggestion = "lower --hidden or --layers (GAT: --heads), free the GPU, or train on the CPU (--device cpu) \
                      or with a distributed method";
    Ok(limit.check(footprint.total(), "before uploading to the GPU", &breakdown, suggestion)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate covers at least the features, and a GPU with less free memory than it is
    /// refused with both numbers and the device named.
    #[test]
    fn the_estimate_is_checked_against_free_memory() {
        let dataset = crate::data::builtin_synthetic(0).unwrap();
        let config = TrainConfig::default();
        let footprint = estimate(&config, &dataset).unwrap();
        assert!(footprint.resident > (dataset.graph.num_rows() * dataset.num_features() * 4) as u64);
        assert!(footprint.step > 0);
        assert!(check(0, footprint, footprint.total()).is_ok());
        let msg = check(1, footprint, footprint.total() - 1).unwrap_err().to_string();
        for part in [format_bytes(footprint.total()).as_str(), "cuda:1", "free memory", "--hidden", "--device cpu"] {
            assert!(msg.contains(part), "{part} missing from {msg}");
        }
    }
}
