//! What `ecgraph` fixes and accepts: an edge-cut, full batches on every edge or on sampled
//! in-edges (EC-Graph-S).

use crate::config::{BatchMode, Rules};

/// Full batches, or EC-Graph's sampled mode.
pub const RULES: Rules = Rules { batches: &[BatchMode::Full, BatchMode::SampledEdges], ..Rules::DISTRIBUTED };
