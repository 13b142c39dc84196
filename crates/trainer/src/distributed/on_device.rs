//! A cut-graph worker whose model lives on a GPU ([`PartModel`] over
//! `gnn_core::gpu::DeviceModel`): the worker's part, its features, labels, parameters, gradients
//! and Adam's moments stay on the device, and each layer's exchange call stages only the rows
//! its footprint names through the host (`gnn_core::exchange::staging::Stager`), where the
//! worker's host exchange (the method's codec stack) runs as a CPU worker's does. The worker
//! around it makes the same collectives as on the CPU, so the network ledger is the same.
//!
//! Per step the gradient share comes down, is all-reduced on the host and goes back up before
//! the optimizer step on the device (under parameter servers the share goes to the servers,
//! which step on the host, and the parameters come back up); the loss and hit counts come down as scalars. Each epoch's
//! `device` record holds the GPU time per phase and the bus traffic, the exchange's staged rows
//! and its GPU time apart. The worker's compute on the modeled timeline is its GPU time from
//! CUDA events, the exchange calls left out (`PartModel::device_compute_s`): the host's staging
//! and host codecs inside those calls are not counted (a codec's kernels on the device are), and
//! workers sharing a GPU compute one at a
//! time (`crate::measure`). The CPU's non-finite guards do not run on the device.
//!
//! Without the `cuda` feature a device worker is refused ([`TrainError::NoCuda`]).

use super::compute::{PartJob, PartModel};
use super::setup::WorkerShare;
use crate::error::TrainError;
use crate::harness::Rank;
use crate::harness::gpu::{self, Gpu};
use crate::memory::device;
use crate::method::HaloFeatures;
use crate::objective::Objective;

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

#[cfg(feature = "cuda")]
pub(super) use cuda::model;

/// Without the `cuda` feature there is no device to compute on.
#[cfg(not(feature = "cuda"))]
pub(super) fn model<'a>(_gpu: &'a Gpu, _job: PartJob<'a, '_>) -> Result<Box<dyn PartModel + 'a>, TrainError> {
    Err(TrainError::NoCuda)
}

#[cfg(feature = "cuda")]
mod cuda {
    use comm_hierarchy::Communicator;
    use gnn_core::exchange::Exchange;
    use gnn_core::exchange::staging::Stager;
    use gnn_core::gpu::{CudaSlice, Device, DeviceGraph, DeviceLabels, DeviceModel, PartViews, PhaseClock, Transfers};
    use gnn_core::{AggGraph, ForwardCtx, Model, ModelConfig, Optim};

    use super::*;
    use crate::checkpoint::{Moments, WorkerState};
    use crate::distributed::compute::Pass;
    use crate::distributed::param_server::ParamServers;
    use crate::harness::{CommClock, GradSum};
    use crate::method::GradSync;
    use crate::objective::Hits;
    use crate::report::{DeviceEpoch, StagedBytes, TrainedModel, phase_s};

