//! GCN and GraphSAGE-mean: a linear transform plus a fixed-coefficient aggregation over in-edges
//! and a per-vertex self term.
//!
//! * GCN (PyG `GCNConv`, symmetric normalisation with self loops):
//!   `out_v = sum_{u->v} (x_u W) / sqrt((out_u + 1)(in_v + 1)) + (x_v W) / (in_v + 1) + b`.
//! * GraphSAGE-mean (PyG `SAGEConv(aggr="mean")`):
//!   `out_v = (mean_{u->v} x_u) W_neigh + x_v W_self + b`.
//!
//! Degrees are global ([`AggGraph`]); the self term is added after `sum_replicas`.

use std::ops::Range;

use ndarray::{Array2, ArrayBase, DataMut, Ix2, s};

use super::{Conv, ExchangePoint, ForwardCtx};
use crate::dense::{
    add_col_sums, ensure_rows, ensure_shape, gemm, head, head_mut, par_rows_mut, release_rows_from, slice,
};
use crate::exchange::{Direction, Exchange, ExchangeError, Step, Tag};
use crate::graph::AggGraph;
use crate::params::{Init, ParamLayout, ParamSlot};
use crate::sparse::{Cols, Write, aggregate, aggregate_selected};

/// Which fixed-coefficient convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    Gcn,
    SageMean,
}

/// A GCN or GraphSAGE-mean layer (see the module docs).
#[derive(Debug)]
pub struct AggConv {
    kind: AggKind,
    weight: ParamSlot,
    /// GraphSAGE's root weight; GCN shares `weight` for its self loop.
    self_weight: Option<ParamSlot>,
    bias: ParamSlot,
    point: ExchangePoint,
    /// Forward: `X W` (Transformed) or the aggregate `Z` (Input); backward: their gradients.
    cache: Array2<f32>,
}

impl AggConv {
    /// A GCN layer; weights Glorot, bias zero (as PyG). Parameters are named `{name}.weight`
    /// and `{name}.bias`.
    pub fn gcn(layout: &mut ParamLayout, name: &str, in_dim: usize, out_dim: usize) -> Self {
        let weight = layout.add(format!("{name}.weight"), in_dim, out_dim, Init::Glorot);
        let bias = layout.add(format!("{name}.bias"), 1, out_dim, Init::Zeros);
        Self::build(AggKind::Gcn, weight, None, bias)
    }

    /// A GraphSAGE-mean layer, initialised like PyG's `SAGEConv` (PyTorch `Linear` default:
    /// weights and bias `U(+-1/sqrt(in_dim))`). Parameters: `{name}.weight_neigh`,
    /// `{name}.weight_self`, `{name}.bias`.
    pub fn sage(layout: &mut ParamLayout, name: &str, in_dim: usize, out_dim: usize) -> Self {
        let init = Init::Uniform { bound: (in_dim.max(1) as f32).sqrt().recip() };
        let weight = layout.add(format!("{name}.weight_neigh"), in_dim, out_dim, init);
        let self_weight = layout.add(format!("{name}.weight_self"), in_dim, out_dim, init);
        let bias = layout.add(format!("{name}.bias"), 1, out_dim, init);
        Self::build(AggKind::SageMean, weight, Some(self_weight), bias)
    }

    fn build(kind: AggKind, weight: ParamSlot, self_weight: Option<ParamSlot>, bias: ParamSlot) -> Self {
        let point = ExchangePoint::choose(weight.rows, weight.cols);
        Self { kind, weight, self_weight, bias, point, cache: Array2::zeros((0, 0)) }
    }

    pub fn kind(&self) -> AggKind {
        self.kind
    }

    /// `out (+)= A x` over the forward edges with this layer's coefficients, for the destination
    /// rows `v` of `rows` with `select(v)` (halo rows have no in-edges).
    fn aggregate_fwd(
        &self,
        graph: &AggGraph,
        x: &Array2<f32>,
        out: &mut Array2<f32>,
        write: Write,
        rows: Range<usize>,
        select: impl Fn(usize) -> bool + Sync,
    ) {
        let cols = Cols::full(x.ncols());
        let (xs, os, f) = (slice(x), out.as_slice_mut().expect("standard layout"), x.ncols());
        let norms = graph.norms();
        match self.kind {
            AggKind::Gcn => {
                let (src, dst) = (&norms.gcn_src, &norms.gcn_dst);
                let weight = |v, _, u, _| dst[v] * src[u];
                aggregate_selected(graph.fwd(), rows, select, xs, cols, os, cols, 1, f, write, weight);
            }
            AggKind::SageMean => {
                let mean = &norms.mean;
                let weight = |v, _, _, _| mean[v];
                aggregate_selected(graph.fwd(), rows, select, xs, cols, os, cols, 1, f, write, weight);
            }
        }
    }

