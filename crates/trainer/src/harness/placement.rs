//! Where a worker computes, chosen once for every runner: on the configured device where the
//! runner has a worker for it, else a refusal that names the runner and the device. Today only
//! the whole-graph full-batch runner has a device worker (`crate::device`); every other runner's
//! workers compute on the CPU.

use crate::config::{Device, TrainConfig};
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
        matches!((self, device), (_, Device::Cpu) | (Runner::WholeGraph, Device::Cuda(_)))
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
        let err = place(&on(Device::Cuda(1)), Runner::Replicated).unwrap_err().to_string();
        assert!(err.contains("data-parallel mini-batch runner") && err.contains("cuda:1"), "{err}");
        let err = place(&on(Device::Cuda(0)), Runner::SampledEdges).unwrap_err().to_string();
        assert!(err.contains("sampled-edge whole-graph runner") && err.contains("cuda:0"), "{err}");
    }
}
