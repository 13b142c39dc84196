//! Training on one device: the CPU [`Model`]'s forward, backward and Adam step with
//! parameters, gradients, moments and activations resident on the GPU, on a whole graph or on
//! a worker's part of a cut graph. Only the loss and accuracy scalars (and logits on request)
//! come back to the host, and on a part the rows its exchange moves.
//!
//! On a part ([`DeviceModel::upload_part_graph`]: any cut; GAT with every replica computing)
//! each layer calls the worker's [`Exchange`] where the CPU layers do (see `link.rs`), staged
//! through the host by a [`Stager`]: the aggregation runs over the part's local in-edges
//! ([`part_aggregation`]) and GCN's self term is added after the sync. Rows past the view's computed rows are computed
//! too but never reach a result: they carry no loss, the self coefficients are zero there,
//! pushes zero them, and pulls overwrite them before they are read, so the gradients the
//! parameters take are the CPU worker's. The caller all-reduces them on the host
//! ([`DeviceModel::grads`], [`DeviceModel::set_grads`]) before [`DeviceModel::step`].
//!
//! Each GCN or GraphSAGE aggregation is one weighted SpMM over [`aggregation`]'s CSR, run on
//! the narrower side of the weight (as the CPU's `ExchangePoint::choose` does). GAT computes
//! its scores per entry and head (`gat_logits`, `edge_softmax`), applies the CPU's keyed
//! attention-dropout flags (drawn on the device from the same keys: `attention_dropout`), and
//! aggregates all heads with one SpMM over the head-expanded CSR ([`expand_heads`]); the
//! attention vectors act through block-diagonal matrices so their products are GEMMs. On a
//! part, whose rows may span replicas, the softmax is split around the CPU layer's syncs: each
//! row's maximum logit (`gat_row_max`) taken over the replicas, the exponentials and their sums
//! (`edge_exp_sums`) put beside the numerators and summed over the replicas, then the quotient
//! (`head_divide`); a vertex's self loop is its primary's entry alone, so it enters the sums
//! once. A replica's gradient share then differs from the CPU worker's (the self loop's share
//! is its primary's whole), and the sum over the workers is the same.
//!
//! A hidden layer runs the CPU's steps in its [`LayerOrder`]: `conv -> [LayerNorm] ->
//! activation -> dropout` or `conv -> dropout -> [LayerNorm] -> activation`; bias and
//! activation fuse into one kernel when nothing sits between them.

use std::sync::Mutex;

use cudarc::driver::CudaSlice;

use super::link::{Link, PartLink};
use super::rows::RowLists;
use super::{Device, DeviceCsr, DeviceIndex, DeviceLabels, GpuError, PhaseClock, Transfers};
use crate::activation::Activation;
use crate::block::BlockGraphs;
use crate::dropout::DropoutSite;
use crate::exchange::staging::Stager;
use crate::exchange::{Direction, Exchange, Half};
use crate::gpu::plan::{
    DevicePlan, LayerPlan, OverlapHalves, PartAggregation, WeightedCsr, aggregation, block_aggregations, expand_heads,
    overlap_halves, part_aggregation,
};
use crate::graph::AggGraph;
use crate::layers::ForwardCtx;
use crate::layers::gat::NEGATIVE_SLOPE;
use crate::model::{ConvKind, LayerOrder, Model, ModelConfig};
use crate::norm::LAYER_NORM_EPS;
use crate::optim::Optim;

/// A graph on the device, aggregation coefficients folded in for one conv kind: a whole graph
/// ([`DeviceModel::upload_graph`]) or a worker's part ([`DeviceModel::upload_part_graph`]).
pub struct DeviceGraph {
    kind: ConvKind,
    csr: DeviceCsr,
    vals: CudaSlice<f32>,
    /// GCN and GraphSAGE: the transpose, for the backward's `A^T x` as a plain SpMM.
    transposed: Option<(DeviceCsr, CudaSlice<f32>)>,
    gids: CudaSlice<u32>,
    /// GAT: one head-expanded CSR per head count of the model's layers.
    expanded: Vec<Expanded>,
    /// A worker's part: what its passes need beyond the CSR.
    part: Option<PartRows>,
}

/// What a part's passes need beyond its CSR.
struct PartRows {
    /// GCN's self coefficients ([`part_aggregation`]), added after the sync.
    self_coeff: Option<CudaSlice<f32>>,
    pulls: bool,
    pushes: bool,
    /// The device copies of the rows the part's exchange stages.
    lists: Mutex<RowLists>,
    /// GCN and GraphSAGE under an exchange that overlaps: the aggregation's halves.
    halves: Option<Halves>,
}

impl PartRows {
    fn upload(
        device: &Device,
        graph: &AggGraph,
        plan: &PartAggregation,
        halves: Option<&OverlapHalves>,
    ) -> Result<Self, GpuError> {
        let n = graph.num_local();
        Ok(Self {
            self_coeff: plan.self_coeff.as_deref().map(|c| device.upload(c)).transpose()?,
            pulls: graph.pulls_halo(),
            pushes: graph.pushes_aggregates(),
            lists: Mutex::default(),
            halves: halves
                .map(|h| -> Result<Halves, GpuError> {
                    Ok(Halves {
                        central: weighted(device, n, &h.central)?,
                        marginal: weighted(device, n, &h.marginal)?,
                        halo_t: weighted(device, n, &h.halo_t)?,
                        primary_t: weighted(device, n, &h.primary_t)?,
                    })
                })
                .transpose()?,
        })
    }
}

/// [`OverlapHalves`] on the device, each a CSR with its values.
struct Halves {
    central: (DeviceCsr, CudaSlice<f32>),
    marginal: (DeviceCsr, CudaSlice<f32>),
    halo_t: (DeviceCsr, CudaSlice<f32>),
    primary_t: (DeviceCsr, CudaSlice<f32>),
}

/// `csr` (`n` rows) and its values on `device`.
fn weighted(device: &Device, n: usize, csr: &WeightedCsr) -> Result<(DeviceCsr, CudaSlice<f32>), GpuError> {
    Ok((DeviceCsr::from_parts(device, n, &csr.indptr, &csr.indices)?, device.upload(&csr.vals)?))
}

/// `a x` for a CSR with its values.
fn product(
    dev: &Device,
    a: &(DeviceCsr, CudaSlice<f32>),
    x: &CudaSlice<f32>,
    cols: usize,
) -> Result<CudaSlice<f32>, GpuError> {
    dev.spmm(&a.0, Some(&a.1), x, cols)
}

/// [`expand_heads`] on the device, with a column of ones for per-row and per-column sums.
struct Expanded {
    heads: usize,
    csr: DeviceCsr,
    perm: DeviceIndex,
    inv: DeviceIndex,
    ones: CudaSlice<f32>,
}

impl DeviceGraph {
    fn upload(device: &Device, graph: &AggGraph, kind: ConvKind, heads: &[usize]) -> Result<Self, GpuError> {
        let folded = aggregation(graph, kind)?;
        Self::from_csr(device, graph, kind, heads, &folded)
    }

    /// A worker's part: its local in-edges, GCN's self term apart (GAT's self loops on its
    /// primaries),
    /// and for an exchange that overlaps GCN's and GraphSAGE's [`OverlapHalves`] (GAT's calls
    /// stay blocking, as the CPU layer's do).
    fn upload_part(
        device: &Device,
        graph: &AggGraph,
        kind: ConvKind,
        heads: &[usize],
        overlap: bool,
    ) -> Result<Self, GpuError> {
        let plan = part_aggregation(graph, kind)?;
        let halves = (overlap && kind != ConvKind::Gat).then(|| overlap_halves(graph, &plan));
        let mut out = Self::from_csr(device, graph, kind, heads, &plan.csr)?;
        out.part = Some(PartRows::upload(device, graph, &plan, halves.as_ref())?);
        Ok(out)
    }

