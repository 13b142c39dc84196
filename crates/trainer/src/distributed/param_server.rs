//! Synchronous parameter servers (EC-Graph §III-A, Alg. 2): the flat parameter buffer is split
//! into `M` contiguous slices, slice `s` served by rank `s` (servers co-located with the first
//! `M` workers). Every step each worker pushes the slice `s` of its gradient to server `s`
//! (`ps/push`), each server sums the gradients of all workers in rank order (the same sum the
//! all-reduce makes) and applies the optimizer to its slice with its own optimizer state, and every
//! worker pulls the updated slices back (`ps/pull`). A rank's own slice never crosses the
//! network.

use std::ops::Range;

use comm_hierarchy::Communicator;
use gnn_core::{Optim, Optimizer};

use crate::error::DistError;
use crate::error::TrainError;
use crate::harness::CommClock;

/// Ledger phases of the parameter servers' traffic.
pub(crate) const PUSH: &str = "ps/push";
pub(crate) const PULL: &str = "ps/pull";

/// One rank's side of the parameter servers.
pub(crate) struct ParamServers {
    servers: usize,
    /// The optimizer of this rank's slice (`None` on ranks that serve none).
    optimizer: Option<Optim>,
}

/// The slice of `len` parameters server `s` of `servers` holds.
fn slice(len: usize, servers: usize, s: usize) -> Range<usize> {
    s * len / servers..(s + 1) * len / servers
}

impl ParamServers {
    /// Rank `rank`'s side of `servers` servers; a server updates its slice with `optimizer`.
    pub(crate) fn new(servers: usize, rank: usize, optimizer: Optim) -> Self {
        Self { servers, optimizer: (rank < servers).then_some(optimizer) }
    }

    /// The optimizer of this rank's slice (for checkpoints); `None` on ranks that serve none.
    pub(crate) fn optimizer(&self) -> Option<&Optim> {
        self.optimizer.as_ref()
    }

    /// The same, to restore.
    pub(crate) fn optimizer_mut(&mut self) -> Option<&mut Optim> {
        self.optimizer.as_mut()
    }

    /// Pushes `grads`, updates the served slice, pulls every slice into `params`.
    pub(crate) fn step(
        &mut self,
        comm: &dyn Communicator,
        clock: &CommClock<'_>,
        params: &mut [f32],
        grads: &[f32],
    ) -> Result<(), TrainError> {
        let (me, size, len, m) = (comm.rank(), comm.size(), params.len(), self.servers);
        let push: Vec<Vec<f32>> =
            (0..size).map(|s| if s < m && s != me { grads[slice(len, m, s)].to_vec() } else { Vec::new() }).collect();
        let received = clock.call(|| comm.all_to_all_rows(PUSH, push)).map_err(DistError::from)?;
        if let Some(optimizer) = self.optimizer.as_mut() {
            let mine = slice(len, m, me);
            let part = |p: usize| if p == me { &grads[mine.clone()] } else { received[p].as_slice() };
            let mut sum = part(0).to_vec();
            for p in 1..size {
                let other = part(p);
                if other.len() != sum.len() {
                    return Err(malformed(PUSH, p, other.len(), sum.len()));
                }
                sum.iter_mut().zip(other).for_each(|(a, b)| *a += b);
            }
            if sum.len() != mine.len() {
                return Err(malformed(PUSH, 0, sum.len(), mine.len()));
            }
            optimizer.step(&mut params[mine.clone()], &sum)?;
        }
        let served = if me < m { params[slice(len, m, me)].to_vec() } else { Vec::new() };
        let pull: Vec<Vec<f32>> = (0..size).map(|p| if p != me { served.clone() } else { Vec::new() }).collect();
        let received = clock.call(|| comm.all_to_all_rows(PULL, pull)).map_err(DistError::from)?;
        for (s, rows) in received.iter().enumerate().take(m).filter(|(s, _)| *s != me) {
            let range = slice(len, m, s);
            if rows.len() != range.len() {
                return Err(malformed(PULL, s, rows.len(), range.len()));
            }
            params[range].copy_from_slice(rows);
        }
        Ok(())
    }
}

fn malformed(phase: &'static str, rank: usize, got: usize, expected: usize) -> TrainError {
    DistError::ParamSlice { phase, rank, got, expected }.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_contiguous_and_cover_the_buffer() {
        for (len, m) in [(10, 1), (10, 3), (7, 4), (3, 4)] {
            let covered: Vec<usize> = (0..m).flat_map(|s| slice(len, m, s)).collect();
            assert_eq!(covered, (0..len).collect::<Vec<_>>(), "{len} over {m}");
        }
    }
}