    /// `out (+)= A^T g`: the same coefficients, gathered over the backward (transposed) edges,
    /// for the rows `rows`.
    fn aggregate_bwd(
        &self,
        graph: &AggGraph,
        g: &Array2<f32>,
        out: &mut Array2<f32>,
        write: Write,
        rows: Range<usize>,
    ) {
        let cols = Cols::full(g.ncols());
        let (gs, os, f) = (slice(g), out.as_slice_mut().expect("standard layout"), g.ncols());
        let norms = graph.norms();
        match self.kind {
            AggKind::Gcn => {
                let (src, dst) = (&norms.gcn_src, &norms.gcn_dst);
                aggregate(graph.bwd(), rows, gs, cols, os, cols, 1, f, write, |u, _, v, _| src[u] * dst[v]);
            }
            AggKind::SageMean => {
                let mean = &norms.mean;
                aggregate(graph.bwd(), rows, gs, cols, os, cols, 1, f, write, |_, _, v, _| mean[v]);
            }
        }
    }
}

impl AggConv {
    /// Pulls the halo rows of `x` (when the graph pulls them) and overwrites the aggregated rows
    /// of `out` with `A x`, then (when the graph pushes aggregates) sums the copies' partial
    /// rows into their primaries. When the exchange overlaps, every central row (no halo
    /// in-neighbour) is aggregated while the halo is in flight, then the marginal rows.
    fn pull_and_aggregate(
        &self,
        graph: &AggGraph,
        x: &mut Array2<f32>,
        out: &mut Array2<f32>,
        exchange: &mut dyn Exchange,
        tag: impl Fn(Step) -> Tag,
    ) -> Result<(), ExchangeError> {
        let m = graph.aggregated_rows();
        let tag_halo = tag(Step::Halo);
        if !graph.pulls_halo() {
            self.aggregate_fwd(graph, x, out, Write::Overwrite, 0..m, |_| true);
        } else if exchange.overlaps() {
            let central = graph.is_central();
            exchange.start_pull(tag_halo, x)?;
            self.aggregate_fwd(graph, x, out, Write::Overwrite, 0..m, |v| central[v]);
            exchange.finish_pull(tag_halo, x)?;
            self.aggregate_fwd(graph, x, out, Write::Overwrite, 0..m, |v| !central[v]);
        } else {
            exchange.pull_halo(tag_halo, x)?;
            self.aggregate_fwd(graph, x, out, Write::Overwrite, 0..m, |_| true);
        }
        if graph.pushes_aggregates() {
            exchange.push_halo_grad(tag(Step::Aggregate), out)?;
        }
        Ok(())
    }

    /// Backward of [`AggConv::pull_and_aggregate`]'s push: the copies of a graph that pushes
    /// aggregates take their primaries' rows of `g` (the gradient of the aggregate) before the
    /// transposed aggregation reads them there.
    fn pull_aggregate_grad(
        graph: &AggGraph,
        g: &mut Array2<f32>,
        exchange: &mut dyn Exchange,
        tag: Tag,
    ) -> Result<(), ExchangeError> {
        if graph.pushes_aggregates() { exchange.pull_halo(tag, g) } else { Ok(()) }
    }

    /// `out (+)= A^T g` over every local row, then (when the graph pulls its halo) pushes the
    /// halo rows of `out` to their primaries. When the exchange overlaps, the halo rows are computed and sent first and the
    /// primary rows computed while they are in flight.
    fn aggregate_and_push(
        &self,
        graph: &AggGraph,
        g: &Array2<f32>,
        out: &mut Array2<f32>,
        write: Write,
        exchange: &mut dyn Exchange,
        tag: Tag,
    ) -> Result<(), ExchangeError> {
        let (n, primaries) = (graph.num_local(), graph.num_primary());
        if !graph.pulls_halo() {
            self.aggregate_bwd(graph, g, out, write, 0..n);
            Ok(())
        } else if exchange.overlaps() {
            self.aggregate_bwd(graph, g, out, write, primaries..n);
            exchange.start_push(tag, out)?;
            self.aggregate_bwd(graph, g, out, write, 0..primaries);
            exchange.finish_push(tag, out)
        } else {
            self.aggregate_bwd(graph, g, out, write, 0..n);
            exchange.push_halo_grad(tag, out)
        }
    }
}

