//! The JSON report of a training run (`halo train --report FILE.json`), field for field the
//! report contract of `docs/ARCHITECTURE.md`.
//!
//! Conventions: epochs are numbered from 1; accuracies are fractions in [0, 1]; `wall_s` is the
//! training step alone (forward, backward, exchange, update) and `eval_s` the evaluation after it;
//! `final.train_wall_s` is the sum of the epochs' `wall_s`.

use std::collections::BTreeMap;

use gnn_core::{LearnError, Learner, Model, ModelConfig, PhaseTimes, Traffic};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Dataset name (directory name, or `synthetic`).
    pub dataset: String,
    /// Architecture (`gcn`, `sage`, `gat`).
    pub model: String,
    /// Training method (`single`, ...).
    pub method: String,
    /// Kind of graph split (`none` for single-process runs).
    pub cut: String,
    /// Number of workers.
    pub workers: usize,
    /// Number of hosts the workers are spread over.
    pub hosts: usize,
    /// The run's seed.
    pub seed: u64,
    /// The full configuration the run used.
    pub config: TrainConfig,
    /// Vertices in the training, validation and test sets.
    pub split_sizes: SplitSizes,
    /// Vertices and stored edges of the whole graph (zero in reports older than the field).
    #[serde(default)]
    pub graph: GraphSize,
    /// Partition quality; `null` for single-process runs.
    pub partition: Option<PartitionSummary>,
    /// One record per epoch run.
    pub epochs: Vec<EpochRecord>,
    /// Summary of the run.
    #[serde(rename = "final")]
    pub final_: FinalRecord,
    /// The model at the best validation epoch, for `--save-model` (not part of the JSON).
    #[serde(skip)]
    pub trained: Option<TrainedModel>,
}

/// The report of a run that did not finish: the complete report's header and epochs, no `final`,
/// marked `"incomplete": true` with the reason.
#[derive(Debug, Clone, Serialize)]
pub struct PartialReport<'a> {
    incomplete: bool,
    reason: &'a str,
    model: &'a str,
    method: &'a str,
    seed: u64,
    config: &'a TrainConfig,
    epochs: &'a [EpochRecord],
}

impl<'a> PartialReport<'a> {
    /// The report of a run of `config` that finished `epochs` and then ended for `reason`.
    pub fn new(config: &'a TrainConfig, epochs: &'a [EpochRecord], reason: &'a str) -> Self {
        let (model, method) = (config.model.as_str(), config.method.name.as_str());
        Self { incomplete: true, reason, model, method, seed: config.seed, config, epochs }
    }
}

/// A report's text: pretty JSON of the typed value and a newline (a `serde_json::Value` would
/// widen the `f32` settings, printing `0.01` as `0.009999999776482582`).
pub fn to_json(report: &impl Serialize) -> serde_json::Result<String> {
    Ok(serde_json::to_string_pretty(report)? + "\n")
}

/// Partition quality, as `halo partition` measures it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionSummary {
    /// Partitioner name.
    pub algorithm: String,
    /// Number of parts.
    pub parts: usize,
    /// Mean number of copies of a vertex.
    pub replication_factor: f64,
    /// Largest part's edge count over the mean.
    pub edge_imbalance: f64,
    /// Largest part's vertex count over the mean.
    pub vertex_imbalance: f64,
    /// Fraction of edges whose endpoints lie in different parts (edge-cut).
    pub edge_cut_fraction: f64,
    /// Time spent partitioning.
    pub time_s: f64,
}

/// One epoch: a training step followed by an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Training loss (mean over the global training set) of this step.
    pub loss: f64,
    /// Accuracy on the training nodes after the step.
    pub train_acc: f64,
    /// Accuracy on the validation nodes after the step.
    pub val_acc: f64,
    /// Accuracy on the test nodes after the step.
    pub test_acc: f64,
    /// Seconds of the training step (forward, backward, exchange, update).
    pub wall_s: f64,
    /// Seconds of the evaluation after the step.
    pub eval_s: f64,
    /// Set on an epoch that ran no evaluation (`--eval-every`): the epoch of the evaluation
    /// whose accuracies it reports (0 before the first, when they are 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_epoch: Option<usize>,
    /// Seconds of the step not spent waiting on communication.
    pub compute_s: f64,
    /// Bytes sent between workers on the same host during the step.
    pub bytes_intra: u64,
    /// Bytes sent between hosts during the step.
    pub bytes_inter: u64,
    /// Messages sent during the step.
    pub messages: u64,
    /// Communication time of the step under the link cost model.
    pub modeled_comm_s: f64,
    /// Bytes per ledger phase (`fwd/<layer>`, `bwd/<layer>`, `grads`, `loss`, ...).
    pub bytes_by_phase: BTreeMap<String, u64>,
    /// The step on the modeled cluster: per worker, measured compute plus modeled
    /// communication, an overlapped exchange costing max(communication, overlapped compute);
    /// the slowest worker sets it. Single-process runs: the step's compute time.
    pub modeled_epoch_s: f64,
    /// Method-specific fields (cache hit rate, bit widths, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<serde_json::Value>,
    /// Runs on a GPU: the epoch's GPU time per phase and its host-device traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceEpoch>,
}

