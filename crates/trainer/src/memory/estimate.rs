//! The expected peak memory of a run, from sizes only: vertex, edge, feature and class counts,
//! the model's widths and, for distributed runs, each worker's owned, copy and edge counts.
//!
//! Every term is the size of an array the code allocates (the comment on each says which), so
//! the estimate is checked against the buffers themselves (`tests` compares the model's terms
//! with [`Model::buffer_bytes`] after a training step) and against the measured peak RSS
//! (`docs/RELIABILITY.md`); no term is a fudge factor. Left out: the allocator's slack, the
//! binary and thread stacks (tens of MB), transient temporaries shorter than a layer (a
//! degree vector while a graph is built) and METIS' own work arrays.

use std::ops::Range;

use gnn_core::exchange::MessageCap;
use gnn_core::{BufferBytes, ConvKind, ExchangePoint, Model, ModelConfig, ModelError};
use graph_partition::book::{CutKind, LocalGraph};
use graph_partition::{Dataset, Labels};
use serde::{Deserialize, Serialize};

use super::format_bytes;
use crate::config::TrainConfig;

/// One named part of an estimate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    pub name: String,
    pub bytes: u64,
}

/// An estimated peak as a sum of named terms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Estimate {
    pub terms: Vec<Term>,
}

impl Estimate {
    fn add(&mut self, name: impl Into<String>, bytes: usize) {
        self.terms.push(Term { name: name.into(), bytes: bytes as u64 });
    }

    pub fn total(&self) -> u64 {
        self.terms.iter().map(|t| t.bytes).sum()
    }

    /// One line per term, then the total, for logs and error messages.
    pub fn breakdown(&self) -> String {
        let width = self.terms.iter().map(|t| t.name.len()).max().unwrap_or(0).max(5);
        let mut text = String::new();
        for t in &self.terms {
            text.push_str(&format!("  {:<width$}  {:>10}\n", t.name, format_bytes(t.bytes)));
        }
        text.push_str(&format!("  {:<width$}  {:>10}", "total", format_bytes(self.total())));
        text
    }
}

/// `final.memory` of a report: the estimate next to the measured `final.peak_rss_bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// The estimated peak of the process (distributed: the larger phase).
    pub estimate_bytes: u64,
    /// The estimate's terms (distributed: the training phase, summed over the process's workers).
    pub terms: Vec<Term>,
    /// Distributed runs: rank 0's setup phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_terms: Option<Vec<Term>>,
    /// Distributed runs: each worker's training estimate, in rank order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_worker: Option<Vec<u64>>,
    /// The ceiling checked, and where it came from (`--max-memory` or `MemAvailable`).
    pub limit_bytes: Option<u64>,
    pub limit_source: Option<String>,
}

impl MemoryReport {
    pub fn single(estimate: Estimate, limit: Option<crate::memory::Limit>) -> Self {
        Self {
            estimate_bytes: estimate.total(),
            terms: estimate.terms,
            setup_terms: None,
            per_worker: None,
            limit_bytes: limit.map(|l| l.bytes),
            limit_source: limit.map(|l| l.source.to_string()),
        }
    }

    pub fn distributed(phases: Phases, limit: Option<crate::memory::Limit>) -> Self {
        let estimate_bytes = phases.peak();
        Self {
            estimate_bytes,
            terms: phases.training.terms,
            setup_terms: Some(phases.setup.terms),
            per_worker: Some(phases.per_worker),
            ..Self::single(Estimate::default(), limit)
        }
    }
}

/// What a model's per-vertex buffers depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    /// Rows of every layer's arrays: local vertices (primaries and copies).
    pub local: usize,
    /// Rows the dense per-row work covers (caches of computed rows): primaries under edge-cut.
    pub computed: usize,
    /// Edges of the local graph (GAT keeps per-edge values).
    pub edges: usize,
    /// The local graph is its own transpose, so `AggGraph` holds no second adjacency.
    pub symmetric: bool,
    /// Rows past the computed ones aggregate their in-edges and push the partial sums
    /// (vertex-cut with masters only computing).
    pub copies_aggregate: bool,
    /// Rows of layer 0's input held here: every local row under the halo feature cache or when
    /// every row computes, else the computed ones (the rest are pulled).
    pub held: usize,
}

