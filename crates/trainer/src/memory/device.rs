//! The GPU memory of a `--device cuda` run ([`gnn_core::gpu::footprint`]), estimated from the
//! dataset's shapes and checked against the GPU's free memory before anything is uploaded, so
//! a run that cannot fit stops with both numbers instead of failing inside a kernel.

use gnn_core::gpu::footprint::{Footprint, Shapes, graph_bytes};
use gnn_core::gpu::plan::DevicePlan;
use gnn_core::{ConvKind, Model, ModelConfig};
use graph_partition::Dataset;
use graph_partition::book::LocalGraph;

use super::{Limit, format_bytes};
use crate::config::TrainConfig;
use crate::error::TrainError;
use gnn_core::objective::Objective;

/// The device memory `config` needs to train on the whole of `dataset` on one GPU.
pub fn estimate(config: &TrainConfig, dataset: &Dataset) -> Result<Footprint, TrainError> {
    let splits = &dataset.splits;
    let shapes = Shapes {
        nodes: dataset.graph.num_rows(),
        edges: dataset.graph.num_edges(),
        split_rows: [splits.train.len(), splits.valid.len(), splits.test.len()],
        targets_per_row: Objective::new(&dataset.labels).terms_per_row(),
        part: false,
    };
    Ok(of_shapes(config, dataset.num_features(), dataset.num_classes, &shapes)?.0)
}

/// The footprint of `config`'s model over `shapes`, with the model's configuration.
fn of_shapes(
    config: &TrainConfig,
    in_dim: usize,
    classes: usize,
    shapes: &Shapes,
) -> Result<(Footprint, ModelConfig), TrainError> {
    let model = Model::new(config.model_config(in_dim, classes))?;
    let plan = DevicePlan::of(&model)?;
    Ok((Footprint::of(&plan, model.config(), shapes), model.config().clone()))
}

/// The device memory of one cut-graph worker computing on `part` (its local vertices and
/// edges, and the rows of its splits), with `in_dim` input columns and `classes` outputs: the
/// whole-graph footprint of the part (GAT's softmax split around the replica syncs, with its
/// blocks of sums and numerators), plus, on a step, an exchange call's staged rows (each of
/// the part's copies read or written once, at the widest width a call moves). Under `overlap`
/// GCN and GraphSAGE also hold the aggregation's halves (`gnn_core::gpu::plan::OverlapHalves`:
/// the CSR and its transpose once more, with a second row pointer each) and, on a step, the
/// first half's product beside the second's (a block of every local row at the widest width).
pub fn part_estimate(
    config: &TrainConfig,
    part: &LocalGraph,
    split_rows: [usize; 3],
    targets_per_row: usize,
    in_dim: usize,
    classes: usize,
) -> Result<Footprint, TrainError> {
    let shapes = Shapes { nodes: part.num_local(), edges: part.num_edges(), split_rows, targets_per_row, part: true };
    let (mut footprint, cfg) = of_shapes(config, in_dim, classes, &shapes)?;
    let heads = if cfg.kind == ConvKind::Gat { cfg.heads.max(cfg.out_heads) } else { 1 };
    let widest = in_dim.max(cfg.hidden * heads).max(classes * heads);
    footprint.step += (2 * part.num_copies() * widest * std::mem::size_of::<f32>()) as u64;
    if config.distributed.overlap && cfg.kind != ConvKind::Gat {
        footprint.resident += 2 * (csr_bytes(part) + row_pointer_bytes(part));
        footprint.step += (part.num_local() * widest * std::mem::size_of::<f32>()) as u64;
    }
    Ok(footprint)
}

/// A row pointer over `part`'s local rows.
fn row_pointer_bytes(part: &LocalGraph) -> u64 {
    (part.num_local() as u64 + 1) * std::mem::size_of::<u64>() as u64
}

/// A CSR of `part`'s local in-edges with a coefficient each.
fn csr_bytes(part: &LocalGraph) -> u64 {
    let edges = part.num_edges() as u64;
    row_pointer_bytes(part) + edges * (std::mem::size_of::<u32>() + std::mem::size_of::<f32>()) as u64
}

