//! The host-side description of a model for the device path, built in every configuration so
//! its tests run without a GPU: which parameter tensors each layer uses (from the CPU
//! [`Model`]'s layout, so parameters copy both ways), and each convolution's fixed aggregation
//! as one weighted CSR with the self term folded in as a diagonal entry (a whole graph), or with
//! it kept apart to add after the exchange's sync (a worker's part: [`part_aggregation`]).
//!
//! `DevicePlan` splits and joins the flat parameter buffer and the per-tensor device buffers
//! (LayerNorm's scale and shift are tensors of their own), folds GCN's and GraphSAGE's aggregation
//! into one weighted CSR, expands GAT's CSR per head with its attention-dropout keys, and
//! [`pick_labels`] checks and picks a split's labels for the loss kernels (classes, or multi-label
//! target rows).

use graph_partition::Labels;

use crate::dropout::DropoutSite;
use crate::graph::AggGraph;
use crate::layers::ExchangePoint;
use crate::model::{ConvKind, Model};
use crate::params::ParamSlot;

mod batch;
mod part;
pub use batch::block_aggregations;
pub use part::{OverlapHalves, PartAggregation, overlap_halves, part_aggregation};

/// Why a model or graph cannot go to the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("model layout has no parameter `{0}`")]
    MissingParam(String),
    #[error("parameter vector has {got} values, the model has {expected}")]
    ParamLength { got: usize, expected: usize },
    #[error("the device path trains on a whole graph held by one process; this graph has {halo} halo rows")]
    NotWholeGraph { halo: usize },
    #[error(
        "GAT does not run with the masters alone computing: its softmax spans every replica's edges, so every replica computes"
    )]
    PartGat,
    #[error("labelled row {row} is out of range: {rows} rows have labels")]
    LabelledRow { row: u32, rows: usize },
    #[error("row {row} has label {label}, but the model predicts {classes} classes")]
    Label { row: u32, label: u32, classes: usize },
    #[error("the targets have {got} columns, but the model predicts {expected}")]
    TargetColumns { got: usize, expected: usize },
}

/// The tensors and shape of one convolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPlan {
    pub in_dim: usize,
    pub out_dim: usize,
    /// Index into [`DevicePlan::tensors`] of the weight (GraphSAGE: the neighbour weight).
    pub weight: usize,
    /// GraphSAGE's root weight.
    pub self_weight: Option<usize>,
    /// GAT's attention vectors (source, destination), `heads x head_dim` each.
    pub attention: Option<(usize, usize)>,
    pub bias: usize,
    /// GAT: heads and channels per head; 1 and `out_dim` otherwise.
    pub heads: usize,
    pub head_dim: usize,
    /// GAT: heads concatenated (hidden layers) rather than averaged (output layer).
    pub concat: bool,
    /// Followed by activation and dropout (every layer but the last).
    pub hidden: bool,
    /// LayerNorm's scale and shift (hidden layers of a model with `layer_norm`), applied
    /// after the conv and before the activation, as the CPU [`Model`] does.
    pub norm: Option<(usize, usize)>,
}

impl LayerPlan {
    /// Whether the conv aggregates (and on a part pulls) its input before its weight (`(A x) W`)
    /// rather than after (`A (x W)`): whichever aggregates the narrower matrix, as the CPU
    /// layers choose ([`ExchangePoint::choose`]; GAT's transformed rows are all its heads
    /// wide). GraphSAGE's root term `x W_self` is added either way.
    pub fn aggregates_first(&self) -> bool {
        let transformed = if self.attention.is_some() { self.heads * self.head_dim } else { self.out_dim };
        ExchangePoint::choose(self.in_dim, transformed) == ExchangePoint::Input
    }
}

/// A model as the device holds it: one buffer per parameter tensor, in layout order.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePlan {
    pub kind: ConvKind,
    /// Name and place in the CPU model's flat buffer of each tensor.
    pub tensors: Vec<(String, ParamSlot)>,
    pub layers: Vec<LayerPlan>,
    num_params: usize,
}

