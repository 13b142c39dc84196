//! The device memory a full-graph training run holds, from shapes alone (no GPU): the
//! resident buffers (parameters with their gradients and Adam moments, features, the folded
//! graph, the splits) and the most a training step adds at once. The step is walked
//! allocation by allocation in the order the device model (`DeviceModel`, feature `cuda`)
//! allocates and frees its buffers (every device buffer is freed when its owner drops it), so
//! the peak is what the device's memory pool reaches; the GPU test compares it with the pool's
//! measured high-water mark.

use crate::dropout::DropoutSite;
use crate::gpu::column_chunks;
use crate::gpu::plan::{DevicePlan, LayerPlan};
use crate::model::{ConvKind, LayerOrder, ModelConfig};

const F32: u64 = 4;

/// The sizes of a training run's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shapes {
    /// Vertices of the (whole) graph.
    pub nodes: usize,
    /// Stored edges of the graph (its CSR's entries, self loops not added).
    pub edges: usize,
    /// Rows of the train, validation and test splits.
    pub split_rows: [usize; 3],
    /// Targets per labelled row: 1 for a class, the label columns for multi-label targets.
    pub targets_per_row: usize,
    /// A worker's part of a cut graph: GAT's softmax runs split around the replica syncs, and
    /// each GAT layer holds its `[sums | numerators]` block (`DeviceModel`'s part passes).
    pub part: bool,
}

/// Bytes a run holds on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Held from upload to the end of training.
    pub resident: u64,
    /// The most a training step holds at once on top of `resident`.
    pub step: u64,
}

impl Footprint {
    pub fn total(&self) -> u64 {
        self.resident + self.step
    }

    /// The footprint of training `cfg` (planned as `plan`) on data of `shapes`.
    pub fn of(plan: &DevicePlan, cfg: &ModelConfig, shapes: &Shapes) -> Self {
        Self { resident: resident(plan, cfg, shapes), step: step(plan, cfg, shapes) }
    }
}

/// Entries of the folded aggregation CSR (`plan::aggregation`): a self loop per row except
/// for GraphSAGE, whose root term has its own weight.
fn entries(kind: ConvKind, shapes: &Shapes) -> u64 {
    (shapes.edges + if kind == ConvKind::Sage { 0 } else { shapes.nodes }) as u64
}

fn resident(plan: &DevicePlan, cfg: &ModelConfig, s: &Shapes) -> u64 {
    let n = s.nodes as u64;
    let params: u64 = plan.tensors.iter().map(|(_, slot)| slot.len() as u64).sum();
    // Value, gradient and both moments.
    let mut bytes = 4 * params * F32;
    bytes += n * cfg.in_dim as u64 * F32;
    bytes += graph_bytes(plan, s);
    for layer in plan.layers.iter().filter(|l| l.attention.is_some() && !l.concat && l.heads > 1) {
        bytes += (layer.heads * layer.head_dim * layer.head_dim) as u64 * F32;
    }
    for rows in s.split_rows.map(|r| r as u64) {
        // Rows, their classes or targets, and the loss scratch (loss and hits per row).
        bytes += rows * 4 + rows * s.targets_per_row as u64 * 4 + 2 * rows * F32;
    }
    bytes
}

/// The device bytes of a graph of `s` uploaded for `plan`'s layers (one view of it): its CSR's
/// row pointer (u64), indices (u32) and values, the global ids (u32), and the transpose (GCN
/// and GraphSAGE) or a head-expanded CSR per head count with its two permutations and a
/// column of ones (GAT).
pub fn graph_bytes(plan: &DevicePlan, s: &Shapes) -> u64 {
    let (n, nnz) = (s.nodes as u64, entries(plan.kind, s));
    let mut bytes = (n + 1) * 8 + nnz * 4 + nnz * F32 + n * 4;
    if plan.kind != ConvKind::Gat {
        bytes += (n + 1) * 8 + nnz * 4 + nnz * F32;
    }
    let mut heads: Vec<usize> = plan.layers.iter().filter(|l| l.attention.is_some()).map(|l| l.heads).collect();
    heads.sort_unstable();
    heads.dedup();
    for h in heads.into_iter().map(|h| h as u64) {
        bytes += (n * h + 1) * 8 + 3 * nnz * h * 4 + n * h * F32;
    }
    bytes
}

