//! Chung-Lu edges with class homophily and planted communities (see the module docs of
//! [`super`]). The edges a node sources in a round are a pure function of `(seed, round,
//! node)`, so nodes are processed in parallel. Iterating over sources (rather than drawing
//! them) keeps half of every edge's memory accesses sequential.

use rayon::prelude::*;

use super::SynthConfig;
use super::alias::GroupedAlias;
use super::features::{EDGE_TAG, WEIGHT_TAG};
use crate::csr::{Csr, EdgeListOptions};
use crate::rng::{SplitMix64, hash_key};

/// Exponent of the power-law degree distribution `P(d) ~ d^-GAMMA`.
const GAMMA: f64 = 2.5;
/// Draws before a hard-to-meet constraint on an edge's target is relaxed.
const MAX_TRIES: usize = 64;
/// Rounds of topping up edges lost to duplicates and self loops.
const MAX_ROUNDS: usize = 6;
/// Stop topping up once this fraction of the target edge count is reached.
const ENOUGH: f64 = 0.99;

/// The symmetric graph without self loops; see the module docs for the model.
pub(super) fn generate(cfg: &SynthConfig, classes: &[u32], communities: Option<&[u32]>) -> Csr {
    let n = cfg.nodes;
    let target = (n as f64 * cfg.avg_degree / 2.0).round() as usize;
    let weights = node_weights(cfg);
    let total_weight: f64 = weights.iter().sum();
    let sampler = Sampler::new(cfg, &weights, classes, communities);
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(target + target / 8);
    let mut graph = Csr::from_edges(n, &[], EdgeListOptions::default()).expect("no edges");
    let mut unique = 0usize;
    let mut draws = target as f64;
    for round in 0..MAX_ROUNDS as u64 {
        // Node u sources weight-proportional many edges: its expected degree is ~ 2 * that.
        let scale = draws / total_weight;
        let start = edges.len();
        edges.par_extend(
            (0..n as u32).into_par_iter().flat_map_iter(|u| sampler.edges_from(u, weights[u as usize] * scale, round)),
        );
        let drawn = edges.len() - start;
        graph = Csr::from_edges(n, &edges, EdgeListOptions::default()).expect("sampled ids are below nodes");
        let before = unique;
        unique = graph.num_edges() / 2;
        if unique as f64 >= target as f64 * ENOUGH || unique == before {
            break;
        }
        // New draws yield fewer new edges as the graph fills up: scale by the last round's yield.
        let marginal_yield = (unique - before) as f64 / drawn as f64;
        draws = ((target - unique) as f64 / marginal_yield).min(2.0 * target as f64 + 16.0);
    }
    graph
}

/// Pareto weights (expected degrees up to a constant), capped at the structural cut-off.
fn node_weights(cfg: &SynthConfig) -> Vec<f64> {
    let exponent = -1.0 / (GAMMA - 1.0);
    let mut weights: Vec<f64> = (0..cfg.nodes as u64)
        .into_par_iter()
        .map(|v| {
            let u = 1.0 - (hash_key(&[cfg.seed, WEIGHT_TAG, v]) >> 11) as f64 / (1u64 << 53) as f64;
            u.powf(exponent)
        })
        .collect();
    if cfg.avg_degree > 0.0 {
        let cap_degree = (cfg.nodes as f64 * cfg.avg_degree).sqrt().clamp(cfg.avg_degree, (cfg.nodes - 1) as f64);
        // Capping lowers the mean, which raises everyone's expected degree: repeat a few times.
        for _ in 0..4 {
            let mean = weights.iter().sum::<f64>() / weights.len() as f64;
            let cap = cap_degree * mean / cfg.avg_degree;
            weights.iter_mut().for_each(|w| *w = w.min(cap));
        }
    }
    weights
}

/// Alias tables for every way an edge's target may be constrained.
struct Sampler {
    seed: u64,
    homophily: f64,
    intra_community: f64,
    /// `pair_key(community, class)` of every node: one lookup gives both.
    attrs: Vec<u64>,
    has_communities: bool,
    global: GroupedAlias,
    by_class: GroupedAlias,
    /// By community, and by (community, class); only with communities.
    by_community: Option<(GroupedAlias, GroupedAlias)>,
}

fn pair_key(community: u32, class: u32) -> u64 {
    ((community as u64) << 32) | class as u64
}

impl Sampler {
    fn new(cfg: &SynthConfig, weights: &[f64], classes: &[u32], communities: Option<&[u32]>) -> Self {
        let attrs: Vec<u64> =
            (0..classes.len()).map(|v| pair_key(communities.map_or(0, |c| c[v]), classes[v])).collect();
        let by_community = communities
            .map(|_| (GroupedAlias::new(weights, |v| attrs[v] >> 32), GroupedAlias::new(weights, |v| attrs[v])));
        Self {
            seed: cfg.seed,
            homophily: if cfg.classes > 1 { cfg.homophily } else { 1.0 },
            intra_community: cfg.intra_community,
            has_communities: communities.is_some(),
            global: GroupedAlias::new(weights, |_| 0),
            by_class: GroupedAlias::new(weights, |v| attrs[v] & u32::MAX as u64),
            by_community,
            attrs,
        }
    }

    /// The edges `u` sources in `round`: `mean` of them in expectation (stochastic rounding),
    /// each to a target drawn by weight among the allowed nodes.
    fn edges_from(&self, u: u32, mean: f64, round: u64) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut rng = SplitMix64::new(hash_key(&[self.seed, EDGE_TAG, round, u as u64]));
        let count = mean as usize + usize::from(rng.next_f64() < mean.fract());
        let key_u = self.attrs[u as usize];
        (0..count).map(move |_| (u, self.target(key_u, &mut rng)))
    }

    fn target(&self, key_u: u64, rng: &mut SplitMix64) -> u32 {
        let all = self.global.all();
        let (comm_u, class_u) = ((key_u >> 32) as u32, key_u as u32);
        let same_class = rng.next_f64() < self.homophily;
        let intra = !self.has_communities || rng.next_f64() < self.intra_community;
        // Narrow to a group when that alone satisfies a constraint; check the rest by rejection.
        let (table, slots) = match (&self.by_community, intra, same_class) {
            (Some((_, by_pair)), true, true) => (by_pair, by_pair.group(key_u)),
            (Some((by_comm, _)), true, false) => (by_comm, by_comm.group(comm_u as u64)),
            (_, _, true) => (&self.by_class, self.by_class.group(class_u as u64)),
            _ => (&self.global, Some(all)),
        };
        let slots = slots.expect("the source's own group is non-empty");
        let allowed = |v: u32| {
            let key_v = self.attrs[v as usize];
            ((key_v as u32 == class_u) == same_class) && (((key_v >> 32) as u32 == comm_u) == intra)
        };
        let mut v = table.sample(&slots, rng);
        for _ in 1..MAX_TRIES {
            if allowed(v) {
                break;
            }
            v = table.sample(&slots, rng);
        }
        v
    }
}
