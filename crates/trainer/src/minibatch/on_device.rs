//! A mini-batch worker whose model lives on a GPU ([`BatchModel`] over
//! `gnn_core::gpu::DeviceModel`): the single process, each data-parallel worker, each ADGraph
//! worker on its extended part, and each feature-column (featpart) worker.
//!
//! - The worker's feature matrix stays resident; a batch's input rows are gathered on the
//!   device by index. Rows a method's hooks assemble on the host are uploaded instead, except
//!   rows of the worker's own columns only (featpart's local iterations), which are gathered
//!   from those columns, held resident ([`BatchModel::hold_own_columns`]); a fetch iteration's
//!   rows gather the own columns there too, and only the fetched others go up
//!   (`put_columns_around`).
//! - Sampling stays on the host, in the prefetch threads, which build each batch's blocks too
//!   (the training thread only plans and uploads them). While a step's passes run on the
//!   compute stream, the loop hands the next step's blocks to [`BatchModel::prepare`]: their
//!   aggregations ([`gnn_core::gpu::plan::block_aggregations`]) and input indices go up on the
//!   worker's copy stream, through page-locked memory (`Device::copy_device`).
//! - Forward, loss, backward and the optimizer step run on the device. The gradients come down
//!   once a step for the hooks' sync (the all-reduce of data-parallel workers) and the CPU's
//!   non-finite guard, and go back up before the update; the loss comes down as a scalar.
//!   The parameters come down only when asked (`--save-model`, checkpoints, hooks that read
//!   them): a non-finite parameter shows in the next step's gradients.
//! - Evaluation is the CPU's full-neighbour inference as one whole-graph forward pass
//!   (equal: its blocks take every neighbour with global degrees), over the graph the worker
//!   evaluates on, uploaded at its first evaluation.
//! - Each epoch's `device` record sums the step phases' GPU time over the steps, counts both
//!   streams' bus bytes, and gives the GPU's idle share of the steps.
//!
//! Without the `cuda` feature a device worker is refused ([`TrainError::NoCuda`]).

use gnn_core::gpu::footprint::Footprint;
use gnn_core::{ConvKind, Model};
use graph_partition::Dataset;

use super::compute::BatchModel;
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

#[cfg(feature = "cuda")]
use cuda::model;

