//! The local graph view a layer aggregates over.
//!
//! A worker holds `num_local` vertices: the first `num_primary` are its own (edge-cut owners or
//! vertex-cut masters), the rest are halo vertices (edge-cut) or mirrors (vertex-cut). The forward
//! adjacency lists, for every local destination, its local in-neighbours; the backward adjacency is
//! its transpose. Degrees are the *global* ones, so normalisation coefficients do not depend on the
//! split.
//!
//! Rows a worker *computes* (dense transforms, self terms, activations, dropout) are
//! `0..computed_rows()`. By default that is every local row: vertex-cut mirrors compute their
//! vertex like the master does. Under edge-cut ([`AggGraph::with_pulled_halo`]) it is the owned
//! rows only: a halo row is overwritten by `pull_halo` before anything reads it, so computing it
//! locally would be wasted work (with METIS on a power-law graph halo rows can outnumber owned
//! ones).
//! A vertex-cut can run the same way ([`AggGraph::with_primaries_computing`]): mirrors then
//! only aggregate their local in-edges and push the partial sums to the master, which computes.
//!
//! Rows whose layer *input* is local are `0..local_input_rows()`: every row, except pulled halo
//! rows. A mini-batch block ([`crate::block`]) computes its destinations only but holds the
//! input of all its sources, so there the two differ the other way: layers transform every
//! input row and send gradients into every one of them, and compute the destinations. An
//! edge-cut worker whose halo rows' input features were fetched once at setup (the halo feature
//! cache) runs its first layer on such a view too ([`AggGraph::with_held_halo`]): that layer
//! transforms its halo rows itself, takes their share of the weight gradient locally and
//! exchanges nothing; the later layers pull as usual.
//!
//! The backward adjacency is the forward CSR's transpose unless the CSR is symmetric
//! (`Csr::is_symmetric`, checked once per CSR and remembered), in which case the forward CSR serves
//! both ways; the transpose's entry permutation is built on first use (GAT only). Views of one
//! graph share its CSR and tables through `Arc`, so a clone is cheap. Its *central rows* are the
//! computed rows that read no copy row: overlapped layers aggregate them while the halo is in
//! flight.

use std::sync::{Arc, OnceLock};

use graph_partition::Csr;
use ndarray::Array2;

use crate::dense::{Growth, release_rows_from, zero_rows};

/// Why an [`AggGraph`] could not be built. Field names match the constructor arguments.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    #[error("aggregation graph must be square: csr has {rows} rows and {cols} columns")]
    NotSquare { rows: usize, cols: usize },
    #[error("num_primary = {num_primary} exceeds the {num_local} local vertices")]
    TooManyPrimaries { num_primary: usize, num_local: usize },
    #[error("{what} has {got} entries, expected one per local vertex ({expected})")]
    Length { what: &'static str, got: usize, expected: usize },
    #[error("local vertex {row} has a self loop; self terms are added by the layers, remove self loops from the graph")]
    SelfLoop { row: usize },
    #[error("{what} of local vertex {row} is {value}, degrees must be finite and >= 0")]
    BadDegree { what: &'static str, row: usize, value: f32 },
    #[error(
        "local vertex {row} is a halo row (>= num_primary) but has in-edges; only owned vertices aggregate under edge-cut"
    )]
    HaloInEdges { row: usize },
    #[error("block {layer} does not chain into block {next}: {detail}", next = layer + 1)]
    BlockChain { layer: usize, detail: String },
    #[error("sampled in-edges: row {row} holds an edge the graph's row does not")]
    NotSampled { row: usize },
    #[error("block source vertex {gid} is not among the graph's {num_nodes} vertices")]
    UnknownVertex { gid: u32, num_nodes: usize },
}