/// Live bytes and their high-water mark.
#[derive(Default)]
struct Walk {
    live: u64,
    peak: u64,
}

impl Walk {
    fn alloc(&mut self, bytes: u64) {
        self.live += bytes;
        self.peak = self.peak.max(self.live);
    }

    fn free(&mut self, bytes: u64) {
        self.live -= bytes;
    }

    /// A buffer allocated and freed before anything else is.
    fn transient(&mut self, bytes: u64) {
        self.alloc(bytes);
        self.free(bytes);
    }
}

fn active(p: f32) -> bool {
    DropoutSite::new(p, 0, 0, 0).is_active()
}

/// A column reduction's partial sums ([`column_chunks`]).
fn partials(rows: usize, cols: usize) -> u64 {
    (column_chunks(rows, cols).0 * cols) as u64 * F32
}

/// What a training step adds on top of the resident buffers, walked through the forward (with
/// the previous evaluation's caches and logits still held: each layer's goes as the training
/// forward replaces it), the loss and the backward.
fn step(plan: &DevicePlan, cfg: &ModelConfig, s: &Shapes) -> u64 {
    let n = s.nodes as u64;
    let e = entries(plan.kind, s);
    let out_width = plan.layers.last().map_or(0, |l| l.out_dim) as u64;
    let evaluation: Vec<Cache> =
        plan.layers.iter().map(|layer| forward_layer(&mut Walk::default(), layer, cfg, s, e, false).1).collect();
    let mut w = Walk::default();
    w.alloc(evaluation.iter().map(|c| c.total).sum::<u64>() + n * out_width * F32);
    w.alloc(n * cfg.in_dim as u64 * F32); // the input copy, layer 0's cache
    // Per layer: its cache (held until its backward), and its output.
    let mut caches = Vec::with_capacity(plan.layers.len());
    for (layer, held) in plan.layers.iter().zip(&evaluation) {
        let (out, cache) = forward_layer(&mut w, layer, cfg, s, e, true);
        w.free(held.total);
        caches.push((cache, out));
    }
    w.free(n * out_width * F32);
    let logits = caches.last().map_or(0, |c| c.1);
    // The loss: its gradient (held through the backward), two scalars and a reduction.
    w.alloc(n * out_width * F32);
    w.transient(4 + 8 + partials(s.split_rows[0], 1));
    // Backward, last layer first: `d` is the gradient of the layer's output; a layer's cache
    // goes when its backward ends, its input one layer later (the activation's derivative).
    let mut d = n * out_width * F32;
    let mut input_kept = 0;
    for (l, layer) in plan.layers.iter().enumerate().rev() {
        let (cache, _) = caches[l];
        let (dout, din) = (layer.out_dim as u64, layer.in_dim as u64);
        if layer.hidden && layer.norm.is_some() {
            w.alloc(n * dout * F32);
            w.transient(2 * partials(s.nodes, layer.out_dim));
            w.free(d);
            d = n * dout * F32;
        }
        w.transient(partials(s.nodes, layer.out_dim));
        let dx = if l > 0 { n * din * F32 } else { 0 };
        backward_layer(&mut w, layer, s, e, dx);
        w.free(d);
        d = dx;
        w.free(input_kept);
        input_kept = cache.input;
        w.free(cache.total - cache.input);
    }
    w.free(d + input_kept);
    debug_assert_eq!(w.live, logits, "every step buffer but the logits is freed");
    w.peak
}

/// Bytes of one layer's forward cache, and of its input among them.
#[derive(Clone, Copy)]
struct Cache {
    total: u64,
    input: u64,
}