impl Rows {
    /// A graph whose every row is computed here and holds its input: one process's, or a part
    /// taken to have no copies.
    pub fn every_row(local: usize, edges: usize, symmetric: bool) -> Self {
        Self { local, computed: local, edges, symmetric, copies_aggregate: false, held: local }
    }
}

/// Per conv layer, the resident bytes of the model's buffers after a training step on a graph
/// of `rows` (the input copy `acts[0]` counts with layer 0, the pool with the last layer).
/// Derived from what `gnn_core::model` and the convs allocate; a model is built (parameters
/// only) to read each conv's widths, exchange point and whether its backward reads its input.
///
/// Every array is `local` rows tall, but arrays start zero-allocated (fresh pages the kernel
/// backs only once written), and under edge-cut (`computed < local`) rows past the computed
/// ones are written only where an exchange lands. GCN and GraphSAGE hand those rows' pages back
/// once read or pushed (`gnn_core`'s `zero_rows_from`), so every array counts `computed` rows
/// and the halo rows in flight (one block written at a time) are a term of their own. GAT
/// keeps what it pulls (its backward reads the halo rows of its input or of `x W`): a layer's
/// input counts `local` rows when it pulls its input, its cache when it pulls transformed
/// rows, and the pooled buffers, which take turns as pulled inputs, count `local`. With every row computed (one process,
/// vertex-cut) this is what [`Model::buffer_bytes`] reports.
pub fn model_buffers(cfg: &ModelConfig, rows: Rows) -> Result<Vec<BufferBytes>, ModelError> {
    let model = Model::new(cfg.clone())?;
    let Rows { local, computed: m, edges, .. } = rows;
    // Rows of an array that keeps what an exchange lands in it.
    let landed = if cfg.kind == ConvKind::Gat { local } else { m };
    let convs: Vec<_> = model.convs().collect();
    let layers = convs.len();
    let pulls_input = |l: usize| convs.get(l).is_some_and(|c| c.exchange_point() == ExchangePoint::Input);
    let input_rows = |l: usize| if pulls_input(l) { landed } else { m };
    let mut out = Vec::with_capacity(layers);
    // Conv 0's input copy `acts[0]` (`local x in_dim`, dropout applied in place) is kept
    // only when its backward reads it; otherwise it goes to the pool after conv 0's forward.
    // Its held rows are written by the copy itself and never released.
    let keeps_input = convs.first().is_some_and(|c| c.backward_reads_input());
    let input_copy_rows = input_rows(0).max(rows.held);
    for (l, conv) in convs.iter().enumerate() {
        let (din, dout) = (conv.in_dim(), conv.out_dim());
        let hidden = l + 1 < layers;
        let mut b = BufferBytes {
            // The logits `acts[layers]`, and the kept input copy. Hidden activations are
            // pooled: backward hands each to the pool once its last reader is done.
            activations: if hidden { 0 } else { input_rows(l + 1) * dout * 4 }
                + if l == 0 && keeps_input { input_copy_rows * din * 4 } else { 0 },
            conv_caches: match cfg.kind {
                // One array: `x W` (its pulled rows released once aggregated) when the layer
                // exchanges transformed rows (narrower output), else the aggregate `A x` of the
                // computed rows; backward reuses it for the gradient.
                ConvKind::Gcn | ConvKind::Sage => match conv.exchange_point() {
                    ExchangePoint::Transformed => m * dout * 4,
                    ExchangePoint::Input => m * din * 4,
                },
                ConvKind::Gat => gat_cache(cfg, hidden, local, edges),
            },
            pool: 0,
        };
        if !hidden {
            // Every pooled buffer is as wide as the hidden activations (`local x in_dim` of
            // the last conv). Forward takes one per hidden activation, all alive into
            // backward; backward's first input gradient finds the pool empty, and with
            // LayerNorm so does the first hidden layer (its forward's LayerNorm input, or
            // backward's gradient through it). Every other take finds a returned buffer,
            // the input copy among them: it is the first buffer a later take reshapes, and
            // keeps its held rows.
            let copy_rows = if keeps_input { landed } else { input_copy_rows.max(landed) };
            b.pool = if layers > 1 {
                ((layers + usize::from(cfg.layer_norm) - 1) * landed + copy_rows) * din * 4
            } else if keeps_input {
                0
            } else {
                landed * din * 4
            };
        }
        out.push(b);
    }
    Ok(out)
}