    /// The model of `job` on `gpu`.
    pub(in crate::distributed) fn model<'a>(
        gpu: &'a Gpu,
        job: PartJob<'a, '_>,
    ) -> Result<Box<dyn PartModel + 'a>, TrainError> {
        Ok(Box::new(OnDevice::new(gpu, job)?))
    }

    /// A worker's model, part and data on one device.
    struct OnDevice<'d> {
        dev: &'d Device,
        model: DeviceModel<'d>,
        /// The CPU model's configuration, which saved weights carry.
        config: ModelConfig,
        /// The host view of the part (what a controller reads).
        graph: AggGraph,
        part: DeviceGraph,
        /// Layer 0's view under the halo feature cache (its halo inputs held).
        held: Option<DeviceGraph>,
        /// A row per local vertex: the held rows, zeros for the rows the exchange pulls.
        features: CudaSlice<f32>,
        /// Train, validation and test rows (this worker's primaries) with their labels.
        splits: [DeviceLabels; 3],
        stager: Stager,
        optimizer: Optim,
        /// `Some` under parameter servers: the update runs there (on the host) instead of on
        /// the device.
        servers: Option<ParamServers>,
        seed: u64,
        /// The epoch being measured: its phases so far and the transfers before it.
        epoch: DeviceEpoch,
        transfers: Transfers,
    }

    impl<'d> OnDevice<'d> {
        fn new(gpu: &'d Gpu, job: PartJob<'d, '_>) -> Result<Self, TrainError> {
            let PartJob { share, graph, parts, config, rank } = job;
            let dev = &gpu.dev;
            let (in_dim, classes) = (share.features.ncols(), share.num_classes);
            let cpu = Model::new(config.model_config(in_dim, classes))?;
            let model = DeviceModel::from_model(dev, &cpu)?;
            // An exchange that overlaps splits its halo calls around the aggregation's halves.
            let part = match config.distributed.overlap {
                true => model.upload_overlapped_part_graph(&graph)?,
                false => model.upload_part_graph(&graph)?,
            };
            // The halo feature cache: layer 0 reads its halo rows' fetched inputs (the share
            // holds a row per local vertex) and pulls nothing.
            let held = match parts.halo_features {
                HaloFeatures::Pulled => None,
                HaloFeatures::Cached => Some(model.upload_part_graph(&graph.clone().with_held_halo()?)?),
            };
            let n = graph.num_local();
            let mut rows = vec![0.0f32; n * in_dim];
            rows.iter_mut().zip(share.features.iter()).for_each(|(d, &s)| *d = s);
            let upload = |rows: &[u32]| DeviceLabels::upload(dev, &share.labels, rows, n, classes);
            Ok(Self {
                dev,
                config: cpu.config().clone(),
                features: dev.upload(&rows)?,
                splits: [upload(&share.train)?, upload(&share.valid)?, upload(&share.test)?],
                stager: Stager::new(n),
                optimizer: config.optimizer(),
                servers: match parts.sync {
                    GradSync::AllReduce => None,
                    GradSync::ParamServers { servers } => Some(ParamServers::new(servers, rank, config.optimizer())),
                },
                seed: config.seed,
                epoch: DeviceEpoch::default(),
                transfers: dev.transfers(),
                model,
                graph,
                part,
                held,
            })
        }
    }

    impl PartModel for OnDevice<'_> {
        fn graph(&self) -> &AggGraph {
            &self.graph
        }

        fn train_pass(
            &mut self,
            epoch: usize,
            global_terms: f64,
            exchange: &mut dyn Exchange,
        ) -> Result<Pass, TrainError> {
            let dev = self.dev;
            let mut clock = dev.clock()?;
            self.model.zero_grad()?;
            let ctx = ForwardCtx::train(self.seed, epoch as u64);
            let views = PartViews::of(&self.part, self.held.as_ref());
            self.model.forward_part(views, &self.features, ctx, exchange, &mut self.stager)?;
            clock.mark("forward")?;
            let out = self.model.loss(&mut self.splits[0], global_terms as usize)?;
            clock.mark("loss")?;
            let views = PartViews::of(&self.part, self.held.as_ref());
            self.model.backward_part(views, exchange, &mut self.stager)?;
            clock.mark("backward")?;
            let phases = clock.read()?;
            self.epoch = DeviceEpoch {
                forward_s: phase_s(&phases, "forward"),
                loss_s: phase_s(&phases, "loss"),
                backward_s: phase_s(&phases, "backward"),
                exchange_s: Some(dev.take_exchange_s()?),
                ..DeviceEpoch::default()
            };
            Ok(Pass { loss_sum: out.loss_sum, bad_layer: None })
        }

        /// The step's phases less its exchange calls (the gradient sum runs between them).
        fn device_compute_s(&self) -> Option<f64> {
            let e = &self.epoch;
            Some(e.forward_s + e.loss_s + e.backward_s + e.optimizer_s - e.exchange_s.unwrap_or_default())
        }

        fn steps_on_servers(&self) -> bool {
            self.servers.is_some()
        }

        /// Through the host (the share down, the sum up), or under NCCL on the GPUs: the
        /// share gathered into one device buffer, summed there, and put back.
        fn sum_grads(&mut self, sum: &mut GradSum<'_>) -> Result<(), TrainError> {
            match self.dev.joined() {
                true => {
                    let mut flat = self.model.grads_on_device()?;
                    sum.on_device(flat.len(), |phase| Ok(self.dev.sum_on_peers(phase, &mut flat)?))?;
                    Ok(self.model.set_grads_on_device(&flat)?)
                }
                false => {
                    let mut grads = self.model.grads()?;
                    sum.on_host(&mut grads)?;
                    Ok(self.model.set_grads(&grads)?)
                }
            }
        }

        /// The optimizer step on the device, or under parameter servers the gradient share
        /// down, the servers' step on the host (`ParamServers::step`, as a CPU worker makes it)
        /// and the parameters back up: `optimizer_s` is then the GPU time of the two copies,
        /// not the servers' traffic between them.
        fn update(
            &mut self,
            _epoch: usize,
            _loss: f64,
            _pass: Pass,
            comm: &dyn Communicator,
            clock: &CommClock<'_>,
        ) -> Result<(), TrainError> {
            let dev = self.dev;
            let gpu_s = |phase: PhaseClock<'_>| -> Result<f64, TrainError> { Ok(phase_s(&phase.read()?, "optimizer")) };
            let mut phase = dev.clock()?;
            self.epoch.optimizer_s = match self.servers.as_mut() {
                None => {
                    self.model.step(&self.optimizer)?;
                    phase.mark("optimizer")?;
                    gpu_s(phase)?
                }
                Some(servers) => {
                    let (mut params, grads) = (self.model.params()?, self.model.grads()?);
                    phase.mark("optimizer")?;
                    let down = gpu_s(phase)?;
                    servers.step(comm, clock, &mut params, &grads)?;
                    let mut phase = dev.clock()?;
                    self.model.set_params(&params)?;
                    phase.mark("optimizer")?;
                    down + gpu_s(phase)?
                }
            };
            Ok(())
        }

        fn hits(&mut self, exchange: &mut dyn Exchange) -> Result<[Hits; 3], TrainError> {
            let dev = self.dev;
            let mut clock = dev.clock()?;
            let views = PartViews::of(&self.part, self.held.as_ref());
            self.model.forward_part(views, &self.features, ForwardCtx::eval(), exchange, &mut self.stager)?;
            let totals = self.model.evaluate(&mut self.splits)?;
            clock.mark("eval")?;
            self.epoch.eval_s = phase_s(&clock.read()?, "eval");
            // The evaluation's exchange stays in `eval_s`; `exchange_s` is the step's.
            dev.take_exchange_s()?;
            let mut hits = [Hits::default(); 3];
            for ((hit, split), out) in hits.iter_mut().zip(&self.splits).zip(totals) {
                let total = split.len() * split.terms_per_row();
                *hit = Hits { correct: out.correct as u64, total: total as u64 };
            }
            Ok(hits)
        }

        /// Downloads the parameters, joined into the CPU model's flat layout.
        fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
            Ok(Some(TrainedModel { config: self.config.clone(), params: self.model.params()?, epoch }))
        }

        /// Parameters and the optimizer's state downloaded in the CPU model's flat layout; under
        /// parameter servers a server rank's holds the moments of its slice (as a CPU worker's),
        /// the others' the device's, which never step.
        fn state(&self, method: Vec<u8>) -> Result<WorkerState, String> {
            match self.servers.as_ref().and_then(ParamServers::optimizer) {
                Some(served) => {
                    let params = self.model.params().map_err(|e| format!("downloading the parameters: {e}"))?;
                    Ok(WorkerState { params, optimizer: Moments::of(served), method })
                }
                None => WorkerState::of_device(&self.model, &self.optimizer, method),
            }
        }

        fn restore(&mut self, state: WorkerState) -> Result<Vec<u8>, String> {
            match self.servers.as_mut().and_then(ParamServers::optimizer_mut) {
                Some(served) => {
                    let WorkerState { params, optimizer: Moments { m, v, t }, method } = state;
                    self.model.set_params(&params).map_err(|e| format!("uploading the parameters: {e}"))?;
                    served.set_state(m, v, t).map_err(|e| e.to_string())?;
                    Ok(method)
                }
                None => state.restore_device(&mut self.model),
            }
        }

        fn device_epoch(&mut self) -> Option<DeviceEpoch> {
            let now = self.dev.transfers();
            let moved = now.since(self.transfers);
            self.transfers = now;
            let staged = self.stager.take_bytes();
            Some(DeviceEpoch {
                h2d_bytes: moved.host_to_device,
                d2h_bytes: moved.device_to_host,
                exchange: Some(StagedBytes { down_bytes: staged.down, up_bytes: staged.up }),
                ..self.epoch
            })
        }
    }
}
