//! The model a cut-graph worker computes with ([`PartModel`]): [`OnPart`], written once over
//! any [`Learner`] backend (the CPU [`Model`], or a device model placed by `on_device.rs`). It
//! runs the passes over the worker's part, each calling the worker's exchange where the layers
//! do; the worker around it (`worker.rs`) builds the exchange and runs the collectives (gradient
//! and loss all-reduce, evaluation counts) in the same order whatever the backend, so the ledger
//! is the same.
//!
//! On a device the part, its features, labels, parameters, gradients and Adam's moments stay
//! there, and each exchange call stages only the rows its footprint names through the host.
//! Per step the gradient share comes down, is all-reduced on the host and goes back up (under
//! NCCL it is summed between the GPUs); under parameter servers the share goes to the servers,
//! which step on the host, and the parameters come back up. Each epoch's `device` record holds
//! the GPU time per phase, the bus traffic and the exchange's staged rows; the worker's compute
//! on the modeled timeline is its GPU time, the exchange calls left out
//! ([`PartModel::device_compute_s`]). The CPU's non-finite guards read the host model, so they
//! run on the CPU only.

use comm_hierarchy::Communicator;
use gnn_core::exchange::Exchange;
use gnn_core::objective::Hits;
use gnn_core::{AggGraph, ForwardCtx, Learner, Model, Optim, Phase, PhaseTimes, Views};
use graph_partition::sample::Fanouts;

use super::param_server::ParamServers;
use super::setup::WorkerShare;
use crate::checkpoint::{Moments, WorkerState};
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::guard;
use crate::harness::{CommClock, GradSum};
use crate::method::{GradSync, HaloFeatures, Parts, sampled_layers};
use crate::report::{DeviceEpoch, StagedBytes, TrainedModel};

/// What a worker's model needs from the worker: its share, the view of its part it runs on
/// (every layer's, before the halo feature cache), and the run's parts and configuration.
pub(crate) struct PartJob<'a, 'c> {
    pub share: &'a WorkerShare,
    pub graph: AggGraph,
    pub parts: &'c Parts,
    pub config: &'c TrainConfig,
    pub rank: usize,
}

/// What a training pass leaves for the update.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pass {
    /// The loss summed over this worker's training rows.
    pub loss_sum: f64,
    /// The first layer whose output is non-finite, looked at when the loss is (the CPU's guard).
    pub bad_layer: Option<usize>,
}

/// The model a cut-graph worker computes with. Every worker's model starts from the same
/// parameters (the seed's) and takes the same update, so they stay equal.
pub(crate) trait PartModel {
    /// The view of the part the layers past the first run on (what a controller reads).
    fn graph(&self) -> &AggGraph;

    /// Zeroes the gradients, then forward, the loss over this worker's training rows and
    /// backward of the 1-based `epoch`, the loss gradient divided by `global_terms` (the loss
    /// terms of the whole training set): the gradients hold this worker's share.
    fn train_pass(&mut self, epoch: usize, global_terms: f64, exchange: &mut dyn Exchange) -> Result<Pass, TrainError>;

    /// Whether the update runs on parameter servers, which take the gradient shares unsummed.
    fn steps_on_servers(&self) -> bool;