/// The device memory of a part's second view, layer 0's with its halo inputs held (the halo
/// feature cache): the part's graph as `config`'s model uploads it
/// (`gnn_core::gpu::footprint::graph_bytes`: for GAT with its head-expanded CSRs), a second
/// time.
pub fn held_view_bytes(
    config: &TrainConfig,
    part: &LocalGraph,
    in_dim: usize,
    classes: usize,
) -> Result<u64, TrainError> {
    let model = Model::new(config.model_config(in_dim, classes))?;
    let shapes =
        Shapes { nodes: part.num_local(), edges: part.num_edges(), split_rows: [0; 3], targets_per_row: 1, part: true };
    Ok(graph_bytes(&DevicePlan::of(&model)?, &shapes))
}

/// A worker's GPU and footprint, as the workers of a cut graph tell each other before any of
/// them uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuClaim {
    /// The machine the worker runs on (workers on different machines never share a GPU).
    pub machine: usize,
    /// The GPU's ordinal on that machine.
    pub ordinal: usize,
    /// The worker's estimate ([`part_estimate`]).
    pub footprint: Footprint,
}

/// How many of `claims` are on the GPU of `claims[me]`, and their footprints summed: what that
/// GPU's free memory must hold.
pub fn shared_gpu(claims: &[GpuClaim], me: usize) -> (usize, Footprint) {
    let mine = claims[me];
    let on_it = claims.iter().filter(|c| (c.machine, c.ordinal) == (mine.machine, mine.ordinal));
    on_it.fold((0, Footprint { resident: 0, step: 0 }), |(n, sum), c| {
        (n + 1, Footprint { resident: sum.resident + c.footprint.resident, step: sum.step + c.footprint.step })
    })
}

