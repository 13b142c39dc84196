//! GCN's and GraphSAGE's aggregation on a worker's part of a cut graph, split where the
//! exchange's calls go in.
//!
//! On a whole graph the self term folds into the CSR as a diagonal entry ([`super::aggregation`]).
//! On a part it cannot: the CPU layers sum a replicated vertex's partial aggregates
//! (`sum_replicas`, or a masters-only part's push) *before* the vertex adds its self term once, so
//! a diagonal in every replica's CSR would count it once per replica. The device therefore runs
//! `A x` over the local in-edges, the exchange's calls, then adds `self_coeff[v] * x[v]`.

use super::{PlanError, WeightedCsr, edge_csr};
use crate::graph::AggGraph;
use crate::model::ConvKind;

/// The aggregation of a part: its local in-edges, and GCN's self term apart.
#[derive(Debug, Clone, PartialEq)]
pub struct PartAggregation {
    /// The coefficients of every local row's in-edges, no self loop: what each replica
    /// aggregates before the sync. An edge-cut part's halo rows are empty rows.
    pub csr: WeightedCsr,
    /// GCN: each row's self coefficient, to add once the aggregate is synced; zero past the
    /// computed rows (copies that do not compute never add a self term). `None` for GraphSAGE,
    /// whose root term has its own weight.
    pub self_coeff: Option<Vec<f32>>,
}

/// The aggregation of `kind` on `graph`, any view of a part (or a whole graph).
///
/// GAT's CSR leads each primary row with its self loop (attention replaces the values). Its
/// softmax runs split around the replica syncs, as the CPU layer's does: each replica
/// exponentiates its entries against the synced maximum and sums them, with the numerators,
/// into a block that the replicas sum. A vertex's self loop must enter that sum once, so only
/// its primary (every vertex has one, on one worker) holds it; copies and halo rows hold their
/// in-edges alone. Refused where the masters alone compute ([`AggGraph::pushes_aggregates`]),
/// as the CPU refuses it.
pub fn part_aggregation(graph: &AggGraph, kind: ConvKind) -> Result<PartAggregation, PlanError> {
    if kind == ConvKind::Gat {
        if graph.pushes_aggregates() {
            return Err(PlanError::PartGat);
        }
        return Ok(PartAggregation { csr: edge_csr(graph, kind, graph.num_primary()), self_coeff: None });
    }
    let computed = graph.computed_rows();
    let self_coeff = (kind == ConvKind::Gcn).then(|| {
        let coeff = &graph.norms().gcn_self;
        coeff.iter().enumerate().map(|(v, &c)| if v < computed { c } else { 0.0 }).collect()
    });
    Ok(PartAggregation { csr: edge_csr(graph, kind, 0), self_coeff })
}

/// A part's aggregation cut in two for an exchange that overlaps
/// ([`crate::Exchange::overlaps`]), where the CPU layers cut it (`layers::agg`): forward, the
/// central rows (no halo in-neighbour: aggregated while the halo is in flight) apart from the
/// marginal ones; backward, the transpose's halo rows (computed and pushed first) apart from
/// its primary rows (computed while they are in flight). Each half keeps the other's rows
/// empty ([`WeightedCsr::rows_where`]), so the two products added are the uncut product.
#[derive(Debug, Clone, PartialEq)]
pub struct OverlapHalves {
    pub central: WeightedCsr,
    pub marginal: WeightedCsr,
    pub halo_t: WeightedCsr,
    pub primary_t: WeightedCsr,
}

/// [`OverlapHalves`] of `plan`, the aggregation of a GCN or GraphSAGE layer on `graph` (an
/// edge-cut part: it pulls its halo and pushes no aggregate).
pub fn overlap_halves(graph: &AggGraph, plan: &PartAggregation) -> OverlapHalves {
    let (central, primaries) = (graph.is_central(), graph.num_primary());
    let t = plan.csr.transpose();
    OverlapHalves {
        central: plan.csr.rows_where(|v| central[v]),
        marginal: plan.csr.rows_where(|v| !central[v]),
        halo_t: t.rows_where(|v| v >= primaries),
        primary_t: t.rows_where(|v| v < primaries),
    }
}

#[cfg(test)]
mod tests {
    use comm_hierarchy::Communicator;
    use graph_partition::book::{CutKind, LocalGraph, PartitionBook};
    use graph_partition::partition::{Algorithm, Partition, PartitionConfig, partition_graph};
    use ndarray::Array2;

