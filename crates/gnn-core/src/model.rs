//! A stack of graph convolutions with its parameters in one flat buffer.
//!
//! Order of a hidden layer ([`LayerOrder`]): PyG's example scripts run `conv -> [LayerNorm] ->
//! activation -> dropout` (`dropout-last`, the default); AdaQP's model runs `conv -> dropout ->
//! [LayerNorm] -> activation` (`dropout-first`). Either way the input features pass through a
//! dropout first and the last conv has no activation (it outputs logits). A dropout site is keyed
//! by the index of the conv it feeds, so the input dropout is layer 0.
//!
//! Paths: `forward`/`backward` run every layer on one graph; `forward_layers`/`backward_layers` take
//! one view per layer (the distributed worker's path: layer 0 on a held-halo view under the halo
//! feature cache, each layer on its own sampled in-edges under sampled-edge training);
//! `forward_blocks`/`backward_blocks` take one block per layer, gathering input rows by global id
//! (`forward_blocks_rows` from given rows, `forward_blocks_gathered` from rows the caller
//! assembled). `forward` starts each pass on the exchange (`Exchange::begin`).
//! `first_nonfinite_output` finds where a NaN entered, and `buffer_bytes` counts the per-vertex
//! buffers by kind, which the trainer's memory estimate is tested against.
//!
//! What backward needs is all the model keeps. Hidden activations, LayerNorm inputs and backward
//! gradients take turns in one buffer pool, which hands out the buffer closest in size. Dropout
//! keeps no mask: after ReLU, backward reads it off the saved output; otherwise it re-draws the
//! keyed mask. Conv 0's input copy is returned after its forward when the conv does not read it
//! in backward. GCN and GraphSAGE zero a block's pulled halo rows once aggregated, as pushes zero
//! pushed ones, releasing their pages (`crate::pages`), so a worker holds halo rows only while an
//! exchange's are in flight.

use graph_partition::sample::{PlanError, SampleError};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::activation::Activation;
use crate::block::BlockGraphs;
use crate::dense::{Growth, array_bytes, ensure_shape, head, head_mut, par_rows_mut, slice};
use crate::dropout::DropoutSite;
use crate::exchange::{Exchange, ExchangeError};
use crate::graph::{AggGraph, GraphError};
use crate::layers::{AggConv, Conv, ForwardCtx, GatConv};
use crate::norm::LayerNorm;
use crate::optim::{OptimError, Optimizer};
use crate::params::{ParamInfo, ParamLayout};

/// Which convolution every layer of a model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConvKind {
    /// Graph convolution (Kipf & Welling), symmetric normalisation with self-loops.
    Gcn,
    /// GraphSAGE with mean aggregation.
    Sage,
    /// Graph attention (Velickovic et al.), multi-head.
    Gat,
}

impl ConvKind {
    /// Every kind, in declaration order.
    pub const ALL: [ConvKind; 3] = [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat];

    /// The name on the command line, in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ConvKind::Gcn => "gcn",
            ConvKind::Sage => "sage",
            ConvKind::Gat => "gat",
        }
    }
}

impl std::fmt::Display for ConvKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A model name that is none of `gcn`, `sage`, `gat`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown model `{0}`; expected gcn, sage or gat")]
pub struct UnknownConv(pub String);

impl std::str::FromStr for ConvKind {
    type Err = UnknownConv;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| UnknownConv(s.to_string()))
    }
}

/// Where a hidden layer's dropout sits relative to its LayerNorm and activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerOrder {
    /// `conv -> [LayerNorm] -> activation -> dropout` (PyG's example scripts).
    #[default]
    DropoutLast,
    /// `conv -> dropout -> [LayerNorm] -> activation` (AdaQP's model).
    DropoutFirst,
}

impl LayerOrder {
    /// Every order, in declaration order.
    pub const ALL: [LayerOrder; 2] = [LayerOrder::DropoutLast, LayerOrder::DropoutFirst];

    /// The name on the command line, in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            LayerOrder::DropoutLast => "dropout-last",
            LayerOrder::DropoutFirst => "dropout-first",
        }
    }
}

/// A layer order name that is neither `dropout-last` nor `dropout-first`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown layer order `{0}`; expected dropout-last or dropout-first")]
pub struct UnknownLayerOrder(pub String);

impl std::str::FromStr for LayerOrder {
    type Err = UnknownLayerOrder;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|o| o.as_str() == s).ok_or_else(|| UnknownLayerOrder(s.to_string()))
    }
}

/// Architecture and initialisation of a [`Model`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub kind: ConvKind,
    pub in_dim: usize,
    /// Hidden width (GAT: per head).
    pub hidden: usize,
    /// Number of classes.
    pub out_dim: usize,
    /// Number of conv layers (>= 1).
    pub layers: usize,
    /// GAT: heads of the hidden layers (concatenated). Ignored by GCN and GraphSAGE.
    pub heads: usize,
    /// GAT: heads of the output layer (averaged). Ignored by GCN and GraphSAGE.
    pub out_heads: usize,
    /// Dropout on the input of every conv after the first.
    pub dropout: f32,
    /// Dropout on the input features.
    pub input_dropout: f32,
    /// GAT: dropout on attention coefficients.
    pub attn_dropout: f32,
    /// LayerNorm after every hidden conv.
    pub layer_norm: bool,
    /// Activation after every hidden conv (and LayerNorm).
    pub activation: Activation,
    /// Where each hidden layer's dropout sits.
    #[serde(default)]
    pub layer_order: LayerOrder,
    /// Seed of the parameter initialisation (identical on all workers).
    pub seed: u64,
}

impl ModelConfig {
    /// PyG's Cora GCN: 2 layers, dropout 0.5 on the input and hidden features, ReLU.
    pub fn gcn(in_dim: usize, hidden: usize, out_dim: usize) -> Self {
        Self {
            kind: ConvKind::Gcn,
            in_dim,
            hidden,
            out_dim,
            layers: 2,
            heads: 1,
            out_heads: 1,
            dropout: 0.5,
            input_dropout: 0.5,
            attn_dropout: 0.0,
            layer_norm: false,
            activation: Activation::Relu,
            layer_order: LayerOrder::DropoutLast,
            seed: 0,
        }
    }