/// Walks one layer's forward (the input is live already; dropout only in `training`); returns
/// the bytes of its output and of its cache (input included).
fn forward_layer(
    w: &mut Walk,
    layer: &LayerPlan,
    cfg: &ModelConfig,
    s: &Shapes,
    e: u64,
    training: bool,
) -> (u64, Cache) {
    let n = s.nodes as u64;
    let (din, dout) = (layer.in_dim as u64, layer.out_dim as u64);
    let input = n * din * F32;
    let mut cache = input;
    let mut out;
    if layer.attention.is_some() {
        let (hs, hd) = (layer.heads as u64, layer.head_dim as u64);
        let (hw, eh) = (hs * hd, e * hs);
        let blocks = hs * hs * hd * F32;
        let attention = training && active(cfg.attn_dropout);
        // h, both block matrices, both alphas, scores, softmax, its dropped copy, the keep
        // flags, the dropped copy in expanded order, the per-head aggregation. A part also
        // holds each row's maximum until its sums are taken, the block of sums and numerators
        // (kept), and the quotient beside the product it divides.
        let sums = if s.part { n * (hs + hw) * F32 } else { 0 };
        w.alloc(n * hw * F32 + 2 * blocks + 2 * n * hs * F32);
        w.alloc(3 * eh * F32 + if attention { eh } else { 0 });
        if s.part {
            w.alloc(n * hs * F32 + sums);
            w.free(n * hs * F32);
        }
        w.alloc(eh * F32);
        w.alloc(n * hw * F32);
        if s.part {
            w.transient(n * hw * F32);
        }
        let mean = !layer.concat && layer.heads > 1;
        if mean {
            w.alloc(n * hd * F32);
        }
        // Freed as the conv returns: both alphas, the unpermuted dropped copy, and the
        // per-head output when it was averaged.
        w.free(2 * n * hs * F32 + eh * F32 + if mean { n * hw * F32 } else { 0 });
        out = n * dout * F32;
        cache += n * hw * F32 + 2 * blocks + 3 * eh * F32 + if attention { eh } else { 0 } + sums;
    } else {
        if layer.aggregates_first() {
            w.alloc(n * din * F32);
            cache += n * din * F32;
            w.alloc(n * dout * F32);
        } else {
            w.alloc(n * dout * F32);
            w.alloc(n * dout * F32);
            w.free(n * dout * F32);
        }
        out = n * dout * F32;
    }
    if layer.hidden {
        let site = training && active(cfg.dropout);
        let dropout_first = cfg.layer_order == LayerOrder::DropoutFirst;
        let fused = layer.norm.is_none() && !dropout_first;
        if !fused {
            if site && dropout_first {
                w.alloc(n * dout);
                cache += n * dout;
            }
            if layer.norm.is_some() {
                // Output, normalised rows and inverse deviations; the conv's output goes.
                w.alloc(2 * n * dout * F32 + n * F32);
                w.free(n * dout * F32);
                cache += n * dout * F32 + n * F32;
            }
        }
        if site && !dropout_first {
            // The dropped copy becomes the output; the activation's output and the flags stay.
            w.alloc(n * dout * F32 + n * dout);
            cache += n * dout * F32 + n * dout;
            out = n * dout * F32;
        }
    }
    (out, Cache { total: cache, input })
}

