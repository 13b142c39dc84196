//! `adaqp`: distributed full-batch edge-cut training whose halo rows and halo gradients travel
//! through AdaQP's stochastic integer codec (`cache_quant::codec::stochastic`), at a uniform
//! width or at widths the bit-width assignment (problem (12), [`controller`]) chooses per group
//! of rows every `assign-period` epochs. `[distributed] overlap` aggregates the central rows
//! while the marginal rows' messages are in flight.

mod controller;
mod fit;
pub(crate) mod rules;
pub(crate) mod settings;
mod weights;

use std::sync::Arc;

use cache_quant::{BitTable, Knob, QuantProbe, StochasticCodec};
use graph_partition::book::CutKind;

use super::{DataPlan, ExchangeStack, MethodDef, Parts};
use crate::config::TrainConfig;
use controller::AdaqpController;

/// The `adaqp` method.
pub(crate) struct Def;

impl MethodDef for Def {
    fn name(&self) -> &str {
        "adaqp"
    }

    fn parts(&self, config: &TrainConfig) -> Parts {
        let mut parts = Parts::exact(DataPlan::Cut(CutKind::EdgeCut));
        let (settings, seed, kind) = (config.method.adaqp.clone(), config.seed, config.model);
        parts.exchange = Some(Arc::new(move || {
            let table = BitTable::uniform(settings.bits.initial()).expect("Bits::initial is one of the codec's widths");
            let bits = Knob::new(Arc::new(table));
            let probe = QuantProbe::default();
            ExchangeStack {
                codecs: StochasticCodec::factory(seed, bits.clone(), probe.clone()),
                controller: Some(Box::new(AdaqpController::new(settings.clone(), seed, kind, bits, probe))),
                replica_cache: None,
            }
        }));
        parts
    }
}