/// Without the `cuda` feature there is no device to compute on.
#[cfg(not(feature = "cuda"))]
fn model<'a>(_gpu: &'a Gpu, _host: Model, _dataset: &'a Dataset) -> Result<Box<dyn BatchModel + 'a>, TrainError> {
    Err(TrainError::NoCuda)
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::time::{Duration, Instant};

    use gnn_core::gpu::{
        CudaSlice, Device, DeviceBlocks, DeviceGraph, DeviceIndex, DeviceLabels, DeviceModel, PhaseClock, Transfers,
    };
    use gnn_core::{AggGraph, BlockGraphs, ForwardCtx, Learner, Optim, Optimizer};
    use graph_partition::sample::StepKey;
    use ndarray::Array2;

    use super::*;
    use crate::checkpoint::WorkerState;
    use crate::guard;
    use crate::harness::GradSum;
    use crate::minibatch::compute::{BatchPass, Inputs};
    use crate::minibatch::full_graph::FullGraph;
    use crate::report::{DeviceEpoch, TrainedModel, phase_s};
    use crate::train_loop::EvalStats;

    /// The device model of `host` (its configuration and parameters) for a worker that holds
    /// `dataset`'s feature matrix, on `gpu`.
    pub(super) fn model<'a>(
        gpu: &'a Gpu,
        host: Model,
        dataset: &'a Dataset,
    ) -> Result<Box<dyn BatchModel + 'a>, TrainError> {
        Ok(Box::new(OnDevice::new(gpu, host, dataset)?))
    }

    /// A step's blocks and the feature rows their inputs read, on the device.
    struct Uploaded {
        key: StepKey,
        blocks: DeviceBlocks,
        rows: Option<DeviceIndex>,
    }

    /// The whole graph a worker evaluates on, with its splits, and its features where they are
    /// not the worker's own matrix (which the worker holds once, for its batches and this).
    struct EvalGraph {
        graph: DeviceGraph,
        features: Option<CudaSlice<f32>>,
        splits: [DeviceLabels; 3],
    }

    struct OnDevice<'d> {
        dev: &'d Device,
        /// The same GPU on the copy stream: the batches go up there.
        copy: Device,
        model: DeviceModel<'d>,
        /// The CPU model: the configuration saved weights carry, and the parameter names the
        /// guard reports.
        host: Model,
        /// The worker's feature matrix, resident from the first batch that reads it (hooks
        /// that assemble the input rows never upload it), and on the host.
        features: Option<CudaSlice<f32>>,
        host_features: &'d Array2<f32>,
        /// The worker's own feature columns of every vertex, every other column zero
        /// ([`BatchModel::hold_own_columns`]): what [`Inputs::Own`] rows are gathered from.
        own_columns: Option<CudaSlice<f32>>,
        ahead: Option<Uploaded>,
        /// The blocks of the step in progress.
        current: Option<Uploaded>,
        /// The gradients brought down, while they are the current ones.
        grads: Option<Vec<f32>>,
        params: Vec<f32>,
        eval: Option<EvalGraph>,
        /// The step's passes, read once its gradients are down (reading waits for the GPU).
        passes: Option<PhaseClock<'d>>,
        /// Where the epoch's steps' wall time runs from: the start of its steps, then the end
        /// of its last update (so waiting for a batch counts).
        steps_from: Option<Instant>,
        /// The epoch so far: its phases, its steps' host wall time, and the transfers before it.
        epoch: DeviceEpoch,
        steps_wall: Duration,
        transfers: [Transfers; 2],
    }

    /// The worker's feature matrix on `dev`, uploaded from `host` the first time it is read.
    fn resident<'a>(
        dev: &Device,
        features: &'a mut Option<CudaSlice<f32>>,
        host: &Array2<f32>,
    ) -> Result<&'a CudaSlice<f32>, TrainError> {
        let held = match features.take() {
            Some(held) => held,
            None => dev.upload(host.as_standard_layout().as_slice().unwrap_or_default())?,
        };
        Ok(features.insert(held))
    }

    impl std::fmt::Debug for OnDevice<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("OnDevice").field("ordinal", &self.dev.ordinal()).finish_non_exhaustive()
        }
    }

    impl<'d> OnDevice<'d> {
        fn new(gpu: &'d Gpu, host: Model, dataset: &'d Dataset) -> Result<Self, TrainError> {
            let dev = &gpu.dev;
            let copy = dev.copy_device()?;
            Ok(Self {
                dev,
                model: DeviceModel::from_model(dev, &host)?,
                host,
                features: None,
                host_features: &dataset.features,
                own_columns: None,
                ahead: None,
                current: None,
                grads: None,
                params: Vec::new(),
                eval: None,
                passes: None,
                steps_from: None,
                epoch: DeviceEpoch::default(),
                steps_wall: Duration::ZERO,
                transfers: [dev.transfers(), copy.transfers()],
                copy,
            })
        }

        /// Queues `blocks` (and the feature rows `rows` their inputs read) on the copy stream.
        fn upload(&self, key: StepKey, blocks: &BlockGraphs, rows: Option<&[u32]>) -> Result<Uploaded, TrainError> {
            Ok(Uploaded {
                key,
                blocks: DeviceBlocks::upload(&self.copy, blocks, &self.model)?,
                rows: rows.map(|r| DeviceIndex::upload(&self.copy, r, self.host_features.nrows())).transpose()?,
            })
        }

        /// Adds the GPU time of the last step's passes to the epoch (waits for them).
        fn read_passes(&mut self) -> Result<(), TrainError> {
            if let Some(clock) = self.passes.take() {
                let phases = clock.read()?;
                self.epoch.forward_s += phase_s(&phases, "forward");
                self.epoch.loss_s += phase_s(&phases, "loss");
                self.epoch.backward_s += phase_s(&phases, "backward");
            }
            Ok(())
        }
    }

    impl BatchModel for OnDevice<'_> {
        fn zero_grad(&mut self) -> Result<(), TrainError> {
            self.grads = None;
            Ok(self.model.zero_grad()?)
        }

        fn add_gradient(&mut self, pass: BatchPass<'_>) -> Result<f64, TrainError> {
            if let Some(grads) = self.grads.take() {
                self.model.set_grads(&grads)?;
            }
            self.read_passes()?;
            let BatchPass { key, blocks, inputs, labels, seeds, terms, ctx } = pass;
            // Held rows index the worker's feature matrix, which the device holds.
            let held = match inputs {
                Inputs::Held { rows, .. } => Some(rows),
                Inputs::Gathered(_) | Inputs::Own { .. } | Inputs::Fetched { .. } => None,
            };
            // This step's blocks from an earlier pass over them (a second forward-backward of
            // the same batch), or taken ahead, or now.
            let fits = |up: &mut Uploaded| up.key == key && up.rows.is_some() == held.is_some();
            let up = match (self.current.take_if(fits), self.ahead.take_if(fits)) {
                (Some(up), _) | (None, Some(up)) => up,
                (None, None) => self.upload(key, blocks, held)?,
            };
            let (dev, in_dim, n) = (self.dev, self.host.config().in_dim, self.host_features.nrows());
            let x = match (inputs, &self.own_columns) {
                (Inputs::Own { ids, .. }, Some(own)) => dev.gather_rows(in_dim, ids, own, n)?,
                // A fetch iteration: the own columns gathered where they are resident, only the
                // fetched others go up.
                (Inputs::Fetched { rows, ids, own: columns }, Some(own)) => {
                    let mut x = dev.gather_rows(in_dim, ids, own, n)?;
                    let (keep, rows) = (columns.range(), rows.as_standard_layout());
                    let mut others = Vec::with_capacity(rows.nrows() * (in_dim - keep.len()));
                    for row in rows.as_slice().unwrap_or_default().chunks_exact(in_dim) {
                        others.extend_from_slice(&row[..keep.start]);
                        others.extend_from_slice(&row[keep.end..]);
                    }
                    let others = self.copy.upload(&others)?;
                    dev.put_columns_around(rows.nrows(), in_dim, keep, &others, &mut x)?;
                    x
                }
                (Inputs::Gathered(rows) | Inputs::Own { rows, .. } | Inputs::Fetched { rows, .. }, _) => {
                    let rows = rows.as_standard_layout();
                    self.copy.upload(rows.as_slice().unwrap_or_default())?
                }
                (Inputs::Held { rows, .. }, _) => {
                    let features = resident(dev, &mut self.features, self.host_features)?;
                    match &up.rows {
                        Some(index) => dev.gather_rows_at(in_dim, index, features, n)?,
                        None => dev.gather_rows(in_dim, rows, features, n)?,
                    }
                }
            };
            let first: Vec<u32> = (0..seeds as u32).collect();
            let width = self.host.config().out_dim;
            let mut targets = DeviceLabels::upload(&self.copy, labels, &first, up.blocks.output_rows(), width)?;
            let mut clock = dev.clock()?;
            self.model.forward_blocks(&up.blocks, &x, ctx)?;
            clock.mark("forward")?;
            let out = self.model.loss(&mut targets, terms as usize)?;
            clock.mark("loss")?;
            self.model.backward_blocks(&up.blocks)?;
            clock.mark("backward")?;
            self.passes = Some(clock);
            self.current = Some(up);
            Ok(out.loss_sum)
        }

        /// Under NCCL: the gradients gathered into one device buffer, summed there and put
        /// back; the host copy, if one was brought down, is stale then and dropped.
        fn sum_grads_on_gpus(&mut self, sum: &mut GradSum<'_>) -> Result<bool, TrainError> {
            if !self.dev.joined() {
                return Ok(false);
            }
            sum.on_device(|phase| Ok(self.model.sum_grads_on_peers(phase)?))?;
            self.grads = None;
            Ok(true)
        }

        fn grads(&mut self) -> Result<&mut [f32], TrainError> {
            let grads = match self.grads.take() {
                Some(grads) => grads,
                None => self.model.grads()?,
            };
            Ok(self.grads.insert(grads))
        }

        /// The guard first. Gradients the hooks brought down (and may have changed) are
        /// checked on the host and go back up. Gradients still on the device are checked by
        /// their sum there, one value down; only where it is not finite do they come down, so
        /// the guard names the tensor (or, where finite values overflowed the sum, passes them).
        fn step(&mut self, optimizer: &mut Optim, epoch: usize, lr: f32) -> Result<(), TrainError> {
            optimizer.set_learning_rate(lr);
            match self.grads.take() {
                Some(grads) => {
                    guard::check_grad_values(epoch, &self.host, &grads, lr)?;
                    self.model.set_grads(&grads)?;
                }
                None if self.model.grads_sum_finite()? => {}
                None => guard::check_grad_values(epoch, &self.host, &self.model.grads()?, lr)?,
            }
            self.read_passes()?;
            let mut clock = self.dev.clock()?;
            self.model.step(optimizer)?;
            clock.mark("optimizer")?;
            self.epoch.optimizer_s += phase_s(&clock.read()?, "optimizer");
            if let Some(start) = self.steps_from.replace(Instant::now()) {
                self.steps_wall += start.elapsed();
            }
            Ok(())
        }

        fn params(&mut self) -> Result<&[f32], TrainError> {
            self.params = self.model.params()?;
            Ok(&self.params)
        }

        fn model(&self) -> Option<&Model> {
            None
        }

        fn set_params(&mut self, params: &[f32]) -> Result<(), TrainError> {
            Ok(self.model.set_params(params)?)
        }

        fn evaluate(&mut self, graph: &FullGraph<'_>, _eval_batch_size: usize) -> Result<EvalStats, TrainError> {
            let dataset = graph.dataset;
            let eval = match self.eval.take() {
                Some(eval) => eval,
                None => {
                    let whole = AggGraph::single_shared(std::sync::Arc::clone(&dataset.graph))?;
                    // A worker evaluating on its own dataset reads the matrix it holds.
                    let own = std::ptr::eq(&dataset.features, self.host_features);
                    let upload =
                        || self.dev.upload(dataset.features.as_standard_layout().as_slice().unwrap_or_default());
                    EvalGraph {
                        graph: self.model.upload_graph(&whole)?,
                        features: (!own).then(upload).transpose()?,
                        splits: {
                            let (n, splits) = (dataset.graph.num_rows(), &dataset.splits);
                            let target = |rows| self.model.targets(&dataset.labels, rows, n);
                            [target(&splits.train)?, target(&splits.valid)?, target(&splits.test)?]
                        },
                    }
                }
            };
            let eval = self.eval.insert(eval);
            let features = match &eval.features {
                Some(features) => features,
                None => resident(self.dev, &mut self.features, self.host_features)?,
            };
            let mut clock = self.dev.clock()?;
            self.model.forward(&eval.graph, features, ForwardCtx::eval())?;
            let hits = Learner::hits(&mut self.model, &mut eval.splits)?;
            let stats = EvalStats::of(&hits);
            clock.mark("eval")?;
            self.epoch.eval_s += phase_s(&clock.read()?, "eval");
            Ok(stats)
        }

        fn snapshot(&mut self, epoch: usize) -> Result<TrainedModel, TrainError> {
            Ok(TrainedModel { config: self.host.config().clone(), params: self.model.params()?, epoch })
        }

        fn state(&self, optimizer: &Optim, method: Vec<u8>) -> Result<WorkerState, String> {
            WorkerState::of(&self.model, optimizer, method)
        }

        fn restore(&mut self, state: WorkerState, optimizer: &mut Optim) -> Result<Vec<u8>, String> {
            state.restore(&mut self.model, optimizer)
        }

        fn hold_own_columns(&mut self, columns: Array2<f32>) -> Result<(), TrainError> {
            let columns = columns.as_standard_layout();
            self.own_columns = Some(self.dev.upload(columns.as_slice().unwrap_or_default())?);
            Ok(())
        }

        fn begin_epoch(&mut self) {
            self.steps_from = Some(Instant::now());
        }

        fn prepares(&self) -> bool {
            true
        }

        fn prepare(&mut self, key: StepKey, blocks: &BlockGraphs, rows: Option<&[u32]>) -> Result<(), TrainError> {
            self.ahead = Some(self.upload(key, blocks, rows)?);
            Ok(())
        }

        fn device_epoch(&mut self) -> Option<DeviceEpoch> {
            let now = [self.dev.transfers(), self.copy.transfers()];
            let moved = [now[0].since(self.transfers[0]), now[1].since(self.transfers[1])];
            self.transfers = now;
            let e = std::mem::take(&mut self.epoch);
            let busy = e.forward_s + e.loss_s + e.backward_s + e.optimizer_s;
            let wall = std::mem::take(&mut self.steps_wall).as_secs_f64();
            Some(DeviceEpoch {
                h2d_bytes: moved[0].host_to_device + moved[1].host_to_device,
                d2h_bytes: moved[0].device_to_host + moved[1].device_to_host,
                idle_share: (wall > 0.0).then(|| (1.0 - busy / wall).max(0.0)),
                ..e
            })
        }
    }
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
