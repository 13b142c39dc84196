//! The inputs of problem (12) a worker derives: each received row's aggregation weight `beta`
//! (from the local graph), and each directed pair's time model (from the topology's links, or
//! from fits measured under MPI).

use std::collections::HashMap;

use cache_quant::assign::TimeModel;
use cache_quant::{Direction, Route};
use comm_hierarchy::Topology;
use comm_hierarchy::topology::LinkClass;
use gnn_core::{AggGraph, ConvKind};

use super::fit::{FitError, MeasuredFits};
use crate::config::Beta;

/// Aggregation weights of received rows on one worker.
pub(super) struct RowWeights<'a> {
    graph: &'a AggGraph,
    local_of: HashMap<u32, usize>,
    kind: ConvKind,
    beta: Beta,
}

impl<'a> RowWeights<'a> {
    pub(super) fn new(graph: &'a AggGraph, kind: ConvKind, beta: Beta) -> Self {
        let local_of = graph.global_ids().iter().enumerate().map(|(l, &g)| (g, l)).collect();
        Self { graph, local_of, kind, beta }
    }

    /// `beta` of the row of vertex `global` received on `route`.
    ///
    /// A halo row (forward, to the copies) is read by every local out-neighbour `v` of `u`
    /// with coefficient `alpha_uv`: GCN `(d_out(u) + 1)^-1/2 (d_in(v) + 1)^-1/2` (global
    /// degrees, self loops counted as in the layer), GraphSAGE and GAT `1 / d_in(v)` (GAT's
    /// attention is not known in advance: its mean is taken). A halo gradient (backward, to the
    /// primary) is added once into the primary's gradient: `alpha = 1`.
    pub(super) fn beta(&self, route: Route, global: u32) -> f64 {
        let Some(&u) = self.local_of.get(&global).filter(|_| route == Route::ToCopies) else {
            return 1.0;
        };
        let (din, dout) = (self.graph.in_degree(), self.graph.out_degree());
        let alphas = self.graph.bwd().neighbors(u).iter().map(|&v| {
            let d_in = f64::from(din[v as usize]);
            match self.kind {
                ConvKind::Gcn => ((f64::from(dout[u]) + 1.0) * (d_in + 1.0)).sqrt().recip(),
                ConvKind::Sage | ConvKind::Gat => {
                    if d_in > 0.0 {
                        d_in.recip()
                    } else {
                        0.0
                    }
                }
            }
        });
        match self.beta {
            Beta::SumOfSquares => alphas.map(|a| a * a).sum(),
            Beta::SquareOfSum => alphas.sum::<f64>().powi(2),
        }
    }
}

/// The route a direction's halo exchange moves rows along.
pub(super) fn route_of(dir: Direction) -> Route {
    match dir {
        Direction::Forward => Route::ToCopies,
        Direction::Backward => Route::ToPrimary,
    }
}

