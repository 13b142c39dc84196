//! What `cdfgnn` fixes and accepts: a vertex-cut (its replica sync is one), full batches.

use graph_partition::book::CutKind;

use crate::config::{CutRule, Rules};

/// The replica sync is a vertex-cut's.
pub const RULES: Rules = Rules { cut: CutRule::Fixed(CutKind::VertexCut), ..Rules::DISTRIBUTED };
