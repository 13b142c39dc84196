//! One model over two backends. [`Learner`] is what a trainer does with a model: place its
//! graph, features and labelled rows where the model computes, run forward, the loss and
//! backward, step, and read or restore its parameters and optimizer state.
//!
//! The CPU [`Model`] implements it here; the device model (`gpu::DeviceModel`, `cuda` feature)
//! in `gpu/cuda/learner.rs`. A trainer's runner is written once over the trait. What only a
//! device has (its GPU time per phase, its bus traffic, gradients summed between joined
//! devices) are provided methods that the host leaves at their defaults.

use std::borrow::Cow;
use std::convert::Infallible;
use std::ops::Range;

use graph_partition::{Dataset, Labels};
use ndarray::Array2;

use crate::block::BlockGraphs;
use crate::exchange::Exchange;
use crate::exchange::NoExchange;
use crate::gpu::GpuError;
use crate::graph::GraphDegrees;
use crate::layers::ForwardCtx;
use crate::loss::LossError;
use crate::model::{Model, ModelConfig, ModelError};
use crate::objective::{Hits, Objective};
use crate::optim::{Optim, OptimError};
use crate::{AggGraph, GraphError};

/// Why a learner's call failed.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    #[error("model: {0}")]
    Model(#[from] ModelError),
    #[error("loss: {0}")]
    Loss(#[from] LossError),
    #[error("optimizer: {0}")]
    Optim(#[from] OptimError),
    #[error("graph: {0}")]
    Graph(#[from] GraphError),
    #[error("device: {0}")]
    Device(#[from] GpuError),
    /// The backend has no way to run what was asked (a configuration check should have refused it).
    #[error("{backend} cannot run {what}")]
    Unsupported { backend: &'static str, what: &'static str },
    /// A checkpoint's state does not fit the model.
    #[error("{0}")]
    State(String),
}

/// The views of a graph a model's layers run on.
#[derive(Debug, Clone, Copy)]
pub enum Views<'g> {
    /// A whole graph (no halo rows), every layer.
    Whole(&'g AggGraph),
    /// A worker's part of a cut graph: `rest` for every layer but the first, `first` for layer 0
    /// where it differs (its halo inputs held: the halo feature cache). `overlapped`: the
    /// exchange overlaps its halo calls with the aggregation.
    Part { first: Option<&'g AggGraph>, rest: &'g AggGraph, overlapped: bool },
    /// One view per layer, input layer first (in-edges sampled anew for each layer).
    Layers(&'g [AggGraph]),
}

/// A sampled batch's input rows: a row per input vertex of its blocks.
#[derive(Debug)]
pub enum BatchInput<'b, R> {
    /// Assembled on the host.
    Rows(&'b Array2<f32>),
    /// Rows `ids` of the host matrix `host`, which `resident` holds where the backend keeps it.
    Held { host: &'b Array2<f32>, resident: Option<&'b R>, ids: &'b [u32] },
    /// Rows `ids` of the resident matrix `resident`, every column.
    Resident { resident: &'b R, ids: &'b [u32] },
    /// Rows assembled on the host whose columns `keep` are rows `ids` of `resident` (its other
    /// columns zero): the backend gathers those there and takes only the other columns of `rows`.
    Around { rows: &'b Array2<f32>, resident: &'b R, ids: &'b [u32], keep: Range<usize> },
}

/// The phases of a training step and an evaluation, as a backend times them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Forward,
    Loss,
    Backward,
    Optimizer,
    Eval,
}

/// The seconds a backend measured for each phase of its own work, and the part of it spent
/// inside exchange calls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    pub forward_s: f64,
    pub loss_s: f64,
    pub backward_s: f64,
    pub optimizer_s: f64,
    pub eval_s: f64,
    /// Inside exchange calls (part of the phases that made them), less the codecs' own compute.
    pub exchange_s: f64,
}

impl PhaseTimes {
    /// Adds `seconds` to `phase`.
    pub fn add(&mut self, phase: Phase, seconds: f64) {
        *match phase {
            Phase::Forward => &mut self.forward_s,
            Phase::Loss => &mut self.loss_s,
            Phase::Backward => &mut self.backward_s,
            Phase::Optimizer => &mut self.optimizer_s,
            Phase::Eval => &mut self.eval_s,
        } += seconds;
    }
}

impl std::ops::AddAssign for PhaseTimes {
    fn add_assign(&mut self, o: Self) {
        self.forward_s += o.forward_s;
        self.loss_s += o.loss_s;
        self.backward_s += o.backward_s;
        self.optimizer_s += o.optimizer_s;
        self.eval_s += o.eval_s;
        self.exchange_s += o.exchange_s;
    }
}

/// Bytes a backend copied between the host and its memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub host_to_device: u64,
    pub device_to_host: u64,
    /// What of those bytes the exchange calls staged: rows read (down) and written (up).
    pub staged_down: u64,
    pub staged_up: u64,
}

/// Parameters and optimizer state in the CPU model's flat layout: what a checkpoint holds.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub params: Vec<f32>,
    /// Adam's first moment, or SGD's momentum buffer.
    pub m: Vec<f32>,
    /// Adam's second moment; empty for SGD.
    pub v: Vec<f32>,
    /// Steps taken.
    pub t: u64,
}

/// What a trainer does with a model, on the backend that holds it.
///
/// A step: [`Learner::zero_grad`], [`Learner::forward`], [`Learner::loss`] (which hands over
/// the logits' gradient), [`Learner::backward`] with it, then [`Learner::step`] once the
/// gradients are summed. The graph, features and labelled rows are placed first, once.
pub trait Learner {
    /// Graph views as this backend holds them.
    type Graph;
    /// A feature matrix as this backend holds it.
    type Features<'x>;
    /// Rows of the logits with their targets (a split), as this backend holds them.
    type Targets<'t>;
    /// The gradient of the logits, from [`Learner::loss`] to [`Learner::backward`].
    type LogitsGrad;
    /// A sampled batch's blocks as this backend holds them.
    type Blocks;
    /// A matrix kept where the model computes, beside the host's copy (none on the host).
    type Resident;
    /// A whole graph placed for inference, with its labelled splits.
    type Whole;

    /// The model's configuration (what saved weights carry).
    fn config(&self) -> &ModelConfig;

    /// The model where it lives on the host: its guards name parameters and layers there.
    fn host(&self) -> Option<&Model>;

    /// Places `views` for this model's layers.
    fn graph(&self, views: Views<'_>) -> Result<Self::Graph, LearnError>;

    /// Places `x`, padded to `rows` rows with zeros (rows an exchange fills are not read).
    fn features<'x>(&self, x: &'x Array2<f32>, rows: usize) -> Result<Self::Features<'x>, LearnError>;

    /// Places the targets of the logits' rows `rows` (of `logit_rows`) from `labels`.
    fn targets<'t>(
        &self,
        labels: &'t Labels,
        rows: &'t [u32],
        logit_rows: usize,
    ) -> Result<Self::Targets<'t>, LearnError>;

    fn zero_grad(&mut self) -> Result<(), LearnError>;

    /// The logits of `x` over `graph`, kept for the loss or the hits. Every worker calls it with
    /// the same `ctx` (the exchange calls are collectives).
    fn forward(
        &mut self,
        graph: &mut Self::Graph,
        x: &Self::Features<'_>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<(), LearnError>;

    /// The loss summed over `targets`' rows, and its gradient over the logits divided by `terms`
    /// (the loss terms of the whole training set, so the workers' gradients add up to the mean's).
    fn loss(&mut self, targets: &mut Self::Targets<'_>, terms: f64) -> Result<(f64, Self::LogitsGrad), LearnError>;

    /// Back-propagates `grad` through the last forward (same graph and exchange) and adds the
    /// parameter gradients.
    fn backward(
        &mut self,
        graph: &mut Self::Graph,
        grad: Self::LogitsGrad,
        exchange: &mut dyn Exchange,
    ) -> Result<(), LearnError>;

    /// The last forward's correct predictions over each of `splits`.
    fn hits(&mut self, splits: &mut [Self::Targets<'_>]) -> Result<Vec<Hits>, LearnError>;

    /// The update of the summed gradients.
    fn step(&mut self, optimizer: &mut Optim) -> Result<(), LearnError>;

    /// The gradients as a host slice in the CPU model's flat layout. A device brings them down
    /// and takes what the slice then holds back up before its next use of them.
    fn grads_mut(&mut self) -> Result<&mut [f32], LearnError>;

    /// Whether every gradient is finite (a device reduces them where they are).
    fn grads_finite(&mut self) -> Result<bool, LearnError>;

    /// Places `blocks`, and the rows `rows` of the resident feature matrix (of `bound` rows)
    /// their inputs read. A device queues them on its copy stream.
    fn blocks(&self, blocks: &BlockGraphs, rows: Option<&[u32]>, bound: usize) -> Result<Self::Blocks, LearnError>;

    /// Whether [`Learner::blocks`] can run ahead of the step that takes them (a device's copy
    /// stream): a runner then places the next step's blocks while this one computes.
    fn places_ahead(&self) -> bool {
        false
    }

    /// Keeps `x` where the model computes; `None` on the host, which reads the rows it is given.
    fn resident(&self, x: &Array2<f32>) -> Result<Option<Self::Resident>, LearnError>;

    /// The logits of a batch's `input` over its `blocks` (placed as `placed`), the seeds first.
    fn forward_blocks(
        &mut self,
        placed: &Self::Blocks,
        blocks: &BlockGraphs,
        input: BatchInput<'_, Self::Resident>,
        ctx: ForwardCtx,
    ) -> Result<(), LearnError>;

    /// Back-propagates `grad` through the last [`Learner::forward_blocks`] (same blocks).
    fn backward_blocks(
        &mut self,
        placed: &Self::Blocks,
        blocks: &BlockGraphs,
        grad: Self::LogitsGrad,
    ) -> Result<(), LearnError>;

    /// Places `dataset`'s whole graph and splits for [`Learner::infer`], its features too where
    /// `features` (else inference reads the resident matrix it is given).
    fn whole(&self, dataset: &Dataset, features: bool) -> Result<Self::Whole, LearnError>;

    /// Full-neighbour inference over every vertex of `dataset`: the hits of its train,
    /// validation and test splits. The host infers layer by layer in batches of `batch`
    /// destinations (`degrees` are the graph's), its memory bounded; a device in one forward
    /// over `whole`, reading `x` where `whole` holds no features.
    fn infer(
        &mut self,
        whole: &mut Self::Whole,
        dataset: &Dataset,
        degrees: &GraphDegrees,
        x: Option<&Self::Resident>,
        batch: usize,
    ) -> Result<[Hits; 3], LearnError>;

    /// The parameters, in the CPU model's flat layout.
    fn params(&self) -> Result<Cow<'_, [f32]>, LearnError>;

    /// Replaces the parameters (the optimizer's state stays).
    fn set_params(&mut self, params: &[f32]) -> Result<(), LearnError>;

    /// The parameters and `optimizer`'s state (a device keeps its own moments).
    fn state(&self, optimizer: &Optim) -> Result<State, LearnError>;

    /// Puts back what [`Learner::state`] returned.
    fn restore(&mut self, optimizer: &mut Optim, state: State) -> Result<(), LearnError>;

    /// Starts timing at this point of the work queued: the work queued since the last mark
    /// counts in no phase (a device times its phases; the host's work is timed by the wall
    /// clock, and this does nothing).
    fn begin(&mut self) -> Result<(), LearnError> {
        Ok(())
    }

    /// Ends `phase` at this point of the work queued (see [`Learner::begin`]).
    fn mark(&mut self, _phase: Phase) -> Result<(), LearnError> {
        Ok(())
    }

    /// The time of each phase marked since the last reading (waiting for the work to end);
    /// `None` on the host.
    fn read_phases(&mut self) -> Result<Option<PhaseTimes>, LearnError> {
        Ok(None)
    }

    /// The bytes copied since the last reading, with what `graph`'s exchange calls staged;
    /// `None` on the host.
    fn traffic(&mut self, _graph: Option<&mut Self::Graph>) -> Option<Traffic> {
        None
    }

    /// Whether this backend's gradients are summed between joined devices
    /// ([`Learner::sum_grads_on_peers`]) instead of on the host.
    fn joined(&self) -> bool {
        false
    }

    /// Sums the gradients over the joined devices, as ledger phase `phase`; returns their length.
    fn sum_grads_on_peers(&mut self, _phase: &str) -> Result<usize, LearnError> {
        Err(LearnError::Unsupported { backend: "this backend", what: "a gradient sum between devices" })
    }
}

/// The host's targets: the objective of a dataset's labels and the rows it scores.
#[derive(Debug, Clone, Copy)]
pub struct HostTargets<'t> {
    pub objective: Objective<'t>,
    pub rows: &'t [u32],
}

/// The CPU backend: the model's own buffers on the host, one view per layer.
impl Learner for Model {
    type Graph = Vec<AggGraph>;
    type Features<'x> = &'x Array2<f32>;
    type Targets<'t> = HostTargets<'t>;
    type LogitsGrad = Array2<f32>;
    type Blocks = ();
    type Resident = Infallible;
    type Whole = ();

    fn config(&self) -> &ModelConfig {
        Model::config(self)
    }

    fn host(&self) -> Option<&Model> {
        Some(self)
    }

    fn graph(&self, views: Views<'_>) -> Result<Vec<AggGraph>, LearnError> {
        let layers = self.config().layers;
        Ok(match views {
            Views::Whole(graph) => vec![graph.clone(); layers],
            Views::Part { first, rest, .. } => std::iter::once(first.unwrap_or(rest).clone())
                .chain(std::iter::repeat_n(rest.clone(), layers.saturating_sub(1)))
                .collect(),
            Views::Layers(graphs) => graphs.to_vec(),
        })
    }

    fn features<'x>(&self, x: &'x Array2<f32>, _rows: usize) -> Result<&'x Array2<f32>, LearnError> {
        Ok(x)
    }

    fn targets<'t>(
        &self,
        labels: &'t Labels,
        rows: &'t [u32],
        _logit_rows: usize,
    ) -> Result<HostTargets<'t>, LearnError> {
        Ok(HostTargets { objective: Objective::new(labels), rows })
    }

    fn zero_grad(&mut self) -> Result<(), LearnError> {
        Model::zero_grad(self);
        Ok(())
    }

    fn forward(
        &mut self,
        graph: &mut Vec<AggGraph>,
        x: &&Array2<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<(), LearnError> {
        self.forward_layers(graph, x, exchange, ctx)?;
        Ok(())
    }

    fn loss(&mut self, targets: &mut HostTargets<'_>, terms: f64) -> Result<(f64, Array2<f32>), LearnError> {
        let mut dlogits = self.take_logits();
        let loss_sum = targets.objective.loss_sum(&mut dlogits, targets.rows)?;
        dlogits /= terms as f32;
        Ok((loss_sum, dlogits))
    }

    fn backward(
        &mut self,
        graph: &mut Vec<AggGraph>,
        grad: Array2<f32>,
        exchange: &mut dyn Exchange,
    ) -> Result<(), LearnError> {
        Ok(self.backward_layers(graph, grad, exchange)?)
    }

    fn hits(&mut self, splits: &mut [HostTargets<'_>]) -> Result<Vec<Hits>, LearnError> {
        let logits = self.logits();
        Ok(splits.iter().map(|t| t.objective.hits(logits, t.rows)).collect::<Result<_, _>>()?)
    }

    fn step(&mut self, optimizer: &mut Optim) -> Result<(), LearnError> {
        Ok(Model::step(self, optimizer)?)
    }

    fn grads_mut(&mut self) -> Result<&mut [f32], LearnError> {
        Ok(Model::grads_mut(self))
    }

    fn grads_finite(&mut self) -> Result<bool, LearnError> {
        Ok(Model::grads(self).iter().all(|g| g.is_finite()))
    }

    fn blocks(&self, _blocks: &BlockGraphs, _rows: Option<&[u32]>, _bound: usize) -> Result<(), LearnError> {
        Ok(())
    }

    fn resident(&self, _x: &Array2<f32>) -> Result<Option<Infallible>, LearnError> {
        Ok(None)
    }

    fn forward_blocks(
        &mut self,
        _placed: &(),
        blocks: &BlockGraphs,
        input: BatchInput<'_, Infallible>,
        ctx: ForwardCtx,
    ) -> Result<(), LearnError> {
        match input {
            BatchInput::Rows(rows) | BatchInput::Around { rows, .. } => {
                self.forward_blocks_gathered(blocks, rows, &mut NoExchange, ctx)?
            }
            BatchInput::Held { host, ids, .. } => self.forward_blocks_rows(blocks, host, ids, &mut NoExchange, ctx)?,
            BatchInput::Resident { resident, .. } => match *resident {},
        };
        Ok(())
    }

    fn backward_blocks(&mut self, _placed: &(), blocks: &BlockGraphs, grad: Array2<f32>) -> Result<(), LearnError> {
        Ok(Model::backward_blocks(self, blocks, grad, &mut NoExchange)?)
    }

    fn whole(&self, _dataset: &Dataset, _features: bool) -> Result<(), LearnError> {
        Ok(())
    }

    fn infer(
        &mut self,
        _whole: &mut (),
        dataset: &Dataset,
        degrees: &GraphDegrees,
        _x: Option<&Infallible>,
        batch: usize,
    ) -> Result<[Hits; 3], LearnError> {
        let logits = self.infer_layerwise(&dataset.graph, degrees, &dataset.features, batch)?;
        let objective = Objective::new(&dataset.labels);
        let splits = &dataset.splits;
        let hits = |rows: &[u32]| objective.hits(&logits, rows);
        Ok([hits(&splits.train)?, hits(&splits.valid)?, hits(&splits.test)?])
    }

    fn params(&self) -> Result<Cow<'_, [f32]>, LearnError> {
        Ok(Cow::Borrowed(Model::params(self)))
    }

    fn set_params(&mut self, params: &[f32]) -> Result<(), LearnError> {
        Ok(Model::set_params(self, params)?)
    }

    fn state(&self, optimizer: &Optim) -> Result<State, LearnError> {
        let (m, v, t) = optimizer.state();
        Ok(State { params: Model::params(self).to_vec(), m: m.to_vec(), v: v.to_vec(), t })
    }

    fn restore(&mut self, optimizer: &mut Optim, state: State) -> Result<(), LearnError> {
        let n = self.num_params();
        if state.params.len() != n || state.m.len() > n || state.v.len() > n {
            return Err(LearnError::State(format!(
                "{} parameters and {}/{} moments for a model of {n} parameters",
                state.params.len(),
                state.m.len(),
                state.v.len()
            )));
        }
        Model::set_params(self, &state.params)?;
        Ok(optimizer.set_state(state.m, state.v, state.t)?)
    }
}

#[cfg(test)]
mod tests {
    use graph_partition::{Csr, EdgeListOptions};

    use super::*;
    use crate::exchange::NoExchange;
    use crate::optim::Adam;

    fn graph() -> AggGraph {
        let csr = Csr::from_edges(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)], EdgeListOptions::default()).unwrap();
        AggGraph::single(&csr).unwrap()
    }

    /// A step through the trait is the step the model's own calls make, bit for bit.
    #[test]
    fn a_step_through_the_trait_is_the_models_own() {
        let (g, x) = (graph(), Array2::from_shape_fn((5, 3), |(i, j)| (i * 3 + j) as f32 / 10.0));
        let labels = Labels::Classes(vec![0, 1, 0, 1, 0]);
        let rows = [0u32, 1, 2];
        let mut direct = Model::new(ModelConfig::gcn(3, 4, 2)).unwrap();
        let mut learner = Model::new(ModelConfig::gcn(3, 4, 2)).unwrap();
        let (mut a, mut b) = (Optim::Adam(Adam::new(0.01, 0.0)), Optim::Adam(Adam::new(0.01, 0.0)));
        let ctx = ForwardCtx::train(1, 1);
        direct.zero_grad();
        direct.forward(&g, &x, &mut NoExchange, ctx).unwrap();
        let mut d = direct.take_logits();
        let sum = Objective::new(&labels).loss_sum(&mut d, &rows).unwrap();
        d /= 3.0;
        direct.backward(&g, d, &mut NoExchange).unwrap();
        Model::step(&mut direct, &mut a).unwrap();

        let mut views = learner.graph(Views::Whole(&g)).unwrap();
        let features = learner.features(&x, 5).unwrap();
        let mut targets = learner.targets(&labels, &rows, 5).unwrap();
        Learner::zero_grad(&mut learner).unwrap();
        Learner::forward(&mut learner, &mut views, &features, &mut NoExchange, ctx).unwrap();
        let (got, grad) = learner.loss(&mut targets, 3.0).unwrap();
        Learner::backward(&mut learner, &mut views, grad, &mut NoExchange).unwrap();
        Learner::step(&mut learner, &mut b).unwrap();
        assert_eq!(got, sum);
        assert_eq!(Model::params(&learner), Model::params(&direct));
        assert_eq!(learner.read_phases().unwrap(), None, "the host times nothing itself");
    }

    /// A part's views: layer 0's apart, the rest repeated; the state round-trips and a state of
    /// another model's size is refused.
    #[test]
    fn part_views_and_state() {
        let g = graph();
        let held = g.clone();
        let model = Model::new(ModelConfig::gcn(3, 4, 2)).unwrap();
        let views = model.graph(Views::Part { first: Some(&held), rest: &g, overlapped: false }).unwrap();
        assert_eq!(views.len(), 2);
        let mut optimizer = Optim::Adam(Adam::new(0.01, 0.0));
        let state = model.state(&optimizer).unwrap();
        let mut other = Model::new(ModelConfig { seed: 9, ..ModelConfig::gcn(3, 4, 2) }).unwrap();
        other.restore(&mut optimizer, state.clone()).unwrap();
        assert_eq!(Model::params(&other), Model::params(&model));
        let mut small = Model::new(ModelConfig::gcn(3, 2, 2)).unwrap();
        let err = small.restore(&mut optimizer, state).unwrap_err();
        assert!(err.to_string().contains("parameters"), "{err}");
    }

    #[test]
    fn phase_times_add_up_by_phase() {
        let mut t = PhaseTimes::default();
        t.add(Phase::Forward, 1.0);
        t.add(Phase::Forward, 0.5);
        t.add(Phase::Eval, 2.0);
        assert_eq!((t.forward_s, t.eval_s, t.loss_s), (1.5, 2.0, 0.0));
        t += t;
        assert_eq!((t.forward_s, t.eval_s), (3.0, 4.0));
    }
}