/// `t = theta * MB + gamma` of each pair in `pairs` (src, dst). From the topology's links as the
/// cost model charges them: `gamma` is the link's latency, `theta` its seconds per MB times the
/// number of messages of the same ring round that share the pair's host uplink or downlink. With
/// `measured` fits (each timed on an idle link), the pair's fitted `gamma` and its fitted `theta`
/// times the same sharing.
pub(super) fn time_models(
    topology: &Topology,
    pairs: &[(usize, usize)],
    measured: Option<&MeasuredFits>,
) -> Result<Vec<TimeModel>, FitError> {
    let p = topology.workers();
    let round = |&(s, d): &(usize, usize)| (d + p - s) % p;
    let crosses = |&(s, d): &(usize, usize)| topology.link_class(s, d) == Some(LinkClass::Inter);
    pairs
        .iter()
        .map(|pair @ &(src, dst)| {
            let Some(link) = topology.link(src, dst) else {
                return Ok(TimeModel { theta_s_per_mb: 0.0, gamma_s: 0.0 });
            };
            let alone = match measured {
                Some(fits) => fits.pair(src, dst)?,
                None => TimeModel { theta_s_per_mb: 1e6 / link.bandwidth_bytes_per_s, gamma_s: link.latency_s },
            };
            let sharing = if crosses(pair) {
                let same_round = pairs.iter().filter(|q| round(q) == round(pair) && crosses(q));
                let (mut up, mut down) = (0usize, 0usize);
                for &(s, d) in same_round {
                    up += usize::from(topology.host_of(s) == topology.host_of(src));
                    down += usize::from(topology.host_of(d) == topology.host_of(dst));
                }
                up.max(down).max(1)
            } else {
                1
            };
            Ok(TimeModel { theta_s_per_mb: sharing as f64 * alone.theta_s_per_mb, gamma_s: alone.gamma_s })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use comm_hierarchy::preset::Preset;

    use super::*;

    #[test]
    fn pairs_crossing_hosts_in_one_round_share_the_uplink() {
        let topology = Topology::for_workers(4, 2, Preset::Adaqp.links()).unwrap();
        // Round 2 sends every rank across hosts: two messages leave each host.
        let models = |pairs: &[(usize, usize)]| time_models(&topology, pairs, None).unwrap();
        let crossing = models(&[(0, 2), (1, 3), (2, 0), (3, 1)]);
        let alone = models(&[(0, 2)]);
        assert!((crossing[0].theta_s_per_mb - 2.0 * alone[0].theta_s_per_mb).abs() < 1e-15);
        assert!((alone[0].theta_s_per_mb - 1e6 / 12.5e9).abs() < 1e-15);
        // Inside a host: PCIe, not shared.
        let inside = models(&[(0, 1), (2, 3)]);
        assert!((inside[0].theta_s_per_mb - 1e6 / 22.7e9).abs() < 1e-12);
        assert!(inside[0].gamma_s > 0.0 && inside[0].gamma_s < crossing[0].gamma_s + 1.0);
    }

    #[test]
    fn measured_fits_replace_the_links_and_share_the_uplink_alike() {
        let topology = Topology::for_workers(4, 2, Preset::Adaqp.links()).unwrap();
        let entry = |s: usize, d: usize| {
            format!(
                r#"{{"src": {s}, "dst": {d}, "link": "inter", "fit": {{"theta_s_per_mb": {}, "gamma_s": 3e-5, "r_squared": 1.0}}, "samples": 21}}"#,
                0.1 * (s + 1) as f64
            )
        };
        let text = format!(r#"{{"link_fits": [{}, {}]}}"#, entry(0, 2), entry(1, 3));
        let fits = MeasuredFits::parse(std::path::Path::new("fit.json"), text.as_bytes()).unwrap();
        let models = time_models(&topology, &[(0, 2), (1, 3)], Some(&fits)).unwrap();
        // Both cross hosts in round 2: two messages share host 0's uplink.
        assert_eq!(models[0], TimeModel { theta_s_per_mb: 2.0 * 0.1, gamma_s: 3e-5 });
        assert_eq!(models[1], TimeModel { theta_s_per_mb: 2.0 * 0.2, gamma_s: 3e-5 });
        let err = time_models(&topology, &[(2, 0)], Some(&fits)).unwrap_err().to_string();
        assert!(err.contains("no fit for the pair 2 -> 0"), "{err}");
    }

    #[test]
    fn gcn_and_sage_weights_follow_the_receivers() {
        // 0 <- 2 and 1 <- 2 on a worker owning 0 and 1, with halo vertex 2 (global 7).
        let csr = graph_partition::Csr::try_new(3, 3, vec![0, 1, 2, 2], vec![2, 2]).unwrap();
        let graph = AggGraph::new(csr, 2, vec![5, 6, 7], vec![3.0, 1.0, 0.0], vec![0.0, 0.0, 4.0]).unwrap();
        let sage = RowWeights::new(&graph, ConvKind::Sage, Beta::SumOfSquares);
        assert!((sage.beta(Route::ToCopies, 7) - (1.0 / 9.0 + 1.0)).abs() < 1e-12);
        let sage_code = RowWeights::new(&graph, ConvKind::Sage, Beta::SquareOfSum);
        assert!((sage_code.beta(Route::ToCopies, 7) - (4.0f64 / 3.0).powi(2)).abs() < 1e-12);
        let gcn = RowWeights::new(&graph, ConvKind::Gcn, Beta::SumOfSquares);
        assert!((gcn.beta(Route::ToCopies, 7) - (1.0 / (5.0 * 4.0) + 1.0 / (5.0 * 2.0))).abs() < 1e-12);
        assert_eq!(gcn.beta(Route::ToPrimary, 7), 1.0);
    }
}