    /// Replaces the gradient share by its sum over the workers, which `sum` computes.
    fn sum_grads(&mut self, sum: &mut GradSum<'_>) -> Result<(), TrainError>;

    /// The update after the sums: `loss` is the step's global loss, `pass` what
    /// [`PartModel::train_pass`] returned.
    fn update(
        &mut self,
        epoch: usize,
        loss: f64,
        pass: Pass,
        comm: &dyn Communicator,
        clock: &CommClock<'_>,
    ) -> Result<(), TrainError>;

    /// Inference over the part (no dropout; the exchange goes around its codecs unless
    /// `lossy-eval`): this worker's hits on its training, validation and test rows.
    fn hits(&mut self, exchange: &mut dyn Exchange) -> Result<[Hits; 3], TrainError>;

    /// The model on the host, where it lives there.
    fn model(&self) -> Option<&Model>;

    /// The parameters after `epoch`, for `--save-model`.
    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError>;

    /// The parameters and the optimizer's state, with the method's state `method`.
    fn state(&self, method: Vec<u8>) -> Result<WorkerState, String>;

    /// Puts back the parameters and optimizer state of `state`; returns its method blob.
    fn restore(&mut self, state: WorkerState) -> Result<Vec<u8>, String>;

    /// A model on a device: the GPU time of the step that just ran, its exchange calls left
    /// out (the compute the modeled timeline adds to the modeled communication). `None` where
    /// the worker's compute is its wall time outside communicator calls (the CPU).
    fn device_compute_s(&self) -> Option<f64>;

    /// A model on a device: the GPU time and bus traffic of the epoch whose step and
    /// evaluation just ran.
    fn device_epoch(&mut self) -> Option<DeviceEpoch>;
}

/// The model of a cut-graph worker on its backend `L`, with its optimizer or parameter servers.
pub(crate) struct OnPart<'a, L: Learner> {
    /// The host view of the part every layer past the first runs on (what a controller reads).
    graph: AggGraph,
    /// The views each layer runs on, where the model computes: every one pulls its halo rows,
    /// except layer 0's under the halo feature cache, which holds them.
    views: L::Graph,
    /// A row per local vertex: the held rows, zeros for the rows the exchange pulls.
    features: L::Features<'a>,
    /// Train, validation and test rows (this worker's primaries) with their labels.
    splits: [L::Targets<'a>; 3],
    learner: L,
    optimizer: Optim,
    /// `Some` under parameter servers: the update runs there (on the host) instead of on
    /// every worker.
    servers: Option<ParamServers>,
    lr: f32,
    seed: u64,
    /// Training on in-edges sampled every epoch: the per-layer fanouts, and the host views
    /// they sample from. `None`: every edge.
    sampled: Option<(Fanouts, Vec<AggGraph>)>,
    /// A backend that times itself (a device): the phases of the epoch being measured.
    phases: Option<PhaseTimes>,
}

impl<'a, L: Learner> OnPart<'a, L> {
    /// `learner` (initialised identically on every worker from the seed) on `job`'s part of
    /// its share, as its parts run it.
    pub(crate) fn new(learner: L, job: PartJob<'a, '_>) -> Result<Self, TrainError> {
        let PartJob { share, graph, parts, config, rank } = job;
        let held = match parts.halo_features {
            HaloFeatures::Pulled => None,
            HaloFeatures::Cached => Some(graph.clone().with_held_halo()?),
        };
        let overlapped = config.distributed.overlap;
        let views = learner.graph(Views::Part { first: held.as_ref(), rest: &graph, overlapped })?;
        let n = graph.num_local();
        let target = |rows: &'a [u32]| learner.targets(&share.labels, rows, n);
        let sampled = parts.batches.edge_fanouts().map(|fanouts| {
            let first = held.clone().unwrap_or_else(|| graph.clone());
            let rest = std::iter::repeat_n(graph.clone(), config.layers.saturating_sub(1));
            (fanouts.clone(), std::iter::once(first).chain(rest).collect())
        });
        Ok(Self {
            features: learner.features(&share.features, n)?,
            splits: [target(&share.train)?, target(&share.valid)?, target(&share.test)?],
            views,
            graph,
            optimizer: config.optimizer(),
            servers: match parts.sync {
                GradSync::AllReduce => None,
                GradSync::ParamServers { servers } => Some(ParamServers::new(servers, rank, config.optimizer())),
            },
            lr: config.lr,
            seed: config.seed,
            sampled,
            phases: None,
            learner,
        })
    }
}

impl<L: Learner> PartModel for OnPart<'_, L> {
    fn graph(&self) -> &AggGraph {
        &self.graph
    }

    fn train_pass(&mut self, epoch: usize, global_terms: f64, exchange: &mut dyn Exchange) -> Result<Pass, TrainError> {
        let learner = &mut self.learner;
        learner.begin()?;
        learner.zero_grad()?;
        let ctx = ForwardCtx::train(self.seed, epoch as u64);
        let mut sampled = match &self.sampled {
            Some((fanouts, layers)) => {
                let layers = sampled_layers(&layers.iter().collect::<Vec<_>>(), fanouts, self.seed, ctx.epoch)?;
                Some(learner.graph(Views::Layers(&layers))?)
            }
            None => None,
        };
        let views = sampled.as_mut().unwrap_or(&mut self.views);
        learner.forward(views, &self.features, exchange, ctx)?;
        learner.mark(Phase::Forward)?;
        let (loss_sum, grad) = learner.loss(&mut self.splits[0], global_terms)?;
        learner.mark(Phase::Loss)?;
        let bad_layer = learner.host().and_then(|model| guard::bad_layer(loss_sum, model, &self.graph));
        learner.backward(views, grad, exchange)?;
        learner.mark(Phase::Backward)?;
        self.phases = learner.read_phases()?;
        Ok(Pass { loss_sum, bad_layer })
    }

    /// The step's phases less its exchange calls (the gradient sum runs between them).
    fn device_compute_s(&self) -> Option<f64> {
        let p = self.phases?;
        Some(p.forward_s + p.loss_s + p.backward_s + p.optimizer_s - p.exchange_s)
    }

