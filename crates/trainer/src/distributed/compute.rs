//! The model a cut-graph worker computes with ([`PartModel`]): the CPU [`Model`] here
//! ([`OnCpu`]), or a device one (`on_device.rs`). It runs the passes over the worker's part,
//! each calling the worker's exchange where the CPU layers do; the worker around it
//! (`worker.rs`) builds the exchange and runs the collectives (gradient and loss all-reduce,
//! evaluation counts) in the same order whatever the model, so the ledger is the same.

use comm_hierarchy::Communicator;
use gnn_core::exchange::Exchange;
use gnn_core::{AggGraph, ForwardCtx, Model, Optim};
use graph_partition::sample::Fanouts;

use super::param_server::ParamServers;
use super::setup::WorkerShare;
use crate::checkpoint::WorkerState;
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::guard;
use crate::harness::{CommClock, GradSum};
use crate::method::{GradSync, HaloFeatures, Parts, sampled_layers};
use crate::objective::{Hits, Objective};
use crate::report::{DeviceEpoch, TrainedModel};

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
    fn steps_on_servers(&self) -> bool {
        false
    }

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
    fn model(&self) -> Option<&Model> {
        None
    }

    /// The parameters after `epoch`, for `--save-model`.
    fn snapshot(&mut self, epoch: usize) -> Result<Option<TrainedModel>, TrainError> {
        Ok(self.model().map(|m| TrainedModel::of(m, epoch)))
    }

    /// The parameters and the optimizer's state, with the method's state `method`.
    fn state(&self, method: Vec<u8>) -> Result<WorkerState, String>;

    /// Puts back the parameters and optimizer state of `state`; returns its method blob.
    fn restore(&mut self, state: WorkerState) -> Result<Vec<u8>, String>;

    /// A model on a device: the GPU time of the step that just ran, its exchange calls left
    /// out (the compute the modeled timeline adds to the modeled communication). `None` where
    /// the worker's compute is its wall time outside communicator calls (the CPU).
    fn device_compute_s(&self) -> Option<f64> {
        None
    }

    /// A model on a device: the GPU time and bus traffic of the epoch whose step and
    /// evaluation just ran.
    fn device_epoch(&mut self) -> Option<DeviceEpoch> {
        None
    }
}

/// One view of `graph` per layer: layer 0's holds its halo inputs when they are cached.
fn layer_graphs(graph: AggGraph, halo: HaloFeatures, layers: usize) -> Result<Vec<AggGraph>, TrainError> {
    let first = match halo {
        HaloFeatures::Pulled => graph.clone(),
        HaloFeatures::Cached => graph.clone().with_held_halo()?,
    };
    Ok(std::iter::once(first).chain(std::iter::repeat_n(graph, layers.saturating_sub(1))).collect())
}

/// The CPU [`Model`] on the worker's part, with its optimizer or parameter servers.
pub(super) struct OnCpu<'a> {
    share: &'a WorkerShare,
    /// The view of the local graph each layer runs on: every one pulls its halo rows, except
    /// layer 0's under the halo feature cache, which holds them.
    graphs: Vec<AggGraph>,
    objective: Objective<'a>,
    model: Model,
    optimizer: Optim,
    /// `Some` under parameter servers: the update runs there instead of on every worker.
    servers: Option<ParamServers>,
    lr: f32,
    seed: u64,
    /// Per-layer fanouts of training on in-edges sampled every epoch; `None`: every edge.
    fanouts: Option<Fanouts>,
}

impl<'a> OnCpu<'a> {
    /// The model and optimizer `job`'s configuration describes (initialised identically on
    /// every worker from the seed) on its view of its share's part, as its parts run it.
    pub(super) fn new(job: PartJob<'a, '_>) -> Result<Self, TrainError> {
        let PartJob { share, graph, parts, config, rank } = job;
        Ok(Self {
            share,
            graphs: layer_graphs(graph, parts.halo_features, config.layers)?,
            objective: Objective::new(&share.labels),
            model: Model::new(config.model_config(share.features.ncols(), share.num_classes))?,
            optimizer: config.optimizer(),
            servers: match parts.sync {
                GradSync::AllReduce => None,
                GradSync::ParamServers { servers } => Some(ParamServers::new(servers, rank, config.optimizer())),
            },
            lr: config.lr,
            seed: config.seed,
            fanouts: parts.batches.edge_fanouts().cloned(),
        })
    }
}

impl PartModel for OnCpu<'_> {
    fn graph(&self) -> &AggGraph {
        self.graphs.last().expect("a model has at least one layer")
    }

    fn train_pass(&mut self, epoch: usize, global_terms: f64, exchange: &mut dyn Exchange) -> Result<Pass, TrainError> {
        self.model.zero_grad();
        let ctx = ForwardCtx::train(self.seed, epoch as u64);
        let sampled = match &self.fanouts {
            Some(fanouts) => {
                Some(sampled_layers(&self.graphs.iter().collect::<Vec<_>>(), fanouts, self.seed, ctx.epoch)?)
            }
            None => None,
        };
        let graphs = sampled.as_deref().unwrap_or(&self.graphs);
        self.model.forward_layers(graphs, &self.share.features, exchange, ctx)?;
        let mut dlogits = self.model.take_logits();
        let loss_sum = self.objective.loss_sum(&mut dlogits, &self.share.train)?;
        let bad_layer = guard::bad_layer(loss_sum, &self.model, self.graph());
        dlogits /= global_terms as f32;
        self.model.backward_layers(graphs, dlogits, exchange)?;
        Ok(Pass { loss_sum, bad_layer })
    }

    fn steps_on_servers(&self) -> bool {
        self.servers.is_some()
    }

    fn sum_grads(&mut self, sum: &mut GradSum<'_>) -> Result<(), TrainError> {
        Ok(sum.on_host(self.model.grads_mut())?)
    }

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
        guard::check_loss_and_grads(epoch, loss, pass.bad_layer, &self.model, self.lr)?;
        match self.servers.as_mut() {
            None => self.model.step(&mut self.optimizer)?,
            Some(servers) => {
                let (params, grads) = self.model.params_and_grads_mut();
                servers.step(comm, clock, params, grads)?;
            }
        }
        guard::check_params(epoch, &self.model, self.lr)
    }

    fn hits(&mut self, exchange: &mut dyn Exchange) -> Result<[Hits; 3], TrainError> {
        let logits = self.model.forward_layers(&self.graphs, &self.share.features, exchange, ForwardCtx::eval())?;
        let share = self.share;
        let mut hits = [Hits::default(); 3];
        for (out, rows) in hits.iter_mut().zip([&share.train, &share.valid, &share.test]) {
            *out = self.objective.hits(logits, rows)?;
        }
        Ok(hits)
    }

    fn model(&self) -> Option<&Model> {
        Some(&self.model)
    }

    fn state(&self, method: Vec<u8>) -> Result<WorkerState, String> {
        // Under parameter servers the optimizer runs on the servers: a server rank's shard holds the
        // moments of its slice, the others' the worker's optimizer, which never steps.
        let optimizer = self.servers.as_ref().and_then(ParamServers::optimizer).unwrap_or(&self.optimizer);
        Ok(WorkerState::of(&self.model, optimizer, method))
    }

    fn restore(&mut self, state: WorkerState) -> Result<Vec<u8>, String> {
        let optimizer = match self.servers.as_mut().and_then(ParamServers::optimizer_mut) {
            Some(served) => served,
            None => &mut self.optimizer,
        };
        state.restore(&mut self.model, optimizer)
    }
}