    /// A sampled block from its [`block_aggregations`] plan, for a layer of `heads` heads
    /// (GAT's head-expanded CSR).
    fn from_plan(
        device: &Device,
        graph: &AggGraph,
        kind: ConvKind,
        plan: &PartAggregation,
        heads: usize,
    ) -> Result<Self, GpuError> {
        let mut out = Self::from_csr(device, graph, kind, &[heads], &plan.csr)?;
        out.part = Some(PartRows::upload(device, graph, plan, None)?);
        Ok(out)
    }

    fn from_csr(
        device: &Device,
        graph: &AggGraph,
        kind: ConvKind,
        heads: &[usize],
        folded: &WeightedCsr,
    ) -> Result<Self, GpuError> {
        let n = graph.num_local();
        let nnz = folded.indices.len();
        let mut expanded: Vec<Expanded> = Vec::new();
        for &h in heads {
            if kind != ConvKind::Gat || expanded.iter().any(|e| e.heads == h) {
                continue;
            }
            let x = expand_heads(folded, h);
            expanded.push(Expanded {
                heads: h,
                csr: DeviceCsr::from_parts(device, n * h, &x.indptr, &x.indices)?,
                perm: DeviceIndex::upload(device, &x.perm, nnz * h)?,
                inv: DeviceIndex::upload(device, &x.inv, nnz * h)?,
                ones: device.upload(&vec![1.0f32; n * h])?,
            });
        }
        let transposed = match kind {
            ConvKind::Gat => None,
            ConvKind::Gcn | ConvKind::Sage => Some(weighted(device, n, &folded.transpose())?),
        };
        Ok(Self {
            kind,
            transposed,
            csr: DeviceCsr::from_parts(device, n, &folded.indptr, &folded.indices)?,
            vals: device.upload(&folded.vals)?,
            gids: device.upload(graph.global_ids())?,
            expanded,
            part: None,
        })
    }

    /// The passes' link to `exchange` on this part, or a refusal naming the upload it needs.
    fn link<'a>(&'a self, exchange: &'a mut dyn Exchange, stager: &'a mut Stager) -> Result<Link<'a>, GpuError> {
        let part = self.part.as_ref().ok_or(GpuError::GraphUpload { needs: "as a worker's part" })?;
        let lists = part.lists.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(Link::Part(PartLink { exchange, stager, lists, pushes: part.pushes }))
    }

    /// The link of a whole graph, or a refusal: a part's passes must exchange, and a block's
    /// run through [`DeviceModel::forward_blocks`].
    fn whole(&self) -> Result<Link<'static>, GpuError> {
        match self.part {
            Some(_) => Err(GpuError::GraphUpload { needs: "whole" }),
            None => Ok(Link::Whole),
        }
    }

    /// Whether the passes pull this view's halo rows before reading them.
    fn pulls(&self) -> bool {
        self.part.as_ref().is_some_and(|p| p.pulls)
    }

    /// The aggregation's halves, where the passes split their halo calls: a view that pulls
    /// its halo, under an exchange that overlaps. Refused where the part was uploaded without
    /// them.
    fn halves(&self, link: &Link<'_>) -> Result<Option<&Halves>, GpuError> {
        if !(self.pulls() && link.overlaps()) {
            return Ok(None);
        }
        let halves = self.part.as_ref().and_then(|p| p.halves.as_ref());
        halves
            .map(Some)
            .ok_or(GpuError::GraphUpload { needs: "with its overlap halves (`upload_overlapped_part_graph`)" })
    }

    /// GCN's self coefficients on a part, added after the sync; `None` where they are folded
    /// into the CSR (a whole graph) or there is no self term (GraphSAGE).
    fn self_coeff(&self) -> Option<&CudaSlice<f32>> {
        self.part.as_ref().and_then(|p| p.self_coeff.as_ref())
    }

    fn expanded(&self, heads: usize) -> Result<&Expanded, GpuError> {
        self.expanded.iter().find(|e| e.heads == heads).ok_or_else(|| GpuError::Shape {
            kernel: "model",
            detail: format!("graph was not uploaded for GAT with {heads} heads"),
        })
    }

    pub fn num_nodes(&self) -> usize {
        self.csr.rows()
    }
}

/// The graphs of a pass: a part's views (one for every layer, or layer 0's apart: its halo
/// inputs held, the halo feature cache; a whole graph is one view), or one per layer (a sampled
/// batch's blocks, input layer first).
#[derive(Clone, Copy)]
enum Layers<'g> {
    Views { first: &'g DeviceGraph, rest: &'g DeviceGraph },
    PerLayer(&'g [DeviceGraph]),
}

impl<'g> Layers<'g> {
    fn same(graph: &'g DeviceGraph) -> Self {
        Layers::Views { first: graph, rest: graph }
    }

    fn layer(self, l: usize) -> &'g DeviceGraph {
        match self {
            Layers::Views { first, .. } if l == 0 => first,
            Layers::Views { rest, .. } => rest,
            Layers::PerLayer(graphs) => &graphs[l],
        }
    }

    /// The graph whose rows layer `l`'s output keeps: a view's own (every view of a part has
    /// the same rows), or the next block's (a block reads a prefix of the rows the block
    /// before it computed), or its own for the last layer.
    fn kept(self, l: usize) -> &'g DeviceGraph {
        match self {
            Layers::Views { rest, .. } => rest,
            Layers::PerLayer(graphs) => graphs.get(l + 1).unwrap_or(&graphs[l]),
        }
    }
}

/// A worker's part as the device layers see it: the view every layer runs on, and layer 0's
/// apart where its halo inputs are held (the halo feature cache:
/// [`crate::AggGraph::with_held_halo`] of the same part), which pulls nothing.
#[derive(Clone, Copy)]
pub struct PartViews<'g> {
    pub first: &'g DeviceGraph,
    pub rest: &'g DeviceGraph,
}

impl<'g> PartViews<'g> {
    /// The part's view `rest`, with layer 0's apart where there is one.
    pub fn of(rest: &'g DeviceGraph, first: Option<&'g DeviceGraph>) -> Self {
        Self { first: first.unwrap_or(rest), rest }
    }
}

impl<'g> From<&'g DeviceGraph> for PartViews<'g> {
    fn from(graph: &'g DeviceGraph) -> Self {
        Self { first: graph, rest: graph }
    }
}

/// A sampled mini-batch's blocks on the device, one [`DeviceGraph`] per layer, input layer
/// first: each aggregates over the block's sampled in-edges (GCN's self term apart, zero past
/// the block's destinations; GAT's attention over every row's self loop and sampled in-edges),
/// as a worker's part does, with nothing to exchange.
pub struct DeviceBlocks {
    layers: Vec<DeviceGraph>,
}

impl DeviceBlocks {
    /// Uploads `blocks` for `model`'s layers, through `device`'s uploads (a copy stream's
    /// device, [`Device::copy_device`], overlaps them with the compute stream's work). Refused
    /// when the blocks are not one per layer.
    pub fn upload(device: &Device, blocks: &BlockGraphs, model: &DeviceModel<'_>) -> Result<Self, GpuError> {
        let (kind, layers) = (model.cfg.kind, &model.plan.layers);
        one_block_a_layer(blocks.layers().len(), layers.len())?;
        let layers = block_aggregations(blocks, kind)?
            .iter()
            .zip(blocks.layers())
            .zip(layers)
            .map(|((plan, graph), layer)| DeviceGraph::from_plan(device, graph, kind, plan, layer.heads))
            .collect::<Result<_, _>>()?;
        Ok(Self { layers })
    }

