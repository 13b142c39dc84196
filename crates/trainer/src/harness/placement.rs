//! Which GPU a worker of a device run computes on. The plan decided that the run computes on a
//! device (`crate::plan`); this only spreads the workers over the visible GPUs.
//!
//! A cut graph's workers share the visible GPUs: with `cuda:N`, worker `i` computes on GPU
//! `(N + i) mod G` (`i mod G` for plain `cuda`), each with a device (stream) of its own, so one
//! GPU can hold a whole cluster. `i` is the worker's index on its machine: its rank with
//! in-process workers, its launcher's local rank under MPI (else its place in its host's block
//! of the topology).

use comm_hierarchy::{LocalRankError, Topology, launcher_local_rank};

use crate::config::{Backend, Device};
use crate::error::TrainError;

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
        Device::Cuda(base) if gpus > 0 => Ok((base + index) % gpus),
        // No GPU is visible, or (never, a device run's configuration names one) none is asked for.
        Device::Cuda(_) | Device::Cpu => Err(TrainError::NoVisibleGpu { device }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