/// Walks one layer's backward temporaries, allocating the input gradient `dx` (0 for the
/// first layer, which returns none) and freeing everything else it allocated.
fn backward_layer(w: &mut Walk, layer: &LayerPlan, s: &Shapes, e: u64, dx: u64) {
    let (n, din, dout) = (s.nodes as u64, layer.in_dim as u64, layer.out_dim as u64);
    if layer.attention.is_some() {
        let (hs, hd) = (layer.heads as u64, layer.head_dim as u64);
        let (hw, eh) = (hs * hd, e * hs);
        // Head gradients, the attention's gradient, dh, the dropout-scaled and the softmax
        // gradients, the latter permuted, both alpha gradients; on a part, the block's gradient
        // and its numerator columns.
        let block = if s.part { n * (hs + hw) * F32 + n * hw * F32 } else { 0 };
        let temps = n * hw * F32 + eh * F32 + n * hw * F32 + 3 * eh * F32 + 2 * n * hs * F32 + block;
        w.alloc(temps);
        // Per attention vector: d_alpha^T h and its diagonal blocks (with their indices).
        w.transient(hs * hw * F32 + hs * hd * F32 + 2 * hs * 4);
        w.alloc(dx);
        w.free(temps);
    } else if layer.aggregates_first() {
        w.alloc(n * din * F32);
        w.alloc(dx);
        w.free(n * din * F32);
    } else {
        w.alloc(n * dout * F32);
        w.alloc(dx);
        w.free(n * dout * F32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    fn shapes(nodes: usize, edges: usize) -> Shapes {
        Shapes { nodes, edges, split_rows: [nodes / 2, nodes / 4, nodes / 4], targets_per_row: 1, part: false }
    }

    /// The resident part is the sum of the buffers the plan and the data name.
    #[test]
    fn resident_bytes_are_the_uploaded_buffers() {
        let cfg = ModelConfig { layers: 2, dropout: 0.0, input_dropout: 0.0, ..ModelConfig::gcn(8, 16, 3) };
        let model = Model::new(cfg.clone()).unwrap();
        let plan = DevicePlan::of(&model).unwrap();
        let s = shapes(100, 400);
        let params = model.num_params() as u64;
        // The folded CSR and its transpose, and the global ids.
        let graph = 2 * (101 * 8 + 500 * 4 + 500 * 4) + 100 * 4;
        let splits = (50 + 25 + 25) * (4 + 4 + 8);
        let want = 16 * params + 100 * 8 * 4 + graph + splits;
        assert_eq!(Footprint::of(&plan, &cfg, &s).resident, want);
    }

    /// Without dropout a two-layer GCN 8 -> 4 -> 3 transforms before it aggregates in both
    /// layers. In floats per vertex, the training forward starts with the last evaluation's
    /// caches (its input copy 8, layer 0's output 4) and logits (3) still held: with its own
    /// input copy (8) and layer 0's `x W` and `A (x W)` (4 + 4), 31. The last layer's
    /// backward holds less: the input copy, layer 0's output, the logits and their gradient
    /// (8 + 4 + 3 + 3), `A^T d` (3) and `(A^T d) W^T` (4), 25.
    #[test]
    fn the_step_peak_follows_the_buffers_of_the_walk() {
        let cfg = ModelConfig { layers: 2, dropout: 0.0, input_dropout: 0.0, ..ModelConfig::gcn(8, 4, 3) };
        let plan = DevicePlan::of(&Model::new(cfg.clone()).unwrap()).unwrap();
        assert_eq!(Footprint::of(&plan, &cfg, &shapes(10, 30)).step, 31 * 10 * F32);
    }

    /// Dropout, LayerNorm and GAT's attention only add: each configuration needs at least
    /// what the plain one needs, and GAT's per-entry buffers grow with the edges.
    #[test]
    fn dropout_norm_and_attention_add_to_the_step() {
        let s = shapes(50, 500);
        let plain = ModelConfig { dropout: 0.0, input_dropout: 0.0, ..ModelConfig::gcn(8, 16, 3) };
        let step = |cfg: &ModelConfig, s: &Shapes| {
            Footprint::of(&DevicePlan::of(&Model::new(cfg.clone()).unwrap()).unwrap(), cfg, s).step
        };
        let base = step(&plain, &s);
        assert!(step(&ModelConfig { dropout: 0.5, ..plain.clone() }, &s) > base);
        assert!(step(&ModelConfig { layer_norm: true, ..plain.clone() }, &s) > base);
        let gat = ModelConfig { attn_dropout: 0.5, ..ModelConfig::gat(8, 2, 3) };
        assert!(step(&gat, &shapes(50, 1000)) > step(&gat, &s));
        // On a part GAT holds its softmax's blocks besides; GCN holds nothing more.
        let part = Shapes { part: true, ..s };
        assert!(step(&gat, &part) > step(&gat, &s));
        assert_eq!(step(&plain, &part), base);
    }
}
