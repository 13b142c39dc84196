//! Where a device model's exchange calls go: nowhere on a whole graph, or through a [`Stager`]
//! to a worker's [`Exchange`] on its part, at the CPU layers' points (`crate::layers::agg`):
//!
//! * forward: `pull_halo` on the rows about to be read as neighbours (`Step::Halo`, on a view
//!   that pulls its halo), the local aggregation, then the copies' partial aggregates pushed to
//!   their primaries (`push_halo_grad` under `Step::Aggregate`, masters-only vertex-cut) and
//!   `sum_replicas` (`Step::Aggregate`) before the self term;
//! * backward: the aggregate's gradient pulled back to the copies (`Step::Aggregate`,
//!   masters-only) and `sum_replicas`, the transposed aggregation, then `push_halo_grad` of the
//!   input gradient's halo rows (`Step::Halo`).
//!
//! GAT pulls `x` or `x W` as the CPU layer does, makes its attention syncs (`max_replicas` of
//! each row's maximum logit under `Step::AttentionMax`, then `sum_replicas` of its
//! `[denominators | numerators]` block forward and of that block's gradient backward, both under
//! `Step::Aggregate`), which move no row on an edge-cut, and pushes the gradient of what it
//! pulled.
//!
//! Under an exchange that overlaps, GCN's and GraphSAGE's halo calls are split as the CPU
//! layers split them (`halo_half`: the pull's halves around the central rows' aggregation,
//! the push's around the primary rows' transposed one; see `model.rs`).
//!
//! Each call stages only its footprint's rows between the device block and the host
//! ([`DeviceRows`]), or, where the exchange's codecs are kernel codecs, encodes and decodes its
//! messages on the device so that only their bytes cross; either way between two events of the device's stream ([`Device::exchange_span`]), so
//! that the pass's GPU time inside the exchange is known apart from its compute.

use std::sync::MutexGuard;

use cudarc::driver::CudaSlice;

use super::rows::{DeviceRows, RowLists};
use super::{Device, GpuError};
use crate::exchange::staging::Stager;
use crate::exchange::{Call, Direction, Exchange, Half, Pass, Step, Tag};

/// A worker's exchange for one pass on its part.
pub(super) struct PartLink<'a> {
    pub(super) exchange: &'a mut dyn Exchange,
    pub(super) stager: &'a mut Stager,
    pub(super) lists: MutexGuard<'a, RowLists>,
    /// Copies push their partial aggregates ([`crate::AggGraph::pushes_aggregates`]).
    pub(super) pushes: bool,
}

/// Where the exchange calls of a device pass go.
pub(super) enum Link<'a> {
    /// A whole graph: there is nothing to exchange.
    Whole,
    Part(PartLink<'a>),
}

