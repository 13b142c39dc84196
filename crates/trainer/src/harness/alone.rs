//! A process that trains alone (the whole graph, one model; on the CPU or a device, full-batch or
//! sampled): how it agrees on its checkpoints, its epoch loop and its report.
//!
//! Its users are `single`, the device strategy and the single-process mini-batch runner. The
//! `setup` and `checkpoint` faults (`HALO_FAULT`) fire in its checkpoint agreement.

use std::time::Duration;

use comm_hierarchy::fault::Fault;
use comm_hierarchy::point::Point;
use graph_partition::Dataset;

use super::report::{self, Described, Workers};
use crate::checkpoint::{Agreement, Checkpoints, RunIdentity};
use crate::config::{Device, TrainConfig};
use crate::error::TrainError;
use crate::report::Report;
use crate::train_loop::{EpochObserver, LoopOptions, LoopOutcome, Strategy, train_loop_with};

/// A run of one method in one process on the whole of a dataset.
pub(crate) struct Alone<'a> {
    method: &'a str,
    config: &'a TrainConfig,
    dataset: &'a Dataset,
    /// Where the process computes.
    device: Device,
    /// One process has no communicator: the `checkpoint` fault fires at every checkpoint.
    fault: Option<Fault>,
    hang_for: Duration,
}

impl<'a> Alone<'a> {
    /// Starts a run of `method` on `dataset`, on the configured device; the `setup` fault, if
    /// any, fires here.
    pub(crate) fn start(method: &'a str, config: &'a TrainConfig, dataset: &'a Dataset) -> Result<Self, TrainError> {
        let device = config.device;
        let fault = Fault::from_env()?;
        let hang_for = config.reliability.timeout();
        if let Some(fault) = fault {
            fault.hit(0, Point::Setup, 1, hang_for).map_err(TrainError::Injected)?;
        }
        Ok(Self { method, config, dataset, device, fault, hang_for })
    }

    /// Where the process computes.
    pub(crate) fn device(&self) -> Device {
        self.device
    }

    /// Runs the epochs the configuration asks for over `strategy`, resuming from and writing
    /// checkpoints as it says.
    pub(crate) fn train<S>(&self, strategy: &mut S, observer: &mut dyn EpochObserver) -> Result<LoopOutcome, TrainError>
    where
        S: Strategy<Error = TrainError>,
    {
        let id = RunIdentity {
            method: self.method,
            config: self.config,
            rank: 0,
            world: 1,
            fingerprint: self.dataset.graph.fingerprint(),
        };
        let agreement = Agreement::Alone { fault: self.fault, hang_for: self.hang_for };
        let checkpoints = Checkpoints::for_run(&id, agreement)?;
        train_loop_with(strategy, LoopOptions::of(self.config), observer, checkpoints)
    }

    /// The report of the run, which ended with `outcome`.
    pub(crate) fn report(&self, outcome: LoopOutcome) -> Report {
        let data = Described::of(self.dataset, "none", None);
        report::build(self.method, self.config, data, Workers { count: 1, hosts: 1 }, outcome)
    }
}