/// Zeroes the pulled halo rows of `x` once their last reader is done, handing their memory
/// back (`release_rows_from`): between exchanges a worker holds its computed rows only.
fn release_halo(graph: &AggGraph, x: &mut Array2<f32>) {
    if graph.pulls_halo() {
        release_rows_from(x, graph.computed_rows());
    }
}

/// `out[v] = (out[v] if accumulate) + coeff[v] * src[v] (+ bias)` for every row of `out` (a
/// row prefix of `src`'s rows), row-parallel.
fn add_scaled_rows<S: DataMut<Elem = f32>>(
    out: &mut ArrayBase<S, Ix2>,
    src: Option<(&Array2<f32>, &[f32])>,
    bias: Option<&[f32]>,
    accumulate: bool,
) {
    let width = out.ncols();
    par_rows_mut(out, |v, row| {
        if !accumulate {
            row.fill(0.0);
        }
        if let Some((src, coeff)) = src {
            let c = coeff[v];
            for (o, s) in row.iter_mut().zip(&slice(src)[v * width..][..width]) {
                *o += c * s;
            }
        }
        if let Some(b) = bias {
            for (o, bv) in row.iter_mut().zip(b) {
                *o += bv;
            }
        }
    });
}

impl Conv for AggConv {
    fn in_dim(&self) -> usize {
        self.weight.rows
    }

    fn out_dim(&self) -> usize {
        self.weight.cols
    }

    fn exchange_point(&self) -> ExchangePoint {
        self.point
    }

    fn backward_reads_input(&self) -> bool {
        // `x W` is differentiated w.r.t. W through x; the aggregate `A x` is cached instead
        // (Input point), and only GraphSAGE's root weight reads x there.
        self.point == ExchangePoint::Transformed || self.self_weight.is_some()
    }

    fn buffer_bytes(&self) -> usize {
        crate::dense::array_bytes(&self.cache)
    }

    fn forward(
        &mut self,
        params: &[f32],
        graph: &AggGraph,
        x: &mut Array2<f32>,
        out: &mut Array2<f32>,
        exchange: &mut dyn Exchange,
        layer: usize,
        _ctx: ForwardCtx,
    ) -> Result<(), ExchangeError> {
        // Dense work covers the computed rows `..m` only; halo rows come from `pull_halo`. The
        // transform covers every row whose input is held here (`..r`: more than `m` in a block).
        let (n, m, r) = (graph.num_local(), graph.computed_rows(), graph.local_input_rows());
        let (din, dout) = (self.in_dim(), self.out_dim());
        let w = self.weight.view(params);
        let bias = self.bias.slice(params);
        let self_coeff = &graph.norms().gcn_self;
        let tag = |step| Tag::new(layer, Direction::Forward, step);
        let mut cache = std::mem::take(&mut self.cache);
        ensure_shape(out, n, dout, graph.growth());
        match self.point {
            ExchangePoint::Transformed => {
                // h = x W; out = A h (synced) + self term + b.
                ensure_shape(&mut cache, n, dout, graph.growth());
                gemm(1.0, &head(x, r), &w, 0.0, &mut head_mut(&mut cache, r));
                self.pull_and_aggregate(graph, &mut cache, out, exchange, tag)?;
                exchange.sum_replicas(tag(Step::Aggregate), out)?;
                let mut own = head_mut(out, m);
                match self.self_weight {
                    None => add_scaled_rows(&mut own, Some((&cache, self_coeff)), Some(bias), true),
                    Some(ws) => {
                        gemm(1.0, &head(x, m), &ws.view(params), 1.0, &mut own);
                        add_scaled_rows(&mut own, None, Some(bias), true);
                    }
                }
                release_halo(graph, &mut cache);
            }
            ExchangePoint::Input => {
                // z = A x (synced) [+ GCN self loop]; out = z W [+ x W_self] + b.
                ensure_shape(&mut cache, n, din, graph.growth());
                self.pull_and_aggregate(graph, x, &mut cache, exchange, tag)?;
                exchange.sum_replicas(tag(Step::Aggregate), &mut cache)?;
                if self.self_weight.is_none() {
                    add_scaled_rows(&mut head_mut(&mut cache, m), Some((x, self_coeff)), None, true);
                }
                let mut own = head_mut(out, m);
                gemm(1.0, &head(&cache, m), &w, 0.0, &mut own);
                if let Some(ws) = self.self_weight {
                    gemm(1.0, &head(x, m), &ws.view(params), 1.0, &mut own);
                }
                add_scaled_rows(&mut own, None, Some(bias), true);
                release_halo(graph, x);
            }
        }
        self.cache = cache;
        Ok(())
    }