/// The halo rows written at a time under edge-cut, at the widest width `exchanging` (from
/// [`exchange_width`]): GCN and GraphSAGE release each pulled block once aggregated and each
/// pushed gradient once sent ([`model_buffers`]), so one block is resident at a time; two
/// when copies aggregate too (their partial aggregates beside the pulled inputs, or the pulled
/// gradient beside the transposed aggregation's). GAT's halo rows are counted in its buffers.
fn halo_in_flight(cfg: &ModelConfig, rows: Rows, exchanging: usize) -> usize {
    let blocks = if rows.copies_aggregate { 2 } else { 1 };
    if cfg.kind == ConvKind::Gat { 0 } else { blocks * (rows.local - rows.computed) * exchanging * 4 }
}

/// GAT's cache (`layers/gat.rs`, `GatCache`): per row `x W`, its two attention terms, the
/// per-head maximum and self weight, the `[denominators | outputs]` block and its gradient,
/// `d h` and the attention terms' gradients; per edge and head the softmax weights and their
/// gradients, plus attention-dropout keep flags when that dropout is on.
fn gat_cache(cfg: &ModelConfig, hidden: bool, n: usize, edges: usize) -> usize {
    let (heads, head_dim) = if hidden { (cfg.heads, cfg.hidden) } else { (cfg.out_heads, cfg.out_dim) };
    let width = heads * head_dim;
    let per_row = 4 * width + 8 * heads;
    let per_edge = 2 * heads;
    let floats = n * per_row + edges * per_edge;
    let keep = if cfg.attn_dropout > 0.0 { (edges + n) * heads } else { 0 };
    floats * 4 + keep
}

/// Sum of a model's buffers over its layers.
pub fn sum_buffers(layers: &[BufferBytes]) -> BufferBytes {
    layers.iter().fold(BufferBytes::default(), |a, b| BufferBytes {
        activations: a.activations + b.activations,
        conv_caches: a.conv_caches + b.conv_caches,
        pool: a.pool + b.pool,
    })
}

/// Bytes per row of an `AggGraph`'s tables: the `central` flag, global id, in and out degree,
/// four normalisation values.
const ROW_TABLES: usize = 1 + 4 + 2 * 4 + 4 * 4;

/// A CSR as `graph_partition::Csr` stores it: u64 row pointers, u32 column ids.
fn csr_bytes(rows: usize, edges: usize) -> usize {
    (rows + 1) * 8 + edges * 4
}

/// Who trains the model, for the terms that differ.
#[derive(Debug, Clone, Copy)]
enum Trainer {
    /// The single process: its `AggGraph` shares the dataset's CSR (`AggGraph::single_shared`).
    Single,
    /// A distributed worker: its `AggGraph` shares its part's CSR (`LocalGraph::shared_csr`),
    /// its exchange holds `exchange` bytes of buffers, and `halo` bytes of halo rows are
    /// written at a time ([`halo_in_flight`]).
    Worker { exchange: usize, halo: usize },
}

