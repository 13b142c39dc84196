//! `cdfgnn`: vertex-cut full-batch training (EBV with gamma 0.1 and host-aware masters unless
//! `[distributed]` says otherwise) whose replica sync goes through CDFGNN's adaptive vertex
//! cache (Alg. 2) on the forward partial sums and backward gradients, with linear quantization
//! of the deltas (eq. 22-23), and eps following one of four controllers ([`controller`]).
//!
//! The first layer's forward sync skips the cache when the model has input dropout
//! (`cache-first-layer`, [`uncached_forward_layers`]): the keyed mask moves every first-layer
//! partial every epoch.
//!
//! `[method.cdfgnn] replica-cache = false` with `quant-bits` > 0 quantizes the rows themselves on
//! the exact sync (the paper's "quantization only" ablation; there a master keeps its exact sum
//! while its mirrors hold the decoded one); with neither, the method is vanilla vertex-cut
//! training.

mod controller;
pub(crate) mod rules;
pub(crate) mod settings;

use std::sync::Arc;

use cache_quant::{CodecFactory, IdentityCodec, Knob, LinearQuant, Stream};
use gnn_core::exchange::ReplicaCacheOptions;
use graph_partition::book::CutKind;

use super::{DataPlan, ExchangeStack, MethodDef, Parts};
use crate::config::{FirstLayerCache, TrainConfig};
use controller::EpsController;

/// The `cdfgnn` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "cdfgnn"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        let settings = config.method.cdfgnn.clone();
        let uncached_forward_layers = uncached_forward_layers(config);
        let mut parts = Parts::exact(DataPlan::Cut(CutKind::VertexCut));
        if !settings.replica_cache && settings.quant_bits == 0 {
            return parts;
        }
        parts.exchange = Some(Arc::new(move || {
            let bits = settings.quant_bits;
            let codecs: CodecFactory = Arc::new(move |_: &Stream| match bits {
                0 => Box::new(IdentityCodec),
                b => Box::new(LinearQuant::new(b).expect("validated: quant-bits is 0, 2, 4, 8 or 16")),
            });
            if !settings.replica_cache {
                return ExchangeStack { codecs, controller: None, replica_cache: None };
            }
            let threshold = Knob::new(settings.eps as f32);
            let controller = EpsController::new(&settings, threshold.clone());
            let cache = ReplicaCacheOptions { uncached_forward_layers, ..ReplicaCacheOptions::every_layer(threshold) };
            ExchangeStack { codecs, controller: Some(Box::new(controller)), replica_cache: Some(cache) }
        }));
        parts
    }
}

/// The forward syncs that skip the cache: the first layer's unless it is cached
/// (`cache-first-layer`; `auto`: when the model has no input dropout, whose mask moves every
/// first-layer partial every epoch).
fn uncached_forward_layers(config: &TrainConfig) -> usize {
    let cached = match config.method.cdfgnn.cache_first_layer {
        FirstLayerCache::On => true,
        FirstLayerCache::Off => false,
        FirstLayerCache::Auto => config.input_dropout_rate() == 0.0,
    };
    usize::from(!cached)
}

#[cfg(test)]
mod tests;
