//! What `data-parallel` fixes and accepts: a replicated graph, sampled mini-batches, the learning
//! rate as given unless `lr-scaling` says otherwise.

use crate::config::{BatchMode, CutRule, LrDefaults, LrScaling, Rules};

/// Every worker holds the whole graph and trains on mini-batches.
pub const RULES: Rules = Rules {
    cut: CutRule::None,
    cuts_traffic: false,
    batches: &[BatchMode::MiniBatch],
    lr_scaling: Some(LrDefaults { adam: LrScaling::None, sgd: LrScaling::None }),
    ..Rules::DISTRIBUTED
};
