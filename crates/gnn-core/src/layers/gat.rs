//! GAT (PyG `GATConv` with self loops): multi-head additive attention,
//! `e_uv = LeakyReLU_0.2(a_src . h_u + a_dst . h_v)` with `h = x W`, softmax over the in-edges of
//! `v` plus its self loop, dropout on the attention coefficients, heads concatenated or averaged,
//! plus bias.
//!
//! Distributed softmax: the per-destination maximum is the local one (self loop included) through
//! `max_replicas`; exponentials are then summed locally into one block `[denominators | numerators]`
//! that a single `sum_replicas` completes, after which the self loop is added and the numerators
//! divided. The maximum cancels out of the softmax, so backward treats it as a constant.

use ndarray::Array2;
use rayon::prelude::*;

use super::{Conv, ExchangePoint, ForwardCtx};
use crate::dense::{
    MIN_PAR_ROWS, add_col_sums, ensure_rows, ensure_shape, gemm, head, head_mut, par_rows_mut, row_reduce, slice,
    slice_mut,
};
use crate::dropout::DropoutSite;
use crate::exchange::{Direction, Exchange, ExchangeError, Step, Tag};
use crate::graph::AggGraph;
use crate::params::{Init, ParamLayout, ParamSlot};
use crate::sparse::{Cols, Write, aggregate, edge_exp_sums, edge_row_max, par_row_blocks, sddmm_cols};

/// LeakyReLU slope of the attention scores (PyG's default).
pub const NEGATIVE_SLOPE: f32 = 0.2;

fn leaky(z: f32) -> f32 {
    if z > 0.0 { z } else { NEGATIVE_SLOPE * z }
}

fn leaky_grad(z: f32) -> f32 {
    if z > 0.0 { 1.0 } else { NEGATIVE_SLOPE }
}

/// A multi-head graph attention layer (see the module docs).
#[derive(Debug)]
pub struct GatConv {
    heads: usize,
    head_dim: usize,
    concat: bool,
    attn_dropout: f32,
    weight: ParamSlot,
    att_src: ParamSlot,
    att_dst: ParamSlot,
    bias: ParamSlot,
    point: ExchangePoint,
    cache: GatCache,
}

/// What forward leaves for backward, plus backward scratch; reused across calls.
#[derive(Debug)]
struct GatCache {
    /// `x W`, `num_local x heads*head_dim`.
    h: Array2<f32>,
    /// `a_src . h_v` and `a_dst . h_v`, `num_local x heads`.
    alpha_src: Vec<f32>,
    alpha_dst: Vec<f32>,
    /// Per-destination score maximum, `num_local x heads`.
    max: Array2<f32>,
    /// Per entry of `fwd` and head: `exp(e - max)`.
    weights: Vec<f32>,
    /// Self-loop `exp(e - max)`, `num_local x heads`.
    self_weights: Vec<f32>,
    /// Attention-dropout keep flags (entries, then self loops); empty when dropout was off.
    keep: Vec<u8>,
    self_keep: Vec<u8>,
    dropout_scale: f32,
    /// `[denominators | per-head outputs]`, `num_local x (heads + heads*head_dim)`.
    block: Array2<f32>,
    /// Backward scratch: `[d denominators | d numerators]`, per-entry score grads, `d h`.
    dblock: Array2<f32>,
    dscores: Vec<f32>,
    dalpha_src: Vec<f32>,
    dalpha_dst: Vec<f32>,
    dh: Array2<f32>,
}

impl GatCache {
    fn new() -> Self {
        let empty = || Array2::zeros((0, 0));
        Self {
            h: empty(),
            alpha_src: Vec::new(),
            alpha_dst: Vec::new(),
            max: empty(),
            weights: Vec::new(),
            self_weights: Vec::new(),
            keep: Vec::new(),
            self_keep: Vec::new(),
            dropout_scale: 1.0,
            block: empty(),
            dblock: empty(),
            dscores: Vec::new(),
            dalpha_src: Vec::new(),
            dalpha_dst: Vec::new(),
            dh: empty(),
        }
    }