impl DevicePlan {
    /// The plan of `model`'s architecture.
    pub fn of(model: &Model) -> Result<Self, PlanError> {
        let cfg = model.config();
        let tensors: Vec<(String, ParamSlot)> = model.param_info().iter().map(|p| (p.name.clone(), p.slot)).collect();
        let find = |name: String| tensors.iter().position(|(n, _)| *n == name).ok_or(PlanError::MissingParam(name));
        let layers = model
            .convs()
            .enumerate()
            .map(|(l, conv)| {
                let hidden = l + 1 < cfg.layers;
                let p = |suffix: &str| find(format!("conv{l}.{suffix}"));
                let norm = (hidden && cfg.layer_norm)
                    .then(|| Ok((find(format!("norm{l}.gamma"))?, find(format!("norm{l}.beta"))?)))
                    .transpose()?;
                let (weight, self_weight, attention) = match cfg.kind {
                    ConvKind::Gcn => (p("weight")?, None, None),
                    ConvKind::Sage => (p("weight_neigh")?, Some(p("weight_self")?), None),
                    ConvKind::Gat => (p("weight")?, None, Some((p("att_src")?, p("att_dst")?))),
                };
                let (heads, head_dim) = match attention {
                    Some((src, _)) => (tensors[src].1.rows, tensors[src].1.cols),
                    None => (1, conv.out_dim()),
                };
                Ok(LayerPlan {
                    in_dim: conv.in_dim(),
                    out_dim: conv.out_dim(),
                    weight,
                    self_weight,
                    attention,
                    bias: p("bias")?,
                    heads,
                    head_dim,
                    concat: cfg.kind == ConvKind::Gat && hidden,
                    hidden,
                    norm,
                })
            })
            .collect::<Result<_, PlanError>>()?;
        Ok(Self { kind: cfg.kind, tensors, layers, num_params: model.num_params() })
    }

    /// The flat parameter (or gradient) vector cut into the device's per-tensor buffers.
    pub fn split<'a>(&self, flat: &'a [f32]) -> Result<Vec<&'a [f32]>, PlanError> {
        if flat.len() != self.num_params {
            return Err(PlanError::ParamLength { got: flat.len(), expected: self.num_params });
        }
        Ok(self.tensors.iter().map(|(_, slot)| slot.slice(flat)).collect())
    }

    /// The inverse of [`DevicePlan::split`]: per-tensor values back into one flat vector.
    pub fn join(&self, parts: &[Vec<f32>]) -> Result<Vec<f32>, PlanError> {
        let mut flat = vec![0.0; self.num_params];
        for ((_, slot), part) in self.tensors.iter().zip(parts) {
            if part.len() != slot.len() {
                return Err(PlanError::ParamLength { got: part.len(), expected: slot.len() });
            }
            slot.slice_mut(&mut flat).copy_from_slice(part);
        }
        if parts.len() != self.tensors.len() {
            return Err(PlanError::ParamLength { got: parts.len(), expected: self.tensors.len() });
        }
        Ok(flat)
    }

    pub fn num_params(&self) -> usize {
        self.num_params
    }
}

/// A split's labels as the device's loss kernels read them, in the split's row order.
#[derive(Debug, Clone, PartialEq)]
pub enum PickedLabels {
    /// One class per row.
    Classes(Vec<u32>),
    /// One row of `width` targets per row, row-major.
    MultiLabel(Vec<f32>),
}

