//! The gradient all-reduce a worker's model hands its gradient share to ([`GradSum`]).

use comm_hierarchy::Communicator;

use super::CommClock;
use crate::error::{DistError, TrainError};

/// The gradient all-reduce a worker's model hands its gradient share to: the worker's
/// communicator on the host, or a device collective (NCCL) which the communicator's ledger
/// records as the host all-reduce of the same length, so the ledger is the host backends'.
pub(crate) struct GradSum<'s> {
    comm: &'s dyn Communicator,
    clock: &'s CommClock<'s>,
    phase: &'static str,
}

impl<'s> GradSum<'s> {
    /// The all-reduce over `comm`, timed by `clock`, under the ledger phase `phase`.
    pub(crate) fn new(comm: &'s dyn Communicator, clock: &'s CommClock<'s>, phase: &'static str) -> Self {
        Self { comm, clock, phase }
    }

    /// Sums `grads` over the workers in place, through the host communicator.
    pub(crate) fn on_host(&mut self, grads: &mut [f32]) -> Result<(), DistError> {
        Ok(self.clock.call(|| self.comm.all_reduce_sum_f32(self.phase, grads))?)
    }

    /// Runs `sum`, a device collective that sums the gradients over the workers (given the
    /// ledger phase) and returns their length, as a communication call, and records it in the
    /// ledger as [`GradSum::on_host`] would.
    pub(crate) fn on_device(&mut self, sum: impl FnOnce(&str) -> Result<usize, TrainError>) -> Result<(), TrainError> {
        let len = self.clock.call(|| sum(self.phase))?;
        self.clock
            .call(|| self.comm.device_ledger(self.phase)?.record_all_reduce_f32(self.phase, len))
            .map_err(DistError::from)?;
        Ok(())
    }
}