impl Link<'_> {
    /// Starts a pass (as the CPU model does at the top of its forward).
    pub(super) fn begin(&mut self, pass: Pass) {
        if let Link::Part(p) = self {
            p.exchange.begin(pass);
        }
    }

    /// Forward, before the aggregation reads `x` (`rows x cols`): its halo rows pulled, where
    /// the layer's view `pulls` them.
    pub(super) fn pull_input(
        &mut self,
        dev: &Device,
        layer: usize,
        pulls: bool,
        x: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        match self {
            Link::Part(p) if pulls => {
                p.call(dev, Call::Pull, Tag::new(layer, Direction::Forward, Step::Halo), x, rows, cols)
            }
            _ => Ok(()),
        }
    }

    /// Forward, after the aggregation: the copies' partial sums pushed to their primaries
    /// (masters-only), then the replicas summed.
    pub(super) fn sync_aggregate(
        &mut self,
        dev: &Device,
        layer: usize,
        z: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        let Link::Part(p) = self else { return Ok(()) };
        let at = Tag::new(layer, Direction::Forward, Step::Aggregate);
        if p.pushes {
            p.call(dev, Call::Push, at, z, rows, cols)?;
        }
        p.call(dev, Call::Sum, at, z, rows, cols)
    }

    /// Backward, before the transposed aggregation reads `g` (the aggregate's gradient): the
    /// copies take their primaries' rows (masters-only), then the replicas' shares are summed.
    pub(super) fn sync_aggregate_grad(
        &mut self,
        dev: &Device,
        layer: usize,
        g: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        let Link::Part(p) = self else { return Ok(()) };
        let at = Tag::new(layer, Direction::Backward, Step::Aggregate);
        if p.pushes {
            p.call(dev, Call::Pull, at, g, rows, cols)?;
        }
        p.call(dev, Call::Sum, at, g, rows, cols)
    }

    /// Backward, after the transposed aggregation: the halo rows of the input gradient `dx`
    /// added into their primaries' rows, and zeroed, where the layer's view `pulls` them.
    pub(super) fn push_input_grad(
        &mut self,
        dev: &Device,
        layer: usize,
        pulls: bool,
        dx: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        match self {
            Link::Part(p) if pulls => {
                p.call(dev, Call::Push, Tag::new(layer, Direction::Backward, Step::Halo), dx, rows, cols)
            }
            _ => Ok(()),
        }
    }

    /// Whether the pass's halo calls are split so that rows needing no halo row are computed
    /// while the halo is in flight ([`Exchange::overlaps`]).
    pub(super) fn overlaps(&self) -> bool {
        matches!(self, Link::Part(p) if p.exchange.overlaps())
    }

    /// Half of a split halo call of `layer` in `direction`, where the exchange overlaps.
    /// Forward, a split [`Link::pull_input`]: the first half sends the rows the pull reads, the
    /// second lands the halo rows in `block`; in between the device may read `block` but not
    /// change it. Backward, a split [`Link::push_input_grad`]: the first half sends the halo
    /// rows of `block` (the input gradient as far as those rows go), the second adds what
    /// arrived into the primary rows of `block` (the whole gradient) and zeroes its halo rows.
    #[allow(clippy::too_many_arguments)] // the half, the call and its block.
    pub(super) fn halo_half(
        &mut self,
        dev: &Device,
        half: Half,
        layer: usize,
        direction: Direction,
        block: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        let Link::Part(p) = self else { return Ok(()) };
        let call = match direction {
            Direction::Forward => Call::Pull,
            Direction::Backward => Call::Push,
        };
        let tag = Tag::new(layer, direction, Step::Halo);
        dev.exchange_span(|| {
            let mut store = DeviceRows::new(dev, block, rows, cols, &mut p.lists)?;
            let exchange = &mut *p.exchange;
            Ok(match half {
                Half::Whole => p.stager.call(exchange, call, tag, &mut store),
                Half::Start => p.stager.start(exchange, call, tag, &mut store),
                Half::Finish => p.stager.finish(exchange, call, tag, &mut store),
            }?)
        })
    }

    /// Whether the pass runs on a part, whose rows may span replicas that sync them.
    pub(super) fn syncs(&self) -> bool {
        matches!(self, Link::Part(_))
    }

    /// Forward, GAT's attention: each row's maximum logit per head (`rows x cols`) taken over
    /// its replicas.
    pub(super) fn max_replicas(
        &mut self,
        dev: &Device,
        layer: usize,
        max: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        match self {
            Link::Part(p) => {
                p.call(dev, Call::Max, Tag::new(layer, Direction::Forward, Step::AttentionMax), max, rows, cols)
            }
            Link::Whole => Ok(()),
        }
    }
}

impl PartLink<'_> {
    fn call(
        &mut self,
        dev: &Device,
        call: Call,
        tag: Tag,
        block: &mut CudaSlice<f32>,
        rows: usize,
        cols: usize,
    ) -> Result<(), GpuError> {
        dev.exchange_span(|| {
            let mut store = DeviceRows::new(dev, block, rows, cols, &mut self.lists)?;
            Ok(self.stager.call(&mut *self.exchange, call, tag, &mut store)?)
        })
    }
}