    use super::*;
    use crate::exchange::edge_cut::EdgeCutExchange;
    use crate::exchange::part_view::agg_graph_of;
    use crate::exchange::staging::Stager;
    use crate::exchange::testkit;
    use crate::exchange::vertex_cut::VertexCutExchange;
    use crate::exchange::{Call, Direction, Exchange, ExchangeOptions, Pass, Step, Tag};
    use crate::gpu::plan::identity_model;
    use crate::layers::ForwardCtx;
    use crate::model::{Model, ModelConfig};

    const WIDTH: usize = 4;

    /// How a worker runs its part.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Run {
        EdgeCut,
        VertexCut,
        MastersOnly,
    }

    fn book(run: Run) -> PartitionBook {
        match run {
            Run::EdgeCut => {
                testkit::book(&Partition::EdgeCut { parts: 4, owner: vec![0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0] })
            }
            Run::VertexCut | Run::MastersOnly => {
                let config = PartitionConfig { hosts: 2, ..PartitionConfig::new(Algorithm::RandomVertexCut, 4) };
                testkit::book(&partition_graph(&testkit::graph(), &config).unwrap())
            }
        }
    }

    /// A fresh exact exchange of the kind `run` uses.
    fn make_exchange<'p>(
        run: Run,
        part: &'p LocalGraph,
        comm: &'p dyn Communicator,
    ) -> Result<Box<dyn Exchange + 'p>, String> {
        let options = ExchangeOptions::default();
        let made: Box<dyn Exchange + 'p> = match run {
            Run::VertexCut => Box::new(VertexCutExchange::new(part, comm, options).map_err(|e| e.to_string())?),
            Run::EdgeCut | Run::MastersOnly => {
                Box::new(EdgeCutExchange::new(part, comm, options).map_err(|e| e.to_string())?)
            }
        };
        Ok(made)
    }

    /// The part's aggregation as the device runs it: pull the rows read as neighbours, `A x`,
    /// push the copies' partial sums (masters-only) and sum the replicas, then the self term.
    fn device_order(
        graph: &AggGraph,
        plan: &PartAggregation,
        x: &mut Array2<f32>,
        exchange: &mut dyn Exchange,
    ) -> Result<Array2<f32>, String> {
        let tag = |step| Tag::new(0, Direction::Forward, step);
        exchange.begin(Pass::eval());
        if graph.pulls_halo() {
            exchange.pull_halo(tag(Step::Halo), x).map_err(|e| e.to_string())?;
        }
        let mut z = plan.csr.apply(x);
        if graph.pushes_aggregates() {
            exchange.push_halo_grad(tag(Step::Aggregate), &mut z).map_err(|e| e.to_string())?;
        }
        exchange.sum_replicas(tag(Step::Aggregate), &mut z).map_err(|e| e.to_string())?;
        if let Some(coeff) = &plan.self_coeff {
            for (v, &c) in coeff.iter().enumerate() {
                let own = x.row(v).to_owned() * c;
                let mut row = z.row_mut(v);
                row += &own;
            }
        }
        Ok(z)
    }

    /// On every part of an edge-cut, a vertex-cut and a masters-only vertex-cut, the part's CSR
    /// and self coefficients, applied around the exchange's calls, give the computed rows of the
    /// CPU layer's output on the same part.
    #[test]
    fn the_part_aggregation_around_the_exchange_matches_the_cpu_layers() {
        for run in [Run::EdgeCut, Run::VertexCut, Run::MastersOnly] {
            let book = book(run);
            for kind in [ConvKind::Gcn, ConvKind::Sage] {
                testkit::run(&book, |part, comm| {
                    let cut = if run == Run::EdgeCut { CutKind::EdgeCut } else { CutKind::VertexCut };
                    let mut graph = agg_graph_of(part, cut).map_err(|e| e.to_string())?;
                    if run == Run::MastersOnly {
                        graph = graph.with_primaries_computing();
                    }
                    let (n, r, m) = (graph.num_local(), graph.local_input_rows(), graph.computed_rows());
                    // Rows that are not the worker's input are NaN: a row read before its pull spreads.
                    let mut x = Array2::from_shape_fn((n, WIDTH), |(l, c)| {
                        let g = graph.global_ids()[l] as f32;
                        if l < r { 0.3 * g - 0.2 * c as f32 + 0.05 } else { f32::NAN }
                    });
                    let mut model = identity_model(kind, WIDTH);
                    let want = model
                        .forward(&graph, &x, make_exchange(run, part, comm)?.as_mut(), ForwardCtx::eval())
                        .map_err(|e| e.to_string())?
                        .clone();
                    let plan = part_aggregation(&graph, kind).map_err(|e| e.to_string())?;
                    assert!((0..n).all(|v| {
                        !plan.csr.indices[plan.csr.indptr[v] as usize..plan.csr.indptr[v + 1] as usize]
                            .contains(&(v as u32))
                    }));
                    let got = device_order(&graph, &plan, &mut x, make_exchange(run, part, comm)?.as_mut())?;
                    for v in 0..m {
                        for (a, b) in got.row(v).iter().zip(want.row(v)) {
                            let name = format!("{run:?} {kind:?} part {} row {v}", part.part());
                            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{name}: {a} vs {b}");
                        }
                    }
                    Ok(())
                });
            }
        }
    }

    /// GAT leads each primary row with its self loop, on every part of an edge-cut and a
    /// vertex-cut, and is refused where the masters alone compute; copies never add a GCN self
    /// term.
    #[test]
    fn gat_loops_primaries_only_and_copies_add_no_self_term() {
        let vertex_cut = book(Run::VertexCut);
        let every_replica = agg_graph_of(&vertex_cut.parts()[0], CutKind::VertexCut).unwrap();
        assert_eq!(
            part_aggregation(&every_replica.with_primaries_computing(), ConvKind::Gat).unwrap_err(),
            PlanError::PartGat
        );
        let edge_cut = book(Run::EdgeCut);
        for (book, cut) in [(&edge_cut, CutKind::EdgeCut), (&vertex_cut, CutKind::VertexCut)] {
            for part in book.parts() {
                let graph = agg_graph_of(part, cut).unwrap();
                let gat = part_aggregation(&graph, ConvKind::Gat).unwrap();
                let (n, p) = (graph.num_local(), graph.num_primary());
                assert!(p < n, "{cut:?} part {} has copies or halo rows", part.part());
                assert_eq!((gat.csr.indices.len(), gat.self_coeff), (graph.fwd().num_edges() + p, None));
                for v in 0..n {
                    let row = &gat.csr.indices[gat.csr.indptr[v] as usize..gat.csr.indptr[v + 1] as usize];
                    let loops = row.iter().filter(|&&u| u == v as u32).count();
                    assert_eq!((loops, row.len()), (usize::from(v < p), graph.fwd().degree(v) + usize::from(v < p)));
                }
            }
        }
        let graph = agg_graph_of(&edge_cut.parts()[0], CutKind::EdgeCut).unwrap();
        let plan = part_aggregation(&graph, ConvKind::Gcn).unwrap();
        let coeff = plan.self_coeff.unwrap();
        assert!(coeff[..graph.computed_rows()].iter().all(|&c| c > 0.0));
        assert!(coeff[graph.computed_rows()..].iter().all(|&c| c == 0.0));
        assert_eq!(part_aggregation(&graph, ConvKind::Sage).unwrap().self_coeff, None);
    }

    /// One worker's GAT layer on its part, on the CPU and as the device runs it.
    struct GatOutcome {
        /// The computed rows of the CPU layer's output and of the device order's.
        rows: [Vec<f32>; 2],
        /// The worker's share of the parameter gradients, CPU and device order.
        grads: [Vec<f32>; 2],
    }

    /// The plan's CSR with each row's entries in ascending order (GAT's are all 1, and the order
    /// changes only the sums' rounding), as a validated CSR for the references.
    fn sorted(plan: &WeightedCsr) -> (WeightedCsr, graph_partition::Csr) {
        let mut out = plan.clone();
        for v in 0..plan.indptr.len() - 1 {
            out.indices[plan.indptr[v] as usize..plan.indptr[v + 1] as usize].sort_unstable();
        }
        let n = plan.indptr.len() - 1;
        let csr = graph_partition::Csr::try_new(n, n, out.indptr.clone(), out.indices.clone()).unwrap();
        (out, csr)
    }

    /// A one-layer GAT (`cfg`) forward with attention dropout and backward on `part`: the CPU
    /// layer, and the device's order with the CPU references of its kernels: `h = x W` (`x` or
    /// `h` pulled where the layer pulls), the logits, each row's maximum with its self-loop
    /// logit, synced (`max_replicas`), the exponentials and their sums, the dropped numerators
    /// put beside the sums and the block synced (`sum_replicas`), the quotient; backward, the
    /// quotient's gradient synced, the numerators' gradient into `w` and `h`, the exponentials'
    /// (`edge_exp_backward`), the attention vectors', `h`'s pushed back where it was pulled, and
    /// the weight's.
    fn gat_part(
        run: Run,
        held: bool,
        cfg: &ModelConfig,
        part: &LocalGraph,
        comm: &dyn Communicator,
    ) -> Result<GatOutcome, String> {
        use crate::dropout::DropoutSite;
        use crate::gpu::plan::{DevicePlan, attention_keep};
        use crate::gpu::reference;
        use crate::layers::gat::NEGATIVE_SLOPE;
        let e = |x: &dyn std::fmt::Display| format!("{run:?} part {}: {x}", part.part());
        let cut = if run == Run::EdgeCut { CutKind::EdgeCut } else { CutKind::VertexCut };
        let mut graph = agg_graph_of(part, cut).map_err(|x| e(&x))?;
        if held {
            graph = graph.with_held_halo().map_err(|x| e(&x))?;
        }
        let (n, r, m, p) = (graph.num_local(), graph.local_input_rows(), graph.computed_rows(), graph.num_primary());
        let gids = graph.global_ids().to_vec();
        // Rows that are not the worker's input hold garbage: read before their pull, it shows.
        let x0 = Array2::from_shape_fn((n, cfg.in_dim), |(l, c)| {
            if l < r { ((gids[l] as usize * 5 + c * 3) % 13) as f32 / 13.0 - 0.45 } else { 100.0 }
        });
        let g = Array2::from_shape_fn((n, cfg.out_dim), |(l, c)| {
            if l < p { ((gids[l] as usize * 3 + c) % 7) as f32 / 7.0 - 0.4 } else { 0.0 }
        });
        let ctx = ForwardCtx::train(7, 2);

        let mut model = Model::new(cfg.clone()).map_err(|x| e(&x))?;
        let mut exchange = make_exchange(run, part, comm)?;
        let out = model.forward(&graph, &x0, exchange.as_mut(), ctx).map_err(|x| e(&x))?;
        let cpu_rows: Vec<f32> = out.rows().into_iter().take(m).flatten().copied().collect();
        model.backward(&graph, g.clone(), exchange.as_mut()).map_err(|x| e(&x))?;

        let plan = DevicePlan::of(&model).map_err(|x| e(&x))?;
        let layer = &plan.layers[0];
        let (hs, hd) = (layer.heads, layer.head_dim);
        let (hw, stride) = (hs * hd, hs + hs * hd);
        let (att_src, att_dst) = layer.attention.ok_or("a GAT layer")?;
        let tensors = plan.split(model.params()).map_err(|x| e(&x))?;
        let weight = Array2::from_shape_vec((cfg.in_dim, hw), tensors[layer.weight].to_vec()).map_err(|x| e(&x))?;
        let (a_src, a_dst, bias) = (tensors[att_src], tensors[att_dst], tensors[layer.bias]);
        let agg = part_aggregation(&graph, ConvKind::Gat).map_err(|x| e(&x))?;
        let (entries, csr) = sorted(&agg.csr);
        let rows_of = |v: usize| (csr.row_range(v), csr.indices());
        let site = DropoutSite::new(cfg.attn_dropout, ctx.seed, ctx.round(), 0);
        let factor: Vec<f32> =
            attention_keep(&graph, &entries, &site, hs).iter().map(|&k| f32::from(k) * site.scale()).collect();
        let fwd = |step| Tag::new(0, Direction::Forward, step);
        let bwd = |step| Tag::new(0, Direction::Backward, step);
        let failed = |x: crate::exchange::ExchangeError| e(&x);

        let mut exchange = make_exchange(run, part, comm)?;
        exchange.begin(ctx.pass());
        let mut x = x0.clone();
        let pulls_input = layer.aggregates_first() && graph.pulls_halo();
        let pulls_h = !layer.aggregates_first() && graph.pulls_halo();
        if pulls_input {
            exchange.pull_halo(fwd(Step::Halo), &mut x).map_err(failed)?;
        }
        let mut h = x.dot(&weight);
        if pulls_h {
            exchange.pull_halo(fwd(Step::Halo), &mut h).map_err(failed)?;
        }
        let hv = h.as_slice().unwrap().to_vec();
        let alpha = |a: &[f32]| -> Vec<f32> {
            (0..n * hs)
                .map(|i| (0..hd).map(|j| hv[(i / hs) * hw + (i % hs) * hd + j] * a[(i % hs) * hd + j]).sum())
                .collect()
        };
        let (alpha_src, alpha_dst) = (alpha(a_src), alpha(a_dst));
        let scores = reference::gat_logits(&csr, hs, NEGATIVE_SLOPE, &alpha_src, &alpha_dst);
        let max = reference::gat_row_max(&csr, hs, NEGATIVE_SLOPE, &scores, &alpha_src, &alpha_dst);
        let mut max = Array2::from_shape_vec((n, hs), max).map_err(|x| e(&x))?;
        exchange.max_replicas(fwd(Step::AttentionMax), &mut max).map_err(failed)?;
        let mut w = scores.clone();
        let mut block = Array2::<f32>::zeros((n, stride));
        reference::edge_exp_sums(&csr, hs, max.as_slice().unwrap(), &mut w, block.as_slice_mut().unwrap(), stride);
        let dropped: Vec<f32> = w.iter().zip(&factor).map(|(w, f)| w * f).collect();
        let mut num = vec![0.0f32; n * hw];
        for v in 0..n {
            let (range, cols) = rows_of(v);
            for k in range {
                let u = cols[k] as usize;
                (0..hw).for_each(|c| num[v * hw + c] += dropped[k * hs + c / hd] * hv[u * hw + c]);
            }
        }
        reference::put_columns_around(stride, 0..hs, &num, block.as_slice_mut().unwrap());
        exchange.sum_replicas(fwd(Step::Aggregate), &mut block).map_err(failed)?;
        let per_head = reference::head_divide(hs, hd, block.as_slice().unwrap());
        let mut rows = Vec::with_capacity(m * hd);
        for v in 0..m {
            for j in 0..hd {
                rows.push((0..hs).map(|k| per_head[v * hw + k * hd + j]).sum::<f32>() / hs as f32 + bias[j]);
            }
        }

        let mut grads: Vec<Vec<f32>> = tensors.iter().map(|t| vec![0.0; t.len()]).collect();
        for v in 0..n {
            (0..hd).for_each(|j| grads[layer.bias][j] += g[[v, j]]);
        }
        let d_heads: Vec<f32> = (0..n * hw).map(|i| g[[i / hw, i % hw % hd]] / hs as f32).collect();
        let dblock = reference::head_divide_backward(hs, hd, block.as_slice().unwrap(), &d_heads);
        let mut dblock = Array2::from_shape_vec((n, stride), dblock).map_err(|x| e(&x))?;
        exchange.sum_replicas(bwd(Step::Aggregate), &mut dblock).map_err(failed)?;
        let dnum = reference::take_columns_around(stride, 0..hs, dblock.as_slice().unwrap());
        let (mut dw, mut dh) = (vec![0.0f32; w.len()], Array2::<f32>::zeros((n, hw)));
        for v in 0..n {
            let (range, cols) = rows_of(v);
            for k in range {
                let u = cols[k] as usize;
                for c in 0..hw {
                    dw[k * hs + c / hd] += dnum[v * hw + c] * hv[u * hw + c];
                    dh[[u, c]] += dropped[k * hs + c / hd] * dnum[v * hw + c];
                }
            }
        }
        dw.iter_mut().zip(&factor).for_each(|(d, f)| *d *= f);
        let mut de = reference::edge_exp_backward(&csr, hs, &w, &dw, dblock.as_slice().unwrap(), stride);
        de.iter_mut().zip(&scores).for_each(|(d, &s)| *d *= if s > 0.0 { 1.0 } else { NEGATIVE_SLOPE });
        let (mut d_src, mut d_dst) = (vec![0.0f32; n * hs], vec![0.0f32; n * hs]);
        for v in 0..n {
            let (range, cols) = rows_of(v);
            for k in range {
                for head in 0..hs {
                    d_dst[v * hs + head] += de[k * hs + head];
                    d_src[cols[k] as usize * hs + head] += de[k * hs + head];
                }
            }
        }
        for (i, (&ds, &dd)) in d_src.iter().zip(&d_dst).enumerate() {
            let (v, head) = (i / hs, i % hs);
            for j in 0..hd {
                let c = head * hd + j;
                dh[[v, c]] += ds * a_src[c] + dd * a_dst[c];
                grads[att_src][c] += ds * hv[v * hw + c];
                grads[att_dst][c] += dd * hv[v * hw + c];
            }
        }
        if pulls_h {
            exchange.push_halo_grad(bwd(Step::Halo), &mut dh).map_err(failed)?;
        }
        grads[layer.weight] = x.t().dot(&dh).into_raw_vec_and_offset().0;
        Ok(GatOutcome {
            rows: [cpu_rows, rows],
            grads: [model.grads().to_vec(), plan.join(&grads).map_err(|x| e(&x))?],
        })
    }

    /// GAT's softmax split around the replica syncs as the device runs it (`part_aggregation`'s
    /// CSR, the references of the device's kernels, the exchange's calls in the CPU layer's
    /// order) gives the CPU layer's output on every part of an edge-cut (pulling `x`, pulling
    /// `x W`, and holding layer 0's halo inputs: the halo feature cache) and of a vertex-cut,
    /// with attention dropout; the gradients summed over the workers (what the all-reduce
    /// trains on) are the CPU workers'. A vertex-cut replica's share differs: a vertex's self
    /// loop enters its primary's gradient whole instead of each replica's share.
    #[test]
    fn gat_split_around_the_replica_syncs_matches_the_cpu_layer() {
        for (run, held) in [(Run::EdgeCut, false), (Run::EdgeCut, true), (Run::VertexCut, false)] {
            let book = book(run);
            // Two heads of 3: 6 transformed columns, narrower than 8 inputs (`x W` pulled), wider
            // than 4 (`x` pulled).
            for in_dim in [4, 8] {
                let cfg = ModelConfig {
                    layers: 1,
                    out_heads: 2,
                    dropout: 0.0,
                    input_dropout: 0.0,
                    attn_dropout: 0.3,
                    ..ModelConfig::gat(in_dim, 3, 3)
                };
                let outcomes = testkit::run(&book, |part, comm| gat_part(run, held, &cfg, part, comm));
                let name = format!("{run:?}{} in {in_dim}", if held { " held" } else { "" });
                for (rank, o) in outcomes.iter().enumerate() {
                    assert_eq!(o.rows[0].len(), o.rows[1].len());
                    for (i, (a, b)) in o.rows[1].iter().zip(&o.rows[0]).enumerate() {
                        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{name} rank {rank} output {i}: {a} vs {b}");
                    }
                }
                let total = |which: usize| {
                    outcomes.iter().fold(vec![0.0f32; outcomes[0].grads[0].len()], |mut acc, o| {
                        acc.iter_mut().zip(&o.grads[which]).for_each(|(a, g)| *a += g);
                        acc
                    })
                };
                let (cpu, device) = (total(0), total(1));
                assert!(cpu.iter().any(|&g| g != 0.0), "{name}: the gradients are not all zero");
                for (i, (a, b)) in device.iter().zip(&cpu).enumerate() {
                    assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{name} gradient {i}: {a} vs {b}");
                }
            }
        }
    }

    fn sum(a: Array2<f32>, b: Array2<f32>) -> Array2<f32> {
        a + b
    }

    fn same_bits(a: &Array2<f32>, b: &Array2<f32>) -> bool {
        a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (*x == 0.0 && *y == 0.0))
    }

    /// On every part of an edge-cut, the overlapped aggregation as the device runs it, its split
    /// calls staged (start the pull, the central rows, finish the pull, the marginal rows;
    /// backward the halo rows of the transpose, start the push on them, the primary rows,
    /// finish the push on the sum) gives the blocking form's rows, and the central rows read no
    /// halo row (they are NaN until the pull lands).
    #[test]
    fn overlapped_halves_around_the_split_calls_equal_the_blocking_aggregation() {
        let book = book(Run::EdgeCut);
        for kind in [ConvKind::Gcn, ConvKind::Sage] {
            testkit::run(&book, |part, comm| {
                let graph = agg_graph_of(part, CutKind::EdgeCut).map_err(|e| e.to_string())?;
                let (n, r) = (graph.num_local(), graph.local_input_rows());
                let plan = part_aggregation(&graph, kind).map_err(|e| e.to_string())?;
                let halves = overlap_halves(&graph, &plan);
                let x0 = Array2::from_shape_fn((n, WIDTH), |(l, c)| {
                    let g = graph.global_ids()[l] as f32;
                    if l < r { 0.3 * g - 0.2 * c as f32 + 0.05 } else { f32::NAN }
                });
                let options = ExchangeOptions { overlap: true, ..ExchangeOptions::default() };
                let mut split = EdgeCutExchange::new(part, comm, options).map_err(|e| e.to_string())?;
                let mut blocking = make_exchange(Run::EdgeCut, part, comm)?;
                let (fwd, bwd) =
                    (Tag::new(0, Direction::Forward, Step::Halo), Tag::new(0, Direction::Backward, Step::Halo));
                let name = format!("{kind:?} part {}", part.part());

                // Through a stager, as the device's link makes the calls (its blocks the stores).
                let mut stager = Stager::new(n);
                split.begin(Pass::eval());
                let mut x = x0.clone();
                stager.start(&mut split, Call::Pull, fwd, &mut x).map_err(|e| e.to_string())?;
                let central = halves.central.apply(&x);
                assert!(central.iter().all(|v| v.is_finite()), "{name}: a central row read a halo row");
                stager.finish(&mut split, Call::Pull, fwd, &mut x).map_err(|e| e.to_string())?;
                let z = sum(central, halves.marginal.apply(&x));
                blocking.begin(Pass::eval());
                let mut want_x = x0.clone();
                blocking.pull_halo(fwd, &mut want_x).map_err(|e| e.to_string())?;
                assert!(same_bits(&z, &plan.csr.apply(&want_x)), "{name}: forward");

                let g = Array2::from_shape_fn((n, WIDTH), |(l, c)| 0.1 * l as f32 - 0.03 * c as f32);
                // The push starts on the halo rows' block and finishes on the whole gradient.
                let mut halo = halves.halo_t.apply(&g);
                stager.start(&mut split, Call::Push, bwd, &mut halo).map_err(|e| e.to_string())?;
                let mut dx = sum(halo, halves.primary_t.apply(&g));
                stager.finish(&mut split, Call::Push, bwd, &mut dx).map_err(|e| e.to_string())?;
                let mut want = plan.csr.transpose().apply(&g);
                blocking.push_halo_grad(bwd, &mut want).map_err(|e| e.to_string())?;
                assert!(same_bits(&dx, &want), "{name}: backward");
                Ok(())
            });
        }
    }

    /// The halves split the rows: each row of the whole lives in exactly one half, entries in
    /// order.
    #[test]
    fn overlap_halves_split_the_rows() {
        let book = book(Run::EdgeCut);
        let graph = agg_graph_of(&book.parts()[1], CutKind::EdgeCut).unwrap();
        let plan = part_aggregation(&graph, ConvKind::Gcn).unwrap();
        let halves = overlap_halves(&graph, &plan);
        let t = plan.csr.transpose();
        let row = |c: &WeightedCsr, v: usize| {
            let range = c.indptr[v] as usize..c.indptr[v + 1] as usize;
            (c.indices[range.clone()].to_vec(), c.vals[range].to_vec())
        };
        for v in 0..graph.num_local() {
            let (central, marginal) = (row(&halves.central, v), row(&halves.marginal, v));
            let whole = row(&plan.csr, v);
            if graph.is_central()[v] {
                assert_eq!((central, marginal.0.len()), (whole, 0), "row {v}");
            } else {
                assert_eq!((marginal, central.0.len()), (whole, 0), "row {v}");
            }
            let (halo, primary) = (row(&halves.halo_t, v), row(&halves.primary_t, v));
            let whole_t = row(&t, v);
            if v >= graph.num_primary() {
                assert_eq!((halo, primary.0.len()), (whole_t, 0), "transposed row {v}");
            } else {
                assert_eq!((primary, halo.0.len()), (whole_t, 0), "transposed row {v}");
            }
        }
        assert!(graph.num_local() > graph.num_primary(), "the part has halo rows");
        assert!(graph.central_rows() > 0 && graph.central_rows() < graph.computed_rows(), "both kinds of rows");
    }
}