/// The labels of `rows`, checked so that the loss kernels index only inside logits of
/// `num_nodes x width`: every row below `num_nodes` and within `labels`, every class below
/// `width` (an unlabelled vertex's marker is not), multi-label targets `width` columns wide.
pub fn pick_labels(labels: &Labels, rows: &[u32], num_nodes: usize, width: usize) -> Result<PickedLabels, PlanError> {
    let labelled = num_nodes.min(match labels {
        Labels::Classes(classes) => classes.len(),
        Labels::MultiLabel(targets) => targets.nrows(),
    });
    if let Some(&row) = rows.iter().find(|&&r| r as usize >= labelled) {
        return Err(PlanError::LabelledRow { row, rows: labelled });
    }
    Ok(match labels {
        Labels::Classes(classes) => {
            let picked: Vec<u32> = rows.iter().map(|&r| classes[r as usize]).collect();
            if let Some((&row, &label)) = rows.iter().zip(&picked).find(|&(_, &c)| c as usize >= width) {
                return Err(PlanError::Label { row, label, classes: width });
            }
            PickedLabels::Classes(picked)
        }
        Labels::MultiLabel(targets) => {
            if targets.ncols() != width {
                return Err(PlanError::TargetColumns { got: targets.ncols(), expected: width });
            }
            PickedLabels::MultiLabel(rows.iter().flat_map(|&r| targets.row(r as usize).to_vec()).collect())
        }
    })
}

/// A CSR with one value per entry; row `v` lists the sources aggregated into `v`.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedCsr {
    pub indptr: Vec<u64>,
    pub indices: Vec<u32>,
    pub vals: Vec<f32>,
}

impl WeightedCsr {
    /// The rows `keep` names, every other row left empty: the same shape, each kept row with
    /// its entries in order, so that this product of the kept rows plus that of the others is
    /// this matrix's product, bit for bit (each row is summed in one of them, plus zero).
    pub fn rows_where(&self, keep: impl Fn(usize) -> bool) -> WeightedCsr {
        let n = self.indptr.len() - 1;
        let mut out = WeightedCsr { indptr: Vec::with_capacity(n + 1), indices: Vec::new(), vals: Vec::new() };
        out.indptr.push(0);
        for row in 0..n {
            if keep(row) {
                let range = self.indptr[row] as usize..self.indptr[row + 1] as usize;
                out.indices.extend_from_slice(&self.indices[range.clone()]);
                out.vals.extend_from_slice(&self.vals[range]);
            }
            out.indptr.push(out.indices.len() as u64);
        }
        out
    }

    /// The transpose of this square matrix, each entry's value following it (rows need not be
    /// sorted: GCN's and GAT's lead with the self loop): what the
    /// backward's `A^T x` runs on as a plain SpMM, rows in a fixed order, instead of
    /// scattering into `x` with atomics (deterministic, and no contention).
    pub fn transpose(&self) -> WeightedCsr {
        let n = self.indptr.len() - 1;
        let mut indptr = vec![0u64; n + 1];
        for &c in &self.indices {
            indptr[c as usize + 1] += 1;
        }
        for i in 0..n {
            indptr[i + 1] += indptr[i];
        }
        let mut fill = indptr.clone();
        let (mut indices, mut vals) = (vec![0u32; self.indices.len()], vec![0.0f32; self.vals.len()]);
        // Rows in order: each transposed row lists its sources in increasing row order.
        for row in 0..n {
            for k in self.indptr[row] as usize..self.indptr[row + 1] as usize {
                let slot = &mut fill[self.indices[k] as usize];
                indices[*slot as usize] = row as u32;
                vals[*slot as usize] = self.vals[k];
                *slot += 1;
            }
        }
        WeightedCsr { indptr, indices, vals }
    }
}

/// The aggregation of a `kind` convolution on `graph` as one weighted CSR: GCN's symmetric
/// coefficients with the self loop as each row's first entry, GraphSAGE's mean (no self
/// entry: its root term has its own weight), GAT's edges plus a leading self loop (values 1;
/// attention replaces them). The graph must be whole (no halo rows); a worker's part of a cut
/// graph keeps its self term apart ([`part_aggregation`]).
pub fn aggregation(graph: &AggGraph, kind: ConvKind) -> Result<WeightedCsr, PlanError> {
    let n = graph.num_local();
    if graph.num_primary() != n {
        return Err(PlanError::NotWholeGraph { halo: n - graph.num_primary() });
    }
    Ok(edge_csr(graph, kind, if kind == ConvKind::Sage { 0 } else { n }))
}

