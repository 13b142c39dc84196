//! What `vanilla` fixes and accepts: the configured cut, full batches on every edge or on
//! sampled in-edges.

use crate::config::{BatchMode, CutRule, Rules};

/// Exact training on the configured cut.
pub const RULES: Rules = Rules {
    cut: CutRule::Configured,
    cuts_traffic: false,
    batches: &[BatchMode::Full, BatchMode::SampledEdges],
    ..Rules::DISTRIBUTED
};
