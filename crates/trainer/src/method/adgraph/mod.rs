//! `adgraph` (ADGraph, seeds/002): the graph is partitioned (METIS or random, `[distributed]
//! partitioner`) into one part per worker; each part is extended by the `hops`-hop
//! in-neighbourhood of its training vertices and shipped to its worker with those vertices'
//! features; every worker samples multi-layer mini-batches of its own training vertices inside
//! its extended part, and workers exchange gradients only (all-reduced every step).
//! `[minibatch] lr-scaling` (linear by default for adgraph, as in the paper) scales the learning
//! rate with the number of workers.

pub(crate) mod rules;
pub(crate) mod runner;
pub(crate) mod settings;

use super::{MethodDef, Parts};
use crate::config::TrainConfig;

/// The `adgraph` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "adgraph"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        Parts::own_sampled(config, runner::RUNNER)
    }
}
