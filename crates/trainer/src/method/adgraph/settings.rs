//! `[method.adgraph]`: ADGraph's settings. The partitioner and the number of workers come from
//! `[distributed]`; the batch size, fanouts and learning-rate scaling from `[minibatch]` (adgraph
//! scales the rate linearly unless `lr-scaling` says otherwise: [`crate::config::Rules::lr_scaling`]).

use serde::{Deserialize, Serialize};

use crate::config::MethodSettings;

/// ADGraph: each worker holds its part extended by the `hops`-hop in-neighbourhood of its
/// training vertices and samples its mini-batches there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct AdgraphSettings {
    /// Hops of in-neighbourhood each part keeps around its training vertices; at least the
    /// number of layers makes every sampled batch the whole graph's.
    #[cfg_attr(feature = "clap", arg(long, value_name = "L"))]
    pub hops: usize,
}

impl Default for AdgraphSettings {
    fn default() -> Self {
        Self { hops: 1 }
    }
}

impl MethodSettings for AdgraphSettings {}
