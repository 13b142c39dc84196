//! Where a worker computes, chosen once for every runner: on the configured device where the
//! runner has a worker for it, else a refusal that names the runner and the device. Today the
//! whole-graph full-batch runner (`crate::device`) and the cut-graph runner (its workers'
//! `distributed::on_device`) have device workers; every other runner's workers compute on the
//! CPU.
//!
//! A cut graph's workers share the visible GPUs: with `cuda:N`, worker `i` computes on GPU
//! `(N + i) mod G` (`i mod G` for plain `cuda`), each with a device (stream) of its own, so one
//! GPU can hold a whole cluster. `i` is the worker's index on its machine: its rank with
//! in-process workers, its launcher's local rank under MPI (else its place in its host's block
//! of the topology).

use comm_hierarchy::{LocalRankError, Topology, launcher_local_rank};

use crate::config::{Backend, Device, TrainConfig};
use crate::error::TrainError;

/// The runners, by data plan and batch source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runner {
    /// The whole graph in one process, full-batch.
    WholeGraph,
    /// The whole graph in one process, on in-edges sampled every epoch.
    SampledEdges,
    /// The whole graph in one process, on sampled mini-batches.
    MiniBatch,
    /// A partitioned graph, full-batch (edge- or vertex-cut).
    CutGraph,
    /// The whole graph on every worker, data-parallel mini-batches.
    Replicated,
    /// Each worker's part extended by its l-hop neighbourhood.
    LHop,
    /// The structure on every worker, feature columns split.
    Columns,
}

impl Runner {
    fn name(self) -> &'static str {
        match self {
            Runner::WholeGraph => "whole-graph",
            Runner::SampledEdges => "sampled-edge whole-graph",
            Runner::MiniBatch => "single-process mini-batch",
            Runner::CutGraph => "cut-graph",
            Runner::Replicated => "data-parallel mini-batch",
            Runner::LHop => "l-hop",
            Runner::Columns => "feature-column",
        }
    }

    /// Whether this runner has a worker that computes on `device`.
    fn has_worker_on(self, device: Device) -> bool {
        device == Device::Cpu || self != Runner::SampledEdges
    }
}

/// Where `runner`'s workers compute for `config`: its `device`, where the runner has a worker
/// for it.
pub(crate) fn place(config: &TrainConfig, runner: Runner) -> Result<Device, TrainError> {
    let device = config.device;
    match runner.has_worker_on(device) {
        true => Ok(device),
        false => Err(TrainError::NoDeviceWorker { runner: runner.name(), device }),
    }
}

/// The index of worker `rank` among the workers on its machine: `rank` itself in process,
/// else the launcher's local rank (read through `var`), else its place in its host's block of
/// `topology`.
pub(crate) fn local_index(
    rank: usize,
    topology: &Topology,
    backend: Backend,
    var: impl Fn(&str) -> Option<String>,
) -> Result<usize, TrainError> {
    if backend.in_process() {
        return Ok(rank);
    }
    match launcher_local_rank(var) {
        Ok(Some(index)) => Ok(index),
        Ok(None) => Ok(topology.device_of(rank)),
        Err(LocalRankError { variable, value }) => Err(TrainError::LocalRank { rank, variable, value }),
    }
}

/// The GPU of the worker with local index `index` on a machine with `gpus` visible GPUs,
/// under `device` (`cuda:N`: `(N + index) mod gpus`).
pub(crate) fn worker_gpu(device: Device, index: usize, gpus: usize) -> Result<usize, TrainError> {
    match device {
        Device::Cuda(_) if gpus == 0 => Err(TrainError::NoVisibleGpu { device }),
        Device::Cuda(base) => Ok((base + index) % gpus),
        Device::Cpu => Err(TrainError::NoDeviceWorker { runner: Runner::CutGraph.name(), device }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(device: Device) -> TrainConfig {
        TrainConfig { device, ..TrainConfig::default() }
    }

    #[test]
    fn every_runner_computes_on_the_cpu() {
        let runners = [
            Runner::WholeGraph,
            Runner::SampledEdges,
            Runner::MiniBatch,
            Runner::CutGraph,
            Runner::Replicated,
            Runner::LHop,
            Runner::Columns,
        ];
        for runner in runners {
            assert_eq!(place(&on(Device::Cpu), runner).unwrap(), Device::Cpu, "{runner:?}");
        }
    }

    #[test]
    fn a_runner_without_a_device_worker_is_refused_by_name() {
        assert_eq!(place(&on(Device::Cuda(1)), Runner::WholeGraph).unwrap(), Device::Cuda(1));
        for runner in [Runner::MiniBatch, Runner::Replicated, Runner::LHop, Runner::Columns] {
            assert_eq!(place(&on(Device::Cuda(1)), runner).unwrap(), Device::Cuda(1), "{runner:?}");
        }
        let err = place(&on(Device::Cuda(0)), Runner::SampledEdges).unwrap_err().to_string();
        assert!(err.contains("sampled-edge whole-graph runner") && err.contains("cuda:0"), "{err}");
        assert_eq!(place(&on(Device::Cuda(0)), Runner::CutGraph).unwrap(), Device::Cuda(0));
    }

    /// Worker `i` of `P` on `G` GPUs computes on GPU `i mod G`, shifted by `cuda:N`.
    #[test]
    fn workers_share_the_gpus_round_robin() {
        let gpus: Vec<usize> = (0..6).map(|i| worker_gpu(Device::Cuda(0), i, 4).unwrap()).collect();
        assert_eq!(gpus, [0, 1, 2, 3, 0, 1]);
        assert_eq!(worker_gpu(Device::Cuda(1), 3, 4).unwrap(), 0);
        assert_eq!(worker_gpu(Device::Cuda(0), 3, 1).unwrap(), 0);
        let err = worker_gpu(Device::Cuda(0), 0, 0).unwrap_err().to_string();
        assert!(err.contains("no CUDA GPU") && err.contains("cuda:0"), "{err}");
    }

    /// In process a worker's index is its rank; under MPI the launcher's local rank, else its
    /// place in its host's block.
    #[test]
    fn an_mpi_rank_takes_the_gpu_of_its_local_index() {
        let topology = Topology::for_workers(8, 2, comm_hierarchy::LinkModel::default()).unwrap();
        let none = |_: &str| None;
        assert_eq!(local_index(5, &topology, Backend::Local, none).unwrap(), 5);
        assert_eq!(local_index(5, &topology, Backend::Mpi, none).unwrap(), 1);
        let open_mpi = |name: &str| (name == "OMPI_COMM_WORLD_LOCAL_RANK").then(|| "3".to_string());
        assert_eq!(local_index(5, &topology, Backend::Mpi, open_mpi).unwrap(), 3);
        let bad = |name: &str| (name == "MPI_LOCALRANKID").then(|| "x".to_string());
        let err = local_index(5, &topology, Backend::Mpi, bad).unwrap_err().to_string();
        assert!(err.contains("MPI_LOCALRANKID") && err.contains("rank 5"), "{err}");
    }
}