    /// Bytes held by every buffer.
    fn bytes(&self) -> usize {
        let arrays = [&self.h, &self.max, &self.block, &self.dblock, &self.dh];
        let floats = [&self.alpha_src, &self.alpha_dst, &self.weights, &self.self_weights, &self.dscores];
        arrays.into_iter().map(crate::dense::array_bytes).sum::<usize>()
            + floats.into_iter().chain([&self.dalpha_src, &self.dalpha_dst]).map(|v| v.len() * 4).sum::<usize>()
            + self.keep.len()
            + self.self_keep.len()
    }

    /// Attention dropout factor of `keep[i]` (1 when dropout was off).
    fn factor(keep: &[u8], scale: f32, i: usize) -> f32 {
        if keep.is_empty() { 1.0 } else { f32::from(keep[i]) * scale }
    }
}

impl GatConv {
    /// A GAT layer with `heads` heads of `head_dim` channels, concatenated (`out_dim =
    /// heads * head_dim`) or averaged (`out_dim = head_dim`), attention dropout `attn_dropout`.
    /// Initialised like PyG: Glorot weight and attention vectors, zero bias. Parameters:
    /// `{name}.weight`, `{name}.att_src`, `{name}.att_dst`, `{name}.bias`.
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        in_dim: usize,
        heads: usize,
        head_dim: usize,
        concat: bool,
        attn_dropout: f32,
    ) -> Self {
        let width = heads * head_dim;
        let weight = layout.add(format!("{name}.weight"), in_dim, width, Init::Glorot);
        let att_src = layout.add(format!("{name}.att_src"), heads, head_dim, Init::Glorot);
        let att_dst = layout.add(format!("{name}.att_dst"), heads, head_dim, Init::Glorot);
        let out = if concat { width } else { head_dim };
        let bias = layout.add(format!("{name}.bias"), 1, out, Init::Zeros);
        let point = ExchangePoint::choose(in_dim, width);
        Self { heads, head_dim, concat, attn_dropout, weight, att_src, att_dst, bias, point, cache: GatCache::new() }
    }

    pub fn heads(&self) -> usize {
        self.heads
    }

    /// Rows whose `h = x W` this worker computes: with `h` pulled afterwards (Transformed) the
    /// rows whose input it holds; with `x` pulled (Input) every row, since halo rows are
    /// attention sources.
    fn transformed_rows(&self, graph: &AggGraph) -> usize {
        match self.point {
            ExchangePoint::Transformed => graph.local_input_rows(),
            ExchangePoint::Input => graph.num_local(),
        }
    }

    /// Scores of all entries and self loops, their per-destination maximum (synced), then
    /// `exp(e - max)` with local denominators in the first `heads` columns of `block`.
    fn attention_weights(
        &self,
        c: &mut GatCache,
        params: &[f32],
        graph: &AggGraph,
        exchange: &mut dyn Exchange,
        tag: impl Fn(Step) -> Tag,
    ) -> Result<(), ExchangeError> {
        let (n, heads, hd) = (graph.num_local(), self.heads, self.head_dim);
        let (a_src, a_dst) = (self.att_src.slice(params), self.att_dst.slice(params));
        c.alpha_src.resize(n * heads, 0.0);
        c.alpha_dst.resize(n * heads, 0.0);
        let h = slice(&c.h);
        c.alpha_src
            .par_chunks_mut(heads)
            .zip(c.alpha_dst.par_chunks_mut(heads))
            .enumerate()
            .with_min_len(MIN_PAR_ROWS)
            .for_each(|(v, (s, d))| {
                for (k, hv) in h[v * heads * hd..][..heads * hd].chunks_exact(hd).enumerate() {
                    s[k] = hv.iter().zip(&a_src[k * hd..][..hd]).map(|(x, y)| x * y).sum();
                    d[k] = hv.iter().zip(&a_dst[k * hd..][..hd]).map(|(x, y)| x * y).sum();
                }
            });
        let fwd = graph.fwd();
        c.weights.resize(fwd.num_edges() * heads, 0.0);
        ensure_shape(&mut c.max, n, heads, graph.growth());
        let (alpha_src, alpha_dst) = (&c.alpha_src, &c.alpha_dst);
        let max = slice_mut(&mut c.max);
        par_row_blocks(fwd, (&mut c.weights, heads), (max, heads), |rows, e, m| {
            let (first_row, first_entry) = (rows.start, fwd.indptr()[rows.start] as usize);
            for v in rows {
                let dst = &alpha_dst[v * heads..][..heads];
                let mv = &mut m[(v - first_row) * heads..][..heads];
                for ((mh, &s), &d) in mv.iter_mut().zip(&alpha_src[v * heads..][..heads]).zip(dst) {
                    *mh = leaky(s + d);
                }
                for k in fwd.row_range(v) {
                    let src = &alpha_src[fwd.indices()[k] as usize * heads..][..heads];
                    for ((eh, &s), &d) in e[(k - first_entry) * heads..][..heads].iter_mut().zip(src).zip(dst) {
                        *eh = leaky(s + d);
                    }
                }
            }
        });
        edge_row_max(fwd, &c.weights, heads, slice_mut(&mut c.max));
        exchange.max_replicas(tag(Step::AttentionMax), &mut c.max)?;
        ensure_shape(&mut c.block, n, heads + heads * hd, graph.growth());
        let stride = heads + heads * hd;
        edge_exp_sums(fwd, &mut c.weights, heads, slice(&c.max), slice_mut(&mut c.block), Cols { stride, offset: 0 });
        Ok(())
    }
}

