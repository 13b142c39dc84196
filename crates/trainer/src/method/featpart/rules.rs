//! What `featpart` fixes and accepts: feature columns, sampled mini-batches, its sums on the
//! host.

use crate::config::{BatchMode, CutRule, Rules};

/// Its hooks also sum its own columns' bias gradients and its trials on the host, so NCCL
/// cannot sum its workers' gradients alone.
pub const RULES: Rules =
    Rules { cut: CutRule::None, batches: &[BatchMode::MiniBatch], nccl: false, ..Rules::DISTRIBUTED };