/// The terms of training a model on a graph of `rows`: its `AggGraph`, parameters and
/// optimizer state and each layer's buffers (the loss gradient is the logits' buffer:
/// `Model::take_logits`).
fn training_terms(est: &mut Estimate, model: &ModelConfig, rows: Rows, trainer: Trainer) -> Result<(), ModelError> {
    let Rows { local: n, edges, symmetric, .. } = rows;
    // The adjacency itself is the dataset's or the share's (counted there). Unless the graph
    // is its own transpose `AggGraph` holds the transpose; GAT's backward builds the
    // transpose's entry permutation (usize per edge).
    let transposes = usize::from(!symmetric);
    let perm = if model.kind == ConvKind::Gat { edges * 8 } else { 0 };
    est.add("aggregation graph (transpose, permutation)", transposes * csr_bytes(n, edges) + perm);
    est.add("aggregation ids, degrees, norms", n * ROW_TABLES);
    // Parameters, gradients, Adam's two moments and the best epoch's copy.
    let params = Model::new(model.clone())?.num_params();
    est.add("parameters, gradients, Adam moments, best copy", params * 4 * 5);
    let layers = model_buffers(model, rows)?;
    for (l, b) in layers.iter().enumerate() {
        est.add(format!("layer {l} kept input or logits, caches"), b.activations + b.conv_caches);
    }
    est.add("pooled activations and gradients", layers.iter().map(|b| b.pool).sum());
    if let Trainer::Worker { exchange, halo } = trainer {
        est.add("halo rows in flight", halo);
        est.add("exchange buffers", exchange);
    }
    Ok(())
}

/// Bytes of a dataset's labels and split lists.
fn labels_bytes(dataset: &Dataset) -> usize {
    let labels = match &dataset.labels {
        Labels::Classes(c) => c.len() * 4,
        Labels::MultiLabel(t) => t.len() * 4,
    };
    let s = &dataset.splits;
    labels + (s.train.len() + s.valid.len() + s.test.len()) * 4
}

/// The dataset as loaded: its CSR, features, labels and splits.
fn dataset_terms(est: &mut Estimate, dataset: &Dataset) {
    est.add("dataset graph (CSR)", csr_bytes(dataset.num_nodes(), dataset.graph.num_edges()));
    est.add("dataset features", dataset.features.len() * 4);
    est.add("dataset labels and splits", labels_bytes(dataset));
}

/// Single-process full-batch training on `dataset`: the dataset, the whole-graph
/// `AggGraph` and the model over every vertex.
pub fn single(config: &TrainConfig, dataset: &Dataset) -> Result<Estimate, ModelError> {
    let mut est = Estimate::default();
    dataset_terms(&mut est, dataset);
    let (n, edges) = (dataset.num_nodes(), dataset.graph.num_edges());
    let model = config.model_config(dataset.num_features(), dataset.num_classes);
    let rows = Rows::every_row(n, edges, dataset.graph.is_symmetric());
    training_terms(&mut est, &model, rows, Trainer::Single)?;
    sampled_graph_terms(&mut est, config, rows);
    Ok(est)
}

/// Full-batch training on sampled in-edges (`fanouts` without a batch size) holds one graph per
/// layer for a step (`AggGraph::with_sampled_in_edges`): a CSR of at most `fanout` in-edges
/// per computed row, its transpose, and the per-row tables of a graph. Bounded by the rows'
/// full in-edges, whichever is smaller: the draws are not known before the run.
fn sampled_graph_terms(est: &mut Estimate, config: &TrainConfig, rows: Rows) {
    let Some(fanouts) = config.minibatch.fanouts.as_ref().filter(|_| config.minibatch.batch_size.is_none()) else {
        return;
    };
    let Rows { local: n, computed, edges, .. } = rows;
    let bytes: usize = fanouts
        .as_slice()
        .iter()
        .map(|f| 2 * csr_bytes(n, edges.min(computed.saturating_mul(f.limit(usize::MAX)))) + n * ROW_TABLES)
        .sum();
    est.add("sampled layer graphs (CSR, transpose, ids, degrees, norms)", bytes);
}