/// Fails, naming the estimate, the free memory of GPU `ordinal` and what to change, when
/// `footprint` (that of `workers` workers sharing the GPU) does not fit in `free` bytes.
pub fn check(ordinal: usize, workers: usize, footprint: Footprint, free: u64) -> Result<(), TrainError> {
    let limit = Limit { bytes: free, source: "the GPU's free memory" };
    let on = match workers {
        1 => format!("cuda:{ordinal}"),
        n => format!("cuda:{ordinal} ({n} workers)"),
    };
    let breakdown = format!(
        "  {on}: resident (parameters with gradients and Adam moments, features, graph, splits) {}\n  \
         {on}: a training step's activations and temporaries {}",
        format_bytes(footprint.resident),
        format_bytes(footprint.step)
    );
    let suggestion = match workers {
        1 => {
            "lower --hidden or --layers (GAT: --heads), free the GPU, or train on the CPU (--device cpu) \
              or with a distributed method"
        }
        _ => {
            "put fewer workers on each GPU (--workers, or more GPUs in CUDA_VISIBLE_DEVICES), lower --hidden or \
              --layers (GAT: --heads), free the GPU, or train on the CPU (--device cpu)"
        }
    };
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
        assert!(check(0, 1, footprint, footprint.total()).is_ok());
        let msg = check(1, 1, footprint, footprint.total() - 1).unwrap_err().to_string();
        for part in [format_bytes(footprint.total()).as_str(), "cuda:1", "free memory", "--hidden", "--device cpu"] {
            assert!(msg.contains(part), "{part} missing from {msg}");
        }
        let msg = check(0, 4, footprint, footprint.total() - 1).unwrap_err().to_string();
        assert!(msg.contains("cuda:0 (4 workers)") && msg.contains("fewer workers on each GPU"), "{msg}");
    }

    /// One part holding the whole graph costs what the whole graph does; a part of two costs
    /// its own shapes' footprint plus a step's staged rows, each copy at the widest width.
    #[test]
    fn a_workers_estimate_is_its_parts_footprint_plus_its_staged_rows() {
        use graph_partition::book::PartitionBook;
        use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};

        let dataset = crate::data::builtin_synthetic(0).unwrap();
        let config = TrainConfig::default();
        let (in_dim, classes) = (dataset.num_features(), dataset.num_classes);
        let targets = Objective::new(&dataset.labels).terms_per_row();
        let s = &dataset.splits;
        let rows = [s.train.len(), s.valid.len(), s.test.len()];
        let book = |parts| {
            let partition = partition_graph(&dataset.graph, &PartitionConfig::new(Algorithm::Hash, parts)).unwrap();
            PartitionBook::build(&dataset.graph, &partition).unwrap()
        };
        let whole = book(1);
        let one = part_estimate(&config, &whole.parts()[0], rows, targets, in_dim, classes).unwrap();
        assert_eq!(one, estimate(&config, &dataset).unwrap());
        let widest = in_dim.max(config.hidden).max(classes);
        for part in book(2).parts() {
            assert!(part.num_copies() > 0);
            let shapes = Shapes {
                nodes: part.num_local(),
                edges: part.num_edges(),
                split_rows: rows,
                targets_per_row: targets,
                part: true,
            };
            let (bare, _) = of_shapes(&config, in_dim, classes, &shapes).unwrap();
            let got = part_estimate(&config, part, rows, targets, in_dim, classes).unwrap();
            assert_eq!(got.resident, bare.resident);
            assert_eq!(got.step - bare.step, (2 * part.num_copies() * widest * 4) as u64);
            // Overlapped: the halves (every edge once more, forward and transposed, and four
            // row pointers) and a second aggregate block.
            let mut overlapped = config.clone();
            overlapped.distributed.overlap = true;
            let halves = part_estimate(&overlapped, part, rows, targets, in_dim, classes).unwrap();
            let (n, e) = (part.num_local() as u64, part.num_edges() as u64);
            assert_eq!(halves.resident - got.resident, 4 * (n + 1) * 8 + 2 * e * 8);
            assert_eq!(halves.step - got.step, n * widest as u64 * 4);
        }
    }

    /// The held view of a part (the halo feature cache) is the part's graph once more, as the
    /// model uploads it: a GCN part's CSR with its transpose, a GAT part's CSR with the
    /// head-expanded copy and its permutations instead; and a GAT part's step holds its
    /// softmax's blocks besides the whole graph's walk.
    #[test]
    fn held_views_and_gat_parts_count_what_their_model_uploads() {
        use gnn_core::ConvKind;
        use graph_partition::book::PartitionBook;
        use graph_partition::partition::{Algorithm, PartitionConfig, partition_graph};

        let dataset = crate::data::builtin_synthetic(0).unwrap();
        let partition = partition_graph(&dataset.graph, &PartitionConfig::new(Algorithm::Hash, 2)).unwrap();
        let book = PartitionBook::build(&dataset.graph, &partition).unwrap();
        let part = &book.parts()[0];
        let (in_dim, classes) = (dataset.num_features(), dataset.num_classes);
        let (n, e) = (part.num_local() as u64, part.num_edges() as u64);
        let gcn = TrainConfig::default();
        let gat = TrainConfig { model: ConvKind::Gat, heads: 2, ..TrainConfig::default() };
        let held = |config: &TrainConfig| held_view_bytes(config, part, in_dim, classes).unwrap();
        // GCN: the CSR, its values and the transpose's, over every edge and a self loop a row.
        assert!(held(&gcn) >= 2 * ((n + 1) * 8 + (e + n) * 8));
        // GAT: one CSR with values, and per head count (2, then the output layer's 1) the
        // expanded row pointer, indices and both permutations, and a one per row and head.
        let expanded = |h: u64| (n * h + 1) * 8 + 3 * (e + n) * h * 4 + n * h * 4;
        assert_eq!(held(&gat), (n + 1) * 8 + (e + n) * 8 + n * 4 + expanded(2) + expanded(1));
        let rows = [10, 10, 10];
        let on_part = part_estimate(&gat, part, rows, 1, in_dim, classes).unwrap();
        let shapes = Shapes {
            nodes: part.num_local(),
            edges: part.num_edges(),
            split_rows: rows,
            targets_per_row: 1,
            part: false,
        };
        let (whole, _) = of_shapes(&gat, in_dim, classes, &shapes).unwrap();
        assert!(on_part.step > whole.step + (2 * part.num_copies() * in_dim.max(gat.hidden * 2) * 4) as u64);
    }

    /// Workers on one machine's GPU add up; the same ordinal on another machine is another GPU.
    #[test]
    fn workers_sharing_a_gpu_add_up() {
        let claim = |machine, ordinal, bytes| GpuClaim {
            machine,
            ordinal,
            footprint: Footprint { resident: bytes, step: bytes / 2 },
        };
        let claims = [claim(0, 0, 100), claim(0, 1, 10), claim(0, 0, 40), claim(1, 0, 1000)];
        assert_eq!(shared_gpu(&claims, 0), (2, Footprint { resident: 140, step: 70 }));
        assert_eq!(shared_gpu(&claims, 2), shared_gpu(&claims, 0));
        assert_eq!(shared_gpu(&claims, 1), (1, Footprint { resident: 10, step: 5 }));
        assert_eq!(shared_gpu(&claims, 3), (1, Footprint { resident: 1000, step: 500 }));
    }
}