    /// Rows of the input features: one per `BlockGraphs::input_ids`.
    pub fn input_rows(&self) -> usize {
        self.layers.first().map_or(0, DeviceGraph::num_nodes)
    }

    /// Rows of the logits: the last block's sources, its destinations (the seeds) first.
    pub fn output_rows(&self) -> usize {
        self.layers.last().map_or(0, DeviceGraph::num_nodes)
    }
}

/// A sampled batch's blocks for a model: one a layer.
fn one_block_a_layer(blocks: usize, layers: usize) -> Result<(), GpuError> {
    if blocks == layers {
        return Ok(());
    }
    Err(GpuError::Shape { kernel: "model", detail: format!("{blocks} blocks for a model of {layers} layers") })
}

/// Two views of one part: the same rows and kind, and layer 0's apart pulls nothing.
fn check_views(first: &DeviceGraph, rest: &DeviceGraph) -> Result<(), GpuError> {
    let same = std::ptr::eq(first, rest);
    if same || (first.num_nodes() == rest.num_nodes() && first.kind == rest.kind && !first.pulls()) {
        return Ok(());
    }
    let detail = format!(
        "layer 0's view ({} rows, {}, pulls: {}) is not a held view of the part ({} rows, {})",
        first.num_nodes(),
        first.kind,
        first.pulls(),
        rest.num_nodes(),
        rest.kind
    );
    Err(GpuError::Shape { kernel: "model", detail })
}

/// Sum of the loss and number of correct predictions over a split (arg-max for classes, one
/// per label column for multi-label targets).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceLoss {
    pub loss_sum: f64,
    pub correct: usize,
}

/// One parameter tensor with its gradient and Adam moments.
struct Tensor {
    value: CudaSlice<f32>,
    grad: CudaSlice<f32>,
    m: CudaSlice<f32>,
    v: CudaSlice<f32>,
}

/// Two distinct tensors of `tensors`, both mutable.
fn two_mut(tensors: &mut [Tensor], a: usize, b: usize) -> Result<(&mut Tensor, &mut Tensor), GpuError> {
    let shape =
        || GpuError::Shape { kernel: "model", detail: format!("tensors {a} and {b} are not two of {}", tensors.len()) };
    if a == b || a.max(b) >= tensors.len() {
        return Err(shape());
    }
    let (lo, hi) = tensors.split_at_mut(a.max(b));
    let (first, second) = (&mut lo[a.min(b)], &mut hi[0]);
    Ok(if a < b { (first, second) } else { (second, first) })
}

/// What one layer's forward keeps for its backward.
#[derive(Default)]
struct LayerCache {
    /// Input of the conv (after dropout).
    input: Option<CudaSlice<f32>>,
    /// The aggregated input, when the layer aggregates before its weight.
    aggregated: Option<CudaSlice<f32>>,
    /// Hidden layers with dropout last: the activation output before dropout.
    activated: Option<CudaSlice<f32>>,
    /// Hidden layers: the dropout keep flags (of whichever dropout the layer order places).
    mask: Option<CudaSlice<u8>>,
    /// LayerNorm's normalised rows and inverse deviations.
    norm: Option<(CudaSlice<f32>, CudaSlice<f32>)>,
    gat: Option<GatCache>,
}

/// What a GAT layer's forward keeps for its backward.
struct GatCache {
    /// `x W`, `n x heads*head_dim`.
    h: CudaSlice<f32>,
    /// Block-diagonal attention matrices (`heads x heads*head_dim`).
    src_blocks: CudaSlice<f32>,
    dst_blocks: CudaSlice<f32>,
    /// LeakyReLU scores and their softmax per entry and head (on a part, the exponentials).
    scores: CudaSlice<f32>,
    weights: CudaSlice<f32>,
    /// The softmax after attention dropout, in head-expanded order.
    dropped: CudaSlice<f32>,
    keep: Option<CudaSlice<u8>>,
    /// On a part: the synced `n x (heads + heads*head_dim)` block of each row's exponential
    /// sums and numerators, per head.
    sums: Option<CudaSlice<f32>>,
}

/// The device twin of a CPU [`Model`] (same config, same parameter layout).
pub struct DeviceModel<'d> {
    pub(super) dev: &'d Device,
    pub(super) cfg: ModelConfig,
    plan: DevicePlan,
    tensors: Vec<Tensor>,
    caches: Vec<LayerCache>,
    /// Per layer: GAT's head-averaging matrix (`heads*head_dim x head_dim`, stacked identities
    /// over `heads`) when it averages more than one head.
    head_means: Vec<Option<CudaSlice<f32>>>,
    logits: Option<CudaSlice<f32>>,
    dlogits: Option<CudaSlice<f32>>,
    last: Option<ForwardCtx>,
    steps: u64,
    /// The phases marked since the last reading (`Learner::mark`).
    pub(super) clock: Option<PhaseClock<'d>>,
    /// The device's transfers at the last reading (`Learner::traffic`).
    pub(super) transfers: Transfers,
    /// The same GPU on a copy stream, made on first use: batches go up there (`Learner::blocks`).
    pub(super) copy: std::cell::OnceCell<Device>,
    /// The copy stream's transfers at the last reading.
    pub(super) copy_transfers: Transfers,
    /// The gradients brought down (`Learner::grads_mut`), taken back up before the device's
    /// next use of them.
    pub(super) host_grads: Option<Vec<f32>>,
}

impl<'d> DeviceModel<'d> {
    /// Uploads `model`'s parameters (zero gradients and moments).
    pub fn from_model(dev: &'d Device, model: &Model) -> Result<Self, GpuError> {
        let plan = DevicePlan::of(model)?;
        let tensors = plan
            .split(model.params())?
            .into_iter()
            .map(|values| {
                Ok(Tensor {
                    value: dev.upload(values)?,
                    grad: dev.zeros(values.len())?,
                    m: dev.zeros(values.len())?,
                    v: dev.zeros(values.len())?,
                })
            })
            .collect::<Result<_, GpuError>>()?;
        let caches = (0..plan.layers.len()).map(|_| LayerCache::default()).collect();
        let head_means = plan
            .layers
            .iter()
            .map(|l| {
                (l.attention.is_some() && !l.concat && l.heads > 1)
                    .then(|| {
                        let (hw, hd) = (l.heads * l.head_dim, l.head_dim);
                        let mut m = vec![0.0f32; hw * hd];
                        (0..hw).for_each(|r| m[r * hd + r % hd] = (l.heads as f32).recip());
                        dev.upload(&m)
                    })
                    .transpose()
            })
            .collect::<Result<_, GpuError>>()?;
        Ok(Self {
            dev,
            cfg: model.config().clone(),
            plan,
            tensors,
            caches,
            head_means,
            logits: None,
            dlogits: None,
            last: None,
            steps: 0,
            clock: None,
            transfers: dev.transfers(),
            copy: std::cell::OnceCell::new(),
            copy_transfers: Transfers::default(),
            host_grads: None,
        })
    }

    /// Uploads `graph` (whole: no halo rows) with what this model's layers aggregate by.
    pub fn upload_graph(&self, graph: &AggGraph) -> Result<DeviceGraph, GpuError> {
        let heads: Vec<usize> = self.plan.layers.iter().map(|l| l.heads).collect();
        DeviceGraph::upload(self.dev, graph, self.cfg.kind, &heads)
    }