/// One worker training on its part, which holds `held_bytes` (`WorkerShare::held_bytes`: the
/// local graph, the features of its computed rows, and of its halo rows under the halo feature
/// cache, labels, splits). `halo_held`: the halo feature cache is on (the method's
/// `HaloFeatures::Cached`); under it layer 0 exchanges nothing, so it sizes no exchange
/// buffer. `message_bytes`: the exchange's calls run in rounds of messages this large
/// (`gnn_core::exchange::MessageCap`; `None` when codecs code the rows). The rounds are counted
/// from this worker's largest peer; the agreed count, from every worker's, can only be larger.
#[allow(clippy::too_many_arguments)] // the run, the part and its sizes.
pub fn worker(
    config: &TrainConfig,
    part: &LocalGraph,
    cut: CutKind,
    halo_held: bool,
    in_dim: usize,
    classes: usize,
    held_bytes: u64,
    message_bytes: Option<usize>,
) -> Result<Estimate, ModelError> {
    let n = part.num_local();
    let primaries_only = config.distributed.primaries_only(cut);
    let copies_aggregate = primaries_only && cut == CutKind::VertexCut;
    let computed = if primaries_only { part.num_primary() } else { n };
    let (symmetric, edges) = (part.csr().is_symmetric(), part.num_edges());
    let held = if halo_held { n } else { computed };
    let rows = Rows { local: n, computed, edges, symmetric, copies_aggregate, held };
    let sent: usize = (0..part.num_parts()).map(|q| part.send(q).len()).sum();
    let received: usize = (0..part.num_parts()).map(|q| part.recv(q).len()).sum();
    let one_peer = part.largest_peer_list();
    let traffic = Traffic {
        rows: sent + received + one_peer,
        layers: usize::from(halo_held)..usize::MAX,
        cap: message_bytes.map(|bytes| MessageCap { bytes, pair_rows: one_peer }),
    };
    worker_of(config, rows, in_dim, classes, held_bytes as usize, traffic)
}

/// What sizes a worker's exchange buffers.
#[derive(Debug, Clone)]
struct Traffic {
    /// Rows in the buffers during a call of one round: the sent and the received rows plus
    /// the largest peer's ([`exchange_width`]).
    rows: usize,
    /// The layers that exchange.
    layers: Range<usize>,
    /// Calls run in rounds, each holding its share of `rows`.
    cap: Option<MessageCap>,
}

/// [`worker`] from counts.
fn worker_of(
    config: &TrainConfig,
    rows: Rows,
    in_dim: usize,
    classes: usize,
    held_bytes: usize,
    traffic: Traffic,
) -> Result<Estimate, ModelError> {
    let mut est = Estimate::default();
    est.add("share (local graph, features, labels)", held_bytes);
    let model = config.model_config(in_dim, classes);
    let width = exchange_width(&model, traffic.layers)?;
    let rounds = traffic.cap.map_or(1, |cap| cap.rounds(width));
    let exchange = traffic.rows.div_ceil(rounds) * width * 4;
    let trainer = Trainer::Worker { exchange, halo: halo_in_flight(&model, rows, width) };
    training_terms(&mut est, &model, rows, trainer)?;
    sampled_graph_terms(&mut est, config, rows);
    Ok(est)
}

/// The widest rows the `layers` exchange: the replica router keeps one message per peer each
/// way (identity-coded: 4 bytes a value) as spares across calls, and the decoded rows of one
/// peer's message (`gnn_core::exchange::replica_router` lands a call's messages one at a time),
/// so its buffers hold the sent and the received rows plus the largest peer's at this width.
fn exchange_width(model: &ModelConfig, layers: Range<usize>) -> Result<usize, ModelError> {
    let m = Model::new(model.clone())?;
    Ok(m.convs()
        .enumerate()
        .filter(|(l, _)| layers.contains(l))
        .map(|(_, c)| match c.exchange_point() {
            ExchangePoint::Transformed => c.out_dim(),
            ExchangePoint::Input => c.in_dim(),
        })
        .max()
        .unwrap_or(0))
}

/// A distributed run's two peaks: rank 0's setup and the workers' training.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phases {
    /// Rank 0 while it partitions and hands out shares.
    pub setup: Estimate,
    /// Every worker of the process training, terms summed over the workers by name.
    pub training: Estimate,
    /// Each worker's training estimate, in rank order.
    pub per_worker: Vec<u64>,
}

