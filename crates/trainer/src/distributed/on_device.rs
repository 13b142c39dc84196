//! A cut-graph worker's GPU: opened with the part's memory estimate, and its model placed
//! there (`gnn_core::gpu::DeviceModel` under [`OnPart`], which runs every backend alike). The
//! host's staging and host codecs inside exchange calls are not counted as the device's
//! compute (a codec's kernels on the device are), and workers sharing a GPU compute one at a
//! time (`crate::measure`).
//!
//! Without the `cuda` feature a device worker is refused ([`TrainError::NoCuda`]).

use gnn_core::Model;

use super::compute::{PartJob, PartModel};
use super::setup::WorkerShare;
use crate::error::TrainError;
use crate::harness::Rank;
use crate::harness::gpu::{self, Gpu};
use crate::memory::device;
use crate::method::HaloFeatures;
use gnn_core::objective::Objective;

/// The GPU of worker `rank` for its part of `share` (`harness::gpu::open` with the part's
/// estimate, `memory::device::part_estimate`, and layer 0's second view where `halo` is cached).
pub(super) fn open(rank: &Rank<'_>, share: &WorkerShare, halo: HaloFeatures) -> Result<Gpu, TrainError> {
    let config = rank.config();
    let s = share;
    let split_rows = [s.train.len(), s.valid.len(), s.test.len()];
    let targets = Objective::new(&s.labels).terms_per_row();
    let (in_dim, classes) = (s.features.ncols(), s.num_classes);
    let mut footprint = device::part_estimate(config, &s.part, split_rows, targets, in_dim, classes)?;
    if halo == HaloFeatures::Cached {
        footprint.resident += device::held_view_bytes(config, &s.part, in_dim, classes)?;
    }
    gpu::open(rank, footprint)
}

/// `host`'s parameters on `gpu`, computing `job`'s part.
#[cfg(feature = "cuda")]
pub(super) fn model<'a>(
    gpu: &'a Gpu,
    host: &Model,
    job: PartJob<'a, '_>,
) -> Result<Box<dyn PartModel + 'a>, TrainError> {
    let learner = gnn_core::gpu::DeviceModel::from_model(&gpu.dev, host)?;
    Ok(Box::new(super::compute::OnPart::new(learner, job)?))
}

/// Without the `cuda` feature there is no device to compute on.
#[cfg(not(feature = "cuda"))]
pub(super) fn model<'a>(
    _gpu: &'a Gpu,
    _host: &Model,
    _job: PartJob<'a, '_>,
) -> Result<Box<dyn PartModel + 'a>, TrainError> {
    Err(TrainError::NoCuda)
}