/// One epoch on a GPU: each phase's GPU time (CUDA events on the device's stream) and the
/// bytes copied between host and device, which the network ledger does not count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceEpoch {
    /// Forward pass of the training step.
    pub forward_s: f64,
    /// Loss, its gradient and the loss sum.
    pub loss_s: f64,
    /// Backward pass (gradients of every parameter).
    pub backward_s: f64,
    /// Optimizer step.
    pub optimizer_s: f64,
    /// Evaluation: one forward and every split's loss and hits.
    pub eval_s: f64,
    /// Bytes copied host to device during the epoch.
    pub h2d_bytes: u64,
    /// Bytes copied device to host during the epoch.
    pub d2h_bytes: u64,
    /// A cut graph's workers: what of `h2d_bytes` and `d2h_bytes` their exchanges staged (the
    /// rows each call reads and writes), apart from the network ledger; `None` on a whole
    /// graph. On a cut graph the phase times are the slowest worker's and the bytes are summed
    /// over the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<StagedBytes>,
    /// A cut graph's workers: the GPU seconds of the training step spent inside exchange calls
    /// (from the stream's reaching a call to the call's last upload: rows gathered and copied
    /// down, the host exchange, rows copied up and scattered), from CUDA events around each
    /// call (`forward_s` and `backward_s` include it), less the kernels of codecs that encode
    /// on the device (compute, as a CPU worker's codec is). The step's compute on the modeled
    /// timeline is the phases less this. The slowest worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange_s: Option<f64>,
    /// Mini-batch workers: the share of the epoch's steps (host wall time, from the start of
    /// its sampling to its last update) in which the GPU ran none of their phases (waiting for
    /// batches, uploads, the gradient sync); the mean over the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_share: Option<f64>,
}

impl DeviceEpoch {
    /// A backend's `phases` and bus traffic `moved` over the epoch; the rest unset.
    pub(crate) fn of(phases: &PhaseTimes, moved: &Traffic) -> Self {
        Self {
            forward_s: phases.forward_s,
            loss_s: phases.loss_s,
            backward_s: phases.backward_s,
            optimizer_s: phases.optimizer_s,
            eval_s: phases.eval_s,
            h2d_bytes: moved.host_to_device,
            d2h_bytes: moved.device_to_host,
            ..Self::default()
        }
    }
}

/// The rows an exchange staged between a device and the host over an epoch, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedBytes {
    /// Device to host: the rows the calls read.
    pub down_bytes: u64,
    /// Host to device: the rows the calls wrote.
    pub up_bytes: u64,
}

/// A GPU run's device memory: what was estimated before training, what was free, and the
/// most the run's buffers held at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// The GPU's ordinal.
    pub ordinal: usize,
    /// The estimate checked against `free_gpu_bytes` before the first epoch.
    pub estimated_gpu_bytes: u64,
    /// Free device memory when the run started.
    pub free_gpu_bytes: u64,
    /// The device's memory.
    pub total_gpu_bytes: u64,
    /// The high-water mark of the memory pool the run's buffers come from (cuBLAS's workspace
    /// and the kernel modules are outside it).
    pub peak_gpu_bytes: u64,
}