/// Per-vertex coefficients derived from the global degrees, computed once per graph.
#[derive(Debug, Clone)]
pub(crate) struct DegreeNorms {
    /// `1/sqrt(out_deg + 1)`: GCN coefficient of an edge's source.
    pub gcn_src: Vec<f32>,
    /// `1/sqrt(in_deg + 1)`: GCN coefficient of an edge's destination.
    pub gcn_dst: Vec<f32>,
    /// `1/(in_deg + 1)`: GCN self-loop coefficient.
    pub gcn_self: Vec<f32>,
    /// `1/in_deg` (0 for isolated vertices): GraphSAGE mean.
    pub mean: Vec<f32>,
}

impl DegreeNorms {
    /// The coefficients of a graph whose rows hold every in-edge (or, under vertex-cut, whose
    /// replicas' rows add up to every in-edge): all from the given degrees.
    pub(crate) fn of(in_degree: &[f32], out_degree: &[f32]) -> Self {
        Self {
            gcn_src: out_degree.iter().map(|d| (d + 1.0).sqrt().recip()).collect(),
            gcn_dst: in_degree.iter().map(|d| (d + 1.0).sqrt().recip()).collect(),
            gcn_self: in_degree.iter().map(|d| (d + 1.0).recip()).collect(),
            mean: in_degree.iter().map(|&d| if d > 0.0 { d.recip() } else { 0.0 }).collect(),
        }
    }

    /// The coefficients of a graph whose row `v` holds a uniform sample of `sampled_in[v]` of
    /// its `in_degree[v]` in-edges: GraphSAGE averages the sample, and with `scale` GCN's
    /// neighbour sum is multiplied by `in_v / k_v`, an unbiased estimate of the whole
    /// neighbourhood's sum (exact when nothing is dropped: the factor is then 1).
    pub(crate) fn sampled(in_degree: &[f32], out_degree: &[f32], sampled_in: &[f32], scale: bool) -> Self {
        let mut norms = Self::of(in_degree, out_degree);
        norms.mean = sampled_in.iter().map(|&k| if k > 0.0 { k.recip() } else { 0.0 }).collect();
        if scale {
            for ((dst, &k), &d) in norms.gcn_dst.iter_mut().zip(sampled_in).zip(in_degree) {
                if k > 0.0 {
                    *dst *= d / k;
                }
            }
        }
        norms
    }
}

/// In- and out-degrees (without self loops) of every vertex of a whole graph, by global id:
/// what a mini-batch block normalises with under [`crate::GcnNorm::Global`].
#[derive(Debug, Clone, PartialEq)]
pub struct GraphDegrees {
    pub in_degree: Vec<f32>,
    pub out_degree: Vec<f32>,
}

impl GraphDegrees {
    /// The degrees of `csr` (row `v` lists the sources of the edges into `v`).
    pub fn of(csr: &Csr) -> Self {
        Self {
            in_degree: csr.degrees().into_iter().map(|d| d as f32).collect(),
            out_degree: csr.column_counts().into_iter().map(|d| d as f32).collect(),
        }
    }

    pub fn num_nodes(&self) -> usize {
        self.in_degree.len()
    }
}

/// A worker's view of the graph for aggregation (see the module docs for the id layout).
///
/// Invariants checked on construction: square adjacency over `num_local` vertices, no self loops,
/// `num_primary <= num_local`, one global id and one (finite, non-negative) in/out degree per local
/// vertex. Halo rows (edge-cut) are expected to have no in-edges; their aggregation output is
/// never used.
///
/// Views of one graph that differ only in which rows they compute and hold the input of
/// ([`AggGraph::with_pulled_halo`], [`AggGraph::with_held_halo`]) share the adjacency and the
/// per-vertex tables: a clone costs a reference count.
#[derive(Debug, Clone)]
pub struct AggGraph {
    shared: Arc<Shared>,
    computed: usize,
    input: usize,
    /// Halo rows are filled by the exchange ([`AggGraph::pulls_halo`]).
    pulled: bool,
    /// Copies aggregate their in-edges and push the partial sums ([`AggGraph::pushes_aggregates`]).
    pushed: bool,
    /// A mini-batch block: its row counts change at every step ([`AggGraph::growth`]).
    varies: bool,
}