/// `kind`'s coefficients over every local row's in-edges, rows `0..looped` each led by its self
/// loop (GCN's self coefficient, GAT's 1).
fn edge_csr(graph: &AggGraph, kind: ConvKind, looped: usize) -> WeightedCsr {
    let n = graph.num_local();
    let (fwd, norms) = (graph.fwd(), graph.norms());
    let entries = fwd.num_edges() + looped.min(n);
    let mut out = WeightedCsr {
        indptr: Vec::with_capacity(n + 1),
        indices: Vec::with_capacity(entries),
        vals: Vec::with_capacity(entries),
    };
    out.indptr.push(0);
    for v in 0..n {
        if v < looped {
            out.indices.push(v as u32);
            out.vals.push(if kind == ConvKind::Gcn { norms.gcn_self[v] } else { 1.0 });
        }
        for &u in fwd.neighbors(v) {
            out.indices.push(u);
            out.vals.push(match kind {
                ConvKind::Gcn => norms.gcn_dst[v] * norms.gcn_src[u as usize],
                ConvKind::Sage => norms.mean[v],
                ConvKind::Gat => 1.0,
            });
        }
        out.indptr.push(out.indices.len() as u64);
    }
    out
}

/// A one-layer model of `width` columns in and out whose weight is the identity and whose
/// other parameters are zero: its logits are its aggregation (GraphSAGE's root term vanishes).
#[cfg(test)]
pub(crate) fn identity_model(kind: ConvKind, width: usize) -> Model {
    let cfg = crate::model::ModelConfig {
        kind,
        layers: 1,
        dropout: 0.0,
        input_dropout: 0.0,
        ..crate::model::ModelConfig::gcn(width, width, width)
    };
    let mut model = Model::new(cfg).unwrap();
    let plan = DevicePlan::of(&model).unwrap();
    let slot = plan.tensors[plan.layers[0].weight].1;
    let mut params = vec![0.0; model.num_params()];
    (0..width).for_each(|i| params[slot.offset + i * width + i] = 1.0);
    model.set_params(&params).unwrap();
    model
}

#[cfg(test)]
impl WeightedCsr {
    /// `A x` on the CPU, entry by entry: what the device's SpMM computes.
    pub(crate) fn apply(&self, x: &ndarray::Array2<f32>) -> ndarray::Array2<f32> {
        let mut out = ndarray::Array2::zeros((self.indptr.len() - 1, x.ncols()));
        for v in 0..self.indptr.len() - 1 {
            for k in self.indptr[v] as usize..self.indptr[v + 1] as usize {
                let row = x.row(self.indices[k] as usize).to_owned() * self.vals[k];
                let mut o = out.row_mut(v);
                o += &row;
            }
        }
        out
    }
}