impl Phases {
    /// The larger phase's total.
    pub fn peak(&self) -> u64 {
        self.setup.total().max(self.training.total())
    }

    pub fn breakdown(&self) -> String {
        format!("setup (rank 0):\n{}\ntraining:\n{}", self.setup.breakdown(), self.training.breakdown())
    }
}

/// A distributed run whose process holds the workers of `workers` (every in-process worker; an
/// MPI rank's own), rank 0 included when `shares` is given (the `held_bytes` of the shares this
/// process keeps: every worker's in process, rank 0's own under MPI).
///
/// Setup (rank 0, `distributed::setup`): the whole dataset and the partitioner's input (METIS
/// gets a 32-bit copy of the symmetric CSR and an assignment; the others an assignment), freed
/// before the shares are cut; then the shares are cut, encoded and sent one at a time, so the
/// process holds the shares it keeps plus one encoded share in flight (the largest counts).
/// The dataset is dropped after the hand-out. Training: the workers' estimates summed.
pub fn distributed(dataset: Option<&Dataset>, metis: bool, shares: &[u64], workers: &[Estimate]) -> Phases {
    let mut setup = Estimate::default();
    if let Some(dataset) = dataset {
        dataset_terms(&mut setup, dataset);
        let (n, edges) = (dataset.num_nodes(), dataset.graph.num_edges());
        let partitioner = if metis { (n + 1) * 4 + edges * 4 + n * 4 } else { n * 4 };
        let kept = shares.iter().sum::<u64>() as usize;
        let in_flight = shares.iter().copied().max().unwrap_or(0) as usize;
        // The partitioner's input is freed before the shares are cut: the larger one counts.
        if partitioner > kept + in_flight {
            setup.add("partitioner input and assignment", partitioner);
        } else {
            setup.add("shares kept", kept);
            setup.add("one encoded share in flight", in_flight);
        }
    }
    let mut training = Estimate::default();
    for w in workers {
        for t in &w.terms {
            match training.terms.iter_mut().find(|s| s.name == t.name) {
                Some(s) => s.bytes += t.bytes,
                None => training.terms.push(t.clone()),
            }
        }
    }
    Phases { setup, training, per_worker: workers.iter().map(Estimate::total).collect() }
}