/// What every view of one graph shares.
#[derive(Debug)]
struct Shared {
    /// Shared with the dataset under [`AggGraph::single_shared`]: not a copy of the graph.
    fwd: Arc<Csr>,
    /// The transpose of `fwd`; `None` when `fwd` is its own transpose (a symmetric graph, the
    /// whole graph of most datasets), so a full-graph adjacency is held once.
    bwd: Option<Csr>,
    /// [`AggGraph::perm`], built on first use: only per-edge values (GAT's attention) need it,
    /// and it is a `usize` per edge.
    perm: OnceLock<Vec<usize>>,
    num_primary: usize,
    /// Per local row: reads no copy (halo or mirror) row.
    central: Vec<bool>,
    global_ids: Vec<u32>,
    in_degree: Vec<f32>,
    out_degree: Vec<f32>,
    norms: DegreeNorms,
}

impl AggGraph {
    /// Builds a local view. `csr` row `v` lists the local sources of the edges into `v`
    /// (Halo's CSR convention); `in_degree`/`out_degree` are the global degrees of each local
    /// vertex, without self loops.
    pub fn new(
        csr: Csr,
        num_primary: usize,
        global_ids: Vec<u32>,
        in_degree: Vec<f32>,
        out_degree: Vec<f32>,
    ) -> Result<Self, GraphError> {
        Self::new_shared(Arc::new(csr), num_primary, global_ids, in_degree, out_degree)
    }

    /// [`AggGraph::new`] over an adjacency it shares with its owner (a worker's part), so that
    /// the part's edges exist once.
    pub fn new_shared(
        csr: Arc<Csr>,
        num_primary: usize,
        global_ids: Vec<u32>,
        in_degree: Vec<f32>,
        out_degree: Vec<f32>,
    ) -> Result<Self, GraphError> {
        Self::assemble(csr, num_primary, global_ids, in_degree, out_degree, DegreeNorms::of)
    }

    /// Checks the parts of a view and derives its coefficients with `norms(in, out)`,
    /// called once the degrees are known to be valid.
    pub(crate) fn assemble(
        csr: Arc<Csr>,
        num_primary: usize,
        global_ids: Vec<u32>,
        in_degree: Vec<f32>,
        out_degree: Vec<f32>,
        norms: impl FnOnce(&[f32], &[f32]) -> DegreeNorms,
    ) -> Result<Self, GraphError> {
        let n = csr.num_rows();
        if csr.num_cols() != n {
            return Err(GraphError::NotSquare { rows: n, cols: csr.num_cols() });
        }
        if num_primary > n {
            return Err(GraphError::TooManyPrimaries { num_primary, num_local: n });
        }
        for (what, got) in
            [("global_ids", global_ids.len()), ("in_degree", in_degree.len()), ("out_degree", out_degree.len())]
        {
            if got != n {
                return Err(GraphError::Length { what, got, expected: n });
            }
        }
        if let Some(row) = (0..n).find(|&v| csr.neighbors(v).binary_search(&(v as u32)).is_ok()) {
            return Err(GraphError::SelfLoop { row });
        }
        for (what, degrees) in [("in_degree", &in_degree), ("out_degree", &out_degree)] {
            if let Some((row, &value)) = degrees.iter().enumerate().find(|(_, d)| !(d.is_finite() && **d >= 0.0)) {
                return Err(GraphError::BadDegree { what, row, value });
            }
        }
        let bwd = (!csr.is_symmetric()).then(|| csr.reverse());
        let norms = norms(&in_degree, &out_degree);
        let central = (0..n).map(|v| csr.neighbors(v).iter().all(|&u| (u as usize) < num_primary)).collect();
        let shared = Shared {
            fwd: csr,
            bwd,
            perm: OnceLock::new(),
            num_primary,
            central,
            global_ids,
            in_degree,
            out_degree,
            norms,
        };
        Ok(Self { shared: Arc::new(shared), computed: n, input: n, pulled: false, pushed: false, varies: false })
    }