/// Summary of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalRecord {
    /// Highest validation accuracy seen.
    pub best_val_acc: f64,
    /// Test accuracy at the epoch of `best_val_acc` (the earliest one on ties).
    pub test_acc_at_best_val: f64,
    /// 1-based epoch of `best_val_acc`.
    pub best_epoch: usize,
    /// Sum of the epochs' `wall_s`.
    pub train_wall_s: f64,
    /// Sum of `bytes_intra + bytes_inter` over the epochs.
    pub bytes_total: u64,
    /// Sum of the epochs' `modeled_comm_s`.
    pub modeled_comm_s_total: f64,
    /// Bytes of the layers' exchanges (feature and gradient rows): the `fwd/*` and `bwd/*` phases.
    pub bytes_exchange: u64,
    /// Bytes of the parameter sync: the gradient all-reduce or parameter-server traffic.
    pub bytes_grad_sync: u64,
    /// Sum of the epochs' `modeled_epoch_s`.
    pub modeled_train_s: f64,
    /// How the workers' compute under the modeled epochs was measured
    /// ([`crate::measure::ComputeMeasure`]); absent for single-process runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_measure: Option<String>,
    /// Peak resident memory of the process (`null` where the platform does not report it).
    pub peak_rss_bytes: Option<u64>,
    /// The estimated peak and its breakdown, next to `peak_rss_bytes` (full-batch runners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory::MemoryReport>,
    /// Method-specific summary fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<serde_json::Value>,
    /// Runs on a GPU: its memory, estimated and measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceSummary>,
}

/// Sizes of a dataset's splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitSizes {
    pub train: usize,
    pub valid: usize,
    pub test: usize,
}

impl SplitSizes {
    /// The sizes of `splits`.
    pub fn of(splits: &graph_partition::Splits) -> Self {
        Self { train: splits.train.len(), valid: splits.valid.len(), test: splits.test.len() }
    }
}

/// The size of a dataset's graph.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphSize {
    pub vertices: usize,
    /// Stored (directed) edges: an undirected edge counts twice.
    pub edges: usize,
}

impl GraphSize {
    /// The size of `graph`.
    pub fn of(graph: &graph_partition::Csr) -> Self {
        Self { vertices: graph.num_rows(), edges: graph.num_edges() }
    }
}

/// The best validation epoch so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// Highest validation accuracy.
    pub val_acc: f64,
    /// Test accuracy at that epoch.
    pub test_acc: f64,
    /// 1-based epoch; the earliest one on ties.
    pub epoch: usize,
}

/// A model's parameters at one epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainedModel {
    pub config: ModelConfig,
    /// The flat parameter buffer, in the order of [`Model::param_info`].
    pub params: Vec<f32>,
    /// The 1-based epoch after whose step the parameters were taken.
    pub epoch: usize,
}

impl TrainedModel {
    /// A copy of `model`'s parameters after `epoch` (a device model's downloaded).
    pub fn of<L: Learner>(model: &L, epoch: usize) -> Result<Self, LearnError> {
        Ok(Self { config: model.config().clone(), params: model.params()?.into_owned(), epoch })
    }

    /// [`TrainedModel::of`] a model on the host, which cannot fail.
    pub fn of_host(model: &Model, epoch: usize) -> Self {
        Self { config: model.config().clone(), params: model.params().to_vec(), epoch }
    }
}

/// Ledger phases of the parameter sync.
pub const GRAD_SYNC_PHASES: [&str; 3] = ["grads", "ps/push", "ps/pull"];

/// Whether `phase` is one of the layers' exchanges (`fwd/<layer>`, `bwd/<layer>`).
pub fn is_exchange_phase(phase: &str) -> bool {
    phase.starts_with("fwd/") || phase.starts_with("bwd/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(epoch: usize, wall_s: f64) -> EpochRecord {
        EpochRecord {
            epoch,
            loss: 1.0,
            train_acc: 0.5,
            val_acc: 0.5,
            test_acc: 0.5,
            wall_s,
            eval_s: 0.1,
            eval_epoch: None,
            compute_s: wall_s,
            bytes_intra: 0,
            bytes_inter: 0,
            messages: 0,
            modeled_comm_s: 0.0,
            bytes_by_phase: BTreeMap::new(),
            modeled_epoch_s: wall_s,
            method: None,
            device: None,
        }
    }

    #[test]
    fn method_fields_are_omitted_when_absent_and_kept_when_present() {
        let mut e = epoch(1, 1.0);
        let json = serde_json::to_value(&e).unwrap();
        assert!(json.get("method").is_none());
        e.method = Some(serde_json::json!({"cache_hit_rate": 0.5}));
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["method"]["cache_hit_rate"], 0.5);
    }
}