/// Attention-dropout keep flags of every entry of [`aggregation`]`(graph, Gat)` and head,
/// keyed as the CPU's `GatConv` keys them (global source, global destination): the CPU
/// reference of the `attention_dropout` kernel.
pub fn attention_keep(graph: &AggGraph, csr: &WeightedCsr, site: &DropoutSite, heads: usize) -> Vec<u8> {
    let gids = graph.global_ids();
    let mut keep = vec![0u8; csr.indices.len() * heads];
    for v in 0..csr.indptr.len() - 1 {
        for k in csr.indptr[v] as usize..csr.indptr[v + 1] as usize {
            let src = gids[csr.indices[k] as usize];
            site.edge_keep(src, gids[v], &mut keep[k * heads..][..heads]);
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::NoExchange;
    use crate::layers::ForwardCtx;
    use crate::model::ModelConfig;
    use crate::testkit::{random_array, random_graph};
    use ndarray::Array2;

    #[test]
    fn parameters_round_trip_through_the_per_tensor_buffers() {
        for cfg in [ModelConfig::gcn(6, 5, 3), ModelConfig::sage(6, 5, 3), ModelConfig::gat(6, 2, 3)] {
            let model = Model::new(cfg.clone()).unwrap();
            let plan = DevicePlan::of(&model).unwrap();
            let parts: Vec<Vec<f32>> = plan.split(model.params()).unwrap().into_iter().map(<[f32]>::to_vec).collect();
            assert_eq!(parts.len(), model.param_info().len());
            assert_eq!(plan.join(&parts).unwrap(), model.params(), "{:?}", cfg.kind);
            let widths: Vec<(usize, usize)> = plan.layers.iter().map(|l| (l.in_dim, l.out_dim)).collect();
            let expect = if cfg.kind == ConvKind::Gat { [(6, 16), (16, 3)] } else { [(6, 5), (5, 3)] };
            assert_eq!(widths, expect);
            assert_eq!(plan.layers.iter().map(|l| l.hidden).collect::<Vec<_>>(), [true, false]);
        }
        let model = Model::new(ModelConfig::sage(6, 5, 3)).unwrap();
        let plan = DevicePlan::of(&model).unwrap();
        assert_eq!(plan.split(&[0.0; 3]).unwrap_err(), PlanError::ParamLength { got: 3, expected: plan.num_params() });
        let gat = DevicePlan::of(&Model::new(ModelConfig::gat(6, 2, 3)).unwrap()).unwrap();
        assert_eq!((gat.layers[0].heads, gat.layers[0].head_dim, gat.layers[0].concat), (8, 2, true));
        assert_eq!((gat.layers[1].heads, gat.layers[1].head_dim, gat.layers[1].concat), (1, 3, false));
    }

    /// LayerNorm's scale and shift go to the device as tensors of their own, one pair per
    /// hidden layer, starting from the CPU's initialisation (ones and zeros), and come back in
    /// place.
    #[test]
    fn layer_norm_parameters_round_trip_through_the_device_buffers() {
        for base in [ModelConfig::gcn(6, 5, 3), ModelConfig::sage(6, 5, 3), ModelConfig::gat(6, 2, 3)] {
            let cfg = ModelConfig { layer_norm: true, layers: 3, ..base };
            let mut model = Model::new(cfg.clone()).unwrap();
            // Distinct values everywhere, so a misplaced tensor cannot round-trip by accident.
            let distinct: Vec<f32> = (0..model.num_params()).map(|i| i as f32).collect();
            let plan = DevicePlan::of(&model).unwrap();
            let parts: Vec<Vec<f32>> = plan.split(model.params()).unwrap().into_iter().map(<[f32]>::to_vec).collect();
            let norms: Vec<_> = plan.layers.iter().map(|l| l.norm).collect();
            assert!(norms[..2].iter().all(Option::is_some) && norms[2].is_none(), "{:?}: {norms:?}", cfg.kind);
            for (l, (gamma, beta)) in norms.iter().flatten().copied().enumerate() {
                let width = plan.layers[l].out_dim;
                assert_eq!(plan.tensors[gamma].0, format!("norm{l}.gamma"));
                assert_eq!(plan.tensors[beta].0, format!("norm{l}.beta"));
                assert_eq!(parts[gamma], vec![1.0; width], "{:?} layer {l}: gamma starts at ones", cfg.kind);
                assert_eq!(parts[beta], vec![0.0; width], "{:?} layer {l}: beta starts at zeros", cfg.kind);
            }
            model.set_params(&distinct).unwrap();
            let parts: Vec<Vec<f32>> = plan.split(model.params()).unwrap().into_iter().map(<[f32]>::to_vec).collect();
            assert_eq!(parts.len(), model.param_info().len());
            assert_eq!(plan.join(&parts).unwrap(), distinct, "{:?}", cfg.kind);
        }
    }

    /// A one-layer GCN or GraphSAGE with identity weights and zero bias outputs its
    /// aggregation: the folded CSR must reproduce it.
    #[test]
    fn the_folded_aggregation_matches_the_cpu_layers() {
        let graph = random_graph(12, 40, 3);
        let x = random_array(12, 4, 1.0, 5);
        for kind in [ConvKind::Gcn, ConvKind::Sage] {
            let cfg = ModelConfig { kind, layers: 1, dropout: 0.0, input_dropout: 0.0, ..ModelConfig::gcn(4, 4, 4) };
            let mut model = Model::new(cfg).unwrap();
            let mut params = vec![0.0; model.num_params()];
            let eye = |slot: &ParamSlot, p: &mut [f32]| (0..4).for_each(|i| p[slot.offset + i * 4 + i] = 1.0);
            let plan = DevicePlan::of(&model).unwrap();
            eye(&plan.tensors[plan.layers[0].weight].1, &mut params);
            model.set_params(&params).unwrap();
            let got = model.forward(&graph, &x, &mut NoExchange, ForwardCtx::eval()).unwrap().clone();
            // GraphSAGE's root weight stays zero, so its output is the mean alone.
            let want = aggregation(&graph, kind).unwrap().apply(&x);
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-5, "{kind:?}: {a} vs {b}");
            }
        }
        let gat = aggregation(&graph, ConvKind::Gat).unwrap();
        assert_eq!(gat.indices.len(), graph.fwd().num_edges() + 12);
        assert!((0..12).all(|v| gat.indices[gat.indptr[v] as usize] == v as u32));
    }

    #[test]
    fn picked_labels_follow_the_split_order_and_stay_inside_the_logits() {
        let classes = Labels::Classes(vec![2, 0, 1, Labels::UNLABELLED]);
        assert_eq!(pick_labels(&classes, &[2, 0], 4, 3).unwrap(), PickedLabels::Classes(vec![1, 2]));
        assert_eq!(
            pick_labels(&classes, &[1, 3], 4, 3).unwrap_err(),
            PlanError::Label { row: 3, label: Labels::UNLABELLED, classes: 3 }
        );
        assert_eq!(pick_labels(&classes, &[0], 4, 2).unwrap_err(), PlanError::Label { row: 0, label: 2, classes: 2 });
        // Rows must lie below both the vertex count and the label table.
        assert_eq!(pick_labels(&classes, &[0, 4], 9, 3).unwrap_err(), PlanError::LabelledRow { row: 4, rows: 4 });
        assert_eq!(pick_labels(&classes, &[2], 2, 3).unwrap_err(), PlanError::LabelledRow { row: 2, rows: 2 });

        let targets = Labels::MultiLabel(ndarray::array![[1.0f32, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]);
        assert_eq!(
            pick_labels(&targets, &[2, 0], 3, 3).unwrap(),
            PickedLabels::MultiLabel(vec![1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
        );
        assert_eq!(pick_labels(&targets, &[0], 3, 4).unwrap_err(), PlanError::TargetColumns { got: 3, expected: 4 });
        assert_eq!(pick_labels(&targets, &[3], 5, 3).unwrap_err(), PlanError::LabelledRow { row: 3, rows: 3 });
        assert_eq!(pick_labels(&targets, &[], 3, 3).unwrap(), PickedLabels::MultiLabel(Vec::new()));
    }

    #[test]
    fn head_expansion_is_a_permutation_of_the_entries() {
        let graph = random_graph(9, 25, 4);
        let csr = aggregation(&graph, ConvKind::Gat).unwrap();
        let x = expand_heads(&csr, 3);
        assert_eq!((x.indptr.len(), x.indices.len()), (9 * 3 + 1, csr.indices.len() * 3));
        for (i, &p) in x.perm.iter().enumerate() {
            assert_eq!(x.inv[p as usize] as usize, i);
            let (e, k) = (p as usize / 3, p as usize % 3);
            assert_eq!(x.indices[i], csr.indices[e] * 3 + k as u32);
        }
        for r in 0..27 {
            let (v, k) = (r / 3, r % 3);
            let row = &x.indices[x.indptr[r] as usize..x.indptr[r + 1] as usize];
            let want: Vec<u32> = graph_row(&csr, v).iter().map(|&u| u * 3 + k as u32).collect();
            assert_eq!(row, want);
        }
        assert_eq!(expand_heads(&csr, 1).indices, csr.indices);
    }

    fn graph_row(csr: &WeightedCsr, v: usize) -> &[u32] {
        &csr.indices[csr.indptr[v] as usize..csr.indptr[v + 1] as usize]
    }

    /// `A^T x` by SpMM over the transpose equals the scatter of `A`'s rows, and transposing
    /// twice gives `A` back.
    #[test]
    fn the_transpose_carries_each_entry_and_its_value() {
        let graph = random_graph(30, 120, 4);
        let folded = aggregation(&graph, ConvKind::Gcn).unwrap();
        let t = folded.transpose();
        // Transposing twice sorts each row by source; the self loop led GCN's rows before.
        let mut sorted = folded.clone();
        for v in 0..30 {
            let range = folded.indptr[v] as usize..folded.indptr[v + 1] as usize;
            let mut row: Vec<(u32, f32)> = range.map(|k| (folded.indices[k], folded.vals[k])).collect();
            row.sort_by_key(|e| e.0);
            for (i, (c, w)) in row.into_iter().enumerate() {
                sorted.indices[folded.indptr[v] as usize + i] = c;
                sorted.vals[folded.indptr[v] as usize + i] = w;
            }
        }
        assert_eq!(t.transpose(), sorted);
        let x = random_array(30, 5, 1.0, 2);
        let mut want = Array2::<f32>::zeros((30, 5));
        for v in 0..30 {
            for k in folded.indptr[v] as usize..folded.indptr[v + 1] as usize {
                let row = x.row(v).to_owned() * folded.vals[k];
                let mut o = want.row_mut(folded.indices[k] as usize);
                o += &row;
            }
        }
        let got = t.apply(&x);
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn attention_keep_flags_follow_the_cpu_keys() {
        let graph = random_graph(8, 20, 1);
        let csr = aggregation(&graph, ConvKind::Gat).unwrap();
        let site = DropoutSite::new(0.5, 3, 2, 1);
        let keep = attention_keep(&graph, &csr, &site, 2);
        let gids = graph.global_ids();
        let mut expect = [0u8; 2];
        site.edge_keep(gids[0], gids[0], &mut expect);
        assert_eq!(keep[..2], expect);
        assert!(keep.contains(&0) && keep.contains(&1));
    }
}

/// A GAT aggregation with `heads` heads as one single-head CSR over `n * heads` rows: row
/// `v * heads + k` gathers head `k` of row `v`'s sources (`u * heads + k`), so one SpMM with
/// per-entry weights aggregates every head of `h` (`n x heads*head_dim`, which is
/// `n*heads x head_dim`). Attention values are laid out per entry then head (`e * heads + k`);
/// `perm[i]` is the value of expanded entry `i`, `inv` its inverse.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadExpanded {
    pub indptr: Vec<u64>,
    pub indices: Vec<u32>,
    pub perm: Vec<u32>,
    pub inv: Vec<u32>,
}

pub fn expand_heads(csr: &WeightedCsr, heads: usize) -> HeadExpanded {
    let (n, nnz) = (csr.indptr.len() - 1, csr.indices.len());
    let mut out = HeadExpanded {
        indptr: Vec::with_capacity(n * heads + 1),
        indices: Vec::with_capacity(nnz * heads),
        perm: Vec::with_capacity(nnz * heads),
        inv: vec![0; nnz * heads],
    };
    out.indptr.push(0);
    for v in 0..n {
        let entries = csr.indptr[v] as usize..csr.indptr[v + 1] as usize;
        for k in 0..heads {
            for e in entries.clone() {
                out.inv[e * heads + k] = out.indices.len() as u32;
                out.indices.push(csr.indices[e] * heads as u32 + k as u32);
                out.perm.push((e * heads + k) as u32);
            }
            out.indptr.push(out.indices.len() as u64);
        }
    }
    out
}