    /// Declares rows `num_primary..` edge-cut halo rows: filled by `pull_halo` from their owners,
    /// never computed here, so [`AggGraph::computed_rows`] and [`AggGraph::local_input_rows`]
    /// become `num_primary` and [`AggGraph::pulls_halo`] holds. Fails if a halo row has in-edges
    /// (it would aggregate, so it is not a halo row).
    pub fn with_pulled_halo(self) -> Result<Self, GraphError> {
        let mut view = self.computing_primaries()?;
        view.input = view.num_primary();
        view.pulled = true;
        Ok(view)
    }

    /// Declares only rows `0..num_primary` computed while every row's input is held here: a
    /// mini-batch block, whose sources past its destinations feed the aggregation but are not
    /// outputs, or an edge-cut layer whose halo inputs were fetched once (the halo feature
    /// cache), which then transforms its halo rows itself and exchanges nothing. Fails if a row
    /// past `num_primary` has in-edges (it would be an output).
    pub fn with_held_halo(self) -> Result<Self, GraphError> {
        let mut view = self.computing_primaries()?;
        view.input = view.num_local();
        view.pulled = false;
        Ok(view)
    }

    /// Vertex-cut with the masters alone computing: every row aggregates its local in-edges,
    /// the copies' partial aggregates are pushed to (summed at) their primaries, which run the
    /// dense per-row work for the vertex; a copy's input is pulled from its primary before
    /// the aggregation reads it, and so is the aggregate's gradient in backward. Computed and
    /// input rows become `num_primary`; [`AggGraph::pulls_halo`] and
    /// [`AggGraph::pushes_aggregates`] hold. The traffic of a layer is that of a replica sync
    /// (copies to primaries, then back), but the dense work and its buffers cover the primaries
    /// only, and copies hold their rows only while they are in flight.
    pub fn with_primaries_computing(mut self) -> Self {
        (self.computed, self.input) = (self.num_primary(), self.num_primary());
        (self.pulled, self.pushed) = (true, true);
        self
    }

    fn computing_primaries(mut self) -> Result<Self, GraphError> {
        let fwd = &self.shared.fwd;
        if let Some(row) = (self.num_primary()..self.num_local()).find(|&v| !fwd.neighbors(v).is_empty()) {
            return Err(GraphError::HaloInEdges { row });
        }
        self.computed = self.num_primary();
        Ok(self)
    }

    /// This view with its in-edges replaced by `sampled`, a subset of every row (from
    /// `graph_partition::sample::sample_in_edges`): the same vertices, ids, global degrees and
    /// computed and input rows, coefficients for a sample (GCN's
    /// neighbour sum scaled by `in_v / k_v`, as a mini-batch block under
    /// [`crate::GcnNorm::Global`]), so one layer of full-graph training runs on sampled edges.
    pub fn with_sampled_in_edges(&self, sampled: Csr) -> Result<Self, GraphError> {
        let n = self.num_local();
        if sampled.num_rows() != n {
            return Err(GraphError::Length { what: "sampled in-edges", got: sampled.num_rows(), expected: n });
        }
        let kept = |v: usize| sampled.neighbors(v).iter().all(|u| self.fwd().neighbors(v).binary_search(u).is_ok());
        if let Some(row) = (0..n).find(|&v| !kept(v)) {
            return Err(GraphError::NotSampled { row });
        }
        let sampled_in: Vec<f32> = (0..n).map(|v| sampled.degree(v) as f32).collect();
        let mut graph = Self::assemble(
            Arc::new(sampled),
            self.num_primary(),
            self.global_ids().to_vec(),
            self.in_degree().to_vec(),
            self.out_degree().to_vec(),
            |in_deg, out_deg| DegreeNorms::sampled(in_deg, out_deg, &sampled_in, true),
        )?;
        (graph.computed, graph.input, graph.pulled, graph.pushed, graph.varies) =
            (self.computed, self.input, self.pulled, self.pushed, self.varies);
        Ok(graph)
    }