    /// GraphSAGE-mean with the same defaults as [`ModelConfig::gcn`].
    pub fn sage(in_dim: usize, hidden: usize, out_dim: usize) -> Self {
        Self { kind: ConvKind::Sage, ..Self::gcn(in_dim, hidden, out_dim) }
    }

    /// PyG's Cora GAT: 8 heads of `hidden` concatenated, 1 output head, dropout 0.6 on
    /// features and attention, ELU.
    pub fn gat(in_dim: usize, hidden: usize, out_dim: usize) -> Self {
        Self {
            kind: ConvKind::Gat,
            heads: 8,
            out_heads: 1,
            dropout: 0.6,
            input_dropout: 0.6,
            attn_dropout: 0.6,
            activation: Activation::Elu { alpha: 1.0 },
            ..Self::gcn(in_dim, hidden, out_dim)
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |field: &'static str, reason: &str| Err(ModelError::Config { field, reason: reason.to_string() });
        if self.layers == 0 {
            return bad("layers", "must be at least 1");
        }
        if self.in_dim == 0 || self.out_dim == 0 {
            return bad(if self.in_dim == 0 { "in_dim" } else { "out_dim" }, "must be at least 1");
        }
        if self.layers > 1 && self.hidden == 0 {
            return bad("hidden", "must be at least 1");
        }
        if self.kind == ConvKind::Gat && (self.heads == 0 || self.out_heads == 0) {
            return bad(if self.heads == 0 { "heads" } else { "out_heads" }, "must be at least 1");
        }
        for (field, p) in
            [("dropout", self.dropout), ("input_dropout", self.input_dropout), ("attn_dropout", self.attn_dropout)]
        {
            if !(0.0..1.0).contains(&p) {
                return bad(field, &format!("is {p}, must be in [0, 1)"));
            }
        }
        match self.activation {
            Activation::Elu { alpha } if !(alpha.is_finite() && alpha > 0.0) => {
                bad("activation", "ELU alpha must be > 0")
            }
            Activation::LeakyRelu { slope } if !(slope.is_finite() && slope > 0.0) => {
                bad("activation", "LeakyReLU slope must be > 0")
            }
            _ => Ok(()),
        }
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model config: {field} {reason}")]
    Config { field: &'static str, reason: String },
    #[error("{what} is {rows} x {cols}, expected {expected_rows} x {expected_cols}")]
    Shape { what: &'static str, rows: usize, cols: usize, expected_rows: usize, expected_cols: usize },
    #[error("backward needs a successful forward pass on the same graph first")]
    NoForward,
    #[error("{got} graphs or mini-batch blocks given for a model of {expected} layers (one per layer)")]
    Blocks { got: usize, expected: usize },
    #[error("input row of vertex {gid} requested from a feature matrix of {rows} rows")]
    UnknownVertex { gid: u32, rows: usize },
    #[error("mini-batch graph: {0}")]
    Graph(#[from] GraphError),
    #[error("sampling blocks: {0}")]
    Sample(#[from] SampleError),
    #[error("batches of vertices: {0}")]
    Plan(#[from] PlanError),
    #[error("parameter vector has {got} values, the model has {expected}")]
    ParamLength { got: usize, expected: usize },
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
}

/// What the last successful forward pass was, for its backward.
#[derive(Debug, Clone, Copy)]
struct LastForward {
    ctx: ForwardCtx,
    /// [`Graphs::shape`] of its graphs.
    shape: (usize, usize, usize),
}

/// The graph each layer runs on.
#[derive(Debug, Clone, Copy)]
enum Graphs<'a> {
    /// Full-graph training: every layer on the same graph.
    Same(&'a AggGraph),
    /// One graph per layer, input layer first: a mini-batch's blocks, or views of one graph
    /// with per-layer in-edges ([`Model::forward_layers`]).
    PerLayer(&'a [AggGraph]),
}

impl<'a> Graphs<'a> {
    fn layer(&self, l: usize) -> &'a AggGraph {
        match self {
            Graphs::Same(graph) => graph,
            Graphs::PerLayer(graphs) => &graphs[l],
        }
    }

    /// Enough to tell a backward that it is given other graphs than its forward: the first
    /// and last graphs' sizes and the number of distinct graphs.
    fn shape(&self) -> (usize, usize, usize) {
        match self {
            Graphs::Same(graph) => (graph.num_local(), graph.num_local(), 1),
            Graphs::PerLayer(graphs) => {
                let size = |g: Option<&AggGraph>| g.map_or(0, AggGraph::num_local);
                (size(graphs.first()), size(graphs.last()), graphs.len())
            }
        }
    }
}

/// `out <- features[ids]` (one row per id), row-parallel.
pub(crate) fn gather_rows(
    features: &Array2<f32>,
    ids: &[u32],
    width: usize,
    out: &mut Array2<f32>,
) -> Result<(), ModelError> {
    let (rows, cols) = features.dim();
    if cols != width {
        return Err(ModelError::Shape {
            what: "input features",
            rows,
            cols,
            expected_rows: rows,
            expected_cols: width,
        });
    }
    if let Some(&gid) = ids.iter().find(|&&g| g as usize >= rows) {
        return Err(ModelError::UnknownVertex { gid, rows });
    }
    ensure_shape(out, ids.len(), width, Growth::Written);
    let features = features.as_standard_layout();
    let src = slice(&features);
    par_rows_mut(out, |i, row| row.copy_from_slice(&src[ids[i] as usize * width..][..width]));
    Ok(())
}

/// Per-vertex buffers that live only part of a step (hidden activations, LayerNorm inputs,
/// backward gradients), handed from one use to the next so that a step holds only as many as
/// are alive at once and steady-state training does not allocate large arrays.
#[derive(Debug, Default)]
struct BufferPool(Vec<Array2<f32>>);

impl BufferPool {
    /// A buffer of the given shape (content unspecified): one of that shape if the pool has
    /// one, else the smallest that holds as many values, else the largest (reshaped), else a
    /// new one.
    ///
    /// Mini-batch blocks change every shape at every step, so an exact fit is rare there; the
    /// closest size keeps each use on a buffer about its own size from step to step, which then
    /// grows or shrinks by a little, instead of on whichever came back last (a layer's inputs
    /// can be ten times its outputs), which takes fresh pages to grow.
    fn take(&mut self, rows: usize, cols: usize, growth: Growth) -> Array2<f32> {
        let len = rows * cols;
        let exact = self.0.iter().position(|b| b.dim() == (rows, cols));
        let fits = || (0..self.0.len()).filter(|&i| self.0[i].len() >= len).min_by_key(|&i| self.0[i].len());
        let largest = || (0..self.0.len()).max_by_key(|&i| self.0[i].len());
        let mut buf = match exact.or_else(fits).or_else(largest) {
            Some(i) => self.0.swap_remove(i),
            None => Array2::zeros((0, 0)),
        };
        ensure_shape(&mut buf, rows, cols, growth);
        buf
    }

    fn give(&mut self, buf: Array2<f32>) {
        if !buf.is_empty() {
            self.0.push(buf);
        }
    }

    /// Returns `buf`'s storage to the pool and gives it a pooled `rows x cols` buffer instead.
    fn swap(&mut self, buf: &mut Array2<f32>, rows: usize, cols: usize, growth: Growth) {
        self.give(std::mem::take(buf));
        *buf = self.take(rows, cols, growth);
    }

    fn bytes(&self) -> usize {
        self.0.iter().map(array_bytes).sum()
    }
}

/// A GNN: convolutions, optional LayerNorms, activations and dropout, with every parameter in
/// one flat buffer (`params()`), gradients in another of the same layout (`grads()`), and per
/// tensor names and offsets in `param_info()`.
#[derive(Debug)]
pub struct Model {
    cfg: ModelConfig,
    layout: ParamLayout,
    params: Vec<f32>,
    grads: Vec<f32>,
    convs: Vec<Box<dyn Conv>>,
    norms: Vec<LayerNorm>,
    /// `acts[l]` is the input of conv `l` (after dropout); `acts[layers]` the logits. Between a
    /// forward and its backward each holds what backward reads; outside that, hidden layers'
    /// (and the input, when conv 0's backward does not read it) are in `pool`, empty here.
    /// Dropout keeps no mask: its keyed draws are made again in backward.
    acts: Vec<Array2<f32>>,
    pool: BufferPool,
    last: Option<LastForward>,
}

impl Model {
    /// Builds the layers and initialises the parameters from `cfg.seed` (Glorot etc. as PyG).
    pub fn new(cfg: ModelConfig) -> Result<Self, ModelError> {
        cfg.validate()?;
        let mut layout = ParamLayout::new();
        let mut convs: Vec<Box<dyn Conv>> = Vec::with_capacity(cfg.layers);
        let mut norms = Vec::new();
        let mut width = cfg.in_dim;
        for l in 0..cfg.layers {
            let last = l + 1 == cfg.layers;
            let name = format!("conv{l}");
            let conv: Box<dyn Conv> = match (cfg.kind, last) {
                (ConvKind::Gcn, _) => {
                    Box::new(AggConv::gcn(&mut layout, &name, width, if last { cfg.out_dim } else { cfg.hidden }))
                }
                (ConvKind::Sage, _) => {
                    Box::new(AggConv::sage(&mut layout, &name, width, if last { cfg.out_dim } else { cfg.hidden }))
                }
                (ConvKind::Gat, false) => {
                    Box::new(GatConv::new(&mut layout, &name, width, cfg.heads, cfg.hidden, true, cfg.attn_dropout))
                }
                (ConvKind::Gat, true) => Box::new(GatConv::new(
                    &mut layout,
                    &name,
                    width,
                    cfg.out_heads,
                    cfg.out_dim,
                    false,
                    cfg.attn_dropout,
                )),
            };
            width = conv.out_dim();
            if !last && cfg.layer_norm {
                norms.push(LayerNorm::new(&mut layout, &format!("norm{l}"), width));
            }
            convs.push(conv);
        }
        let params = layout.init_values(cfg.seed);
        let grads = vec![0.0; params.len()];
        let layers = cfg.layers;
        Ok(Self {
            cfg,
            layout,
            params,
            grads,
            convs,
            norms,
            acts: (0..=layers).map(|_| Array2::zeros((0, 0))).collect(),
            pool: BufferPool::default(),
            last: None,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The layers, in order (for inspection: widths and exchange points).
    pub fn convs(&self) -> impl Iterator<Item = &dyn Conv> {
        self.convs.iter().map(|c| c.as_ref())
    }

    /// Logits of every local vertex (`num_local x out_dim`; only rows `< num_primary` are
    /// meaningful). `x` holds the input features of local vertices `0..k`, one row each, for
    /// some `k` from `graph.local_input_rows()` to `num_local`: rows past those are not read
    /// (their values are pulled from the owners). Every worker must call this with the same
    /// `ctx` (the exchange calls are collectives).
    pub fn forward(
        &mut self,
        graph: &AggGraph,
        x: &Array2<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        self.forward_on(Graphs::Same(graph), x, exchange, ctx)
    }

    /// [`Model::forward`] with one view of the local graph per layer, input layer first: e.g. a
    /// first layer that holds its halo inputs ([`AggGraph::with_held_halo`], the halo feature
    /// cache) before layers that pull theirs. `x` as for [`Model::forward`] on the first view.
    pub fn forward_layers(
        &mut self,
        graphs: &[AggGraph],
        x: &Array2<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        self.check_layers(graphs)?;
        self.forward_on(Graphs::PerLayer(graphs), x, exchange, ctx)
    }

    fn forward_on(
        &mut self,
        graphs: Graphs<'_>,
        x: &Array2<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        if self.cfg.kind == ConvKind::Gat && (0..self.cfg.layers).any(|l| graphs.layer(l).pushes_aggregates()) {
            // Its softmax normalises over a vertex's in-edges, spread over the replicas: every
            // replica computes (a replica sync of scores and sums), not the masters alone.
            let reason =
                "runs on every replica of a vertex-cut, not on a graph whose masters alone compute".to_string();
            return Err(ModelError::Config { field: "kind gat", reason });
        }
        let first = graphs.layer(0);
        let (n, r) = (first.num_local(), first.local_input_rows());
        let (rows, cols) = x.dim();
        if cols != self.cfg.in_dim || !(r..=n).contains(&rows) {
            return Err(ModelError::Shape {
                what: "input features",
                rows,
                cols,
                expected_rows: rows.clamp(r, n),
                expected_cols: self.cfg.in_dim,
            });
        }
        self.pool.swap(&mut self.acts[0], n, self.cfg.in_dim, first.growth());
        head_mut(&mut self.acts[0], r).assign(&head(x, r));
        self.run_forward(graphs, exchange, ctx)
    }

    /// Logits of a mini-batch (`blocks.layers()` has one graph per layer, input layer first):
    /// one row per local vertex of the last graph, the first `blocks.output_ids().len()` rows
    /// being the outputs, in that order. `features` holds the input features of every vertex of
    /// the whole graph, by global id; the rows of `blocks.input_ids()` are read.
    pub fn forward_blocks(
        &mut self,
        blocks: &BlockGraphs,
        features: &Array2<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        self.forward_blocks_rows(blocks, features, blocks.input_ids(), exchange, ctx)
    }

    /// As [`Model::forward_blocks`] where `features` is not indexed by global id: `rows` are
    /// the rows of `features` holding the inputs of `blocks.input_ids()`, one per input (a
    /// worker's features of a subgraph, read by subgraph id).
    pub fn forward_blocks_rows(
        &mut self,
        blocks: &BlockGraphs,
        features: &Array2<f32>,
        rows: &[u32],
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        self.check_blocks(blocks)?;
        if rows.len() != blocks.input_ids().len() {
            return Err(ModelError::Shape {
                what: "input rows",
                rows: rows.len(),
                cols: 1,
                expected_rows: blocks.input_ids().len(),
                expected_cols: 1,
            });
        }
        let growth = blocks.layers()[0].growth();
        self.pool.swap(&mut self.acts[0], rows.len(), self.cfg.in_dim, growth);
        gather_rows(features, rows, self.cfg.in_dim, &mut self.acts[0])?;
        self.run_forward(Graphs::PerLayer(blocks.layers()), exchange, ctx)
    }

    /// [`Self::forward_blocks`] on input rows the caller assembled: `inputs` holds one row per
    /// `blocks.input_ids()`, in that order (for methods whose workers hold no whole feature
    /// matrix, e.g. feature columns spread over workers).
    pub fn forward_blocks_gathered(
        &mut self,
        blocks: &BlockGraphs,
        inputs: &Array2<f32>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        self.check_blocks(blocks)?;
        let (rows, cols) = inputs.dim();
        let expected_rows = blocks.input_ids().len();
        if (rows, cols) != (expected_rows, self.cfg.in_dim) {
            return Err(ModelError::Shape {
                what: "gathered input rows",
                rows,
                cols,
                expected_rows,
                expected_cols: self.cfg.in_dim,
            });
        }
        let growth = blocks.layers()[0].growth();
        self.pool.swap(&mut self.acts[0], rows, cols, growth);
        self.acts[0].assign(inputs);
        self.run_forward(Graphs::PerLayer(blocks.layers()), exchange, ctx)
    }

    fn check_blocks(&self, blocks: &BlockGraphs) -> Result<(), ModelError> {
        self.check_layers(blocks.layers())
    }

    fn check_layers(&self, graphs: &[AggGraph]) -> Result<(), ModelError> {
        match graphs.len() {
            n if n == self.cfg.layers => Ok(()),
            got => Err(ModelError::Blocks { got, expected: self.cfg.layers }),
        }
    }

    /// The forward pass from `acts[0]`, whose rows before the first graph's
    /// `local_input_rows()` hold the input.
    fn run_forward(
        &mut self,
        graphs: Graphs<'_>,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<&Array2<f32>, ModelError> {
        self.last = None;
        exchange.begin(ctx.pass());
        let first = graphs.layer(0);
        if let Some(site) = self.dropout_site(self.cfg.input_dropout, 0, ctx) {
            let r = first.local_input_rows();
            site.apply_rows(&mut head_mut(&mut self.acts[0], r), first.global_ids());
        }
        for l in 0..self.cfg.layers {
            self.layer_forward(l, graphs.layer(l), exchange, ctx)?;
            if l == 0 && !self.convs[0].backward_reads_input() {
                self.pool.give(std::mem::take(&mut self.acts[0]));
            }
        }
        self.last = Some(LastForward { ctx, shape: graphs.shape() });
        Ok(&self.acts[self.cfg.layers])
    }

    /// The logits of the last forward pass (empty before one, and while the loss holds them).
    pub fn logits(&self) -> &Array2<f32> {
        &self.acts[self.cfg.layers]
    }

    /// Hands over the logits of the last forward pass, for the objective to turn into their
    /// gradient in place ([`crate::softmax_cross_entropy_in_place`]) and hand to backward, which
    /// never reads the logits: one buffer instead of two. Backward hands the buffer back, and
    /// the next forward writes its logits there.
    pub fn take_logits(&mut self) -> Array2<f32> {
        std::mem::take(&mut self.acts[self.cfg.layers])
    }

    /// The per-vertex arrays kept between passes: activations, logits and the buffer pool.
    #[cfg(test)]
    pub(crate) fn kept_arrays(&self) -> impl Iterator<Item = &Array2<f32>> {
        self.acts.iter().chain(&self.pool.0)
    }

    /// Drops the record of the last forward pass (its activations are about to be reused).
    pub(crate) fn forget_forward(&mut self) {
        self.last = None;
    }

    /// The input buffer of conv `l`, for callers that run one layer at a time.
    pub(crate) fn layer_input_mut(&mut self, l: usize) -> &mut Array2<f32> {
        &mut self.acts[l]
    }

    /// The output of layer `l` (after its activation) from the last [`Model::layer_forward`].
    pub(crate) fn layer_output(&self, l: usize) -> &Array2<f32> {
        &self.acts[l + 1]
    }

    /// The active dropout site feeding conv `layer`, if any.
    fn dropout_site(&self, p: f32, layer: usize, ctx: ForwardCtx) -> Option<DropoutSite> {
        Some(DropoutSite::new(p, ctx.seed, ctx.round(), layer)).filter(|s| ctx.training && s.is_active())
    }

    /// `acts[l + 1] <- conv_l(acts[l])` on `graph`, then (hidden layers) LayerNorm, activation
    /// and dropout over the computed rows, in the configured [`LayerOrder`]. Per-row work covers
    /// the computed rows; halo rows are pulled by the layers that read them.
    pub(crate) fn layer_forward(
        &mut self,
        l: usize,
        graph: &AggGraph,
        exchange: &mut dyn Exchange,
        ctx: ForwardCtx,
    ) -> Result<(), ModelError> {
        let (n, m) = (graph.num_local(), graph.computed_rows());
        let hidden = l + 1 < self.cfg.layers;
        let site = if hidden { self.dropout_site(self.cfg.dropout, l + 1, ctx) } else { None };
        let dropout_first = self.cfg.layer_order == LayerOrder::DropoutFirst;
        let (before, after) = self.acts.split_at_mut(l + 1);
        let (x, out) = (&mut before[l], &mut after[0]);
        let conv = &mut self.convs[l];
        if hidden {
            self.pool.swap(out, n, conv.out_dim(), graph.growth());
        }
        if hidden && self.cfg.layer_norm {
            // LayerNorm's backward reads its own cache, not its input: the input is scratch.
            let mut pre = self.pool.take(n, conv.out_dim(), graph.growth());
            conv.forward(&self.params, graph, x, &mut pre, exchange, l, ctx)?;
            if let Some(site) = site.filter(|_| dropout_first) {
                site.apply_rows(&mut head_mut(&mut pre, m), graph.global_ids());
            }
            self.norms[l].forward(&self.params, &head(&pre, m), &mut head_mut(out, m));
            self.pool.give(pre);
        } else {
            conv.forward(&self.params, graph, x, out, exchange, l, ctx)?;
            if let Some(site) = site.filter(|_| dropout_first) {
                site.apply_rows(&mut head_mut(out, m), graph.global_ids());
            }
        }
        if hidden {
            let mut own = head_mut(out, m);
            let act = self.cfg.activation;
            match site.filter(|_| !dropout_first) {
                // ReLU's variant fixed at compile time: the element loop inlines it instead of
                // matching the variant at every element.
                Some(site) if act == Activation::Relu => {
                    site.apply_rows_after(&mut own, graph.global_ids(), |v| Activation::Relu.apply(v))
                }
                Some(site) => site.apply_rows_after(&mut own, graph.global_ids(), |v| act.apply(v)),
                None => act.forward_in_place(&mut own),
            }
        }
        Ok(())
    }

    /// Back-propagates `dlogits` (the gradient of the loss w.r.t. the logits of the last
    /// [`Model::forward`], same graph) and *adds* the parameter gradients into `grads()`.
    /// Rows `>= graph.num_primary()` of `dlogits` are ignored: only owned vertices carry loss.
    /// Each forward allows one backward.
    pub fn backward(
        &mut self,
        graph: &AggGraph,
        dlogits: Array2<f32>,
        exchange: &mut dyn Exchange,
    ) -> Result<(), ModelError> {
        self.run_backward(Graphs::Same(graph), dlogits, exchange)
    }

    /// Back-propagates the gradient of the logits of the last [`Model::forward_layers`] (same
    /// views) as [`Model::backward`] does.
    pub fn backward_layers(
        &mut self,
        graphs: &[AggGraph],
        dlogits: Array2<f32>,
        exchange: &mut dyn Exchange,
    ) -> Result<(), ModelError> {
        self.check_layers(graphs)?;
        self.run_backward(Graphs::PerLayer(graphs), dlogits, exchange)
    }

    /// Back-propagates the gradient of the logits of the last [`Model::forward_blocks`] (same
    /// blocks; shaped like those logits, rows past the outputs ignored) and adds the parameter
    /// gradients into `grads()`.
    pub fn backward_blocks(
        &mut self,
        blocks: &BlockGraphs,
        dlogits: Array2<f32>,
        exchange: &mut dyn Exchange,
    ) -> Result<(), ModelError> {
        self.check_blocks(blocks)?;
        self.run_backward(Graphs::PerLayer(blocks.layers()), dlogits, exchange)
    }

    fn run_backward(
        &mut self,
        graphs: Graphs<'_>,
        dlogits: Array2<f32>,
        exchange: &mut dyn Exchange,
    ) -> Result<(), ModelError> {
        // The layers reuse their forward caches as backward scratch: one backward per forward.
        let last = match self.last.take() {
            Some(last) if last.shape == graphs.shape() => last,
            _ => return Err(ModelError::NoForward),
        };
        let layers = self.cfg.layers;
        let output = graphs.layer(layers - 1);
        if dlogits.dim() != (output.num_local(), self.cfg.out_dim) {
            let (rows, cols) = dlogits.dim();
            return Err(ModelError::Shape {
                what: "logit gradient",
                rows,
                cols,
                expected_rows: output.num_local(),
                expected_cols: self.cfg.out_dim,
            });
        }
        let mut d = dlogits;
        output.zero_rows_from(&mut d, output.num_primary());
        let ctx = last.ctx;
        for l in (0..layers).rev() {
            let graph = graphs.layer(l);
            let m = graph.computed_rows();
            let hidden = l + 1 < layers;
            if hidden {
                // `d` is the gradient of acts[l + 1]: back through the hidden layer's steps in
                // reverse order.
                // The dropout's adjoint is the dropout itself (same keyed draws, same scale).
                let site = self.dropout_site(self.cfg.dropout, l + 1, ctx);
                let dropout_first = self.cfg.layer_order == LayerOrder::DropoutFirst;
                // Dropout-last saves the dropped output, which `backward_in_place` unscales; after
                // ReLU that output is the mask too (zero where dropped), so none is drawn.
                let act = self.cfg.activation;
                let (out_scale, grad_scale) = match site.filter(|_| !dropout_first) {
                    Some(site) if act.zero_output_has_zero_derivative() => (site.scale(), site.scale()),
                    Some(site) => {
                        site.apply_rows(&mut head_mut(&mut d, m), graph.global_ids());
                        (site.scale(), 1.0)
                    }
                    None => (1.0, 1.0),
                };
                act.backward_in_place(&mut head_mut(&mut d, m), &head(&self.acts[l + 1], m), out_scale, grad_scale);
                if self.cfg.layer_norm {
                    let mut dn = self.pool.take(d.nrows(), d.ncols(), graph.growth());
                    self.norms[l].backward(&self.params, &mut self.grads, &head(&d, m), &mut head_mut(&mut dn, m));
                    self.pool.give(std::mem::replace(&mut d, dn));
                }
                if let Some(site) = site.filter(|_| dropout_first) {
                    site.apply_rows(&mut head_mut(&mut d, m), graph.global_ids());
                }
                // Conv l + 1's backward (done) and this layer's steps were its last readers.
                self.pool.give(std::mem::take(&mut self.acts[l + 1]));
            }
            // As tall as conv l's input, which may be taller than its graph (a block's sources
            // are a prefix of the rows the previous layer computed).
            let growth = graph.growth();
            let mut dx = (l > 0).then(|| self.pool.take(self.acts[l].nrows(), self.convs[l].in_dim(), growth));
            self.convs[l].backward(
                &self.params,
                &mut self.grads,
                graph,
                &self.acts[l],
                &mut d,
                dx.as_mut(),
                exchange,
                l,
            )?;
            let used = match dx {
                Some(dx) => std::mem::replace(&mut d, dx),
                None => std::mem::take(&mut d),
            };
            if hidden {
                self.pool.give(used);
            } else {
                // The logit gradient (the logits, under `take_logits`): the next forward's
                // logits go here, so a step allocates no logit-sized buffer.
                self.acts[layers] = used;
            }
        }
        Ok(())
    }

    /// All parameters, flat (layout in [`Model::param_info`]).
    pub fn params(&self) -> &[f32] {
        &self.params
    }

    pub fn params_mut(&mut self) -> &mut [f32] {
        &mut self.params
    }

    /// All gradients, flat, same layout as the parameters: all-reduce this one buffer.
    pub fn grads(&self) -> &[f32] {
        &self.grads
    }

    pub fn grads_mut(&mut self) -> &mut [f32] {
        &mut self.grads
    }

    /// Both buffers at once (e.g. all-reduce the gradients, then step an optimizer).
    pub fn params_and_grads_mut(&mut self) -> (&mut [f32], &mut [f32]) {
        (&mut self.params, &mut self.grads)
    }

    /// Zeroes the gradients (backward accumulates).
    pub fn zero_grad(&mut self) {
        self.grads.fill(0.0);
    }

    /// Applies one optimizer step to the parameters from the current gradients.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) -> Result<(), OptimError> {
        optimizer.step(&mut self.params, &self.grads)
    }

    /// Replaces all parameters (e.g. from a checkpoint).
    pub fn set_params(&mut self, values: &[f32]) -> Result<(), ModelError> {
        if values.len() != self.params.len() {
            return Err(ModelError::ParamLength { got: values.len(), expected: self.params.len() });
        }
        self.params.copy_from_slice(values);
        Ok(())
    }

    /// The first conv layer whose output (over the computed rows of `graph`, the graph of the
    /// last forward) holds a non-finite value: where a NaN or an overflow entered the forward
    /// pass. `None` when every output is finite.
    pub fn first_nonfinite_output(&self, graph: &AggGraph) -> Option<usize> {
        let m = graph.computed_rows();
        (0..self.cfg.layers).find(|&l| {
            let out = &self.acts[l + 1];
            out.nrows() >= m && !head(out, m).iter().all(|v| v.is_finite())
        })
    }

    /// Name, offset, shape and initialiser of every parameter tensor, in buffer order.
    pub fn param_info(&self) -> &[ParamInfo] {
        self.layout.infos()
    }

    pub fn num_params(&self) -> usize {
        self.params.len()
    }

    /// Bytes of the per-vertex buffers the model keeps between passes, by kind: the layer
    /// inputs and logits it holds, the layers' caches and the pool of buffers that hidden
    /// activations, LayerNorm inputs and backward gradients take turns in. A memory estimate
    /// is checked against these.
    pub fn buffer_bytes(&self) -> BufferBytes {
        BufferBytes {
            activations: self.acts.iter().map(array_bytes).sum(),
            conv_caches: self.convs.iter().map(|c| c.buffer_bytes()).sum(),
            pool: self.pool.bytes(),
        }
    }
}

/// [`Model::buffer_bytes`]: bytes of each kind of per-vertex buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufferBytes {
    pub activations: usize,
    pub conv_caches: usize,
    pub pool: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::NoExchange;
    use crate::layers::ExchangePoint;
    use crate::loss::softmax_cross_entropy;
    use crate::testkit::{check_gradient, random_array, random_graph};
    use graph_partition::{Csr, EdgeListOptions};
    use ndarray::s;

    /// The pool hands out a buffer of the asked shape, else the smallest that holds as many
    /// values, else the largest: each use stays on a buffer about its own size.
    #[test]
    fn the_pool_hands_out_the_closest_buffer() {
        let mut pool = BufferPool::default();
        for rows in [10, 400, 90] {
            pool.give(Array2::zeros((rows, 8)));
        }
        let ptr_of = |pool: &BufferPool, rows: usize| pool.0.iter().find(|b| b.nrows() == rows).unwrap().as_ptr();
        let p90 = ptr_of(&pool, 90);
        let b = pool.take(20, 30, Growth::Written);
        assert_eq!((b.dim(), b.as_ptr()), ((20, 30), p90), "600 values: the 720 of 90 x 8 hold them");
        let c = pool.take(500, 8, Growth::Written);
        assert_eq!(c.dim(), (500, 8));
        assert_eq!(pool.0.len(), 1, "the largest (400 x 8) was grown");
        assert_eq!(pool.0[0].dim(), (10, 8));
        pool.give(b);
        let exact = pool.take(10, 8, Growth::Written);
        assert_eq!(exact.dim(), (10, 8));
        assert_eq!(pool.0[0].as_ptr(), p90);
    }

    fn small_config(kind: ConvKind, activation: Activation) -> ModelConfig {
        ModelConfig {
            kind,
            in_dim: 4,
            hidden: 3,
            out_dim: 3,
            layers: 3,
            heads: 2,
            out_heads: 2,
            dropout: 0.3,
            input_dropout: 0.2,
            attn_dropout: 0.25,
            layer_norm: true,
            activation,
            layer_order: LayerOrder::DropoutLast,
            seed: 7,
        }
    }

    /// End-to-end finite differences through dropout, LayerNorm, activations and every conv.
    #[test]
    fn model_backward_matches_finite_differences() {
        let graph = random_graph(14, 45, 2);
        let x = random_array(14, 4, 1.0, 3);
        let labels: Vec<u32> = (0..14).map(|i| i % 3).collect();
        let rows: Vec<u32> = (0..12).collect();
        let ctx = ForwardCtx::train(11, 4);
        // GCN twice: hidden narrower than the input (conv 0 transforms first, its backward
        // reads its input) and wider (conv 0 aggregates its input, which is not kept).
        let cases = [
            (ConvKind::Gcn, Activation::Relu, 3),
            (ConvKind::Gcn, Activation::Relu, 5),
            (ConvKind::Sage, Activation::LeakyRelu { slope: 0.1 }, 3),
            (ConvKind::Gat, Activation::Elu { alpha: 1.0 }, 3),
        ];
        let orders =
            [(LayerOrder::DropoutLast, true), (LayerOrder::DropoutFirst, true), (LayerOrder::DropoutFirst, false)];
        for ((kind, act, hidden), (layer_order, layer_norm)) in cases.into_iter().flat_map(|c| orders.map(|o| (c, o))) {
            // Without LayerNorm, a kink (ReLU's, LeakyReLU's) sits within the step of some
            // pre-activation of this small model; ELU is smooth there.
            let act = if layer_norm { act } else { Activation::Elu { alpha: 1.0 } };
            let config = ModelConfig { layer_order, layer_norm, hidden, ..small_config(kind, act) };
            assert_eq!(
                Model::new(config.clone()).unwrap().convs[0].backward_reads_input(),
                hidden < 4 || kind != ConvKind::Gcn
            );
            let mut model = Model::new(config).unwrap();
            let logits = model.forward(&graph, &x, &mut NoExchange, ctx).unwrap();
            let (_, d) = softmax_cross_entropy(logits, &labels, &rows).unwrap();
            model.zero_grad();
            model.backward(&graph, d, &mut NoExchange).unwrap();
            let grads = model.grads().to_vec();
            let mut params = model.params().to_vec();
            check_gradient(
                // LayerNorm after dropout sees rows with zeroed features, which curve too sharply for a
                // step of 1e-3.
                &format!("{kind:?} model, hidden {hidden}, {}, LayerNorm {layer_norm}", layer_order.as_str()),
                &mut params,
                &grads,
                2e-4,
                1e-2,
                |p| {
                    model.set_params(p).unwrap();
                    let logits = model.forward(&graph, &x, &mut NoExchange, ctx).unwrap();
                    softmax_cross_entropy(logits, &labels, &rows).unwrap().0
                },
            );
        }
    }

    /// Layers on their own sampled in-edges: backward matches finite differences, and with
    /// every edge kept the layer graphs give `forward`'s logits and gradients bit for bit.
    #[test]
    fn per_layer_graphs_backward_matches_finite_differences() {
        use graph_partition::sample::{Fanout, sample_in_edges};
        let graph = random_graph(14, 60, 2);
        let x = random_array(14, 4, 1.0, 3);
        let labels: Vec<u32> = (0..14).map(|i| i % 3).collect();
        let rows: Vec<u32> = (0..12).collect();
        let ctx = ForwardCtx::train(11, 4);
        let layered = |fanout: Fanout| -> Vec<AggGraph> {
            (0..3)
                .map(|l| {
                    let sampled = sample_in_edges(graph.fwd(), 14, graph.global_ids(), fanout, 5, 4, l).unwrap();
                    graph.with_sampled_in_edges(sampled).unwrap()
                })
                .collect()
        };
        let sampled = layered(Fanout::Take(std::num::NonZeroU32::new(2).unwrap()));
        assert!(sampled.iter().all(|g| g.fwd().num_edges() < graph.fwd().num_edges()));
        assert_ne!(sampled[0].fwd(), sampled[1].fwd(), "layers draw their own edges");
        for kind in ConvKind::ALL {
            let act = Activation::Elu { alpha: 1.0 };
            let mut model = Model::new(small_config(kind, act)).unwrap();
            let step = |model: &mut Model, graphs: Option<&[AggGraph]>| {
                model.zero_grad();
                let logits = match graphs {
                    Some(g) => model.forward_layers(g, &x, &mut NoExchange, ctx).unwrap(),
                    None => model.forward(&graph, &x, &mut NoExchange, ctx).unwrap(),
                };
                let (loss, d) = softmax_cross_entropy(logits, &labels, &rows).unwrap();
                match graphs {
                    Some(g) => model.backward_layers(g, d, &mut NoExchange).unwrap(),
                    None => model.backward(&graph, d, &mut NoExchange).unwrap(),
                }
                (loss, model.grads().to_vec())
            };
            let whole = layered(Fanout::All);
            assert_eq!(step(&mut model, Some(&whole)), step(&mut model, None), "{kind:?}: every edge kept");
            let (_, grads) = step(&mut model, Some(&sampled));
            let mut params = model.params().to_vec();
            check_gradient(&format!("{kind:?} on sampled layer graphs"), &mut params, &grads, 2e-4, 1e-2, |p| {
                model.set_params(p).unwrap();
                let logits = model.forward_layers(&sampled, &x, &mut NoExchange, ctx).unwrap();
                softmax_cross_entropy(logits, &labels, &rows).unwrap().0
            });
        }
        let mut model = Model::new(small_config(ConvKind::Gcn, Activation::Relu)).unwrap();
        let err = model.forward_layers(&sampled[..2], &x, &mut NoExchange, ctx).unwrap_err();
        assert!(matches!(err, ModelError::Blocks { got: 2, expected: 3 }), "{err}");
    }

    #[test]
    fn the_first_nonfinite_output_names_its_layer() {
        let graph = random_graph(14, 45, 2);
        // No LayerNorm and a leaky ReLU: both pass a NaN on (ReLU would turn it into 0).
        let config =
            ModelConfig { layer_norm: false, ..small_config(ConvKind::Sage, Activation::LeakyRelu { slope: 0.1 }) };
        let mut model = Model::new(config).unwrap();
        let x = random_array(14, 4, 1.0, 3);
        model.forward(&graph, &x, &mut NoExchange, ForwardCtx::eval()).unwrap();
        assert_eq!(model.first_nonfinite_output(&graph), None);
        // An overflowing weight of the second conv: its output is the first to go infinite.
        let slot = model.param_info().iter().find(|p| p.name == "conv1.weight_neigh").unwrap().slot;
        let mut params = model.params().to_vec();
        params[slot.offset..slot.offset + slot.rows * slot.cols].fill(f32::MAX);
        model.set_params(&params).unwrap();
        model.forward(&graph, &x, &mut NoExchange, ForwardCtx::eval()).unwrap();
        assert_eq!(model.first_nonfinite_output(&graph), Some(1));
    }

    #[test]
    fn backward_accumulates_and_ignores_non_owned_rows() {
        let graph = random_graph(10, 30, 5);
        let x = random_array(10, 4, 1.0, 6);
        let mut model = Model::new(small_config(ConvKind::Gcn, Activation::Relu)).unwrap();
        assert!(matches!(model.backward(&graph, Array2::zeros((10, 3)), &mut NoExchange), Err(ModelError::NoForward)));
        let d = random_array(10, 3, 1.0, 7);
        model.forward(&graph, &x, &mut NoExchange, ForwardCtx::eval()).unwrap();
        model.backward(&graph, d.clone(), &mut NoExchange).unwrap();
        let once = model.grads().to_vec();
        assert!(matches!(model.backward(&graph, d.clone(), &mut NoExchange), Err(ModelError::NoForward)));
        model.forward(&graph, &x, &mut NoExchange, ForwardCtx::eval()).unwrap();
        model.backward(&graph, d.clone(), &mut NoExchange).unwrap();
        assert!(model.grads().iter().zip(&once).all(|(g, o)| (g - 2.0 * o).abs() <= 1e-5 * (1.0 + o.abs())));
        // Rows past num_primary carry no loss: changing them changes nothing.
        let owned = AggGraph::new(
            graph.fwd().clone(),
            6,
            graph.global_ids().to_vec(),
            graph.in_degree().to_vec(),
            graph.out_degree().to_vec(),
        )
        .unwrap();
        let mut noisy = d.clone();
        noisy.slice_mut(s![6.., ..]).fill(100.0);
        let mut clean = d;
        clean.slice_mut(s![6.., ..]).fill(0.0);
        let mut grads_of = |dl: Array2<f32>| {
            model.zero_grad();
            model.forward(&owned, &x, &mut NoExchange, ForwardCtx::eval()).unwrap();
            model.backward(&owned, dl, &mut NoExchange).unwrap();
            model.grads().to_vec()
        };
        assert_eq!(grads_of(noisy), grads_of(clean));
        model.zero_grad();
        assert!(model.grads().iter().all(|&g| g == 0.0));
        let err = model.forward(&graph, &Array2::zeros((10, 5)), &mut NoExchange, ForwardCtx::eval()).unwrap_err();
        assert!(matches!(err, ModelError::Shape { what: "input features", cols: 5, expected_cols: 4, .. }));
    }

    /// With the halo pulled, input rows past the owned ones are never read, so a caller may
    /// leave them out.
    #[test]
    fn pulled_halo_input_rows_are_optional() {
        let whole = random_graph(10, 30, 5);
        // Keep only the edges into vertices 0..6, so 6..10 can be halo rows.
        let keep = |v: usize| if v < 6 { whole.fwd().neighbors(v).to_vec() } else { Vec::new() };
        let edges: Vec<(u32, u32)> = (0..10).flat_map(|v| keep(v).into_iter().map(move |u| (u, v as u32))).collect();
        let csr = Csr::from_edges(10, &edges, EdgeListOptions { symmetrize: false, remove_self_loops: true }).unwrap();
        let ids = whole.global_ids().to_vec();
        let graph = AggGraph::new(csr, 6, ids, whole.in_degree().to_vec(), whole.out_degree().to_vec())
            .unwrap()
            .with_pulled_halo()
            .unwrap();
        let mut x = random_array(10, 4, 1.0, 6);
        x.slice_mut(s![6.., ..]).fill(f32::NAN);
        for kind in [ConvKind::Gcn, ConvKind::Sage, ConvKind::Gat] {
            let ctx = ForwardCtx::train(3, 1);
            let logits = |x: &Array2<f32>| {
                let mut model = Model::new(small_config(kind, Activation::Relu)).unwrap();
                model.forward(&graph, x, &mut NoExchange, ctx).unwrap().slice(s![..6, ..]).to_owned()
            };
            let owned_only = logits(&x.slice(s![..6, ..]).to_owned());
            assert!(owned_only.iter().all(|v| v.is_finite()), "{kind:?}");
            assert_eq!(logits(&x), owned_only, "{kind:?}: NaN halo input rows were read");
        }
        let mut model = Model::new(small_config(ConvKind::Gcn, Activation::Relu)).unwrap();
        let err = model.forward(&graph, &x.slice(s![..5, ..]).to_owned(), &mut NoExchange, ForwardCtx::eval());
        assert!(matches!(err, Err(ModelError::Shape { rows: 5, expected_rows: 6, .. })));
    }

    #[test]
    fn config_validation_names_the_field() {
        let mut cfg = ModelConfig::gat(10, 8, 3);
        cfg.attn_dropout = 1.0;
        assert!(matches!(Model::new(cfg.clone()), Err(ModelError::Config { field: "attn_dropout", .. })));
        cfg.attn_dropout = 0.5;
        cfg.heads = 0;
        assert!(matches!(Model::new(cfg), Err(ModelError::Config { field: "heads", .. })));
        let mut cfg = ModelConfig::gcn(10, 16, 3);
        cfg.layers = 0;
        assert!(matches!(Model::new(cfg), Err(ModelError::Config { field: "layers", .. })));
        let json = serde_json::to_string(&ModelConfig::sage(5, 4, 2)).unwrap();
        assert_eq!(serde_json::from_str::<ModelConfig>(&json).unwrap(), ModelConfig::sage(5, 4, 2));
    }

    #[test]
    fn layout_matches_pyg_shapes() {
        let model = Model::new(ModelConfig::gat(1433, 8, 7)).unwrap();
        let names: Vec<(&str, usize, usize)> =
            model.param_info().iter().map(|p| (p.name.as_str(), p.slot.rows, p.slot.cols)).collect();
        assert_eq!(
            names,
            [
                ("conv0.weight", 1433, 64),
                ("conv0.att_src", 8, 8),
                ("conv0.att_dst", 8, 8),
                ("conv0.bias", 1, 64),
                ("conv1.weight", 64, 7),
                ("conv1.att_src", 1, 7),
                ("conv1.att_dst", 1, 7),
                ("conv1.bias", 1, 7),
            ]
        );
        assert_eq!(model.num_params(), 1433 * 64 + 64 + 64 + 64 + 64 * 7 + 21);
        let points: Vec<ExchangePoint> = model.convs().map(|c| c.exchange_point()).collect();
        assert_eq!(points, [ExchangePoint::Transformed, ExchangePoint::Transformed]);
    }
}
