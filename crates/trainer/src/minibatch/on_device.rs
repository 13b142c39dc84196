//! A mini-batch worker's GPU: the single process, each data-parallel worker, each ADGraph
//! worker on its extended part, and each feature-column (featpart) worker. The GPU is opened
//! with the worker's [`footprint`], and the model placed there (`gnn_core::gpu::DeviceModel`
//! under `compute::OnBlocks`, which runs every backend alike). Sampling stays on the host, in
//! the prefetch threads, which build each batch's blocks too; their aggregations
//! ([`gnn_core::gpu::plan::block_aggregations`]) and input indices go up on the worker's copy
//! stream, through page-locked memory (`Device::copy_device`). The parameters come down only
//! when asked (`--save-model`, checkpoints, hooks that read them): a non-finite parameter
//! shows in the next step's gradients.
//!
//! Without the `cuda` feature a device worker is refused ([`TrainError::NoCuda`]).

use gnn_core::gpu::footprint::Footprint;
use gnn_core::{ConvKind, Model};
use graph_partition::Dataset;

use super::compute::BatchModel;
#[cfg(feature = "cuda")]
use super::compute::OnBlocks;
use super::trainer::BatchTrainer;
use crate::config::{self, TrainConfig};
use crate::error::TrainError;
use crate::harness::Rank;
use crate::harness::gpu::{self, Gpu};
use crate::memory;

/// Worker `rank`'s GPU where the run computes on one (`harness::gpu::open` with the
/// [`footprint`] of a worker training on `dataset` and evaluating on `eval`, holding its own
/// columns where `own_columns`), else `None`.
pub(crate) fn open(
    rank: &Rank<'_>,
    dataset: &Dataset,
    eval: Option<&Dataset>,
    own_columns: bool,
) -> Result<Option<Gpu>, TrainError> {
    let config = rank.config();
    match config.device {
        config::Device::Cpu => Ok(None),
        config::Device::Cuda(_) => Ok(Some(gpu::open(rank, footprint(config, dataset, eval, own_columns)?)?)),
    }
}

/// Moves `trainer`'s model onto `gpu`, where there is one (its parameters as they are).
pub(crate) fn place<'a>(gpu: Option<&'a Gpu>, trainer: &mut BatchTrainer<'a>) -> Result<(), TrainError> {
    let dataset = trainer.dataset();
    match gpu {
        Some(gpu) => trainer.place_model(|host| model(gpu, host, dataset)),
        None => Ok(()),
    }
}

/// The device memory of a mini-batch worker training on `dataset` (its feature matrix and
/// graph) and evaluating on `eval` where it evaluates on another graph (ADGraph's part
/// against the whole): the whole-graph footprint of the graph it evaluates on (the
/// evaluation's forward pass, which also bounds a batch's activations: a block has at most
/// every vertex as a source), with `dataset`'s matrix beside `eval`'s, plus two batches'
/// blocks in flight (the one computing and the next one uploading), each block at most every
/// edge with its coefficient, both ways. A worker evaluating on its own dataset holds its
/// matrix once, for its batches and its evaluation. A worker holding its `own_columns`
/// ([`BatchModel::hold_own_columns`]: a row of `dataset`'s width per vertex) holds them beside
/// the whole matrix its evaluation reads.
pub(crate) fn footprint(
    config: &TrainConfig,
    dataset: &Dataset,
    eval: Option<&Dataset>,
    own_columns: bool,
) -> Result<Footprint, TrainError> {
    let matrix = (dataset.features.len() * std::mem::size_of::<f32>()) as u64;
    let mut footprint = memory::device::estimate(config, dataset)?;
    if let Some(eval) = eval {
        let whole = memory::device::estimate(config, eval)?;
        footprint.resident = whole.resident + matrix;
        footprint.step = footprint.step.max(whole.step);
    }
    if own_columns {
        footprint.resident += matrix;
    }
    footprint.step += 2 * config.layers as u64 * block_bytes(config, dataset);
    Ok(footprint)
}