    /// The whole graph in one process: every vertex owned, local id = global id, degrees from
    /// the graph itself. Holds a copy of `csr`; [`AggGraph::single_shared`] holds none.
    pub fn single(csr: &Csr) -> Result<Self, GraphError> {
        Self::single_shared(Arc::new(csr.clone()))
    }

    /// [`AggGraph::single`] over a graph it shares with its owner (a dataset's), so that the
    /// largest array of a full-graph run exists once.
    pub fn single_shared(csr: Arc<Csr>) -> Result<Self, GraphError> {
        let n = csr.num_rows();
        if csr.num_cols() != n {
            return Err(GraphError::NotSquare { rows: n, cols: csr.num_cols() });
        }
        let GraphDegrees { in_degree, out_degree } = GraphDegrees::of(&csr);
        let global_ids = (0..n as u32).collect();
        Self::assemble(csr, n, global_ids, in_degree, out_degree, DegreeNorms::of)
    }

    /// Forward adjacency: row = local destination, columns = local sources.
    pub fn fwd(&self) -> &Csr {
        &self.shared.fwd
    }

    /// Backward adjacency (transpose of [`AggGraph::fwd`]): row = local source. The forward
    /// adjacency itself when the graph is symmetric.
    pub fn bwd(&self) -> &Csr {
        self.shared.bwd.as_ref().unwrap_or(&*self.shared.fwd)
    }

    /// Whether a transposed adjacency is held besides the forward one (the graph is not
    /// symmetric): what a memory estimate counts.
    pub fn holds_transpose(&self) -> bool {
        self.shared.bwd.is_some()
    }

    /// `perm()[k]` is the index in `fwd` of entry `k` of `bwd` (for per-edge values). Built
    /// on the first call and kept.
    pub fn perm(&self) -> &[usize] {
        self.shared.perm.get_or_init(|| self.shared.fwd.transpose_with_perm().1)
    }

    /// Number of local vertices (owned + halo/mirror).
    pub fn num_local(&self) -> usize {
        self.shared.fwd.num_rows()
    }

    /// Local ids `0..num_primary` are this worker's own vertices.
    pub fn num_primary(&self) -> usize {
        self.shared.num_primary
    }

    /// Rows `0..computed_rows()` are computed here (see the module docs): `num_local` unless
    /// the halo is pulled ([`AggGraph::with_pulled_halo`]), then `num_primary`. Layers leave the
    /// output rows past it unspecified and ignore gradient rows past it.
    pub fn computed_rows(&self) -> usize {
        self.computed
    }

    /// Rows `0..local_input_rows()` of a layer's input are held here (see the module docs):
    /// `num_local`, or `num_primary` with the halo pulled. Layers transform these rows locally
    /// and write their input gradient; never fewer than [`AggGraph::computed_rows`].
    pub fn local_input_rows(&self) -> usize {
        self.input
    }

    /// Whether the layers on this view pull the halo rows of what they read and push back
    /// their gradients ([`AggGraph::with_pulled_halo`]). Said explicitly rather than read off
    /// the row counts: a worker without halo rows still takes part in every pull, which is a
    /// collective. Every other view exchanges no halo row.
    pub fn pulls_halo(&self) -> bool {
        self.pulled
    }

    /// How this view's buffers grow ([`Growth`]): into released pages when it pulls its halo
    /// (the grown rows may be halo rows), by writing otherwise, with room to spare for a
    /// mini-batch block's.
    pub(crate) fn growth(&self) -> Growth {
        match (self.pulled, self.varies) {
            (true, _) => Growth::Released,
            (false, true) => Growth::Varying,
            (false, false) => Growth::Written,
        }
    }

    /// This view as a mini-batch block, whose buffers change shape at every step
    /// ([`Growth::Varying`]).
    pub(crate) fn varying(mut self) -> Self {
        self.varies = true;
        self
    }