    fn steps_on_servers(&self) -> bool {
        self.servers.is_some()
    }

    /// On the host, or under NCCL between the GPUs.
    fn sum_grads(&mut self, sum: &mut GradSum<'_>) -> Result<(), TrainError> {
        let learner = &mut self.learner;
        match learner.joined() {
            true => sum.on_device(|phase| Ok(learner.sum_grads_on_peers(phase)?)),
            false => Ok(sum.on_host(learner.grads_mut()?)?),
        }
    }

    /// The optimizer step where the model is, or under parameter servers the gradient share to
    /// the servers' step on the host (`ParamServers::step`) and the parameters back: a device's
    /// `optimizer_s` is then the GPU time of the copies, not the servers' traffic between them.
    fn update(
        &mut self,
        epoch: usize,
        loss: f64,
        pass: Pass,
        comm: &dyn Communicator,
        clock: &CommClock<'_>,
    ) -> Result<(), TrainError> {
        // The loss is global here (and under all-reduce the gradients), and the update
        // identical, so every worker stops at the same step.
        if let Some(model) = self.learner.host() {
            guard::check_loss_and_grads(epoch, loss, pass.bad_layer, model, self.lr)?;
        }
        let learner = &mut self.learner;
        learner.begin()?;
        match self.servers.as_mut() {
            None => learner.step(&mut self.optimizer)?,
            Some(servers) => {
                let (mut params, grads) = (learner.params()?.into_owned(), learner.grads_mut()?.to_vec());
                learner.mark(Phase::Optimizer)?;
                servers.step(comm, clock, &mut params, &grads)?;
                learner.begin()?;
                learner.set_params(&params)?;
            }
        }
        learner.mark(Phase::Optimizer)?;
        if let (Some(phases), Some(read)) = (self.phases.as_mut(), learner.read_phases()?) {
            phases.optimizer_s = read.optimizer_s;
        }
        match self.learner.host() {
            Some(model) => guard::check_params(epoch, model, self.lr),
            None => Ok(()),
        }
    }

    fn hits(&mut self, exchange: &mut dyn Exchange) -> Result<[Hits; 3], TrainError> {
        let learner = &mut self.learner;
        learner.begin()?;
        learner.forward(&mut self.views, &self.features, exchange, ForwardCtx::eval())?;
        let hits = learner.hits(&mut self.splits)?;
        learner.mark(Phase::Eval)?;
        // The evaluation's exchange stays in `eval_s`; `exchange_s` is the step's.
        if let (Some(phases), Some(read)) = (self.phases.as_mut(), learner.read_phases()?) {
            phases.eval_s = read.eval_s;
        }
        let mut out = [Hits::default(); 3];
        out.iter_mut().zip(hits).for_each(|(o, h)| *o = h);
        Ok(out)
    }

    fn model(&self) -> Option<&Model> {
        self.learner.host()
    }

    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
        Ok(Some(TrainedModel::of(&self.learner, epoch)?))
    }

    /// Under parameter servers a server rank's optimizer state is its slice's moments (the
    /// others' is the worker's, which never steps).
    fn state(&self, method: Vec<u8>) -> Result<WorkerState, String> {
        match self.servers.as_ref().and_then(ParamServers::optimizer) {
            Some(served) => {
                let params = self.learner.params().map_err(|e| format!("reading the parameters: {e}"))?;
                Ok(WorkerState { params: params.into_owned(), optimizer: Moments::of(served), method })
            }
            None => WorkerState::of(&self.learner, &self.optimizer, method),
        }
    }

    fn restore(&mut self, state: WorkerState) -> Result<Vec<u8>, String> {
        match self.servers.as_mut().and_then(ParamServers::optimizer_mut) {
            Some(served) => {
                let WorkerState { params, optimizer: Moments { m, v, t }, method } = state;
                self.learner.set_params(&params).map_err(|e| format!("restoring the parameters: {e}"))?;
                served.set_state(m, v, t).map_err(|e| e.to_string())?;
                Ok(method)
            }
            None => state.restore(&mut self.learner, &mut self.optimizer),
        }
    }

    fn device_epoch(&mut self) -> Option<DeviceEpoch> {
        let phases = self.phases?;
        let moved = self.learner.traffic(Some(&mut self.views))?;
        Some(DeviceEpoch {
            exchange: Some(StagedBytes { down_bytes: moved.staged_down, up_bytes: moved.staged_up }),
            exchange_s: Some(phases.exchange_s),
            ..DeviceEpoch::of(&phases, &moved)
        })
    }
}