    fn backward(
        &mut self,
        params: &[f32],
        grads: &mut [f32],
        graph: &AggGraph,
        x: &Array2<f32>,
        dout: &mut Array2<f32>,
        dx: Option<&mut Array2<f32>>,
        exchange: &mut dyn Exchange,
        layer: usize,
    ) -> Result<(), ExchangeError> {
        // Gradient rows past `m` are ignored (halo rows carry none); the blocks the transposed
        // aggregation accumulates into get zeroed halo rows first, as they are pushed to owners.
        let (n, m, r) = (graph.num_local(), graph.computed_rows(), graph.local_input_rows());
        let (din, dim_out) = (self.in_dim(), self.out_dim());
        let w = self.weight.view(params);
        let self_coeff = &graph.norms().gcn_self;
        let tag = |step| Tag::new(layer, Direction::Backward, step);
        let mut cache = std::mem::take(&mut self.cache);
        // Per-vertex terms first, while `dout` still holds this replica's share.
        add_col_sums(&head(dout, m), self.bias.slice_mut(grads));
        if let Some(ws) = self.self_weight {
            gemm(1.0, &head(x, m).t(), &head(dout, m), 1.0, &mut ws.view_mut(grads));
        }
        let mut dx = dx;
        if let Some(dx) = dx.as_deref_mut() {
            ensure_rows(dx, n, din, graph.growth());
        }
        match self.point {
            ExchangePoint::Transformed => {
                // cache <- d(x W) = [GCN: self_coeff * dout] + A^T sum_replicas(dout)
                ensure_shape(&mut cache, n, dim_out, graph.growth());
                if let Some(dx) = dx.as_deref_mut()
                    && let Some(ws) = self.self_weight
                {
                    gemm(1.0, &head(dout, m), &ws.view(params).t(), 0.0, &mut head_mut(dx, m));
                    // Block sources past the destinations have no self term.
                    dx.slice_mut(s![m..r, ..]).fill(0.0);
                }
                let write = match self.self_weight {
                    None => {
                        add_scaled_rows(&mut head_mut(&mut cache, m), Some((dout, self_coeff)), None, false);
                        graph.zero_rows_from(&mut cache, m);
                        Write::Accumulate
                    }
                    Some(_) => Write::Overwrite,
                };
                Self::pull_aggregate_grad(graph, dout, exchange, tag(Step::Aggregate))?;
                exchange.sum_replicas(tag(Step::Aggregate), dout)?;
                self.aggregate_and_push(graph, dout, &mut cache, write, exchange, tag(Step::Halo))?;
                release_halo(graph, dout);
                gemm(1.0, &head(x, r).t(), &head(&cache, r), 1.0, &mut self.weight.view_mut(grads));
                if let Some(dx) = dx {
                    let beta = if self.self_weight.is_some() { 1.0 } else { 0.0 };
                    gemm(1.0, &head(&cache, r), &w.t(), beta, &mut head_mut(dx, r));
                }
            }
            ExchangePoint::Input => {
                gemm(1.0, &head(&cache, m).t(), &head(dout, m), 1.0, &mut self.weight.view_mut(grads));
                if let Some(dx) = dx {
                    // cache <- dz = dout W^T; dx = [self term] + A^T sum_replicas(dz).
                    gemm(1.0, &head(dout, m), &w.t(), 0.0, &mut head_mut(&mut cache, m));
                    match self.self_weight {
                        None => add_scaled_rows(&mut head_mut(dx, m), Some((&cache, self_coeff)), None, false),
                        Some(ws) => gemm(1.0, &head(dout, m), &ws.view(params).t(), 0.0, &mut head_mut(dx, m)),
                    }
                    graph.zero_rows_from(dx, m);
                    Self::pull_aggregate_grad(graph, &mut cache, exchange, tag(Step::Aggregate))?;
                    exchange.sum_replicas(tag(Step::Aggregate), &mut cache)?;
                    self.aggregate_and_push(graph, &cache, dx, Write::Accumulate, exchange, tag(Step::Halo))?;
                    release_halo(graph, &mut cache);
                }
            }
        }
        self.cache = cache;
        Ok(())
    }
}