    /// Zeroes rows `from..` of `x`, rows past the computed ones that an accumulation is about
    /// to write. On a view that pulls its halo they are halo rows, written only while an
    /// exchange's rows are in flight, and their pages are handed back (`release_rows_from`).
    /// Elsewhere (a block's sources) they are written, as handing pages back would only cost a
    /// page fault per page when the accumulation writes them, and only up to the local rows:
    /// rows past those (an input gradient as tall as the previous block's sources) are read by
    /// no one.
    pub(crate) fn zero_rows_from(&self, x: &mut Array2<f32>, from: usize) {
        if self.pulled {
            release_rows_from(x, from);
        } else {
            zero_rows(x, from..self.num_local());
        }
    }

    /// Whether every local row aggregates its in-edges and the copies' partial aggregates are
    /// pushed to their primaries ([`AggGraph::with_primaries_computing`]); otherwise the rows
    /// past the computed ones have no in-edges here, or a replica sync completes them.
    pub fn pushes_aggregates(&self) -> bool {
        self.pushed
    }

    /// Rows `0..aggregated_rows()` aggregate their in-edges: every local row when the copies'
    /// partial aggregates are pushed, else the computed ones.
    pub fn aggregated_rows(&self) -> usize {
        if self.pushed { self.num_local() } else { self.computed }
    }

    /// How many computed rows read no copy (halo or mirror) row: they can be aggregated while
    /// the halo is still in flight, wherever they sit among the primaries.
    pub fn central_rows(&self) -> usize {
        self.shared.central[..self.computed].iter().filter(|&&c| c).count()
    }

    /// Per local row, whether it reads no copy (halo or mirror) row ([`AggGraph::central_rows`]
    /// counts the computed ones).
    pub fn is_central(&self) -> &[bool] {
        &self.shared.central
    }

    /// Global id of every local vertex.
    pub fn global_ids(&self) -> &[u32] {
        &self.shared.global_ids
    }

    /// In-degree (without self loop) of every local vertex that GCN normalises with: the
    /// global one, except in a block normalised with sampled degrees ([`crate::GcnNorm`]).
    pub fn in_degree(&self) -> &[f32] {
        &self.shared.in_degree
    }

    /// Out-degree (without self loop) of every local vertex, global or sampled as
    /// [`AggGraph::in_degree`].
    pub fn out_degree(&self) -> &[f32] {
        &self.shared.out_degree
    }