/// The device bytes of one sampled block of `dataset` at most (every edge): GCN and GraphSAGE
/// the edges with their coefficients, both ways; GAT the edges and every vertex's self loop
/// with their values, and the head-expanded copy of those entries for the widest layer (an
/// index and two permutation entries each, and a row pointer and a one per row and head).
fn block_bytes(config: &TrainConfig, dataset: &Dataset) -> u64 {
    const WORD: u64 = 4;
    let (edges, nodes) = (dataset.graph.num_edges() as u64, dataset.num_nodes() as u64);
    match config.model {
        ConvKind::Gat => {
            let cfg = config.model_config(dataset.num_features(), dataset.num_classes);
            let heads = cfg.heads.max(cfg.out_heads) as u64;
            let entries = edges + nodes;
            2 * WORD * entries + heads * (3 * WORD * entries + 3 * WORD * nodes)
        }
        ConvKind::Gcn | ConvKind::Sage => 2 * edges * 2 * WORD,
    }
}

/// `host`'s parameters on `gpu`, for a worker that holds `dataset`'s feature matrix.
#[cfg(feature = "cuda")]
fn model<'a>(gpu: &'a Gpu, host: Model, dataset: &'a Dataset) -> Result<Box<dyn BatchModel + 'a>, TrainError> {
    let learner = gnn_core::gpu::DeviceModel::from_model(&gpu.dev, &host)?;
    Ok(Box::new(OnBlocks::new(learner, Some(host), &dataset.features)))
}

/// Without the `cuda` feature there is no device to compute on.
#[cfg(not(feature = "cuda"))]
fn model<'a>(_gpu: &'a Gpu, _host: Model, _dataset: &'a Dataset) -> Result<Box<dyn BatchModel + 'a>, TrainError> {
    Err(TrainError::NoCuda)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minibatch::tests::{config, dataset};

    /// A worker's footprint is its graph's whole-graph estimate plus two batches' blocks of
    /// every edge, both ways, per layer; evaluating on another graph raises it to that graph's
    /// with the worker's matrix beside, and holding its own columns adds a matrix of its
    /// graph's shape.
    #[test]
    fn the_footprint_holds_two_batches_and_the_larger_graph() {
        let config = config(ConvKind::Sage);
        let small = dataset();
        let whole = memory::device::estimate(&config, &small).unwrap();
        let edges = small.graph.num_edges() as u64;
        let blocks = 2 * config.layers as u64 * 2 * edges * 8;
        // GAT's blocks hold every self loop and a head-expanded copy.
        let gat = TrainConfig { model: ConvKind::Gat, ..config.clone() };
        let (nodes, heads) = (small.num_nodes() as u64, gat.model_config(1, 1).heads.max(1) as u64);
        let with_loops = edges + nodes;
        assert!(block_bytes(&gat, &small) >= 8 * with_loops + heads * 12 * with_loops, "GAT's block");
        let own = footprint(&config, &small, None, false).unwrap();
        assert_eq!((own.resident, own.step), (whole.resident, whole.step + blocks));
        let columns = footprint(&config, &small, None, true).unwrap();
        let matrix = (small.features.len() * 4) as u64;
        assert_eq!((columns.resident, columns.step), (whole.resident + matrix, own.step), "own columns beside");
        let synth = graph_partition::SynthConfig {
            nodes: 2000,
            avg_degree: 6.0,
            features: 12,
            classes: 4,
            seed: 3,
            ..Default::default()
        };
        let large = synth.generate().unwrap();
        let larger = memory::device::estimate(&config, &large).unwrap();
        let with_eval = footprint(&config, &small, Some(&large), false).unwrap();
        assert_eq!((with_eval.resident, with_eval.step), (larger.resident + matrix, larger.step + blocks));
    }
}