impl Conv for GatConv {
    fn in_dim(&self) -> usize {
        self.weight.rows
    }

    fn out_dim(&self) -> usize {
        self.bias.cols
    }

    fn exchange_point(&self) -> ExchangePoint {
        self.point
    }

    fn backward_reads_input(&self) -> bool {
        // The weight gradient is `x^T dh`.
        true
    }

    fn buffer_bytes(&self) -> usize {
        self.cache.bytes()
    }

    fn forward(
        &mut self,
        params: &[f32],
        graph: &AggGraph,
        x: &mut Array2<f32>,
        out: &mut Array2<f32>,
        exchange: &mut dyn Exchange,
        layer: usize,
        ctx: ForwardCtx,
    ) -> Result<(), ExchangeError> {
        let (n, m, heads, hd) = (graph.num_local(), graph.computed_rows(), self.heads, self.head_dim);
        let width = heads * hd;
        let stride = heads + width;
        let tag = |step| Tag::new(layer, Direction::Forward, step);
        let mut c = std::mem::replace(&mut self.cache, GatCache::new());
        if self.point == ExchangePoint::Input && graph.pulls_halo() {
            exchange.pull_halo(tag(Step::Halo), x)?;
        }
        // Halo rows are sources of attention, so they need `h`: pulled, or transformed here.
        let transformed_rows = self.transformed_rows(graph);
        ensure_shape(&mut c.h, n, width, graph.growth());
        gemm(
            1.0,
            &head(x, transformed_rows),
            &self.weight.view(params),
            0.0,
            &mut head_mut(&mut c.h, transformed_rows),
        );
        if self.point == ExchangePoint::Transformed && graph.pulls_halo() {
            exchange.pull_halo(tag(Step::Halo), &mut c.h)?;
        }
        self.attention_weights(&mut c, params, graph, exchange, tag)?;

        // Attention dropout flags, keyed by global (src, dst, head).
        let fwd = graph.fwd();
        let gids = graph.global_ids();
        let site = DropoutSite::new(self.attn_dropout, ctx.seed, ctx.round(), layer);
        c.dropout_scale = site.scale();
        if ctx.training && site.is_active() {
            c.keep.resize(fwd.num_edges() * heads, 0);
            c.self_keep.resize(n * heads, 0);
            par_row_blocks(fwd, (&mut c.keep, heads), (&mut c.self_keep, heads), |rows, keep, self_keep| {
                let (first_row, first_entry) = (rows.start, fwd.indptr()[rows.start] as usize);
                for v in rows {
                    let dst = gids[v];
                    site.edge_keep(dst, dst, &mut self_keep[(v - first_row) * heads..][..heads]);
                    for k in fwd.row_range(v) {
                        let src = gids[fwd.indices()[k] as usize];
                        site.edge_keep(src, dst, &mut keep[(k - first_entry) * heads..][..heads]);
                    }
                }
            });
        } else {
            c.keep.clear();
            c.self_keep.clear();
        }

        // Local numerators next to the local denominators, then one sync of the whole block.
        let (weights, keep, scale) = (&c.weights, &c.keep, c.dropout_scale);
        let block = slice_mut(&mut c.block);
        aggregate(
            fwd,
            0..m,
            slice(&c.h),
            Cols::full(width),
            block,
            Cols { stride, offset: heads },
            heads,
            hd,
            Write::Overwrite,
            |_, k, _, head| weights[k * heads + head] * GatCache::factor(keep, scale, k * heads + head),
        );
        exchange.sum_replicas(tag(Step::Aggregate), &mut c.block)?;

        // Self loops, then per-head outputs o = numerator / denominator (kept in the block).
        c.self_weights.resize(n * heads, 0.0);
        let (h, max, alpha_src, alpha_dst, self_keep) =
            (slice(&c.h), slice(&c.max), &c.alpha_src, &c.alpha_dst, &c.self_keep);
        slice_mut(&mut c.block)
            .par_chunks_mut(stride)
            .zip(c.self_weights.par_chunks_mut(heads))
            .take(m)
            .enumerate()
            .with_min_len(MIN_PAR_ROWS)
            .for_each(|(v, (row, sw))| {
                let (den, num) = row.split_at_mut(heads);
                for head in 0..heads {
                    let i = v * heads + head;
                    let w = (leaky(alpha_src[i] + alpha_dst[i]) - max[i]).exp();
                    sw[head] = w;
                    den[head] += w;
                    let wf = w * GatCache::factor(self_keep, scale, i);
                    let inv = den[head].recip();
                    for (o, &hv) in num[head * hd..][..hd].iter_mut().zip(&h[v * width + head * hd..][..hd]) {
                        *o = (*o + wf * hv) * inv;
                    }
                }
            });

        let out_dim = self.out_dim();
        ensure_shape(out, n, out_dim, graph.growth());
        let (bias, block, concat) = (self.bias.slice(params), slice(&c.block), self.concat);
        let inv_heads = (heads as f32).recip();
        par_rows_mut(&mut head_mut(out, m), |v, o| {
            let per_head = &block[v * stride + heads..][..width];
            if concat {
                o.copy_from_slice(per_head);
            } else {
                o.fill(0.0);
                for head_out in per_head.chunks_exact(hd) {
                    o.iter_mut().zip(head_out).for_each(|(a, b)| *a += b);
                }
                o.iter_mut().for_each(|a| *a *= inv_heads);
            }
            o.iter_mut().zip(bias).for_each(|(a, b)| *a += b);
        });
        self.cache = c;
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
        let (n, m, heads, hd) = (graph.num_local(), graph.computed_rows(), self.heads, self.head_dim);
        let width = heads * hd;
        let stride = heads + width;
        let tag = |step| Tag::new(layer, Direction::Backward, step);
        let mut c = std::mem::replace(&mut self.cache, GatCache::new());
        add_col_sums(&head(dout, m), self.bias.slice_mut(grads));

        // Per-vertex part, on this replica's share of the gradient:
        // d numerator = do / den, d den = -(do . o) / den, and the self loop's contributions.
        ensure_shape(&mut c.dblock, n, stride, graph.growth());
        ensure_shape(&mut c.dh, n, width, graph.growth());
        c.dalpha_src.resize(n * heads, 0.0);
        c.dalpha_dst.resize(n * heads, 0.0);
        let scale = c.dropout_scale;
        let (block, h, dout_s) = (slice(&c.block), slice(&c.h), slice(dout));
        let (self_weights, self_keep, alpha_src, alpha_dst) =
            (&c.self_weights, &c.self_keep, &c.alpha_src, &c.alpha_dst);
        let (concat, inv_heads, dout_w) = (self.concat, (heads as f32).recip(), dout.ncols());
        slice_mut(&mut c.dblock)
            .par_chunks_mut(stride)
            .zip(slice_mut(&mut c.dh).par_chunks_mut(width))
            .zip(c.dalpha_src.par_chunks_mut(heads).zip(c.dalpha_dst.par_chunks_mut(heads)))
            .enumerate()
            .with_min_len(MIN_PAR_ROWS)
            .for_each(|(v, ((drow, dhv), (das, dad)))| {
                if v >= m {
                    // A halo row: no gradient of its own, only what its out-edges add below.
                    [drow, dhv, das, dad].into_iter().for_each(|r| r.fill(0.0));
                    return;
                }
                let (dden, dnum) = drow.split_at_mut(heads);
                for head in 0..heads {
                    let i = v * heads + head;
                    let den = block[v * stride + head];
                    let o = &block[v * stride + heads + head * hd..][..hd];
                    let dn = &mut dnum[head * hd..][..hd];
                    let (g_off, g_scale) = if concat { (head * hd, 1.0) } else { (0, inv_heads) };
                    let g = &dout_s[v * dout_w + g_off..][..hd];
                    let inv = den.recip();
                    let mut dot = 0.0;
                    for ((d, &gv), &ov) in dn.iter_mut().zip(g).zip(o) {
                        *d = gv * g_scale * inv;
                        dot += gv * g_scale * ov;
                    }
                    dden[head] = -dot * inv;
                    let hv = &h[v * width + head * hd..][..hd];
                    let f = GatCache::factor(self_keep, scale, i);
                    let w = self_weights[i];
                    let dn_h: f32 = dn.iter().zip(hv).map(|(a, b)| a * b).sum();
                    for (d, &a) in dhv[head * hd..][..hd].iter_mut().zip(dn.iter()) {
                        *d = w * f * a;
                    }
                    let dz = w * (dden[head] + f * dn_h) * leaky_grad(alpha_src[i] + alpha_dst[i]);
                    das[head] = dz;
                    dad[head] = dz;
                }
            });
        exchange.sum_replicas(tag(Step::Aggregate), &mut c.dblock)?;

        // Edges: score gradients (destination side summed per row), then the transposed gathers
        // for the source side and for d h.
        let fwd = graph.fwd();
        c.dscores.resize(fwd.num_edges() * heads, 0.0);
        let dblock = slice(&c.dblock);
        sddmm_cols(fwd, (dblock, Cols { stride, offset: heads }), (h, Cols::full(width)), heads, hd, &mut c.dscores);
        let (weights, keep) = (&c.weights, &c.keep);
        par_row_blocks(fwd, (&mut c.dscores, heads), (&mut c.dalpha_dst, heads), |rows, ds, dad| {
            let (first_row, first_entry) = (rows.start, fwd.indptr()[rows.start] as usize);
            for v in rows {
                let dden = &dblock[v * stride..][..heads];
                let dst = &alpha_dst[v * heads..][..heads];
                let dv = &mut dad[(v - first_row) * heads..][..heads];
                for k in fwd.row_range(v) {
                    let src = &alpha_src[fwd.indices()[k] as usize * heads..][..heads];
                    for head in 0..heads {
                        let i = k * heads + head;
                        let d = &mut ds[(k - first_entry) * heads + head];
                        // *d holds dn_v . h_u on entry.
                        let dw = dden[head] + GatCache::factor(keep, scale, i) * *d;
                        *d = weights[i] * dw * leaky_grad(src[head] + dst[head]);
                        dv[head] += *d;
                    }
                }
            }
        });
        let (bwd, perm, dscores) = (graph.bwd(), graph.perm(), &c.dscores);
        par_row_blocks(bwd, (&mut [] as &mut [f32], 0), (&mut c.dalpha_src, heads), |rows, _, das| {
            let first_row = rows.start;
            for u in rows {
                let du = &mut das[(u - first_row) * heads..][..heads];
                for k in bwd.row_range(u) {
                    du.iter_mut().zip(&dscores[perm[k] * heads..][..heads]).for_each(|(a, b)| *a += b);
                }
            }
        });
        aggregate(
            bwd,
            0..n,
            dblock,
            Cols { stride, offset: heads },
            slice_mut(&mut c.dh),
            Cols::full(width),
            heads,
            hd,
            Write::Accumulate,
            |_, k, _, head| {
                let i = perm[k] * heads + head;
                weights[i] * GatCache::factor(keep, scale, i)
            },
        );

        // Attention vectors: dh += dalpha (x) a, d a += sum_v dalpha_v h_v.
        let (a_src, a_dst) = (self.att_src.slice(params), self.att_dst.slice(params));
        let (das, dad) = (&c.dalpha_src, &c.dalpha_dst);
        par_rows_mut(&mut c.dh, |v, dhv| {
            for (head, d) in dhv.chunks_exact_mut(hd).enumerate() {
                let (s, t) = (das[v * heads + head], dad[v * heads + head]);
                for ((dv, &a), &b) in d.iter_mut().zip(&a_src[head * hd..][..hd]).zip(&a_dst[head * hd..][..hd]) {
                    *dv += s * a + t * b;
                }
            }
        });
        let mut datt = vec![0.0f32; 2 * width];
        row_reduce(n, &mut datt, |rows, acc| {
            let (acc_src, acc_dst) = acc.split_at_mut(width);
            for v in rows {
                for (head, hv) in h[v * width..][..width].chunks_exact(hd).enumerate() {
                    let (s, t) = (das[v * heads + head], dad[v * heads + head]);
                    for ((as_, ad), &x) in
                        acc_src[head * hd..][..hd].iter_mut().zip(&mut acc_dst[head * hd..][..hd]).zip(hv)
                    {
                        *as_ += s * x;
                        *ad += t * x;
                    }
                }
            }
        });
        let (datt_src, datt_dst) = datt.split_at(width);
        self.att_src.slice_mut(grads).iter_mut().zip(datt_src).for_each(|(g, d)| *g += d);
        self.att_dst.slice_mut(grads).iter_mut().zip(datt_dst).for_each(|(g, d)| *g += d);

        // Through the linear transform.
        if self.point == ExchangePoint::Transformed && graph.pulls_halo() {
            exchange.push_halo_grad(tag(Step::Halo), &mut c.dh)?;
        }
        let rows = self.transformed_rows(graph);
        gemm(1.0, &head(x, rows).t(), &head(&c.dh, rows), 1.0, &mut self.weight.view_mut(grads));
        if let Some(dx) = dx {
            ensure_rows(dx, n, self.in_dim(), graph.growth());
            gemm(1.0, &head(&c.dh, rows), &self.weight.view(params).t(), 0.0, &mut head_mut(dx, rows));
            if self.point == ExchangePoint::Input && graph.pulls_halo() {
                exchange.push_halo_grad(tag(Step::Halo), dx)?;
            }
        }
        self.cache = c;
        Ok(())
    }
}
