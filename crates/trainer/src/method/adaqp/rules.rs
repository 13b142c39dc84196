//! What `adaqp` fixes and accepts: an edge-cut, full batches, dropout first.

use gnn_core::LayerOrder;

use crate::config::Rules;

/// AdaQP's paper puts dropout before LayerNorm and the activation.
pub const RULES: Rules = Rules { layer_order: LayerOrder::DropoutFirst, ..Rules::DISTRIBUTED };