    /// Uploads a worker's view of its part of a cut graph (`exchange::part_view::agg_graph_of`,
    /// possibly [`AggGraph::with_primaries_computing`]) for [`DeviceModel::forward_part`] and
    /// [`DeviceModel::backward_part`]. GCN and GraphSAGE on any cut; GAT where every replica
    /// computes (masters-only is refused: [`crate::gpu::plan::PlanError::PartGat`]).
    pub fn upload_part_graph(&self, graph: &AggGraph) -> Result<DeviceGraph, GpuError> {
        let heads: Vec<usize> = self.plan.layers.iter().map(|l| l.heads).collect();
        DeviceGraph::upload_part(self.dev, graph, self.cfg.kind, &heads, false)
    }

    /// [`DeviceModel::upload_part_graph`] for an exchange that overlaps
    /// ([`Exchange::overlaps`]): GCN's and GraphSAGE's passes then split their halo calls as
    /// the CPU layers do, aggregating the central rows while the halo is in flight and pushing
    /// the input gradient's halo rows before the primary rows are computed
    /// ([`crate::gpu::plan::OverlapHalves`]).
    pub fn upload_overlapped_part_graph(&self, graph: &AggGraph) -> Result<DeviceGraph, GpuError> {
        let heads: Vec<usize> = self.plan.layers.iter().map(|l| l.heads).collect();
        DeviceGraph::upload_part(self.dev, graph, self.cfg.kind, &heads, true)
    }

    /// The parameters, flat in the CPU model's layout (for [`Model::set_params`]).
    pub fn params(&self) -> Result<Vec<f32>, GpuError> {
        self.flat(|t| &t.value)
    }

    /// The gradients, flat in the CPU model's layout.
    pub fn grads(&self) -> Result<Vec<f32>, GpuError> {
        self.flat(|t| &t.grad)
    }

    /// Adam's first and second moments, flat in the CPU model's layout, and its step count.
    pub fn moments(&self) -> Result<(Vec<f32>, Vec<f32>, u64), GpuError> {
        Ok((self.flat(|t| &t.m)?, self.flat(|t| &t.v)?, self.steps))
    }

    /// Puts back parameters and Adam's state as [`DeviceModel::params`] and
    /// [`DeviceModel::moments`] gave them (empty moments: none yet, zeros), bit for bit.
    pub fn set_state(&mut self, params: &[f32], m: &[f32], v: &[f32], steps: u64) -> Result<(), GpuError> {
        let zeros = vec![0.0f32; params.len()];
        let or_zeros = |moments: &'_ [f32]| if moments.is_empty() { zeros.clone() } else { moments.to_vec() };
        let (m, v) = (or_zeros(m), or_zeros(v));
        let parts = [self.plan.split(params)?, self.plan.split(&m)?, self.plan.split(&v)?];
        for (i, t) in self.tensors.iter_mut().enumerate() {
            self.dev.upload_into(parts[0][i], &mut t.value)?;
            self.dev.upload_into(parts[1][i], &mut t.m)?;
            self.dev.upload_into(parts[2][i], &mut t.v)?;
        }
        self.steps = steps;
        Ok(())
    }

    fn flat(&self, pick: impl Fn(&Tensor) -> &CudaSlice<f32>) -> Result<Vec<f32>, GpuError> {
        let parts = self.tensors.iter().map(|t| self.dev.download(pick(t))).collect::<Result<Vec<_>, _>>()?;
        Ok(self.plan.join(&parts)?)
    }

    /// Replaces the parameters with `flat` (the CPU model's layout); gradients, moments and the
    /// step count stay.
    pub fn set_params(&mut self, flat: &[f32]) -> Result<(), GpuError> {
        let parts = self.plan.split(flat)?;
        for (t, part) in self.tensors.iter_mut().zip(parts) {
            self.dev.upload_into(part, &mut t.value)?;
        }
        Ok(())
    }

    /// Replaces the gradients with `flat` (the CPU model's layout): the all-reduced sum of the
    /// workers' [`DeviceModel::grads`], for the next [`DeviceModel::step`].
    pub fn set_grads(&mut self, flat: &[f32]) -> Result<(), GpuError> {
        let parts = self.plan.split(flat)?;
        for (t, part) in self.tensors.iter_mut().zip(parts) {
            self.dev.upload_into(part, &mut t.grad)?;
        }
        Ok(())
    }

    /// The gradients in one device buffer, flat in the CPU model's layout: what a device
    /// collective (NCCL) sums over the workers without the host, for
    /// [`DeviceModel::set_grads_on_device`].
    pub fn grads_on_device(&self) -> Result<CudaSlice<f32>, GpuError> {
        let mut flat = self.dev.zeros::<f32>(self.plan.num_params())?;
        for (t, (_, slot)) in self.tensors.iter().zip(&self.plan.tensors) {
            let mut part = flat.slice_mut(slot.range());
            self.dev.stream().memcpy_dtod(&t.grad, &mut part)?;
        }
        Ok(flat)
    }

    /// Replaces the gradients with `flat`, a device buffer laid out as
    /// [`DeviceModel::grads_on_device`] gives them.
    pub fn set_grads_on_device(&mut self, flat: &CudaSlice<f32>) -> Result<(), GpuError> {
        if flat.len() != self.plan.num_params() {
            let detail = format!("{} gradients for a model of {} parameters", flat.len(), self.plan.num_params());
            return Err(GpuError::Shape { kernel: "model", detail });
        }
        for (t, (_, slot)) in self.tensors.iter_mut().zip(&self.plan.tensors) {
            self.dev.stream().memcpy_dtod(&flat.slice(slot.range()), &mut t.grad)?;
        }
        Ok(())
    }

    /// Whether the gradients' sum, reduced on the device, is finite: one value comes down.
    /// A non-finite gradient makes it non-finite, so `true` means every gradient is finite;
    /// `false` means one is not, or the finite ones overflowed the sum (bring them down to
    /// tell, [`DeviceModel::grads`]).
    pub fn grads_sum_finite(&self) -> Result<bool, GpuError> {
        let flat = self.grads_on_device()?;
        let mut total = self.dev.zeros::<f32>(1)?;
        self.dev.column_sum(flat.len(), 1, &flat, None, &mut total.as_view_mut())?;
        Ok(self.dev.download(&total)?[0].is_finite())
    }

    pub fn zero_grad(&mut self) -> Result<(), GpuError> {
        for t in &mut self.tensors {
            self.dev.stream().memset_zeros(&mut t.grad)?;
        }
        Ok(())
    }

    fn check_graph(&self, graph: &DeviceGraph, x: Option<&CudaSlice<f32>>) -> Result<(), GpuError> {
        let n = graph.num_nodes();
        if graph.kind != self.cfg.kind {
            let detail = format!("graph folded for {}, model is {}", graph.kind, self.cfg.kind);
            return Err(GpuError::Shape { kernel: "model", detail });
        }
        match x {
            Some(x) if x.len() != n * self.cfg.in_dim => Err(GpuError::Shape {
                kernel: "model",
                detail: format!("features have {} values, expected {n} x {}", x.len(), self.cfg.in_dim),
            }),
            _ => Ok(()),
        }
    }

    fn dropout_site(&self, p: f32, layer: usize, ctx: ForwardCtx) -> Option<DropoutSite> {
        Some(DropoutSite::new(p, ctx.seed, ctx.round(), layer)).filter(|s| ctx.training && s.is_active())
    }

    /// The logits of every vertex stay on the device (see [`DeviceModel::logits`]); `x` is the
    /// `n x in_dim` feature matrix, row-major. `graph` is whole.
    pub fn forward(&mut self, graph: &DeviceGraph, x: &CudaSlice<f32>, ctx: ForwardCtx) -> Result<(), GpuError> {
        self.run_forward(Layers::same(graph), x, ctx, &mut graph.whole()?)
    }