/// [`distributed`] before partitioning, for `workers` workers in this process: each worker is
/// taken to hold `1 / workers` of the vertices, edges and features and no halo rows or mirrors,
/// so the training phase is a lower bound (the check after partitioning uses the real counts);
/// shares are as large as the dataset's graph, features and labels.
pub fn before_partitioning(
    config: &TrainConfig,
    dataset: &Dataset,
    metis: bool,
    workers: usize,
) -> Result<Phases, ModelError> {
    let w = workers.max(1);
    let (n, edges) = (dataset.num_nodes().div_ceil(w), dataset.graph.num_edges().div_ceil(w));
    let held = csr_bytes(n, edges) + n * dataset.num_features() * 4 + labels_bytes(dataset) / w + n * 16;
    // Parts of a symmetric graph are taken to be symmetric too (no halo rows).
    let rows = Rows::every_row(n, edges, dataset.graph.is_symmetric());
    let traffic = Traffic { rows: 0, layers: 0..0, cap: None };
    let one = worker_of(config, rows, dataset.num_features(), dataset.num_classes, held, traffic)?;
    let shares = vec![held as u64; w];
    Ok(distributed(Some(dataset), metis, &shares, &vec![one; w]))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use gnn_core::{AggGraph, ForwardCtx, LayerOrder, NoExchange};
    use graph_partition::{Csr, EdgeListOptions};
    use ndarray::Array2;

    fn ring_graph(n: usize) -> AggGraph {
        let edges: Vec<(u32, u32)> =
            (0..n as u32).flat_map(|v| [(v, (v + 1) % n as u32), (v, (v + 5) % n as u32)]).collect();
        AggGraph::single(&Csr::from_edges(n, &edges, EdgeListOptions::default()).unwrap()).unwrap()
    }

    /// The estimate's model terms equal the bytes the model holds after a training step, and
    /// after a second, for every conv, depth, LayerNorm setting and layer order.
    #[test]
    fn model_terms_equal_the_buffers_a_training_step_leaves() {
        let n = 37;
        let graph = ring_graph(n);
        let x = Array2::from_shape_fn((n, 9), |(i, j)| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.4);
        for kind in ConvKind::ALL {
            for layers in 1..=4 {
                for layer_norm in [false, true] {
                    for order in LayerOrder::ALL {
                        // Widths on both sides of the inputs, so both exchange points occur.
                        let hidden = if layers % 2 == 0 { 6 } else { 13 };
                        let mut cfg = match kind {
                            ConvKind::Gcn => ModelConfig::gcn(9, hidden, 4),
                            ConvKind::Sage => ModelConfig::sage(9, hidden, 4),
                            ConvKind::Gat => ModelConfig { heads: 2, out_heads: 3, ..ModelConfig::gat(9, hidden, 4) },
                        };
                        cfg.layers = layers;
                        cfg.layer_norm = layer_norm;
                        cfg.layer_order = order;
                        let mut model = Model::new(cfg.clone()).unwrap();
                        let rows = Rows::every_row(n, graph.fwd().num_edges(), true);
                        let estimated = sum_buffers(&model_buffers(&cfg, rows).unwrap());
                        // The first step allocates, the second reuses: both leave the same.
                        for epoch in 1..=2 {
                            let ctx = ForwardCtx::train(3, epoch);
                            let logits = model.forward(&graph, &x, &mut NoExchange, ctx).unwrap();
                            let dlogits = logits.mapv(|v| v * 0.01);
                            model.backward(&graph, dlogits, &mut NoExchange).unwrap();
                            assert_eq!(
                                model.buffer_bytes(),
                                estimated,
                                "{kind} {layers} layers, norm {layer_norm}, {order:?}, step {epoch}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The aggregation-graph term counts a transpose exactly when `AggGraph` holds one, and
    /// never a copy of the CSR: the single process's graph is the dataset's, a worker's its
    /// part's (`agg_graph_of` shares it).
    #[test]
    fn the_graph_term_follows_whether_a_transpose_is_held() {
        let one_way = Csr::from_edges(
            6,
            &[(0, 1), (1, 2), (2, 0), (3, 4)],
            EdgeListOptions { symmetrize: false, remove_self_loops: true },
        )
        .unwrap();
        for (csr, symmetric) in [(ring_graph(9).fwd().clone(), true), (one_way, false)] {
            assert_eq!(AggGraph::single(&csr).unwrap().holds_transpose(), !symmetric);
            assert_eq!(csr.is_symmetric(), symmetric);
            let shared = Arc::new(csr.clone());
            let graph = AggGraph::single_shared(Arc::clone(&shared)).unwrap();
            assert!(std::ptr::eq(graph.fwd(), &*shared), "the single process's graph is not a copy");
            let rows = Rows::every_row(csr.num_rows(), csr.num_edges(), symmetric);
            let adjacency = csr_bytes(csr.num_rows(), csr.num_edges()) as u64;
            let transposes = u64::from(!symmetric);
            for trainer in [Trainer::Single, Trainer::Worker { exchange: 0, halo: 0 }] {
                let mut est = Estimate::default();
                training_terms(&mut est, &ModelConfig::gcn(3, 4, 2), rows, trainer).unwrap();
                assert_eq!(est.terms[0].bytes, transposes * adjacency, "{trainer:?}, symmetric {symmetric}");
            }
        }
    }

    /// Under edge-cut, GCN and GraphSAGE buffers count the computed rows and one halo block at
    /// the widest exchanged width; GAT's count the halo rows it keeps.
    #[test]
    fn halo_rows_count_once_in_flight_except_for_gat() {
        let (computed, halo) = (40, 60);
        let edge_cut = Rows {
            local: computed + halo,
            computed,
            edges: 500,
            symmetric: false,
            copies_aggregate: false,
            held: computed,
        };
        let owned_only = Rows { local: computed, ..edge_cut };
        for cfg in [ModelConfig::gcn(9, 16, 4), ModelConfig::sage(9, 16, 4), ModelConfig::gat(9, 16, 4)] {
            let cfg = ModelConfig { layers: 3, ..cfg };
            let with_halo = sum_buffers(&model_buffers(&cfg, edge_cut).unwrap());
            let without = sum_buffers(&model_buffers(&cfg, owned_only).unwrap());
            let width = exchange_width(&cfg, 0..usize::MAX).unwrap();
            if cfg.kind == ConvKind::Gat {
                assert!(with_halo.pool > without.pool && halo_in_flight(&cfg, edge_cut, width) == 0);
            } else {
                // Layers 0 and 1 pull their 9- and 16-wide inputs, layer 2 its 4-wide `x W`.
                assert_eq!(width, 16, "{}", cfg.kind);
                assert_eq!(with_halo, without, "{}", cfg.kind);
                assert_eq!(halo_in_flight(&cfg, edge_cut, width), halo * 16 * 4);
            }
        }
    }

    /// Under the halo feature cache layer 0's input copy holds every local row: kept (GraphSAGE
    /// reads it in backward) or as one pooled buffer (GCN hands it to the pool).
    #[test]
    fn held_input_rows_count_in_the_input_copy() {
        let pulled = Rows { local: 100, computed: 40, edges: 500, symmetric: false, copies_aggregate: false, held: 40 };
        let cached = Rows { held: 100, ..pulled };
        for cfg in [ModelConfig::gcn(9, 16, 4), ModelConfig::sage(9, 16, 4)] {
            let cfg = ModelConfig { layers: 3, ..cfg };
            let (a, b) = (
                sum_buffers(&model_buffers(&cfg, pulled).unwrap()),
                sum_buffers(&model_buffers(&cfg, cached).unwrap()),
            );
            let grown =
                if cfg.kind == ConvKind::Sage { (b.activations - a.activations, 9) } else { (b.pool - a.pool, 16) };
            assert_eq!(grown.0, 60 * grown.1 * 4, "{}", cfg.kind);
        }
    }

    /// Exact calls in rounds hold a round's share of the exchange's rows: the rounds
    /// `MessageCap` derives from the largest peer's rows.
    #[test]
    fn rounds_divide_the_exchange_buffers() {
        let config = TrainConfig::from_toml_str("model = \"gcn\"\nlayers = 3\nhidden = 16\n", "test").unwrap();
        let rows =
            Rows { local: 1000, computed: 400, edges: 5000, symmetric: false, copies_aggregate: false, held: 400 };
        let term = |cap| {
            let traffic = Traffic { rows: 1500, layers: 0..usize::MAX, cap };
            let est = worker_of(&config, rows, 9, 4, 0, traffic).unwrap();
            est.terms.iter().find(|t| t.name == "exchange buffers").unwrap().bytes
        };
        assert_eq!(term(None), 1500 * 16 * 4);
        // 600 rows of 64 bytes to one peer, 10,000-byte messages: 4 rounds.
        let cap = MessageCap { bytes: 10_000, pair_rows: 600 };
        assert_eq!(cap.rounds(16), 4);
        assert_eq!(term(Some(cap)), 375 * 16 * 4);
    }

    #[test]
    fn breakdown_lists_every_term_and_the_total() {
        let mut est = Estimate::default();
        est.add("features", 3 << 30);
        est.add("graph", 1536);
        let text = est.breakdown();
        assert!(text.contains("features") && text.contains("3.00 GiB") && text.contains("1.50 KiB"), "{text}");
        assert!(text.lines().last().unwrap().contains("total"), "{text}");
        assert_eq!(est.total(), (3 << 30) + 1536);
        assert_eq!(format_bytes(1023), "1023 B");
    }
}
