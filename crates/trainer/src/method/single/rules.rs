//! What `single` fixes and accepts: one process, every batch mode, nothing to sum.

use crate::config::{BatchMode, CutRule, Rules};

/// One process: no cut, every batch mode, and no gradients to sum.
pub const RULES: Rules = Rules {
    cut: CutRule::None,
    cuts_traffic: false,
    batches: &[BatchMode::Full, BatchMode::SampledEdges, BatchMode::MiniBatch],
    nccl: false,
    ..Rules::DISTRIBUTED
};