    /// [`DeviceModel::forward`] on a worker's part ([`DeviceModel::upload_part_graph`]), calling
    /// `exchange` where the CPU [`Model`] does, each call staged through `stager` (made for the
    /// part's local rows). `x` holds a row per local vertex: the rows past the view's input rows
    /// are not read (they are pulled). Every worker calls it with the same `ctx`. The logits'
    /// primary rows are the worker's; train and evaluate on labelled primaries only, and add
    /// the loss sums and hits over the workers.
    ///
    /// `graphs` is the part's view, or its [`PartViews`] with layer 0's apart (its halo rows'
    /// inputs in `x`).
    pub fn forward_part<'g>(
        &mut self,
        graphs: impl Into<PartViews<'g>>,
        x: &CudaSlice<f32>,
        ctx: ForwardCtx,
        exchange: &mut dyn Exchange,
        stager: &mut Stager,
    ) -> Result<(), GpuError> {
        let PartViews { first, rest } = graphs.into();
        check_views(first, rest)?;
        let mut link = rest.link(exchange, stager)?;
        link.begin(ctx.pass());
        self.run_forward(Layers::Views { first, rest }, x, ctx, &mut link)
    }

    /// [`DeviceModel::forward`] over a sampled batch's blocks: `x` holds a row per
    /// [`DeviceBlocks::input_rows`] (the features of `BlockGraphs::input_ids`), and the logits
    /// a row per [`DeviceBlocks::output_rows`], the seeds first (train on those). The CPU's
    /// `Model::forward_blocks` with the same `ctx` draws the same dropout.
    pub fn forward_blocks(
        &mut self,
        blocks: &DeviceBlocks,
        x: &CudaSlice<f32>,
        ctx: ForwardCtx,
    ) -> Result<(), GpuError> {
        self.check_blocks(blocks)?;
        self.run_forward(Layers::PerLayer(&blocks.layers), x, ctx, &mut Link::Whole)
    }

    fn check_blocks(&self, blocks: &DeviceBlocks) -> Result<(), GpuError> {
        one_block_a_layer(blocks.layers.len(), self.plan.layers.len())
    }

    fn run_forward(
        &mut self,
        graphs: Layers<'_>,
        x: &CudaSlice<f32>,
        ctx: ForwardCtx,
        link: &mut Link<'_>,
    ) -> Result<(), GpuError> {
        let first = graphs.layer(0);
        self.check_graph(first, Some(x))?;
        self.last = None;
        self.dlogits = None;
        let mut h = self.dev.stream().clone_dtod(x)?;
        if let Some(site) = self.dropout_site(self.cfg.input_dropout, 0, ctx) {
            self.dev.dropout_rows(&site, self.cfg.in_dim, &first.gids, &mut h, None)?;
        }
        for l in 0..self.plan.layers.len() {
            let layer = self.plan.layers[l].clone();
            let graph = graphs.layer(l);
            let (mut out, aggregated, gat) = match layer.attention {
                Some(_) => {
                    let (out, cache) = self.gat_forward(&layer, l, graph, &mut h, ctx, link)?;
                    (out, None, Some(cache))
                }
                None => {
                    let (out, aggregated) = self.conv_forward(&layer, l, graph, &mut h, link)?;
                    (out, aggregated, None)
                }
            };
            // A block's hidden output keeps the rows the next block reads (a prefix); the
            // per-row steps below run on them, keyed by the next block's ids.
            let kept = graphs.kept(l);
            let (n, gids) = (kept.num_nodes(), &kept.gids);
            if n < graph.num_nodes() {
                out = self.dev.stream().clone_dtod(&out.slice(..n * layer.out_dim))?;
            }
            let mut cache = LayerCache { input: Some(h), aggregated, gat, ..LayerCache::default() };
            let site = self.dropout_site(self.cfg.dropout, l + 1, ctx).filter(|_| layer.hidden);
            let dropout_first = self.cfg.layer_order == LayerOrder::DropoutFirst;
            let act = layer.hidden.then_some(self.cfg.activation);
            // `conv -> activation` fuses bias and activation; anything between them (dropout
            // first, LayerNorm) splits them, in the CPU model's order.
            let fused = layer.norm.is_none() && !dropout_first;
            self.dev.bias_act(
                n,
                layer.out_dim,
                Some(&self.tensors[layer.bias].value),
                act.filter(|_| fused),
                &mut out,
            )?;
            if !fused && layer.hidden {
                if let Some(site) = site.filter(|_| dropout_first) {
                    let mut mask = self.dev.zeros::<u8>(n * layer.out_dim)?;
                    self.dev.dropout_rows(&site, layer.out_dim, gids, &mut out, Some(&mut mask))?;
                    cache.mask = Some(mask);
                }
                if let Some((gamma, beta)) = layer.norm {
                    let (gamma, beta) = (&self.tensors[gamma].value, &self.tensors[beta].value);
                    let normed = self.dev.layer_norm(n, layer.out_dim, LAYER_NORM_EPS, &out, gamma, beta)?;
                    cache.norm = Some((normed.xhat, normed.rstd));
                    out = normed.out;
                }
                self.dev.bias_act(n, layer.out_dim, None, act, &mut out)?;
            }
            h = match site.filter(|_| !dropout_first) {
                Some(site) => {
                    let mut dropped = self.dev.stream().clone_dtod(&out)?;
                    let mut mask = self.dev.zeros::<u8>(n * layer.out_dim)?;
                    self.dev.dropout_rows(&site, layer.out_dim, gids, &mut dropped, Some(&mut mask))?;
                    cache.mask = Some(mask);
                    cache.activated = Some(out);
                    dropped
                }
                None => out,
            };
            self.caches[l] = cache;
        }
        self.logits = Some(h);
        self.last = Some(ctx);
        Ok(())
    }

    /// `conv(x)` before bias and activation, and the aggregated input if it aggregated first.
    /// On a part, the rows it aggregates are pulled first (into `x` itself when it aggregates
    /// its input), the aggregate is synced, then GCN's self term is added.
    fn conv_forward(
        &self,
        layer: &LayerPlan,
        l: usize,
        graph: &DeviceGraph,
        x: &mut CudaSlice<f32>,
        link: &mut Link<'_>,
    ) -> Result<(CudaSlice<f32>, Option<CudaSlice<f32>>), GpuError> {
        let (dev, n, din, dout) = (self.dev, graph.num_nodes(), layer.in_dim, layer.out_dim);
        let w = &self.tensors[layer.weight].value;
        // `A src` over `cols` columns, synced, plus the self term: the aggregation of a conv.
        // Under an exchange that overlaps, the central rows are aggregated while the halo is in
        // flight; the stream is drained before the pull's second half, so the host's time
        // between the halves (the overlap the modeled timeline credits) is their GPU time.
        let aggregate = |src: &mut CudaSlice<f32>, cols: usize, link: &mut Link<'_>| {
            let mut z = match graph.halves(link)? {
                Some(h) => {
                    link.halo_half(dev, Half::Start, l, Direction::Forward, src, n, cols)?;
                    let central = product(dev, &h.central, src, cols)?;
                    dev.stream().synchronize()?;
                    link.halo_half(dev, Half::Finish, l, Direction::Forward, src, n, cols)?;
                    let mut z = product(dev, &h.marginal, src, cols)?;
                    dev.add_scaled_rows(n, cols, None, &central, &mut z)?;
                    z
                }
                None => {
                    link.pull_input(dev, l, graph.pulls(), src, n, cols)?;
                    dev.spmm(&graph.csr, Some(&graph.vals), src, cols)?
                }
            };
            link.sync_aggregate(dev, l, &mut z, n, cols)?;
            if let Some(coeff) = graph.self_coeff() {
                dev.add_scaled_rows(n, cols, Some(coeff), src, &mut z)?;
            }
            Ok::<_, GpuError>(z)
        };
        let (mut out, aggregated) = if layer.aggregates_first() {
            let z = aggregate(x, din, link)?;
            (dev.matmul(&z, false, w, false, n, din, dout)?, Some(z))
        } else {
            let mut xw = dev.matmul(x, false, w, false, n, din, dout)?;
            (aggregate(&mut xw, dout, link)?, None)
        };
        if let Some(ws) = layer.self_weight {
            dev.gemm_into(x, false, &self.tensors[ws].value, false, n, din, dout, 1.0, &mut out)?;
        }
        Ok((out, aggregated))
    }

    /// `heads x heads*head_dim` block-diagonal matrix with attention vector `k` (tensor
    /// `att`, `heads x head_dim`) in block `k`.
    fn blocks(&self, layer: &LayerPlan, att: usize) -> Result<CudaSlice<f32>, GpuError> {
        let (hs, hd) = (layer.heads, layer.head_dim);
        let diagonal: Vec<u32> = (0..hs).map(|k| (k * hs + k) as u32).collect();
        let mut blocks = self.dev.zeros::<f32>(hs * hs * hd)?;
        self.dev.scatter_add_rows(hd, &diagonal, &self.tensors[att].value, &mut blocks, hs * hs)?;
        Ok(blocks)
    }

    /// A GAT conv before bias and activation. On a part, `x` (into itself) or `h` is pulled as
    /// the CPU layer pulls it, and the softmax is split around the attention syncs.
    fn gat_forward(
        &self,
        layer: &LayerPlan,
        l: usize,
        graph: &DeviceGraph,
        x: &mut CudaSlice<f32>,
        ctx: ForwardCtx,
        link: &mut Link<'_>,
    ) -> Result<(CudaSlice<f32>, GatCache), GpuError> {
        let (dev, n, hs, hd) = (self.dev, graph.num_nodes(), layer.heads, layer.head_dim);
        let hw = hs * hd;
        let (att_src, att_dst) = layer.attention.ok_or(GpuError::NoForward)?;
        let ex = graph.expanded(hs)?;
        if layer.aggregates_first() {
            link.pull_input(dev, l, graph.pulls(), x, n, layer.in_dim)?;
        }
        let mut h = dev.matmul(x, false, &self.tensors[layer.weight].value, false, n, layer.in_dim, hw)?;
        if !layer.aggregates_first() {
            link.pull_input(dev, l, graph.pulls(), &mut h, n, hw)?;
        }
        let (src_blocks, dst_blocks) = (self.blocks(layer, att_src)?, self.blocks(layer, att_dst)?);
        let alpha_src = dev.matmul(&h, false, &src_blocks, true, n, hw, hs)?;
        let alpha_dst = dev.matmul(&h, false, &dst_blocks, true, n, hw, hs)?;
        let scores = dev.gat_logits(&graph.csr, hs, NEGATIVE_SLOPE, &alpha_src, &alpha_dst)?;
        let mut weights = dev.stream().clone_dtod(&scores)?;
        // A whole graph normalises each row at once. A part's rows span replicas: each
        // exponentiates its entries against the synced maximum and sums them into the first
        // columns of a block, beside the numerators below, that the replicas sum.
        let sums = if link.syncs() {
            let mut max = dev.gat_row_max(&graph.csr, hs, NEGATIVE_SLOPE, &scores, &alpha_src, &alpha_dst)?;
            link.max_replicas(dev, l, &mut max, n, hs)?;
            let mut block = dev.zeros::<f32>(n * (hs + hw))?;
            dev.edge_exp_sums(&graph.csr, hs, &max, &mut weights, &mut block, hs + hw)?;
            Some(block)
        } else {
            dev.edge_softmax(&graph.csr, hs, &mut weights)?;
            None
        };
        let mut dropped = dev.stream().clone_dtod(&weights)?;
        let keep = match self.dropout_site(self.cfg.attn_dropout, l, ctx) {
            Some(site) => Some(dev.attention_dropout(&graph.csr, hs, &graph.gids, &site, &mut dropped)?),
            None => None,
        };
        let entries = graph.csr.nnz() * hs;
        let dropped = dev.gather_rows_at(1, &ex.perm, &dropped, entries)?;
        let per_head = dev.spmm(&ex.csr, Some(&dropped), &h, hd)?;
        let (per_head, sums) = match sums {
            Some(mut block) => {
                dev.put_columns_around(n, hs + hw, 0..hs, &per_head, &mut block)?;
                link.sync_aggregate(dev, l, &mut block, n, hs + hw)?;
                (dev.head_divide(n, hs, hd, &block)?, Some(block))
            }
            None => (per_head, None),
        };
        let out = match &self.head_means[l] {
            Some(mean) => dev.matmul(&per_head, false, mean, false, n, hw, hd)?,
            None => per_head,
        };
        Ok((out, GatCache { h, src_blocks, dst_blocks, scores, weights, dropped, keep, sums }))
    }

    /// Adds a GAT conv's parameter gradients (weight, attention vectors) and returns the
    /// gradient of its input (an empty buffer for the first layer, `l == 0`). On a part the
    /// block's gradient is synced, and that of what forward pulled (`h`, or the input) is pushed
    /// to its primaries.
    #[allow(clippy::too_many_arguments)] // the layer, its cache, the gradient and the link.
    fn gat_backward(
        &mut self,
        layer: &LayerPlan,
        l: usize,
        graph: &DeviceGraph,
        x: &CudaSlice<f32>,
        c: GatCache,
        d: &CudaSlice<f32>,
        link: &mut Link<'_>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        let (dev, n, hs, hd, need_dx) = (self.dev, graph.num_nodes(), layer.heads, layer.head_dim, l > 0);
        let hw = hs * hd;
        let (att_src, att_dst) = layer.attention.ok_or(GpuError::NoForward)?;
        let ex = graph.expanded(hs)?;
        let entries = graph.csr.nnz() * hs;
        let d_heads = match &self.head_means[l] {
            Some(mean) => dev.matmul(d, false, mean, true, n, hd, hw)?,
            None => dev.stream().clone_dtod(d)?,
        };
        // On a part, through the quotient: the block's gradient, summed over the replicas, whose
        // numerator columns go on (a replica's share of a row's gradient is its own).
        let (d_num, d_sums) = match &c.sums {
            Some(block) => {
                let mut d_block = dev.head_divide_backward(n, hs, hd, block, &d_heads)?;
                link.sync_aggregate_grad(dev, l, &mut d_block, n, hs + hw)?;
                (dev.take_columns_around(n, hs + hw, 0..hs, &d_block)?, Some(d_block))
            }
            None => (d_heads, None),
        };
        // Through the aggregation: into the (dropped) attention and into h.
        let d_dropped = dev.sddmm(&ex.csr, 1, hd, &d_num, &c.h)?;
        let mut dh = dev.spmm_t(&ex.csr, Some(&c.dropped), &d_num, hd)?;
        let mut dw = dev.gather_rows_at(1, &ex.inv, &d_dropped, entries)?;
        if let Some(keep) = &c.keep {
            let scale = DropoutSite::new(self.cfg.attn_dropout, 0, 0, 0).scale();
            dev.dropout_backward(keep, scale, &mut dw)?;
        }
        // Through the softmax (a part's exponentials with their sums' gradient) and the
        // LeakyReLU (its sign is the score's).
        let mut de = match &d_sums {
            Some(d_block) => dev.edge_exp_backward(&graph.csr, hs, &c.weights, &dw, d_block, hs + hw)?,
            None => dev.edge_softmax_backward(&graph.csr, hs, &c.weights, &dw)?,
        };
        dev.act_backward(Activation::LeakyRelu { slope: NEGATIVE_SLOPE }, &c.scores, &mut de)?;
        // Score = leaky(alpha_src[source] + alpha_dst[row]): column and row sums per head.
        let de = dev.gather_rows_at(1, &ex.perm, &de, entries)?;
        let d_alpha_dst = dev.spmm(&ex.csr, Some(&de), &ex.ones, 1)?;
        let d_alpha_src = dev.spmm_t(&ex.csr, Some(&de), &ex.ones, 1)?;
        for (d_alpha, blocks, att) in [(&d_alpha_src, &c.src_blocks, att_src), (&d_alpha_dst, &c.dst_blocks, att_dst)] {
            dev.gemm_into(d_alpha, false, blocks, false, n, hs, hw, 1.0, &mut dh)?;
            // d att[k] = sum_v d_alpha[v, k] h[v, k, :]: the diagonal blocks of d_alpha^T h.
            let all = dev.matmul(d_alpha, true, &c.h, false, hs, n, hw)?;
            let diagonal: Vec<u32> = (0..hs).map(|k| (k * hs + k) as u32).collect();
            let d_att = dev.gather_rows(hd, &diagonal, &all, hs * hs)?;
            let rows: Vec<u32> = (0..hs as u32).collect();
            dev.scatter_add_rows(hd, &rows, &d_att, &mut self.tensors[att].grad, hs)?;
        }
        // The gradient of what forward pulled goes back to its primaries.
        if !layer.aggregates_first() {
            link.push_input_grad(dev, l, graph.pulls(), &mut dh, n, hw)?;
        }
        let w = layer.weight;
        dev.gemm_into(x, true, &dh, false, layer.in_dim, n, hw, 1.0, &mut self.tensors[w].grad)?;
        if !need_dx {
            return dev.zeros(0);
        }
        let mut dx = dev.matmul(&dh, false, &self.tensors[w].value, true, n, hw, layer.in_dim)?;
        if layer.aggregates_first() {
            link.push_input_grad(dev, l, graph.pulls(), &mut dx, n, layer.in_dim)?;
        }
        Ok(dx)
    }

    /// The logits of the last forward pass, `n x out_dim` row-major, copied to the host.
    pub fn logits(&self) -> Result<Vec<f32>, GpuError> {
        let logits = self.logits.as_ref().ok_or(GpuError::NoForward)?;
        self.dev.download(logits)
    }

    /// The loss of the last forward's logits over `split` (softmax cross-entropy, or sigmoid
    /// binary cross-entropy for multi-label targets), with the gradient `1 / normalizer` times
    /// its sum kept for [`DeviceModel::backward`] (`normalizer` is the number of training loss
    /// terms, rows times [`DeviceLabels::terms_per_row`], for the mean loss). The loss sum and
    /// the hits are reduced on the device; two scalars come back.
    pub fn loss(&mut self, split: &mut DeviceLabels, normalizer: usize) -> Result<DeviceLoss, GpuError> {
        let logits = self.logits.as_ref().ok_or(GpuError::NoForward)?;
        let mut dlogits = self.dev.zeros::<f32>(logits.len())?;
        let scale = (normalizer.max(1) as f32).recip();
        let (mut loss_sum, mut hits) = (self.dev.zeros::<f32>(1)?, self.dev.zeros::<u64>(1)?);
        let grad = Some((scale, &mut dlogits));
        self.dev.labelled_loss(split, logits, grad, &mut loss_sum.slice_mut(..), &mut hits.slice_mut(..))?;
        self.dlogits = Some(dlogits);
        Ok(self.totals(&loss_sum, &hits)?.remove(0))
    }

    /// The loss sums and hits of the last forward's logits over each of `splits`, computed
    /// without a gradient (evaluation): one loss kernel and two reductions a split into the
    /// splits' own scratch, then one download of the sums and one of the hits.
    pub fn evaluate(&self, splits: &mut [DeviceLabels]) -> Result<Vec<DeviceLoss>, GpuError> {
        let logits = self.logits.as_ref().ok_or(GpuError::NoForward)?;
        let (mut loss_sums, mut hits) = (self.dev.zeros::<f32>(splits.len())?, self.dev.zeros::<u64>(splits.len())?);
        for (i, split) in splits.iter_mut().enumerate() {
            let (mut loss, mut hit) = (loss_sums.slice_mut(i..=i), hits.slice_mut(i..=i));
            self.dev.labelled_loss(split, logits, None, &mut loss, &mut hit)?;
        }
        self.totals(&loss_sums, &hits)
    }

    /// Loss sums and hit counts, downloaded.
    fn totals(&self, loss_sums: &CudaSlice<f32>, hits: &CudaSlice<u64>) -> Result<Vec<DeviceLoss>, GpuError> {
        let (loss_sums, hits) = (self.dev.download(loss_sums)?, self.dev.download(hits)?);
        Ok(loss_sums
            .iter()
            .zip(hits)
            .map(|(&loss, correct)| DeviceLoss { loss_sum: f64::from(loss), correct: correct as usize })
            .collect())
    }

    /// Back-propagates the gradient of the last [`DeviceModel::loss`] and adds the parameter
    /// gradients into the device's gradient buffers. One backward per forward; `graph` is whole.
    pub fn backward(&mut self, graph: &DeviceGraph) -> Result<(), GpuError> {
        self.run_backward(Layers::same(graph), &mut graph.whole()?)
    }

    /// [`DeviceModel::backward`] of a [`DeviceModel::forward_part`], with the same exchange and
    /// stager: the parameter gradients added are this worker's share, which the workers sum.
    pub fn backward_part<'g>(
        &mut self,
        graphs: impl Into<PartViews<'g>>,
        exchange: &mut dyn Exchange,
        stager: &mut Stager,
    ) -> Result<(), GpuError> {
        let PartViews { first, rest } = graphs.into();
        check_views(first, rest)?;
        self.run_backward(Layers::Views { first, rest }, &mut rest.link(exchange, stager)?)
    }

    /// [`DeviceModel::backward`] of a [`DeviceModel::forward_blocks`] on the same blocks.
    pub fn backward_blocks(&mut self, blocks: &DeviceBlocks) -> Result<(), GpuError> {
        self.check_blocks(blocks)?;
        self.run_backward(Layers::PerLayer(&blocks.layers), &mut Link::Whole)
    }

    fn run_backward(&mut self, graphs: Layers<'_>, link: &mut Link<'_>) -> Result<(), GpuError> {
        self.check_graph(graphs.layer(0), None)?;
        let ctx = self.last.take().ok_or(GpuError::NoForward)?;
        let mut d = self.dlogits.take().ok_or(GpuError::NoForward)?;
        // The input of layer l + 1: layer l's activation output when no dropout followed it.
        let mut next_input: Option<CudaSlice<f32>> = None;
        for l in (0..self.plan.layers.len()).rev() {
            let layer = self.plan.layers[l].clone();
            let cache = std::mem::take(&mut self.caches[l]);
            let graph = graphs.layer(l);
            // `d` has a row per row the layer kept (see `run_forward`).
            let n = graphs.kept(l).num_nodes();
            if layer.hidden {
                // `d` is the gradient of this layer's output: back through its steps in the
                // reverse of the forward's order.
                let scale = DropoutSite::new(self.cfg.dropout, ctx.seed, ctx.round(), l + 1).scale();
                let dropout_first = self.cfg.layer_order == LayerOrder::DropoutFirst;
                if let Some(mask) = cache.mask.as_ref().filter(|_| !dropout_first) {
                    self.dev.dropout_backward(mask, scale, &mut d)?;
                }
                let y = cache.activated.as_ref().or(next_input.as_ref()).ok_or(GpuError::NoForward)?;
                self.dev.act_backward(self.cfg.activation, y, &mut d)?;
                if let Some((gamma, beta)) = layer.norm {
                    let (xhat, rstd) = cache.norm.as_ref().ok_or(GpuError::NoForward)?;
                    let (gamma, beta) = two_mut(&mut self.tensors, gamma, beta)?;
                    d = self.dev.layer_norm_backward(
                        n,
                        layer.out_dim,
                        &d,
                        xhat,
                        rstd,
                        &gamma.value,
                        &mut gamma.grad,
                        &mut beta.grad,
                    )?;
                }
                if let Some(mask) = cache.mask.as_ref().filter(|_| dropout_first) {
                    self.dev.dropout_backward(mask, scale, &mut d)?;
                }
            }
            let x = cache.input.as_ref().ok_or(GpuError::NoForward)?;
            self.dev.column_sum(n, layer.out_dim, &d, None, &mut self.tensors[layer.bias].grad.slice_mut(..))?;
            if n < graph.num_nodes() {
                // The rows the next block does not read carry no gradient.
                let mut tall = self.dev.zeros::<f32>(graph.num_nodes() * layer.out_dim)?;
                self.dev.stream().memcpy_dtod(&d, &mut tall.slice_mut(..n * layer.out_dim))?;
                d = tall;
            }
            d = match cache.gat {
                Some(gat) => self.gat_backward(&layer, l, graph, x, gat, &d, link)?,
                None => self.conv_backward(&layer, l, graph, x, cache.aggregated.as_ref(), &mut d, link)?,
            };
            next_input = cache.input;
        }
        Ok(())
    }

    /// Adds the conv's weight gradients and returns the gradient of its input (an empty buffer
    /// for the first layer, `l == 0`). On a part, the per-vertex terms take this replica's share
    /// of the gradient, as the CPU layers do, before the aggregate's gradient is synced; the
    /// input gradient's halo rows are pushed to their primaries last.
    #[allow(clippy::too_many_arguments)] // the layer, its cache, the gradient and the link.
    fn conv_backward(
        &mut self,
        layer: &LayerPlan,
        l: usize,
        graph: &DeviceGraph,
        x: &CudaSlice<f32>,
        aggregated: Option<&CudaSlice<f32>>,
        d: &mut CudaSlice<f32>,
        link: &mut Link<'_>,
    ) -> Result<CudaSlice<f32>, GpuError> {
        let (dev, n, din, dout, need_dx) = (self.dev, graph.num_nodes(), layer.in_dim, layer.out_dim, l > 0);
        let (at, t_vals) = graph.transposed.as_ref().ok_or(GpuError::Shape {
            kernel: "model",
            detail: format!("graph folded for {} has no transpose", graph.kind),
        })?;
        // `A^T g` over `cols` columns after `g` is synced, plus GCN's self term on a part, taken
        // from `g`'s share before the sync, plus what `more` adds (GraphSAGE's root term); then
        // the halo rows pushed to their primaries. Under an exchange that overlaps, the halo rows
        // are computed and sent first and the primary rows computed while they are in flight
        // (the stream drained before the push's second half, as in the forward).
        let aggregate_t_and_push =
            |g: &mut CudaSlice<f32>,
             cols: usize,
             link: &mut Link<'_>,
             more: &dyn Fn(&mut CudaSlice<f32>) -> Result<(), GpuError>| {
                let own = match graph.self_coeff() {
                    Some(coeff) => {
                        let mut own = dev.zeros::<f32>(n * cols)?;
                        dev.add_scaled_rows(n, cols, Some(coeff), g, &mut own)?;
                        Some(own)
                    }
                    None => None,
                };
                link.sync_aggregate_grad(dev, l, g, n, cols)?;
                let complete = |out: &mut CudaSlice<f32>| {
                    if let Some(own) = &own {
                        dev.add_scaled_rows(n, cols, None, own, out)?;
                    }
                    more(out)
                };
                match graph.halves(link)? {
                    Some(h) => {
                        let mut halo = product(dev, &h.halo_t, g, cols)?;
                        link.halo_half(dev, Half::Start, l, Direction::Backward, &mut halo, n, cols)?;
                        let mut out = product(dev, &h.primary_t, g, cols)?;
                        complete(&mut out)?;
                        dev.add_scaled_rows(n, cols, None, &halo, &mut out)?;
                        dev.stream().synchronize()?;
                        link.halo_half(dev, Half::Finish, l, Direction::Backward, &mut out, n, cols)?;
                        Ok::<_, GpuError>(out)
                    }
                    None => {
                        let mut out = dev.spmm(at, Some(t_vals), g, cols)?;
                        complete(&mut out)?;
                        link.push_input_grad(dev, l, graph.pulls(), &mut out, n, cols)?;
                        Ok(out)
                    }
                }
            };
        if let Some(ws) = layer.self_weight {
            dev.gemm_into(x, true, d, false, din, n, dout, 1.0, &mut self.tensors[ws].grad)?;
        }
        let w = layer.weight;
        match aggregated {
            Some(z) => {
                dev.gemm_into(z, true, d, false, din, n, dout, 1.0, &mut self.tensors[w].grad)?;
                if !need_dx {
                    return dev.zeros(0);
                }
                let mut dz = dev.matmul(d, false, &self.tensors[w].value, true, n, dout, din)?;
                let tensors = &self.tensors;
                let root = |dx: &mut CudaSlice<f32>| match layer.self_weight {
                    Some(ws) => dev.gemm_into(d, false, &tensors[ws].value, true, n, dout, din, 1.0, dx),
                    None => Ok(()),
                };
                aggregate_t_and_push(&mut dz, din, link, &root)
            }
            None => {
                // GraphSAGE's root term reads `d` before the sync changes it.
                let root = match layer.self_weight.filter(|_| need_dx) {
                    Some(ws) => Some(dev.matmul(d, false, &self.tensors[ws].value, true, n, dout, din)?),
                    None => None,
                };
                let dxw = aggregate_t_and_push(d, dout, link, &|_| Ok(()))?;
                dev.gemm_into(x, true, &dxw, false, din, n, dout, 1.0, &mut self.tensors[w].grad)?;
                if !need_dx {
                    return dev.zeros(0);
                }
                match root {
                    Some(mut dx) => {
                        dev.gemm_into(&dxw, false, &self.tensors[w].value, true, n, dout, din, 1.0, &mut dx)?;
                        Ok(dx)
                    }
                    None => dev.matmul(&dxw, false, &self.tensors[w].value, true, n, dout, din),
                }
            }
        }
    }

    /// One step of `optim`'s rule (its hyper-parameters; its state lives on the device and the
    /// step count here, starting from zero): Adam's moments in each tensor's `m` and `v`, SGD's
    /// momentum buffer in `m`.
    pub fn step(&mut self, optim: &Optim) -> Result<(), GpuError> {
        self.steps += 1;
        for t in &mut self.tensors {
            match optim {
                Optim::Adam(adam) => self.dev.adam_step(adam, self.steps, &mut t.value, &t.grad, &mut t.m, &mut t.v)?,
                Optim::Sgd(sgd) => self.dev.sgd_step(sgd, self.steps, &mut t.value, &t.grad, &mut t.m)?,
            }
        }
        Ok(())
    }
}
