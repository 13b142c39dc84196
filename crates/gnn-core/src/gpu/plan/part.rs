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

/// The aggregation of `kind` on `graph`, any view of a part (or a whole graph). GAT's CSR keeps
/// its leading self loops (attention replaces the values, and nothing is summed across
/// replicas): it is planned for an edge-cut part only, whose view pulls its halo and pushes no
/// aggregate, and refused on a vertex-cut.
pub fn part_aggregation(graph: &AggGraph, kind: ConvKind) -> Result<PartAggregation, PlanError> {
    if kind == ConvKind::Gat {
        if !graph.pulls_halo() || graph.pushes_aggregates() {
            return Err(PlanError::PartGat);
        }
        return Ok(PartAggregation { csr: edge_csr(graph, kind, true), self_coeff: None });
    }
    let computed = graph.computed_rows();
    let self_coeff = (kind == ConvKind::Gcn).then(|| {
        let coeff = &graph.norms().gcn_self;
        coeff.iter().enumerate().map(|(v, &c)| if v < computed { c } else { 0.0 }).collect()
    });
    Ok(PartAggregation { csr: edge_csr(graph, kind, false), self_coeff })
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

    /// GAT keeps its self loops on an edge-cut part and is refused on a vertex-cut one; copies
    /// never add a GCN self term.
    #[test]
    fn gat_plans_edge_cut_parts_only_and_copies_add_no_self_term() {
        let vertex_cut = book(Run::VertexCut);
        let part = &vertex_cut.parts()[0];
        let every_replica = agg_graph_of(part, CutKind::VertexCut).unwrap();
        for graph in [every_replica.clone(), every_replica.with_primaries_computing()] {
            assert_eq!(part_aggregation(&graph, ConvKind::Gat).unwrap_err(), PlanError::PartGat);
        }
        let book = book(Run::EdgeCut);
        let graph = agg_graph_of(&book.parts()[0], CutKind::EdgeCut).unwrap();
        let gat = part_aggregation(&graph, ConvKind::Gat).unwrap();
        let n = graph.num_local();
        assert_eq!((gat.csr.indices.len(), gat.self_coeff), (graph.fwd().num_edges() + n, None));
        assert!((0..n).all(|v| gat.csr.indices[gat.csr.indptr[v] as usize] == v as u32));
        let plan = part_aggregation(&graph, ConvKind::Gcn).unwrap();
        let coeff = plan.self_coeff.unwrap();
        assert!(coeff[..graph.computed_rows()].iter().all(|&c| c > 0.0));
        assert!(coeff[graph.computed_rows()..].iter().all(|&c| c == 0.0));
        assert_eq!(part_aggregation(&graph, ConvKind::Sage).unwrap().self_coeff, None);
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