    pub(crate) fn norms(&self) -> &DegreeNorms {
        &self.shared.norms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph_partition::EdgeListOptions;

    #[test]
    fn single_uses_graph_degrees() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: true };
        let csr = Csr::from_edges(3, &[(0, 1), (2, 1), (1, 2)], opts).unwrap();
        let g = AggGraph::single(&csr).unwrap();
        assert_eq!(g.in_degree(), &[0.0, 2.0, 1.0]);
        assert_eq!(g.out_degree(), &[1.0, 1.0, 1.0]);
        assert_eq!(g.num_primary(), 3);
        assert_eq!(g.computed_rows(), 3);
        assert_eq!(g.bwd().neighbors(1), &[2]);
        assert!(g.holds_transpose());
        assert_eq!(g.norms().mean, vec![0.0, 0.5, 1.0]);
        assert!((g.norms().gcn_dst[1] - 3f32.sqrt().recip()).abs() < 1e-7);
    }

    #[test]
    fn a_symmetric_graph_is_its_own_backward_adjacency() {
        let csr = Csr::from_edges(4, &[(0, 1), (1, 2), (3, 1), (0, 3)], EdgeListOptions::default()).unwrap();
        let g = AggGraph::single(&csr).unwrap();
        assert!(!g.holds_transpose());
        let (t, perm) = csr.transpose_with_perm();
        assert_eq!(g.bwd(), &t);
        assert_eq!(g.perm(), perm.as_slice());
    }

    #[test]
    fn pulled_halo_computes_owned_rows_only() {
        // Edge 1 -> 0: vertex 0 (owned) aggregates from vertex 1 (halo), which has no in-edges.
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: true };
        let csr = Csr::from_edges(2, &[(1, 0)], opts).unwrap();
        let g = AggGraph::new(csr, 1, vec![7, 3], vec![1.0, 4.0], vec![2.0, 1.0]).unwrap();
        assert_eq!(g.computed_rows(), 2);
        let g = g.with_pulled_halo().unwrap();
        assert_eq!((g.num_primary(), g.computed_rows(), g.num_local()), (1, 1, 2));
    }

    #[test]
    fn rejects_bad_views() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: false };
        let looped = Csr::from_edges(2, &[(0, 0), (0, 1)], opts).unwrap();
        assert_eq!(AggGraph::single(&looped).unwrap_err(), GraphError::SelfLoop { row: 0 });
        let csr = Csr::from_edges(2, &[(0, 1)], EdgeListOptions::default()).unwrap();
        let err = AggGraph::new(csr.clone(), 3, vec![0, 1], vec![1.0; 2], vec![1.0; 2]).unwrap_err();
        assert_eq!(err, GraphError::TooManyPrimaries { num_primary: 3, num_local: 2 });
        let err = AggGraph::new(csr.clone(), 2, vec![0], vec![1.0; 2], vec![1.0; 2]).unwrap_err();
        assert_eq!(err, GraphError::Length { what: "global_ids", got: 1, expected: 2 });
        let err = AggGraph::new(csr.clone(), 2, vec![0, 1], vec![1.0, f32::NAN], vec![1.0; 2]).unwrap_err();
        assert!(matches!(err, GraphError::BadDegree { what: "in_degree", row: 1, .. }));
        let halo_with_edge = AggGraph::new(csr, 1, vec![0, 1], vec![1.0; 2], vec![1.0; 2]).unwrap();
        assert_eq!(halo_with_edge.with_pulled_halo().unwrap_err(), GraphError::HaloInEdges { row: 1 });
        let rect = Csr::try_new(2, 3, vec![0, 0, 1], vec![2]).unwrap();
        assert_eq!(AggGraph::single(&rect).unwrap_err(), GraphError::NotSquare { rows: 2, cols: 3 });
    }

    /// A sampled view keeps the rows, ids and degrees and rescales GCN's neighbour sum by
    /// `in_v / k_v`; in-edges it does not hold, or another vertex count, are refused.
    #[test]
    fn sampled_views_keep_their_rows_and_refuse_foreign_edges() {
        let opts = EdgeListOptions { symmetrize: false, remove_self_loops: true };
        let csr = Csr::from_edges(4, &[(1, 0), (2, 0), (3, 0), (0, 1)], opts).unwrap();
        let whole = AggGraph::single(&csr).unwrap();
        let one = Csr::from_edges(4, &[(2, 0), (0, 1)], opts).unwrap();
        let sampled = whole.with_sampled_in_edges(one).unwrap();
        assert_eq!((sampled.num_local(), sampled.computed_rows(), sampled.in_degree()), (4, 4, whole.in_degree()));
        // Vertex 0 keeps 1 of its 3 in-edges: its coefficient triples, vertex 1's (all kept) stays.
        assert_eq!(sampled.norms().gcn_dst[0], whole.norms().gcn_dst[0] * 3.0);
        assert_eq!(sampled.norms().gcn_dst[1], whole.norms().gcn_dst[1]);
        assert_eq!(sampled.norms().mean[0], 1.0);
        let foreign = Csr::from_edges(4, &[(2, 0), (3, 1)], opts).unwrap();
        assert_eq!(whole.with_sampled_in_edges(foreign).unwrap_err(), GraphError::NotSampled { row: 1 });
        let small = Csr::from_edges(3, &[(2, 0)], opts).unwrap();
        let err = whole.with_sampled_in_edges(small).unwrap_err();
        assert_eq!(err, GraphError::Length { what: "sampled in-edges", got: 3, expected: 4 });
    }
}
