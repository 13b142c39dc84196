//! `[method.adgraph]`: ADGraph's settings (`--hops`, `--lr-scaling` on the command line). The
//! partitioner and the number of workers come from `[distributed]`, the batch size and fanouts
//! from `[minibatch]`.

use serde::{Deserialize, Serialize};

use super::LrScaling;

/// ADGraph: each worker holds its part extended by the `hops`-hop in-neighbourhood of its
/// training vertices and samples its mini-batches there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct AdgraphSettings {
    /// Hops of in-neighbourhood added around each part's training vertices; at least the
    /// number of layers makes every sample the whole graph's.
    pub hops: usize,
    /// How the learning rate follows the number of workers (the paper scales it linearly).
    pub lr_scaling: LrScaling,
}

impl Default for AdgraphSettings {
    fn default() -> Self {
        Self { hops: 1, lr_scaling: LrScaling::Linear }
    }
}
