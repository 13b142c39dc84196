//! What a method fixes and accepts ([`Rules`], each method's `RULES` in its folder's
//! `rules.rs`), and what its `[method.<name>]` settings answer ([`MethodSettings`]).
//!
//! Validation, `halo train --help` and the method table of `docs/ARCHITECTURE.md` follow the
//! rules (tested); no other code asks which method it runs.

use super::{ConfigError, LrScaling, MiniBatchConfig, OptimizerKind, TrainConfig};
use gnn_core::LayerOrder;
use graph_partition::book::CutKind;

/// How a method's steps take their vertices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchMode {
    /// Every training vertex on every edge, one step per epoch.
    Full,
    /// Every training vertex, each layer on in-edges sampled anew every epoch (`fanouts`
    /// without `batch-size`).
    SampledEdges,
    /// Sampled mini-batches of training vertices (`batch-size`).
    MiniBatch,
}

impl BatchMode {
    /// The mode as the docs' method table names it.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchMode::Full => "full",
            BatchMode::SampledEdges => "sampled in-edges",
            BatchMode::MiniBatch => "mini-batch",
        }
    }

    /// The mode `minibatch` asks for.
    pub fn of(minibatch: &MiniBatchConfig) -> Self {
        match (minibatch.batch_size, &minibatch.fanouts) {
            (Some(_), _) => BatchMode::MiniBatch,
            (None, Some(_)) => BatchMode::SampledEdges,
            (None, None) => BatchMode::Full,
        }
    }
}

/// What a method fixes and accepts, whatever else the configuration says: its folder's
/// `RULES`, read through [`super::Method::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The cut it trains on.
    pub cut: CutRule,
    /// Whether it sends less than exact distributed training would (the five papers' methods),
    /// so that its modeled time shows what it saves.
    pub cuts_traffic: bool,
    /// The batch modes it trains with.
    pub batches: &'static [BatchMode],
    /// Whether its GPU workers can sum their gradients by NCCL (`backend = "nccl"`): their
    /// sync is the gradient all-reduce alone.
    pub nccl: bool,
    /// Its hidden layers' order where `layer-order` is not set (adaqp's paper puts dropout
    /// before LayerNorm and the activation).
    pub layer_order: LayerOrder,
    /// How its learning rate follows the number of workers where `lr-scaling` is not set, per
    /// optimizer; `None`: it takes no `lr-scaling`.
    pub lr_scaling: Option<LrDefaults>,
}

impl Rules {
    /// Distributed full-batch training on an edge-cut that cuts traffic, its workers' sync the
    /// gradient all-reduce: the rules a method's own update.
    pub const DISTRIBUTED: Rules = Rules {
        cut: CutRule::Fixed(CutKind::EdgeCut),
        cuts_traffic: true,
        batches: &[BatchMode::Full],
        nccl: true,
        layer_order: LayerOrder::DropoutLast,
        lr_scaling: None,
    };
}

/// What a method does with `[distributed] cut`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutRule {
    /// It trains on the configured cut (vanilla).
    Configured,
    /// It always trains on this cut (adaqp's and ecgraph's halo exchanges, adgraph's parts,
    /// cdfgnn's replica sync); another `cut` would be ignored, so it is refused.
    Fixed(CutKind),
    /// It cuts no graph: one process, a replicated graph, or feature columns.
    None,
}

/// A method's learning-rate scaling where `lr-scaling` is not set, under each optimizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LrDefaults {
    pub adam: LrScaling,
    pub sgd: LrScaling,
}

impl LrDefaults {
    /// The scaling under `optimizer`.
    pub fn under(self, optimizer: OptimizerKind) -> LrScaling {
        match optimizer {
            OptimizerKind::Adam => self.adam,
            OptimizerKind::Sgd => self.sgd,
        }
    }
}

/// A method's `[method.<name>]` table, as the rest of the configuration sees it.
pub trait MethodSettings {
    /// Checks the settings, with the rest of `config` where they depend on it; the error names
    /// the key at fault.
    fn check(&self, _config: &TrainConfig) -> Result<(), ConfigError> {
        Ok(())
    }

    /// The input-feature dropout rate of a model with hidden dropout `dropout` when the
    /// configuration names none (`input-dropout`).
    fn input_dropout(&self, dropout: f32) -> f32 {
        dropout
    }
}
